"""Configurations of the package's three jobs (``train``, ``demo``, ``evaluate``).

Each field carries its default, a one-line doc and the values it accepts; :func:`check_config` checks
them when the config is built (a :class:`ConfigError` names the field), and the command line makes one
flag per field from the same declaration. Standard library only: building the CLI does not import
torch, PyG or wntr.

>>> from phynfp.config import TrainRunConfig
>>> from phynfp.jobs import run_train
>>> result = run_train(TrainRunConfig(nodes=12, hours=1500, epochs=2))  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ._contract import REQUIRED, ConfigError, check_config, param

__all__ = [
    "CHECKPOINT_FORMAT",
    "DATASET_KINDS",
    "MODEL_NAMES",
    "NETWORKS",
    "QUICK",
    "ConfigError",
    "DemoConfig",
    "EvaluateConfig",
    "TrainRunConfig",
    "parse_dataset",
    "resolve_dataset",
]

# The same tuples as phynfp.models.MODEL_NAMES and phynfp.wdn.NETWORKS (a test checks that they agree).
MODEL_NAMES = ("persistence", "climatology", "mlp", "gcn", "gat", "sage", "dirgnn", "phynfp")
NETWORKS = ("Net1", "Net2", "Net3", "ky4", "ky10", "Net6")
DATASET_KINDS = ("river-synth", "wntr:<network>", "metr-la:<dir>", "lamah:<dir>")
CHECKPOINT_FORMAT = "phynfp-checkpoint-1"
# demo --quick: a small river, a short budget, six models
QUICK = {"nodes": 24, "hours": 8760, "epochs": 4, "max_batches": 12}
QUICK_MODELS = ("persistence", "climatology", "mlp", "gcn", "dirgnn", "phynfp")
METR_LA = "traffic_la_bay"  # metr-la without a folder: $ICML25_DATA/traffic_la_bay

DATASET_HELP = (
    "river-synth (embedded synthetic river tree), wntr:<network> (an EPANET network shipped with wntr: "
    "Net1, Net2, Net3, ky4, ky10, Net6, or a .inp path), metr-la:<dir> (adj_mx.pkl + los_speed.csv; "
    "metr-la alone: $ICML25_DATA/traffic_la_bay) or lamah:<dir> (a LamaH-CE folder)"
)
_MAX = 10**9  # "as many as you like" for counts that only need to be positive
_SEED_MAX = 2**32 - 1


def parse_dataset(text: str) -> tuple[str, str | None]:
    """``"river-synth"`` → ("river-synth", None); ``"wntr:Net3"`` → ("wntr", "Net3"); ``"metr-la:DIR"``,
    ``"lamah:DIR"`` → (kind, DIR); ``"metr-la"`` → ("metr-la", None) (the shared data folder). Raises
    ValueError on anything else (without touching the disk)."""
    if text in ("river-synth", "metr-la"):
        return text, None
    kind, sep, rest = text.partition(":")
    if sep and kind in ("wntr", "metr-la", "lamah") and rest:
        return kind, rest
    raise ValueError(f"unknown dataset {text!r}; expected one of {', '.join(DATASET_KINDS)}")


def resolve_dataset(text: str, field: str = "dataset") -> str:
    """``text`` checked against the disk (folders exist, networks are known) with ``metr-la`` alone
    resolved to ``metr-la:$ICML25_DATA/traffic_la_bay``; :class:`ConfigError` naming ``field`` else."""
    try:
        kind, arg = parse_dataset(text)
    except ValueError as exc:
        raise ConfigError(field, str(exc)) from None
    if kind == "metr-la" and arg is None:
        root = os.environ.get("ICML25_DATA")
        if not root:
            raise ConfigError(
                field,
                "metr-la without a folder reads $ICML25_DATA/traffic_la_bay, but ICML25_DATA is not "
                "set: set it to the shared data folder or pass metr-la:<dir>",
            )
        arg = str(Path(root).expanduser() / METR_LA)
        text = f"metr-la:{arg}"
    if kind in ("metr-la", "lamah") and not Path(str(arg)).expanduser().is_dir():
        raise ConfigError(field, f"{field}={text!r}: {arg} is not an existing folder")
    if kind == "wntr" and arg not in NETWORKS:
        if not (str(arg).lower().endswith(".inp") and Path(str(arg)).is_file()):
            raise ConfigError(
                field,
                f"{field}={text!r}: {arg} is neither {', '.join(NETWORKS)} nor an existing .inp file",
            )
    return text


@dataclass
class _RunFields:
    """The data, model and training fields ``train`` and ``demo`` share."""

    nodes: int = param(64, "river-synth: number of nodes", low=2, high=100_000)
    hours: int | None = param(
        None, "river-synth: simulated hours (auto: 8760); wntr: hours per scenario (auto: 168)",
        low=1, high=1_000_000, none="auto",
    )  # fmt: skip
    routing: str = param("muskingum", "river-synth channel routing", choices=("muskingum", "lag"))
    scenarios: int = param(24, "wntr: demand scenarios", low=3, high=100_000)
    data_seed: int = param(0, "seed of the generated data", low=0, high=_SEED_MAX)
    train_stride: int = param(1, "step between training windows", low=1, high=1_000_000)
    cache_dir: str | None = param(
        None,
        "folder for cached simulations (auto: $PHYNFP_CACHE, else ~/.cache/phynfp)",
        none="auto",
    )
    models: tuple[str, ...] | None = param(
        None, "models to train, comma-separated (all: every model)", choices=MODEL_NAMES, none="all"
    )
    hidden: int = param(
        32, "hidden width H (CPU preset; the paper's code uses 128)", low=1, high=65_536
    )
    layers: int | None = param(
        None,
        "depth L of every model (auto: the longest directed path, capped at --max-layers; graphs with "
        "cycles use --max-layers)",
        low=1, high=10_000, none="auto",
    )  # fmt: skip
    max_layers: int = param(16, "cap of --layers auto", low=1, high=10_000)
    preset: str = param(
        "default",
        "PhyNFP settings: default (paper-form operators) or official (the official code's operators "
        "and headwater reverse edges; needs an integer --layers)",
        choices=("default", "official"),
    )
    mode: str | None = param(
        None, "difference operator (preset: upwind, or code for --preset official)",
        choices=("upwind", "code", "central"), none="preset",
    )  # fmt: skip
    orientation: str = param(
        "downstream", "which neighbours PhyNFP's operators use",
        choices=("downstream", "upstream", "bidirectional"),
    )  # fmt: skip
    physics: str = param(
        "saint_venant", "layer update: saint_venant (paper) or aw_rascle (experimental traffic variant)",
        choices=("saint_venant", "aw_rascle"),
    )  # fmt: skip
    clamp: float | None = param(
        10.0, "clamp bound of the update", low=0, low_open=True, high=1e6, none="off"
    )
    param_sharing: bool = param(False, "one PhyNFP layer reused L times")
    epochs: int = param(20, "epochs (the paper's code: 200)", low=1, high=100_000)
    batch_size: int = param(32, "windows per batch", low=1, high=_MAX)
    lr: float = param(1e-3, "Adam learning rate", low=0, low_open=True, high=10)
    weight_decay: float = param(1e-5, "Adam weight decay", low=0, high=10)
    clip: float | None = param(
        1.0, "gradient-norm clip", low=0, low_open=True, high=1e6, none="off"
    )
    accumulate: int = param(1, "gradient accumulation steps (official: 4)", low=1, high=10_000)
    max_batches: int | None = param(
        None, "training batches per epoch, a random subset", low=1, high=_MAX, none="all"
    )
    physics_loss_weight: float = param(
        0.0, "weight of a penalty on negative de-normalised predictions (not the paper's)",
        low=0, high=1e6,
    )  # fmt: skip
    num_seeds: int = param(1, "seeds --seed, --seed+1, ...", low=1, high=1000)
    reverse: bool = param(True, "also train every learned model on reversed edges (G_train)")
    delta: float = param(0.5, "perturbation size δ in z-units", low=0, low_open=True, high=1e3)
    threads: int | None = param(
        1, "torch CPU threads; 1 is fastest for these small graphs on shared CPUs (auto: torch's)",
        low=1, high=1024, none="auto",
    )  # fmt: skip
    seed: int = param(0, "first random seed", low=0, high=_SEED_MAX)
    device: str = param("cpu", "torch device", flag=False)

    def _check_official(self) -> None:
        if self.preset == "official" and self.layers is None:
            raise ConfigError(
                "layers",
                "--preset official adds headwater reverse edges (2-cycles), so the longest path is "
                "undefined: pass an integer, e.g. --layers 15 (the official code sweeps 15, 19, 23, 27)",
            )


@dataclass
class TrainRunConfig(_RunFields):
    """``phynfp train``: PhyNFP and the baselines on one dataset, on forward and reversed edges."""

    dataset: str = param("river-synth", DATASET_HELP)

    def __post_init__(self) -> None:
        check_config(self)
        self.dataset = resolve_dataset(self.dataset)
        self._check_official()


@dataclass
class DemoConfig(_RunFields):
    """``phynfp demo``: the train job on the embedded river-synth data (simulated in memory)."""

    cache_dir: str | None = param(
        None, "folder for cached simulations (none: simulated in memory)", none="none"
    )
    epochs: int = param(10, "epochs (the paper's code: 200)", low=1, high=100_000)
    max_batches: int | None = param(
        20, "training batches per epoch, a random subset", low=1, high=_MAX, none="all"
    )
    quick: bool = param(
        False,
        f"a {QUICK['nodes']}-node, {QUICK['hours']}-hour river, {QUICK['epochs']} epochs of "
        f"{QUICK['max_batches']} batches, six models (off: the sizes the other fields give)",
    )

    def __post_init__(self) -> None:
        check_config(self)
        self._check_official()


@dataclass
class EvaluateConfig:
    """``phynfp evaluate``: a PhyNFP checkpoint's test error, error on reversed edges and leakage."""

    checkpoint: str | Path = param(REQUIRED, "model.pt written by phynfp train", path="file")
    dataset: str | None = param(None, DATASET_HELP, none="checkpoint")
    delta: float = param(0.5, "perturbation size δ in z-units", low=0, low_open=True, high=1e3)
    cache_dir: str | None = param(
        None,
        "folder for cached simulations (auto: $PHYNFP_CACHE, else ~/.cache/phynfp)",
        none="auto",
    )
    threads: int | None = param(
        1, "torch CPU threads (auto: torch's)", low=1, high=1024, none="auto"
    )
    seed: int = param(0, "random seed", low=0, high=_SEED_MAX)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
        if self.dataset is not None:
            self.dataset = resolve_dataset(self.dataset)
