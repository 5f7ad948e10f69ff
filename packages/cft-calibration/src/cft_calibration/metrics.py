"""Calibration metrics for multiple-choice predictions (Sec. 5 of the paper, official evaluators).

Every function takes option probabilities ``probs`` of shape ``[N, K]`` (rows sum to 1 over the valid
options), integer ``labels`` of shape ``[N]`` (the gold option index) and an optional boolean ``mask``
``[N, K]`` (True = the option exists; absent options must have probability 0 and are ignored).
Inputs may be torch tensors, numpy arrays or nested lists; results are Python floats.

Bin conventions (named explicitly, because ECE depends on them):

* ``binning="width"`` (default; the paper's and the official code's): M equal-width bins on [0, 1],
  bin m = [(m-1)/M, m/M) for m < M and [(M-1)/M, 1] for the last one (left-closed: a confidence of
  exactly 0.1 lands in the second bin, 1.0 in the last).
* ``binning="mass"``: equal-mass ("adaptive") bins: the items sorted by confidence (stable) and cut
  into M groups whose sizes differ by at most one (the first ``N % M`` groups hold one more). Ties may
  fall into two neighbouring groups.

Each bin contributes ``|B_m|/N * |acc(B_m) - conf(B_m)|`` with ``conf`` the mean confidence of its
members (not the bin centre); empty bins contribute 0.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "accuracy",
    "bin_indices",
    "brier_score",
    "classwise_ece",
    "conf_ece",
    "evaluate_probs",
    "mce",
    "nll",
    "overconfidence_gap",
    "reliability_table",
]

BINNINGS = ("width", "mass")


def _as_inputs(probs: Any, labels: Any, mask: Any = None) -> tuple[Tensor, Tensor, Tensor]:
    p = torch.as_tensor(probs).detach()
    if not torch.is_floating_point(p):
        p = p.double()
    p = p.to(torch.float64).cpu()
    y = torch.as_tensor(labels).detach().cpu()
    if p.ndim != 2:
        raise ValueError(f"probs must have shape [N, K], got {tuple(p.shape)}")
    n, k = p.shape
    if n == 0:
        raise ValueError("probs is empty (N = 0)")
    if k < 2:
        raise ValueError(f"probs needs at least 2 options per item, got K = {k}")
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"labels must have shape [{n}], got {tuple(y.shape)}")
    if torch.is_floating_point(y):
        if not torch.all(y == y.round()):
            raise ValueError("labels must be integer option indices")
    y = y.long()
    if mask is None:
        m = torch.ones(n, k, dtype=torch.bool)
    else:
        m = torch.as_tensor(mask).detach().cpu().bool()
        if m.shape != p.shape:
            raise ValueError(f"mask must have shape {tuple(p.shape)}, got {tuple(m.shape)}")
    if not torch.isfinite(p).all():
        raise ValueError("probs holds NaN or inf")
    if (p < 0).any():
        raise ValueError("probs holds negative values")
    if ((y < 0) | (y >= k)).any():
        bad = int(y[(y < 0) | (y >= k)][0])
        raise ValueError(f"labels must lie in [0, {k - 1}], got {bad}")
    if not m.gather(1, y[:, None]).all():
        raise ValueError("a label points at a masked (absent) option")
    if (p[~m] > 1e-6).any():
        raise ValueError("masked (absent) options must have probability 0")
    sums = p.sum(1)
    if ((sums - 1).abs() > 1e-3).any():
        worst = float(sums[(sums - 1).abs().argmax()])
        raise ValueError(f"each row of probs must sum to 1 (found a row summing to {worst:.4f})")
    return p, y, m


def bin_indices(conf: Tensor, n_bins: int = 10, binning: str = "width") -> Tensor:
    """Bin index in ``0..n_bins-1`` of each confidence (see the module docstring for conventions)."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    if binning not in BINNINGS:
        raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
    conf = torch.as_tensor(conf)
    if binning == "width":
        edges = torch.arange(1, n_bins, dtype=conf.dtype, device=conf.device) / n_bins
        return torch.bucketize(conf.contiguous(), edges, right=True)
    n = conf.shape[0]
    order = torch.sort(conf, stable=True).indices
    sizes = [n // n_bins + (1 if m < n % n_bins else 0) for m in range(n_bins)]
    ranks = torch.repeat_interleave(
        torch.arange(n_bins, device=conf.device), torch.tensor(sizes, device=conf.device)
    )
    out = torch.empty(n, dtype=torch.long, device=conf.device)
    out[order] = ranks
    return out


def _ece_terms(
    conf: Tensor, correct: Tensor, n_bins: int, binning: str, total: int | None = None
) -> tuple[float, list[dict[str, float]]]:
    idx = bin_indices(conf, n_bins, binning)
    n = total if total is not None else conf.shape[0]
    count = torch.zeros(n_bins, dtype=torch.float64).index_add_(0, idx, torch.ones_like(conf))
    conf_sum = torch.zeros(n_bins, dtype=torch.float64).index_add_(0, idx, conf)
    acc_sum = torch.zeros(n_bins, dtype=torch.float64).index_add_(0, idx, correct)
    ece = 0.0
    rows = []
    for m in range(n_bins):
        c = float(count[m])
        if binning == "width":
            lo, hi = m / n_bins, (m + 1) / n_bins
        else:
            members = conf[idx == m]
            lo = float(members.min()) if c else math.nan
            hi = float(members.max()) if c else math.nan
        if c > 0:
            acc_m, conf_m = float(acc_sum[m]) / c, float(conf_sum[m]) / c
            ece += c / n * abs(acc_m - conf_m)
        else:
            acc_m = conf_m = math.nan
        rows.append(
            {
                "bin": m,
                "lower": lo,
                "upper": hi,
                "count": int(c),
                "accuracy": acc_m,
                "confidence": conf_m,
            }
        )
    return ece, rows


def conf_ece(
    probs: Any,
    labels: Any,
    n_bins: int = 10,
    *,
    binning: str = "width",
    mask: Any = None,
    return_table: bool = False,
) -> Any:
    """Confidence (top-label) ECE ``= sum_m |B_m|/N |acc(B_m) - conf(B_m)|`` (the paper's conf-ECE).

    Returns a float, or ``(ece, table)`` with one dict per bin (bounds, count, accuracy, confidence)
    when ``return_table`` is set.
    """
    p, y, _ = _as_inputs(probs, labels, mask)
    conf, pred = p.max(1)
    ece, rows = _ece_terms(conf, (pred == y).double(), n_bins, binning)
    return (ece, rows) if return_table else ece


def reliability_table(
    probs: Any, labels: Any, n_bins: int = 10, *, binning: str = "width", mask: Any = None
) -> list[dict[str, float]]:
    """Per-bin count, accuracy and mean confidence of the top-label prediction."""
    return conf_ece(probs, labels, n_bins, binning=binning, mask=mask, return_table=True)[1]


def classwise_ece(
    probs: Any,
    labels: Any,
    n_bins: int = 10,
    *,
    binning: str = "width",
    mask: Any = None,
    return_table: bool = False,
) -> Any:
    """Class-wise ECE ``= (1/K) sum_k sum_m |B_km|/N_k |freq(B_km) - conf(B_km)|`` (official cwece).

    Classes are option positions; B_km holds the items whose probability of option k falls in bin m,
    freq is the fraction of them whose gold option is k. Items where option k is absent (``mask``) are
    left out of class k (N_k counts the items that have option k; N_k = N without a mask).
    """
    p, y, m = _as_inputs(probs, labels, mask)
    k = p.shape[1]
    total = 0.0
    tables = []
    used = 0
    for cls in range(k):
        keep = m[:, cls]
        if not keep.any():
            continue
        used += 1
        pk = p[keep, cls]
        hit = (y[keep] == cls).double()
        term, rows = _ece_terms(pk, hit, n_bins, binning)
        total += term
        tables.append({"class": cls, "ece": term, "bins": rows})
    value = total / used
    return (value, tables) if return_table else value


def mce(
    probs: Any, labels: Any, n_bins: int = 10, *, binning: str = "width", mask: Any = None
) -> float:
    """Maximum calibration error: max over non-empty bins of ``|acc - conf|``."""
    rows = reliability_table(probs, labels, n_bins, binning=binning, mask=mask)
    gaps = [abs(r["accuracy"] - r["confidence"]) for r in rows if r["count"] > 0]
    return max(gaps)


def brier_score(probs: Any, labels: Any, *, mask: Any = None) -> float:
    """(1/N) sum_i sum_k (p_ik - 1{y_i = k})^2 (multi-class Brier score, range [0, 2])."""
    p, y, _ = _as_inputs(probs, labels, mask)
    onehot = torch.zeros_like(p).scatter_(1, y[:, None], 1.0)
    return float(((p - onehot) ** 2).sum(1).mean())


def nll(probs: Any, labels: Any, *, mask: Any = None, eps: float = 1e-12) -> float:
    """Mean negative log-likelihood of the gold option, -(1/N) sum_i log p_{i, y_i} (clamped at eps)."""
    p, y, _ = _as_inputs(probs, labels, mask)
    return float(-torch.log(p.gather(1, y[:, None]).clamp_min(eps)).mean())


def accuracy(probs: Any, labels: Any, *, mask: Any = None) -> float:
    """Fraction of items whose highest-probability option is the gold one (ties: the first index)."""
    p, y, _ = _as_inputs(probs, labels, mask)
    return float((p.argmax(1) == y).double().mean())


def overconfidence_gap(probs: Any, labels: Any, *, mask: Any = None) -> float:
    """Mean confidence minus accuracy (> 0: overconfident)."""
    p, y, _ = _as_inputs(probs, labels, mask)
    conf, pred = p.max(1)
    return float(conf.mean() - (pred == y).double().mean())


def evaluate_probs(
    probs: Any, labels: Any, *, mask: Any = None, n_bins: int = 10
) -> dict[str, float]:
    """All metrics in one dict: accuracy, conf-ECE (M and 15 equal-width bins, equal-mass), cw-ECE,
    MCE, Brier, NLL, mean confidence and the overconfidence gap."""
    p, y, m = _as_inputs(probs, labels, mask)
    conf = p.max(1).values
    return {
        "accuracy": accuracy(p, y, mask=m),
        "conf_ece": conf_ece(p, y, n_bins, mask=m),
        "conf_ece_15": conf_ece(p, y, 15, mask=m),
        "conf_ece_mass": conf_ece(p, y, n_bins, binning="mass", mask=m),
        "cw_ece": classwise_ece(p, y, n_bins, mask=m),
        "mce": mce(p, y, n_bins, mask=m),
        "brier": brier_score(p, y, mask=m),
        "nll": nll(p, y, mask=m),
        "mean_confidence": float(conf.mean()),
        "overconfidence_gap": overconfidence_gap(p, y, mask=m),
        "n": int(p.shape[0]),
    }
