"""Metrics: state coverage, zero-shot goal reaching, intrinsic returns; the random-action baseline; plots.

* **Coverage**: 64 skills (``skills=``): ``"prior"`` the method's evaluation prior (RSD U[−1,1]^d,
  METRA/LSD unit sphere, DIAYN N(0, I)); ``"box"`` U[−1,1]^d for every method; ``"own"`` the distribution
  the method trains on at the end (RSD: its generator mixture with the current learning-progress
  weights; RSD-uniform the box; the others their prior). Deterministic (mean) actions for T steps from a fixed evaluation seed; the number of distinct
  cells visited by all states, initial and final included (point maze: free maze cells from absolute
  coordinates).
* **Zero-shot goal reaching**: for each goal g, the method's goal skill (RSD ``z = Ψ(g)``; METRA/LSD
  ``z_t = n(φ(g) − φ(s_t))`` recomputed every step; DIAYN the mean of q(z|g)), deterministic actions, up to
  T steps, stopping on arrival. FD = mean final distance to the goal (at the stop step); AR = fraction of
  goals reached within the success radius at any step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

EVAL_SEED = 12345
N_EVAL_SKILLS = 64
SKILL_SOURCES = ("prior", "box", "own")


def eval_skills(method: Any, n: int, skills: str, gen: torch.Generator) -> torch.Tensor:
    """``n`` evaluation skills of ``method`` from ``skills`` (one of :data:`SKILL_SOURCES`)."""
    if skills == "prior":
        return method.eval_skills(n, gen)
    if skills == "box":
        return torch.rand(n, method.dim, generator=gen) * 2.0 - 1.0
    if skills == "own":
        return method.final_skills(n, gen)
    raise ValueError(f"skills must be one of {', '.join(SKILL_SOURCES)}, got {skills!r}")


def rollout(
    env: Any,
    act: Callable[[np.ndarray, int], np.ndarray],
    n: int,
    seed: int = EVAL_SEED,
) -> dict[str, np.ndarray]:
    """Run ``n`` lockstep episodes with ``act(obs, t) -> env actions``; returns positions (n, T+1, 2)."""
    obs, info = env.reset(seed=seed, num_envs=n)
    xy = [info["xy"]]
    observations = [obs]
    for t in range(env.horizon):
        obs, _, terminated, _, info = env.step(act(obs, t))
        xy.append(info["xy"])
        observations.append(obs)
        if terminated.all():
            break
    return {"xy": np.stack(xy, axis=1), "obs": np.stack(observations, axis=1)}


def evaluate_coverage(
    trainer: Any,
    n_skills: int = N_EVAL_SKILLS,
    seed: int = EVAL_SEED,
    skills: str = "prior",
    deterministic: bool = True,
) -> dict[str, Any]:
    """Coverage of ``n_skills`` skills (``skills``: prior, box or own) with deterministic actions (or
    policy samples); also their intrinsic returns."""
    gen = torch.Generator().manual_seed(seed)
    z = eval_skills(trainer.method, n_skills, skills, gen)
    out = rollout(
        trainer.env,
        lambda obs, t: trainer.act(obs, z, deterministic=deterministic, generator=gen),
        n_skills,
        seed,
    )
    env = trainer.env
    obs = torch.as_tensor(out["obs"], dtype=torch.float32)
    with torch.no_grad():
        batch = {
            "obs": obs[:, :-1].reshape(-1, obs.shape[-1]),
            "next_obs": obs[:, 1:].reshape(-1, obs.shape[-1]),
            "s0": obs[:, :1].expand(-1, obs.shape[1] - 1, -1).reshape(-1, obs.shape[-1]),
            "z": z[:, None].expand(-1, obs.shape[1] - 1, -1).reshape(-1, z.shape[-1]),
        }
        returns = trainer.method.reward(batch).reshape(n_skills, -1).sum(1)
        x = torch.cat([obs, z[:, None].expand(-1, obs.shape[1], -1)], -1).reshape(
            -1, obs.shape[-1] + z.shape[-1]
        )
        mean_action = trainer.agent.policy.mean_action(x)
    result = _coverage_numbers(env, out["xy"])
    result.update(
        {
            "intrinsic_return": float(returns.mean()),
            # |tanh μ| of the policy along these trajectories, in policy units (uniform random: 0.5)
            "mean_abs_action": float(mean_action.abs().mean()),
            "skill_source": skills,
            "deterministic": deterministic,
            "xy": out["xy"],
            "skills": z.numpy(),
        }
    )
    return result


def _coverage_numbers(env: Any, xy: np.ndarray) -> dict[str, Any]:
    cov = int(env.coverage(xy))
    result: dict[str, Any] = {"coverage": cov}
    if getattr(env, "max_cells", None):
        result["coverage_fraction"] = cov / env.max_cells
    if getattr(env, "name", "") == "point":
        result["coverage_half_cells"] = int(env.coverage(xy, cell_size=0.5))
    return result


def evaluate_zero_shot(
    trainer: Any, seed: int = EVAL_SEED, recompute: bool | None = None
) -> dict[str, Any]:
    """Zero-shot goal reaching over the environment's goal set: FD, AR and per-goal distances."""
    env = trainer.env
    goals = env.goals()
    goal_obs = env.goal_obs(goals)
    recompute = trainer.method.recompute_goal_skill if recompute is None else recompute
    state: dict[str, Any] = {}

    def act(obs: np.ndarray, t: int) -> np.ndarray:
        if t == 0 or recompute:
            state["z"] = trainer.goal_skill(goal_obs, obs)
        return trainer.act(obs, state["z"], deterministic=True)

    return _goal_metrics(env, goals, act, seed)


def _goal_metrics(
    env: Any, goals: np.ndarray, act: Callable[[np.ndarray, int], np.ndarray], seed: int
) -> dict[str, Any]:
    n = len(goals)
    obs, info = env.reset(seed=seed, num_envs=n)
    stopped = np.zeros(n, dtype=bool)
    final = info["xy"].copy()
    radius = env.success_radius
    stopped |= np.linalg.norm(final - goals, axis=1) < radius
    for t in range(env.horizon):
        obs, _, terminated, _, info = env.step(act(obs, t))
        final = np.where(stopped[:, None], final, info["xy"])
        stopped |= np.linalg.norm(final - goals, axis=1) < radius
        if (stopped | terminated).all():
            break
    dist = np.linalg.norm(final - goals, axis=1)
    return {
        "final_distance": float(dist.mean()),
        "success_rate": float(stopped.mean()),
        "n_goals": n,
        "success_radius": radius,
        "per_goal_distance": dist.tolist(),
    }


class RandomAgent:
    """The random-action baseline: uniform actions in the environment's bounds, goal-blind."""

    def __init__(self, env: Any, seed: int = 0) -> None:
        self.env = env
        self.rng = np.random.default_rng(seed)

    def act(self, obs: np.ndarray, t: int) -> np.ndarray:
        n = len(obs)
        return self.rng.uniform(
            self.env.action_low, self.env.action_high, size=(n, len(self.env.action_low))
        )


def random_baseline(env: Any, seed: int = 0, n_skills: int = N_EVAL_SKILLS) -> dict[str, Any]:
    """Coverage of ``n_skills`` uniform-random-action episodes and random-action goal reaching; also the
    *standing* floor: the coverage of ``n_skills`` episodes with the mid-range action (zero torque for
    MuJoCo bodies), what a policy that does not move scores."""
    agent = RandomAgent(env, seed)
    out = rollout(env, agent.act, n_skills, EVAL_SEED)
    result = _coverage_numbers(env, out["xy"])
    zero = _goal_metrics(env, env.goals(), agent.act, EVAL_SEED)
    mid = 0.5 * (np.asarray(env.action_low) + np.asarray(env.action_high))
    still = rollout(env, lambda obs, t: np.repeat(mid[None], len(obs), axis=0), n_skills, EVAL_SEED)
    result.update(
        {"xy": out["xy"], "zero_shot": zero, "standing_coverage": int(env.coverage(still["xy"]))}
    )
    return result


# ------------------------------------------------------------------------------------------ plots


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _draw_maze(ax: Any, env: Any) -> None:
    grid = getattr(env, "grid", None)
    if grid is None:
        return
    from matplotlib.patches import Rectangle

    origin = env.origin
    for i, j in np.argwhere(grid == 1):
        ax.add_patch(Rectangle((j - origin[0], i - origin[1]), 1, 1, color="0.35", lw=0))
    ax.set_xlim(-origin[0], grid.shape[1] - origin[0])
    ax.set_ylim(grid.shape[0] - origin[1], -origin[1])  # row 0 at the top, as the map is written


def plot_trajectories(
    env: Any,
    xy: np.ndarray,
    path: Path,
    title: str,
    skills: np.ndarray | None = None,
    xlabel: str = "x position",
    ylabel: str = "y position",
) -> Path | None:
    """Skill trajectories (n, T+1, 2) over the maze walls, coloured by skill (the start is the star);
    labelled axes; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(4.2, 4.2), dpi=110)
    _draw_maze(ax, env)
    n = len(xy)
    if skills is not None and skills.shape[-1] >= 2:
        angle = np.arctan2(skills[:, 1], skills[:, 0])
        colors = plt.cm.hsv((angle + np.pi) / (2 * np.pi))
    else:
        colors = plt.cm.viridis(np.linspace(0, 1, n))
    for k in range(n):
        ax.plot(xy[k, :, 0], xy[k, :, 1], color=colors[k], lw=1.0, alpha=0.85)
        ax.plot(xy[k, -1, 0], xy[k, -1, 1], "o", color=colors[k], ms=2.5)
    ax.plot(0, 0, "k*", ms=8)
    ax.set_aspect("equal")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_curves(
    curves: Mapping[str, Sequence[Sequence[tuple[float, float]]]],
    path: Path,
    ylabel: str = "coverage (cells)",
    title: str = "",
    ceiling: float | None = None,
    baseline: float | None = None,
) -> Path | None:
    """Mean (± sample std over runs) of ``y`` against environment steps, one line per method;
    ``ceiling`` (dotted) and ``baseline`` (dashed, random actions) as horizontal lines."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(5.2, 3.4), dpi=110)
    for name, runs in curves.items():
        if not runs:
            continue
        length = min(len(r) for r in runs)
        steps = np.array([p[0] for p in runs[0][:length]])
        ys = np.array([[p[1] for p in r[:length]] for r in runs])
        mean = ys.mean(0)
        ax.plot(steps, mean, label=name)
        if len(runs) > 1:
            std = ys.std(0, ddof=1)
            ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
    if ceiling is not None:
        ax.axhline(ceiling, color="0.5", ls=":", lw=1)
    if baseline is not None:
        ax.axhline(baseline, color="k", ls="--", lw=1, label="random actions")
    ax.set(xlabel="environment steps", ylabel=ylabel, title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
