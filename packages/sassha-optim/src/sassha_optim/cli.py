"""``sassha-optim`` command line: ``demo``, ``train``, ``evaluate``."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch

from .data import Split, load_dataset
from .training import MLP, OPTIMIZERS, evaluate, hessian_trace, top_hessian_eigenvalue, train

PROG = "sassha-optim"


class UsageError(Exception):
    """Bad user input: reported as one line on stderr with exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one clear line, exit code 2, no usage dump
        raise UsageError(message)


def _positive_int(name: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be an integer >= 1, got {text!r}")
        return value

    return parse


def _float_range(name: str, low: float, high: float | None = None):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not (value >= low and (high is None or value < high)):
            bound = f">= {low}" + (f" and < {high}" if high is not None else "")
            raise argparse.ArgumentTypeError(f"{name} must be a number {bound}, got {text!r}")
        return value

    return parse


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 0, got {text!r}")
    return values


def _optimizer_list(text: str) -> list[str]:
    names = [v.strip() for v in str(text).split(",") if v.strip()]
    bad = [n for n in names if n not in OPTIMIZERS]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"unknown optimizer(s) {bad or text!r}; accepted: {','.join(OPTIMIZERS)}"
        )
    return names


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="base random seed (default: 0)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default: cpu)")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("sassha-out"),
        help="output folder for results.json and plots (default: sassha-out)",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="JSON or YAML file with the same flags (keys like 'epochs' or 'lazy_hessian')",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    p.add_argument(
        "--threads",
        type=_positive_int("--threads"),
        default=1,
        help="torch CPU threads (default: 1; small models run fastest single-threaded)",
    )


def _model_flags(p: argparse.ArgumentParser, epochs: int) -> None:
    p.add_argument(
        "--epochs",
        type=_positive_int("--epochs"),
        default=epochs,
        help=f"training epochs (default: {epochs})",
    )
    p.add_argument(
        "--batch-size",
        type=_positive_int("--batch-size"),
        default=64,
        help="minibatch size (default: 64)",
    )
    p.add_argument(
        "--hidden",
        type=_int_list,
        default=[128, 128],
        help="hidden layer widths of the MLP, comma-separated (default: 128,128)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description="Sassha optimizer (ICML 2025): demo, training and evaluation."
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    demo = sub.add_parser(
        "demo",
        help="digits MLP: Sassha vs AdamW vs SAM (offline, minutes)",
        description="Train an MLP on scikit-learn's bundled digits (or the embedded "
        "synthetic data without scikit-learn) with Sassha and baselines.",
    )
    _common(demo)
    demo.add_argument(
        "--quick", action="store_true", help="1 seed, 30 epochs (< 2 minutes on 1 core)"
    )
    demo.add_argument(
        "--data",
        default="auto",
        help="auto (digits if scikit-learn is installed, else synthetic), digits, "
        "synthetic, or a data folder (default: auto)",
    )
    demo.add_argument(
        "--optimizers",
        type=_optimizer_list,
        default=["sassha", "adamw", "sam"],
        help=f"comma-separated presets from: {','.join(OPTIMIZERS)} (default: sassha,adamw,sam)",
    )
    demo.add_argument(
        "--seeds",
        type=_positive_int("--seeds"),
        default=3,
        help="number of seeds (default: 3; --quick uses 1)",
    )
    demo.add_argument(
        "--sharpness",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also compute λ_max of the training-loss Hessian (default: on)",
    )
    _model_flags(demo, 60)

    tr = sub.add_parser(
        "train",
        help="train an MLP on an IDX/NPZ/CSV image folder (e.g. MNIST)",
        description="Train an MLP classifier with Sassha (or a baseline preset) on a "
        "data folder; saves a checkpoint usable by 'evaluate'.",
    )
    _common(tr)
    tr.add_argument(
        "--data",
        required=False,
        default=None,
        help="data folder (IDX files such as MNIST's, NPZ or CSV) or digits/synthetic",
    )
    tr.add_argument(
        "--optimizer",
        choices=sorted(OPTIMIZERS),
        default="sassha",
        help="optimizer preset (default: sassha)",
    )
    tr.add_argument(
        "--max-train",
        type=_positive_int("--max-train"),
        default=None,
        help="stratified subsample of the training set (default: all)",
    )
    tr.add_argument(
        "--max-test",
        type=_positive_int("--max-test"),
        default=None,
        help="stratified subsample of the test set (default: all)",
    )
    tr.add_argument(
        "--lr", type=_float_range("--lr", 0.0), default=None, help="learning rate (default: preset)"
    )
    tr.add_argument(
        "--rho",
        type=_float_range("--rho", 0.0),
        default=None,
        help="SAM radius for sassha/sam presets (default: preset)",
    )
    tr.add_argument(
        "--lazy-hessian",
        type=_positive_int("--lazy-hessian"),
        default=None,
        help="Hessian refresh interval k for sassha presets (default: preset)",
    )
    tr.add_argument(
        "--hessian-power",
        type=_float_range("--hessian-power", 0.0),
        default=None,
        help="exponent α for sassha presets (default: 0.5)",
    )
    tr.add_argument(
        "--weight-decay",
        type=_float_range("--weight-decay", 0.0),
        default=None,
        help="weight decay as passed to the optimizer (default: preset)",
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
    _model_flags(tr, 5)

    ev = sub.add_parser(
        "evaluate",
        help="evaluate a checkpoint written by 'train'",
        description="Test accuracy/loss of a saved model, optionally with sharpness.",
    )
    _common(ev)
    ev.add_argument(
        "--checkpoint",
        type=Path,
        required=False,
        default=None,
        help="checkpoint.pt written by 'sassha-optim train'",
    )
    ev.add_argument("--data", default=None, help="data folder (default: the one used for training)")
    ev.add_argument(
        "--sharpness",
        action="store_true",
        help="also compute λ_max and tr(H) on up to 2,000 training samples",
    )
    return parser


def _version() -> str:
    from . import __version__

    return f"{PROG} {__version__}"


def _apply_config(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if args.config is None:
        return args
    path = args.config
    if not path.is_file():
        raise UsageError(f"argument --config: file not found: {path}")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise UsageError("YAML configs need PyYAML: pip install 'sassha-optim[cli]'") from exc
        values = yaml.safe_load(text) or {}
    else:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"argument --config: {path} is not valid JSON ({exc})") from exc
    if not isinstance(values, dict):
        raise UsageError(
            f"argument --config: {path} must contain a mapping of flag names to values"
        )
    known = vars(args)
    cli_given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
    extra: list[str] = []
    for key, value in values.items():
        dest = str(key).lstrip("-").replace("-", "_")
        if dest not in known or dest in ("command", "config"):
            raise UsageError(f"argument --config: unknown key {key!r} in {path}")
        if dest in cli_given:  # flags on the command line win over the file
            continue
        if isinstance(value, bool):
            if value:
                extra.append(f"--{dest.replace('_', '-')}")
            elif isinstance(known[dest], bool) and known[dest]:
                extra.append(f"--no-{dest.replace('_', '-')}")
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        extra += [f"--{dest.replace('_', '-')}", str(value)]
    return parser.parse_args([argv[0], *extra, *argv[1:]])


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise UsageError(
            f"argument --device: invalid device {name!r} (accepted: cpu, cuda, cuda:N)"
        ) from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"argument --device: {name!r} requested but CUDA is not available (use cpu)"
        )
    return device


def _load(name: str, seed: int, max_train=None, max_test=None) -> Split:
    try:
        return load_dataset(name, seed=seed, max_train=max_train, max_test=max_test)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(f"argument --data: {exc}") from exc
    except ImportError as exc:
        raise UsageError(str(exc)) from exc


def _versions() -> dict[str, str]:
    from . import __version__

    return {
        "sassha-optim": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def _write(out: Path, payload: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def _progress(total: int, quiet: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=quiet, desc=desc, leave=False)


def _plot(out: Path, curves: dict[str, list[list[float]]], title: str) -> str | None:
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
    path = out / "test_accuracy.png"
    fig.savefig(path)
    plt.close(fig)
    return str(path)


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def cmd_demo(args: argparse.Namespace) -> dict[str, Any]:
    epochs = 30 if args.quick else args.epochs
    seeds = [args.seed] if args.quick else [args.seed + i for i in range(args.seeds)]
    split = _load(args.data, args.seed)
    device = _device(args.device)
    split = _to(split, device)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in args.optimizers}
    curves: dict[str, list[list[float]]] = {n: [] for n in args.optimizers}
    bar = _progress(len(seeds) * len(args.optimizers) * epochs, args.quiet, "demo")
    for name in args.optimizers:
        for seed in seeds:
            torch.manual_seed(seed)
            model = MLP(split.n_features, split.n_classes, tuple(args.hidden)).to(device)
            res = train(
                model,
                name,
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
                    model, split.x_train, split.y_train, seed=seed
                )
            runs[name].append(run)
            curves[name].append([h["test_accuracy"] for h in res.history])
    bar.close()
    summary = {}
    for name, rs in runs.items():
        acc = _mean_std([r["test_accuracy"] for r in rs])
        summary[name] = {
            "test_accuracy_mean": acc[0],
            "test_accuracy_std": acc[1],
            "train_loss_mean": statistics.fmean(r["train_loss"] for r in rs),
            "ms_per_step_median": 1000 * statistics.median(r["seconds_per_step"] for r in rs),
            "hvp_calls": rs[0]["hvp_calls"],
        }
        if args.sharpness:
            summary[name]["lambda_max_mean"] = statistics.fmean(r["lambda_max"] for r in rs)
    plot = _plot(args.out, curves, f"{split.name} MLP, {len(seeds)} seed(s)")
    header = ["optimizer", "test acc %", "train loss", "ms/step", "HVPs"] + (
        ["λ_max"] if args.sharpness else []
    )
    rows = [
        [
            n,
            f"{s['test_accuracy_mean']:.2f} ± {s['test_accuracy_std']:.2f}",
            f"{s['train_loss_mean']:.4f}",
            f"{s['ms_per_step_median']:.2f}",
            s["hvp_calls"],
        ]
        + ([f"{s['lambda_max_mean']:.3g}"] if args.sharpness else [])
        for n, s in summary.items()
    ]
    return {
        "data": split.name,
        "epochs": epochs,
        "seeds": seeds,
        "summary": summary,
        "runs": runs,
        "curves": curves,
        "plot": plot,
        "_table": _table(rows, header),
    }


def _to(split: Split, device: torch.device) -> Split:
    return Split(
        split.x_train.to(device),
        split.y_train.to(device),
        split.x_test.to(device),
        split.y_test.to(device),
        split.name,
    )


def cmd_train(args: argparse.Namespace) -> dict[str, Any]:
    if args.data is None:
        raise UsageError(
            "argument --data: required (a data folder such as MNIST's raw/, or digits)"
        )
    split = _to(_load(args.data, args.seed, args.max_train, args.max_test), _device(args.device))
    overrides = {
        k: getattr(args, k)
        for k in (
            "lr",
            "rho",
            "lazy_hessian",
            "hessian_power",
            "weight_decay",
            "bias_correction",
            "hvp_point",
        )
        if getattr(args, k) is not None
    }
    if not args.optimizer.startswith("sassha"):
        bad = [k for k in overrides if k not in ("lr", "weight_decay", "rho")]
        if bad or ("rho" in overrides and args.optimizer != "sam"):
            raise UsageError(
                f"argument --optimizer: {args.optimizer} does not take {bad or ['rho']}"
            )
    torch.manual_seed(args.seed)
    model = MLP(split.n_features, split.n_classes, tuple(args.hidden)).to(split.x_train.device)
    bar = _progress(args.epochs, args.quiet, f"train {args.optimizer}")
    try:
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
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    bar.close()
    args.out.mkdir(parents=True, exist_ok=True)
    ckpt = args.out / "checkpoint.pt"
    torch.save(
        {
            "model": model.state_dict(),
            "hidden": list(args.hidden),
            "n_features": split.n_features,
            "n_classes": split.n_classes,
            "data": str(args.data),
            "seed": args.seed,
            "max_test": args.max_test,
            "max_train": args.max_train,  # same subset -> same standardization in evaluate
        },
        ckpt,
    )
    curves = {args.optimizer: [[h["test_accuracy"] for h in res.history]]}
    plot = _plot(args.out, curves, f"{split.name} MLP")
    metrics = {k: v for k, v in vars(res).items()}
    rows = [
        [
            args.optimizer,
            f"{res.test_accuracy:.2f}",
            f"{res.train_loss:.4f}",
            f"{1000 * res.seconds_per_step:.2f}",
            res.hvp_calls,
        ]
    ]
    return {
        "data": split.name,
        "n_train": len(split.x_train),
        "n_test": len(split.x_test),
        "optimizer": args.optimizer,
        "overrides": overrides,
        "metrics": metrics,
        "checkpoint": str(ckpt),
        "plot": plot,
        "_table": _table(rows, ["optimizer", "test acc %", "train loss", "ms/step", "HVPs"]),
    }


def cmd_evaluate(args: argparse.Namespace) -> dict[str, Any]:
    if args.checkpoint is None or not args.checkpoint.is_file():
        raise UsageError(f"argument --checkpoint: file not found: {args.checkpoint}")
    try:
        ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
        model = MLP(ckpt["n_features"], ckpt["n_classes"], tuple(ckpt["hidden"]))
        model.load_state_dict(ckpt["model"])
    except Exception as exc:  # corrupt or foreign file
        raise UsageError(f"argument --checkpoint: not a sassha-optim checkpoint ({exc})") from exc
    split = _load(
        args.data or ckpt["data"], ckpt["seed"], ckpt.get("max_train"), ckpt.get("max_test")
    )
    if split.n_features != ckpt["n_features"]:
        raise UsageError(
            f"argument --data: {split.n_features} features, the checkpoint expects "
            f"{ckpt['n_features']}"
        )
    device = _device(args.device)
    model, split = model.to(device), _to(split, device)
    metrics: dict[str, Any] = {"test": evaluate(model, split.x_test, split.y_test)}
    if args.sharpness:
        x, y = split.x_train[:2000], split.y_train[:2000]
        metrics["lambda_max"] = top_hessian_eigenvalue(model, x, y, seed=args.seed)
        metrics["hessian_trace"] = hessian_trace(model, x, y, seed=args.seed)
    rows = [
        [f"{metrics['test']['accuracy']:.2f}", f"{metrics['test']['loss']:.4f}"]
        + (
            [f"{metrics['lambda_max']:.4g}", f"{metrics['hessian_trace']:.4g}"]
            if args.sharpness
            else []
        )
    ]
    header = ["test acc %", "test loss"] + (["λ_max", "tr(H)"] if args.sharpness else [])
    return {
        "data": split.name,
        "checkpoint": str(args.checkpoint),
        "metrics": metrics,
        "_table": _table(rows, header),
    }


COMMANDS = {"demo": cmd_demo, "train": cmd_train, "evaluate": cmd_evaluate}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = _apply_config(parser, argv)
        warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
        torch.set_num_threads(args.threads)
        start = time.perf_counter()
        result = COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    table = result.pop("_table")
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    payload = {
        "command": args.command,
        "config": config,
        "versions": _versions(),
        "seed": args.seed,
        "wall_time_s": time.perf_counter() - start,
        **result,
    }
    path = _write(args.out, payload)
    if not args.quiet:
        print(table)
        print(f"wrote {path}")
    return 0
