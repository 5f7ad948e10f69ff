"""Command line: ``parq-optim demo | train | export``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch

from .data import Split, load_digits, load_folder, make_synthetic
from .optim import QUANTIZERS
from .train import METHODS, TrainConfig, build, train

DEFAULT_DATA = os.environ.get("PARQ_OPTIM_DATA_DIR", "../shared/data/mnist/raw")


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit code 2."""


def _versions() -> dict[str, str]:
    from . import __version__

    return {
        "parq_optim": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_count": str(os.cpu_count()),
    }


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default: cpu)")
    p.add_argument("--out", default=None, help="output directory for results.json and files")
    p.add_argument("--config", default=None, help="JSON or YAML file with values for these flags")
    p.add_argument("--quiet", action="store_true", help="no progress bars, only the final table")


def _training_flags(p: argparse.ArgumentParser, epochs: int, hidden: int) -> None:
    p.add_argument("--model", default="mlp", help="mlp or cnn (cnn needs image data; default mlp)")
    p.add_argument("--hidden", type=int, default=hidden, help=f"hidden width (default {hidden})")
    p.add_argument("--epochs", type=int, default=epochs, help=f"training epochs (default {epochs})")
    p.add_argument("--batch-size", type=int, default=64, help="mini-batch size (default 64)")
    p.add_argument("--optimizer", default="sgd", help="base optimizer: sgd or adamw (default sgd)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (sgd 0.1, adamw 1e-3)")
    p.add_argument("--weight-decay", type=float, default=1e-4, help="weight decay (default 1e-4)")
    p.add_argument(
        "--quantizer", default="lsbq", help=f"one of {sorted(QUANTIZERS)} (default lsbq)"
    )
    p.add_argument("--per-channel", action="store_true", help="one level set per output channel")
    p.add_argument("--block-size", type=int, default=None, help="levels per block of this size")
    p.add_argument("--warmup-steps", type=int, default=0, help="full-precision steps first")
    p.add_argument("--quant-period", type=int, default=10, help="refresh levels every N steps")
    p.add_argument("--steepness", type=float, default=10.0, help="PARQ schedule steepness s")
    p.add_argument(
        "--anneal-end-frac",
        type=float,
        default=0.9,
        help="anneal window ends at this fraction of all steps (default 0.9)",
    )


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parq-optim",
        description="PARQ quantization-aware training (ICML 2025): demo, train, export.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="PARQ vs STE vs BinaryRelax at 1 bit and ternary")
    _common(demo)
    demo.add_argument("--quick", action="store_true", help="small run (< 2 min on one core)")
    demo.add_argument(
        "--data", default="synthetic", help="synthetic (embedded, default) or digits (scikit-learn)"
    )
    demo.add_argument("--seeds", type=int, default=None, help="number of seeds (quick 2, else 3)")
    _training_flags(demo, epochs=60, hidden=16)

    tr = sub.add_parser("train", help="train one model (MNIST IDX folder, digits or synthetic)")
    _common(tr)
    tr.add_argument(
        "--data",
        default=DEFAULT_DATA,
        help="data folder (IDX/NPZ/CSV), or 'digits' / 'synthetic' "
        "(default $PARQ_OPTIM_DATA_DIR or ../shared/data/mnist/raw)",
    )
    tr.add_argument("--bits", type=int, default=2, help="bits per weight, 0 = ternary (default 2)")
    tr.add_argument("--prox", default="parq", help=f"one of {list(METHODS)} (fp = no quantization)")
    tr.add_argument("--max-train", type=int, default=None, help="subsample the train split")
    tr.add_argument("--max-test", type=int, default=None, help="subsample the test split")
    _training_flags(tr, epochs=3, hidden=128)

    ex = sub.add_parser("export", help="write a trained checkpoint as levels + integer codes")
    _common(ex)
    ex.add_argument("--checkpoint", required=True, help="checkpoint.pt written by 'train'")
    return parser


def _load_config(path: str) -> dict[str, Any]:
    text = Path(path).read_text()
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError as e:
            raise UsageError("--config: YAML needs pyyaml: pip install 'parq-optim[cli]'") from e
        return dict(yaml.safe_load(text) or {})
    return dict(json.loads(text))


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.config:
        if not Path(args.config).is_file():
            raise UsageError(f"--config: file not found: {args.config!r}")
        cfg = {k.replace("-", "_"): v for k, v in _load_config(args.config).items()}
        unknown = set(cfg) - set(vars(args))
        if unknown:
            raise UsageError(f"--config: unknown keys {sorted(unknown)}")
        sub = parser._subparsers._group_actions[0].choices[args.command]  # type: ignore[union-attr,index]
        sub.set_defaults(**cfg)
        args = parser.parse_args(argv)  # command-line flags override the file
    return args


def _config(args: argparse.Namespace, method: str, bits: int, seed: int) -> TrainConfig:
    lr = args.lr if args.lr is not None else (0.1 if args.optimizer == "sgd" else 1e-3)
    cfg = TrainConfig(
        method=method,
        bits=bits,
        quantizer=args.quantizer,
        model=args.model,
        hidden=args.hidden,
        epochs=args.epochs,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        lr=lr,
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
    _check_choice("--model", cfg.model, ["mlp", "cnn"])
    _check_choice("--optimizer", cfg.optimizer, ["sgd", "adamw"])
    _check_choice("--quantizer", cfg.quantizer, sorted(QUANTIZERS))
    _check_choice("--prox", method, list(METHODS))
    for flag, v in (("--epochs", cfg.epochs), ("--hidden", cfg.hidden)):
        if v < 1:
            raise UsageError(f"{flag}: got {v}; expected an integer >= 1")
    if cfg.quant_period < 1:
        raise UsageError(f"--quant-period: got {cfg.quant_period}; expected an integer >= 1")
    if bits < 0:
        raise UsageError(f"--bits: got {bits}; expected an integer >= 0 (0 = ternary)")
    try:
        cfg.validate()
    except (ValueError, NotImplementedError) as e:
        raise UsageError(f"--quantizer {cfg.quantizer} with --bits {bits}: {e}") from e
    return cfg


def _check_choice(flag: str, value: str, choices: list[str]) -> None:
    if value not in choices:
        raise UsageError(f"{flag}: got {value!r}; expected one of {choices}")


def _load_data(spec: str, seed: int, max_train: int | None = None, max_test: int | None = None):
    if spec == "synthetic":
        return make_synthetic(seed=seed)
    if spec == "digits":
        try:
            return load_digits(seed=seed)
        except ImportError as e:
            raise UsageError(f"--data digits: {e}") from e
    if not Path(spec).is_dir():
        raise UsageError(
            f"--data: folder {spec!r} not found; expected an IDX/NPZ/CSV folder, 'digits' or "
            "'synthetic' (or set PARQ_OPTIM_DATA_DIR)"
        )
    try:
        return load_folder(spec, max_train=max_train, max_test=max_test, seed=seed)
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(f"--data {spec!r}: {e}") from e


def _out_dir(args: argparse.Namespace) -> Path:
    out = Path(args.out or f"parq-optim-{args.command}")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _write(out: Path, payload: dict[str, Any]) -> None:
    (out / "results.json").write_text(json.dumps(payload, indent=2, default=str))


def _summary(r: dict[str, Any]) -> dict[str, Any]:
    keep = ("test_acc", "train_acc", "wall_time_s", "quantized_fraction_end", "layers")
    return {k: r[k] for k in keep if k in r}


def cmd_demo(args: argparse.Namespace) -> int:
    out = _out_dir(args)
    epochs = 30 if args.quick and args.epochs == 60 else args.epochs
    args.epochs = epochs
    n_seeds = args.seeds or (2 if args.quick else 3)
    methods = ["fp", "ste", "binaryrelax", "parq"]
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for bits in (1, 0):
        for method in methods:
            if method == "fp" and bits == 0:
                continue  # full precision does not depend on the bit width
            accs = []
            for s in range(args.seed, args.seed + n_seeds):
                data = _load_data(args.data, s)
                cfg = _config(args, method, bits, s)
                accs.append(train(cfg, data, quiet=args.quiet)["test_acc"])
            rows.append(
                {
                    "bits": "fp" if method == "fp" else ("ternary" if bits == 0 else bits),
                    "method": method,
                    "test_acc": accs,
                    "mean": sum(accs) / len(accs),
                }
            )
    wall = time.perf_counter() - t0
    _write(
        out,
        {
            "command": "demo",
            "argv": sys.argv,
            "config": vars(args),
            "seeds": n_seeds,
            "versions": _versions(),
            "wall_time_s": wall,
            "rows": rows,
        },
    )
    _plot_demo(out, rows)
    print(f"{'bits':>8} {'method':>12} {'mean acc %':>11}  per seed")
    for r in rows:
        print(
            f"{r['bits']!s:>8} {r['method']:>12} {r['mean']:11.2f}  "
            + " ".join(f"{a:.1f}" for a in r["test_acc"])
        )
    print(f"wall time {wall:.1f} s; results in {out / 'results.json'}")
    return 0


def _plot_demo(out: Path, rows: list[dict[str, Any]]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3))
    labels = [f"{r['method']}\n{r['bits']}" for r in rows]
    ax.bar(range(len(rows)), [r["mean"] for r in rows])
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("test accuracy (%)")
    lo = min(r["mean"] for r in rows)
    ax.set_ylim(max(0, lo - 10), 100)
    fig.tight_layout()
    fig.savefig(out / "demo.png", dpi=80)
    plt.close(fig)


def cmd_train(args: argparse.Namespace) -> int:
    out = _out_dir(args)
    cfg = _config(args, args.prox, args.bits, args.seed)
    data = _load_data(args.data, args.seed, args.max_train, args.max_test)
    r = train(cfg, data, quiet=args.quiet)
    ckpt = out / "checkpoint.pt"
    torch.save(
        {
            "config": asdict(cfg),
            "data": {
                "n_features": data.n_features,
                "n_classes": data.n_classes,
                "image_shape": data.image_shape,
                "n_train": len(data.y_train),
            },
            "model": r["model"].state_dict(),
            "optimizer": r["optimizer"].state_dict(),
        },
        ckpt,
    )
    _write(
        out,
        {
            "command": "train",
            "argv": sys.argv,
            "config": asdict(cfg),
            "data": data.name,
            "versions": _versions(),
            "seed": args.seed,
            "checkpoint": str(ckpt),
            "metrics": _summary(r),
            "history": r["history"],
        },
    )
    print(f"{'method':>12} {'bits':>5} {'test acc %':>10} {'train acc %':>11} {'time s':>7}")
    print(
        f"{cfg.method:>12} {cfg.bits:>5} {r['test_acc']:10.2f} {r['train_acc']:11.2f} "
        f"{r['wall_time_s']:7.1f}"
    )
    print(f"checkpoint: {ckpt}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import load_quantized, save_quantized
    from .optim import QuantOptimizer

    path = Path(args.checkpoint)
    if not path.is_file():
        raise UsageError(f"--checkpoint: file not found: {args.checkpoint!r}")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        cfg = TrainConfig(**{f.name: blob["config"][f.name] for f in fields(TrainConfig)})
    except Exception as e:
        raise UsageError(
            f"--checkpoint: {args.checkpoint!r} is not a parq-optim train "
            f"checkpoint ({type(e).__name__})"
        ) from e
    if cfg.method == "fp":
        raise UsageError("--checkpoint: trained in full precision (--prox fp); nothing to quantize")
    cfg.device = "cpu"
    meta = blob["data"]
    shape = tuple(meta["image_shape"]) if meta["image_shape"] else None
    stub = Split(
        torch.zeros(1, meta["n_features"]),
        torch.zeros(1),
        torch.zeros(1),
        torch.zeros(1),
        meta["n_classes"],
        image_shape=shape,
    )
    steps = (meta["n_train"] + cfg.batch_size - 1) // cfg.batch_size
    model, opt, _ = build(cfg, stub, steps)
    model.load_state_dict(blob["model"])
    assert isinstance(opt, QuantOptimizer)
    opt.load_state_dict(blob["optimizer"])
    out = _out_dir(args)
    report = save_quantized(model, opt, out / "model.parq.pt")
    rebuilt, _, _ = build(cfg, stub, steps)
    load_quantized(out / "model.parq.pt", rebuilt)
    report["roundtrip_max_abs_diff"] = max(
        (a - b).abs().max().item()
        for a, b in zip(model.state_dict().values(), rebuilt.state_dict().values())
    )
    report["compression_vs_fp32"] = report["fp32_bytes"] / report["file_bytes"]
    _write(
        out,
        {
            "command": "export",
            "argv": sys.argv,
            "checkpoint": str(path),
            "versions": _versions(),
            "report": report,
        },
    )
    print(f"{'file':>28} {'bytes':>9} {'bits/weight':>11} {'fp32 bytes':>10} {'max |diff|':>10}")
    print(
        f"{Path(report['file']).name:>28} {report['file_bytes']:9d} "
        f"{report['bits_per_weight']:11.3f} {report['fp32_bytes']:10d} "
        f"{report['roundtrip_max_abs_diff']:10.2e}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``parq-optim`` command; returns the exit code."""
    try:
        args = _parse(argv)
        if args.quiet:
            os.environ.setdefault("TQDM_DISABLE", "1")
        torch.manual_seed(args.seed)
        if args.device == "cpu":
            torch.set_num_threads(1)  # small models: threads only add contention (and noise)
        return {"demo": cmd_demo, "train": cmd_train, "export": cmd_export}[args.command](args)
    except UsageError as e:
        print(f"parq-optim: error: {e}", file=sys.stderr)
        return 2


__all__ = ["main", "make_parser"]
