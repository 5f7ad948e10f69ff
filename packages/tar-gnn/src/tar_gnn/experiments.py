"""The package's jobs as Python calls: :func:`run_train`, :func:`run_evaluate`, :func:`run_split`,
:func:`run_demo`.

Each takes its config (:mod:`tar_gnn.config`) and returns a result object; none parses arguments,
prints or exits, so a script or notebook gets exactly what the command line gets::

    from tar_gnn import TrainRunConfig, run_train

    result = run_train(TrainRunConfig(dataset="cora", shift="covariate", epochs=50), out="runs/cora")
    result.methods["tar"]["mean_std"]["ood_test_acc"], result.checkpoint

``dataset="cora"`` (citeseer, pubmed) without ``data`` reads ``$ICML25_DATA/planetoid/Cora``. Bad input
(a file that does not load, a method the data cannot train, a run whose loss stops being finite)
raises :class:`~tar_gnn.config.ConfigError` naming the config field; the CLI reports it as the flag.
"""

from __future__ import annotations

import contextlib
import pickle
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ._contract import mean_std
from .config import (
    ENV_METHODS,
    ConfigError,
    DataConfig,
    DemoConfig,
    EvaluateConfig,
    ShiftConfig,
    SplitConfig,
    TrainConfig,
    TrainRunConfig,
)
from .data import (
    load_file,
    load_good_processed,
    load_planetoid,
    load_split,
    make_csbm_ood,
    save_split,
)
from .flow import StepSizeError
from .methods import ERM, TAR, make_method, per_node_loss
from .models import GNN
from .reweighter import TARWeighter, weight_diagnostics
from .splits import MASKS, ShiftSplit, make_split
from .train import NonFiniteLossError, config_dict, evaluate_masks, train_node_classifier

__all__ = [
    "NOTICE",
    "DemoResult",
    "EvaluateResult",
    "SplitResult",
    "TrainRunResult",
    "apply_split",
    "load_graph",
    "run_demo",
    "run_evaluate",
    "run_split",
    "run_train",
    "train_methods",
]

NOTICE = (
    "note: the TAR update rule is a reconstruction (no official code; the paper's method section was "
    "not available): see the README"
)
SUMMARY_KEYS = ("ood_test_acc", "id_test_acc", "ood_val_acc", "epoch_time_s")
Progress = Callable[[int], object] | None


@dataclass
class TrainRunResult:
    """What :func:`run_train` measured: per method its options, runs (one per seed) and mean ± std."""

    dataset: str
    data_name: str
    split: dict[str, Any]
    sizes: dict[str, int]
    train_config: dict[str, Any]
    seeds: list[int]
    methods: dict[str, Any]
    reconstruction_notice: str = NOTICE
    checkpoint: Path | None = None
    models: dict[str, tuple[GNN, Any]] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        keys = ("dataset", "split", "sizes", "train_config", "seeds", "methods")
        return {**{k: getattr(self, k) for k in keys}, "reconstruction_notice": NOTICE}


@dataclass
class EvaluateResult:
    """Accuracy, balanced accuracy and macro-F1 of a checkpoint on every mask."""

    dataset: str
    method: str
    metrics: dict[str, float]
    sizes: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class SplitResult:
    """The masks built (sizes, how, the training environments) and the split file written."""

    dataset: str
    num_nodes: int
    sizes: dict[str, int]
    split: dict[str, Any]
    train_envs: list[int]
    shift_split: ShiftSplit = field(repr=False)
    path: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        keys = ("dataset", "num_nodes", "sizes", "split", "train_envs")
        return {k: getattr(self, k) for k in keys}


@dataclass
class DemoResult:
    """The demo's methods (as :class:`TrainRunResult`'s) and TAR's weights at an ERM checkpoint."""

    n_nodes: int
    quick: bool
    sizes: dict[str, int]
    train_config: dict[str, Any]
    seeds: list[int]
    methods: dict[str, Any]
    mechanism: dict[str, dict[str, float]]
    labels: dict[str, str]

    def as_dict(self) -> dict[str, Any]:
        keys = ("sizes", "train_config", "seeds", "methods", "mechanism")
        out = {k: getattr(self, k) for k in keys}
        return {"dataset": "csbm-concept", **out, "reconstruction_notice": NOTICE}


# ------------------------------------------------------------------------------------- data, split


@contextlib.contextmanager
def _blame(name: str, *extra: type[BaseException]) -> Iterator[None]:
    """Input errors raised inside the block (a bad file, a missing field) as a ConfigError on ``name``."""
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
        else:
            text = (str(exc).strip() or type(exc).__name__).splitlines()[0][:400]
        raise ConfigError(name, text) from exc


def load_graph(cfg: DataConfig, shift: ShiftConfig | None = None) -> Any:
    """The graph ``cfg`` names (csbm: generated, masks included, shaped by ``shift``)."""
    if cfg.dataset == "csbm":
        mode = shift.csbm_mode() if shift is not None else "concept"
        return make_csbm_ood(cfg.n_nodes, shift=mode, seed=cfg.split_seed)
    assert cfg.data is not None  # DataConfig resolved it (given, or under $ICML25_DATA)
    with _blame("data"):
        if cfg.dataset in ("cora", "citeseer", "pubmed", "planetoid"):
            return load_planetoid(cfg.data, None if cfg.dataset == "planetoid" else cfg.dataset)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            if cfg.dataset == "good":
                kind = shift.shift if shift is not None else "covariate"
                kind = kind if kind in ("covariate", "concept") else "covariate"
                domain = shift.domain if shift is not None else "degree"
                return load_good_processed(cfg.data, cfg.good_name, domain, kind)
            return load_file(cfg.data)


def _domain_values(path: Path, n: int) -> torch.Tensor:
    if path.suffix.lower() == ".npy":
        values = np.load(path, allow_pickle=False)
    else:
        text = path.read_text(encoding="utf-8").replace(",", " ").split()
        if not text:
            raise ValueError(f"{path}: the file is empty")
        try:
            values = np.array([float(v) for v in text])
        except ValueError as exc:
            raise ValueError(f"{path}: not a list of numbers ({exc})") from exc
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size != n:
        raise ValueError(f"{path}: {values.size} values, expected one per node ({n})")
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"{path}: row {bad} is NaN or inf")
    return torch.from_numpy(values)


def apply_split(
    data: Any, cfg: SplitConfig | TrainRunConfig, split_file: str | Path | None = None
) -> tuple[Any, dict[str, Any]]:
    """Masks from ``split_file``, the data itself (csbm, GOOD, shift given) or the GOOD-protocol
    builders; returns the data with its masks and a description of where they came from."""
    if split_file is not None:
        with _blame("split"):
            split = load_split(split_file, int(data.num_nodes))
        return split.apply(data), {"source": "file", **split.info}
    if cfg.dataset in ("csbm", "good") or cfg.shift == "given":
        for mask in ("train_mask", "ood_val_mask", "ood_test_mask"):
            if getattr(data, mask, None) is None:
                raise ConfigError("shift", f"the data holds no {mask}; choose covariate or concept")
        info: dict[str, Any] = {
            "source": cfg.dataset if cfg.dataset in ("csbm", "good") else "given"
        }
        if cfg.dataset == "csbm":
            info["csbm_shift"] = cfg.csbm_mode()
        return data, info
    domain: Any = cfg.domain
    if cfg.domain_file is not None:
        with _blame("domain_file"):
            domain = _domain_values(Path(cfg.domain_file), int(data.num_nodes))
    kwargs: dict[str, Any] = {}
    if cfg.shift == "covariate":
        kwargs = {"order": cfg.order, "num_envs": cfg.num_envs, "fallback": cfg.split_fallback}
    elif cfg.shift == "concept":
        kwargs = {"label_stat": cfg.label_stat}
    with _blame("domain_file" if cfg.domain_file is not None else "domain"):
        split = make_split(data, cfg.shift, domain, seed=cfg.split_seed, **kwargs)
    return split.apply(data), {"source": "built", **split.info}


def _sizes(data: Any) -> dict[str, int]:
    return {m: int(getattr(data, m).sum()) for m in MASKS if getattr(data, m, None) is not None}


def _has_env(data: Any) -> bool:
    env = getattr(data, "env_id", None)
    return env is not None and bool((env[data.train_mask] >= 0).any())


# ----------------------------------------------------------------------------------------- training


def train_methods(
    data: Any,
    options: dict[str, tuple[str, dict[str, Any]]],
    seeds: list[int],
    cfg: TrainConfig,
    progress: Progress = None,
) -> tuple[dict[str, Any], dict[str, tuple[GNN, Any]]]:
    """Train each ``label: (method, its options)`` once per seed under the same loop.

    Returns per label its options, runs and mean ± sample std (``{"skipped": why}`` for an
    environment-based method on data without environments), and per label the last seed's model and
    method. A loss that stops being finite raises :class:`ConfigError` on ``lr``.
    """
    has_env = _has_env(data)
    flagged = getattr(data, "minority", None)
    results: dict[str, Any] = {}
    models: dict[str, tuple[GNN, Any]] = {}
    for label, (name, kwargs) in options.items():
        if name in ENV_METHODS and not has_env:
            results[label] = {"skipped": "needs training environments (env_id); the data has none"}
            continue
        runs = []
        for seed in seeds:
            method = make_method(name, **kwargs)
            try:
                res = train_node_classifier(
                    data,
                    method,
                    cfg,
                    seed=seed,
                    flagged=flagged,
                    on_epoch=_tick(progress),
                )
            except NonFiniteLossError as exc:
                raise ConfigError("lr", f"{label}, seed {seed}: {exc}") from exc
            except StepSizeError as exc:  # on_exceed raise: the bound depends on the losses met
                raise ConfigError("step_size", str(exc)) from exc
            entry: dict[str, Any] = {"seed": seed, **res.metrics}
            if isinstance(method, TAR) and res.diagnostics:
                entry["tar_diagnostics_at_best_epoch"] = res.diagnostics[res.best_epoch]
            runs.append(entry)
            models[label] = (res.model, method)
        summary = {k: mean_std([r[k] for r in runs]) for k in SUMMARY_KEYS}
        results[label] = {
            "options": models[label][1].options(),
            "runs": runs,
            "mean_std": {k: {"mean": m, "std": s} for k, (m, s) in summary.items()},
        }
    return results, models


def _tick(progress: Progress) -> Callable[[int, dict[str, float]], None] | None:
    if progress is None:
        return None
    bar = progress

    def tick(epoch: int, row: dict[str, float]) -> None:
        bar(1)

    return tick


def _method_options(cfg: TrainRunConfig, name: str) -> dict[str, Any]:
    return cfg.tar_options() if name == "tar" else cfg.method_options(name)


def run_train(
    cfg: TrainRunConfig, out: str | Path | None = None, progress: Progress = None
) -> TrainRunResult:
    """Train ``cfg.method`` and the baselines on the split, once per seed; with ``out``, write the
    method's last model to ``out/model.pt`` (for :func:`run_evaluate`). ``progress(1)`` per epoch."""
    data = load_graph(cfg, cfg)
    data, split_info = apply_split(data, cfg, cfg.split)
    if cfg.method in ENV_METHODS and not _has_env(data):
        raise ConfigError(
            "method",
            f"{cfg.method} needs training environments (env_id) and this dataset has none; "
            "use tar, erm, kldro, cvar or cbe",
        )
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    train = cfg.train_config(cfg.n_epochs)
    options = {name: (name, _method_options(cfg, name)) for name in cfg.methods}
    results, models = train_methods(data, options, seeds, train, progress)
    result = TrainRunResult(
        dataset=cfg.dataset,
        data_name=str(getattr(data, "name", cfg.dataset)),
        split=split_info,
        sizes=_sizes(data),
        train_config=config_dict(train),
        seeds=seeds,
        methods=results,
        models=models,
    )
    if out is not None:
        model, method = models[cfg.method]
        masks = {m: getattr(data, m) for m in MASKS if getattr(data, m, None) is not None}
        state = {
            "model": model.state_dict(),
            "model_config": model.config(),
            "method": cfg.method,
            "options": method.options(),
            "num_nodes": int(data.num_nodes),
            "masks": masks,
            "seed": seeds[-1],
        }
        result.checkpoint = Path(out) / "model.pt"
        torch.save(state, result.checkpoint)
    return result


def run_evaluate(cfg: EvaluateConfig) -> EvaluateResult:
    """Accuracy of a ``model.pt`` from :func:`run_train` on its masks (or ``cfg.split``'s)."""
    data = load_graph(cfg)
    with _blame("checkpoint", RuntimeError):
        state = torch.load(cfg.checkpoint, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or "model" not in state:
            raise ValueError(f"{cfg.checkpoint}: not a tar-gnn checkpoint (no 'model' entry)")
        if int(state["num_nodes"]) != int(data.num_nodes):
            raise ValueError(
                f"{cfg.checkpoint}: trained on a graph of {state['num_nodes']} nodes, the data has "
                f"{int(data.num_nodes)}"
            )
        model = GNN(**state["model_config"])
        model.load_state_dict(state["model"])
        if int(state["model_config"]["in_dim"]) != int(data.x.size(1)):
            raise ValueError(
                f"{cfg.checkpoint}: expects {state['model_config']['in_dim']} features"
            )
    if cfg.split is not None:
        with _blame("split"):
            data = load_split(cfg.split, int(data.num_nodes)).apply(data)
    else:
        for name, mask in state["masks"].items():
            setattr(data, name, mask)
    model = model.to(cfg.device)
    data = data.to(cfg.device)
    metrics = evaluate_masks(model, data)
    return EvaluateResult(cfg.dataset, str(state["method"]), metrics, _sizes(data))


def run_split(cfg: SplitConfig, out: str | Path | None = None) -> SplitResult:
    """GOOD-protocol shift masks for the data; with ``out``, written to ``out/split.npz``."""
    data = load_graph(cfg, cfg)
    data, info = apply_split(data, cfg)
    n = int(data.num_nodes)
    env = getattr(data, "env_id", None)
    dom = getattr(data, "domain_id", None)
    split = ShiftSplit(
        {m: getattr(data, m) for m in MASKS},
        env if env is not None else torch.full((n,), -1, dtype=torch.long),
        dom if dom is not None else torch.zeros(n, dtype=torch.long),
        info,
    )
    envs = sorted(int(e) for e in torch.unique(split.env_id[data.train_mask]).tolist())
    path = save_split(Path(out) / "split.npz", split) if out is not None else None
    return SplitResult(cfg.dataset, n, _sizes(data), info, envs, split, path)


DEMO_TAR = {"beta": 0.1, "steps": 20, "transport_graph": "induced"}
DEMO_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "erm": ("erm", {}),
    "tar": ("tar", DEMO_TAR),
    "tar@complete": ("tar", {**DEMO_TAR, "transport_graph": "complete"}),
    "tar@knn": ("tar", {**DEMO_TAR, "transport_graph": "knn:10"}),
    "kldro": ("kldro", {"beta": 1.0}),
    "cvar": ("cvar", {"alpha": 0.2}),
    "irm": ("irm", {"lam": 1.0}),
    "vrex": ("vrex", {"lam": 10.0}),
    "groupdro": ("groupdro", {"eta": 0.1}),
}
DEMO_LABELS = {"tar@complete": "tar (complete G0)", "tar@knn": "tar (knn:10 G0, GDRO-style)"}


def demo_plan(cfg: DemoConfig) -> tuple[int, list[int], TrainConfig]:
    """The demo's graph size, seeds and training config (``quick``: 600 nodes, 2 seeds, 100 epochs)."""
    n = 600 if cfg.quick else 2000
    seeds = [cfg.seed + i for i in range(2 if cfg.quick else 3)]
    train = TrainConfig(
        epochs=100 if cfg.quick else 200, hidden=64, layers=2, lr=1e-2, device=cfg.device
    )
    return n, seeds, train


def run_demo(cfg: DemoConfig, progress: Progress = None) -> DemoResult:
    """TAR vs ERM, KL-DRO, CVaR, IRM, V-REx, GroupDRO on the embedded concept shift, then TAR's weight
    on minority training nodes at a fixed ERM checkpoint for T_in = 0, 5, 20, 50 (one torch thread:
    the graph is tiny)."""
    n, seeds, train = demo_plan(cfg)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = make_csbm_ood(n, shift="concept", seed=cfg.seed)
        results, _ = train_methods(data, DEMO_METHODS, seeds, train, progress)
        erm = train_node_classifier(data, ERM(), train, seed=seeds[0])
        erm.model.eval()
        with torch.no_grad():
            logits = erm.model(data.x.to(cfg.device), data.edge_index.to(cfg.device)).cpu()
        loss = per_node_loss(logits[data.train_mask], data.y[data.train_mask])
        flagged = data.minority[data.train_mask]
        mech = {}
        for steps in (0, 5, 20, 50):
            q = TARWeighter(data, beta=0.1, steps=steps)(loss)
            mech[f"T_in={steps}"] = weight_diagnostics(q, loss, flagged, beta=0.1)
    finally:
        torch.set_num_threads(threads)
    return DemoResult(
        n, cfg.quick, _sizes(data), config_dict(train), seeds, results, mech, DEMO_LABELS
    )
