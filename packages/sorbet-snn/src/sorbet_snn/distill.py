"""Multi-step knowledge distillation (paper Algorithm 3): S0 fine-tunes the FP teacher, S1 distils it
into a W1A4 student, S2 adds PTsoftmax, S3 adds BSPN, S4 exports the spiking network; each stage
starts from and distils from the previous one, and is saved so a rerun resumes after it. A stage in
progress saves a resumable state every ``save_every`` steps (and when its time budget runs out) in
``OUT/stages/<S>.partial``, so a rerun also continues inside a stage."""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._contract import progress
from .data import iterate_batches
from .modeling import SorbetForSequenceClassification, convert_teacher, to_snn
from .ops import BSPN

__all__ = [
    "PIPELINE_STAGES",
    "StageInterrupted",
    "StageSettings",
    "TeacherGateError",
    "evaluate",
    "init_distributed",
    "is_main_process",
    "kd_loss",
    "majority_baseline",
    "metrics_for",
    "param_groups",
    "rep_loss",
    "run_pipeline",
    "soft_cross_entropy",
    "stage_progress",
    "teacher_gate",
    "train_stage",
]

PIPELINE_STAGES = ("S0", "S1", "S2", "S3", "S4")
DISTILL_LOSSES = ("logit_rep", "rep")
# S1 split into three steps (``PipelineSettings.split_s1``): binary weights with FP activations and the
# teacher's GELU/tanh (S1a), + 4-bit activations (S1b), + the ReLU swaps (S1 itself)
S1_SPLIT: dict[str, dict[str, Any]] = {
    "S1a": {"act_bits": 32, "ffn_act": "gelu", "pooler_act": "tanh"},
    "S1b": {"ffn_act": "gelu", "pooler_act": "tanh"},
}


# ----------------------------------------------------------------------------------- losses


def soft_cross_entropy(student: Tensor, teacher: Tensor, tau: float = 1.0) -> Tensor:
    """The official "soft cross-entropy": ``mean over B x C of -softmax(t/tau) * log_softmax(s/tau)``
    (it also averages over classes)."""
    return (-torch.softmax(teacher / tau, dim=-1) * F.log_softmax(student / tau, dim=-1)).mean()


def rep_loss(
    student_hidden: tuple[Tensor, ...] | list[Tensor],
    teacher_hidden: tuple[Tensor, ...] | list[Tensor],
    mask: Tensor | None = None,
) -> Tensor:
    """``sum_{l=0}^{N} MSE(h_l^S, h_l^T)`` over the N+1 hidden states (each a mean over elements;
    over real tokens only when ``mask`` is given)."""
    if len(student_hidden) != len(teacher_hidden):
        raise ValueError(
            f"student has {len(student_hidden)} hidden states, teacher {len(teacher_hidden)}: "
            "teacher and student need the same number of layers"
        )
    total = student_hidden[0].new_zeros(())
    for hs, ht in zip(student_hidden, teacher_hidden):
        if hs.shape != ht.shape:
            raise ValueError(
                f"hidden-state shapes differ (student {tuple(hs.shape)}, teacher "
                f"{tuple(ht.shape)}): teacher and student need the same hidden size"
            )
        if mask is None:
            total = total + F.mse_loss(hs, ht)
        else:
            m = mask[..., None].to(hs.dtype)
            total = total + ((hs - ht) ** 2 * m).sum() / (m.sum() * hs.shape[-1])
    return total


def kd_loss(
    student_out: Any,
    teacher_out: Any,
    *,
    regression: bool = False,
    tau: float = 1.0,
    regression_logit_loss: str = "mse",
    mask: Tensor | None = None,
    terms: str = "logit_rep",
) -> tuple[Tensor, dict[str, float]]:
    """``L = L_logit + L_rep`` (``terms="logit_rep"``, the official flags: logits and hidden states,
    no attention term), or ``L = L_rep`` alone (``terms="rep"``, the official script's run command)."""
    if terms not in DISTILL_LOSSES:
        raise ValueError(f"terms={terms!r}; accepted: {', '.join(DISTILL_LOSSES)}")
    s, t = student_out.logits, teacher_out.logits.detach()
    if terms == "rep":
        logit = s.new_zeros(())
    elif regression:
        logit = F.mse_loss(s, t) if regression_logit_loss == "mse" else s.new_zeros(())
    else:
        logit = soft_cross_entropy(s, t, tau)
    rep = rep_loss(student_out.hidden_states, [h.detach() for h in teacher_out.hidden_states], mask)
    return logit + rep, {"logit": float(logit.detach()), "rep": float(rep.detach())}


# ---------------------------------------------------------------------------------- metrics


def _mcc(pred: Tensor, gold: Tensor) -> float:
    tp = float(((pred == 1) & (gold == 1)).sum())
    tn = float(((pred == 0) & (gold == 0)).sum())
    fp = float(((pred == 1) & (gold == 0)).sum())
    fn = float(((pred == 0) & (gold == 1)).sum())
    den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / den if den else 0.0


def _rank(x: Tensor) -> Tensor:
    order = torch.argsort(x)
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(len(x), dtype=x.dtype)
    for v in torch.unique(x):  # average ties
        idx = x == v
        ranks[idx] = ranks[idx].mean()
    return ranks


def _pearson(a: Tensor, b: Tensor) -> float:
    a, b = a - a.mean(), b - b.mean()
    den = float(a.norm() * b.norm())
    return float((a * b).sum()) / den if den else 0.0


def metrics_for(task: str, pred: Tensor, gold: Tensor) -> dict[str, float]:
    """GLUE metrics: CoLA MCC; STS-B Pearson/Spearman; MRPC/QQP accuracy and F1; else accuracy.
    ``main`` is the task's main metric (MRPC/QQP: mean of accuracy and F1; STS-B: mean of the two)."""
    if task == "STS-B":
        p = _pearson(pred.double(), gold.double())
        s = _pearson(_rank(pred.double()), _rank(gold.double()))
        return {"pearson": p, "spearman": s, "main": (p + s) / 2}
    acc = float((pred == gold).double().mean())
    out = {"accuracy": acc}
    if task == "CoLA":
        out["mcc"] = _mcc(pred, gold)
        out["main"] = out["mcc"]
    elif task in ("MRPC", "QQP"):
        tp = float(((pred == 1) & (gold == 1)).sum())
        prec = tp / max(float((pred == 1).sum()), 1.0)
        rec = tp / max(float((gold == 1).sum()), 1.0)
        out["f1"] = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        out["main"] = (acc + out["f1"]) / 2
    else:
        out["main"] = acc
    return out


def model_device(model: nn.Module) -> torch.device:
    """The device of ``model``'s parameters (CPU for a model without any)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def to_device(batch: dict[str, Tensor], device: torch.device) -> dict[str, Tensor]:
    """``batch`` with every tensor on ``device`` (the same dict when it is already there)."""
    if all(v.device == device for v in batch.values()):
        return batch
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


@torch.no_grad()
def predict(model: nn.Module, data: dict[str, Tensor], batch_size: int = 64) -> Tensor:
    """Predicted classes (or regression values) of ``model`` on encoded ``data`` (on the CPU; each
    batch runs on ``model``'s device)."""
    was = model.training
    model.eval()
    device = model_device(model)
    outs = []
    for batch in iterate_batches(data, batch_size):
        batch = to_device(batch, device)
        logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits
        outs.append((logits.squeeze(-1) if logits.shape[-1] == 1 else logits.argmax(-1)).cpu())
    model.train(was)
    return torch.cat(outs)


def evaluate(
    model: nn.Module, data: dict[str, Tensor], task: str, batch_size: int = 64
) -> tuple[dict[str, float], Tensor]:
    """Metrics and predictions of ``model`` on encoded ``data`` (which must hold ``labels``)."""
    pred = predict(model, data, batch_size)
    return metrics_for(task, pred, data["labels"]), pred


def majority_baseline(train_labels: Tensor, data: dict[str, Tensor], task: str) -> dict[str, float]:
    """The trivial baseline: always the most frequent training class (the training mean for STS-B)."""
    gold = data["labels"]
    if task == "STS-B":
        return {"pearson": 0.0, "spearman": 0.0, "main": 0.0}  # a constant has no correlation
    major = int(torch.bincount(train_labels.long()).argmax())
    return metrics_for(task, torch.full_like(gold, major), gold)


# ----------------------------------------------------------------------------- teacher gate


class TeacherGateError(ValueError):
    """The (fine-tuned) teacher is not better than the trivial baseline on validation, so distilling
    it would copy noise; ``report`` is the :func:`teacher_gate` dict."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        super().__init__(report["message"])


def teacher_gate(
    model: nn.Module,
    val: dict[str, Tensor],
    train_labels: Tensor,
    task: str,
    *,
    z: float = 1.645,
    who: str = "teacher",
) -> dict[str, Any]:
    """Is ``model`` better than the trivial baseline on ``val``, by more than ``z`` standard errors of
    that baseline on ``n`` validation examples (a one-sided test at 5 % for the default z)?

    - classification (not CoLA): accuracy against the best constant prediction on ``val``, the
      larger of the majority class of ``train_labels`` and the most frequent class of ``val``
      (on a near-balanced task such as RTE the training majority can be the validation minority,
      so it alone would pass a teacher at chance); standard error ``sqrt(b (1 - b) / n)`` for a
      baseline accuracy ``b``;
    - CoLA: Matthews correlation against 0 (the majority class's MCC), standard error ``1/sqrt(n)``;
    - STS-B (regression): the mean of Pearson and Spearman against 0 (a constant has no correlation),
      standard error ``1/sqrt(n)``.

    Returns a dict with ``metric``, ``value``, ``baseline``, ``margin``, ``n``, ``passed`` and a
    one-line ``message`` (:func:`gate_report` on the model's validation metrics)."""
    metrics, _ = evaluate(model, val, task)
    return gate_report(metrics, val["labels"], train_labels, task, z=z, who=who)


def gate_report(
    metrics: dict[str, float],
    val_labels: Tensor,
    train_labels: Tensor,
    task: str,
    *,
    z: float = 1.645,
    who: str = "teacher",
) -> dict[str, Any]:
    """The decision of :func:`teacher_gate` from validation ``metrics`` already measured (those of
    :func:`metrics_for`), so a recorded run can be checked again without its model."""
    n = int(val_labels.shape[0])
    if task == "STS-B":
        metric, value, baseline = "Pearson/Spearman mean", metrics["main"], 0.0
        se = 1 / math.sqrt(n)
    elif task == "CoLA":
        metric, value, baseline = "Matthews correlation", metrics["mcc"], 0.0
        se = 1 / math.sqrt(n)
    else:
        metric, value = "accuracy", metrics["accuracy"]
        baseline = majority_baseline(train_labels, {"labels": val_labels}, task)["accuracy"]
        counts = torch.bincount(val_labels.long())
        best = float(counts.max()) / n
        base_name = "the majority class"
        if best > baseline:
            base_name = (f"the best constant prediction (always class {int(counts.argmax())}, the "
                         f"most frequent on validation; the training majority class gets "
                         f"{baseline:.4f})")  # fmt: skip
            baseline = best
        se = math.sqrt(max(baseline * (1 - baseline), 0.0) / n)
    margin = z * se
    passed = value > baseline + margin
    if task in ("STS-B", "CoLA"):
        base_name = "0 (a constant predictor)"
    message = (
        f"teacher gate: the {who}'s validation {metric} {value:.4f} is "
        f"{'above' if passed else 'not above'} {base_name} {baseline:.4f} by more than "
        f"{margin:.4f} ({z:g} standard errors on {n} validation examples)"
    )
    if not passed:
        message += (
            "; distilling it would copy noise: train the teacher longer or on more data "
            "(--teacher-epochs, --teacher-lr, --train-subset), or pass --no-teacher-gate to distil "
            "anyway"
        )
    return {"metric": metric, "value": value, "baseline": baseline, "margin": margin, "n": n,
            "passed": passed, "message": message}  # fmt: skip


# ---------------------------------------------------------------------------- distributed


def _world() -> tuple[int, int]:
    """(rank, world size) of the default process group, (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    """True on rank 0 of a ``torchrun`` job (and always without one): the process that writes."""
    return _world()[0] == 0


def barrier() -> None:
    """Wait for every rank (no-op without a process group)."""
    import torch.distributed as dist

    if _world()[1] > 1:
        dist.barrier()


def init_distributed() -> bool:
    """Join the ``torchrun`` job described by the environment (``WORLD_SIZE`` > 1), gloo on CPU;
    returns whether this process is part of a multi-process job."""
    import os

    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or not dist.is_available():
        return False
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    return True


def _sync_buffers(model: nn.Module) -> None:
    """Copy rank 0's buffers (BSPN statistics, quantiser flags) to every rank."""
    import torch.distributed as dist

    for buf in model.buffers():
        dist.broadcast(buf, 0)


# --------------------------------------------------------------------------------- training


@dataclass
class StageSettings:
    """Optimisation settings of one stage (AdamW, linear warm-up over ``warmup_frac`` of the steps then
    linear decay, weight decay except on biases and ``LayerNorm.weight``; quantiser steps get their
    own group with ``alpha_lr`` and no decay)."""

    epochs: float = 1.0
    lr: float = 1e-4
    batch_size: int = 32
    weight_decay: float = 0.01
    alpha_lr: float = 1e-4
    warmup_frac: float = 0.1
    eval_every: int = 100
    max_steps: int | None = None
    tau: float = 1.0
    grad_clip: float = 1.0
    teacher_train_mode: bool = False
    mask_padding_in_kd: bool = False
    distill_loss: str = "logit_rep"
    seed: int = 0


def param_groups(
    model: nn.Module, lr: float, weight_decay: float, alpha_lr: float
) -> list[dict[str, Any]]:
    """Deterministic parameter groups: decayed, not decayed (``bias``, ``LayerNorm.weight``) and the
    quantiser steps (``alpha``)."""
    decay, no_decay, alphas = [], [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if name.endswith("alpha"):
            alphas.append(p)
        elif "bias" in name or "LayerNorm.weight" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    groups = [
        {"params": decay, "lr": lr, "weight_decay": weight_decay},
        {"params": no_decay, "lr": lr, "weight_decay": 0.0},
    ]
    if alphas:
        groups.append({"params": alphas, "lr": alpha_lr, "weight_decay": 0.0})
    return groups


def train_stage(
    student: SorbetForSequenceClassification,
    teacher: nn.Module | None,
    train: dict[str, Tensor],
    val: dict[str, Tensor],
    task: str,
    settings: StageSettings,
    *,
    desc: str = "train",
    quiet: bool = False,
    checkpoint: Path | None = None,
    save_every: int = 0,
    deadline: float | None = None,
    key: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    discard_other: bool = False,
) -> dict[str, Any]:
    """Train ``student`` in place: distil from ``teacher`` (KD loss), or fit the labels when
    ``teacher`` is None (S0). Evaluates on ``val`` every ``eval_every`` steps and at the end, and
    keeps the best checkpoint by the task's main metric.

    Mid-stage resume: with ``checkpoint`` (a file path), the resumable state (model, optimiser,
    scheduler, RNG states, data-order position, best checkpoint so far with its validation score,
    history, step) is written there atomically every ``save_every`` steps (0: never) and when the
    wall-clock ``deadline`` (``time.time()`` seconds) has passed, which then raises
    :class:`StageInterrupted`. A later call with the same ``key`` and a ``checkpoint`` that exists
    continues from it and ends with the same weights as an uninterrupted run; a state saved with
    another ``key`` is a :class:`ValueError`, or ignored (and replaced) with ``discard_other``."""
    torch.manual_seed(settings.seed)
    n = train["input_ids"].shape[0]
    per_epoch = math.ceil(n / settings.batch_size)
    steps = max(1, round(settings.epochs * per_epoch))
    if settings.max_steps is not None:
        steps = min(steps, settings.max_steps)
    for module in student.modules():
        if isinstance(module, BSPN):
            module.warmup = min(module.warmup, max(1, steps // 10))
    groups = param_groups(student, settings.lr, settings.weight_decay, settings.alpha_lr)
    optim = torch.optim.AdamW(groups, eps=1e-6)
    warm = max(1, int(settings.warmup_frac * steps))

    def schedule(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (steps - step) / max(1, steps - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(optim, schedule)
    rank, world = _world()
    forward: nn.Module = student
    if world > 1:  # torchrun: every rank takes its share of each (identically shuffled) batch
        from torch.nn.parallel import DistributedDataParallel

        forward = DistributedDataParallel(student, find_unused_parameters=True)
    if teacher is not None:
        teacher.train(settings.teacher_train_mode)
    regression = student.config.num_labels == 1
    device = model_device(student)  # batches are built on the CPU and moved there
    gen = torch.Generator().manual_seed(settings.seed)
    best: dict[str, Any] = {"main": -math.inf, "step": 0, "state": None}
    history: list[dict[str, float]] = []
    step = 0
    epoch_gen = gen.get_state()  # the data order of the current epoch is drawn from this state
    skip = 0  # batches of the current epoch already trained (on resume)
    spent = 0.0  # training seconds of earlier sittings
    last_loss = math.nan
    state_key = json.loads(json.dumps({"key": key, "steps": steps}, default=str))
    saved = None
    if checkpoint is not None and checkpoint.is_file():
        saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
        if saved["key"] != state_key and discard_other:
            saved = None  # --overwrite: other settings, start the stage afresh
    if saved is not None:
        assert checkpoint is not None
        if saved["key"] != state_key:
            raise ValueError(
                f"{checkpoint} was made with other settings; pass --overwrite to retrain it or "
                "use another --out"
            )
        student.load_state_dict(saved["model"])
        optim.load_state_dict(saved["optim"])
        sched.load_state_dict(saved["sched"])
        torch.set_rng_state(saved["torch_rng"])
        epoch_gen = saved["epoch_gen"]
        gen.set_state(saved["gen"])
        skip, step, spent = saved["batch_in_epoch"], saved["step"], saved["wall_time_s"]
        best, history, last_loss = saved["best"], saved["history"], saved["last_loss"]
        if log is not None:
            log(f"{desc}: continuing from step {step} of {steps} ({checkpoint.name})")
    start = time.perf_counter() - spent
    bar = progress(steps, desc, quiet)
    bar.update(step)
    batch_in_epoch = skip

    def save_state() -> None:
        assert checkpoint is not None
        if not is_main_process():
            return
        state = {"key": state_key, "model": student.state_dict(), "optim": optim.state_dict(),
                 "sched": sched.state_dict(), "torch_rng": torch.get_rng_state(),
                 "epoch_gen": epoch_gen, "gen": gen.get_state(), "batch_in_epoch": batch_in_epoch,
                 "step": step, "steps": steps, "best": best, "history": history,
                 "last_loss": last_loss, "wall_time_s": time.perf_counter() - start}  # fmt: skip
        _atomic_torch_save(state, checkpoint)
        summary = {"step": step, "steps": steps, "best_step": best["step"],
                   "best_val": best["main"] if best["state"] is not None else None,
                   "history": history, "wall_time_s": state["wall_time_s"]}  # fmt: skip
        _atomic_write_text(_summary_path(checkpoint), json.dumps(summary, indent=2) + "\n")

    def out_of_time() -> bool:
        if deadline is None:
            return False
        late = torch.tensor([float(time.time() >= deadline)])
        if world > 1:  # rank 0 decides, so every rank stops at the same step
            import torch.distributed as dist

            dist.broadcast(late, 0)
        return bool(late.item())

    def check() -> None:
        if world > 1:  # identical states, hence identical checkpoint choices, on every rank
            _sync_buffers(student)
        metrics, _ = evaluate(student, val, task)
        history.append({"step": step, "loss": last_loss, **metrics})
        if metrics["main"] > best["main"]:
            best.update(main=metrics["main"], step=step, state=copy.deepcopy(student.state_dict()))

    student.train()
    while step < steps:
        gen.set_state(epoch_gen)
        batches = iterate_batches(
            train, settings.batch_size, shuffle=True, generator=gen, bucket=20
        )
        for index, batch in enumerate(batches):
            if index < skip:  # already trained in an earlier sitting
                continue
            if step >= steps:
                break
            if world > 1:
                batch = _shard(batch, rank, world, student)
            batch = to_device(batch, device)
            out = forward(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
            if teacher is None:
                loss = _label_loss(out.logits, batch["labels"], regression)
            else:
                with torch.no_grad():
                    t_out = teacher(
                        batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
                    )
                loss, _ = kd_loss(
                    out,
                    t_out,
                    regression=regression,
                    tau=settings.tau,
                    mask=batch["attention_mask"] if settings.mask_padding_in_kd else None,
                    terms=settings.distill_loss,
                )
            optim.zero_grad(set_to_none=True)
            loss.backward()
            if settings.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(student.parameters(), settings.grad_clip)
            optim.step()
            sched.step()
            step += 1
            last_loss = float(loss.detach())
            if not math.isfinite(last_loss):
                raise FloatingPointError(f"{desc}: loss is {last_loss} at step {step}")
            bar.update(1)
            bar.set_postfix(loss=f"{last_loss:.4f}")
            batch_in_epoch = index + 1
            if settings.eval_every and step % settings.eval_every == 0 and step < steps:
                check()
                student.train()
            if checkpoint is not None and step < steps:
                if save_every and step % save_every == 0:
                    save_state()
                if out_of_time():
                    if not (save_every and step % save_every == 0):  # not saved just now
                        save_state()
                    barrier()
                    bar.close()
                    raise StageInterrupted(desc, step, steps)
        skip, batch_in_epoch = 0, 0
        epoch_gen = gen.get_state()
    bar.close()
    check()
    if best["state"] is not None:
        student.load_state_dict(best["state"])
    student.eval()
    return {
        "steps": steps,
        "best_step": best["step"],
        "val_main": best["main"],
        "history": history,
        "wall_time_s": time.perf_counter() - start,
    }


def _shard(batch: dict[str, Tensor], rank: int, world: int, model: nn.Module) -> dict[str, Tensor]:
    """Rank ``rank``'s rows of a batch (every ``world``-th). The whole batch on every rank while a
    quantiser step is still uninitialised (it is set from the first batch it sees, so all ranks must
    see the same one) or when the batch has fewer rows than ranks."""
    uninit = any(not bool(b) for n, b in model.named_buffers() if n.endswith("initialized"))
    rows = batch["input_ids"].shape[0]
    if uninit or rows < world:
        return batch
    return {k: v[rank::world] for k, v in batch.items()}


class StageInterrupted(RuntimeError):
    """A stage stopped at its time budget after saving its resumable state; rerunning the same
    call continues it (``stage``, ``step`` and ``steps`` say where)."""

    def __init__(self, stage: str, step: int, steps: int) -> None:
        self.stage, self.step, self.steps = stage, step, steps
        super().__init__(
            f"stopped at step {step} of {steps} of stage {stage}; rerun the same command to continue"
        )


def _atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)


def _label_loss(logits: Tensor, labels: Tensor, regression: bool) -> Tensor:
    if regression:
        return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
    return F.cross_entropy(logits, labels)


# --------------------------------------------------------------------------------- pipeline


@dataclass
class PipelineSettings:
    """Settings of the whole S0-S4 plan (saved beside every stage checkpoint)."""

    stages: tuple[str, ...] = PIPELINE_STAGES
    teacher: StageSettings = field(default_factory=lambda: StageSettings(epochs=3, lr=3e-5))
    student: StageSettings = field(default_factory=lambda: StageSettings(epochs=3, lr=1e-4))
    finetune_teacher: str = "auto"
    overrides: dict[str, Any] = field(default_factory=dict)
    engine: str = "closed_form"
    teacher_gate: bool = True  # stop (TeacherGateError) when the teacher does not beat the baseline
    split_s1: bool = False  # S1 as S1a (W1, FP activations) -> S1b (+ 4-bit) -> S1 (+ ReLU swaps)
    # recipe selection: (lr, epochs) candidates tried in each student stage, best on validation kept
    student_grid: tuple[tuple[float, float], ...] = ()
    # a learning rate of its own for some student stages (e.g. {"S3": 1e-4}); the others use
    # ``student.lr`` (a stage listed here trains that one rate, not the grid)
    stage_lr: dict[str, float] = field(default_factory=dict)
    # epochs of its own for some student stages (e.g. {"S1": 3.0}); the others use
    # ``student.epochs`` (a stage listed here trains that one count, not the grid)
    stage_epochs: dict[str, float] = field(default_factory=dict)
    # mid-stage resume: save the stage's state every this many steps (0: only at a deadline)
    save_every: int = 0
    deadline: float | None = None  # time.time() at which a stage saves its state and stops
    device: str = "cpu"  # every stage's model (and the teacher) lives there; data stays on the CPU

    def student_plan(self) -> list[str]:
        """The student stages in order (S1 split into S1a, S1b, S1 with ``split_s1``)."""
        plan: list[str] = [s for s in ("S1", "S2", "S3") if s in self.stages]
        if self.split_s1 and "S1" in plan:
            plan[0:1] = ["S1a", "S1b", "S1"]
        return plan

    def own_settings(self, stage: str) -> bool:
        """Whether ``stage`` has a learning rate or an epoch count of its own (and so trains that
        one setting, outside ``student_grid``)."""
        return stage in self.stage_lr or stage in self.stage_epochs

    def stage_settings(self, stage: str) -> StageSettings:
        """The settings of ``stage``: the teacher's for S0, else the student's with the stage's own
        learning rate (``stage_lr``) and epochs (``stage_epochs``) where it has them."""
        if stage == "S0":
            return self.teacher
        settings = self.student
        if stage in self.stage_lr:
            settings = replace(settings, lr=float(self.stage_lr[stage]))
        if stage in self.stage_epochs:
            settings = replace(settings, epochs=float(self.stage_epochs[stage]))
        return settings

    def candidates(self, stage: str | None = None) -> list[StageSettings]:
        """The student settings tried in ``stage`` (one unless ``student_grid``; one for a stage
        with settings of its own in ``stage_lr`` or ``stage_epochs``)."""
        if stage is not None and self.own_settings(stage):
            return [self.stage_settings(stage)]
        if not self.student_grid:
            return [self.student]
        return [
            replace(self.student, lr=float(lr), epochs=float(ep)) for lr, ep in self.student_grid
        ]


def _place(model: nn.Module, device: str) -> nn.Module:
    """``model`` moved to ``device`` in place (``nn.Module.to``; HF's typed wrapper of ``to`` does
    not accept a device string under mypy)."""
    return nn.Module.to(model, torch.device(device))


def _stage_dir(out: Path, stage: str) -> Path:
    return out / "stages" / stage


def _partial(out: Path, stage: str, candidate: int = 0) -> Path:
    """The resumable state of a stage in progress (one per candidate of a student grid)."""
    suffix = f".c{candidate}" if candidate else ""
    return out / "stages" / f"{stage}{suffix}.partial"


def _summary_path(checkpoint: Path) -> Path:
    """The small JSON progress summary written beside a resumable state."""
    return checkpoint.with_name(checkpoint.name + ".json")


def stage_progress(out: str | Path, stage: str) -> dict[str, Any]:
    """Where ``stage`` of the run in ``out`` stands: ``{"status": "done", ...stage.json info}``,
    ``{"status": "partial", "step", "steps", "best_val", "history", ...}`` from the summary written
    beside its resumable state, or ``{"status": "not started"}``."""
    out = Path(out)
    meta = _stage_dir(out, stage) / "stage.json"
    if meta.is_file():
        info = json.loads(meta.read_text("utf-8"))["info"]
        return {"status": "done", **info}
    summary = _summary_path(_partial(out, stage))
    if summary.is_file():
        return {"status": "partial", **json.loads(summary.read_text("utf-8"))}
    return {"status": "not started"}


def _saved(out: Path, stage: str, key: dict[str, Any]) -> dict[str, Any] | None:
    meta = _stage_dir(out, stage) / "stage.json"
    if not meta.is_file():
        return None
    saved = json.loads(meta.read_text("utf-8"))
    if json.loads(json.dumps(saved.get("key"), default=str)) != json.loads(
        json.dumps(key, default=str)
    ):
        raise ValueError(
            f"{meta} was made with other settings; pass --overwrite to retrain it or use "
            "another --out"
        )
    return dict(saved)


def _save(
    out: Path, stage: str, model: nn.Module, key: dict[str, Any], info: dict[str, Any]
) -> None:
    folder = _stage_dir(out, stage)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))  # type: ignore[operator]
    text = json.dumps({"key": key, "info": info}, indent=2, default=str)
    _atomic_write_text(folder / "stage.json", text + "\n")
    for partial in out.glob(f"stages/{stage}.*partial*"):  # the finished stage replaces its state
        partial.unlink()


def run_pipeline(
    teacher: nn.Module,
    train: dict[str, Tensor],
    val: dict[str, Tensor],
    dev: dict[str, Tensor],
    task: str,
    out: Path,
    settings: PipelineSettings,
    *,
    resume: bool = True,
    overwrite: bool = False,
    quiet: bool = False,
    log: Callable[[str], None] = print,
    key: dict[str, Any] | None = None,
    save_extra: Callable[[Path], None] | None = None,
) -> dict[str, Any]:
    """Run the stage plan (``save_extra(folder)`` adds files, e.g. the tokenizer, to every saved
    stage); returns per-stage metrics (val, dev), S4 agreement with S3 and the spiking
    model (under ``"snn"``). Each stage is saved in ``out/stages/<S>`` and reloaded on a rerun when
    ``resume`` and its settings match (``key`` plus the stage's own settings)."""
    base_key = {"task": task, **(key or {}), "overrides": settings.overrides}
    results: dict[str, Any] = {"stages": {}}
    headless = not hasattr(teacher, "classifier")
    do_s0 = "S0" in settings.stages and (
        settings.finetune_teacher == "always" or (settings.finetune_teacher == "auto" and headless)
    )
    # the classifier of a headless teacher is new: draw it from the run's seed, not from torch's
    # global generator (seeded from OS entropy at start-up, so a rerun would differ)
    torch.manual_seed(settings.teacher.seed)
    current, report = convert_teacher(teacher, "fp")
    _place(current, settings.device)
    if headless:
        log(f"teacher has no classification head: {report.summary()}")
    previous: nn.Module = current
    fp_model: nn.Module = current
    plan = ["S0"] if do_s0 else []
    plan += settings.student_plan()
    keys = {}
    for stage in plan:  # check every saved stage before any work
        stage_settings = settings.stage_settings(stage)
        keys[stage] = {**base_key, "stage": stage, "settings": asdict(stage_settings)}
        if stage != "S0" and settings.student_grid and not settings.own_settings(stage):
            keys[stage]["student_grid"] = [list(c) for c in settings.student_grid]
        if resume and not overwrite:
            _saved(out, stage, keys[stage])
    gated = False
    for index, stage in enumerate(plan):
        stage_settings = settings.stage_settings(stage)
        stage_key = keys[stage]
        if stage != "S0" and not gated:  # the teacher of S1 must beat the trivial baseline
            gate = teacher_gate(previous, val, train["labels"], task,
                                who="fine-tuned teacher" if do_s0 else "teacher")  # fmt: skip
            results["teacher_gate"] = {k: v for k, v in gate.items() if k != "message"}
            log(gate["message"])
            if not gate["passed"] and settings.teacher_gate:
                raise TeacherGateError(gate)
            gated = True
        try:
            saved = _saved(out, stage, stage_key) if resume else None
        except ValueError:
            saved = None  # --overwrite: settings changed, retrain this stage
        if saved is not None:
            model = SorbetForSequenceClassification.from_pretrained(str(_stage_dir(out, stage)))
            _place(model, settings.device).eval()
            info = saved["info"]
            log(f"{stage}: resumed from {_stage_dir(out, stage).name} (saved run)")
        else:
            if stage == "S0":
                model = current
                info = train_stage(model, None, train, val, task, stage_settings, desc=stage,
                                   quiet=quiet, checkpoint=_partial(out, stage),
                                   save_every=settings.save_every, deadline=settings.deadline,
                                   key=stage_key, log=log, discard_other=overwrite)  # fmt: skip
            else:
                model, info = _distil_stage(previous, stage, train, val, task, settings, quiet, log,
                                            out=out, key=stage_key, overwrite=overwrite)  # fmt: skip
            if is_main_process():  # under torchrun, rank 0 writes; the others wait for it
                _save(out, stage, model, stage_key, info)
                if save_extra is not None:
                    save_extra(_stage_dir(out, stage))
            barrier()
        dev_metrics, dev_pred = evaluate(model, dev, task)
        results["stages"][stage] = {
            "val": info["val_main"],
            "dev": dev_metrics,
            "steps": info["steps"],
            "best_step": info["best_step"],
            "train_wall_time_s": info["wall_time_s"],
            "config": {
                k: getattr(model.config, k)
                for k in ("weight_bits", "act_bits", "softmax", "norm", "ffn_act", "pooler_act")
            },
        }
        if "selection" in info:
            results["stages"][stage]["selection"] = info["selection"]
        results["stages"][stage]["_pred"] = dev_pred
        previous = model
        if stage == "S0":
            fp_model = model
        log(
            f"{stage}: dev {dev_metrics['main']:.4f} (val {info['val_main']:.4f}) [{index + 1}/{len(plan)}]"
        )
    if not do_s0:
        dev_metrics, dev_pred = evaluate(current, dev, task)
        results["stages"]["teacher"] = {"dev": dev_metrics, "_pred": dev_pred}
    if "S4" in settings.stages:
        if "S3" not in results["stages"]:
            raise ValueError("S4 (the spiking export) needs S3 in the stage plan")
        snn = to_snn(previous, engine=settings.engine)  # type: ignore[arg-type]
        _place(snn, settings.device)
        dev_metrics, dev_pred = evaluate(snn, dev, task)
        s3_pred = results["stages"]["S3"]["_pred"]
        agree = float((dev_pred == s3_pred).double().mean())
        results["stages"]["S4"] = {"dev": dev_metrics, "agreement_with_S3": agree}
        results["snn"] = snn
        log(f"S4: dev {dev_metrics['main']:.4f}, agreement with S3 {agree:.4f}")
    results["final"] = previous
    results["fp_teacher"] = fp_model
    for stage in results["stages"].values():
        stage.pop("_pred", None)
    return results


def _distil_stage(
    previous: nn.Module,
    stage: str,
    train: dict[str, Tensor],
    val: dict[str, Tensor],
    task: str,
    settings: PipelineSettings,
    quiet: bool,
    log: Callable[[str], None],
    *,
    out: Path | None = None,
    key: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> tuple[SorbetForSequenceClassification, dict[str, Any]]:
    """Distil ``stage`` from ``previous`` with each candidate setting; keep the best on validation
    (each candidate already keeps its best checkpoint, every ``eval_every`` steps)."""
    overrides = {**settings.overrides, **S1_SPLIT.get(stage, {})}
    base = "S1" if stage in S1_SPLIT else stage
    best: tuple[SorbetForSequenceClassification, dict[str, Any]] | None = None
    tried = []
    candidates = settings.candidates(stage)
    for index, cand in enumerate(candidates):
        torch.manual_seed(cand.seed)  # any tensor new to the stage is drawn from the run's seed
        model, rep = convert_teacher(previous, base, **overrides)
        _place(model, settings.device)
        if best is None:
            log(rep.summary())
        desc = stage if len(candidates) == 1 else f"{stage} lr {cand.lr:g} x{cand.epochs:g}"
        info = train_stage(model, previous, train, val, task, cand, desc=desc, quiet=quiet,
                           checkpoint=None if out is None else _partial(out, stage, index),
                           save_every=settings.save_every, deadline=settings.deadline,
                           key=None if key is None else {**key, "candidate": index},
                           log=log, discard_other=overwrite)  # fmt: skip
        tried.append({"lr": cand.lr, "epochs": cand.epochs, "val": info["val_main"],
                      "best_step": info["best_step"], "steps": info["steps"]})  # fmt: skip
        if best is None or info["val_main"] > best[1]["val_main"]:
            best = (model, info)
    assert best is not None
    model, info = best
    if len(candidates) > 1:
        info = {**info, "selection": tried}
        log(f"{stage}: selected on validation " + ", ".join(
            f"lr {t['lr']:g} x{t['epochs']:g}: {t['val']:.4f}" for t in tried))  # fmt: skip
    return model, info


def bow_baseline(
    train: dict[str, Tensor],
    dev: dict[str, Tensor],
    vocab_size: int,
    num_labels: int,
    *,
    epochs: int = 30,
    seed: int = 0,
) -> dict[str, Any]:
    """Bag-of-words logistic regression (token counts, full-batch Adam): a baseline that ignores word
    order, so it cannot solve negation or "but" clauses."""

    def bags(data: dict[str, Tensor]) -> Tensor:
        ids = data["input_ids"] * data["attention_mask"]
        out = torch.zeros(ids.shape[0], vocab_size)
        out.scatter_add_(1, ids, data["attention_mask"].float())
        out[:, 0] = 0.0
        return out

    torch.manual_seed(seed)
    x, y = bags(train), train["labels"]
    lin = nn.Linear(vocab_size, num_labels)
    opt = torch.optim.Adam(lin.parameters(), lr=0.05)
    for _ in range(epochs * 10):
        opt.zero_grad()
        F.cross_entropy(lin(x), y).backward()
        opt.step()
    with torch.no_grad():
        pred = lin(bags(dev)).argmax(-1)
    return {"pred": pred}
