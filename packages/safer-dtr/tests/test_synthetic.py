import numpy as np
import pytest
import safer_dtr as S
from safer_dtr.synthetic import MIMICTABLE_COLUMNS, VITALS_COLUMNS


@pytest.fixture(scope="module")
def big():
    return S.SyntheticSepsisCohort(n_stays=5000, seed=11)


def test_columns_and_order():
    gen = S.SyntheticSepsisCohort(n_stays=20, seed=0)
    assert tuple(gen.table) == MIMICTABLE_COLUMNS
    assert len(MIMICTABLE_COLUMNS) == 59 and len(VITALS_COLUMNS) == 45
    assert set(VITALS_COLUMNS) <= set(MIMICTABLE_COLUMNS)


def test_reproducible_by_seed():
    a = S.SyntheticSepsisCohort(n_stays=30, seed=5)
    b = S.SyntheticSepsisCohort(n_stays=30, seed=5)
    c = S.SyntheticSepsisCohort(n_stays=30, seed=6)
    for k in a.table:
        np.testing.assert_array_equal(a.table[k], b.table[k])
    assert a.notes == b.notes
    assert not np.array_equal(a.table["HR"][:50], c.table["HR"][:50])


def test_acceptance_checks(big):
    t = big.table
    assert abs(big.died.mean() - 0.12) <= 0.02
    target = t["bloc"] == 8
    class0 = ((t["max_dose_vaso"][target] == 0) & (t["input_4hourly"][target] == 0)).mean()
    assert 0.45 <= class0 <= 0.65
    assert 0.04 <= (t["max_dose_vaso"] > 0).mean() <= 0.10
    assert 0.40 <= (t["input_4hourly"] > 0).mean() <= 0.60
    dev = big.deviation
    assert dev[big.died == 1].mean() > dev[big.died == 0].mean()


def test_value_ranges_and_time_grid(big):
    t = big.table
    ranges = {"MeanBP": (30, 150), "HR": (30, 200), "RR": (5, 50), "SpO2": (70, 100),
              "Temp_C": (33, 42), "FiO2_1": (0.21, 1), "GCS": (3, 15), "Arterial_lactate": (0.3, 30),
              "SIRS": (0, 4), "SOFA": (0, 24), "max_dose_vaso": (0, 1)}  # fmt: skip
    for col, (lo, hi) in ranges.items():
        assert t[col].min() >= lo and t[col].max() <= hi, col
    for col in ("gender", "re_admission", "mechvent", "died_in_hosp"):
        assert set(np.unique(t[col])) <= {0.0, 1.0}
    age_years = t["age"] / 365.25
    assert age_years.min() >= 18 and age_years.max() <= 91
    ids = t["icustayid"]
    same = ids[1:] == ids[:-1]
    assert np.all(np.diff(t["charttime"])[same] == 14_400)
    assert np.all(np.diff(t["bloc"])[same] == 1)
    lengths = np.bincount(ids.astype(int))[1:]
    assert lengths.min() >= 8 and lengths.max() <= 20
    np.testing.assert_allclose(t["cumulated_balance"], t["input_total"] - t["output_total"])


def test_oracle_of_observed_actions_equals_stored_death_probability():
    gen = S.SyntheticSepsisCohort(n_stays=200, seed=2)
    stays = np.arange(200)
    f, v = gen.observed_levels(7)
    np.testing.assert_allclose(
        gen.oracle_mortality(stays, 7, f, v), gen.death_prob, rtol=0, atol=1e-12
    )
    fs, vs = gen.optimal_levels(7)
    assert gen.oracle_mortality(stays, 7, fs, vs).mean() <= gen.death_prob.mean()
    with pytest.raises(ValueError, match=r"0..4"):
        gen.oracle_mortality(stays[:2], 7, np.array([5, 0]), np.array([0, 0]))


def test_notes_carry_note_only_factors_and_ablation_removes_them():
    gen = S.SyntheticSepsisCohort(n_stays=400, seed=1)
    texts = " ".join(t for _, _, t in gen.notes)
    assert "fluid restricted" in texts or "avoid aggressive fluids" in texts
    ablated = S.SyntheticSepsisCohort(n_stays=400, seed=1, note_only_prob=0.0)
    texts = " ".join(t for _, _, t in ablated.notes)
    assert "fluid restricted" not in texts and "DNR/DNI" not in texts
    firsts = {}
    for stay, time, _ in gen.notes:
        firsts.setdefault(stay, time)
    t0 = {
        int(s): c
        for s, c, b in zip(gen.table["icustayid"], gen.table["charttime"], gen.table["bloc"])
        if b == 1
    }
    assert all(firsts[s] == t0[s] for s in firsts)  # a note is always written at bloc 1


def test_bad_parameters():
    with pytest.raises(ValueError, match="preset"):
        S.SyntheticSepsisCohort(n_stays=5, preset="eicu")
    with pytest.raises(ValueError, match="mortality"):
        S.SyntheticSepsisCohort(n_stays=5, mortality=1.5)
    with pytest.raises(ValueError, match="n_stays"):
        S.SyntheticSepsisCohort(n_stays=0)
