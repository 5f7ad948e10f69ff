"""Hyperparameters of every method, with where each default comes from (``SOURCES``).

One dataclass holds the settings of the shared training loop, the SAC core and each method; fields
set to ``None`` take a per-algorithm default in :meth:`Config.resolved` (e.g. the dual variable starts
at 20 for RSD and 30 for METRA, as in the two official launch scripts). Every field is validated by
:meth:`Config.validate`, which names the field, the value and what is accepted.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

ALGOS = ("rsd", "rsd_uniform", "metra", "lsd", "diayn")
GENERATOR_ARCHS = ("free", "mlp_zero_token")
METRA_CONSTRAINTS = ("sq_norm", "mean_sq")


@dataclass
class Config:
    """Settings of one skill-discovery run (CPU-sized defaults; official values in ``SOURCES``)."""

    # --- shared loop -------------------------------------------------------------------------
    dim_option: int = 2
    """skill dimension d"""
    n_traj: int = 8
    """trajectories (and skills) per epoch, N_τ"""
    grad_steps: int = 50
    """gradient steps per epoch, K"""
    batch_size: int = 256
    """minibatch size of every gradient step"""
    hidden: int = 256
    """width of every MLP"""
    depth: int = 2
    """hidden layers of every MLP"""
    lr: float = 1e-4
    """Adam learning rate of φ, λ, π, Q and α"""
    replay_size: int = 100_000
    """replay buffer capacity (transitions)"""
    min_buffer: int = 1000
    """transitions stored before training (and the skill generator) starts"""
    timeout_is_terminal: bool = False
    """official behaviour: treat the time limit as a terminal state (no bootstrap through it)"""
    grad_clip: float | None = None
    """global L2 gradient-norm clip of φ, λ, Q, π, α; 0 = off (None: 3 for RSD/RSD-uniform, else off)"""
    # --- SAC ----------------------------------------------------------------------------------
    gamma: float = 0.99
    tau: float = 5e-3
    alpha_init: float = 0.01
    target_entropy: float | None = None
    """SAC entropy target (None: ``−|A|/2``)"""
    # --- METRA / RSD dual ---------------------------------------------------------------------
    lambda_init: float | None = None
    """initial dual variable λ (None: 20 for RSD, 30 for METRA)"""
    dual_slack: float = 1e-3
    """ε of the clamped constraint"""
    metra_constraint: str = "sq_norm"
    """METRA's D: 'sq_norm' (paper, ||Δφ||²) or 'mean_sq' (official code, divided by d)"""
    recompute_goal_skill: bool = True
    """METRA/LSD zero-shot: recompute z_t = n(φ(g) − φ(s_t)) every step (False: once at s0)"""
    # --- RSD ----------------------------------------------------------------------------------
    repr_max_step: float | None = None
    """k of the RSD reward clip T·clip(Δ, −k/T, k/T) (None: T, i.e. inactive)"""
    w2: float = 10.0
    """weight of the generator's novelty (population KL) term"""
    w3: float = 3.0
    """weight of the generator's confidence (reachability) term"""
    window_size: int = 10
    """largest population of skill generators"""
    repeat_time: int = 3
    """a generator round runs every ``repeat_time × |population|`` epochs"""
    gen_steps: int = 100
    gen_lr: float = 3e-2
    gen_grad_clip: float = 3.0
    gen_std_init: float = 0.3
    gen_std_min: float = 0.1
    gen_std_max: float = 0.5
    generator_arch: str = "free"
    """'free' (diagonal TanhNormal parameters) or 'mlp_zero_token' (the official module, for parity)"""
    value_samples: int = 3
    """actions M per V(s0|z) estimate"""
    novelty_distance: float = 0.1
    """a trained generator joins the population only this far (tanh-mean L2) from every member"""
    regret_diagnostic: int = 0
    """RSD: at each generator round, measure Reg's signal-to-noise with this many skills (0 = off):
    std over skills of the mean Reg vs std over 8 repeated noise draws (own random stream, so the run is
    unchanged)"""
    z_unit: bool = False
    """RSD: normalise sampled skills to unit length (official option) instead of clamping to the box"""
    extra: dict[str, Any] = field(default_factory=dict)
    """free-form notes stored with the run (not used by the algorithms)"""

    @classmethod
    def paper_scale(cls, **overrides: Any) -> Config:
        """The official budget per gradient epoch (:data:`PAPER_SCALE`: 1024×2 MLPs, 16 trajectories and
        200 gradient steps of minibatch 1024 per epoch, 300k replay, 10k warm-up); ``overrides`` win."""
        return cls(**{**PAPER_SCALE, **overrides})

    def resolved(self, algo: str, horizon: int, act_dim: int) -> Config:
        """A copy with the per-algorithm ``None`` defaults filled in (validated)."""
        check_algo(algo)
        rsd = algo in ("rsd", "rsd_uniform")
        cfg = dataclasses.replace(self, extra=dict(self.extra))
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

    def validate(self) -> Config:
        """Raise ``ValueError`` naming the first field that is out of range."""
        ints = {
            "dim_option": 1,
            "n_traj": 1,
            "grad_steps": 0,
            "batch_size": 1,
            "hidden": 1,
            "depth": 1,
            "replay_size": 1,
            "min_buffer": 1,
            "window_size": 1,
            "repeat_time": 1,
            "gen_steps": 0,
            "value_samples": 1,
            "regret_diagnostic": 0,
        }
        for name, low in ints.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"Config.{name} must be an integer >= {low}, got {value!r}")
        positive = ["lr", "tau", "alpha_init", "gen_lr", "gen_grad_clip", "gen_std_init"]
        positive += ["gen_std_min", "gen_std_max"]
        for name in positive:
            _finite(self, name, low=0.0, open_low=True)
        for name in ("dual_slack", "w2", "w3", "novelty_distance"):
            _finite(self, name, low=0.0)
        _finite(self, "gamma", low=0.0, high=1.0)
        if self.tau > 1:
            raise ValueError(f"Config.tau must be in (0, 1], got {self.tau!r}")
        if self.grad_clip is not None:
            _finite(self, "grad_clip", low=0.0)
        for name in ("lambda_init", "repr_max_step"):
            if getattr(self, name) is not None:
                _finite(self, name, low=0.0, open_low=True)
        if self.target_entropy is not None:
            _finite(self, "target_entropy")
        if not self.gen_std_min <= self.gen_std_init <= self.gen_std_max:
            raise ValueError(
                "Config needs gen_std_min <= gen_std_init <= gen_std_max, got "
                f"{self.gen_std_min!r}, {self.gen_std_init!r}, {self.gen_std_max!r}"
            )
        if self.metra_constraint not in METRA_CONSTRAINTS:
            raise ValueError(
                f"Config.metra_constraint must be one of {', '.join(METRA_CONSTRAINTS)}, "
                f"got {self.metra_constraint!r}"
            )
        if self.generator_arch not in GENERATOR_ARCHS:
            raise ValueError(
                f"Config.generator_arch must be one of {', '.join(GENERATOR_ARCHS)}, "
                f"got {self.generator_arch!r}"
            )
        if self.min_buffer > self.replay_size:
            raise ValueError(
                f"Config.min_buffer ({self.min_buffer}) exceeds replay_size ({self.replay_size})"
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


def _finite(
    cfg: Config,
    name: str,
    low: float | None = None,
    high: float | None = None,
    open_low: bool = False,
) -> None:
    value = getattr(cfg, name)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if open_low else value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        bound = ""
        if low is not None:
            bound += f" {'>' if open_low else '>='} {low:g}"
        if high is not None:
            bound += f"{' and' if low is not None else ''} <= {high:g}"
        raise ValueError(f"Config.{name} must be a finite number{bound}, got {value!r}")


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
