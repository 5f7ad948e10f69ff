"""safer-dtr: SAFER (Shen, Ye, Xiong, Chen; ICML 2025), calibrated risk-aware multimodal treatment
recommendation with conformal selection and false-discovery-rate control.

The jobs are Python calls on config dataclasses: ``run_train(TrainRunConfig(...), out)``,
``run_recommend``, ``run_evaluate``, ``run_generate``, ``run_demo`` (:mod:`safer_dtr.jobs`). The names below
load on first use (PEP 562), so ``safer-dtr --help`` and ``safer_dtr.config`` do not import torch.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("safer-dtr")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

# name -> submodule that defines it
_LAZY = {
    "ComparisonConfig": "comparison",
    "paired_difference": "comparison",
    "run_comparison_seed": "comparison",
    "select_finetune": "comparison",
    "ConfigError": "config",
    "DemoConfig": "config",
    "EvaluateConfig": "config",
    "GenerateConfig": "config",
    "RecommendConfig": "config",
    "TrainRunConfig": "config",
    "ConformalSelector": "conformal",
    "LinearRegressor": "conformal",
    "NotFittedError": "conformal",
    "bh_select": "conformal",
    "conformal_pvalues": "conformal",
    "fdr_monte_carlo_test": "conformal",
    "repeated_selection": "conformal",
    "selection_metrics": "conformal",
    "AIClinicianCohort": "data",
    "CohortTensors": "data",
    "Preprocessor": "data",
    "Sequences": "data",
    "action_class": "data",
    "build_sequences": "data",
    "read_notes_csv": "data",
    "read_table_csv": "data",
    "stratified_split": "data",
    "CachedEncoder": "encoders",
    "HFEncoder": "encoders",
    "HashingEncoder": "encoders",
    "embed_note_rows": "encoders",
    "make_encoder": "encoders",
    "run_experiment": "experiment",
    "JobResult": "jobs",
    "load_checkpoint": "jobs",
    "run_demo": "jobs",
    "run_evaluate": "jobs",
    "run_generate": "jobs",
    "run_recommend": "jobs",
    "run_train": "jobs",
    "save_checkpoint": "jobs",
    "accuracy": "metrics",
    "hit_rate_at_k": "metrics",
    "macro_auc": "metrics",
    "micro_auc": "metrics",
    "mrr_at_k": "metrics",
    "recommendation_metrics": "metrics",
    "roc_auc": "metrics",
    "LogisticBaseline": "models",
    "MortalityModel": "models",
    "RNNBaseline": "models",
    "RefineHead": "models",
    "SAFERConfig": "models",
    "SAFERNet": "models",
    "PreparedCohort": "pipeline",
    "SAFER": "pipeline",
    "TrainConfig": "pipeline",
    "prepare_cohort": "pipeline",
    "SyntheticSepsisCohort": "synthetic",
    "KappaScaler": "uncertainty",
    "risk_aware_loss": "uncertainty",
    "uncertainty_kl": "uncertainty",
}

__all__ = [
    "SAFER",
    "AIClinicianCohort",
    "CachedEncoder",
    "CohortTensors",
    "ComparisonConfig",
    "ConfigError",
    "ConformalSelector",
    "DemoConfig",
    "EvaluateConfig",
    "GenerateConfig",
    "HFEncoder",
    "HashingEncoder",
    "JobResult",
    "KappaScaler",
    "LinearRegressor",
    "LogisticBaseline",
    "MortalityModel",
    "NotFittedError",
    "PreparedCohort",
    "Preprocessor",
    "RNNBaseline",
    "RecommendConfig",
    "RefineHead",
    "SAFERConfig",
    "SAFERNet",
    "Sequences",
    "SyntheticSepsisCohort",
    "TrainConfig",
    "TrainRunConfig",
    "__version__",
    "accuracy",
    "action_class",
    "bh_select",
    "build_sequences",
    "conformal_pvalues",
    "embed_note_rows",
    "fdr_monte_carlo_test",
    "hit_rate_at_k",
    "load_checkpoint",
    "macro_auc",
    "make_encoder",
    "micro_auc",
    "mrr_at_k",
    "paired_difference",
    "prepare_cohort",
    "read_notes_csv",
    "read_table_csv",
    "recommendation_metrics",
    "repeated_selection",
    "risk_aware_loss",
    "roc_auc",
    "run_comparison_seed",
    "run_demo",
    "run_evaluate",
    "run_experiment",
    "run_generate",
    "run_recommend",
    "run_train",
    "save_checkpoint",
    "select_finetune",
    "selection_metrics",
    "stratified_split",
    "uncertainty_kl",
]

if TYPE_CHECKING:
    from .comparison import (
        ComparisonConfig,
        paired_difference,
        run_comparison_seed,
        select_finetune,
    )
    from .config import (
        ConfigError,
        DemoConfig,
        EvaluateConfig,
        GenerateConfig,
        RecommendConfig,
        TrainRunConfig,
    )
    from .conformal import (
        ConformalSelector,
        LinearRegressor,
        NotFittedError,
        bh_select,
        conformal_pvalues,
        fdr_monte_carlo_test,
        repeated_selection,
        selection_metrics,
    )
    from .data import (
        AIClinicianCohort,
        CohortTensors,
        Preprocessor,
        Sequences,
        action_class,
        build_sequences,
        read_notes_csv,
        read_table_csv,
        stratified_split,
    )
    from .encoders import (
        CachedEncoder,
        HashingEncoder,
        HFEncoder,
        embed_note_rows,
        make_encoder,
    )
    from .experiment import (
        run_experiment,
    )
    from .jobs import (
        JobResult,
        load_checkpoint,
        run_demo,
        run_evaluate,
        run_generate,
        run_recommend,
        run_train,
        save_checkpoint,
    )
    from .metrics import (
        accuracy,
        hit_rate_at_k,
        macro_auc,
        micro_auc,
        mrr_at_k,
        recommendation_metrics,
        roc_auc,
    )
    from .models import (
        LogisticBaseline,
        MortalityModel,
        RefineHead,
        RNNBaseline,
        SAFERConfig,
        SAFERNet,
    )
    from .pipeline import (
        SAFER,
        PreparedCohort,
        TrainConfig,
        prepare_cohort,
    )
    from .synthetic import (
        SyntheticSepsisCohort,
    )
    from .uncertainty import (
        KappaScaler,
        risk_aware_loss,
        uncertainty_kl,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
