"""Ranking rules from joint forecast samples (paper Sec. 3, Eq. 7 and App. B).

Samples have the shape ``[M, ..., S]``: M joint draws of the counts at S sites.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .metrics import topk_mask


def _check_samples(samples: Tensor) -> Tensor:
    if samples.ndim < 2:
        raise ValueError(
            f"samples must have shape [M, ..., S] with at least 2 dims; got {tuple(samples.shape)}"
        )
    if samples.shape[0] < 1:
        raise ValueError("samples must contain at least one draw (M >= 1)")
    return samples if samples.is_floating_point() else samples.to(torch.get_default_dtype())


def ratio_values(samples: Tensor, denominator_offset: float = 1.0) -> Tensor:
    """Per-sample ratio ``f(y) = y / (c + 1·y)`` (the integrand of Eq. 7), shape ``[M, ..., S]``.

    ``c = denominator_offset``: 1.0 (default, official real-data code) avoids 0/0 for an all-zero
    sample; 0.0 is the literal Eq. 7 and raises on an all-zero sample.
    """
    y = _check_samples(samples)
    if denominator_offset < 0:
        raise ValueError(f"denominator_offset must be >= 0; got {denominator_offset}")
    total = y.sum(-1, keepdim=True) + denominator_offset
    if denominator_offset == 0 and bool((total == 0).any()):
        raise ValueError(
            "an all-zero sample makes y / (1·y) undefined with denominator_offset=0; "
            "use denominator_offset > 0 (e.g. 1.0)"
        )
    return y / total


def ratio_rating(samples: Tensor, denominator_offset: float = 1.0) -> Tensor:
    """Ratio rating, paper Eq. 7: ``r* = E[y / (1·y)] ≈ (1/M) Σ_m y⁽ᵐ⁾ / (c + 1·y⁽ᵐ⁾)``.

    Returns ``[..., S]``.
    """
    return ratio_values(samples, denominator_offset).mean(0)


def mean_rating(samples: Tensor) -> Tensor:
    """Mean rating ``r = E[y]`` estimated from samples (paper Sec. 3). Returns ``[..., S]``."""
    return _check_samples(samples).mean(0)


def topk_ratio_rating(samples: Tensor, k: int) -> Tensor:
    """Top-K ratio rating, App. B.1: ``E[y / (TOPKMASK(y,K)·y)]`` (all-zero samples count 0)."""
    y = _check_samples(samples)
    best = (y * topk_mask(y, k)).sum(-1, keepdim=True)
    return torch.where(best > 0, y / best.clamp_min(1e-30), torch.zeros_like(y)).mean(0)
