"""``sassha-optim`` command line: ``demo``, ``train``, ``evaluate`` (on the repository's CLI contract).

Parsing, ``--config`` files, output checks, results files and error lines come from
:mod:`sassha_optim._contract`; this module declares the subcommands and runs them.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import warnings
from pathlib import Path
from typing import Any

import numpy as np
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
from .data import Split, load_dataset
from .training import MLP, OPTIMIZERS, evaluate, hessian_trace, top_hessian_eigenvalue, train

DIST = "sassha-optim"
DATA_NAMES = ("digits", "synthetic")
SASSHA_ONLY = ("lazy_hessian", "hessian_warmup", "hessian_power", "bias_correction", "hvp_point")
PLOT = "test_accuracy.png"


# ------------------------------------------------------------------------------------------ helpers


def _have_sklearn() -> bool:
    return importlib.util.find_spec("sklearn") is not None


def _resolve_data(name: str | Path, flag: str = "--data") -> tuple[str, str]:
    """The dataset to load and a line saying which data this is (``auto`` picks digits or synthetic)."""
    if isinstance(name, Path):
        return str(name), f"data: folder {name.name}"
    if name == "auto":
        if _have_sklearn():
            return "digits", "data: digits (scikit-learn's bundled 8x8 digits)"
        return "synthetic", (
            "data: synthetic (scikit-learn not installed; pip install 'sassha-optim[cli]' for digits)"
        )
    if name == "digits":
        require("sklearn", DIST, "cli", f"{flag} digits")
        return "digits", "data: digits (scikit-learn's bundled 8x8 digits)"
    return "synthetic", "data: synthetic (embedded, no download)"


def _load(name: str, seed: int, max_train: int | None = None, max_test: int | None = None) -> Split:
    with blame("--data"):
        return load_dataset(name, seed=seed, max_train=max_train, max_test=max_test)


def _to(split: Split, device: torch.device) -> Split:
    return Split(
        split.x_train.to(device),
        split.y_train.to(device),
        split.x_test.to(device),
        split.y_test.to(device),
        split.name,
    )


def _setup(args: argparse.Namespace) -> torch.device:
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
    torch.set_num_threads(args.threads)
    return torch.device(args.device)


def _plot(out: Path, curves: dict[str, list[list[float]]], title: str) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    for name, runs in curves.items():
        mean = np.mean(np.asarray(runs), axis=0)
        ax.plot(np.arange(1, len(mean) + 1), mean, label=name)
    ax.set(xlabel="epoch", ylabel="test accuracy (%)", title=title)
    ax.set_ylim(bottom=max(0.0, ax.get_ylim()[0]))
    ax.legend()
    fig.tight_layout()
    path = out / PLOT
    fig.savefig(path)
    plt.close(fig)
    return path


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=positive_int(),
        default=1,
        help="torch CPU threads (default: 1; the small MLPs run fastest single-threaded)",
    )


def _add_model(p: argparse.ArgumentParser, epochs: int) -> None:
    p.add_argument(
        "--epochs", type=positive_int(), default=epochs, help=f"training epochs (default: {epochs})"
    )
    p.add_argument(
        "--batch-size", type=positive_int(), default=64, help="minibatch size (default: 64)"
    )
    p.add_argument(
        "--hidden",
        type=int_list(1),
        default=[128, 128],
        help="hidden layer widths of the MLP, comma-separated integers >= 1 (default: 128,128)",
    )


# ------------------------------------------------------------------------------------------ demo


def cmd_demo(args: argparse.Namespace) -> Report:
    epochs = 30 if args.quick else args.epochs
    n_seeds = 1 if args.quick else args.seeds
    seeds = [args.seed + i for i in range(n_seeds)]
    name, note = _resolve_data(args.data)
    device = _setup(args)
    split = _to(_load(name, args.seed), device)
    say(args, f"{note}: {len(split.x_train)} train / {len(split.x_test)} test samples")
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in args.optimizers}
    curves: dict[str, list[list[float]]] = {n: [] for n in args.optimizers}
    bar = progress(len(seeds) * len(args.optimizers) * epochs, "demo", args.quiet)
    for opt_name in args.optimizers:
        for seed in seeds:
            torch.manual_seed(seed)
            model = MLP(split.n_features, split.n_classes, tuple(args.hidden)).to(device)
            res = train(
                model,
                opt_name,
                split,
                epochs=epochs,
                batch_size=args.batch_size,
                seed=seed,
                progress=bar.update,
                eval_every=1,
            )
            run = {"seed": seed, **{k: v for k, v in vars(res).items() if k != "history"}}
            if args.sharpness:
                run["lambda_max"] = top_hessian_eigenvalue(
                    model, split.x_train[:2000], split.y_train[:2000], seed=seed
                )
            runs[opt_name].append(run)
            curves[opt_name].append([h["test_accuracy"] for h in res.history])
    bar.close()
    summary: dict[str, dict[str, Any]] = {}
    for opt_name, rs in runs.items():
        acc_mean, acc_std = mean_std([r["test_accuracy"] for r in rs])
        summary[opt_name] = {
            "test_accuracy_mean": acc_mean,
            "test_accuracy_std": acc_std,  # sample std (ddof=1); None for one seed
            "test_loss_mean": statistics.fmean(r["test_loss"] for r in rs),
            "train_loss_mean": statistics.fmean(r["train_loss"] for r in rs),
            "ms_per_step_median": 1000 * statistics.median(r["seconds_per_step"] for r in rs),
            "hvp_calls": rs[0]["hvp_calls"],
        }
        if args.sharpness:
            summary[opt_name]["lambda_max_mean"] = statistics.fmean(r["lambda_max"] for r in rs)
    plot = _plot(args.out, curves, f"{split.name} MLP, {len(seeds)} seed(s)")
    acc_head = (
        f"test acc % (mean ± sample std, {n_seeds} seeds)" if n_seeds > 1 else "test acc % (1 seed)"
    )
    header = ["optimizer", acc_head, "test loss", "train loss", "ms/step", "HVPs"]
    header += ["λ_max"] if args.sharpness else []
    rows = [
        [
            n,
            fmt_mean_std([r["test_accuracy"] for r in runs[n]]),
            f"{s['test_loss_mean']:.4f}",
            f"{s['train_loss_mean']:.4f}",
            f"{s['ms_per_step_median']:.2f}",
            s["hvp_calls"],
        ]
        + ([f"{s['lambda_max_mean']:.3g}"] if args.sharpness else [])
        for n, s in summary.items()
    ]
    return Report(
        {
            "data": split.name,
            "data_note": note,
            "n_train": len(split.x_train),
            "n_test": len(split.x_test),
            "epochs": epochs,
            "n_seeds": n_seeds,
            "seeds": seeds,
            "summary": summary,
            "runs": runs,
            "curves": curves,
            "plot": plot,
        },
        table=table(rows, header),
        files=[plot] if plot else [],
    )


# ------------------------------------------------------------------------------------------ train

OVERRIDES = (
    "lr",
    "rho",
    "lazy_hessian",
    "hessian_warmup",
    "hessian_power",
    "weight_decay",
    "bias_correction",
    "hvp_point",
)


def cmd_train(args: argparse.Namespace) -> Report:
    overrides = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k) is not None}
    if not args.optimizer.startswith("sassha"):
        bad = [k for k in overrides if k in SASSHA_ONLY or (k == "rho" and args.optimizer != "sam")]
        if bad:
            flags = ", ".join("--" + k.replace("_", "-") for k in bad)
            raise UsageError(
                "--optimizer",
                f"{args.optimizer} does not take {flags} (Sassha-only flags need a sassha preset; "
                "--rho needs sam or a sassha preset)",
            )
    name, note = _resolve_data(args.data)
    device = _setup(args)
    split = _to(_load(name, args.seed, args.max_train, args.max_test), device)
    say(args, f"{note}: {len(split.x_train)} train / {len(split.x_test)} test samples")
    torch.manual_seed(args.seed)
    model = MLP(split.n_features, split.n_classes, tuple(args.hidden)).to(device)
    bar = progress(args.epochs, f"train {args.optimizer}", args.quiet)
    res = train(
        model,
        args.optimizer,
        split,
        epochs=args.epochs,
        batch_size=args.batch_size,
        seed=args.seed,
        overrides=overrides,
        progress=bar.update,
        eval_every=1,
    )
    bar.close()
    ckpt = args.out / "checkpoint.pt"
    torch.save(
        {
            "format": "sassha-optim checkpoint 1",
            "model": model.state_dict(),
            "hidden": list(args.hidden),
            "n_features": split.n_features,
            "n_classes": split.n_classes,
            "data": name,
            "seed": args.seed,
            "max_test": args.max_test,
            "max_train": args.max_train,  # same subset -> same standardization in evaluate
        },
        ckpt,
    )
    plot = _plot(
        args.out, {args.optimizer: [[h["test_accuracy"] for h in res.history]]}, split.name
    )
    rows = [
        [
            args.optimizer,
            f"{res.test_accuracy:.2f}",
            f"{res.test_loss:.4f}",
            f"{res.train_loss:.4f}",
            f"{1000 * res.seconds_per_step:.2f}",
            res.hvp_calls,
        ]
    ]
    header = ["optimizer", "test acc % (1 seed)", "test loss", "train loss", "ms/step", "HVPs"]
    return Report(
        {
            "data": split.name,
            "data_note": note,
            "n_train": len(split.x_train),
            "n_test": len(split.x_test),
            "optimizer": args.optimizer,
            "overrides": overrides,
            "metrics": vars(res),
            "checkpoint": ckpt,
            "plot": plot,
        },
        table=table(rows, header),
        files=[ckpt, *([plot] if plot else [])],
    )


# ------------------------------------------------------------------------------------------ evaluate


def _read_checkpoint(path: Path) -> tuple[dict[str, Any], MLP]:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise ValueError(f"{path}: not a checkpoint written by 'sassha-optim train'")
    for key in ("n_features", "n_classes"):
        if not isinstance(ckpt.get(key), int) or ckpt[key] < 1:
            raise ValueError(f"{path}: field {key!r} must be a positive integer")
    hidden = ckpt.get("hidden")
    if not isinstance(hidden, list) or not all(isinstance(h, int) and h >= 1 for h in hidden):
        raise ValueError(f"{path}: field 'hidden' must be a list of widths >= 1")
    for key in ("max_train", "max_test"):
        value = ckpt.get(key)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{path}: field {key!r} must be empty or a positive integer")
    if not isinstance(ckpt.get("seed", 0), int):
        raise ValueError(f"{path}: field 'seed' must be an integer")
    model = MLP(ckpt["n_features"], ckpt["n_classes"], tuple(hidden))
    model.load_state_dict(ckpt["model"])
    return ckpt, model


def cmd_evaluate(args: argparse.Namespace) -> Report:
    with blame("--checkpoint", RuntimeError):
        ckpt, model = _read_checkpoint(args.checkpoint)
    if args.data is not None:
        name, note = _resolve_data(args.data)
    else:
        stored = ckpt.get("data")
        if stored in DATA_NAMES:
            name, note = _resolve_data(str(stored))
        elif isinstance(stored, str) and Path(stored).is_dir():
            name, note = _resolve_data(Path(stored))
        else:
            raise UsageError(
                "--data",
                f"the checkpoint's data {stored!r} is not available here; pass --data "
                "(a data folder, digits or synthetic)",
            )
    device = _setup(args)
    split = _load(name, int(ckpt.get("seed", 0)), ckpt.get("max_train"), ckpt.get("max_test"))
    if split.n_features != ckpt["n_features"]:
        raise UsageError(
            "--data",
            f"{split.n_features} features, but the checkpoint expects {ckpt['n_features']}",
        )
    if split.n_classes > ckpt["n_classes"]:
        raise UsageError(
            "--data",
            f"labels up to {split.n_classes - 1}, but the checkpoint has {ckpt['n_classes']} "
            "classes",
        )
    say(args, f"{note}: {len(split.x_test)} test samples")
    model, split = model.to(device), _to(split, device)
    metrics: dict[str, Any] = {"test": evaluate(model, split.x_test, split.y_test)}
    if args.sharpness:
        x, y = split.x_train[:2000], split.y_train[:2000]
        metrics["lambda_max"] = top_hessian_eigenvalue(model, x, y, seed=args.seed)
        metrics["hessian_trace"] = hessian_trace(model, x, y, seed=args.seed)
    row = [f"{metrics['test']['accuracy']:.2f}", f"{metrics['test']['loss']:.4f}"]
    header = ["test acc %", "test loss"]
    if args.sharpness:
        row += [f"{metrics['lambda_max']:.4g}", f"{metrics['hessian_trace']:.4g}"]
        header += ["λ_max", "tr(H)"]
    return Report(
        {
            "data": split.name,
            "data_note": note,
            "n_test": len(split.x_test),
            "checkpoint": args.checkpoint,
            "metrics": metrics,
        },
        table=table([row], header),
    )


# ------------------------------------------------------------------------------------------ CLI


def build_cli() -> CLI:
    from . import __version__

    cli = CLI(
        DIST,
        description="Sassha optimizer (ICML 2025): demo, training and evaluation of MLPs.",
        version=__version__,
    )
    data_help = (
        "a data folder (IDX files such as MNIST's, NPZ or CSV), or digits (scikit-learn) or "
        "synthetic (embedded)"
    )

    demo = cli.command(
        "demo",
        cmd_demo,
        help="digits MLP: Sassha vs AdamW vs SAM (offline, minutes)",
        description="Train an MLP on scikit-learn's bundled digits (or the embedded synthetic "
        "data without scikit-learn) with Sassha and baselines; says which data it ran on.",
        writes=("results.json", PLOT),
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help="1 seed, 30 epochs (< 2 minutes on 1 core; default: off)",
    )
    demo.add_argument(
        "--data",
        type=existing_path("dir", names=("auto", *DATA_NAMES)),
        default="auto",
        help=f"auto (digits if scikit-learn is installed, else synthetic), or {data_help} "
        "(default: auto)",
    )
    demo.add_argument(
        "--optimizers",
        type=choice_list(list(OPTIMIZERS)),
        default=["sassha", "adamw", "sam"],
        help=f"comma-separated presets from: {','.join(OPTIMIZERS)} (default: sassha,adamw,sam)",
    )
    demo.add_argument(
        "--seeds",
        type=positive_int(),
        default=3,
        help="number of seeds, --seed, --seed+1, ... (default: 3; --quick uses 1)",
    )
    demo.add_argument(
        "--sharpness",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also compute λ_max of the training-loss Hessian (default: on)",
    )
    _add_model(demo, 60)
    _add_threads(demo)

    tr = cli.command(
        "train",
        cmd_train,
        help="train an MLP on an IDX/NPZ/CSV image folder (e.g. MNIST)",
        description="Train an MLP classifier with Sassha (or a baseline preset) on a data "
        "folder; writes results.json and checkpoint.pt for 'evaluate'.",
        writes=("results.json", "checkpoint.pt", PLOT),
    )
    tr.add_argument(
        "--data",
        type=existing_path("dir", names=DATA_NAMES),
        required=True,
        help=f"{data_help} (required)",
    )
    tr.add_argument(
        "--optimizer",
        choices=sorted(OPTIMIZERS),
        default="sassha",
        help="optimizer preset (default: sassha)",
    )
    tr.add_argument(
        "--max-train",
        type=positive_int(),
        default=None,
        help="stratified subsample of the training set (default: all)",
    )
    tr.add_argument(
        "--max-test",
        type=positive_int(),
        default=None,
        help="stratified subsample of the test set (default: all)",
    )
    tr.add_argument(
        "--lr", type=positive_float(), default=None, help="learning rate > 0 (default: preset)"
    )
    tr.add_argument(
        "--rho",
        type=nonneg_float(),
        default=None,
        help="SAM radius >= 0 for sassha/sam presets (default: preset)",
    )
    tr.add_argument(
        "--lazy-hessian",
        type=positive_int(),
        default=None,
        help="Hessian refresh interval k >= 1 for sassha presets (default: preset, 10)",
    )
    tr.add_argument(
        "--hessian-warmup",
        type=nonneg_int(),
        default=None,
        help="refresh the Hessian on every one of the first N steps, then every k; 0 = the "
        "official schedule (default: preset; k for sassha presets, 0 for sassha-official)",
    )
    tr.add_argument(
        "--hessian-power",
        type=nonneg_float(),
        default=None,
        help="exponent α >= 0 for sassha presets (default: 0.5)",
    )
    tr.add_argument(
        "--weight-decay",
        type=nonneg_float(),
        default=None,
        help="weight decay >= 0 as passed to the optimizer (default: preset)",
    )
    tr.add_argument(
        "--bias-correction",
        choices=["refresh", "step", "none"],
        default=None,
        help="Sassha bias correction of D (default: refresh)",
    )
    tr.add_argument(
        "--hvp-point",
        choices=["perturbed", "reference"],
        default=None,
        help="where Sassha evaluates the HVP (default: perturbed)",
    )
    _add_model(tr, 5)
    _add_threads(tr)

    ev = cli.command(
        "evaluate",
        cmd_evaluate,
        help="evaluate a checkpoint written by 'train'",
        description="Test accuracy/loss of a saved model, optionally with sharpness; writes "
        "evaluate.json (the training run's results.json is kept).",
        writes=("evaluate.json",),
    )
    ev.add_argument(
        "--checkpoint",
        type=existing_path("file"),
        required=True,
        help="checkpoint.pt written by 'sassha-optim train' (required)",
    )
    ev.add_argument(
        "--data",
        type=existing_path("dir", names=DATA_NAMES),
        default=None,
        help=f"{data_help} (default: the data the checkpoint was trained on)",
    )
    ev.add_argument(
        "--sharpness",
        action="store_true",
        help="also compute λ_max and tr(H) on up to 2,000 training samples (default: off)",
    )
    _add_threads(ev)
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
