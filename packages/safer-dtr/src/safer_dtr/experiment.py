"""One experiment: SAFER and its baselines on a cohort, metrics, selection curves, mortality.

Used by ``safer-dtr demo`` and by the benchmarks, so both report the same quantities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .config import ALL_METHODS
from .conformal import selection_metrics
from .metrics import recommendation_metrics
from .pipeline import (
    SAFER,
    PreparedCohort,
    TrainConfig,
    deploy_selection,
    evaluate_predictions,
    fit_mortality_model,
    kappa_summary,
    mortality_estimates,
    oracle_counterfactual,
    predict_logits,
    rule_baselines,
    run_selection_grid,
    train_baseline,
)
from .synthetic import SyntheticSepsisCohort

__all__ = ["ALL_METHODS", "TRAINED_BASELINES", "run_experiment", "stage_ticks"]

TRAINED_BASELINES = {"LSTM": "lstm", "GRU": "gru", "LogReg": "logreg"}
RULES = ("majority class", "carry-forward", "random")


def stage_ticks(
    cfg: TrainConfig, methods: Sequence[str], baseline_epochs: int, mort_epochs: int
) -> int:
    """How many progress ticks :func:`run_experiment` makes (one per epoch of any stage)."""
    per_safer = cfg.epochs_stage1 + cfg.epochs_refine + cfg.epochs_finetune
    n = per_safer
    n += per_safer if "SAFER-N" in methods else 0
    n += cfg.epochs_stage1 if "SAFER-U" in methods else 0
    n += baseline_epochs * sum(m in methods for m in TRAINED_BASELINES)
    return n + mort_epochs


def run_experiment(
    cohort: PreparedCohort,
    cfg: TrainConfig,
    *,
    seed: int = 0,
    methods: Sequence[str] = ALL_METHODS,
    oracle: SyntheticSepsisCohort | None = None,
    baseline_epochs: int | None = None,
    baseline_lr: float = 1e-3,
    mortality_epochs: int = 30,
    mortality_lr: float = 1e-4,
    cs: Sequence[float] = (0.1, 0.2, 0.3, 0.4),
    alphas: Sequence[float] = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5),
    reps: int = 500,
    deploy_alpha: float = 0.1,
    deploy_c: float = 0.3,
    device: Any = "cpu",
    tick: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], SAFER]:
    """Train SAFER and the requested baselines on the cohort's training split and evaluate them on its
    test split. Returns ``(results, fitted SAFER)``."""
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; expected some of {list(ALL_METHODS)}")
    data = cohort.tensors
    test, calib = cohort.split["test"], cohort.split["calib"]
    b_epochs = cfg.epochs_stage1 if baseline_epochs is None else baseline_epochs
    safer = SAFER(cfg, cohort.note_dim, device).fit(cohort, seed, tick)
    probs: dict[str, np.ndarray] = {}
    out_test = safer.predict(data, test)
    probs["SAFER"] = torch.softmax(out_test["logits"], -1).cpu().numpy()
    if "SAFER-F" in methods:
        lo, _ = predict_logits(safer.stage1_net(), data, test, device)
        probs["SAFER-F"] = torch.softmax(lo, -1).cpu().numpy()
    variants: dict[str, dict[str, Any]] = {
        "SAFER-N": {"use_notes": False},
        "SAFER-U": {"survivors_only_stage1": True},
    }
    for name, change in variants.items():
        if name in methods:
            if name == "SAFER-U":  # stage 1 on survivors only, no fine-tuning (paper Table 2)
                change = {**change, "epochs_refine": 0, "epochs_finetune": 0}
            vcfg = TrainConfig.from_dict({**cfg.to_dict(), **change})
            if name == "SAFER-U":
                model = SAFER(vcfg, cohort.note_dim, device)
                _fit_stage1_only(model, cohort, seed, tick)
                net = model.net
            else:
                net = SAFER(vcfg, cohort.note_dim, device).fit(cohort, seed, tick).net
            lo, _ = predict_logits(net, data, test, device)
            probs[name] = torch.softmax(lo, -1).cpu().numpy()
    for name, kind in TRAINED_BASELINES.items():
        if name in methods:
            baseline = train_baseline(
                kind,
                cohort,
                epochs=b_epochs,
                lr=baseline_lr,
                batch_size=cfg.batch_size,
                hidden=cfg.d_model,
                seed=seed,
                device=device,
                tick=tick,
            )
            lo, _ = predict_logits(baseline, data, test, device)
            probs[name] = torch.softmax(lo, -1).cpu().numpy()
    for name, scores in rule_baselines(cohort, test, seed).items():
        if name in methods:
            probs[name] = scores
    metrics = {name: evaluate_predictions(p, cohort, test) for name, p in probs.items()}

    # κ diagnostics (fine-tuned f_θ with the frozen f_φ, as used for selection)
    train = cohort.split["train"]
    out_train = safer.predict(data, train)
    kappa = {
        "train": kappa_summary(out_train["kappa"].numpy(), data.died[train], seed),
        "test": kappa_summary(out_test["kappa"].numpy(), data.died[test], seed),
        "scaler": {
            "mode": safer.scaler.mode,
            "kappa_min": safer.scaler.kappa_min,
            "kappa_max": safer.scaler.kappa_max,
        },
        "test_norm_quantiles": np.quantile(
            out_test["kappa_norm"].numpy(), [0.1, 0.25, 0.5, 0.75, 0.9]
        ).tolist(),
    }

    # conformal selection on the held-out patients (calibration ∪ test), κ on the normalised scale
    held = np.concatenate([calib, test])
    out_held = safer.predict(data, held)
    H = out_held["h"].cpu().numpy().astype(float)
    kn = out_held["kappa_norm"].cpu().numpy().astype(float)
    selection = run_selection_grid(H, kn, cs=cs, alphas=alphas, reps=reps, seed=seed)
    n_cal = len(calib)
    _sel, mask = deploy_selection(
        H[:n_cal], kn[:n_cal], H[n_cal:], alpha=deploy_alpha, c=deploy_c, seed=seed
    )
    p_safer = probs["SAFER"]
    y_test = data.y[test]
    deploy = {
        "alpha": deploy_alpha,
        "c": deploy_c,
        **selection_metrics(mask, kn[n_cal:], deploy_c),
        "n_test": len(test),
        "hr@3_selected": recommendation_metrics(y_test[mask], p_safer[mask])["hr@3"]
        if mask.any() else float("nan"),
        "hr@3_not_selected": recommendation_metrics(y_test[~mask], p_safer[~mask])["hr@3"]
        if (~mask).any() else float("nan"),
        "deceased_fraction_selected": float(data.died[test][mask].mean()) if mask.any() else float("nan"),
        "deceased_fraction_test": float(data.died[test].mean()),
    }  # fmt: skip

    # counterfactual mortality: the learned outcome model (App. B) and, on synthetic data, the oracle
    mort = fit_mortality_model(
        cohort,
        epochs=mortality_epochs,
        lr=mortality_lr,
        batch_size=cfg.batch_size,
        hidden=cfg.d_model,
        seed=seed,
        device=device,
        tick=tick,
    )
    observed = float(data.died[test].mean())
    died_t = data.died[test]
    mortality: dict[str, Any] = {
        "observed": observed,
        "model_observed_actions": float(
            mortality_estimates(mort, cohort, test, y_test, device).mean()
        ),
        "methods": {},
        "assumptions": "no interference, no hidden treatment variation, ignorability given X, "
        "positivity (App. B, B1-B4); the learned model is an estimate, the oracle is exact",
    }
    if oracle is not None:
        mortality["oracle_observed"] = float(oracle.death_prob[data.stay_ids[test] - 1].mean())
    for name, p in probs.items():
        act = p.argmax(1)
        est = mortality_estimates(mort, cohort, test, act, device)
        row: dict[str, Any] = {
            "model_cf": float(est.mean()),
            "model_abs_reduction": observed - float(est.mean()),
            "model_rel_reduction": (observed - float(est.mean())) / observed if observed else float("nan"),
        }  # fmt: skip
        if oracle is not None:
            orc = oracle_counterfactual(oracle, cohort, test, act)
            base = mortality["oracle_observed"]
            row.update(
                {
                    "oracle_cf": float(orc.mean()),
                    "oracle_cf_deceased": float(orc[died_t == 1].mean())
                    if (died_t == 1).any()
                    else float("nan"),
                    "oracle_cf_survivors": float(orc[died_t == 0].mean()),
                    "oracle_abs_reduction": base - float(orc.mean()),
                    "oracle_rel_reduction": (base - float(orc.mean())) / base,
                    "model_oracle_corr": float(np.corrcoef(est, orc)[0, 1])
                    if len(est) > 2
                    else float("nan"),
                }
            )
        mortality["methods"][name] = row
    if oracle is not None:
        dp = oracle.death_prob[data.stay_ids[test] - 1]
        mortality["oracle_observed_deceased"] = (
            float(dp[died_t == 1].mean()) if (died_t == 1).any() else float("nan")
        )
        mortality["oracle_observed_survivors"] = float(dp[died_t == 0].mean())
    results = {
        "split_sizes": {k: len(v) for k, v in cohort.split.items()},
        "test_deceased": int(died_t.sum()),
        "metrics": metrics,
        "kappa": kappa,
        "selection": selection,
        "deploy": deploy,
        "mortality": mortality,
        "history": {k: v for k, v in safer.history.items()},
    }
    return results, safer


def _fit_stage1_only(model: SAFER, cohort: PreparedCohort, seed: int, tick: Any) -> None:
    from .models import SAFERNet
    from .pipeline import _fit_ce, _torch_inputs, seeded

    cfg = model.config
    data = cohort.tensors
    train = cohort.split["train"]
    idx = train[data.died[train] == 0] if cfg.survivors_only_stage1 else train
    with seeded(seed):
        model.net = SAFERNet(cfg.net_config(cohort.note_dim)).to(model.device)
        _fit_ce(
            model.net,
            _torch_inputs(data, model.device),
            idx,
            epochs=cfg.epochs_stage1,
            lr=cfg.lr_stage1,
            batch_size=cfg.batch_size,
            rng=np.random.default_rng(seed),
            tick=tick,
        )
