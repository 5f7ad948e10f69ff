"""One training run of the package's CPU protocol: MLP/CNN, SGD or AdamW with a cosine schedule
over all steps, and full precision or QAT through :class:`QuantOptimizer` (the AProx iteration of
the paper with PARQ, STE or BinaryRelax as the prox map).

Checkpoints (:func:`save_checkpoint` / :func:`load_checkpoint`) hold the config, the data shape,
the model weights ``w`` and the optimizer state (latent ``u``, level sets ``Q``)."""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .config import MAX_BITS, METHOD_NAMES, OPTIMIZER_NAMES, ConfigError, TrainConfig
from .data import Split
from .models import make_model
from .optim import (
    QuantOptimizer,
    make_prox,
    make_quantizer,
    quant_param_groups,
    quant_view,
)
from .quant import nearest

__all__ = [
    "MAX_BITS",
    "METHODS",
    "ConfigError",
    "Diverged",
    "TrainConfig",
    "build",
    "evaluate",
    "layer_levels",
    "load_checkpoint",
    "save_checkpoint",
    "train",
]

METHODS = METHOD_NAMES
MODELS = ("mlp", "cnn")
OPTIMIZERS = OPTIMIZER_NAMES


class Diverged(RuntimeError):
    """Training produced a non-finite loss or weights; ``history`` holds the epochs before."""

    def __init__(self, message: str, epoch: int, step: int, history: list[dict[str, Any]]) -> None:
        self.epoch = epoch
        self.step = step
        self.history = history
        super().__init__(message)


def build(
    cfg: TrainConfig, data: Split, steps_per_epoch: int
) -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """Model, optimizer (``QuantOptimizer`` unless ``method == 'fp'``) and cosine scheduler."""
    torch.manual_seed(cfg.seed)
    model = make_model(cfg.model, data.n_features, data.n_classes, cfg.hidden, data.image_shape)
    model.to(cfg.device)
    groups = quant_param_groups(model, cfg.bits, block_size=cfg.block_size)
    if cfg.method == "fp":
        for g in groups:
            g.pop("quant_bits", None)
            g.pop("quant_block_size", None)
    kw: dict[str, Any] = {"lr": cfg.lr, "weight_decay": cfg.weight_decay}
    if cfg.optimizer == "sgd":
        base: torch.optim.Optimizer = torch.optim.SGD(groups, momentum=cfg.momentum, **kw)
    else:
        base = torch.optim.AdamW(groups, **kw)
    total = cfg.epochs * steps_per_epoch
    opt: torch.optim.Optimizer = base
    if cfg.method != "fp":
        end = max(cfg.warmup_steps + 1, int(cfg.anneal_end_frac * total))
        prox = make_prox(cfg.method, cfg.warmup_steps, end, cfg.steepness)
        opt = QuantOptimizer(
            base,
            make_quantizer(cfg.quantizer),
            prox,
            warmup_steps=cfg.warmup_steps,
            quant_period=cfg.quant_period,
            quant_per_channel=cfg.per_channel,
        )
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    return model, opt, sched


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Top-1 accuracy in percent."""
    model.eval()
    acc = 100.0 * (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


@torch.no_grad()
def layer_levels(opt: QuantOptimizer, model: nn.Module) -> dict[str, dict[str, int]]:
    """Per quantized weight: ``|Q|``, distinct values, and distinct values after snapping to the
    nearest level (greedy LSBQ, ``q = p - r``, can leave last-bit variants of a level on
    ``Q``-refresh steps)."""
    out = {}
    for name, entry in opt.export_quantized(model).items():
        p = dict(model.named_parameters())[name]
        view, dim = quant_view(p.detach(), entry["block_size"], entry["per_channel"])
        Q = entry["levels"].to(p.device)
        snapped = nearest(Q, view, dim)
        if dim is None:
            d_raw, d_snap = view.unique().numel(), snapped.unique().numel()
        else:
            d_raw = max(r.unique().numel() for r in view)
            d_snap = max(r.unique().numel() for r in snapped)
        out[name] = {"levels": int(Q.size(-1)), "distinct": d_raw, "distinct_snapped": d_snap}
    return out


def train(
    cfg: TrainConfig,
    data: Split,
    quiet: bool = True,
    progress: Callable[[int], object] | None = None,
) -> dict[str, Any]:
    """Train one model and return metrics (test/train accuracy, levels per layer, time, ...);
    ``progress(1)`` is called after each epoch.

    Raises :class:`ConfigError` for a config that does not fit ``data`` and :class:`Diverged` as
    soon as the loss is not finite (then nothing of the run should be kept)."""
    cfg.validate()
    cfg.check_data(data)
    x_tr, y_tr = data.x_train.to(cfg.device), data.y_train.to(cfg.device)
    n = len(y_tr)
    steps_per_epoch = (n + cfg.batch_size - 1) // cfg.batch_size
    model, opt, sched = build(cfg, data, steps_per_epoch)
    g = torch.Generator().manual_seed(cfg.seed)
    t0 = time.perf_counter()
    history: list[dict[str, Any]] = []
    for epoch in tqdm(range(cfg.epochs), disable=quiet, desc=f"{cfg.method} b={cfg.bits}"):
        perm = torch.randperm(n, generator=g).to(cfg.device)
        total = 0.0
        for k in range(steps_per_epoch):
            idx = perm[k * cfg.batch_size : (k + 1) * cfg.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_tr[idx]), y_tr[idx])
            value = loss.item()
            if not math.isfinite(value):
                raise Diverged(
                    f"training diverged: loss {value} at epoch {epoch + 1}, step {k + 1} "
                    f"(lr {cfg.lr:g}, optimizer {cfg.optimizer})",
                    epoch + 1,
                    k + 1,
                    history,
                )
            loss.backward()
            opt.step()
            sched.step()
            total += value
        history.append(
            {
                "epoch": epoch + 1,
                "loss": total / steps_per_epoch,
                "inv_slope": getattr(opt, "inv_slope", None),
            }
        )
        if progress is not None:
            progress(1)
    wall = time.perf_counter() - t0
    metrics: dict[str, Any] = {"config": asdict(cfg), "wall_time_s": wall}
    if isinstance(opt, QuantOptimizer):
        metrics["quantized_fraction_end"] = finish_quantization(opt)
        metrics["layers"] = layer_levels(opt, model)
    bad = [name for name, t in model.state_dict().items() if not torch.isfinite(t).all()]
    if bad:
        raise Diverged(
            f"training diverged: non-finite weights in {', '.join(bad)} after {cfg.epochs} epochs",
            cfg.epochs,
            steps_per_epoch,
            history,
        )
    metrics["test_acc"] = evaluate(model, data.x_test.to(cfg.device), data.y_test.to(cfg.device))
    metrics["train_acc"] = evaluate(model, x_tr, y_tr)
    metrics["history"] = history
    metrics["model"] = model
    metrics["optimizer"] = opt
    return metrics


# ---- checkpoints ------------------------------------------------------------------------------
CHECKPOINT_FORMAT = "parq-optim-checkpoint/1"


def save_checkpoint(
    path: str | os.PathLike,
    cfg: TrainConfig,
    data: Split,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
) -> Path:
    """Write a training checkpoint atomically (a temporary file, then a rename).

    Refuses (``ValueError``) to write non-finite weights or optimizer state, so a diverged run
    never replaces a good checkpoint."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    check_finite_state(state)
    blob = {
        "format": CHECKPOINT_FORMAT,
        "config": asdict(cfg),
        "data": {
            "name": data.name,
            "n_features": data.n_features,
            "n_classes": data.n_classes,
            "image_shape": data.image_shape,
            "n_train": len(data.y_train),
        },
        **state,
    }
    return _atomic_save(blob, Path(path))


def finish_quantization(opt: QuantOptimizer) -> float:
    """The quantized fraction reached by training; hard-quantizes what is left when training
    stopped before ``anneal_end``, so the exported weights are always on the levels."""
    fraction = opt.quantized_fraction()
    if fraction < 1.0:
        opt.hard_quantize_()
    return fraction


def check_finite_state(state: dict[str, Any]) -> None:
    """Refuse (``ValueError``, naming the tensor) to checkpoint NaN or inf, so that a diverged
    run never replaces a good checkpoint."""
    where = nonfinite_tensor(state)
    if where is not None:
        raise ValueError(f"refusing to write a checkpoint: {where} holds NaN or inf")


def nonfinite_tensor(state: Any) -> str | None:
    """Where (``model.0.weight``, ``optimizer.state.3.u``) the first floating tensor holding NaN
    or inf sits in a nested state, or ``None``."""
    for where, tensor in _tensors(state):
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            return where
    return None


def restore_config(cls: Any, saved: Any, label: str, error_type: type[Exception]) -> Any:
    """The config dataclass ``cls`` rebuilt from a checkpoint's ``config`` record, on CPU and
    validated; ``ValueError`` starting with ``label`` for a missing field or an invalid value."""
    names = {f.name for f in fields(cls)}
    missing = sorted(names - set(saved)) if isinstance(saved, dict) else sorted(names)
    if missing:
        raise ValueError(f"{label}: the checkpoint's config lacks {', '.join(missing)}")
    cfg = cls(**{k: saved[k] for k in names})
    cfg.device = "cpu"
    try:
        cfg.validate()
    except error_type as e:
        raise ValueError(f"{label}: the checkpoint's config is invalid: {e}") from e
    return cfg


def _atomic_save(blob: dict[str, Any], path: Path) -> Path:
    """``torch.save`` to a temporary file beside ``path``, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(blob, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _tensors(obj: Any, where: str = "") -> list[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        return [(where, obj)]
    if isinstance(obj, dict):
        return [t for k, v in obj.items() for t in _tensors(v, f"{where}.{k}" if where else str(k))]
    if isinstance(obj, (list, tuple)):
        return [t for i, v in enumerate(obj) for t in _tensors(v, f"{where}[{i}]")]
    return []


def load_checkpoint(
    path: str | os.PathLike,
) -> tuple[TrainConfig, Split, nn.Module, torch.optim.Optimizer]:
    """Read a checkpoint written by :func:`save_checkpoint` (or by ``parq-optim train``).

    Returns the config, a data stub with the recorded shapes (no samples), and the model and
    optimizer rebuilt on CPU with the saved state. Raises ``ValueError`` naming the file for
    anything that is not such a checkpoint, lacks a field, or holds NaN/inf."""
    path = Path(path)
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or not {"config", "data", "model", "optimizer"} <= set(blob):
        raise ValueError(
            f"{path} is not a parq-optim train checkpoint (expected a dict with config, data, "
            "model and optimizer)"
        )
    cfg: TrainConfig = restore_config(TrainConfig, blob["config"], str(path), ConfigError)
    where = nonfinite_tensor({"model": blob["model"], "optimizer": blob["optimizer"]})
    if where is not None:
        raise ValueError(f"{path}: {where} holds NaN or inf")
    meta = blob["data"]
    try:
        shape = tuple(meta["image_shape"]) if meta["image_shape"] else None
        n_features, n_classes, n_train = (
            int(meta["n_features"]),
            int(meta["n_classes"]),
            int(meta["n_train"]),
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: the checkpoint's data record is incomplete ({e})") from e
    stub = Split(
        torch.zeros(0, n_features),
        torch.zeros(0, dtype=torch.long),
        torch.zeros(0, n_features),
        torch.zeros(0, dtype=torch.long),
        n_classes,
        name=str(meta.get("name", "")),
        image_shape=shape,
    )
    steps = (n_train + cfg.batch_size - 1) // cfg.batch_size
    model, opt, _ = build(cfg, stub, max(1, steps))
    model.load_state_dict(blob["model"])  # RuntimeError on a shape mismatch
    opt.load_state_dict(blob["optimizer"])
    return cfg, stub, model, opt
