"""Run configuration: :class:`FedConfig` (one federated run), :class:`DemoConfig` and
:class:`EvaluateConfig`; each field is a ``param(default, doc, range)`` from which the CLI makes its
flag. Standard library only (no torch until a config is validated against the method registry).

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

from ._contract import REQUIRED, ConfigError, check_config, param

__all__ = [
    "DATASETS",
    "ENGINES",
    "METHODS",
    "PARTITIONS",
    "ConfigError",
    "DemoConfig",
    "EvaluateConfig",
    "FedConfig",
]

METHODS = ("fedgmt", "fedgmt-kl", "fedavg", "fedsam", "feddyn", "scaffold", "fedspeed")
"""Built-in methods (one class each in :mod:`fedgmt.methods`). ``fedgmt-kl`` is FedGMT with the
dual off (beta = inf). Further :class:`fedgmt.methods.Method` subclasses are accepted too."""
DATASETS = ("digits", "mnist", "agnews", "agnews-minilm", "synthetic")
DATA_DATASETS = ("mnist", "agnews", "agnews-minilm")
"""Datasets read from ``data_dir`` (the others are embedded or generated)."""
PARTITIONS = ("dirichlet", "iid", "shards")
DUAL_METHODS = ("fedgmt", "feddyn", "fedspeed")
DATA_FIELDS = ("dataset", "data_dir", "max_train_samples")
PARTITION_FIELDS = (
    *DATA_FIELDS, "num_clients", "partition", "dirichlet_alpha", "shards_per_client",
    "min_partition_size", "self_balancing", "partition_seed",
)  # fmt: skip
"""The fields that decide the data and its partition (what ``partition_stats`` reads)."""
CHECK_FIELDS = (
    *PARTITION_FIELDS, "lr", "lr_decay", "momentum", "weight_decay", "batch_size", "local_epochs",
    "beta", "prox",
)  # fmt: skip
"""The fields the stability guard reads (what ``stability_check`` needs)."""
ENGINES = ("reference", "flower")
"""The in-process loop, or Flower's simulation engine (Ray); both give the same model."""
SEED_MAX = 2**32 - 1
BETA_MAX = 1e5
"""Largest finite beta (``inf``, the dual off, is accepted as well)."""


def _frac(default: float, doc: str, **kw: Any) -> Any:
    return param(default, doc, low=0.0, high=1.0, **kw)


@dataclass
class FedConfig:
    """Configuration of one federated run (defaults: the embedded scikit-learn digits setup).

    Every field carries its default, a one-line doc and the values it accepts (the CLI makes one flag
    per field from the same declaration); :func:`check_config` checks them when the config is built
    and :meth:`validate` the combinations. A bad value raises :class:`ConfigError` (a ``ValueError``)
    whose ``field`` names the field. Standard library only: importing this module does not import
    torch.
    """

    # what
    method: str = param(
        "fedgmt", "federated method (fedgmt.METHODS or a registered Method subclass)", flag=False
    )
    dataset: str = param("digits", "dataset (digits is embedded in scikit-learn)", choices=DATASETS)
    data_dir: str | None = param(
        None,
        "folder of the real data: the MNIST IDX files or the AG News test.csv (read for mnist, "
        "agnews, agnews-minilm; auto: $ICML25_DATA/mnist/raw or $ICML25_DATA/ag_news)",
        none="auto",
    )
    model: str = param("auto", "model (cnn: MNIST only)", choices=("auto", "mlp", "cnn"))
    max_train_samples: int | None = param(
        None, "subsample the training set to this many samples (speed)", low=1, high=10**8,
        none="all",
    )  # fmt: skip
    # federation
    num_clients: int = param(20, "number of clients N", low=1, high=100_000)
    fraction_train: float = _frac(0.25, "fraction f of clients sampled per round", low_open=True)
    num_rounds: int = param(60, "number of server rounds", low=1, high=1_000_000)
    partition: str = param("dirichlet", "partition scheme", choices=PARTITIONS)
    dirichlet_alpha: float = param(
        0.1, "Dirichlet concentration alpha", low=0.0, low_open=True, high=1e5
    )
    shards_per_client: int = param(2, "shards per client (shards)", low=1, high=100_000)
    min_partition_size: int = param(
        10, "minimum samples per client (moved from the largest client)", low=1, high=10**7
    )
    self_balancing: bool = param(False, "re-balance the partition sizes")
    partition_seed: int = param(
        0, "seed of the partition (fixed across methods and seeds)", low=0, high=SEED_MAX
    )
    seed: int = param(0, "seed of init and client sampling", low=0, high=SEED_MAX)
    # local optimiser (torch SGD semantics)
    lr: float = param(0.01, "local learning rate eta_0", low=0.0, low_open=True, high=100.0)
    lr_decay: float = _frac(0.998, "per-round learning-rate decay d", low_open=True)
    momentum: float = _frac(0.9, "SGD momentum mu", high_open=True)
    weight_decay: float = param(1e-5, "SGD weight decay lambda", low=0.0, high=1.0)
    batch_size: int = param(16, "local batch size B", low=1, high=1_000_000)
    local_epochs: int = param(5, "local epochs E", low=1, high=10_000)
    # FedGMT: KL to the EMA teacher (gamma, tau, ema_alpha) and the dual h_i / beta
    gamma: float = param(1.0, "FedGMT KL strength gamma", low=0.0, high=1e4)
    tau: float = param(3.0, "FedGMT KL temperature tau", low=0.0, low_open=True, high=1e4)
    ema_alpha: float = _frac(0.95, "FedGMT EMA coefficient alpha")
    beta: float = param(
        10.0, "dual penalty beta of fedgmt/feddyn/fedspeed (inf turns the dual off)",
        low=0.0, low_open=True, high=BETA_MAX,
    )  # fmt: skip
    dual_average: str = param(
        "all", "server dual correction: H/N over all clients, or the mean h_i of the sampled ones",
        choices=("all", "active"),
    )  # fmt: skip
    ema_location: str = param("server", "where the EMA is kept", choices=("server", "client"))
    prox: float = param(0.0, "optional FedGMT prox nu (not in the paper)", low=0.0, high=1e5)
    teacher_mode: str = param(
        "eval", "mode of the EMA teacher's forward pass", choices=("eval", "train")
    )
    aggregation_weights: str = param(
        "samples", "weights of the client average", choices=("samples", "uniform")
    )
    # baselines
    rho: float = param(0.05, "SAM radius rho (fedsam, fedspeed)", low=0.0, high=100.0)
    server_lr: float = param(
        1.0, "SCAFFOLD server learning rate", low=0.0, low_open=True, high=100.0
    )
    # guard
    allow_unstable: bool = param(False, "run even if the stability guard finds kappa_max >= 2")
    on_divergence: str = param(
        "stop",
        "on a diverged round: stop the run, warn and keep training while the numbers are finite, "
        "or raise (a traceback); stop and warn exit with code 3",
        choices=("stop", "warn", "raise"),
    )
    # differential privacy (Opacus, extra [dp])
    dp: bool = param(False, "DP-SGD on local training with Opacus, needs fedgmt[dp]")
    dp_noise: float = param(1.0, "DP noise multiplier sigma", low=0.0, high=1e4)
    dp_clip: float = param(
        1.0, "DP per-sample clipping norm C", low=0.0, low_open=True, high=1e7, high_open=True
    )
    dp_delta: float = _frac(1e-5, "DP delta, below 1/n_i", low_open=True, high_open=True)
    central_dp: str = param(
        "none",
        "Flower engine: wrap the strategy in Flower's DifferentialPrivacyServerSideFixedClipping "
        "(noise dp_noise, clip dp_clip; no accountant); refused for methods whose server state "
        "re-adds un-noised client updates (fedgmt, feddyn, fedspeed, scaffold)",
        choices=("none", "server-fixed-clipping"),
    )
    # faults and state
    fail_fraction: float = _frac(
        0.0,
        "simulated dropout: each sampled client fails mid-round with this probability (its "
        "update is lost, its state kept); 0 = off",
        high_open=True,
    )
    dual_store: str = param(
        "client",
        "where client duals/control variates live: in the client (Flower context.state) or on "
        "the server, sent with each message (stateless clients)",
        choices=("client", "server"),
    )
    round_timeout: float = param(
        3600.0,
        "Flower: seconds to wait for a round's replies; a client that has not replied by then "
        "is left out of the round",
        low=0.0, low_open=True, high=604_800.0,
    )  # fmt: skip
    # misc
    val_fraction: float = _frac(
        0.0,
        "hold out this stratified fraction of the training data as a validation split "
        "(model selection; the test set is untouched)",
        high_open=True,
    )
    client_threads: int = param(1, "torch threads per client", low=1, high=1024)
    last_k: int = param(10, "headline: mean accuracy of the last k rounds", low=1, high=1_000_000)

    def __post_init__(self) -> None:
        beta = self.beta
        dual_off = isinstance(beta, float) and beta == math.inf
        if dual_off:  # inf (dual off) is the one value beyond BETA_MAX that beta accepts
            self.beta = BETA_MAX
        try:
            check_config(self)
        except ConfigError as exc:
            if exc.field != "beta":
                raise
            raise ConfigError("beta", f"{exc}, or inf (the dual off)") from None
        finally:
            if dual_off:
                self.beta = math.inf
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """The checks that involve several fields; :class:`ConfigError` names the field to change.

        (Each field's own range is checked by :func:`check_config` when the config is built.)"""
        from .methods import REGISTRY, get_method  # torch: only when a config is built

        if self.method not in REGISTRY:
            raise ConfigError(
                "method", f"method={self.method!r}: expected one of {', '.join(REGISTRY)}"
            )
        method = get_method(self.method)
        if self.central_dp != "none":
            if not method.central_dp_ok:
                raise ConfigError(
                    "central_dp",
                    f"central_dp={self.central_dp!r}: expected none for method {self.method}: a "
                    "central-DP wrapper noises only the aggregate, while this method's server "
                    "state (the dual sum H or SCAFFOLD's control variate) re-adds un-noised "
                    "client updates; use fedgmt-kl, fedavg or fedsam, or local DP-SGD (dp)",
                )
            if self.dual_store != "client" or self.dp:
                raise ConfigError(
                    "central_dp",
                    f"central_dp={self.central_dp!r}: expected none together with "
                    "dual_store=server or local dp",
                )
        if self.model == "cnn" and self.dataset != "mnist":
            raise ConfigError(
                "model",
                f"model='cnn': expected auto or mlp for dataset {self.dataset} (the CNN takes "
                "28x28 MNIST images)",
            )
        if self.data_dir is not None and self.dataset not in DATA_DATASETS:
            raise ConfigError(
                "data_dir",
                f"is read only with dataset {', '.join(DATA_DATASETS)}, not {self.dataset} "
                "(embedded or generated)",
            )
        if self.dp and not method.dp_ok:
            raise ConfigError(
                "dp",
                f"dp is not supported for SAM-based methods such as {self.method} "
                "(the ascent step would use a non-private gradient)",
            )

    # ------------------------------------------------------------------ derived
    @property
    def effective_beta(self) -> float:
        """beta used by the dual; ``inf`` (dual off) for fedgmt-kl and the non-dual methods."""
        from .methods import get_method

        return get_method(self.method).beta(self)

    @property
    def uses_kl(self) -> bool:
        """True when the trajectory KL term (and so the EMA teacher) is active."""
        from .methods import get_method

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
    def flag_fields(cls) -> list[str]:
        """The fields that are command-line flags (all but ``method``, which the CLI's
        ``--strategy`` sets, and ``seed``, a common flag)."""
        return [f.name for f in fields(cls) if f.metadata["icml25"].flag and f.name != "seed"]

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


@dataclass
class DemoConfig:
    """``fedgmt demo``: FedAvg vs FedGMT on the embedded scikit-learn digits data
    (:func:`fedgmt.experiments.run_demo`)."""

    quick: bool = param(
        False, "60 rounds on the in-process reference engine (off: 30 rounds on Flower)"
    )
    engine: str | None = param(
        None, "reference or flower (auto: reference with --quick, else flower)", choices=ENGINES,
        none="auto",
    )  # fmt: skip
    seeds: tuple[int, ...] | None = param(
        None, "seeds of init and sampling (auto: seed)", low=0, high=SEED_MAX, none="auto"
    )
    seed: int = param(0, "seed when seeds is auto", low=0, high=SEED_MAX)

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class EvaluateConfig:
    """``fedgmt evaluate``: score a saved global model on the test split
    (:func:`fedgmt.experiments.evaluate_model`)."""

    model: Path = param(
        REQUIRED, "the saved global model or checkpoint (<out>/models/*.pt of run); its "
        "configuration rebuilds the architecture and the data split", path="file",
    )  # fmt: skip
    data_dir: Path | None = param(
        None, "folder of the real data, if not where the model was trained (auto: the model's)",
        path="dir", none="auto",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_config(self)


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
