"""Shared experiment driver for the CLI (``train``/``evaluate``/``demo``) and the benchmarks.

Trains NLL-only / DAML / BPR-only forecasters on one dataset, evaluates them with the ratio and
mean rankings, adds the non-learned baselines and draws the BPR-vs-NLL (Pareto) plot.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ._contract import mean_std, table
from .baselines import (
    best_heuristic,
    evaluate_heuristic,
    heuristic_family,
    offset_feature_index,
)
from .data import TopKData
from .decision import PGTopK, SPOPlusTopK
from .losses import DAMLLoss
from .models import ForecastModel, NegBinMixedEffects, TruncNormMixture
from .train import FitResult, evaluate_model, fit


@dataclass
class TrainConfig:
    """Hyperparameters of one training run.

    λ = 30, M = J = 100 and the validation every 10 epochs follow the paper's experiments
    (Sec. 5, App. C); the learning rate, epochs and σ = 0.01 are this package's defaults.
    """

    epochs: int = 1000
    lr: float = 1e-2
    link: str = "softplus"
    lam: float = 30.0
    nll_weight: float = 1.0
    num_score_samples: int = 100
    num_perturb_samples: int = 100
    sigma: float = 0.01
    noise: str = "normal"
    score: str = "joint"
    baseline: str | None = None
    forward: str = "hard"
    denominator_offset: float = 1.0
    reduction: str = "mean"
    val_freq: int = 10
    val_samples: int = 500
    selection: str = "paper"
    warm_start: bool = False
    finetune_epochs: int | None = None
    finetune_lr: float | None = None
    early_stopping: str | None = None
    patience: int = 5
    pg_h: float = 1.0
    max_epochs: int | None = None
    nll_tolerance: float = 0.01
    init: str = "official"
    site_slopes: bool = True
    dispersion: str = "global"


@dataclass
class EvalConfig:
    """Evaluation settings: ratio-rating trials × samples (paper: 1000 × 1000)."""

    trials: int = 10
    num_samples: int = 1000
    window: int = 5
    split: str = "test"


def make_model(
    kind: str,
    data: TopKData,
    seed: int,
    link: str = "softplus",
    init_index: int | None = None,
    dispersion: str = "global",
    site_slopes: bool = True,
) -> ForecastModel:
    """``negbin`` (Eq. 15, uses the features; ``link`` g, ``dispersion`` global or per site) or
    ``truncnorm`` (Eq. 14, official initialisation number ``seed`` unless ``init_index``).

    When ``data`` has a heuristic-offset column (:func:`~bpr_topk.baselines.with_heuristic_offset`)
    the negbin model takes it as its fixed offset (``offset_feature``; exp link needed)."""
    if kind == "negbin":
        gen = torch.Generator().manual_seed(seed)
        return NegBinMixedEffects(
            data.num_sites,
            data.num_features,
            link=link,  # type: ignore[arg-type]
            generator=gen,
            dispersion=dispersion,  # type: ignore[arg-type]
            site_slopes=site_slopes,
            offset_feature=offset_feature_index(data),
        )
    if kind == "truncnorm":
        return TruncNormMixture.official_init(
            seed if init_index is None else init_index, data.num_sites
        )
    raise ValueError(f"model must be 'negbin' or 'truncnorm'; got {kind!r}")


def default_model_kind(data: TopKData) -> str:
    return "negbin" if data.num_features > 0 else "truncnorm"


def make_loss(objective: str, k: int, eps: float, cfg: TrainConfig, seed: int) -> DAMLLoss:
    """The training objective: ``daml`` / ``nll`` / ``bpr`` (:class:`DAMLLoss`) or the
    decision-focused baselines ``spo+`` / ``pg`` (no likelihood term, as ``bpr``)."""
    common: dict[str, Any] = {
        "num_score_samples": cfg.num_score_samples,
        "num_perturb_samples": cfg.num_perturb_samples,
        "sigma": cfg.sigma,
        "noise": cfg.noise,
        "score": cfg.score,
        "baseline": cfg.baseline,
        "forward": cfg.forward,
        "denominator_offset": cfg.denominator_offset,
        "reduction": cfg.reduction,
        "generator": torch.Generator().manual_seed(seed),
    }
    if objective == "spo+":
        return SPOPlusTopK(k, **common)
    if objective == "pg":
        return PGTopK(k, h=cfg.pg_h, **common)
    return DAMLLoss(
        k,
        objective=objective,  # type: ignore[arg-type]
        eps=eps,
        lam=cfg.lam,
        nll_weight=cfg.nll_weight,
        **common,
    )


def train_one(
    data: TopKData,
    kind: str,
    k: int,
    objective: str,
    eps: float,
    seed: int,
    cfg: TrainConfig,
    reference_bpr: float | None = None,
    progress: bool = False,
    init_state: dict[str, torch.Tensor] | None = None,
) -> tuple[ForecastModel, FitResult]:
    """Seed everything, build the model (optionally from ``init_state``: a warm start, then
    ``cfg.finetune_epochs``/``cfg.finetune_lr`` apply) and fit it with the chosen objective."""
    torch.manual_seed(seed)
    model = make_model(
        kind, data, seed, cfg.link, dispersion=cfg.dispersion, site_slopes=cfg.site_slopes
    )
    if cfg.init == "mean" and isinstance(model, NegBinMixedEffects):
        model.init_at_mean(data.train.y, data.train.X)
    if not cfg.site_slopes and isinstance(model, NegBinMixedEffects):
        with torch.no_grad():
            model.b1.zero_()
        model.b1.requires_grad_(False)  # per-site random intercept only
    epochs, lr = cfg.epochs, cfg.lr
    if init_state is not None:
        model.load_state_dict(init_state)
        epochs = cfg.finetune_epochs if cfg.finetune_epochs is not None else epochs
        lr = cfg.finetune_lr if cfg.finetune_lr is not None else lr
    loss = make_loss(objective, k, eps, cfg, seed)
    result = fit(
        model,
        data.train,
        data.valid,
        loss,
        epochs=epochs,
        lr=lr,
        val_freq=cfg.val_freq,
        selection=cfg.selection,  # type: ignore[arg-type]
        reference_bpr=reference_bpr,
        val_samples=cfg.val_samples,
        progress=progress,
        early_stopping=cfg.early_stopping,  # type: ignore[arg-type]
        patience=cfg.patience,
        max_epochs=None if cfg.max_epochs is None else max(cfg.max_epochs, epochs),
        nll_tolerance=cfg.nll_tolerance,
    )
    return model, result


def search_train(
    data: TopKData,
    kind: str,
    k: int,
    objective: str,
    seed: int,
    cfg: TrainConfig,
    grid: dict[str, list[float]],
    reference_bpr: float | None = None,
    progress: bool = False,
    init_state: dict[str, torch.Tensor] | None = None,
) -> tuple[ForecastModel, FitResult, list[dict[str, Any]], int]:
    """Small grid search selected on the validation split only.

    ``grid`` maps ``lr``, ``sigma`` and ``eps`` to candidate values (missing keys keep ``cfg``'s
    value; ``eps`` needs key ``eps``). Every combination is trained with :func:`train_one`; each
    trial is scored by its selected checkpoint's valid NLL and valid BPR, and the trial is chosen
    with the App. C.2 rule of the objective (:func:`select_checkpoint`: NLL-only → best valid
    NLL; BPR-only, SPO+, PG → best valid BPR; DAML → best valid NLL among trials with valid BPR
    ≥ ``reference_bpr``, else the best valid BPR). Returns the chosen model and fit, all trials
    and the chosen index.
    """
    from itertools import product

    from .train import select_checkpoint

    keys = [key for key in ("lr", "sigma", "eps") if grid.get(key)]
    if "eps" not in grid:
        raise ValueError("grid needs an 'eps' entry (a list with the target BPR ε)")
    trials: list[dict[str, Any]] = []
    fitted: list[tuple[ForecastModel, FitResult]] = []
    for values in product(*(grid[key] for key in keys)):
        setting = dict(zip(keys, values))
        trial_cfg = replace(
            cfg,
            lr=float(setting.get("lr", cfg.lr)),
            sigma=float(setting.get("sigma", cfg.sigma)),
        )
        if init_state is not None and "lr" in setting:
            trial_cfg.finetune_lr = float(setting["lr"])
        eps = float(setting["eps"])
        model, result = train_one(
            data, kind, k, objective, eps, seed, trial_cfg, reference_bpr, progress, init_state
        )
        best = next(h for h in result.history if h["epoch"] == result.best_epoch)
        trials.append(
            {
                "lr": trial_cfg.lr,
                "sigma": trial_cfg.sigma,
                "eps": eps,
                "best_epoch": result.best_epoch,
                "valid_nll": best["valid_nll"],
                "valid_bpr": best["valid_bpr"],
            }
        )
        fitted.append((model, result))
    chosen = select_checkpoint(trials, objective, "paper", reference_bpr, cfg.lam, cfg.nll_weight)
    model, result = fitted[chosen]
    return model, result, trials, chosen


def selected_valid_bpr(result: FitResult) -> float:
    """Valid BPR of the selected checkpoint (the reference for DAML selection)."""
    return next(h["valid_bpr"] for h in result.history if h["epoch"] == result.best_epoch)


def evaluate_rows(
    model: ForecastModel, data: TopKData, k: int, method: str, ev: EvalConfig, offset: float
) -> list[dict[str, Any]]:
    """Rows for a trained model: ratio ranking, plus a ``+mean-rank`` row for NLL-only."""
    split = data.split(ev.split)
    ratio = evaluate_model(model, split, k, "ratio", ev.trials, ev.num_samples, offset)
    rows = [{"method": method, "ranking": "ratio", **ratio}]
    if method == "NLL-only":
        mean = evaluate_model(model, split, k, "mean")
        rows.append({"method": "NLL-only (mean ranking)", "ranking": "mean", **mean})
    return rows


def baseline_rows(data: TopKData, k: int, ev: EvalConfig) -> list[dict[str, Any]]:
    """Rows of the heuristic family on ``ev.split`` (:func:`~bpr_topk.baselines.heuristic_family`:
    last, avg over 2/3/5/10 and ``ev.window``, all-history mean, zero; no likelihood: NLL is NaN).

    The member with the best *validation* BPR@K carries ``best_on_valid=True``: it is the
    heuristic a method is compared with (the test split never chooses it); every row carries its
    ``valid_bpr`` too.
    """
    chosen = best_heuristic(data, k, ev.window)
    valid = {r["method"]: r["valid_bpr"] for r in chosen["all"]}
    rows = []
    for rule, w in heuristic_family(ev.window):
        res = evaluate_heuristic(data, ev.split, k, rule, w)
        rows.append(
            {
                "method": res["method"],
                "ranking": "history",
                "rule": rule,
                "window": res["window"],
                "source": res["source"],
                "nll": math.nan,
                "bpr": res["bpr"],
                "mae": res["mae"],
                "rmse": res["rmse"],
                "valid_bpr": valid[res["method"]],
                "best_on_valid": res["method"] == chosen["method"],
            }
        )
    return rows


def heuristic_comparison(
    model: ForecastModel,
    data: TopKData,
    k: int,
    ev: EvalConfig,
    offset: float,
    heuristic_data: TopKData | None = None,
) -> dict[str, Any]:
    """The trained model's valid and test BPR@K (ratio ranking, ``ev`` trials × samples) beside
    the best heuristic's (chosen on validation among the family: last, avg over 2/3/5/10 and
    ``ev.window``, all-history mean, zero).

    ``heuristic_better`` is true when that heuristic beats the model on validation or on test.
    ``heuristic_data``: the data the heuristics read (default ``data``); pass the data before
    :func:`~bpr_topk.baselines.with_site_history_features`, which drops the lag columns.
    """
    bprs = {
        s: evaluate_model(model, data.split(s), k, "ratio", ev.trials, ev.num_samples, offset)[
            "bpr"
        ]
        for s in ("valid", "test")
    }
    best = best_heuristic(heuristic_data if heuristic_data is not None else data, k, ev.window)
    better_valid = best["valid_bpr"] > bprs["valid"]
    better_test = best["test_bpr"] > bprs["test"]
    return {
        "model": {"valid_bpr": bprs["valid"], "test_bpr": bprs["test"]},
        "best_heuristic": {
            "rule": best["rule"],
            "window": best["window"],
            "method": best["method"],
            "valid_bpr": best["valid_bpr"],
            "test_bpr": best["test_bpr"],
        },
        "heuristics": best["all"],
        "heuristic_better_on_valid": better_valid,
        "heuristic_better_on_test": better_test,
        "heuristic_better": better_valid or better_test,
    }


def comparison_lines(cmp: dict[str, Any], name: str, k: int) -> list[str]:
    """The console table of :func:`heuristic_comparison` (valid and test BPR@K)."""
    best = cmp["best_heuristic"]
    rows = [
        [name, f"{cmp['model']['valid_bpr']:.4f}", f"{cmp['model']['test_bpr']:.4f}"],
        [
            f"{best['method']} (best heuristic on valid)",
            f"{best['valid_bpr']:.4f}",
            f"{best['test_bpr']:.4f}",
        ],
    ]
    return ["", table(rows, ["model vs heuristic", f"valid BPR@{k}", f"test BPR@{k}"])]


def comparison_warning(cmp: dict[str, Any], name: str, k: int) -> str | None:
    """One warning line when the best heuristic beats the model (None otherwise)."""
    if not cmp["heuristic_better"]:
        return None
    best, model = cmp["best_heuristic"], cmp["model"]
    where = [
        f"{s} {best[f'{s}_bpr']:.3f} vs {model[f'{s}_bpr']:.3f}"
        for s in ("valid", "test")
        if cmp[f"heuristic_better_on_{s}"]
    ]
    return (
        f"warning: the heuristic '{best['method']}' beats the trained {name} model on "
        f"BPR@{k} ({'; '.join(where)}); more epochs, early stopping (--early-stopping) or "
        "another learning rate may help, and the heuristic is the baseline to report"
    )


METHODS: dict[str, tuple[str, float]] = {
    "NLL-only": ("nll", 1.0),
    "BPR-only": ("bpr", 1.0),
    "SPO+": ("spo+", 1.0),
    "PG": ("pg", 1.0),
}


def parse_method(name: str) -> tuple[str, float]:
    """``NLL-only`` / ``BPR-only`` / ``SPO+`` / ``PG`` / ``DAML eps=<ε>`` → (objective, ε)."""
    if name in METHODS:
        return METHODS[name]
    if name.startswith("DAML eps="):
        return "daml", float(name.split("=", 1)[1])
    raise ValueError(
        f"unknown method {name!r}; expected NLL-only, BPR-only, SPO+, PG or 'DAML eps=<x>'"
    )


def compare(
    data: TopKData,
    kind: str,
    k: int,
    methods: list[str],
    seeds: list[int],
    cfg: TrainConfig,
    ev: EvalConfig,
    progress: bool = False,
    grids: dict[str, dict[str, list[float]]] | None = None,
) -> list[dict[str, Any]]:
    """Train every method for every seed (NLL-only first: its valid BPR is DAML's selection
    reference, App. C.2) and evaluate on ``ev.split``. Returns one row per (method, seed).

    ``grids`` maps an objective (``nll``, ``daml``, ``bpr``, ``spo+``, ``pg``) to a grid of
    :func:`search_train` (keys ``lr``, ``sigma``; ``eps`` defaults to the method's ε): that
    method is then trained once per setting and the setting is chosen on the validation split
    only; each row records the chosen ``selected`` settings and the ``search`` trials.
    Every row also carries ``valid_bpr`` and ``valid_nll``: the selected checkpoint's validation
    metrics as measured during training (ratio ranking, ``cfg.val_samples`` samples).
    """
    if "NLL-only" in methods:
        methods = ["NLL-only", *[m for m in methods if m != "NLL-only"]]
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        reference, nll_state = None, None
        for method in methods:
            objective, eps = parse_method(method)
            init: dict[str, torch.Tensor] | None = (
                nll_state if cfg.warm_start and objective != "nll" else None
            )
            extra: dict[str, Any] = {}
            grid = (grids or {}).get(objective)
            if grid:
                grid = {"eps": [eps], **grid}
                model, result, trials, chosen = search_train(
                    data, kind, k, objective, seed, cfg, grid, reference, progress, init
                )
                extra = {"selected": trials[chosen], "search": trials}
            else:
                model, result = train_one(
                    data, kind, k, objective, eps, seed, cfg, reference, progress, init
                )
            if objective == "nll":
                reference, nll_state = selected_valid_bpr(result), result.best_state
            chosen_h = next(h for h in result.history if h["epoch"] == result.best_epoch)
            valid = {"valid_bpr": chosen_h["valid_bpr"], "valid_nll": chosen_h["valid_nll"]}
            for row in evaluate_rows(model, data, k, method, ev, cfg.denominator_offset):
                rows.append(
                    {**row, "seed": seed, "best_epoch": result.best_epoch, **valid, **extra}
                )
    return rows


def summarise(
    rows: list[dict[str, Any]], keys: tuple[str, ...] = ("bpr", "nll", "mae", "rmse")
) -> list[dict[str, Any]]:
    """Mean and sample standard deviation (ddof=1) over seeds per method, in first-seen order.

    ``n`` is the number of rows (seeds) of the method; ``<key>_std`` is None when ``n < 2``.
    """
    out = []
    for method in dict.fromkeys(r["method"] for r in rows):
        group = [r for r in rows if r["method"] == method]
        entry: dict[str, Any] = {"method": method, "n": len(group)}
        for key in keys:
            mean, std = mean_std([float(r.get(key, math.nan)) for r in group])
            entry[key] = mean
            entry[f"{key}_std"] = std
        out.append(entry)
    return out


def format_table(
    summary: list[dict[str, Any]], keys: tuple[str, ...] = ("bpr", "nll", "mae")
) -> str:
    """Plain-text table for the terminal: ``mean ± sample std`` over seeds, the mean alone for a
    single seed (and for the deterministic baselines); ``seeds`` says how many."""
    rows = []
    for s in summary:
        cells: list[Any] = [s["method"]]
        for key in keys:
            value, std = s[key], s.get(f"{key}_std")
            if math.isnan(value):
                cells.append("—")
            elif std is None:
                cells.append(f"{value:.4f}")
            else:
                cells.append(f"{value:.4f} ± {std:.4f}")
        cells.append(s.get("n", 1))
        rows.append(cells)
    return table(rows, ["method", *(k.upper() for k in keys), "seeds"])


def pareto_plot(summary: list[dict[str, Any]], path: str | Path, title: str) -> Path:
    """Scatter of test BPR@K (x) vs test NLL per site-time (y, lower is better); the
    non-dominated learned models are joined; history baselines are vertical lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    learned = [s for s in summary if not math.isnan(s["nll"])]
    for s in learned:
        ax.errorbar(
            s["bpr"], s["nll"], xerr=s.get("bpr_std") or 0, fmt="o", capsize=3, label=s["method"]
        )
    front = sorted(
        (
            s
            for s in learned
            if not any(o["bpr"] >= s["bpr"] and o["nll"] < s["nll"] for o in learned)
        ),
        key=lambda s: s["bpr"],
    )
    if len(front) > 1:
        ax.plot([s["bpr"] for s in front], [s["nll"] for s in front], "k--", lw=1, alpha=0.6)
    for s in summary:
        if math.isnan(s["nll"]):
            ax.axvline(s["bpr"], ls=":", color="grey")
            ax.text(s["bpr"], ax.get_ylim()[1], s["method"], rotation=90, va="top", fontsize=7)
    ax.set_xlabel("test BPR@K (higher is better)")
    ax.set_ylabel("test NLL per site-time (lower is better)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def config_dict(cfg: TrainConfig | EvalConfig) -> dict[str, Any]:
    return asdict(cfg)


# ----------------------------------------------------------------- history forecaster protocol

DAML_RULES: tuple[str, ...] = ("paper", "code", "tradeoff")


def _valid_test(
    model: ForecastModel, data: TopKData, k: int, ev: EvalConfig, offset: float
) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in ("valid", "test"):
        m = evaluate_model(model, data.split(s), k, "ratio", ev.trials, ev.num_samples, offset)
        for key in ("bpr", "nll", "mae"):
            out[f"{s}_{key}"] = m[key]
    return out


def history_protocol(
    data: TopKData,
    k: int,
    seed: int,
    cfg: TrainConfig,
    ev: EvalConfig,
    nll_lrs: tuple[float, ...] = (0.03, 0.1),
    finetune_lrs: tuple[float, ...] = (0.01, 0.03),
    finetune_epochs: int = 100,
    progress: bool = False,
    nll_hook: Callable[[ForecastModel, FitResult], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """NLL-only, DAML (three selection rules) and BPR-only on ``data`` for one seed; every choice
    on the validation split. Returns one row per method with valid and test BPR/NLL/MAE.
    ``nll_hook(model, fit_result)`` (optional) is called on the chosen NLL-only fit; the dict it
    returns is added to the NLL-only row (diagnostics of the benchmarks).

    - **NLL-only**: the negative-binomial model (Eq. 15, exp link, per-site random intercept;
      the per-site slopes on time are held at 0: extrapolated past the training steps they
      wrecked the ranking of the survey twin, valid BPR 0.09 against 0.33 without them) on
      ``data`` as given (add
      :func:`~bpr_topk.baselines.with_site_history_features` first for the history forecaster),
      started at the constant forecast (:meth:`NegBinMixedEffects.init_at_mean`) and
      trained per learning rate in ``nll_lrs`` with early stopping on valid NLL (``cfg.patience``
      validations, budget ``cfg.epochs`` doubled up to ``cfg.max_epochs`` while the best
      checkpoint is the budget's last); the learning rate with the best valid NLL is kept.
    - **DAML ε** and **BPR-only**: warm-started from it and fine-tuned ``finetune_epochs`` epochs
      per learning rate in ``finetune_lrs``, the budget doubled (up to 4×) while the checkpoint
      the run's own rule (``cfg.selection``) picks is its last epoch; the checkpoints of all fine-tunes (epoch 0 is the
      NLL-only model) are pooled and one is chosen per rule (:func:`select_checkpoint`): for DAML
      ``paper`` (App. C.2, reference = the NLL-only valid BPR), ``code`` (the official
      ``nll − λ·bpr``) and ``tradeoff`` (best valid BPR within ``cfg.nll_tolerance`` of the
      NLL-only valid NLL); BPR-only keeps its best valid BPR. With ``finetune_lrs`` empty
      there are no fine-tunes and the NLL-only row is returned alone.
    """
    from .train import select_checkpoint

    kind = "negbin"
    nll_cfg = replace(
        cfg, early_stopping="nll", link="exp", warm_start=False, init="mean", site_slopes=False
    )
    best: tuple[float, ForecastModel, FitResult, float] | None = None
    for lr in nll_lrs:
        model, res = train_one(data, kind, k, "nll", 0.0, seed, replace(nll_cfg, lr=lr))
        v = min(h["valid_nll"] for h in res.history)
        if best is None or v < best[0]:
            best = (v, model, res, lr)
    assert best is not None
    _, nll_model, nll_res, nll_lr = best
    ref_bpr = selected_valid_bpr(nll_res)
    ref_nll = best[0]
    rows = [
        {
            "method": "NLL-only",
            "seed": seed,
            "lr": nll_lr,
            "best_epoch": nll_res.best_epoch,
            "budget": nll_res.budget,
            "stopped_epoch": nll_res.stopped_epoch,
            "at_budget_end": nll_res.at_budget_end,
            **_valid_test(nll_model, data, k, ev, cfg.denominator_offset),
            **(nll_hook(nll_model, nll_res) if nll_hook is not None else {}),
        }
    ]
    if not finetune_lrs:  # NLL-only fits only
        return rows
    init = nll_res.best_state
    ft_cfg = replace(
        cfg,
        link="exp",
        early_stopping=None,
        max_epochs=4 * finetune_epochs,  # doubled while the run's checkpoint is its last epoch
        finetune_epochs=finetune_epochs,
        site_slopes=False,
    )
    for objective, eps, rules in (("daml", 1.0, DAML_RULES), ("bpr", 1.0, ("paper",))):
        pooled: list[dict[str, float]] = []
        states: list[dict[str, torch.Tensor]] = []
        for lr in finetune_lrs:
            _, res = train_one(
                data,
                kind,
                k,
                objective,
                eps,
                seed,
                replace(ft_cfg, finetune_lr=lr),
                ref_bpr,
                progress,
                init,
            )
            pooled += [{**h, "lr": lr, "budget": res.budget} for h in res.history]
            states += res.states
        for rule in rules:
            i = select_checkpoint(
                pooled,
                objective,
                rule,  # type: ignore[arg-type]
                ref_bpr,
                cfg.lam,
                cfg.nll_weight,
                ref_nll,
                cfg.nll_tolerance,
            )
            model = make_model(
                kind, data, seed, "exp", dispersion=cfg.dispersion, site_slopes=False
            )
            model.load_state_dict(states[i])
            name = "BPR-only" if objective == "bpr" else f"DAML eps={eps:g} [{rule} rule]"
            rows.append(
                {
                    "method": name,
                    "seed": seed,
                    "rule": rule,
                    "lr": pooled[i]["lr"],
                    "best_epoch": int(pooled[i]["epoch"]),
                    "budget": int(pooled[i]["budget"]),
                    "at_budget_end": int(pooled[i]["epoch"]) == int(pooled[i]["budget"]),
                    "moved": int(pooled[i]["epoch"]) > 0,
                    **_valid_test(model, data, k, ev, cfg.denominator_offset),
                }
            )
    return rows
