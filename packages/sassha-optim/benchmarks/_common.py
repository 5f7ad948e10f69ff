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


# two-sided 95 % quantiles of Student's t (df 1..30); df > 30 uses the normal 1.96 (conservative
# enough at that size for a README verdict)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042]  # fmt: skip


def paired_interval(a: list[float], b: list[float]) -> dict:
    """Mean of the paired differences a − b with its 95 % t interval (df = n − 1)."""
    d = [x - y for x, y in zip(a, b, strict=True)]
    n = len(d)
    mean = statistics.fmean(d)
    if n < 2:
        return {"mean": mean, "low": None, "high": None, "n": n, "differences": d}
    half = (_T975[n - 2] if n - 1 <= len(_T975) else 1.96) * statistics.stdev(d) / n**0.5
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n, "differences": d}
