"""cft-calibration: restore the calibration of preference-aligned language models.

Calibration metrics (conf-ECE with equal-width and equal-mass bins, class-wise ECE, MCE, Brier, NLL),
reliability diagrams, temperature scaling with a working gradient, CFT (calibration-aware supervised
fine-tuning) and RCFT (SFT plus the EM-style ECE regulariser) for any HF causal LM (option-letter
logits), any HF multiple-choice model, or a head over cached sentence-encoder features
(Xiao et al., "Restoring Calibration for Aligned Large Language Models: A Calibration-Aware
Fine-Tuning Approach", ICML 2025).

The names below load on first use (PEP 562), so ``cft-calibration --help`` and
``cft_calibration.config`` do not import torch. Every command is one call:
``run_evaluate/run_finetune/run_regime/run_demo(<Command>Config(...))``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("cft-calibration")

# name -> submodule that defines it
_LAZY = {
    "FORMATS": "data",
    "LETTERS": "data",
    "MCItem": "data",
    "detect_format": "data",
    "load_arc": "data",
    "load_jsonl": "data",
    "load_mcqa": "data",
    "load_medmcqa": "data",
    "load_mmlu": "data",
    "load_openbookqa": "data",
    "split_items": "data",
    "write_jsonl": "data",
    "accuracy": "metrics",
    "bin_indices": "metrics",
    "brier_score": "metrics",
    "classwise_ece": "metrics",
    "conf_ece": "metrics",
    "evaluate_probs": "metrics",
    "mce": "metrics",
    "nll": "metrics",
    "overconfidence_gap": "metrics",
    "reliability_table": "metrics",
    "PipelineConfig": "config",
    "run_pipeline": "pipeline",
    "synthetic_feature_splits": "pipeline",
    "text_feature_splits": "pipeline",
    "diagnose": "regime",
    "EMECERegularizer": "regularizer",
    "nonmax_targets": "regularizer",
    "FeatureScorer": "scoring",
    "LetterScorer": "scoring",
    "MCScorer": "scoring",
    "ScoreOutput": "scoring",
    "completion_loss": "scoring",
    "completion_only_labels": "scoring",
    "format_question": "scoring",
    "predict": "scoring",
    "CATEGORIES": "synthetic",
    "FeatureSplit": "synthetic",
    "SyntheticFeatureMCQA": "synthetic",
    "synthetic_category_mcqa": "synthetic",
    "synthetic_feature_mcqa": "synthetic",
    "TemperatureScaler": "temperature",
    "temperature_nll": "temperature",
    "AlignConfig": "config",
    "TrainConfig": "config",
    "DPOConfig": "config",
    "CausalLMConfig": "causal",
    "CausalLMResult": "causal",
    "run_causal_lm": "causal",
    "DPOResult": "dpo",
    "dpo_align": "dpo",
    "HiddenSplit": "cached",
    "TopLayerScorer": "cached",
    "dpo_preference_loss": "dpo",
    "preference_pairs": "dpo",
    "TrainResult": "train",
    "apply_lora": "train",
    "dpo_option_loss": "train",
    "e_step": "train",
    "evaluate_scorer": "train",
    "official_regularizer": "train",
    "option_ce": "train",
    "simulate_alignment": "train",
    "train": "train",
    "train_cft": "train",
    "train_rcft": "train",
    "EvaluateConfig": "config",
    "FinetuneConfig": "config",
    "RegimeConfig": "config",
    "DemoConfig": "config",
    "ConfigError": "config",
    "run_evaluate": "experiments",
    "run_finetune": "experiments",
    "run_regime": "experiments",
    "run_demo": "experiments",
    "EvaluateResult": "experiments",
    "FinetuneResult": "experiments",
    "RegimeResult": "experiments",
    "DemoResult": "experiments",
}

__all__ = [
    "CATEGORIES",
    "FORMATS",
    "LETTERS",
    "AlignConfig",
    "CausalLMConfig",
    "CausalLMResult",
    "ConfigError",
    "DPOConfig",
    "DPOResult",
    "DemoConfig",
    "DemoResult",
    "EMECERegularizer",
    "EvaluateConfig",
    "EvaluateResult",
    "FeatureScorer",
    "FeatureSplit",
    "FinetuneConfig",
    "FinetuneResult",
    "HiddenSplit",
    "LetterScorer",
    "MCItem",
    "MCScorer",
    "PipelineConfig",
    "RegimeConfig",
    "RegimeResult",
    "ScoreOutput",
    "SyntheticFeatureMCQA",
    "TemperatureScaler",
    "TopLayerScorer",
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
    "dpo_align",
    "dpo_option_loss",
    "dpo_preference_loss",
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
    "preference_pairs",
    "reliability_table",
    "run_causal_lm",
    "run_demo",
    "run_evaluate",
    "run_finetune",
    "run_pipeline",
    "run_regime",
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

if TYPE_CHECKING:
    from .cached import HiddenSplit, TopLayerScorer
    from .causal import CausalLMConfig, CausalLMResult, run_causal_lm
    from .config import (
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
    from .dpo import DPOResult, dpo_align, dpo_preference_loss, preference_pairs
    from .experiments import (
        DemoResult,
        EvaluateResult,
        FinetuneResult,
        RegimeResult,
        run_demo,
        run_evaluate,
        run_finetune,
        run_regime,
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
    from .pipeline import (
        run_pipeline,
        synthetic_feature_splits,
        text_feature_splits,
    )
    from .regime import (
        diagnose,
    )
    from .regularizer import (
        EMECERegularizer,
        nonmax_targets,
    )
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
    from .temperature import (
        TemperatureScaler,
        temperature_nll,
    )
    from .train import (
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


class _Package(types.ModuleType):
    """Keeps ``cft_calibration.train`` the training function: importing the ``train`` submodule would
    otherwise rebind the package attribute to the module (it stays in ``sys.modules``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "train" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
