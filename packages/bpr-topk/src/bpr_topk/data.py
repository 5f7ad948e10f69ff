"""Data: the 6-CSV folder loader/writer and the embedded generators.

Generators: ``synthetic7`` (paper Sec. 5.1 / Fig. 2), ``toy9`` (App. B.2), and three panels of ours,
``panel`` (Cook-like, for the loader and scale), ``hotspots`` (the CLI demo's default: covariates
carry the signal, site history does not) and ``zeroinflated`` (more than 90 % zeros, like the
paper's cranes data, with a known best ranking).

Folder layout: ``{train,valid,test}_{x,y}.csv``. In every file the first two columns are the site
id and the time index (normally ``geoid``, ``timestep``); y has one further column (the target),
all other x columns are features.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

SPLITS = ("train", "valid", "test")


@dataclass
class Split:
    """One split as dense tensors, sites sorted by id and time ascending.

    Attributes:
        X: features ``[T, S, F]`` float32 (standardised with training statistics).
        y: counts ``[T, S]`` (int64 when integral, else float32).
        time: time index ``[T, S]`` float32, offset so that train starts at 0.
        timesteps: raw time values, length T.
    """

    X: Tensor
    y: Tensor
    time: Tensor
    timesteps: list[float]

    @property
    def num_steps(self) -> int:
        return int(self.y.shape[0])


@dataclass
class TopKData:
    """A whole dataset: three splits (train / valid / test) plus sites, features and metadata.

    ``oracle_scores`` (synthetic data with a known best ranking only, else None): the true
    expected count of every site ``[S]``, the same at every step.
    """

    train: Split
    valid: Split
    test: Split
    site_ids: list[str]
    feature_names: list[str]
    target_name: str = "counts"
    key_names: tuple[str, str] = ("geoid", "timestep")
    feature_mean: Tensor = field(default_factory=lambda: torch.zeros(0))
    feature_std: Tensor = field(default_factory=lambda: torch.ones(0))
    time_offset: float = 0.0
    name: str = "data"
    oracle_scores: Tensor | None = None

    @property
    def num_sites(self) -> int:
        return len(self.site_ids)

    @property
    def num_features(self) -> int:
        return len(self.feature_names)

    def split(self, name: str) -> Split:
        if name not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}; got {name!r}")
        return getattr(self, name)  # type: ignore[no-any-return]

    def y_history(self) -> tuple[Tensor, list[float]]:
        """All counts in time order across splits ``[T_all, S]`` and their raw timesteps."""
        ys = torch.cat([self.split(s).y.to(torch.float32) for s in SPLITS])
        ts = [t for s in SPLITS for t in self.split(s).timesteps]
        return ys, ts


# ----------------------------------------------------------------------------------- loader


def _parse_key(value: str) -> str:
    """Site ids are kept as strings; numeric ids are normalised (``17031.0`` → ``17031``)."""
    v = value.strip()
    try:
        f = float(v)
        return str(int(f)) if f.is_integer() else v
    except ValueError:
        return v


def _site_sort_key(site: str) -> tuple[int, float | str]:
    try:
        return (0, float(site))
    except ValueError:
        return (1, site)


def _read_csv(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """Header (pandas-style ``.N`` suffixes for repeats), data rows and their line numbers."""
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise ValueError(f"{path} is empty; expected a header line and one row per (site, time)")
    header = [h.strip() for h in rows[0]]
    seen: dict[str, int] = {}
    names = []
    for h in header:  # pandas-style suffixes for repeated names: timestep, timestep.1, ...
        names.append(h if h not in seen else f"{h}.{seen[h]}")
        seen[h] = seen.get(h, 0) + 1
    if len(names) < 2:
        raise ValueError(f"{path}: needs at least the site id and time columns; got {names}")
    body, lines = [], []
    for number, r in enumerate(rows[1:], start=2):
        if not r:
            continue
        if len(r) != len(names):
            raise ValueError(f"{path}: row {number} has {len(r)} fields, header has {len(names)}")
        body.append(r)
        lines.append(number)
    if not body:
        raise ValueError(f"{path} has a header but no data rows; expected one row per (site, time)")
    return names, body, lines


def _to_float(path: Path, column: str, values: list[str], lines: list[int]) -> np.ndarray:
    """A numeric column (an empty cell is NaN); a non-number names its row and column."""
    out = np.empty(len(values))
    for i, v in enumerate(values):
        text = v.strip()
        try:
            out[i] = float(text) if text != "" else math.nan
        except ValueError:
            raise ValueError(
                f"{path}: row {lines[i]}, column {column!r}: {v!r} is not a number"
            ) from None
    return out


def _check_finite(path: Path, column: str, values: np.ndarray, lines: list[int], what: str) -> None:
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        i = int(bad[0])
        shown = "an empty cell or NaN" if math.isnan(values[i]) else f"{values[i]:g}"
        raise ValueError(
            f"{path}: row {lines[i]}, column {column!r} holds {shown} ({len(bad)} such cell(s)); "
            f"{what} must be finite numbers"
        )


def _keys(
    path: Path, body: list[list[str]], names: list[str], lines: list[int]
) -> list[tuple[str, float]]:
    sites = [_parse_key(r[0]) for r in body]
    for i, site in enumerate(sites):
        if site == "":
            raise ValueError(
                f"{path}: row {lines[i]}, column {names[0]!r}: empty site id; the key columns "
                "(site id, time) must hold a value in every row"
            )
        if site.lower() in _NON_FINITE:
            raise ValueError(
                f"{path}: row {lines[i]}, column {names[0]!r} (the site id key column) holds "
                f"{site!r}; the key columns must not hold NaN or inf"
            )
    times = _to_float(path, names[1], [r[1] for r in body], lines)
    _check_finite(path, names[1], times, lines, "time indices (the second key column)")
    return list(zip(sites, times.tolist()))


_NON_FINITE = ("nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def _check_key_order(path: Path, names: list[str], ref: tuple[str, str], ref_file: str) -> None:
    """The first two columns must be the site id and time columns named as in ``ref_file``.

    Files whose first two columns carry other names are read by position; the names are only
    enforced when they show a mistake: the two key columns swapped, or another column (a target
    or feature) placed before them.
    """
    first = (names[0], names[1])
    if first == ref:
        return
    if first == (ref[1], ref[0]):
        raise ValueError(
            f"{path}: the key columns are swapped ({names[0]!r} first, {names[1]!r} second); "
            f"{ref_file} has the site id {ref[0]!r} first and the time {ref[1]!r} second, and "
            "every file must start with the site id, then the time"
        )
    if ref[0] in names and ref[1] in names:
        where = f"{names.index(ref[0]) + 1} and {names.index(ref[1]) + 1}"
        what = "the target" if path.name.endswith("_y.csv") else "the features"
        raise ValueError(
            f"{path}: column {names[0]!r} is placed before the key columns {ref[0]!r} and "
            f"{ref[1]!r} (found as columns {where}); every file must start with the site id, "
            f"then the time, then {what}"
        )


def _grid(
    path: Path, keys: list[tuple[str, float]], sites: list[str], what: str
) -> tuple[np.ndarray, list[float]]:
    """Map rows to a rectangular [T, S] panel; returns row index per cell and the timesteps."""
    if len(set(keys)) != len(keys):
        dup = next(k for k, n in _count(keys).items() if n > 1)
        raise ValueError(f"{path}: duplicate key site={dup[0]} time={dup[1]:g} in {what}")
    times = sorted({t for _, t in keys})
    site_pos = {s: i for i, s in enumerate(sites)}
    time_pos = {t: i for i, t in enumerate(times)}
    index = np.full((len(times), len(sites)), -1, dtype=np.int64)
    for row, (s, t) in enumerate(keys):
        index[time_pos[t], site_pos[s]] = row
    if (index < 0).any():
        ti, si = np.argwhere(index < 0)[0]
        raise ValueError(
            f"{path}: panel is not rectangular; missing site={sites[si]} time={times[ti]:g}"
        )
    return index, times


def _count(keys: list[tuple[str, float]]) -> dict[tuple[str, float], int]:
    out: dict[tuple[str, float], int] = {}
    for k in keys:
        out[k] = out.get(k, 0) + 1
    return out


class AmbiguousTargetError(ValueError):
    """The y files hold several target columns and none was chosen (``target=``).

    Attributes:
        path: the y file.
        targets: its target columns (after the two key columns).
    """

    def __init__(self, path: Path, targets: list[str]) -> None:
        self.path, self.targets = path, list(targets)
        super().__init__(
            f"{path}: several target columns {self.targets}; choose one with "
            f"target={self.targets[0]!r} (any of {self.targets})"
        )


def _reference_keys(headers: dict[str, list[str]]) -> tuple[tuple[str, str], str]:
    """The key-column names most of the six files agree on, and the first file that has them.

    A file whose first two columns are the reference pair swapped (or preceded by another column)
    is the one reported, whichever split it belongs to: with ``train_x.csv`` swapped the message
    names ``train_x.csv``, not the y file it was compared with.
    """
    pairs = [(names[0], names[1]) for names in headers.values()]
    counts: dict[tuple[str, str], int] = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    best = max(counts.values())
    ref = next(p for p in pairs if counts[p] == best)  # ties: the earliest file's pair
    ref_file = next(f for f, names in headers.items() if (names[0], names[1]) == ref)
    return ref, f"{ref_file}.csv"


def load_topk_folder(
    path: str | Path,
    target: str | None = None,
    standardize: bool = True,
    drop_duplicate_columns: bool = True,
    include_time_feature: bool = False,
    time_offset: float | None = None,
    allow_fractional: bool = False,
) -> TopKData:
    """Load and validate a folder in the 6-CSV layout ``{train,valid,test}_{x,y}.csv``.

    Args:
        path: the folder.
        target: the y column to use when y has several besides the two keys.
        standardize: z-score features with training mean/std (std 0 → 1 with a warning).
        drop_duplicate_columns: drop features that repeat another column (pandas ``.N`` suffix
            and identical values, e.g. Cook's second ``timestep``).
        include_time_feature: add the raw time index as a feature (the official model did).
        time_offset: subtracted from the raw time index; default the first training timestep.
        allow_fractional: keep a target with non-integral values as float counts (with a
            warning) instead of raising; only the truncated-normal model can use them.

    Raises:
        FileNotFoundError: a file of the layout is missing.
        ValueError: an empty file or one without data rows, misaligned or duplicate keys,
            key columns swapped or placed after another column, NaN/inf in a key column,
            differing site sets or feature columns between the six files (the x files may
            order their features differently: columns are matched by name), non-numeric or
            non-finite (NaN/inf/empty) cells, negative or (unless ``allow_fractional``)
            fractional counts. The message names the file, the row and the column.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"data folder {root} does not exist")
    for s in SPLITS:
        for part in ("x", "y"):
            if not (root / f"{s}_{part}.csv").is_file():
                raise FileNotFoundError(
                    f"missing {s}_{part}.csv in {root}; expected the 6-file layout "
                    "{train,valid,test}_{x,y}.csv"
                )
    raw: dict[str, dict[str, object]] = {}
    feature_names: list[str] | None = None
    target_name: str | None = None
    site_set: list[str] | None = None
    parsed = {
        f"{s}_{part}": _read_csv(root / f"{s}_{part}.csv") for s in SPLITS for part in ("x", "y")
    }
    key_names, ref_file = _reference_keys({f: v[0] for f, v in parsed.items()})
    for s in SPLITS:
        px, py = root / f"{s}_x.csv", root / f"{s}_y.csv"
        xn, xb, xl = parsed[f"{s}_x"]
        yn, yb, yl = parsed[f"{s}_y"]
        _check_key_order(px, xn, key_names, ref_file)
        _check_key_order(py, yn, key_names, ref_file)
        targets = yn[2:]
        if not targets:
            raise ValueError(f"{py}: no target column after the site and time columns")
        if target is None and len(targets) > 1:
            raise AmbiguousTargetError(py, targets)
        tname = target if target is not None else targets[0]
        if tname not in targets:
            raise ValueError(f"{py}: target column {tname!r} not found; columns are {targets}")
        if target_name is not None and tname != target_name:
            raise ValueError(
                f"{py}: target column {tname!r} differs from train_y.csv's {target_name!r}"
            )
        feats = xn[2:]
        if feature_names is None:
            feature_names, target_name = feats, tname
        elif sorted(feats) != sorted(feature_names):  # any order: columns are matched by name
            missing = [c for c in feature_names if c not in feats]
            extra = [c for c in feats if c not in feature_names]
            parts = [f"missing {missing}" if missing else "", f"extra {extra}" if extra else ""]
            if not missing and not extra:
                parts = ["a column name repeats a different number of times"]
            raise ValueError(
                f"{px}: feature columns differ from train_x.csv ({', '.join(p for p in parts if p)}); "
                "every x file needs the same feature columns (any order)"
            )
        xkeys = _keys(px, xb, xn, xl)
        ykeys = _keys(py, yb, yn, yl)
        if set(xkeys) != set(ykeys):
            diff = sorted(set(xkeys) ^ set(ykeys))[0]
            raise ValueError(
                f"{px} ({len(xkeys)} rows) and {py} ({len(ykeys)} rows) have different "
                f"(site, time) keys, e.g. site={diff[0]} time={diff[1]:g} is in only one of them"
            )
        sites = sorted({k[0] for k in xkeys}, key=_site_sort_key)
        if site_set is None:
            site_set = sites
        elif sites != site_set:
            only = sorted(set(sites) ^ set(site_set), key=_site_sort_key)[:3]
            raise ValueError(
                f"{px}: site set differs from the train split's ({len(sites)} vs "
                f"{len(site_set)} sites; e.g. sites {only})"
            )
        xi, times = _grid(px, xkeys, sites, "x")
        yi, _ = _grid(py, ykeys, sites, "y")
        cols = {}
        for j, name in enumerate(xn):
            if j == 0:
                continue
            values = _to_float(px, name, [r[j] for r in xb], xl)
            if j >= 2:
                _check_finite(px, name, values, xl, "features")
            cols[name] = values[xi]
        yraw = _to_float(py, tname, [r[yn.index(tname)] for r in yb], yl)
        _check_finite(py, tname, yraw, yl, "counts")
        negative = np.flatnonzero(yraw < 0)
        if len(negative):
            i = int(negative[0])
            raise ValueError(
                f"{py}: row {yl[i]}, column {tname!r}: negative count {yraw[i]:g}; "
                "counts must be non-negative integers"
            )
        fractional = np.flatnonzero(np.mod(yraw, 1) != 0)
        if len(fractional) and not allow_fractional:
            i = int(fractional[0])
            raise ValueError(
                f"{py}: row {yl[i]}, column {tname!r}: {yraw[i]:g} is not a whole number "
                f"({len(fractional)} such cell(s)); counts must be non-negative integers "
                "(allow_fractional=True keeps float targets)"
            )
        yv = yraw[yi]
        raw[s] = {"cols": cols, "y": yv, "times": times, "time_col": cols[xn[1]]}
    assert feature_names is not None and target_name is not None and site_set is not None
    kept = list(feature_names)
    if drop_duplicate_columns:
        kept = _drop_duplicates(kept, raw["train"]["cols"], key_names[1])  # type: ignore[arg-type]
    integral = all(np.equal(np.mod(raw[s]["y"], 1), 0).all() for s in SPLITS)  # type: ignore[call-overload]
    if not integral:
        warnings.warn(f"target {target_name!r} is not integral; keeping float counts", stacklevel=2)
    offset = float(raw["train"]["times"][0]) if time_offset is None else float(time_offset)  # type: ignore[index]
    splits: dict[str, Split] = {}
    for s in SPLITS:
        cols = raw[s]["cols"]  # type: ignore[assignment]
        time = torch.as_tensor(raw[s]["time_col"] - offset, dtype=torch.float32)  # type: ignore[operator]
        feats_arr = [cols[c] for c in kept]  # type: ignore[index]
        X = torch.as_tensor(
            np.stack(feats_arr, -1) if feats_arr else np.zeros((*time.shape, 0)),
            dtype=torch.float32,
        )
        if include_time_feature:
            X = torch.cat([X, time.unsqueeze(-1)], -1)
        y_np = raw[s]["y"]
        y = torch.as_tensor(y_np, dtype=torch.int64 if integral else torch.float32)
        splits[s] = Split(X, y, time, [float(t) for t in raw[s]["times"]])  # type: ignore[attr-defined]
    names = kept + (["time"] if include_time_feature else [])
    mean, std = torch.zeros(len(names)), torch.ones(len(names))
    if standardize and names:
        flat = splits["train"].X.reshape(-1, len(names))
        mean, std = flat.mean(0), flat.std(0)
        zero = std == 0
        if bool(zero.any()):
            bad = [n for n, z in zip(names, zero.tolist()) if z]
            warnings.warn(f"features {bad} are constant in train; using std=1", stacklevel=2)
            std = torch.where(zero, torch.ones_like(std), std)
        for sp in splits.values():
            sp.X = (sp.X - mean) / std
    return TopKData(
        splits["train"],
        splits["valid"],
        splits["test"],
        site_ids=site_set,
        feature_names=names,
        target_name=target_name,
        key_names=key_names,
        feature_mean=mean,
        feature_std=std,
        time_offset=offset,
        name=root.name,
    )


def _drop_duplicates(features: list[str], cols: dict[str, np.ndarray], time_key: str) -> list[str]:
    """Drop ``name.N`` columns whose values repeat the column ``name`` (incl. the time key)."""
    kept = []
    for name in features:
        m = re.fullmatch(r"(.+)\.(\d+)", name)
        base = m.group(1) if m else None
        if base is not None and base in cols and np.array_equal(cols[base], cols[name]):
            continue
        kept.append(name)
    return kept


def write_topk_folder(data: TopKData, path: str | Path) -> Path:
    """Write ``data`` in the 6-CSV layout (features un-standardised) so the loader can read it."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    key_site, key_time = data.key_names
    for s in SPLITS:
        sp = data.split(s)
        X = sp.X * data.feature_std + data.feature_mean
        with (
            (root / f"{s}_x.csv").open("w", newline="") as fx,
            (root / f"{s}_y.csv").open("w", newline="") as fy,
        ):
            wx, wy = csv.writer(fx), csv.writer(fy)
            wx.writerow([key_site, key_time, *data.feature_names])
            wy.writerow([key_site, key_time, data.target_name])
            for ti, t in enumerate(sp.timesteps):
                for si, site in enumerate(data.site_ids):
                    tt = f"{t:g}"
                    wx.writerow([site, tt, *(repr(float(v)) for v in X[ti, si].tolist())])
                    wy.writerow([site, tt, sp.y[ti, si].item()])
    return root


# ------------------------------------------------------------------------------ generators


def _standardized_panel(
    X: np.ndarray,
    ys: np.ndarray,
    steps: tuple[int, int, int] | list[int],
    names: list[str],
    name: str,
    oracle_scores: Tensor | None = None,
) -> TopKData:
    """A generated panel ``X`` [T, S, F] with counts ``ys`` [T, S], features standardised with the
    train steps' mean and std (ddof 1; a constant feature keeps std 1), cut into train/valid/test
    steps in order."""
    flat = X[: steps[0]].reshape(-1, len(names))
    mean, std = flat.mean(0), flat.std(0, ddof=1)
    std = np.where(std > 0, std, 1.0)
    X = (X - mean) / std
    splits = {}
    t0 = 0
    for split, n in zip(SPLITS, steps):
        splits[split] = _panel_split(ys[t0 : t0 + n], X[t0 : t0 + n], t0)
        t0 += n
    return TopKData(
        splits["train"],
        splits["valid"],
        splits["test"],
        site_ids=[str(i) for i in range(X.shape[1])],
        feature_names=names,
        target_name="counts",
        feature_mean=torch.as_tensor(mean, dtype=torch.float32),
        feature_std=torch.as_tensor(std, dtype=torch.float32),
        name=name,
        oracle_scores=oracle_scores,
    )


def _panel_split(y: np.ndarray, X: np.ndarray | None, t0: int, offset: float = 0.0) -> Split:
    T, S = y.shape
    Xt = torch.zeros(T, S, 0) if X is None else torch.as_tensor(X, dtype=torch.float32)
    time = torch.arange(t0, t0 + T, dtype=torch.float32).unsqueeze(1).expand(T, S) - offset
    return Split(Xt, torch.as_tensor(y, dtype=torch.int64), time, [float(t0 + i) for i in range(T)])


SYNTHETIC7_MEANS = (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 100.0)


def make_synthetic7(
    seed: int = 0, num_train: int = 500, num_valid: int = 100, num_test: int = 500
) -> TopKData:
    """The paper's 7-site synthetic data (Sec. 5.1 / Fig. 2), K = 5.

    ``y_ts = max(round(N(μ_s, 0.3²)), 0)`` with μ = (10, 20, 30, 40, 50, 60, 100), per-site
    ``RandomState(10000·seed + s·123456)`` as in the official code; valid/test use seeds + 1, + 2.
    """
    sizes = {"train": num_train, "valid": num_valid, "test": num_test}
    splits = {}
    t0 = 0
    for i, s in enumerate(SPLITS):
        cols = []
        for site, mu in enumerate(SYNTHETIC7_MEANS):
            rng = np.random.RandomState(10000 * (seed + i) + site * 123456)
            cols.append(np.maximum(np.round(rng.normal(mu, 0.3, sizes[s])), 0))
        splits[s] = _panel_split(np.stack(cols, 1), None, t0)
        t0 += sizes[s]
    return TopKData(
        splits["train"],
        splits["valid"],
        splits["test"],
        site_ids=[str(i) for i in range(len(SYNTHETIC7_MEANS))],
        feature_names=[],
        target_name="counts",
        name="synthetic7",
    )


TOY9_TYPES = (("A", 7.0, 1.0), ("B", 10.0, 0.65), ("C", 80.0, 0.10))


def make_toy9(num_samples: int, generator: torch.Generator | None = None) -> Tensor:
    """App. B.2 toy: M independent draws ``[M, 9]`` of 3 A sites (7 always), 3 B sites
    (10 w.p. 0.65) and 3 C sites (80 w.p. 0.10)."""
    cols = []
    for _, value, prob in TOY9_TYPES:
        u = torch.rand(num_samples, 3, generator=generator, dtype=torch.float64)
        cols.append(torch.where(u < prob, value, 0.0))
    return torch.cat(cols, dim=1)


def toy9_outcomes() -> tuple[Tensor, Tensor]:
    """All 2⁶ outcomes of the toy's random B and C sites: values ``[64, 9]``, probabilities ``[64]``."""
    vals, probs = [], []
    for bits in itertools.product((0, 1), repeat=6):
        y = [7.0] * 3
        p = 1.0
        for j, on in enumerate(bits):
            value, prob = (10.0, 0.65) if j < 3 else (80.0, 0.10)
            y.append(value if on else 0.0)
            p *= prob if on else 1 - prob
        vals.append(y)
        probs.append(p)
    return torch.tensor(vals, dtype=torch.float64), torch.tensor(probs, dtype=torch.float64)


def _smooth_field(rng: np.random.Generator, side: int, length_scale: float = 3.0) -> np.ndarray:
    noise = rng.standard_normal((side, side))
    half = int(3 * length_scale)
    k = np.exp(-0.5 * (np.arange(-half, half + 1) / length_scale) ** 2)
    k /= k.sum()
    pad = np.pad(noise, half, mode="wrap")
    sm = np.apply_along_axis(lambda v: np.convolve(v, k, mode="valid"), 0, pad)
    sm = np.apply_along_axis(lambda v: np.convolve(v, k, mode="valid"), 1, sm)
    return sm.reshape(-1)


def _rank01(v: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(v)) / max(len(v) - 1, 1)


def make_panel(sites: int = 400, seed: int = 0) -> TopKData:
    """Cook-like synthetic panel (ours, not from the paper): NegBin counts on a square grid, smooth
    SVI-like covariates, lag features, 5 % bursty sites; train t = 2..6, valid 7, test 8..9.

    Features follow the Cook column names (incl. a repeated ``timestep`` column, written as
    ``timestep.1``) so the folder loader is exercised end to end. Suggested K = S/10.
    """
    side = math.isqrt(sites)
    if side * side != sites or sites < 4:
        raise ValueError(f"sites must be a square number >= 4 (grid layout); got {sites}")
    rng = np.random.default_rng(seed)
    themes = np.stack([_rank01(_smooth_field(rng, side)) for _ in range(4)], 1)  # [S, 4]
    total = _rank01(themes.mean(1))
    z = (themes - themes.mean(0)) / themes.std(0)
    b0 = _smooth_field(rng, side)
    b0 = 0.8 * (b0 - b0.mean()) / b0.std()
    b1 = rng.normal(0, 0.05, sites)
    bursty = rng.random(sites) < 0.05
    T = 10
    t = np.arange(T)[:, None]
    log_mu = -0.5 + z @ np.array([0.5, 0.2, 0.1, 0.3]) + b0 + b1 * t  # [T, S]
    mu = np.exp(log_mu)
    y = rng.negative_binomial(2, 2 / (2 + mu)).astype(np.int64)
    burst = rng.negative_binomial(2, 2 / (2 + 4 * mu)) * (rng.random((T, sites)) >= 0.75)
    y = np.where(bursty[None, :], burst, y).astype(np.int64)
    grid_x, grid_y = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    gx, gy = grid_x.reshape(-1), grid_y.reshape(-1)
    lat = 41.47 + (42.15 - 41.47) * gx / max(side - 1, 1)
    lon = -88.26 + (-87.53 + 88.26) * gy / max(side - 1, 1)
    neigh = (np.abs(gx[:, None] - gx[None, :]) <= 1) & (np.abs(gy[:, None] - gy[None, :]) <= 1)
    np.fill_diagonal(neigh, False)
    names = ["deaths_sp_lag", "INTPTLAT", "INTPTLON", "timestep.1"]
    names += [f"svi_theme{i}" for i in range(1, 5)] + ["svi_total_"]
    names += [f"prev_deaths_{k:02d}back" for k in range(5, 0, -1)]
    feats = []
    for ti in range(T):
        prev = y[ti - 1] if ti > 0 else np.zeros(sites)
        sp_lag = (neigh @ prev) / neigh.sum(1)
        lags = [y[ti - k] if ti - k >= 0 else np.zeros(sites) for k in range(5, 0, -1)]
        static = [sp_lag, lat, lon, np.full(sites, ti), *themes.T, total]
        feats.append(np.stack(static + lags, 1))
    X = np.stack(feats).astype(np.float64)
    ranges = {"train": range(2, 7), "valid": range(7, 8), "test": range(8, 10)}
    splits = {}
    for s, rr in ranges.items():
        idx = list(rr)
        splits[s] = _panel_split(y[idx], X[idx], idx[0], offset=2.0)
    site_ids = [str(17031000000 + i) for i in range(sites)]
    return TopKData(
        splits["train"],
        splits["valid"],
        splits["test"],
        site_ids=site_ids,
        feature_names=names,
        target_name="deaths",
        feature_mean=torch.zeros(len(names)),
        feature_std=torch.ones(len(names)),
        time_offset=2.0,
        name=f"panel{sites}",
    )


HOTSPOT_FEATURES = ("activity", "alert")


def make_hotspots(
    sites: int = 500,
    seed: int = 0,
    steps: tuple[int, int, int] = (4, 4, 4),
    threshold: float = 1.8,
    burst: float = 25.0,
) -> TopKData:
    """Synthetic panel where covariates carry the signal and a linear model is misspecified (ours).

    Every site-time draws two covariates afresh, ``activity`` and ``alert`` ~ N(0, 1), and
    ``y ~ Poisson(exp(0.5 + 0.6·activity) + burst·1[alert > threshold])``: ordinary counts follow
    activity log-linearly, and about 3.6 % of site-times (alert > 1.8) are hotspots with some 25
    extra events, which make up most of every step's top K. Sites have no lasting identity, so
    historical averages are at chance level. The NegBin forecaster (Eq. 15) is linear in the
    covariates and cannot represent the threshold: maximum likelihood fits the bulk of ordinary
    counts and weights ``activity``, while the top-K decision needs ``alert`` — the misspecified
    setting in which the paper's decision-aware training (Eq. 12–13) pays off.

    ``steps`` are the train / valid / test lengths (few training steps, many sites, like Cook
    County; four valid and test steps, so that selection and evaluation do not hinge on the
    20-odd hotspots of a single step); the time index starts at 0. Suggested K = S/20.
    """
    if sites < 2:
        raise ValueError(f"sites must be >= 2; got {sites}")
    if len(steps) != 3 or min(steps) < 1:
        raise ValueError(f"steps must be three lengths >= 1 (train, valid, test); got {steps}")
    rng = np.random.default_rng(seed)
    total = sum(steps)
    activity = rng.standard_normal((total, sites))
    alert = rng.standard_normal((total, sites))
    mean = np.exp(0.5 + 0.6 * activity) + burst * (alert > threshold)
    y = rng.poisson(mean).astype(np.int64)
    X = np.stack([activity, alert], -1)
    splits = {}
    t0 = 0
    for name, n in zip(SPLITS, steps):
        splits[name] = _panel_split(y[t0 : t0 + n], X[t0 : t0 + n], t0)
        t0 += n
    return TopKData(
        splits["train"],
        splits["valid"],
        splits["test"],
        site_ids=[str(i) for i in range(sites)],
        feature_names=list(HOTSPOT_FEATURES),
        target_name="counts",
        feature_mean=torch.zeros(len(HOTSPOT_FEATURES)),
        feature_std=torch.ones(len(HOTSPOT_FEATURES)),
        name=f"hotspots{sites}",
    )


ZERO_INFLATED_LAGS = 5


def make_zero_inflated(
    sites: int = 200,
    seed: int = 0,
    steps: tuple[int, int, int] = (30, 5, 5),
    zero_prob: float = 0.5,
    median_rate: float = 0.05,
    spread: float = 1.2,
    burn_in: int = 5,
) -> TopKData:
    """Zero-inflated count panel with a known best ranking (ours; cranes-like, > 90 % zeros).

    Every site has a long-run rate ``λ_s = exp(log(median_rate) + spread·z_s)``, z_s ~ N(0, 1),
    fixed over time. Each step, ``y_ts = 0`` with probability ``zero_prob`` (structural zeros),
    else ``y_ts ~ Poisson(λ_s / (1 − zero_prob))``, so ``E[y_ts] = λ_s``. The sites are independent
    and identically distributed over time up to their rate, so ranking by λ_s is the best ranking
    in expectation (both the mean and the ratio rating of the true model order sites by λ_s); it
    is stored as ``oracle_scores``. The defaults give about 92 % zeros.

    Features (standardised with the training statistics, which are stored): ``habitat`` (a noisy
    site covariate, the standardised log-rate plus N(0, 1) noise), the lags
    ``prev_counts_05back .. prev_counts_01back`` and ``mean_counts_past`` (the mean of all earlier
    counts of the site, an all-history feature). ``burn_in`` unobserved steps precede train so the
    first lags exist. ``steps`` are the train / valid / test lengths. Suggested K = S/20.
    """
    if sites < 2:
        raise ValueError(f"sites must be >= 2; got {sites}")
    if len(steps) != 3 or min(steps) < 1:
        raise ValueError(f"steps must be three lengths >= 1 (train, valid, test); got {steps}")
    if not 0.0 <= zero_prob < 1.0:
        raise ValueError(f"zero_prob must be in [0, 1); got {zero_prob}")
    if not (median_rate > 0 and spread >= 0 and burn_in >= 1):
        raise ValueError(
            f"need median_rate > 0, spread >= 0 and burn_in >= 1; got {median_rate}, {spread}, "
            f"{burn_in}"
        )
    rng = np.random.default_rng(seed)
    log_rate = math.log(median_rate) + spread * rng.standard_normal(sites)
    rate = np.exp(log_rate)
    total = burn_in + sum(steps)
    counts = rng.poisson(np.broadcast_to(rate / (1.0 - zero_prob), (total, sites)))
    y = (counts * (rng.random((total, sites)) >= zero_prob)).astype(np.int64)
    z = (log_rate - log_rate.mean()) / max(float(log_rate.std()), 1e-12)
    habitat = z + rng.standard_normal(sites)
    names = ["habitat"]
    names += [f"prev_counts_{k:02d}back" for k in range(ZERO_INFLATED_LAGS, 0, -1)]
    names += ["mean_counts_past"]
    rows = []
    for t in range(burn_in, total):
        lags = [
            y[t - k] if t - k >= 0 else np.zeros(sites) for k in range(ZERO_INFLATED_LAGS, 0, -1)
        ]
        rows.append(np.stack([habitat, *lags, y[:t].mean(0)], 1))
    oracle = torch.as_tensor(rate, dtype=torch.float32)
    return _standardized_panel(
        np.stack(rows), y[burn_in:], steps, names, f"zeroinflated{sites}", oracle
    )


SURVEY_TWIN_LAGS = 5


def make_survey_twin(
    sites: int = 400,
    seed: int = 0,
    steps: tuple[int, int, int] = (12, 4, 4),
    zero_prob: float = 0.8,
    median_rate: float = 0.3,
    spread: float = 0.5,
    persistence: float = 0.9,
    drift: float = 1.2,
    burn_in: int = 10,
) -> TopKData:
    """Synthetic twin of a zero-inflated aerial-survey panel in which a moving average is the strong
    heuristic (ours; the positive control of the history-feature forecaster).

    Each site has a log-rate that drifts slowly: ``log λ_st = log(median_rate) + spread·z_s +
    u_st`` with ``z_s ~ N(0, 1)`` and ``u_st`` a stationary AR(1) of coefficient ``persistence``
    and stationary std ``drift``. Each step ``y_st = 0`` with probability ``zero_prob`` (the birds
    are elsewhere), else ``y_st ~ Poisson(λ_st / (1 − zero_prob))``, so ``E[y_st] = λ_st``.
    Counts are mostly zeros (about 90 % with the defaults) and strongly persistent per site:
    the last count is a noisy ranking (a zero says little), the all-history mean lags behind the
    drift, and a moving average over several steps is the best of the simple heuristics.

    Features (standardised with training statistics, which are stored): ``habitat`` (the
    standardised site level ``z_s`` plus N(0, 1) noise) and the lag columns
    ``prev_counts_05back .. prev_counts_01back``. ``burn_in`` unobserved steps precede train so
    that the first lags exist; the time index starts at 0. Suggested K = S/10.
    """
    if sites < 2:
        raise ValueError(f"sites must be >= 2; got {sites}")
    if len(steps) != 3 or min(steps) < 1:
        raise ValueError(f"steps must be three lengths >= 1 (train, valid, test); got {steps}")
    if not 0.0 <= zero_prob < 1.0:
        raise ValueError(f"zero_prob must be in [0, 1); got {zero_prob}")
    if not 0.0 <= persistence < 1.0:
        raise ValueError(f"persistence must be in [0, 1); got {persistence}")
    if not (median_rate > 0 and spread >= 0 and drift >= 0 and burn_in >= SURVEY_TWIN_LAGS):
        raise ValueError(
            f"need median_rate > 0, spread >= 0, drift >= 0 and burn_in >= {SURVEY_TWIN_LAGS}; "
            f"got {median_rate}, {spread}, {drift}, {burn_in}"
        )
    rng = np.random.default_rng(seed)
    total = burn_in + sum(steps)
    z = rng.standard_normal(sites)
    u = np.empty((total, sites))
    u[0] = drift * rng.standard_normal(sites)
    innov = drift * math.sqrt(1.0 - persistence**2)
    for t in range(1, total):
        u[t] = persistence * u[t - 1] + innov * rng.standard_normal(sites)
    rate = np.exp(math.log(median_rate) + spread * z + u)
    counts = rng.poisson(rate / (1.0 - zero_prob))
    y = (counts * (rng.random((total, sites)) >= zero_prob)).astype(np.int64)
    habitat = (z - z.mean()) / max(float(z.std()), 1e-12) + rng.standard_normal(sites)
    names = ["habitat", *(f"prev_counts_{k:02d}back" for k in range(SURVEY_TWIN_LAGS, 0, -1))]
    rows = [
        np.stack([habitat, *(y[t - k] for k in range(SURVEY_TWIN_LAGS, 0, -1))], 1)
        for t in range(burn_in, total)
    ]
    return _standardized_panel(
        np.stack(rows).astype(np.float64), y[burn_in:], steps, names, f"surveytwin{sites}"
    )
