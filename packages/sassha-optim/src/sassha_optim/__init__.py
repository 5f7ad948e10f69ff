"""Sassha optimizer (Shin, Lee, Chung & Lee, ICML 2025) as a drop-in ``torch.optim.Optimizer``.

The names below load on first use (PEP 562), so ``sassha-optim --help`` and ``sassha_optim.config``
do not import torch.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("sassha-optim")

# name -> submodule that defines it
_LAZY = {
    "NonFiniteError": "optim",
    "Sassha": "optim",
    "StepSwitch": "optim",
    "paper_lm_schedule": "optim",
    "disable_running_stats": "optim",
    "enable_running_stats": "optim",
    "hutchinson_diagonal": "optim",
    "rademacher_like": "optim",
    "DemoConfig": "config",
    "TrainConfig": "config",
    "EvaluateConfig": "config",
    "run_demo": "experiments",
    "run_train": "experiments",
    "run_evaluate": "experiments",
}

__all__ = [
    "DemoConfig",
    "EvaluateConfig",
    "NonFiniteError",
    "Sassha",
    "StepSwitch",
    "TrainConfig",
    "__version__",
    "disable_running_stats",
    "enable_running_stats",
    "functional",
    "hutchinson_diagonal",
    "paper_lm_schedule",
    "rademacher_like",
    "run_demo",
    "run_evaluate",
    "run_train",
]

if TYPE_CHECKING:
    from . import functional
    from .config import DemoConfig, EvaluateConfig, TrainConfig
    from .experiments import run_demo, run_evaluate, run_train
    from .optim import (
        NonFiniteError,
        Sassha,
        StepSwitch,
        disable_running_stats,
        enable_running_stats,
        hutchinson_diagonal,
        paper_lm_schedule,
        rademacher_like,
    )


def __getattr__(name: str) -> Any:
    if name == "functional":
        return importlib.import_module(".functional", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
