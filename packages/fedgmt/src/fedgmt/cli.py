"""Command line: ``fedgmt run | compare | demo | partition | check``."""

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

from .config import DATASETS, METHODS, PARTITIONS, FedConfig

PRESETS: dict[str, dict[str, Any]] = {
    "digits-demo": {},
    "mnist-dir01": {
        "dataset": "mnist", "num_clients": 100, "fraction_train": 0.1, "num_rounds": 200,
        "batch_size": 50, "local_epochs": 1, "min_partition_size": 10, "beta": 100.0,
    },
    "agnews-dir01": {
        "dataset": "agnews", "num_clients": 20, "fraction_train": 0.25, "num_rounds": 60,
        "local_epochs": 2, "lr": 0.1, "batch_size": 32, "beta": 100.0,
    },
}  # fmt: skip

# (flag, FedConfig field, type, help)
_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--dataset", "dataset", str, f"dataset: {', '.join(DATASETS)} (default digits, embedded)"),
    ("--data-dir", "data_dir", str, "folder of the real data (MNIST IDX folder, AG News folder)"),
    ("--model", "model", str, "model: auto, mlp or cnn (cnn: MNIST only)"),
    ("--max-train-samples", "max_train_samples", int, "subsample the training set (speed)"),
    ("--num-clients", "num_clients", int, "number of clients N (default 20)"),
    ("--fraction", "fraction_train", float, "fraction f of clients per round, in (0, 1]"),
    ("--rounds", "num_rounds", int, "number of server rounds (default 60)"),
    ("--partition", "partition", str, f"partition scheme: {', '.join(PARTITIONS)}"),
    ("--dirichlet", "dirichlet_alpha", float, "Dirichlet concentration alpha > 0 (default 0.1)"),
    ("--shards", "shards_per_client", int, "shards per client for --partition shards"),
    ("--min-partition-size", "min_partition_size", int, "minimum samples per client (repair)"),
    ("--partition-seed", "partition_seed", int, "seed of the partition (fixed across methods)"),
    ("--lr", "lr", float, "local learning rate eta_0 > 0 (default 0.01)"),
    ("--lr-decay", "lr_decay", float, "per-round learning-rate decay d in (0, 1]"),
    ("--momentum", "momentum", float, "SGD momentum mu in [0, 1)"),
    ("--weight-decay", "weight_decay", float, "SGD weight decay lambda >= 0"),
    ("--batch-size", "batch_size", int, "local batch size B"),
    ("--local-epochs", "local_epochs", int, "local epochs E"),
    ("--gamma", "gamma", float, "FedGMT sharpness strength gamma >= 0"),
    ("--tau", "tau", float, "FedGMT KL temperature tau > 0"),
    ("--ema-alpha", "ema_alpha", float, "FedGMT EMA coefficient alpha in [0, 1]"),
    ("--beta", "beta", float, "dual penalty beta > 0 (inf: dual off) for fedgmt/feddyn"),
    ("--dual-average", "dual_average", str, "server dual correction: all (H/N) or active"),
    ("--ema-location", "ema_location", str, "EMA kept on the server or per client"),
    ("--prox", "prox", float, "optional FedGMT prox nu >= 0 (not in the paper)"),
    ("--rho", "rho", float, "SAM radius rho >= 0 (fedsam, fedspeed)"),
    ("--server-lr", "server_lr", float, "SCAFFOLD server learning rate eta_g > 0"),
    ("--on-divergence", "on_divergence", str, "stop (default), raise or warn"),
    ("--dp-noise", "dp_noise", float, "DP noise multiplier sigma >= 0"),
    ("--dp-clip", "dp_clip", float, "DP per-sample clipping norm C > 0"),
    ("--dp-delta", "dp_delta", float, "DP delta in (0, 1/n_i)"),
    ("--last-k", "last_k", int, "headline: mean accuracy over the last k rounds"),
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        sys.stderr.write(f"fedgmt: error: {message}\n")
        raise SystemExit(2)


def _add_common(p: argparse.ArgumentParser, strategies: bool = True) -> None:
    if strategies:
        p.add_argument("--strategy", "--method", dest="strategy", default=None,
                       help=f"method(s), comma-separated: {', '.join(METHODS)} or all")  # fmt: skip
    p.add_argument("--seed", type=int, default=None, help="seed of init/sampling (default 0)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds (overrides --seed)")
    p.add_argument("--device", default="cpu", help="device: cpu (GPU not implemented)")
    p.add_argument("--out", default=None, help="output folder for results.json and plots")
    p.add_argument("--config", default=None, help="JSON or YAML file with the same flags")
    p.add_argument("--preset", default=None, help=f"preset: {', '.join(PRESETS)}")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--engine", default=None, help="reference (in-process) or flower (simulation)")
    p.add_argument("--allow-unstable", action="store_true", help="run even if kappa_max >= 2")
    p.add_argument("--dp", action="store_true", help="DP-SGD with Opacus (needs fedgmt[dp])")
    for flag, dest, typ, text in _FLAGS:
        p.add_argument(flag, dest=dest, type=typ, default=None, help=text)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fedgmt", description="FedGMT and baselines on Flower (ICML 2025).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("run", help="run one or more methods (Flower simulation by default)")
    _add_common(p)
    p = sub.add_parser("compare", help="methods x seeds on the same partition")
    _add_common(p)
    p = sub.add_parser("demo", help="FedAvg vs FedGMT on the embedded digits data")
    _add_common(p)
    p.add_argument("--quick", action="store_true", help="fast variant (< 2 min on 1 core)")
    p = sub.add_parser("partition", help="partition statistics")
    _add_common(p, strategies=False)
    p.add_argument("--stats", action="store_true", help="print per-client sizes and labels")
    p = sub.add_parser("check", help="stability guard: kappa_max and the verdict")
    _add_common(p)
    return parser


def _load_config_file(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.exists():
        raise ValueError(f"invalid --config={path}: file not found")
    text = file.read_text()
    if file.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"invalid --config={path}: expected a mapping of flags")
    return {str(k).lstrip("-").replace("-", "_"): v for k, v in data.items()}


def _flag_of(field: str) -> str:
    for flag, dest, _, _ in _FLAGS:
        if dest == field:
            return flag
    return "--" + field.replace("_", "-")


def _resolve(
    args: argparse.Namespace, base: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Merge preset < config file < flags; return (FedConfig kwargs, CLI options)."""
    values: dict[str, Any] = dict(base)
    file_vals: dict[str, Any] = {}
    if args.config:
        file_vals = _load_config_file(args.config)
    preset = args.preset or file_vals.get("preset")
    if preset:
        if preset not in PRESETS:
            raise ValueError(f"invalid --preset={preset}: expected one of {', '.join(PRESETS)}")
        values.update(PRESETS[preset])
    values.update(file_vals)
    for k, v in vars(args).items():
        if v is not None and v is not False:
            values[k] = v
    fields = set(FedConfig.__dataclass_fields__)
    alias = {"fraction": "fraction_train", "rounds": "num_rounds", "dirichlet": "dirichlet_alpha"}
    cfg_kw: dict[str, Any] = {}
    opts: dict[str, Any] = {}
    for k, v in values.items():
        k = alias.get(k, k)
        (cfg_kw if k in fields else opts)[k] = v
    return cfg_kw, opts


def _make_config(cfg_kw: dict[str, Any]) -> FedConfig:
    try:
        return FedConfig(**cfg_kw)
    except ValueError as err:
        msg = str(err)
        if msg.startswith("invalid "):
            field = msg.split("=", 1)[0][len("invalid ") :]
            msg = "invalid " + _flag_of(field) + msg[len("invalid ") + len(field) :]
        raise ValueError(msg) from None
    except TypeError as err:
        raise ValueError(f"invalid configuration key: {err}") from None


def _methods(opts: dict[str, Any], default: str) -> list[str]:
    text = str(opts.get("strategy") or default)
    methods = list(METHODS) if text == "all" else [m.strip() for m in text.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"invalid --strategy={m}: expected one of {', '.join(METHODS)} or all")
    return methods


def _seeds(opts: dict[str, Any], cfg: FedConfig) -> list[int]:
    if opts.get("seeds"):
        try:
            return [int(s) for s in str(opts["seeds"]).split(",")]
        except ValueError:
            raise ValueError(
                f"invalid --seeds={opts['seeds']}: expected integers like 0,1,2"
            ) from None
    return [cfg.seed]


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("fedgmt", "torch", "numpy", "flwr", "ray", "opacus"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _plot(runs: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    by_method: dict[str, list[list[float]]] = {}
    for r in runs:
        by_method.setdefault(r["method"], []).append(r["accuracy"])
    for m, curves in by_method.items():
        length = min(len(c) for c in curves)
        if length == 0:
            continue
        mean = [statistics.mean(c[i] for c in curves) for i in range(length)]
        ax.plot(range(1, length + 1), mean, label=f"{m} (n={len(curves)})")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _execute(
    cfg: FedConfig, methods: list[str], seeds: list[int], engine: str, opts: dict[str, Any]
) -> int:
    from .run import run

    if opts.get("device", "cpu") not in ("cpu", "auto"):
        raise ValueError(f"invalid --device={opts['device']}: expected cpu (GPU not implemented)")
    if engine not in ("reference", "flower"):
        raise ValueError(f"invalid --engine={engine}: expected reference or flower")
    if cfg.dp:
        from .dp import require_opacus

        require_opacus()
    quiet = bool(opts.get("quiet"))
    out = Path(opts.get("out") or "fedgmt-out")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs: list[dict[str, Any]] = []
    for seed in seeds:
        for m in methods:
            run_cfg = cfg.replace(method=m, seed=seed)
            h = run(run_cfg, engine=engine, progress=not quiet)
            runs.append(
                {
                    "method": m, "seed": seed, "last_k_accuracy": h.last_k_accuracy(cfg.last_k),
                    "within_run_std": h.within_run_std(cfg.last_k),
                    "median_client_time_s": h.median_client_time(), **h.to_dict(),
                }
            )  # fmt: skip
    wall = time.perf_counter() - t0
    summary = {}
    for m in methods:
        vals = [r["last_k_accuracy"] for r in runs if r["method"] == m]
        times = [r["median_client_time_s"] for r in runs if r["method"] == m]
        summary[m] = {
            "last_k_mean": statistics.mean(vals),
            "last_k_std": statistics.pstdev(vals) if len(vals) > 1 else 0.0,
            "client_time_s": statistics.median(times),
            "diverged": any(r["diverged"] for r in runs if r["method"] == m),
        }
    result = {
        "config": cfg.to_dict(), "methods": methods, "seeds": seeds, "engine": engine,
        "versions": _versions(), "wall_time_s": wall, "summary": summary, "runs": runs,
        "command": "fedgmt " + " ".join(sys.argv[1:]),
    }  # fmt: skip
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    _plot(runs, out / "accuracy.png", f"{cfg.dataset}, {cfg.partition} {cfg.dirichlet_alpha:g}")
    print(
        f"{'method':<10} {'last-' + str(cfg.last_k) + ' acc':>12} {'std':>7} {'client s/round':>15}"
    )
    for m, s in summary.items():
        flag = "  DIVERGED" if s["diverged"] else ""
        print(
            f"{m:<10} {s['last_k_mean']:>12.4f} {s['last_k_std']:>7.4f} {s['client_time_s']:>15.3f}{flag}"
        )
    print(f"wall time {wall:.1f} s; wrote {out / 'results.json'} and {out / 'accuracy.png'}")
    return 0


def _cmd_partition(cfg: FedConfig, opts: dict[str, Any]) -> int:
    from .dataset import load_federated_data

    data = load_federated_data(cfg)
    stats = data.partition.stats()
    print(
        f"{stats['num_clients']} clients: sizes min {stats['min_size']} max {stats['max_size']} "
        f"mean {stats['mean_size']:.1f}; moved {stats['moved']}; "
        f"mean label entropy {stats['mean_label_entropy']:.3f}"
    )
    if opts.get("stats"):
        for i, (n, h) in enumerate(zip(data.partition.sizes, data.partition.label_hist)):
            print(f"client {i:>3}: n={n:>5} labels={h}")
    if opts.get("out"):
        Path(opts["out"]).mkdir(parents=True, exist_ok=True)
        (Path(opts["out"]) / "partition.json").write_text(json.dumps(stats, indent=1))
    return 0


def _cmd_check(cfg: FedConfig) -> int:
    from .dataset import load_federated_data
    from .guard import check_stability

    rep = check_stability(load_federated_data(cfg).partition.sizes, cfg, strict=False)
    print(
        f"kappa_max={rep.kappa_max:.3f} (client {rep.client}, {rep.steps} local steps): {rep.verdict}"
    )
    if rep.verdict == "unstable":
        print(rep.message)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fedgmt`` command; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
            warnings.filterwarnings("ignore", message=".*Full backward hook.*")
            return _dispatch(args)
    except (ValueError, FileNotFoundError, ImportError) as err:
        sys.stderr.write(f"fedgmt: error: {err}\n")
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    base: dict[str, Any] = {}
    if args.command == "demo" and args.quick:
        base = {"engine": "reference", "strategy": "fedavg,fedgmt", "rounds": 60}
    elif args.command == "demo":
        base = {"engine": "flower", "strategy": "fedavg,fedgmt", "rounds": 30}
    cfg_kw, opts = _resolve(args, base)
    cfg = _make_config(cfg_kw)
    if args.command == "partition":
        return _cmd_partition(cfg, opts)
    if args.command == "check":
        return _cmd_check(cfg.replace(method=_methods(opts, cfg.method)[0]))
    default = "all" if args.command == "compare" else cfg.method
    methods = _methods(opts, default)
    engine = str(opts.get("engine") or ("reference" if args.command == "compare" else "flower"))
    return _execute(cfg, methods, _seeds(opts, cfg), engine, opts)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
