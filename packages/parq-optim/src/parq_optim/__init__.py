"""parq-optim: PARQ (Piecewise-Affine Regularized Quantization, ICML 2025) as a drop-in
quantization-aware-training wrapper for any PyTorch optimizer."""

from importlib.metadata import version

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

__version__ = version("parq-optim")

__all__ = [
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
    "UnifQuantizer",
    "__version__",
    "build_quant_optimizer",
    "load_quantized",
    "make_prox",
    "make_quantizer",
    "nearest",
    "normalized_mirror_sigmoid",
    "quant_param_groups",
    "save_quantized",
    "torchao_convert",
]
