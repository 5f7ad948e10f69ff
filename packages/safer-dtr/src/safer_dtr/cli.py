"""Command line: ``safer-dtr train | recommend | evaluate | generate | demo``.

Each subcommand is one call of :mod:`safer_dtr.jobs` on its config (:mod:`safer_dtr.config`, whose
fields are the flags); this module turns flags into the config, shows a progress bar and renders the
result. Parsing, ``--config`` files, output checks, results files and error lines come from the CLI
contract (``_contract.py``). Nothing here imports torch before a command runs, so ``--help`` answers at
once.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._contract import CLI, Report, config_from, progress, say, table
from .config import DemoConfig, EvaluateConfig, GenerateConfig, RecommendConfig, TrainRunConfig

DIST = "safer-dtr"
METRIC_HEADER = [
    "method",
    "micro-AUC",
    "macro-AUC",
    "HR@3",
    "MRR@3",
    "MRR@3 (hits only)",
    "accuracy",
]


def _verdict(mean: float, se: float, alpha: float) -> str:
    if mean <= alpha:
        return "yes"
    return "within 2 MC s.e." if mean <= alpha + 2 * se else "**no**"


def _metric_rows(metrics: dict[str, Any], group: str = "survivors") -> list[list[str]]:
    keys = ("micro_auc", "macro_auc", "hr@3", "mrr@3", "mrr@3_hits_only", "accuracy")
    return [[name, *(f"{m[group][k]:.3f}" for k in keys)] for name, m in metrics.items()]


def _model_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {"use_notes": False} if getattr(args, "no_notes", False) else {}


def _say_all(args: argparse.Namespace, messages: list[str]) -> None:
    for line in messages:
        if line:
            say(args, line)


def cmd_train(args: argparse.Namespace) -> Report:
    cfg = config_from(args, TrainRunConfig, **_model_overrides(args))
    from .jobs import run_train

    kw = cfg.train_kwargs()
    total = kw["epochs_stage1"] + kw["epochs_refine"] + kw["epochs_finetune"]
    with progress(total, "train", args.quiet, lazy=True) as bar:
        result = run_train(cfg, args.out, bar.update)
    _say_all(args, result.messages)
    tab = table(_metric_rows(result.results["metrics_test"]), METRIC_HEADER)
    return Report(result.as_dict(), table="test survivors (1 seed)\n" + tab, files=result.files)


def cmd_recommend(args: argparse.Namespace) -> Report:
    cfg = config_from(args, RecommendConfig)
    from .jobs import run_recommend

    result = run_recommend(cfg, args.out)
    _say_all(args, result.messages)
    r = result.results
    rows = [["released", f"{r['n_released']} / {r['n_test']}"],
            ["realized FDP", f"{r['realized_fdp']:.3f}"], ["power", f"{r['power']:.3f}"],
            ["null fraction", f"{r['null_fraction']:.3f}"]]  # fmt: skip
    tab = table(rows, [f"α = {cfg.alpha}, c = {cfg.c}", "value"])
    return Report(result.as_dict(), table=tab, files=result.files)


def cmd_evaluate(args: argparse.Namespace) -> Report:
    cfg = config_from(args, EvaluateConfig)
    from .jobs import run_evaluate

    epochs = 30 if cfg.mortality_epochs is None else cfg.mortality_epochs
    with progress(epochs, "outcome model", args.quiet, lazy=True) as bar:
        result = run_evaluate(cfg, args.out, bar.update)
    _say_all(args, result.messages)
    r = result.results
    rows = []
    for c, s in r["selection"].items():
        for a, f, se, pw in zip(s["alphas"], s["fdr"]["mean"], s["fdr"]["se"], s["power"]["mean"]):
            rows.append([c, f"{a:g}", f"{f:.3f}", f"{pw:.3f}", _verdict(f, se, a)])
    reps = cfg.reps or 500
    tab = (
        table(_metric_rows(r["metrics_test"]), METRIC_HEADER)
        + "\n\n"
        + table(rows, ["c", "α", f"mean FDR ({reps} splits)", "mean power", "FDR ≤ α"])
    )
    return Report(result.as_dict(), table=tab)


def cmd_generate(args: argparse.Namespace) -> Report:
    cfg = config_from(args, GenerateConfig)
    from .jobs import run_generate

    result = run_generate(cfg, args.out)
    rows = [[k, f"{v:.3f}" if isinstance(v, float) else str(v)]
            for k, v in result.results.items() if k != "notice"]  # fmt: skip
    return Report(
        result.as_dict(), table=table(rows, ["synthetic cohort", "value"]), files=result.files
    )


def cmd_demo(args: argparse.Namespace) -> Report:
    cfg = config_from(args, DemoConfig, **_model_overrides(args))
    from .jobs import demo_ticks, run_demo

    with progress(demo_ticks(cfg), "demo", args.quiet, lazy=True) as bar:
        result = run_demo(cfg, args.out, bar.update)
    _say_all(args, result.messages)
    res = result.results
    lines = [f"test survivors, 1 seed ({res['split_sizes']['test']} test stays; {res['notice']})",
             table(_metric_rows(res["metrics"]), METRIC_HEADER), ""]  # fmt: skip
    rows = []
    for c, s in res["selection"].items():
        for a, f, se, pw, pf in zip(s["alphas"], s["fdr"]["mean"], s["fdr"]["se"], s["power"]["mean"],
                                    s["random_fdr_mean"]):  # fmt: skip
            rows.append([c, f"{a:g}", f"{f:.3f}", f"{pw:.3f}", f"{pf:.3f}", _verdict(f, se, a)])
    reps = next(iter(res["selection"].values()))["reps"] if res["selection"] else 0
    lines += [f"conformal selection over {reps} random splits (true κ; random = same-size random pick)",
              table(rows, ["c", "α", "mean FDR", "mean power", "random FDR", "FDR ≤ α"]), ""]  # fmt: skip
    m = res["mortality"]
    mrows = [[k, f"{v['model_cf']:.3f}", f"{v.get('oracle_cf', float('nan')):.3f}"]
             for k, v in m["methods"].items()]  # fmt: skip
    lines += [f"mortality: observed {m['observed']:.3f}, oracle of observed actions "
              f"{m.get('oracle_observed', float('nan')):.3f}",
              table(mrows, ["policy", "outcome-model estimate", "oracle (ground truth)"])]  # fmt: skip
    k = res["kappa"]["test"]
    lines.append(f"κ test: survivors {k['mean_survivors']:.3f}, deceased {k['mean_deceased']:.3f}")
    return Report(res, table="\n".join(lines))


def _no_notes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-notes", action="store_true", help="SAFER-N: no notes stream (default: off)"
    )


def build_cli() -> CLI:
    cli = CLI(DIST, description="SAFER: calibrated risk-aware multimodal treatment recommendation "
              "with conformal selection (Shen, Ye et al., ICML 2025). Each command is one Python call: "
              "safer_dtr.jobs.run_<command>(<Command>Config(...), out).")  # fmt: skip
    p = cli.command(
        "train", cmd_train, help="train SAFER (stage 1, refinement head, risk-aware fine-tuning)",
        description="Train SAFER on a cohort's training split and save model.pt (with the fitted "
        "preprocessing, the split and the encoder spec). Reports test metrics against the rules. "
        "Python: run_train(TrainRunConfig(...), out).",
        writes=("results.json", "model.pt"), config=TrainRunConfig,
    )  # fmt: skip
    _no_notes(p)
    cli.command(
        "recommend", cmd_recommend, help="recommend treatments, released where conformal selection "
        "certifies low uncertainty at FDR level α",
        description="Fit κ̂ on part of the calibration split, compute conformal p-values (Eq. 8) of the "
        "test stays and release recommendations selected by Benjamini-Hochberg at level α. "
        "Python: run_recommend(RecommendConfig(...), out).",
        writes=("recommend.json", "recommendations.csv"), config=RecommendConfig,
    )  # fmt: skip
    cli.command(
        "evaluate", cmd_evaluate, help="metrics, FDR/power curves over random splits, counterfactual mortality",
        description="Evaluate a checkpoint on its test split: recommendation metrics (survivors, all, "
        "deceased), realized FDR and power of conformal selection over (α, c) grids and repeated "
        "splits, and counterfactual mortality via an outcome model (plus the oracle on synthetic "
        "data). Python: run_evaluate(EvaluateConfig(...), out).",
        writes=("evaluate.json",), config=EvaluateConfig,
    )  # fmt: skip
    cli.command(
        "generate", cmd_generate, help="write a synthetic cohort (mimictable.csv, notes.csv, oracle.npz)",
        description="Draw the synthetic sepsis cohort and write it as an AI-Clinician table with "
        "notes and the generator's oracle. Python: run_generate(GenerateConfig(...), out).",
        writes=("generate.json", "mimictable.csv", "notes.csv", "oracle.npz"), config=GenerateConfig,
    )  # fmt: skip
    p = cli.command(
        "demo", cmd_demo, help="the whole pipeline on the synthetic cohort (offline)",
        description="Generate the synthetic cohort, train SAFER and baselines, evaluate metrics, "
        "conformal selection curves and counterfactual mortality (learned model and oracle). "
        "--quick: 800 stays, hashing encoder, d_model 64, epochs 10/10/5, 100 splits. "
        "Python: run_demo(DemoConfig(...)).",
        writes=("results.json",), config=DemoConfig,
    )  # fmt: skip
    _no_notes(p)
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
