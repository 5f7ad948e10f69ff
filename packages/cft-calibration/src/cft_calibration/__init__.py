"""cft-calibration: restore the calibration of preference-aligned language models.

Calibration metrics (conf-ECE with equal-width and equal-mass bins, class-wise ECE, MCE, Brier, NLL),
reliability diagrams, temperature scaling with a working gradient, CFT (calibration-aware supervised
fine-tuning) and RCFT (SFT plus the EM-style ECE regulariser) for any HF causal LM (option-letter
logits), any HF multiple-choice model, or a head over cached sentence-encoder features
(Xiao et al., "Restoring Calibration for Aligned Large Language Models: A Calibration-Aware
Fine-Tuning Approach", ICML 2025).
"""

from importlib.metadata import version

from .data import (
    FORMATS,
    LETTERS,
    MCItem,
    detect_format,
    load_arc,
    load_jsonl,
    load_mcqa,
    load_medmcqa,
    load_mmlu,
    load_openbookqa,
    split_items,
    write_jsonl,
)
from .metrics import (
    accuracy,
    bin_indices,
    brier_score,
    classwise_ece,
    conf_ece,
    evaluate_probs,
    mce,
    nll,
    overconfidence_gap,
    reliability_table,
)
from .pipeline import PipelineConfig, run_pipeline, synthetic_feature_splits, text_feature_splits
from .regime import diagnose
from .regularizer import EMECERegularizer, nonmax_targets
from .scoring import (
    FeatureScorer,
    LetterScorer,
    MCScorer,
    ScoreOutput,
    completion_loss,
    completion_only_labels,
    format_question,
    predict,
)
from .synthetic import (
    CATEGORIES,
    FeatureSplit,
    SyntheticFeatureMCQA,
    synthetic_category_mcqa,
    synthetic_feature_mcqa,
)
from .temperature import TemperatureScaler, temperature_nll
from .train import (
    AlignConfig,
    TrainConfig,
    TrainResult,
    apply_lora,
    dpo_option_loss,
    e_step,
    evaluate_scorer,
    official_regularizer,
    option_ce,
    simulate_alignment,
    train,
    train_cft,
    train_rcft,
)

__version__ = version("cft-calibration")

__all__ = [
    "CATEGORIES",
    "FORMATS",
    "LETTERS",
    "AlignConfig",
    "EMECERegularizer",
    "FeatureScorer",
    "FeatureSplit",
    "LetterScorer",
    "MCItem",
    "MCScorer",
    "PipelineConfig",
    "ScoreOutput",
    "SyntheticFeatureMCQA",
    "TemperatureScaler",
    "TrainConfig",
    "TrainResult",
    "__version__",
    "accuracy",
    "apply_lora",
    "bin_indices",
    "brier_score",
    "classwise_ece",
    "completion_loss",
    "completion_only_labels",
    "conf_ece",
    "detect_format",
    "diagnose",
    "dpo_option_loss",
    "e_step",
    "evaluate_probs",
    "evaluate_scorer",
    "format_question",
    "load_arc",
    "load_jsonl",
    "load_mcqa",
    "load_medmcqa",
    "load_mmlu",
    "load_openbookqa",
    "mce",
    "nll",
    "nonmax_targets",
    "official_regularizer",
    "option_ce",
    "overconfidence_gap",
    "predict",
    "reliability_table",
    "run_pipeline",
    "simulate_alignment",
    "split_items",
    "synthetic_category_mcqa",
    "synthetic_feature_mcqa",
    "synthetic_feature_splits",
    "temperature_nll",
    "text_feature_splits",
    "train",
    "train_cft",
    "train_rcft",
    "write_jsonl",
]
