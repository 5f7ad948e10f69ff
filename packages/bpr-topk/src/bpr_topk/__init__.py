"""bpr-topk: decision-aware training of probabilistic count forecasters for top-K selection.

Heuton et al., "Decision-aware Training of Spatiotemporal Forecasting Models to Select a Top-K
Subset of Sites for Intervention", ICML 2025.

The names below load on first use (PEP 562), so ``bpr-topk --help`` and ``bpr_topk.config`` do not
import torch. Start with :class:`~bpr_topk.config.TrainRunConfig` and :func:`~bpr_topk.runs.run_train`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("bpr-topk")

# name -> submodule that defines it
_LAZY = {
    "TrainRunConfig": "config",
    "RankConfig": "config",
    "EvaluateConfig": "config",
    "DemoConfig": "config",
    "BaselineConfig": "config",
    "ToyConfig": "config",
    "DataConfig": "config",
    "ConfigError": "config",
    "run_train": "runs",
    "run_rank": "runs",
    "run_evaluate": "runs",
    "run_demo": "runs",
    "run_baseline": "runs",
    "run_toy": "runs",
    "TrainRunResult": "runs",
    "RankResult": "runs",
    "EvaluateResult": "runs",
    "DemoResult": "runs",
    "BaselineResult": "runs",
    "ToyResult": "runs",
    "TrainConfig": "experiment",
    "EvalConfig": "experiment",
    "HEURISTICS": "baselines",
    "best_heuristic": "baselines",
    "evaluate_heuristic": "baselines",
    "heuristic_scores": "baselines",
    "lag_columns": "baselines",
    "with_history_features": "baselines",
    "with_site_history_features": "baselines",
    "with_heuristic_offset": "baselines",
    "AmbiguousTargetError": "data",
    "Split": "data",
    "TopKData": "data",
    "load_topk_folder": "data",
    "make_hotspots": "data",
    "make_panel": "data",
    "make_survey_twin": "data",
    "make_synthetic7": "data",
    "make_toy9": "data",
    "make_zero_inflated": "data",
    "toy9_outcomes": "data",
    "write_topk_folder": "data",
    "PGTopK": "decision",
    "SPOPlusTopK": "decision",
    "pg_topk": "decision",
    "spo_plus_topk": "decision",
    "topk_oracle": "decision",
    "BPRLoss": "losses",
    "DAMLLoss": "losses",
    "LossOutput": "losses",
    "nll_term": "losses",
    "bpr": "metrics",
    "regret": "metrics",
    "topk_mask": "metrics",
    "ForecastModel": "models",
    "NegBinMixedEffects": "models",
    "TruncatedNormal": "models",
    "TruncNormMixture": "models",
    "PerturbedTopK": "perturbed",
    "PerturbedTopKFunction": "perturbed",
    "perturbed_topk": "perturbed",
    "mean_rating": "ranking",
    "ratio_rating": "ranking",
    "ratio_values": "ranking",
    "topk_ratio_rating": "ranking",
    "explicit_jacobian_grad": "score",
    "score_function_rating": "score",
    "score_function_surrogate": "score",
    "FitResult": "train",
    "baseline_scores": "train",
    "evaluate_model": "train",
    "evaluate_scores": "train",
    "fit": "train",
}

__all__ = [
    "HEURISTICS",
    "AmbiguousTargetError",
    "BPRLoss",
    "BaselineConfig",
    "BaselineResult",
    "ConfigError",
    "DAMLLoss",
    "DataConfig",
    "DemoConfig",
    "DemoResult",
    "EvalConfig",
    "EvaluateConfig",
    "EvaluateResult",
    "FitResult",
    "ForecastModel",
    "LossOutput",
    "NegBinMixedEffects",
    "PGTopK",
    "PerturbedTopK",
    "PerturbedTopKFunction",
    "RankConfig",
    "RankResult",
    "SPOPlusTopK",
    "Split",
    "TopKData",
    "ToyConfig",
    "ToyResult",
    "TrainConfig",
    "TrainRunConfig",
    "TrainRunResult",
    "TruncNormMixture",
    "TruncatedNormal",
    "__version__",
    "baseline_scores",
    "best_heuristic",
    "bpr",
    "evaluate_heuristic",
    "evaluate_model",
    "evaluate_scores",
    "explicit_jacobian_grad",
    "fit",
    "heuristic_scores",
    "lag_columns",
    "load_topk_folder",
    "make_hotspots",
    "make_panel",
    "make_survey_twin",
    "make_synthetic7",
    "make_toy9",
    "make_zero_inflated",
    "mean_rating",
    "nll_term",
    "perturbed_topk",
    "pg_topk",
    "ratio_rating",
    "ratio_values",
    "regret",
    "run_baseline",
    "run_demo",
    "run_evaluate",
    "run_rank",
    "run_toy",
    "run_train",
    "score_function_rating",
    "score_function_surrogate",
    "spo_plus_topk",
    "topk_mask",
    "topk_oracle",
    "topk_ratio_rating",
    "toy9_outcomes",
    "with_heuristic_offset",
    "with_history_features",
    "with_site_history_features",
    "write_topk_folder",
]

if TYPE_CHECKING:
    from .baselines import (
        HEURISTICS,
        best_heuristic,
        evaluate_heuristic,
        heuristic_scores,
        lag_columns,
        with_heuristic_offset,
        with_history_features,
        with_site_history_features,
    )
    from .config import (
        BaselineConfig,
        ConfigError,
        DataConfig,
        DemoConfig,
        EvaluateConfig,
        RankConfig,
        ToyConfig,
        TrainRunConfig,
    )
    from .data import (
        AmbiguousTargetError,
        Split,
        TopKData,
        load_topk_folder,
        make_hotspots,
        make_panel,
        make_survey_twin,
        make_synthetic7,
        make_toy9,
        make_zero_inflated,
        toy9_outcomes,
        write_topk_folder,
    )
    from .decision import PGTopK, SPOPlusTopK, pg_topk, spo_plus_topk, topk_oracle
    from .experiment import EvalConfig, TrainConfig
    from .losses import BPRLoss, DAMLLoss, LossOutput, nll_term
    from .metrics import bpr, regret, topk_mask
    from .models import ForecastModel, NegBinMixedEffects, TruncatedNormal, TruncNormMixture
    from .perturbed import PerturbedTopK, PerturbedTopKFunction, perturbed_topk
    from .ranking import mean_rating, ratio_rating, ratio_values, topk_ratio_rating
    from .runs import (
        BaselineResult,
        DemoResult,
        EvaluateResult,
        RankResult,
        ToyResult,
        TrainRunResult,
        run_baseline,
        run_demo,
        run_evaluate,
        run_rank,
        run_toy,
        run_train,
    )
    from .score import explicit_jacobian_grad, score_function_rating, score_function_surrogate
    from .train import FitResult, baseline_scores, evaluate_model, evaluate_scores, fit


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
