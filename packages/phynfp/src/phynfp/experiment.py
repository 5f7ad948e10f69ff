"""The experiment behind ``phynfp train`` and the benchmarks: load a dataset by name, train PhyNFP and
the baselines on forward (and reversed) edges over several seeds, and measure error, directional
sensitivity and epoch time."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .config import DATASET_KINDS, parse_dataset, resolve_dataset
from .data import FluxDataset, load_metr_la, make_river
from .graph import is_dag, longest_path
from .models import MODEL_NAMES, PRESETS, build_model
from .sensitivity import gap, perturbation_response
from .training import TrainConfig, TrainingFailed, evaluate, fit

__all__ = [
    "DATASET_KINDS",
    "ExperimentConfig",
    "default_cache_dir",
    "load_dataset",
    "parse_dataset",
    "resolve_layers",
    "run_experiment",
]

SYMMETRIC = ("mlp", "gcn", "gat", "sage")  # orientation-invariant by construction
DETERMINISTIC = ("persistence", "climatology")


def default_cache_dir() -> Path:
    """``$PHYNFP_CACHE``, else ``$XDG_CACHE_HOME/phynfp``, else ``~/.cache/phynfp``."""
    if os.environ.get("PHYNFP_CACHE"):
        return Path(os.environ["PHYNFP_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "phynfp"


def load_dataset(text: str, **options: Any) -> FluxDataset:
    """Load a dataset by its CLI name. ``options`` go to the loader (unknown ones are ignored):
    river-synth: ``num_nodes, hours, routing, data_seed, train_stride, cache_dir``; wntr:
    ``scenarios, hours, data_seed, train_stride, cache_dir, progress``; metr-la: ``train_stride``;
    lamah: ``train_stride``. ``"metr-la"`` alone reads ``$ICML25_DATA/traffic_la_bay``."""
    if text == "metr-la":
        text = resolve_dataset(text)
    kind, arg = parse_dataset(text)
    cache = options.get("cache_dir")
    stride = int(options.get("train_stride") or 1)
    if kind == "river-synth":
        return make_river(
            int(options.get("num_nodes") or 64),
            int(options.get("hours") or 8760),
            routing=str(options.get("routing") or "muskingum"),
            seed=int(options.get("data_seed") or 0),
            train_stride=stride,
            cache_dir=cache,
        )
    assert arg is not None
    if kind == "wntr":
        from .wdn import load_wntr

        return load_wntr(
            arg,
            scenarios=int(options.get("scenarios") or 24),
            hours=int(options.get("hours") or 168),
            seed=int(options.get("data_seed") or 0),
            train_stride=stride,
            cache_dir=cache,
            progress=options.get("progress"),
        )
    if kind == "metr-la":
        return load_metr_la(arg, train_stride=stride)
    from .lamah import load_lamah

    return load_lamah(arg, stride=stride)


def resolve_layers(
    data: FluxDataset, layers: int | str = "auto", max_layers: int = 16
) -> tuple[int, str]:
    """L for this dataset: an integer as given, or ``"auto"`` = the longest directed path (largest over
    the dataset's graphs) capped at ``max_layers``; graphs with cycles use ``max_layers``."""
    if layers != "auto":
        return int(layers), "given"
    depths = []
    for g in data.groups:
        if not is_dag(g.edge_index, g.num_nodes):
            return max_layers, f"graph has cycles: auto uses max_layers = {max_layers}"
        depths.append(longest_path(g.edge_index, g.num_nodes))
    deepest = max(depths)
    if deepest > max_layers:
        return max_layers, f"longest path {deepest} capped at max_layers = {max_layers}"
    return max(1, deepest), f"longest path = {deepest}"


@dataclass
class ExperimentConfig:
    models: list[str] = field(default_factory=lambda: list(MODEL_NAMES))
    seeds: list[int] = field(default_factory=lambda: [0])
    hidden: int = 32
    layers: int | str = "auto"
    max_layers: int = 16
    train: TrainConfig = field(default_factory=TrainConfig)
    reverse: bool = True  # also train every learned model on reversed edges (G_train)
    reverse_symmetric: bool = True  # ... including the orientation-invariant ones
    preset: str = "default"
    mode: str | None = None  # None: the preset's
    orientation: str = "downstream"
    physics: str = "saint_venant"
    clamp: float | None = 10.0
    param_sharing: bool = False
    delta: float = 0.5
    perturb_windows: int = 256
    device: str = "cpu"

    def phynfp_options(self) -> dict[str, Any]:
        preset = {k: s.value for k, s in PRESETS[self.preset].items()}
        return {
            "mode": self.mode or preset["mode"],
            "orientation": self.orientation,
            "physics": self.physics,
            "clamp": self.clamp,
            "param_sharing": self.param_sharing,
            "dt_init": preset["dt_init"],
            "dg_init": preset["dg_init"],
            "eps_dx": preset["eps_dx"],
            "edge_hidden": preset["edge_hidden"],
        }


def _build(
    name: str, data: FluxDataset, cfg: ExperimentConfig, layers: int, seed: int
) -> nn.Module:
    torch.manual_seed(seed)
    return build_model(
        name,
        window=data.window,
        num_features=data.num_features,
        edge_dim=data.edge_dim,
        hidden_channels=cfg.hidden,
        num_layers=layers,
        target_index=data.target_index,
        phynfp_options=cfg.phynfp_options(),
    )


def _summary(values: list[float]) -> dict[str, float | int | None]:
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not finite:
        return {"mean": None, "std": None, "n": 0}
    mean = float(np.mean(finite))
    std = float(np.std(finite, ddof=1)) if len(finite) > 1 else None
    return {"mean": mean, "std": std, "n": len(finite)}


def run_experiment(
    data: FluxDataset,
    cfg: ExperimentConfig,
    *,
    progress: Callable[[int, str], Any] | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], dict[str, nn.Module]]:
    """Train and evaluate ``cfg.models`` on ``data``; returns (results, the forward models of the first
    seed). ``progress(total, desc)`` makes a progress bar (``_contract.progress``)."""
    unknown = [m for m in cfg.models if m not in MODEL_NAMES]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; choose from {MODEL_NAMES}")
    layers, rule = resolve_layers(data, cfg.layers, cfg.max_layers)
    reversed_data = data.reversed()
    say = log or (lambda text: None)
    results: dict[str, Any] = {
        "dataset": data.name,
        "dataset_info": data.describe(),
        "layers": layers,
        "layers_rule": rule,
        "hidden": cfg.hidden,
        "seeds": list(cfg.seeds),
        "experiment_config": {k: v for k, v in asdict(cfg).items() if k != "train"},
        "train_config": asdict(cfg.train),
        "phynfp_options": cfg.phynfp_options(),
        "models": {},
    }
    kept: dict[str, nn.Module] = {}
    for name in cfg.models:
        learned = name not in DETERMINISTIC
        seeds = cfg.seeds if learned else cfg.seeds[:1]
        runs = []
        for seed in seeds:
            train_cfg = TrainConfig(**{**asdict(cfg.train), "seed": seed})
            model = _build(name, data, cfg, layers, seed)
            bar = (
                progress(train_cfg.epochs, f"{name} seed {seed}") if progress and learned else None
            )
            try:
                fitted = fit(model, data, train_cfg, device=cfg.device, progress=bar)
            except TrainingFailed as exc:
                raise TrainingFailed(f"{name} seed {seed}: {exc}") from exc
            if bar is not None:
                bar.close()
            run: dict[str, Any] = {"seed": seed, "train": fitted.to_dict()}
            run["forward"] = evaluate(model, data, "test", device=cfg.device)
            run["flip_eval"] = evaluate(model, reversed_data, "test", device=cfg.device)
            run["g_flip"] = gap(run["flip_eval"]["mse"], run["forward"]["mse"])
            run["perturbation"] = perturbation_response(
                model, data, delta=cfg.delta, max_windows=cfg.perturb_windows
            )
            retrain = learned and cfg.reverse and (cfg.reverse_symmetric or name not in SYMMETRIC)
            if retrain:
                rev = _build(name, data, cfg, layers, seed)
                bar = (
                    progress(train_cfg.epochs, f"{name} seed {seed} reversed") if progress else None
                )
                try:
                    rev_fit = fit(rev, reversed_data, train_cfg, device=cfg.device, progress=bar)
                except TrainingFailed as exc:
                    raise TrainingFailed(f"{name} seed {seed} (flipped edges): {exc}") from exc
                if bar is not None:
                    bar.close()
                run["reversed"] = evaluate(rev, reversed_data, "test", device=cfg.device)
                run["reversed"]["best_epoch"] = rev_fit.best_epoch
                run["g_train"] = gap(run["reversed"]["mse"], run["forward"]["mse"])
            elif not learned or name in SYMMETRIC:
                run["reversed"] = None
                run["g_train"] = 0.0
                run["g_train_note"] = "orientation-invariant: the reversed run is identical"
            else:
                run["reversed"] = None
                run["g_train"] = None
            runs.append(run)
            if seed == seeds[0]:
                kept[name] = model
            say(
                f"{name:12s} seed {seed}: test MSE {run['forward']['mse']:.4f}"
                + (f", reversed {run['reversed']['mse']:.4f}" if run.get("reversed") else "")
                + f", leakage {run['perturbation']['leakage']:.3f}"
            )

        def key(
            f: Callable[[dict[str, Any]], float], runs: list[dict[str, Any]] = runs
        ) -> list[float]:
            return [f(r) for r in runs]

        results["models"][name] = {
            "deterministic": not learned,
            "runs": runs,
            "summary": {
                "mse": _summary(key(lambda r: r["forward"]["mse"])),
                "nse_median": _summary(key(lambda r: r["forward"]["nse_median"])),
                "nse_mean": _summary(key(lambda r: r["forward"]["nse_mean"])),
                "mse_reversed": _summary(
                    key(lambda r: r["reversed"]["mse"] if r.get("reversed") else float("nan"))
                ),
                "g_train": _summary(
                    key(lambda r: r["g_train"] if r.get("g_train") is not None else float("nan"))
                ),
                "g_flip": _summary(key(lambda r: r["g_flip"])),
                "leakage": _summary(key(lambda r: r["perturbation"]["leakage"])),
                "epoch_time_s": _summary(key(lambda r: r["train"]["epoch_time_median_s"])),
            },
        }
    ref = results["models"].get("gcn", {}).get("summary", {}).get("epoch_time_s", {}).get("mean")
    for name, entry in results["models"].items():
        own = entry["summary"]["epoch_time_s"]["mean"]
        entry["summary"]["epoch_time_ratio_to_gcn"] = (
            own / ref if ref and own is not None and name not in DETERMINISTIC else None
        )
    return results, kept
