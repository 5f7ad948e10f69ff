"""Decision-focused baselines for top-K: SPO+ and PG (the PG and SPO+ rows of Table C.2).

Minimisation form as in PyEPO: the true cost of step t is ``c = −y_t`` (divided by ``Σ_s y_ts``
with ``scale_truth=True``) and the predicted cost is ``ĉ = −r_t`` with ``r_t`` the ratio rating.
The top-K oracle is closed form, ``w*(c) = TOPKMASK(−c, K)`` (the K cheapest sites), so no solver
is needed.

* SPO+ (Elmachtoub and Grigas): ``ℓ = −min_w (2ĉ − c)ᵀw + 2ĉᵀw*(c) − cᵀw*(c)``, where the
  minimum is ``(2ĉ − c)ᵀ w*(2ĉ − c)``; subgradient ``∂ℓ/∂ĉ = 2 (w*(c) − w*(2ĉ − c))``.
* PG, backward difference (Gupta and Huang 2024): ``ℓ = [ĉᵀw*(ĉ) − (ĉ − h c)ᵀ w*(ĉ − h c)] / h``
  with the solutions held fixed; ``∂ℓ/∂ĉ = (w*(ĉ) − w*(ĉ − h c)) / h``.

Both are written with detached oracle masks, so autograd returns exactly these (sub)gradients;
:class:`SPOPlusTopK` and :class:`PGTopK` chain them into the model through the same
score-function surrogate as DAML (Eq. 10).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .losses import DAMLLoss
from .metrics import check_k, topk_mask
from .models import ForecastModel
from .ranking import ratio_values
from .score import score_function_rating


def topk_oracle(cost: Tensor, k: int) -> Tensor:
    """``w*(c)``: the 0/1 mask of the K smallest entries of ``cost`` ``[..., S]`` (detached)."""
    return topk_mask(-cost.detach(), k)


def true_cost(y: Tensor, scale_truth: bool = True) -> Tensor:
    """``c = −y`` per step, divided by ``Σ_s y_s`` when ``scale_truth`` (0 where all y are 0)."""
    yf = y.to(torch.get_default_dtype()) if not y.is_floating_point() else y
    if not scale_truth:
        return -yf
    total = yf.sum(-1, keepdim=True)
    return -yf / torch.where(total > 0, total, torch.ones_like(total))


def _check(r: Tensor, y: Tensor, k: int) -> int:
    if r.shape != y.shape:
        raise ValueError(
            f"r and y must have the same shape; got {tuple(r.shape)}, {tuple(y.shape)}"
        )
    return check_k(k, r.shape[-1])


def spo_plus_topk(r: Tensor, y: Tensor, k: int, scale_truth: bool = True) -> Tensor:
    """SPO+ loss per step ``[...]`` of ratings ``r`` against counts ``y`` (both ``[..., S]``).

    Always ≥ 0, and 0 when ``ĉ = c`` (``r = y`` or its scaled version) with distinct values.
    """
    k = _check(r, y, k)
    c = true_cost(y, scale_truth).to(r.dtype)
    c_hat = -r
    w_c = topk_oracle(c, k)
    w_spo = topk_oracle(2 * c_hat - c, k)
    return -((2 * c_hat - c) * w_spo).sum(-1) + 2 * (c_hat * w_c).sum(-1) - (c * w_c).sum(-1)


def pg_topk(r: Tensor, y: Tensor, k: int, h: float = 1.0, scale_truth: bool = True) -> Tensor:
    """PG (backward-difference) loss per step ``[...]``; ``h > 0`` is the step (official 1.0).

    When no ranking changes between ``ĉ`` and ``ĉ − h c`` it equals ``cᵀw*(ĉ)``.
    """
    k = _check(r, y, k)
    if not h > 0:
        raise ValueError(f"h must be > 0; got {h}")
    c = true_cost(y, scale_truth).to(r.dtype)
    c_hat = -r
    w_hat = topk_oracle(c_hat, k)
    w_back = topk_oracle(c_hat - h * c, k)
    return ((c_hat * w_hat).sum(-1) - ((c_hat - h * c) * w_back).sum(-1)) / h


class _DecisionFocused(DAMLLoss):
    """Shared driver: ratio rating with the score function attached, then a per-step loss."""

    name = "decision"

    def __init__(
        self, k: int, scale_truth: bool = True, nll_weight: float = 0.0, **kwargs: object
    ) -> None:
        for bad in ("objective", "eps", "lam"):
            if bad in kwargs:
                raise TypeError(f"{type(self).__name__} does not use {bad}")
        super().__init__(k, objective="bpr", **kwargs)  # type: ignore[arg-type]
        if nll_weight < 0:
            raise ValueError(f"nll_weight must be >= 0; got {nll_weight}")
        self.nll_weight = nll_weight
        self.objective = self.name  # type: ignore[assignment]
        self.scale_truth = scale_truth

    def step_loss(self, r: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError

    def decision_term(
        self, model: ForecastModel, y: Tensor, X: Tensor | None, time: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        samples = model.sample(self.num_score_samples, X, time)
        f = ratio_values(samples, self.denominator_offset)
        log_prob = model.log_prob(samples, X, time)
        r = score_function_rating(log_prob, f, self.score, self.baseline)
        yf = y.to(r.dtype)
        per_step = self.step_loss(r, yf)
        best = (yf * topk_mask(yf, self.k)).sum(-1)
        decision = topk_mask(r.detach(), self.k)
        hard = torch.where(best > 0, (yf * decision).sum(-1) / best, torch.nan)
        return per_step.sum(), hard, hard, torch.zeros_like(hard), decision


class SPOPlusTopK(_DecisionFocused):
    """SPO+ baseline: ``J = Σ_t ℓ_SPO+(ĉ_t, c_t)`` (+ ``nll_weight``·NLL, default 0), ĉ = −r."""

    name = "spo+"

    def step_loss(self, r: Tensor, y: Tensor) -> Tensor:
        return spo_plus_topk(r, y, self.k, self.scale_truth)


class PGTopK(_DecisionFocused):
    """PG baseline: ``J = Σ_t ℓ_PG(ĉ_t, c_t; h)`` (+ ``nll_weight``·NLL, default 0), ĉ = −r."""

    name = "pg"

    def __init__(self, k: int, h: float = 1.0, **kwargs: object) -> None:
        if not h > 0:
            raise ValueError(f"h must be > 0; got {h}")
        super().__init__(k, **kwargs)  # type: ignore[arg-type]
        self.h = h

    def step_loss(self, r: Tensor, y: Tensor) -> Tensor:
        return pg_topk(r, y, self.k, self.h, self.scale_truth)
