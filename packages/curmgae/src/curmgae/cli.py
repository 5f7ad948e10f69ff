"""Command line: ``curmgae pretrain | evaluate | demo`` (``curmgae <cmd> --help`` documents every flag).

Built on the repository's CLI contract (``_contract.py``): the common flags, ``--config`` files, one-line
errors with exit code 2, and one results file per subcommand (``pretrain`` writes ``results.json`` and
``model.pt``, ``evaluate --task T`` writes ``evaluate-T.json``, ``demo`` writes ``results.json``), none
of which is replaced without ``--overwrite``.
"""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._contract import (
    CLI,
    Report,
    UsageError,
    blame,
    existing_path,
    fmt_mean_std,
    mean_std,
    nonneg_int,
    positive_float,
    positive_int,
    say,
    table,
    unit_interval,
)
from .config import (
    DATASET_NAMES,
    DIFFICULTIES,
    DIFFICULTY_NAMES,
    LAMBDA_PACES,
    LOSSES,
    METHODS,
    PACINGS,
    PROTOCOLS,
    SOURCES,
    TIE_BREAKS,
    CurMGAEConfig,
)

if TYPE_CHECKING:
    from torch_geometric.data import Data

# torch, torch_geometric and the modules built on them are imported by the handlers, not here: a usage
# error (an unknown flag, a file that would be overwritten) is then reported in well under a second.

DIST = "curmgae"
PLOT = "curriculum.png"
TASKS = ("link", "node", "both")
DEMO_METHODS = ("curmgae", "s2gae", "gae")
#: pretrain flags that override a field of :class:`CurMGAEConfig` (flag = field with '-' for '_')
OVERRIDES = (
    "epochs",
    "hidden",
    "num_layers",
    "mask_ratio",
    "split_ratio",
    "loss",
    "lambda_pace",
    "pacing",
    "pace_end",
    "tie_break",
    "update_every",
    "difficulty",
    "ramp_frac",
    "batch_size",
    "lr",
    "patience",
)
METRIC_LABELS = {
    "lp_auc": "LP AUC",
    "lp_ap": "LP AP",
    "nc_svm_acc": "NC acc (SVM 5-fold)",
    "nc_probe_acc": "NC acc (linear probe)",
}


# ------------------------------------------------------------------------------------- helpers


def _setup(args: argparse.Namespace) -> None:
    """Checks that need no data, then threads and seeds (before any work)."""
    import torch

    if torch.device(args.device).type != "cpu":
        raise UsageError(
            "--device",
            f"{args.device!r}: curmgae trains on CPU only in this version; accepted: cpu",
        )
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)


def _dataset_value(value: str) -> str | Path:
    """A dataset as a checkpoint stores it (a string) back to a name or a file path."""
    lowered = {n.lower(): n for n in DATASET_NAMES}
    if value.lower() in lowered:
        return lowered[value.lower()]
    if value.lower().startswith(("planetoid:", "coauthor:", "amazon:", "file:")):
        return value  # names as curmgae 0.1.0 stored them
    return Path(value)


def _describe(data: Data, dataset: str | Path, root: Path | None, quick: bool) -> str:
    size = f"{data.num_nodes:,} nodes, {data.edge_index.size(1) // 2:,} undirected edges"
    if isinstance(dataset, Path):
        return f"file {dataset.name} ({size}, {data.num_features} features)"
    if dataset == "synthetic":
        mode = "quick" if quick else "full"
        return (
            f"synthetic curriculum graph (embedded, {mode} size; {size}; planted easy/medium/hard "
            "edges)"
        )
    where = f" from {root.name}/" if root is not None else ""
    return f"{dataset}{where} ({size}, {data.num_features} features)"


def _load(
    dataset: str | Path,
    root: Path | None,
    *,
    seed: int,
    quick: bool,
    split_seed: int,
    force_reload: bool,
) -> tuple[Data, str]:
    """Load and split a dataset; a bad file is one line naming --dataset (files) or --root (folders)."""
    from .data import load_dataset, split_edges

    flag = "--root" if isinstance(dataset, str) and dataset != "synthetic" else "--dataset"
    with blame(flag):
        data = load_dataset(dataset, root, seed=seed, quick=quick, force_reload=force_reload)
        split = split_edges(data, seed=split_seed)
    return split, _describe(data, dataset, root, quick)


def _config(args: argparse.Namespace) -> CurMGAEConfig:
    """The config of ``--method`` with the flags given; a rejected value names its flag."""
    from .pipeline import make_config

    overrides = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k, None) is not None}
    if args.method == "gae" and "loss" in overrides:
        raise UsageError(
            "--loss", "the gae baseline trains with PyG's GAE.recon_loss; --loss does not apply"
        )
    try:
        return make_config(args.method, **overrides)
    except ValueError as exc:
        text = str(exc)
        named = [k for k in OVERRIDES if re.search(rf"(?<![\w]){k}=", text)]
        flag = "--" + named[0].replace("_", "-") if named else None
        raise UsageError(flag, text) from exc


def curriculum_rows(trace: list[dict[str, Any]], n: int = 8) -> list[tuple[Any, ...]]:
    """About ``n`` S-steps of a trace as table rows: step, epoch, lambda, K_t, cap and the shares of
    easy/medium/hard edges in the difficulty-chosen part ('–' while that part is empty, K_t = 0)."""

    def share(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    return [
        (
            e["t"],
            e["epoch"],
            f"{e['lambda']:.3f}",
            e["K_t"],
            e["cap"],
            *(share(e.get(f"share_{k}")) for k in DIFFICULTY_NAMES),
        )
        for e in trace[:: max(1, len(trace) // n)]
    ]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def _value(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


# ------------------------------------------------------------------------------------ handlers


def cmd_pretrain(args: argparse.Namespace) -> Report:
    from .pipeline import plot_curriculum, save_checkpoint
    from .pipeline import pretrain as run_pretrain

    _setup(args)
    cfg = _config(args)
    data, desc = _load(
        args.dataset,
        args.root,
        seed=args.seed,
        quick=args.quick,
        split_seed=args.split_seed,
        force_reload=args.force_reload,
    )
    say(args, f"data: {desc}")
    model, hist = run_pretrain(args.method, data, cfg, args.seed, progress=not args.quiet)
    dataset = args.dataset.resolve() if isinstance(args.dataset, Path) else args.dataset
    checkpoint = save_checkpoint(
        Path(args.out) / "model.pt",
        model,
        config=cfg,
        method=args.method,
        dataset=dataset,
        root=args.root.resolve() if args.root is not None else None,
        split_seed=args.split_seed,
        quick=args.quick,
        seed=args.seed,
        in_channels=data.num_features,
    )
    files = [checkpoint]
    if hist.trace and plot_curriculum(hist.trace, Path(args.out) / PLOT):
        files.append(Path(args.out) / PLOT)
    metrics = {
        "val_auc": max((a for _, a in hist.val_auc), default=float("nan")),
        "best_epoch": hist.best_epoch,
        "final_loss": hist.losses[-1],
        "median_epoch_s": _median(hist.epoch_times),
    }
    rows = [(k, _value(v)) for k, v in metrics.items()]
    return Report(
        {
            "data": desc,
            "method": args.method,
            "metrics": metrics,
            "model_config": cfg.to_dict(),
            "config_sources": SOURCES,
            "history": hist.to_dict(),
        },
        table=f"pretrain {args.method}:\n" + table(rows, ["metric", "value"]),
        files=files,
    )


def cmd_evaluate(args: argparse.Namespace) -> Report:
    from .pipeline import build_model, evaluate, load_checkpoint

    _setup(args)
    path = args.checkpoint if args.checkpoint is not None else Path(args.out) / "model.pt"
    with blame("--checkpoint", RuntimeError):
        ckpt = load_checkpoint(path)
    dataset = args.dataset if args.dataset is not None else _dataset_value(ckpt["dataset"])
    root = args.root if args.root is not None else ckpt["root"]
    root = Path(root) if root is not None else None
    data, desc = _load(
        dataset,
        root,
        seed=int(ckpt["seed"]),
        quick=bool(ckpt["quick"]),
        split_seed=int(ckpt["split_seed"]),
        force_reload=args.force_reload,
    )
    if data.num_features != ckpt["in_channels"]:
        raise UsageError(
            "--dataset",
            f"the checkpoint was trained on {ckpt['in_channels']} node features; {desc} has "
            f"{data.num_features}",
        )
    tasks = ("link", "node") if args.task == "both" else (args.task,)
    if "node" in tasks and getattr(data, "y", None) is None:
        raise UsageError("--task", f"node classification needs node labels; {desc} has none")
    say(args, f"data: {desc}")
    model = build_model(ckpt["method"], int(ckpt["in_channels"]), ckpt["config"])
    with blame("--checkpoint", RuntimeError):
        model.load_state_dict(ckpt["state_dict"])
    protocols = PROTOCOLS if args.protocol == "both" else (args.protocol,)
    metrics = evaluate(model, data, tasks, protocols, args.features, args.seed)
    rows = [(METRIC_LABELS.get(k, k), _value(v)) for k, v in metrics.items()]
    return Report(
        {
            "data": desc,
            "checkpoint": path,
            "method": ckpt["method"],
            "task": args.task,
            "protocols": list(protocols),
            "features": args.features,
            "metrics": metrics,
        },
        table=f"evaluate {ckpt['method']} ({args.task}):\n" + table(rows, ["metric", "value"]),
    )


def cmd_demo(args: argparse.Namespace) -> Report:
    from .pipeline import evaluate, make_config, plot_curriculum
    from .pipeline import pretrain as run_pretrain

    _setup(args)
    epochs = args.epochs or (30 if args.quick else 100)
    seeds = [args.seed + i for i in range(args.seeds)]
    data, desc = _load(
        "synthetic", None, seed=args.seed, quick=args.quick, split_seed=0, force_reload=False
    )
    say(
        args,
        f"data: {desc}; {len(seeds)} training seed(s) {seeds}, {epochs} epochs, graph seed "
        f"{args.seed}",
    )
    small: dict[str, Any] = {"epochs": epochs, "eval_every": 5}
    if args.quick:
        small.update(hidden=64, batch_size=2048)
    per_seed: dict[str, dict[str, list[float]]] = {
        m: {k: [] for k in (*METRIC_LABELS, "median_epoch_s")} for m in DEMO_METHODS
    }
    trace: list[dict[str, Any]] = []
    for seed in seeds:
        for method in DEMO_METHODS:
            cfg = make_config(method, **small)
            model, hist = run_pretrain(method, data, cfg, seed, progress=not args.quiet)
            res = evaluate(model, data, seed=seed)
            for k in METRIC_LABELS:
                per_seed[method][k].append(res[k])
            per_seed[method]["median_epoch_s"].append(_median(hist.epoch_times))
            if method == "curmgae" and not trace:
                trace = hist.trace
    files = []
    if plot_curriculum(trace, Path(args.out) / PLOT):
        files.append(Path(args.out) / PLOT)
    base = {
        n: float((data.train_difficulty == k).float().mean())
        for k, n in enumerate(DIFFICULTY_NAMES)
    }
    if trace:
        rows = curriculum_rows(trace)
        say(
            args,
            "curriculum of the first seed (shares of the difficulty-chosen masked edges; all training "
            f"edges: easy {base['easy']:.2f}, medium {base['medium']:.2f}, hard {base['hard']:.2f}):\n"
            + table(rows, ["S-update", "epoch", "lambda", "K_t", "cap", *DIFFICULTY_NAMES]),
        )
    summary = {
        m: {
            k: dict(zip(("mean", "std"), mean_std(v)), n=len(v))  # std: ddof=1, None for one seed
            for k, v in vals.items()
        }
        for m, vals in per_seed.items()
    }
    spread = (
        "mean ± sample std (ddof=1) over the seeds"
        if len(seeds) > 1
        else "one seed, so no spread is shown"
    )
    header = ["method", *METRIC_LABELS.values(), "median epoch (s)"]
    rows2 = [
        (
            m,
            *(fmt_mean_std([100 * x for x in vals[k]]) for k in METRIC_LABELS),
            fmt_mean_std(vals["median_epoch_s"], digits=3),
        )
        for m, vals in per_seed.items()
    ]
    title = f"demo on {desc}: {len(seeds)} seed(s), in % ({spread})"
    return Report(
        {
            "data": desc,
            "dataset": "synthetic",
            "seeds": seeds,
            "epochs": epochs,
            "per_seed": per_seed,
            "summary": summary,
            "trace": trace,
            "base_shares": base,
        },
        table=title + "\n" + table(rows2, header),
        files=files,
    )


# ------------------------------------------------------------------------------------------ CLI


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=positive_int(),
        default=1,
        help="torch CPU threads (default: 1; these graphs are small)",
    )


def _add_data(p: argparse.ArgumentParser, default: str | None) -> None:
    names = ", ".join(DATASET_NAMES)
    shown = default or "the dataset stored in the checkpoint"
    p.add_argument(
        "--dataset",
        type=existing_path("file", names=DATASET_NAMES),
        default=default,
        help=f"one of {names} (no download: real datasets are read from --root), or a graph file: "
        f".npz with x [N, F], edge_index [2, E] and optional y [N], or .pt holding a PyG Data "
        f"(default: {shown})",
    )
    p.add_argument(
        "--root",
        type=existing_path("dir"),
        default=None,
        help="folder holding <name>/raw for Cora/CiteSeer/PubMed (e.g. ../shared/data/planetoid) or "
        "for coauthor/amazon; read-only is fine (default: "
        + ("none)" if default else "the root stored in the checkpoint)"),
    )
    p.add_argument(
        "--force-reload",
        action="store_true",
        help="rebuild the processed-data cache ($CURMGAE_CACHE, default ~/.cache/curmgae) even "
        "when its key (the raw files' SHA-256 and the reader) matches (default: off)",
    )


def build_cli() -> CLI:
    from . import __version__

    cli = CLI(
        DIST,
        description="Cur-MGAE: masked graph autoencoder with a structure-aware curriculum "
        "(ICML 2025). Subcommands: pretrain, evaluate, demo.",
        version=__version__,
        track=("torch-geometric", "scikit-learn"),
    )

    p = cli.command(
        "pretrain",
        cmd_pretrain,
        help="learn node embeddings without labels; writes results.json and model.pt",
        description="Pretrain Cur-MGAE (Algorithm 1) or a baseline on a graph; writes results.json "
        "(metrics, config, curriculum trace), model.pt for 'evaluate' and curriculum.png.",
        writes=("results.json", "model.pt", PLOT),
    )
    _add_data(p, "synthetic")
    p.add_argument(
        "--quick",
        action="store_true",
        help="small synthetic graph: 1,000 nodes, 5,000 edges (default: off, 5,000 nodes)",
    )
    p.add_argument(
        "--method",
        default="curmgae",
        choices=list(METHODS),
        help="curmgae, or a baseline on the same loop (default: curmgae)",
    )
    p.add_argument(
        "--epochs", type=positive_int(), default=None, help="training epochs (default: 200)"
    )
    p.add_argument(
        "--hidden", type=positive_int(), default=None, help="embedding width d (default: 128)"
    )
    p.add_argument(
        "--num-layers", type=positive_int(), default=None, help="encoder depth K (default: 2)"
    )
    p.add_argument(
        "--mask-ratio",
        type=unit_interval(low_open=True),
        default=None,
        help="largest masked fraction of the edges, in (0, 1] (default: 0.7)",
    )
    p.add_argument(
        "--split-ratio",
        type=unit_interval(),
        default=None,
        help="fraction of the masked set chosen by difficulty, in [0, 1] (default: 0.5)",
    )
    p.add_argument(
        "--loss",
        default=None,
        choices=list(LOSSES),
        help="reconstruction loss (default: bce; full_softmax is Eq. 3)",
    )
    p.add_argument(
        "--lambda-pace",
        default=None,
        choices=list(LAMBDA_PACES),
        help="lambda growth rule (default: rcl_inverse, chosen on validation edges)",
    )
    p.add_argument(
        "--pacing",
        default=None,
        choices=list(PACINGS),
        help="growth of the masked-fraction target under --lambda-pace quantile (default: linear)",
    )
    p.add_argument(
        "--pace-end",
        type=unit_interval(low_open=True),
        default=None,
        help="quantile target at the end of the ramp under --lambda-pace quantile, in (0, 1]; 1 "
        "admits every edge (default: the mask ratio)",
    )
    p.add_argument(
        "--tie-break",
        default=None,
        choices=list(TIE_BREAKS),
        help="which edges of the curriculum set form the difficulty part: the easiest (residual) "
        "or a uniform sample (random) (default: residual)",
    )
    p.add_argument(
        "--update-every",
        type=positive_int(),
        default=None,
        help="epochs between S-steps (residuals, lambda, mask) (default: 1)",
    )
    p.add_argument(
        "--difficulty",
        default=None,
        choices=list(DIFFICULTIES),
        help="difficulty measurer: residuals on the full training graph (full) or with each edge "
        "hidden while it is scored (held_out) (default: full)",
    )
    p.add_argument(
        "--ramp-frac",
        type=unit_interval(low_open=True),
        default=None,
        help="fraction of the epochs after which the curriculum has finished (full mask schedule); "
        "model selection and early stopping start there, in (0, 1] (default: 2/3)",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int(),
        default=None,
        help="positives per step (default: all masked edges, one step per epoch, as S2GAE)",
    )
    p.add_argument(
        "--patience",
        type=positive_int(),
        default=None,
        help="stop after this many validation checks without a gain (default: 50, as S2GAE)",
    )
    p.add_argument(
        "--lr", type=positive_float(), default=None, help="Adam learning rate (default: 0.01)"
    )
    p.add_argument(
        "--split-seed",
        type=nonneg_int(),
        default=234,
        help="seed of the 85/5/10 edge split (default: 234)",
    )
    _add_threads(p)

    e = cli.command(
        "evaluate",
        cmd_evaluate,
        help="score a pretrained model: link prediction and/or node classification",
        description="Evaluate model.pt from 'pretrain' on the same split; writes "
        "evaluate-<task>.json (link, node or both) beside pretrain's results.json.",
        writes=lambda a: (f"evaluate-{a.task}.json",),
    )
    e.add_argument(
        "--checkpoint",
        type=existing_path("file"),
        default=None,
        help="model.pt written by pretrain (default: <out>/model.pt)",
    )
    e.add_argument(
        "--task",
        default="both",
        choices=list(TASKS),
        help="link (AUC, AP), node (classification accuracy) or both (default: both)",
    )
    e.add_argument(
        "--protocol",
        default="both",
        choices=[*PROTOCOLS, "both"],
        help="node classification protocol: svm (S2GAE's RBF SVM, 5-fold CV), linear_probe "
        "(public split) or both (default: both)",
    )
    e.add_argument(
        "--features",
        default="concat",
        choices=["concat", "last"],
        help="node features: all layers concatenated or the last layer (default: concat)",
    )
    _add_data(e, None)
    _add_threads(e)

    d = cli.command(
        "demo",
        cmd_demo,
        help="embedded synthetic graph with planted easy/hard edges: curriculum, Cur-MGAE vs "
        "random masking vs GAE",
        description="Runs on the embedded synthetic graph (no download) and says so; prints the "
        "curriculum and the metrics of Cur-MGAE, the random-mask backbone and PyG's GAE.",
        writes=("results.json", PLOT),
    )
    d.add_argument(
        "--quick",
        action="store_true",
        help="1,000 nodes, 30 epochs, hidden 64 (< 1 min on 1 core; default: off, 5,000 nodes, "
        "100 epochs)",
    )
    d.add_argument(
        "--epochs",
        type=positive_int(),
        default=None,
        help="training epochs (default: 30 with --quick, else 100)",
    )
    d.add_argument(
        "--seeds",
        type=positive_int(),
        default=1,
        help="training seeds --seed, --seed+1, ...; with 2 or more the table shows mean ± sample "
        "std (default: 1)",
    )
    _add_threads(d)
    return cli


def main(argv: list[str] | None = None) -> int:
    with warnings.catch_warnings():
        # torch_geometric calls torch.jit.script when imported, which recent torch deprecates: not ours
        # to fix, and it would add a line to the output of every command.
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.script` is deprecated", category=DeprecationWarning
        )
        return build_cli().main(argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
