import shutil
import warnings

import pytest
import torch
from bpr_topk import load_topk_folder, make_panel, make_synthetic7, write_topk_folder


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_topk_folder(path, **kw)


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
    with pytest.raises(ValueError, match="missing/NaN"):
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


def test_float_targets_cast_to_int_and_nonintegral_warn(folder, tmp_path):
    for s in ("train", "valid", "test"):
        _edit(folder / f"{s}_y.csv", lambda ls: [ls[0], *[ln + ".0" for ln in ls[1:]]])
    assert _load(folder).train.y.dtype == torch.int64
    other = tmp_path / "other"
    shutil.copytree(folder, other)
    _edit(other / "train_y.csv", lambda ls: [ls[0], ls[1] + "5", *ls[2:]])  # e.g. 3.05
    with pytest.warns(UserWarning, match="not integral"):
        d = load_topk_folder(other)
    assert d.train.y.dtype == torch.float32
