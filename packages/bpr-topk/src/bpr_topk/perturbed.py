"""Perturbed (noise-smoothed) top-K with a Jacobian-free backward pass (paper Eq. 11).

Berthet et al. (2020), Cordonnier et al. (2021). With noise ``z_j`` of density ``ν`` the smoothed
mask is ``b̂(r) = (1/J) Σ_j TOPKMASK(r + σ z_j, K)`` and its vector-Jacobian product is

    ∂J/∂r = (1/(Jσ)) Σ_j ⟨TOPKMASK(r + σ z_j), g_b⟩ · ∇(−log ν)(z_j)

with ``∇(−log ν)(z) = z`` for normal noise and ``1 − exp(−z)`` for Gumbel noise. The S×S Jacobian
is never formed.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx

from .metrics import check_k, topk_mask

Noise = Literal["normal", "gumbel"]
Forward = Literal["hard", "smoothed"]


def _draw_noise(
    shape: tuple[int, ...], noise: Noise, like: Tensor, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """Return ``(z, ∇(−log ν)(z))`` on ``like``'s device and dtype."""
    if noise == "normal":
        z = torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)
        return z, z
    u = torch.rand(shape, generator=generator, device=like.device, dtype=like.dtype)
    u = u.clamp(torch.finfo(like.dtype).tiny, 1.0 - torch.finfo(like.dtype).eps)
    z = -torch.log(-torch.log(u))
    return z, 1.0 - torch.exp(-z)


class PerturbedTopKFunction(torch.autograd.Function):
    """Custom autograd function: forward = hard or smoothed top-K mask, backward = Eq. 11."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: FunctionCtx,
        r: Tensor,
        k: int,
        sigma: float,
        num_samples: int,
        noise: Noise,
        forward: Forward,
        generator: torch.Generator | None,
    ) -> Tensor:
        z, score = _draw_noise((num_samples, *r.shape), noise, r, generator)
        masks = topk_mask(r.detach().unsqueeze(0) + sigma * z, k)  # [J, ..., S]
        ctx.save_for_backward(masks, score)
        ctx.sigma = sigma  # type: ignore[attr-defined]
        if forward == "hard":
            return topk_mask(r.detach(), k)
        return masks.mean(0)

    @staticmethod
    def backward(ctx: Any, grad_b: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        masks, score = ctx.saved_tensors
        num_samples = masks.shape[0]
        # ⟨TOPKMASK(r + σ z_j), g_b⟩ for every noise draw j, shape [J, ..., 1]
        inner = (masks * grad_b.unsqueeze(0)).sum(-1, keepdim=True)
        grad_r = (inner * score).sum(0) / (num_samples * ctx.sigma)
        return grad_r, None, None, None, None, None, None


def perturbed_topk(
    r: Tensor,
    k: int,
    sigma: float = 0.01,
    num_samples: int = 100,
    *,
    noise: Noise = "normal",
    forward: Forward = "hard",
    generator: torch.Generator | None = None,
) -> Tensor:
    """Top-K mask of ``r`` ``[..., S]`` whose gradient is the perturbed estimator of Eq. 11.

    Args:
        r: ratings ``[..., S]``.
        k: budget K (1 ≤ K ≤ S).
        sigma: standard deviation of the additive noise on the ratings (the paper's σ; its
            guidance is "a bit smaller than the largest entries of r", 1e-3 to 1e-1 for ratio
            ratings).
        num_samples: J, the number of noise draws.
        noise: ``"normal"`` (default) or ``"gumbel"``.
        forward: value returned: ``"hard"`` exact mask (paper, Alg. A.1, default) or
            ``"smoothed"`` perturbed mean ``b̂`` (official code). The gradient is the same.
        generator: random source for the noise (drawn on ``r``'s device).

    Returns:
        mask ``[..., S]`` whose rows sum to exactly K.
    """
    check_k(k, r.shape[-1])
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0; got {sigma}")
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1; got {num_samples}")
    if noise not in ("normal", "gumbel"):
        raise ValueError(f"noise must be 'normal' or 'gumbel'; got {noise!r}")
    if forward not in ("hard", "smoothed"):
        raise ValueError(f"forward must be 'hard' or 'smoothed'; got {forward!r}")
    out: Tensor = PerturbedTopKFunction.apply(
        r, k, float(sigma), int(num_samples), noise, forward, generator
    )
    return out


class PerturbedTopK(torch.nn.Module):
    """Module form of :func:`perturbed_topk` holding ``k, sigma, num_samples, noise, forward``."""

    def __init__(
        self,
        k: int,
        sigma: float = 0.01,
        num_samples: int = 100,
        noise: Noise = "normal",
        forward: Forward = "hard",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.k, self.sigma, self.num_samples = k, sigma, num_samples
        self.noise: Noise = noise
        self.forward_mode: Forward = forward
        self.generator = generator

    def forward(self, r: Tensor) -> Tensor:
        return perturbed_topk(
            r,
            self.k,
            self.sigma,
            self.num_samples,
            noise=self.noise,
            forward=self.forward_mode,
            generator=self.generator,
        )

    def extra_repr(self) -> str:
        return (
            f"k={self.k}, sigma={self.sigma}, num_samples={self.num_samples}, "
            f"noise={self.noise!r}, forward={self.forward_mode!r}"
        )
