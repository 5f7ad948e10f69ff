"""METRA (Park, Rybkin & Levine, ICLR 2024): a temporal-distance-aware representation φ, skills on the unit sphere.

φ maximises ``E[(φ(s')−φ(s))ᵀz + sg(λ)·min(ε, 1 − D(s,s'))]`` with the dual step
``min_λ log λ · mean(sg(c))``; the policy reward is ``(φ(s')−φ(s))ᵀz``; zero-shot goal reaching uses
``z_t = n(φ(g) − φ(s_t))``. ``D = ||φ(s')−φ(s)||²`` (METRA paper) or, with
``metra_constraint="mean_sq"``, its mean over dimensions (METRA's code).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import Batch, SkillMethod, normalize, unit_sphere
from .config import Config
from .networks import mlp
from .sac import clip_and_step


class METRA(SkillMethod):
    name = "metra"
    spectral_norm = False
    use_dual = True

    def __init__(self, obs_dim: int, cfg: Config, horizon: int) -> None:
        super().__init__(obs_dim, cfg, horizon)
        self.recompute_goal_skill = cfg.recompute_goal_skill
        self.phi = mlp(obs_dim, self.dim, cfg.hidden, cfg.depth, spectral_norm=self.spectral_norm)
        assert cfg.lambda_init is not None  # filled in by Config.resolved
        self.log_lambda = nn.Parameter(torch.tensor(math.log(cfg.lambda_init)))
        self.opt_phi = torch.optim.Adam(self.phi.parameters(), lr=cfg.lr)
        self.phi_params = list(self.phi.parameters())  # what the clip walks every step
        self.opt_lambda = torch.optim.Adam([self.log_lambda], lr=cfg.lr)

    def eval_skills(self, n: int, generator: torch.Generator) -> torch.Tensor:
        return unit_sphere(n, self.dim, generator)

    def constraint_distance(self, dphi: torch.Tensor) -> torch.Tensor:
        """``D(s, s')``: squared L2 norm (paper) or mean square over dimensions (code)."""
        sq = dphi.pow(2)
        return sq.mean(-1) if self.cfg.metra_constraint == "mean_sq" else sq.sum(-1)

    def update(self, batch: Batch, generator: torch.Generator) -> dict[str, float]:
        # ALGO LOGIC: φ ascent on (Δφ)ᵀz + sg(λ)·min(ε, 1 − D), then the dual step on λ
        phi_s, phi_next = self.phi(torch.cat([batch["obs"], batch["next_obs"]])).chunk(2)
        dphi = phi_next - phi_s
        reward = (dphi * batch["z"]).sum(-1)
        logs = {"repr_reward": reward.mean().item()}
        objective = reward
        if self.use_dual:
            lam = self.log_lambda.exp().detach()
            c = torch.clamp(1.0 - self.constraint_distance(dphi), max=self.cfg.dual_slack)
            objective = reward + lam * c
            logs["constraint"] = c.mean().item()
        loss_phi = -objective.mean()
        self.opt_phi.zero_grad(set_to_none=True)
        loss_phi.backward()
        clip_and_step(self.opt_phi, self.phi_params, self.cfg.grad_clip)
        if self.use_dual:
            loss_lambda = self.log_lambda * c.detach().mean()
            self.opt_lambda.zero_grad(set_to_none=True)
            loss_lambda.backward()
            clip_and_step(self.opt_lambda, [self.log_lambda], self.cfg.grad_clip)
            logs["lambda"] = self.log_lambda.exp().item()
        logs["loss_phi"] = loss_phi.item()
        return logs

    @torch.no_grad()
    def reward(self, batch: Batch) -> torch.Tensor:
        phi_s, phi_next = self.phi(torch.cat([batch["obs"], batch["next_obs"]])).chunk(2)
        return ((phi_next - phi_s) * batch["z"]).sum(-1)

    @torch.no_grad()
    def goal_skill(self, goal_obs: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        return normalize(self.phi(goal_obs) - self.phi(obs))

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"phi": self.opt_phi, "lambda": self.opt_lambda}
