"""``sassha-optim`` command line: ``demo``, ``train``, ``evaluate`` (on the repository's CLI contract).

Each subcommand is one call of :mod:`sassha_optim.experiments` on its config
(:mod:`sassha_optim.config`, whose fields are the flags); this module turns flags into the config, shows
a progress bar and renders the result. Parsing, ``--config`` files, output checks, results files and
error lines come from :mod:`sassha_optim._contract`. Nothing here imports torch before a command runs,
so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._contract import CLI, Report, config_from, fmt_mean_std, progress, say, table
from .config import DemoConfig, EvaluateConfig, TrainConfig

DIST = "sassha-optim"


def cmd_demo(args: argparse.Namespace) -> Report:
    quick = {"epochs": 30, "seeds": 1} if args.quick else {}
    cfg = config_from(args, DemoConfig, **quick)
    from .experiments import run_demo

    with progress(
        cfg.seeds * len(cfg.optimizers) * cfg.epochs, "demo", args.quiet, lazy=True
    ) as bar:
        result = run_demo(cfg, args.out, bar.update)
    say(args, f"{result.data_note}: {result.n_train} train / {result.n_test} test samples")
    n = len(result.seeds)
    acc = f"test acc % (mean ± sample std, {n} seeds)" if n > 1 else "test acc % (1 seed)"
    header = ["optimizer", acc, "test loss", "train loss", "ms/step", "HVPs"]
    header += ["λ_max"] if cfg.sharpness else []
    rows = []
    for name, s in result.summary.items():
        row: list[Any] = [name, fmt_mean_std([r["test_accuracy"] for r in result.runs[name]])]
        row += [f"{s['test_loss_mean']:.4f}", f"{s['train_loss_mean']:.4f}"]
        row += [f"{s['ms_per_step_median']:.2f}", s["hvp_calls"]]
        rows.append(row + ([f"{s['lambda_max_mean']:.3g}"] if cfg.sharpness else []))
    files = [result.plot] if result.plot else []
    return Report(result.as_dict(), table=table(rows, header), files=files)


def cmd_train(args: argparse.Namespace) -> Report:
    cfg = config_from(args, TrainConfig)
    from .experiments import run_train

    with progress(cfg.epochs, f"train {cfg.optimizer}", args.quiet, lazy=True) as bar:
        result = run_train(cfg, args.out, bar.update)
    say(args, f"{result.data_note}: {result.n_train} train / {result.n_test} test samples")
    m = result.metrics
    row = [cfg.optimizer, f"{m.test_accuracy:.2f}", f"{m.test_loss:.4f}", f"{m.train_loss:.4f}"]
    row += [f"{1000 * m.seconds_per_step:.2f}", m.hvp_calls]
    header = ["optimizer", "test acc % (1 seed)", "test loss", "train loss", "ms/step", "HVPs"]
    files = [f for f in (result.checkpoint, result.plot) if f is not None]
    return Report(result.as_dict(), table=table([row], header), files=files)


def cmd_evaluate(args: argparse.Namespace) -> Report:
    cfg = config_from(args, EvaluateConfig)
    from .experiments import run_evaluate

    result = run_evaluate(cfg)
    say(args, f"{result.data_note}: {result.n_test} test samples")
    metrics = result.metrics
    row = [f"{metrics['test']['accuracy']:.2f}", f"{metrics['test']['loss']:.4f}"]
    header = ["test acc %", "test loss"]
    if cfg.sharpness:
        row += [f"{metrics['lambda_max']:.4g}", f"{metrics['hessian_trace']:.4g}"]
        header += ["λ_max", "tr(H)"]
    return Report(result.as_dict(), table=table([row], header))


def build_cli() -> CLI:
    from importlib.metadata import version

    cli = CLI(
        DIST,
        description="Sassha optimizer (ICML 2025): demo, training and evaluation of MLPs. Each "
        "command is one Python call: sassha_optim.experiments.run_<command>(<Command>Config(...)).",
        version=version(DIST),
    )
    demo = cli.command(
        "demo",
        cmd_demo,
        help="digits MLP: Sassha vs AdamW vs SAM (offline, minutes)",
        description="Train an MLP on scikit-learn's bundled digits (or the embedded synthetic "
        "data without scikit-learn) with Sassha and baselines; says which data it ran on. "
        "Python: run_demo(DemoConfig(...)).",
        writes=("results.json", "test_accuracy.png"),
        config=DemoConfig,
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help="1 seed, 30 epochs (< 2 minutes on 1 core; default: off)",
    )
    cli.command(
        "train",
        cmd_train,
        help="train an MLP on an IDX/NPZ/CSV image folder (e.g. MNIST)",
        description="Train an MLP classifier with Sassha (or a baseline preset) on a data folder; "
        "writes results.json and checkpoint.pt for 'evaluate'. Python: run_train(TrainConfig(...), "
        "out).",
        writes=("results.json", "checkpoint.pt", "test_accuracy.png"),
        config=TrainConfig,
    )
    cli.command(
        "evaluate",
        cmd_evaluate,
        help="evaluate a checkpoint written by 'train'",
        description="Test accuracy/loss of a saved model, optionally with sharpness; writes "
        "evaluate.json (the training run's results.json is kept). Python: "
        "run_evaluate(EvaluateConfig(...)).",
        writes=("evaluate.json",),
        config=EvaluateConfig,
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
