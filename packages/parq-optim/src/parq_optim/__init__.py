"""parq-optim: PARQ (Piecewise-Affine Regularized Quantization, ICML 2025) as a drop-in
quantization-aware-training wrapper for any PyTorch optimizer.

The names below load on first use (PEP 562), so ``parq-optim --help`` and :mod:`parq_optim.config`
do not import torch.
"""

from __future__ import annotations

import importlib
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

__version__ = version("parq-optim")

# name -> submodule that defines it
_LAZY = {
    "DemoConfig": "config",
    "TrainRunConfig": "config",
    "ExportConfig": "config",
    "run_demo": "experiments",
    "run_train": "experiments",
    "run_export": "experiments",
    "load_quantized": "export",
    "save_quantized": "export",
    "torchao_convert": "export",
    "QuantOptimizer": "optim",
    "build_quant_optimizer": "optim",
    "make_prox": "optim",
    "make_quantizer": "optim",
    "quant_param_groups": "optim",
    "ProxBinaryRelax": "prox",
    "ProxHardQuant": "prox",
    "ProxMap": "prox",
    "ProxPARQ": "prox",
    "ProxSoftQuant": "prox",
    "normalized_mirror_sigmoid": "prox",
    "LSBQuantizer": "quant",
    "MaxUnifQuantizer": "quant",
    "Quantizer": "quant",
    "TernaryUnifQuantizer": "quant",
    "UnifQuantizer": "quant",
    "nearest": "quant",
}

__all__ = [
    "DemoConfig",
    "ExportConfig",
    "LSBQuantizer",
    "MaxUnifQuantizer",
    "ProxBinaryRelax",
    "ProxHardQuant",
    "ProxMap",
    "ProxPARQ",
    "ProxSoftQuant",
    "QuantOptimizer",
    "Quantizer",
    "TernaryUnifQuantizer",
    "TrainRunConfig",
    "UnifQuantizer",
    "__version__",
    "build_quant_optimizer",
    "load_quantized",
    "make_prox",
    "make_quantizer",
    "nearest",
    "normalized_mirror_sigmoid",
    "quant_param_groups",
    "run_demo",
    "run_export",
    "run_train",
    "save_quantized",
    "torchao_convert",
]

if TYPE_CHECKING:
    from .config import DemoConfig, ExportConfig, TrainRunConfig
    from .experiments import run_demo, run_export, run_train
    from .export import load_quantized, save_quantized, torchao_convert
    from .optim import (
        QuantOptimizer,
        build_quant_optimizer,
        make_prox,
        make_quantizer,
        quant_param_groups,
    )
    from .prox import (
        ProxBinaryRelax,
        ProxHardQuant,
        ProxMap,
        ProxPARQ,
        ProxSoftQuant,
        normalized_mirror_sigmoid,
    )
    from .quant import (
        LSBQuantizer,
        MaxUnifQuantizer,
        Quantizer,
        TernaryUnifQuantizer,
        UnifQuantizer,
        nearest,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
