"""Helpers shared by the benchmark scripts of this folder (run them from the package folder)."""

from __future__ import annotations

import os
import platform
import statistics

import torch


def machine() -> dict:
    """The machine a benchmark ran on: cores, torch threads and version, Python, OS, arch."""
    return {
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "system": platform.system(),
        "arch": platform.machine(),
    }


def summarize(values: list[float]) -> dict:
    """Mean, sample standard deviation (ddof=1; None for one value), median, N and the values."""
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "ddof": 1,
        "n": len(values),
        "median": statistics.median(values),
        "values": values,
    }
