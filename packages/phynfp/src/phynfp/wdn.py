"""``wntr:<network>``: real EPANET water networks (shipped in the ``wntr`` package), simulated with
EPANET's hydraulic and water-quality solver under varying demand patterns.

Per scenario: junction base demands × LogNormal(0, 0.25); hourly demand patterns × (1 + N(0, 0.1)),
clipped at 0; a chemical injected at every reservoir with a piecewise-constant concentration pattern
in [0, 1] that redraws with probability 0.15 per hour. Nodes are junctions, tanks and reservoirs;
edges are links oriented by the sign of their mean flow in the scenario (``orientation="dominant"``;
links with |mean flow| < 1e-6 m³/s are dropped) or from start to end node (``"static"``). Edge
features: length in km (pumps and valves 0.001), elevation drop z_src − z_dst in m, diameter in m
(pumps and valves 0). Task: the chemical's concentration ℓ = 3 h ahead from a W = 12 h window of
[quality, demand, pressure]. Scenarios are split 2/3 : 1/6 : 1/6 (16/4/4 of 24).

Simulations are cached as ``.npz`` in a folder the caller chooses (``cache_dir``), never inside the
installed package; EPANET's own scratch files go to a temporary folder that is removed afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .data import FluxDataset, _group, floored_std, window_starts

__all__ = [
    "NETWORKS",
    "WntrSim",
    "junction_balance",
    "load_wntr",
    "scenario_flow_sign",
    "simulate_wntr",
    "travel_hops",
]

NETWORKS = ("Net1", "Net2", "Net3", "ky4", "ky10", "Net6")
_GENERATOR_VERSION = 1
KIND = {"Junction": 0, "Tank": 1, "Reservoir": 2}


def _wntr() -> Any:
    try:
        import wntr
    except ImportError as exc:
        raise ImportError(
            "the wntr datasets need the 'wntr' package: pip install 'phynfp[wntr]'"
        ) from exc
    return wntr


def network_path(network: str | Path) -> Path:
    """The .inp file of a network shipped with wntr (``"Net3"``) or an existing .inp path."""
    if str(network) in NETWORKS:
        wntr = _wntr()
        return Path(os.path.dirname(wntr.__file__)) / "library" / "networks" / f"{network}.inp"
    path = Path(network)
    if path.suffix.lower() == ".inp" and path.is_file():
        return path
    raise ValueError(
        f"unknown water network {str(network)!r}: use one shipped with wntr ({', '.join(NETWORKS)}) "
        "or the path of an EPANET .inp file"
    )


@dataclass
class WntrSim:
    """Simulated scenarios of one network. Series are [S, T, N] (nodes) or [S, T, M] (links)."""

    node_names: np.ndarray
    node_kind: np.ndarray  # 0 junction, 1 tank, 2 reservoir
    elevation: np.ndarray  # m (reservoir: base head)
    link_names: np.ndarray
    link_start: np.ndarray
    link_end: np.ndarray
    link_length_km: np.ndarray
    link_diameter_m: np.ndarray
    link_is_pipe: np.ndarray
    quality: np.ndarray
    demand: np.ndarray  # m³/s (negative at sources)
    pressure: np.ndarray  # m
    flow: np.ndarray  # m³/s, positive from start to end node

    @property
    def num_scenarios(self) -> int:
        return int(self.quality.shape[0])


def _scenario(wntr: Any, inp: Path, hours: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    wn = wntr.network.WaterNetworkModel(str(inp))
    step = int(wn.options.time.pattern_timestep) or 3600
    for name in wn.pattern_name_list:
        pattern = wn.get_pattern(name)
        mult = np.asarray(pattern.multipliers, dtype=float)
        if mult.size == 0:
            continue
        hourly = mult[(np.arange(hours) * 3600 // step) % mult.size]
        hourly = np.clip(hourly * (1.0 + rng.normal(0.0, 0.1, size=hours)), 0.0, None)
        pattern.multipliers = hourly.tolist()
    wn.options.time.pattern_timestep = 3600
    wn.options.time.pattern_start = 0
    wn.options.time.duration = hours * 3600
    wn.options.time.hydraulic_timestep = 3600
    wn.options.time.report_timestep = 3600
    wn.options.time.quality_timestep = 300
    for name in wn.junction_name_list:
        factor = float(rng.lognormal(0.0, 0.25))
        for demand in wn.get_node(name).demand_timeseries_list:
            demand.base_value = demand.base_value * factor
    wn.options.quality.parameter = "CHEMICAL"
    for name in wn.reservoir_name_list:
        level = rng.uniform()
        values = []
        for _ in range(hours):
            if rng.uniform() < 0.15:
                level = rng.uniform()
            values.append(level)
        wn.add_pattern(f"phynfp_inj_{name}", values)
        wn.add_source(f"phynfp_src_{name}", name, "CONCEN", 1.0, f"phynfp_inj_{name}")
    with tempfile.TemporaryDirectory(prefix="phynfp-epanet-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = wntr.sim.EpanetSimulator(wn).run_sim(file_prefix=os.path.join(tmp, "sim"))
    nodes, links = wn.node_name_list, wn.link_name_list
    out = {
        "quality": results.node["quality"][nodes].to_numpy(np.float32),
        "demand": results.node["demand"][nodes].to_numpy(np.float32),
        "pressure": results.node["pressure"][nodes].to_numpy(np.float32),
        "flow": results.link["flowrate"][links].to_numpy(np.float32),
    }
    rows = min(v.shape[0] for v in out.values())
    return {k: v[: hours + 1][:rows] for k, v in out.items()}


def _static(wntr: Any, inp: Path) -> dict[str, np.ndarray]:
    wn = wntr.network.WaterNetworkModel(str(inp))
    nodes, links = wn.node_name_list, wn.link_name_list
    index = {n: i for i, n in enumerate(nodes)}
    elevation = []
    for name in nodes:
        node = wn.get_node(name)
        elevation.append(node.base_head if node.node_type == "Reservoir" else node.elevation)
    length, diameter, is_pipe, start, end = [], [], [], [], []
    for name in links:
        link = wn.get_link(name)
        pipe = link.link_type == "Pipe"
        is_pipe.append(pipe)
        length.append(link.length / 1000.0 if pipe else 0.001)
        diameter.append(link.diameter if pipe else 0.0)
        start.append(index[link.start_node_name])
        end.append(index[link.end_node_name])
    if not wn.reservoir_name_list:
        raise ValueError(
            f"{inp.name}: the network has no reservoir, so reservoir injection gives no quality signal"
        )
    return {
        "node_names": np.array(nodes),
        "node_kind": np.array([KIND[wn.get_node(n).node_type] for n in nodes]),
        "elevation": np.asarray(elevation, dtype=np.float64),
        "link_names": np.array(links),
        "link_start": np.asarray(start, dtype=np.int64),
        "link_end": np.asarray(end, dtype=np.int64),
        "link_length_km": np.asarray(length, dtype=np.float64),
        "link_diameter_m": np.asarray(diameter, dtype=np.float64),
        "link_is_pipe": np.asarray(is_pipe, dtype=bool),
    }


def simulate_wntr(
    network: str | Path = "Net3",
    scenarios: int = 24,
    hours: int = 168,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    progress: Any = None,
) -> WntrSim:
    """Run (or load from ``cache_dir``) ``scenarios`` demand scenarios of ``hours`` hours each."""
    if scenarios < 1 or hours < 2:
        raise ValueError(f"need scenarios >= 1 and hours >= 2, got {scenarios} and {hours}")
    wntr = _wntr()
    inp = network_path(network)
    digest = hashlib.sha256(inp.read_bytes()).hexdigest()[:12]
    key_data = {
        "inp": digest,
        "scenarios": scenarios,
        "hours": hours,
        "seed": seed,
        "wntr": getattr(wntr, "__version__", "?"),
        "generator": _GENERATOR_VERSION,
    }
    key = hashlib.sha256(json.dumps(key_data, sort_keys=True).encode()).hexdigest()[:16]
    path = None if cache_dir is None else Path(cache_dir) / f"wntr-{inp.stem}-{key}.npz"
    fields = list(WntrSim.__dataclass_fields__)
    if path is not None and path.is_file():
        try:
            with np.load(path, allow_pickle=False) as z:
                return WntrSim(**{f: z[f] for f in fields})
        except (OSError, KeyError, ValueError):
            pass  # rebuild a broken cache entry
    static = _static(wntr, inp)
    runs = []
    for s in range(scenarios):
        runs.append(_scenario(wntr, inp, hours, np.random.default_rng([seed, s])))
        if progress is not None:
            progress.update(1)
    rows = min(r["quality"].shape[0] for r in runs)
    series = {
        k: np.stack([r[k][:rows] for r in runs]) for k in ("quality", "demand", "pressure", "flow")
    }
    sim = WntrSim(**static, **series)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".partial.npz")
        np.savez_compressed(tmp, **{f: getattr(sim, f) for f in fields})
        tmp.replace(path)
    return sim


def junction_balance(sim: WntrSim, scenario: int = 0) -> np.ndarray:
    """[T, J] residual Σ inflow − Σ outflow − demand at every junction (EPANET's continuity)."""
    flow = sim.flow[scenario].astype(np.float64)
    n = sim.node_names.size
    net = np.zeros((flow.shape[0], n))
    np.add.at(net.T, sim.link_end, flow.T)
    np.add.at(net.T, sim.link_start, -flow.T)
    residual = net - sim.demand[scenario].astype(np.float64)
    return residual[:, sim.node_kind == 0]


def scenario_graph(
    sim: WntrSim, scenario: int, orientation: str = "dominant"
) -> tuple[np.ndarray, np.ndarray]:
    """(edge_index [2, E], edge_attr [E, 3]) of one scenario."""
    start, end = sim.link_start, sim.link_end
    if orientation == "static":
        keep = np.ones(start.size, dtype=bool)
        src, dst = start, end
    elif orientation == "dominant":
        mean = sim.flow[scenario].astype(np.float64).mean(axis=0)
        keep = np.abs(mean) >= 1e-6
        src = np.where(mean >= 0, start, end)
        dst = np.where(mean >= 0, end, start)
    else:
        raise ValueError(f"orientation must be 'dominant' or 'static', got {orientation!r}")
    src, dst = src[keep], dst[keep]
    attr = np.stack(
        [
            sim.link_length_km[keep],
            sim.elevation[src] - sim.elevation[dst],
            sim.link_diameter_m[keep],
        ],
        axis=1,
    )
    return np.stack([src, dst]).astype(np.int64), attr


def scenario_flow_sign(sim: WntrSim, scenario: int, orientation: str = "dominant") -> np.ndarray:
    """[T, E] sign of every kept link's flow each hour relative to the edge of
    :func:`scenario_graph`: +1 where the water follows the edge (or stands still), -1 where it runs
    against it (tanks filling and draining reverse pipes during the day)."""
    flow = sim.flow[scenario].astype(np.float64)
    if orientation == "static":
        keep = np.ones(flow.shape[1], dtype=bool)
        assigned = np.ones(flow.shape[1])
    elif orientation == "dominant":
        mean = flow.mean(axis=0)
        keep = np.abs(mean) >= 1e-6
        assigned = np.where(mean >= 0, 1.0, -1.0)
    else:
        raise ValueError(f"orientation must be 'dominant' or 'static', got {orientation!r}")
    relative = flow[:, keep] * assigned[keep]
    return np.where(relative < 0, -1.0, 1.0).astype(np.float32)


def travel_hops(sim: WntrSim, scenario: int, hours: float) -> np.ndarray:
    """[N] for every node, the most hops of an upstream path (edges of :func:`scenario_graph`,
    dominant orientation) that water travels within ``hours`` at the links' mean speeds in
    ``scenario`` (pipes: |mean flow| / cross-section; pumps and valves: no travel time). This is
    the receptive field a forecast ``hours`` ahead needs: water farther upstream arrives later."""
    flow = np.abs(sim.flow[scenario].astype(np.float64).mean(axis=0))
    keep = flow >= 1e-6
    mean = sim.flow[scenario].astype(np.float64).mean(axis=0)
    src = np.where(mean >= 0, sim.link_start, sim.link_end)[keep]
    dst = np.where(mean >= 0, sim.link_end, sim.link_start)[keep]
    area = np.pi * sim.link_diameter_m[keep] ** 2 / 4.0
    speed = np.where(area > 0, flow[keep] / np.where(area > 0, area, 1.0), np.inf)  # m/s
    tau = np.where(sim.link_is_pipe[keep], sim.link_length_km[keep] * 1000.0 / speed / 3600.0, 0.0)
    n = sim.node_names.size
    best = np.zeros(n)  # least travel time (h) of an upstream path with exactly h hops
    hops = np.zeros(n, dtype=np.int64)
    for h in range(1, n):
        nxt = np.full(n, np.inf)
        np.minimum.at(nxt, dst, best[src] + tau)
        reach = nxt <= hours
        if not reach.any():
            break
        hops[reach] = h
        best = nxt
    return hops


def load_wntr(
    network: str | Path = "Net3",
    *,
    scenarios: int = 24,
    hours: int = 168,
    seed: int = 0,
    window: int = 12,
    lead: int = 3,
    train_stride: int = 1,
    eval_stride: int = 1,
    orientation: str = "dominant",
    cache_dir: str | Path | None = None,
    progress: Any = None,
) -> FluxDataset:
    """The ``wntr:<network>`` dataset (one graph group per scenario, split by scenario)."""
    if scenarios < 3:
        raise ValueError(f"wntr datasets need >= 3 scenarios (train/val/test), got {scenarios}")
    sim = simulate_wntr(network, scenarios, hours, seed, cache_dir, progress)
    n_val = max(1, round(scenarios / 6))
    n_train = scenarios - 2 * n_val
    order = np.random.default_rng([seed, 10_000]).permutation(scenarios)
    parts = {
        "train": order[:n_train],
        "val": order[n_train : n_train + n_val],
        "test": order[n_train + n_val :],
    }
    values = np.stack([sim.quality, sim.demand, sim.pressure], axis=-1).astype(
        np.float64
    )  # [S, T, N, 3]
    length = values.shape[1]
    # Per node and variable statistics over the training scenarios.
    ref = values[parts["train"]].reshape(-1, *values.shape[2:])
    groups: list[Any] = []
    splits: dict[str, list[tuple[int, np.ndarray]]] = {k: [] for k in parts}
    edge_rows = []
    graphs = {s: scenario_graph(sim, s, orientation) for s in range(scenarios)}
    for s in parts["train"]:
        edge_rows.append(graphs[s][1])
    edge_ref = np.concatenate(edge_rows)
    e_mean, e_std = edge_ref.mean(0), edge_ref.std(0)
    e_std = np.where(e_std > 1e-8, e_std, 1.0)
    mean = ref.mean(0)
    std = floored_std(ref.std(0))
    name = Path(str(network)).stem
    for split, members in parts.items():
        for s in members:
            ei, ea = graphs[int(s)]
            group = _group(
                values[s],
                np.zeros(length, dtype=bool),
                ei,
                (ea - e_mean) / e_std,
                0,
                f"wntr:{name}/scenario{int(s)}",
                standardize_edges=False,
                stats=(mean, std),
            )
            group.flow_sign = torch.as_tensor(scenario_flow_sign(sim, int(s), orientation))
            groups.append(group)
            stride = train_stride if split == "train" else eval_stride
            splits[split].append((len(groups) - 1, window_starts(length, window, lead, stride)))
    return FluxDataset(
        name=f"wntr:{name}",
        groups=groups,
        window=window,
        lead=lead,
        splits=splits,
        feature_names=("quality", "demand", "pressure"),
        edge_feature_names=("length_km", "elevation_drop_m", "diameter_m"),
        info={
            "network": name,
            "scenarios": scenarios,
            "hours": hours,
            "orientation": orientation,
            "split_scenarios": {k: [int(v) for v in vals] for k, vals in parts.items()},
            "nodes": int(sim.node_names.size),
            "links": int(sim.link_names.size),
        },
    )
