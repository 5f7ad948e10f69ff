import pickle

import numpy as np
import pytest
import safer_dtr as S
from safer_dtr.data import REQUIRED_COLUMNS, build_sequences, write_notes_csv, write_table_csv


def test_round_trip_files_equal_in_memory(tmp_path):
    gen = S.SyntheticSepsisCohort(n_stays=120, seed=4)
    paths = gen.write(tmp_path)
    assert {p.name for p in paths.values()} == {"mimictable.csv", "notes.csv", "oracle.npz"}
    loaded = S.AIClinicianCohort(paths["table"], paths["notes"], note_alignment="past")
    memory = gen.sequences(note_alignment="past")
    np.testing.assert_array_equal(loaded.stay_ids, memory.stay_ids)
    for col in REQUIRED_COLUMNS:
        np.testing.assert_allclose(loaded.values[col], memory.values[col], rtol=1e-15, err_msg=col)
    assert loaded.note_text == memory.note_text
    enc = S.HashingEncoder(32)
    a = S.prepare_cohort(loaded, enc, split_seed=1)
    b = S.prepare_cohort(memory, enc, split_seed=1)
    for field in ("vitals", "prev_meds", "notes", "demo", "y", "died", "prev_class"):
        np.testing.assert_array_equal(
            getattr(a.tensors, field), getattr(b.tensors, field), err_msg=field
        )


def _tiny_table(n_stays=3, length=4):
    gen = S.SyntheticSepsisCohort(n_stays=n_stays, seed=0)
    keep = gen.table["bloc"] <= length
    return {k: v[keep].copy() for k, v in gen.table.items()}


def test_note_alignment_nearest_ties_and_past():
    table = _tiny_table(1, 4)
    t = table["charttime"]
    notes = [(1, int(t[0]), "first"), (1, int(t[1] + 7200), "mid-a"), (1, int(t[2] - 7200), "mid-b"),
             (1, int(t[2] + 100), "late")]  # fmt: skip
    seq = build_sequences(table, notes, seq_len=4, note_alignment="nearest")
    # mid-a and mid-b are written at the same time, 2 h after row 1 and 2 h before row 2
    assert seq.note_text[0][0] == "first"
    assert seq.note_text[0][1] == "mid-a; mid-b"  # both 2 h away: tie joined with "; "
    assert seq.note_text[0][2] == "late"
    past = build_sequences(table, notes, seq_len=4, note_alignment="past")
    assert past.note_text[0] == ["first", "first", "mid-a; mid-b"]  # same-time notes joined


def test_short_stays_dropped_and_error_when_none_left():
    table = _tiny_table(3, 5)
    seq = build_sequences(table, None, seq_len=5)
    assert len(seq) == 3 and seq.dropped_short == 0 and seq.note_text[0] == [""] * 4
    with pytest.raises(ValueError, match="no stay left with at least 6 blocs"):
        build_sequences(table, None, seq_len=6)
    seq = build_sequences(table, [(1, int(table["charttime"][0]), "x")], seq_len=5)
    assert len(seq) == 1 and seq.dropped_no_notes == 2


def test_loader_errors_name_the_problem(tmp_path):
    table = _tiny_table()
    path = tmp_path / "t.csv"
    missing = {k: v for k, v in table.items() if k not in ("HR", "SOFA")}
    write_table_csv(path, missing)
    with pytest.raises(ValueError, match=r"lacks 2 required column.*HR, SOFA"):
        S.read_table_csv(path, REQUIRED_COLUMNS)
    bad = {k: v.copy() for k, v in table.items()}
    bad["HR"][2] = np.nan
    write_table_csv(path, bad)
    with pytest.raises(ValueError, match=r"row 4, column 'HR'.*not a finite"):
        S.read_table_csv(path)
    text = path.read_text().splitlines()
    text[3] = text[3].replace("nan", "abc")
    path.write_text("\n".join(text))
    with pytest.raises(ValueError, match=r"row 4, column 'HR': 'abc' is not a number"):
        S.read_table_csv(path)
    path.write_text("\n".join([*text[:2], text[2][:20]]))
    with pytest.raises(ValueError, match=r"row 3.*truncated"):
        S.read_table_csv(path)
    path.write_text("")
    with pytest.raises(ValueError, match="empty"):
        S.read_table_csv(path)
    path.write_text(text[0] + "\n")
    with pytest.raises(ValueError, match="no data rows"):
        S.read_table_csv(path)
    path.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="pickle"):
        S.read_table_csv(path)


def test_validation_errors():
    table = _tiny_table()
    dup = {k: np.r_[v, v[:1]] for k, v in table.items()}
    with pytest.raises(ValueError, match=r"duplicate \(icustayid, bloc\) = \(1, 1\)"):
        build_sequences(dup, None, seq_len=2)
    bad = {k: v.copy() for k, v in table.items()}
    bad["gender"][0] = 0.5
    with pytest.raises(ValueError, match=r"'gender'.*not 0 or 1"):
        build_sequences(bad, None, seq_len=2)
    bad = {k: v.copy() for k, v in table.items()}
    bad["input_4hourly"][1] = -5
    with pytest.raises(ValueError, match="negative dose"):
        build_sequences(bad, None, seq_len=2)
    bad = {k: v.copy() for k, v in table.items()}
    bad["bloc"][1] = 1.5
    with pytest.raises(ValueError, match=r"'bloc'.*not an integer"):
        build_sequences(bad, None, seq_len=2)
    with pytest.raises(ValueError, match="note_alignment"):
        build_sequences(table, None, seq_len=2, note_alignment="future")


def test_notes_csv_errors(tmp_path):
    path = tmp_path / "n.csv"
    write_notes_csv(path, [(1, 100, "hello, world"), (2, 200, 'with "quotes"')])
    assert S.read_notes_csv(path)[1] == (2, 200, 'with "quotes"')
    path.write_text("icustayid,charttime\n1,2\n")
    with pytest.raises(ValueError, match=r"lacks column.*text"):
        S.read_notes_csv(path)
    path.write_text("icustayid,charttime,text\n1,2.5,x\n")
    with pytest.raises(ValueError, match=r"row 2, column 'charttime'.*not an integer"):
        S.read_notes_csv(path)


def test_preprocessor_fit_on_train_and_state_round_trip(small_cohort):
    _, seq, prepared = small_cohort
    pre = prepared.preprocessor
    again = S.Preprocessor.from_state_dict(pre.state_dict())
    a, b = pre.transform(seq), again.transform(seq)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert a["vitals"].shape == (len(seq), 7, 45) and a["prev_meds"].shape == (len(seq), 7, 4)
    assert a["y"].min() >= 0 and a["y"].max() <= 24
    train = prepared.split["train"]
    hr = seq.values["HR"][train]  # statistics over all seq_len rows of the training stays only
    assert pre.state["mean"]["HR"] == pytest.approx(hr.mean())
    assert pre.state["sd"]["HR"] == pytest.approx(hr.std(ddof=1))
    col = list(S.synthetic.VITALS_COLUMNS).index("HR")
    np.testing.assert_allclose(
        a["vitals"][:, :, col],
        (seq.values["HR"][:, :-1] - hr.mean()) / hr.std(ddof=1),
        rtol=1e-5,
        atol=1e-5,
    )
    with pytest.raises(RuntimeError, match="not fitted"):
        S.Preprocessor().transform(seq)
    with pytest.raises(ValueError, match="action_layout"):
        S.Preprocessor("other")


def test_action_layouts():
    assert S.action_class(np.array([2]), np.array([3]), "safer")[0] == 13
    assert S.action_class(np.array([2]), np.array([3]), "aiclinician")[0] == 17


def test_knn_imputation_fills_outliers(small_cohort):
    _, seq, prepared = small_cohort
    values = {k: v.copy() for k, v in seq.values.items()}
    values["Creatinine"][0, 0] = 1e6  # an IQR x 5 outlier -> NaN -> kNN-imputed
    odd = S.Sequences(seq.stay_ids, values, seq.note_text, seq.died, seq.seq_len)
    out = prepared.preprocessor.transform(odd)
    assert np.isfinite(out["vitals"]).all()
    col = list(S.synthetic.VITALS_COLUMNS).index("Creatinine")
    assert abs(out["vitals"][0, 0, col]) < 5


def test_stratified_split(small_cohort):
    _, seq, _ = small_cohort
    split = S.stratified_split(seq.died, 0)
    all_idx = np.concatenate(list(split.values()))
    assert len(np.unique(all_idx)) == len(seq) == len(all_idx)
    assert abs(len(split["train"]) / len(seq) - 0.8) < 0.02
    rate = seq.died.mean()
    assert abs(seq.died[split["train"]].mean() - rate) < 0.02
    with pytest.raises(ValueError, match="too few"):
        S.stratified_split(np.array([0, 0, 1]), 0)
