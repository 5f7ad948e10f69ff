"""Datasets (spec §5): the embedded synthetic preset, scikit-learn's digits, and a folder loader
for IDX (MNIST layout), NPZ and CSV files.  Every loader returns a :class:`Split` of float32
features standardized with train statistics and int64 labels."""

from __future__ import annotations

import gzip
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["Split", "load_digits", "load_folder", "make_synthetic", "stratified_split"]


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


def _standardize(x_train: Tensor, x_test: Tensor) -> tuple[Tensor, Tensor]:
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-6
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
    """Gaussian mixture of smooth ``side x side`` "images" (spec §5), no download.

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
    x_tr, x_te = _standardize(x_tr, x_te)
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
    standardized with train statistics.  Needs the ``[data]`` extra."""
    try:
        from sklearn.datasets import load_digits as _load
    except ImportError as e:  # pragma: no cover - exercised only without scikit-learn
        raise ImportError(
            "the digits dataset needs scikit-learn: pip install 'parq-optim[data]'"
        ) from e
    d = _load()
    x, y = d.data.astype(np.float32) / 16.0, d.target.astype(np.int64)
    tr, te = stratified_split(y, n_test, seed)
    x_tr, x_te = _standardize(torch.from_numpy(x[tr]), torch.from_numpy(x[te]))
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


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (optionally gzip): magic 0x803 (images) or 0x801 (labels), uint8."""
    path = Path(path)
    raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    if len(raw) < 8:
        raise ValueError(f"truncated IDX file {path}")
    magic = struct.unpack(">I", raw[:4])[0]
    ndim = {0x803: 3, 0x801: 1}.get(magic)
    if ndim is None:
        raise ValueError(f"{path}: not an IDX image file (magic {magic:#010x})")
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    payload = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if payload.size < int(np.prod(dims)):
        raise ValueError(f"truncated IDX file {path}: {payload.size} bytes < {int(np.prod(dims))}")
    return payload[: int(np.prod(dims))].reshape(dims)


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


def _from_npz(root: Path) -> dict[str, np.ndarray] | None:
    if (root / "train.npz").is_file() and (root / "test.npz").is_file():
        out = {}
        for split in ("train", "test"):
            z = {k.lower(): v for k, v in np.load(root / f"{split}.npz").items()}
            out[f"x_{split}"] = z["x"] if "x" in z else z["images"]
            out[f"y_{split}"] = z["y"] if "y" in z else z["labels"]
        return out
    for f in sorted(root.glob("*.npz")):
        z = {k.lower(): v for k, v in np.load(f).items()}
        if {"x_train", "y_train", "x_test", "y_test"} <= set(z):
            return {k: z[k] for k in ("x_train", "y_train", "x_test", "y_test")}
    return None


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    lines = path.read_text().strip().splitlines()
    first = lines[0].split(",")
    try:
        [float(v) for v in first]
        header, rows = None, lines
    except ValueError:
        header, rows = [h.strip().lower() for h in first], lines[1:]
    data = np.array([[float(v) for v in r.split(",")] for r in rows], dtype=np.float64)
    col = header.index("label") if header and "label" in header else 0
    return np.delete(data, col, axis=1), data[:, col]


def _from_csv(root: Path) -> dict[str, np.ndarray] | None:
    tr, te = sorted(root.glob("*train*.csv")), sorted(root.glob("*test*.csv"))
    if not (tr and te):
        return None
    (x_tr, y_tr), (x_te, y_te) = _read_csv(tr[0]), _read_csv(te[0])
    return {"x_train": x_tr, "y_train": y_tr, "x_test": x_te, "y_test": y_te}


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
    train statistics; ``max_train``/``max_test`` subsample stratified by class.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"data folder not found: {root}")
    idx = _find_idx(root)
    if idx is not None:
        arrays = {k: read_idx(p) for k, p in idx.items()}
        for s in ("train", "test"):
            if len(arrays[f"x_{s}"]) != len(arrays[f"y_{s}"]):
                raise ValueError(f"{s}: image and label counts differ in {root}")
        fmt = "idx"
    else:
        arrays = _from_npz(root) or _from_csv(root)  # type: ignore[assignment]
        if arrays is None:
            raise FileNotFoundError(f"no IDX, NPZ or CSV dataset found in {root}")
        fmt = "npz/csv"
    shape = tuple(arrays["x_train"].shape[1:])
    out = {}
    for s, n in (("train", max_train), ("test", max_test)):
        y = np.asarray(arrays[f"y_{s}"])
        if np.any(y < 0) or np.any(y != np.round(y)):
            raise ValueError(f"labels must be non-negative integers ({s} split of {root})")
        x = np.asarray(arrays[f"x_{s}"]).reshape(len(y), -1).astype(np.float32)
        out[s] = _subsample(x, y.astype(np.int64), n, seed)
    scale = 255.0 if max(out["train"][0].max(), out["test"][0].max()) > 1 else 1.0
    x_tr, x_te = _standardize(
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
