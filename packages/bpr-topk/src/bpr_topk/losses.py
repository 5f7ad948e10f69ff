"""Training objectives: NLL (Eq. 8), BPR-only (Eq. 9) and DAML (Eq. 12–13).

One call builds the whole per-epoch objective of App. A.1, vectorised over time steps:

1. draw M detached joint samples ``y_t⁽ᵐ⁾ ~ p_φ(·|x_t)``;
2. ratio rating ``r_t`` with the score-function gradient attached (Eq. 7 / Eq. 10);
3. ``b_t`` = perturbed top-K of ``r_t`` (hard forward, Eq. 11 backward);
4. ``L_t = −(y_t·b_t)/(y_t·TOPKMASK(y_t))``; DAML hinge ``λ·max(ε + L_t, 0)``;
5. plus ``nll_weight`` × NLL; ``loss.backward()`` gives the full gradient in one pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from .metrics import topk_mask
from .models import ForecastModel
from .perturbed import Forward, Noise, perturbed_topk
from .ranking import ratio_values
from .score import Baseline, ScoreMode, score_function_rating

Objective = Literal["daml", "bpr", "nll"]
Reduction = Literal["mean", "sum"]
OBJECTIVES = ("daml", "bpr", "nll")


@dataclass
class LossOutput:
    """Everything one objective evaluation produced (PyEPO-style: loss, decision and metric).

    Attributes:
        loss: scalar to call ``backward()`` on; its value is the objective value.
        nll: negative log-likelihood term (with the prior), as it enters the objective.
        bpr: hard BPR per time step ``[T]`` of the ratio rating (NaN where undefined).
        perturbed_bpr: ``y·b̂ / y·TOPKMASK(y)`` per time step (training diagnostic); equals
            ``bpr`` when ``forward="hard"``.
        hinge: ``max(ε − BPR_t, 0)`` per time step (zeros for the NLL objective).
        decision: hard top-K mask of the ratio rating ``[T, S]``.
    """

    loss: Tensor
    nll: Tensor
    bpr: Tensor
    perturbed_bpr: Tensor
    hinge: Tensor
    decision: Tensor


def nll_term(
    model: ForecastModel,
    y: Tensor,
    X: Tensor | None,
    time: Tensor | None,
    reduction: Reduction = "mean",
) -> Tensor:
    """``−[Σ_{t,s} log p(y_ts) + log prior]``, divided by S when ``reduction="mean"`` (Eq. 8; Eq. 13 sums)."""
    total = model.log_prob(y, X, time).sum() + model.log_prior()
    return -total / y.shape[-1] if reduction == "mean" else -total


class DAMLLoss:
    """Decision-aware objective ``J = Σ_t [λ·max(ε + L_BPR(r_t, y_t), 0)] + nll_weight·NLL``.

    Args:
        k: budget K.
        objective: ``"daml"`` (Eq. 13), ``"bpr"`` (Eq. 9, ``J = Σ_t L_BPR``, no NLL) or
            ``"nll"`` (Eq. 8).
        eps: target BPR ε ∈ (0, 1]; ε = 1 always pushes BPR (Table C.2 setting).
        lam: penalty weight λ (paper: 30, calibrated on the mean-over-sites NLL scale).
        nll_weight: weight of the NLL term (1 for DAML; forced to 0 for ``"bpr"``).
        num_score_samples: M forecast samples per time step.
        num_perturb_samples: J noise draws of the perturbed top-K.
        sigma: perturbation noise std on the ratings.
        noise: ``"normal"`` or ``"gumbel"``.
        score: ``"joint"`` (Eq. 10) or ``"per_site"`` (official code) score function.
        baseline: ``None`` or ``"loo"`` control variate for the score function.
        forward: ``"hard"`` (paper) or ``"smoothed"`` (official code) top-K forward value.
        denominator_offset: c in ``f(y) = y/(c + 1·y)`` (1.0 official real-data, 0.0 Eq. 7).
        reduction: ``"mean"`` (NLL per site, λ keeps its published meaning) or ``"sum"``
            (literal Eq. 13; equivalent to mean with λ' = λ·S).
        generator: random source for the perturbation noise.
    """

    def __init__(
        self,
        k: int,
        objective: Objective = "daml",
        eps: float = 1.0,
        lam: float = 30.0,
        nll_weight: float = 1.0,
        num_score_samples: int = 100,
        num_perturb_samples: int = 100,
        sigma: float = 0.01,
        noise: Noise = "normal",
        score: ScoreMode = "joint",
        baseline: Baseline = None,
        forward: Forward = "hard",
        denominator_offset: float = 1.0,
        reduction: Reduction = "mean",
        generator: torch.Generator | None = None,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1 (the budget K); got {k!r}")
        if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"sigma must be a finite number > 0 (noise std); got {sigma!r}")
        if noise not in ("normal", "gumbel"):
            raise ValueError(f"noise must be 'normal' or 'gumbel'; got {noise!r}")
        if num_perturb_samples < 1:
            raise ValueError(f"num_perturb_samples must be >= 1; got {num_perturb_samples}")
        if score not in ("joint", "per_site"):
            raise ValueError(f"score must be 'joint' or 'per_site'; got {score!r}")
        if baseline not in (None, "loo"):
            raise ValueError(f"baseline must be None or 'loo'; got {baseline!r}")
        if forward not in ("hard", "smoothed"):
            raise ValueError(f"forward must be 'hard' or 'smoothed'; got {forward!r}")
        if not (math.isfinite(denominator_offset) and denominator_offset >= 0):
            raise ValueError(f"denominator_offset must be >= 0; got {denominator_offset!r}")
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"eps must be in [0, 1]; got {eps}")
        if lam < 0 or nll_weight < 0:
            raise ValueError(f"lam and nll_weight must be >= 0; got {lam}, {nll_weight}")
        if num_score_samples < 1:
            raise ValueError(f"num_score_samples must be >= 1; got {num_score_samples}")
        if reduction not in ("mean", "sum"):
            raise ValueError(f"reduction must be 'mean' or 'sum'; got {reduction!r}")
        self.k, self.objective, self.eps, self.lam = k, objective, eps, lam
        self.nll_weight = 0.0 if objective == "bpr" else nll_weight
        self.num_score_samples, self.num_perturb_samples = num_score_samples, num_perturb_samples
        self.sigma, self.noise, self.score, self.baseline = sigma, noise, score, baseline
        self.forward, self.denominator_offset = forward, denominator_offset
        self.reduction: Reduction = reduction
        self.generator = generator

    def decision_term(
        self, model: ForecastModel, y: Tensor, X: Tensor | None, time: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Steps 1–4 of App. A.1. Returns ``(J_decision, bpr, perturbed_bpr, hinge, decision)``."""
        samples = model.sample(self.num_score_samples, X, time)  # [M, T, S], detached
        f = ratio_values(samples, self.denominator_offset)
        log_prob = model.log_prob(samples, X, time)  # [M, T, S], differentiable in φ
        r = score_function_rating(log_prob, f, self.score, self.baseline)  # [T, S]
        b = perturbed_topk(
            r,
            self.k,
            self.sigma,
            self.num_perturb_samples,
            noise=self.noise,
            forward=self.forward,
            generator=self.generator,
        )
        yf = y.to(r.dtype)
        best = (yf * topk_mask(yf, self.k)).sum(-1)
        defined = best > 0  # time steps with all-zero counts are skipped (BPR undefined)
        safe_best = torch.where(defined, best, torch.ones_like(best))
        loss_bpr = -(yf * b).sum(-1) / safe_best  # L_BPR(r_t, y_t), Eq. 4
        decision = topk_mask(r.detach(), self.k)
        hard_bpr = torch.where(defined, (yf * decision).sum(-1) / safe_best, torch.nan)
        smooth_bpr = torch.where(defined, -loss_bpr.detach(), torch.nan)
        zero = torch.zeros_like(loss_bpr)
        if self.objective == "daml":
            hinge = torch.where(defined, torch.relu(self.eps + loss_bpr), zero)
            term = self.lam * hinge.sum()
        else:  # "bpr"
            hinge = torch.where(defined, torch.relu(1.0 + loss_bpr), zero)
            term = torch.where(defined, loss_bpr, zero).sum()
        return term, hard_bpr, smooth_bpr, hinge.detach(), decision

    def __call__(
        self,
        model: ForecastModel,
        y: Tensor,
        X: Tensor | None = None,
        time: Tensor | None = None,
    ) -> LossOutput:
        """Evaluate the objective on a full batch ``y`` ``[T, S]`` (covariates ``X``, ``time``)."""
        if y.ndim != 2:
            raise ValueError(f"y must have shape [T, S]; got {tuple(y.shape)}")
        nll = nll_term(model, y, X, time, self.reduction)
        if self.objective == "nll":
            with torch.no_grad():
                r = model.mean(X, time)
                decision = topk_mask(r, self.k)
                yf = y.to(r.dtype)
                best = (yf * topk_mask(yf, self.k)).sum(-1)
                hard = torch.where(best > 0, (yf * decision).sum(-1) / best, torch.nan)
            return LossOutput(nll, nll.detach(), hard, hard, torch.zeros_like(hard), decision)
        term, hard, smooth, hinge, decision = self.decision_term(model, y, X, time)
        loss = term + self.nll_weight * nll if self.nll_weight > 0 else term
        return LossOutput(loss, nll.detach(), hard, smooth, hinge, decision)


class BPRLoss(DAMLLoss):
    """BPR-only objective, paper Eq. 9: ``J = Σ_t L_BPR(r_t, y_t)`` (no likelihood term).

    Takes the arguments of :class:`DAMLLoss` except ``objective``, ``nll_weight``, ``eps`` and
    ``lam``, which this objective does not use: passing one raises ``TypeError`` (use
    ``DAMLLoss(objective="daml", eps=..., lam=...)`` for the hinge with a likelihood term).
    """

    IGNORED = ("objective", "nll_weight", "eps", "lam")

    def __init__(self, k: int, **kwargs: object) -> None:
        given = [name for name in self.IGNORED if name in kwargs]
        if given:
            raise TypeError(
                f"BPRLoss does not use {', '.join(given)}: it is the BPR-only objective "
                "(Eq. 9, no likelihood, no target ε, no penalty λ); use "
                "DAMLLoss(objective=..., eps=..., lam=..., nll_weight=...) instead"
            )
        super().__init__(k, objective="bpr", nll_weight=0.0, **kwargs)  # type: ignore[arg-type]
