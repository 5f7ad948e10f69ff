"""RSD: regret-aware unsupervised skill discovery (Zhang et al., ICML 2025), with METRA, LSD and DIAYN
on one SAC core, numpy point environments and gymnasium wrappers."""

import importlib.metadata

from .base import SkillMethod
from .config import ALGOS, SOURCES, Config
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
from .generator import Population, SkillGenerator, estimate_value, regret
from .lsd import LSD
from .metra import METRA
from .rsd import RSD, RSDUniform
from .sac import SAC
from .trainer import METHODS, SkillTrainer, read_checkpoint

__version__ = importlib.metadata.version("rsd-skills")

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
    "GymVecEnv",
    "PointEnv",
    "PointMaze",
    "Population",
    "RSDUniform",
    "SkillGenerator",
    "SkillMethod",
    "SkillTrainer",
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
]
