"""The package's jobs as Python calls: :func:`run_demo`, :func:`run_train`, :func:`run_evaluate`.

Each takes its config (:mod:`sassha_optim.config`) and returns a result object; none parses arguments,
prints or exits, so a script or notebook gets exactly what the command line gets::

    from sassha_optim.config import TrainConfig
    from sassha_optim.experiments import run_train

    result = run_train(TrainConfig(data="synthetic", optimizer="sassha", epochs=5), out="runs/t")
    result.metrics.test_accuracy, result.checkpoint

Bad input (a data folder that does not load, a checkpoint from elsewhere) raises
:class:`~sassha_optim.config.ConfigError` naming the config field; the CLI reports it as the flag.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import DATA_NAMES, ConfigError, DemoConfig, EvaluateConfig, TrainConfig
from .data import Split, load_dataset
from .training import MLP, TrainResult, evaluate, hessian_trace, top_hessian_eigenvalue, train

__all__ = [
    "DemoResult",
    "EvaluateResult",
    "TrainRun",
    "run_demo",
    "run_evaluate",
    "run_train",
]

PLOT = "test_accuracy.png"
CHECKPOINT = "checkpoint.pt"
Progress = Callable[[int], object] | None


@dataclass
class DemoResult:
    """What :func:`run_demo` measured: per optimizer, the runs (one per seed) and their summary."""

    data: str
    data_note: str
    n_train: int
    n_test: int
    epochs: int
    seeds: list[int]
    summary: dict[str, dict[str, Any]]
    runs: dict[str, list[dict[str, Any]]]
    curves: dict[str, list[list[float]]]  # test accuracy per epoch, per optimizer and seed
    plot: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "n_seeds": len(self.seeds)}


@dataclass
class TrainRun:
    """What :func:`run_train` produced: the metrics, the settings it overrode, the files it wrote."""

    data: str
    data_note: str
    n_train: int
    n_test: int
    optimizer: str
    overrides: dict[str, Any]
    metrics: TrainResult
    model: torch.nn.Module = field(repr=False)
    checkpoint: Path | None = None
    plot: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k not in ("model", "metrics")}
        return {**out, "metrics": vars(self.metrics)}


@dataclass
class EvaluateResult:
    """Test metrics of a checkpoint (``metrics["test"]``), with ``lambda_max``/``hessian_trace`` when
    asked for."""

    data: str
    data_note: str
    n_test: int
    checkpoint: Path
    metrics: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------ helpers


def _have_sklearn() -> bool:
    return importlib.util.find_spec("sklearn") is not None


def resolve_data(name: str | Path, field_name: str = "data") -> tuple[str, str]:
    """The dataset to load and a line saying which data this is (``auto`` picks digits or synthetic)."""
    if isinstance(name, Path) or name not in ("auto", *DATA_NAMES):
        return str(name), f"data: folder {Path(name).name}"
    if name == "auto":
        if _have_sklearn():
            return "digits", "data: digits (scikit-learn's bundled 8x8 digits)"
        return "synthetic", (
            "data: synthetic (scikit-learn not installed; pip install 'sassha-optim[cli]' for digits)"
        )
    if name == "mnist":
        root = os.environ.get("ICML25_DATA")
        folder = Path(root) / "mnist" / "raw" if root else None
        if folder is None or not folder.is_dir():
            where = f"{folder} does not exist" if folder else "ICML25_DATA is not set"
            raise ConfigError(
                field_name,
                f"mnist is read from $ICML25_DATA/mnist/raw and {where}; set ICML25_DATA to the "
                "shared data folder or give the MNIST folder itself",
            )
        return str(folder), "data: MNIST ($ICML25_DATA/mnist/raw)"
    if name == "digits":
        if not _have_sklearn():
            raise ConfigError(
                field_name, "digits needs scikit-learn: pip install 'sassha-optim[cli]'"
            )
        return "digits", "data: digits (scikit-learn's bundled 8x8 digits)"
    return "synthetic", "data: synthetic (embedded, no download)"


def _load(name: str, seed: int, max_train: int | None = None, max_test: int | None = None) -> Split:
    try:
        return load_dataset(name, seed=seed, max_train=max_train, max_test=max_test)
    except (ValueError, OSError, EOFError, KeyError) as exc:
        raise ConfigError("data", str(exc).strip().splitlines()[0]) from exc


def _to(split: Split, device: torch.device) -> Split:
    return Split(
        split.x_train.to(device),
        split.y_train.to(device),
        split.x_test.to(device),
        split.y_test.to(device),
        split.name,
    )


def _setup(threads: int, device: str) -> torch.device:
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
    torch.set_num_threads(threads)
    return torch.device(device)


def plot_curves(out: Path, curves: dict[str, list[list[float]]], title: str) -> Path | None:
    """Mean test accuracy per epoch for each optimizer (``out/test_accuracy.png``); None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    for name, runs in curves.items():
        mean = np.mean(np.asarray(runs), axis=0)
        ax.plot(np.arange(1, len(mean) + 1), mean, label=name)
    ax.set(xlabel="epoch", ylabel="test accuracy (%)", title=title)
    ax.set_ylim(bottom=max(0.0, ax.get_ylim()[0]))
    ax.legend()
    fig.tight_layout()
    path = out / PLOT
    fig.savefig(path)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------ jobs


def run_demo(
    cfg: DemoConfig, out: str | Path | None = None, progress: Progress = None
) -> DemoResult:
    """Train the MLP with each of ``cfg.optimizers`` for ``cfg.seeds`` seeds; the plot goes to ``out``.

    ``progress`` is called with 1 after every epoch of every run (``seeds × optimizers × epochs``)."""
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    name, note = resolve_data(cfg.data)
    device = _setup(cfg.threads, cfg.device)
    split = _to(_load(name, cfg.seed), device)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in cfg.optimizers}
    curves: dict[str, list[list[float]]] = {n: [] for n in cfg.optimizers}
    for opt_name in cfg.optimizers:
        for seed in seeds:
            torch.manual_seed(seed)
            model = MLP(split.n_features, split.n_classes, tuple(cfg.hidden)).to(device)
            res = train(
                model,
                opt_name,
                split,
                epochs=cfg.epochs,
                batch_size=cfg.batch_size,
                seed=seed,
                progress=progress,
                eval_every=1,
            )
            run = {"seed": seed, **{k: v for k, v in vars(res).items() if k != "history"}}
            if cfg.sharpness:
                x, y = split.x_train[:2000], split.y_train[:2000]
                run["lambda_max"] = top_hessian_eigenvalue(model, x, y, seed=seed)
            runs[opt_name].append(run)
            curves[opt_name].append([h["test_accuracy"] for h in res.history])
    summary: dict[str, dict[str, Any]] = {}
    for opt_name, rs in runs.items():
        accs = [r["test_accuracy"] for r in rs]
        summary[opt_name] = {
            "test_accuracy_mean": statistics.fmean(accs),
            "test_accuracy_std": statistics.stdev(accs) if len(accs) > 1 else None,  # ddof=1
            "test_loss_mean": statistics.fmean(r["test_loss"] for r in rs),
            "train_loss_mean": statistics.fmean(r["train_loss"] for r in rs),
            "ms_per_step_median": 1000 * statistics.median(r["seconds_per_step"] for r in rs),
            "hvp_calls": rs[0]["hvp_calls"],
        }
        if cfg.sharpness:
            summary[opt_name]["lambda_max_mean"] = statistics.fmean(r["lambda_max"] for r in rs)
    title = f"{split.name} MLP, {len(seeds)} seed(s)"
    plot = plot_curves(Path(out), curves, title) if out is not None else None
    return DemoResult(
        split.name,
        note,
        len(split.x_train),
        len(split.x_test),
        cfg.epochs,
        seeds,
        summary,
        runs,
        curves,
        plot,
    )


def run_train(
    cfg: TrainConfig, out: str | Path | None = None, progress: Progress = None
) -> TrainRun:
    """Train one MLP; with ``out``, write ``checkpoint.pt`` (what :func:`run_evaluate` reads) and the
    accuracy plot there. ``progress`` is called with 1 after every epoch."""
    name, note = resolve_data(cfg.data)
    device = _setup(cfg.threads, cfg.device)
    split = _to(_load(name, cfg.seed, cfg.max_train, cfg.max_test), device)
    torch.manual_seed(cfg.seed)
    model = MLP(split.n_features, split.n_classes, tuple(cfg.hidden)).to(device)
    overrides = cfg.overrides()
    res = train(
        model,
        cfg.optimizer,
        split,
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        overrides=overrides,
        progress=progress,
        eval_every=1,
    )
    run = TrainRun(
        split.name,
        note,
        len(split.x_train),
        len(split.x_test),
        cfg.optimizer,
        overrides,
        res,
        model,
    )
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        run.checkpoint = out / CHECKPOINT
        torch.save(
            {
                "format": "sassha-optim checkpoint 1",
                "model": model.state_dict(),
                "hidden": list(cfg.hidden),
                "n_features": split.n_features,
                "n_classes": split.n_classes,
                "data": name,
                "seed": cfg.seed,
                "max_test": cfg.max_test,
                "max_train": cfg.max_train,  # same subset -> same standardization in evaluate
            },
            run.checkpoint,
        )
        curves = {cfg.optimizer: [[h["test_accuracy"] for h in res.history]]}
        run.plot = plot_curves(out, curves, split.name)
    return run


def read_checkpoint(path: str | Path) -> tuple[dict[str, Any], MLP]:
    """The checkpoint's fields and its model; :class:`ConfigError` (``checkpoint``) when it is not one
    that :func:`run_train` wrote."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, ValueError) as exc:
        raise ConfigError("checkpoint", f"{path}: cannot read it ({exc})") from exc
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise ConfigError("checkpoint", f"{path}: not a checkpoint written by 'sassha-optim train'")
    for key in ("n_features", "n_classes"):
        if not isinstance(ckpt.get(key), int) or ckpt[key] < 1:
            raise ConfigError("checkpoint", f"{path}: field {key!r} must be a positive integer")
    hidden = ckpt.get("hidden")
    if not isinstance(hidden, list) or not all(isinstance(h, int) and h >= 1 for h in hidden):
        raise ConfigError("checkpoint", f"{path}: field 'hidden' must be a list of widths >= 1")
    for key in ("max_train", "max_test"):
        value = ckpt.get(key)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ConfigError(
                "checkpoint", f"{path}: field {key!r} must be empty or an integer >= 1"
            )
    if not isinstance(ckpt.get("seed", 0), int):
        raise ConfigError("checkpoint", f"{path}: field 'seed' must be an integer")
    model = MLP(ckpt["n_features"], ckpt["n_classes"], tuple(hidden))
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as exc:
        message = str(exc).splitlines()[0]
        raise ConfigError("checkpoint", f"{path}: weights do not fit ({message})") from exc
    return ckpt, model


def run_evaluate(cfg: EvaluateConfig) -> EvaluateResult:
    """Test accuracy and loss of a checkpoint on its data (or ``cfg.data``), with λ_max and tr(H) of
    the training loss when ``cfg.sharpness``."""
    ckpt, model = read_checkpoint(cfg.checkpoint)
    if cfg.data is not None:
        name, note = resolve_data(cfg.data)
    else:
        stored = ckpt.get("data")
        if not (stored in DATA_NAMES or (isinstance(stored, str) and Path(stored).is_dir())):
            raise ConfigError(
                "data",
                f"the checkpoint's data {stored!r} is not available here; give data (a data "
                "folder, digits or synthetic)",
            )
        name, note = resolve_data(stored if stored in DATA_NAMES else Path(stored))
    device = _setup(cfg.threads, cfg.device)
    split = _load(name, int(ckpt.get("seed", 0)), ckpt.get("max_train"), ckpt.get("max_test"))
    if split.n_features != ckpt["n_features"]:
        message = f"{split.n_features} features, but the checkpoint expects {ckpt['n_features']}"
        raise ConfigError("data", message)
    if split.n_classes > ckpt["n_classes"]:
        message = f"labels up to {split.n_classes - 1}, but the checkpoint has {ckpt['n_classes']} classes"
        raise ConfigError("data", message)
    model, split = model.to(device), _to(split, device)
    metrics: dict[str, Any] = {"test": evaluate(model, split.x_test, split.y_test)}
    if cfg.sharpness:
        x, y = split.x_train[:2000], split.y_train[:2000]
        metrics["lambda_max"] = top_hessian_eigenvalue(model, x, y, seed=cfg.seed)
        metrics["hessian_trace"] = hessian_trace(model, x, y, seed=cfg.seed)
    return EvaluateResult(split.name, note, len(split.x_test), Path(cfg.checkpoint), metrics)
