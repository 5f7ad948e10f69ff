import gzip
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from parq_optim.data import (
    STD_FLOOR,
    load_digits,
    load_folder,
    make_synthetic,
    read_csv,
    read_idx,
    standardize,
)

DATA = Path(
    os.environ.get("ICML25_DATA", Path(__file__).resolve().parents[3].parent / "shared" / "data")
)
MNIST = Path(os.environ.get("PARQ_OPTIM_DATA_DIR", DATA / "mnist" / "raw"))


def test_synthetic_deterministic_and_standardized():
    a, b = (
        make_synthetic(seed=3, n_train=200, n_test=100),
        make_synthetic(seed=3, n_train=200, n_test=100),
    )
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert a.x_train.shape == (200, 64) and a.n_classes == 10
    torch.testing.assert_close(a.x_train.mean(0), torch.zeros(64), atol=1e-5, rtol=0)
    assert torch.bincount(a.y_train).tolist() == [20] * 10
    assert not torch.equal(make_synthetic(seed=4, n_train=200, n_test=100).x_train, a.x_train)


def test_digits_split():
    pytest.importorskip("sklearn")
    d = load_digits(seed=0)
    assert len(d.y_train) == 1437 and len(d.y_test) == 360 and d.n_features == 64


def write_idx(path, arr, magic):
    dims = arr.shape
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims) + arr.tobytes())


def test_idx_folder_roundtrip_and_errors(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 30), ("t10k", 10)):
        write_idx(
            raw / f"{split}-images-idx3-ubyte.gz",
            rng.integers(0, 256, (n, 4, 4), dtype=np.uint8),
            0x803,
        )
        write_idx(raw / f"{split}-labels-idx1-ubyte.gz", (np.arange(n) % 3).astype(np.uint8), 0x801)
    d = load_folder(tmp_path)
    assert d.x_train.shape == (30, 16) and d.n_classes == 3 and d.image_shape == (1, 4, 4)
    bad = tmp_path / "bad.gz"
    write_idx(bad, np.zeros(3, dtype=np.uint8), 0x999)
    with pytest.raises(ValueError, match="not an IDX image file"):
        read_idx(bad)
    trunc = tmp_path / "trunc"
    trunc.write_bytes(struct.pack(">IIII", 0x803, 10, 4, 4) + b"\0" * 5)
    with pytest.raises(ValueError, match="truncated IDX file"):
        read_idx(trunc)
    with pytest.raises(FileNotFoundError):
        load_folder(tmp_path / "nope")
    cut = tmp_path / "cut.gz"
    cut.write_bytes((raw / "train-images-idx3-ubyte.gz").read_bytes()[:30])
    with pytest.raises(ValueError, match=r"cut.gz: cannot read"):
        read_idx(cut)
    write_idx(raw / "t10k-labels-idx1-ubyte.gz", np.zeros(9, dtype=np.uint8), 0x801)
    with pytest.raises(ValueError, match=r"has 10 samples but .* has 9 labels"):
        load_folder(tmp_path)


def test_npz_and_csv_folders(tmp_path):
    rng = np.random.default_rng(1)
    np.savez(
        tmp_path / "mnist.npz",
        x_train=rng.random((20, 3, 3)),
        y_train=np.arange(20) % 2,
        x_test=rng.random((6, 3, 3)),
        y_test=np.arange(6) % 2,
    )
    assert load_folder(tmp_path).x_test.shape == (6, 9)
    csv = tmp_path / "c"
    csv.mkdir()
    (csv / "my_train.csv").write_text("label,a,b\n0,1,2\n1,3,4\n1,5,0\n")
    (csv / "my_test.csv").write_text("label,a,b\n1,0,1\n")
    d = load_folder(csv)
    assert d.y_train.tolist() == [0, 1, 1] and d.n_features == 2
    (csv / "my_test.csv").write_text("label,a,b\n-1,0,1\n")
    with pytest.raises(ValueError, match="labels must be non-negative integers"):
        load_folder(csv)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "is empty"),
        ("\n\n", "is empty"),
        ("label,a,b\n", "header but no data rows"),
        ("label\n0\n", "one column only"),
        ("label,a,b\n0,1,2\n1,nan,2\n", "line 3, column 2 \\('a'\\): nan"),
        ("label,a,b\n0,1,2\n1,2,-inf\n", "line 3, column 3 \\('b'\\): -inf"),
        ("0,1,2\n1,2,NaN\n", "line 2, column 3: nan"),
        ("label,a,b\n0,1,2\n1,2\n", "line 3: 2 values, expected 3"),
        ("label,a,b\n0,1,x2\n", "line 2, column 3 \\('b'\\): 'x2' is not a number"),
        ("label,a,b\n0,1,\n", "line 2, column 3 \\('b'\\): '' is not a number"),
    ],
)
def test_csv_errors_name_file_line_and_column(tmp_path, text, match):
    path = tmp_path / "d_train.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as err:
        read_csv(path)
    assert "d_train.csv" in str(err.value)


@pytest.mark.parametrize(
    ("train", "test", "match"),
    [
        ("label,a\n0.5,1\n", "label,a\n0,1\n", "label of sample 0 is 0.5"),
        ("label,a,b\n0,1,2\n", "label,a\n0,1\n", "differ in shape"),
        ("a,label\n1,0\n2,1\n", None, "has a \\*train\\*.csv but no \\*test\\*.csv"),
    ],
)
def test_csv_folder_errors(tmp_path, train, test, match):
    (tmp_path / "x_train.csv").write_text(train)
    if test is not None:
        (tmp_path / "x_test.csv").write_text(test)
    with pytest.raises(ValueError, match=match):
        load_folder(tmp_path)


def test_csv_label_column_by_name(tmp_path):
    (tmp_path / "x_train.csv").write_text("a,label\n1,0\n2,1\n")
    (tmp_path / "x_test.csv").write_text("a,label\n3,1\n")
    d = load_folder(tmp_path)
    assert d.y_train.tolist() == [0, 1] and d.n_features == 1 and d.image_shape is None


def npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_npz_errors(tmp_path):
    good = {
        "x_train": np.ones((4, 2, 2)),
        "y_train": np.array([0, 1, 0, 1]),
        "x_test": np.ones((2, 2, 2)),
        "y_test": np.array([0, 1]),
    }
    nan = {**good, "x_test": np.array([[[1, 2], [3, np.nan]], [[0, 0], [0, 0]]])}
    npz(tmp_path / "m.npz", **nan)
    with pytest.raises(ValueError, match=r"m.npz \(x_test\): sample 0, feature \(1, 1\) is nan"):
        load_folder(tmp_path)
    npz(tmp_path / "m.npz", **{**good, "y_train": np.array([0, 1, 0])})
    with pytest.raises(ValueError, match=r"has 4 samples but .* has 3 labels"):
        load_folder(tmp_path)
    npz(tmp_path / "m.npz", **{**good, "x_train": np.zeros((0, 2, 2)), "y_train": np.zeros(0)})
    with pytest.raises(ValueError, match="holds no samples"):
        load_folder(tmp_path)
    (tmp_path / "m.npz").unlink()
    npz(tmp_path / "train.npz", x=np.ones((3, 2)), y=np.zeros(3))
    npz(tmp_path / "test.npz", x=np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"test.npz has no array named 'y' or 'labels'"):
        load_folder(tmp_path)
    (tmp_path / "test.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match=r"test.npz: not a readable .npz file"):
        load_folder(tmp_path)


def test_standardize_floors_the_std_of_features_constant_in_train():
    """Before: ``x_train.std(0) + 1e-6`` sent a train-constant feature to ~1e6 on the test split."""
    g = torch.Generator().manual_seed(0)
    x_tr = torch.randn(200, 5, generator=g, dtype=torch.float64) * torch.tensor([1, 2, 3, 4, 0.0])
    x_te = torch.randn(50, 5, generator=g, dtype=torch.float64)
    x_te[:, 4] = 1.0  # constant 0 on train, 1 on test
    a, b = standardize(x_tr, x_te)
    sd = x_tr.std(0)
    ref = sd.square().mean().sqrt()
    torch.testing.assert_close(a[:, :4], (x_tr[:, :4] - x_tr[:, :4].mean(0)) / sd[:4])
    torch.testing.assert_close(b[:, 4], torch.full((50,), 1.0, dtype=b.dtype) / (STD_FLOOR * ref))
    assert b.abs().max() < 1.0 / (STD_FLOOR * ref) + 10
    a, b = standardize(torch.ones(4, 3), torch.zeros(2, 3))  # all constant: only centred
    assert torch.equal(a, torch.zeros(4, 3)) and torch.equal(b, -torch.ones(2, 3))
    with pytest.raises(ValueError, match="floor must be > 0"):
        standardize(x_tr, x_te, floor=0.0)


@pytest.mark.dataset
def test_mnist_test_split_stays_bounded():
    """Full MNIST: 67 pixels are constant on the train split; they used to reach 94,118."""
    if not MNIST.is_dir():
        pytest.skip(f"MNIST IDX files not found at {MNIST}")
    d = load_folder(MNIST)
    assert d.x_train.shape == (60000, 784)
    assert d.x_test.abs().max() < 50 and d.x_train.abs().max() < 50


@pytest.mark.dataset
def test_mnist_smoke_two_bit():
    if not MNIST.is_dir():
        pytest.skip(f"MNIST IDX files not found at {MNIST}")
    from parq_optim.train import TrainConfig, train

    d = load_folder(MNIST, max_train=5000, max_test=1000)
    assert d.x_train.shape == (5000, 784)
    r = train(
        TrainConfig(method="parq", bits=2, quantizer="unif", hidden=32, epochs=3, batch_size=128), d
    )
    assert r["test_acc"] > 70
    assert all(v["distinct"] == v["levels"] == 4 for v in r["layers"].values())
