"""safer-dtr: SAFER (Shen, Ye, Xiong, Chen; ICML 2025), calibrated risk-aware multimodal treatment
recommendation with conformal selection and false-discovery-rate control."""

from importlib.metadata import PackageNotFoundError, version

from .comparison import ComparisonConfig, paired_difference, run_comparison_seed, select_finetune
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
from .encoders import CachedEncoder, HashingEncoder, HFEncoder, embed_note_rows, make_encoder
from .experiment import run_experiment
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
from .pipeline import SAFER, PreparedCohort, TrainConfig, prepare_cohort
from .synthetic import SyntheticSepsisCohort
from .uncertainty import KappaScaler, risk_aware_loss, uncertainty_kl

try:
    __version__ = version("safer-dtr")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

__all__ = [
    "SAFER",
    "AIClinicianCohort",
    "CachedEncoder",
    "CohortTensors",
    "ComparisonConfig",
    "ConformalSelector",
    "HFEncoder",
    "HashingEncoder",
    "KappaScaler",
    "LinearRegressor",
    "LogisticBaseline",
    "MortalityModel",
    "NotFittedError",
    "PreparedCohort",
    "Preprocessor",
    "RNNBaseline",
    "RefineHead",
    "SAFERConfig",
    "SAFERNet",
    "Sequences",
    "SyntheticSepsisCohort",
    "TrainConfig",
    "__version__",
    "accuracy",
    "action_class",
    "bh_select",
    "build_sequences",
    "conformal_pvalues",
    "embed_note_rows",
    "fdr_monte_carlo_test",
    "hit_rate_at_k",
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
    "run_experiment",
    "select_finetune",
    "selection_metrics",
    "stratified_split",
    "uncertainty_kl",
]
