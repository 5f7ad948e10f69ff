"""Command line: ``fedgmt run | compare | demo | partition | check``.

Built on the repository's CLI contract (``fedgmt._contract``): every subcommand is declared once in
:func:`build_cli`, every value is validated by its flag, bad input is one line on stderr with exit
code 2, each subcommand writes its own results file in ``--out`` and never replaces one without
``--overwrite``. Values are layered: ``FedConfig`` defaults < the subcommand's own defaults (demo)
< ``--preset`` < ``--config`` < flags on the command line.

Exit codes: 0 success, 2 bad input, 3 a run diverged (``run``/``compare``/``demo``) or ``check``
found the dual unstable, 1 an internal error (with its traceback).
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._contract import (
    CLI,
    Check,
    Report,
    UsageError,
    blame,
    choice_list,
    display_path,
    existing_path,
    fmt_mean_std,
    int_list,
    mean_std,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    require,
    say,
    table,
    unit_interval,
)
from .config import DATASETS, METHODS, PARTITIONS, FedConfig

__all__ = ["PRESETS", "build_cli", "main", "resolve_configs"]

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
"""Named settings (mirrored in ``conf/*.toml`` for ``flwr run``); --config and flags win."""

DIVERGED = 3
"""Exit code of a run that finished but diverged (and of ``check`` with an unstable verdict)."""

_DEFAULTS = FedConfig()


def _beta() -> Check:
    """beta > 0, with ``inf`` allowed (turns the dual off)."""

    def parse(text: str) -> float:
        value = float(text)
        if math.isnan(value) or value <= 0:
            raise ValueError("out of range")
        return value

    return Check(parse, "a number > 0 (inf turns the dual off)", "rate", ["0", "-1", "nan", "x"])


# flag -> (FedConfig field, argparse keywords, help without the default)
_FIELDS: dict[str, tuple[str, dict[str, Any], str]] = {
    # data
    "--dataset": ("dataset", {"choices": DATASETS}, "dataset (digits is embedded in scikit-learn)"),
    "--data-dir": (
        "data_dir",
        {"type": existing_path("dir"), "metavar": "DIR"},
        "folder of the real data: the MNIST IDX files or the AG News test.csv "
        "(read for --dataset mnist/agnews; default $ICML25_DATA/mnist/raw or .../ag_news)",
    ),
    "--max-train-samples": (
        "max_train_samples",
        {"type": positive_int()},
        "subsample the training set to this many samples (speed; default: all)",
    ),
    # partition
    "--num-clients": ("num_clients", {"type": positive_int()}, "number of clients N"),
    "--partition": ("partition", {"choices": PARTITIONS}, "partition scheme"),
    "--dirichlet": ("dirichlet_alpha", {"type": positive_float()}, "Dirichlet concentration alpha"),
    "--shards": ("shards_per_client", {"type": positive_int()}, "shards per client (shards)"),
    "--min-partition-size": (
        "min_partition_size",
        {"type": positive_int()},
        "minimum samples per client (moved from the largest client)",
    ),
    "--partition-seed": (
        "partition_seed",
        {"type": nonneg_int()},
        "seed of the partition (fixed across methods and seeds)",
    ),
    # local optimiser
    "--lr": ("lr", {"type": positive_float()}, "local learning rate eta_0"),
    "--lr-decay": (
        "lr_decay",
        {"type": unit_interval(low_open=True)},
        "per-round learning-rate decay d in (0, 1]",
    ),
    "--momentum": (
        "momentum",
        {"type": unit_interval(high_open=True)},
        "SGD momentum mu in [0, 1)",
    ),
    "--weight-decay": ("weight_decay", {"type": nonneg_float()}, "SGD weight decay lambda"),
    "--batch-size": ("batch_size", {"type": positive_int()}, "local batch size B"),
    "--local-epochs": ("local_epochs", {"type": positive_int()}, "local epochs E"),
    # method
    "--beta": ("beta", {"type": _beta()}, "dual penalty beta of fedgmt/feddyn/fedspeed (inf: off)"),
    "--prox": ("prox", {"type": nonneg_float()}, "optional FedGMT prox nu (not in the paper)"),
    "--gamma": ("gamma", {"type": nonneg_float()}, "FedGMT KL strength gamma"),
    "--tau": ("tau", {"type": positive_float()}, "FedGMT KL temperature tau"),
    "--ema-alpha": ("ema_alpha", {"type": unit_interval()}, "FedGMT EMA coefficient alpha"),
    "--dual-average": (
        "dual_average",
        {"choices": ("all", "active")},
        "server dual correction: H/N over all clients, or the mean h_i of the sampled ones",
    ),
    "--ema-location": ("ema_location", {"choices": ("server", "client")}, "where the EMA is kept"),
    "--rho": ("rho", {"type": nonneg_float()}, "SAM radius rho (fedsam, fedspeed)"),
    "--server-lr": ("server_lr", {"type": positive_float()}, "SCAFFOLD server learning rate"),
    # run
    "--fraction": (
        "fraction_train",
        {"type": unit_interval(low_open=True)},
        "fraction f of clients sampled per round",
    ),
    "--rounds": ("num_rounds", {"type": positive_int()}, "number of server rounds"),
    "--model": ("model", {"choices": ("auto", "mlp", "cnn")}, "model (cnn: MNIST only)"),
    "--on-divergence": (
        "on_divergence",
        {"choices": ("stop", "warn", "raise")},
        "on a diverged round: stop the run, warn and keep training while the numbers are finite, "
        "or raise (a traceback); stop and warn exit with code 3",
    ),
    "--last-k": (
        "last_k",
        {"type": positive_int()},
        "headline: mean accuracy of the last k rounds",
    ),
    # differential privacy
    "--dp-noise": ("dp_noise", {"type": nonneg_float()}, "DP noise multiplier sigma"),
    "--dp-clip": ("dp_clip", {"type": positive_float()}, "DP per-sample clipping norm C"),
    "--dp-delta": (
        "dp_delta",
        {"type": unit_interval(low_open=True, high_open=True)},
        "DP delta, below 1/n_i",
    ),
}

DATA = ("--dataset", "--data-dir", "--max-train-samples")
PARTITION = (
    "--num-clients",
    "--partition",
    "--dirichlet",
    "--shards",
    "--min-partition-size",
    "--partition-seed",
)
OPTIMISER = ("--lr", "--lr-decay", "--momentum", "--weight-decay", "--batch-size", "--local-epochs")
ALL_FIELDS = tuple(_FIELDS)


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def _add_fields(parser: argparse.ArgumentParser, flags: Sequence[str]) -> None:
    group = parser.add_argument_group("federated run options")
    for flag in flags:
        field, kwargs, text = _FIELDS[flag]
        default = getattr(_DEFAULTS, field)
        shown = "all" if default is None and field == "max_train_samples" else default
        suffix = "" if field == "data_dir" else f" (default: {shown})"
        group.add_argument(flag, default=None, help=text + suffix, **kwargs)


def _add_preset(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        default=None,
        help="named settings (see conf/*.toml); --config and flags override them (default: none)",
    )


def _add_strategy(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--strategy",
        "--method",
        type=choice_list(METHODS, allow_all=True),
        default=None,
        help=f"method(s), comma-separated: {', '.join(METHODS)} or all (default: {default})",
    )


def _add_engine(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--engine",
        choices=("reference", "flower"),
        default=None,
        help="reference (in-process loop) or flower (Flower's Ray simulation engine); both give "
        f"the same model (default: {default})",
    )


def _add_seeds(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seeds",
        type=int_list(0),
        default=None,
        help="comma-separated seeds of init and sampling, e.g. 0,1,2 (default: --seed)",
    )


def build_cli() -> CLI:
    """The ``fedgmt`` command line: every subcommand and flag, declared once."""
    cli = CLI(
        "fedgmt",
        description="FedGMT and federated baselines on Flower (ICML 2025).",
        track=("flwr", "ray", "opacus", "scikit-learn"),
    )
    p = cli.command(
        "run",
        _run,
        help="run one or more methods (Flower simulation engine by default)",
        writes=("results.json", "accuracy.png"),
    )
    _add_strategy(p, "fedgmt")
    _add_engine(p, "flower")
    _add_seeds(p)
    _add_preset(p)
    _add_fields(p, ALL_FIELDS)
    _add_run_switches(p)

    p = cli.command(
        "compare",
        _compare,
        help="methods x seeds on the same partition (reference engine by default)",
        writes=("compare.json", "compare-accuracy.png"),
    )
    _add_strategy(p, "all")
    _add_engine(p, "reference")
    _add_seeds(p)
    _add_preset(p)
    _add_fields(p, ALL_FIELDS)
    _add_run_switches(p)

    p = cli.command(
        "demo",
        _demo,
        help="FedAvg vs FedGMT on the embedded scikit-learn digits data",
        description="FedAvg vs FedGMT on the embedded scikit-learn digits data (Dirichlet 0.1, "
        "20 clients): 60 rounds on the reference engine with --quick (about 30 s on one core), "
        "else 30 rounds through Flower's simulation engine.",
        writes=("results.json", "accuracy.png"),
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="60 rounds on the in-process reference engine (default: off, 30 rounds on Flower)",
    )
    _add_engine(p, "reference with --quick, else flower")
    _add_seeds(p)

    p = cli.command("partition", _partition, help="partition statistics (sizes, label entropy)")
    _add_preset(p)
    _add_fields(p, (*DATA, *PARTITION))
    p.add_argument(
        "--stats", action="store_true", help="print every client's size and labels (default: off)"
    )

    p = cli.command(
        "check",
        _check,
        help="stability guard of the dual: kappa_max and the verdict (exit 3 if unstable)",
    )
    _add_strategy(p, "fedgmt")
    _add_preset(p)
    _add_fields(p, (*DATA, *PARTITION, *OPTIMISER, "--beta", "--prox"))
    return cli


def _add_run_switches(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-unstable",
        action="store_true",
        help="run even if the stability guard finds kappa_max >= 2 (default: off)",
    )
    p.add_argument(
        "--dp",
        action="store_true",
        help="DP-SGD on local training with Opacus, needs fedgmt[dp] (default: off)",
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fedgmt`` command; returns the exit code."""
    return build_cli().main(argv)


# ------------------------------------------------------------------------------------ resolving

_INVALID = re.compile(r"^invalid (\w+)=(.*?): expected (.*)$")


def _flag_of(field: str) -> str | None:
    for flag, (name, _, _) in _FIELDS.items():
        if name == field:
            return flag
    return None


def resolve_configs(
    args: argparse.Namespace, methods: Sequence[str], base: dict[str, Any] | None = None
) -> list[FedConfig]:
    """One validated :class:`FedConfig` per method: defaults < ``base`` < ``--preset`` < the values
    of ``--config`` and the command line (already merged by the parser).

    Raises :class:`UsageError` naming the flag when a combination is invalid."""
    values: dict[str, Any] = dict(base or {})
    preset = getattr(args, "preset", None)
    if preset:
        values.update(PRESETS[preset])
    for flag, (field, _, _) in _FIELDS.items():
        value = getattr(args, _dest(flag), None)
        if value is not None:
            values[field] = str(value) if isinstance(value, Path) else value
    values["seed"] = int(args.seed)
    for switch in ("allow_unstable", "dp"):
        if getattr(args, switch, False):
            values[switch] = True
    configs = []
    for method in methods:
        try:
            configs.append(FedConfig(**{**values, "method": method}))
        except ValueError as err:
            text = str(err)
            match = _INVALID.match(text)
            if match and _flag_of(match.group(1)):
                field, value, accepted = match.groups()
                raise UsageError(
                    _flag_of(field), f"expected {accepted}, got {value} (for {method})"
                ) from None
            raise UsageError("--dp" if "dp" in text else "--strategy", text) from None
    cfg = configs[0]
    if getattr(args, "data_dir", None) is not None and cfg.dataset not in ("mnist", "agnews"):
        raise UsageError(
            "--data-dir", f"is read only with --dataset mnist or agnews, not {cfg.dataset}"
        )
    return configs


def _methods(args: argparse.Namespace, default: Sequence[str]) -> list[str]:
    chosen = getattr(args, "strategy", None)
    return list(dict.fromkeys(chosen)) if chosen else list(default)


def _load(cfg: FedConfig) -> Any:
    """Load and partition the data: a bad file names --data-dir, an impossible split --num-clients."""
    from .dataset import load_dataset, load_federated_data

    with blame("--data-dir"):
        load_dataset(cfg)
    with blame("--num-clients"):
        return load_federated_data(cfg)


def _describe_data(cfg: FedConfig, data: Any) -> dict[str, Any]:
    from .dataset import default_data_dir

    if cfg.dataset == "digits":
        source = "scikit-learn digits (embedded, no download)"
    elif cfg.dataset == "synthetic":
        source = "FedProx Synthetic(1, 1), generated (natural per-client split)"
    else:
        where = Path(cfg.data_dir) if cfg.data_dir else default_data_dir(cfg.dataset)
        kind = "MNIST IDX files" if cfg.dataset == "mnist" else "AG News test.csv re-split 80/20"
        source = f"{kind} in {display_path(where)}"
    split = (
        "natural per-client split"
        if cfg.dataset == "synthetic"
        else f"{cfg.partition}"
        + (f"({cfg.dirichlet_alpha:g})" if cfg.partition == "dirichlet" else "")
    )
    line = (
        f"{source}: {len(data.y_train):,} train / {len(data.y_test):,} test samples, {split} over "
        f"{cfg.num_clients} clients"
    )
    return {
        "dataset": cfg.dataset,
        "source": source,
        "train_samples": len(data.y_train),
        "test_samples": len(data.y_test),
        "num_clients": cfg.num_clients,
        "partition": split,
        "text": line,
    }


def _preflight(args: argparse.Namespace, configs: Sequence[FedConfig]) -> Any:
    """Everything that can be refused before training: device, data, guard, DP."""
    from .guard import UnstableDualError, check_stability

    if args.device != "cpu":
        raise UsageError("--device", f"only cpu is implemented, got {args.device!r}")
    data = _load(configs[0])
    sizes = data.partition.sizes
    for cfg in configs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "oscillates" warnings come again from the run
                check_stability(sizes, cfg)
        except UnstableDualError as err:
            raise UsageError(
                None, f"{str(err).removeprefix('fedgmt: ')}; or pass --allow-unstable"
            ) from None
        if cfg.dp:
            require("opacus", "fedgmt", "dp", "--dp (DP-SGD)")
            if not cfg.dp_delta < 1.0 / max(sizes):
                raise UsageError(
                    "--dp-delta",
                    f"expected a value below 1/n_i = {1.0 / max(sizes):.3g} for the largest "
                    f"client ({max(sizes)} samples), got {cfg.dp_delta:g}",
                )
    return data


# ------------------------------------------------------------------------------------ running


def _execute(
    args: argparse.Namespace,
    configs: Sequence[FedConfig],
    seeds: Sequence[int],
    engine: str,
    plot: Path,
    data: Any,
) -> Report:
    from .run import run

    info = _describe_data(configs[0], data)
    say(args, f"data: {info['text']}")
    say(args, f"engine: {engine}; methods: {', '.join(c.method for c in configs)}; seeds: {seeds}")
    runs: list[dict[str, Any]] = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
        warnings.filterwarnings("ignore", message=".*Full backward hook.*")
        for seed in seeds:
            for cfg in configs:
                h = run(cfg.replace(seed=seed), engine=engine, progress=not args.quiet)
                runs.append(
                    {
                        "method": cfg.method,
                        "seed": seed,
                        "last_k_accuracy": h.last_k_accuracy(cfg.last_k),
                        "within_run_std": h.within_run_std(cfg.last_k),
                        "median_client_time_s": h.median_client_time(),
                        **h.to_dict(),
                    }
                )
    last_k = configs[0].last_k
    summary: dict[str, dict[str, Any]] = {}
    rows = []
    for cfg in configs:
        mine = [r for r in runs if r["method"] == cfg.method]
        vals = [r["last_k_accuracy"] for r in mine]
        mean, std = mean_std(vals)
        times = [r["median_client_time_s"] for r in mine]
        bad = [r for r in mine if r["diverged"]]
        summary[cfg.method] = {
            "last_k_mean": mean,
            "last_k_std": std,
            "num_seeds": len(vals),
            "client_time_s": statistics.median(times),
            "diverged": bool(bad),
        }
        status = (
            "ok"
            if not bad
            else "DIVERGED ("
            + ", ".join(f"seed {r['seed']} round {r['diverged_at_round']}" for r in bad)
            + ")"
        )
        rows.append(
            [
                cfg.method,
                fmt_mean_std([100 * v for v in vals]),
                f"{statistics.median(times):.3f}",
                status,
            ]
        )
    spread = f"mean ± sample std over {len(seeds)} seeds" if len(seeds) > 1 else f"seed {seeds[0]}"
    text = table(
        rows, ["method", f"last-{last_k} test acc % ({spread})", "client s/round", "status"]
    )
    diverged = [
        {
            "method": r["method"],
            "seed": r["seed"],
            "round": r["diverged_at_round"],
            "reason": r["divergence_reason"],
        }
        for r in runs
        if r["diverged"]
    ]
    for d in diverged:  # always shown, also with --quiet
        print(
            f"fedgmt: {d['method']} (seed {d['seed']}) DIVERGED: {d['reason']}",
            file=sys.stderr,
        )
    files = []
    if _plot(args, runs, plot, f"{info['source']}, {info['partition']}"):
        files.append(plot)
    results = {
        "fed_config": configs[0].to_dict(),
        "methods": [c.method for c in configs],
        "seeds": list(seeds),
        "engine": engine,
        "data": info,
        "diverged": bool(diverged),
        "diverged_runs": diverged,
        "summary": summary,
        "runs": runs,
    }
    return Report(results, table=text, files=files, status=DIVERGED if diverged else 0)


def _plot(args: argparse.Namespace, runs: list[dict[str, Any]], path: Path, title: str) -> bool:
    try:
        import matplotlib
    except ImportError:
        say(args, "no accuracy plot: matplotlib is not installed (pip install 'fedgmt[cli]')")
        return False
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
        ax.plot(range(1, length + 1), mean, label=f"{m} (mean of {len(curves)} seed(s))")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy")
    ax.set_title(title, fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def _seeds(args: argparse.Namespace) -> list[int]:
    return list(dict.fromkeys(args.seeds)) if args.seeds else [int(args.seed)]


def _run(args: argparse.Namespace) -> Report:
    configs = resolve_configs(args, _methods(args, [_DEFAULTS.method]))
    data = _preflight(args, configs)
    return _execute(
        args, configs, _seeds(args), args.engine or "flower", Path(args.out) / "accuracy.png", data
    )


def _compare(args: argparse.Namespace) -> Report:
    configs = resolve_configs(args, _methods(args, METHODS))
    data = _preflight(args, configs)
    plot = Path(args.out) / "compare-accuracy.png"
    return _execute(args, configs, _seeds(args), args.engine or "reference", plot, data)


def _demo(args: argparse.Namespace) -> Report:
    engine = args.engine or ("reference" if args.quick else "flower")
    base = {"num_rounds": 60 if args.quick else 30}
    configs = resolve_configs(args, ["fedavg", "fedgmt"], base)
    data = _preflight(args, configs)
    return _execute(args, configs, _seeds(args), engine, Path(args.out) / "accuracy.png", data)


def _partition(args: argparse.Namespace) -> Report:
    (cfg,) = resolve_configs(args, [_DEFAULTS.method])
    data = _load(cfg)
    stats = data.partition.stats()
    info = _describe_data(cfg, data)
    say(args, f"data: {info['text']}")
    rows = [
        [
            stats["num_clients"],
            stats["min_size"],
            stats["max_size"],
            f"{stats['mean_size']:.1f}",
            stats["moved"],
            f"{stats['mean_label_entropy']:.3f}",
        ]
    ]
    text = table(rows, ["clients", "min size", "max size", "mean size", "moved", "label entropy"])
    if args.stats:
        per = [
            [i, n, " ".join(str(c) for c in h)]
            for i, (n, h) in enumerate(zip(data.partition.sizes, data.partition.label_hist))
        ]
        text += "\n\n" + table(per, ["client", "size", "samples per label"])
    return Report(
        {
            "data": info,
            "partition": stats,
            "label_hist": data.partition.label_hist,
            "fed_config": cfg.to_dict(),
        },
        table=text,
    )


def _check(args: argparse.Namespace) -> Report:
    from .guard import check_stability

    (cfg,) = resolve_configs(args, _methods(args, [_DEFAULTS.method])[:1])
    data = _load(cfg)
    rep = check_stability(data.partition.sizes, cfg, strict=False)
    text = (
        f"kappa_max={rep.kappa_max:.3f} (client {rep.client}, {rep.steps} local steps): "
        f"{rep.verdict}"
    )
    if rep.verdict == "unstable":
        text += "\n" + rep.message
    return Report(
        {
            "method": cfg.method,
            "kappa_max": rep.kappa_max,
            "client": rep.client,
            "local_steps": rep.steps,
            "verdict": rep.verdict,
            "message": rep.message,
            "fed_config": cfg.to_dict(),
        },
        table=text,
        status=DIVERGED if rep.verdict == "unstable" else 0,
    )


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
