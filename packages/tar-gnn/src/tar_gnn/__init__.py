"""tar-gnn: topology-aware dynamic reweighting (TAR) for node classification under distribution shift.

Zheng, Liu, Li, Wu, Cui and Kong, *Topology-Aware Dynamic Reweighting for Distribution Shifts on Graph*,
ICML 2025 (arXiv 2406.01066). The TAR update rule here is a reconstruction (no official code exists and
the method section could not be read); every choice the paper fixes but we could not verify is an option.

The names below load on first use (PEP 562), so ``tar-gnn --help`` and ``tar_gnn.config`` do not
import torch. Start with :class:`TrainRunConfig` and :func:`run_train` (the ``train`` command as one
call), or :class:`TrainConfig` and :func:`train_node_classifier` on your own graph and method.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("tar-gnn")

# name -> submodule that defines it
_LAZY = {
    "BaselineConfig": "config",
    "ConfigError": "config",
    "DataConfig": "config",
    "DemoConfig": "config",
    "EvaluateConfig": "config",
    "ShiftConfig": "config",
    "SplitConfig": "config",
    "TARConfig": "config",
    "TrainConfig": "config",
    "TrainRunConfig": "config",
    "DemoResult": "experiments",
    "EvaluateResult": "experiments",
    "SplitResult": "experiments",
    "TrainRunResult": "experiments",
    "apply_split": "experiments",
    "load_graph": "experiments",
    "run_demo": "experiments",
    "run_evaluate": "experiments",
    "run_split": "experiments",
    "run_train": "experiments",
    "find_planetoid": "data",
    "load_file": "data",
    "load_good_processed": "data",
    "load_planetoid": "data",
    "load_split": "data",
    "make_csbm_ood": "data",
    "make_csbm_shift": "data",
    "save_split": "data",
    "validate_graph": "data",
    "FlowResult": "flow",
    "StepSizeError": "flow",
    "connected_components": "flow",
    "entropy_objective": "flow",
    "gibbs_limit": "flow",
    "gw_flow": "flow",
    "gw_step": "flow",
    "potential": "flow",
    "step_bound": "flow",
    "ERM": "methods",
    "IRM": "methods",
    "KLDRO": "methods",
    "METHODS": "methods",
    "TAR": "methods",
    "CVaR": "methods",
    "ClassBalancedERM": "methods",
    "GroupDRO": "methods",
    "Method": "methods",
    "StepContext": "methods",
    "VREx": "methods",
    "make_method": "methods",
    "per_node_loss": "methods",
    "GNN": "models",
    "TARWeighter": "reweighter",
    "TopologyAwareReweighter": "reweighter",
    "weight_diagnostics": "reweighter",
    "ShiftSplit": "splits",
    "domain_ids": "splits",
    "domain_values": "splits",
    "good_concept_split": "splits",
    "good_covariate_split": "splits",
    "long_tail_split": "splits",
    "make_split": "splits",
    "NonFiniteLossError": "train",
    "TrainResult": "train",
    "evaluate_masks": "train",
    "train_node_classifier": "train",
    "build_transport_graph": "transport",
    "edge_weights": "transport",
    "knn_graph": "transport",
    "parse_transport_graph": "transport",
}

__all__ = [
    "ERM",
    "GNN",
    "IRM",
    "KLDRO",
    "METHODS",
    "TAR",
    "BaselineConfig",
    "CVaR",
    "ClassBalancedERM",
    "ConfigError",
    "DataConfig",
    "DemoConfig",
    "DemoResult",
    "EvaluateConfig",
    "EvaluateResult",
    "FlowResult",
    "GroupDRO",
    "Method",
    "NonFiniteLossError",
    "ShiftConfig",
    "ShiftSplit",
    "SplitConfig",
    "SplitResult",
    "StepContext",
    "StepSizeError",
    "TARConfig",
    "TARWeighter",
    "TopologyAwareReweighter",
    "TrainConfig",
    "TrainResult",
    "TrainRunConfig",
    "TrainRunResult",
    "VREx",
    "__version__",
    "apply_split",
    "build_transport_graph",
    "connected_components",
    "domain_ids",
    "domain_values",
    "edge_weights",
    "entropy_objective",
    "evaluate_masks",
    "find_planetoid",
    "gibbs_limit",
    "good_concept_split",
    "good_covariate_split",
    "gw_flow",
    "gw_step",
    "knn_graph",
    "load_file",
    "load_good_processed",
    "load_graph",
    "load_planetoid",
    "load_split",
    "long_tail_split",
    "make_csbm_ood",
    "make_csbm_shift",
    "make_method",
    "make_split",
    "parse_transport_graph",
    "per_node_loss",
    "potential",
    "run_demo",
    "run_evaluate",
    "run_split",
    "run_train",
    "save_split",
    "step_bound",
    "train_node_classifier",
    "validate_graph",
    "weight_diagnostics",
]

if TYPE_CHECKING:
    from .config import (
        BaselineConfig,
        ConfigError,
        DataConfig,
        DemoConfig,
        EvaluateConfig,
        ShiftConfig,
        SplitConfig,
        TARConfig,
        TrainConfig,
        TrainRunConfig,
    )
    from .data import (
        find_planetoid,
        load_file,
        load_good_processed,
        load_planetoid,
        load_split,
        make_csbm_ood,
        make_csbm_shift,
        save_split,
        validate_graph,
    )
    from .experiments import (
        DemoResult,
        EvaluateResult,
        SplitResult,
        TrainRunResult,
        apply_split,
        load_graph,
        run_demo,
        run_evaluate,
        run_split,
        run_train,
    )
    from .flow import (
        FlowResult,
        StepSizeError,
        connected_components,
        entropy_objective,
        gibbs_limit,
        gw_flow,
        gw_step,
        potential,
        step_bound,
    )
    from .methods import (
        ERM,
        IRM,
        KLDRO,
        METHODS,
        TAR,
        ClassBalancedERM,
        CVaR,
        GroupDRO,
        Method,
        StepContext,
        VREx,
        make_method,
        per_node_loss,
    )
    from .models import GNN
    from .reweighter import (
        TARWeighter,
        TopologyAwareReweighter,
        weight_diagnostics,
    )
    from .splits import (
        ShiftSplit,
        domain_ids,
        domain_values,
        good_concept_split,
        good_covariate_split,
        long_tail_split,
        make_split,
    )
    from .train import (
        NonFiniteLossError,
        TrainResult,
        evaluate_masks,
        train_node_classifier,
    )
    from .transport import (
        build_transport_graph,
        edge_weights,
        knn_graph,
        parse_transport_graph,
    )


_SUBMODULES = (
    "config",
    "data",
    "experiments",
    "flow",
    "methods",
    "models",
    "reweighter",
    "splits",
    "train",
    "transport",
)


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
