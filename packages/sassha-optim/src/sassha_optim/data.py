"""Small datasets for the CLI and benchmarks: embedded synthetic images, scikit-learn digits, and
folders of IDX (MNIST layout, optionally gzipped), NPZ or CSV files.

Every loader checks its input and raises a :class:`ValueError` that names the file, the row and the
column at fault and what is expected: empty files, NaN/inf cells, non-numeric cells, train/test feature
counts that differ, labels that are not non-negative integers or that the training split lacks.

Features are standardised with training statistics. The per-feature standard deviation is floored at
``STD_FLOOR`` (0.1) times the standard deviation of all training entries, so that a feature that is
(nearly) constant in the training split cannot blow up in the test split: with the plain
``std + 1e-6`` a pixel that is always 0 in MNIST's training images but not in a test image reached
|x| = 10⁶."""

from __future__ import annotations

import gzip
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

__all__ = ["STD_FLOOR", "Split", "load_dataset", "load_digits", "load_folder", "make_synthetic"]

STD_FLOOR = 0.1  # per-feature std floor, as a fraction of the std of all training entries


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


def _standardize(
    x_train: torch.Tensor, x_test: torch.Tensor, name: str = "data"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x − mean) / max(std, STD_FLOOR · std_all)`` per feature, with training statistics.

    ``std_all`` is the (population) standard deviation of all training entries. Features whose
    spread is below a tenth of the data's overall spread are near-constant and carry little
    information; flooring their scale keeps them bounded in the test split (|x| ≤ range / floor).
    """
    mean = x_train.mean(0, keepdim=True)
    overall = float(x_train.std(correction=0))
    if not overall > 0.0:
        raise ValueError(f"{name}: every training feature is constant; nothing to learn from")
    std = x_train.std(0, keepdim=True, correction=0).clamp_min(STD_FLOOR * overall)
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
    x_train, x_test = _standardize(to_x(xtr[itr]), to_x(xte[ite]), name)
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
    ``n_modes`` modes per class plus Gaussian noise, flattened and standardized."""
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
    x_train, x_test = _standardize(x[:n_train], x[n_train:], "synthetic")
    return Split(x_train, labels[:n_train], x_test, labels[n_train:], "synthetic")


def load_digits(seed: int = 0, test_size: int = 360) -> Split:
    """scikit-learn's bundled 8×8 digits (1,797 images): pixels/16, stratified 1,437/360 split
    with a fixed seed, standardized with train statistics."""
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


# ------------------------------------------------------------------------------------ checks
Locate = Callable[[int], str]


def _check_labels(y: np.ndarray, where: str, locate: Locate) -> np.ndarray:
    """Labels as int64, or a ValueError naming ``where`` and ``locate(row)`` of the first bad one."""
    y = np.asarray(y)
    expected = "expected class indices 0, 1, 2, ... (non-negative integers)"
    if y.ndim != 1:
        raise ValueError(f"{where}: labels must be one value per sample, got shape {y.shape}")
    if y.dtype.kind not in "iuf":
        raise ValueError(f"{where}: labels have dtype {y.dtype}; {expected}")
    if y.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~np.isfinite(y) | (np.mod(y, 1) != 0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{where}: {locate(i)}: label {y[i]:g} is not an integer; {expected}")
    bad = np.flatnonzero(y < 0)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where}: {locate(i)}: label {y[i]:g} is negative; {expected}")
    return y.astype(np.int64)


def _check_features(x: np.ndarray, where: str, locate: Callable[[int, int], str]) -> np.ndarray:
    """Features as a numeric array with finite entries and at least one sample."""
    x = np.asarray(x)
    if x.dtype.kind not in "iuf":
        raise ValueError(f"{where}: features have dtype {x.dtype}; expected numbers")
    if x.ndim < 2 or x.shape[0] == 0 or x[0].size == 0:
        raise ValueError(
            f"{where}: no samples or no features (shape {x.shape}); expected (samples, features...)"
        )
    if x.dtype.kind == "f":
        flat = x.reshape(len(x), -1)
        bad = np.argwhere(~np.isfinite(flat))
        if bad.size:
            r, c = (int(v) for v in bad[0])
            raise ValueError(
                f"{where}: {locate(r, c)}: {flat[r, c]} is not a finite number "
                f"({len(bad)} non-finite value(s) in all); expected finite numbers"
            )
    return x


def _check_pair(x: np.ndarray, y: np.ndarray, where: str) -> None:
    if len(x) != len(y):
        raise ValueError(f"{where}: {len(y)} labels for {len(x)} samples")


def _check_splits(xtr, ytr, xte, yte, train: str, test: str) -> None:
    """Cross-split checks: same per-sample feature shape, test labels known to the training split."""
    if xtr.shape[1:] != xte.shape[1:]:
        feats = lambda x: f"{int(np.prod(x.shape[1:]))} feature(s)"  # noqa: E731
        raise ValueError(
            f"{test}: test samples have shape {tuple(xte.shape[1:])} ({feats(xte)}), but "
            f"the training samples in {train} have {tuple(xtr.shape[1:])} ({feats(xtr)})"
        )
    top = int(ytr.max())
    bad = np.flatnonzero(yte > top)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{test}: sample {i + 1} has label {int(yte[i])}, but the training labels in {train} "
            f"only go up to {top}; expected test labels among the training classes"
        )


# ------------------------------------------------------------------------------------------ IDX
def _open(path: Path) -> bytes:
    if path.suffix != ".gz":
        return path.read_bytes()
    try:
        with gzip.open(path) as fh:
            return fh.read()
    except (OSError, EOFError) as exc:
        raise ValueError(f"{path}: not a readable gzip file ({exc or type(exc).__name__})") from exc


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (``0x00000803`` images with 3 int32 dims, ``0x00000801`` labels)."""
    raw = _open(path)
    if len(raw) < 8:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes; expected at least 8)")
    magic = struct.unpack(">I", raw[:4])[0]
    ndim = {0x00000801: 1, 0x00000803: 3}.get(magic)
    if ndim is None:
        raise ValueError(
            f"{path}: wrong IDX magic 0x{magic:08x} (expected 0x00000801 or 0x00000803)"
        )
    if len(raw) < 4 + 4 * ndim:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes)")
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


_Loaded = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str, str]


def _load_idx(folder: Path) -> _Loaded | None:
    stems = (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    )
    found = [_find(folder, s) for s in stems]
    if all(p is None for p in found):
        return None
    missing = [s for s, p in zip(stems, found) if p is None]
    if missing:
        raise ValueError(
            f"{folder}: IDX files incomplete, missing {', '.join(missing)} (optionally .gz)"
        )
    paths = [p for p in found if p is not None]
    xtr, ytr, xte, yte = (read_idx(p) for p in paths)
    out = []
    for x, y, px, py in ((xtr, ytr, paths[0], paths[1]), (xte, yte, paths[2], paths[3])):
        if x.ndim != 3 or y.ndim != 1:
            raise ValueError(f"{px}: expected an image file (3 dims) and {py} a label file (1 dim)")
        _check_pair(x, y, f"{py}")
        x = _check_features(x, str(px), lambda r, c: f"image {r + 1}")
        out += [x, _check_labels(y, str(py), lambda i: f"label {i + 1}")]
    return (*out, str(paths[0]), str(paths[2]))  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------ NPZ
def _read_npz(path: Path) -> dict[str, np.ndarray]:
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not an NPZ file (a zip archive written by numpy.savez)")
    try:
        with np.load(path) as d:
            return {k: d[k] for k in d.files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a readable .npz file ({exc or type(exc).__name__})") from exc


def _pick(d: dict[str, np.ndarray], path: Path, *keys: str) -> tuple[str, np.ndarray]:
    for k in keys:
        if k in d:
            return k, d[k]
    raise ValueError(f"{path}: missing array {' or '.join(keys)} (has: {', '.join(d) or 'none'})")


def _npz_split(d: dict[str, np.ndarray], path: Path, xkeys, ykeys) -> list[np.ndarray]:
    kx, x = _pick(d, path, *xkeys)
    ky, y = _pick(d, path, *ykeys)
    x = _check_features(x, str(path), lambda r, c: f"{kx}[{r}] (feature {c})")
    y = _check_labels(y, str(path), lambda i: f"{ky}[{i}]")
    _check_pair(x, y, f"{path}: {kx}/{ky}")
    return [x, y]


def _load_npz(folder: Path) -> _Loaded | None:
    files = sorted(folder.glob("*.npz"))
    if not files:
        return None
    tr, te = folder / "train.npz", folder / "test.npz"
    if tr.is_file() and te.is_file():
        out = _npz_split(_read_npz(tr), tr, ("x", "images"), ("y", "labels"))
        out += _npz_split(_read_npz(te), te, ("x", "images"), ("y", "labels"))
        return (*out, str(tr), str(te))  # type: ignore[return-value]
    for f in files:
        d = _read_npz(f)
        if "x_train" in d:
            out = _npz_split(d, f, ("x_train",), ("y_train",))
            out += _npz_split(d, f, ("x_test",), ("y_test",))
            return (*out, f"{f} (x_train)", f"{f} (x_test)")  # type: ignore[return-value]
    raise ValueError(
        f"{folder}: NPZ files found ({', '.join(f.name for f in files)}) but none holds x_train, "
        "y_train, x_test, y_test, and there is no train.npz/test.npz pair"
    )


# ------------------------------------------------------------------------------------------ CSV
def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_csv(path: Path) -> tuple[np.ndarray, int, Callable[[int], int], Callable[[int], str]]:
    """Parse a numeric CSV (optional header). Returns the data, the label column, a map from data
    row to line number and a column namer; a ValueError names the line and column at fault."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start})"
        ) from exc
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    expected = "expected a header line (optional) and rows of comma-separated numbers"
    if not lines:
        raise ValueError(f"{path}: empty file; {expected}")
    first = [c.strip() for c in lines[0][1].split(",")]
    header = None if all(_is_number(c) for c in first) else first
    rows = lines[1:] if header is not None else lines
    if not rows:
        raise ValueError(f"{path}: only a header line, no data rows; {expected}")
    width = len(first)
    label = header.index("label") if header is not None and "label" in header else 0

    def column(c: int) -> str:
        return f"column {c + 1}" + (f" ({header[c]!r})" if header is not None else "")

    for n, line in rows:  # cheap structural check; the numbers are parsed by numpy below
        if line.count(",") + 1 != width:
            raise ValueError(
                f"{path}: line {n} has {line.count(',') + 1} columns, expected {width} "
                f"(as on line {lines[0][0]})"
            )
    try:
        data = np.loadtxt([line for _, line in rows], delimiter=",", ndmin=2, comments=None)
    except ValueError:
        for n, line in rows:  # locate the cell numpy refused (error path only)
            for c, cell in enumerate(line.split(",")):
                if not _is_number(cell.strip()):
                    raise ValueError(
                        f"{path}: line {n}, {column(c)}: {cell.strip()!r} is not a number; "
                        f"{expected}"
                    ) from None
        raise
    if width < 2:
        raise ValueError(f"{path}: only one column; expected a label column and features")
    return data, label, lambda r: rows[r][0], column


def _csv_split(path: Path) -> list[np.ndarray]:
    data, label, line, column = _read_csv(path)
    x = np.delete(data, label, axis=1)
    feature_col = lambda c: c + (c >= label)  # noqa: E731  (index in the file)
    x = _check_features(x, str(path), lambda r, c: f"line {line(r)}, {column(feature_col(c))}")
    y = _check_labels(data[:, label], str(path), lambda r: f"line {line(r)}, {column(label)}")
    return [x, y]


def _load_csv(folder: Path) -> _Loaded | None:
    train = sorted(folder.glob("*train*.csv"))
    test = sorted(folder.glob("*test*.csv"))
    if not (train or test):
        return None
    if not (train and test):
        have = "training" if train else "test"
        raise ValueError(
            f"{folder}: only a {have} CSV found; expected both *train*.csv and *test*.csv"
        )
    return (*_csv_split(train[0]), *_csv_split(test[0]), str(train[0]), str(test[0]))  # type: ignore[return-value]


def load_folder(
    path: str | Path, max_train: int | None = None, max_test: int | None = None, seed: int = 0
) -> Split:
    """Load an image-classification folder: IDX (MNIST file names, ``.gz`` ok, searched in
    ``path``, ``path/raw``, ``path/MNIST/raw``), NPZ (``x_train, y_train, x_test, y_test`` or
    ``train.npz``/``test.npz``) or CSV (``*train*.csv``/``*test*.csv``, label column ``label`` or
    the first). Pixels scaled to [0, 1] (÷255 when a value exceeds 1), standardized with training
    statistics (std floored, see the module docstring); optional stratified subsampling.

    Raises :class:`ValueError` naming the file, row and column for bad input."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"data folder not found: {folder}")
    for loader in (_load_idx, _load_npz, _load_csv):
        arrays = loader(folder)
        if arrays is not None:
            xtr, ytr, xte, yte, train_name, test_name = arrays
            _check_splits(xtr, ytr, xte, yte, train_name, test_name)
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
