"""What every skill-discovery method plugs into the shared training loop (:mod:`rsd_skills.trainer`).

A method owns its representation φ (and dual variable, where it has one) and answers five questions:
which skills to roll out this epoch, which skills to evaluate, how to update φ on a minibatch, which
intrinsic reward the SAC agent gets, and which skill reaches a goal zero-shot. The SAC agent, the replay
buffer, the rollouts and the evaluation are shared, so methods compare at equal environment steps.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .config import Config
from .sac import SAC

Batch = dict[str, torch.Tensor]  # obs, next_obs, s0, z, act, terminal


def normalize(v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``n(v) = v / (||v||₂ + eps)`` along the last axis."""
    return v / (torch.linalg.vector_norm(v, dim=-1, keepdim=True) + eps)


def unit_sphere(n: int, d: int, generator: torch.Generator | None) -> torch.Tensor:
    """``n`` skills uniform on the unit sphere of R^d (METRA's prior, ``unit_length=1``)."""
    return normalize(torch.randn(n, d, generator=generator))


class SkillMethod(nn.Module):
    """Base class: subclasses set ``name`` and implement the abstract methods below."""

    name = "base"
    recompute_goal_skill = False

    def __init__(self, obs_dim: int, cfg: Config, horizon: int) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.cfg = cfg
        self.dim = cfg.dim_option
        self.horizon = horizon

    # --- skills ------------------------------------------------------------------------------
    def train_skills(
        self, n: int, generator: torch.Generator, ready: bool, agent: SAC
    ) -> torch.Tensor:
        """Skills of this epoch's ``n`` trajectories (``ready``: the replay buffer is warm)."""
        return self.eval_skills(n, generator)

    def eval_skills(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` skills from the method's own prior (coverage evaluation)."""
        raise NotImplementedError

    def final_skills(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` skills from the distribution the method trains on now (RSD: its generator mixture)."""
        return self.eval_skills(n, generator)

    def observe(self, final_obs: torch.Tensor) -> None:
        """Called after each epoch's collection with the episodes' final observations."""

    # --- representation and reward -----------------------------------------------------------
    def update(self, batch: Batch, generator: torch.Generator) -> dict[str, float]:
        """One gradient step of φ (and λ) on a minibatch; returns scalar logs."""
        raise NotImplementedError

    def reward(self, batch: Batch) -> torch.Tensor:
        """The intrinsic reward of each transition under the current φ (no gradient)."""
        raise NotImplementedError

    def goal_skill(self, goal_obs: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """The zero-shot skill that should bring the agent from ``obs`` to ``goal_obs``."""
        raise NotImplementedError

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {}

    # --- checkpoints -------------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        """State outside ``state_dict()`` (populations, counters, buffers of reached states)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        pass

    def logs(self) -> dict[str, float]:
        """Scalars worth logging once per epoch."""
        return {}
