"""``rsd-skills`` command line: ``train``, ``evaluate``, ``demo`` (on the repository's CLI contract).

Each subcommand is one call of :mod:`rsd_skills.experiments` on its config (:mod:`rsd_skills.config`,
whose fields are the flags); this module turns flags into the config, shows a progress bar and renders
the result. Parsing, ``--config`` files, output checks, results files and error lines come from
:mod:`rsd_skills._contract`. Nothing here imports torch before a command runs, so ``--help`` answers at
once.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._contract import CLI, Report, config_from, fmt_mean_std, progress, say, table
from .config import PAPER_EPOCHS, DemoConfig, EvaluateConfig, TrainConfig

DIST = "rsd-skills"
TRAJ_PNG, CURVE_PNG, CKPT = "trajectories.png", "coverage.png", "checkpoint.pt"
# Rollouts are numpy and the networks small: every tensor and generator lives on the CPU, so --device
# accepts cpu only (one line instead of a failure in the middle of training).
CPU_ONLY = ("cpu",)


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


def _notes(args: argparse.Namespace, notes: list[str]) -> None:
    for note in notes:
        say(args, note + " (pip install 'rsd-skills[cli]')")


def cmd_train(args: argparse.Namespace) -> Report:
    cfg = config_from(args, TrainConfig)
    from .experiments import run_train

    bar = progress(None, f"train {cfg.algo}", args.quiet, lazy=True)

    def tick(record: dict[str, float], total: int) -> None:
        bar.total = total
        bar.update(1)
        # cells visited by all training episodes so far (sampled actions); the table's coverage is
        # that of 64 skills with deterministic actions
        bar.set_postfix(train_cells=int(record["train_cells"]))

    with bar:
        result = run_train(cfg, args.out, tick)
    say(args, result.env_note)
    _notes(args, result.notes)
    rows = _rows(result.as_dict(), result.ceiling)
    rows.append(["environment steps", f"{result.env_steps:,}"])
    header = [f"{result.algo} (seed {result.seed})", "value"]
    return Report(result.as_dict(), table=table(rows, header), files=result.files)


def cmd_evaluate(args: argparse.Namespace) -> Report:
    cfg = config_from(args, EvaluateConfig)
    from .experiments import run_evaluate

    result = run_evaluate(cfg, args.out)
    say(args, result.note)
    rand = result.random_actions
    rows = [[r[0], r[1], ""] for r in _rows(result.as_dict(), result.ceiling)]
    rows[0][2] = str(rand["coverage"])
    rows[len(rows) - 3][2] = f"{rand['success_rate']:.2f}"
    rows[len(rows) - 2][2] = f"{rand['final_distance']:.2f}"
    rows.append(["coverage of a body that does not move", "", str(rand["standing_coverage"])])
    header = [f"{result.algo} (epoch {result.epoch})", "value", "random actions"]
    return Report(result.as_dict(), table=table(rows, header), files=result.files)


def _demo_files(args: argparse.Namespace) -> tuple[str, ...]:
    algos = [a.replace("-", "_") for a in args.algos]
    return ("results.json", "demo-coverage.png", *[f"demo-trajectories-{a}.png" for a in algos])


def cmd_demo(args: argparse.Namespace) -> Report:
    cfg = config_from(args, DemoConfig)
    from .experiments import run_demo

    run = cfg.effective()
    with progress(len(run.algos) * run.seeds * run.epochs, "demo", args.quiet, lazy=True) as bar:
        result = run_demo(cfg, args.out, bar.update)
    say(args, result.env_note)
    _notes(args, result.notes)
    n = len(result.seeds)
    tag = f"mean ± sample std, {n} seeds" if n > 1 else "1 seed"
    header = ["method", f"coverage ({tag})", "zero-shot AR", "zero-shot FD", "env steps"]
    rand = result.random_actions
    rows = [
        [
            "random actions",
            fmt_mean_std([r["coverage"] for r in rand], 1),
            fmt_mean_std([r["success_rate"] for r in rand]),
            fmt_mean_std([r["final_distance"] for r in rand]),
            "",
        ]
    ]
    for algo, rs in result.runs.items():
        rows.append(
            [
                algo,
                fmt_mean_std([r["coverage"]["coverage"] for r in rs], 1),
                fmt_mean_std([r["zero_shot"]["success_rate"] for r in rs]),
                fmt_mean_std([r["zero_shot"]["final_distance"] for r in rs]),
                f"{rs[0]['env_steps']:,}",
            ]
        )
    return Report(result.as_dict(), table=table(rows, header), files=result.files)


def build_cli() -> CLI:
    cli = CLI(
        DIST,
        description="RSD: regret-aware unsupervised skill discovery (ICML 2025), with METRA, LSD and "
        "DIAYN on one SAC core. Each command is one Python call: "
        "rsd_skills.run_<command>(<Command>Config(...)).",
    )
    cli.command(
        "train",
        cmd_train,
        help="train one method; writes results.json, checkpoint.pt and plots",
        description="Train RSD (or a baseline) on an environment. Writes results.json (coverage, "
        "zero-shot goal reaching, curves), checkpoint.pt (resumable) and trajectories.png / "
        f"coverage.png (with matplotlib). --paper-scale runs {PAPER_EPOCHS} epochs unless --epochs "
        "is given. Python: run_train(TrainConfig(...), out).",
        writes=("results.json", CKPT, TRAJ_PNG, CURVE_PNG),
        devices=CPU_ONLY,
        config=TrainConfig,
    )
    cli.command(
        "evaluate",
        cmd_evaluate,
        help="evaluate a checkpoint: coverage, zero-shot goal reaching; writes evaluate.json",
        description="Coverage and zero-shot goal reaching of a checkpoint, beside random actions. "
        "Python: run_evaluate(EvaluateConfig(checkpoint=...)).",
        writes=("evaluate.json", "evaluate-trajectories.png"),
        devices=CPU_ONLY,
        config=EvaluateConfig,
    )
    cli.command(
        "demo",
        cmd_demo,
        help="RSD vs baselines vs random actions on the embedded point maze",
        description="Train several methods at equal environment steps on the embedded numpy point "
        "maze and compare coverage and zero-shot goal reaching (--quick: 1 seed, 12 epochs, small "
        "networks, about half a minute). Python: run_demo(DemoConfig(...), out).",
        writes=_demo_files,
        devices=CPU_ONLY,
        config=DemoConfig,
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
