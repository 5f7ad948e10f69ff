"""RSD: regret-aware unsupervised skill discovery (Zhang et al., ICML 2025), with METRA, LSD and DIAYN
on one SAC core, numpy point environments and gymnasium wrappers.

The names below load on first use (PEP 562), so ``rsd-skills --help`` and ``rsd_skills.config`` do not
import torch.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("rsd-skills")

# name -> submodule that defines it
_LAZY = {
    "Config": "config",
    "TrainConfig": "config",
    "DemoConfig": "config",
    "EvaluateConfig": "config",
    "ConfigError": "config",
    "ALGOS": "config",
    "SOURCES": "config",
    "run_train": "experiments",
    "run_evaluate": "experiments",
    "run_demo": "experiments",
    "TrainResult": "experiments",
    "EvaluateResult": "experiments",
    "DemoResult": "experiments",
    "SkillMethod": "base",
    "DIAYN": "diayn",
    "GymVecEnv": "envs",
    "PointEnv": "envs",
    "PointMaze": "envs",
    "load_maze": "envs",
    "make_ant": "envs",
    "make_env": "envs",
    "make_gr_point_maze": "envs",
    "make_gym": "envs",
    "evaluate_coverage": "evaluation",
    "evaluate_zero_shot": "evaluation",
    "random_baseline": "evaluation",
    "Population": "generator",
    "SkillGenerator": "generator",
    "estimate_value": "generator",
    "regret": "generator",
    "LSD": "lsd",
    "METRA": "metra",
    "RSD": "rsd",
    "RSDUniform": "rsd",
    "SAC": "sac",
    "METHODS": "trainer",
    "SkillTrainer": "trainer",
    "read_checkpoint": "trainer",
}

__all__ = [
    "ALGOS",
    "DIAYN",
    "LSD",
    "METHODS",
    "METRA",
    "RSD",
    "SAC",
    "SOURCES",
    "Config",
    "ConfigError",
    "DemoConfig",
    "DemoResult",
    "EvaluateConfig",
    "EvaluateResult",
    "GymVecEnv",
    "PointEnv",
    "PointMaze",
    "Population",
    "RSDUniform",
    "SkillGenerator",
    "SkillMethod",
    "SkillTrainer",
    "TrainConfig",
    "TrainResult",
    "__version__",
    "estimate_value",
    "evaluate_coverage",
    "evaluate_zero_shot",
    "load_maze",
    "make_ant",
    "make_env",
    "make_gr_point_maze",
    "make_gym",
    "random_baseline",
    "read_checkpoint",
    "regret",
    "run_demo",
    "run_evaluate",
    "run_train",
]

if TYPE_CHECKING:
    from .base import SkillMethod
    from .config import (
        ALGOS,
        SOURCES,
        Config,
        ConfigError,
        DemoConfig,
        EvaluateConfig,
        TrainConfig,
    )
    from .diayn import DIAYN
    from .envs import (
        GymVecEnv,
        PointEnv,
        PointMaze,
        load_maze,
        make_ant,
        make_env,
        make_gr_point_maze,
        make_gym,
    )
    from .evaluation import evaluate_coverage, evaluate_zero_shot, random_baseline
    from .experiments import (
        DemoResult,
        EvaluateResult,
        TrainResult,
        run_demo,
        run_evaluate,
        run_train,
    )
    from .generator import Population, SkillGenerator, estimate_value, regret
    from .lsd import LSD
    from .metra import METRA
    from .rsd import RSD, RSDUniform
    from .sac import SAC
    from .trainer import METHODS, SkillTrainer, read_checkpoint


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
