"""Paired, many-seed comparisons on the synthetic cohort: the notes positive control, SAFER against
its ablations and baselines, fine-tuning settings selected on validation, and the FDR calibration of
conformal selection.

Library functions on a config dataclass returning plain result dicts (the benchmark script renders
them). One *seed* draws a fresh cohort (cohort seed = seed), its split and every network's
initialisation; the notes-ablated twin of the cohort (``note_only_prob = 0``) has the same table,
split and seed, so "SAFER with notes − SAFER with notes ablated" is a paired difference per seed.

Verdicts follow the repository's convention: a 95 % t interval of the mean paired difference over
seeds that lies above 0 is *ahead*, one that contains 0 is a *tie*, one below 0 is *behind*.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from .conformal import repeated_selection
from .data import stratified_split
from .encoders import HashingEncoder, embed_note_rows
from .metrics import class_aucs
from .pipeline import (
    SAFER,
    PreparedCohort,
    TrainConfig,
    _torch_inputs,
    evaluate_predictions,
    kappa_summary,
    oracle_counterfactual,
    predict_logits,
    prepare_cohort,
    rule_baselines,
    train_baseline,
)
from .synthetic import SyntheticSepsisCohort

__all__ = [
    "COMPARISON_METHODS",
    "ComparisonConfig",
    "FinetuneSelection",
    "paired_difference",
    "per_class_auc",
    "run_comparison_seed",
    "select_finetune",
    "t_quantile_975",
]

COMPARISON_METHODS = (
    "SAFER", "SAFER-F", "SAFER-N", "LSTM", "GRU", "LogReg", "majority class", "carry-forward",
)  # fmt: skip
_BASELINES = {"LSTM": "lstm", "GRU": "gru", "LogReg": "logreg"}

# two-sided 95 % quantiles of Student's t (df 1..30); df > 30 uses a Cornish-Fisher expansion
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (table for df <= 30)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964  # Cornish-Fisher expansion in 1/df (error < 1e-4 for df > 30)
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def paired_difference(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Mean of the per-seed differences a − b, its sample sd (ddof = 1), the 95 % t interval and the
    verdict (*ahead* if the interval is above 0, *behind* if below, else *tie*)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.ndim != 1 or len(d) < 2:
        raise ValueError(f"need at least 2 paired values, got {len(d)}")
    if not np.isfinite(d).all():
        raise ValueError("paired values must be finite")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    half = t_quantile_975(len(d) - 1) * sd / math.sqrt(len(d))
    lo, hi = mean - half, mean + half
    verdict = "ahead" if lo > 0 else "behind" if hi < 0 else "tie"
    return {"mean": mean, "sd": sd, "n": len(d), "ci95": [lo, hi], "verdict": verdict,
            "wins": int((d > 0).sum())}  # fmt: skip


@dataclass
class ComparisonConfig:
    """One comparison protocol.

    Parameters
    ----------
    n_stays : cohort size per seed (default 2,000).
    split : train / calibration / test fractions (default 0.6 / 0.1 / 0.3: a larger test split than
        the paper's 80/10/10, so that per-seed metrics are less noisy).
    note_only_prob : how often a note states the note-only factors in the informative cohort.
    train : :class:`TrainConfig` fields for SAFER (stage 1 / refinement / fine-tuning).
    baseline_epochs, baseline_lr : LSTM / GRU / logistic regression training (batch = ``train``'s).
    methods : subset of :data:`COMPARISON_METHODS`.
    positive_control : also train SAFER on the notes-ablated twin cohort.
    encoder_dim : buckets of the hashing note encoder.
    fdr_alphas, fdr_quantiles, fdr_cs, fdr_reps : the conformal-selection grid on the held-out
        (calibration ∪ test) stays of the informative SAFER: thresholds as quantiles of κ on the κ̂-fit
        part (null fraction ≈ 1 − q at every cohort size) and as fixed values of normalised κ;
        ``fdr_reps`` random splits per seed (0 skips selection).
    """

    n_stays: int = 2000
    split: tuple[float, float, float] = (0.6, 0.1, 0.3)
    note_only_prob: float = 0.8
    train: dict[str, Any] = field(default_factory=dict)
    baseline_epochs: int = 10
    baseline_lr: float = 1e-3
    methods: tuple[str, ...] = COMPARISON_METHODS
    positive_control: bool = True
    encoder_dim: int = 384
    fdr_alphas: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(1, 11))
    fdr_quantiles: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
    fdr_cs: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4)
    fdr_reps: int = 100

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in COMPARISON_METHODS]
        if unknown:
            raise ValueError(
                f"ComparisonConfig.methods: unknown {unknown}; expected some of "
                f"{list(COMPARISON_METHODS)}"
            )
        if "SAFER" not in self.methods:
            raise ValueError("ComparisonConfig.methods must include 'SAFER'")
        if self.n_stays < 50:
            raise ValueError(f"ComparisonConfig.n_stays must be >= 50, got {self.n_stays}")
        if not 0.0 <= self.note_only_prob <= 1.0:
            raise ValueError(
                f"ComparisonConfig.note_only_prob must be in [0, 1], got {self.note_only_prob}"
            )
        if self.fdr_reps < 0:
            raise ValueError(f"ComparisonConfig.fdr_reps must be >= 0, got {self.fdr_reps}")
        self.train_config()  # validates the TrainConfig fields

    def train_config(self) -> TrainConfig:
        return TrainConfig.from_dict({**TrainConfig.quick().to_dict(), **self.train})

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["train_config"] = self.train_config().to_dict()
        return out


def _cohorts(cfg: ComparisonConfig, seed: int) -> tuple[SyntheticSepsisCohort, PreparedCohort,
                                                         PreparedCohort | None]:  # fmt: skip
    gen = SyntheticSepsisCohort(n_stays=cfg.n_stays, seed=seed, note_only_prob=cfg.note_only_prob)
    seq = gen.sequences()
    split = stratified_split(seq.died, seed, cfg.split)
    enc = HashingEncoder(cfg.encoder_dim)
    cohort = prepare_cohort(seq, enc, split=split)
    ablated = None
    if cfg.positive_control:
        twin = SyntheticSepsisCohort(n_stays=cfg.n_stays, seed=seed, note_only_prob=0.0)
        tseq = twin.sequences()
        # same table, split and preprocessing; only the notes differ
        ablated = PreparedCohort(
            tensors=copy.copy(cohort.tensors),
            split=split,
            preprocessor=cohort.preprocessor,
            sequences=tseq,
            encoder_name=enc.name,
        )
        ablated.tensors.notes = embed_note_rows(tseq.note_text, enc)
    return gen, cohort, ablated


def _probs(model: torch.nn.Module, cohort: PreparedCohort, idx: np.ndarray) -> np.ndarray:
    logits, _ = predict_logits(model, cohort.tensors, idx)
    return torch.softmax(logits, -1).numpy()


def run_comparison_seed(
    cfg: ComparisonConfig, seed: int, tick: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Train every method of ``cfg`` on the cohort of ``seed`` and evaluate on its test split.

    Returns a JSON-ready dict: per-method metrics (survivors / all / deceased), the positive-control
    SAFER on the notes-ablated twin (``"SAFER (notes ablated)"``), κ diagnostics, oracle mortality of
    the top recommendation, and the selection grid (per cell: mean FDP and power, their Monte Carlo
    s.e., the null fraction and the mean threshold)."""
    t_start = time.perf_counter()
    tcfg = cfg.train_config()
    gen, cohort, ablated = _cohorts(cfg, seed)
    data, test = cohort.tensors, cohort.split["test"]
    probs: dict[str, np.ndarray] = {}
    timing: dict[str, float] = {}

    def note(name: str, t0: float) -> None:
        timing[name] = round(time.perf_counter() - t0, 1)
        if tick is not None:
            tick(name)

    t0 = time.perf_counter()
    safer = SAFER(tcfg, cohort.note_dim).fit(cohort, seed)
    probs["SAFER"] = _probs(safer.net, cohort, test)
    if "SAFER-F" in cfg.methods:
        probs["SAFER-F"] = _probs(safer.stage1_net(), cohort, test)
    note("SAFER", t0)
    if ablated is not None:
        t0 = time.perf_counter()
        blind = SAFER(tcfg, ablated.note_dim).fit(ablated, seed)
        probs["SAFER (notes ablated)"] = _probs(blind.net, ablated, test)
        stage1_ablated = _probs(blind.stage1_net(), ablated, test)
        note("SAFER (notes ablated)", t0)
    if "SAFER-N" in cfg.methods:
        t0 = time.perf_counter()
        ncfg = TrainConfig.from_dict({**tcfg.to_dict(), "use_notes": False})
        probs["SAFER-N"] = _probs(SAFER(ncfg, cohort.note_dim).fit(cohort, seed).net, cohort, test)
        note("SAFER-N", t0)
    for name, kind in _BASELINES.items():
        if name in cfg.methods:
            t0 = time.perf_counter()
            model = train_baseline(
                kind, cohort, epochs=cfg.baseline_epochs, lr=cfg.baseline_lr,
                batch_size=tcfg.batch_size, hidden=tcfg.d_model, seed=seed,
            )  # fmt: skip
            probs[name] = _probs(model, cohort, test)
            note(name, t0)
    for name, scores in rule_baselines(cohort, test, seed).items():
        if name in cfg.methods:
            probs[name] = scores
    metrics = {name: evaluate_predictions(p, cohort, test) for name, p in probs.items()}
    keep = {k: v for k, v in probs.items() if k in ("SAFER", "SAFER-F", "SAFER (notes ablated)")}
    if ablated is not None:
        keep["SAFER-F (notes ablated)"] = stage1_ablated
    per_class = per_class_auc(data.y[test], data.died[test], keep)

    out_test = safer.predict(data, test)
    oracle = {}
    for name in ("SAFER", "SAFER (notes ablated)", "SAFER-N", "carry-forward"):
        if name in probs:
            oracle[name] = float(
                oracle_counterfactual(gen, cohort, test, probs[name].argmax(1)).mean()
            )
    oracle["clinicians"] = float(gen.death_prob[data.stay_ids[test] - 1].mean())
    result: dict[str, Any] = {
        "seed": seed,
        "split_sizes": {k: len(v) for k, v in cohort.split.items()},
        "test_survivors": int((data.died[test] == 0).sum()),
        "metrics": metrics,
        "per_class_survivors": per_class,
        "kappa_test": kappa_summary(out_test["kappa"].numpy(), data.died[test], seed),
        "oracle_mortality": oracle,
    }
    if cfg.fdr_reps:
        t0 = time.perf_counter()
        result["selection"] = selection_cells(safer, cohort, cfg, seed)
        note("selection", t0)
    result["wall_time_s"] = {**timing, "total": round(time.perf_counter() - t_start, 1)}
    return result


def per_class_auc(
    y: np.ndarray, died: np.ndarray, probs: dict[str, np.ndarray], n_classes: int = 25
) -> dict[str, Any]:
    """Per-class one-vs-rest ROC-AUC on the survivors of ``y`` for each method in ``probs`` (rows
    aligned with ``y``), with each class's positive count; ``None`` for a class absent from (or
    filling) the survivors. The macro-AUC is the mean of the non-``None`` entries."""
    keep = np.asarray(died) == 0
    ys = np.asarray(y)[keep]
    return {
        "positives": np.bincount(ys, minlength=n_classes).tolist(),
        "auc": {name: class_aucs(ys, p[keep]) for name, p in probs.items()},
    }


def selection_cells(
    safer: SAFER, cohort: PreparedCohort, cfg: ComparisonConfig, seed: int
) -> dict[str, Any]:
    """The FDR / power grid of one fitted SAFER on its held-out stays (calibration ∪ test, redrawn
    each repetition): thresholds as κ quantiles (``q0.2`` ...) and as fixed κ values (``c0.1`` ...)."""
    held = np.concatenate([cohort.split["calib"], cohort.split["test"]])
    out = safer.predict(cohort.tensors, held)
    H = out["h"].numpy().astype(float)
    kn = out["kappa_norm"].numpy().astype(float)
    cells: dict[str, Any] = {"n_held_out": len(held), "alphas": list(cfg.fdr_alphas), "cells": {}}
    specs: list[tuple[str, dict[str, float]]] = [
        (f"q{q:g}", {"c_quantile": q}) for q in cfg.fdr_quantiles
    ]
    specs += [(f"c{c:g}", {"c": c}) for c in cfg.fdr_cs]
    for i, (key, spec) in enumerate(specs):
        res = repeated_selection(
            H, kn, alphas=cfg.fdr_alphas, reps=cfg.fdr_reps, seed=1000 * seed + i,
            c=spec.get("c"), c_quantile=spec.get("c_quantile"),
        )  # fmt: skip
        fdp, power = res["fdp"], res["power"]
        cells["cells"][key] = {
            **{k: v for k, v in spec.items()},
            "fdr_mean": fdp.mean(0).tolist(),
            "fdr_sd": fdp.std(0, ddof=1).tolist(),
            "power_mean": power.mean(0).tolist(),
            "null_fraction": float(res["null_fraction"].mean()),
            "c_mean": float(res["c_values"].mean()),
            "plugin_fdr": float(res["plugin_fdp"].mean()),
            "reps": cfg.fdr_reps,
        }
    return cells


def pooled_fdr_test(cells: Sequence[dict[str, Any]], a: int, alpha: float) -> dict[str, float]:
    """Pool one (threshold, α) cell over seeds (equal replicate counts) and run the one-sided Monte
    Carlo test of FDR <= α on the pooled mean (:func:`~safer_dtr.conformal.fdr_monte_carlo_test`,
    from the per-seed means and sds)."""
    means = np.array([c["fdr_mean"][a] for c in cells])
    sds = np.array([c["fdr_sd"][a] for c in cells])
    reps = np.array([c["reps"] for c in cells], dtype=float)
    total = reps.sum()
    mean = float((means * reps).sum() / total)
    # pooled variance of all replicate FDPs (within-seed + between-seed parts)
    ss = ((reps - 1) * sds**2 + reps * (means - mean) ** 2).sum()
    sd = math.sqrt(ss / (total - 1))
    se = sd / math.sqrt(total)
    z = (mean - alpha) / se if se > 0 else (0.0 if mean <= alpha else float("inf"))
    return {"mean": mean, "se": se, "z": z, "p_value": 0.5 * math.erfc(z / math.sqrt(2.0)),
            "reps": total}  # fmt: skip


@dataclass
class FinetuneSelection:
    """Validation choice of the fine-tuning (lr, epochs): per candidate the validation macro-AUC
    (all validation stays) per selection seed, and the chosen candidate."""

    candidates: list[dict[str, float]]
    scores: list[list[float]]
    stage1_scores: list[float]
    chosen: dict[str, float]
    seeds: list[int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def select_finetune(
    cfg: ComparisonConfig,
    seeds: Sequence[int],
    candidates: Sequence[dict[str, float]],
    *,
    val_frac: float = 0.2,
    tick: Callable[[str], None] | None = None,
) -> FinetuneSelection:
    """Choose the risk-aware fine-tuning settings (``lr_finetune``, ``epochs_finetune``) on a
    validation split carved from the training split (``val_frac`` of it), never the test split.

    Stage 1 and the refinement head are fitted once per seed on the rest of the training split; each
    candidate fine-tunes a copy of that network. The candidate with the highest mean validation
    macro-AUC over ``seeds`` is chosen (ties: the first)."""
    if not candidates:
        raise ValueError("select_finetune needs at least one candidate")
    tcfg = cfg.train_config()
    scores: list[list[float]] = [[] for _ in candidates]
    stage1: list[float] = []
    for seed in seeds:
        _, cohort, _ = _cohorts(
            ComparisonConfig(**{**asdict(cfg), "positive_control": False}), seed
        )
        rng = np.random.default_rng(10_000 + seed)
        train = rng.permutation(cohort.split["train"])
        n_val = max(1, round(val_frac * len(train)))
        val, fit = np.sort(train[:n_val]), np.sort(train[n_val:])
        inner = PreparedCohort(
            cohort.tensors, {**cohort.split, "train": fit, "val": val}, cohort.preprocessor,
            cohort.sequences, cohort.encoder_name,
        )  # fmt: skip
        base = SAFER(TrainConfig.from_dict({**tcfg.to_dict(), "epochs_finetune": 0}),
                     cohort.note_dim).fit(inner, seed)  # fmt: skip
        y_val = cohort.tensors.y[val]

        def val_auc(
            net: torch.nn.Module,
            y_val: np.ndarray = y_val,
            val: np.ndarray = val,
            cohort: PreparedCohort = cohort,
        ) -> float:
            from .metrics import macro_auc

            return float(macro_auc(y_val, _probs(net, cohort, val))[0])

        stage1.append(val_auc(base.net))
        X = _torch_inputs(cohort.tensors, base.device)
        for k, cand in enumerate(candidates):
            model = copy.deepcopy(base)
            model.config = TrainConfig.from_dict(
                {**tcfg.to_dict(), "lr_finetune": float(cand["lr_finetune"]),
                 "epochs_finetune": int(cand["epochs_finetune"])}
            )  # fmt: skip
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                model._finetune(X, fit, np.random.default_rng(seed), None)
            scores[k].append(val_auc(model.net))
            if tick is not None:
                tick(f"seed {seed} candidate {k}")
    best = int(np.argmax([np.mean(s) for s in scores]))
    return FinetuneSelection(
        candidates=[dict(c) for c in candidates],
        scores=scores,
        stage1_scores=stage1,
        chosen=dict(candidates[best]),
        seeds=list(seeds),
    )
