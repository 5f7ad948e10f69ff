"""Command line: ``curmgae pretrain | evaluate | demo`` (``curmgae <cmd> --help`` documents every flag).

Each subcommand is one call of :mod:`curmgae.experiments` on its config (:mod:`curmgae.config`, whose
fields are the flags; ``pretrain`` also takes every field of :class:`~curmgae.config.CurMGAEConfig`);
this module turns flags into the config, calls it and renders the result. Built on the repository's CLI
contract (``_contract.py``): the common flags, ``--config`` files, one-line errors with exit code 2, and
one results file per subcommand (``pretrain`` writes ``results.json`` and ``model.pt``,
``evaluate --task T`` writes ``evaluate-T.json``, ``demo`` writes ``results.json``), none of which is
replaced without ``--overwrite``. Nothing here imports torch before a command runs.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from ._contract import CLI, Report, add_config_flags, config_from, fmt_mean_std, say, table
from .config import DIFFICULTY_NAMES, CurMGAEConfig, DemoConfig, EvaluateConfig, PretrainConfig

DIST = "curmgae"
PLOT = "curriculum.png"
METRIC_LABELS = {
    "lp_auc": "LP AUC",
    "lp_ap": "LP AP",
    "nc_svm_acc": "NC acc (SVM 5-fold)",
    "nc_probe_acc": "NC acc (linear probe)",
}


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


def _value(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def cmd_pretrain(args: argparse.Namespace) -> Report:
    cfg = config_from(args, PretrainConfig, model=config_from(args, CurMGAEConfig))
    cfg.model_config()  # a flag set against --method's preset is refused before any loading
    from .experiments import run_pretrain

    result = run_pretrain(cfg, args.out, progress=not args.quiet)
    say(args, f"data: {result.data}")
    rows = [(k, _value(v)) for k, v in result.metrics.items()]
    files = [f for f in (result.checkpoint, result.plot) if f is not None]
    text = f"pretrain {cfg.method}:\n" + table(rows, ["metric", "value"])
    return Report(result.as_dict(), table=text, files=files)


def cmd_evaluate(args: argparse.Namespace) -> Report:
    cfg = config_from(args, EvaluateConfig)
    from .experiments import run_evaluate

    result = run_evaluate(cfg, args.out)
    say(args, f"data: {result.data}")
    rows = [(METRIC_LABELS.get(k, k), _value(v)) for k, v in result.metrics.items()]
    text = f"evaluate {result.method} ({cfg.task}):\n" + table(rows, ["metric", "value"])
    return Report(result.as_dict(), table=text)


def cmd_demo(args: argparse.Namespace) -> Report:
    cfg = config_from(args, DemoConfig)
    from .experiments import run_demo

    result = run_demo(cfg, args.out, progress=not args.quiet)
    seeds = result.seeds
    say(
        args,
        f"data: {result.data}; {len(seeds)} training seed(s) {seeds}, {result.epochs} epochs, "
        f"graph seed {cfg.seed}",
    )
    if result.trace:
        base = result.base_shares
        say(
            args,
            "curriculum of the first seed (shares of the difficulty-chosen masked edges; all training "
            f"edges: easy {base['easy']:.2f}, medium {base['medium']:.2f}, hard {base['hard']:.2f}):\n"
            + table(
                curriculum_rows(result.trace),
                ["S-update", "epoch", "lambda", "K_t", "cap", *DIFFICULTY_NAMES],
            ),
        )
    spread = (
        "mean ± sample std (ddof=1) over the seeds"
        if len(seeds) > 1
        else "one seed, so no spread is shown"
    )
    header = ["method", *METRIC_LABELS.values(), "median epoch (s)"]
    rows = [
        (
            m,
            *(fmt_mean_std([100 * x for x in vals[k]]) for k in METRIC_LABELS),
            fmt_mean_std(vals["median_epoch_s"], digits=3),
        )
        for m, vals in result.per_seed.items()
    ]
    title = f"demo on {result.data}: {len(seeds)} seed(s), in % ({spread})"
    files = [result.plot] if result.plot is not None else []
    return Report(result.as_dict(), table=title + "\n" + table(rows, header), files=files)


def build_cli() -> CLI:
    from importlib.metadata import version

    cli = CLI(
        DIST,
        description="Cur-MGAE: masked graph autoencoder with a structure-aware curriculum "
        "(ICML 2025). Subcommands: pretrain, evaluate, demo. Each is one Python call: "
        "curmgae.experiments.run_<command>(<Command>Config(...)).",
        version=version(DIST),
        track=("torch-geometric", "scikit-learn"),
    )
    p = cli.command(
        "pretrain",
        cmd_pretrain,
        help="learn node embeddings without labels; writes results.json and model.pt",
        description="Pretrain Cur-MGAE (Algorithm 1) or a baseline on a graph; writes results.json "
        "(metrics, config, curriculum trace), model.pt for 'evaluate' and curriculum.png. Python: "
        "run_pretrain(PretrainConfig(..., model=CurMGAEConfig(...)), out).",
        writes=("results.json", "model.pt", PLOT),
        devices=("cpu",),
        config=PretrainConfig,
    )
    add_config_flags(p, CurMGAEConfig)
    cli.command(
        "evaluate",
        cmd_evaluate,
        help="score a pretrained model: link prediction and/or node classification",
        description="Evaluate model.pt from 'pretrain' on the same split; writes "
        "evaluate-<task>.json (link, node or both) beside pretrain's results.json. Python: "
        "run_evaluate(EvaluateConfig(...), out).",
        writes=lambda a: (f"evaluate-{a.task}.json",),
        devices=("cpu",),
        config=EvaluateConfig,
    )
    cli.command(
        "demo",
        cmd_demo,
        help="embedded synthetic graph with planted easy/hard edges: curriculum, Cur-MGAE vs "
        "random masking vs GAE",
        description="Runs on the embedded synthetic graph (no download) and says so; prints the "
        "curriculum and the metrics of Cur-MGAE, the random-mask backbone and PyG's GAE. Python: "
        "run_demo(DemoConfig(...), out).",
        writes=("results.json", PLOT),
        devices=("cpu",),
        config=DemoConfig,
    )
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
