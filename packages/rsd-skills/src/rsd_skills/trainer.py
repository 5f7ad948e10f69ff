"""The training loop shared by every method: rollouts in lockstep, replay, φ step, reward, SAC step.

Per epoch (RSD's loop, identical for METRA, LSD and DIAYN apart from the method's own lines):

1. the method picks the skills of the N_τ trajectories (RSD may first run a generator round);
2. N_τ episodes of length T are rolled out in lockstep with the stochastic policy π(a | s, z), the skill
   fixed per episode, and stored with their first observation s0;
3. the method sees the final observations (RSD's reached set);
4. once the buffer holds ``min_buffer`` transitions, K times: a minibatch, the method's φ (and λ) step,
   the reward recomputed with the updated φ, and one SAC step.

Seeding: network initialisation uses ``torch.manual_seed(seed)`` once; every later draw (policy noise,
skills, generator) uses the trainer's own ``torch.Generator`` and every index/reset draw its numpy
``Generator``, both saved in checkpoints, so :meth:`SkillTrainer.load` resumes the exact run.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .base import SkillMethod
from .config import ALGOS, Config, check_algo
from .diayn import DIAYN
from .envs import env_from_spec, make_env
from .lsd import LSD
from .metra import METRA
from .replay import ReplayBuffer
from .rsd import RSD, RSDUniform
from .sac import SAC

CHECKPOINT_FORMAT = "rsd-skills checkpoint 1"
METHODS: dict[str, type[SkillMethod]] = {
    "rsd": RSD,
    "rsd_uniform": RSDUniform,
    "metra": METRA,
    "lsd": LSD,
    "diayn": DIAYN,
}


class SkillTrainer:
    """Train one skill-discovery method on a vectorised environment.

    ``algo``: one of ``rsd``, ``rsd_uniform``, ``metra``, ``lsd``, ``diayn``; ``env``: an environment from
    :mod:`rsd_skills.envs` (or its name for :func:`~rsd_skills.envs.make_env`); ``config``: a
    :class:`~rsd_skills.config.Config` (CPU-sized defaults).
    """

    def __init__(
        self,
        algo: str = "rsd",
        env: Any = "point_maze",
        config: Config | None = None,
        seed: int = 0,
        env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.algo = check_algo(algo.replace("-", "_"))
        self.env = make_env(env, **(env_kwargs or {})) if isinstance(env, str) else env
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        self.seed = seed
        self.horizon = int(self.env.horizon)
        self.obs_dim = int(self.env.obs_dim)
        self.act_dim = int(self.env.act_dim)
        self.cfg = (config or Config()).resolved(self.algo, self.horizon, self.act_dim)
        cfg = self.cfg
        torch.manual_seed(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        obs0, _ = self.env.reset(seed=seed, num_envs=1)
        self.s0 = np.asarray(obs0[0], dtype=np.float32)
        self.agent = SAC(
            self.obs_dim + cfg.dim_option,
            self.act_dim,
            hidden=cfg.hidden,
            depth=cfg.depth,
            lr=cfg.lr,
            gamma=cfg.gamma,
            tau=cfg.tau,
            alpha_init=cfg.alpha_init,
            target_entropy=cfg.target_entropy,
            grad_clip=cfg.grad_clip,
        )
        cls = METHODS[self.algo]
        if issubclass(cls, RSD):
            self.method: SkillMethod = cls(self.obs_dim, cfg, self.horizon, self.act_dim, self.s0)
        else:
            self.method = cls(self.obs_dim, cfg, self.horizon)
        self.buffer = ReplayBuffer(cfg.replay_size, self.obs_dim, self.act_dim, cfg.dim_option)
        self.low = np.asarray(self.env.action_low, dtype=np.float64)
        self.high = np.asarray(self.env.action_high, dtype=np.float64)
        self.epoch = 0
        self.env_steps = 0
        self.grad_steps = 0
        self.train_seconds = 0.0
        self.history: list[dict[str, float]] = []
        self.curve: list[
            dict[str, float]
        ] = []  # evaluation points a caller records (CLI, benchmarks)
        self.visited: set[tuple[int, ...]] = set()

    # --- acting ------------------------------------------------------------------------------
    def to_env_action(self, a: np.ndarray) -> np.ndarray:
        """Map policy actions in [−1, 1] affinely onto the environment's bounds, then clip."""
        scaled = self.low + (np.asarray(a, dtype=np.float64) + 1.0) * 0.5 * (self.high - self.low)
        return np.clip(scaled, self.low, self.high)

    def act(
        self,
        obs: np.ndarray,
        z: np.ndarray | torch.Tensor,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> np.ndarray:
        """Environment actions for observations ``obs`` (n, obs_dim) and skills ``z`` (n, d); policy
        samples draw from ``generator`` (default: the trainer's own, which advances the run's stream)."""
        x = torch.cat(
            [torch.as_tensor(np.asarray(obs), dtype=torch.float32), torch.as_tensor(z)], -1
        )
        a = self.agent.act(x, generator or self.gen, deterministic=deterministic)
        return self.to_env_action(a.numpy())

    def goal_skill(self, goal_obs: np.ndarray, obs: np.ndarray) -> torch.Tensor:
        """The method's zero-shot skill from ``obs`` towards ``goal_obs`` (both (n, obs_dim))."""
        g = torch.as_tensor(np.asarray(goal_obs), dtype=torch.float32)
        o = torch.as_tensor(np.asarray(obs), dtype=torch.float32)
        return self.method.goal_skill(g, o)

    # --- training ----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return len(self.buffer) >= self.cfg.min_buffer

    def collect(self, z: torch.Tensor) -> dict[str, np.ndarray]:
        """Roll out one episode per skill in lockstep (stochastic policy); returns the transitions."""
        n = len(z)
        obs, info = self.env.reset(seed=int(self.rng.integers(2**31)), num_envs=n)
        s0 = np.asarray(obs, dtype=np.float32).copy()
        alive = np.ones(n, dtype=bool)
        zs = z.numpy().astype(np.float32)
        rows: dict[str, list[np.ndarray]] = {
            k: [] for k in ("obs", "act", "next_obs", "s0", "z", "terminal")
        }
        xy = [info["xy"]]
        for _ in range(self.horizon):
            x = torch.cat([torch.as_tensor(obs, dtype=torch.float32), z], dim=-1)
            a = self.agent.act(x, self.gen).numpy()
            next_obs, _, terminated, truncated, info = self.env.step(self.to_env_action(a))
            terminal = terminated | (truncated & self.cfg.timeout_is_terminal)
            for key, value in (
                ("obs", obs),
                ("act", a),
                ("next_obs", next_obs),
                ("s0", s0),
                ("z", zs),
                ("terminal", terminal.astype(np.float32)),
            ):
                rows[key].append(np.asarray(value, dtype=np.float32)[alive])
            xy.append(info["xy"])
            alive = alive & ~terminated
            obs = next_obs
            if not alive.any():
                break
        out = {k: np.concatenate(v) for k, v in rows.items()}
        out["final_obs"] = np.asarray(obs, dtype=np.float32)
        out["xy"] = np.stack(xy, axis=1)
        return out

    def train_epoch(self) -> dict[str, float]:
        start = time.perf_counter()
        cfg = self.cfg
        # ALGO LOGIC: the method chooses this epoch's skills (RSD: generator rounds + mixture)
        z = self.method.train_skills(cfg.n_traj, self.gen, self.ready, self.agent)
        # TRY NOT TO MODIFY: lockstep rollouts, replay, the method's view of the final states
        traj = self.collect(z)
        self.buffer.add({k: traj[k] for k in ("obs", "act", "next_obs", "s0", "z", "terminal")})
        self.method.observe(torch.from_numpy(traj["final_obs"]))
        self.env_steps += len(traj["obs"])
        self.visited.update(map(tuple, np.unique(self.env.cells(traj["xy"]), axis=0).tolist()))
        with torch.no_grad():
            episode = {k: torch.from_numpy(traj[k]) for k in ("obs", "next_obs", "s0", "z")}
            intrinsic = float(self.method.reward(episode).sum()) / len(z)
        logs: dict[str, float] = {}
        if self.ready:
            sums: dict[str, float] = {}
            for _ in range(cfg.grad_steps):
                batch = self.buffer.sample(cfg.batch_size, self.rng)
                # ALGO LOGIC: the representation (and dual) step, then the reward under the new φ
                step_logs = self.method.update(batch, self.gen)
                reward = self.method.reward(batch)
                # TRY NOT TO MODIFY: one SAC step on [s, z]
                x = torch.cat([batch["obs"], batch["z"]], dim=-1)
                x2 = torch.cat([batch["next_obs"], batch["z"]], dim=-1)
                step_logs.update(
                    self.agent.update(x, batch["act"], reward, x2, batch["terminal"], self.gen)
                )
                step_logs["reward"] = float(reward.mean())
                for k, v in step_logs.items():
                    sums[k] = sums.get(k, 0.0) + v
                self.grad_steps += 1
            logs = {k: v / max(cfg.grad_steps, 1) for k, v in sums.items()}
        self.epoch += 1
        self.train_seconds += time.perf_counter() - start
        record = {
            "epoch": float(self.epoch),
            "env_steps": float(self.env_steps),
            "intrinsic_return": intrinsic,
            "train_cells": float(len(self.visited)),
            **logs,
            **self.method.logs(),
        }
        self.history.append(record)
        return record

    def train(
        self,
        epochs: int,
        callback: Callable[[SkillTrainer, dict[str, float]], None] | None = None,
    ) -> list[dict[str, float]]:
        """Run ``epochs`` more epochs; ``callback(trainer, record)`` after each (evaluation, progress)."""
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
            raise ValueError(f"epochs must be an integer >= 0, got {epochs!r}")
        records = []
        for _ in range(epochs):
            record = self.train_epoch()
            records.append(record)
            if callback is not None:
                callback(self, record)
        return records

    # --- checkpoints -------------------------------------------------------------------------
    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        opts = {f"agent.{k}": v for k, v in self.agent.optimizers().items()}
        opts.update({f"method.{k}": v for k, v in self.method.optimizers().items()})
        return opts

    def state(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "algo": self.algo,
            "config": self.cfg.to_dict(),
            "env": self.env.spec(),
            "seed": self.seed,
            "epoch": self.epoch,
            "env_steps": self.env_steps,
            "grad_steps": self.grad_steps,
            "train_seconds": self.train_seconds,
            "history": self.history,
            "curve": self.curve,
            "visited": sorted(self.visited),
            "agent": self.agent.state_dict(),
            "method": self.method.state_dict(),
            "method_extra": self.method.extra_state(),
            "optimizers": {k: v.state_dict() for k, v in self._optimizers().items()},
            "buffer": self.buffer.state(),
            "torch_rng": self.gen.get_state(),
            "numpy_rng": self.rng.bit_generator.state,
        }

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint that :meth:`load` resumes exactly (networks, optimizers, buffer, RNGs)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        torch.save(self.state(), tmp)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path, env: Any = None) -> SkillTrainer:
        """Rebuild a trainer from :meth:`save` (``env``: needed for environments built from a function)."""
        state = read_checkpoint(path)
        env = env_from_spec(state["env"]) if env is None else env
        trainer = cls(
            state["algo"], env, Config.from_dict(state["config"]), seed=int(state["seed"])
        )
        trainer.load_state(state)
        return trainer

    def load_state(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.method.load_state_dict(state["method"])
        self.method.load_extra_state(state["method_extra"])
        opts = self._optimizers()
        missing = sorted(set(opts) - set(state["optimizers"]))
        if missing:
            raise ValueError(f"checkpoint lacks optimizer state for {missing}")
        for name, opt in opts.items():
            opt.load_state_dict(state["optimizers"][name])
        self.buffer.load_state(state["buffer"])
        self.gen.set_state(state["torch_rng"])
        self.rng.bit_generator.state = state["numpy_rng"]
        self.epoch = int(state["epoch"])
        self.env_steps = int(state["env_steps"])
        self.grad_steps = int(state["grad_steps"])
        self.train_seconds = float(state["train_seconds"])
        self.history = [dict(r) for r in state["history"]]
        self.curve = [dict(r) for r in state.get("curve", [])]
        self.visited = {tuple(c) for c in state["visited"]}


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load and validate a checkpoint file; ``ValueError`` names the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist or is not a file")
    if path.stat().st_size == 0:
        raise ValueError(f"checkpoint {path} is empty")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as exc:
        raise ValueError(
            f"checkpoint {path} cannot be read ({str(exc).splitlines()[0][:200]})"
        ) from exc
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path} is not an rsd-skills checkpoint (expected format {CHECKPOINT_FORMAT!r})"
        )
    for key in ("algo", "config", "env", "seed", "agent", "method", "optimizers", "buffer"):
        if key not in state:
            raise ValueError(f"checkpoint {path} lacks the field {key!r}")
    if state["algo"] not in ALGOS:
        raise ValueError(f"checkpoint {path}: unknown algo {state['algo']!r}")
    for group in ("agent", "method"):
        for name, tensor in state[group].items():
            if (
                torch.is_tensor(tensor)
                and tensor.is_floating_point()
                and not torch.isfinite(tensor).all()
            ):
                raise ValueError(f"checkpoint {path}: {group}.{name} holds NaN or inf values")
    for name, tensor in state["buffer"]["data"].items():
        if not torch.isfinite(tensor).all():
            raise ValueError(f"checkpoint {path}: replay buffer field {name!r} holds NaN or inf")
    return state
