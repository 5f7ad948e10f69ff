"""phynfp: topology-aware neural flux prediction guided by physics (PhyNFP, Jiang et al., ICML 2025).

``PhyNFPConv`` is a PyG ``MessagePassing`` layer (learned directional difference operators inside an
explicit Saint-Venant update); ``PhyNFP`` is the full model; ``GraphBaseline`` wraps the PyG baselines.
Datasets: ``make_river`` (river-synth), ``load_wntr`` (EPANET networks via wntr), ``load_metr_la`` /
``load_dcrnn`` (traffic sensor graphs) and ``load_lamah`` (LamaH-CE folders).
"""

from importlib.metadata import version

from .data import FluxDataset, GraphGroup, chronological_split, load_dcrnn, load_metr_la, make_river
from .experiment import ExperimentConfig, load_dataset, resolve_layers, run_experiment
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
from .lamah import load_lamah, write_lamah_folder
from .layers import EdgeMLP, PhyNFPConv
from .models import PRESETS, Climatology, GraphBaseline, Persistence, PhyNFP, build_model
from .operators import build_pattern, difference_operator
from .river import RiverConfig, RiverSim, simulate_river
from .sensitivity import gap, perturbation_response
from .training import TrainConfig, TrainingFailed, TrainResult, evaluate, fit, nse, predict
from .wdn import junction_balance, load_wntr, simulate_wntr

__version__ = version("phynfp")

__all__ = [
    "PRESETS",
    "Climatology",
    "EdgeMLP",
    "ExperimentConfig",
    "FluxDataset",
    "GraphBaseline",
    "GraphGroup",
    "Persistence",
    "PhyNFP",
    "PhyNFPConv",
    "RiverConfig",
    "RiverSim",
    "TrainConfig",
    "TrainResult",
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
    "run_experiment",
    "simulate_river",
    "simulate_wntr",
    "symmetrize",
    "upstream_nodes",
    "write_lamah_folder",
]
