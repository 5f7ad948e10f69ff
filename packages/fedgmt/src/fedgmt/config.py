"""Run configuration: the :class:`FedConfig` dataclass with validation.

Keys are the options of the official FL-SAM code where it has them (``gamma``, ``tau``, ``ema_alpha``,
``beta``...). In a Flower ``run_config`` the same keys are written with hyphens (``ema-alpha``); :meth:`FedConfig.from_run_config` / :meth:`FedConfig.to_run_config` convert.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any

METHODS = ("fedgmt", "fedgmt-kl", "fedavg", "fedsam", "feddyn", "scaffold", "fedspeed")
"""Supported methods. ``fedgmt-kl`` is FedGMT with the dual off (beta = inf)."""
DATASETS = ("digits", "mnist", "agnews", "synthetic")
PARTITIONS = ("dirichlet", "iid", "shards")
SAM_METHODS = ("fedsam", "fedspeed")
DUAL_METHODS = ("fedgmt", "feddyn", "fedspeed")


@dataclass
class FedConfig:
    """Configuration of one federated run (defaults: the embedded scikit-learn digits setup).

    Every field is validated by :meth:`validate` (called in ``__post_init__``); a bad value raises
    ``ValueError`` naming the field, the value and what is accepted.
    """

    # what
    method: str = "fedgmt"
    dataset: str = "digits"
    data_dir: str | None = None
    model: str = "auto"
    max_train_samples: int | None = None
    # federation
    num_clients: int = 20
    fraction_train: float = 0.25
    num_rounds: int = 60
    partition: str = "dirichlet"
    dirichlet_alpha: float = 0.1
    shards_per_client: int = 2
    min_partition_size: int = 10
    self_balancing: bool = False
    partition_seed: int = 0
    seed: int = 0
    # local optimiser (torch SGD semantics)
    lr: float = 0.01
    lr_decay: float = 0.998
    momentum: float = 0.9
    weight_decay: float = 1e-5
    batch_size: int = 16
    local_epochs: int = 5
    # FedGMT: KL to the EMA teacher (gamma, tau, ema_alpha) and the dual h_i / beta
    gamma: float = 1.0
    tau: float = 3.0
    ema_alpha: float = 0.95
    beta: float = 10.0
    dual_average: str = "all"
    ema_location: str = "server"
    prox: float = 0.0
    teacher_mode: str = "eval"
    aggregation_weights: str = "samples"
    # baselines
    rho: float = 0.05
    server_lr: float = 1.0
    # guard
    allow_unstable: bool = False
    on_divergence: str = "stop"
    # differential privacy (Opacus, extra [dp])
    dp: bool = False
    dp_noise: float = 1.0
    dp_clip: float = 1.0
    dp_delta: float = 1e-5
    # misc
    client_threads: int = 1
    last_k: int = 10

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ``ValueError`` naming the first invalid field."""

        def bad(name: str, accepted: str) -> ValueError:
            return ValueError(f"invalid {name}={getattr(self, name)!r}: expected {accepted}")

        def choice(name: str, options: tuple[str, ...]) -> None:
            if getattr(self, name) not in options:
                raise bad(name, "one of " + ", ".join(options))

        choice("method", METHODS)
        choice("dataset", DATASETS)
        choice("partition", PARTITIONS)
        choice("model", ("auto", "mlp", "cnn"))
        choice("dual_average", ("all", "active"))
        choice("ema_location", ("server", "client"))
        choice("teacher_mode", ("eval", "train"))
        choice("aggregation_weights", ("samples", "uniform"))
        choice("on_divergence", ("stop", "raise", "warn"))
        if self.model == "cnn" and self.dataset != "mnist":
            raise bad("model", "auto or mlp for this dataset (the CNN takes 28x28 MNIST images)")
        for name in ("num_clients", "num_rounds", "batch_size", "local_epochs", "client_threads"):
            if int(getattr(self, name)) < 1:
                raise bad(name, "an integer >= 1")
        if self.min_partition_size < 1:
            raise bad("min_partition_size", "an integer >= 1")
        if self.shards_per_client < 1:
            raise bad("shards_per_client", "an integer >= 1")
        if self.last_k < 1:
            raise bad("last_k", "an integer >= 1")
        if not (0.0 < self.fraction_train <= 1.0):
            raise bad("fraction_train", "a fraction in (0, 1]")
        if not (math.isfinite(self.dirichlet_alpha) and self.dirichlet_alpha > 0):
            raise bad("dirichlet_alpha", "a finite number > 0")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise bad("lr", "a finite number > 0")
        if not (0.0 < self.lr_decay <= 1.0):
            raise bad("lr_decay", "a number in (0, 1]")
        if not (0.0 <= self.momentum < 1.0):
            raise bad("momentum", "a number in [0, 1)")
        if self.weight_decay < 0:
            raise bad("weight_decay", "a number >= 0")
        if not (math.isfinite(self.gamma) and self.gamma >= 0):
            raise bad("gamma", "a finite number >= 0")
        if not (math.isfinite(self.tau) and self.tau > 0):
            raise bad("tau", "a finite number > 0")
        if not (0.0 <= self.ema_alpha <= 1.0):
            raise bad("ema_alpha", "a number in [0, 1]")
        if not (self.beta > 0):  # inf allowed: dual off
            raise bad("beta", "a number > 0 (inf turns the dual off)")
        if not (math.isfinite(self.prox) and self.prox >= 0):
            raise bad("prox", "a finite number >= 0")
        if not (math.isfinite(self.rho) and self.rho >= 0):
            raise bad("rho", "a finite number >= 0")
        if not (math.isfinite(self.server_lr) and self.server_lr > 0):
            raise bad("server_lr", "a finite number > 0")
        if self.max_train_samples is not None and self.max_train_samples < 1:
            raise bad("max_train_samples", "an integer >= 1 or None")
        if self.dp:
            if self.method in SAM_METHODS:
                raise ValueError(
                    "dp is not supported for SAM-based methods "
                    "(the ascent step would use a non-private gradient)"
                )
            if not (self.dp_noise >= 0 and math.isfinite(self.dp_noise)):
                raise bad("dp_noise", "a finite number >= 0")
            if not (self.dp_clip > 0 and math.isfinite(self.dp_clip)):
                raise bad("dp_clip", "a finite number > 0")
            if not (0.0 < self.dp_delta < 1.0):
                raise bad("dp_delta", "a number in (0, 1)")

    # ------------------------------------------------------------------ derived
    @property
    def effective_beta(self) -> float:
        """beta used by the dual; ``inf`` (dual off) for fedgmt-kl and the non-dual methods."""
        if self.method == "fedgmt-kl" or self.method not in DUAL_METHODS:
            return math.inf
        return float(self.beta)

    @property
    def uses_kl(self) -> bool:
        """True when the trajectory KL term (and so the EMA teacher) is active."""
        return self.method in ("fedgmt", "fedgmt-kl") and self.gamma > 0

    @property
    def num_sampled(self) -> int:
        """m = max(1, floor(f N))."""
        return max(1, math.floor(self.fraction_train * self.num_clients + 1e-9))

    def replace(self, **changes: Any) -> FedConfig:
        """A validated copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_run_config(self) -> dict[str, Any]:
        """Flower ``run_config`` (hyphenated keys; None and inf written as strings)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                v = ""
            elif isinstance(v, float) and math.isinf(v):
                v = "inf"
            out[f.name.replace("_", "-")] = v
        return out

    @classmethod
    def from_run_config(cls, run_config: dict[str, Any]) -> FedConfig:
        """Build from a Flower ``run_config``; unknown keys (e.g. ``num-server-rounds``) are mapped
        or ignored."""
        names = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in run_config.items():
            name = key.replace("-", "_")
            if name == "num_server_rounds":
                name = "num_rounds"
            if name not in names:
                continue
            kwargs[name] = _coerce(names[name].type, value)
        return cls(**kwargs)


def _coerce(type_name: Any, value: Any) -> Any:
    t = str(type_name)
    if value == "" and "None" in t:
        return None
    if t.startswith("bool"):
        if isinstance(value, str):
            return value.lower() in ("1", "true", "yes")
        return bool(value)
    if t.startswith("int"):
        return int(value)
    if t.startswith("float"):
        return float(value)
    if t.startswith("str"):
        return str(value)
    return value
