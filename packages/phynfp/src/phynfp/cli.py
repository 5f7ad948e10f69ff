"""``phynfp`` command line: ``train``, ``evaluate`` and ``demo`` on the repository's CLI contract."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import _contract as C
from .models import MODEL_NAMES

DATASET_HELP = (
    "river-synth (embedded synthetic river tree), wntr:<network> (an EPANET network shipped with wntr: "
    "Net1, Net2, Net3, ky4, ky10, Net6, or a .inp path), metr-la:<dir> (adj_mx.pkl + los_speed.csv) or "
    "lamah:<dir> (a LamaH-CE folder)"
)
QUICK = {"num_nodes": 24, "hours": 8760, "epochs": 4, "max_batches": 12}
CHECKPOINT_FORMAT = "phynfp-checkpoint-1"


def dataset_arg() -> C.Check:
    """``--dataset``: a dataset name, checked without loading anything."""

    def parse(text: str) -> str:
        from .experiment import parse_dataset

        kind, arg = parse_dataset(text)
        if kind in ("metr-la", "lamah"):
            path = Path(str(arg)).expanduser()
            if not path.is_dir():
                raise C.Invalid(f"{arg} is not an existing folder")
        if kind == "wntr":
            from .wdn import NETWORKS

            if arg not in NETWORKS and not (
                str(arg).lower().endswith(".inp") and Path(str(arg)).is_file()
            ):
                raise C.Invalid(f"{arg} is neither {', '.join(NETWORKS)} nor an existing .inp file")
        return text

    accepts = "river-synth, wntr:<network>, metr-la:<dir> or lamah:<dir>"
    return C.Check(parse, accepts, "data", ("no-such-dataset", "wntr:NoSuchNet"), "dataset")


def layers_arg() -> C.Check:
    def parse(text: str) -> int | str:
        if text.strip() == "auto":
            return "auto"
        value = C._int(text)
        if value < 1:
            raise ValueError("out of range")
        return value

    return C.Check(parse, "an integer >= 1 or auto", "count", ("0", "1.5", "x"), "layers")


def _add_threads_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=C.nonneg_int(),
        default=1,
        help="torch CPU threads; 1 is fastest for these small graphs on shared CPUs, 0 = torch's "
        "default (default: 1)",
    )


def _set_threads(args: argparse.Namespace) -> None:
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)


def _add_data_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument(
        "--nodes",
        type=C.int_range(2),
        default=64,
        help="river-synth: number of nodes (default: 64)",
    )
    g.add_argument(
        "--hours",
        type=C.nonneg_int(),
        default=0,
        help="river-synth: simulated hours (0: 8760); wntr: hours per scenario (0: 168) (default: 0)",
    )
    g.add_argument(
        "--routing",
        choices=["muskingum", "lag"],
        default="muskingum",
        help="river-synth channel routing (default: muskingum)",
    )
    g.add_argument(
        "--scenarios", type=C.int_range(3), default=24, help="wntr: demand scenarios (default: 24)"
    )
    g.add_argument(
        "--data-seed",
        type=C.nonneg_int(),
        default=0,
        help="seed of the generated data (default: 0)",
    )
    g.add_argument(
        "--train-stride",
        type=C.positive_int(),
        default=1,
        help="step between training windows (default: 1)",
    )
    g.add_argument(
        "--cache-dir",
        type=C.out_dir(),
        default=None,
        help="folder for cached simulations (default: $PHYNFP_CACHE, else ~/.cache/phynfp)",
    )


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument(
        "--models",
        type=C.choice_list(MODEL_NAMES, allow_all=True),
        default=list(MODEL_NAMES),
        help=f"models to train, comma-separated from {', '.join(MODEL_NAMES)} (default: all)",
    )
    g.add_argument(
        "--hidden",
        type=C.positive_int(),
        default=32,
        help="hidden width H (default: 32, CPU preset; the paper's code uses 128)",
    )
    g.add_argument(
        "--layers",
        type=layers_arg(),
        default="auto",
        help="depth L of every model, or auto: the longest directed path, capped at --max-layers; graphs "
        "with cycles use --max-layers (default: auto)",
    )
    g.add_argument(
        "--max-layers", type=C.positive_int(), default=16, help="cap of --layers auto (default: 16)"
    )
    g.add_argument(
        "--preset",
        choices=["default", "official"],
        default="default",
        help="PhyNFP settings: default (paper-form operators) or official (the official code's "
        "operators and headwater reverse edges; needs an integer --layers) (default: default)",
    )
    g.add_argument(
        "--mode",
        choices=["upwind", "code", "central"],
        default=None,
        help="difference operator (default: the preset's: upwind, or code for --preset official)",
    )
    g.add_argument(
        "--orientation",
        choices=["downstream", "upstream", "bidirectional"],
        default="downstream",
        help="which neighbours PhyNFP's operators use (default: downstream)",
    )
    g.add_argument(
        "--physics",
        choices=["saint_venant", "aw_rascle"],
        default="saint_venant",
        help="layer update: saint_venant (paper) or aw_rascle (experimental traffic variant) "
        "(default: saint_venant)",
    )
    g.add_argument(
        "--clamp",
        type=C.nonneg_float(),
        default=10.0,
        help="clamp bound of the update, 0 = off (default: 10)",
    )
    g.add_argument(
        "--param-sharing",
        action="store_true",
        help="one PhyNFP layer reused L times (default: off)",
    )


def _add_train_flags(p: argparse.ArgumentParser, epochs: int = 20, max_batches: int = 0) -> None:
    g = p.add_argument_group("training")
    g.add_argument(
        "--epochs",
        type=C.positive_int(),
        default=epochs,
        help=f"epochs (default: {epochs}; the paper's code: 200)",
    )
    g.add_argument(
        "--batch-size", type=C.positive_int(), default=32, help="windows per batch (default: 32)"
    )
    g.add_argument(
        "--lr", type=C.positive_float(), default=1e-3, help="Adam learning rate (default: 0.001)"
    )
    g.add_argument(
        "--weight-decay",
        type=C.nonneg_float(),
        default=1e-5,
        help="Adam weight decay (default: 1e-05)",
    )
    g.add_argument(
        "--clip",
        type=C.nonneg_float(),
        default=1.0,
        help="gradient-norm clip, 0 = off (default: 1.0)",
    )
    g.add_argument(
        "--accumulate",
        type=C.positive_int(),
        default=1,
        help="gradient accumulation steps (default: 1; official: 4)",
    )
    g.add_argument(
        "--max-batches",
        type=C.nonneg_int(),
        default=max_batches,
        help=f"training batches per epoch, a random subset; 0 = all (default: {max_batches})",
    )
    g.add_argument(
        "--physics-loss-weight",
        type=C.nonneg_float(),
        default=0.0,
        help="weight of a penalty on negative de-normalised predictions (not the paper's) (default: 0)",
    )
    g.add_argument(
        "--num-seeds",
        type=C.positive_int(),
        default=1,
        help="seeds --seed, --seed+1, ... (default: 1)",
    )
    g.add_argument(
        "--no-reverse",
        action="store_true",
        help="skip training on reversed edges (no training-orientation gap) (default: train both)",
    )
    g.add_argument(
        "--delta",
        type=C.positive_float(),
        default=0.5,
        help="perturbation size δ in z-units (default: 0.5)",
    )


def _data_options(args: argparse.Namespace, quick: bool = False) -> dict[str, Any]:
    from .experiment import default_cache_dir

    return {
        "num_nodes": QUICK["num_nodes"] if quick else args.nodes,
        "hours": QUICK["hours"] if quick else (args.hours or None),
        "routing": args.routing,
        "scenarios": args.scenarios,
        "data_seed": args.data_seed,
        "train_stride": args.train_stride,
        "cache_dir": Path(args.cache_dir) if args.cache_dir else default_cache_dir(),
    }


def _load(args: argparse.Namespace, spec: str, options: dict[str, Any]) -> Any:
    from .experiment import load_dataset

    bar = None
    if spec.startswith("wntr:"):
        bar = C.progress(options.get("scenarios"), "simulating scenarios", args.quiet)
        options = {**options, "progress": bar}
    with C.blame("--dataset", ImportError):
        data = load_dataset(spec, **options)
    if bar is not None:
        bar.close()
    return data


def _experiment_config(args: argparse.Namespace, *, epochs: int, max_batches: int | None) -> Any:
    from .experiment import ExperimentConfig
    from .training import TrainConfig

    return ExperimentConfig(
        models=list(args.models),
        seeds=[args.seed + i for i in range(args.num_seeds)],
        hidden=args.hidden,
        layers=args.layers,
        max_layers=args.max_layers,
        train=TrainConfig(
            epochs=epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            weight_decay=args.weight_decay,
            clip=args.clip or None,
            accumulate=args.accumulate,
            max_batches=max_batches or None,
            physics_loss_weight=args.physics_loss_weight,
        ),
        reverse=not args.no_reverse,
        preset=args.preset,
        mode=args.mode,
        orientation=args.orientation,
        physics=args.physics,
        clamp=args.clamp or None,
        param_sharing=args.param_sharing,
        delta=args.delta,
        device=args.device,
    )


def _fmt(summary: dict[str, Any], digits: int = 4) -> str:
    mean, std, n = summary.get("mean"), summary.get("std"), summary.get("n", 0)
    if mean is None:
        return "-"
    return f"{mean:.{digits}f}" if std is None or n < 2 else f"{mean:.{digits}f} ± {std:.{digits}f}"


def results_table(results: dict[str, Any]) -> str:
    rows = []
    for name, entry in results["models"].items():
        s = entry["summary"]
        ratio = s.get("epoch_time_ratio_to_gcn")
        rows.append(
            [
                name,
                _fmt(s["mse"]),
                _fmt(s["nse_median"], 3),
                _fmt(s["mse_reversed"]),
                _fmt(s["g_train"], 3),
                _fmt(s["g_flip"], 3),
                _fmt(s["leakage"], 3),
                "-" if ratio is None else f"{ratio:.2f}",
            ]
        )
    header = [
        "model",
        "test MSE",
        "NSE (median)",
        "MSE reversed",
        "G_train",
        "G_flip",
        "leakage",
        "epoch ×GCN",
    ]
    seeds = len(results["seeds"])
    note = f"{results['dataset_info']}; L = {results['layers']} ({results['layers_rule']}); {seeds} seed(s)"
    return (
        note
        + ("; ± is the sample std over seeds" if seeds > 1 else "")
        + "\n"
        + C.table(rows, header)
    )


def _checkpoint(
    model: Any,
    results: dict[str, Any],
    args: argparse.Namespace,
    data: Any,
    options: dict[str, Any],
) -> dict[str, Any]:
    opts = {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in options.items()
        if k not in ("progress", "cache_dir")
    }
    return {
        "format": CHECKPOINT_FORMAT,
        "model": "phynfp",
        "state_dict": model.state_dict(),
        "build": {
            "window": data.window,
            "num_features": data.num_features,
            "edge_dim": data.edge_dim,
            "hidden_channels": results["hidden"],
            "num_layers": results["layers"],
            "target_index": data.target_index,
            "phynfp_options": results["phynfp_options"],
            "headwater_reverse_edges": args.preset == "official",
        },
        "dataset": args.dataset,
        "data_options": opts,
    }


def _run(
    args: argparse.Namespace,
    *,
    spec: str,
    options: dict[str, Any],
    epochs: int,
    max_batches: int | None,
    label: str,
) -> tuple[dict[str, Any], str, Any, Any]:
    import torch

    from .experiment import run_experiment
    from .training import TrainingFailed

    if args.preset == "official" and args.layers == "auto":
        raise C.UsageError(
            "--layers",
            "--preset official adds headwater reverse edges (2-cycles), so the longest path is "
            "undefined: pass an integer, e.g. --layers 15 (the official code sweeps 15, 19, 23, 27)",
        )
    _set_threads(args)
    data = _load(args, spec, options)
    if args.preset == "official":
        data = data.with_headwater_reverse_edges()
    C.say(args, f"data: {label or data.describe()}")
    cfg = _experiment_config(args, epochs=epochs, max_batches=max_batches)
    torch.manual_seed(args.seed)
    try:
        results, models = run_experiment(
            data,
            cfg,
            progress=lambda total, desc: C.progress(total, desc, args.quiet),
            log=lambda text: C.say(args, text),
        )
    except TrainingFailed as exc:
        # One line and exit 2, and no results.json: a run that trained nothing has no result.
        raise C.UsageError("--lr", f"training failed, no results written: {exc}") from None
    results["data_options"] = {
        k: v for k, v in options.items() if k not in ("progress", "cache_dir")
    }
    return results, results_table(results), data, models


def train(args: argparse.Namespace) -> C.Report:
    import torch

    options = _data_options(args)
    results, table, data, models = _run(
        args,
        spec=args.dataset,
        options=options,
        epochs=args.epochs,
        max_batches=args.max_batches,
        label="",
    )
    files = []
    if "phynfp" in models:
        path = Path(args.out) / "model.pt"
        torch.save(_checkpoint(models["phynfp"], results, args, data, options), path)
        files.append(path)
    results["dataset_arg"] = args.dataset
    return C.Report(results, table=table, files=files)


def demo(args: argparse.Namespace) -> C.Report:
    quick = args.quick
    options = _data_options(args, quick=quick)
    options["cache_dir"] = Path(args.cache_dir) if args.cache_dir else None  # simulated in memory
    hours = options["hours"] or 8760
    label = (
        f"river-synth (embedded synthetic river tree: {options['num_nodes']} nodes, {hours} hours, "
        f"{options['routing']} routing; simulated in memory, no download)"
    )
    if quick:
        args.models = ["persistence", "climatology", "mlp", "gcn", "dirgnn", "phynfp"]
    results, table, _, _ = _run(
        args,
        spec="river-synth",
        options=options,
        epochs=QUICK["epochs"] if quick else args.epochs,
        max_batches=QUICK["max_batches"] if quick else args.max_batches,
        label=label,
    )
    results["quick"] = quick
    return C.Report(results, table=table)


def evaluate(args: argparse.Namespace) -> C.Report:
    import torch

    from .models import build_model
    from .sensitivity import gap, perturbation_response
    from .training import evaluate as evaluate_model

    _set_threads(args)
    with C.blame("--checkpoint", RuntimeError):
        ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
        if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(
                f"{args.checkpoint} is not a phynfp checkpoint (written by phynfp train)"
            )
    spec = args.dataset or ckpt["dataset"]
    options = {**ckpt.get("data_options", {})}
    from .experiment import default_cache_dir

    options["cache_dir"] = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    data = _load(args, spec, options)
    build = ckpt["build"]
    if build.get("headwater_reverse_edges"):
        data = data.with_headwater_reverse_edges()
    with C.blame("--checkpoint", RuntimeError):
        if (data.window, data.num_features, data.edge_dim) != (
            build["window"],
            build["num_features"],
            build["edge_dim"],
        ):
            raise ValueError(
                f"the checkpoint was trained on windows of {build['window']} steps × {build['num_features']} "
                f"variables with {build['edge_dim']} edge features; {spec} has {data.window} × "
                f"{data.num_features} and {data.edge_dim}"
            )
        model = build_model(
            ckpt["model"],
            window=build["window"],
            num_features=build["num_features"],
            edge_dim=build["edge_dim"],
            hidden_channels=build["hidden_channels"],
            num_layers=build["num_layers"],
            target_index=build["target_index"],
            phynfp_options=build["phynfp_options"],
        )
        model.load_state_dict(ckpt["state_dict"])
    C.say(args, f"data: {data.describe()}")
    forward = evaluate_model(model, data, "test")
    flipped = evaluate_model(model, data.reversed(), "test")
    pert = perturbation_response(model, data, delta=args.delta)
    results = {
        "dataset_arg": spec,
        "test": forward,
        "flip_eval": flipped,
        "g_flip": gap(flipped["mse"], forward["mse"]),
        "perturbation": pert,
    }
    rows = [
        ["test MSE", f"{forward['mse']:.4f}"],
        ["NSE (median over nodes)", f"{forward['nse_median']:.3f}"],
        ["MSE on reversed edges", f"{flipped['mse']:.4f}"],
        ["G_flip", f"{results['g_flip']:.3f}"],
        [f"leakage (node {pert['node']}, δ = {args.delta})", f"{pert['leakage']:.3f}"],
    ]
    return C.Report(results, table=C.table(rows, ["measure", "value"]))


def build_cli() -> C.CLI:
    cli = C.CLI(
        "phynfp",
        description="PhyNFP (Jiang et al., ICML 2025): physics-guided, topology-aware flux prediction on "
        "directed graphs, with baselines and directional-sensitivity measures.",
        track=("torch-geometric", "wntr"),
    )
    p = cli.command(
        "train",
        train,
        help="train PhyNFP and the baselines on a dataset; report error and directional sensitivity",
        description="Train PhyNFP and baselines (persistence, climatology, MLP, GCN, GAT, GraphSAGE, "
        "DirGNN) on forward and reversed edges; report test MSE/NSE, G_train, G_flip, perturbation "
        "leakage and epoch time relative to GCN. Writes results.json and model.pt (PhyNFP).",
        writes=("results.json", "model.pt"),
    )
    p.add_argument(
        "--dataset",
        type=dataset_arg(),
        default="river-synth",
        help=f"{DATASET_HELP} (default: river-synth)",
    )
    _add_data_flags(p)
    _add_model_flags(p)
    _add_train_flags(p)
    _add_threads_flag(p)

    p = cli.command(
        "evaluate",
        evaluate,
        help="evaluate a PhyNFP checkpoint: test error, error on reversed edges, perturbation leakage",
        writes=("evaluate.json",),
    )
    p.add_argument(
        "--checkpoint",
        type=C.existing_path("file"),
        required=True,
        help="model.pt written by phynfp train (required)",
    )
    p.add_argument(
        "--dataset",
        type=dataset_arg(),
        default=None,
        help=f"{DATASET_HELP} (default: the checkpoint's dataset)",
    )
    p.add_argument(
        "--delta",
        type=C.positive_float(),
        default=0.5,
        help="perturbation size δ in z-units (default: 0.5)",
    )
    p.add_argument(
        "--cache-dir",
        type=C.out_dir(),
        default=None,
        help="folder for cached simulations (default: $PHYNFP_CACHE, else ~/.cache/phynfp)",
    )
    _add_threads_flag(p)

    p = cli.command(
        "demo",
        demo,
        help="train PhyNFP and baselines on the embedded river-synth data (--quick: under a minute)",
        writes=("results.json",),
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a {QUICK['num_nodes']}-node, {QUICK['hours']}-hour river, {QUICK['epochs']} epochs of "
        f"{QUICK['max_batches']} batches, six models (default: off: the full-size river, all models)",
    )
    _add_data_flags(p)
    _add_model_flags(p)
    _add_train_flags(p, epochs=10, max_batches=20)
    _add_threads_flag(p)
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
