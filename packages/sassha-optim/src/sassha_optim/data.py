"""Small datasets for the CLI and benchmarks: embedded synthetic images, scikit-learn digits, and
folders of IDX (MNIST layout, optionally gzipped), NPZ or CSV files (spec §5)."""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

__all__ = ["Split", "load_dataset", "load_digits", "load_folder", "make_synthetic"]


@dataclass
class Split:
    """Standardized train/test tensors: ``x_*`` float32 (n, d), ``y_*`` int64 (n,)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    name: str

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])

    @property
    def n_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def _standardize(x_train: torch.Tensor, x_test: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = x_train.mean(0, keepdim=True)
    std = x_train.std(0, keepdim=True) + 1e-6
    return (x_train - mean) / std, (x_test - mean) / std


def _stratified_subset(y: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    """Indices of a class-stratified random subset of size ``n`` (all indices when None)."""
    if n is None or n >= len(y):
        return np.arange(len(y))
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(y, return_counts=True)
    quota = np.floor(counts / len(y) * n).astype(int)
    quota[np.argsort(-(counts / len(y) * n - quota))[: n - quota.sum()]] += 1
    idx = [rng.permutation(np.flatnonzero(y == c))[:q] for c, q in zip(classes, quota)]
    return np.sort(np.concatenate(idx))


def _finish(xtr, ytr, xte, yte, name, scale, max_train=None, max_test=None, seed=0) -> Split:
    itr = _stratified_subset(ytr, max_train, seed)
    ite = _stratified_subset(yte, max_test, seed + 1)
    to_x = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).flatten(1) / scale  # noqa: E731
    x_train, x_test = _standardize(to_x(xtr[itr]), to_x(xte[ite]))
    to_y = lambda a: torch.from_numpy(np.asarray(a, dtype=np.int64))  # noqa: E731
    return Split(x_train, to_y(ytr[itr]), x_test, to_y(yte[ite]), name)


def make_synthetic(
    seed: int = 0,
    n_train: int = 2000,
    n_test: int = 1000,
    n_classes: int = 10,
    n_modes: int = 4,
    side: int = 8,
    proto_rms: float = 1.0,
    noise_std: float = 1.0,
) -> Split:
    """Embedded default (no download, no scikit-learn): smoothed random 8×8 class prototypes with
    ``n_modes`` modes per class plus Gaussian noise, flattened and standardized (spec §5)."""
    gen = torch.Generator().manual_seed(seed)
    protos = torch.randn(n_classes * n_modes, 1, side, side, generator=gen)
    protos = torch.nn.functional.conv2d(protos, torch.full((1, 1, 3, 3), 1 / 9), padding=1)
    protos = protos / protos.pow(2).mean(dim=(1, 2, 3), keepdim=True).sqrt() * proto_rms
    protos = protos.reshape(n_classes, n_modes, side * side)
    n = n_train + n_test
    labels = torch.arange(n) % n_classes
    labels = labels[torch.randperm(n, generator=gen)]
    modes = torch.randint(0, n_modes, (n,), generator=gen)
    x = protos[labels, modes] + noise_std * torch.randn(n, side * side, generator=gen)
    x_train, x_test = _standardize(x[:n_train], x[n_train:])
    return Split(x_train, labels[:n_train], x_test, labels[n_train:], "synthetic")


def load_digits(seed: int = 0, test_size: int = 360) -> Split:
    """scikit-learn's bundled 8×8 digits (1,797 images): pixels/16, stratified 1,437/360 split
    with a fixed seed, standardized with train statistics (spec §5)."""
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "the digits dataset needs scikit-learn: pip install 'sassha-optim[cli]'"
        ) from exc
    bunch = sk_load_digits()
    x, y = np.asarray(bunch.data), np.asarray(bunch.target)
    test = _stratified_subset(y, test_size, seed)
    train = np.setdiff1d(np.arange(len(y)), test)
    return _finish(x[train], y[train], x[test], y[test], "digits", 16.0)


# ------------------------------------------------------------------------------------------ IDX
def _open(path: Path) -> bytes:
    return gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (``0x00000803`` images with 3 int32 dims, ``0x00000801`` labels)."""
    raw = _open(path)
    if len(raw) < 8:
        raise ValueError(f"{path}: truncated IDX header")
    magic = struct.unpack(">I", raw[:4])[0]
    ndim = {0x00000801: 1, 0x00000803: 3}.get(magic)
    if ndim is None:
        raise ValueError(
            f"{path}: wrong IDX magic 0x{magic:08x} (expected 0x00000801 or 0x00000803)"
        )
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    payload = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if payload.size != int(np.prod(dims)):
        raise ValueError(f"{path}: truncated payload ({payload.size} bytes for dims {dims})")
    return payload.reshape(dims)


def _find(folder: Path, stem: str) -> Path | None:
    for sub in (folder, folder / "raw", folder / "MNIST" / "raw"):
        for name in (
            stem,
            stem.replace("-idx", ".idx"),
            stem + ".gz",
            stem.replace("-idx", ".idx") + ".gz",
        ):
            if (sub / name).is_file():
                return sub / name
    return None


def _check_labels(y: np.ndarray, path: Path) -> np.ndarray:
    if y.dtype.kind == "f":
        if not np.all(np.equal(np.mod(y, 1), 0)):
            raise ValueError(f"{path}: labels must be integers")
        y = y.astype(np.int64)
    if y.dtype.kind not in "iu" or (y < 0).any():
        raise ValueError(f"{path}: labels must be non-negative integers")
    return y


def _load_idx(folder: Path) -> tuple[np.ndarray, ...] | None:
    stems = (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    )
    paths = [_find(folder, s) for s in stems]
    if any(p is None for p in paths):
        return None
    xtr, ytr, xte, yte = (read_idx(p) for p in paths)  # type: ignore[arg-type]
    for x, y, p in ((xtr, ytr, paths[1]), (xte, yte, paths[3])):
        if len(x) != len(y):
            raise ValueError(f"{p}: {len(y)} labels for {len(x)} images")
    return xtr, ytr, xte, yte


def _load_npz(folder: Path) -> tuple[np.ndarray, ...] | None:
    def pick(d, *keys):
        for k in keys:
            if k in d:
                return d[k]
        raise ValueError(f"missing arrays {keys} in NPZ file")

    files = sorted(folder.glob("*.npz"))
    if not files:
        return None
    single = [f for f in files if "x_train" in np.load(f).files]
    if single:
        d = np.load(single[0])
        arrays = [pick(d, k) for k in ("x_train", "y_train", "x_test", "y_test")]
        arrays[1], arrays[3] = (
            _check_labels(arrays[1], single[0]),
            _check_labels(arrays[3], single[0]),
        )
        return tuple(arrays)
    tr, te = folder / "train.npz", folder / "test.npz"
    if not (tr.is_file() and te.is_file()):
        return None
    out = []
    for f in (tr, te):
        d = np.load(f)
        x, y = pick(d, "x", "images"), _check_labels(pick(d, "y", "labels"), f)
        if len(x) != len(y):
            raise ValueError(f"{f}: {len(y)} labels for {len(x)} images")
        out += [x, y]
    return tuple(out)


def _load_csv(folder: Path) -> tuple[np.ndarray, ...] | None:
    train = sorted(folder.glob("*train*.csv"))
    test = sorted(folder.glob("*test*.csv"))
    if not (train and test):
        return None
    out = []
    for f in (train[0], test[0]):
        with open(f) as fh:
            header = fh.readline().strip().split(",")
        has_header = not all(h.replace(".", "", 1).lstrip("-").isdigit() for h in header)
        data = np.loadtxt(f, delimiter=",", skiprows=int(has_header), ndmin=2)
        col = header.index("label") if has_header and "label" in header else 0
        y = _check_labels(data[:, col], f)
        out += [np.delete(data, col, axis=1), y]
    return tuple(out)


def load_folder(
    path: str | Path, max_train: int | None = None, max_test: int | None = None, seed: int = 0
) -> Split:
    """Load an image-classification folder: IDX (MNIST file names, ``.gz`` ok, searched in
    ``path``, ``path/raw``, ``path/MNIST/raw``), NPZ (``x_train, y_train, x_test, y_test`` or
    ``train.npz``/``test.npz``) or CSV (``*train*.csv``/``*test*.csv``, label column ``label`` or
    the first). Pixels scaled to [0, 1], standardized; optional stratified subsampling."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"data folder not found: {folder}")
    for loader in (_load_idx, _load_npz, _load_csv):
        arrays = loader(folder)
        if arrays is not None:
            xtr, ytr, xte, yte = arrays
            scale = 255.0 if max(float(np.max(xtr)), float(np.max(xte))) > 1 else 1.0
            return _finish(xtr, ytr, xte, yte, folder.name, scale, max_train, max_test, seed)
    raise ValueError(
        f"{folder}: no IDX (train-images-idx3-ubyte[.gz], ...), NPZ or CSV train/test files found"
    )


def load_dataset(
    name: str, seed: int = 0, max_train: int | None = None, max_test: int | None = None
) -> Split:
    """``"synthetic"``, ``"digits"``, ``"auto"`` (digits if scikit-learn is installed, else
    synthetic) or a folder path for :func:`load_folder`."""
    if name == "auto":
        try:
            import sklearn  # noqa: F401

            name = "digits"
        except ImportError:
            name = "synthetic"
    if name == "synthetic":
        return make_synthetic(seed=0)
    if name == "digits":
        return load_digits(seed=0)
    return load_folder(name, max_train=max_train, max_test=max_test, seed=seed)
