"""Hyperparameters of every method, with where each default comes from (``SOURCES``).

One dataclass holds the settings of the shared training loop, the SAC core and each method; fields
set to ``None`` take a per-algorithm default in :meth:`Config.resolved` (e.g. the dual variable starts
at 20 for RSD and 30 for METRA, as in the two official launch scripts). Every field is validated by
:meth:`Config.validate`, which names the field, the value and what is accepted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._contract import REQUIRED, ConfigError, check_config, param

ALGOS = ("rsd", "rsd_uniform", "metra", "lsd", "diayn")
GENERATOR_ARCHS = ("free", "mlp_zero_token")
METRA_CONSTRAINTS = ("sq_norm", "mean_sq")
_BIG = 10**7  # transitions: a replay buffer this large already needs gigabytes


@dataclass
class Config:
    """Settings of one skill-discovery run (CPU-sized defaults; official values in ``SOURCES``).

    Every field is checked when the config is built (:class:`ConfigError` names it); the fields with a
    flag are the method options of ``rsd-skills train`` and ``demo``."""

    # --- shared loop -------------------------------------------------------------------------
    dim_option: int = param(2, "skill dimension d", low=1, high=1024)
    n_traj: int = param(8, "trajectories (and skills) per epoch, N_τ", low=1, high=100_000)
    grad_steps: int = param(50, "gradient steps per epoch, K", low=0, high=1_000_000)
    batch_size: int = param(256, "minibatch size of every gradient step", low=1, high=1_000_000)
    hidden: int = param(256, "width of every MLP", low=1, high=65_536)
    depth: int = param(2, "hidden layers of every MLP", low=1, high=64)
    lr: float = param(
        1e-4, "Adam learning rate of φ, λ, π, Q and α", low=0, low_open=True, high=10
    )  # fmt: skip
    replay_size: int = param(100_000, "replay buffer capacity (transitions)", low=1, high=_BIG)
    min_buffer: int = param(
        1000, "transitions stored before training (and the skill generator) starts", low=1,
        high=_BIG,
    )  # fmt: skip
    timeout_is_terminal: bool = param(
        False, "official behaviour: no bootstrap through the time limit"
    )
    grad_clip: float | None = param(
        None, "agent gradient-norm clip, 0 = off (auto: 3 for rsd/rsd-uniform, off otherwise)",
        low=0, high=1e6, none="auto",
    )  # fmt: skip
    # --- SAC ----------------------------------------------------------------------------------
    gamma: float = param(0.99, "SAC discount", low=0, high=1, flag=False)
    tau: float = param(5e-3, "SAC target update rate", low=0, low_open=True, high=1, flag=False)
    alpha_init: float = param(
        0.01, "SAC initial entropy weight", low=0, low_open=True, high=1e3, flag=False
    )
    target_entropy: float | None = param(
        None, "SAC entropy target (auto: −|A|/2)", low=-1e6, high=1e6, none="auto", flag=False
    )
    # --- METRA / RSD dual ---------------------------------------------------------------------
    lambda_init: float | None = param(
        None, "initial dual variable λ (auto: 20 for rsd, 30 for metra)", low=0, low_open=True,
        high=1e6, none="auto",
    )  # fmt: skip
    dual_slack: float = param(1e-3, "ε of the clamped constraint", low=0, high=1e3, flag=False)
    metra_constraint: str = param(
        "sq_norm", "METRA's D: sq_norm (paper, ||Δφ||²) or mean_sq (official code, divided by d)",
        choices=METRA_CONSTRAINTS,
    )  # fmt: skip
    recompute_goal_skill: bool = param(
        True, "METRA/LSD zero-shot: recompute z_t = n(φ(g) − φ(s_t)) every step (off: once at s0)"
    )
    # --- RSD ----------------------------------------------------------------------------------
    repr_max_step: float | None = param(
        None, "k of the RSD reward clip T·clip(Δ, −k/T, k/T) (auto: T, i.e. inactive)", low=0,
        low_open=True, high=1e9, none="auto", flag=False,
    )  # fmt: skip
    w2: float = param(10.0, "generator novelty (population KL) weight", low=0, high=1e6)
    w3: float = param(3.0, "generator confidence (reachability) weight", low=0, high=1e6)
    window_size: int = param(10, "largest population of skill generators", low=1, high=10_000)
    repeat_time: int = param(
        3, "a generator round every repeat-time × population epochs", low=1, high=1_000_000
    )
    gen_steps: int = param(100, "generator gradient steps per round", low=0, high=1_000_000,
                           flag=False)  # fmt: skip
    gen_lr: float = param(3e-2, "generator learning rate", low=0, low_open=True, high=10,
                          flag=False)  # fmt: skip
    gen_grad_clip: float = param(3.0, "generator gradient clip", low=0, low_open=True, high=1e6,
                                 flag=False)  # fmt: skip
    gen_std_init: float = param(0.3, "generator initial std", low=0, low_open=True, high=10,
                                flag=False)  # fmt: skip
    gen_std_min: float = param(0.1, "generator smallest std", low=0, low_open=True, high=10,
                               flag=False)  # fmt: skip
    gen_std_max: float = param(0.5, "generator largest std", low=0, low_open=True, high=10,
                               flag=False)  # fmt: skip
    generator_arch: str = param(
        "free", "RSD generator: free TanhNormal parameters or the official MLP (mlp_zero_token)",
        choices=GENERATOR_ARCHS,
    )  # fmt: skip
    value_samples: int = param(3, "actions M per V(s0|z) estimate", low=1, high=10_000, flag=False)
    novelty_distance: float = param(
        0.1, "a trained generator joins the population only this far (tanh-mean L2) from every "
        "member", low=0, high=1e3, flag=False,
    )  # fmt: skip
    regret_diagnostic: int = param(
        0, "RSD: at each generator round, measure Reg's signal-to-noise with this many skills "
        "(0 = off; own random stream, so the run is unchanged)", low=0, high=100_000, flag=False,
    )  # fmt: skip
    z_unit: bool = param(
        False, "RSD: normalise sampled skills to unit length (official option) instead of "
        "clamping to the box",
    )  # fmt: skip
    extra: dict[str, Any] = field(default_factory=dict)
    """free-form notes stored with the run (not used by the algorithms)"""

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def paper_scale(cls, **overrides: Any) -> Config:
        """The official budget per gradient epoch (:data:`PAPER_SCALE`: 1024×2 MLPs, 16 trajectories and
        200 gradient steps of minibatch 1024 per epoch, 300k replay, 10k warm-up); ``overrides`` win."""
        return cls(**{**PAPER_SCALE, **overrides})

    def resolved(self, algo: str, horizon: int, act_dim: int) -> Config:
        """A copy with the per-algorithm ``None`` defaults filled in (validated)."""
        check_algo(algo)
        rsd = algo in ("rsd", "rsd_uniform")
        cfg = self.method_config()
        if cfg.lambda_init is None:
            cfg.lambda_init = 20.0 if rsd else 30.0
        if cfg.grad_clip is None:
            cfg.grad_clip = 3.0 if rsd else 0.0
        if cfg.repr_max_step is None:
            cfg.repr_max_step = float(horizon)
        if cfg.target_entropy is None:
            cfg.target_entropy = -act_dim / 2.0
        cfg.validate()
        return cfg

    def method_config(self) -> Config:
        """The method settings alone, as a plain :class:`Config` (from a job config, which extends it)."""
        names = [f.name for f in dataclasses.fields(Config) if f.name != "extra"]
        return Config(**{n: getattr(self, n) for n in names}, extra=dict(self.extra))

    def validate(self) -> Config:
        """Check every field (also run when the config is built); :class:`ConfigError` names the
        first one out of range."""
        check_config(self)
        if not self.gen_std_min <= self.gen_std_init <= self.gen_std_max:
            raise ConfigError(
                "gen_std_init",
                "Config needs gen_std_min <= gen_std_init <= gen_std_max, got "
                f"{self.gen_std_min!r}, {self.gen_std_init!r}, {self.gen_std_max!r}",
            )
        if self.min_buffer > self.replay_size:
            raise ConfigError(
                "min_buffer",
                f"min_buffer ({self.min_buffer}) exceeds replay_size ({self.replay_size})",
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown Config field(s) {unknown}; accepted: {sorted(names)}")
        return cls(**data).validate()


def check_algo(algo: str) -> str:
    if algo not in ALGOS:
        raise ValueError(f"unknown algo {algo!r}; choose one of {', '.join(ALGOS)}")
    return algo


# The official per-epoch budget (ZhHe11/RSD main.py and launch scripts; METRA's Ant script uses 8
# trajectories and minibatch 256): ``Config.paper_scale()`` and ``rsd-skills train --paper-scale``.
PAPER_SCALE: dict[str, Any] = {
    "hidden": 1024,
    "depth": 2,
    "n_traj": 16,
    "grad_steps": 200,
    "batch_size": 1024,
    "replay_size": 300_000,
    "min_buffer": 10_000,
}
PAPER_EPOCHS = 20_000  # the official AntMaze-large script
PAPER_HORIZON = 200  # T of every official environment

# Where each default comes from: "official" = ZhHe11/RSD tests/main.py or seohongpark/METRA, "ours" =
# a CPU-sized choice of this package (the official value beside it).
SOURCES: dict[str, str] = {
    "dim_option": "official (2)",
    "n_traj": "ours: 8 (official RSD 16; METRA 8)",
    "grad_steps": "ours: 50 (official 200)",
    "batch_size": "ours: 256 (official RSD 1024; METRA 256)",
    "hidden/depth": "ours: 256×2 (official 1024×2)",
    "lr": "official (1e-4 for every module)",
    "replay_size/min_buffer": "ours: 100k / 1k (official 300k / 10k)",
    "gamma/tau/alpha_init/target_entropy": "official (0.99 / 5e-3 / 0.01 / −|A|/2)",
    "lambda_init": "official: 20 in RSD's main.py, 30 in METRA's",
    "dual_slack": "official (1e-3)",
    "metra_constraint": "METRA paper (||Δφ||²); 'mean_sq' is METRA's code",
    "repr_max_step": "ours: T (official 300 with T=200, also inactive)",
    "w2/w3": "official run_large.sh (10 / 3; main.py default 3 / 3)",
    "window_size": "official main.py (10)",
    "repeat_time": "official run_large.sh (3; main.py default 5)",
    "gen_steps/gen_lr/gen_grad_clip": "official, hard-coded (100 / 3e-2 / 3)",
    "gen_std_init/min/max": "official (0.3 / 0.1 / 0.5)",
    "value_samples": "official, hard-coded (3)",
    "novelty_distance": "official, hard-coded (0.1)",
    "regret_diagnostic": "ours: a measurement, off by default (not in the official code)",
    "grad_clip": "official RSD clips every agent gradient at 3; METRA's code does not clip",
    "timeout_is_terminal": "ours: False (gymnasium semantics); True is the official behaviour",
}


# ------------------------------------------------------------------------------- the CLI's jobs
#
# ``TrainConfig`` and ``DemoConfig`` extend :class:`Config` with the job's own fields, so one dataclass
# holds a whole run and its flags; ``cfg.method_config()`` is what the trainer gets.

ALGO_CHOICES = ("rsd", "rsd-uniform", "metra", "lsd", "diayn")
ENV_NAMES = ("point-maze", "point", "ant", "gr-point-maze")
MAZE_NAMES = ("u", "medium", "large")  # envs.MAZES (a test checks that the two agree)
TRAIN_EPOCHS = 150
_ENV_DOC = (
    "environment: point-maze, point, ant, gr-point-maze, or any gymnasium id such as "
    "HalfCheetah-v5 or Hopper-v5 (needs rsd-skills[mujoco]; see xy_dims)"
)
_MAZE_DOC = "point-maze map: u, medium, large, or a text file of 0/1 (or ./#) rows"
_SEED = 2**32 - 1  # numpy's seeds; torch's fit too


@dataclass
class TrainConfig(Config):
    """``rsd-skills train``: one method trained on one environment (the method fields are
    :class:`Config`'s); ``run_train(cfg, out)`` runs it."""

    env: str = param("point-maze", _ENV_DOC)
    algo: str = param("rsd", "skill-discovery method", choices=ALGO_CHOICES)
    epochs: int | None = param(
        None, f"training epochs in total, each N_τ episodes of T steps (auto: {TRAIN_EPOCHS}, "
        f"or {PAPER_EPOCHS} with paper_scale)", low=1, high=10_000_000, none="auto",
    )  # fmt: skip
    maze: str | Path = param("medium", _MAZE_DOC, path="file", names=MAZE_NAMES)
    episode_length: int | None = param(
        None, "episode length T (auto: 100 point-maze, 50 point, 200 ant and gymnasium ids, "
        f"{PAPER_HORIZON} with paper_scale)", low=1, high=100_000, none="auto",
    )  # fmt: skip
    xy_dims: tuple[int, ...] = param(
        (0, 1), "gymnasium ids: one or two observation indices holding the position used for "
        "coverage and goals (HalfCheetah/Hopper: 0, the x position)", low=0, high=100_000,
    )  # fmt: skip
    obs_norm: str = param(
        "auto", "gymnasium ids: normalise observations with a mean/std from 10k random steps, as "
        "for ant", choices=("auto", "none"),
    )  # fmt: skip
    # shadows Config.paper_scale() on this subclass only (call Config.paper_scale() for the preset)
    paper_scale: bool = param(  # type: ignore[assignment]
        False, "the official budget: 1024x2 MLPs, 16 trajectories and 200 gradient steps of "
        f"minibatch 1024 per epoch, 300k replay, 10k warm-up, T={PAPER_HORIZON}; overrides those "
        "fields (slow on a CPU)",
    )  # fmt: skip
    eval_every: int = param(
        10, "evaluate coverage and zero-shot every N epochs for the curve", low=1, high=10_000_000
    )
    resume: str | Path | None = param(
        None, "continue the run of this checkpoint up to epochs in total (its algo, env and "
        "options are kept)", path="file", none="none",
    )  # fmt: skip
    threads: int = param(1, "torch CPU threads", low=1, high=1024)
    seed: int = param(0, "random seed", low=0, high=_SEED)
    device: str = param("cpu", "torch device (the package runs on the CPU)", choices=("cpu",),
                        flag=False)  # fmt: skip

    def resolved_epochs(self) -> int:
        if self.epochs is not None:
            return self.epochs
        return PAPER_EPOCHS if self.paper_scale else TRAIN_EPOCHS


# demo --quick: what it replaces
DEMO_QUICK: dict[str, Any] = {
    "epochs": 12, "seeds": 1, "eval_every": 3, "hidden": 64, "grad_steps": 20, "min_buffer": 800,
}  # fmt: skip


@dataclass
class DemoConfig(Config):
    """``rsd-skills demo``: several methods at equal environment steps, several seeds, against random
    actions; ``run_demo(cfg, out)`` runs it."""

    hidden: int = param(128, "width of every MLP", low=1, high=65_536)
    quick: bool = param(
        False, "1 seed, 12 epochs, 64-wide MLPs, 20 gradient steps per epoch, 800 warm-up "
        "transitions (about half a minute)",
    )  # fmt: skip
    env: str = param("point-maze", _ENV_DOC)
    algos: tuple[str, ...] = param(("rsd", "metra"), "methods to compare", choices=ALGO_CHOICES)
    seeds: int = param(3, "seeds per method: seed, seed+1, ...", low=1, high=1000)
    epochs: int = param(80, "training epochs per run", low=1, high=10_000_000)
    eval_every: int = param(10, "evaluate every N epochs for the curve", low=1, high=10_000_000)
    maze: str | Path = param("medium", _MAZE_DOC, path="file", names=MAZE_NAMES)
    episode_length: int | None = param(
        None, "episode length T (auto: 100 point-maze, 50 point, 200 ant and gymnasium ids)",
        low=1, high=100_000, none="auto",
    )  # fmt: skip
    xy_dims: tuple[int, ...] = param(
        (0, 1), "gymnasium ids: observation indices of the position used for coverage", low=0,
        high=100_000,
    )  # fmt: skip
    obs_norm: str = param(
        "auto", "gymnasium ids: normalise observations as for ant", choices=("auto", "none")
    )
    threads: int = param(1, "torch CPU threads", low=1, high=1024)
    seed: int = param(0, "first random seed", low=0, high=_SEED)
    device: str = param("cpu", "torch device (the package runs on the CPU)", choices=("cpu",),
                        flag=False)  # fmt: skip

    def effective(self) -> DemoConfig:
        """The config the demo runs: ``quick`` replaces epochs, seeds and the network sizes."""
        return dataclasses.replace(self, **DEMO_QUICK) if self.quick else self


@dataclass
class EvaluateConfig:
    """``rsd-skills evaluate``: coverage and zero-shot goal reaching of a checkpoint, beside random
    actions; ``run_evaluate(cfg, out)`` runs it."""

    checkpoint: str | Path = param(
        REQUIRED, "checkpoint.pt written by 'rsd-skills train'", path="file"
    )
    n_skills: int = param(64, "skills from the method's prior for coverage", low=1, high=100_000)
    eval_seed: int = param(12345, "seed of the evaluation skills and resets", low=0, high=_SEED)
    recompute_goal_skill: bool = param(
        True, "METRA/LSD zero-shot: recompute the skill every step (off: once at s0)"
    )
    threads: int = param(1, "torch CPU threads", low=1, high=1024)
    seed: int = param(0, "seed of the random-actions baseline", low=0, high=_SEED)
    device: str = param("cpu", "torch device (the package runs on the CPU)", choices=("cpu",),
                        flag=False)  # fmt: skip

    def __post_init__(self) -> None:
        check_config(self)
