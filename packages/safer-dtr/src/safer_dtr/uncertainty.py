"""The uncertainty score κ (paper Eq. 5), its normalisation, and the risk-aware loss (paper Eq. 7)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["KappaScaler", "risk_aware_loss", "uncertainty_kl"]


def uncertainty_kl(logits_main: Tensor, logits_refine: Tensor) -> Tensor:
    """``κ_i = KL(p_θ(·|h_i) ‖ p_φ(·|h_i)) = Σ_l p_θ,l (log p_θ,l − log p_φ,l)`` (paper Eq. 5).

    Computed from log-softmaxes (finite for logits of any magnitude); clamped at 0 against rounding.
    Shapes: [B, L] and [B, L] → [B].
    """
    if logits_main.shape != logits_refine.shape or logits_main.ndim != 2:
        raise ValueError(
            f"logits must both be [B, L], got {list(logits_main.shape)} and {list(logits_refine.shape)}"
        )
    log_p = F.log_softmax(logits_main, dim=-1)
    log_q = F.log_softmax(logits_refine, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1).clamp_min(0.0)


@dataclass
class KappaScaler:
    """Min-max normalisation of κ with constants fitted on training patients (paper Sec. 4.3).

    ``mode="paper"``: κ̂ = clamp((κ − κ_min) / (κ_max − κ_min), 0, 1). ``mode="official"``: the official
    code's operator-precedence bug, κ̂ = clamp(κ − κ_min / (κ_max − κ_min), 0, 1) (≈ raw κ in nats
    clipped at 1, since κ_min ≈ 0).
    """

    mode: str = "paper"
    kappa_min: float | None = None
    kappa_max: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("paper", "official"):
            raise ValueError(f"KappaScaler.mode must be 'paper' or 'official', got {self.mode!r}")

    def fit(self, kappa: Tensor) -> KappaScaler:
        kappa = torch.as_tensor(kappa).detach().double()
        if kappa.numel() == 0 or not torch.isfinite(kappa).all():
            raise ValueError("KappaScaler.fit needs a non-empty tensor of finite κ values")
        self.kappa_min, self.kappa_max = float(kappa.min()), float(kappa.max())
        return self

    def __call__(self, kappa: Tensor) -> Tensor:
        if self.kappa_min is None or self.kappa_max is None:
            raise RuntimeError("KappaScaler is not fitted: call fit(kappa_train) first")
        span = max(self.kappa_max - self.kappa_min, 1e-12)
        if self.mode == "paper":
            return ((kappa - self.kappa_min) / span).clamp(0.0, 1.0)
        return (kappa - self.kappa_min / span).clamp(0.0, 1.0)


def risk_aware_loss(
    logits: Tensor,
    y: Tensor,
    kappa: Tensor,
    kappa_hat: Tensor,
    gamma: float = 0.2,
    mode: str = "paper",
    weight_full_above: float | None = None,
) -> Tensor:
    """Risk-aware fine-tuning loss (paper Eq. 7).

    ``mode="paper"`` (default): mean over the batch of ``w_i · CE(z_i, y_i) + γ κ_i²`` with
    ``w_i = 1 − κ̂_i`` detached (the model cannot lower the loss by inflating κ) and the raw κ keeping
    its gradient (through p_θ, and through h into the frozen refiner), so the penalty pulls f_θ towards
    the survivor-trained f_φ on high-risk cases.

    ``mode="official"``: the official code, all inside ``no_grad``: ``w = clamp(1 − κ̂ + 1e-6, 0, 1)``,
    ``w[w > weight_full_above] = 1`` (0.6 by default), loss = ``mean(w · CE + γ (1 − w))``; the γ term
    is a constant without gradient.
    """
    if mode not in ("paper", "official"):
        raise ValueError(f"mode must be 'paper' or 'official', got {mode!r}")
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    n = logits.shape[0]
    if y.shape != (n,) or kappa.shape != (n,) or kappa_hat.shape != (n,):
        raise ValueError("y, kappa and kappa_hat must be [B] with B = logits.shape[0]")
    ce = F.cross_entropy(logits, y, reduction="none")
    if mode == "paper":
        w = (1.0 - kappa_hat).detach()
        if weight_full_above is not None:
            w = torch.where(w > weight_full_above, torch.ones_like(w), w)
        return (w * ce + gamma * kappa.pow(2)).mean()
    threshold = 0.6 if weight_full_above is None else weight_full_above
    with torch.no_grad():
        w = (1.0 - kappa_hat + 1e-6).clamp(0.0, 1.0)
        w = torch.where(w > threshold, torch.ones_like(w), w)
        penalty = gamma * (1.0 - w)
    return (w * ce + penalty).mean()
