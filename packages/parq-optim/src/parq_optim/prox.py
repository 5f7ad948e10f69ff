"""Proximal maps ``w = prox(u)`` applied in place after each base-optimizer step: PARQ's
piecewise-affine map (Jin et al., ICML 2025) and the baselines STE, BinaryRelax and SoftQuant, in
the practical form of the official code (facebookresearch/parq, torchao.prototype.parq).

Every map has ``apply_(p, q, Q, step_count, dim=None)``: ``p`` holds the latent ``u`` on entry and
the model weight ``w`` on exit; ``q`` is the quantizer's hard-quantized tensor on a ``Q``-refresh
step (else ``None``); ``Q`` is the sorted level set (``(m,)`` or ``(rows, m)`` with ``dim=-1``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from torch import Tensor

from .quant import _check_levels, count_below, nearest, take

__all__ = [
    "ProxBinaryRelax",
    "ProxHardQuant",
    "ProxMap",
    "ProxPARQ",
    "ProxSoftQuant",
    "normalized_mirror_sigmoid",
]


def _mirror_sigmoid(x: float) -> float:
    """``1 / (1 + exp(x))`` without overflow for large ``x``."""
    return 0.0 if x > 700.0 else 1.0 / (1.0 + math.exp(x))


def normalized_mirror_sigmoid(t: float, t1: float, t2: float, s: float, c: float) -> float:
    """PARQ's inverse-slope schedule ``r_t`` (the paper's Fig. 10), from 1 at ``t1`` to 0 at ``t2``.

    ``f = (t - t1)/(t2 - t1)``, ``sigma_t = 1/(1 + exp(s (f - c)))``,
    ``sigma_1 = 1/(1 + exp(-s/2))``, ``sigma_2 = 1/(1 + exp(s/2))``,
    ``r_t = (sigma_t - sigma_2)/(sigma_1 - sigma_2)``.  The normalisation uses ``c = 0.5`` whatever
    ``c`` is (as the reference code does).  ``s`` is the steepness: nearly linear for small ``s``,
    nearly a step at ``f = c`` for large ``s``.
    """
    if not t1 <= t < t2:
        raise ValueError(
            f"normalized_mirror_sigmoid needs t1 <= t < t2, got t={t}, t1={t1}, t2={t2}"
        )
    f = (t - t1) / (t2 - t1)
    st = _mirror_sigmoid(s * (f - c))
    s1 = _mirror_sigmoid(-0.5 * s)
    s2 = _mirror_sigmoid(0.5 * s)
    return (st - s2) / (s1 - s2)


def _check_window(anneal_start: int, anneal_end: int) -> None:
    if anneal_start >= anneal_end:
        raise ValueError(
            f"anneal_start must be < anneal_end, got anneal_start={anneal_start}, "
            f"anneal_end={anneal_end}"
        )


def _hard(p: Tensor, q: Tensor | None, Q: Tensor, dim: int | None) -> Tensor:
    """The quantizer's ``q`` when given, else ``nearest(Q, p)``."""
    return q if q is not None else nearest(Q, p, dim)


class ProxMap(ABC):
    """Interface of a proximal map (modifies ``p`` in place)."""

    @abstractmethod
    def apply_(
        self, p: Tensor, q: Tensor | None, Q: Tensor, step_count: int, dim: int | None = None
    ) -> float | None:
        """Overwrite ``p`` (holding ``u``) with ``prox(u)``; may return the inverse slope."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class ProxHardQuant(ProxMap):
    """Straight-through estimator / BinaryConnect: ``w = q`` or ``nearest(Q, u)``."""

    @torch.no_grad()
    def apply_(
        self, p: Tensor, q: Tensor | None, Q: Tensor, step_count: int, dim: int | None = None
    ) -> None:
        p.copy_(_hard(p, q, Q, dim))
        return None


class ProxPARQ(ProxMap):
    """PARQ prox map with annealed inverse slope ``r_t`` (slope ``1/r_t`` through interval centres).

    Before ``anneal_start``: identity (no clamping).  In ``[anneal_start, anneal_end)``: on the
    interval ``q_{i-1} < u <= q_i`` with centre ``c = (q_{i-1}+q_i)/2``,
    ``w = clip(c + (u - c)/r_t, q_{i-1}, q_i)`` (inputs outside the grid clamp to its ends).
    From ``anneal_end`` on: hard quantization.  Step counts include warm-up steps.

    Args:
        anneal_start, anneal_end: step window (``anneal_start < anneal_end``; may be negative).
        steepness: ``s`` of :func:`normalized_mirror_sigmoid` (> 0, default 10).
        anneal_center: ``c`` in ``[0, 1]`` (default 0.5).
    """

    def __init__(
        self,
        anneal_start: int,
        anneal_end: int,
        steepness: float = 10.0,
        anneal_center: float = 0.5,
    ) -> None:
        _check_window(anneal_start, anneal_end)
        if not steepness > 0:
            raise ValueError(f"steepness must be > 0, got {steepness}")
        if not 0.0 <= anneal_center <= 1.0:
            raise ValueError(f"anneal_center must be in [0, 1], got {anneal_center}")
        self.anneal_start = anneal_start
        self.anneal_end = anneal_end
        self.steepness = steepness
        self.anneal_center = anneal_center

    @classmethod
    def from_epochs(
        cls, start_epoch: float, end_epoch: float, steps_per_epoch: int, **kwargs: float
    ) -> ProxPARQ:
        """Window given in epochs (converted to absolute optimizer steps, warm-up included)."""
        return cls(
            round(start_epoch * steps_per_epoch), round(end_epoch * steps_per_epoch), **kwargs
        )

    def inv_slope(self, step_count: int, dtype: torch.dtype = torch.float32) -> float:
        """``r_t``: 1 before the window, 0 after it, ``max(tiny, sigma_bar(t))`` inside."""
        if step_count < self.anneal_start:
            return 1.0
        if step_count >= self.anneal_end:
            return 0.0
        r = normalized_mirror_sigmoid(
            step_count, self.anneal_start, self.anneal_end, self.steepness, self.anneal_center
        )
        return max(torch.finfo(dtype).tiny, r)

    @torch.no_grad()
    def apply_(
        self, p: Tensor, q: Tensor | None, Q: Tensor, step_count: int, dim: int | None = None
    ) -> float:
        if step_count < self.anneal_start:
            return 1.0
        r = self.inv_slope(step_count, p.dtype)
        if r == 0.0:
            p.copy_(_hard(p, q, Q, dim))
            return r
        lo, hi = interval_bounds(Q, p, dim)
        centre = (lo + hi) / 2
        p.copy_(torch.clamp(centre + (p - centre) / r, min=lo, max=hi))
        return r


def interval_bounds(Q: Tensor, u: Tensor, dim: int | None = None) -> tuple[Tensor, Tensor]:
    """``(q_{i-1}, q_i)`` with ``i = #{k : q_k < u}``, indices clamped into ``[0, m-1]``."""
    _check_levels(Q)
    idx = count_below(Q, u, dim)
    return take(Q, (idx - 1).clamp_(min=0), dim), take(Q, idx.clamp_(max=Q.size(-1) - 1), dim)


class ProxBinaryRelax(ProxMap):
    """BinaryRelax (Yin et al., 2018): ``w = (1 - theta) u + theta q``, ``theta`` linear in the step
    over ``[anneal_start, anneal_end)``; identity before, hard quantization after."""

    def __init__(self, anneal_start: int, anneal_end: int) -> None:
        _check_window(anneal_start, anneal_end)
        self.anneal_start = anneal_start
        self.anneal_end = anneal_end

    @torch.no_grad()
    def apply_(
        self, p: Tensor, q: Tensor | None, Q: Tensor, step_count: int, dim: int | None = None
    ) -> None:
        if step_count < self.anneal_start:
            return None
        q = _hard(p, q, Q, dim)
        if step_count >= self.anneal_end:
            p.copy_(q)
        else:
            theta = (step_count - self.anneal_start) / (self.anneal_end - self.anneal_start)
            p.mul_(1 - theta).add_(q, alpha=theta)
        return None


class ProxSoftQuant(ProxMap):
    """Sigmoid soft quantization with a temperature annealed from ``t_start`` to ``t_end``
    (the facebookresearch/parq baseline)."""

    def __init__(
        self,
        anneal_start: int,
        anneal_end: int,
        t_start: float = 1.0,
        t_end: float = 1e3,
        t_power: float = 1.0,
    ) -> None:
        _check_window(anneal_start, anneal_end)
        if not t_start < t_end:
            raise ValueError(f"t_start must be < t_end, got t_start={t_start}, t_end={t_end}")
        if not t_power > 0:
            raise ValueError(f"t_power must be > 0, got {t_power}")
        self.anneal_start = anneal_start
        self.anneal_end = anneal_end
        self.t_start = t_start
        self.t_end = t_end
        self.t_power = t_power

    @torch.no_grad()
    def apply_(
        self, p: Tensor, q: Tensor | None, Q: Tensor, step_count: int, dim: int | None = None
    ) -> None:
        if step_count < self.anneal_start:
            return None
        if step_count >= self.anneal_end:
            p.copy_(_hard(p, q, Q, dim))
            return None
        frac = (step_count - self.anneal_start) / (self.anneal_end - self.anneal_start)
        T = self.t_start + frac**self.t_power * (self.t_end - self.t_start)
        lo, hi = interval_bounds(Q, p, dim)
        x = (torch.minimum(torch.maximum(p, lo), hi) - lo) / (hi - lo + 1e-12)
        z = torch.sigmoid(T * (x - 0.5))
        z_hat = (z - 0.5) / (1.0 / (1.0 + math.exp(-T / 2)) - 0.5)
        p.copy_((lo + hi) / 2 + z_hat * (hi - lo) / 2)
        return None
