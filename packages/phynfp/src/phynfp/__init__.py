"""phynfp: topology-aware neural flux prediction guided by physics (PhyNFP, Jiang et al., ICML 2025).

The jobs: ``run_train(TrainRunConfig(...))``, ``run_demo(DemoConfig(...))`` and
``run_evaluate(EvaluateConfig(...))`` (the CLI's ``train``/``demo``/``evaluate``, same fields as the
flags). ``PhyNFPConv`` is a PyG ``MessagePassing`` layer (learned directional difference operators inside an
explicit Saint-Venant update); ``PhyNFP`` is the full model; ``GraphBaseline`` wraps the PyG baselines.
Datasets: ``make_river`` (river-synth), ``load_wntr`` (EPANET networks via wntr), ``load_metr_la`` /
``load_dcrnn`` (traffic sensor graphs) and ``load_lamah`` (LamaH-CE folders).

The names below load on first use (PEP 562), so ``phynfp --help`` and ``phynfp.config`` do not import
torch.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("phynfp")

# name -> submodule that defines it
_LAZY = {
    "ConfigError": "config",
    "DemoConfig": "config",
    "EvaluateConfig": "config",
    "TrainRunConfig": "config",
    "EvaluateResult": "jobs",
    "RunResult": "jobs",
    "run_demo": "jobs",
    "run_evaluate": "jobs",
    "run_train": "jobs",
    "FluxDataset": "data",
    "GraphGroup": "data",
    "chronological_split": "data",
    "load_dcrnn": "data",
    "load_metr_la": "data",
    "make_river": "data",
    "ExperimentConfig": "experiment",
    "load_dataset": "experiment",
    "resolve_layers": "experiment",
    "run_experiment": "experiment",
    "check_graph": "graph",
    "check_tree": "graph",
    "downstream_nodes": "graph",
    "is_dag": "graph",
    "longest_path": "graph",
    "perturbation_node": "graph",
    "symmetrize": "graph",
    "upstream_nodes": "graph",
    "load_lamah": "lamah",
    "write_lamah_folder": "lamah",
    "EdgeMLP": "layers",
    "PhyNFPConv": "layers",
    "Climatology": "models",
    "GraphBaseline": "models",
    "PRESETS": "models",
    "Persistence": "models",
    "PhyNFP": "models",
    "build_model": "models",
    "build_pattern": "operators",
    "difference_operator": "operators",
    "RiverConfig": "river",
    "RiverSim": "river",
    "simulate_river": "river",
    "gap": "sensitivity",
    "perturbation_response": "sensitivity",
    "TrainConfig": "training",
    "TrainResult": "training",
    "TrainingFailed": "training",
    "evaluate": "training",
    "fit": "training",
    "nse": "training",
    "predict": "training",
    "junction_balance": "wdn",
    "load_wntr": "wdn",
    "simulate_wntr": "wdn",
}

__all__ = [
    "PRESETS",
    "Climatology",
    "ConfigError",
    "DemoConfig",
    "EdgeMLP",
    "EvaluateConfig",
    "EvaluateResult",
    "ExperimentConfig",
    "FluxDataset",
    "GraphBaseline",
    "GraphGroup",
    "Persistence",
    "PhyNFP",
    "PhyNFPConv",
    "RiverConfig",
    "RiverSim",
    "RunResult",
    "TrainConfig",
    "TrainResult",
    "TrainRunConfig",
    "TrainingFailed",
    "__version__",
    "build_model",
    "build_pattern",
    "check_graph",
    "check_tree",
    "chronological_split",
    "difference_operator",
    "downstream_nodes",
    "evaluate",
    "fit",
    "gap",
    "is_dag",
    "junction_balance",
    "load_dataset",
    "load_dcrnn",
    "load_lamah",
    "load_metr_la",
    "load_wntr",
    "longest_path",
    "make_river",
    "nse",
    "perturbation_node",
    "perturbation_response",
    "predict",
    "resolve_layers",
    "run_demo",
    "run_evaluate",
    "run_experiment",
    "run_train",
    "simulate_river",
    "simulate_wntr",
    "symmetrize",
    "upstream_nodes",
    "write_lamah_folder",
]

if TYPE_CHECKING:
    from .config import (
        ConfigError,
        DemoConfig,
        EvaluateConfig,
        TrainRunConfig,
    )
    from .data import (
        FluxDataset,
        GraphGroup,
        chronological_split,
        load_dcrnn,
        load_metr_la,
        make_river,
    )
    from .experiment import (
        ExperimentConfig,
        load_dataset,
        resolve_layers,
        run_experiment,
    )
    from .graph import (
        check_graph,
        check_tree,
        downstream_nodes,
        is_dag,
        longest_path,
        perturbation_node,
        symmetrize,
        upstream_nodes,
    )
    from .jobs import (
        EvaluateResult,
        RunResult,
        run_demo,
        run_evaluate,
        run_train,
    )
    from .lamah import (
        load_lamah,
        write_lamah_folder,
    )
    from .layers import (
        EdgeMLP,
        PhyNFPConv,
    )
    from .models import (
        PRESETS,
        Climatology,
        GraphBaseline,
        Persistence,
        PhyNFP,
        build_model,
    )
    from .operators import (
        build_pattern,
        difference_operator,
    )
    from .river import (
        RiverConfig,
        RiverSim,
        simulate_river,
    )
    from .sensitivity import (
        gap,
        perturbation_response,
    )
    from .training import (
        TrainConfig,
        TrainingFailed,
        TrainResult,
        evaluate,
        fit,
        nse,
        predict,
    )
    from .wdn import (
        junction_balance,
        load_wntr,
        simulate_wntr,
    )


_SUBMODULES = (
    "config", "data", "experiment", "graph", "jobs", "lamah", "layers", "models", "operators", "river",
    "sensitivity", "training", "wdn",
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
