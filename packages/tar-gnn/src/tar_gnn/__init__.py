"""tar-gnn: topology-aware dynamic reweighting (TAR) for node classification under distribution shift.

Zheng, Liu, Li, Wu, Cui and Kong, *Topology-Aware Dynamic Reweighting for Distribution Shifts on Graph*,
ICML 2025 (arXiv 2406.01066). The TAR update rule here is a reconstruction (no official code exists and
the method section could not be read); every choice the paper fixes but we could not verify is an option.
"""

from importlib.metadata import version

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
from .reweighter import TARWeighter, TopologyAwareReweighter, weight_diagnostics
from .splits import (
    ShiftSplit,
    domain_ids,
    domain_values,
    good_concept_split,
    good_covariate_split,
    long_tail_split,
    make_split,
)
from .train import TrainConfig, TrainResult, evaluate_masks, train_node_classifier
from .transport import build_transport_graph, edge_weights, knn_graph, parse_transport_graph

__version__ = version("tar-gnn")

__all__ = [
    "ERM",
    "GNN",
    "IRM",
    "KLDRO",
    "METHODS",
    "TAR",
    "CVaR",
    "ClassBalancedERM",
    "FlowResult",
    "GroupDRO",
    "Method",
    "ShiftSplit",
    "StepContext",
    "StepSizeError",
    "TARWeighter",
    "TopologyAwareReweighter",
    "TrainConfig",
    "TrainResult",
    "VREx",
    "__version__",
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
    "save_split",
    "step_bound",
    "train_node_classifier",
    "validate_graph",
    "weight_diagnostics",
]
