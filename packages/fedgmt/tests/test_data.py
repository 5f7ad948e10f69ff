"""Partitioner properties (hypothesis) and loaders (real files and malformed ones)."""

import gzip
import struct
import time

import numpy as np
import pytest
from fedgmt.dataset import load_agnews, load_digits_split, load_mnist_idx, partition, read_idx
from hypothesis import given, settings
from hypothesis import strategies as st

from . import cli_cases
from .conftest import data_root

Y = load_digits_split()[1].numpy()


@settings(max_examples=30, deadline=None)
@given(
    alpha=st.sampled_from([1e-4, 1e-2, 0.1, 1.0, 100.0]),
    n=st.sampled_from([2, 10, 50, 100]),
    min_size=st.integers(1, 10),
    seed=st.integers(0, 1000),
)
def test_partition_covers_once_and_min_size(alpha, n, min_size, seed):
    t0 = time.perf_counter()
    p = partition(Y, n, "dirichlet", alpha, min_size, seed)
    assert time.perf_counter() - t0 < 2.0
    allidx = np.concatenate(p.indices)
    assert len(allidx) == len(Y) and len(np.unique(allidx)) == len(Y)
    assert min(p.sizes) >= min_size


def test_alpha_001_with_100_clients_no_empty_client():
    p = partition(Y, 100, "dirichlet", 0.01, 1, 0)
    assert min(p.sizes) >= 1 and sum(p.sizes) == len(Y)
    p10 = partition(Y, 100, "dirichlet", 0.01, 10, 0)
    assert min(p10.sizes) >= 10


def test_entropy_rises_with_alpha_and_large_alpha_is_iid():
    ent = [
        partition(Y, 20, "dirichlet", a, 1, 0).stats()["mean_label_entropy"]
        for a in (0.01, 0.1, 1, 1e6)
    ]
    assert ent == sorted(ent)
    assert ent[-1] > 0.95 * np.log(10)


@pytest.mark.parametrize("scheme", ["iid", "shards"])
def test_iid_and_shards(scheme):
    p = partition(Y, 20, scheme, seed=1)
    assert sum(p.sizes) == len(Y) and min(p.sizes) >= 1
    if scheme == "shards":
        assert max(sum(1 for c in h if c > 0) for h in p.label_hist) <= 4


@pytest.mark.parametrize(
    "kw, match",
    [
        (
            dict(num_clients=200, min_size=10),
            "cannot give each of 200 clients at least 10 samples from 1347",
        ),
        (dict(num_clients=10, alpha=0.0), "alpha"),
        (dict(num_clients=10, alpha=float("nan")), "alpha"),
        (dict(num_clients=0), "num_clients"),
        (dict(num_clients=10, scheme="zipf"), "scheme"),
    ],
)
def test_partition_bad_inputs(kw, match):
    with pytest.raises(ValueError, match=match):
        partition(Y, **kw)


def _write_idx(path, magic, dims, payload, gz):
    raw = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload
    if gz:
        with gzip.open(path, "wb") as fh:
            fh.write(raw)
    else:
        path.write_bytes(raw)


@pytest.mark.parametrize("gz", [True, False])
def test_idx_reader(tmp_path, gz):
    suffix = ".gz" if gz else ""
    img = tmp_path / f"x{suffix}"
    _write_idx(img, 2051, (2, 3, 3), bytes(range(18)), gz)
    assert read_idx(img, 2051).shape == (2, 3, 3)
    with pytest.raises(ValueError, match=r"bad IDX magic 2051 in x.* \(expected 2049\)"):
        read_idx(img, 2049)
    bad = tmp_path / f"t{suffix}"
    _write_idx(bad, 2051, (2, 3, 3), bytes(10), gz)
    with pytest.raises(ValueError, match="payload"):
        read_idx(bad, 2051)


def test_idx_float_images_nan_empty_and_truncated(tmp_path):
    good = tmp_path / "f.gz"
    _write_idx(good, 0x0D03, (2, 2, 2), np.full((2, 2, 2), 7.0, ">f4").tobytes(), True)
    assert read_idx(good, 2051).dtype == np.float32
    bad = np.full((2, 2, 2), 7.0, ">f4")
    bad[1, 0, 1] = np.nan
    _write_idx(tmp_path / "nan.gz", 0x0D03, (2, 2, 2), bad.tobytes(), True)
    with pytest.raises(ValueError, match=r"nan\.gz: item 1 pixel \(0, 1\) holds .*nan"):
        read_idx(tmp_path / "nan.gz", 2051)
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ValueError, match="empty is empty"):
        read_idx(tmp_path / "empty", 2051)
    raw = gzip.compress(struct.pack(">IIII", 2051, 50, 28, 28) + bytes(50 * 784))
    (tmp_path / "cut.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"cut.gz is not a complete gzip file"):
        read_idx(tmp_path / "cut.gz", 2051)
    with pytest.raises(ValueError, match=r"bad IDX magic 3331 in f.gz"):
        read_idx(good, 2049)  # float labels are refused


def test_mnist_folder_errors_name_the_file(tmp_path):
    folder = cli_cases.nan_mnist(tmp_path / "m")
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte.gz: item 3 pixel"):
        load_mnist_idx(folder)
    _write_idx(folder / "train-images-idx3-ubyte.gz", 2051, (5, 28, 28), bytes(5 * 784), True)
    with pytest.raises(ValueError, match=r"5 images in train-images.* but 40 labels"):
        load_mnist_idx(folder)
    other = cli_cases.nan_mnist(tmp_path / "m2")
    (other / "t10k-labels-idx1-ubyte.gz").unlink()
    _write_idx(other / "train-images-idx3-ubyte.gz", 2051, (40, 28, 28), bytes(40 * 784), True)
    with pytest.raises(FileNotFoundError, match="lacks t10k-labels-idx1-ubyte"):
        load_mnist_idx(other)


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "test.csv is empty"),
        ('"1","a","b"\n"nan","c","d"\n', r"row 2, column 1: expected a class label 1, 2, 3 or 4, got 'nan'"),
        ('"1","a"\n', "row 1: expected 3 columns"),
        ('"5","a","b"\n', "got '5'"),
        ('"1","a","b"\n"2","a,"b\n', "malformed or truncated CSV"),
        ('"1","a","b"\n"1","a","b"\n"2","a","b"\n', r"class\(es\) \[2, 3, 4\] have fewer than 2"),
    ],
)  # fmt: skip
def test_agnews_malformed_files(tmp_path, text, match):
    (tmp_path / "test.csv").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        load_agnews(tmp_path)


@pytest.mark.dataset
def test_mnist_real():
    root = data_root() / "mnist" / "raw"
    if not root.exists():
        pytest.skip(f"MNIST not found at {root}")
    xtr, ytr, xte, _yte = load_mnist_idx(root)
    assert xtr.shape == (60000, 784) and xte.shape == (10000, 784)
    assert int(ytr.max()) == 9 and abs(float(xtr.mean())) < 0.01


@pytest.mark.dataset
def test_agnews_real():
    root = data_root() / "ag_news"
    if not (root / "test.csv").exists():
        pytest.skip(f"AG News not found at {root}")
    xtr, ytr, _xte, yte, vocab = load_agnews(root)
    assert (len(ytr), len(yte)) == (6080, 1520)
    assert set(ytr.tolist()) == {0, 1, 2, 3} and xtr.shape[1] == 64
    xtr2, ytr2, *_ = load_agnews(root)
    assert bool((xtr == xtr2).all()) and bool((ytr == ytr2).all()) and vocab > 1000
