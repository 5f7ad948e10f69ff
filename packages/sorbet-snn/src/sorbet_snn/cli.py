"""Command line: ``sorbet-snn distill|evaluate|export|energy|demo`` (on the repository's CLI contract).

Each subcommand is one call of :mod:`sorbet_snn.experiments` on its config (:mod:`sorbet_snn.config`,
whose fields are the flags); this module turns flags into the config and renders the result. Nothing
here imports torch or transformers before a command runs, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

from ._contract import CLI, Report, config_from, fmt_mean_std, say, table
from .config import DemoConfig, DistillConfig, EnergyConfig, EvaluateConfig, ExportConfig

DIST = "sorbet-snn"
STOPPED = 75  # exit status of a distill run stopped by --max-minutes (EX_TEMPFAIL: rerun it)


def cmd_distill(args: argparse.Namespace) -> Report:
    cfg = config_from(args, DistillConfig)
    from .distill import StageInterrupted
    from .experiments import run_distill

    try:
        res = run_distill(cfg, args.out, quiet=args.quiet, log=partial(say, args))
    except StageInterrupted as stop:  # --max-minutes ran out: state saved, rerun to continue
        # results.json now holds this stop, so the rerun needs --overwrite, which keeps every saved
        # stage and the stage in progress whose settings match
        message = f"{stop} with --overwrite"
        print(f"{DIST}: {message}", file=sys.stderr, flush=True)
        stopped = {"stage": stop.stage, "step": stop.step, "steps": stop.steps, "message": message}
        return Report({"stopped": stopped}, status=STOPPED)
    rows = [["majority class", f"{res.majority_baseline['main']:.4f}", "", ""]]
    for name, stage in res.stages.items():
        rows.append([name, f"{stage['dev']['main']:.4f}", str(stage.get("steps", "")),
                     f"{stage.get('agreement_with_S3', '')}"])  # fmt: skip
    header = ["model", f"{res.task} {cfg.dev_split} main metric", "steps", "agree(S3)"]
    text = table(rows, header)
    if res.energy is not None:
        e = res.energy
        text += (f"\nfiring rate {e['firing_rate']:.3f}; E_ANN {e['e_ann_pJ'] / 1e6:.3f} uJ, "
                 f"E_SNN {e['e_snn_pJ'] / 1e6:.3f} uJ, ratio {e['energy_ratio']:.2f}x")  # fmt: skip
    files = [res.snn_dir] if res.snn_dir is not None else []
    return Report(res.as_dict(), table=text, files=files)


def cmd_evaluate(args: argparse.Namespace) -> Report:
    cfg = config_from(args, EvaluateConfig)
    from .experiments import run_evaluate

    res = run_evaluate(cfg)
    rows = [[k, f"{v:.4f}"] for k, v in res.metrics.items()]
    header = [f"{res.task} {res.split} ({res.forward})", "value"]
    return Report(res.as_dict(), table=table(rows, header))


def cmd_export(args: argparse.Namespace) -> Report:
    cfg = config_from(args, ExportConfig)
    from .experiments import run_export

    res = run_export(cfg, args.out)
    rows = [[k, str(v)] for k, v in res.as_dict().items()]
    return Report(res.as_dict(), table=table(rows, ["export", "value"]), files=[res.folder])


def cmd_energy(args: argparse.Namespace) -> Report:
    cfg = config_from(args, EnergyConfig)
    from .experiments import run_energy

    res = run_energy(cfg)
    r = res.report
    rows = [[k, f"{v['energy_pJ'] / 1e6:.4f}"] for k, v in r["components"].items()]
    rows += [["E_SNN total", f"{r['e_snn_pJ'] / 1e6:.4f}"],
             ["E_ANN (FP BERT MACs)", f"{r['e_ann_pJ'] / 1e6:.4f}"]]  # fmt: skip
    text = table(rows, ["component", "uJ per inference"])
    text += (f"\nE_ANN / E_SNN = {r['energy_ratio']:.2f}x; firing rate {r['firing_rate']:.3f}; "
             f"T = {r['time_steps']}; {r['samples']} {res.task} {res.split} examples; "
             f"{r['constants_source']}")  # fmt: skip
    c = r["convention"]
    text += (f"\nSNN-literature convention (SOPs only): E_ANN / E_SNN = {c['energy_ratio']:.2f}x; "
             f"{c['acs_per_mac']:.2f} spikes per input element (break-even "
             f"{c['break_even_acs_per_mac']:.2f})")  # fmt: skip
    return Report(res.as_dict(), table=text)


def cmd_demo(args: argparse.Namespace) -> Report:
    cfg = config_from(args, DemoConfig)
    from .experiments import run_demo

    res = run_demo(cfg, quiet=args.quiet, log=partial(say, args))
    names = [("majority", "majority class"), ("bag_of_words", "bag-of-words logistic regression"),
             ("S0", "S0 FP teacher"), ("S1", "S1 W1A4 student"), ("S2", "S2 + PTsoftmax"),
             ("S3", "S3 + BSPN (Sorbet)"), ("S4", "S4 spiking Sorbet")]  # fmt: skip
    s = res.summary
    rows = [[label, fmt_mean_std([100 * v for v in s[k]])] for k, label in names]
    text = table(rows, [f"dev accuracy % ({len(res.seeds)} seed(s))", "value"])
    text += ("\nS4 agrees with S3 on " + fmt_mean_std([100 * v for v in s["agreement_S4_S3"]])
             + " % of dev predictions; E_ANN/E_SNN " + fmt_mean_std(s["energy_ratio_offset"])
             + "x (offset encoding), " + fmt_mean_std(s["energy_ratio_bipolar"]) + "x (bipolar)")  # fmt: skip
    return Report(res.as_dict(), table=text)


def build_cli() -> CLI:
    from importlib.metadata import version

    cli = CLI(DIST, version=version(DIST), description="Sorbet: distil a BERT-family model into a "
              "spiking language model (PTsoftmax, BSPN, binary weights, 4-bit spikes) and estimate "
              "its energy. Each command is one Python call: "
              "sorbet_snn.experiments.run_<command>(<Command>Config(...)).")  # fmt: skip
    cli.command("distill", cmd_distill, help="fine-tune the teacher if needed, distil S1-S3, "
                "export the spiking model (S4), report accuracy, spike rates and energy",
                description="Paper Algorithm 3 on a GLUE task folder; stages are saved in "
                "OUT/stages/<S> and a rerun resumes after them. Python: "
                "run_distill(DistillConfig(...), out).",
                writes=("results.json", "snn"), config=DistillConfig)  # fmt: skip
    cli.command("evaluate", cmd_evaluate, help="metrics of a saved model (a stage checkpoint or "
                "a spiking export) on a GLUE split", description="Python: "
                "run_evaluate(EvaluateConfig(...)).", config=EvaluateConfig)  # fmt: skip
    cli.command("export", cmd_export, help="export a trained quantised model (S3) as a spiking "
                "model folder", description="Python: run_export(ExportConfig(...), out).",
                writes=("export.json", "snn"), config=ExportConfig, devices=("cpu",))  # fmt: skip
    cli.command("energy", cmd_energy, help="op-count energy model of an exported model, spike "
                "rates measured on data, vs the FP teacher's MACs", description="Python: "
                "run_energy(EnergyConfig(...)).", config=EnergyConfig, devices=("cpu",))  # fmt: skip
    cli.command("demo", cmd_demo, help="the whole pipeline on the embedded synthetic task with "
                "a tiny teacher (offline, about a minute with --quick)", description="Python: "
                "run_demo(DemoConfig(...)).", config=DemoConfig, devices=("cpu",))  # fmt: skip
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
