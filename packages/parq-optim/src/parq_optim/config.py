"""Configurations of the package's three jobs (``demo``, ``train``, ``export``).

Each field carries its default, a one-line doc and the values it accepts; :func:`check_config` checks
them when the config is built (a :class:`ConfigError` names the field), and the command line makes one
flag per field from the same declaration. Standard library only: building the CLI does not import
torch.

>>> from parq_optim.config import TrainRunConfig
>>> from parq_optim.experiments import run_train
>>> run = run_train(TrainRunConfig(data="synthetic", bits=1, epochs=2), out="runs/t")  # doctest: +SKIP

The single training runs underneath are :class:`parq_optim.train.TrainConfig` (MLP/CNN) and
:class:`parq_optim.lm.LMConfig` (character LM); :meth:`TrainRunConfig.resolved` gives the settings a
``train`` run hands them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._contract import REQUIRED, ConfigError, check_config, param

if TYPE_CHECKING:
    from .data import Split

__all__ = [
    "CHARLM_ONLY",
    "DATA_NAMES",
    "MAX_BITS",
    "METHOD_NAMES",
    "OPTIMIZER_NAMES",
    "QUANTIZER_NAMES",
    "TRAIN_DATA_NAMES",
    "ConfigError",
    "DemoConfig",
    "ExportConfig",
    "TrainConfig",
    "TrainRunConfig",
]

MAX_BITS = 8
"""Largest bit width of a training run (``0`` = ternary); ``|Q| <= 256`` keeps codes in uint8."""
METHOD_NAMES = ("fp", "parq", "ste", "binaryrelax", "softquant")
OPTIMIZER_NAMES = ("sgd", "adamw")
# the keys of optim.QUANTIZERS (a test checks that the two agree)
QUANTIZER_NAMES = ("lsbq", "lsbq-optimal", "maxunif", "ternary", "unif")
DATA_NAMES = ("synthetic", "digits")
# mnist: $ICML25_DATA/mnist/raw (mlp/cnn); tinyshakespeare: $ICML25_DATA/tinyshakespeare/input.txt
TRAIN_DATA_NAMES = (*DATA_NAMES, "mnist", "tinyshakespeare")
TEXT_NAMES = ("tinyshakespeare",)
CHARLM_ONLY = ("steps", "context", "layers", "heads")
_MAX = 10**9  # "as many as you like" for counts that only need to be positive
_SEED = 2**31 - 1

# model-dependent defaults of the train fields left at None ("auto")
IMAGE_DEFAULTS: dict[str, Any] = {
    "hidden": 128,
    "epochs": 3,
    "batch_size": 64,
    "optimizer": "sgd",
    "weight_decay": 1e-4,
}
CHARLM_DEFAULTS: dict[str, Any] = {
    "hidden": 64,
    "batch_size": 32,
    "optimizer": "adamw",
    "weight_decay": 0.01,
    "steps": 1000,
    "context": 64,
    "layers": 2,
    "heads": 4,
}
DEFAULT_LR = {"sgd": 0.1, "adamw": 1e-3}
CHARLM_LR = {"sgd": 0.1, "adamw": 3e-3}

_QUANTIZER = (
    "level-set estimator: unif, maxunif (>= 2 bits), ternary (ternary only), lsbq (greedy "
    "least-squares binary), lsbq-optimal (exact, <= 2 bits)"
)


# fields the jobs share, declared once: _field(name) makes a fresh dataclass field from here
_SHARED: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "model": ("mlp", "mlp, or cnn for image data", {"choices": ("mlp", "cnn")}),
    "hidden": (
        16,
        "hidden width of the MLP (the CNN uses max(4, hidden/4) channels)",
        {"low": 1, "high": 65536},
    ),
    "batch_size": (64, "mini-batch size", {"low": 1, "high": _MAX}),
    "weight_decay": (
        1e-4,
        "weight decay of the quantized weights (biases: 0)",
        {"low": 0, "high": 100},
    ),
    "quantizer": ("lsbq", _QUANTIZER, {"choices": QUANTIZER_NAMES}),
    "per_channel": (False, "one level set per output channel (row) instead of per tensor", {}),
    "block_size": (
        None,
        "one level set per block of this many weights along each row; needs --per-channel and "
        "must divide every layer's input width",
        {"low": 1, "high": 65536, "none": "off"},
    ),
    "warmup_steps": (
        0,
        "full-precision optimizer steps before QAT starts",
        {"low": 0, "high": _MAX},
    ),
    "quant_period": (
        10,
        "recompute the level sets every this many QAT steps",
        {"low": 1, "high": _MAX},
    ),
    "steepness": (
        10.0,
        "steepness s of PARQ's inverse-slope schedule",
        {"low": 0, "low_open": True, "high": 1e6},
    ),
    "anneal_end_frac": (
        0.9,
        "the anneal window [warmup steps, frac * all steps) ends at this fraction",
        {"low": 0, "low_open": True, "high": 1},
    ),
    "device": ("cpu", "torch device", {"flag": False}),
}


def _field(name: str) -> Any:
    """A fresh dataclass field for the shared field ``name`` (declared in ``_SHARED``)."""
    default, doc, accepts = _SHARED[name]
    return param(default, doc, **accepts)


def _check_block_size(cfg: Any) -> None:
    if cfg.block_size is not None and not cfg.per_channel:
        raise ConfigError(
            "block_size",
            "block_size needs per_channel=True (--per-channel): without it one level set per "
            "tensor is used",
        )


@dataclass
class TrainConfig:
    """One MLP/CNN run (:func:`parq_optim.train.train`; defaults = the digits protocol of the
    package's benchmark). Building it checks nothing, so a checkpoint's or a sweep's config can be
    inspected first: :meth:`validate` checks every field and raises :class:`ConfigError` naming it.
    :class:`TrainRunConfig` (the ``train`` command) resolves to one of these."""

    method: str = param(
        "parq",
        "prox map: fp (full precision), parq, ste, binaryrelax, softquant",
        choices=METHOD_NAMES,
    )
    bits: int = param(1, "bits per quantized weight, 0 = ternary", low=0, high=MAX_BITS)
    quantizer: str = _field("quantizer")
    model: str = _field("model")
    hidden: int = _field("hidden")
    epochs: int = param(60, "training epochs", low=1, high=100_000)
    batch_size: int = _field("batch_size")
    optimizer: str = param("sgd", "base optimizer", choices=OPTIMIZER_NAMES)
    lr: float = param(
        0.1, "learning rate, cosine-annealed over all steps", low=0, low_open=True, high=1e6
    )
    momentum: float = param(0.9, "SGD momentum", low=0, high=1, high_open=True)
    weight_decay: float = _field("weight_decay")
    warmup_steps: int = _field("warmup_steps")
    quant_period: int = _field("quant_period")
    per_channel: bool = _field("per_channel")
    block_size: int | None = _field("block_size")
    steepness: float = _field("steepness")
    anneal_end_frac: float = _field("anneal_end_frac")
    seed: int = param(0, "random seed", low=0, high=_SEED)
    device: str = _field("device")

    def validate(self) -> None:
        """Raise :class:`ConfigError` (a ``ValueError``) for the first field that cannot be used."""
        check_config(self)
        _check_block_size(self)
        if self.method != "fp":
            from .optim import make_quantizer

            try:
                make_quantizer(self.quantizer).check_bits(self.bits)
            except (ValueError, NotImplementedError) as e:
                raise ConfigError("bits", f"quantizer {self.quantizer!r}: {e}") from e

    def check_data(self, data: Split) -> None:
        """Raise :class:`ConfigError` when the model or block size does not fit ``data``."""
        if self.model == "cnn" and data.image_shape is None:
            raise ConfigError(
                "model",
                f"model 'cnn' needs image data; {data.name or 'the data'} holds flat feature "
                "vectors (CSV or 2-D arrays): use model 'mlp'",
            )
        if self.block_size is not None and self.method != "fp":
            if self.model == "cnn":
                raise ConfigError(
                    "block_size", "block_size needs model 'mlp' (conv kernels are 4-D)"
                )
            dims = {"n_features": data.n_features, "hidden": self.hidden}
            bad = {k: v for k, v in dims.items() if v % self.block_size}
            if bad:
                raise ConfigError(
                    "block_size",
                    f"block_size {self.block_size} must divide the input width of every layer "
                    f"({', '.join(f'{k} = {v}' for k, v in bad.items())})",
                )


@dataclass
class DemoConfig:
    """``parq-optim demo``: full precision, STE, BinaryRelax and PARQ on a small model at 1 bit and
    ternary, over several seeds."""

    quick: bool = param(False, "30 epochs and 2 seeds instead of 60 and 3 (about 15 s on one core)")
    data: str = param(
        "synthetic",
        "synthetic (embedded, no download) or digits (needs scikit-learn, the [data] extra)",
        choices=DATA_NAMES,
    )
    seeds: int | None = param(
        None,
        "number of seeds, from --seed on (auto: 2 with --quick, else 3)",
        low=1,
        high=1000,
        none="auto",
    )
    model: str = _field("model")
    hidden: int = _field("hidden")
    epochs: int | None = param(
        None, "training epochs (auto: 60, 30 with --quick)", low=1, high=100_000, none="auto"
    )
    batch_size: int = _field("batch_size")
    optimizer: str = param(
        "sgd", "base optimizer: sgd (momentum 0.9) or adamw", choices=OPTIMIZER_NAMES
    )
    lr: float | None = param(
        None,
        "learning rate, cosine-annealed over all steps (auto: 0.1 for sgd, 1e-3 for adamw)",
        low=0,
        low_open=True,
        high=1e6,
        none="auto",
    )
    weight_decay: float = _field("weight_decay")
    quantizer: str = _field("quantizer")
    per_channel: bool = _field("per_channel")
    block_size: int | None = _field("block_size")
    warmup_steps: int = _field("warmup_steps")
    quant_period: int = _field("quant_period")
    steepness: float = _field("steepness")
    anneal_end_frac: float = _field("anneal_end_frac")
    seed: int = param(0, "first random seed", low=0, high=_SEED)
    device: str = _field("device")

    def __post_init__(self) -> None:
        check_config(self)
        _check_block_size(self)

    @property
    def n_epochs(self) -> int:
        """The epochs of each run (``epochs``, or 60 / 30 with ``quick``)."""
        return self.epochs or (30 if self.quick else 60)

    @property
    def seed_list(self) -> list[int]:
        """The seeds: ``seed``, ``seed + 1``, ... (``seeds`` of them, or 3 / 2 with ``quick``)."""
        return list(range(self.seed, self.seed + (self.seeds or (2 if self.quick else 3))))


@dataclass
class TrainRunConfig:
    """``parq-optim train``: one model, full precision or QAT (an MLP/CNN on image or tabular data, or
    a character-level transformer on a text file); fields left at None take the model's default."""

    data: str | Path = param(
        "synthetic",
        "mlp/cnn: a data folder (MNIST IDX files, .npz or *train*.csv + *test*.csv), synthetic, "
        "digits or mnist ($ICML25_DATA/mnist/raw); charlm: a UTF-8 text file (split 90:5:5 by position) or "
        "tinyshakespeare ($ICML25_DATA/tinyshakespeare/input.txt)",
        path="any",
        names=TRAIN_DATA_NAMES,
    )
    model: str = param(
        "mlp",
        "mlp, cnn (image data) or charlm (a character-level transformer LM on a text file)",
        choices=("mlp", "cnn", "charlm"),
    )
    prox: str = param(
        "parq",
        "prox map: parq, ste (hard quantization), binaryrelax, softquant (not charlm), "
        "or fp (full precision)",
        choices=METHOD_NAMES,
    )
    bits: int = param(
        2, f"bits per quantized weight, 0 = ternary, at most {MAX_BITS}", low=0, high=MAX_BITS
    )
    max_train: int | None = param(
        None, "mlp/cnn: stratified subsample of the train split", low=1, high=_MAX, none="all"
    )
    max_test: int | None = param(
        None, "mlp/cnn: stratified subsample of the test split", low=1, high=_MAX, none="all"
    )
    hidden: int | None = param(
        None,
        "hidden width of the MLP (the CNN uses max(4, hidden/4) channels), or d_model of "
        "charlm (auto: 128; 64 for charlm)",
        low=1,
        high=65536,
        none="auto",
    )
    epochs: int | None = param(
        None, "mlp/cnn: training epochs (auto: 3)", low=1, high=100_000, none="auto"
    )
    batch_size: int | None = param(
        None, "mini-batch size (auto: 64; 32 windows for charlm)", low=1, high=_MAX, none="auto"
    )
    optimizer: str | None = param(
        None,
        "base optimizer: sgd (momentum 0.9) or adamw (auto: sgd; adamw for charlm)",
        choices=OPTIMIZER_NAMES,
        none="auto",
    )
    lr: float | None = param(
        None,
        "learning rate, cosine-annealed (auto: 0.1 for sgd, 1e-3 for adamw; 3e-3 for charlm "
        "with adamw)",
        low=0,
        low_open=True,
        high=1e6,
        none="auto",
    )
    weight_decay: float | None = param(
        None,
        "weight decay of the quantized weights (auto: 1e-4; 0.01 for charlm)",
        low=0,
        high=100,
        none="auto",
    )
    quantizer: str = _field("quantizer")
    per_channel: bool = _field("per_channel")
    block_size: int | None = _field("block_size")
    warmup_steps: int = _field("warmup_steps")
    quant_period: int = _field("quant_period")
    steepness: float = _field("steepness")
    anneal_end_frac: float = _field("anneal_end_frac")
    steps: int | None = param(
        None, "charlm: optimizer steps (auto: 1000)", low=1, high=10**7, none="auto"
    )
    context: int | None = param(
        None, "charlm: characters per training window (auto: 64)", low=1, high=65536, none="auto"
    )
    layers: int | None = param(
        None, "charlm: transformer blocks (auto: 2)", low=1, high=1024, none="auto"
    )
    heads: int | None = param(
        None,
        "charlm: attention heads, a divisor of hidden (auto: 4)",
        low=1,
        high=1024,
        none="auto",
    )
    seed: int = param(0, "random seed", low=0, high=_SEED)
    device: str = _field("device")

    def __post_init__(self) -> None:
        check_config(self)
        _check_block_size(self)
        data = str(self.data)
        is_text = data in TEXT_NAMES or (
            data not in TRAIN_DATA_NAMES and not Path(self.data).is_dir()
        )
        if self.model == "charlm":
            for name in ("epochs", "max_train", "max_test"):
                if getattr(self, name) is not None:
                    raise ConfigError(
                        name,
                        f"{name} is for model mlp or cnn; charlm trains for --steps optimizer "
                        "steps on the whole text",
                    )
            if not is_text:
                raise ConfigError(
                    "data",
                    f"model charlm reads one UTF-8 text file, got {data}: pass a text file or "
                    "tinyshakespeare",
                )
        else:
            for name in CHARLM_ONLY:
                if getattr(self, name) is not None:
                    raise ConfigError(name, f"{name} is for --model charlm, not {self.model}")
            if is_text:
                raise ConfigError(
                    "data",
                    f"model {self.model} reads a folder (IDX, NPZ or CSV files), synthetic, digits "
                    f"or mnist, got {Path(data).name} (a text file is for --model charlm)",
                )

    def resolved(self) -> dict[str, Any]:
        """Every field, with those left at None ("auto") set to the model's default."""
        values = {k: getattr(self, k) for k in self.__dataclass_fields__}
        charlm = self.model == "charlm"
        for name, value in (CHARLM_DEFAULTS if charlm else IMAGE_DEFAULTS).items():
            if values[name] is None:
                values[name] = value
        if values["lr"] is None:
            values["lr"] = (CHARLM_LR if charlm else DEFAULT_LR)[values["optimizer"]]
        return values


@dataclass
class ExportConfig:
    """``parq-optim export``: a trained checkpoint as level tables + bit-packed integer codes."""

    checkpoint: str | Path = param(
        REQUIRED, "checkpoint.pt written by 'parq-optim train'", path="file"
    )
    seed: int = param(0, "random seed (unused: export is deterministic)", low=0, high=_SEED)
    device: str = param("cpu", "torch device (export runs on CPU)", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
