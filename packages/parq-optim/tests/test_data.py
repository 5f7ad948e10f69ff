import gzip
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from parq_optim.data import load_digits, load_folder, make_synthetic, read_idx

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
    with pytest.raises(ValueError, match="non-negative integers"):
        load_folder(csv)


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
