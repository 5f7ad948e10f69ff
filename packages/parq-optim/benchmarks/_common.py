"""Helpers shared by the benchmark scripts of this folder (run them from the package folder)."""

from __future__ import annotations

import os
import platform
import statistics

import parq_optim
import torch


def machine() -> dict:
    """The machine a benchmark ran on: cores, torch threads and version, Python, OS, package."""
    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "parq_optim": parq_optim.__version__,
    }


def summarize(values: list[float]) -> dict:
    """Mean, sample std (ddof=1; None for one seed), median and the number of seeds."""
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "median": statistics.median(values),
        "n": len(values),
    }
