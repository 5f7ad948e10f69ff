"""RSD (Zhang et al., ICML 2025): regret-aware skill discovery with a bounded temporal representation.

Representation: ``Ψ(s) = tanh(2φ(s)/T)``; a skill z ∈ [−1, 1]^d is a goal in Ψ-space. For a transition
(s, s', s0, z), φ minimises ``−mean(dir_sim + sg(λ)·c1 + c2)`` with

* ``dir_sim = (Ψ(s') − Ψ(s)) · n(z − sg Ψ(s))`` (progress towards the goal),
* ``c1 = min(1/T − ||Ψ(s') − Ψ(s)||₂, ε/T)`` (one step moves Ψ by at most 1/T), dual step ``log λ·mean(sg c1)``,
* ``c2 = −||Ψ(s0)||₂`` (anchors the start state at the origin).

Policy reward (no gradient, φ after this step's update): ``T·clip(||z − Ψ(s)|| − ||z − Ψ(s')||, −k/T, k/T)``.

Skills: before the replay buffer is warm, z is uniform on the unit sphere; then a generator round runs every
``repeat_time × |population|`` epochs (pop the lowest-regret member when full, train a fresh generator on
regret + novelty + reachability, add it if novel, snapshot the agent for the next regret, clear the reached
set), and each epoch samples from the population mixture weighted by learning progress.
``RSDUniform`` (the official ``explore_type='uniform'``) samples z ~ U[−1, 1]^d instead: the ablation that
isolates the generator. Zero-shot goal reaching uses ``z = Ψ(g)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from .base import Batch, SkillMethod, normalize, unit_sphere
from .config import Config
from .generator import AgentSnapshot, Population, Regret, SkillGenerator, train_generator
from .networks import mlp
from .sac import SAC, clip_and_step


class RSD(SkillMethod):
    name = "rsd"
    uniform = False
    s0: torch.Tensor  # the environment's initial observation (a buffer)

    def __init__(
        self, obs_dim: int, cfg: Config, horizon: int, act_dim: int, s0: np.ndarray
    ) -> None:
        super().__init__(obs_dim, cfg, horizon)
        self.phi = mlp(obs_dim, self.dim, cfg.hidden, cfg.depth)
        assert cfg.lambda_init is not None and cfg.repr_max_step is not None  # Config.resolved
        self.log_lambda = nn.Parameter(torch.tensor(math.log(cfg.lambda_init)))
        self.opt_phi = torch.optim.Adam(self.phi.parameters(), lr=cfg.lr)
        self.phi_params = list(self.phi.parameters())  # what the clip walks every step
        self.opt_lambda = torch.optim.Adam([self.log_lambda], lr=cfg.lr)
        self.register_buffer("s0", torch.as_tensor(np.asarray(s0, dtype=np.float32)).reshape(-1))
        self.generator = SkillGenerator(
            self.dim,
            cfg.gen_std_init,
            cfg.gen_std_min,
            cfg.gen_std_max,
            arch=cfg.generator_arch,
            n_tokens=cfg.n_traj,
            hidden=cfg.hidden,
            depth=cfg.depth,
        )
        self.snapshot = AgentSnapshot(obs_dim + self.dim, act_dim, cfg.hidden, cfg.depth)
        self.has_snapshot = False
        self.population = Population(self.dim, cfg.window_size, cfg.gen_std_init)
        self.counter = 0
        self.rounds = 0
        empty = torch.zeros(0, self.dim)
        self.reached = empty  # X: Ψ(final states) since the last round
        self.x_new = empty  # Ψ(final states) of the latest epoch
        self.x_old = empty  # Ψ(final states) of the earlier epochs since the last round
        self.weights = torch.ones(1)
        self.last_round: dict[str, float] = {}

    # --- representation ----------------------------------------------------------------------
    def psi(self, obs: torch.Tensor) -> torch.Tensor:
        """``Ψ(s) = tanh((2/T)·φ(s))`` ∈ (−1, 1)^d."""
        return torch.tanh((2.0 / self.horizon) * self.phi(obs))

    def update(self, batch: Batch, generator: torch.Generator) -> dict[str, float]:
        # ALGO LOGIC: the bounded representation objective and its dual step
        inv_t = 1.0 / self.horizon
        # one forward pass over the stacked inputs (cheaper than three passes; same values). With a fixed
        # start state (every s0 of the minibatch the same, e.g. the point maze) Ψ(s0) is one row.
        obs, s0 = batch["obs"], batch["s0"]
        n = len(obs)
        if torch.equal(s0, s0[:1].expand_as(s0)):
            psi_all = self.psi(torch.cat([obs, batch["next_obs"], s0[:1]]))
            # one split (its backward is one concatenation, not three zero-filled slices)
            psi_s, psi_next, psi_0 = psi_all.split([n, n, 1])
            psi_0 = psi_0.expand(n, -1)
        else:
            psi_s, psi_next, psi_0 = self.psi(torch.cat([obs, batch["next_obs"], s0])).chunk(3)
        step = psi_next - psi_s
        dir_sim = (step * normalize(batch["z"] - psi_s.detach())).sum(-1)
        c1 = torch.clamp(
            inv_t - torch.linalg.vector_norm(step, dim=-1), max=self.cfg.dual_slack * inv_t
        )
        c2 = -torch.linalg.vector_norm(psi_0, dim=-1)
        lam = self.log_lambda.detach().exp()
        loss_phi = -(dir_sim + lam * c1 + c2).mean()
        self.opt_phi.zero_grad(set_to_none=True)
        loss_phi.backward()
        clip_and_step(self.opt_phi, self.phi_params, self.cfg.grad_clip)
        c1_mean = c1.detach().mean()
        loss_lambda = self.log_lambda * c1_mean
        self.opt_lambda.zero_grad(set_to_none=True)
        loss_lambda.backward()
        clip_and_step(self.opt_lambda, [self.log_lambda], self.cfg.grad_clip)
        return {
            "loss_phi": loss_phi.item(),
            "repr_reward": dir_sim.mean().item(),
            "constraint": c1_mean.item(),
            "anchor": c2.mean().item(),
            "lambda": self.log_lambda.exp().item(),
        }

    @torch.no_grad()
    def reward(self, batch: Batch) -> torch.Tensor:
        z, t = batch["z"], float(self.horizon)
        psi = self.psi(torch.cat([batch["obs"], batch["next_obs"]]))
        # both distances in one subtraction and one norm: rows [Ψ(s); Ψ(s')] against z broadcast
        d0, d1 = torch.linalg.vector_norm(z - psi.view(2, len(z), -1), dim=-1)
        assert self.cfg.repr_max_step is not None
        k = self.cfg.repr_max_step / t
        return t * torch.clamp(d0 - d1, -k, k)

    @torch.no_grad()
    def goal_skill(self, goal_obs: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        return self.psi(goal_obs)

    # --- skills ------------------------------------------------------------------------------
    def eval_skills(self, n: int, generator: torch.Generator) -> torch.Tensor:
        return torch.rand(n, self.dim, generator=generator) * 2.0 - 1.0

    def train_skills(
        self, n: int, generator: torch.Generator, ready: bool, agent: SAC
    ) -> torch.Tensor:
        if not ready:
            return unit_sphere(n, self.dim, generator)
        # ALGO LOGIC: the round schedule, then learning-progress mixture sampling
        self.counter += 1
        ran = False
        if self.counter >= self.cfg.repeat_time * len(self.population):
            self.run_round(agent, generator)
            ran = True
        self.weights = self.population.mixture_weights(self.x_new, self.x_old)
        if ran:
            self.x_old = torch.zeros(0, self.dim)
        return self.population.sample(n, self.weights, generator, unit=self.cfg.z_unit)

    def final_skills(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """Skills from the population mixture with the current learning-progress weights (what RSD trains
        on after the warm-up)."""
        weights = self.weights
        if len(weights) != len(self.population):
            weights = torch.full((len(self.population),), 1.0 / len(self.population))
        return self.population.sample(n, weights, generator, unit=self.cfg.z_unit)

    def regret_fn(self, agent: SAC, generator: torch.Generator) -> Any:
        snapshot = self.snapshot if self.has_snapshot else None
        reg = Regret(agent, snapshot, self.s0, self.cfg.value_samples)
        return lambda z: reg(z, generator)

    def run_round(self, agent: SAC, generator: torch.Generator) -> None:
        """Pop (when full), train a fresh generator, add it if novel, snapshot the agent, clear X."""
        reg = self.regret_fn(agent, generator)
        diagnostic = self.regret_snr(agent) if self.cfg.regret_diagnostic else {}
        removed = -1
        if len(self.population) >= self.cfg.window_size:
            means = torch.stack(
                [
                    reg(self.population.member_samples(j, self.cfg.n_traj, generator)).mean()
                    for j in range(len(self.population))
                ]
            )
            removed = self.population.remove_lowest(means)
        logs = train_generator(
            self.generator, reg, self.population, self.reached, self.cfg, generator
        )
        with torch.no_grad():
            mu, std = self.generator.params()
        added = self.population.add(mu, std, self.cfg.novelty_distance)
        self.snapshot.copy_from(agent)
        self.has_snapshot = True
        self.reached = torch.zeros(0, self.dim)
        self.counter = 0
        self.rounds += 1
        self.last_round = {**logs, **diagnostic, "added": float(added), "removed": float(removed)}

    @torch.no_grad()
    def regret_snr(self, agent: SAC, draws: int = 8) -> dict[str, float]:
        """Signal-to-noise of the regret estimate the generator trains on, before this round's update.

        For ``cfg.regret_diagnostic`` skills z ~ U[−1, 1]^d, ``draws`` independent estimates Reg_r(z)
        (each with the ``value_samples`` action draws the generator uses): signal = std over z of
        mean_r Reg_r(z); noise = mean over z of the std over r (both ddof=1). A random stream of its own
        (seeded by the round number), so measuring leaves the run unchanged.
        """
        gen = torch.Generator().manual_seed(1_000_003 + self.rounds)
        z = torch.rand(self.cfg.regret_diagnostic, self.dim, generator=gen) * 2.0 - 1.0
        snapshot = self.snapshot if self.has_snapshot else None
        estimate = Regret(agent, snapshot, self.s0, self.cfg.value_samples)
        reg = torch.stack([estimate(z, gen) for _ in range(draws)])
        signal = float(reg.mean(0).std(correction=1))
        noise = float(reg.std(0, correction=1).mean())
        return {
            "reg_signal_std": signal,
            "reg_noise_std": noise,
            "reg_snr": signal / max(noise, 1e-12),
        }

    @torch.no_grad()
    def observe(self, final_obs: torch.Tensor) -> None:
        final = self.psi(final_obs)
        self.x_old = torch.cat([self.x_old, self.x_new])
        self.x_new = final
        self.reached = torch.cat([self.reached, final])

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"phi": self.opt_phi, "lambda": self.opt_lambda}

    def extra_state(self) -> dict[str, Any]:
        return {
            "population": self.population.state(),
            "has_snapshot": self.has_snapshot,
            "counter": self.counter,
            "rounds": self.rounds,
            "reached": self.reached.clone(),
            "x_new": self.x_new.clone(),
            "x_old": self.x_old.clone(),
            "weights": self.weights.clone(),
        }

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.population.load_state(state["population"])
        self.has_snapshot = bool(state["has_snapshot"])
        self.counter = int(state["counter"])
        self.rounds = int(state["rounds"])
        self.reached = state["reached"].clone()
        self.x_new = state["x_new"].clone()
        self.x_old = state["x_old"].clone()
        self.weights = state["weights"].clone()

    def logs(self) -> dict[str, float]:
        out = {
            "population": float(len(self.population)),
            "rounds": float(self.rounds),
            "population_spread": self.population.mean_pairwise_distance(),
            "weight_max": self.weights.max().item(),
        }
        out.update({f"round_{k}": v for k, v in self.last_round.items()})
        return out


class RSDUniform(RSD):
    """RSD's representation and reward with skills z ~ U[−1, 1]^d (no generator, no population)."""

    name = "rsd_uniform"
    uniform = True

    def train_skills(
        self, n: int, generator: torch.Generator, ready: bool, agent: SAC
    ) -> torch.Tensor:
        return self.eval_skills(n, generator)

    def final_skills(self, n: int, generator: torch.Generator) -> torch.Tensor:
        return self.eval_skills(n, generator)
