"""Command line: ``cft-calibration evaluate | finetune | regime | demo`` (on the repository's contract).

Each subcommand is one call of :mod:`cft_calibration.experiments` on its config
(:mod:`cft_calibration.config`, whose fields are the flags); this module turns flags into the config,
shows progress bars and renders the result. Nothing here imports torch before a command runs, so
``--help`` answers at once and bad input fails in well under a second.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import _contract as C
from .config import HUMANITIES, DemoConfig, EvaluateConfig, FinetuneConfig, RegimeConfig

__all__ = ["HUMANITIES", "build_cli", "main"]

DIST = "cft-calibration"
METRIC_HEADER = ["model", "acc", "ECE", "ECE(mass)", "cw-ECE", "Brier", "NLL", "mean conf"]


def _bars(args: argparse.Namespace) -> Any:
    return lambda total, desc: C.progress(total, desc, args.quiet, lazy=True)


def _metric_row(name: str, m: dict[str, float]) -> list[str]:
    keys = ("accuracy", "conf_ece", "conf_ece_mass", "cw_ece", "brier", "nll", "mean_confidence")
    return [name, *(f"{m[k]:.4f}" for k in keys)]


def cmd_evaluate(args: argparse.Namespace) -> C.Report:
    cfg = C.config_from(args, EvaluateConfig)
    from .experiments import run_evaluate

    res = run_evaluate(cfg, args.out, _bars(args))
    rows = [_metric_row("model", res.metrics)]
    if res.temperature_scaling is not None:
        ts = res.temperature_scaling
        rows.append(_metric_row(f"TS (T={ts['temperature']:.3f})", ts["metrics"]))
    table = C.table(rows, METRIC_HEADER)
    head = f"data: {res.data}, {res.n_items} questions"
    return C.Report(res.as_dict(), table=f"{head}\n{table}", files=res.files)


def cmd_finetune(args: argparse.Namespace) -> C.Report:
    cfg = C.config_from(args, FinetuneConfig)
    from .experiments import run_finetune

    res = run_finetune(cfg, args.out, _bars(args))
    rows = []
    for name in res.before:
        rows.append(_metric_row(f"{name}: before", res.before[name]))
        rows.append(_metric_row(f"{name}: after {res.method}", res.after[name]))
    head = (
        f"{res.method} on {res.data}: {res.n_train} train / {res.n_val} val questions, "
        f"selected epoch {res.selected_epoch}"
    )
    return C.Report(res.as_dict(), table=f"{head}\n{C.table(rows, METRIC_HEADER)}", files=res.files)


def cmd_regime(args: argparse.Namespace) -> C.Report:
    cfg = C.config_from(args, RegimeConfig)
    from .experiments import run_regime

    report = run_regime(cfg, args.out, _bars(args)).as_dict()
    a = report["all"]
    rows = [
        ["accuracy", f"{a['accuracy']:.4f}"],
        ["conf-ECE", f"{a['conf_ece']:.4f}"],
        ["cw-ECE", f"{a['cw_ece']:.4f}"],
        ["mean confidence - accuracy", f"{a['overconfidence_gap']:+.4f}"],
        ["held-out conf-ECE before TS", f"{report['heldout_conf_ece_before_ts']:.4f}"],
        ["held-out conf-ECE after TS", f"{report['heldout_conf_ece_after_ts']:.4f}"],
        ["noise threshold (calibrated predictor)", f"{report['noise_threshold']:.4f}"],
        ["regime", report["regime"]],
        ["suggested method", report["suggested_method"]],
    ]
    return C.Report(report, table=C.table(rows, ["quantity", "value"]) + "\n" + report["note"])


def cmd_demo(args: argparse.Namespace) -> C.Report:
    cfg = C.config_from(args, DemoConfig)
    from .experiments import run_demo

    res = run_demo(cfg, args.out, _bars(args))
    rows = []
    for m, s in res.summary.items():
        row = [m]
        for split in res.runs[0]["methods"][m]:
            for key in ("accuracy", "conf_ece", "cw_ece"):
                if key != "cw_ece" or split == "test":
                    row.append(C.fmt_mean_std(s[f"{split}_{key}"], 3))
        rows.append(row)
    header = ["method", "test acc", "test ECE", "test cw-ECE"]
    if "ood" in res.runs[0]["methods"]["base"]:
        header += ["OOD acc", "OOD ECE"]
    n = len(res.seeds)
    note = f"{n} seed(s)" + ("" if n > 1 else " (single seed: no spread shown)")
    exact = " (embedded, exact ground truth)" if cfg.data == "synthetic-feature" else ""
    head = f"data: {res.data['name']}{exact}; {note}; quick={res.quick}"
    return C.Report(res.as_dict(), table=f"{head}\n{C.table(rows, header)}", files=res.files)


def build_cli() -> C.CLI:
    cli = C.CLI(
        DIST,
        description="Calibration of (aligned) language models on multiple-choice questions: metrics, "
        "temperature scaling, CFT and RCFT (Xiao et al., ICML 2025). Each command is one Python "
        "call: cft_calibration.run_<command>(<Command>Config(...)).",
    )
    cli.command(
        "evaluate",
        cmd_evaluate,
        help="accuracy, conf-ECE, class-wise ECE, Brier, NLL and reliability diagrams of a model",
        description="Scores a model on multiple-choice data; with --calibration-data also the "
        "temperature-scaled metrics. Python: run_evaluate(EvaluateConfig(...)).",
        writes=("evaluate.json", "evaluate_reliability.png", "evaluate_classwise.png"),
        config=EvaluateConfig,
    )
    cli.command(
        "finetune",
        cmd_finetune,
        help="fine-tune a model with CFT or RCFT (LoRA optional) and report calibration before/after",
        description="CFT (SFT with checkpoint selection) or RCFT (SFT + EM-ECE regulariser); a "
        "run whose loss turns non-finite stops with one line. Python: "
        "run_finetune(FinetuneConfig(...), out).",
        writes=("finetune.json", "finetune_reliability.png", "model"),
        config=FinetuneConfig,
    )
    cli.command(
        "regime",
        cmd_regime,
        help="calibration diagnostics and the empirical calibratable-regime witness",
        description="Reports accuracy, conf-ECE, cw-ECE, the overconfidence gap and the ECE that "
        "temperature scaling reaches on a held-out half. The paper's regime bounds are not "
        "implemented (their formulas are unknown to this package): the verdict is "
        "'calibratable (empirical witness)' or 'undetermined', never 'non-calibratable'. "
        "Python: run_regime(RegimeConfig(...)).",
        config=RegimeConfig,
    )
    cli.command(
        "demo",
        cmd_demo,
        help="base SFT -> DPO alignment -> TS / label smoothing / CFT / long SFT / RCFT on cached features",
        description="The demonstration pipeline on the embedded data or MMLU / OpenBookQA (MiniLM "
        "features). Python: run_demo(DemoConfig(...)).",
        writes=("results.json", "demo_reliability.png"),
        config=DemoConfig,
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
