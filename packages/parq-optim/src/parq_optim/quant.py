"""Target-set estimators ("quantizers"): given a tensor ``p`` and a bit width ``b`` return the
hard-quantized tensor ``q`` and the sorted level set ``Q`` of the PARQ regularizer's kinks (the
target values of the paper; the estimators are those of the official code and torchao).

``dim=None`` gives one level set ``Q`` of shape ``(m,)`` for the whole tensor; ``dim=-1`` on a 2-D
tensor gives one level set per row, ``Q`` of shape ``(rows, m)``.  No quantizer modifies ``p``.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from typing import Protocol

import torch
from torch import Tensor

__all__ = [
    "LSBQuantizer",
    "MaxUnifQuantizer",
    "Quantizer",
    "TensorStats",
    "TernaryUnifQuantizer",
    "UnifQuantizer",
    "binary_sign",
    "nearest",
    "nearest_index",
]


class TensorStats(Protocol):
    """Per-tensor statistics of a tensor that may be split over processes.

    A quantizer given ``stats`` (only with ``dim=None``) sees the local part ``p`` of a larger
    tensor and takes every statistic its level set needs over the whole tensor through ``stats``:
    ``mean(x)`` and ``amax(x)`` of an element-wise function ``x`` of ``p`` (a 0-d tensor, the same
    on every process) and ``gather(x)`` (the values of ``x`` of every process, flat; order
    unspecified).  :class:`parq_optim.distributed.ShardedStats` reduces over the shards of a
    DTensor (FSDP2) parameter.
    """

    def mean(self, x: Tensor) -> Tensor: ...

    def amax(self, x: Tensor) -> Tensor: ...

    def gather(self, x: Tensor) -> Tensor: ...


def _mean(x: Tensor, dim: int | None, stats: TensorStats | None) -> Tensor:
    """``x.mean`` per tensor (over all shards with ``stats``) or per row (``dim``)."""
    if dim is None and stats is not None:
        return stats.mean(x)
    return x.mean(dim=dim, keepdim=dim is not None)


def _amax(x: Tensor, dim: int | None, stats: TensorStats | None) -> Tensor:
    """``x.max`` per tensor (over all shards with ``stats``) or per row (``dim``)."""
    if dim is not None:
        return x.amax(dim=-1, keepdim=True)
    return stats.amax(x) if stats is not None else x.max()


def _check_levels(Q: Tensor) -> None:
    if Q.dim() == 0 or Q.size(-1) == 0:  # (0, m): per-row levels of zero rows are fine
        raise ValueError(f"empty level set Q (shape {tuple(Q.shape)}); need at least one level")


def count_below(B: Tensor, u: Tensor, dim: int | None = None, *, right: bool = False) -> Tensor:
    """``#{k : B_k < u}`` for sorted ``B`` (equals ``torch.bucketize(u, B)``; per row with ``dim``);
    with ``right=True``, ``#{k : B_k <= u}`` (``bucketize(..., right=True)``).

    On CPU with few boundaries, ``m`` vectorised comparisons beat the binary search of
    ``bucketize`` by about 4x (single thread); elsewhere ``bucketize``/``searchsorted`` is used.
    """
    m = B.size(-1)
    if u.device.type != "cpu" or m > 16:
        if dim is None:
            return torch.bucketize(u, B, right=right)
        return torch.searchsorted(B.contiguous(), u.contiguous(), right=right)
    idx = torch.zeros(u.shape, dtype=torch.uint8, device=u.device)
    above = torch.ge if right else torch.gt
    if dim is None:
        for b in B.tolist():
            idx += above(u, b)
    else:
        for k in range(m):
            idx += above(u, B[:, k : k + 1])
    return idx.long()


def take(Q: Tensor, idx: Tensor, dim: int | None = None) -> Tensor:
    """``Q[idx]`` (per tensor) or ``Q.gather(1, idx)`` (per row)."""
    if dim is None:
        return Q.index_select(0, idx.reshape(-1)).view(idx.shape)
    return Q.gather(1, idx)


def nearest_index(Q: Tensor, u: Tensor, dim: int | None = None, *, ties: str = "low") -> Tensor:
    """Index of the nearest level of sorted ``Q`` for every element of ``u``.

    Exact ties (``u`` on a midpoint ``mu_k = (q_k + q_{k+1})/2``) go to the lower level
    (``#{k : mu_k < u}``, the rule of the reference's prox maps) or, with ``ties="up"``, to the
    upper one (``#{k : mu_k <= u}``, the rule ``bsign(0) = +1`` of least-squares binary
    quantization). With ``dim`` set, ``Q`` is ``(rows, m)`` and ``u`` is ``(rows, n)``.
    """
    if ties not in ("low", "up"):
        raise ValueError(f"ties must be 'low' or 'up', got {ties!r}")
    _check_levels(Q)
    return count_below((Q[..., :-1] + Q[..., 1:]) / 2, u, dim, right=ties == "up")


def nearest(Q: Tensor, u: Tensor, dim: int | None = None, *, ties: str = "low") -> Tensor:
    """Hard quantization ``nearest(Q, u)``, ties to the lower level (``ties="up"``: the upper)."""
    return take(Q, nearest_index(Q, u, dim, ties=ties), dim)


def binary_sign(x: Tensor) -> Tensor:
    """``sign(x)`` with ``bsign(0) = +1`` (least-squares binary quantization, Pouransari et al.,
    2020)."""
    return torch.where(x == 0, 1.0, x.sign())


class Quantizer(ABC):
    """Abstract target-set estimator: ``quantize(p, b, dim) -> (q, Q)``.

    Args:
        center: subtract the mean (per row when ``dim`` is set) before quantizing and add it back
            to both ``q`` and ``Q`` (default: False).
    """

    #: whether ``_quantize`` takes ``stats`` (per-tensor statistics over the shards of a
    #: sharded tensor); a subclass that leaves it ``False`` is run on the gathered full tensor
    sharded_stats: bool = False

    def __init__(self, center: bool = False) -> None:
        self.center = center

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"

    @abstractmethod
    def get_quant_size(self, b: int) -> int:
        """Number of levels ``|Q|`` for ``b`` bits (``b = 0`` means ternary)."""

    def check_bits(self, b: int) -> None:
        """Raise ``ValueError`` if this quantizer cannot produce ``b``-bit levels."""
        if not isinstance(b, int) or isinstance(b, bool) or b < 0:
            raise ValueError(f"quant_bits must be an integer >= 0 (0 = ternary), got {b!r}")

    @abstractmethod
    def _quantize(self, p: Tensor, b: int, dim: int | None) -> tuple[Tensor, Tensor]:
        """Quantize an already centred copy of ``p`` (subclasses with ``sharded_stats = True``
        also take ``stats``, see :meth:`quantize`)."""

    def quantize(
        self, p: Tensor, b: int, dim: int | None = None, *, stats: TensorStats | None = None
    ) -> tuple[Tensor, Tensor]:
        """Return ``(q, Q)``: ``q`` like ``p`` with entries in ``Q``; ``Q`` sorted ascending,
        shape ``(m,)`` if ``dim is None`` else ``(rows, m)``.

        ``stats`` (per-tensor only): ``p`` is one shard of a larger tensor and the level set is
        fitted to the whole tensor through these statistics (:class:`TensorStats`); ``q`` is the
        local shard's.  Only quantizers with ``sharded_stats = True`` accept it."""
        self.check_bits(b)
        if p.is_complex():
            raise ValueError(f"complex dtype {p.dtype} is not supported; use a real dtype")
        if stats is None and p.numel() == 0:
            raise ValueError("cannot quantize an empty tensor")
        if dim is not None and p.dim() != 2:
            raise ValueError(f"dim={dim} needs a 2-D tensor (rows, n), got shape {tuple(p.shape)}")
        if stats is not None and dim is not None:
            raise ValueError("stats (sharded per-tensor statistics) needs dim=None")
        if stats is not None and not self.sharded_stats:
            raise TypeError(f"{type(self).__name__} does not take sharded statistics (stats=)")
        extra = {} if stats is None else {"stats": stats}
        if self.center:
            mean = _mean(p.detach(), dim, stats)
            q, Q = self._quantize(p.detach() - mean, b, dim, **extra)
            q += mean
            Q += mean
            return q, Q
        return self._quantize(p.detach(), b, dim, **extra)


def _q_max(
    a: Tensor, b: int, dim: int | None, scale_method: str, stats: TensorStats | None = None
) -> Tensor:
    """Range of a uniform grid: ``min(b * mean|p|, max|p|)`` ("mean") or ``max|p|`` ("max")."""
    a_max = _amax(a, dim, stats)
    if scale_method == "max":
        return a_max
    return torch.minimum(b * _mean(a, dim, stats), a_max)


class UnifQuantizer(Quantizer):
    """Uniform symmetric grid of ``floor(2^b - 2*int_shift) + 1`` levels (as in the official code).

    ``q = (round(clip(p, -q_max, q_max)/s - zero_point) + zero_point) * s`` with
    ``s = q_max / (2^(b-1) - int_shift)``.  The default (``int_shift = zero_point = 0.5``) gives the
    ``2^b`` half-integer levels ``±0.5s, ±1.5s, ...`` and ``±mean|p|`` for ``b = 1``.
    """

    min_bits = 1
    sharded_stats = True

    def __init__(
        self,
        center: bool = False,
        scale_method: str = "mean",
        int_shift: float = 0.5,
        zero_point: float = 0.5,
    ) -> None:
        if scale_method not in ("mean", "max"):
            raise ValueError(f"scale_method must be 'mean' or 'max', got {scale_method!r}")
        super().__init__(center)
        self.scale_method = scale_method
        self.int_shift = int_shift
        self.zero_point = zero_point

    def check_bits(self, b: int) -> None:
        super().check_bits(b)
        if b < self.min_bits:
            hint = " (for ternary use TernaryUnifQuantizer or LSBQuantizer)" if b == 0 else ""
            raise ValueError(f"{type(self).__name__} needs b >= {self.min_bits}, got b={b}{hint}")

    def get_quant_size(self, b: int) -> int:
        return math.floor(2**b - 2 * self.int_shift) + 1

    def _quantize(
        self, p: Tensor, b: int, dim: int | None, stats: TensorStats | None = None
    ) -> tuple[Tensor, Tensor]:
        q_max = _q_max(p.abs(), b, dim, self.scale_method, stats)
        q_max = q_max.clamp_(min=torch.finfo(p.dtype).tiny)
        R = 2 ** (b - 1) - self.int_shift
        s = q_max / R
        q = torch.minimum(torch.maximum(p, -q_max), q_max)
        q.div_(s).sub_(self.zero_point).round_().add_(self.zero_point).mul_(s)
        Q = torch.arange(-R, R + 1e-5, dtype=p.dtype, device=p.device)
        Q = Q.unsqueeze(0).mul(s) if dim is not None else Q.mul_(s)
        return q, Q


class MaxUnifQuantizer(UnifQuantizer):
    """``2^b - 1`` integer levels including 0, scale from ``max|p|`` (needs ``b >= 2``)."""

    min_bits = 2

    def __init__(self, center: bool = False) -> None:
        super().__init__(center=center, scale_method="max", int_shift=1.0, zero_point=0.0)


class TernaryUnifQuantizer(Quantizer):
    """Ternary grid ``s * (-1, 0, 1)`` with ``s = max|p| / 1.5`` (only ``b = 0``)."""

    sharded_stats = True

    def check_bits(self, b: int) -> None:
        super().check_bits(b)
        if b != 0:
            raise ValueError(
                f"TernaryUnifQuantizer needs b = 0 (ternary), got b={b}; use UnifQuantizer for b >= 1"
            )

    def get_quant_size(self, b: int) -> int:
        return 3

    def _quantize(
        self, p: Tensor, b: int, dim: int | None, stats: TensorStats | None = None
    ) -> tuple[Tensor, Tensor]:
        q_max = _q_max(p.abs(), b, dim, "max", stats).clamp_(min=torch.finfo(p.dtype).tiny)
        s = q_max / 1.5
        q = p.div(s).round_().clamp_(min=-1, max=1).mul_(s)
        Q = torch.tensor([-1, 0, 1], dtype=p.dtype, device=p.device)
        Q = Q.unsqueeze(0).mul(s) if dim is not None else Q.mul_(s)
        return q, Q


class LSBQuantizer(Quantizer):
    """Least-squares binary quantization (LSBQ; Pouransari et al., 2020), as used by PARQ.

    ``optimal=False``: greedy ``v_i = mean|r|``, ``r <- r - v_i bsign(r)`` for ``b >= 1``; the
    heuristic ternary ``v = ternary_multiplier * mean|p|`` for ``b = 0`` (thresholds ``±v/2``, ties
    to the lower level, as in the reference).
    ``optimal=True`` (``b in {0, 1, 2}``): the exact least-squares level set (searched over all
    sorted splits of ``|p|``), per tensor or per row; inputs exactly between two levels go to the
    upper one, the ``bsign(0) = +1`` rule of greedy LSBQ and of the reference (an exact ``0``
    becomes ``+L``, not ``-L``).
    """

    sharded_stats = True

    def __init__(
        self, center: bool = False, optimal: bool = False, ternary_multiplier: float = 1.1
    ) -> None:
        super().__init__(center)
        self.optimal = optimal
        self.ternary_multiplier = ternary_multiplier

    def check_bits(self, b: int) -> None:
        super().check_bits(b)
        if self.optimal and b > 2:
            raise NotImplementedError(
                f"LSBQuantizer(optimal=True) supports b in {{0, 1, 2}}, got b={b}"
            )

    def get_quant_size(self, b: int) -> int:
        return 2**b if b > 0 else 3

    def _quantize(
        self, p: Tensor, b: int, dim: int | None, stats: TensorStats | None = None
    ) -> tuple[Tensor, Tensor]:
        if self.optimal and b in (0, 2):
            return optimal_lsbq(p, b, dim, stats=stats)
        if b == 0:
            return self.quantize_simple_ternary(p, self.ternary_multiplier, dim, stats=stats)
        return self.quantize_greedy(p, b, dim, stats=stats)

    @staticmethod
    def quantize_greedy(
        p: Tensor, b: int, dim: int | None = None, *, stats: TensorStats | None = None
    ) -> tuple[Tensor, Tensor]:
        """Greedy LSBQ: ``q = p - r`` after ``b`` residual steps; ``Q`` = sorted signed sums."""
        r = p.clone()
        keep = dim is not None
        vs = []
        for _ in range(b):
            v = _mean(r.abs(), dim, stats)
            r.sub_(binary_sign(r).mul_(v))
            vs.append(v)
        q = p - r
        B = torch.tensor(list(itertools.product((-1, 1), repeat=b)), dtype=p.dtype, device=p.device)
        if keep:
            Q = torch.sort(torch.cat(vs, dim=1) @ B.T, dim=-1).values
        else:
            Q = torch.msort(B.matmul(torch.stack(vs)))
        return q, Q

    @staticmethod
    def quantize_simple_ternary(
        p: Tensor, multiplier: float, dim: int | None = None, *, stats: TensorStats | None = None
    ) -> tuple[Tensor, Tensor]:
        """``Q = v (-1, 0, 1)``, ``v = multiplier * mean|p|``, thresholds ``±v/2``."""
        keep = dim is not None
        v = multiplier * _mean(p.abs(), dim, stats)
        Q = v * torch.tensor([-1.0, 0.0, 1.0], dtype=p.dtype, device=p.device)
        thresholds = v * torch.tensor([-0.5, 0.5], dtype=p.dtype, device=p.device)
        if not keep:
            return Q[torch.bucketize(p, thresholds)], Q
        return Q.gather(1, torch.searchsorted(thresholds.contiguous(), p.contiguous())), Q


def optimal_lsbq(
    p: Tensor, b: int, dim: int | None = None, *, stats: TensorStats | None = None
) -> tuple[Tensor, Tensor]:
    """Exact least-squares levels for 2 bits ``(-U, -L, L, U)`` or ternary ``(-a, 0, a)``.

    Sort ``a = |p|`` ascending.  For every split ``i`` (the ``i`` smallest values "small"), the
    candidate levels are the conditional means; a candidate is valid when its decision threshold
    lies between ``a_i`` and ``a_{i+1}`` (a Lloyd fixed point, so the global optimum is among the
    valid candidates).  The valid candidate with least squared error wins; rows without a valid
    candidate fall back to the greedy / simple levels.  ``q = nearest(Q, p, ties="up")``: a tie
    goes to the upper level, as ``bsign(0) = +1`` does in the reference (``0 -> +L``;
    ``(L+U)/2 -> U``; ``-(L+U)/2 -> -L``; ternary ``±a/2 -> a`` / ``0``).  Computed in float64,
    returned in ``p.dtype``.  With ``stats`` (a shard of a larger tensor, per tensor) the search
    runs over the gathered ``|p|`` of every shard.
    """
    rows = p.reshape(1, -1) if dim is None else p
    absval = rows.abs()
    if stats is not None:
        absval = stats.gather(absval.reshape(-1)).reshape(1, -1)
    a = absval.to(torch.float64).sort(dim=-1).values
    n = a.size(-1)
    zero = torch.zeros_like(a[:, :1])
    c1 = torch.cat([zero, a.cumsum(-1)], dim=-1)  # c1[:, i] = sum of the i smallest
    c2 = torch.cat([zero, a.square().cumsum(-1)], dim=-1)
    i = torch.arange(n + 1, device=p.device, dtype=torch.float64)
    tot1, tot2 = c1[:, -1:], c2[:, -1:]
    a_pad = torch.cat([zero, a, torch.full_like(zero, math.inf)], dim=-1)
    below, above = a_pad[:, :-1], a_pad[:, 1:]  # a_i and a_{i+1} around split i (a_0 = 0)
    with torch.no_grad():
        U = (tot1 - c1) / (n - i).clamp(min=1)
        if b == 0:
            L = torch.zeros_like(U)
            err = c2 + (tot2 - c2) - (n - i) * U.square()
            thr = U / 2
            valid = (thr >= below) & (thr <= above) & (i < n)
        else:
            L = c1 / i.clamp(min=1)
            err = (c2 - i * L.square()) + (tot2 - c2) - (n - i) * U.square()
            thr = (L + U) / 2
            valid = (L <= U) & (thr >= below) & (thr <= above) & (i >= 1) & (i < n)
        err = torch.where(valid, err, torch.full_like(err, math.inf))
        best = err.argmin(dim=-1, keepdim=True)
        has = valid.any(dim=-1, keepdim=True)
        Lb, Ub = L.gather(1, best).to(p.dtype), U.gather(1, best).to(p.dtype)
    # the fallback levels depend on |p| only, so the gathered absolute values give them too
    fallback_input = rows if stats is None else absval
    if b == 0:
        Q = torch.cat([-Ub, torch.zeros_like(Ub), Ub], dim=-1)
        _, Q_fb = LSBQuantizer.quantize_simple_ternary(fallback_input, 1.1, dim=-1)
    else:
        Q = torch.cat([-Ub, -Lb, Lb, Ub], dim=-1)
        _, Q_fb = LSBQuantizer.quantize_greedy(fallback_input, 2, dim=-1)
    Q = torch.where(has, Q, Q_fb)
    q = nearest(Q, rows, dim=-1, ties="up")
    if dim is None:
        return q.reshape(p.shape), Q.reshape(-1)
    return q, Q
