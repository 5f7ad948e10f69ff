"""DIAYN (Eysenbach et al., ICLR 2019), as METRA's ``--inner 0 --unit_length 0 --dual_reg 0``.

Skills z ~ N(0, I); a Gaussian skill posterior q(z | s') with learned std (the φ network's two heads)
maximises ``log q(z|s')``; the policy reward is ``log q(z|s')`` (the constant ``−log p(z)`` is omitted,
as in METRA's code); zero-shot goal reaching uses the mean of q(z | g).
"""

from __future__ import annotations

import math

import torch

from .base import Batch, SkillMethod
from .config import Config
from .networks import mlp
from .sac import clip_and_step

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class DIAYN(SkillMethod):
    name = "diayn"

    def __init__(self, obs_dim: int, cfg: Config, horizon: int) -> None:
        super().__init__(obs_dim, cfg, horizon)
        self.phi = mlp(obs_dim, 2 * self.dim, cfg.hidden, cfg.depth)
        self.opt_phi = torch.optim.Adam(self.phi.parameters(), lr=cfg.lr)
        self.phi_params = list(self.phi.parameters())  # what the clip walks every step

    def eval_skills(self, n: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randn(n, self.dim, generator=generator)

    def posterior(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.phi(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def log_q(self, z: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        mean, log_std = self.posterior(obs)
        t = (z - mean) / log_std.exp()
        return (-0.5 * t.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def update(self, batch: Batch, generator: torch.Generator) -> dict[str, float]:
        # ALGO LOGIC: maximum likelihood of the skill given the next state
        log_q = self.log_q(batch["z"], batch["next_obs"])
        loss_phi = -log_q.mean()
        self.opt_phi.zero_grad(set_to_none=True)
        loss_phi.backward()
        clip_and_step(self.opt_phi, self.phi_params, self.cfg.grad_clip)
        return {"loss_phi": loss_phi.item(), "repr_reward": log_q.mean().item()}

    @torch.no_grad()
    def reward(self, batch: Batch) -> torch.Tensor:
        return self.log_q(batch["z"], batch["next_obs"])

    @torch.no_grad()
    def goal_skill(self, goal_obs: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        return self.posterior(goal_obs)[0]

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"phi": self.opt_phi}
