"""Configurations of the package's three jobs (``demo``, ``train``, ``evaluate``).

Each field carries its default, a one-line doc and the values it accepts; :func:`check_config` checks
them when the config is built (a :class:`ConfigError` names the field), and the command line makes one
flag per field from the same declaration. Standard library only: building the CLI does not import
torch.

>>> from sassha_optim.config import TrainConfig
>>> from sassha_optim.experiments import run_train
>>> result = run_train(TrainConfig(data="synthetic", epochs=2, lr=0.1))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ._contract import REQUIRED, ConfigError, check_config, param

__all__ = [
    "DATA_NAMES",
    "OPTIMIZER_NAMES",
    "SASSHA_ONLY",
    "ConfigError",
    "DemoConfig",
    "EvaluateConfig",
    "TrainConfig",
]

DATA_NAMES = ("digits", "synthetic", "mnist")  # mnist: $ICML25_DATA/mnist/raw
# The presets of training.OPTIMIZERS (a test checks that the two agree).
OPTIMIZER_NAMES = (
    "sgd",
    "adamw",
    "sam",
    "adahessian",
    "sophia-h",
    "sassha",
    "sassha-k1",
    "sassha-rho0",
    "sassha-official",
)
SASSHA_ONLY = ("lazy_hessian", "hessian_warmup", "hessian_power", "bias_correction", "hvp_point")
_DATA = (
    "the data: a folder of IDX (MNIST's layout), NPZ or CSV files, a built-in set, or mnist "
    "(the IDX files in $ICML25_DATA/mnist/raw)"
)
_MAX = 10**9  # "as many as you like" for counts that only need to be positive


@dataclass
class DemoConfig:
    """``sassha-optim demo``: an MLP trained with several optimizer presets over several seeds."""

    data: str | Path = param(
        "auto", f"{_DATA} (auto: digits if scikit-learn is installed, else synthetic)", path="dir",
        names=("auto", *DATA_NAMES),
    )  # fmt: skip
    optimizers: tuple[str, ...] = param(
        ("sassha", "adamw", "sam"), "optimizer presets to compare", choices=OPTIMIZER_NAMES
    )
    seeds: int = param(3, "number of seeds: seed, seed+1, ...", low=1, high=1000)
    epochs: int = param(60, "training epochs", low=1, high=100_000)
    batch_size: int = param(64, "minibatch size", low=1, high=_MAX)
    hidden: tuple[int, ...] = param((128, 128), "hidden layer widths of the MLP", low=1, high=65536)
    sharpness: bool = param(True, "also compute λ_max of the training-loss Hessian")
    threads: int = param(
        1, "torch CPU threads (the small MLPs run fastest on one)", low=1, high=1024
    )
    seed: int = param(0, "first random seed", low=0, high=2**31 - 1)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class TrainConfig:
    """``sassha-optim train``: one MLP trained with one optimizer preset (flags override the preset)."""

    data: str | Path = param(REQUIRED, _DATA, path="dir", names=DATA_NAMES)
    optimizer: str = param("sassha", "optimizer preset", choices=OPTIMIZER_NAMES)
    max_train: int | None = param(
        None, "stratified subsample of the training set", low=1, high=_MAX, none="all"
    )
    max_test: int | None = param(
        None, "stratified subsample of the test set", low=1, high=_MAX, none="all"
    )
    lr: float | None = param(
        None, "learning rate", low=0, low_open=True, high=10, none="preset"
    )  # fmt: skip
    rho: float | None = param(
        None, "SAM radius (sam and sassha presets)", low=0, high=10, none="preset"
    )
    lazy_hessian: int | None = param(
        None, "Hessian refresh interval k (sassha presets)", low=1, high=100_000, none="preset"
    )
    hessian_warmup: int | None = param(
        None,
        "refresh the Hessian on each of the first N steps, then every k; 0 = the official schedule "
        "(sassha presets)",
        low=0,
        high=_MAX,
        none="preset",
    )
    hessian_power: float | None = param(
        None, "Hessian power α (sassha presets)", low=0, high=1, none="preset"
    )
    weight_decay: float | None = param(
        None, "weight decay as passed to the optimizer", low=0, high=10, none="preset"
    )
    bias_correction: str | None = param(
        None, "bias correction of D (sassha presets)", choices=("refresh", "step", "none"),
        none="preset",
    )  # fmt: skip
    hvp_point: str | None = param(
        None, "where Sassha evaluates the HVP (sassha presets)", choices=("perturbed", "reference"),
        none="preset",
    )  # fmt: skip
    epochs: int = param(5, "training epochs", low=1, high=100_000)
    batch_size: int = param(64, "minibatch size", low=1, high=_MAX)
    hidden: tuple[int, ...] = param((128, 128), "hidden layer widths of the MLP", low=1, high=65536)
    threads: int = param(
        1, "torch CPU threads (the small MLPs run fastest on one)", low=1, high=1024
    )
    seed: int = param(0, "random seed", low=0, high=2**31 - 1)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
        if self.optimizer.startswith("sassha"):
            return
        for name in self.overrides():
            if name in SASSHA_ONLY or (name == "rho" and self.optimizer != "sam"):
                needs = "a sassha preset" if name in SASSHA_ONLY else "sam or a sassha preset"
                raise ConfigError(
                    name, f"{name} does not apply to {self.optimizer}; it needs {needs}"
                )

    def overrides(self) -> dict[str, object]:
        """The optimizer settings given explicitly (the rest come from the preset)."""
        names = ("lr", "rho", "weight_decay", *SASSHA_ONLY)
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


@dataclass
class EvaluateConfig:
    """``sassha-optim evaluate``: test metrics (and optionally sharpness) of a saved checkpoint."""

    checkpoint: str | Path = param(
        REQUIRED, "checkpoint.pt written by 'sassha-optim train'", path="file"
    )
    data: str | Path | None = param(
        None, _DATA, path="dir", names=DATA_NAMES, none="checkpoint"
    )  # fmt: skip
    sharpness: bool = param(False, "also compute λ_max and tr(H) on up to 2,000 training samples")
    threads: int = param(1, "torch CPU threads", low=1, high=1024)
    seed: int = param(0, "random seed of the sharpness estimates", low=0, high=2**31 - 1)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
