"""Configurations: the training loops' (:class:`TrainConfig`, :class:`AlignConfig`), the demo
pipeline's (:class:`PipelineConfig`) and one per command (:class:`EvaluateConfig`,
:class:`FinetuneConfig`, :class:`RegimeConfig`, :class:`DemoConfig`).

Each field carries its default, a one-line doc and the values it accepts; :func:`check_config` checks
them when the config is built (a :class:`ConfigError`, a ``ValueError``, names the field) and the
command line makes one flag per command-config field from the same declaration. Standard library
only: building the CLI does not import torch.

>>> from cft_calibration import FinetuneConfig, run_finetune
>>> result = run_finetune(FinetuneConfig(model="tiny-clm", data="synthetic-category"))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._contract import REQUIRED, ConfigError, check_config, param
from .data import FORMATS

__all__ = [
    "DATA_NAMES",
    "HUMANITIES",
    "METHODS",
    "MODEL_NAMES",
    "AlignConfig",
    "ConfigError",
    "DPOConfig",
    "DemoConfig",
    "EvaluateConfig",
    "FinetuneConfig",
    "PipelineConfig",
    "RegimeConfig",
    "TrainConfig",
]

_MAX = 10**9  # "as many as you like" for counts that only need to be positive
_SEED = 2**32 - 1
SPLITS = ("train", "dev", "val", "test")
MODEL_NAMES = ("tiny-clm", "minilm")
# Named data sets: embedded, or found under $ICML25_DATA (the shared-data root).
SHARED_NAMES = ("mmlu", "openbookqa")
DATA_NAMES = ("synthetic-category", *SHARED_NAMES)
DEMO_NAMES = ("synthetic-feature", *DATA_NAMES)
METHODS = ("uniform", "base", "aligned", "ts", "ls", "cft", "long_sft", "rcft", "rcft_once")
HUMANITIES = (
    "formal_logic high_school_european_history high_school_us_history high_school_world_history "
    "international_law jurisprudence logical_fallacies moral_disputes moral_scenarios philosophy "
    "prehistory professional_law world_religions"
).split()
_DATA = (
    "multiple-choice data: an MMLU folder/CSV, an OpenBookQA folder/TSV/JSONL, ARC JSONL, MedMCQA "
    "JSONL, generic JSONL {question, choices, answer}, synthetic-category (embedded) or mmlu / "
    "openbookqa (under $ICML25_DATA)"
)
_MODEL = (
    "a local HF model folder (causal LM or AutoModelForMultipleChoice), tiny-clm (random 2-layer "
    "Llama, smoke runs) or minilm (all-MiniLM-L6-v2 multiple-choice, needs the [demo] extra)"
)


@dataclass
class TrainConfig:
    """Hyperparameters of one fine-tuning run (defaults: the cached-feature head; see the README).

    ``select``: ``"last"`` (keep the final weights), ``"ece_within_acc"`` (CFT: the best validation
    conf-ECE among the epochs within ``acc_tol`` of the best validation accuracy) or ``"acc"``.
    ``e_step_every``: re-run the E-step every this many epochs (1 = every epoch, the EM reading of the
    paper); ``None`` = once before training (the official code). ``official``: total loss
    (1 - alpha) L_SFT + alpha 1e-3 R instead of L_SFT + lambda R.
    """

    epochs: int = param(3, "training epochs", low=1, high=100_000)
    lr: float = param(1e-3, "AdamW learning rate", low=0, low_open=True, high=1)
    batch_size: int = param(64, "training minibatch size", low=1, high=_MAX)
    weight_decay: float = param(0.0, "AdamW weight decay", low=0, high=10)
    warmup: float = param(
        0.1, "share of the steps in linear warm-up", low=0, high=1, high_open=True
    )
    sft_loss: str = param("options", "SFT loss", choices=("options", "full_vocab"))
    label_smoothing: float = param(
        0.0, "label smoothing of the options CE", low=0, high=1, high_open=True
    )
    select: str = param("last", "epoch selection", choices=("last", "ece_within_acc", "acc"))
    acc_tol: float = param(0.01, "ece_within_acc: accuracy tolerance", low=0, high=1)
    e_step_every: int | None = param(
        1, "re-run the E-step every N epochs", low=1, high=100_000, none="once"
    )
    e_step_max_items: int | None = param(
        None, "E-step on a random subsample of this many items", low=1, high=_MAX, none="all"
    )
    official: bool = param(False, "the official code's loss (1-alpha) L_SFT + alpha 1e-3 R")
    alpha: float = param(0.5, "official: mixing weight alpha", low=0, high=1)
    grad_clip: float | None = param(
        1.0, "gradient-norm clip", low=0, low_open=True, high=1e6, none="none"
    )
    eval_batch_size: int = param(256, "evaluation batch size", low=1, high=_MAX)
    n_bins: int = param(10, "ECE bins M", low=2, high=1000)
    seed: int = param(0, "random seed", low=0, high=_SEED)

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class AlignConfig:
    """DPO-style preference steps (no SFT term): ``pref="self"`` (chosen = the model's current argmax,
    rejected uniform over the other options) or ``"noisy_gold"`` (chosen = gold w.p. 0.8)."""

    steps: int = param(300, "DPO steps", low=0, high=10_000_000)
    lr: float = param(1e-3, "AdamW learning rate", low=0, low_open=True, high=1)
    beta: float = param(0.1, "DPO inverse temperature beta", low=0, low_open=True, high=1000)
    batch_size: int = param(64, "minibatch size", low=1, high=_MAX)
    pref: str = param("self", "preference pairs", choices=("self", "noisy_gold"))
    gold_prob: float = param(0.8, "noisy_gold: probability that chosen = gold", low=0, high=1)
    seed: int = param(0, "random seed", low=0, high=_SEED)

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class DPOConfig:
    """Direct preference optimisation on option preferences (:func:`~cft_calibration.dpo.dpo_align`):
    the chosen answer is the gold option, the rejected one every other valid option
    (``rejected="all"``, K - 1 pairs per question) or one drawn uniformly (``"random"``); the
    reference is the frozen starting model."""

    steps: int = param(300, "optimiser steps (minibatches over a reshuffled pass)", low=0,
                       high=10_000_000)  # fmt: skip
    lr: float = param(5e-4, "AdamW learning rate", low=0, low_open=True, high=1)
    beta: float = param(0.1, "DPO inverse temperature beta", low=0, low_open=True, high=1000)
    batch_size: int = param(32, "questions per minibatch", low=1, high=_MAX)
    rejected: str = param("all", "rejected options per question", choices=("all", "random"))
    disable_dropout: bool = param(
        True, "dropout off in the policy during DPO (so policy = reference gives loss ln 2)"
    )
    grad_clip: float | None = param(
        1.0, "gradient-norm clip", low=0, low_open=True, high=1e6, none="none"
    )
    seed: int = param(0, "random seed", low=0, high=_SEED)

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class PipelineConfig:
    """Budgets of every stage of the demo pipeline (defaults: the cached-feature head on CPU).

    ``lams``: candidate RCFT weights; when given, each RCFT variant is trained once per lambda and
    the lambda with the lowest validation conf-ECE among those within ``long.acc_tol`` of the best
    validation accuracy is kept (default: only ``lam``)."""

    hidden: int = param(256, "hidden width of the feature head", low=1, high=65536)
    dropout: float = param(0.1, "dropout of the head", low=0, high=1, high_open=True)
    base: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=20, lr=1e-3, select="acc"))
    alignment: str = param(
        "dpo", "how the aligned model is made: real DPO (gold over wrong options, frozen reference) "
        "or the 0.2.0 simulation (chosen = the model's own answer)", choices=("dpo", "simulated"),
    )  # fmt: skip
    dpo: DPOConfig = field(default_factory=lambda: DPOConfig(steps=300, lr=1e-3))
    align: AlignConfig = field(default_factory=lambda: AlignConfig(steps=300, lr=1e-3))
    cft: TrainConfig = field(
        default_factory=lambda: TrainConfig(epochs=3, lr=1e-3, select="ece_within_acc")
    )
    long: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=10, lr=1e-3))
    label_smoothing: float = param(0.1, "label smoothing baseline", low=0, high=1, high_open=True)
    lam: float = param(1.0, "RCFT weight lambda", low=0, high=1e4)
    lams: Sequence[float] = ()
    n_bins: int = param(10, "ECE bins M", low=2, high=1000)
    methods: Sequence[str] = METHODS

    def __post_init__(self) -> None:
        check_config(self)
        for name in ("base", "cft", "long"):
            if not isinstance(getattr(self, name), TrainConfig):
                raise ConfigError(name, f"{name} must be a TrainConfig")
        if not isinstance(self.align, AlignConfig):
            raise ConfigError("align", "align must be an AlignConfig")
        if not isinstance(self.dpo, DPOConfig):
            raise ConfigError("dpo", "dpo must be a DPOConfig")
        if any(not (isinstance(x, (int, float)) and 0 <= x <= 1e4) for x in self.lams):
            raise ConfigError("lams", f"lams={self.lams!r}: expected numbers >= 0 and <= 10000")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ConfigError(
                "methods", f"methods {unknown}: expected some of {', '.join(METHODS)}"
            )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------ commands


@dataclass
class _ModelJob:
    """Fields shared by the commands that score a model on multiple-choice data."""

    model: str | Path = param(REQUIRED, _MODEL, path="dir", names=MODEL_NAMES)
    data: str | Path = param(REQUIRED, _DATA, path="any", names=DATA_NAMES)
    model_type: str = param(
        "auto", "how to read model (auto: from config.json's architectures)",
        choices=("auto", "causal-lm", "multiple-choice"),
    )  # fmt: skip
    template: str = param(
        "flat", "causal-LM prompt: flat '### Question: ... ### Answer:' (the official format) or the "
        "tokenizer's chat template", choices=("flat", "chat"),
    )  # fmt: skip
    max_length: int = param(512, "maximum prompt tokens (cut from the left)", low=16, high=8192)
    batch_size: int = param(8, "items per forward pass", low=1, high=100_000)
    threads: int | None = param(None, "torch CPU threads", low=1, high=1024, none="auto")
    format: str = param("auto", "layout of the data files (auto: detected)", choices=FORMATS)
    split: str = param("test", "which split to read from a data folder", choices=SPLITS)
    max_questions: int | None = param(
        None, "random subsample of this many questions, seeded by seed", low=1, high=_MAX,
        none="all",
    )  # fmt: skip
    bins: int = param(10, "equal-width ECE bins M", low=2, high=100)
    seed: int = param(0, "random seed", low=0, high=_SEED)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class EvaluateConfig(_ModelJob):
    """``cft-calibration evaluate``: accuracy, ECEs, Brier, NLL and reliability diagrams of a model."""

    calibration_data: str | Path | None = param(
        None, "held-out data to fit a temperature on (same formats as data; the dev split of a "
        "folder); adds the temperature-scaled metrics", path="any", names=DATA_NAMES,
    )  # fmt: skip


@dataclass
class RegimeConfig(_ModelJob):
    """``cft-calibration regime``: calibration diagnostics and the empirical calibratable witness."""


@dataclass
class FinetuneConfig(_ModelJob):
    """``cft-calibration finetune``: CFT or RCFT of a model, calibration before and after."""

    split: str = param("train", "which split to read from a data folder", choices=SPLITS)
    method: str = param(
        "cft", "cft (SFT with checkpoint selection) or rcft (SFT + EM-ECE regulariser)",
        choices=("cft", "rcft"),
    )  # fmt: skip
    val_data: str | Path | None = param(
        None, "validation data for checkpoint selection (none: val_fraction of data)", path="any",
        names=DATA_NAMES,
    )  # fmt: skip
    test_data: str | Path | None = param(
        None, "test data reported before and after", path="any", names=DATA_NAMES
    )
    val_fraction: float = param(
        0.1, "share of data held out for validation without val_data", low=0, low_open=True, high=0.5
    )  # fmt: skip
    epochs: int | None = param(
        None, "epochs (auto: 3 for cft, 10 for rcft)", low=1, high=10_000, none="auto"
    )
    lr: float = param(
        5e-6, "AdamW learning rate (5e-6: the official code's)", low=0, low_open=True, high=1
    )
    sft_loss: str = param(
        "auto", "SFT loss: full-vocabulary CE of the answer letter (causal LMs) or CE over the "
        "options (auto: full_vocab for causal LMs, options otherwise)",
        choices=("auto", "full_vocab", "options"),
    )  # fmt: skip
    label_smoothing: float = param(
        0.0, "label smoothing of the options CE", low=0, high=1, high_open=True
    )
    acc_tol: float = param(
        0.01, "cft: keep the best-ECE epoch within this of the best validation accuracy", low=0,
        high=1,
    )  # fmt: skip
    lam: float = param(1.0, "rcft: weight lambda of the ECE regulariser", low=0, high=1e4)
    e_step_every: int | None = param(
        1, "rcft: re-run the E-step every N epochs (once: before training, as the official code)",
        low=1, high=10_000, none="once",
    )  # fmt: skip
    e_step_items: int | None = param(
        None, "rcft: E-step on a random subsample of this many training items", low=1, high=_MAX,
        none="all",
    )  # fmt: skip
    weighting: str = param(
        "mass", "rcft: regulariser weighting, per-sample mean (mass) or per-bin 1/n_m (official)",
        choices=("mass", "official"),
    )  # fmt: skip
    official: bool = param(
        False, "rcft: the official code's variant ((1-alpha) SFT + alpha 1e-3 R, per-bin weighting, "
        "top bin skipped, targets not detached, E-step once); cft: fixed epochs, no selection",
    )  # fmt: skip
    alpha: float = param(
        0.5, "official: mixing weight alpha (0.5, the official parser default)", low=0, high=1
    )
    lora: bool = param(False, "train LoRA adapters instead of all weights (the [lora] extra)")
    lora_r: int = param(16, "LoRA rank (the official code uses 128)", low=1, high=4096)
    lora_alpha: int = param(32, "LoRA alpha (the official code uses 64)", low=1, high=65536)
    paper_scale: bool = param(
        False, "the official 7-8B setting, for GPU users: LoRA r=128, alpha 64, dropout 0.05 on all "
        "linear layers, lr 5e-6, 5 epochs, batch 2 per process, bf16 weights on CUDA (replaces "
        "lora, lora_r, lora_alpha, lr, epochs and batch_size)",
    )  # fmt: skip


@dataclass
class DemoConfig:
    """``cft-calibration demo``: base SFT -> DPO alignment -> TS / label smoothing / CFT / long SFT /
    RCFT on cached features, over seeds."""

    data: str | Path = param(
        "synthetic-feature", "synthetic-feature (embedded, exact ground truth), synthetic-category "
        "(embedded text, MiniLM), mmlu / openbookqa (under $ICML25_DATA) or an MMLU / OpenBookQA "
        "folder or file (MiniLM; the [demo] extra)", path="any", names=DEMO_NAMES,
    )  # fmt: skip
    quick: bool = param(False, "smaller data and fewer epochs (seconds on the embedded data)")
    format: str = param("auto", "layout of the data files (auto: detected)", choices=FORMATS)
    split: str = param(
        "test", "split read from a data folder (train for OpenBookQA)", choices=SPLITS
    )
    max_questions: int | None = param(
        None, "in-domain questions sampled from data (auto: 3000, 800 with quick)", low=1,
        high=_MAX, none="auto",
    )  # fmt: skip
    seeds: int = param(1, "number of seeds, from seed on", low=1, high=1000)
    alignment: str = param(
        "dpo", "dpo (gold over wrong options against the frozen base model) or simulated (0.2.0: "
        "chosen = the model's own answer)", choices=("dpo", "simulated"),
    )  # fmt: skip
    align_steps: int = param(200, "DPO steps of the alignment", low=0, high=1_000_000)
    lam: float = param(1.0, "RCFT regulariser weight lambda", low=0, high=1e4)
    cache_dir: str | None = param(
        None, "folder for cached MiniLM features (default: ~/.cache/cft-calibration)",
        none="default",
    )  # fmt: skip
    threads: int = param(1, "torch CPU threads (1: fastest for the small head)", low=1, high=1024)
    seed: int = param(0, "first random seed", low=0, high=_SEED)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
