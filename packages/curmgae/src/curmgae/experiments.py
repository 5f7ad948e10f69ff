"""The package's jobs as Python calls: :func:`run_pretrain`, :func:`run_evaluate`, :func:`run_demo`.

Each takes its config (:mod:`curmgae.config`) and returns a result object; none parses arguments,
prints tables or exits, so a script or notebook gets exactly what the command line gets::

    from curmgae.config import CurMGAEConfig, PretrainConfig
    from curmgae.experiments import run_pretrain

    result = run_pretrain(PretrainConfig(quick=True, model=CurMGAEConfig(epochs=30)), out="runs/a")
    result.metrics["val_auc"], result.checkpoint

Bad input (a data file or folder that does not load, a checkpoint from elsewhere) raises
:class:`~curmgae.config.ConfigError` naming the config field; the CLI reports it as the flag.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data

from ._contract import mean_std
from .config import (
    DATASET_NAMES,
    DIFFICULTY_NAMES,
    PROTOCOLS,
    SOURCES,
    ConfigError,
    CurMGAEConfig,
    DemoConfig,
    EvaluateConfig,
    PretrainConfig,
)
from .data import load_dataset, split_edges
from .method import CurMGAE, FitHistory
from .pipeline import (
    build_model,
    evaluate,
    load_checkpoint,
    make_config,
    plot_curriculum,
    pretrain,
    save_checkpoint,
)

__all__ = [
    "DemoResult",
    "EvaluateResult",
    "PretrainResult",
    "resolve_root",
    "run_demo",
    "run_evaluate",
    "run_pretrain",
]

PLOT = "curriculum.png"
CHECKPOINT = "model.pt"
DEMO_METHODS = ("curmgae", "s2gae", "gae")
METRICS = ("lp_auc", "lp_ap", "nc_svm_acc", "nc_probe_acc")
#: the folder under $ICML25_DATA holding each kind of named dataset
DATA_FOLDERS = {"planetoid": "planetoid", "coauthor": "coauthor", "amazon": "amazon"}


@dataclass
class PretrainResult:
    """What :func:`run_pretrain` produced: the summary metrics, the config it trained with, the
    history (losses, validation AUC, curriculum trace) and the files it wrote."""

    data: str
    method: str
    metrics: dict[str, Any]
    config: CurMGAEConfig
    history: FitHistory
    model: CurMGAE = field(repr=False)
    checkpoint: Path | None = None
    plot: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields of ``pretrain``'s results.json."""
        return {
            "data": self.data,
            "method": self.method,
            "metrics": self.metrics,
            "model_config": self.config.to_dict(),
            "config_sources": SOURCES,
            "history": self.history.to_dict(),
        }


@dataclass
class EvaluateResult:
    """Link-prediction and/or node-classification metrics of a checkpoint."""

    data: str
    checkpoint: Path
    method: str
    task: str
    protocols: list[str]
    features: str
    metrics: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class DemoResult:
    """Per method and seed, the metrics of the demo; the first Cur-MGAE run's curriculum trace."""

    data: str
    seeds: list[int]
    epochs: int
    per_seed: dict[str, dict[str, list[float]]]
    summary: dict[str, dict[str, dict[str, Any]]]
    trace: list[dict[str, Any]]
    base_shares: dict[str, float]
    plot: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k != "plot"}
        return {"data": self.data, "dataset": "synthetic", **out}


# ------------------------------------------------------------------------------------------ helpers


@contextlib.contextmanager
def _refuse(field_name: str, *extra: type[BaseException]) -> Iterator[None]:
    """Input errors raised by a loader become one :class:`ConfigError` naming ``field_name``."""
    errors: tuple[type[BaseException], ...] = (
        ValueError,
        OSError,
        EOFError,
        KeyError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        *extra,
    )
    try:
        yield
    except ConfigError:
        raise
    except errors as exc:
        if isinstance(exc, KeyError):
            text = f"missing field {exc.args[0]!r}" if exc.args else "missing field"
        elif isinstance(exc, EOFError):
            text = "the file is truncated or empty"
        elif isinstance(exc, OSError) and exc.strerror:
            text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        else:
            text = (str(exc).strip() or type(exc).__name__).splitlines()[0][:400]
        raise ConfigError(field_name, text) from exc


def _setup(threads: int, seed: int) -> None:
    torch.set_num_threads(threads)
    torch.manual_seed(seed)


def _dataset_value(value: str) -> str | Path:
    """A dataset as a checkpoint stores it (a string) back to a name or a file path."""
    lowered = {n.lower(): n for n in DATASET_NAMES}
    if value.lower() in lowered:
        return lowered[value.lower()]
    if value.lower().startswith(("planetoid:", "coauthor:", "amazon:", "file:")):
        return value  # names as curmgae 0.1.0 stored them
    return Path(value)


def resolve_root(dataset: str | Path, root: Path | None) -> Path | None:
    """``root``, or for a named real dataset without one ``$ICML25_DATA/<planetoid|coauthor|amazon>``
    (the shared-data root); ConfigError naming ``root`` when neither is there."""
    if root is not None or isinstance(dataset, Path):
        return root
    key = dataset.lower()
    if key == "synthetic" or key.startswith("file:"):
        return None
    kind = key.split(":", 1)[0] if ":" in key else "planetoid"
    folder = DATA_FOLDERS.get(kind)
    if folder is None:
        return None  # load_dataset names what it accepts
    base = os.environ.get("ICML25_DATA")
    where = Path(base) / folder if base else None
    if where is None or not where.is_dir():
        problem = f"{where} does not exist" if where else "ICML25_DATA is not set"
        raise ConfigError(
            "root",
            f"dataset={dataset!r} needs root (a folder holding <name>/raw) or $ICML25_DATA/{folder}; "
            f"{problem}",
        )
    return where


def _describe(data: Data, dataset: str | Path, root: Path | None, quick: bool) -> str:
    size = f"{data.num_nodes:,} nodes, {data.edge_index.size(1) // 2:,} undirected edges"
    if isinstance(dataset, Path):
        return f"file {dataset.name} ({size}, {data.num_features} features)"
    if dataset == "synthetic":
        mode = "quick" if quick else "full"
        return (
            f"synthetic curriculum graph (embedded, {mode} size; {size}; planted easy/medium/hard "
            "edges)"
        )
    where = f" from {root.name}/" if root is not None else ""
    return f"{dataset}{where} ({size}, {data.num_features} features)"


def _load(
    dataset: str | Path,
    root: Path | None,
    *,
    seed: int,
    quick: bool,
    split_seed: int,
    force_reload: bool,
) -> tuple[Data, str]:
    """Load and split a dataset; a bad file is a ConfigError naming dataset (files) or root (folders)."""
    name = "root" if isinstance(dataset, str) and dataset != "synthetic" else "dataset"
    with _refuse(name):
        data = load_dataset(dataset, root, seed=seed, quick=quick, force_reload=force_reload)
        split = split_edges(data, seed=split_seed)
    return split, _describe(data, dataset, root, quick)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def _check_trained(method: str, hist: FitHistory) -> None:
    """A run with a non-finite loss did not train: refuse to report its numbers (ConfigError on lr,
    the usual cause)."""
    bad = [i for i, x in enumerate(hist.losses, 1) if not math.isfinite(x)]
    if not hist.losses or bad:
        when = f"from epoch {bad[0]}" if bad else "no epoch ran"
        raise ConfigError(
            "lr", f"{method}: training failed (non-finite loss {when}); try a smaller lr"
        )


def _mean_std(values: list[float]) -> dict[str, Any]:
    mean, std = mean_std(values)  # std: sample std (ddof=1), None for one seed
    return {"mean": mean, "std": std, "n": len(values)}


# --------------------------------------------------------------------------------------------- jobs


def run_pretrain(
    cfg: PretrainConfig, out: str | Path | None = None, progress: bool = False
) -> PretrainResult:
    """Pretrain ``cfg.method`` (Algorithm 1 or a baseline) on ``cfg.dataset``; with ``out``, write
    ``model.pt`` (for :func:`run_evaluate`) and ``curriculum.png`` there."""
    model_cfg = cfg.model_config()
    _setup(cfg.threads, cfg.seed)
    root = resolve_root(cfg.dataset, cfg.root)
    data, desc = _load(
        cfg.dataset,
        root,
        seed=cfg.seed,
        quick=cfg.quick,
        split_seed=cfg.split_seed,
        force_reload=cfg.force_reload,
    )
    model, hist = pretrain(cfg.method, data, model_cfg, cfg.seed, progress=progress)
    _check_trained(cfg.method, hist)
    metrics = {
        "val_auc": max((a for _, a in hist.val_auc), default=float("nan")),
        "best_epoch": hist.best_epoch,
        "final_loss": hist.losses[-1],
        "median_epoch_s": _median(hist.epoch_times),
    }
    result = PretrainResult(desc, cfg.method, metrics, model_cfg, hist, model)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        dataset = cfg.dataset.resolve() if isinstance(cfg.dataset, Path) else cfg.dataset
        result.checkpoint = save_checkpoint(
            out / CHECKPOINT,
            model,
            config=model_cfg,
            method=cfg.method,
            dataset=dataset,
            root=root.resolve() if root is not None else None,
            split_seed=cfg.split_seed,
            quick=cfg.quick,
            seed=cfg.seed,
            in_channels=data.num_features,
        )
        if hist.trace and plot_curriculum(hist.trace, out / PLOT):
            result.plot = out / PLOT
    return result


def run_evaluate(cfg: EvaluateConfig, out: str | Path | None = None) -> EvaluateResult:
    """Score a checkpoint of :func:`run_pretrain` (``cfg.checkpoint``, else ``<out>/model.pt``) by link
    prediction on the same split's test edges and/or node classification."""
    _setup(cfg.threads, cfg.seed)
    if cfg.checkpoint is not None:
        path = cfg.checkpoint
    elif out is not None:
        path = Path(out) / CHECKPOINT
    else:
        raise ConfigError("checkpoint", "give checkpoint (a model.pt written by pretrain) or out")
    with _refuse("checkpoint", RuntimeError):
        ckpt = load_checkpoint(path)
    dataset = cfg.dataset if cfg.dataset is not None else _dataset_value(ckpt["dataset"])
    root = cfg.root if cfg.root is not None else ckpt["root"]
    root = resolve_root(dataset, Path(root) if root is not None else None)
    data, desc = _load(
        dataset,
        root,
        seed=int(ckpt["seed"]),
        quick=bool(ckpt["quick"]),
        split_seed=int(ckpt["split_seed"]),
        force_reload=cfg.force_reload,
    )
    if data.num_features != ckpt["in_channels"]:
        raise ConfigError(
            "dataset",
            f"the checkpoint was trained on {ckpt['in_channels']} node features; {desc} has "
            f"{data.num_features}",
        )
    tasks = ("link", "node") if cfg.task == "both" else (cfg.task,)
    if "node" in tasks and getattr(data, "y", None) is None:
        raise ConfigError("task", f"node classification needs node labels; {desc} has none")
    model = build_model(ckpt["method"], int(ckpt["in_channels"]), ckpt["config"])
    with _refuse("checkpoint", RuntimeError):
        model.load_state_dict(ckpt["state_dict"])
    protocols = PROTOCOLS if cfg.protocol == "both" else (cfg.protocol,)
    metrics = evaluate(
        model, data, tasks, protocols, cfg.features, cfg.seed, probe_epochs=cfg.probe_epochs
    )
    return EvaluateResult(
        desc, path, ckpt["method"], cfg.task, list(protocols), cfg.features, metrics
    )


def run_demo(cfg: DemoConfig, out: str | Path | None = None, progress: bool = False) -> DemoResult:
    """Cur-MGAE, the random-mask backbone (S2GAE) and PyG's GAE on the embedded synthetic graph with
    planted easy/medium/hard edges, over ``cfg.seeds`` training seeds; with ``out``, the curriculum
    plot of the first seed is written there."""
    _setup(cfg.threads, cfg.seed)
    epochs = cfg.epochs if cfg.epochs is not None else (30 if cfg.quick else 100)
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    data, desc = _load(
        "synthetic", None, seed=cfg.seed, quick=cfg.quick, split_seed=0, force_reload=False
    )
    small: dict[str, Any] = {"epochs": epochs, "eval_every": 5}
    if cfg.quick:
        small.update(hidden=64, batch_size=2048)
    per_seed: dict[str, dict[str, list[float]]] = {
        m: {k: [] for k in (*METRICS, "median_epoch_s")} for m in DEMO_METHODS
    }
    trace: list[dict[str, Any]] = []
    for seed in seeds:
        for method in DEMO_METHODS:
            model, hist = pretrain(method, data, make_config(method, **small), seed, progress)
            _check_trained(method, hist)
            res = evaluate(model, data, seed=seed)
            for k in METRICS:
                per_seed[method][k].append(res[k])
            per_seed[method]["median_epoch_s"].append(_median(hist.epoch_times))
            if method == "curmgae" and not trace:
                trace = hist.trace
    base = {
        n: float((data.train_difficulty == k).float().mean())
        for k, n in enumerate(DIFFICULTY_NAMES)
    }
    summary = {m: {k: _mean_std(v) for k, v in vals.items()} for m, vals in per_seed.items()}
    result = DemoResult(desc, seeds, epochs, per_seed, summary, trace, base)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        if plot_curriculum(trace, Path(out) / PLOT):
            result.plot = Path(out) / PLOT
    return result
