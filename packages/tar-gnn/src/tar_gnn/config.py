"""Configurations of the package's jobs (``train``, ``evaluate``, ``split``, ``demo``).

Each field carries its default, a one-line doc and the values it accepts (:func:`param`); the config
checks them when it is built (a :class:`ConfigError` names the field) and the command line makes one
flag per field from the same declaration. The job configs are built from parts, so a Python call takes
the same flat keywords as the command line::

    from tar_gnn import TrainRunConfig, run_train

    result = run_train(TrainRunConfig(dataset="csbm", epochs=50, beta=0.3, baselines=("erm",)))

Parts: :class:`DataConfig` (which graph), :class:`ShiftConfig` (which GOOD-protocol split),
:class:`TrainConfig` (model and optimisation; also what :func:`~tar_gnn.train_node_classifier` takes),
:class:`TARConfig` (the TAR reweighter) and :class:`BaselineConfig`. Standard library only: building
the command line does not import torch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ._contract import REQUIRED, ConfigError, check_config, param

__all__ = [
    "ARCH_NAMES",
    "DATASETS",
    "GOOD_NAMES",
    "METHOD_NAMES",
    "BaselineConfig",
    "ConfigError",
    "DataConfig",
    "DemoConfig",
    "EvaluateConfig",
    "ShiftConfig",
    "SplitConfig",
    "TARConfig",
    "TrainConfig",
    "TrainRunConfig",
    "named_data_path",
]

DATASETS = ("csbm", "cora", "citeseer", "pubmed", "planetoid", "good", "file")
PLANETOID = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
GOOD_NAMES = ("GOODCora", "GOODCBAS", "GOODTwitch", "GOODWebKB", "GOODArxiv")
# The names of methods.METHODS, flow.SCHEMES/EXCEED and models.ARCHS (a test checks they agree).
METHOD_NAMES = ("erm", "tar", "irm", "vrex", "groupdro", "kldro", "cvar", "cbe")
ENV_METHODS = ("irm", "vrex", "groupdro")
ARCH_NAMES = ("gcn", "gin", "sage")
SCHEME_NAMES = ("upwind", "arithmetic", "logmean")
_SEED = 2**31 - 1
_BIG = 1e5  # "large" for penalty weights and step sizes: far beyond any useful value
_DOMAIN = re.compile(r"degree|word|norm|time|attr:\w+")
_GRAPH = re.compile(r"induced|complete|none|(khop|knn)(:[1-9]\d{0,5})?")


def named_data_path(dataset: str) -> Path | None:
    """``$ICML25_DATA/planetoid/<Name>`` for cora/citeseer/pubmed when that folder exists, else None."""
    root = os.environ.get("ICML25_DATA")
    if dataset not in PLANETOID or not root:
        return None
    path = Path(root).expanduser() / "planetoid" / PLANETOID[dataset]
    return path if path.is_dir() else None


def _own(cfg: Any, cls: type) -> dict[str, Any]:
    """The values of ``cls``'s fields held by ``cfg`` (a job config built from ``cls``)."""
    return {f.name: getattr(cfg, f.name) for f in fields(cls)}


@dataclass(kw_only=True)
class DataConfig:
    """Which graph: the embedded contextual SBM, a Planetoid folder, GOOD's files or a graph file."""

    dataset: str = param(
        "csbm",
        "csbm (embedded synthetic contextual SBM), cora/citeseer/pubmed/planetoid (a Planetoid-format "
        "folder), good (GOOD processed files) or file (a .npz/.pt graph)",
        choices=DATASETS,
    )
    data: str | Path | None = param(
        None,
        "the Planetoid folder (raw/ind.<name>.* or <Name>/raw), the GOOD root or the .npz/.pt file "
        "(none: cora/citeseer/pubmed are read from $ICML25_DATA/planetoid/<Name>)",
        path="any",
        none="none",
    )
    good_name: str = param("GOODCora", "GOOD dataset name for dataset good", choices=GOOD_NAMES)
    n_nodes: int = param(2000, "number of nodes of the csbm graph", low=50, high=1_000_000)
    split_seed: int = param(0, "seed of the split and of the csbm graph", low=0, high=_SEED)

    def __post_init__(self) -> None:
        check_config(self)
        self.check_data()

    def check_data(self) -> None:
        """A path for every dataset but csbm: the given one, or the named one under $ICML25_DATA."""
        if self.dataset == "csbm":
            if self.data is not None:
                raise ConfigError("data", "dataset csbm is generated; drop data")
            return
        if self.data is None:
            self.data = named_data_path(self.dataset)
        if self.data is None:
            hint = (
                f", or set ICML25_DATA to a folder holding planetoid/{PLANETOID[self.dataset]}"
                if self.dataset in PLANETOID
                else ""
            )
            raise ConfigError("data", f"dataset {self.dataset} needs data PATH{hint}")


@dataclass(kw_only=True)
class ShiftConfig:
    """Which GOOD-protocol shift split is built (unless the data or a split file supplies masks)."""

    shift: str = param(
        "concept",
        "covariate or concept shift by domain, a class-imbalanced split, or given (the masks the "
        "data holds: GOOD files, a .npz with masks)",
        choices=("covariate", "concept", "imbalance", "given"),
    )
    domain: str = param(
        "degree",
        "domain variable: degree, word (row sum of the features), norm (L2 norm of the features), "
        "time (data.node_year) or attr:<name>",
    )
    domain_file: str | Path | None = param(
        None, "a .npy/.txt/.csv of one domain value per node; replaces domain", path="file"
    )
    order: str = param(
        "descending",
        "covariate shift: train on the largest (GOOD's Cora) or smallest domain values",
        choices=("descending", "ascending"),
    )
    split_fallback: str = param(
        "nearest",
        "covariate shift, when GOOD's cut leaves a split empty (ties): cut at the nearest value "
        "changes that fill every split, cut inside the tied values, or stop with an error",
        choices=("nearest", "within", "error"),
    )
    num_envs: int = param(10, "covariate shift: number of training environments", low=1, high=1000)
    label_stat: str = param(
        "class_index",
        "concept shift: label statistic, GOOD's class index or a seeded balanced class partition",
        choices=("class_index", "class_group"),
    )

    def __post_init__(self) -> None:
        check_config(self)
        self.check_shift()

    def check_shift(self) -> None:
        if not _DOMAIN.fullmatch(self.domain):
            raise ConfigError(
                "domain",
                f"domain={self.domain!r}: expected degree, word, norm, time or attr:<name>",
            )

    def csbm_mode(self) -> str:
        """The csbm generator's shift for this split."""
        if self.shift == "covariate":
            return "degree" if self.domain == "degree" else "covariate"
        return "concept"


@dataclass(kw_only=True)
class TrainConfig:
    """Model and optimisation; GOOD's node-task defaults: 3-layer GCN, width 300, dropout 0.5, Adam
    lr 1e-3, 100 epochs."""

    epochs: int | None = param(
        None,
        "training epochs (auto: 100, GOOD's; 200 when run_train trains on csbm)",
        low=1,
        high=100_000,
        none="auto",
    )
    lr: float = param(1e-3, "Adam learning rate", low=0, low_open=True, high=10)
    weight_decay: float = param(0.0, "Adam weight decay", low=0, high=10)
    hidden: int = param(300, "hidden width", low=1, high=65536)
    layers: int = param(3, "graph convolutions", low=1, high=64)
    dropout: float = param(0.5, "dropout", low=0, high=1, high_open=True)
    arch: str = param("gcn", "convolution", choices=ARCH_NAMES)
    milestones: tuple[int, ...] = param(
        (150,), "epochs at which the lr is multiplied by gamma", low=1, high=100_000, flag=False
    )
    gamma: float = param(
        0.1, "lr decay at each milestone", low=0, low_open=True, high=1, flag=False
    )
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)

    def train_config(self, epochs: int | None = None) -> TrainConfig:
        """This config's model and optimisation part alone (``epochs`` replaces auto)."""
        values = _own(self, TrainConfig)
        values["epochs"] = values["epochs"] if values["epochs"] is not None else epochs
        return TrainConfig(**values)

    @property
    def n_epochs(self) -> int:
        return self.epochs if self.epochs is not None else 100


@dataclass(kw_only=True)
class TARConfig:
    """The TAR reweighter (the paper's values are unknown: all exposed)."""

    beta: float = param(0.1, "entropy coefficient", low=0, high=1000)
    steps: int = param(20, "T_in, inner flow steps", low=0, high=100_000)
    step_size: float = param(
        1.0, "tau, the requested step, capped at cfl times the step-size bound", low=0, high=_BIG
    )
    scheme: str = param("upwind", "mobility", choices=SCHEME_NAMES)
    transport_graph: str = param(
        "induced", "G0: induced, khop:<h>, knn:<k> (GDRO-style), complete or none"
    )
    edge_weight: str = param("unit", "w_ij on G0", choices=("unit", "sym_norm"))
    warm_start: bool = param(False, "start each flow from the previous q instead of uniform")
    flow_every: int = param(1, "run the flow every k epochs", low=1, high=100_000)
    cfl: float | None = param(
        0.9,
        "cap each step at cfl times the step-size bound (off: use step_size unchecked, warning "
        "when a weight goes negative)",
        low=0,
        low_open=True,
        high=1,
        none="off",
    )
    on_exceed: str = param(
        "cap",
        "a step above the bound is capped globally, an error, or limited per donor node",
        choices=("cap", "raise", "limit"),
    )
    uniform_mix: float = param(
        0.0, "q <- (1 - a) q + a / n after the flow", low=0, high=1, high_open=True
    )
    flow_loss: str = param(
        "train",
        "losses fed to the flow: the training forward or a no-dropout one",
        choices=("train", "eval"),
    )
    knn_space: str = param(
        "features", "space of the knn transport graph", choices=("features", "embedding")
    )

    def __post_init__(self) -> None:
        check_config(self)
        self.check_tar()

    def check_tar(self) -> None:
        if not _GRAPH.fullmatch(self.transport_graph):
            raise ConfigError(
                "transport_graph",
                f"transport_graph={self.transport_graph!r}: expected induced, khop:<h>, knn:<k> "
                "(h, k from 1 to 999999), complete or none",
            )

    def tar_options(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~tar_gnn.TAR`."""
        return _own(self, TARConfig)


@dataclass(kw_only=True)
class BaselineConfig:
    """Options of the baselines."""

    irm_lambda: float = param(1.0, "IRM penalty weight", low=0, high=_BIG)
    vrex_lambda: float = param(10.0, "V-REx penalty weight", low=0, high=_BIG)
    groupdro_eta: float = param(0.1, "GroupDRO step size eta", low=0, high=1000)
    groupdro_mode: str = param(
        "good",
        "GroupDRO weights: GOOD's per-step softmax or persistent",
        choices=("good", "online"),
    )
    kldro_beta: float = param(1.0, "KL-DRO temperature", low=0, low_open=True, high=1000)
    cvar_alpha: float = param(0.2, "CVaR fraction", low=0, low_open=True, high=1)

    def __post_init__(self) -> None:
        check_config(self)

    def method_options(self, name: str) -> dict[str, Any]:
        """The keyword arguments of baseline ``name``."""
        options: dict[str, dict[str, Any]] = {
            "irm": {"lam": self.irm_lambda},
            "vrex": {"lam": self.vrex_lambda},
            "groupdro": {"eta": self.groupdro_eta, "mode": self.groupdro_mode},
            "kldro": {"beta": self.kldro_beta},
            "cvar": {"alpha": self.cvar_alpha},
        }
        return options.get(name, {})


@dataclass(kw_only=True)
class TrainRunConfig(BaselineConfig, TARConfig, TrainConfig, ShiftConfig, DataConfig):
    """``tar-gnn train``: a method (and baselines beside it) on a shift split, over seeds."""

    split: str | Path | None = param(
        None, "a split .npz written by 'tar-gnn split' (replaces shift)", path="file"
    )
    method: str = param("tar", "the method to train", choices=METHOD_NAMES)
    baselines: tuple[str, ...] = param(
        ("erm",), "methods trained beside it under the same loop, or none", choices=("none",
        *METHOD_NAMES),
    )  # fmt: skip
    seeds: int = param(1, "number of seeds: seed, seed+1, ...", low=1, high=1000)
    seed: int = param(0, "first random seed", low=0, high=_SEED)

    def __post_init__(self) -> None:
        check_config(self)
        self.check_data()
        self.check_shift()
        self.check_tar()

    @property
    def methods(self) -> list[str]:
        """The method, then the baselines (none and repeats dropped)."""
        extra = [b for b in dict.fromkeys(self.baselines) if b not in ("none", self.method)]
        return [self.method, *extra]

    @property
    def n_epochs(self) -> int:
        return self.epochs if self.epochs is not None else (200 if self.dataset == "csbm" else 100)


@dataclass(kw_only=True)
class SplitConfig(ShiftConfig, DataConfig):
    """``tar-gnn split``: GOOD-protocol shift masks for a dataset."""

    def __post_init__(self) -> None:
        check_config(self)
        self.check_data()
        self.check_shift()


@dataclass(kw_only=True)
class EvaluateConfig(DataConfig):
    """``tar-gnn evaluate``: a trained model.pt on every mask (the checkpoint's, or a split file's)."""

    checkpoint: str | Path = param(
        REQUIRED,
        "model.pt written by 'tar-gnn train' (it holds the masks it was trained on)",
        path="file",
    )
    split: str | Path | None = param(
        None, "evaluate on a split .npz instead of the checkpoint's masks", path="file"
    )
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
        self.check_data()


@dataclass(kw_only=True)
class DemoConfig:
    """``tar-gnn demo``: TAR vs ERM and the DRO/invariance baselines on the embedded concept shift."""

    quick: bool = param(
        False, "600 nodes, 100 epochs, 2 seeds (under a minute) instead of 2000, 200, 3"
    )
    seed: int = param(0, "first random seed (and the graph's)", low=0, high=_SEED)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
