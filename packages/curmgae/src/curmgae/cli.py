"""Command line: ``curmgae pretrain | evaluate | demo`` (``curmgae <cmd> --help`` documents every flag)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import torch

from .config import LAMBDA_PACES, LOSSES, CurMGAEConfig
from .data import load_dataset, split_edges
from .method import DIFFICULTY_NAMES as DIFF
from .pipeline import (
    METHODS,
    PROTOCOLS,
    build_model,
    evaluate,
    make_config,
    plot_curriculum,
    versions,
    write_json,
)
from .pipeline import pretrain as run_pretrain


class CliError(Exception):
    """Bad user input: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise CliError(message)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument(
        "--device", default="cpu", help="torch device; only 'cpu' in 0.1.0 (default: cpu)"
    )
    p.add_argument("--out", type=Path, default=Path("curmgae_out"), help="output folder")
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="JSON or YAML file with the same flags (keys = flag names, '-' or '_')",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars, no table")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default: 1; these graphs are small)",
    )


def _model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        default="synthetic",
        help="synthetic (embedded), Cora/CiteSeer/PubMed, planetoid:<name>, "
        "coauthor:<name>, amazon:<name>, file:<path.pt|.npz> (default: synthetic)",
    )
    p.add_argument("--root", default=None, help="folder holding <name>/raw for real datasets")
    p.add_argument("--quick", action="store_true", help="small synthetic graph (1,000 nodes)")
    p.add_argument(
        "--method",
        default="curmgae",
        choices=list(METHODS),
        help="curmgae, or a baseline on the same loop (default: curmgae)",
    )
    p.add_argument(
        "--epochs", type=int, default=None, help="training epochs (default: config, 200)"
    )
    p.add_argument("--hidden", type=int, default=None, help="embedding width d (default: 128)")
    p.add_argument("--num-layers", type=int, default=None, help="encoder depth K (default: 2)")
    p.add_argument(
        "--mask-ratio", type=float, default=None, help="max masked fraction (default: 0.7)"
    )
    p.add_argument(
        "--split-ratio",
        type=float,
        default=None,
        help="fraction of the masked set chosen by difficulty (default: 0.5)",
    )
    p.add_argument(
        "--loss", default=None, choices=list(LOSSES), help="reconstruction loss (default: bce)"
    )
    p.add_argument(
        "--lambda-pace",
        default=None,
        choices=list(LAMBDA_PACES),
        help="lambda growth rule (default: additive, auto-calibrated)",
    )
    p.add_argument(
        "--batch-size", type=int, default=None, help="positives per step (default: 1024)"
    )
    p.add_argument("--lr", type=float, default=None, help="Adam learning rate (default: 0.01)")
    p.add_argument(
        "--split-seed", type=int, default=234, help="seed of the 85/5/10 edge split (default: 234)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="curmgae",
        description="Cur-MGAE: masked graph autoencoder with a "
        "structure-aware curriculum (ICML 2025).",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("pretrain", help="learn node embeddings without labels; writes model.pt")
    _model_flags(p)
    _common(p)
    e = sub.add_parser(
        "evaluate", help="score a pretrained model (link prediction / node classif.)"
    )
    e.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="model.pt written by pretrain (default: <out>/model.pt)",
    )
    e.add_argument(
        "--task", default="both", choices=["link", "node", "both"], help="what to evaluate"
    )
    e.add_argument(
        "--protocol",
        default="both",
        choices=[*PROTOCOLS, "both"],
        help="node classification protocol: svm (5-fold CV) or linear_probe",
    )
    e.add_argument(
        "--features",
        default="concat",
        choices=["concat", "last"],
        help="node features: all layers concatenated or the last layer",
    )
    e.add_argument("--dataset", default=None, help="override the dataset stored in the checkpoint")
    e.add_argument("--root", default=None, help="override the data root stored in the checkpoint")
    _common(e)
    d = sub.add_parser(
        "demo",
        help="synthetic graph with planted easy/hard edges: curriculum + "
        "Cur-MGAE vs random masking vs GAE",
    )
    d.add_argument(
        "--quick", action="store_true", help="1,000 nodes, 30 epochs (< 2 min on 1 core)"
    )
    d.add_argument("--epochs", type=int, default=None, help="override the demo's epoch count")
    _common(d)
    return parser


def _apply_config_file(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if args.config is None:
        return args
    path = Path(args.config)
    if not path.is_file():
        raise CliError(f"argument --config: file {path} not found")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        values = yaml.safe_load(text) or {}
    else:
        values = json.loads(text)
    if not isinstance(values, dict):
        raise CliError(f"argument --config: {path} must hold a mapping of flag names to values")
    known = vars(args)
    unknown = [k for k in values if k.replace("-", "_") not in known]
    if unknown:
        raise CliError(f"argument --config: unknown keys {unknown}; accepted: {sorted(known)}")
    sub = parser._subparsers._group_actions[0].choices[args.command]  # type: ignore[union-attr,index]
    sub.set_defaults(**{k.replace("-", "_"): v for k, v in values.items()})
    return parser.parse_args(argv)  # explicit flags still win over the file


def _check_common(args: argparse.Namespace) -> None:
    if args.device != "cpu":
        raise CliError(
            f"argument --device: {args.device!r} is not supported in 0.1.0; accepted: cpu"
        )
    if args.threads < 1:
        raise CliError(f"argument --threads: {args.threads!r} must be an integer >= 1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = (
        "epochs",
        "hidden",
        "num_layers",
        "mask_ratio",
        "split_ratio",
        "loss",
        "lambda_pace",
        "batch_size",
        "lr",
    )
    out = {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}
    if args.method == "gae" and "loss" in out:
        raise CliError("argument --loss: the PyG GAE baseline only uses GAE.recon_loss")
    return out


def _load_split(dataset: str, root: str | None, split_seed: int, seed: int, quick: bool):
    data = load_dataset(dataset, root, seed=seed, quick=quick)
    return split_edges(data, seed=split_seed)


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


def cmd_pretrain(args: argparse.Namespace) -> dict[str, Any]:
    cfg = make_config(args.method, **_overrides(args))
    data = _load_split(args.dataset, args.root, args.split_seed, args.seed, args.quick)
    model, hist = run_pretrain(args.method, data, cfg, args.seed, progress=not args.quiet)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "state_dict": model.state_dict(),
            "config": cfg.to_dict(),
            "method": args.method,
            "dataset": args.dataset,
            "root": args.root,
            "split_seed": args.split_seed,
            "quick": args.quick,
            "seed": args.seed,
            "in_channels": data.num_features,
        },
        args.out / "model.pt",
    )
    metrics = {
        "val_auc": max((a for _, a in hist.val_auc), default=float("nan")),
        "best_epoch": hist.best_epoch,
        "final_loss": hist.losses[-1],
        "median_epoch_s": sorted(hist.epoch_times)[len(hist.epoch_times) // 2],
    }
    if hist.trace:
        plot_curriculum(hist.trace, args.out / "curriculum.png")
    return {"metrics": metrics, "config": cfg.to_dict(), "history": hist.to_dict()}


def cmd_evaluate(args: argparse.Namespace) -> dict[str, Any]:
    ckpt_path = args.checkpoint or args.out / "model.pt"
    if not Path(ckpt_path).is_file():
        raise CliError(
            f"argument --checkpoint: {ckpt_path} not found (run `curmgae pretrain` first)"
        )
    ckpt = torch.load(ckpt_path, weights_only=False)  # our own file, written by `pretrain`
    cfg = CurMGAEConfig.from_dict(ckpt["config"])
    data = _load_split(
        args.dataset or ckpt["dataset"],
        args.root or ckpt["root"],
        ckpt["split_seed"],
        ckpt["seed"],
        ckpt.get("quick", False),
    )
    model = build_model(ckpt["method"], data.num_features, cfg)
    model.load_state_dict(ckpt["state_dict"])
    tasks = ("link", "node") if args.task == "both" else (args.task,)
    protocols = PROTOCOLS if args.protocol == "both" else (args.protocol,)
    metrics = evaluate(model, data, tasks, protocols, args.features, args.seed)
    return {
        "metrics": metrics,
        "method": ckpt["method"],
        "protocols": protocols,
        "features": args.features,
    }


def cmd_demo(args: argparse.Namespace) -> dict[str, Any]:
    epochs = args.epochs or (30 if args.quick else 100)
    data = _load_split("synthetic", None, 0, args.seed, args.quick)
    small: dict[str, Any] = {"epochs": epochs, "eval_every": 5}
    if args.quick:
        small.update(hidden=64, batch_size=2048)
    results: dict[str, Any] = {}
    trace: list[dict[str, Any]] = []
    for method in ("curmgae", "s2gae", "gae"):
        model, hist = run_pretrain(
            method, data, make_config(method, **small), args.seed, progress=not args.quiet
        )
        results[method] = evaluate(model, data, seed=args.seed)
        results[method]["median_epoch_s"] = sorted(hist.epoch_times)[len(hist.epoch_times) // 2]
        trace = hist.trace if method == "curmgae" else trace
    args.out.mkdir(parents=True, exist_ok=True)
    plot_curriculum(trace, args.out / "curriculum.png")
    if not args.quiet:
        rows: list[tuple[str, ...]] = [
            ("S-update", "epoch", "lambda", "K_t", "cap", "easy", "medium", "hard")
        ]
        for e in trace[:: max(1, len(trace) // 8)]:
            rows.append(
                (
                    str(e["t"]),
                    str(e["epoch"]),
                    f"{e['lambda']:.3f}",
                    str(e["K_t"]),
                    str(e["cap"]),
                    *(f"{e[f'share_{k}']:.2f}" for k in ("easy", "medium", "hard")),
                )
            )
        base = [float((data.train_difficulty == k).float().mean()) for k in range(3)]
        print(
            "curriculum (shares of the difficulty-chosen masked edges; all training edges: "
            f"easy {base[0]:.2f}, medium {base[1]:.2f}, hard {base[2]:.2f}):"
        )
        print(_table(rows))
    shares = {n: float((data.train_difficulty == k).float().mean()) for k, n in enumerate(DIFF)}
    return {"metrics": results, "trace": trace, "epochs": epochs, "base_shares": shares}


COMMANDS = {"pretrain": cmd_pretrain, "evaluate": cmd_evaluate, "demo": cmd_demo}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _apply_config_file(parser, argv)
        _check_common(args)
        t0 = time.perf_counter()
        payload = COMMANDS[args.command](args)
    except (CliError, ValueError, FileNotFoundError) as exc:
        print(f"curmgae: error: {exc}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - t0
    record = {
        "command": args.command,
        "argv": argv,
        "seed": args.seed,
        "wall_time_s": wall,
        "versions": versions(),
        "args": vars(args),
        **payload,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "results.json", record)
    if not args.quiet:
        metrics = payload["metrics"]
        demo = args.command == "demo"
        rows: list[tuple[str, ...]] = [
            ("method", "metric", "value") if demo else ("metric", "value")
        ]
        if args.command == "demo":
            for m, vals in metrics.items():
                rows += [(m, k, f"{v:.4f}") for k, v in vals.items()]
        else:
            rows += [
                (k, f"{v:.4f}" if isinstance(v, float) else str(v)) for k, v in metrics.items()
            ]
        print(_table(rows))
        print(f"wrote {args.out / 'results.json'} ({wall:.1f} s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
