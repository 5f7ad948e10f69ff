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
TRAIN_MODELS = (*MODELS, "charlm")
# model-dependent defaults of the train flags left unset (None)
DEFAULTS = {
    "image": {"hidden": 128, "batch_size": 64, "optimizer": "sgd", "weight_decay": 1e-4},
    "charlm": {
        "hidden": 64,
        "batch_size": 32,
        "optimizer": "adamw",
        "weight_decay": 0.01,
        "steps": 1000,
        "context": 64,
        "layers": 2,
        "heads": 4,
    },
}
CHARLM_LR = {"adamw": 3e-3, "sgd": 0.1}
CHARLM_ONLY = ("steps", "context", "layers", "heads")
# TrainConfig / LMConfig fields whose flag has another name
FLAG_OF = {
    "method": "--prox",
    "d_model": "--hidden",
    "n_layers": "--layers",
    "n_heads": "--heads",
}


def _training_flags(
    p: argparse.ArgumentParser, *, epochs: str, hidden: int, train: bool = False
) -> None:
    if train:
        p.add_argument(
            "--model",
            choices=TRAIN_MODELS,
            default="mlp",
            help="mlp, cnn for image data, or charlm (a character-level transformer language "
            "model; --data is then a UTF-8 text file) (default: mlp)",
        )
        p.add_argument(
            "--hidden",
            type=positive_int(),
            default=None,
            help="hidden width of the MLP (the CNN uses max(4, hidden/4) channels), or d_model of "
            "charlm (default: 128; 64 for charlm)",
        )
    else:
        p.add_argument(
            "--model",
            choices=MODELS,
            default="mlp",
            help="mlp, or cnn for image data (default: mlp)",
        )
        p.add_argument(
            "--hidden",
            type=positive_int(),
            default=hidden,
            help=f"hidden width of the MLP (the CNN uses max(4, hidden/4) channels; default: "
            f"{hidden})",
        )
    p.add_argument(
        "--epochs",
        type=positive_int(),
        default=None,
        help=f"training epochs, mlp and cnn (default: {epochs})",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int(),
        default=None if train else 64,
        help="mini-batch (default: 64" + ("; 32 windows for charlm)" if train else ")"),
    )
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default=None if train else "sgd",
        help="base optimizer: sgd (momentum 0.9) or adamw (default: sgd"
        + ("; adamw for charlm)" if train else ")"),
    )
    p.add_argument(
        "--lr",
        type=positive_float(),
        default=None,
        help="learning rate, cosine-annealed over all steps (default: 0.1 for sgd, 1e-3 for adamw"
        + ("; 3e-3 for charlm with adamw)" if train else ")"),
    )
    p.add_argument(
        "--weight-decay",
        type=nonneg_float(),
        default=None if train else 1e-4,
        help="weight decay of the quantized weights (biases: 0; default: 1e-4"
        + ("; 0.01 for charlm)" if train else ")"),
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
        description="Train one model (full precision or QAT): an MLP/CNN on a data folder "
        "(IDX/NPZ/CSV), digits or the synthetic preset, or a character-level transformer "
        "(--model charlm) on a text file; writes results.json, checkpoint.pt and "
        "loss_curve.png (when matplotlib is installed) in --out.",
        writes=("results.json", "checkpoint.pt", "loss_curve.png"),
    )
    tr.add_argument(
        "--data",
        type=existing_path("any", names=DATA_NAMES),
        default="synthetic",
        help="mlp/cnn: a data folder (MNIST IDX files, .npz or *train*.csv + *test*.csv), or "
        "synthetic (embedded) or digits (scikit-learn); charlm: a UTF-8 text file such as tiny "
        "Shakespeare's input.txt (split by position: 90%% train, 5%% validation, 5%% test) "
        "(default: synthetic)",
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
    _training_flags(tr, epochs="3", hidden=128, train=True)
    tr.add_argument(
        "--steps",
        type=positive_int(),
        default=None,
        help="charlm: optimizer steps (default: 1000)",
    )
    tr.add_argument(
        "--context",
        type=positive_int(),
        default=None,
        help="charlm: characters per training window (default: 64)",
    )
    tr.add_argument(
        "--layers",
        type=positive_int(),
        default=None,
        help="charlm: transformer blocks (default: 2)",
    )
    tr.add_argument(
        "--heads",
        type=positive_int(),
        default=None,
        help="charlm: attention heads, a divisor of --hidden (default: 4)",
    )

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
def _resolve_train_defaults(args: argparse.Namespace) -> None:
    """Fill the train flags left unset with the model's defaults; refuse flags of another model."""
    charlm = args.model == "charlm"
    for name, value in DEFAULTS["charlm" if charlm else "image"].items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    if charlm:
        for name in ("epochs", "max_train", "max_test"):
            if getattr(args, name) is not None:
                raise UsageError(
                    "--" + name.replace("_", "-"),
                    "is for --model mlp or cnn; charlm trains for --steps optimizer steps on "
                    "the whole text",
                )
        if args.data in DATA_NAMES or Path(args.data).is_dir():
            raise UsageError(
                "--data",
                f"--model charlm reads one UTF-8 text file, got {args.data}: pass a text file "
                "such as ../shared/data/tinyshakespeare/input.txt",
            )
    else:
        for name in CHARLM_ONLY:
            if getattr(args, name) is not None:
                raise UsageError(f"--{name}", f"is for --model charlm, not {args.model}")
        if args.data not in DATA_NAMES and not Path(args.data).is_dir():
            raise UsageError(
                "--data",
                f"--model {args.model} reads a folder (IDX, NPZ or CSV files), synthetic or "
                f"digits, got the file {Path(args.data).name} (a text file is for --model charlm)",
            )


def cmd_train(args: argparse.Namespace) -> Report:
    _setup(args)
    _resolve_train_defaults(args)
    if args.model == "charlm":
        return _train_charlm(args)
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
    png = _plot_curve(
        Path(args.out),
        [(h["epoch"], h["loss"]) for h in r["history"]],
        [],
        xlabel="epoch",
        title=f"{data.name}: {cfg.model}, {cfg.method}, {_bits_label(cfg.method, cfg.bits)} bits",
    )
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
    return Report(results, table=text, files=[ckpt, *([png] if png else [])])


def _plot_curve(
    out: Path,
    train: list[tuple[float, float]],
    val: list[tuple[float, float]],
    *,
    xlabel: str,
    title: str,
    baseline: float | None = None,
) -> Path | None:
    """``loss_curve.png``: training (and validation) loss; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(*zip(*train), label="train loss", marker="." if len(train) < 30 else None)
    if val:
        ax.plot(*zip(*val), label="validation loss (subset)")
    if baseline is not None:
        ax.axhline(baseline, color="grey", ls="--", lw=1, label="unigram (trivial)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "loss_curve.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


# ---- train --model charlm ---------------------------------------------------------------------
def _train_charlm(args: argparse.Namespace) -> Report:
    from .lm import LMConfig, LMConfigError, save_lm_checkpoint, train_lm
    from .text import load_text, unigram_loss

    cfg = LMConfig(
        method=args.prox,
        bits=args.bits,
        quantizer=args.quantizer,
        per_channel=args.per_channel,
        block_size=args.block_size,
        optimizer=args.optimizer,
        d_model=args.hidden,
        n_layers=args.layers,
        n_heads=args.heads,
        context=args.context,
        batch_size=args.batch_size,
        steps=args.steps,
        lr=args.lr if args.lr is not None else CHARLM_LR[args.optimizer],
        weight_decay=args.weight_decay,
        warmup_steps=args.warmup_steps,
        quant_period=args.quant_period,
        steepness=args.steepness,
        anneal_end_frac=args.anneal_end_frac,
        eval_every=max(1, args.steps // 20),
        seed=args.seed,
        device=args.device,
    )
    try:
        cfg.validate()
        with blame("--data"):
            corpus = load_text(args.data)
        cfg.check_corpus(corpus)
    except LMConfigError as e:
        raise UsageError(FLAG_OF.get(e.field, "--" + e.field.replace("_", "-")), str(e)) from e
    say(
        args,
        f"data: {corpus.name}, {corpus.vocab_size} characters in the vocabulary; "
        f"{len(corpus.train):,} train / {len(corpus.val):,} validation / {len(corpus.test):,} "
        "test characters",
    )
    unigram = {"val_loss": unigram_loss(corpus, "val"), "test_loss": unigram_loss(corpus, "test")}
    summary = {
        "data": corpus.name,
        "model": "charlm",
        "n_chars": {k: len(corpus.split(k)) for k in ("train", "val", "test")},
        "vocab_size": corpus.vocab_size,
        "method": cfg.method,
        "bits": cfg.bits,
        "unigram": unigram,
        "train_config": asdict(cfg),
    }
    try:
        r = train_lm(cfg, corpus, quiet=args.quiet)
    except Diverged as e:
        print(
            f"{DIST}: {e}; checkpoint.pt was not written (an existing one is kept); lower --lr",
            file=sys.stderr,
        )
        return Report({**summary, "diverged": str(e), "history": e.history}, status=3)
    out = Path(args.out)
    ckpt = save_lm_checkpoint(out / "checkpoint.pt", cfg, corpus, r["model"], r["optimizer"])
    label = _bits_label(cfg.method, cfg.bits)
    png = _plot_curve(
        out,
        [(h["step"], h["train_loss"]) for h in r["history"]],
        [(h["step"], h["val_loss_subset"]) for h in r["history"]],
        xlabel="optimizer step",
        title=f"{corpus.name}: charlm, {cfg.method}, {label} bits",
        baseline=unigram["val_loss"],
    )
    keep = ("val_loss", "test_loss", "quantized_fraction_end", "storage")
    results = {
        **summary,
        **{k: r[k] for k in keep if k in r},
        "step_time_median_s": r["step_time_median_s"],
        "opt_step_time_median_s": r["opt_step_time_median_s"],
        "train_time_s": r["wall_time_s"],
        "diverged": None,
        "checkpoint": ckpt.name,
        "history": r["history"],
    }
    bpw = r["storage"]["bits_per_weight"] if "storage" in r else 32.0
    text = table(
        [
            [
                cfg.method,
                label,
                f"{r['val_loss']:.4f}",
                f"{r['test_loss']:.4f}",
                f"{unigram['val_loss']:.4f}",
                f"{bpw:.2f}",
                f"{r['wall_time_s']:.1f}",
            ]
        ],
        ["method", "bits", "val loss", "test loss", "unigram val", "bits/weight", "time s"],
    )
    return Report(results, table=text, files=[ckpt, *([png] if png else [])])


# ---- export -----------------------------------------------------------------------------------
def _load_any_checkpoint(path: Path) -> tuple[Any, torch.nn.Module, torch.optim.Optimizer, Any]:
    """A checkpoint of ``train`` (MLP/CNN or charlm): config, model, optimizer and a function
    that builds a fresh model of the same shape."""
    from .lm import LM_CHECKPOINT_FORMAT, build_lm, load_lm_checkpoint

    blob = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(blob, dict) and blob.get("format") == LM_CHECKPOINT_FORMAT:
        lm_cfg, vocab, lm_model, lm_opt = load_lm_checkpoint(path)
        return lm_cfg, lm_model, lm_opt, lambda: build_lm(lm_cfg, len(vocab))[0]
    cfg, stub, model, opt = load_checkpoint(path)
    return cfg, model, opt, lambda: build(cfg, stub, 1)[0]


def cmd_export(args: argparse.Namespace) -> Report:
    from .export import load_quantized, save_quantized
    from .optim import QuantOptimizer

    _setup(args)
    with blame("--checkpoint", RuntimeError):
        cfg, model, opt, rebuild = _load_any_checkpoint(Path(args.checkpoint))
    if not isinstance(opt, QuantOptimizer):
        raise UsageError(
            "--checkpoint",
            f"{Path(args.checkpoint).name} was trained in full precision (--prox fp); there is "
            "nothing to quantize: train with --prox parq, ste or binaryrelax",
        )
    path = Path(args.out) / "model.parq.pt"
    report = save_quantized(model, opt, path)
    rebuilt = rebuild()
    load_quantized(path, rebuilt)
    report["file"] = path.name
    report["roundtrip_max_abs_diff"] = max(
        (a - b).abs().max().item()
        for a, b in zip(model.state_dict().values(), rebuilt.state_dict().values())
    )
    report["compression_vs_fp32"] = report["fp32_bytes"] / report["file_bytes"]
    results = {
        "checkpoint": args.checkpoint,
        "trained": {
            "method": cfg.method,
            "bits": cfg.bits,
            "quantizer": cfg.quantizer,
            "model": getattr(cfg, "model", "charlm"),
        },
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
