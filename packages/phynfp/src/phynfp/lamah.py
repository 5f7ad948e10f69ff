"""``lamah:<dir>``: a loader for the LamaH-CE river data set (Klingler et al. 2021, Zenodo record
5153305, ``1_LamaH-CE_daily_hourly.tar.gz``), the paper's river benchmark. It never downloads.

Needed parts of the folder (``;``-separated CSV files):

* ``B_basins_intermediate_all/1_attributes/Stream_dist.csv``: ``ID, NEXTDOWNID, dist_hdn, elev_diff,
  strm_slope`` (the river tree: each gauge's next gauge downstream);
* ``B_basins_intermediate_all/2_timeseries/hourly/ID_<id>.csv``: ``YYYY`` (plus ``MM, DD, hh``...) and
  ``prec, volsw_123, 2m_temp, surf_press``;
* ``D_gauges/2_timeseries/hourly/ID_<id>.csv``: ``YYYY`` ... and ``qobs``.

Gauges: all gauges upstream of ``root_gauge_id`` (recursing on NEXTDOWNID) whose discharge is > 0 and
≤ 1e30 everywhere and whose two files hold complete hourly records for the years used. An invalid
gauge is removed; with ``rewire=True`` each of its in-edges is joined to its out-edge target (distances
and elevation drops summed, slope recomputed). Windows never cross a calendar year; statistics use the
years ≤ ``stats_until``; splits by year (train: even years ≤ 2014, validation: odd years ≤ 2015,
test: years ≥ 2016), or ``split="random"`` (official code: random 80/20 of the training years' windows).
"""

from __future__ import annotations

import calendar
from pathlib import Path
from typing import Any

import numpy as np

from .data import FluxDataset, _group

__all__ = ["MET_COLUMNS", "load_lamah", "write_lamah_folder"]

STREAM = Path("B_basins_intermediate_all/1_attributes/Stream_dist.csv")
MET_DIR = Path("B_basins_intermediate_all/2_timeseries/hourly")
Q_DIR = Path("D_gauges/2_timeseries/hourly")
MET_COLUMNS = ("prec", "volsw_123", "2m_temp", "surf_press")
STREAM_COLUMNS = ("ID", "NEXTDOWNID", "dist_hdn", "elev_diff", "strm_slope")


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError("the LamaH loader needs pandas: pip install 'phynfp[lamah]'") from exc
    return pd


def _read_csv(path: Path, columns: tuple[str, ...]) -> Any:
    pd = _pandas()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing file")
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: empty file")
    try:
        frame = pd.read_csv(path, sep=";")
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path}: empty file") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: missing column(s) {missing}; expected ';'-separated columns including "
            f"{', '.join(columns)}"
        )
    if len(frame) == 0:
        raise ValueError(f"{path}: no data rows")
    sub = frame[list(columns)]
    values = sub.apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        r, c = bad[0]
        raise ValueError(
            f"{path}: row {r + 2}, column {columns[c]!r}: {sub.iat[r, c]!r} is not a finite number"
        )
    return values


def _year_rows(years_col: np.ndarray, years: list[int]) -> dict[int, np.ndarray] | None:
    """Row indices of each requested year, or None when a year is incomplete (not 24·days rows)."""
    out = {}
    for year in years:
        rows = np.flatnonzero(years_col == year)
        if rows.size != 24 * (366 if calendar.isleap(year) else 365):
            return None
        out[year] = rows
    return out


def load_lamah(
    root: str | Path,
    years: list[int] | None = None,
    *,
    root_gauge_id: int = 399,
    rewire: bool = True,
    window: int = 24,
    lead: int = 6,
    stride: int = 1,
    eval_stride: int = 6,
    stats_until: int = 2015,
    split: str = "years",
    train_years: list[int] | None = None,
    val_years: list[int] | None = None,
    test_years: list[int] | None = None,
    seed: int = 0,
    standardize_edges: bool = True,
    headwater_reverse_edges: bool = False,
) -> FluxDataset:
    """Load a LamaH-CE folder (see the module docstring). ``years=None``: the years in the root gauge's
    discharge file."""
    root = Path(root)
    needed = [root / STREAM, root / MET_DIR, root / Q_DIR]
    if not all(p.exists() for p in needed):
        raise FileNotFoundError(
            f"{root}: not a LamaH-CE folder; it needs {STREAM}, {MET_DIR}/ and {Q_DIR}/ (from "
            "Zenodo record 5153305, 1_LamaH-CE_daily_hourly.tar.gz)"
        )
    if split not in ("years", "random"):
        raise ValueError(f"split must be 'years' or 'random', got {split!r}")
    stream = _read_csv(root / STREAM, STREAM_COLUMNS)
    if (stream[:, :2] != np.round(stream[:, :2])).any():
        raise ValueError(f"{root / STREAM}: ID and NEXTDOWNID must be integers")
    ids = stream[:, 0].astype(np.int64)
    if len(set(ids.tolist())) != ids.size:
        raise ValueError(f"{root / STREAM}: duplicate gauge IDs")
    nxt = dict(zip(ids.tolist(), stream[:, 1].astype(np.int64).tolist()))
    attrs = {int(i): (float(d), float(z)) for i, d, z in zip(ids, stream[:, 2], stream[:, 3])}
    if root_gauge_id not in nxt:
        raise ValueError(f"{root / STREAM}: root gauge {root_gauge_id} is not listed")

    # The basin: gauges whose NEXTDOWNID chain reaches the root; a chain that loops is no tree.
    basin = []
    for gid in ids.tolist():
        seen, node = set(), gid
        while node != root_gauge_id and node in nxt:
            if node in seen:
                raise ValueError(
                    f"{root / STREAM}: NEXTDOWNID has a cycle through gauge {node}; the river network "
                    "must be a tree (a DAG)"
                )
            seen.add(node)
            node = nxt[node]
        if node == root_gauge_id:
            basin.append(gid)

    def series(gid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        q_path, m_path = root / Q_DIR / f"ID_{gid}.csv", root / MET_DIR / f"ID_{gid}.csv"
        if not q_path.is_file() or not m_path.is_file():
            return None
        q = _read_csv(q_path, ("YYYY", "qobs"))
        m = _read_csv(m_path, ("YYYY", *MET_COLUMNS))
        return q[:, 0].astype(np.int64), q[:, 1], m

    root_data = series(root_gauge_id)
    if root_data is None:
        raise ValueError(
            f"{root}: the root gauge {root_gauge_id} has no discharge or meteorology file"
        )
    if years is None:
        years = sorted(set(root_data[0].tolist()))
    years = sorted(int(y) for y in years)
    valid: dict[int, np.ndarray] = {}
    for gid in basin:
        data = root_data if gid == root_gauge_id else series(gid)
        if data is None:
            continue
        q_years, q, met = data
        q_rows = _year_rows(q_years, years)
        m_rows = _year_rows(met[:, 0].astype(np.int64), years)
        if q_rows is None or m_rows is None:
            continue
        qq = np.concatenate([q[q_rows[y]] for y in years])
        if (qq <= 0).any() or (qq > 1e30).any():
            continue
        mm = np.concatenate([met[m_rows[y], 1:] for y in years])
        valid[gid] = np.concatenate([qq[:, None], mm], axis=1)
    if root_gauge_id not in valid:
        raise ValueError(
            f"{root}: the root gauge {root_gauge_id} is invalid (discharge <= 0 or incomplete years)"
        )
    gauges = sorted(valid)
    index = {g: i for i, g in enumerate(gauges)}
    src, dst, dist, elev = [], [], [], []
    for gid in gauges:
        if gid == root_gauge_id:
            continue
        d, z = attrs[gid]
        node = nxt[gid]
        while node not in valid:
            if not rewire:
                break
            d2, z2 = attrs[node]
            d, z = d + d2, z + z2
            node = nxt[node]
        if node not in valid:
            continue
        src.append(index[gid])
        dst.append(index[node])
        dist.append(d)
        elev.append(z)
    dist_a, elev_a = np.asarray(dist), np.asarray(elev)
    slope = np.divide(elev_a, dist_a, out=np.zeros_like(elev_a), where=dist_a != 0)
    edge_index = np.array([src, dst], dtype=np.int64).reshape(2, -1)
    edge_attr = np.stack([dist_a, elev_a, slope], axis=1).reshape(-1, 3)
    if (
        headwater_reverse_edges
    ):  # official loader: each source gets an edge from its downstream gauge
        indeg = np.bincount(edge_index[1], minlength=len(gauges))
        extra = [e for e in range(edge_index.shape[1]) if indeg[edge_index[0, e]] == 0]
        edge_index = np.concatenate([edge_index, edge_index[::-1, extra]], axis=1)
        edge_attr = np.concatenate([edge_attr, edge_attr[extra]])
    values = np.stack([valid[g] for g in gauges], axis=1)  # [T, N, 5]
    hours_per_year = [24 * (366 if calendar.isleap(y) else 365) for y in years]
    offsets = np.concatenate([[0], np.cumsum(hours_per_year)])
    year_of_hour = np.repeat(years, hours_per_year)
    stats_mask = year_of_hour <= stats_until
    if not stats_mask.any():
        raise ValueError(
            f"{root}: no year <= {stats_until} to compute normalisation statistics from"
        )

    def starts(year_list: list[int], step: int) -> np.ndarray:
        chunks = []
        for y in year_list:
            if y not in years:
                continue
            i = years.index(y)
            last = hours_per_year[i] - (window + lead)
            chunks.append(offsets[i] + np.arange(0, last + 1, step, dtype=np.int64))
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)

    train_years = train_years or [y for y in years if y <= 2014 and y % 2 == 0]
    val_years = val_years or [y for y in years if y <= 2015 and y % 2 == 1]
    test_years = test_years or [y for y in years if y >= 2016]
    if split == "random":
        pool = starts(train_years, stride)
        perm = np.random.default_rng(seed).permutation(pool.size)
        cut = round(0.8 * pool.size)
        parts = {"train": np.sort(pool[perm[:cut]]), "val": np.sort(pool[perm[cut:]])}
    else:
        parts = {"train": starts(train_years, stride), "val": starts(val_years, eval_stride)}
    parts["test"] = starts(test_years, eval_stride)
    empty = [k for k, v in parts.items() if v.size == 0]
    if empty:
        raise ValueError(
            f"{root}: no {'/'.join(empty)} windows for years {years} (train: even years <= 2014, "
            "validation: odd years <= 2015, test: years >= 2016)"
        )
    group = _group(values, stats_mask, edge_index, edge_attr, 0, "lamah", standardize_edges)
    return FluxDataset(
        name="lamah",
        groups=[group],
        window=window,
        lead=lead,
        splits={k: [(0, v)] for k, v in parts.items()},
        feature_names=("qobs", *MET_COLUMNS),
        edge_feature_names=("dist_hdn", "elev_diff", "strm_slope"),
        info={
            "gauges": gauges,
            "removed": sorted(set(basin) - set(gauges)),
            "years": years,
            "rewire": rewire,
            "split": split,
        },
    )


def write_lamah_folder(
    root: str | Path,
    edge_index: np.ndarray,
    edge_attr: np.ndarray,
    features: np.ndarray,
    years: list[int],
    gauge_ids: list[int] | None = None,
) -> list[int]:
    """Write node series [T, N, 5] (qobs, prec, volsw_123, 2m_temp, surf_press) of a river tree in the
    LamaH-CE layout (T must equal the hours of ``years``); returns the gauge IDs used. The outlet
    (the node without downstream edge) gets ID 399. Used by the tests and to show the format."""
    root = Path(root)
    n = features.shape[1]
    hours = [24 * (366 if calendar.isleap(y) else 365) for y in years]
    if features.shape[0] != sum(hours) or features.shape[2] != 5:
        raise ValueError(f"features must be [{sum(hours)}, N, 5] for years {years}")
    out = np.full(n, -1)
    out[edge_index[0]] = edge_index[1]
    outlet = int(np.flatnonzero(out < 0)[0])
    if gauge_ids is None:
        gauge_ids = [399 if i == outlet else 1000 + i for i in range(n)]
    (root / STREAM).parent.mkdir(parents=True, exist_ok=True)
    (root / MET_DIR).mkdir(parents=True, exist_ok=True)
    (root / Q_DIR).mkdir(parents=True, exist_ok=True)
    dist = np.zeros(n)
    elev = np.zeros(n)
    for e in range(edge_index.shape[1]):
        dist[edge_index[0, e]], elev[edge_index[0, e]] = edge_attr[e, 0], edge_attr[e, 1]
    lines = [";".join(STREAM_COLUMNS)]
    for i in range(n):
        down = gauge_ids[out[i]] if out[i] >= 0 else 0
        slope = elev[i] / dist[i] if dist[i] else 0.0
        lines.append(f"{gauge_ids[i]};{down};{dist[i]:.6f};{elev[i]:.6f};{slope:.8f}")
    (root / STREAM).write_text("\n".join(lines) + "\n")
    stamp = []
    for y, h in zip(years, hours):
        t = np.arange(h)
        day = t // 24
        base = np.datetime64(f"{y}-01-01")
        dates = (base + day.astype("timedelta64[D]")).astype(object)
        for k in range(h):
            d = dates[k]
            stamp.append(f"{y};{d.month};{d.day};{k % 24};0")
    for i in range(n):
        q_lines = ["YYYY;MM;DD;hh;mm;qobs;ckhs"]
        m_lines = ["YYYY;MM;DD;hh;mm;" + ";".join(MET_COLUMNS)]
        for k, s in enumerate(stamp):
            q_lines.append(f"{s};{features[k, i, 0]:.6g};0")
            m_lines.append(s + ";" + ";".join(f"{v:.6g}" for v in features[k, i, 1:]))
        (root / Q_DIR / f"ID_{gauge_ids[i]}.csv").write_text("\n".join(q_lines) + "\n")
        (root / MET_DIR / f"ID_{gauge_ids[i]}.csv").write_text("\n".join(m_lines) + "\n")
    return gauge_ids
