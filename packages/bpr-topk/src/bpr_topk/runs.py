"""The ``bpr-topk`` jobs as Python calls: one function per CLI subcommand, on its config.

>>> from bpr_topk.config import TrainRunConfig
>>> from bpr_topk.runs import run_train
>>> result = run_train(TrainRunConfig(dataset="hotspots", objective="nll", epochs=50), out="run")
>>> result.heuristic_comparison["model"]["test_bpr"]  # doctest: +SKIP

Each ``run_*`` returns a result object whose ``as_dict()`` is the command's results JSON (without the
contract's fields); it never parses argv, prints or exits. Bad input (a folder that does not load, a
checkpoint of other data, K above the number of sites, a run whose loss is never finite) raises
:class:`~bpr_topk.config.ConfigError` naming the config field; the CLI reports it as the flag.
Files (model.pt, plots, ranking.csv) are written to ``out`` when it is given.
"""

from __future__ import annotations

import contextlib
import csv
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._contract import ConfigError, _describe_error
from .baselines import (
    best_heuristic,
    evaluate_heuristic,
    heuristic_family,
    with_history_features,
    with_site_history_features,
)
from .config import (
    BaselineConfig,
    DataConfig,
    DemoConfig,
    EvaluateConfig,
    RankConfig,
    ToyConfig,
    TrainRunConfig,
)
from .data import (
    SPLITS,
    AmbiguousTargetError,
    TopKData,
    load_topk_folder,
    make_hotspots,
    make_panel,
    make_synthetic7,
    make_zero_inflated,
    toy9_outcomes,
)
from .experiment import (
    EvalConfig,
    TrainConfig,
    baseline_rows,
    compare,
    comparison_warning,
    config_dict,
    default_model_kind,
    evaluate_rows,
    heuristic_comparison,
    pareto_plot,
    search_train,
    selected_valid_bpr,
    summarise,
    train_one,
)
from .metrics import bpr
from .models import MODELS, ForecastModel, build_model
from .ranking import ratio_rating, ratio_values
from .train import FitResult

__all__ = [
    "BaselineResult",
    "DemoResult",
    "EvaluateResult",
    "LoadedData",
    "RankResult",
    "ToyResult",
    "TrainRunResult",
    "load_data",
    "read_checkpoint",
    "run_baseline",
    "run_demo",
    "run_evaluate",
    "run_rank",
    "run_toy",
    "run_train",
]

CHECKPOINT_KEYS = ("model", "config", "state_dict")
_LOAD_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    KeyError,
    UnicodeDecodeError,
    RuntimeError,
    TypeError,
)


@contextlib.contextmanager
def _blame(name: str, errors: tuple[type[BaseException], ...] = _LOAD_ERRORS) -> Iterator[None]:
    """Input errors inside the block become a :class:`ConfigError` naming the field ``name``."""
    try:
        yield
    except ConfigError:
        raise
    except errors as exc:
        raise ConfigError(name, _describe_error(exc)) from exc


def _out(out: str | Path | None) -> Path | None:
    if out is None:
        return None
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------------------------------ data


@dataclass
class LoadedData:
    """The data of a job: ``data`` (what the model sees), ``heuristic_data`` (the data as given: the
    heuristics read its lag columns), the budget ``k``, the feature choice and a one-line note."""

    data: TopKData
    heuristic_data: TopKData
    k: int
    features: str
    note: str


def load_data(cfg: DataConfig, model: str = "auto", quiet: bool = True) -> LoadedData:
    """Load or generate ``cfg``'s data, add the requested features and resolve K (``model``: the
    forecaster that will read it; ``auto``/``negbin`` make ``features="auto"`` the history features
    for data with feature columns)."""
    if cfg.data is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore" if quiet else "default")
            try:
                with _blame("data"):
                    data = load_topk_folder(cfg.data, target=cfg.target)
            except ConfigError as exc:
                cause = exc.__cause__
                if not isinstance(cause, AmbiguousTargetError):
                    raise
                raise ConfigError(
                    "target",
                    f"{cause.path.name} in data has several target columns {cause.targets}; "
                    f"choose one with --target (e.g. --target {cause.targets[0]})",
                ) from cause
        k_default = 100
    elif cfg.dataset == "panel":
        with _blame("sites"):
            data = make_panel(cfg.sites or 400, seed=cfg.seed)
        k_default = max(1, data.num_sites // 10)
    elif cfg.dataset in ("hotspots", "zeroinflated"):
        make = make_hotspots if cfg.dataset == "hotspots" else make_zero_inflated
        with _blame("sites"):
            data = make(cfg.sites or (500 if cfg.dataset == "hotspots" else 200), seed=cfg.seed)
        k_default = max(1, data.num_sites // 20)
    else:
        data, k_default = make_synthetic7(cfg.seed), 5
    heuristic_data = data  # the heuristics read the data as given (its lag columns)
    if cfg.history_windows:
        with _blame("history_windows"):
            data = with_history_features(data, list(cfg.history_windows))
    features = cfg.features
    if features == "auto":  # the history forecaster wherever the NegBin model would be used
        features = "history" if data.num_features > 0 and model != "truncnorm" else "raw"
    if features == "history":
        with _blame("features"):
            data = with_site_history_features(data)
    k = cfg.K if cfg.K is not None else k_default
    if k > data.num_sites:
        raise ConfigError("K", f"{k} exceeds the number of sites S={data.num_sites}")
    source = "folder --data" if cfg.data is not None else "embedded"
    steps = "/".join(str(data.split(s).num_steps) for s in SPLITS)
    extra = " (history features)" if features == "history" else ""
    note = (
        f"data: {data.name} ({source}; S={data.num_sites} sites, {data.num_features} "
        f"features{extra}, train/valid/test steps {steps}), K={k}"
    )
    return LoadedData(data, heuristic_data, k, features, note)


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a ``model.pt`` written by ``bpr-topk train``; a clear ValueError for anything else."""
    path = Path(path)
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except EOFError:
        raise ValueError(f"{path} is empty or truncated; expected a model.pt from train") from None
    except Exception as exc:  # torch.load raises many types (KeyError, RuntimeError, ...)
        detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"{path} is not a torch checkpoint ({type(exc).__name__}: {detail}); "
            "expected a model.pt from train"
        ) from None
    if not isinstance(ckpt, dict) or any(k not in ckpt for k in CHECKPOINT_KEYS):
        raise ValueError(
            f"{path} is not a bpr-topk checkpoint; expected a mapping with keys "
            f"{', '.join(CHECKPOINT_KEYS)} (a model.pt from train)"
        )
    if ckpt["model"] not in MODELS or not isinstance(ckpt["config"], dict):
        raise ValueError(f"{path}: unknown model {ckpt['model']!r}; expected one of {list(MODELS)}")
    return ckpt


def load_checkpoint(
    path: str | Path, data: TopKData, name: str = "checkpoint"
) -> tuple[ForecastModel, dict[str, Any]]:
    """The model of a ``model.pt`` and its checkpoint dict; it must fit ``data`` (same sites and
    features), else :class:`ConfigError` naming the field ``name``."""
    with _blame(name, (*_LOAD_ERRORS, RuntimeError, TypeError)):
        ckpt = read_checkpoint(path)
        model = build_model(ckpt["model"], ckpt["config"])
        model.load_state_dict(ckpt["state_dict"])
    if (
        getattr(model, "num_sites", data.num_sites) != data.num_sites
        or ckpt.get("feature_names", data.feature_names) != data.feature_names
    ):
        raise ConfigError(
            name,
            f"{path} was trained on {ckpt.get('data_name')} with "
            f"{ckpt['config'].get('num_sites')} sites / features {ckpt.get('feature_names')}; "
            f"the data given has {data.num_sites} sites / features {data.feature_names} (give "
            "the same data, --history-windows and --history-features or --raw-features as to "
            "train)",
        )
    return model, ckpt


def method_name(objective: str, eps: float) -> str:
    """The table name of a trained model: ``NLL-only``, ``BPR-only``, ``SPO+``, ``PG``, ``DAML eps=ε``."""
    names = {"nll": "NLL-only", "bpr": "BPR-only", "spo+": "SPO+", "pg": "PG"}
    return names.get(objective, f"DAML eps={eps:g}")


# ----------------------------------------------------------------------------------------- train


def train_config(cfg: TrainRunConfig, features: str) -> TrainConfig:
    """The hyperparameters of :func:`~bpr_topk.experiment.train_one` from the job's config (the
    link, start and per-site slopes follow the feature choice unless set)."""
    history = features == "history"
    return TrainConfig(
        epochs=cfg.epochs,
        lr=cfg.lr,
        link=cfg.link or ("exp" if history else "softplus"),
        lam=cfg.lam,
        nll_weight=cfg.nll_weight,
        num_score_samples=cfg.M,
        num_perturb_samples=cfg.J,
        sigma=cfg.sigma,
        noise=cfg.noise,
        score=cfg.score,
        baseline=None if cfg.baseline == "none" else cfg.baseline,
        forward=cfg.forward,
        denominator_offset=cfg.denominator_offset,
        reduction=cfg.reduction,
        val_freq=cfg.val_freq,
        selection=cfg.selection,
        early_stopping=None if cfg.early_stopping == "off" else cfg.early_stopping,
        patience=cfg.patience,
        pg_h=cfg.pg_h,
        max_epochs=cfg.max_epochs,
        nll_tolerance=cfg.nll_tolerance,
        init=cfg.start or ("mean" if history else "official"),
        site_slopes=(not history) if cfg.site_slopes is None else cfg.site_slopes,
        dispersion=cfg.dispersion,
    )


def eval_config(cfg: TrainRunConfig | EvaluateConfig) -> EvalConfig:
    return EvalConfig(cfg.eval_trials, cfg.eval_samples, cfg.window, cfg.split)


def search_grid(cfg: TrainRunConfig) -> dict[str, list[float]]:
    """The search grid: the values given, else lr/3, lr, 3·lr; σ, 5σ; ε, 0.9ε (DAML only)."""
    lrs = list(cfg.search_lr or (cfg.lr / 3, cfg.lr, 3 * cfg.lr))
    perturbed = cfg.objective in ("daml", "bpr")
    sigmas = list(cfg.search_sigma or ((cfg.sigma, 5 * cfg.sigma) if perturbed else (cfg.sigma,)))
    epss = list(
        cfg.search_eps or ((cfg.eps, 0.9 * cfg.eps) if cfg.objective == "daml" else (cfg.eps,))
    )
    for name, values, upper in (("search_lr", lrs, 10.0), ("search_sigma", sigmas, 100.0),
                                ("search_eps", epss, 1.0)):  # fmt: skip
        if any(not 0 < v <= upper for v in values):
            raise ConfigError(name, f"every value must be in (0, {upper:g}]; got {values}")
    return {"lr": lrs, "sigma": sigmas, "eps": epss}


def check_trained(result: FitResult, lr: float) -> None:
    """:class:`ConfigError` (field ``lr``) when training never happened: no epoch had a finite loss."""
    steps = [h for h in result.history if h["epoch"] > 0]
    if steps and not any(math.isfinite(h["loss"]) for h in steps):
        raise ConfigError(
            "lr",
            f"training never happened: the loss was not finite at any of the {len(steps)} "
            f"validated epochs (lr={lr:g}); try a smaller learning rate",
        )


@dataclass
class TrainRunResult:
    """What :func:`run_train` returns: the results JSON's fields, the model and the files written."""

    data: str
    K: int
    model: str
    features: str
    train_config: dict[str, Any]
    eval_config: dict[str, Any]
    fit: FitResult
    metrics: list[dict[str, Any]]
    heuristic_comparison: dict[str, Any]
    search: dict[str, Any] | None
    method: str
    forecaster: ForecastModel
    data_note: str
    warning: str | None
    files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        r = self.fit
        return {
            "data": self.data,
            "K": self.K,
            "model": self.model,
            "features": self.features,
            "train_config": self.train_config,
            "eval_config": self.eval_config,
            "best_epoch": r.best_epoch,
            "stopped_epoch": r.stopped_epoch,
            "budget": r.budget,
            "best_epoch_at_budget_end": r.at_budget_end,
            "selection": r.selection,
            "history": r.history,
            "metrics": self.metrics,
            "heuristic_comparison": self.heuristic_comparison,
            "search": self.search,
        }


def run_train(
    cfg: TrainRunConfig, out: str | Path | None = None, progress: bool = False
) -> TrainRunResult:
    """Train one forecaster on ``cfg``'s data, score it on ``cfg.split`` beside the heuristic family
    and compare it with the heuristic chosen on validation. Writes ``model.pt`` and
    ``training.png`` to ``out`` when given."""
    grid = search_grid(cfg) if cfg.search else None
    loaded = load_data(cfg, cfg.model)
    data, k = loaded.data, loaded.k
    kind = default_model_kind(data) if cfg.model == "auto" else cfg.model
    if kind == "negbin" and data.num_features == 0:
        raise ConfigError("model", "negbin needs feature columns; this data has none")
    tcfg = train_config(cfg, loaded.features)
    init_state, reference = None, cfg.reference_bpr
    if cfg.init is not None:
        start_model, ckpt = load_checkpoint(cfg.init, data, "init")
        init_state, kind = start_model.state_dict(), ckpt["model"]
        tcfg.link = ckpt["config"].get("link", tcfg.link)
        tcfg.dispersion = ckpt["config"].get("dispersion", tcfg.dispersion)
        reference = ckpt.get("valid_bpr") if reference is None else reference
    device = torch.device(cfg.device)
    for s in SPLITS:
        sp = data.split(s)
        sp.X, sp.y, sp.time = sp.X.to(device), sp.y.to(device), sp.time.to(device)
    torch.manual_seed(cfg.seed)
    search: dict[str, Any] | None = None
    eps = cfg.eps
    if grid is not None:
        model, result, trials, chosen = search_train(
            data, kind, k, cfg.objective, cfg.seed, tcfg, grid, reference,
            progress=progress, init_state=init_state,
        )  # fmt: skip
        eps = trials[chosen]["eps"]
        tcfg.lr, tcfg.sigma = trials[chosen]["lr"], trials[chosen]["sigma"]
        search = {"grid": grid, "trials": trials, "selected": trials[chosen]}
    else:
        model, result = train_one(
            data, kind, k, cfg.objective, cfg.eps, cfg.seed, tcfg, reference,
            progress=progress, init_state=init_state,
        )  # fmt: skip
    check_trained(result, tcfg.lr)
    ev = eval_config(cfg)
    name = method_name(cfg.objective, eps)
    rows = evaluate_rows(model, data, k, name, ev, tcfg.denominator_offset)
    rows += baseline_rows(loaded.heuristic_data, k, ev)
    cmp = heuristic_comparison(
        model, data, k, ev, tcfg.denominator_offset, heuristic_data=loaded.heuristic_data
    )
    res = TrainRunResult(
        data=data.name, K=k, model=kind, features=loaded.features,
        train_config=config_dict(tcfg), eval_config=config_dict(ev), fit=result, metrics=rows,
        heuristic_comparison=cmp, search=search, method=name, forecaster=model,
        data_note=loaded.note, warning=comparison_warning(cmp, name, k),
    )  # fmt: skip
    folder = _out(out)
    if folder is not None:
        model_path = folder / "model.pt"
        torch.save(
            {
                "model": kind,
                "config": model.config(),
                "state_dict": {n: t.cpu() for n, t in model.state_dict().items()},
                "feature_names": data.feature_names,
                "data_name": data.name,
                "K": k,
                "objective": cfg.objective,
                "eps": eps,
                "valid_bpr": selected_valid_bpr(result),
            },
            model_path,
        )
        res.files = [model_path, plot_history(result.history, folder / "training.png", name)]
    return res


def plot_history(history: list[dict[str, float]], path: Path, title: str) -> Path:
    """Valid BPR@K and valid NLL over the epochs of a fit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ep = [h["epoch"] for h in history]
    fig, ax1 = plt.subplots(figsize=(6, 3.5))
    ax1.plot(ep, [h["valid_bpr"] for h in history], "C0-", label="valid BPR@K")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("valid BPR@K", color="C0")
    ax2 = ax1.twinx()
    ax2.plot(ep, [h["valid_nll"] for h in history], "C1-", label="valid NLL")
    ax2.set_ylabel("valid NLL per site-time", color="C1")
    ax2.set_yscale("log")
    ax1.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------ rank


@dataclass
class RankResult:
    """What :func:`run_rank` returns: BPR@K per step, the top sites per step and ranking.csv."""

    data: str
    K: int
    rule: str
    bpr_per_step: dict[str, float]
    top_sites: dict[str, list[str]]
    data_note: str
    files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "K": self.K,
            "rule": self.rule,
            "bpr_per_step": self.bpr_per_step,
        }


def run_rank(cfg: RankConfig, out: str | Path | None = None) -> RankResult:
    """Rank the sites of ``cfg.split`` with a saved model; writes ``ranking.csv`` to ``out``."""
    loaded = load_data(cfg)
    data, k = loaded.data, loaded.k
    model, _ = load_checkpoint(cfg.checkpoint, data, "checkpoint")
    split = data.split(cfg.split)
    torch.manual_seed(cfg.seed)
    with torch.no_grad():
        if cfg.rule == "ratio":
            scores = ratio_rating(
                model.sample(cfg.samples, split.X, split.time), cfg.denominator_offset
            )
        else:
            scores = model.mean(split.X, split.time)
    order = scores.argsort(-1, descending=True)
    value = bpr(split.y, scores, k)
    per_step = {f"{t:g}": float(v) for t, v in zip(split.timesteps, value)}
    top = {
        f"{t:g}": [data.site_ids[i] for i in order[ti, : min(k, 10)].tolist()]
        for ti, t in enumerate(split.timesteps)
    }
    res = RankResult(data.name, k, cfg.rule, per_step, top, loaded.note)
    folder = _out(out)
    if folder is not None:
        csv_path = folder / "ranking.csv"
        with csv_path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["site", "timestep", "score", "rank", "selected"])
            for ti, t in enumerate(split.timesteps):
                ranks = torch.empty_like(order[ti])
                ranks[order[ti]] = torch.arange(len(order[ti]))
                for si, site in enumerate(data.site_ids):
                    rk = int(ranks[si]) + 1
                    w.writerow([site, f"{t:g}", f"{float(scores[ti, si]):.6g}", rk, int(rk <= k)])
        res.files = [csv_path]
    return res


# -------------------------------------------------------------------------------------- evaluate


@dataclass
class EvaluateResult:
    """What :func:`run_evaluate` returns: one row per model and heuristic, and their summary."""

    data: str
    K: int
    eval_config: dict[str, Any]
    metrics: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    data_note: str
    files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "K": self.K,
            "eval_config": self.eval_config,
            "metrics": self.metrics,
            "summary": self.summary,
        }


def run_evaluate(cfg: EvaluateConfig, out: str | Path | None = None) -> EvaluateResult:
    """BPR@K, NLL and MAE of saved models beside the heuristics; ``evaluate_pareto.png`` to ``out``."""
    loaded = load_data(cfg)
    data, k = loaded.data, loaded.k
    paths = [Path(p) for p in cfg.checkpoints or ()]
    models = [(path, *load_checkpoint(path, data, "checkpoints")) for path in paths]
    ev = eval_config(cfg)
    rows: list[dict[str, Any]] = []
    torch.manual_seed(cfg.seed)
    for path, model, ckpt in models:
        name = method_name(str(ckpt.get("objective", "")), float(ckpt.get("eps", 1.0)))
        label = f"{name} [{path.parent.name}]" if len(models) > 1 else name
        for row in evaluate_rows(model, data, k, name, ev, cfg.denominator_offset):
            rows.append(
                {**row, "method": row["method"].replace(name, label), "checkpoint": str(path)}
            )
    rows += baseline_rows(loaded.heuristic_data, k, ev)
    summary = summarise(rows)
    res = EvaluateResult(data.name, k, config_dict(ev), rows, summary, loaded.note)
    folder = _out(out)
    if folder is not None:
        title = f"{data.name}: BPR@{k} vs NLL ({ev.split})"
        res.files = [pareto_plot(summary, folder / "evaluate_pareto.png", title)]
    return res


# ------------------------------------------------------------------------------------------ demo


def demo_setup(
    dataset: str, seed: int, quick: bool
) -> tuple[TopKData, int, str, TrainConfig, EvalConfig, str]:
    """Data, K, model kind, training / evaluation budget and a one-line description."""
    ev = EvalConfig(trials=3, num_samples=300) if quick else EvalConfig(10, 1000)
    if dataset == "synthetic7":
        sizes = (200, 50, 200) if quick else (500, 100, 500)
        data = make_synthetic7(seed, *sizes)
        cfg = TrainConfig(
            epochs=100 if quick else 300, lr=0.1, num_score_samples=20 if quick else 50,
            num_perturb_samples=50 if quick else 100, denominator_offset=0.0,
            val_samples=100 if quick else 200,
        )  # fmt: skip
        about = (
            "the paper's Sec. 5.1 experiment: 7 stationary sites, a misspecified 2-component "
            "truncated-normal mixture; the site history is a near-perfect forecast here"
        )
        return data, 5, "truncnorm", cfg, ev, about
    data = make_hotspots(500, seed=seed)
    # DAML and BPR-only start from the NLL-only fit of the same seed (warm start) and are
    # fine-tuned for 200 epochs; the checkpoint is chosen on the validation split with the
    # official code's rule (min valid NLL − λ·valid BPR): the noisy score-function gradient makes
    # the valid BPR of the fine-tune oscillate, so the last checkpoint is a lottery (on some
    # seeds and CPUs no better than NLL-only), and the App. C.2 rule picks the warm start back.
    # λ and the fine-tuning learning rate were selected on the validation split over seeds 0-4
    # (benchmark (c): within 5 % of NLL-only's valid NLL and one standard error of the best
    # valid BPR, the lowest valid NLL).
    cfg = TrainConfig(
        epochs=150, lr=0.1, lam=3.0, num_score_samples=50, num_perturb_samples=50,
        baseline="loo", val_samples=200, selection="code", warm_start=True,
        finetune_epochs=200, finetune_lr=0.01,
    )  # fmt: skip
    about = (
        "synthetic hotspots panel: covariates redrawn every step carry the signal through a "
        "threshold the NegBin model (linear in the covariates) cannot represent; sites have no "
        "lasting identity, so historical averages are at chance level"
    )
    return data, data.num_sites // 20, "negbin", cfg, ev, about


@dataclass
class DemoResult:
    """What :func:`run_demo` returns: per-seed rows, their summary and the headline differences."""

    data: str
    data_description: str
    K: int
    model: str
    seeds: list[int]
    train_config: dict[str, Any]
    eval_config: dict[str, Any]
    metrics: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    headline: dict[str, Any]
    split: str
    data_note: str
    files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        keys = ("data", "data_description", "K", "model", "seeds", "train_config", "eval_config",
                "metrics", "summary", "headline")  # fmt: skip
        return {key: getattr(self, key) for key in keys}


def run_demo(cfg: DemoConfig, out: str | Path | None = None, progress: bool = False) -> DemoResult:
    """Train NLL-only, DAML (ε = 1) and BPR-only on generated data over several seeds and compare
    them with the heuristics on the test split; ``pareto.png`` to ``out``."""
    # The demo's tensors are small: extra threads only add overhead (and, on a busy machine,
    # minutes), and one thread makes the numbers the same on every machine.
    torch.set_num_threads(1)
    data, k, kind, tcfg, ev, about = demo_setup(cfg.dataset, cfg.seed, cfg.quick)
    n_seeds = cfg.seeds if cfg.seeds is not None else (1 if cfg.quick else 3)
    seeds = list(range(cfg.seed, cfg.seed + n_seeds))
    methods = ["NLL-only", "DAML eps=1.0", "BPR-only"]
    rows = compare(data, kind, k, methods, seeds, tcfg, ev, progress=progress)
    rows += baseline_rows(data, k, ev)
    summary = summarise(rows)
    by = {s["method"]: s for s in summary}
    naive = {r["method"] for r in rows if r.get("ranking") == "history"}
    best_base = max((s for s in summary if s["method"] in naive), key=lambda s: s["bpr"])
    headline = {
        "daml_minus_nll_only_bpr": by["DAML eps=1.0"]["bpr"] - by["NLL-only"]["bpr"],
        "daml_nll_change_pct": 100 * (by["DAML eps=1.0"]["nll"] / by["NLL-only"]["nll"] - 1),
        "best_baseline": best_base["method"],
        "daml_minus_best_baseline_bpr": by["DAML eps=1.0"]["bpr"] - best_base["bpr"],
    }
    steps = "/".join(str(data.split(s).num_steps) for s in SPLITS)
    note = (
        f"data: {data.name} (embedded; S={data.num_sites} sites, {data.num_features} features, "
        f"train/valid/test steps {steps}), K={k}"
    )
    res = DemoResult(
        data.name, about, k, kind, seeds, config_dict(tcfg), config_dict(ev), rows, summary,
        headline, ev.split, note,
    )  # fmt: skip
    folder = _out(out)
    if folder is not None:
        title = f"{data.name} (K={k}): test BPR vs NLL"
        res.files = [pareto_plot(summary, folder / "pareto.png", title)]
    return res


# -------------------------------------------------------------------------------------- baseline


@dataclass
class BaselineResult:
    """What :func:`run_baseline` returns: the heuristics' scores and the one chosen on validation."""

    data: str
    K: int
    split: str
    window: int
    heuristics: list[dict[str, Any]]
    best: str
    best_method: str
    chosen: dict[str, Any]
    data_note: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "K": self.K,
            "split": self.split,
            "window": self.window,
            "heuristics": self.heuristics,
            "best": self.best,
            "best_method": self.best_method,
            "best_selected_on": "valid",
        }


def run_baseline(cfg: BaselineConfig) -> BaselineResult:
    """Score the heuristics (``cfg.rule``, or the whole family) on ``cfg.split``; the best is the
    member with the highest BPR@K on the valid split."""
    loaded = load_data(cfg)
    k, hd = loaded.k, loaded.heuristic_data
    family = heuristic_family(cfg.window) if cfg.rule == "all" else [(cfg.rule, cfg.window)]
    rows = [evaluate_heuristic(hd, cfg.split, k, rule, w) for rule, w in family]
    chosen = best_heuristic(hd, k, cfg.window)
    best = next((r for r in rows if r["method"] == chosen["method"]), rows[0])
    return BaselineResult(
        loaded.data.name, k, cfg.split, cfg.window, rows, best["rule"], best["method"], chosen,
        loaded.note,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------- toy


@dataclass
class ToyResult:
    """What :func:`run_toy` returns: exact expected BPR@K of the mean and ratio rankings."""

    table: list[dict[str, float]]

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table}


def run_toy(cfg: ToyConfig | None = None) -> ToyResult:
    """The App. B.2 toy: exact expectations over the 64 outcomes of the mean rating E[y] and the
    ratio rating E[y / 1·y] (Eq. 7), beside the paper's numbers."""
    vals, probs = toy9_outcomes()
    w = probs[:, None]
    ratings = {"mean": (vals * w).sum(0), "ratio": (ratio_values(vals, 0.0) * w).sum(0)}
    paper = {1: (0.107, 0.538), 3: (0.231, 0.625), 6: (0.636, 0.810)}
    rows = []
    for k, (pm, pr) in paper.items():
        row: dict[str, float] = {"K": k, "paper_mean": pm, "paper_ratio": pr}
        for name, r in ratings.items():
            row[name] = float((bpr(vals, r.expand_as(vals), k) * probs).sum())
        rows.append(row)
    return ToyResult(rows)
