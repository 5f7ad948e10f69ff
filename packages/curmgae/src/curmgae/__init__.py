"""Cur-MGAE: self-supervised masked graph autoencoder with a structure-aware curriculum (ICML 2025)."""

import importlib.metadata
import warnings

with warnings.catch_warnings():
    # torch_geometric.nn calls torch.jit.script when imported, which recent torch deprecates: not
    # ours to fix, and it would add a warning to every command's output.
    warnings.filterwarnings(
        "ignore", message=r"`torch\.jit\.script` is deprecated", category=DeprecationWarning
    )
    from .baselines import GAEBaseline, PyGGCNEncoder
    from .config import SOURCES, CurMGAEConfig
    from .data import (
        load_dataset,
        load_planetoid,
        make_curriculum_sbm,
        prepare_graph,
        split_edges,
    )
    from .evaluation import hits_at_k, linear_probe, link_metrics, svm_cv
    from .losses import bce_loss, full_softmax_loss, sampled_softmax_loss
    from .masking import path_mask, random_mask
    from .method import CurMGAE, FitHistory
    from .models import CrossCorrelationDecoder, GNNEncoder, InnerProductDecoder
    from .pipeline import load_checkpoint, save_checkpoint
    from .scheduler import SelfPacedEdgeScheduler, residuals, solve_selection, solve_selection_adam

__version__ = importlib.metadata.version("curmgae")

__all__ = [
    "SOURCES",
    "CrossCorrelationDecoder",
    "CurMGAE",
    "CurMGAEConfig",
    "FitHistory",
    "GAEBaseline",
    "GNNEncoder",
    "InnerProductDecoder",
    "PyGGCNEncoder",
    "SelfPacedEdgeScheduler",
    "__version__",
    "bce_loss",
    "full_softmax_loss",
    "hits_at_k",
    "linear_probe",
    "link_metrics",
    "load_checkpoint",
    "load_dataset",
    "load_planetoid",
    "make_curriculum_sbm",
    "path_mask",
    "prepare_graph",
    "random_mask",
    "residuals",
    "sampled_softmax_loss",
    "save_checkpoint",
    "solve_selection",
    "solve_selection_adam",
    "split_edges",
    "svm_cv",
]
