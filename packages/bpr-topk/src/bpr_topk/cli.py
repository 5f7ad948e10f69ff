"""Command line: ``bpr-topk {train,rank,evaluate,demo,baseline,toy}``, on the repository's CLI contract.

Each subcommand is one call of :mod:`bpr_topk.runs` on its config (:mod:`bpr_topk.config`, whose
fields are the flags); this module turns flags into the config, calls it and renders the result.
Parsing, ``--config`` files, output checks, results files and error lines come from
:mod:`bpr_topk._contract`. Nothing here imports torch before a command runs, so ``--help`` answers
at once.
"""

from __future__ import annotations

import argparse
import sys

from ._contract import CLI, Report, config_from, say, table
from .config import (
    BaselineConfig,
    DemoConfig,
    EvaluateConfig,
    RankConfig,
    ToyConfig,
    TrainRunConfig,
)

PROG = "bpr-topk"
# The models and losses build their tensors and generators on the CPU; --device cuda is refused with
# one line instead of failing in the middle of training (GPU support is not implemented yet).
CPU_ONLY = ("cpu",)


def _feature_aliases(p: argparse.ArgumentParser) -> None:
    """``--history-features`` / ``--raw-features``: short for ``--features history`` / ``raw``."""
    group = p.add_mutually_exclusive_group()
    for word in ("history", "raw"):
        group.add_argument(
            f"--{word}-features",
            dest="features",
            action="store_const",
            const=word,
            default=argparse.SUPPRESS,
            help=f"same as --features {word}",
        )


# ------------------------------------------------------------------------------------ commands


def cmd_train(args: argparse.Namespace) -> Report:
    cfg = config_from(args, TrainRunConfig)
    from .experiment import comparison_lines, format_table, summarise
    from .runs import run_train

    result = run_train(cfg, args.out, progress=not args.quiet)
    say(args, result.data_note)
    if result.warning is not None:
        print(f"{PROG}: {result.warning}", file=sys.stderr)
    fit = result.fit
    stop = (
        f"stopped early at epoch {fit.stopped_epoch}"
        if fit.stopped_epoch is not None
        else "ran the full budget"
    )
    lines = [
        f"\n{result.method} on {result.data} (K={result.K}), {cfg.split} split:",
        format_table(summarise(result.metrics)),
        f"checkpoint: epoch {fit.best_epoch} ({fit.selection}); {stop}",
        *comparison_lines(result.heuristic_comparison, result.method, result.K),
    ]
    return Report(result.as_dict(), table="\n".join(lines), files=result.files)


def cmd_rank(args: argparse.Namespace) -> Report:
    cfg = config_from(args, RankConfig)
    from .runs import run_rank

    result = run_rank(cfg, args.out)
    say(args, result.data_note)
    k = result.K
    lines = [
        f"time {t}: BPR@{k}={value:.3f}; top sites {', '.join(result.top_sites[t])}"
        for t, value in result.bpr_per_step.items()
    ]
    return Report(result.as_dict(), table="\n".join(lines), files=result.files)


def cmd_evaluate(args: argparse.Namespace) -> Report:
    cfg = config_from(args, EvaluateConfig, checkpoints=tuple(args.checkpoints) or None)
    from .experiment import format_table
    from .runs import run_evaluate

    result = run_evaluate(cfg, args.out)
    say(args, result.data_note)
    return Report(result.as_dict(), table=format_table(result.summary), files=result.files)


def cmd_demo(args: argparse.Namespace) -> Report:
    cfg = config_from(args, DemoConfig)
    from .experiment import format_table
    from .runs import run_demo

    result = run_demo(cfg, args.out, progress=not args.quiet)
    seeds, k, h = result.seeds, result.K, result.headline
    say(args, result.data_note)
    say(args, f"      {result.data_description}")
    say(args, f"seeds: {seeds} ({'quick' if cfg.quick else 'full'} run)")
    std_note = (
        f"mean ± sample std (ddof=1) over {len(seeds)} seeds"
        if len(seeds) > 1
        else "one seed, so no ± (run without --quick for 3 seeds)"
    )
    lines = [
        f"\n{result.data}, K={k}, {result.split} split ({std_note}; baselines are deterministic):",
        format_table(result.summary),
        f"DAML − NLL-only: ΔBPR@{k} = {h['daml_minus_nll_only_bpr']:+.4f}, "
        f"ΔNLL = {h['daml_nll_change_pct']:+.1f} %; DAML − best baseline "
        f"({h['best_baseline']}): ΔBPR@{k} = {h['daml_minus_best_baseline_bpr']:+.4f}",
    ]
    return Report(result.as_dict(), table="\n".join(lines), files=result.files)


def _baseline_writes(args: argparse.Namespace) -> tuple[str, ...]:
    rule = getattr(args, "rule", "all")
    return ("baseline.json",) if rule == "all" else (f"baseline-{rule}.json",)


def cmd_baseline(args: argparse.Namespace) -> Report:
    cfg = config_from(args, BaselineConfig)
    from .runs import run_baseline

    result = run_baseline(cfg)
    say(args, result.data_note)
    k = result.K
    lines = [f"heuristics on {result.data} (K={k}), {cfg.split} split (deterministic, one value):"]
    cells = [
        [r["method"], f"{r['bpr']:.4f}", f"{r['mae']:.4f}", f"{r['rmse']:.4f}", r["source"]]
        for r in result.heuristics
    ]
    lines.append(table(cells, ["method", f"BPR@{k}", "MAE", "RMSE", "lags from"]))
    chosen = result.chosen
    lines.append(
        f"best on the valid split: {chosen['method']} (valid BPR@{k} {chosen['valid_bpr']:.4f})"
    )
    return Report(result.as_dict(), table="\n".join(lines))


def cmd_toy(args: argparse.Namespace) -> Report:
    cfg = config_from(args, ToyConfig)
    from .runs import run_toy

    result = run_toy(cfg)
    head = (
        f"{'K':>3} {'mean rating':>12} {'ratio rating':>13} {'paper mean':>11} {'paper ratio':>12}"
    )
    lines = [head] + [
        f"{row['K']:>3} {row['mean']:>12.3f} {row['ratio']:>13.3f} "
        f"{row['paper_mean']:>11.3f} {row['paper_ratio']:>12.3f}"
        for row in result.table
    ]
    return Report(result.as_dict(), table="\n".join(lines))


# ---------------------------------------------------------------------------------------- parser


def build_cli() -> CLI:
    """The ``bpr-topk`` command line: every subcommand declared once, its flags from its config."""
    cli = CLI(
        PROG,
        description="Decision-aware (DAML) training and BPR@K evaluation for top-K site "
        "selection (Heuton et al., ICML 2025). Each command is one Python call: "
        "bpr_topk.runs.run_<command>(<Config>(...), out).",
    )
    p = cli.command(
        "train",
        cmd_train,
        help="fit a forecaster (daml | nll | bpr | spo+ | pg) and save model.pt",
        description="Fit a forecaster on a six-CSV folder or a named dataset, score it beside the "
        "heuristic family and save model.pt. Python: run_train(TrainRunConfig(...), out).",
        writes=("results.json", "model.pt", "training.png"),
        devices=CPU_ONLY,
        config=TrainRunConfig,
    )
    _feature_aliases(p)
    p.add_argument(
        "--site-slopes",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="NegBin: learn the per-site random slopes on time (Eq. 15), or hold them at 0 with "
        "--no-site-slopes (random intercept only) (default: off with the history features, on "
        "with --raw-features)",
    )
    p = cli.command(
        "rank",
        cmd_rank,
        help="rank sites from a saved model (ratio or mean rule) into ranking.csv",
        description="Rank the sites of one split with a model.pt from train. Python: "
        "run_rank(RankConfig(...), out).",
        writes=("rank.json", "ranking.csv"),
        devices=CPU_ONLY,
        config=RankConfig,
    )
    _feature_aliases(p)
    p = cli.command(
        "evaluate",
        cmd_evaluate,
        help="BPR@K, NLL and MAE of saved models beside the naive baselines, with a Pareto plot",
        description="Score saved models beside the heuristic family. Python: "
        "run_evaluate(EvaluateConfig(...), out).",
        writes=("evaluate.json", "evaluate_pareto.png"),
        devices=CPU_ONLY,
        config=EvaluateConfig,
    )
    _feature_aliases(p)
    p.add_argument(
        "--checkpoints",
        nargs="*",
        default=[],
        metavar="MODEL_PT",
        help="model.pt files to evaluate (default: none, only the baselines)",
    )
    cli.command(
        "demo",
        cmd_demo,
        help="NLL-only vs DAML vs BPR-only beside the naive baselines on embedded data",
        description="Train NLL-only, DAML (ε = 1) and BPR-only forecasters on embedded data and "
        "compare their test BPR@K and NLL with the naive baselines (historical average, last "
        "step, chance); writes results.json and pareto.png. The default data, hotspots, is a "
        "synthetic panel whose covariates carry the signal through a threshold the NegBin "
        "model cannot represent; synthetic7 is the paper's Sec. 5.1 experiment. Python: "
        "run_demo(DemoConfig(...), out).",
        writes=("results.json", "pareto.png"),
        devices=CPU_ONLY,
        config=DemoConfig,
    )
    p = cli.command(
        "baseline",
        cmd_baseline,
        help="BPR@K, MAE and RMSE of the heuristics last / avg / mean / zero (Table C.2 rows)",
        description="Score the non-learned heuristics of the paper's Table C.2 and their family: "
        "last (previous step), avg (mean of the last W steps, from the prev_*_<k>back lag columns "
        "where the data has them, else from the y history; --rule all scores W = 2, 3, 5, 10 and "
        "--window), mean (all-history mean) and zero (the chance decision: all scores tie, exact "
        "expected tie-breaking). 'best' is the member with the highest BPR on the valid split. "
        "Writes baseline.json (--rule all) or baseline-<rule>.json. Python: "
        "run_baseline(BaselineConfig(...)).",
        writes=_baseline_writes,
        devices=CPU_ONLY,
        config=BaselineConfig,
    )
    _feature_aliases(p)
    cli.command(
        "toy",
        cmd_toy,
        help="App. B.2 toy: mean vs ratio ranking, exact expected BPR",
        writes=("toy.json",),
        devices=CPU_ONLY,
        config=ToyConfig,
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bpr-topk`` command."""
    return build_cli().main(argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
