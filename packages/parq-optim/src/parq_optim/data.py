"""Datasets: the embedded synthetic preset, scikit-learn's digits, and a folder loader for IDX
(MNIST layout), NPZ and CSV files.  Every loader returns a :class:`Split` of float32 features
standardized with train statistics (:func:`standardize`) and int64 labels.

The loaders validate what they read and raise ``ValueError`` naming the file, the row (line) or
sample, the column and what is expected: empty or truncated files, NaN/inf cells, ragged rows,
non-numeric cells, wrong shapes, negative or fractional labels, train/test feature mismatches.
"""

from __future__ import annotations

import gzip
import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "STD_FLOOR",
    "Split",
    "load_digits",
    "load_folder",
    "make_synthetic",
    "read_csv",
    "read_idx",
    "standardize",
    "stratified_split",
]

STD_FLOOR = 0.1
"""Floor of the per-feature std in :func:`standardize`, relative to the typical feature std."""


@dataclass
class Split:
    """Train/test tensors; ``x`` is ``(n, d)`` float32, ``y`` is ``(n,)`` int64."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    n_classes: int
    name: str = ""
    image_shape: tuple[int, ...] | None = None

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])


def standardize(x_train: Tensor, x_test: Tensor, floor: float = STD_FLOOR) -> tuple[Tensor, Tensor]:
    """Standardize both splits per feature with the train mean and a floored train std.

    ``x' = (x - mean_j) / max(std_j, floor * s)`` where ``std_j`` is the sample std (ddof=1) of
    feature ``j`` on the train split and ``s`` the root mean square of all ``std_j``. Without the
    floor, a feature that is (nearly) constant on the train split (a border pixel of MNIST) is
    divided by ~0 and reaches |x'| ~ 1e5 on the test split; with it, no feature is amplified more
    than ``1 / floor`` times beyond the typical feature. When every feature is constant the data
    are only centred.
    """
    if not floor > 0:
        raise ValueError(f"standardize: floor must be > 0, got {floor}")
    mu = x_train.mean(0)
    if x_train.shape[0] > 1:
        sd = x_train.std(0)
    else:
        sd = torch.zeros_like(mu)
    ref = float(sd.square().mean().sqrt())
    sd = torch.ones_like(sd) if ref == 0.0 else sd.clamp(min=floor * ref)
    return (x_train - mu) / sd, (x_test - mu) / sd


def make_synthetic(
    seed: int = 0,
    n_train: int = 2000,
    n_test: int = 1000,
    n_classes: int = 10,
    n_modes: int = 2,
    side: int = 8,
    proto_rms: float = 4 / 3,
    noise_std: float = 1.0,
) -> Split:
    """Gaussian mixture of smooth ``side x side`` "images", no download (the package's embedded
    default: it shows the 1-bit gap between STE and PARQ on a small MLP).

    One generator seeded with ``seed`` draws ``n_classes * n_modes`` prototypes (i.i.d. N(0,1)
    pixels, 3x3 mean filter with zero padding, rescaled to per-pixel RMS ``proto_rms``); samples are
    ``x = mu_{y, j} + noise_std * N(0, I)`` with balanced shuffled labels and uniform modes.
    """
    if min(n_train, n_test, n_classes, n_modes, side) < 1:
        raise ValueError("make_synthetic: sizes must be >= 1")
    g = torch.Generator().manual_seed(seed)
    proto = torch.randn(n_classes * n_modes, 1, side, side, generator=g)
    proto = F.avg_pool2d(proto, 3, stride=1, padding=1, count_include_pad=True)
    rms = proto.flatten(1).norm(dim=1) / side
    proto = (proto.flatten(1) * (proto_rms / rms)[:, None]).view(n_classes, n_modes, side * side)

    def draw(n: int) -> tuple[Tensor, Tensor]:
        y = (torch.arange(n) % n_classes)[torch.randperm(n, generator=g)]
        mode = torch.randint(0, n_modes, (n,), generator=g)
        x = proto[y, mode] + noise_std * torch.randn(n, side * side, generator=g)
        return x, y

    x_tr, y_tr = draw(n_train)
    x_te, y_te = draw(n_test)
    x_tr, x_te = standardize(x_tr, x_te)
    return Split(x_tr, y_tr, x_te, y_te, n_classes, "synthetic", (1, side, side))


def stratified_split(y: np.ndarray, n_test: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, test)`` with ``n_test`` test samples spread over classes proportionally."""
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    test: list[np.ndarray] = []
    share = n_test / len(y)
    counts = {c: round(share * int((y == c).sum())) for c in classes}
    diff = n_test - sum(counts.values())
    for c in classes[: abs(diff)]:
        counts[c] += int(np.sign(diff))
    for c in classes:
        idx = rng.permutation(np.flatnonzero(y == c))
        test.append(idx[: counts[c]])
    te = np.sort(np.concatenate(test))
    tr = np.setdiff1d(np.arange(len(y)), te)
    return tr, te


def load_digits(seed: int = 0, n_test: int = 360) -> Split:
    """scikit-learn's bundled 8x8 digits (1,797 images): pixels/16, stratified 1,437/360 split,
    standardized with train statistics (:func:`standardize`).  Needs the ``[data]`` extra."""
    try:
        from sklearn.datasets import load_digits as _load
    except ImportError as e:  # pragma: no cover - exercised only without scikit-learn
        raise ImportError(
            "the digits dataset needs scikit-learn: pip install 'parq-optim[data]'"
        ) from e
    d = _load()
    x, y = d.data.astype(np.float32) / 16.0, d.target.astype(np.int64)
    tr, te = stratified_split(y, n_test, seed)
    x_tr, x_te = standardize(torch.from_numpy(x[tr]), torch.from_numpy(x[te]))
    return Split(
        x_tr, torch.from_numpy(y[tr]), x_te, torch.from_numpy(y[te]), 10, "digits", (1, 8, 8)
    )


# ---- folder loaders ---------------------------------------------------------------------------
_IDX = {
    "x_train": ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    "y_train": ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    "x_test": ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    "y_test": ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}
MAX_CLASSES = 100_000


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (optionally gzip): magic 0x803 (images) or 0x801 (labels), uint8."""
    path = Path(path)
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError; a cut gzip is an EOFError
        raise ValueError(f"{path}: cannot read the file ({e or type(e).__name__})") from e
    if len(raw) < 8:
        raise ValueError(f"truncated IDX file {path}: {len(raw)} bytes, not even a header")
    magic = struct.unpack(">I", raw[:4])[0]
    ndim = {0x803: 3, 0x801: 1}.get(magic)
    if ndim is None:
        raise ValueError(
            f"{path}: not an IDX image file (magic {magic:#010x}; expected 0x00000803 for images "
            "or 0x00000801 for labels)"
        )
    if len(raw) < 4 + 4 * ndim:
        raise ValueError(f"truncated IDX file {path}: the header is cut short")
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    payload = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    size = int(np.prod(dims))
    if size == 0:
        raise ValueError(f"{path}: holds no samples (dims {dims})")
    if payload.size < size:
        raise ValueError(f"truncated IDX file {path}: {payload.size} bytes < {size}")
    return payload[:size].reshape(dims)


def _find_idx(root: Path) -> dict[str, Path] | None:
    for d in (root, root / "raw", root / "MNIST" / "raw"):
        found = {}
        for key, names in _IDX.items():
            for name in names:
                for cand in (d / name, d / f"{name}.gz"):
                    if cand.is_file():
                        found[key] = cand
                        break
                if key in found:
                    break
        if len(found) == 4:
            return found
    return None


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    """All arrays of one ``.npz`` file, keys lower-cased."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k.lower(): np.asarray(z[k]) for k in z.files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable .npz file ({e or type(e).__name__})") from e


def _pick(z: dict[str, np.ndarray], path: Path, *names: str) -> np.ndarray:
    for name in names:
        if name in z:
            return z[name]
    raise ValueError(
        f"{path} has no array named {' or '.join(repr(n) for n in names)} "
        f"(it holds: {', '.join(sorted(z)) or 'nothing'})"
    )


def _from_npz(root: Path) -> dict[str, tuple[np.ndarray, str]] | None:
    """``{x_train: (array, where), ...}`` from ``train.npz``/``test.npz`` or one Keras-style file."""
    if (root / "train.npz").is_file() and (root / "test.npz").is_file():
        out = {}
        for split in ("train", "test"):
            path = root / f"{split}.npz"
            z = _load_npz(path)
            out[f"x_{split}"] = (_pick(z, path, "x", "images"), f"{path} (x)")
            out[f"y_{split}"] = (_pick(z, path, "y", "labels"), f"{path} (y)")
        return out
    keys = ("x_train", "y_train", "x_test", "y_test")
    files = sorted(root.glob("*.npz"))
    for f in files:
        z = _load_npz(f)
        if set(keys) <= set(z):
            return {k: (z[k], f"{f} ({k})") for k in keys}
    if files:
        raise ValueError(
            f"no .npz file in {root} holds x_train, y_train, x_test and y_test "
            f"(and there is no train.npz/test.npz pair): {', '.join(f.name for f in files)}"
        )
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_csv(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV of samples: ``(features (n, d) float64, labels (n,) float64)``.

    The label is the column named ``label`` (case-insensitive) or else the first column; a first
    row that is not all numbers is a header. Blank lines are skipped. Raises ``ValueError`` naming
    the file, line and column for an empty file, ragged rows, non-numeric, NaN or inf cells.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a UTF-8 text file ({e.reason})") from e
    rows = [(no, line) for no, line in enumerate(text.splitlines(), 1) if line.strip()]
    expected = (
        "a header row (optional) and rows of numbers, with a 'label' column or the label first"
    )
    if not rows:
        raise ValueError(f"{path} is empty; expected {expected}")
    first = [c.strip() for c in rows[0][1].split(",")]
    header = None
    if not all(_is_number(c) for c in first):
        header = [c.lower() for c in first]
        rows = rows[1:]
        if not rows:
            raise ValueError(f"{path} has a header but no data rows; expected {expected}")
    width = len(first)
    if width < 2:
        raise ValueError(f"{path}: one column only; expected a label column and feature columns")

    def column(j: int) -> str:
        return f"column {j + 1} ({header[j]!r})" if header else f"column {j + 1}"

    data = np.empty((len(rows), width), dtype=np.float64)
    for r, (no, line) in enumerate(rows):
        cells = line.split(",")
        if len(cells) != width:
            raise ValueError(
                f"{path} line {no}: {len(cells)} values, expected {width} like the first row"
            )
        try:
            data[r] = [float(c) for c in cells]
        except ValueError:
            j = next(j for j, c in enumerate(cells) if not _is_number(c))
            raise ValueError(
                f"{path} line {no}, {column(j)}: {cells[j].strip()!r} is not a number"
            ) from None
    bad = ~np.isfinite(data)
    if bad.any():
        r, j = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(
            f"{path} line {rows[r][0]}, {column(j)}: {data[r, j]} (every cell must be a finite "
            f"number; {int(bad.sum())} cell(s) are NaN or inf)"
        )
    col = header.index("label") if header and "label" in header else 0
    return np.delete(data, col, axis=1), data[:, col]


def _from_csv(root: Path) -> dict[str, tuple[np.ndarray, str]] | None:
    tr, te = sorted(root.glob("*train*.csv")), sorted(root.glob("*test*.csv"))
    if not (tr or te):
        return None
    if not (tr and te):
        have, lack = ("train", "test") if tr else ("test", "train")
        raise ValueError(f"{root} has a *{have}*.csv but no *{lack}*.csv file")
    out = {}
    for split, path in (("train", tr[0]), ("test", te[0])):
        x, y = read_csv(path)
        out[f"x_{split}"] = (x, f"{path}")
        out[f"y_{split}"] = (y, f"{path} (label column)")
    return out


def _check_split(x: np.ndarray, y: np.ndarray, wx: str, wy: str) -> np.ndarray:
    """Validate one split; returns the labels as int64."""
    if x.dtype.kind not in "biuf":
        raise ValueError(f"{wx}: holds {x.dtype} values; expected real numbers")
    if y.dtype.kind not in "biuf":
        raise ValueError(f"{wy}: holds {y.dtype} values; expected integer labels")
    if x.ndim < 2:
        raise ValueError(f"{wx}: shape {x.shape}; expected one row (or image) per sample")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{wy}: shape {y.shape}; expected one label per sample")
    if len(x) == 0 or x[0].size == 0:
        raise ValueError(f"{wx}: holds no samples or no features (shape {x.shape})")
    if len(x) != len(y):
        raise ValueError(f"{wx} has {len(x)} samples but {wy} has {len(y)} labels")
    if x.dtype.kind == "f":
        bad = ~np.isfinite(x)
        if bad.any():
            where = tuple(int(v) for v in np.argwhere(bad)[0])
            raise ValueError(
                f"{wx}: sample {where[0]}, feature {where[1:]} is {x[where]} (every value must "
                f"be finite; {int(bad.sum())} are NaN or inf)"
            )
    bad = ~np.isfinite(y) | (y < 0) | (y != np.round(y)) if y.dtype.kind == "f" else (y < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{wy}: label of sample {i} is {y[i]}; labels must be non-negative integers"
        )
    if y.max() >= MAX_CLASSES:
        raise ValueError(f"{wy}: label {y.max()} is too large (at most {MAX_CLASSES} classes)")
    return y.astype(np.int64)


def _subsample(x: np.ndarray, y: np.ndarray, n: int | None, seed: int):
    if n is None or n >= len(y):
        return x, y
    _, keep = stratified_split(y, n, seed)
    return x[keep], y[keep]


def load_folder(
    path: str | os.PathLike,
    max_train: int | None = None,
    max_test: int | None = None,
    seed: int = 0,
) -> Split:
    """Load IDX (MNIST layout, in ``path``, ``path/raw`` or ``path/MNIST/raw``), NPZ or CSV files.

    Images are flattened to float32, divided by 255 when the max exceeds 1, and standardized with
    train statistics (:func:`standardize`); ``max_train``/``max_test`` subsample stratified by
    class. Invalid files raise ``ValueError`` naming the file and what is wrong.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"data folder not found: {root}")
    for name, n in (("max_train", max_train), ("max_test", max_test)):
        if n is not None and n < 1:
            raise ValueError(f"{name} must be >= 1, got {n}")
    idx = _find_idx(root)
    arrays: dict[str, tuple[np.ndarray, str]] | None
    if idx is not None:
        arrays = {k: (read_idx(p), str(p)) for k, p in idx.items()}
        fmt = "idx"
    else:
        arrays, fmt = _from_npz(root), "npz"
        if arrays is None:
            arrays, fmt = _from_csv(root), "csv"
        if arrays is None:
            raise ValueError(
                f"no dataset found in {root}: expected MNIST-style IDX files (train-images-idx3-"
                "ubyte[.gz] ...), a .npz with x_train/y_train/x_test/y_test, train.npz + test.npz, "
                "or *train*.csv + *test*.csv"
            )
    out = {}
    for s, n in (("train", max_train), ("test", max_test)):
        (x, wx), (y, wy) = arrays[f"x_{s}"], arrays[f"y_{s}"]
        labels = _check_split(x, y, wx, wy)
        flat = x.reshape(len(labels), -1).astype(np.float32)
        out[s] = _subsample(flat, labels, n, seed)
    shape = tuple(arrays["x_train"][0].shape[1:])
    if shape != tuple(arrays["x_test"][0].shape[1:]):
        raise ValueError(
            f"train and test samples differ in shape: {shape} in {arrays['x_train'][1]} vs "
            f"{tuple(arrays['x_test'][0].shape[1:])} in {arrays['x_test'][1]}"
        )
    big = max(float(out["train"][0].max()), float(out["test"][0].max()))
    scale = 255.0 if big > 1 else 1.0
    x_tr, x_te = standardize(
        torch.from_numpy(out["train"][0] / scale), torch.from_numpy(out["test"][0] / scale)
    )
    n_classes = int(max(out["train"][1].max(), out["test"][1].max())) + 1
    image = (1, *shape) if len(shape) == 2 else (shape if len(shape) == 3 else None)
    return Split(
        x_tr.float(),
        torch.from_numpy(out["train"][1]),
        x_te.float(),
        torch.from_numpy(out["test"][1]),
        n_classes,
        f"{root.name}({fmt})",
        image,
    )
