"""``parq-optim`` command line: ``demo``, ``train``, ``export`` (on the repository's CLI contract).

Each subcommand is one call of :mod:`parq_optim.experiments` on its config
(:mod:`parq_optim.config`, whose fields are the flags); this module turns flags into the config, shows
a progress bar and renders the result. Parsing, ``--config`` files, output checks, results files and
error lines come from :mod:`parq_optim._contract`. Nothing here imports torch before a command runs,
so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import math
import sys

from ._contract import CLI, Report, config_from, fmt_mean_std, progress, say, table
from .config import DemoConfig, ExportConfig, TrainRunConfig

__all__ = ["build_cli", "main"]

DIST = "parq-optim"


def cmd_demo(args: argparse.Namespace) -> Report:
    cfg = config_from(args, DemoConfig)
    from .experiments import DATA_TEXT, run_demo

    say(args, f"data: {DATA_TEXT[cfg.data]}")
    with progress(7 * len(cfg.seed_list), "demo", args.quiet, lazy=True) as bar:
        result = run_demo(cfg, args.out, bar.update)
    n = result.n_seeds
    spread = f"mean ± sample std over {n} seeds" if n > 1 else "1 seed"
    rows = [
        [
            r["bits"],
            r["method"],
            fmt_mean_std(r["test_acc"]),
            " ".join("nan" if math.isnan(a) else f"{a:.1f}" for a in r["test_acc"]),
        ]
        for r in result.rows
    ]
    text = table(rows, ["bits", "method", f"test acc % ({spread})", "per seed"])
    text += f"\ndata: {cfg.data}; seeds {result.seeds}; {result.epochs} epochs; hidden {cfg.hidden}"
    if result.diverged:
        text += "\ndiverged (accuracy nan): " + "; ".join(result.diverged)
    files = [result.plot] if result.plot else []
    return Report(result.as_dict(), table=text, files=files, status=3 if result.diverged else 0)


def cmd_train(args: argparse.Namespace) -> Report:
    cfg = config_from(args, TrainRunConfig)
    from .experiments import DATA_TEXT, bits_label, run_train

    v = cfg.resolved()
    total = v["steps"] if cfg.model == "charlm" else v["epochs"]
    with progress(total, f"train {cfg.model} {cfg.prox}", args.quiet, lazy=True) as bar:
        run = run_train(cfg, args.out, bar.update)
    rec = run.record
    if run.diverged is not None:
        tail = "lower --lr" if cfg.model == "charlm" else "lower --lr or check the data"
        print(
            f"{DIST}: {run.diverged}; checkpoint.pt was not written (an existing one is kept); "
            f"{tail}",
            file=sys.stderr,
        )
        return Report(rec, status=3)
    say(args, f"data: {DATA_TEXT.get(str(cfg.data), rec['data'])}")
    label = bits_label(rec["method"], rec["bits"])
    if cfg.model == "charlm":
        bpw = rec["storage"]["bits_per_weight"] if "storage" in rec else 32.0
        row = [
            rec["method"],
            label,
            f"{rec['val_loss']:.4f}",
            f"{rec['test_loss']:.4f}",
            f"{rec['unigram']['val_loss']:.4f}",
            f"{bpw:.2f}",
            f"{rec['train_time_s']:.1f}",
        ]
        header = ["method", "bits", "val loss", "test loss", "unigram val", "bits/weight", "time s"]
    else:
        row = [
            rec["method"],
            label,
            f"{rec['test_acc']:.2f}",
            f"{rec['train_acc']:.2f}",
            f"{rec['train_time_s']:.1f}",
        ]
        header = ["method", "bits", "test acc %", "train acc %", "time s"]
    files = [f for f in (run.checkpoint, run.plot) if f is not None]
    return Report(rec, table=table([row], header), files=files)


def cmd_export(args: argparse.Namespace) -> Report:
    cfg = config_from(args, ExportConfig)
    from .experiments import run_export

    result = run_export(cfg, args.out)
    r = result.record
    row = [
        result.file.name,
        r["file_bytes"],
        f"{r['bits_per_weight']:.3f}",
        r["fp32_bytes"],
        f"{r['roundtrip_max_abs_diff']:.2e}",
    ]
    text = table([row], ["file", "bytes", "bits/weight", "fp32 bytes", "max |diff|"])
    return Report(result.as_dict(), table=text, files=[result.file])


def build_cli() -> CLI:
    """The ``parq-optim`` command line: ``demo``, ``train`` and ``export``."""
    from . import __version__

    cli = CLI(
        DIST,
        description="PARQ quantization-aware training (Jin et al., ICML 2025): demo, train, "
        "export. Each command is one Python call: parq_optim.experiments.run_<command>(config).",
        version=__version__,
    )
    cli.command(
        "demo",
        cmd_demo,
        help="PARQ vs STE vs BinaryRelax at 1 bit and ternary on an embedded dataset",
        description="Full precision, STE, BinaryRelax and PARQ on a small MLP at 1 bit and "
        "ternary, several seeds; prints mean ± sample std (ddof=1) over the seeds and writes "
        "results.json (and demo.png when matplotlib is installed). Python: "
        "run_demo(DemoConfig(...), out).",
        writes=("results.json", "demo.png"),
        config=DemoConfig,
    )
    cli.command(
        "train",
        cmd_train,
        help="train one model and write its checkpoint",
        description="Train one model (full precision or QAT): an MLP/CNN on a data folder "
        "(IDX/NPZ/CSV), digits, mnist or the synthetic preset, or a character-level transformer "
        "(--model charlm) on a text file; writes results.json, checkpoint.pt and "
        "loss_curve.png (when matplotlib is installed) in --out. Python: "
        "run_train(TrainRunConfig(...), out).",
        writes=("results.json", "checkpoint.pt", "loss_curve.png"),
        config=TrainRunConfig,
    )
    cli.command(
        "export",
        cmd_export,
        help="write a trained checkpoint as level tables + bit-packed integer codes",
        description="Read a checkpoint written by 'parq-optim train', write model.parq.pt "
        "(levels + codes at ceil(log2 |Q|) bits) and export.json (bits/weight, file size, "
        "round-trip error) in --out. Python: run_export(ExportConfig(...), out).",
        writes=("export.json", "model.parq.pt"),
        config=ExportConfig,
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``parq-optim`` command; returns the exit code."""
    return build_cli().main(argv)
