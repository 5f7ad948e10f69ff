"""``phynfp`` command line: ``train``, ``evaluate`` and ``demo`` on the repository's CLI contract.

Each subcommand is one call of :mod:`phynfp.jobs` on its config (:mod:`phynfp.config`, whose fields are
the flags); this module turns flags into the config, shows progress bars and renders the result.
Nothing here imports torch, PyG or wntr before a command runs, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import _contract as C
from .config import CHECKPOINT_FORMAT, DemoConfig, EvaluateConfig, TrainRunConfig

__all__ = ["CHECKPOINT_FORMAT", "build_cli", "main", "results_table"]


def _fmt(summary: dict[str, Any], digits: int = 4) -> str:
    mean, std, n = summary.get("mean"), summary.get("std"), summary.get("n", 0)
    if mean is None:
        return "-"
    return f"{mean:.{digits}f}" if std is None or n < 2 else f"{mean:.{digits}f} ± {std:.{digits}f}"


def results_table(results: dict[str, Any]) -> str:
    """The per-model table of a train/demo results dict."""
    rows = []
    for name, entry in results["models"].items():
        s = entry["summary"]
        ratio = s.get("epoch_time_ratio_to_gcn")
        rows.append(
            [name, _fmt(s["mse"]), _fmt(s["nse_median"], 3), _fmt(s["mse_reversed"]),
             _fmt(s["g_train"], 3), _fmt(s["g_flip"], 3), _fmt(s["leakage"], 3),
             "-" if ratio is None else f"{ratio:.2f}"]
        )  # fmt: skip
    header = ["model", "test MSE", "NSE (median)", "MSE reversed", "G_train", "G_flip", "leakage"]
    seeds = len(results["seeds"])
    note = f"{results['dataset_info']}; L = {results['layers']} ({results['layers_rule']}); {seeds} seed(s)"
    note += "; ± is the sample std over seeds" if seeds > 1 else ""
    return note + "\n" + C.table(rows, [*header, "epoch ×GCN"])


def _hooks(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "progress": lambda total, desc: C.progress(total, desc, args.quiet, lazy=True),
        "log": lambda text: C.say(args, text),
    }


def _failed(exc: Exception) -> C.UsageError:
    # One line, exit 2 and no results.json: a run that trained nothing has no result.
    return C.UsageError("--lr", f"training failed, no results written: {exc}")


def train(args: argparse.Namespace) -> C.Report:
    cfg = C.config_from(args, TrainRunConfig)
    from .jobs import run_train
    from .training import TrainingFailed

    try:
        result = run_train(cfg, args.out, **_hooks(args))
    except TrainingFailed as exc:
        raise _failed(exc) from None
    files = [result.checkpoint] if result.checkpoint else []
    return C.Report(result.as_dict(), table=results_table(result.results), files=files)


def demo(args: argparse.Namespace) -> C.Report:
    cfg = C.config_from(args, DemoConfig)
    from .jobs import run_demo
    from .training import TrainingFailed

    try:
        result = run_demo(cfg, **_hooks(args))
    except TrainingFailed as exc:
        raise _failed(exc) from None
    return C.Report(result.as_dict(), table=results_table(result.results))


def evaluate(args: argparse.Namespace) -> C.Report:
    cfg = C.config_from(args, EvaluateConfig)
    from .jobs import run_evaluate

    r = run_evaluate(cfg, **_hooks(args))
    rows = [
        ["test MSE", f"{r.test['mse']:.4f}"],
        ["NSE (median over nodes)", f"{r.test['nse_median']:.3f}"],
        ["MSE on reversed edges", f"{r.flip_eval['mse']:.4f}"],
        ["G_flip", f"{r.g_flip:.3f}"],
        [
            f"leakage (node {r.perturbation['node']}, δ = {cfg.delta})",
            f"{r.perturbation['leakage']:.3f}",
        ],
    ]
    return C.Report(r.as_dict(), table=C.table(rows, ["measure", "value"]))


def build_cli() -> C.CLI:
    cli = C.CLI(
        "phynfp",
        description="PhyNFP (Jiang et al., ICML 2025): physics-guided, topology-aware flux prediction on "
        "directed graphs, with baselines and directional-sensitivity measures. Each command is one "
        "Python call: phynfp.run_<command>(<Config>(...)).",
        track=("torch-geometric", "wntr"),
    )
    cli.command(
        "train",
        train,
        help="train PhyNFP and the baselines on a dataset; report error and directional sensitivity",
        description="Train PhyNFP and baselines (persistence, climatology, MLP, GCN, GAT, GraphSAGE, "
        "DirGNN) on forward and reversed edges; report test MSE/NSE, G_train, G_flip, perturbation "
        "leakage and epoch time relative to GCN. Writes results.json and model.pt (PhyNFP). "
        "Python: phynfp.run_train(phynfp.TrainRunConfig(...), out).",
        writes=("results.json", "model.pt"),
        config=TrainRunConfig,
    )
    cli.command(
        "evaluate",
        evaluate,
        help="evaluate a PhyNFP checkpoint: test error, error on reversed edges, perturbation leakage",
        description="Evaluate a model.pt written by 'phynfp train' on its dataset (or --dataset). "
        "Python: phynfp.run_evaluate(phynfp.EvaluateConfig(...)).",
        writes=("evaluate.json",),
        config=EvaluateConfig,
    )
    cli.command(
        "demo",
        demo,
        help="train PhyNFP and baselines on the embedded river-synth data (--quick: under a minute)",
        description="The train job on the embedded river-synth data, simulated in memory. "
        "Python: phynfp.run_demo(phynfp.DemoConfig(...)).",
        writes=("results.json",),
        config=DemoConfig,
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
