"""``tar-gnn``: train, evaluate, split and demo on the icml25-methods CLI contract."""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import _contract as C
from .data import GOOD_NAMES, load_file, load_good_processed, load_planetoid, load_split, save_split
from .flow import SCHEMES, StepSizeError
from .methods import METHODS, TAR, make_method
from .models import ARCHS, GNN
from .splits import MASKS, make_split
from .train import TrainConfig, config_dict, evaluate_masks, train_node_classifier
from .transport import parse_transport_graph

DATASETS = ("csbm", "cora", "citeseer", "pubmed", "planetoid", "good", "file")
ENV_METHODS = ("irm", "vrex", "groupdro")
NOTICE = (
    "note: the TAR update rule is a reconstruction (no official code; the paper's method section was "
    "not available): see the README"
)


# ------------------------------------------------------------------------------------------ values


def _domain_check() -> C.Check:
    def parse(text: str) -> str:
        if text in ("degree", "word", "norm", "time") or re.fullmatch(r"attr:\w+", text):
            return text
        raise C.Invalid("unknown domain")

    return C.Check(
        parse, "degree, word, norm, time or attr:<name>", "list", ["no-such-domain"], "domain"
    )


def _transport_check() -> C.Check:
    def parse(text: str) -> str:
        try:
            parse_transport_graph(text)
        except ValueError as exc:
            raise C.Invalid("unknown transport graph") from exc
        return text

    return C.Check(
        parse, "induced, khop:<h>, knn:<k>, complete or none", "list", ["no-such-graph"], "graph"
    )


# ------------------------------------------------------------------------------------------ flags


def _add_data_flags(p: argparse.ArgumentParser, *, split: bool = True) -> None:
    g = p.add_argument_group("data")
    g.add_argument(
        "--dataset",
        choices=DATASETS,
        default="csbm",
        help="csbm (embedded synthetic contextual SBM), cora/citeseer/pubmed or planetoid (a "
        "Planetoid-format folder given by --data), good (GOOD processed files under --data), or "
        "file (a .npz/.pt graph given by --data) (default: csbm)",
    )
    g.add_argument(
        "--data",
        type=C.existing_path("any"),
        default=None,
        help="the Planetoid folder (holding raw/ind.<name>.* or <Name>/raw), the GOOD root, or the "
        ".npz/.pt file (default: none; needed by every dataset except csbm)",
    )
    g.add_argument(
        "--good-name",
        choices=GOOD_NAMES,
        default="GOODCora",
        help="GOOD dataset name for --dataset good (default: GOODCora)",
    )
    g.add_argument(
        "--n-nodes",
        type=C.int_range(50),
        default=2000,
        help="number of nodes of the csbm graph (default: 2000)",
    )
    if not split:
        return
    s = p.add_argument_group("shift split (GOOD protocol)")
    s.add_argument(
        "--shift",
        choices=("covariate", "concept", "imbalance", "given"),
        default="concept",
        help="covariate or concept shift by --domain, a class-imbalanced split, or given (use the "
        "masks the data already holds: GOOD files, a .npz with masks) (default: concept)",
    )
    s.add_argument(
        "--domain",
        type=_domain_check(),
        default="degree",
        help="domain variable: degree, word (row sum of the raw features), norm (L2 norm of the "
        "features), time (data.node_year) or attr:<name> (default: degree)",
    )
    s.add_argument(
        "--domain-file",
        type=C.existing_path("file"),
        default=None,
        help="a user column: .npy/.txt/.csv with one domain value per node; replaces --domain "
        "(default: none)",
    )
    s.add_argument(
        "--order",
        choices=("descending", "ascending"),
        default="descending",
        help="covariate shift: train on the largest (descending, GOOD's Cora) or smallest domain "
        "values (default: descending)",
    )
    s.add_argument(
        "--split-fallback",
        choices=("nearest", "within", "error"),
        default="nearest",
        help="covariate shift, when GOOD's cut rule leaves a split empty (ties): cut at the nearest "
        "domain-value changes that fill every split, cut inside the tied values, or stop with an "
        "error (default: nearest)",
    )
    s.add_argument(
        "--num-envs",
        type=C.positive_int(),
        default=10,
        help="covariate shift: number of training environments (default: 10)",
    )
    s.add_argument(
        "--label-stat",
        choices=("class_index", "class_group"),
        default="class_index",
        help="concept shift: label statistic, GOOD's class index or a seeded balanced class "
        "partition (default: class_index)",
    )
    s.add_argument(
        "--split-seed",
        type=C.nonneg_int(),
        default=0,
        help="seed of the split and of the csbm graph (default: 0)",
    )


def _add_train_flags(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group("model and optimisation (GOOD's node-task defaults)")
    m.add_argument(
        "--epochs",
        type=C.positive_int(),
        default=None,
        help="training epochs (default: 100; 200 for csbm)",
    )
    m.add_argument("--lr", type=C.positive_float(), default=1e-3, help="Adam lr (default: 0.001)")
    m.add_argument(
        "--weight-decay", type=C.nonneg_float(), default=0.0, help="weight decay (default: 0)"
    )
    m.add_argument(
        "--hidden", type=C.positive_int(), default=300, help="hidden width (default: 300)"
    )
    m.add_argument(
        "--layers", type=C.positive_int(), default=3, help="graph convolutions (default: 3)"
    )
    m.add_argument(
        "--dropout",
        type=C.float_range(0.0, 1.0, high_open=True),
        default=0.5,
        help="dropout (default: 0.5)",
    )
    m.add_argument("--arch", choices=ARCHS, default="gcn", help="convolution (default: gcn)")


def _add_tar_flags(p: argparse.ArgumentParser) -> None:
    t = p.add_argument_group("TAR options (the paper's values are unknown: all exposed)")
    t.add_argument(
        "--beta", type=C.nonneg_float(), default=0.1, help="entropy coefficient (default: 0.1)"
    )
    t.add_argument(
        "--steps", type=C.nonneg_int(), default=20, help="T_in, inner flow steps (default: 20)"
    )
    t.add_argument(
        "--step-size",
        type=C.nonneg_float(),
        default=1.0,
        help="tau, the requested step, capped at cfl times the step-size bound (default: 1.0)",
    )
    t.add_argument("--scheme", choices=SCHEMES, default="upwind", help="mobility (default: upwind)")
    t.add_argument(
        "--transport-graph",
        type=_transport_check(),
        default="induced",
        help="G0: induced, khop:<h>, knn:<k> (GDRO-style), complete or none (default: induced)",
    )
    t.add_argument(
        "--edge-weight",
        choices=("unit", "sym_norm"),
        default="unit",
        help="w_ij on G0 (default: unit)",
    )
    t.add_argument(
        "--warm-start",
        action="store_true",
        help="start each flow from the previous q instead of uniform (default: off)",
    )
    t.add_argument(
        "--flow-every",
        type=C.positive_int(),
        default=1,
        help="run the flow every k epochs (default: 1)",
    )
    t.add_argument(
        "--cfl",
        type=C.float_range(0.0, 1.0, low_open=True),
        default=0.9,
        help="cap each step at cfl times the step-size bound (default: 0.9)",
    )
    t.add_argument(
        "--no-cfl",
        action="store_true",
        help="use --step-size unchecked (warns when a weight goes negative) (default: off)",
    )
    t.add_argument(
        "--on-exceed",
        choices=("cap", "raise", "limit"),
        default="cap",
        help="a step above the bound is capped globally, an error, or limited per donor node "
        "(default: cap)",
    )
    t.add_argument(
        "--uniform-mix",
        type=C.float_range(0.0, 1.0, high_open=True),
        default=0.0,
        help="q <- (1 - a) q + a / n after the flow (default: 0)",
    )
    t.add_argument(
        "--flow-loss",
        choices=("train", "eval"),
        default="train",
        help="losses fed to the flow: the training forward or a no-dropout one (default: train)",
    )
    t.add_argument(
        "--knn-space",
        choices=("features", "embedding"),
        default="features",
        help="space of the knn transport graph (default: features)",
    )
    b = p.add_argument_group("baseline options")
    b.add_argument("--irm-lambda", type=C.nonneg_float(), default=1.0, help="IRM (default: 1)")
    b.add_argument("--vrex-lambda", type=C.nonneg_float(), default=10.0, help="V-REx (default: 10)")
    b.add_argument(
        "--groupdro-eta", type=C.nonneg_float(), default=0.1, help="GroupDRO eta (default: 0.1)"
    )
    b.add_argument(
        "--groupdro-mode",
        choices=("good", "online"),
        default="good",
        help="GroupDRO weights: GOOD's per-step softmax or persistent (default: good)",
    )
    b.add_argument(
        "--kldro-beta", type=C.positive_float(), default=1.0, help="KL-DRO temperature (default: 1)"
    )
    b.add_argument(
        "--cvar-alpha",
        type=C.float_range(0.0, 1.0, low_open=True),
        default=0.2,
        help="CVaR fraction (default: 0.2)",
    )


# ----------------------------------------------------------------------------------------- helpers


def _csbm_mode(args: argparse.Namespace) -> str:
    if args.shift == "covariate":
        return "degree" if args.domain == "degree" else "covariate"
    return "concept"


def _load_graph(args: argparse.Namespace) -> Any:
    """The graph named by --dataset/--data (csbm: generated, masks included)."""
    from .data import make_csbm_ood

    if args.dataset == "csbm":
        if args.data is not None:
            raise C.UsageError("--data", "--dataset csbm is generated; drop --data")
        shift = _csbm_mode(args) if hasattr(args, "shift") else "concept"
        return make_csbm_ood(args.n_nodes, shift=shift, seed=getattr(args, "split_seed", 0))
    if args.data is None:
        raise C.UsageError("--data", f"--dataset {args.dataset} needs --data PATH")
    with C.blame("--data"):
        if args.dataset in ("cora", "citeseer", "pubmed", "planetoid"):
            name = None if args.dataset == "planetoid" else args.dataset
            return load_planetoid(args.data, name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            if args.dataset == "good":
                shift = getattr(args, "shift", "covariate")
                shift = shift if shift in ("covariate", "concept") else "covariate"
                return load_good_processed(args.data, args.good_name, args.domain, shift)
            return load_file(args.data)


def _domain_values(path: Path, n: int) -> torch.Tensor:
    if path.suffix.lower() == ".npy":
        values = np.load(path, allow_pickle=False)
    else:
        text = path.read_text(encoding="utf-8").replace(",", " ").split()
        if not text:
            raise ValueError(f"{path}: the file is empty")
        try:
            values = np.array([float(v) for v in text])
        except ValueError as exc:
            raise ValueError(f"{path}: not a list of numbers ({exc})") from exc
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size != n:
        raise ValueError(f"{path}: {values.size} values, expected one per node ({n})")
    if not np.isfinite(values).all():
        raise ValueError(
            f"{path}: row {int(np.flatnonzero(~np.isfinite(values))[0])} is NaN or inf"
        )
    return torch.from_numpy(values)


def _apply_split(args: argparse.Namespace, data: Any) -> tuple[Any, dict[str, Any]]:
    """Masks from --split, the data itself (csbm, GOOD, --shift given) or the GOOD-protocol builders."""
    split_file = getattr(args, "split", None)
    if split_file is not None:
        with C.blame("--split"):
            split = load_split(split_file, int(data.num_nodes))
        return split.apply(data), {"source": "file", **split.info}
    if args.dataset in ("csbm", "good") or args.shift == "given":
        missing = [
            m
            for m in ("train_mask", "ood_val_mask", "ood_test_mask")
            if getattr(data, m, None) is None
        ]
        if missing:
            raise C.UsageError(
                "--shift", f"the data holds no {missing[0]}; choose covariate or concept"
            )
        info = {"source": args.dataset if args.dataset in ("csbm", "good") else "given"}
        if args.dataset == "csbm":
            info["csbm_shift"] = _csbm_mode(args)
        return data, info
    domain: Any = args.domain
    if args.domain_file is not None:
        with C.blame("--domain-file"):
            domain = _domain_values(args.domain_file, int(data.num_nodes))
    kwargs: dict[str, Any] = {}
    if args.shift == "covariate":
        kwargs = {
            "order": args.order,
            "num_envs": args.num_envs,
            "fallback": args.split_fallback,
        }
    elif args.shift == "concept":
        kwargs = {"label_stat": args.label_stat}
    flag = "--domain-file" if args.domain_file is not None else "--domain"
    with C.blame(flag):
        split = make_split(data, args.shift, domain, seed=args.split_seed, **kwargs)
    return split.apply(data), {"source": "built", **split.info}


def _tar_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "beta": args.beta,
        "steps": args.steps,
        "step_size": args.step_size,
        "scheme": args.scheme,
        "transport_graph": args.transport_graph,
        "edge_weight": args.edge_weight,
        "warm_start": args.warm_start,
        "flow_every": args.flow_every,
        "cfl": None if args.no_cfl else args.cfl,
        "on_exceed": args.on_exceed,
        "uniform_mix": args.uniform_mix,
        "knn_space": args.knn_space,
        "flow_loss": args.flow_loss,
    }


def _method(name: str, args: argparse.Namespace) -> Any:
    options: dict[str, Any] = {
        "tar": _tar_kwargs(args),
        "irm": {"lam": args.irm_lambda},
        "vrex": {"lam": args.vrex_lambda},
        "groupdro": {"eta": args.groupdro_eta, "mode": args.groupdro_mode},
        "kldro": {"beta": args.kldro_beta},
        "cvar": {"alpha": args.cvar_alpha},
    }.get(name, {})
    return make_method(name, **options)


def _config(args: argparse.Namespace) -> TrainConfig:
    epochs = args.epochs or (200 if args.dataset == "csbm" else 100)
    return TrainConfig(
        epochs=epochs,
        lr=args.lr,
        weight_decay=args.weight_decay,
        hidden=args.hidden,
        layers=args.layers,
        dropout=args.dropout,
        arch=args.arch,
        device=args.device,
    )


def _pct(values: list[float]) -> str:
    return C.fmt_mean_std([100 * v for v in values])


def _run_methods(
    args: argparse.Namespace,
    data: Any,
    methods: list[str],
    seeds: list[int],
    cfg: TrainConfig,
    label: dict[str, str] | None = None,
    options: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], list[list[str]], dict[str, Any]]:
    has_env = getattr(data, "env_id", None) is not None and bool(
        (data.env_id[data.train_mask] >= 0).any()
    )
    flagged = getattr(data, "minority", None)
    results: dict[str, Any] = {}
    rows: list[list[str]] = []
    models: dict[str, Any] = {}
    bar = C.progress(len(methods) * len(seeds) * cfg.epochs, "training", args.quiet)
    for name in methods:
        base = name.split("@")[0]
        if base in ENV_METHODS and not has_env:
            results[name] = {"skipped": "needs training environments (env_id); the data has none"}
            continue
        runs = []
        for seed in seeds:
            if options and name in options:
                method = make_method(base, **options[name])
            else:
                method = _method(base, args)
            res = train_node_classifier(
                data, method, cfg, seed=seed, flagged=flagged, on_epoch=lambda e, r: bar.update(1)
            )
            entry: dict[str, Any] = {"seed": seed, **res.metrics}
            if isinstance(method, TAR) and res.diagnostics:
                last = res.diagnostics[res.best_epoch]
                entry["tar_diagnostics_at_best_epoch"] = last
            runs.append(entry)
            models[name] = (res.model, method)
        summary = {
            k: C.mean_std([r[k] for r in runs])
            for k in ("ood_test_acc", "id_test_acc", "ood_val_acc", "epoch_time_s")
        }
        results[name] = {
            "options": models[name][1].options(),
            "runs": runs,
            "mean_std": {k: {"mean": m, "std": s} for k, (m, s) in summary.items()},
        }
        rows.append(
            [
                (label or {}).get(name, name),
                _pct([r["ood_test_acc"] for r in runs]),
                _pct([r["id_test_acc"] for r in runs]),
                _pct([r["ood_val_acc"] for r in runs]),
                f"{1000 * summary['epoch_time_s'][0]:.1f}",
            ]
        )
    bar.close()
    return results, rows, models


HEADER = ["method", "OOD-test %", "ID-test %", "OOD-val %", "ms/epoch"]


def _sizes(data: Any) -> dict[str, int]:
    return {m: int(getattr(data, m).sum()) for m in MASKS if getattr(data, m, None) is not None}


# ---------------------------------------------------------------------------------------- commands


def cmd_train(args: argparse.Namespace) -> C.Report:
    data = _load_graph(args)
    data, split_info = _apply_split(args, data)
    cfg = _config(args)
    baselines = [b for b in args.baselines if b not in ("none", args.method)]
    methods = [args.method, *baselines]
    if args.method in ENV_METHODS:
        env = getattr(data, "env_id", None)
        if env is None or not bool((env[data.train_mask] >= 0).any()):
            raise C.UsageError(
                "--method",
                f"{args.method} needs training environments (env_id) and this dataset has none; "
                "use tar, erm, kldro, cvar or cbe",
            )
    seeds = [args.seed + i for i in range(args.seeds)]
    C.say(
        args,
        f"data: {getattr(data, 'name', args.dataset)} ({args.dataset}), split: {split_info.get('source')}",
    )
    if args.method == "tar":
        C.say(args, NOTICE)
    try:
        results, rows, models = _run_methods(args, data, methods, seeds, cfg)
    except (
        StepSizeError
    ) as exc:  # --on-exceed raise: the bound depends on the losses met in training
        raise C.UsageError("--step-size", str(exc)) from exc
    model, method = models[args.method]
    torch.save(
        {
            "model": model.state_dict(),
            "model_config": model.config(),
            "method": args.method,
            "options": method.options(),
            "num_nodes": int(data.num_nodes),
            "masks": {m: getattr(data, m) for m in MASKS if getattr(data, m, None) is not None},
            "seed": seeds[-1],
        },
        Path(args.out) / "model.pt",
    )
    text = C.table(rows, HEADER) + f"\n{len(seeds)} seed(s); OOD-test at the best OOD-val epoch"
    return C.Report(
        {
            "dataset": args.dataset,
            "split": split_info,
            "sizes": _sizes(data),
            "train_config": config_dict(cfg),
            "seeds": seeds,
            "methods": results,
            "reconstruction_notice": NOTICE,
        },
        table=text,
        files=[Path(args.out) / "model.pt"],
    )


def cmd_evaluate(args: argparse.Namespace) -> C.Report:
    data = _load_graph(args)
    with C.blame("--checkpoint", RuntimeError):
        state = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or "model" not in state:
            raise ValueError(f"{args.checkpoint}: not a tar-gnn checkpoint (no 'model' entry)")
        if int(state["num_nodes"]) != int(data.num_nodes):
            raise ValueError(
                f"{args.checkpoint}: trained on a graph of {state['num_nodes']} nodes, --data has "
                f"{int(data.num_nodes)}"
            )
        model = GNN(**state["model_config"])
        model.load_state_dict(state["model"])
        if int(state["model_config"]["in_dim"]) != int(data.x.size(1)):
            raise ValueError(
                f"{args.checkpoint}: expects {state['model_config']['in_dim']} features"
            )
    if args.split is not None:
        with C.blame("--split"):
            split = load_split(args.split, int(data.num_nodes))
        data = split.apply(data)
    else:
        for name, mask in state["masks"].items():
            setattr(data, name, mask)
    metrics = evaluate_masks(model, data)
    rows = [
        [k.replace("_acc", ""), f"{100 * v:.2f}"] for k, v in metrics.items() if k.endswith("_acc")
    ]
    return C.Report(
        {
            "dataset": args.dataset,
            "method": state["method"],
            "metrics": metrics,
            "sizes": _sizes(data),
        },
        table=C.table(rows, ["mask", "accuracy %"]),
    )


def cmd_split(args: argparse.Namespace) -> C.Report:
    data = _load_graph(args)
    data, info = _apply_split(args, data)
    from .splits import ShiftSplit

    n = int(data.num_nodes)
    env = getattr(data, "env_id", None)
    dom = getattr(data, "domain_id", None)
    split = ShiftSplit(
        {m: getattr(data, m) for m in MASKS},
        env if env is not None else torch.full((n,), -1, dtype=torch.long),
        dom if dom is not None else torch.zeros(n, dtype=torch.long),
        info,
    )
    path = save_split(Path(args.out) / "split.npz", split)
    sizes = _sizes(data)
    rows = [[k, v, f"{100 * v / n:.1f}"] for k, v in sizes.items()]
    envs = sorted(int(e) for e in torch.unique(split.env_id[data.train_mask]).tolist())
    return C.Report(
        {
            "dataset": args.dataset,
            "num_nodes": n,
            "sizes": sizes,
            "split": info,
            "train_envs": envs,
        },
        table=C.table(rows, ["mask", "nodes", "% of N"]) + f"\ntraining environments: {len(envs)}",
        files=[path],
    )


def cmd_demo(args: argparse.Namespace) -> C.Report:
    from .data import make_csbm_ood

    torch.set_num_threads(
        1
    )  # the demo graph is tiny: one thread is fastest, and CI cores are shared
    n = 600 if args.quick else 2000
    seeds = [args.seed + i for i in range(2 if args.quick else 3)]
    cfg = TrainConfig(
        epochs=100 if args.quick else 200, hidden=64, layers=2, lr=1e-2, device=args.device
    )
    data = make_csbm_ood(n, shift="concept", seed=args.seed)
    C.say(
        args,
        f"data: synthetic contextual SBM, concept shift (embedded; {n} nodes, 4 classes, "
        f"{'quick' if args.quick else 'full'} mode), {len(seeds)} seeds",
    )
    C.say(args, NOTICE)
    ns = argparse.Namespace(quiet=args.quiet)
    tar = {"beta": 0.1, "steps": 20, "transport_graph": "induced"}
    options: dict[str, dict[str, Any]] = {
        "erm": {},
        "tar": tar,
        "tar@complete": {**tar, "transport_graph": "complete"},
        "tar@knn": {**tar, "transport_graph": "knn:10"},
        "kldro": {"beta": 1.0},
        "cvar": {"alpha": 0.2},
        "irm": {"lam": 1.0},
        "vrex": {"lam": 10.0},
        "groupdro": {"eta": 0.1},
    }
    label = {"tar@complete": "tar (complete G0)", "tar@knn": "tar (knn:10 G0, GDRO-style)"}
    results, rows, _ = _run_methods(ns, data, list(options), seeds, cfg, label, options)
    # the mechanism: at a fixed ERM checkpoint, TAR's mass on minority training nodes vs their share
    from .methods import ERM, per_node_loss
    from .reweighter import TARWeighter, weight_diagnostics

    erm = train_node_classifier(data, ERM(), cfg, seed=seeds[0])
    erm.model.eval()
    with torch.no_grad():
        loss = per_node_loss(
            erm.model(data.x, data.edge_index)[data.train_mask], data.y[data.train_mask]
        )
    flagged = data.minority[data.train_mask]
    mech = {}
    for steps in (0, 5, 20, 50):
        q = TARWeighter(data, beta=0.1, steps=steps)(loss)
        mech[f"T_in={steps}"] = weight_diagnostics(q, loss, flagged, beta=0.1)
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
        C.table(rows, HEADER)
        + f"\n{len(seeds)} seeds (mean ± sample std); OOD-test at the best OOD-val epoch\n\n"
        + "TAR weights at a fixed ERM checkpoint (minority = colour differs from label):\n"
        + C.table(mrows, ["flow", "minority mass %", "minority share %", "ESS/n", "corr(q, loss)"])
    )
    return C.Report(
        {
            "dataset": "csbm-concept",
            "sizes": _sizes(data),
            "train_config": config_dict(cfg),
            "seeds": seeds,
            "methods": results,
            "mechanism": mech,
            "reconstruction_notice": NOTICE,
        },
        table=text,
    )


def build_cli() -> C.CLI:
    cli = C.CLI(
        "tar-gnn",
        description="Topology-aware dynamic reweighting (TAR, ICML 2025) for node classification "
        "under distribution shift, with GOOD-protocol splits and baselines.",
        track=("torch-geometric",),
    )
    p = cli.command(
        "train",
        cmd_train,
        help="train a GNN with TAR or a baseline on a shift split; writes results.json and model.pt",
        writes=("results.json", "model.pt"),
    )
    _add_data_flags(p)
    p.add_argument(
        "--split",
        type=C.existing_path("file"),
        default=None,
        help="a split .npz written by 'tar-gnn split' (replaces --shift) (default: none)",
    )
    p.add_argument(
        "--method", choices=list(METHODS), default="tar", help="the method to train (default: tar)"
    )
    p.add_argument(
        "--baselines",
        type=C.choice_list(["none", *METHODS]),
        default=["erm"],
        help="comma-separated methods trained beside it under the same loop, or none (default: erm)",
    )
    p.add_argument(
        "--seeds", type=C.positive_int(), default=1, help="seeds --seed, --seed+1, ... (default: 1)"
    )
    _add_train_flags(p)
    _add_tar_flags(p)

    p = cli.command(
        "evaluate",
        cmd_evaluate,
        help="evaluate a model.pt from 'tar-gnn train' on every mask; writes evaluate.json",
    )
    _add_data_flags(p)
    p.add_argument(
        "--checkpoint",
        type=C.existing_path("file"),
        required=True,
        help="model.pt written by 'tar-gnn train' (required; it holds the masks it was trained on)",
    )
    p.add_argument(
        "--split",
        type=C.existing_path("file"),
        default=None,
        help="evaluate on a split .npz instead of the checkpoint's masks (default: none)",
    )

    p = cli.command(
        "split",
        cmd_split,
        help="build GOOD-protocol shift masks for a dataset; writes split.json and split.npz",
        writes=("split.json", "split.npz"),
    )
    _add_data_flags(p)

    p = cli.command(
        "demo",
        cmd_demo,
        help="TAR vs ERM, KL-DRO, CVaR, IRM, V-REx, GroupDRO on the embedded synthetic concept shift",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="600 nodes, 100 epochs, 2 seeds (under a minute) instead of 2000, 200, 3 (default: off)",
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
