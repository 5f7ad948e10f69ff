"""Soft actor-critic (Haarnoja et al., 2018), the agent π(a|s,z) shared by RSD, METRA, LSD and DIAYN.

Two Q networks with Polyak-averaged targets, a tanh-squashed Gaussian policy and an auto-tuned
temperature α, as in METRA's and RSD's code: critic loss ``0.5·MSE`` per Q against
``r + γ(1 − terminal)(min Q_targ(s', a') − α log π(a'|s'))``; actor loss ``mean(α log π − min Q)``;
temperature loss ``−log α · (log π + H_target)``. Every random draw comes from the ``torch.Generator``
passed in, so a run is reproducible and resumable. ``terminal`` is 1 only for true terminations: a time
limit is not terminal unless the caller says so (``Config.timeout_is_terminal``).
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.nn import functional as F

from .networks import QNetwork, TanhGaussianPolicy


def clip_grads(params: list[nn.Parameter], max_norm: float | None) -> float | None:
    """Clip the gradient of ``params`` to global L2 norm ``max_norm`` (None or 0: no clip); returns the norm
    before clipping (None without a clip).

    The arithmetic of ``nn.utils.clip_grad_norm_`` (coef = max_norm / (norm + 1e-6), capped at 1) with
    the fused per-tensor kernels: on the CPU ``clip_grad_norm_`` loops over the tensors in Python. When
    ``norm + 1e-6`` is below ``max_norm`` by more than float32 rounding, the coefficient is exactly 1 and
    the multiplication is skipped (the agent's gradients almost never reach the clip); a one-number
    gradient (λ, α) is checked in Python without tensor operations.
    """
    if not max_norm:
        return None
    total = None
    # below this bound the float32 coefficient rounds to exactly 1 (float32: 6e-8 relative)
    bound = max_norm * (1.0 - 1e-6)
    grads = [g for g in [p.grad for p in params] if g is not None]  # one .grad lookup each
    if len(grads) == 1 and grads[0].numel() == 1:  # λ, α: the norm of one number is |g|
        total = abs(float(grads[0]))
        if not total + 1e-6 < bound:  # (also NaN/inf: the tensor arithmetic as before)
            grads[0].mul_(torch.clamp(max_norm / (grads[0].abs().reshape(()) + 1e-6), max=1.0))
    elif grads:
        # A cheaper certificate first: one norm over the concatenated gradients (two kernels instead of
        # one per tensor). It and the two-stage norm below each lie within a relative γ = (n + 2)·2⁻²⁴
        # of the exact norm (float32 sums of n squares), so when it is below the bound by more than
        # that, the two-stage norm is too and no clip is due: the gradients are left as they are.
        flat = torch.cat([g.reshape(-1) for g in grads])
        gamma = (flat.numel() + 2) * 2.0**-24
        if gamma < 0.1:
            quick = float(torch.linalg.vector_norm(flat))
            if quick * (1.0 + 3.0 * gamma) + 1e-6 < bound:
                return quick
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        total = float(norm)
        if not total + 1e-6 < bound:
            torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return total


def clip_and_step(
    opt: torch.optim.Optimizer, params: list[nn.Parameter], max_norm: float | None
) -> float | None:
    """:func:`clip_grads`, then ``opt.step()``; returns the norm before clipping (None without a clip)."""
    total = clip_grads(params, max_norm)
    opt.step()
    return total


class SAC(nn.Module):
    """The SAC agent: ``policy``, ``q1``/``q2`` and their targets, ``log_alpha``, and their optimizers."""

    def __init__(
        self,
        in_dim: int,
        act_dim: int,
        *,
        hidden: int = 256,
        depth: int = 2,
        lr: float = 1e-4,
        gamma: float = 0.99,
        tau: float = 5e-3,
        alpha_init: float = 0.01,
        target_entropy: float | None = None,
        grad_clip: float | None = None,
    ) -> None:
        super().__init__()
        self.act_dim = act_dim
        self.gamma = gamma
        self.tau = tau
        self.grad_clip = grad_clip
        self.target_entropy = -act_dim / 2.0 if target_entropy is None else target_entropy
        self.policy = TanhGaussianPolicy(in_dim, act_dim, hidden, depth)
        self.q1 = QNetwork(in_dim, act_dim, hidden, depth)
        self.q2 = QNetwork(in_dim, act_dim, hidden, depth)
        self.q1_targ = copy.deepcopy(self.q1).requires_grad_(False)
        self.q2_targ = copy.deepcopy(self.q2).requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(alpha_init)))
        self.opt_policy = torch.optim.Adam(self.policy.parameters(), lr=lr)
        self.opt_q = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()], lr=lr)
        self.opt_alpha = torch.optim.Adam([self.log_alpha], lr=lr)
        # the parameter lists the clip walks every step (built once; parameters are updated in place)
        self.q_params = [*self.q1.parameters(), *self.q2.parameters()]
        self.policy_params = list(self.policy.parameters())

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp()

    @torch.no_grad()
    def act(
        self, x: torch.Tensor, generator: torch.Generator | None = None, deterministic: bool = False
    ) -> torch.Tensor:
        """Actions in (−1, 1) for inputs ``x = [s, z]``: the tanh of the mean, or a sample."""
        if deterministic:
            return self.policy.mean_action(x)
        noise = torch.randn(x.shape[0], self.act_dim, generator=generator)
        return self.policy.sample(x, noise)[0]

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"policy": self.opt_policy, "q": self.opt_q, "alpha": self.opt_alpha}

    def update(
        self,
        x: torch.Tensor,
        a: torch.Tensor,
        r: torch.Tensor,
        x2: torch.Tensor,
        terminal: torch.Tensor,
        generator: torch.Generator | None = None,
    ) -> dict[str, float]:
        """One critic, actor and temperature step on a minibatch, then the Polyak target update."""
        alpha = self.alpha.detach()
        # critic: both Qs towards the soft target of the *target* networks
        with torch.no_grad():
            noise = torch.randn(x2.shape[0], self.act_dim, generator=generator)
            a2, logp2 = self.policy.sample(x2, noise)
            q_next = torch.min(self.q1_targ(x2, a2), self.q2_targ(x2, a2)) - alpha * logp2
            target = r + self.gamma * (1.0 - terminal) * q_next
        q1, q2 = self.q1(x, a), self.q2(x, a)
        loss_q = 0.5 * F.mse_loss(q1, target) + 0.5 * F.mse_loss(q2, target)
        self.opt_q.zero_grad(set_to_none=True)
        loss_q.backward()
        clip_and_step(self.opt_q, self.q_params, self.grad_clip)
        # actor: maximise min Q − α log π
        noise = torch.randn(x.shape[0], self.act_dim, generator=generator)
        a_new, logp = self.policy.sample(x, noise)
        q_new = torch.min(self.q1(x, a_new), self.q2(x, a_new))
        loss_pi = (alpha * logp - q_new).mean()
        self.opt_policy.zero_grad(set_to_none=True)
        loss_pi.backward()
        clip_and_step(self.opt_policy, self.policy_params, self.grad_clip)
        # temperature: drive log π towards −H_target
        loss_alpha = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.opt_alpha.zero_grad(set_to_none=True)
        loss_alpha.backward()
        clip_and_step(self.opt_alpha, [self.log_alpha], self.grad_clip)
        self.polyak()
        # the actor step also put gradients into the Qs: drop them (the next critic step zeroes them too)
        self.opt_q.zero_grad(set_to_none=True)
        return {
            "loss_q": loss_q.item(),
            "loss_pi": loss_pi.item(),
            "loss_alpha": loss_alpha.item(),
            "alpha": self.alpha.item(),
            "q_mean": q1.mean().item(),
            "logp_mean": logp.mean().item(),
        }

    @torch.no_grad()
    def polyak(self) -> None:
        for net, targ in ((self.q1, self.q1_targ), (self.q2, self.q2_targ)):
            for p, pt in zip(net.parameters(), targ.parameters()):
                pt.mul_(1.0 - self.tau).add_(p, alpha=self.tau)
