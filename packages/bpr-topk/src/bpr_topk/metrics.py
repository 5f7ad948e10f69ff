"""Top-K masks, the BPR metric (paper Eq. 2 / Eq. 4) and regret.

All functions accept any leading batch dimensions ``[..., S]`` (S = number of sites).
"""

from __future__ import annotations

import warnings
from typing import Literal

import torch
from torch import Tensor

Ties = Literal["expected", "first", "random"]
ZeroDivision = Literal["nan"] | float


def check_k(k: int, num_sites: int) -> int:
    """Validate the budget ``k`` against ``S`` and return it as ``int``."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= num_sites:
        raise ValueError(f"k must be in [1, S] with S={num_sites}; got k={k!r}")
    return int(k)


def topk_mask(r: Tensor, k: int) -> Tensor:
    """TOPKMASK(r, K): 1 at the K largest entries of ``r`` (ties broken by ``torch.topk``).

    Returns a tensor of the same shape, dtype and device as ``r`` (0/1 values).
    """
    k = check_k(k, r.shape[-1])
    idx = torch.topk(r, k, dim=-1).indices
    return torch.zeros_like(r).scatter_(-1, idx, 1.0)


def _expected_tie_numerator(y: Tensor, r: Tensor, k: int) -> Tensor:
    """E[y · TOPKMASK(r)] under uniform random tie-breaking (Eq. 2), exact and sample-free."""
    v = torch.topk(r, k, dim=-1).values[..., -1:]  # K-th largest value
    greater = r > v
    equal = r == v
    m = k - greater.sum(-1)  # how many of the tied entries get selected
    n_equal = equal.sum(-1)
    y_greater = (y * greater).sum(-1)
    y_equal = (y * equal).sum(-1)
    return y_greater + m.to(y.dtype) / n_equal.to(y.dtype) * y_equal


def _random_tie_mask(r: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """Hard top-K mask where ties are broken uniformly at random."""
    keys = torch.rand(r.shape, generator=generator, device=r.device)
    perm = keys.argsort(dim=-1)
    r_perm = r.gather(-1, perm)
    order = torch.sort(r_perm, dim=-1, descending=True, stable=True).indices[..., :k]
    mask_perm = torch.zeros_like(r_perm).scatter_(-1, order, 1.0)
    return torch.zeros_like(r).scatter_(-1, perm, mask_perm)


def _as_float(y: Tensor) -> Tensor:
    return y if y.is_floating_point() else y.to(torch.get_default_dtype())


def bpr(
    y: Tensor,
    selected: Tensor,
    k: int | None = None,
    *,
    ties: Ties = "expected",
    zero_division: ZeroDivision = "nan",
    generator: torch.Generator | None = None,
) -> Tensor:
    """Best possible reach, paper Eq. 2: ``BPR = y·TOPKMASK(r,K) / y·TOPKMASK(y,K)``.

    Args:
        y: true non-negative counts ``[..., S]``.
        selected: either a **boolean** selection mask ``[..., S]`` (then ``K`` is the number of
            selected sites, identical in every row), or real-valued **scores** ``r`` ``[..., S]``
            ranked to pick the top ``k``.
        k: budget K; required with scores, optional (checked) with a mask.
        ties: how ties in the scores are broken: ``"expected"`` (exact expectation under uniform
            random tie-breaking, default), ``"first"`` (``torch.topk`` order, like the official
            code) or ``"random"`` (one draw from ``generator``).
        zero_division: value where ``y·TOPKMASK(y,K) = 0`` (all counts zero): ``"nan"`` (default,
            with a warning), or a float such as 0.0 or 1.0.
        generator: random source for ``ties="random"``.

    Returns:
        BPR per row, shape ``y.shape[:-1]``, values in [0, 1].
    """
    if y.shape != selected.shape:
        raise ValueError(
            f"y and selected must have the same shape; got {tuple(y.shape)} and "
            f"{tuple(selected.shape)}"
        )
    if y.ndim == 0:
        raise ValueError("y must have at least one dimension (sites last)")
    if ties not in ("expected", "first", "random"):
        raise ValueError(f"ties must be 'expected', 'first' or 'random'; got {ties!r}")
    yf = _as_float(y)
    if bool((yf < 0).any()):
        raise ValueError("y must be non-negative counts")
    if selected.dtype == torch.bool:
        counts = selected.sum(-1)
        kk = int(counts.flatten()[0]) if counts.numel() else 0
        if counts.numel() and not bool((counts == kk).all()):
            raise ValueError("every row of a boolean selection mask must select the same K")
        if k is not None and k != kk:
            raise ValueError(f"k={k} does not match the {kk} sites selected by the mask")
        k = check_k(kk, y.shape[-1])
        numerator = (yf * selected).sum(-1)
    else:
        if k is None:
            raise ValueError("k is required when `selected` holds scores (not a boolean mask)")
        k = check_k(k, y.shape[-1])
        r = selected.detach()
        if ties == "expected":
            numerator = _expected_tie_numerator(yf, r, k)
        elif ties == "first":
            numerator = (yf * topk_mask(r, k)).sum(-1)
        else:
            numerator = (yf * _random_tie_mask(r, k, generator)).sum(-1)
    denominator = (yf * topk_mask(yf, k)).sum(-1)
    return _divide(numerator, denominator, zero_division)


def _divide(numerator: Tensor, denominator: Tensor, zero_division: ZeroDivision) -> Tensor:
    zero = denominator == 0
    if zero_division == "nan":
        fill = float("nan")
        if bool(zero.any()):
            warnings.warn(
                f"BPR undefined at {int(zero.sum())} time step(s) with all-zero counts; "
                "returning NaN there (use zero_division=0.0 or 1.0 to change)",
                RuntimeWarning,
                stacklevel=3,
            )
    elif isinstance(zero_division, (int, float)) and not isinstance(zero_division, bool):
        fill = float(zero_division)
    else:
        raise ValueError(f"zero_division must be 'nan' or a float; got {zero_division!r}")
    safe = torch.where(zero, torch.ones_like(denominator), denominator)
    return torch.where(zero, torch.full_like(numerator, fill), numerator / safe)


def regret(y: Tensor, r: Tensor, k: int, *, ties: Ties = "expected") -> Tensor:
    """Normalised top-K regret over the leading (time) rows (PyEPO's normalised regret).

    ``Σ_t (y_t·TOPKMASK(y_t) − y_t·TOPKMASK(r_t)) / Σ_t y_t·TOPKMASK(y_t)``, a
    denominator-weighted ``1 − BPR``. Returns a scalar tensor.
    """
    k = check_k(k, y.shape[-1])
    yf = _as_float(y)
    best = (yf * topk_mask(yf, k)).sum(-1)
    reach = bpr(yf, r, k, ties=ties, zero_division=0.0) * best
    return (best - reach).sum() / best.sum()


def nanmean(x: Tensor) -> float:
    """Mean over the non-NaN entries (time steps with an undefined BPR are excluded)."""
    keep = ~torch.isnan(x)
    return float(x[keep].mean()) if bool(keep.any()) else float("nan")
