"""The demonstration pipeline shared by ``cft-calibration demo`` and the benchmarks.

base SFT (pre-alignment model) -> DPO (the "aligned", overconfident model: real DPO with the gold option
preferred over the wrong ones against the frozen base model, or the 0.2.0 simulation) -> from the same
aligned checkpoint: temperature scaling (fit on validation), label smoothing, CFT, long SFT, RCFT (E-step
every epoch) and RCFT with the official once-only E-step -> metrics on the test (and OOD) splits.
Every method shares the data and starts from the same aligned weights.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import torch

from .config import METHODS, PipelineConfig
from .data import MCItem, split_items
from .dpo import dpo_align
from .metrics import evaluate_probs
from .regularizer import EMECERegularizer
from .scoring import FeatureScorer, predict
from .synthetic import FeatureSplit, synthetic_feature_mcqa
from .temperature import TemperatureScaler
from .train import TrainConfig, evaluate_scorer, simulate_alignment, train

__all__ = [
    "METHODS",
    "PipelineConfig",
    "run_pipeline",
    "synthetic_feature_splits",
    "text_feature_splits",
]

SPLIT_FRACTIONS = {"base": 0.35, "align": 0.10, "train": 0.30, "val": 0.10, "test": 0.15}


def synthetic_feature_splits(
    quick: bool = False, seed: int = 0
) -> tuple[dict[str, FeatureSplit], dict[str, Any]]:
    """The synthetic feature task cut into the pipeline's splits (sizes halved when ``quick``)."""
    f = 0.5 if quick else 1.0
    sizes = {
        "base": int(1400 * f),
        "align": int(400 * f),
        "train": int(1200 * f),
        "val": int(400 * f),
        "test": int(2000 * f),
        "ood": int(2000 * f),
    }
    task = synthetic_feature_mcqa(sizes, seed=seed)
    about = {
        "name": "synthetic-feature",
        "sizes": sizes,
        "beta_star": task.beta_star,
        "bayes_accuracy_target": 0.7,
    }
    return task.splits, about


def text_feature_splits(
    items: Sequence[MCItem],
    encoder: Any,
    seed: int = 0,
    ood_items: Sequence[MCItem] | None = None,
    cache_dir: Any = None,
    progress: Any = None,
) -> dict[str, FeatureSplit]:
    """Split text items (base 35% / align 10% / train 30% / val 10% / test 15%, stratified by subject)
    and encode each part with the frozen pair encoder."""
    from .features import encode_items

    parts = split_items(items, list(SPLIT_FRACTIONS.values()), seed=seed)
    named = dict(zip(SPLIT_FRACTIONS, parts))
    if ood_items:
        named["ood"] = list(ood_items)
    return {k: encode_items(v, encoder, cache_dir, progress=progress) for k, v in named.items()}


def _probs(
    scorer: Any, data: FeatureSplit
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    logits, mask, labels = predict(scorer, data, 512)
    return torch.softmax(logits, -1), labels, mask, logits


def run_pipeline(
    splits: dict[str, FeatureSplit],
    cfg: PipelineConfig | None = None,
    seed: int = 0,
    progress: Callable[[int, str], Any] | None = None,
    keep_probs: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every method of ``cfg.methods`` on ``splits`` (keys base, align, train, val, test[, ood])."""
    cfg = cfg or PipelineConfig()
    missing = [k for k in ("base", "align", "train", "val", "test") if k not in splits]
    if missing:
        raise ValueError(f"run_pipeline: splits {missing} are missing")
    evals = [k for k in ("test", "ood") if k in splits]
    say = log or (lambda _text: None)
    d = splits["base"].features.shape[-1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        scorer = FeatureScorer(d, cfg.hidden, cfg.dropout)
    out: dict[str, Any] = {"methods": {}, "seconds": {}, "selected": {}}
    probs_kept: dict[str, dict[str, Any]] = {}

    def record(name: str, model: Any, transform: Any = None) -> None:
        res = {}
        for split in evals:
            p, y, m, z = _probs(model, splits[split])
            if transform is not None:
                p = transform(z)
            res[split] = evaluate_probs(p, y, mask=m, n_bins=cfg.n_bins)
            if keep_probs:
                probs_kept.setdefault(split, {})[name] = (p, y, m)
        out["methods"][name] = res

    def seeded(c: TrainConfig, offset: int) -> TrainConfig:
        return _with_seed(c, seed * 1000 + offset)

    if "uniform" in cfg.methods:
        res = {}
        for split in evals:
            m = splits[split].mask
            p = m.double() / m.sum(1, keepdim=True)
            res[split] = evaluate_probs(p, splits[split].labels, mask=m, n_bins=cfg.n_bins)
            if keep_probs:
                probs_kept.setdefault(split, {})["uniform"] = (p, splits[split].labels, m)
        out["methods"]["uniform"] = res

    t0 = time.perf_counter()
    hist = train(scorer, splits["base"], seeded(cfg.base, 1), None, splits["val"], progress)
    out["selected"]["base_epoch"] = hist.selected_epoch
    out["seconds"]["base"] = time.perf_counter() - t0
    record("base", scorer)
    say(f"base: test acc {out['methods']['base']['test']['accuracy']:.3f}")

    aligned = copy.deepcopy(scorer)
    t0 = time.perf_counter()
    if cfg.alignment == "dpo":
        dpo = dpo_align(
            aligned, splits["align"], _with_seed(cfg.dpo, seed * 1000 + 2), None, progress
        )
        out["dpo"] = {"final": dpo.history[-1] if dpo.history else {}, "steps": dpo.steps}
    else:
        simulate_alignment(
            aligned, splits["align"], _with_seed(cfg.align, seed * 1000 + 2), progress
        )
    out["seconds"]["align"] = time.perf_counter() - t0
    record("aligned", aligned)

    if "ts" in cfg.methods:
        t0 = time.perf_counter()
        _, yv, mv, zv = _probs(aligned, splits["val"])
        ts = TemperatureScaler().fit(zv, yv, mv)
        out["selected"]["temperature"] = ts.temperature_
        record("ts", aligned, ts.transform)
        out["seconds"]["ts"] = time.perf_counter() - t0

    jobs: list[tuple[str, TrainConfig, float | None]] = []
    if "ls" in cfg.methods:
        jobs.append(("ls", _with(cfg.cft, label_smoothing=cfg.label_smoothing), None))
    if "cft" in cfg.methods:
        jobs.append(("cft", cfg.cft, None))
    if "long_sft" in cfg.methods:
        jobs.append(("long_sft", cfg.long, None))
    lams = list(cfg.lams) if cfg.lams else [cfg.lam]
    for weight in lams:
        if "rcft" in cfg.methods:
            jobs.append(("rcft", _with(cfg.long, e_step_every=1), weight))
        if "rcft_once" in cfg.methods:
            jobs.append(("rcft_once", _with(cfg.long, e_step_every=None), weight))
    candidates: dict[str, list[tuple[float, dict[str, float], Any, float]]] = {}
    for j, (name, tcfg, job_lam) in enumerate(jobs):
        model = copy.deepcopy(aligned)
        reg = EMECERegularizer(cfg.n_bins, job_lam) if job_lam is not None else None
        t0 = time.perf_counter()
        fit = train(model, splits["train"], seeded(tcfg, 10 + j), reg, splits["val"], progress)
        seconds = time.perf_counter() - t0
        if job_lam is None:
            out["seconds"][name] = seconds
            out["selected"][f"{name}_epoch"] = fit.selected_epoch
            record(name, model)
        else:
            val = evaluate_scorer(model, splits["val"], 512, cfg.n_bins, full=False)
            candidates.setdefault(name, []).append((job_lam, val, model, seconds))
    for name, cands in candidates.items():
        # lambda chosen on validation: lowest conf-ECE among the candidates within acc_tol of the best
        best_acc = max(c[1]["accuracy"] for c in cands)
        ok = [c for c in cands if c[1]["accuracy"] >= best_acc - cfg.long.acc_tol]
        lam, _, model, _ = min(ok, key=lambda c: (c[1]["conf_ece"], c[0]))
        out["selected"][f"{name}_lam"] = lam
        out["selected"][f"{name}_val"] = {str(c[0]): c[1] for c in cands}
        out["seconds"][name] = statistics.median(c[3] for c in cands)
        record(name, model)
    if keep_probs:
        out["probs"] = probs_kept
    return out


def _with(cfg: TrainConfig, **changes: Any) -> TrainConfig:
    values = asdict(cfg)
    values.update(changes)
    return TrainConfig(**values)


def _with_seed(cfg: Any, seed: int) -> Any:
    values = asdict(cfg)
    values["seed"] = seed
    return type(cfg)(**values)
