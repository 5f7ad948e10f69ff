import re
import shutil
import warnings

import pytest
import torch
from bpr_topk import (
    AmbiguousTargetError,
    load_topk_folder,
    make_hotspots,
    make_panel,
    make_synthetic7,
    write_topk_folder,
)


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_topk_folder(path, **kw)


@pytest.mark.dataset
def test_cook_county_shapes_and_lag_identity(cook_dir):
    d = _load(cook_dir)
    assert d.train.X.shape[:2] == (4, 1328)
    assert d.valid.X.shape[:2] == (1, 1328) and d.test.X.shape[:2] == (2, 1328)
    assert "timestep.1" not in d.feature_names and len(d.feature_names) == 13
    assert d.train.y.dtype == torch.int64
    raw = _load(cook_dir, standardize=False)
    lag1 = raw.feature_names.index("prev_deaths_01back")
    hist, _ = raw.y_history()
    X_all = torch.cat([raw.train.X, raw.valid.X, raw.test.X])
    assert torch.equal(X_all[1:, :, lag1], hist[:-1])  # y_{t-1} = prev_deaths_01back
    assert d.train.time[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
    kept = _load(cook_dir, drop_duplicate_columns=False, standardize=False)
    assert "timestep.1" in kept.feature_names


@pytest.mark.dataset
def test_cook_county_zero_padded_lags_are_unavailable(cook_dir):
    """The lag columns of the first train steps reach back before the first observed step (zero
    padding): those entries are unavailable, so the first train step's avg over 5 is its one
    observed lag; the valid and test steps never reach the padding."""
    from bpr_topk import heuristic_scores
    from bpr_topk.baselines import _padded_sources, lagged_counts

    raw = _load(cook_dir, standardize=False)
    assert _padded_sources(raw) == {-5, -4, -3, -2}  # step -1 (the first 01back) is observed
    lag1 = raw.train.X[0, :, raw.feature_names.index("prev_deaths_01back")]
    assert torch.equal(heuristic_scores(raw, "train", "avg", 5)[0], lag1)
    for split in ("valid", "test"):
        assert all(bool(lagged_counts(raw, split, lag)[1].all()) for lag in range(1, 6))


def test_panel_round_trip(tmp_path):
    p = make_panel(36, seed=1)
    zeros = float((torch.cat([p.train.y, p.valid.y, p.test.y]) == 0).float().mean())
    assert 0.3 <= zeros <= 0.7
    write_topk_folder(p, tmp_path)
    d = _load(tmp_path, standardize=False, drop_duplicate_columns=False)
    for s in ("train", "valid", "test"):
        assert torch.equal(d.split(s).y, p.split(s).y)
        assert torch.allclose(d.split(s).X, p.split(s).X)
    assert d.site_ids == p.site_ids
    assert "timestep.1" not in _load(tmp_path).feature_names


def test_synthetic7_round_trip_without_features(tmp_path):
    s = make_synthetic7(0, 20, 5, 5)
    assert s.train.y.shape == (20, 7) and s.num_features == 0
    write_topk_folder(s, tmp_path)
    d = _load(tmp_path)
    assert torch.equal(d.test.y, s.test.y) and d.num_features == 0


@pytest.fixture
def folder(tmp_path):
    write_topk_folder(make_panel(16, seed=0), tmp_path)
    return tmp_path


def _edit(path, fn):
    lines = path.read_text().splitlines()
    path.write_text("\n".join(fn(lines)) + "\n")


def test_missing_file(folder):
    (folder / "valid_y.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing valid_y\.csv"):
        load_topk_folder(folder)


def test_mismatched_keys(folder):
    _edit(folder / "test_y.csv", lambda ls: [ls[0], "99999," + ls[1].split(",", 1)[1], *ls[2:]])
    with pytest.raises(ValueError, match="different \\(site, time\\) keys"):
        load_topk_folder(folder)


def test_duplicate_key(folder):
    for name in ("train_x.csv", "train_y.csv"):
        _edit(folder / name, lambda ls: [*ls, ls[1]])
    with pytest.raises(ValueError, match="duplicate key"):
        load_topk_folder(folder)


def test_nan_feature(folder):
    _edit(folder / "train_x.csv", lambda ls: [ls[0], ls[1].rsplit(",", 1)[0] + ",", *ls[2:]])
    with pytest.raises(ValueError, match=r"train_x\.csv: row 2, column '.+' holds an empty cell"):
        load_topk_folder(folder)


@pytest.mark.parametrize("cell", ["nan", "inf", "-inf", "NaN"])
def test_non_finite_cells_name_file_row_and_column(folder, cell):
    _edit(
        folder / "valid_x.csv", lambda ls: [*ls[:3], ls[3].rsplit(",", 1)[0] + f",{cell}", *ls[4:]]
    )
    with pytest.raises(ValueError, match=r"valid_x\.csv: row 4, column 'prev_deaths_01back' holds"):
        load_topk_folder(folder)
    write_topk_folder(make_panel(16, seed=0), folder)  # a clean folder again; now the target
    _edit(folder / "test_y.csv", lambda ls: [ls[0], ls[1].rsplit(",", 1)[0] + f",{cell}", *ls[2:]])
    with pytest.raises(ValueError, match=r"test_y\.csv: row 2, column 'deaths'.*must be finite"):
        load_topk_folder(folder)


def test_non_numeric_cell_names_row_and_column(folder):
    _edit(
        folder / "train_x.csv", lambda ls: [ls[0], ls[1], ls[2].rsplit(",", 1)[0] + ",abc", *ls[3:]]
    )
    with pytest.raises(
        ValueError, match=r"train_x\.csv: row 3, column '.+': 'abc' is not a number"
    ):
        load_topk_folder(folder)


def test_nan_time_index(folder):
    _edit(
        folder / "train_y.csv",
        lambda ls: [ls[0], ",".join([ls[1].split(",")[0], "nan", "1"]), *ls[2:]],
    )
    with pytest.raises(ValueError, match=r"train_y\.csv: row 2, column 'timestep'.*time indices"):
        load_topk_folder(folder)


def test_empty_and_header_only_files(folder):
    (folder / "valid_y.csv").write_text("")
    with pytest.raises(ValueError, match=r"valid_y\.csv is empty; expected a header"):
        load_topk_folder(folder)
    (folder / "valid_y.csv").write_text("geoid,timestep,deaths\n")
    with pytest.raises(ValueError, match=r"valid_y\.csv has a header but no data rows"):
        load_topk_folder(folder)


def test_mismatched_shapes_between_files(folder):
    _edit(folder / "valid_x.csv", lambda ls: ls[:-1])  # one row fewer than valid_y.csv
    with pytest.raises(
        ValueError, match=r"valid_x\.csv \(15 rows\) and .*valid_y\.csv \(16 rows\)"
    ):
        load_topk_folder(folder)


def test_differing_target_names(folder):
    _edit(folder / "test_y.csv", lambda ls: ["geoid,timestep,counts", *ls[1:]])
    with pytest.raises(ValueError, match=r"target column 'counts' differs from train_y\.csv's"):
        load_topk_folder(folder)


def test_fractional_counts_are_rejected_with_row_and_column(folder):
    _edit(folder / "train_y.csv", lambda ls: [ls[0], ls[1], ls[2] + ".5", *ls[3:]])
    with pytest.raises(
        ValueError,
        match=r"train_y\.csv: row 3, column 'deaths': \d+\.5 is not a whole number.*"
        "counts must be non-negative integers",
    ):
        load_topk_folder(folder)


def test_negative_target(folder):
    _edit(folder / "train_y.csv", lambda ls: [ls[0], ls[1].rsplit(",", 1)[0] + ",-3", *ls[2:]])
    with pytest.raises(ValueError, match="negative count"):
        load_topk_folder(folder)


def test_differing_site_sets(folder):
    for name in ("valid_x.csv", "valid_y.csv"):
        _edit(
            folder / name,
            lambda ls: [ls[0], *[ln for ln in ls[1:] if not ln.startswith("17031000000,")]],
        )
    with pytest.raises(ValueError, match="site set differs"):
        load_topk_folder(folder)


def test_missing_feature_column(folder):
    _edit(folder / "test_x.csv", lambda ls: [",".join(ln.split(",")[:-1]) for ln in ls])
    with pytest.raises(ValueError, match="feature columns differ"):
        load_topk_folder(folder)


def test_float_targets_cast_to_int_and_allow_fractional_warns(folder, tmp_path):
    for s in ("train", "valid", "test"):
        _edit(folder / f"{s}_y.csv", lambda ls: [ls[0], *[ln + ".0" for ln in ls[1:]]])
    assert _load(folder).train.y.dtype == torch.int64
    other = tmp_path / "other"
    shutil.copytree(folder, other)
    _edit(other / "train_y.csv", lambda ls: [ls[0], ls[1] + "5", *ls[2:]])  # e.g. 3.05
    with pytest.warns(UserWarning, match="not integral"):
        d = load_topk_folder(other, allow_fractional=True)
    assert d.train.y.dtype == torch.float32


def test_hotspots_round_trip_and_history_is_uninformative(tmp_path):
    h = make_hotspots(40, seed=2)
    assert h.feature_names == ["activity", "alert"] and h.train.X.shape == (4, 40, 2)
    assert h.train.time[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
    write_topk_folder(h, tmp_path)
    d = _load(tmp_path, standardize=False)
    for s in ("train", "valid", "test"):
        assert torch.equal(d.split(s).y, h.split(s).y)
        assert torch.allclose(d.split(s).X, h.split(s).X)
    with pytest.raises(ValueError, match="sites must be >= 2"):
        make_hotspots(1)


def _swap_columns(path, i, j):
    def fn(lines):
        out = []
        for ln in lines:
            cells = ln.split(",")
            cells[i], cells[j] = cells[j], cells[i]
            out.append(",".join(cells))
        return out

    _edit(path, fn)


def test_test_and_valid_x_columns_are_matched_to_train_by_name(folder):
    ref = _load(folder)
    _swap_columns(folder / "test_x.csv", 2, 9)  # two feature columns, any order
    _swap_columns(folder / "valid_x.csv", 3, 14)
    d = _load(folder)
    assert d.feature_names == ref.feature_names
    for s in ("train", "valid", "test"):
        assert torch.equal(d.split(s).X, ref.split(s).X)


@pytest.mark.parametrize("name", ["valid_x.csv", "test_y.csv", "train_y.csv"])
def test_swapped_key_columns_are_named(folder, name):
    _swap_columns(folder / name, 0, 1)
    with pytest.raises(
        ValueError,
        match=rf"{name}: the key columns are swapped \('timestep' first, 'geoid' second\); "
        r"train_x\.csv has the site id 'geoid' first",
    ):
        load_topk_folder(folder)


def test_target_column_placed_first_is_named(folder):
    def target_first(lines):
        return [",".join([ln.split(",")[2], *ln.split(",")[:2]]) for ln in lines]

    _edit(folder / "valid_y.csv", target_first)
    with pytest.raises(
        ValueError,
        match=r"valid_y\.csv: column 'deaths' is placed before the key columns 'geoid' and "
        r"'timestep' \(found as columns 2 and 3\); .* then the target",
    ):
        load_topk_folder(folder)


def test_feature_column_placed_first_in_train_x_is_named(folder):
    _swap_columns(folder / "train_x.csv", 0, 2)  # deaths_sp_lag, timestep, geoid, ...
    with pytest.raises(
        ValueError, match=r"train_x\.csv: column 'deaths_sp_lag' is placed before the key columns"
    ):
        load_topk_folder(folder)


@pytest.mark.parametrize("cell", ["nan", "NaN", "inf"])
def test_nan_in_the_site_key_column_is_named(folder, cell):
    _edit(folder / "test_x.csv", lambda ls: [ls[0], ls[1], cell + "," + ls[2].split(",", 1)[1]])
    with pytest.raises(
        ValueError,
        match=rf"test_x\.csv: row 3, column 'geoid' \(the site id key column\) holds '{cell}'; "
        "the key columns must not hold NaN or inf",
    ):
        load_topk_folder(folder)


def test_nan_in_the_time_key_column_is_named(folder):
    _edit(
        folder / "valid_x.csv",
        lambda ls: [ls[0], ",".join([ls[1].split(",")[0], "nan", *ls[1].split(",")[2:]]), *ls[2:]],
    )
    with pytest.raises(
        ValueError,
        match=r"valid_x\.csv: row 2, column 'timestep' holds an empty cell or NaN .*; "
        r"time indices \(the second key column\) must be finite numbers",
    ):
        load_topk_folder(folder)


def test_missing_and_extra_feature_columns_are_listed_without_empty_lists(folder):
    _edit(
        folder / "valid_x.csv",
        lambda ls: [ls[0].replace("svi_theme1", "svi_theme9"), *ls[1:]],
    )
    with pytest.raises(ValueError) as info:
        load_topk_folder(folder)
    msg = str(info.value)
    assert "missing ['svi_theme1'], extra ['svi_theme9']" in msg and "[]" not in msg


def test_swapped_key_columns_in_train_x_blame_train_x_not_train_y(folder):
    """Issue 33: with the keys swapped in train_x.csv the error named train_y.csv."""
    _swap_columns(folder / "train_x.csv", 0, 1)
    with pytest.raises(ValueError) as info:
        load_topk_folder(folder)
    msg = str(info.value)
    assert re.search(
        r"train_x\.csv: the key columns are swapped \('timestep' first, 'geoid' second\); "
        r"train_y\.csv has the site id 'geoid' first",
        msg,
    ), msg
    assert "train_y.csv: " not in msg


def _extra_target(lines):
    return [lines[0] + ",cases", *(ln + ",1" for ln in lines[1:])]


def test_several_targets_python_message_names_the_target_argument(folder):
    for s in ("train", "valid", "test"):
        _edit(folder / f"{s}_y.csv", _extra_target)
    with pytest.raises(AmbiguousTargetError) as info:
        load_topk_folder(folder)
    assert "choose one with target='deaths' (any of ['deaths', 'cases'])" in str(info.value)
    assert info.value.targets == ["deaths", "cases"]
    assert _load(folder, target="cases").train.y.eq(1).all()
