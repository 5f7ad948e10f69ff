"""The package's jobs as Python calls: ``run_train``, ``run_demo`` and ``run_evaluate`` on the configs of
:mod:`phynfp.config` (the same fields as the CLI's flags). Each returns a result object; none parses
argv, prints a table or exits.

>>> from phynfp import TrainRunConfig, run_train
>>> result = run_train(TrainRunConfig(nodes=12, hours=1500, epochs=2, models=("gcn", "phynfp")))  # doctest: +SKIP
>>> result.results["models"]["phynfp"]["summary"]["mse"]  # doctest: +SKIP
"""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .config import (
    CHECKPOINT_FORMAT,
    MODEL_NAMES,
    QUICK,
    QUICK_MODELS,
    ConfigError,
    DemoConfig,
    EvaluateConfig,
    TrainRunConfig,
)
from .data import FluxDataset
from .experiment import ExperimentConfig, default_cache_dir, load_dataset, run_experiment
from .training import TrainConfig

__all__ = [
    "EvaluateResult",
    "RunResult",
    "experiment_config",
    "load_checkpoint",
    "load_named",
    "run_demo",
    "run_evaluate",
    "run_train",
]

# progress(total, desc) -> a bar with update()/close() (phynfp's CLI hands in the contract's lazy bars)
Progress = Callable[[Any, str], Any]
_LOAD_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    KeyError,
    UnicodeDecodeError,
    ImportError,
    RuntimeError,
    pickle.UnpicklingError,
    zipfile.BadZipFile,
)


@dataclass
class RunResult:
    """What ``run_train``/``run_demo`` return: ``results`` (the fields of results.json), the first
    seed's trained models (forward edges), the dataset, and the checkpoint written (if any)."""

    results: dict[str, Any]
    models: dict[str, nn.Module] = field(repr=False)
    data: FluxDataset = field(repr=False)
    checkpoint: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        return self.results


@dataclass
class EvaluateResult:
    """What ``run_evaluate`` returns: test error on forward and reversed edges and the leakage."""

    dataset: str
    test: dict[str, Any]
    flip_eval: dict[str, Any]
    g_flip: float
    perturbation: dict[str, Any]
    data_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset_arg": self.dataset,
            "test": self.test,
            "flip_eval": self.flip_eval,
            "g_flip": self.g_flip,
            "perturbation": self.perturbation,
        }


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    if isinstance(exc, EOFError):
        return "the file is truncated or empty"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:400]


def _set_threads(threads: int | None) -> None:
    if threads is not None:
        torch.set_num_threads(threads)


def load_named(spec: str, options: dict[str, Any], progress: Progress | None = None) -> FluxDataset:
    """``load_dataset(spec, **options)`` with a progress bar for the wntr simulations; a dataset that
    cannot be read raises :class:`ConfigError` naming ``dataset``."""
    wntr = spec.startswith("wntr:") and progress is not None
    bar = progress(options.get("scenarios"), "simulating scenarios") if wntr and progress else None
    if bar is not None:
        options = {**options, "progress": bar}
    try:
        return load_dataset(spec, **options)
    except _LOAD_ERRORS as exc:
        raise ConfigError("dataset", _message(exc)) from exc
    finally:
        if bar is not None:
            bar.close()


def _data_options(cfg: TrainRunConfig | DemoConfig, quick: bool = False) -> dict[str, Any]:
    return {
        "num_nodes": QUICK["nodes"] if quick else cfg.nodes,
        "hours": QUICK["hours"] if quick else cfg.hours,
        "routing": cfg.routing,
        "scenarios": cfg.scenarios,
        "data_seed": cfg.data_seed,
        "train_stride": cfg.train_stride,
    }


def experiment_config(
    cfg: TrainRunConfig | DemoConfig,
    *,
    models: tuple[str, ...] | None = None,
    epochs: int | None = None,
    max_batches: int | None = None,
) -> ExperimentConfig:
    """The :class:`ExperimentConfig` (and its :class:`TrainConfig`) a job config stands for."""
    return ExperimentConfig(
        models=list(models or cfg.models or MODEL_NAMES),
        seeds=[cfg.seed + i for i in range(cfg.num_seeds)],
        hidden=cfg.hidden,
        layers="auto" if cfg.layers is None else cfg.layers,
        max_layers=cfg.max_layers,
        train=TrainConfig(
            epochs=epochs or cfg.epochs,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            weight_decay=cfg.weight_decay,
            clip=cfg.clip,
            accumulate=cfg.accumulate,
            max_batches=max_batches if max_batches is not None else cfg.max_batches,
            physics_loss_weight=cfg.physics_loss_weight,
        ),
        reverse=cfg.reverse,
        preset=cfg.preset,
        mode=cfg.mode,
        orientation=cfg.orientation,
        physics=cfg.physics,
        clamp=cfg.clamp,
        param_sharing=cfg.param_sharing,
        delta=cfg.delta,
        device=cfg.device,
    )


def _run(
    cfg: TrainRunConfig | DemoConfig,
    spec: str,
    options: dict[str, Any],
    cache: Path | None,
    exp: ExperimentConfig,
    progress: Progress | None,
    log: Callable[[str], None] | None,
    label: str = "",
) -> RunResult:
    _set_threads(cfg.threads)
    data = load_named(spec, {**options, "cache_dir": cache}, progress)
    if cfg.preset == "official":
        data = data.with_headwater_reverse_edges()
    if log:
        log(f"data: {label or data.describe()}")
    torch.manual_seed(cfg.seed)
    results, models = run_experiment(data, exp, progress=progress, log=log)
    results["data_options"] = options
    return RunResult(results, models, data)


def run_train(
    cfg: TrainRunConfig,
    out: str | Path | None = None,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> RunResult:
    """Train ``cfg.models`` on ``cfg.dataset`` (forward and, with ``cfg.reverse``, reversed edges) and
    measure error and directional sensitivity. With ``out``, writes the first seed's PhyNFP as
    ``out/model.pt`` (for :func:`run_evaluate`). Raises :class:`~phynfp.TrainingFailed` when a model
    trained nothing (every batch non-finite)."""
    options = _data_options(cfg)
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
    result = _run(cfg, cfg.dataset, options, cache, experiment_config(cfg), progress, log)
    result.results["dataset_arg"] = cfg.dataset
    if out is not None and "phynfp" in result.models:
        result.checkpoint = Path(out) / "model.pt"
        torch.save(_checkpoint(cfg, result, options), result.checkpoint)
    return result


def run_demo(
    cfg: DemoConfig | None = None,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> RunResult:
    """The train job on the embedded river-synth data, simulated in memory (``cfg.quick``: a small
    river, 4 epochs of 12 batches, six models)."""
    cfg = cfg or DemoConfig()
    options = _data_options(cfg, quick=cfg.quick)
    hours = options["hours"] or 8760
    label = (
        f"river-synth (embedded synthetic river tree: {options['num_nodes']} nodes, {hours} hours, "
        f"{options['routing']} routing; simulated in memory, no download)"
    )
    exp = experiment_config(
        cfg,
        models=QUICK_MODELS if cfg.quick else None,
        epochs=QUICK["epochs"] if cfg.quick else None,
        max_batches=QUICK["max_batches"] if cfg.quick else None,
    )
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else None  # None: in memory
    result = _run(cfg, "river-synth", options, cache, exp, progress, log, label)
    result.results["quick"] = cfg.quick
    return result


def _checkpoint(cfg: TrainRunConfig, result: RunResult, options: dict[str, Any]) -> dict[str, Any]:
    data, results = result.data, result.results
    return {
        "format": CHECKPOINT_FORMAT,
        "model": "phynfp",
        "state_dict": result.models["phynfp"].state_dict(),
        "build": {
            "window": data.window,
            "num_features": data.num_features,
            "edge_dim": data.edge_dim,
            "hidden_channels": results["hidden"],
            "num_layers": results["layers"],
            "target_index": data.target_index,
            "phynfp_options": results["phynfp_options"],
            "headwater_reverse_edges": cfg.preset == "official",
        },
        "dataset": cfg.dataset,
        "data_options": options,
    }


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """A checkpoint written by :func:`run_train`; :class:`ConfigError` naming ``checkpoint`` else."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except _LOAD_ERRORS as exc:
        raise ConfigError("checkpoint", f"{path}: {_message(exc)}") from exc
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ConfigError(
            "checkpoint", f"{path} is not a phynfp checkpoint (written by phynfp train)"
        )
    return ckpt


def run_evaluate(
    cfg: EvaluateConfig,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> EvaluateResult:
    """Evaluate a PhyNFP checkpoint on its dataset (or ``cfg.dataset``): test MSE/NSE, the same on
    reversed edges (``g_flip``) and the perturbation leakage."""
    from .models import build_model
    from .sensitivity import gap, perturbation_response
    from .training import evaluate

    _set_threads(cfg.threads)
    ckpt = load_checkpoint(cfg.checkpoint)
    try:
        spec = cfg.dataset or str(ckpt["dataset"])
        build = ckpt["build"]
        options = {**ckpt.get("data_options", {})}
    except (KeyError, TypeError) as exc:
        raise ConfigError("checkpoint", f"{cfg.checkpoint}: {_message(exc)}") from exc
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
    data = load_named(spec, {**options, "cache_dir": cache}, progress)
    if build.get("headwater_reverse_edges"):
        data = data.with_headwater_reverse_edges()
    shape = (build["window"], build["num_features"], build["edge_dim"])
    if (data.window, data.num_features, data.edge_dim) != shape:
        raise ConfigError(
            "checkpoint",
            f"the checkpoint was trained on windows of {shape[0]} steps × {shape[1]} variables with "
            f"{shape[2]} edge features; {spec} has {data.window} × {data.num_features} and "
            f"{data.edge_dim}",
        )
    try:
        model = build_model(
            ckpt["model"],
            window=build["window"],
            num_features=build["num_features"],
            edge_dim=build["edge_dim"],
            hidden_channels=build["hidden_channels"],
            num_layers=build["num_layers"],
            target_index=build["target_index"],
            phynfp_options=build["phynfp_options"],
        )
        model.load_state_dict(ckpt["state_dict"])
    except (KeyError, ValueError, RuntimeError) as exc:
        raise ConfigError("checkpoint", f"{cfg.checkpoint}: {_message(exc)}") from exc
    if log:
        log(f"data: {data.describe()}")
    forward = evaluate(model, data, "test")
    flipped = evaluate(model, data.reversed(), "test")
    pert = perturbation_response(model, data, delta=cfg.delta)
    return EvaluateResult(
        spec, forward, flipped, gap(flipped["mse"], forward["mse"]), pert, data.describe()
    )
