"""Cur-MGAE: self-supervised masked graph autoencoder with a structure-aware curriculum (ICML 2025).

The public names are imported on first use (``from curmgae import CurMGAE`` works as usual), so that
``import curmgae`` and the command line start without loading torch_geometric.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("curmgae")

#: public name -> the submodule that defines it
_EXPORTS = {
    "GAEBaseline": "baselines",
    "PyGGCNEncoder": "baselines",
    "SOURCES": "config",
    "CurMGAEConfig": "config",
    "ConfigError": "config",
    "DemoConfig": "config",
    "EvaluateConfig": "config",
    "PretrainConfig": "config",
    "run_demo": "experiments",
    "run_evaluate": "experiments",
    "run_pretrain": "experiments",
    "load_dataset": "data",
    "load_planetoid": "data",
    "make_curriculum_sbm": "data",
    "make_noisy_sbm": "data",
    "prepare_graph": "data",
    "split_edges": "data",
    "hits_at_k": "evaluation",
    "linear_probe": "evaluation",
    "link_metrics": "evaluation",
    "svm_cv": "evaluation",
    "bce_loss": "losses",
    "full_softmax_loss": "losses",
    "sampled_softmax_loss": "losses",
    "path_mask": "masking",
    "random_mask": "masking",
    "CurriculumMask": "masking",
    "EdgeMasker": "masking",
    "MaskContext": "masking",
    "NoMask": "masking",
    "PathMask": "masking",
    "RandomMask": "masking",
    "masker_from_config": "masking",
    "adamic_adar": "evaluation",
    "CurMGAE": "method",
    "FitHistory": "method",
    "CrossCorrelationDecoder": "models",
    "GNNEncoder": "models",
    "InnerProductDecoder": "models",
    "load_checkpoint": "pipeline",
    "save_checkpoint": "pipeline",
    "SelfPacedEdgeScheduler": "scheduler",
    "residuals": "scheduler",
    "solve_selection": "scheduler",
    "solve_selection_adam": "scheduler",
}

__all__ = [
    "SOURCES",
    "ConfigError",
    "CrossCorrelationDecoder",
    "CurMGAE",
    "CurMGAEConfig",
    "CurriculumMask",
    "DemoConfig",
    "EdgeMasker",
    "EvaluateConfig",
    "FitHistory",
    "GAEBaseline",
    "GNNEncoder",
    "InnerProductDecoder",
    "MaskContext",
    "NoMask",
    "PathMask",
    "PretrainConfig",
    "PyGGCNEncoder",
    "RandomMask",
    "SelfPacedEdgeScheduler",
    "__version__",
    "adamic_adar",
    "bce_loss",
    "full_softmax_loss",
    "hits_at_k",
    "linear_probe",
    "link_metrics",
    "load_checkpoint",
    "load_dataset",
    "load_planetoid",
    "make_curriculum_sbm",
    "make_noisy_sbm",
    "masker_from_config",
    "path_mask",
    "prepare_graph",
    "random_mask",
    "residuals",
    "run_demo",
    "run_evaluate",
    "run_pretrain",
    "sampled_softmax_loss",
    "save_checkpoint",
    "solve_selection",
    "solve_selection_adam",
    "split_edges",
    "svm_cv",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'curmgae' has no attribute {name!r}")
    with warnings.catch_warnings():
        # torch_geometric calls torch.jit.script when imported, which recent torch deprecates
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.script` is deprecated", category=DeprecationWarning
        )
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from .baselines import GAEBaseline, PyGGCNEncoder
    from .config import (
        SOURCES,
        ConfigError,
        CurMGAEConfig,
        DemoConfig,
        EvaluateConfig,
        PretrainConfig,
    )
    from .data import (
        load_dataset,
        load_planetoid,
        make_curriculum_sbm,
        make_noisy_sbm,
        prepare_graph,
        split_edges,
    )
    from .evaluation import adamic_adar, hits_at_k, linear_probe, link_metrics, svm_cv
    from .experiments import run_demo, run_evaluate, run_pretrain
    from .losses import bce_loss, full_softmax_loss, sampled_softmax_loss
    from .masking import (
        CurriculumMask,
        EdgeMasker,
        MaskContext,
        NoMask,
        PathMask,
        RandomMask,
        masker_from_config,
        path_mask,
        random_mask,
    )
    from .method import CurMGAE, FitHistory
    from .models import CrossCorrelationDecoder, GNNEncoder, InnerProductDecoder
    from .pipeline import load_checkpoint, save_checkpoint
    from .scheduler import SelfPacedEdgeScheduler, residuals, solve_selection, solve_selection_adam
