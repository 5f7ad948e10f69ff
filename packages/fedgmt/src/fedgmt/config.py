"""Run configuration: the :class:`FedConfig` dataclass with validation.

Keys are the options of the official FL-SAM code where it has them (``gamma``, ``tau``, ``ema_alpha``,
``beta``...). In a Flower ``run_config`` the same keys are written with hyphens (``ema-alpha``); :meth:`FedConfig.from_run_config` / :meth:`FedConfig.to_run_config` convert.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - Python 3.10: tomli (a dependency of flwr)
    import tomli as _toml

from .methods import REGISTRY, get_method

METHODS = ("fedgmt", "fedgmt-kl", "fedavg", "fedsam", "feddyn", "scaffold", "fedspeed")
"""Built-in methods (one class each in :mod:`fedgmt.methods`). ``fedgmt-kl`` is FedGMT with the
dual off (beta = inf). Further :class:`fedgmt.methods.Method` subclasses are accepted too."""
assert set(METHODS) <= set(REGISTRY)
DATASETS = ("digits", "mnist", "agnews", "agnews-minilm", "synthetic")
PARTITIONS = ("dirichlet", "iid", "shards")
SAM_METHODS = tuple(m for m in METHODS if not REGISTRY[m].dp_ok)
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
    central_dp: str = "none"
    # faults and state
    fail_fraction: float = 0.0
    dual_store: str = "client"
    round_timeout: float = 3600.0
    # misc
    val_fraction: float = 0.0
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

        if self.method not in REGISTRY:
            raise bad("method", "one of " + ", ".join(REGISTRY))
        choice("dataset", DATASETS)
        choice("partition", PARTITIONS)
        choice("model", ("auto", "mlp", "cnn"))
        choice("dual_average", ("all", "active"))
        choice("ema_location", ("server", "client"))
        choice("teacher_mode", ("eval", "train"))
        choice("aggregation_weights", ("samples", "uniform"))
        choice("on_divergence", ("stop", "raise", "warn"))
        choice("dual_store", ("client", "server"))
        choice("central_dp", ("none", "server-fixed-clipping"))
        if self.central_dp != "none":
            if not get_method(self.method).central_dp_ok:
                raise bad(
                    "central_dp",
                    f"none for method {self.method}: a central-DP wrapper noises only the "
                    "aggregate, while this method's server state (the dual sum H or SCAFFOLD's "
                    "control variate) re-adds un-noised client updates; use fedgmt-kl, fedavg or "
                    "fedsam, or local DP-SGD (--dp)",
                )
            if self.dual_store != "client" or self.dp:
                raise bad("central_dp", "none together with dual_store=server or local dp")
        if not (0.0 <= self.fail_fraction < 1.0):
            raise bad("fail_fraction", "a fraction in [0, 1)")
        if not (0.0 <= self.val_fraction < 1.0):
            raise bad("val_fraction", "a fraction in [0, 1)")
        if not (math.isfinite(self.round_timeout) and self.round_timeout > 0):
            raise bad("round_timeout", "a finite number of seconds > 0")
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
            if not get_method(self.method).dp_ok:
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
        return get_method(self.method).beta(self)

    @property
    def uses_kl(self) -> bool:
        """True when the trajectory KL term (and so the EMA teacher) is active."""
        return get_method(self.method).uses_kl(self)

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


# ---------------------------------------------------------------------------- presets
def _field_name(key: str) -> str:
    name = key.replace("-", "_")
    return "num_rounds" if name == "num_server_rounds" else name


def conf_dir() -> Path:
    """The folder of the preset files ``conf/*.toml`` (shipped in the wheel as ``fedgmt/conf``;
    ``conf/`` at the package root in a source checkout, which is also the Flower app folder)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parents[1] / "conf"):
        if candidate.is_dir():
            return candidate
    return here / "conf"


def available_presets() -> list[str]:
    """Names of the presets (``conf/<name>.toml``)."""
    return sorted(p.stem for p in conf_dir().glob("*.toml"))


def preset_values(name: str) -> dict[str, Any]:
    """The ``FedConfig`` fields set by preset ``name`` (the run-config keys of
    ``conf/<name>.toml``, e.g. ``num-server-rounds``, mapped to field names and types).

    The same file is what ``flwr run <app> --run-config conf/<name>.toml`` reads.
    """
    path = conf_dir() / f"{name}.toml"
    if not path.is_file():
        raise ValueError(
            f"invalid preset={name!r}: expected one of {', '.join(available_presets())}"
        )
    with open(path, "rb") as fh:
        raw = _toml.load(fh)
    names = {f.name: f for f in fields(FedConfig)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name_ = _field_name(key)
        if name_ not in names:
            if key in FLOWER_ONLY_KEYS:
                continue
            raise ValueError(f"{path.name}: unknown key {key!r}")
        out[name_] = _coerce(names[name_].type, value)
    return out


FLOWER_ONLY_KEYS = ("preset", "out-dir", "server-eval", "resume")
"""Run-config keys of the Flower app that are not ``FedConfig`` fields."""


def config_from_flower_run_config(run_config: dict[str, Any]) -> FedConfig:
    """``FedConfig`` of a ``flwr run``: the defaults, then ``preset`` (``conf/<preset>.toml``),
    then every run-config value that differs from the default (Flower fills the run config with
    the defaults of ``[tool.flwr.app.config]``, which equal ``FedConfig()``'s, so a value given on
    the command line that equals the default cannot override a preset's)."""
    preset = str(run_config.get("preset", "") or "")
    values: dict[str, Any] = preset_values(preset) if preset else {}
    defaults = FedConfig()
    names = {f.name: f for f in fields(FedConfig)}
    for key, value in run_config.items():
        name_ = _field_name(key)
        if name_ not in names:
            continue
        coerced = _coerce(names[name_].type, value)
        if name_ not in values or coerced != getattr(defaults, name_):
            values[name_] = coerced
    return FedConfig(**values)
