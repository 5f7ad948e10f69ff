"""Heuristic (non-learned) baselines of the paper's Table C.2 (Sec. 6.3 of its protocol).

``last``
    rank by the previous step's count ``y_{t-1}`` (the ``prev_*_01back`` lag column when the data
    has one, else the y history).
``avg``
    rank by the mean of the last W counts ``y_{t-1} .. y_{t-W}`` (W = 5 for Cook County, 10 for the
    cranes data in Table C.2). Lag ``k`` comes from the lag column ``prev_*_<k>back`` when the data
    has it, else from the y history concatenated over the splits in time order; lags before the
    first observed step are left out of the mean (fewer than W terms at the start, 0 without any).
``mean``
    rank by the all-history mean: every past count available for the site (lag columns and
    the y history), the long-run level of a persistent site.
``zero``
    the chance decision of Table C.2 (forecast 0 everywhere): every score ties, so under exact
    expected tie-breaking BPR@K = ``(K/S)·Σ_s y_s / Σ_{top-K} y``.

The *family* (:func:`heuristic_family`) is last, avg over W for W in :data:`HEURISTIC_WINDOWS`
(2, 3, 5, 10, plus any W asked for), the all-history mean and zero; :func:`best_heuristic`
picks one member on the validation split, the comparison row of every table and of ``train``.

Lag columns are recognised by name, ``^prev_.+_(\\d+)back$`` (Cook County: ``prev_deaths_05back`` ..
``prev_deaths_01back``), and read un-standardised.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import torch
from torch import Tensor

from .data import SPLITS, Split, TopKData
from .metrics import bpr, check_k, nanmean

Rule = Literal["last", "avg", "mean", "zero"]
HEURISTICS: tuple[str, ...] = ("last", "avg", "mean", "zero")
HEURISTIC_WINDOWS: tuple[int, ...] = (2, 3, 5, 10)
LAG_PATTERN = re.compile(r"^prev_.+_(\d+)back$")


def lag_columns(feature_names: list[str]) -> dict[int, int]:
    """Lag ``k`` → feature index for the columns named ``prev_<name>_<k>back`` (first one wins)."""
    out: dict[int, int] = {}
    for j, name in enumerate(feature_names):
        m = LAG_PATTERN.fullmatch(name)
        if m and int(m.group(1)) >= 1:
            out.setdefault(int(m.group(1)), j)
    return out


def _split_start(data: TopKData, split: str) -> int:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}; got {split!r}")
    return sum(data.split(s).num_steps for s in SPLITS[: SPLITS.index(split)])


def lagged_counts(data: TopKData, split: str, lag: int) -> tuple[Tensor, Tensor]:
    """``y_{t-lag}`` for every step t of ``split``: values ``[T, S]`` and an availability mask.

    The lag column is used when the data has one (un-standardised with the stored training
    statistics), otherwise the y history; steps before the first observation are unavailable,
    and so are the zero-padded entries of lag columns (:func:`_padded_sources`; since 0.7.0).
    """
    if lag < 1:
        raise ValueError(f"lag must be >= 1; got {lag}")
    sp = data.split(split)
    cols = lag_columns(data.feature_names)
    if lag in cols:
        values = _lag_column_counts(data, split, cols[lag])
        start = _split_start(data, split)
        padded = _padded_sources(data)
        ok = torch.ones_like(values, dtype=torch.bool)
        for i in range(sp.num_steps):
            if start + i - lag in padded:
                ok[i] = False
        return torch.where(ok, values, torch.zeros_like(values)), ok
    history, _ = data.y_history()
    start = _split_start(data, split)
    values = torch.zeros(sp.num_steps, data.num_sites)
    ok = torch.zeros(sp.num_steps, data.num_sites, dtype=torch.bool)
    for i in range(sp.num_steps):
        t = start + i - lag
        if t >= 0:
            values[i], ok[i] = history[t], True
    return values, ok


def _lag_column_counts(data: TopKData, split: str, j: int) -> Tensor:
    """Lag column ``j`` of ``split``, un-standardised with the stored training statistics."""
    mean = data.feature_mean[j] if data.feature_mean.numel() > j else torch.tensor(0.0)
    std = data.feature_std[j] if data.feature_std.numel() > j else torch.tensor(1.0)
    return (data.split(split).X[..., j] * std + mean).round().clamp_min(0.0)


def _padded_sources(data: TopKData) -> set[int]:
    """Steps before the data (index < 0, counted from the first train step) whose every lag-column
    entry is 0 at every site: the zero padding of lags that reach back before the first observed
    step (Cook County: ``prev_deaths_02back`` .. ``05back`` of the first train step), which is
    not an observed count and is treated as unavailable, like the y history before its start.
    A real step before the data with no event at any site would be read as padding too."""
    seen: dict[int, bool] = {}
    for lag, j in lag_columns(data.feature_names).items():
        for split in SPLITS:
            start, values = _split_start(data, split), _lag_column_counts(data, split, j)
            for i in range(values.shape[0]):
                src = start + i - lag
                if src < 0:
                    seen[src] = seen.get(src, False) or bool((values[i] != 0).any())
    return {src for src, nonzero in seen.items() if not nonzero}


def heuristic_scores(data: TopKData, split: str, rule: str, window: int = 5) -> Tensor:
    """Scores ``[T, S]`` of one heuristic on ``split`` (also its point forecast for MAE/RMSE)."""
    if rule not in HEURISTICS:
        raise ValueError(f"rule must be one of {HEURISTICS}; got {rule!r}")
    if window < 1:
        raise ValueError(f"window must be >= 1; got {window}")
    sp = data.split(split)
    if rule == "zero":
        return torch.zeros(sp.num_steps, data.num_sites)
    if rule == "mean":
        window = _all_history(data)
    lags = [1] if rule == "last" else list(range(1, window + 1))
    total = torch.zeros(sp.num_steps, data.num_sites)
    count = torch.zeros(sp.num_steps, data.num_sites)
    for lag in lags:
        values, ok = lagged_counts(data, split, lag)
        total += torch.where(ok, values, torch.zeros_like(values))
        count += ok.to(total.dtype)
    return torch.where(count > 0, total / count.clamp_min(1.0), torch.zeros_like(total))


def _all_history(data: TopKData) -> int:
    """The largest lag any step can have: every step of the three splits plus the lag columns."""
    steps = sum(data.split(s).num_steps for s in SPLITS)
    return steps + max(lag_columns(data.feature_names), default=0)


def heuristic_family(window: int | None = None) -> list[tuple[str, int]]:
    """The candidate heuristics ``(rule, W)``: last, avg over each W of :data:`HEURISTIC_WINDOWS`
    (and ``window`` if given), the all-history mean and zero (W is 1 where it does not apply)."""
    windows = sorted({*HEURISTIC_WINDOWS, *([window] if window is not None else [])})
    if any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in windows):
        raise ValueError(f"window must be an integer >= 1; got {window!r}")
    return [("last", 1), *(("avg", w) for w in windows), ("mean", 1), ("zero", 1)]


def heuristic_source(data: TopKData, rule: str, window: int = 5) -> str:
    """Where a heuristic's lags come from: ``lag columns``, ``y history`` or both (``none`` for zero)."""
    if rule == "zero":
        return "none"
    if rule == "mean":
        return "lag columns + y history" if lag_columns(data.feature_names) else "y history"
    need = [1] if rule == "last" else list(range(1, window + 1))
    have = lag_columns(data.feature_names)
    n_cols = sum(k in have for k in need)
    if n_cols == len(need):
        return "lag columns"
    return "y history" if n_cols == 0 else f"lag columns 1-{n_cols} + y history"


def heuristic_label(rule: str, window: int = 5) -> str:
    """The row label used in tables: ``last step``, ``avg over W``, ``all-history mean``,
    ``chance (ŷ=0)``."""
    labels = {"last": "last step", "mean": "all-history mean", "zero": "chance (ŷ=0)"}
    return labels.get(rule, f"avg over {window}")


def evaluate_heuristic(
    data: TopKData, split: str, k: int, rule: str, window: int = 5
) -> dict[str, Any]:
    """BPR@K (exact expected ties; mean over steps and per step) and MAE/RMSE of one heuristic."""
    k = check_k(k, data.num_sites)
    sp = data.split(split)
    scores = heuristic_scores(data, split, rule, window)
    per_step = bpr(sp.y, scores, k)
    err = scores - sp.y.to(torch.float32)
    return {
        "rule": rule,
        "method": heuristic_label(rule, window),
        "window": window if rule == "avg" else None,
        "source": heuristic_source(data, rule, window),
        "split": split,
        "bpr": nanmean(per_step),
        "bpr_per_step": [float(v) for v in per_step],
        "mae": float(err.abs().mean()),
        "rmse": float(err.pow(2).mean().sqrt()),
    }


def best_heuristic(
    data: TopKData,
    k: int,
    window: int | None = None,
    select_on: str = "valid",
    report_on: str = "test",
) -> dict[str, Any]:
    """The member of the heuristic family (:func:`heuristic_family`: last, avg over 2/3/5/10 and
    ``window``, all-history mean, zero) with the highest BPR@K on ``select_on`` (validation), with
    its BPR on both splits.

    Returns ``{"rule", "window", "method", "valid_bpr", "test_bpr", "all": [...]}`` (keys named
    after the two splits); ties keep the family's order (simpler rules first).
    """
    rows = []
    for rule, w in heuristic_family(window):
        sel = evaluate_heuristic(data, select_on, k, rule, w)
        rep = evaluate_heuristic(data, report_on, k, rule, w)
        rows.append(
            {
                "rule": rule,
                "window": sel["window"],
                "method": sel["method"],
                f"{select_on}_bpr": sel["bpr"],
                f"{report_on}_bpr": rep["bpr"],
            }
        )
    key = f"{select_on}_bpr"
    best = max(rows, key=lambda r: -1.0 if r[key] != r[key] else r[key])  # NaN sorts last
    return {**best, "all": rows}


def history_feature_name(data: TopKData, window: int) -> str:
    """Name of the ``window``-step history-mean feature: ``avg_<target>_<W>steps``."""
    return f"avg_{data.target_name}_{window}steps"


def with_history_features(data: TopKData, windows: Sequence[int] = (10,)) -> TopKData:
    """A copy of ``data`` with one extra feature per window W: each site's mean count over the
    previous W steps, the score of the ``avg`` heuristic (lag columns where the data has them,
    else the y history across splits; past steps only, fewer at the start of the history).

    It gives the forecaster the long history that ``avg over W`` exploits, e.g. a 10-step mean
    on Cook County, whose files hold five lag columns. The features are named
    ``avg_<target>_<W>steps`` and standardised with training statistics like the others.
    """
    if not windows:
        raise ValueError("windows must name at least one window W >= 1")
    if any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in windows):
        raise ValueError(f"every window must be an integer >= 1; got {list(windows)}")
    names = [history_feature_name(data, w) for w in windows]
    taken = [n for n in names if n in data.feature_names] + [
        n for i, n in enumerate(names) if n in names[:i]
    ]
    if taken:
        raise ValueError(f"the data already has the feature(s) {sorted(set(taken))}")
    extra = {
        s: torch.stack([heuristic_scores(data, s, "avg", w) for w in windows], -1) for s in SPLITS
    }
    return _append_features(data, extra, names, list(range(data.num_features)))


def _append_features(
    data: TopKData, extra: dict[str, Tensor], names: list[str], keep: list[int]
) -> TopKData:
    """A copy of ``data`` with the feature columns ``keep`` followed by ``extra`` (per split,
    ``[T, S, E]`` raw values named ``names``), z-scored with the training steps' mean and std
    (a std that is NaN, with a single training value, counts as 1; at least 1e-6)."""
    F = data.num_features
    mean = data.feature_mean if data.feature_mean.numel() == F else torch.zeros(F)
    std = data.feature_std if data.feature_std.numel() == F else torch.ones(F)
    mu = extra["train"].mean(dim=(0, 1))
    sd = extra["train"].std(dim=(0, 1)).nan_to_num(1.0).clamp_min(1e-6)
    splits = {}
    for s in SPLITS:
        sp = data.split(s)
        X = torch.cat([sp.X[..., keep], ((extra[s] - mu) / sd).to(sp.X.dtype)], -1)
        splits[s] = Split(X, sp.y, sp.time, list(sp.timesteps))
    return replace(
        data,
        train=splits["train"],
        valid=splits["valid"],
        test=splits["test"],
        feature_names=[*(data.feature_names[j] for j in keep), *names],
        feature_mean=torch.cat([mean[keep], mu]),
        feature_std=torch.cat([std[keep], sd]),
    )


HISTORY_FEATURE_WINDOWS: tuple[int, ...] = (1, 2, 3, 5, 10)


def with_site_history_features(
    data: TopKData,
    windows: Sequence[int] = HISTORY_FEATURE_WINDOWS,
    zero_window: int = 10,
    drop_lag_columns: bool = True,
) -> TopKData:
    """A copy of ``data`` with the per-site history features of the history forecaster.

    For every window W: ``log1p_avg_<target>_<W>steps = log(1 + mean of the last W counts)``
    (W = 1 is the last count); ``log1p_mean_<target>_past``, the log of 1 + the all-history mean;
    and ``zeros_<target>_<zero_window>steps``, the fraction of zero counts among the last
    ``zero_window`` (0 before any history). Lags come from the lag columns where the data has
    them, else the y history, exactly as the heuristics read them (past steps only); entries of
    lag columns that are zero padding before the first observed step (Cook County's first train
    steps) are unavailable, not zero counts (since 0.7.0; 0.6.0 read them as zeros, which
    shrank the long windows' features on the early train steps only).

    On the log scale a negative-binomial model with the exp link (Eq. 15, ``link="exp"``) holds
    every heuristic of the family: with weight 1 on ``log1p_avg_W`` and 0 elsewhere its mean is
    ``c·(1 + avg_W)``, whose ranking is the ``avg over W`` heuristic's. The features are
    standardised with training statistics like the others.

    ``drop_lag_columns`` (default) removes the raw ``prev_*_<k>back`` lag columns: under the exp
    link a weight on a raw count multiplies the forecast by ``exp(β·y_lag)``, which explodes on
    the rare large counts of zero-inflated data (their information is in the log features).
    """
    if not windows:
        raise ValueError("windows must name at least one window W >= 1")
    if any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in windows):
        raise ValueError(f"every window must be an integer >= 1; got {list(windows)}")
    if isinstance(zero_window, bool) or not isinstance(zero_window, int) or zero_window < 1:
        raise ValueError(f"zero_window must be an integer >= 1; got {zero_window!r}")
    tgt = data.target_name
    names = [f"log1p_avg_{tgt}_{w}steps" for w in windows]
    names += [f"log1p_mean_{tgt}_past", f"zeros_{tgt}_{zero_window}steps"]
    taken = [n for n in names if n in data.feature_names]
    if taken or len(set(names)) != len(names):
        raise ValueError(f"the data already has (or repeats) the feature(s) {sorted(set(taken))}")

    def raw(split: str) -> Tensor:
        cols = [torch.log1p(heuristic_scores(data, split, "avg", w)) for w in windows]
        cols.append(torch.log1p(heuristic_scores(data, split, "mean")))
        zeros = torch.zeros(data.split(split).num_steps, data.num_sites)
        seen = torch.zeros_like(zeros)
        for lag in range(1, zero_window + 1):
            values, ok = lagged_counts(data, split, lag)
            zeros += (ok & (values == 0)).to(zeros.dtype)
            seen += ok.to(zeros.dtype)
        cols.append(zeros / seen.clamp_min(1.0))
        return torch.stack(cols, -1)

    keep = list(range(data.num_features))
    if drop_lag_columns:
        lags = set(lag_columns(data.feature_names).values())
        keep = [j for j in keep if j not in lags]
    return _append_features(data, {s: raw(s) for s in SPLITS}, names, keep)


OFFSET_PREFIX = "offset_log_"


def offset_feature_index(data: TopKData) -> int | None:
    """Index of the heuristic-offset column (named ``offset_log_*``), or None without one."""
    found = [j for j, n in enumerate(data.feature_names) if n.startswith(OFFSET_PREFIX)]
    if len(found) > 1:
        raise ValueError(f"data has more than one offset column: {found}")
    return found[0] if found else None


def with_heuristic_offset(
    data: TopKData,
    rule: str = "avg",
    window: int = 5,
    c: float = 0.1,
    source: TopKData | None = None,
) -> TopKData:
    """A copy of ``data`` with one more column, the log-offset ``o = log(h + c)`` of the
    heuristic ``h`` = :func:`heuristic_scores` (``rule``, ``window``) of ``source`` (default
    ``data``; pass the data before :func:`with_site_history_features`, which drops the lag
    columns the heuristics read). h at step t uses counts of steps before t only.

    The column is named ``offset_log_<target>_<rule>_<W>_plus_<c>`` and kept on its raw scale
    (recorded mean 0, std 1, not standardised): :func:`~bpr_topk.experiment.make_model` finds it
    by name and gives :class:`~bpr_topk.models.NegBinMixedEffects` ``offset_feature`` = its
    index, so ``log μ = log(h + c) + f_θ(x)`` and the model starts at the heuristic's ranking.
    ``c > 0`` keeps sites with h = 0 finite (they all tie, as in the heuristic).
    """
    if rule not in HEURISTICS:
        raise ValueError(f"rule must be one of {HEURISTICS}; got {rule!r}")
    if not (c > 0 and c == c and c != float("inf")):
        raise ValueError(f"c must be a finite number > 0; got {c!r}")
    if offset_feature_index(data) is not None:
        raise ValueError("the data already has an offset column")
    src = data if source is None else source
    if src.num_sites != data.num_sites or any(
        src.split(s).num_steps != data.split(s).num_steps for s in SPLITS
    ):
        raise ValueError("source must have the same sites and steps as data")
    w = window if rule == "avg" else 1
    name = f"{OFFSET_PREFIX}{data.target_name}_{rule}_{w}_plus_{c:g}"
    F = data.num_features
    mean = data.feature_mean if data.feature_mean.numel() == F else torch.zeros(F)
    std = data.feature_std if data.feature_std.numel() == F else torch.ones(F)
    splits = {}
    for s in SPLITS:
        sp = data.split(s)
        o = torch.log(heuristic_scores(src, s, rule, window) + c).to(sp.X.dtype)
        splits[s] = Split(torch.cat([sp.X, o.unsqueeze(-1)], -1), sp.y, sp.time, list(sp.timesteps))
    return replace(
        data,
        train=splits["train"],
        valid=splits["valid"],
        test=splits["test"],
        feature_names=[*data.feature_names, name],
        feature_mean=torch.cat([mean, torch.zeros(1)]),
        feature_std=torch.cat([std, torch.ones(1)]),
    )
