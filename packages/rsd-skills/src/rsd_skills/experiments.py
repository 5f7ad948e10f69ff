"""The package's three jobs as library calls: :func:`run_train`, :func:`run_evaluate`, :func:`run_demo`.

Each takes its config (:mod:`rsd_skills.config`), writes its checkpoint and plots into ``out`` when one
is given, and returns a result whose :meth:`as_dict` is the results file ``rsd-skills`` writes. Input
problems (an unknown environment, a bad maze or checkpoint, a run in which training never happened)
raise :class:`~rsd_skills.config.ConfigError` naming the field; the CLI reports it as the flag.

>>> from rsd_skills import TrainConfig, run_train
>>> result = run_train(TrainConfig(algo="metra", env="point", epochs=5))  # doctest: +SKIP
>>> result.coverage["coverage"]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._contract import mean_std
from .config import (
    PAPER_HORIZON,
    PAPER_SCALE,
    ConfigError,
    DemoConfig,
    EvaluateConfig,
    TrainConfig,
)
from .envs import _looks_like_gym_id, make_env
from .evaluation import (
    evaluate_coverage,
    evaluate_zero_shot,
    plot_curves,
    plot_trajectories,
    random_baseline,
)
from .trainer import SkillTrainer

__all__ = [
    "DemoResult",
    "EvaluateResult",
    "TrainResult",
    "build_env",
    "run_demo",
    "run_evaluate",
    "run_train",
]

TRAJ_PNG, CURVE_PNG, CKPT = "trajectories.png", "coverage.png", "checkpoint.pt"
Tick = Callable[[dict[str, float], int], Any]  # (epoch record, epochs this call trains)


def _need(module: str, extra: str, what: str) -> None:
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            "env", f"{what} needs the '{module}' module: pip install 'rsd-skills[{extra}]'"
        ) from exc


def build_env(cfg: TrainConfig | DemoConfig) -> tuple[Any, str]:
    """The environment of ``cfg.env`` (with its maze, horizon, coordinates) and a line saying what it is."""
    name = cfg.env.replace("-", "_")
    horizon = cfg.episode_length
    # DemoConfig has no paper_scale field (there ``paper_scale`` is Config's preset classmethod)
    if horizon is None and isinstance(cfg, TrainConfig) and cfg.paper_scale is True:
        horizon = PAPER_HORIZON
    if name == "ant":
        _need("gymnasium", "mujoco", "env ant")
        _need("mujoco", "mujoco", "env ant")
        env = make_env("ant", horizon=horizon)
        return env, f"env: gymnasium Ant-v5 ({env.obs_dim}-D observations, T={env.horizon})"
    if name == "gr_point_maze":
        _need("gymnasium_robotics", "robotics", "env gr-point-maze")
        if not isinstance(cfg.maze, str):
            raise ConfigError("maze", "gr-point-maze takes a built-in maze: u, medium or large")
        env = make_env("gr_point_maze", horizon=horizon, maze=cfg.maze)
        return env, f"env: gymnasium-robotics PointMaze '{cfg.maze}' (T={env.horizon})"
    if name == "point":
        env = make_env("point", horizon=horizon)
        return env, f"env: open point environment (embedded numpy, T={env.horizon})"
    if name != "point_maze":
        return _gym_env(cfg, horizon)
    try:
        env = make_env("point_maze", horizon=horizon, maze=cfg.maze)
    except ValueError as exc:
        raise ConfigError("maze", str(exc)) from exc
    source = "embedded map" if isinstance(cfg.maze, str) else f"map file {Path(cfg.maze).name}"
    return env, (
        f"env: point maze '{env.maze_name}' ({source}, numpy, {env.max_cells} free cells, "
        f"T={env.horizon})"
    )


def _gym_env(cfg: TrainConfig | DemoConfig, horizon: int | None) -> tuple[Any, str]:
    """Any gymnasium id (``HalfCheetah-v5``) with its coverage coordinates from ``xy_dims``."""
    if not _looks_like_gym_id(cfg.env):
        raise ConfigError(
            "env",
            f"unknown environment {cfg.env!r}; choose one of point-maze, point, ant, gr-point-maze "
            "or a gymnasium id such as HalfCheetah-v5 or Hopper-v5",
        )
    _need("gymnasium", "mujoco", f"env {cfg.env}")
    import gymnasium

    if cfg.env not in gymnasium.registry:
        raise ConfigError(
            "env",
            f"{cfg.env!r} is not a registered gymnasium environment (e.g. HalfCheetah-v5, Hopper-v5, "
            "Ant-v5, Walker2d-v5)",
        )
    try:
        env = make_env(cfg.env, horizon=horizon, xy_dims=tuple(cfg.xy_dims), obs_norm=cfg.obs_norm)
    except (ValueError, ImportError, RuntimeError) as exc:
        raise ConfigError("xy_dims", str(exc).splitlines()[0]) from exc
    dims = ",".join(map(str, cfg.xy_dims))
    return env, (
        f"env: gymnasium {cfg.env} ({env.obs_dim}-D observations, T={env.horizon}, position from "
        f"observation indices {dims}, obs-norm {cfg.obs_norm})"
    )


def _metrics(trainer: SkillTrainer, all_skills: bool = True, **kw: Any) -> dict[str, Any]:
    """Coverage (the method's prior; with ``all_skills`` also U[−1,1]^d and its own final training
    distribution) and zero-shot goal reaching."""
    cov = evaluate_coverage(trainer, **kw)
    if all_skills:
        for source in ("box", "own"):
            cov[f"coverage_{source}"] = evaluate_coverage(trainer, skills=source, **kw)["coverage"]
    zero = evaluate_zero_shot(trainer, **({"seed": kw["seed"]} if "seed" in kw else {}))
    return {"coverage": cov, "zero_shot": zero}


def curve_point(trainer: SkillTrainer) -> dict[str, float]:
    """One point of a learning curve: coverage and zero-shot numbers at the trainer's epoch."""
    m = _metrics(trainer, all_skills=False)
    return {
        "epoch": trainer.epoch,
        "env_steps": trainer.env_steps,
        "coverage": m["coverage"]["coverage"],
        "train_cells": len(trainer.visited),
        "final_distance": m["zero_shot"]["final_distance"],
        "success_rate": m["zero_shot"]["success_rate"],
    }


def _summary(metrics: dict[str, Any]) -> dict[str, Any]:
    cov = {k: v for k, v in metrics["coverage"].items() if k not in ("xy", "skills")}
    return {"coverage": cov, "zero_shot": dict(metrics["zero_shot"])}


def check_trained(trainer: SkillTrainer) -> None:
    """:class:`ConfigError` when training never happened (no gradient step: the replay buffer never
    reached ``min_buffer``) or its losses are not finite (a divergence), instead of numbers."""
    if trainer.grad_steps == 0:
        raise ConfigError(
            "min_buffer" if trainer.cfg.grad_steps else "grad_steps",
            f"training never happened: after {trainer.epoch} epochs the replay buffer holds "
            f"{len(trainer.buffer)} transitions, fewer than min_buffer={trainer.cfg.min_buffer} (or "
            f"grad_steps={trainer.cfg.grad_steps}); train more epochs or lower min_buffer",
        )
    for record in trainer.history:
        bad = [k for k, v in record.items() if "loss" in k and not math.isfinite(v)]
        if bad:
            raise ConfigError(
                "lr",
                f"training diverged: non-finite {', '.join(bad)} at epoch {int(record['epoch'])} "
                f"(lr={trainer.cfg.lr:g}); lower the learning rate",
            )


def _plot_note(path: Path | None) -> list[str]:
    return [] if path is not None else ["plots skipped: matplotlib is not installed"]


@dataclass
class TrainResult:
    """What :func:`run_train` measured; :meth:`as_dict` is ``results.json``."""

    algo: str
    env: dict[str, Any]
    resolved_config: dict[str, Any]
    epochs: int
    env_steps: int
    grad_steps: int
    train_seconds: float
    env_steps_per_second: float
    coverage: dict[str, Any]
    zero_shot: dict[str, Any]
    curve: list[dict[str, float]]
    history: list[dict[str, float]]
    seed: int = 0
    env_note: str = ""
    ceiling: int | None = None
    trainer: Any = field(default=None, repr=False)
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        skip = ("seed", "env_note", "ceiling", "trainer", "files", "notes")
        return {k: v for k, v in vars(self).items() if k not in skip}


def run_train(
    cfg: TrainConfig, out: str | Path | None = None, progress: Tick | None = None
) -> TrainResult:
    """Train ``cfg.algo`` on ``cfg.env`` (or continue ``cfg.resume``) up to ``cfg.epochs`` in total;
    with ``out``, write ``checkpoint.pt``, ``trajectories.png`` and ``coverage.png`` there.
    ``progress(record, total)`` is called after each epoch."""
    torch.set_num_threads(cfg.threads)
    epochs = cfg.resolved_epochs()
    if cfg.resume is not None:
        try:
            trainer = SkillTrainer.load(cfg.resume)
        except (ValueError, RuntimeError) as exc:
            raise ConfigError("resume", str(exc).splitlines()[0]) from exc
        note = (
            f"resumed {Path(cfg.resume).name} at epoch {trainer.epoch} ({trainer.algo}, "
            f"{trainer.env.name})"
        )
    else:
        env, note = build_env(cfg)
        method = cfg.method_config()
        if cfg.paper_scale:
            method = dataclasses.replace(method, **PAPER_SCALE)
        trainer = SkillTrainer(cfg.algo, env, method, seed=cfg.seed)
    remaining = max(epochs - trainer.epoch, 0)
    curve = trainer.curve  # evaluation points, kept in the checkpoint (a resumed run continues it)
    if not curve:
        curve.append(curve_point(trainer))

    def after(tr: SkillTrainer, record: dict[str, float]) -> None:
        if progress is not None:
            progress(record, remaining)
        if tr.epoch % cfg.eval_every == 0:
            curve.append(curve_point(tr))

    trainer.train(remaining, after)
    check_trained(trainer)
    metrics = _metrics(trainer)
    if curve[-1]["epoch"] != trainer.epoch:
        curve.append(curve_point(trainer))
    files: list[Path] = []
    notes: list[str] = []
    if out is not None:
        out = Path(out)
        files.append(trainer.save(out / CKPT))
        traj = plot_trajectories(
            trainer.env,
            metrics["coverage"]["xy"],
            out / TRAJ_PNG,
            f"{trainer.algo}: 64 skills, coverage {metrics['coverage']['coverage']}",
            metrics["coverage"]["skills"],
        )
        line = plot_curves(
            {trainer.algo: [[(p["env_steps"], p["coverage"]) for p in curve]]},
            out / CURVE_PNG,
            title=f"{trainer.algo} on {trainer.env.name}",
            ceiling=getattr(trainer.env, "max_cells", None),
        )
        files += [p for p in (traj, line) if p is not None]
        notes += _plot_note(traj)
    return TrainResult(
        algo=trainer.algo,
        env=trainer.env.spec(),
        resolved_config=trainer.cfg.to_dict(),
        epochs=trainer.epoch,
        env_steps=trainer.env_steps,
        grad_steps=trainer.grad_steps,
        train_seconds=trainer.train_seconds,
        env_steps_per_second=trainer.env_steps / max(trainer.train_seconds, 1e-9),
        **_summary(metrics),
        curve=curve,
        history=trainer.history,
        seed=trainer.seed,
        env_note=note,
        ceiling=getattr(trainer.env, "max_cells", None),
        trainer=trainer,
        files=files,
        notes=notes,
    )


@dataclass
class EvaluateResult:
    """What :func:`run_evaluate` measured; :meth:`as_dict` is ``evaluate.json``."""

    algo: str
    env: dict[str, Any]
    epoch: int
    env_steps: int
    coverage: dict[str, Any]
    zero_shot: dict[str, Any]
    random_actions: dict[str, Any]
    note: str = ""
    ceiling: int | None = None
    files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k not in ("note", "ceiling", "files")}


def run_evaluate(cfg: EvaluateConfig, out: str | Path | None = None) -> EvaluateResult:
    """Coverage (prior, U[−1,1]^d and own skills), zero-shot goal reaching and the random-actions
    baseline of ``cfg.checkpoint``; with ``out``, write ``evaluate-trajectories.png`` there."""
    torch.set_num_threads(cfg.threads)
    try:
        trainer = SkillTrainer.load(cfg.checkpoint)
    except (ValueError, RuntimeError, ImportError) as exc:
        raise ConfigError("checkpoint", str(exc).splitlines()[0]) from exc
    if not cfg.recompute_goal_skill:
        trainer.method.recompute_goal_skill = False
    metrics = _metrics(trainer, n_skills=cfg.n_skills, seed=cfg.eval_seed)
    cov = metrics["coverage"]
    rand = random_baseline(trainer.env, seed=cfg.seed, n_skills=cfg.n_skills)
    files = []
    if out is not None:
        traj = plot_trajectories(
            trainer.env,
            cov["xy"],
            Path(out) / "evaluate-trajectories.png",
            f"{trainer.algo}: {cfg.n_skills} skills, coverage {cov['coverage']}",
            cov["skills"],
        )
        files += [traj] if traj is not None else []
    return EvaluateResult(
        algo=trainer.algo,
        env=trainer.env.spec(),
        epoch=trainer.epoch,
        env_steps=trainer.env_steps,
        **_summary(metrics),
        random_actions={
            "coverage": rand["coverage"],
            "standing_coverage": rand["standing_coverage"],
            "success_rate": rand["zero_shot"]["success_rate"],
            "final_distance": rand["zero_shot"]["final_distance"],
        },
        note=f"checkpoint: {trainer.algo} on {trainer.env.name}, epoch {trainer.epoch}",
        ceiling=getattr(trainer.env, "max_cells", None),
        files=files,
    )


@dataclass
class DemoResult:
    """What :func:`run_demo` measured; :meth:`as_dict` is the demo's ``results.json``."""

    env: dict[str, Any]
    quick: bool
    epochs: int
    seeds: list[int]
    resolved_config: dict[str, Any]
    summary: dict[str, dict[str, Any]]
    random_actions: list[dict[str, Any]]
    runs: dict[str, list[dict[str, Any]]]
    env_note: str = ""
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k not in ("env_note", "files", "notes")}


def demo_files(algos: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The files ``run_demo`` writes (results first)."""
    names = [a.replace("-", "_") for a in algos]
    return ("results.json", "demo-coverage.png", *[f"demo-trajectories-{a}.png" for a in names])


def run_demo(
    cfg: DemoConfig, out: str | Path | None = None, progress: Callable[[int], Any] | None = None
) -> DemoResult:
    """Train ``cfg.algos`` at equal environment steps over ``cfg.seeds`` seeds and compare coverage and
    zero-shot goal reaching with random actions; ``progress(1)`` after each epoch."""
    torch.set_num_threads(cfg.threads)
    run = cfg.effective()
    env, note = build_env(run)
    method = run.method_config()
    seeds = [run.seed + i for i in range(run.seeds)]
    algos = [a.replace("-", "_") for a in run.algos]
    runs: dict[str, list[dict[str, Any]]] = {a: [] for a in algos}
    curves: dict[str, list[list[tuple[float, float]]]] = {a: [] for a in algos}
    first_xy: dict[str, Any] = {}
    for algo in algos:
        for seed in seeds:
            trainer = SkillTrainer(algo, env, method, seed=seed)
            curve = [curve_point(trainer)]

            def after(tr: SkillTrainer, record: dict[str, float], curve: list = curve) -> None:
                if progress is not None:
                    progress(1)
                if tr.epoch % run.eval_every == 0 or tr.epoch == run.epochs:
                    curve.append(curve_point(tr))

            trainer.train(run.epochs, after)
            check_trained(trainer)
            metrics = _metrics(trainer)
            runs[algo].append(
                {
                    "seed": seed,
                    **_summary(metrics),
                    "env_steps": trainer.env_steps,
                    "train_seconds": trainer.train_seconds,
                    "curve": curve,
                }
            )
            curves[algo].append([(p["env_steps"], p["coverage"]) for p in curve])
            if seed == seeds[0]:
                first_xy[algo] = (metrics["coverage"]["xy"], metrics["coverage"]["skills"])
    rand = [random_baseline(env, seed=s) for s in seeds]
    files: list[Path] = []
    notes: list[str] = []
    if out is not None:
        out = Path(out)
        for algo, (xy, skills) in first_xy.items():
            path = plot_trajectories(
                env, xy, out / f"demo-trajectories-{algo}.png", f"{algo}, seed {seeds[0]}", skills
            )
            files += [path] if path is not None else []
        curve_png = plot_curves(
            curves,
            out / "demo-coverage.png",
            title=f"{env.name}, {len(seeds)} seed(s)",
            ceiling=getattr(env, "max_cells", None),
        )
        files += [curve_png] if curve_png is not None else []
        notes += _plot_note(curve_png)
    summary: dict[str, dict[str, Any]] = {}
    for algo, rs in runs.items():
        cov = [r["coverage"]["coverage"] for r in rs]
        ar = [r["zero_shot"]["success_rate"] for r in rs]
        fd = [r["zero_shot"]["final_distance"] for r in rs]
        summary[algo] = {
            "coverage_mean": mean_std(cov)[0],
            "coverage_std": mean_std(cov)[1],  # sample std (ddof=1); None for one seed
            "success_rate_mean": mean_std(ar)[0],
            "success_rate_std": mean_std(ar)[1],
            "final_distance_mean": mean_std(fd)[0],
            "final_distance_std": mean_std(fd)[1],
        }
    return DemoResult(
        env=env.spec(),
        quick=cfg.quick,
        epochs=run.epochs,
        seeds=seeds,
        resolved_config=method.to_dict(),
        summary=summary,
        random_actions=[
            {"seed": s, "coverage": r["coverage"], **r["zero_shot"]} for s, r in zip(seeds, rand)
        ],
        runs=runs,
        env_note=note + (" — quick mode" if cfg.quick else ""),
        files=files,
        notes=notes,
    )
