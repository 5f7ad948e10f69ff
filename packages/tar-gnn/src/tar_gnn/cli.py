"""``tar-gnn`` command line: ``train``, ``evaluate``, ``split``, ``demo`` (on the repository's CLI contract).

Each subcommand is one call of :mod:`tar_gnn.experiments` on its config (:mod:`tar_gnn.config`, whose
fields are the flags); this module turns flags into the config, shows a progress bar and renders the
result. Parsing, ``--config`` files, output checks, results files and error lines come from
:mod:`tar_gnn._contract`. Nothing here imports torch before a command runs, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ._contract import (
    CLI,
    Report,
    add_config_flags,
    config_from,
    fmt_mean_std,
    progress,
    say,
    table,
)
from .config import (
    BaselineConfig,
    DataConfig,
    DemoConfig,
    EvaluateConfig,
    ShiftConfig,
    SplitConfig,
    TARConfig,
    TrainConfig,
    TrainRunConfig,
)

DIST = "tar-gnn"
HEADER = ["method", "OOD-test %", "ID-test %", "OOD-val %", "ms/epoch"]


def _pct(values: list[float]) -> str:
    return fmt_mean_std([100 * v for v in values])


def _rows(methods: dict[str, Any], labels: dict[str, str] | None = None) -> list[list[str]]:
    """One table row per trained method: OOD-test, ID-test, OOD-val (mean ± std) and ms/epoch."""
    rows = []
    for name, res in methods.items():
        if "runs" not in res:
            continue
        runs = res["runs"]
        rows.append(
            [
                (labels or {}).get(name, name),
                _pct([r["ood_test_acc"] for r in runs]),
                _pct([r["id_test_acc"] for r in runs]),
                _pct([r["ood_val_acc"] for r in runs]),
                f"{1000 * res['mean_std']['epoch_time_s']['mean']:.1f}",
            ]
        )
    return rows


def cmd_train(args: argparse.Namespace) -> Report:
    cfg = config_from(args, TrainRunConfig, **({"cfl": None} if args.no_cfl else {}))
    from .experiments import NOTICE, run_train

    if cfg.method == "tar":
        say(args, NOTICE)
    total = len(cfg.methods) * cfg.seeds * cfg.n_epochs
    with progress(total, "training", args.quiet, lazy=True) as bar:
        result = run_train(cfg, args.out, bar.update)
    say(args, f"data: {result.data_name} ({cfg.dataset}), split: {result.split.get('source')}")
    skipped = [f"{k}: {v['skipped']}" for k, v in result.methods.items() if "skipped" in v]
    text = table(_rows(result.methods), HEADER)
    text += "".join(f"\nskipped {s}" for s in skipped)
    text += f"\n{len(result.seeds)} seed(s); OOD-test at the best OOD-val epoch"
    files = [result.checkpoint] if result.checkpoint is not None else []
    return Report(result.as_dict(), table=text, files=files)


def cmd_evaluate(args: argparse.Namespace) -> Report:
    cfg = config_from(args, EvaluateConfig)
    from .experiments import run_evaluate

    result = run_evaluate(cfg)
    rows = [
        [k.replace("_acc", ""), f"{100 * v:.2f}"]
        for k, v in result.metrics.items()
        if k.endswith("_acc")
    ]
    return Report(result.as_dict(), table=table(rows, ["mask", "accuracy %"]))


def cmd_split(args: argparse.Namespace) -> Report:
    cfg = config_from(args, SplitConfig)
    from .experiments import run_split

    result = run_split(cfg, args.out)
    n = result.num_nodes
    rows = [[k, v, f"{100 * v / n:.1f}"] for k, v in result.sizes.items()]
    text = table(rows, ["mask", "nodes", "% of N"])
    text += f"\ntraining environments: {len(result.train_envs)}"
    return Report(result.as_dict(), table=text, files=[result.path] if result.path else [])


def cmd_demo(args: argparse.Namespace) -> Report:
    cfg = config_from(args, DemoConfig)
    from .experiments import DEMO_METHODS, NOTICE, demo_plan, run_demo

    n, seeds, train = demo_plan(cfg)
    say(
        args,
        f"data: synthetic contextual SBM, concept shift (embedded; {n} nodes, 4 classes, "
        f"{'quick' if cfg.quick else 'full'} mode), {len(seeds)} seeds",
    )
    say(args, NOTICE)
    total = len(DEMO_METHODS) * len(seeds) * train.n_epochs
    with progress(total, "training", args.quiet, lazy=True) as bar:
        result = run_demo(cfg, bar.update)
    mech = result.mechanism
    share = mech["T_in=0"]["flagged_share"]
    mrows = [
        [
            k,
            f"{100 * v['flagged_mass']:.1f}",
            f"{100 * share:.1f}",
            f"{v['ess_frac']:.3f}",
            f"{v['corr_q_loss']:.2f}",
        ]
        for k, v in mech.items()
    ]
    text = (
        table(_rows(result.methods, result.labels), HEADER)
        + f"\n{len(seeds)} seeds (mean ± sample std); OOD-test at the best OOD-val epoch\n\n"
        + "TAR weights at a fixed ERM checkpoint (minority = colour differs from label):\n"
        + table(mrows, ["flow", "minority mass %", "minority share %", "ESS/n", "corr(q, loss)"])
    )
    return Report(result.as_dict(), table=text)


def _names(*classes: type) -> list[str]:
    return [f.name for cls in classes for f in dataclasses.fields(cls)]


def _flags(parser: argparse.ArgumentParser, job: type, *parts: type) -> None:
    """One flag group per part of a job config, then the job's own fields."""
    for part in parts:
        add_config_flags(parser, part)
    add_config_flags(parser, job, skip=_names(*parts))


def build_cli() -> CLI:
    from importlib.metadata import version

    cli = CLI(
        DIST,
        description="Topology-aware dynamic reweighting (TAR, ICML 2025) for node classification "
        "under distribution shift, with GOOD-protocol splits and baselines. Each command is one "
        "Python call: tar_gnn.run_<command>(<Config>(...)).",
        version=version(DIST),
        track=("torch-geometric",),
    )
    p = cli.command(
        "train",
        cmd_train,
        help="train a GNN with TAR or a baseline on a shift split; writes results.json and model.pt",
        description="Train a GNN with TAR (or a baseline) and the baselines beside it on a shift "
        "split, over seeds. Python: run_train(TrainRunConfig(...), out).",
        writes=("results.json", "model.pt"),
    )
    _flags(p, TrainRunConfig, DataConfig, ShiftConfig, TrainConfig, TARConfig, BaselineConfig)
    p.add_argument(
        "--no-cfl",
        action="store_true",
        help="the same as --cfl off: use --step-size unchecked (default: off)",
    )
    p = cli.command(
        "evaluate",
        cmd_evaluate,
        help="evaluate a model.pt from 'tar-gnn train' on every mask; writes evaluate.json",
        description="Accuracy, balanced accuracy and macro-F1 of a trained model on every mask. "
        "Python: run_evaluate(EvaluateConfig(...)).",
    )
    _flags(p, EvaluateConfig, DataConfig)
    p = cli.command(
        "split",
        cmd_split,
        help="build GOOD-protocol shift masks for a dataset; writes split.json and split.npz",
        description="Build GOOD-protocol shift masks (train, ID-val/test, OOD-val/test) and training "
        "environments. Python: run_split(SplitConfig(...), out).",
        writes=("split.json", "split.npz"),
    )
    _flags(p, SplitConfig, DataConfig, ShiftConfig)
    cli.command(
        "demo",
        cmd_demo,
        help="TAR vs ERM, KL-DRO, CVaR, IRM, V-REx, GroupDRO on the embedded synthetic concept shift",
        description="TAR and the baselines on the embedded contextual-SBM concept shift, and TAR's "
        "weight on minority training nodes at a fixed ERM checkpoint. Python: run_demo(DemoConfig()).",
        config=DemoConfig,
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
