"""Paired 95 % t intervals and verdict words, shared by the benchmark scripts.

A method is compared with the heuristic chosen on the validation split, seed by seed: the
difference (method − heuristic) of BPR@K gets a 95 % t interval over seeds; the verdict is
*ahead* (interval above 0), *behind* (below 0) or *tie* (contains 0).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

# two-sided 95 % quantiles of Student's t by degrees of freedom
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_interval(diffs: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t interval of paired differences (NaN bounds for fewer than 2)."""
    n = len(diffs)
    m = statistics.fmean(diffs)
    if n < 2:
        return m, math.nan, math.nan
    half = T975.get(n - 1, 1.96 + 2.5 / (n - 1)) * statistics.stdev(diffs) / math.sqrt(n)
    return m, m - half, m + half


def verdict(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return "—"
    return "ahead" if lo > 0 else "behind" if hi < 0 else "tie"


def interval(diffs: list[float]) -> dict[str, Any]:
    """``{"mean", "lo", "hi", "verdict", "n"}`` of paired differences."""
    mean, lo, hi = t_interval(diffs)
    return {"mean": mean, "lo": lo, "hi": hi, "verdict": verdict(lo, hi), "n": len(diffs)}


def fmt_interval(d: dict[str, Any] | None) -> str:
    if not d:
        return "—"
    return f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] **{d['verdict']}**"


def paired_vs_heuristic(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per learned method (ratio ranking) of ``benchmarks/run.py``'s rows: the paired difference
    to the heuristic row marked ``best_on_valid`` on test BPR (``bpr``) and, where the rows carry
    it, on valid BPR (``valid_bpr``: the selected checkpoint's, measured during training)."""
    best = next((r for r in rows if r.get("best_on_valid")), None)
    if best is None:
        return []
    out = []
    learned = [r for r in rows if r.get("ranking") == "ratio" and "seed" in r]
    for method in dict.fromkeys(r["method"] for r in learned):
        group = sorted((r for r in learned if r["method"] == method), key=lambda r: r["seed"])
        entry: dict[str, Any] = {"method": method, "n": len(group)}
        entry["test"] = interval([r["bpr"] - best["bpr"] for r in group])
        if "valid_bpr" in best and all("valid_bpr" in r for r in group):
            entry["valid"] = interval([r["valid_bpr"] - best["valid_bpr"] for r in group])
        out.append(entry)
    return out
