"""Command line: ``parq-optim demo | train | export``, on the repository's CLI contract
(:mod:`parq_optim._contract`): common flags, validated values, config files, results files.

Every subcommand is declared once in :func:`build_cli`; values are checked by the flag validators
(ranges, choices, paths) and by :meth:`TrainConfig.validate` / :meth:`TrainConfig.check_data`
(combinations such as ``--quantizer unif --bits 0`` or ``--model cnn`` on CSV data), whose
:class:`~parq_optim.train.ConfigError` names the flag at fault.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ._contract import (
    CLI,
    Report,
    UsageError,
    blame,
    existing_path,
    fmt_mean_std,
    int_range,
    mean_std,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    progress,
    require,
    say,
    table,
    unit_interval,
)
from .data import Split, load_digits, load_folder, make_synthetic
from .optim import QUANTIZERS
from .train import (
    MAX_BITS,
    METHODS,
    MODELS,
    OPTIMIZERS,
    ConfigError,
    Diverged,
    TrainConfig,
    build,
    load_checkpoint,
    save_checkpoint,
    train,
)

__all__ = ["build_cli", "main"]

DIST = "parq-optim"
DATA_NAMES = ("synthetic", "digits")
DATA_TEXT = {
    "synthetic": "synthetic (embedded Gaussian mixture of 8x8 images, 10 classes, "
    "2,000 train / 1,000 test; no download)",
    "digits": "digits (scikit-learn's 8x8 handwritten digits, 1,437 train / 360 test)",
}
DEMO_METHODS = ("fp", "ste", "binaryrelax", "parq")
DEFAULT_LR = {"sgd": 0.1, "adamw": 1e-3}
# TrainConfig fields whose flag has another name
FLAG_OF = {"method": "--prox"}


def _training_flags(p: argparse.ArgumentParser, *, epochs: str, hidden: int) -> None:
    p.add_argument(
        "--model", choices=MODELS, default="mlp", help="mlp, or cnn for image data (default: mlp)"
    )
    p.add_argument(
        "--hidden",
        type=positive_int(),
        default=hidden,
        help=f"hidden width of the MLP (the CNN uses max(4, hidden/4) channels; default: {hidden})",
    )
    p.add_argument(
        "--epochs", type=positive_int(), default=None, help=f"training epochs (default: {epochs})"
    )
    p.add_argument("--batch-size", type=positive_int(), default=64, help="mini-batch (default: 64)")
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="sgd",
        help="base optimizer: sgd (momentum 0.9) or adamw (default: sgd)",
    )
    p.add_argument(
        "--lr",
        type=positive_float(),
        default=None,
        help="learning rate, cosine-annealed over all steps (default: 0.1 for sgd, 1e-3 for adamw)",
    )
    p.add_argument(
        "--weight-decay",
        type=nonneg_float(),
        default=1e-4,
        help="weight decay of the quantized weights (biases: 0; default: 1e-4)",
    )
    p.add_argument(
        "--quantizer",
        choices=sorted(QUANTIZERS),
        default="lsbq",
        help="level-set estimator: unif, maxunif (>= 2 bits), ternary (ternary only), lsbq "
        "(greedy least-squares binary), lsbq-optimal (exact, <= 2 bits) (default: lsbq)",
    )
    p.add_argument(
        "--per-channel",
        action="store_true",
        help="one level set per output channel (row) instead of per tensor (default: off)",
    )
    p.add_argument(
        "--block-size",
        type=positive_int(),
        default=None,
        help="one level set per block of this many weights along each row; needs --per-channel "
        "and must divide every layer's input width (default: off)",
    )
    p.add_argument(
        "--warmup-steps",
        type=nonneg_int(),
        default=0,
        help="full-precision optimizer steps before QAT starts (default: 0)",
    )
    p.add_argument(
        "--quant-period",
        type=positive_int(),
        default=10,
        help="recompute the level sets every this many QAT steps (default: 10)",
    )
    p.add_argument(
        "--steepness",
        type=positive_float(),
        default=10.0,
        help="steepness s of PARQ's inverse-slope schedule (default: 10)",
    )
    p.add_argument(
        "--anneal-end-frac",
        type=unit_interval(low_open=True),
        default=0.9,
        help="the anneal window [warmup steps, frac * all steps) ends at this fraction, in (0, 1] "
        "(default: 0.9)",
    )


def build_cli() -> CLI:
    """The ``parq-optim`` command line: ``demo``, ``train`` and ``export``."""
    from . import __version__

    cli = CLI(
        DIST,
        description="PARQ quantization-aware training (Jin et al., ICML 2025): demo, train, "
        "export.",
        version=__version__,
    )
    demo = cli.command(
        "demo",
        cmd_demo,
        help="PARQ vs STE vs BinaryRelax at 1 bit and ternary on an embedded dataset",
        description="Full precision, STE, BinaryRelax and PARQ on a small MLP at 1 bit and "
        "ternary, several seeds; prints mean ± sample std (ddof=1) over the seeds and writes "
        "results.json (and demo.png when matplotlib is installed).",
        writes=("results.json", "demo.png"),
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help="30 epochs and 2 seeds instead of 60 and 3 (about 15 s on one core; default: off)",
    )
    demo.add_argument(
        "--data",
        choices=DATA_NAMES,
        default="synthetic",
        help="synthetic (embedded, no download) or digits (needs scikit-learn, the [data] "
        "extra) (default: synthetic)",
    )
    demo.add_argument(
        "--seeds",
        type=positive_int(),
        default=None,
        help="number of seeds, from --seed on (default: 2 with --quick, else 3)",
    )
    _training_flags(demo, epochs="60, 30 with --quick", hidden=16)

    tr = cli.command(
        "train",
        cmd_train,
        help="train one model and write its checkpoint",
        description="Train one model (full precision or QAT) on a data folder (IDX/NPZ/CSV), "
        "digits or the synthetic preset; writes results.json and checkpoint.pt in --out.",
        writes=("results.json", "checkpoint.pt"),
    )
    tr.add_argument(
        "--data",
        type=existing_path("dir", names=DATA_NAMES),
        default="synthetic",
        help="a data folder (MNIST IDX files, .npz or *train*.csv + *test*.csv), or synthetic "
        "(embedded) or digits (scikit-learn) (default: synthetic)",
    )
    tr.add_argument(
        "--bits",
        type=int_range(0, MAX_BITS),
        default=2,
        help=f"bits per quantized weight, 0 = ternary, at most {MAX_BITS} (default: 2)",
    )
    tr.add_argument(
        "--prox",
        choices=METHODS,
        default="parq",
        help="prox map: parq, ste (hard quantization), binaryrelax, softquant, or fp (full "
        "precision, no quantization) (default: parq)",
    )
    tr.add_argument(
        "--max-train",
        type=positive_int(),
        default=None,
        help="subsample the train split to this many samples, stratified (default: all)",
    )
    tr.add_argument(
        "--max-test",
        type=positive_int(),
        default=None,
        help="subsample the test split to this many samples, stratified (default: all)",
    )
    _training_flags(tr, epochs="3", hidden=128)

    ex = cli.command(
        "export",
        cmd_export,
        help="write a trained checkpoint as level tables + bit-packed integer codes",
        description="Read a checkpoint written by 'parq-optim train', write model.parq.pt "
        "(levels + codes at ceil(log2 |Q|) bits) and export.json (bits/weight, file size, "
        "round-trip error) in --out.",
        writes=("export.json", "model.parq.pt"),
    )
    ex.add_argument(
        "--checkpoint",
        type=existing_path("file"),
        required=True,
        help="checkpoint.pt written by 'parq-optim train' (required)",
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``parq-optim`` command; returns the exit code."""
    return build_cli().main(argv)


# ---- helpers ----------------------------------------------------------------------------------
def _setup(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    if args.device == "cpu":
        torch.set_num_threads(1)  # small models: threads only add contention (and noise)


def _flag(field: str) -> str:
    return FLAG_OF.get(field, "--" + field.replace("_", "-"))


def _config(
    args: argparse.Namespace, method: str, bits: int, seed: int, epochs: int
) -> TrainConfig:
    cfg = TrainConfig(
        method=method,
        bits=bits,
        quantizer=args.quantizer,
        model=args.model,
        hidden=args.hidden,
        epochs=epochs,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        lr=args.lr if args.lr is not None else DEFAULT_LR[args.optimizer],
        weight_decay=args.weight_decay,
        warmup_steps=args.warmup_steps,
        quant_period=args.quant_period,
        per_channel=args.per_channel,
        block_size=args.block_size,
        steepness=args.steepness,
        anneal_end_frac=args.anneal_end_frac,
        seed=seed,
        device=args.device,
    )
    if hasattr(args, "bits"):
        _checked(cfg.validate)
    else:  # demo: the bit widths are fixed, the quantizer must support them
        _checked(cfg.validate, bits_flag="--quantizer", note="the demo runs 1 bit and ternary")
    return cfg


def _checked(check: Any, *values: Any, bits_flag: str = "--bits", note: str = "") -> None:
    """Run a TrainConfig check; its ConfigError becomes a usage error naming the flag."""
    try:
        check(*values)
    except ConfigError as e:
        if e.field == "bits":
            raise UsageError(bits_flag, f"{note}; {e}" if note else str(e)) from e
        raise UsageError(_flag(e.field), str(e)) from e


def _load_data(
    spec: str | Path, seed: int, max_train: int | None = None, max_test: int | None = None
) -> Split:
    """The data named by ``--data`` (call inside ``blame("--data")``)."""
    if spec == "synthetic":
        return make_synthetic(seed=seed)
    if spec == "digits":
        require("sklearn", DIST, "data", "--data digits")
        return load_digits(seed=seed)
    return load_folder(spec, max_train=max_train, max_test=max_test, seed=seed)


def _bits_label(method: str, bits: int) -> str:
    return "fp" if method == "fp" else ("ternary" if bits == 0 else str(bits))


# ---- demo -------------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> Report:
    _setup(args)
    epochs = args.epochs or (30 if args.quick else 60)
    n_seeds = args.seeds or (2 if args.quick else 3)
    seeds = list(range(args.seed, args.seed + n_seeds))
    runs = [(b, m) for b in (1, 0) for m in DEMO_METHODS if not (m == "fp" and b == 0)]
    configs = {(b, m, s): _config(args, m, b, s, epochs) for b, m in runs for s in seeds}
    if args.data == "digits":
        require("sklearn", DIST, "data", "--data digits")
    say(args, f"data: {DATA_TEXT[args.data]}")
    with blame("--data"):
        datasets = {s: _load_data(args.data, s) for s in seeds}
    for (_, _, s), cfg in configs.items():
        _checked(cfg.check_data, datasets[s])
    rows: list[dict[str, Any]] = []
    diverged = []
    with progress(len(configs), "demo", args.quiet) as bar:
        for b, m in runs:
            accs: list[float] = []
            for s in seeds:
                try:
                    accs.append(train(configs[b, m, s], datasets[s], quiet=True)["test_acc"])
                except Diverged as e:
                    accs.append(math.nan)
                    diverged.append(f"{m} {_bits_label(m, b)} seed {s}: {e}")
                bar.update()
            mean, std = mean_std(accs)
            rows.append(
                {
                    "bits": _bits_label(m, b),
                    "method": m,
                    "test_acc": accs,
                    "mean": mean,
                    "std": std,
                }
            )
    png = _plot_demo(args.out, rows)
    spread = f"mean ± sample std over {n_seeds} seeds" if n_seeds > 1 else "1 seed"
    text = table(
        [
            [r["bits"], r["method"], fmt_mean_std(r["test_acc"]), _per_seed(r["test_acc"])]
            for r in rows
        ],
        ["bits", "method", f"test acc % ({spread})", "per seed"],
    )
    text += f"\ndata: {args.data}; seeds {seeds}; {epochs} epochs; hidden {args.hidden}"
    results = {
        "data": args.data,
        "data_description": DATA_TEXT[args.data],
        "seeds": seeds,
        "n_seeds": n_seeds,
        "epochs": epochs,
        "std": "sample standard deviation (ddof=1) over the seeds; null for one seed",
        "rows": rows,
        "diverged": diverged,
    }
    if diverged:
        text += "\ndiverged (accuracy nan): " + "; ".join(diverged)
    return Report(results, table=text, files=[png] if png else [], status=3 if diverged else 0)


def _per_seed(accs: list[float]) -> str:
    return " ".join("nan" if math.isnan(a) else f"{a:.1f}" for a in accs)


def _plot_demo(out: Path, rows: list[dict[str, Any]]) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 3))
    labels = [f"{r['method']}\n{r['bits']}" for r in rows]
    means = [r["mean"] for r in rows]
    errs = [r["std"] or 0.0 for r in rows]
    ax.bar(range(len(rows)), means, yerr=errs, capsize=3)
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("test accuracy (%)")
    finite = [m for m in means if math.isfinite(m)]
    ax.set_ylim(max(0, min(finite, default=0) - 10), 100)
    fig.tight_layout()
    path = Path(out) / "demo.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


# ---- train ------------------------------------------------------------------------------------
def cmd_train(args: argparse.Namespace) -> Report:
    _setup(args)
    cfg = _config(args, args.prox, args.bits, args.seed, args.epochs or 3)
    with blame("--data"):
        data = _load_data(args.data, args.seed, args.max_train, args.max_test)
    _checked(cfg.check_data, data)
    say(args, f"data: {DATA_TEXT.get(str(args.data), data.name)}")
    summary = {
        "data": data.name,
        "n_train": len(data.y_train),
        "n_test": len(data.y_test),
        "n_features": data.n_features,
        "n_classes": data.n_classes,
        "method": cfg.method,
        "bits": cfg.bits,
        "train_config": asdict(cfg),
    }
    try:
        r = train(cfg, data, quiet=args.quiet)
    except Diverged as e:
        print(
            f"{DIST}: {e}; checkpoint.pt was not written (an existing one is kept); "
            "lower --lr or check the data",
            file=sys.stderr,
        )
        results = {**summary, "diverged": str(e), "history": e.history, "checkpoint": None}
        return Report(results, status=3)
    ckpt = save_checkpoint(Path(args.out) / "checkpoint.pt", cfg, data, r["model"], r["optimizer"])
    keep = ("test_acc", "train_acc", "quantized_fraction_end", "layers")
    results = {
        **summary,
        **{k: r[k] for k in keep if k in r},
        "train_time_s": r["wall_time_s"],
        "diverged": None,
        "checkpoint": ckpt.name,
        "history": r["history"],
    }
    text = table(
        [
            [
                cfg.method,
                _bits_label(cfg.method, cfg.bits),
                f"{r['test_acc']:.2f}",
                f"{r['train_acc']:.2f}",
                f"{r['wall_time_s']:.1f}",
            ]
        ],
        ["method", "bits", "test acc %", "train acc %", "time s"],
    )
    return Report(results, table=text, files=[ckpt])


# ---- export -----------------------------------------------------------------------------------
def cmd_export(args: argparse.Namespace) -> Report:
    from .export import load_quantized, save_quantized
    from .optim import QuantOptimizer

    _setup(args)
    with blame("--checkpoint", RuntimeError):
        cfg, stub, model, opt = load_checkpoint(args.checkpoint)
    if not isinstance(opt, QuantOptimizer):
        raise UsageError(
            "--checkpoint",
            f"{Path(args.checkpoint).name} was trained in full precision (--prox fp); there is "
            "nothing to quantize: train with --prox parq, ste or binaryrelax",
        )
    path = Path(args.out) / "model.parq.pt"
    report = save_quantized(model, opt, path)
    rebuilt, _, _ = build(cfg, stub, 1)
    load_quantized(path, rebuilt)
    report["file"] = path.name
    report["roundtrip_max_abs_diff"] = max(
        (a - b).abs().max().item()
        for a, b in zip(model.state_dict().values(), rebuilt.state_dict().values())
    )
    report["compression_vs_fp32"] = report["fp32_bytes"] / report["file_bytes"]
    results = {
        "checkpoint": args.checkpoint,
        "trained": {k: getattr(cfg, k) for k in ("method", "bits", "quantizer", "model")},
        **report,
    }
    text = table(
        [
            [
                path.name,
                report["file_bytes"],
                f"{report['bits_per_weight']:.3f}",
                report["fp32_bytes"],
                f"{report['roundtrip_max_abs_diff']:.2e}",
            ]
        ],
        ["file", "bytes", "bits/weight", "fp32 bytes", "max |diff|"],
    )
    return Report(results, table=text, files=[path])
