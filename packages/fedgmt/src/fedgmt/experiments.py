"""The command line's jobs as Python calls, each on a :class:`~fedgmt.config.FedConfig`.

========================  =====================================================================
``fedgmt run/compare``    :func:`run_study` (methods x seeds; checkpoints and final models)
``fedgmt run --resume``   :func:`resume_study` (continue the runs checkpointed in a folder)
``fedgmt demo``           :func:`run_demo` (FedAvg vs FedGMT on the embedded digits data)
``fedgmt partition``      :func:`partition_stats`
``fedgmt check``          :func:`stability_check` (the dual's pre-flight guard)
``fedgmt evaluate``       :func:`evaluate_model` (a saved global model or a checkpoint)
========================  =====================================================================

Each returns a result object whose ``as_dict()`` is what the CLI writes in its results file; none of
them parses arguments, prints tables or exits. An input the call cannot use (a bad data file, a
partition that cannot give every client data, an unstable dual without ``allow_unstable``) raises
:class:`~fedgmt.config.ConfigError` naming the field to change, or
:class:`~fedgmt.guard.UnstableDualError`, before any training.

>>> from fedgmt import FedConfig
>>> from fedgmt.experiments import run_study
>>> study = run_study(FedConfig(num_rounds=3), methods=("fedavg", "fedgmt"))  # doctest: +SKIP
>>> study.summary["fedgmt"]["last_k_mean"]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import pickle
import shutil
import statistics
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import DATA_DATASETS, ENGINES, ConfigError, DemoConfig, EvaluateConfig, FedConfig

__all__ = [
    "CheckResult",
    "EvaluateResult",
    "PartitionResult",
    "StudyResult",
    "describe_data",
    "evaluate_model",
    "load_data",
    "partition_stats",
    "plot_accuracy",
    "resume_study",
    "run_demo",
    "run_study",
    "stability_check",
]

_INPUT_ERRORS = (
    ValueError, OSError, EOFError, KeyError, UnicodeDecodeError, pickle.UnpicklingError,
    zipfile.BadZipFile,
)  # fmt: skip


@contextmanager
def _blame(field_name: str) -> Iterator[None]:
    """Input errors raised while loading become a :class:`ConfigError` naming ``field_name``."""
    try:
        yield
    except ConfigError:
        raise
    except _INPUT_ERRORS as exc:
        if isinstance(exc, KeyError):
            text = f"missing field {exc.args[0]!r}" if exc.args else "missing field"
        elif isinstance(exc, EOFError):
            text = "the file is truncated or empty"
        elif isinstance(exc, OSError) and exc.strerror:
            text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        else:
            text = (str(exc).strip() or type(exc).__name__)[:400].splitlines()[0]
        raise ConfigError(field_name, text) from exc


# ------------------------------------------------------------------------------------------ data


def load_data(cfg: FedConfig) -> Any:
    """Load and partition ``cfg``'s data (:class:`fedgmt.dataset.FederatedData`). A missing or bad
    data folder raises :class:`ConfigError` naming ``data_dir``, a split that cannot give every
    client data one naming ``num_clients``."""
    from .dataset import load_dataset, load_federated_data

    if cfg.data_dir is not None and not Path(cfg.data_dir).expanduser().is_dir():
        raise ConfigError("data_dir", f"data_dir={cfg.data_dir!r}: expected an existing folder")
    with _blame("data_dir"):
        load_dataset(cfg)
    with _blame("num_clients"):
        return load_federated_data(cfg)


def describe_data(cfg: FedConfig, data: Any) -> dict[str, Any]:
    """Which data a run used, in words (the ``data`` entry of the results files)."""
    from ._contract import display_path
    from .dataset import default_data_dir

    if cfg.dataset == "digits":
        source = "scikit-learn digits (embedded, no download)"
    elif cfg.dataset == "synthetic":
        source = "FedProx Synthetic(1, 1), generated (natural per-client split)"
    else:
        where = Path(cfg.data_dir) if cfg.data_dir else default_data_dir(cfg.dataset)
        kind = "MNIST IDX files" if cfg.dataset == "mnist" else "AG News test.csv re-split 80/20"
        source = f"{kind} in {display_path(where)}"
    split = (
        "natural per-client split"
        if cfg.dataset == "synthetic"
        else f"{cfg.partition}"
        + (f"({cfg.dirichlet_alpha:g})" if cfg.partition == "dirichlet" else "")
    )
    line = (
        f"{source}: {len(data.y_train):,} train / {len(data.y_test):,} test samples, {split} over "
        f"{cfg.num_clients} clients"
    )
    return {
        "dataset": cfg.dataset,
        "source": source,
        "train_samples": len(data.y_train),
        "test_samples": len(data.y_test),
        "num_clients": cfg.num_clients,
        "partition": split,
        "text": line,
    }


def _preflight(configs: Sequence[FedConfig]) -> Any:
    """Everything that can be refused before training: data, the stability guard, DP."""
    from .guard import check_stability

    data = load_data(configs[0])
    sizes = data.partition.sizes
    for cfg in configs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "oscillates" warnings come again from the run
            check_stability(sizes, cfg)  # UnstableDualError unless cfg.allow_unstable
        if cfg.dp:
            try:
                import opacus  # noqa: F401
            except ImportError:
                raise ConfigError(
                    "dp", "DP-SGD needs the 'opacus' module: pip install 'fedgmt[dp]'"
                ) from None
            if not cfg.dp_delta < 1.0 / max(sizes):
                raise ConfigError(
                    "dp_delta",
                    f"expected a value below 1/n_i = {1.0 / max(sizes):.3g} for the largest "
                    f"client ({max(sizes)} samples), got {cfg.dp_delta:g}",
                )
    return data


# ----------------------------------------------------------------------------------------- study


@dataclass
class StudyResult:
    """Methods x seeds on one partition: every run's history and the per-method summary."""

    configs: list[FedConfig]
    seeds: list[int]
    engine: str
    data: dict[str, Any]
    runs: list[dict[str, Any]]
    summary: dict[str, dict[str, Any]]
    diverged_runs: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def diverged(self) -> bool:
        return bool(self.diverged_runs)

    def as_dict(self) -> dict[str, Any]:
        return {
            "fed_config": self.configs[0].to_dict(),
            "methods": [c.method for c in self.configs],
            "seeds": list(self.seeds),
            "engine": self.engine,
            "data": self.data,
            "diverged": self.diverged,
            "diverged_runs": self.diverged_runs,
            "failures": sum(len(r.get("failures", [])) for r in self.runs),
            "summary": self.summary,
            "runs": self.runs,
        }


def run_study(
    cfg: FedConfig,
    methods: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    engine: str = "reference",
    *,
    store: str | os.PathLike[str] | None = None,
    plot: str | os.PathLike[str] | None = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> StudyResult:
    """Run ``cfg`` for every method in ``methods`` (default: ``cfg.method``) and seed in ``seeds``
    (default: ``cfg.seed``), all on the same partition, with ``engine`` = ``"reference"`` or
    ``"flower"`` (:func:`fedgmt.run`).

    ``store``: a folder; each run is checkpointed after every completed round in
    ``store/checkpoints/<method>-seed<s>.pt`` (:func:`resume_study` continues them) and its final
    global model saved in ``store/models/`` (:func:`evaluate_model` scores it). ``plot``: write the
    mean test-accuracy curves there (needs matplotlib; else a note in ``notes``). ``progress``:
    a progress bar per run; ``log``: called with a line on the data and the plan before training."""
    if engine not in ENGINES:
        raise ConfigError("engine", f"engine={engine!r}: expected reference or flower")
    names = list(dict.fromkeys(methods or [cfg.method]))
    configs = [cfg.replace(method=m) for m in names]
    chosen = list(dict.fromkeys(seeds if seeds is not None else [cfg.seed]))
    return _study(configs, chosen, engine, store, plot, progress, log, False)


def _study(
    configs: list[FedConfig],
    seeds: list[int],
    engine: str,
    store: str | os.PathLike[str] | None,
    plot: str | os.PathLike[str] | None,
    progress: bool,
    log: Callable[[str], None] | None,
    resume: bool,
) -> StudyResult:
    from .run import run

    if not seeds:
        raise ConfigError("seeds", "expected at least one seed")
    data = _preflight(configs)
    info = describe_data(configs[0], data)
    if log is not None:
        log(f"data: {info['text']}")
        methods = ", ".join(c.method for c in configs)
        log(f"engine: {engine}; methods: {methods}; seeds: {seeds}")
    folder = Path(store) if store is not None else None
    runs: list[dict[str, Any]] = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
        warnings.filterwarnings("ignore", message=".*Full backward hook.*")
        for seed in seeds:
            for cfg in configs:
                run_cfg = cfg.replace(seed=seed)
                name = f"{cfg.method}-seed{seed}"
                ckpt = folder / "checkpoints" / f"{name}.pt" if folder is not None else None
                h = run(run_cfg, engine=engine, progress=progress, checkpoint=ckpt, resume=resume)
                if folder is not None and h.final_arrays is not None:
                    from .checkpoint import save_model

                    save_model(folder / "models" / f"{name}.pt", run_cfg, h.final_arrays)
                runs.append(
                    {
                        "method": cfg.method,
                        "seed": seed,
                        "last_k_accuracy": h.last_k_accuracy(cfg.last_k),
                        "within_run_std": h.within_run_std(cfg.last_k),
                        "median_client_time_s": h.median_client_time(),
                        **h.to_dict(),
                    }
                )
    from ._contract import mean_std

    summary: dict[str, dict[str, Any]] = {}
    for cfg in configs:
        mine = [r for r in runs if r["method"] == cfg.method]
        mean, std = mean_std([r["last_k_accuracy"] for r in mine])
        summary[cfg.method] = {
            "last_k_mean": mean,
            "last_k_std": std,
            "num_seeds": len(mine),
            "client_time_s": statistics.median(r["median_client_time_s"] for r in mine),
            "diverged": any(r["diverged"] for r in mine),
        }
    diverged = [
        {"method": r["method"], "seed": r["seed"], "round": r["diverged_at_round"],
         "reason": r["divergence_reason"]}
        for r in runs
        if r["diverged"]
    ]  # fmt: skip
    result = StudyResult(configs, seeds, engine, info, runs, summary, diverged)
    if plot is not None:
        written = plot_accuracy(runs, plot, f"{info['source']}, {info['partition']}")
        if written is None:
            result.notes.append(
                "no accuracy plot: matplotlib is not installed (pip install 'fedgmt[cli]')"
            )
        else:
            result.files.append(written)
    return result


def resume_study(
    folder: str | os.PathLike[str],
    *,
    store: str | os.PathLike[str] | None = None,
    engine: str = "reference",
    num_rounds: int | None = None,
    on_divergence: str | None = None,
    plot: str | os.PathLike[str] | None = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> StudyResult:
    """Continue the runs checkpointed in ``folder/checkpoints`` (a previous ``store``) from their
    last completed round, with their configuration (``num_rounds`` extends them); the result equals
    the uninterrupted run. ``store`` (default ``folder``): where the checkpoints and final models go
    from now on (the checkpoints are copied there first)."""
    from .checkpoint import load_checkpoint
    from .methods import REGISTRY

    source = Path(folder) / "checkpoints"
    files = sorted(source.glob("*.pt")) if source.is_dir() else []
    if not files:
        raise ConfigError("resume", f"{source} holds no checkpoints (*.pt)")
    configs: dict[str, FedConfig] = {}
    seeds: list[int] = []
    with _blame("resume"):
        for f in files:
            ck = load_checkpoint(f)
            configs.setdefault(ck.cfg.method, ck.cfg)
            if ck.cfg.seed not in seeds:
                seeds.append(ck.cfg.seed)
    changes: dict[str, Any] = {}
    if num_rounds is not None:
        changes["num_rounds"] = int(num_rounds)
    if on_divergence is not None:
        changes["on_divergence"] = on_divergence
    order = list(REGISTRY)
    ordered = sorted(configs.items(), key=lambda kv: order.index(kv[0]))
    chosen = [c.replace(**changes) for _, c in ordered]
    if engine == "flower" and chosen[0].dual_store != "server":
        raise ConfigError(
            "engine",
            "flower can resume only runs with dual_store server (with client-held duals the "
            "state lived in the SuperNodes); resume with the reference engine",
        )
    target = Path(store) if store is not None else Path(folder)
    if target.resolve() != Path(folder).resolve():  # continue into a new folder
        shutil.copytree(source, target / "checkpoints")
    return _study(chosen, seeds, engine, target, plot, progress, log, True)


def run_demo(
    cfg: DemoConfig | None = None,
    *,
    plot: str | os.PathLike[str] | None = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> StudyResult:
    """FedAvg vs FedGMT on the embedded scikit-learn digits data (Dirichlet 0.1, 20 clients, the
    :class:`FedConfig` defaults): 60 rounds on the reference engine with ``cfg.quick`` (about 30 s
    on one core), else 30 rounds on Flower's simulation engine."""
    cfg = cfg or DemoConfig(quick=True)
    engine = cfg.engine or ("reference" if cfg.quick else "flower")
    fed = FedConfig(num_rounds=60 if cfg.quick else 30, seed=cfg.seed)
    return run_study(fed, ("fedavg", "fedgmt"), cfg.seeds, engine, plot=plot, progress=progress,
                     log=log)  # fmt: skip


def plot_accuracy(
    runs: Sequence[dict[str, Any]], path: str | os.PathLike[str], title: str
) -> Path | None:
    """Mean test-accuracy curve per method over its seeds; None when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    by_method: dict[str, list[list[float]]] = {}
    for r in runs:
        by_method.setdefault(r["method"], []).append(r["accuracy"])
    for m, curves in by_method.items():
        length = min(len(c) for c in curves)
        if length == 0:
            continue
        mean = [statistics.mean(c[i] for c in curves) for i in range(length)]
        ax.plot(range(1, length + 1), mean, label=f"{m} (mean of {len(curves)} seed(s))")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy")
    ax.set_title(title, fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return Path(path)


# ------------------------------------------------------------------------------ partition, check


@dataclass
class PartitionResult:
    """Partition statistics of a config's data: sizes, moved samples, label entropy."""

    config: FedConfig
    data: dict[str, Any]
    stats: dict[str, Any]
    sizes: list[int]
    label_hist: list[list[int]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "partition": self.stats,
            "label_hist": self.label_hist,
            "fed_config": self.config.to_dict(),
        }


def partition_stats(cfg: FedConfig) -> PartitionResult:
    """Load and partition ``cfg``'s data and describe the split."""
    data = load_data(cfg)
    part = data.partition
    return PartitionResult(cfg, describe_data(cfg, data), part.stats(), list(part.sizes),
                           part.label_hist)  # fmt: skip


@dataclass
class CheckResult:
    """The dual's pre-flight stability guard: kappa_max over the clients and its verdict."""

    config: FedConfig
    kappa_max: float
    client: int
    local_steps: int
    verdict: str  # "stable" | "oscillating" | "unstable" | "not-applicable"
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.config.method,
            "kappa_max": self.kappa_max,
            "client": self.client,
            "local_steps": self.local_steps,
            "verdict": self.verdict,
            "message": self.message,
            "fed_config": self.config.to_dict(),
        }


def stability_check(cfg: FedConfig) -> CheckResult:
    """kappa_max of ``cfg``'s dual over its partition (never raises for an unstable verdict)."""
    from .guard import check_stability

    data = load_data(cfg)
    rep = check_stability(data.partition.sizes, cfg, strict=False)
    return CheckResult(cfg, rep.kappa_max, rep.client, rep.steps, rep.verdict, rep.message)


# ------------------------------------------------------------------------------------- evaluate


@dataclass
class EvaluateResult:
    """Test accuracy and loss of a saved global model."""

    model: Path
    config: FedConfig
    test_accuracy: float
    test_loss: float
    test_samples: int
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        from ._contract import display_path

        return {
            "model": display_path(self.model),
            "method": self.config.method,
            "test_accuracy": self.test_accuracy,
            "test_loss": self.test_loss,
            "test_samples": self.test_samples,
            "data": self.data,
            "fed_config": self.config.to_dict(),
        }


def evaluate_model(cfg: EvaluateConfig) -> EvaluateResult:
    """Score a saved global model (``<store>/models/*.pt`` of :func:`run_study`) or a checkpoint on
    the test split; its configuration rebuilds the architecture and the data split
    (``cfg.data_dir``: the real data's folder, if not where the model was trained)."""
    from .checkpoint import load_model
    from .metrics import evaluate
    from .model import make_model

    path, data_dir = Path(cfg.model), cfg.data_dir
    with _blame("model"):
        fed, state_dict = load_model(path)
    if data_dir is not None:
        if fed.dataset not in DATA_DATASETS:
            raise ConfigError(
                "data_dir", f"the model was trained on the embedded {fed.dataset} data"
            )
        fed = fed.replace(data_dir=str(data_dir))
    data = load_data(fed)
    net = make_model(fed, data.input_dim, data.num_classes, data.vocab_size)
    with _blame("model"):
        net.load_state_dict(state_dict)
    acc, loss = evaluate(net, data.x_test, data.y_test)
    return EvaluateResult(path, fed, acc, loss, len(data.y_test), describe_data(fed, data))
