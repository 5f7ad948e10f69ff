"""``river-synth``: a synthetic rooted river tree with rainfall-runoff and Muskingum (kinematic-wave type)
or lag-and-route channel routing. Everything comes from one ``numpy.random.Generator(seed)``.

Water balance (exact, checked by the tests). Each node i is a linear reservoir with storage
``S_i = Q_i / k_i``; each reach j → i holds water in transit. At hour t

    In_i(t) = R_i(t−1) + b_i + Σ_{e=(j→i)} O_e(t−1)          (lateral runoff + baseflow + routed inflow)
    Q_i(t)  = (1 − k_i) Q_i(t−1) + k_i In_i(t)               ⇔  S_i(t) − S_i(t−1) = In_i(t) − Q_i(t−1)

and a reach receives its upstream node's outflow Q_j(t−1) and releases O_e(t−1), so that the total
storage changes by the lateral input minus the outlet's outflow, hour by hour.

Muskingum routing (``routing="muskingum"``, default): a reach of length Δx and slope s has travel time
K_e = Δx / (3 km/h · sqrt(s / 0.01)) hours and is split into n = ceil(K_e / 2.5 h) sub-reaches with
K = max(K_e / n, 0.625 h) and X = 0.2, so that C0, C1, C2 ≥ 0 with Δt = 1 h:
O(t) = C0 I(t) + C1 I(t−1) + C2 O(t−1). Lag routing (``routing="lag"``): O_e(t−1) = Q_j(t − τ_e),
τ_e = max(1, round(K_e)).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["RiverConfig", "RiverSim", "simulate_river"]

UNIT_HYDROGRAPH = np.array([0.05, 0.15, 0.2, 0.18, 0.14, 0.1, 0.07, 0.05, 0.03, 0.02, 0.01])
FEATURES = ("discharge", "precipitation", "soil_moisture", "temperature", "pressure")
EDGE_FEATURES = ("dist_hdn", "elev_diff", "strm_slope")
MUSKINGUM_X = 0.2


@dataclass(frozen=True)
class RiverConfig:
    """Parameters of the generator (the defaults are the package's ``river-synth``)."""

    num_nodes: int = 64
    hours: int = 8760
    routing: str = "muskingum"
    seed: int = 0
    kappa: float = 0.1
    max_children: int = 3
    storm_interarrival_h: float = 72.0

    def __post_init__(self) -> None:
        if self.num_nodes < 2:
            raise ValueError(f"RiverConfig: num_nodes must be >= 2, got {self.num_nodes}")
        if self.hours < 48:
            raise ValueError(f"RiverConfig: hours must be >= 48, got {self.hours}")
        if self.routing not in ("muskingum", "lag"):
            raise ValueError(
                f"RiverConfig: routing must be 'muskingum' or 'lag', got {self.routing!r}"
            )


@dataclass
class RiverSim:
    """One simulated river: the tree, its geometry and hourly series ([T, N] unless noted)."""

    config: RiverConfig
    parent: np.ndarray  # [N] downstream neighbour of each node (-1 at the outlet, node 0)
    edge_index: np.ndarray  # [2, N-1] child → parent (upstream → downstream)
    edge_attr: np.ndarray  # [N-1, 3] (Δx km, Δz m, slope)
    position: np.ndarray  # [N, 2] km
    area: np.ndarray  # [N] local catchment area, km²
    k: np.ndarray  # [N] linear-reservoir coefficients
    baseflow: np.ndarray  # [N] m³/s
    discharge: np.ndarray  # Q, m³/s
    precipitation: np.ndarray  # mm/h
    soil_moisture: np.ndarray  # [0, 1]
    temperature: np.ndarray  # °C
    pressure: np.ndarray  # [T] hPa, shared
    lateral: np.ndarray  # R(t−1) + b entering node i at hour t, m³/s
    storage: np.ndarray  # [T] total water stored in nodes and reaches, m³/s·h
    node_storage: np.ndarray  # [T, N] S_i = Q_i / k_i
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def features(self) -> np.ndarray:
        """[T, N, 5]: discharge, precipitation, soil moisture, temperature, pressure (LamaH order)."""
        pressure = np.broadcast_to(self.pressure[:, None], self.discharge.shape)
        return np.stack(
            [self.discharge, self.precipitation, self.soil_moisture, self.temperature, pressure],
            axis=-1,
        ).astype(np.float32)


def _tree(cfg: RiverConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = cfg.num_nodes
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    children = np.zeros(n, dtype=np.int64)
    for node in range(1, n):
        open_ = np.flatnonzero(children[:node] < cfg.max_children)
        logits = cfg.kappa * depth[open_]
        prob = np.exp(logits - logits.max())
        j = int(rng.choice(open_, p=prob / prob.sum()))
        parent[node], depth[node] = j, depth[j] + 1
        children[j] += 1
    return parent, depth


def _storms(cfg: RiverConfig, rng: np.random.Generator, pos: np.ndarray) -> np.ndarray:
    t_len, n = cfg.hours, cfg.num_nodes
    precip = np.zeros((t_len, n))
    t = rng.exponential(cfg.storm_interarrival_h)
    while t < t_len:
        start = int(t)
        duration = int(rng.geometric(1 / 6))  # 1 + Geometric(1/6) failures: mean 6 h
        intensity = rng.exponential(5.0)
        centre = pos[rng.integers(n)] + rng.normal(0.0, 10.0, size=2)
        radius = rng.uniform(10.0, 40.0)
        footprint = np.exp(-((pos - centre) ** 2).sum(1) / (2 * radius**2))
        hours = np.arange(start, min(start + duration, t_len))
        jitter = rng.uniform(0.5, 1.5, size=hours.size)
        precip[hours] += intensity * jitter[:, None] * footprint[None, :]
        t += rng.exponential(cfg.storm_interarrival_h)
    return precip


def simulate_river(config: RiverConfig | None = None, **overrides: object) -> RiverSim:
    """Simulate one river (``simulate_river(num_nodes=64, hours=8760, seed=0)``); a few seconds."""
    cfg = config or RiverConfig()
    if overrides:
        cfg = RiverConfig(**{**asdict(cfg), **overrides})  # type: ignore[arg-type]
    rng = np.random.default_rng(cfg.seed)
    n, t_len = cfg.num_nodes, cfg.hours
    parent, _ = _tree(cfg, rng)
    child = np.arange(1, n)
    up, down = child, parent[1:]

    # Geometry: reach length, slope, drop, planar layout.
    dx = rng.uniform(2.0, 15.0, size=n - 1)
    slope = np.exp(rng.uniform(np.log(1e-3), np.log(2e-2), size=n - 1))
    dz = slope * dx * 1000.0
    pos = np.zeros((n, 2))
    angle = np.zeros(n)
    for e, node in enumerate(child):
        angle[node] = angle[parent[node]] + rng.uniform(-np.pi / 3, np.pi / 3)
        pos[node] = pos[parent[node]] + dx[e] * np.array([np.cos(angle[node]), np.sin(angle[node])])

    # Catchments and reservoirs.
    area = rng.uniform(20.0, 200.0, size=n)
    k = rng.uniform(0.3, 0.8, size=n)
    base = 0.02 * area

    # Forcing.
    precip = _storms(cfg, rng, pos)
    hours = np.arange(t_len)
    temp = (
        10.0
        + 8.0 * np.sin(2 * np.pi * hours / 8760.0)[:, None]
        + 4.0 * np.sin(2 * np.pi * hours / 24.0)[:, None]
        + rng.normal(0.0, 1.0, size=(t_len, n))
    )
    eps = rng.normal(0.0, 1.0, size=t_len)
    ar1 = np.zeros(t_len)
    for h in range(1, t_len):
        ar1[h] = 0.99 * ar1[h - 1] + eps[h]
    pressure = 1000.0 + 3.0 * ar1
    soil = np.zeros((t_len, n))
    soil[0] = 0.3
    eta = 0.002 * (1.0 + np.maximum(temp / 20.0, 0.0))
    for h in range(1, t_len):
        soil[h] = np.clip(soil[h - 1] + 0.02 * precip[h - 1] - eta[h] * soil[h - 1], 0.0, 1.0)
    uh = UNIT_HYDROGRAPH / UNIT_HYDROGRAPH.sum()
    effective = soil**2 * precip
    runoff = np.zeros_like(effective)
    for lag, weight in enumerate(uh):
        runoff[lag:] += weight * effective[: t_len - lag]
    runoff *= area / 3.6  # mm/h over km² → m³/s

    # Routing.
    travel = dx / (3.0 * np.sqrt(slope / 0.01))  # K_e, hours
    q = np.zeros((t_len, n))
    q[0] = 5.0 * base
    lateral = np.zeros((t_len, n))
    lateral[1:] = runoff[:-1] + base
    lateral[0] = base
    reach_storage = np.zeros(t_len)
    if cfg.routing == "lag":
        tau = np.maximum(1, np.round(travel)).astype(np.int64)
        for t in range(1, t_len):
            src_t = np.maximum(t - tau, 0)
            inflow = lateral[t] + np.bincount(down, weights=q[src_t, up], minlength=n)
            q[t] = (1.0 - k) * q[t - 1] + k * inflow
        # Water in transit on reach e at hour t: Q_j(s) for s in (t − τ, t − 1], pre-history = Q_j(0).
        padded = np.concatenate([np.repeat(q[:1], tau.max(), axis=0), q], axis=0)
        cums = np.concatenate([np.zeros((1, n)), np.cumsum(padded, axis=0)], axis=0)
        off = tau.max()
        for t in range(t_len):
            hi = cums[t + off, up]  # Σ up to padded index t+off−1 ↔ hour t−1
            lo = cums[t + off - tau + 1, up]  # Σ up to hour t−τ
            reach_storage[t] = float((hi - lo).sum())
    else:
        nsub = np.maximum(1, np.ceil(travel / 2.5)).astype(np.int64)
        kk = np.maximum(travel / nsub, 0.625)
        denom = 2 * kk * (1 - MUSKINGUM_X) + 1.0
        c0 = (1.0 - 2 * kk * MUSKINGUM_X) / denom
        c1 = (1.0 + 2 * kk * MUSKINGUM_X) / denom
        c2 = (2 * kk * (1 - MUSKINGUM_X) - 1.0) / denom
        max_sub = int(nsub.max())
        active = np.arange(max_sub)[:, None] < nsub[None, :]  # [max_sub, E]
        # State per sub-reach p: inflow I_p(t−1) and outflow O_p(t−1); start at steady state.
        inflow_prev = np.repeat(q[0, up][None, :], max_sub, axis=0)
        out_prev = inflow_prev.copy()
        reach_out = q[0, up].copy()  # O_e(t−1): outflow of the last sub-reach

        def stored(i_val: np.ndarray, o_val: np.ndarray) -> float:
            # S̃ = K[X I + (1−X) O] − I/2 + O/2: its hourly change is I(t−1) − O(t−1) exactly.
            s = kk * (MUSKINGUM_X * i_val + (1 - MUSKINGUM_X) * o_val) - 0.5 * i_val + 0.5 * o_val
            return float(np.where(active, s, 0.0).sum())

        reach_storage[0] = stored(inflow_prev, out_prev)
        for t in range(1, t_len):
            inflow = lateral[t] + np.bincount(down, weights=reach_out, minlength=n)
            q[t] = (1.0 - k) * q[t - 1] + k * inflow
            feed = q[t, up]
            new_in = np.empty_like(inflow_prev)
            new_out = np.empty_like(out_prev)
            for p in range(max_sub):
                o = c0 * feed + c1 * inflow_prev[p] + c2 * out_prev[p]
                o = np.where(active[p], o, feed)  # inactive sub-reaches pass water through
                new_in[p], new_out[p] = feed, o
                feed = o
            reach_out = new_out[nsub - 1, np.arange(n - 1)]
            inflow_prev, out_prev = new_in, new_out
            reach_storage[t] = stored(inflow_prev, out_prev)
    node_storage = q / k
    storage = node_storage.sum(1) + reach_storage
    edge_index = np.stack([up, down]).astype(np.int64)
    edge_attr = np.stack([dx, dz, slope], axis=1)
    return RiverSim(
        config=cfg,
        parent=parent,
        edge_index=edge_index,
        edge_attr=edge_attr,
        position=pos,
        area=area,
        k=k,
        baseflow=base,
        discharge=q,
        precipitation=precip,
        soil_moisture=soil,
        temperature=temp,
        pressure=pressure,
        lateral=lateral,
        storage=storage,
        node_storage=node_storage,
        extra={"travel_time_h": travel},
    )


def cached_river(config: RiverConfig, cache_dir: Path | None) -> RiverSim:
    """:func:`simulate_river`, stored as ``.npz`` in ``cache_dir`` keyed by the parameters."""
    if cache_dir is None:
        return simulate_river(config)
    key = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"river-{key}.npz"
    names = [f for f in RiverSim.__dataclass_fields__ if f not in ("config", "extra")]
    if path.is_file():
        try:
            with np.load(path) as z:
                arrays = {name: z[name] for name in names}
            return RiverSim(config=config, **arrays)
        except (OSError, KeyError, ValueError):
            pass  # a broken cache entry is rebuilt
    sim = simulate_river(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **{name: getattr(sim, name) for name in names})
    tmp.replace(path)
    return sim
