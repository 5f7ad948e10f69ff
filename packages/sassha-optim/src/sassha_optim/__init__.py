"""Sassha optimizer (Shin, Lee, Chung & Lee, ICML 2025) as a drop-in ``torch.optim.Optimizer``."""

import importlib.metadata

from . import functional
from .optim import (
    NonFiniteError,
    Sassha,
    disable_running_stats,
    enable_running_stats,
    hutchinson_diagonal,
    rademacher_like,
)

__version__ = importlib.metadata.version("sassha-optim")

__all__ = [
    "NonFiniteError",
    "Sassha",
    "__version__",
    "disable_running_stats",
    "enable_running_stats",
    "functional",
    "hutchinson_diagonal",
    "rademacher_like",
]
