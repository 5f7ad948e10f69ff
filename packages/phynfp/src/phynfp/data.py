"""Datasets: graphs with node time series, windowed for flux prediction.

A :class:`FluxDataset` holds one or more :class:`GraphGroup` (one graph and its z-scored series each:
one for a river or a sensor network, one per demand scenario for a water network) and, per split,
the window start hours of each group. A sample is ``x = series[o : o+W]`` (all nodes, all variables)
and ``y = target[o + W + ℓ − 1]`` (the target variable ℓ steps after the window's last step).

Edges always run upstream → downstream (row 0 → row 1 of ``edge_index``); ``dataset.reversed()``
flips every edge (the reversed-edge experiments).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from .graph import check_graph
from .river import EDGE_FEATURES as RIVER_EDGE_FEATURES
from .river import FEATURES as RIVER_FEATURES
from .river import RiverConfig, cached_river

__all__ = [
    "FluxDataset",
    "GraphGroup",
    "chronological_split",
    "load_dcrnn",
    "load_metr_la",
    "make_river",
    "window_starts",
]

STD_FLOOR = 1e-3
REL_FLOOR = 0.05


@dataclass
class GraphGroup:
    """One graph with z-scored node series.

    ``series`` [T, N, F] inputs; ``target`` [T, N] the z-scored target (the same scaling as input
    variable ``target_index``); ``mean``/``std`` [N] undo the target's scaling.
    """

    series: Tensor
    target: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    mean: Tensor
    std: Tensor
    name: str = ""
    flow_sign: Tensor | None = (
        None  # [T, E]: +1 where the flow follows the edge that hour, -1 against
    )

    @property
    def num_nodes(self) -> int:
        return int(self.series.size(1))


@dataclass
class FluxDataset:
    name: str
    groups: list[GraphGroup]
    window: int
    lead: int
    splits: dict[str, list[tuple[int, np.ndarray]]]
    feature_names: tuple[str, ...]
    edge_feature_names: tuple[str, ...]
    target_index: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    flipped: bool = False

    @property
    def num_features(self) -> int:
        return int(self.groups[0].series.size(2))

    @property
    def edge_dim(self) -> int:
        return int(self.groups[0].edge_attr.size(1))

    def num_windows(self, split: str) -> int:
        return int(sum(len(s) for _, s in self.splits[split]))

    def reversed(self) -> FluxDataset:
        """The same data with every edge flipped (edge features keep their values)."""
        groups = [
            replace(
                g,
                edge_index=g.edge_index.flip(0).contiguous(),
                flow_sign=None if g.flow_sign is None else -g.flow_sign,
            )
            for g in self.groups
        ]
        return replace(self, groups=groups, flipped=not self.flipped)

    def with_headwater_reverse_edges(self) -> FluxDataset:
        """The official loader's option: every source node (no in-edge) gets one extra edge from its
        first downstream neighbour, with that edge's features, so that headwaters receive a message.
        This creates 2-cycles, so ``num_layers="auto"`` no longer applies."""
        groups = []
        for g in self.groups:
            ei = g.edge_index
            indeg = torch.bincount(ei[1], minlength=g.num_nodes)
            extra, seen = [], set()
            for e in range(ei.size(1)):
                src = int(ei[0, e])
                if indeg[src] == 0 and src not in seen:
                    seen.add(src)
                    extra.append(e)
            idx = torch.tensor(extra, dtype=torch.long)
            groups.append(
                replace(
                    g,
                    edge_index=torch.cat([ei, ei[:, idx].flip(0)], dim=1),
                    edge_attr=torch.cat([g.edge_attr, g.edge_attr[idx]]),
                    flow_sign=None
                    if g.flow_sign is None
                    else torch.cat([g.flow_sign, -g.flow_sign[:, idx]], dim=1),
                )
            )
        return replace(self, groups=groups)

    def batch(self, group: int, starts: np.ndarray) -> tuple[Tensor, Tensor]:
        """x [B, N, W, F] and y [B, N] for window starts of one group."""
        g = self.groups[group]
        idx = torch.as_tensor(starts, dtype=torch.long)
        steps = idx[:, None] + torch.arange(self.window)
        x = g.series[steps].permute(0, 2, 1, 3)
        y = g.target[idx + self.window + self.lead - 1]
        return x, y

    def edge_sign(self, group: int, starts: np.ndarray) -> Tensor:
        """[B, E] flow signs at the last hour of each window (what is known when the forecast is
        made): +1 where the flow follows ``edge_index``, -1 where it opposes it."""
        g = self.groups[group]
        if g.flow_sign is None:
            raise ValueError(
                f"{self.name}: orientation='dynamic' needs hourly flow signs, which only the wntr "
                "datasets carry"
            )
        idx = torch.as_tensor(starts, dtype=torch.long) + self.window - 1
        return g.flow_sign[idx]

    def model_inputs(self, model: Any, group: int, starts: np.ndarray) -> dict[str, Tensor]:
        """Extra keyword inputs ``model`` needs for these windows (``edge_sign`` for a PhyNFP with
        ``orientation="dynamic"``; nothing for every other model)."""
        if getattr(model, "needs_edge_sign", False):
            return {"edge_sign": self.edge_sign(group, starts)}
        return {}

    def opposing_share(self, split: str | None = None) -> float | None:
        """Share of link-hours whose flow opposes the edge's assigned direction (None without flow
        signs); over the hours of every group of ``split`` (default: all groups)."""
        members = (
            range(len(self.groups))
            if split is None
            else sorted({group for group, _ in self.splits[split]})
        )
        signs = [self.groups[i].flow_sign for i in members]
        if not signs or any(s is None for s in signs):
            return None
        total = sum(int(s.numel()) for s in signs if s is not None)
        against = sum(int((s < 0).sum()) for s in signs if s is not None)
        return against / max(total, 1)

    def describe(self) -> str:
        g = self.groups[0]
        sizes = ", ".join(f"{k} {self.num_windows(k)}" for k in self.splits)
        return (
            f"{self.name}: {len(self.groups)} graph(s), {g.num_nodes} nodes, "
            f"{g.edge_index.size(1)} edges, window {self.window}, lead {self.lead}; windows: {sizes}"
        )


def window_starts(
    length: int, window: int, lead: int, stride: int = 1, offset: int = 0
) -> np.ndarray:
    """Start indices o with o + W + ℓ − 1 < length (windows inside [offset, offset + length))."""
    last = length - (window + lead)
    if last < 0:
        return np.zeros(0, dtype=np.int64)
    return offset + np.arange(0, last + 1, stride, dtype=np.int64)


def chronological_split(
    length: int,
    window: int,
    lead: int,
    fractions: tuple[float, float, float] = (0.6, 0.2, 0.2),
    strides: tuple[int, int, int] = (1, 6, 6),
) -> dict[str, np.ndarray]:
    """Train/val/test window starts over consecutive blocks, with a gap of W + ℓ steps between
    blocks so that no target of one block lies inside a window of the next."""
    gap = window + lead
    bounds = np.cumsum([0.0, *fractions]) * length
    out = {}
    for name, lo, hi, stride in zip(("train", "val", "test"), bounds[:-1], bounds[1:], strides):
        start = int(lo) + (gap if name != "train" else 0)
        out[name] = window_starts(int(hi) - start, window, lead, stride, start)
    return out


def floored_std(std: np.ndarray) -> np.ndarray:
    """Per node and variable std [N, F], floored at max(STD_FLOOR, REL_FLOOR × the variable's mean std
    over nodes): a node that is near-constant in the training period (water that has not reached it
    yet) must not turn into z-scores of thousands later."""
    rel = REL_FLOOR * std.mean(axis=0, keepdims=True)
    return np.maximum(std, np.maximum(rel, STD_FLOOR))


def _zscore(
    values: np.ndarray, train_mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node and variable z-scores with training statistics; std floored (:func:`floored_std`)."""
    ref = values[train_mask]
    mean = ref.mean(axis=0)
    std = floored_std(ref.std(axis=0))
    return (values - mean) / std, mean, std


def _standardize_edges(edge_attr: np.ndarray) -> np.ndarray:
    mean = edge_attr.mean(axis=0)
    std = edge_attr.std(axis=0)
    std = np.where(std > 1e-8, std, 1.0)
    return (edge_attr - mean) / std


def _train_hours(length: int, starts: np.ndarray, window: int) -> np.ndarray:
    mask = np.zeros(length, dtype=bool)
    if len(starts):
        mask[int(starts.min()) : int(starts.max()) + window] = True
    return mask


def _group(
    values: np.ndarray,
    train_mask: np.ndarray,
    edge_index: np.ndarray,
    edge_attr: np.ndarray,
    target_index: int,
    name: str,
    standardize_edges: bool = True,
    stats: tuple[np.ndarray, np.ndarray] | None = None,
) -> GraphGroup:
    if stats is None:
        z, mean, std = _zscore(values, train_mask)
    else:
        mean, std = stats
        z = (values - mean) / std
    ea = _standardize_edges(edge_attr) if standardize_edges else edge_attr
    group = GraphGroup(
        series=torch.as_tensor(z, dtype=torch.float32),
        target=torch.as_tensor(z[..., target_index], dtype=torch.float32),
        edge_index=torch.as_tensor(edge_index, dtype=torch.long),
        edge_attr=torch.as_tensor(ea, dtype=torch.float32),
        mean=torch.as_tensor(mean[:, target_index], dtype=torch.float32),
        std=torch.as_tensor(std[:, target_index], dtype=torch.float32),
        name=name,
    )
    check_graph(group.edge_index, group.num_nodes, group.edge_attr, where=name)
    return group


def make_river(
    num_nodes: int = 64,
    hours: int = 8760,
    *,
    routing: str = "muskingum",
    seed: int = 0,
    window: int = 24,
    lead: int = 6,
    train_stride: int = 1,
    eval_stride: int = 6,
    standardize_edges: bool = True,
    cache_dir: Path | None = None,
) -> FluxDataset:
    """The ``river-synth`` dataset: a simulated river tree (60/20/20 chronological split, W + ℓ gaps)."""
    cfg = RiverConfig(num_nodes=num_nodes, hours=hours, routing=routing, seed=seed)
    sim = cached_river(cfg, cache_dir)
    values = sim.features
    split = chronological_split(
        hours, window, lead, strides=(train_stride, eval_stride, eval_stride)
    )
    mask = _train_hours(hours, split["train"], window + lead)
    group = _group(values, mask, sim.edge_index, sim.edge_attr, 0, "river-synth", standardize_edges)
    return FluxDataset(
        name="river-synth",
        groups=[group],
        window=window,
        lead=lead,
        splits={k: [(0, v)] for k, v in split.items()},
        feature_names=RIVER_FEATURES,
        edge_feature_names=RIVER_EDGE_FEATURES,
        info={"num_nodes": num_nodes, "hours": hours, "routing": routing, "generator_seed": seed},
    )


# ------------------------------------------------------------------------------------------ METR-LA


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickles DCRNN's adj_mx.pkl: lists, dicts, strings and numpy arrays only (no other globals)."""

    ALLOWED: ClassVar[frozenset[tuple[str, str]]] = frozenset(
        {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("_codecs", "encode"),  # how protocol-2 pickles store the bytes of an array
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refusing to load global {module}.{name}: an adjacency pickle holds only numpy arrays"
        )


def _read_adjacency(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path, "rb") as fh:
        obj = _NumpyOnlyUnpickler(fh, encoding="latin1").load()
    if not isinstance(obj, (list, tuple)) or len(obj) != 3:
        raise ValueError(
            f"{path}: expected a pickled [sensor_ids, sensor_id_to_ind, adj_mx] list (DCRNN format)"
        )
    ids, _, adj = obj
    adj = np.asarray(adj, dtype=np.float64)
    ids = [str(i) for i in ids]
    if adj.ndim != 2 or adj.shape != (len(ids), len(ids)):
        raise ValueError(f"{path}: adj_mx has shape {adj.shape}, expected ({len(ids)}, {len(ids)})")
    if not np.isfinite(adj).all():
        r, c = np.argwhere(~np.isfinite(adj))[0]
        raise ValueError(f"{path}: adj_mx holds NaN or inf at row {r}, column {c}")
    if (adj < 0).any() or (adj > 1).any():
        raise ValueError(f"{path}: adj_mx weights must lie in [0, 1] (a Gaussian kernel)")
    return ids, adj


def _read_series_csv(path: Path, ids: list[str]) -> np.ndarray:
    text = path.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise ValueError(
            f"{path}: empty file; expected a header of sensor ids and one row per step"
        )
    header = [h.strip() for h in lines[0].split(",")]
    if header != ids:
        where = next(
            (i for i, (a, b) in enumerate(zip(header, ids)) if a != b), min(len(header), len(ids))
        )
        raise ValueError(
            f"{path}: the header must list the {len(ids)} sensor ids of the adjacency in order; "
            f"column {where + 1} differs (got {len(header)} columns)"
        )
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        if len(cells) != len(ids):
            raise ValueError(f"{path}: row {number} has {len(cells)} cells, expected {len(ids)}")
        try:
            row = [float(c) for c in cells]
        except ValueError as exc:
            raise ValueError(f"{path}: row {number}: {exc}") from exc
        rows.append(row)
    values = np.asarray(rows, dtype=np.float64)
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        r, c = bad[0]
        raise ValueError(
            f"{path}: NaN or inf at row {r + 2}, column {c + 1} (sensor {ids[c]}); fill gaps first"
        )
    return values


def load_dcrnn(
    adj_pkl: str | Path,
    series_csv: str | Path,
    *,
    window: int = 12,
    lead: int = 3,
    steps_per_day: int = 288,
    train_stride: int = 1,
    eval_stride: int = 1,
    name: str = "metr-la",
) -> FluxDataset:
    """A METR-LA / PEMS-BAY style sensor graph (DCRNN ``adj_mx.pkl``) with a speed CSV (one column per
    sensor, in the pickle's order). **Load trusted files only** (pickle).

    Edges are the non-zero off-diagonal entries, i → j when W_ij > 0 (row = source: DCRNN computes
    W_ij from the road distance from sensor i to sensor j). Edge features: (w, sqrt(−ln w)). Node
    variables: speed, sin and cos of the time of day. Chronological 60/20/20 split with W + ℓ gaps.
    """
    adj_pkl, series_csv = Path(adj_pkl), Path(series_csv)
    ids, adj = _read_adjacency(adj_pkl)
    speed = _read_series_csv(series_csv, ids)
    steps = np.arange(speed.shape[0])
    phase = 2 * np.pi * (steps % steps_per_day) / steps_per_day
    tod = np.broadcast_to(
        np.stack([np.sin(phase), np.cos(phase)], 1)[:, None, :], (*speed.shape, 2)
    )
    values = np.concatenate([speed[..., None], tod], axis=-1)
    np.fill_diagonal(adj, 0.0)
    src, dst = np.nonzero(adj)
    weight = adj[src, dst]
    edge_attr = np.stack([weight, np.sqrt(-np.log(np.clip(weight, 1e-12, 1.0)))], axis=1)
    length = speed.shape[0]
    split = chronological_split(
        length, window, lead, strides=(train_stride, eval_stride, eval_stride)
    )
    if min(len(v) for v in split.values()) == 0:
        raise ValueError(
            f"{series_csv}: {length} steps are too few for a 60/20/20 split with window {window} "
            f"and lead {lead}"
        )
    mask = _train_hours(length, split["train"], window + lead)
    group = _group(values, mask, np.stack([src, dst]), edge_attr, 0, name)
    return FluxDataset(
        name=name,
        groups=[group],
        window=window,
        lead=lead,
        splits={k: [(0, v)] for k, v in split.items()},
        feature_names=("speed", "tod_sin", "tod_cos"),
        edge_feature_names=("weight", "pseudo_distance"),
        info={"sensors": len(ids), "steps": length, "edges": len(src)},
    )


def load_metr_la(folder: str | Path, **kwargs: Any) -> FluxDataset:
    """METR-LA from a folder holding ``adj_mx.pkl`` and ``los_speed.csv`` (or a ``metr_la/`` subfolder
    with them, as in the shared data collection)."""
    folder = Path(folder)
    for base in (folder, folder / "metr_la"):
        if (base / "adj_mx.pkl").is_file() and (base / "los_speed.csv").is_file():
            return load_dcrnn(base / "adj_mx.pkl", base / "los_speed.csv", **kwargs)
    raise FileNotFoundError(
        f"{folder}: expected adj_mx.pkl and los_speed.csv (DCRNN graph + T-GCN speeds), directly or "
        "in a metr_la/ subfolder"
    )
