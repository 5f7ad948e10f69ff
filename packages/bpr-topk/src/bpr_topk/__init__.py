"""bpr-topk: decision-aware training of probabilistic count forecasters for top-K selection.

Heuton et al., "Decision-aware Training of Spatiotemporal Forecasting Models to Select a Top-K
Subset of Sites for Intervention", ICML 2025.
"""

from importlib.metadata import version

from .baselines import (
    HEURISTICS,
    best_heuristic,
    evaluate_heuristic,
    heuristic_scores,
    lag_columns,
    with_history_features,
    with_site_history_features,
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
from .losses import BPRLoss, DAMLLoss, LossOutput, nll_term
from .metrics import bpr, regret, topk_mask
from .models import ForecastModel, NegBinMixedEffects, TruncatedNormal, TruncNormMixture
from .perturbed import PerturbedTopK, PerturbedTopKFunction, perturbed_topk
from .ranking import mean_rating, ratio_rating, ratio_values, topk_ratio_rating
from .score import explicit_jacobian_grad, score_function_rating, score_function_surrogate
from .train import FitResult, baseline_scores, evaluate_model, evaluate_scores, fit

__version__ = version("bpr-topk")

__all__ = [
    "HEURISTICS",
    "AmbiguousTargetError",
    "BPRLoss",
    "DAMLLoss",
    "FitResult",
    "ForecastModel",
    "LossOutput",
    "NegBinMixedEffects",
    "PGTopK",
    "PerturbedTopK",
    "PerturbedTopKFunction",
    "SPOPlusTopK",
    "Split",
    "TopKData",
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
    "score_function_rating",
    "score_function_surrogate",
    "spo_plus_topk",
    "topk_mask",
    "topk_oracle",
    "topk_ratio_rating",
    "toy9_outcomes",
    "with_history_features",
    "with_site_history_features",
    "write_topk_folder",
]
