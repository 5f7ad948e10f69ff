"""Command line: ``fedgmt run | compare | demo | partition | check | evaluate``.

Built on the repository's CLI contract (``fedgmt._contract``): every subcommand is declared once in
:func:`build_cli`, every value is validated by its flag, bad input is one line on stderr with exit
code 2, each subcommand writes its own results file in ``--out`` and never replaces one without
``--overwrite``. Values are layered: ``FedConfig`` defaults < the subcommand's own defaults (demo)
< ``--preset`` < ``--config`` < flags on the command line.

Exit codes: 0 success, 2 bad input, 3 a run diverged (``run``/``compare``/``demo``) or ``check``
found the dual unstable, 1 an internal error (with its traceback).

``run`` checkpoints every run after each completed round (``<out>/checkpoints/``) and saves the
final global models (``<out>/models/``); ``run --resume DIR`` continues the runs checkpointed in
``DIR``; ``evaluate --model FILE`` scores a saved global model (or a checkpoint's).
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
from .config import DATASETS, METHODS, PARTITIONS, FedConfig, available_presets, preset_values

__all__ = ["build_cli", "main", "resolve_configs"]

TEXT_DATASETS = ("agnews", "agnews-minilm")
DATA_DATASETS = ("mnist", *TEXT_DATASETS)

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
        "(read for --dataset mnist/agnews/agnews-minilm; default $ICML25_DATA/mnist/raw or "
        ".../ag_news)",
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
    # faults and state
    "--fail-fraction": (
        "fail_fraction",
        {"type": unit_interval(high_open=True)},
        "simulated dropout: each sampled client fails mid-round with this probability (its "
        "update is lost, its state kept); 0 = off",
    ),
    "--dual-store": (
        "dual_store",
        {"choices": ("client", "server")},
        "where client duals/control variates live: in the client (Flower context.state) or on "
        "the server, sent with each message (stateless clients)",
    ),
    "--round-timeout": (
        "round_timeout",
        {"type": positive_float()},
        "Flower: seconds to wait for a round's replies; a client that has not replied by then "
        "is left out of the round",
    ),
    "--val-fraction": (
        "val_fraction",
        {"type": unit_interval(high_open=True)},
        "hold out this stratified fraction of the training data as a validation split "
        "(model selection; the test set is untouched)",
    ),
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
    "--central-dp": (
        "central_dp",
        {"choices": ("none", "server-fixed-clipping")},
        "Flower engine: wrap the strategy in Flower's DifferentialPrivacyServerSideFixedClipping "
        "(noise --dp-noise, clip --dp-clip; no accountant); refused for methods whose server "
        "state re-adds un-noised client updates (fedgmt, feddyn, fedspeed, scaffold)",
    ),
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
        choices=available_presets(),
        default=None,
        help="named settings, the files conf/<name>.toml that `flwr run --run-config` also reads; "
        "--config and flags override them (default: none)",
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
        description="Run one or more methods x seeds. Every run is checkpointed after each "
        "completed round in <out>/checkpoints/ (global model, EMA, H, duals, RNG, DP accountants) "
        "and its final global model is saved in <out>/models/; --resume DIR continues the runs "
        "of DIR from their last completed round (the result equals the uninterrupted run).",
        writes=_run_writes,
    )
    _add_strategy(p, "fedgmt")
    _add_engine(p, "flower")
    _add_seeds(p)
    _add_preset(p)
    _add_fields(p, ALL_FIELDS)
    _add_run_switches(p)
    p.add_argument(
        "--resume",
        type=existing_path("dir"),
        default=None,
        metavar="DIR",
        help="continue the runs checkpointed in DIR (a previous --out) from their last completed "
        "round, with DIR's configuration; only --rounds (to extend), --engine, --on-divergence "
        "and --quiet may be given besides (default: off)",
    )

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
        "evaluate",
        _evaluate,
        help="score a saved global model (<out>/models/*.pt of run, or a checkpoint) on the test "
        "split",
    )
    p.add_argument(
        "--model",
        type=existing_path("file"),
        default=None,
        metavar="FILE",
        help="the saved global model or checkpoint (required); its configuration rebuilds the "
        "architecture and the data split",
    )
    p.add_argument(
        "--data-dir",
        type=existing_path("dir"),
        default=None,
        metavar="DIR",
        help="folder of the real data, if not where the model was trained (default: the model's)",
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
        values.update(preset_values(preset))
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
    if getattr(args, "data_dir", None) is not None and cfg.dataset not in DATA_DATASETS:
        raise UsageError(
            "--data-dir",
            f"is read only with --dataset {', '.join(DATA_DATASETS)}, not {cfg.dataset}",
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
    *,
    store: Path | None = None,
    resume: bool = False,
) -> Report:
    """Run every method x seed. With ``store`` (a folder): checkpoint each run after every round
    in ``store/checkpoints/`` and save its final global model in ``store/models/``; with
    ``resume`` continue the checkpointed runs."""
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
                run_cfg = cfg.replace(seed=seed)
                name = f"{cfg.method}-seed{seed}"
                ckpt = store / "checkpoints" / f"{name}.pt" if store is not None else None
                h = run(
                    run_cfg, engine=engine, progress=not args.quiet, checkpoint=ckpt, resume=resume
                )
                if store is not None and h.final_arrays is not None:
                    from .checkpoint import save_model

                    save_model(store / "models" / f"{name}.pt", run_cfg, h.final_arrays)
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
        "failures": sum(len(r.get("failures", [])) for r in runs),
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


def _run_writes(args: argparse.Namespace) -> tuple[str, ...]:
    """Files of ``run`` in --out: results, plot, and (unless resuming into the same folder) the
    checkpoint and model folders, which are never replaced without --overwrite."""
    files = ("results.json", "accuracy.png")
    resume = getattr(args, "resume", None)
    if resume is not None and Path(resume).resolve() == Path(args.out).resolve():
        return files
    return (*files, "checkpoints", "models")


_RESUME_FLAGS = ("--rounds", "--engine", "--on-divergence")


def _resume_configs(args: argparse.Namespace) -> tuple[list[FedConfig], list[int], str]:
    """Configs, seeds and engine of the runs checkpointed in ``--resume DIR``."""
    from .checkpoint import load_checkpoint

    folder = Path(args.resume) / "checkpoints"
    files = sorted(folder.glob("*.pt")) if folder.is_dir() else []
    if not files:
        raise UsageError("--resume", f"{display_path(folder)} holds no checkpoints (*.pt)")
    given = [
        flag
        for flag in (*_FIELDS, "--strategy", "--seeds", "--preset", "--dp", "--allow-unstable")
        if flag not in _RESUME_FLAGS and getattr(args, _dest(flag), None) not in (None, False)
    ]
    if given:
        raise UsageError(
            given[0],
            "cannot be combined with --resume (the configuration comes from the checkpoints; "
            f"only {', '.join(_RESUME_FLAGS)} may be given)",
        )
    configs: dict[str, FedConfig] = {}
    seeds: list[int] = []
    with blame("--resume"):
        for f in files:
            ck = load_checkpoint(f)
            configs.setdefault(ck.cfg.method, ck.cfg)
            if ck.cfg.seed not in seeds:
                seeds.append(ck.cfg.seed)
    engine = args.engine or "reference"
    changes: dict[str, Any] = {}
    if args.rounds is not None:
        changes["num_rounds"] = int(args.rounds)
    if args.on_divergence is not None:
        changes["on_divergence"] = args.on_divergence
    from .methods import REGISTRY

    order = list(REGISTRY)
    out = [
        c.replace(**changes) for _, c in sorted(configs.items(), key=lambda kv: order.index(kv[0]))
    ]
    if engine == "flower" and out[0].dual_store != "server":
        raise UsageError(
            "--engine",
            "flower can resume only runs with --dual-store server (with client-held duals the "
            "state lived in the SuperNodes); resume with --engine reference",
        )
    return out, seeds, engine


def _run(args: argparse.Namespace) -> Report:
    store = Path(args.out)
    if args.resume is not None:
        configs, seeds, engine = _resume_configs(args)
        if store.resolve() != Path(args.resume).resolve():  # continue into a new folder
            import shutil

            shutil.copytree(Path(args.resume) / "checkpoints", store / "checkpoints")
        data = _preflight(args, configs)
        return _execute(
            args, configs, seeds, engine, store / "accuracy.png", data, store=store, resume=True
        )
    configs = resolve_configs(args, _methods(args, [_DEFAULTS.method]))
    data = _preflight(args, configs)
    return _execute(
        args, configs, _seeds(args), args.engine or "flower", store / "accuracy.png", data,
        store=store,
    )  # fmt: skip


def _evaluate(args: argparse.Namespace) -> Report:
    from .checkpoint import load_model
    from .metrics import evaluate
    from .model import make_model

    if args.device != "cpu":
        raise UsageError("--device", f"only cpu is implemented, got {args.device!r}")
    if args.model is None:
        raise UsageError("--model", "is required: a saved global model or checkpoint (.pt)")
    with blame("--model"):
        cfg, state_dict = load_model(args.model)
    if args.data_dir is not None:
        if cfg.dataset not in DATA_DATASETS:
            raise UsageError(
                "--data-dir", f"the model was trained on the embedded {cfg.dataset} data"
            )
        cfg = cfg.replace(data_dir=str(args.data_dir))
    data = _load(cfg)
    model = make_model(cfg, data.input_dim, data.num_classes, data.vocab_size)
    with blame("--model"):
        model.load_state_dict(state_dict)
    acc, loss = evaluate(model, data.x_test, data.y_test)
    info = _describe_data(cfg, data)
    say(args, f"data: {info['text']}")
    text = table(
        [[cfg.method, f"{100 * acc:.2f}", f"{loss:.4f}"]], ["method", "test acc %", "loss"]
    )
    return Report(
        {
            "model": display_path(args.model),
            "method": cfg.method,
            "test_accuracy": acc,
            "test_loss": loss,
            "test_samples": len(data.y_test),
            "data": info,
            "fed_config": cfg.to_dict(),
        },
        table=text,
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
