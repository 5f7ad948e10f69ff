"""``rsd-skills`` command line: ``train``, ``evaluate``, ``demo`` (on the repository's CLI contract).

Parsing, ``--config`` files, output checks, results files and error lines come from
:mod:`rsd_skills._contract`; this module declares the subcommands and runs them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from ._contract import (
    CLI,
    Report,
    UsageError,
    blame,
    choice_list,
    existing_path,
    fmt_mean_std,
    int_list,
    mean_std,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    progress,
    require,
    say,
    table,
)
from .config import PAPER_EPOCHS, PAPER_HORIZON, PAPER_SCALE, Config
from .envs import MAZES, _looks_like_gym_id, make_env
from .evaluation import (
    evaluate_coverage,
    evaluate_zero_shot,
    plot_curves,
    plot_trajectories,
    random_baseline,
)
from .trainer import SkillTrainer

DIST = "rsd-skills"
ENVS = ("point-maze", "point", "ant", "gr-point-maze")
ALGO_CHOICES = ("rsd", "rsd-uniform", "metra", "lsd", "diayn")
TRAJ_PNG, CURVE_PNG, CKPT = "trajectories.png", "coverage.png", "checkpoint.pt"
# Rollouts are numpy and the networks small: every tensor and generator lives on the CPU, so --device
# accepts cpu only (one line instead of a failure in the middle of training).
CPU_ONLY = ("cpu",)
TRAIN_EPOCHS = 150


# ------------------------------------------------------------------------------------------ helpers


def _setup(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)


def _env(args: argparse.Namespace) -> tuple[Any, str]:
    """The environment of ``--env`` and a line saying what it is."""
    name = args.env.replace("-", "_")
    horizon = args.episode_length
    if horizon is None and getattr(args, "paper_scale", False):
        horizon = PAPER_HORIZON
    if name == "ant":
        require("gymnasium", DIST, "mujoco", "--env ant")
        require("mujoco", DIST, "mujoco", "--env ant")
        env = make_env("ant", horizon=horizon)
        return env, f"env: gymnasium Ant-v5 ({env.obs_dim}-D observations, T={env.horizon})"
    if name == "gr_point_maze":
        require("gymnasium_robotics", DIST, "robotics", "--env gr-point-maze")
        if args.maze not in MAZES:
            raise UsageError("--maze", "gr-point-maze takes a built-in maze: u, medium or large")
        env = make_env("gr_point_maze", horizon=horizon, maze=args.maze)
        return env, f"env: gymnasium-robotics PointMaze '{args.maze}' (T={env.horizon})"
    if name == "point":
        env = make_env("point", horizon=horizon)
        return env, f"env: open point environment (embedded numpy, T={env.horizon})"
    if name != "point_maze":
        return _gym_env(args)
    with blame("--maze"):
        env = make_env("point_maze", horizon=horizon, maze=args.maze)
    source = "embedded map" if isinstance(args.maze, str) else f"map file {Path(args.maze).name}"
    return env, (
        f"env: point maze '{env.maze_name}' ({source}, numpy, {env.max_cells} free cells, "
        f"T={env.horizon})"
    )


def _gym_env(args: argparse.Namespace) -> tuple[Any, str]:
    """Any gymnasium id (``--env HalfCheetah-v5``) with its coverage coordinates from ``--xy-dims``."""
    if not _looks_like_gym_id(args.env):
        raise UsageError(
            "--env",
            f"unknown environment {args.env!r}; choose one of {', '.join(ENVS)} or a gymnasium id "
            "such as HalfCheetah-v5 or Hopper-v5",
        )
    require("gymnasium", DIST, "mujoco", f"--env {args.env}")
    import gymnasium

    if args.env not in gymnasium.registry:
        raise UsageError(
            "--env",
            f"{args.env!r} is not a registered gymnasium environment (e.g. HalfCheetah-v5, Hopper-v5, "
            "Ant-v5, Walker2d-v5)",
        )
    with blame("--xy-dims", ImportError, RuntimeError):
        env = make_env(
            args.env,
            horizon=args.episode_length,
            xy_dims=tuple(args.xy_dims),
            obs_norm=args.obs_norm,
        )
    dims = ",".join(map(str, args.xy_dims))
    return env, (
        f"env: gymnasium {args.env} ({env.obs_dim}-D observations, T={env.horizon}, position from "
        f"observation indices {dims}, obs-norm {args.obs_norm})"
    )


def _config(args: argparse.Namespace, **override: Any) -> Config:
    fields = {
        "dim_option": args.dim_option,
        "n_traj": args.n_traj,
        "grad_steps": args.grad_steps,
        "batch_size": args.batch_size,
        "hidden": args.hidden,
        "depth": args.depth,
        "lr": args.lr,
        "min_buffer": args.min_buffer,
        "replay_size": args.replay_size,
        "lambda_init": args.lambda_init,
        "grad_clip": args.grad_clip,
        "w2": args.w2,
        "w3": args.w3,
        "window_size": args.window_size,
        "repeat_time": args.repeat_time,
        "metra_constraint": args.metra_constraint.replace("-", "_"),
        "generator_arch": args.generator_arch.replace("-", "_"),
        "timeout_is_terminal": args.timeout_is_terminal,
        "z_unit": args.z_unit,
        "recompute_goal_skill": not args.no_recompute,
    }
    if getattr(args, "paper_scale", False):
        fields.update(PAPER_SCALE)
    fields.update(override)
    try:
        return Config(**fields).validate()
    except (
        ValueError
    ) as exc:  # a combination of flags the validators cannot see (min_buffer > replay)
        raise UsageError(None, str(exc)) from exc


def _metrics(trainer: SkillTrainer, all_skills: bool = True) -> dict[str, Any]:
    """Coverage (the method's prior; with ``all_skills`` also U[−1,1]^d and its own final training
    distribution) and zero-shot goal reaching."""
    cov = evaluate_coverage(trainer)
    if all_skills:
        for source in ("box", "own"):
            cov[f"coverage_{source}"] = evaluate_coverage(trainer, skills=source)["coverage"]
    zero = evaluate_zero_shot(trainer)
    return {"coverage": cov, "zero_shot": zero}


def _curve_point(trainer: SkillTrainer) -> dict[str, float]:
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
    zero = {k: v for k, v in metrics["zero_shot"].items()}
    return {"coverage": cov, "zero_shot": zero}


def _add_common(p: argparse.ArgumentParser, epochs: int | None) -> None:
    if epochs is not None:
        p.add_argument(
            "--epochs",
            type=positive_int(),
            default=epochs,
            help=f"training epochs, each N_τ episodes of T steps (default: {epochs})",
        )
    p.add_argument(
        "--maze",
        type=existing_path("file", names=tuple(MAZES)),
        default="medium",
        help="point-maze map: u, medium, large, or a text file of 0/1 (or ./#) rows (default: medium)",
    )
    p.add_argument(
        "--episode-length",
        type=positive_int(),
        default=None,
        help="episode length T (default: 100 point-maze, 50 point, 200 ant)",
    )
    p.add_argument(
        "--threads", type=positive_int(), default=1, help="torch CPU threads (default: 1)"
    )
    p.add_argument(
        "--xy-dims",
        type=int_list(0, min_items=1),
        default=[0, 1],
        help="gymnasium ids: one or two observation indices holding the position used for coverage "
        "and goals (HalfCheetah/Hopper: 0, the x position) (default: 0,1)",
    )
    p.add_argument(
        "--obs-norm",
        choices=["auto", "none"],
        default="auto",
        help="gymnasium ids: normalise observations with a mean/std from 10k random steps, as for "
        "ant (default: auto)",
    )


def _add_config(p: argparse.ArgumentParser, hidden: int = 256) -> None:
    c = Config()
    g = p.add_argument_group("method options (defaults: the package's CPU-sized values)")
    g.add_argument(
        "--dim-option",
        type=positive_int(),
        default=c.dim_option,
        help=f"skill dimension d (default: {c.dim_option})",
    )
    g.add_argument(
        "--n-traj",
        type=positive_int(),
        default=c.n_traj,
        help=f"trajectories per epoch N_τ (default: {c.n_traj})",
    )
    g.add_argument(
        "--grad-steps",
        type=positive_int(),
        default=c.grad_steps,
        help=f"gradient steps per epoch K (default: {c.grad_steps})",
    )
    g.add_argument(
        "--batch-size",
        type=positive_int(),
        default=c.batch_size,
        help=f"minibatch size (default: {c.batch_size})",
    )
    g.add_argument(
        "--hidden", type=positive_int(), default=hidden, help=f"MLP width (default: {hidden})"
    )
    g.add_argument(
        "--depth",
        type=positive_int(),
        default=c.depth,
        help=f"MLP hidden layers (default: {c.depth})",
    )
    g.add_argument(
        "--lr", type=positive_float(), default=c.lr, help=f"Adam learning rate (default: {c.lr:g})"
    )
    g.add_argument(
        "--min-buffer",
        type=positive_int(),
        default=c.min_buffer,
        help=f"transitions before training starts (default: {c.min_buffer})",
    )
    g.add_argument(
        "--replay-size",
        type=positive_int(),
        default=c.replay_size,
        help=f"replay capacity (default: {c.replay_size})",
    )
    g.add_argument(
        "--lambda-init",
        type=positive_float(),
        default=None,
        help="initial dual variable λ (default: 20 for rsd, 30 for metra)",
    )
    g.add_argument(
        "--grad-clip",
        type=nonneg_float(),
        default=None,
        help="agent gradient-norm clip, 0 = off (default: 3 for rsd/rsd-uniform, off otherwise)",
    )
    g.add_argument(
        "--w2",
        type=nonneg_float(),
        default=c.w2,
        help=f"generator novelty weight (default: {c.w2:g})",
    )
    g.add_argument(
        "--w3",
        type=nonneg_float(),
        default=c.w3,
        help=f"generator confidence weight (default: {c.w3:g})",
    )
    g.add_argument(
        "--window-size",
        type=positive_int(),
        default=c.window_size,
        help=f"largest generator population (default: {c.window_size})",
    )
    g.add_argument(
        "--repeat-time",
        type=positive_int(),
        default=c.repeat_time,
        help=f"a generator round every repeat-time × population epochs (default: {c.repeat_time})",
    )
    g.add_argument(
        "--metra-constraint",
        choices=["sq-norm", "mean-sq"],
        default="sq-norm",
        help="METRA's D: sq-norm (paper) or mean-sq (official code) (default: sq-norm)",
    )
    g.add_argument(
        "--generator-arch",
        choices=["free", "mlp-zero-token"],
        default="free",
        help="RSD generator: free TanhNormal parameters or the official MLP form (default: free)",
    )
    g.add_argument(
        "--timeout-is-terminal",
        action="store_true",
        help="official behaviour: no bootstrap through the time limit (default: off)",
    )
    g.add_argument(
        "--z-unit",
        action="store_true",
        help="RSD: normalise sampled skills to unit length (default: off, clamp to the box)",
    )
    g.add_argument(
        "--no-recompute",
        action="store_true",
        help="METRA/LSD zero-shot: compute the skill once at s0, not every step (default: off)",
    )


def _rows(results: dict[str, Any], ceiling: int | None) -> list[list[str]]:
    cov = results["coverage"]
    zero = results["zero_shot"]
    rows = [
        ["coverage (64 prior skills)", f"{cov['coverage']}" + (f" / {ceiling}" if ceiling else "")],
    ]
    for source, label in (("box", "U[-1,1]^d skills"), ("own", "own training skills")):
        if f"coverage_{source}" in cov:
            rows.append([f"coverage (64 {label})", str(cov[f"coverage_{source}"])])
    rows += [
        ["zero-shot success rate", f"{zero['success_rate']:.2f} of {zero['n_goals']} goals"],
        ["zero-shot final distance", f"{zero['final_distance']:.2f}"],
        ["intrinsic return (64 skills)", f"{cov['intrinsic_return']:.2f}"],
    ]
    return rows


# ------------------------------------------------------------------------------------------ train


def cmd_train(args: argparse.Namespace) -> Report:
    _setup(args)
    if args.epochs is None:  # not given: 150, or the official budget under --paper-scale
        args.epochs = PAPER_EPOCHS if args.paper_scale else TRAIN_EPOCHS
    if args.resume is not None:
        with blame("--resume", RuntimeError):
            trainer = SkillTrainer.load(args.resume)
        note = f"resumed {args.resume.name} at epoch {trainer.epoch} ({trainer.algo}, {trainer.env.name})"
    else:
        env, note = _env(args)
        trainer = SkillTrainer(args.algo, env, _config(args), seed=args.seed)
    say(args, note)
    remaining = max(args.epochs - trainer.epoch, 0)
    curve = trainer.curve  # evaluation points, kept in the checkpoint (a resumed run continues it)
    if not curve:
        curve.append(_curve_point(trainer))
    bar = progress(remaining, f"train {trainer.algo}", args.quiet)

    def after(tr: SkillTrainer, record: dict[str, float]) -> None:
        bar.update(1)
        # cells visited by all training episodes so far (sampled actions); the table's coverage is
        # that of 64 skills with deterministic actions
        bar.set_postfix(train_cells=int(record["train_cells"]))
        if args.eval_every and tr.epoch % args.eval_every == 0:
            curve.append(_curve_point(tr))

    trainer.train(remaining, after)
    bar.close()
    metrics = _metrics(trainer)
    if curve[-1]["epoch"] != trainer.epoch:
        curve.append(_curve_point(trainer))
    trainer.save(args.out / CKPT)
    files = [args.out / CKPT]
    traj = plot_trajectories(
        trainer.env,
        metrics["coverage"]["xy"],
        args.out / TRAJ_PNG,
        f"{trainer.algo}: 64 skills, coverage {metrics['coverage']['coverage']}",
        metrics["coverage"]["skills"],
    )
    line = plot_curves(
        {trainer.algo: [[(p["env_steps"], p["coverage"]) for p in curve]]},
        args.out / CURVE_PNG,
        title=f"{trainer.algo} on {trainer.env.name}",
        ceiling=getattr(trainer.env, "max_cells", None),
    )
    files += [p for p in (traj, line) if p is not None]
    if traj is None:
        say(args, "plots skipped: matplotlib is not installed (pip install 'rsd-skills[cli]')")
    summary = _summary(metrics)
    results = {
        "algo": trainer.algo,
        "env": trainer.env.spec(),
        "resolved_config": trainer.cfg.to_dict(),
        "epochs": trainer.epoch,
        "env_steps": trainer.env_steps,
        "grad_steps": trainer.grad_steps,
        "train_seconds": trainer.train_seconds,
        "env_steps_per_second": trainer.env_steps / max(trainer.train_seconds, 1e-9),
        **summary,
        "curve": curve,
        "history": trainer.history,
    }
    rows = _rows(summary, getattr(trainer.env, "max_cells", None))
    rows.append(["environment steps", f"{trainer.env_steps:,}"])
    return Report(
        results, table=table(rows, [f"{trainer.algo} (seed {trainer.seed})", "value"]), files=files
    )


# ------------------------------------------------------------------------------------------ evaluate


def cmd_evaluate(args: argparse.Namespace) -> Report:
    _setup(args)
    with blame("--checkpoint", RuntimeError, ImportError):
        trainer = SkillTrainer.load(args.checkpoint)
    say(args, f"checkpoint: {trainer.algo} on {trainer.env.name}, epoch {trainer.epoch}")
    if args.no_recompute:
        trainer.method.recompute_goal_skill = False
    cov = evaluate_coverage(trainer, n_skills=args.n_skills, seed=args.eval_seed)
    for source in ("box", "own"):
        cov[f"coverage_{source}"] = evaluate_coverage(
            trainer, n_skills=args.n_skills, seed=args.eval_seed, skills=source
        )["coverage"]
    zero = evaluate_zero_shot(trainer, seed=args.eval_seed)
    rand = random_baseline(trainer.env, seed=args.seed, n_skills=args.n_skills)
    traj = plot_trajectories(
        trainer.env,
        cov["xy"],
        args.out / "evaluate-trajectories.png",
        f"{trainer.algo}: {args.n_skills} skills, coverage {cov['coverage']}",
        cov["skills"],
    )
    summary = _summary({"coverage": cov, "zero_shot": zero})
    results = {
        "algo": trainer.algo,
        "env": trainer.env.spec(),
        "epoch": trainer.epoch,
        "env_steps": trainer.env_steps,
        **summary,
        "random_actions": {
            "coverage": rand["coverage"],
            "standing_coverage": rand["standing_coverage"],
            "success_rate": rand["zero_shot"]["success_rate"],
            "final_distance": rand["zero_shot"]["final_distance"],
        },
    }
    ceiling = getattr(trainer.env, "max_cells", None)
    rows = [[r[0], r[1], ""] for r in _rows(summary, ceiling)]
    rows[0][2] = str(rand["coverage"])
    rows[len(rows) - 3][2] = f"{rand['zero_shot']['success_rate']:.2f}"
    rows[len(rows) - 2][2] = f"{rand['zero_shot']['final_distance']:.2f}"
    rows.append(["coverage of a body that does not move", "", str(rand["standing_coverage"])])
    return Report(
        results,
        table=table(rows, [f"{trainer.algo} (epoch {trainer.epoch})", "value", "random actions"]),
        files=[p for p in (traj,) if p is not None],
    )


# ------------------------------------------------------------------------------------------ demo


def _demo_files(args: argparse.Namespace) -> tuple[str, ...]:
    algos = [a.replace("-", "_") for a in args.algos]
    return ("results.json", "demo-coverage.png", *[f"demo-trajectories-{a}.png" for a in algos])


def cmd_demo(args: argparse.Namespace) -> Report:
    _setup(args)
    if args.quick:
        epochs, n_seeds, eval_every = 12, 1, 3
        override: dict[str, Any] = {"hidden": 64, "grad_steps": 20, "min_buffer": 800}
    else:
        epochs, n_seeds, eval_every = args.epochs, args.seeds, args.eval_every
        override = {}
    env, note = _env(args)
    say(args, note + (" — quick mode" if args.quick else ""))
    cfg = _config(args, **override)
    seeds = [args.seed + i for i in range(n_seeds)]
    algos = [a.replace("-", "_") for a in args.algos]
    bar = progress(len(algos) * len(seeds) * epochs, "demo", args.quiet)
    runs: dict[str, list[dict[str, Any]]] = {a: [] for a in algos}
    curves: dict[str, list[list[tuple[float, float]]]] = {a: [] for a in algos}
    last_xy: dict[str, Any] = {}
    for algo in algos:
        for seed in seeds:
            trainer = SkillTrainer(algo, env, cfg, seed=seed)
            curve = [_curve_point(trainer)]

            def after(tr: SkillTrainer, record: dict[str, float], curve: list = curve) -> None:
                bar.update(1)
                if tr.epoch % eval_every == 0 or tr.epoch == epochs:
                    curve.append(_curve_point(tr))

            trainer.train(epochs, after)
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
                last_xy[algo] = (metrics["coverage"]["xy"], metrics["coverage"]["skills"])
    bar.close()
    rand = [random_baseline(env, seed=s) for s in seeds]
    files = []
    for algo, (xy, skills) in last_xy.items():
        path = plot_trajectories(
            env, xy, args.out / f"demo-trajectories-{algo}.png", f"{algo}, seed {seeds[0]}", skills
        )
        files += [path] if path is not None else []
    curve_png = plot_curves(
        curves,
        args.out / "demo-coverage.png",
        title=f"{env.name}, {len(seeds)} seed(s)",
        ceiling=getattr(env, "max_cells", None),
    )
    files += [curve_png] if curve_png is not None else []
    if curve_png is None:
        say(args, "plots skipped: matplotlib is not installed (pip install 'rsd-skills[cli]')")
    n = len(seeds)
    tag = f"mean ± sample std, {n} seeds" if n > 1 else "1 seed"
    header = ["method", f"coverage ({tag})", "zero-shot AR", "zero-shot FD", "env steps"]
    rows = [
        [
            "random actions",
            fmt_mean_std([r["coverage"] for r in rand], 1),
            fmt_mean_std([r["zero_shot"]["success_rate"] for r in rand]),
            fmt_mean_std([r["zero_shot"]["final_distance"] for r in rand]),
            "",
        ]
    ]
    summary: dict[str, Any] = {}
    for algo, rs in runs.items():
        cov = [r["coverage"]["coverage"] for r in rs]
        ar = [r["zero_shot"]["success_rate"] for r in rs]
        fd = [r["zero_shot"]["final_distance"] for r in rs]
        rows.append(
            [
                algo,
                fmt_mean_std(cov, 1),
                fmt_mean_std(ar),
                fmt_mean_std(fd),
                f"{rs[0]['env_steps']:,}",
            ]
        )
        summary[algo] = {
            "coverage_mean": mean_std(cov)[0],
            "coverage_std": mean_std(cov)[1],  # sample std (ddof=1); None for one seed
            "success_rate_mean": mean_std(ar)[0],
            "success_rate_std": mean_std(ar)[1],
            "final_distance_mean": mean_std(fd)[0],
            "final_distance_std": mean_std(fd)[1],
        }
    results = {
        "env": env.spec(),
        "quick": args.quick,
        "epochs": epochs,
        "seeds": seeds,
        "resolved_config": cfg.to_dict(),
        "summary": summary,
        "random_actions": [
            {"seed": s, "coverage": r["coverage"], **r["zero_shot"]} for s, r in zip(seeds, rand)
        ],
        "runs": runs,
    }
    return Report(results, table=table(rows, header), files=files)


# ------------------------------------------------------------------------------------------ CLI


def build_cli() -> CLI:
    cli = CLI(
        DIST,
        description="RSD: regret-aware unsupervised skill discovery (ICML 2025), with METRA, LSD and "
        "DIAYN on one SAC core.",
    )
    p = cli.command(
        "train",
        cmd_train,
        help="train one method; writes results.json, checkpoint.pt and plots",
        description="Train RSD (or a baseline) on an environment. Writes results.json (coverage, "
        "zero-shot goal reaching, curves), checkpoint.pt (resumable) and trajectories.png / "
        "coverage.png (with matplotlib).",
        writes=("results.json", CKPT, TRAJ_PNG, CURVE_PNG),
        devices=CPU_ONLY,
    )
    p.add_argument(
        "--env",
        default="point-maze",
        help=f"environment: {', '.join(ENVS)}, or any gymnasium id such as HalfCheetah-v5 or "
        "Hopper-v5 (needs rsd-skills[mujoco]; see --xy-dims) (default: point-maze)",
    )
    p.add_argument(
        "--algo", choices=ALGO_CHOICES, default="rsd", help="skill-discovery method (default: rsd)"
    )
    _add_common(p, epochs=TRAIN_EPOCHS)
    p.set_defaults(epochs=None)  # resolved in cmd_train (--paper-scale changes it)
    p.add_argument(
        "--paper-scale",
        action="store_true",
        help=f"the official budget: 1024x2 MLPs, 16 trajectories and 200 gradient steps of "
        f"minibatch 1024 per epoch, 300k replay, 10k warm-up, T={PAPER_HORIZON}, and "
        f"{PAPER_EPOCHS} epochs unless --epochs is given; overrides those flags (slow on a CPU) "
        "(default: off)",
    )
    p.add_argument(
        "--eval-every",
        type=positive_int(),
        default=10,
        help="evaluate coverage and zero-shot every N epochs for the curve (default: 10)",
    )
    p.add_argument(
        "--resume",
        type=existing_path("file"),
        default=None,
        help="continue the run of this checkpoint up to --epochs in total (its algo, env and "
        "options are kept) (default: none)",
    )
    _add_config(p)

    p = cli.command(
        "evaluate",
        cmd_evaluate,
        help="evaluate a checkpoint: coverage, zero-shot goal reaching; writes evaluate.json",
        writes=("evaluate.json", "evaluate-trajectories.png"),
        devices=CPU_ONLY,
    )
    p.add_argument(
        "--checkpoint",
        type=existing_path("file"),
        required=True,
        help="checkpoint.pt written by 'rsd-skills train' (required)",
    )
    p.add_argument(
        "--n-skills",
        type=positive_int(),
        default=64,
        help="skills from the method's prior for coverage (default: 64)",
    )
    p.add_argument(
        "--eval-seed",
        type=nonneg_int(),
        default=12345,
        help="seed of the evaluation skills and resets (default: 12345)",
    )
    p.add_argument(
        "--no-recompute",
        action="store_true",
        help="METRA/LSD zero-shot: compute the skill once at s0 (default: off)",
    )
    p.add_argument(
        "--threads", type=positive_int(), default=1, help="torch CPU threads (default: 1)"
    )

    p = cli.command(
        "demo",
        cmd_demo,
        help="RSD vs baselines vs random actions on the embedded point maze",
        description="Train several methods at equal environment steps on the embedded numpy point "
        "maze and compare coverage and zero-shot goal reaching (--quick: 1 seed, 12 epochs, small "
        "networks, about half a minute).",
        writes=_demo_files,
        devices=CPU_ONLY,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="1 seed, 12 epochs, 64-wide MLPs, 20 gradient steps per epoch (default: off)",
    )
    p.add_argument(
        "--env",
        default="point-maze",
        help=f"environment: {', '.join(ENVS)}, or any gymnasium id such as HalfCheetah-v5 or "
        "Hopper-v5 (needs rsd-skills[mujoco]; see --xy-dims) (default: point-maze)",
    )
    p.add_argument(
        "--algos",
        type=choice_list(ALGO_CHOICES),
        default=["rsd", "metra"],
        help="comma-separated methods from " + ", ".join(ALGO_CHOICES) + " (default: rsd,metra)",
    )
    p.add_argument("--seeds", type=positive_int(), default=3, help="seeds per method (default: 3)")
    p.add_argument(
        "--eval-every",
        type=positive_int(),
        default=10,
        help="evaluate every N epochs for the curve (default: 10)",
    )
    _add_common(p, epochs=80)
    _add_config(p, hidden=128)
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
