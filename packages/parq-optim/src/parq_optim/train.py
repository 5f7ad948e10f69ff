"""One training run of the CPU protocol (spec §6): MLP/CNN, SGD or AdamW with a cosine schedule
over all steps, and full precision or QAT through :class:`QuantOptimizer`."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .data import Split
from .models import make_model
from .optim import QuantOptimizer, make_prox, make_quantizer, quant_param_groups, quant_view
from .quant import nearest

__all__ = ["METHODS", "TrainConfig", "build", "evaluate", "layer_levels", "train"]

METHODS = ("fp", "parq", "ste", "binaryrelax", "softquant")


@dataclass
class TrainConfig:
    """Hyper-parameters of one run (defaults = the spec's digits protocol)."""

    method: str = "parq"
    bits: int = 1
    quantizer: str = "lsbq"
    model: str = "mlp"
    hidden: int = 16
    epochs: int = 60
    batch_size: int = 64
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_steps: int = 0
    quant_period: int = 10
    per_channel: bool = False
    block_size: int | None = None
    steepness: float = 10.0
    anneal_end_frac: float = 0.9
    seed: int = 0
    device: str = "cpu"

    def validate(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {list(METHODS)}, got {self.method!r}")
        if self.optimizer not in ("sgd", "adamw"):
            raise ValueError(f"optimizer must be 'sgd' or 'adamw', got {self.optimizer!r}")
        if self.bits < 0:
            raise ValueError(f"bits must be >= 0 (0 = ternary), got {self.bits}")
        if self.epochs < 1 or self.batch_size < 1 or self.hidden < 1:
            raise ValueError("epochs, batch_size and hidden must be >= 1")
        if not 0.0 < self.anneal_end_frac <= 1.0:
            raise ValueError(f"anneal_end_frac must be in (0, 1], got {self.anneal_end_frac}")
        if self.method != "fp":
            make_quantizer(self.quantizer).check_bits(self.bits)


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
    nearest level (greedy LSBQ can leave last-bit variants on ``Q``-refresh steps, spec §3.6)."""
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


def train(cfg: TrainConfig, data: Split, quiet: bool = True) -> dict[str, Any]:
    """Train one model and return metrics (test/train accuracy, levels per layer, time, ...)."""
    cfg.validate()
    x_tr, y_tr = data.x_train.to(cfg.device), data.y_train.to(cfg.device)
    n = len(y_tr)
    steps_per_epoch = (n + cfg.batch_size - 1) // cfg.batch_size
    model, opt, sched = build(cfg, data, steps_per_epoch)
    g = torch.Generator().manual_seed(cfg.seed)
    t0 = time.perf_counter()
    history = []
    for epoch in tqdm(range(cfg.epochs), disable=quiet, desc=f"{cfg.method} b={cfg.bits}"):
        perm = torch.randperm(n, generator=g).to(cfg.device)
        total = 0.0
        for k in range(steps_per_epoch):
            idx = perm[k * cfg.batch_size : (k + 1) * cfg.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_tr[idx]), y_tr[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
        history.append(
            {
                "epoch": epoch + 1,
                "loss": total / steps_per_epoch,
                "inv_slope": getattr(opt, "inv_slope", None),
            }
        )
    wall = time.perf_counter() - t0
    metrics: dict[str, Any] = {"config": asdict(cfg), "wall_time_s": wall}
    if isinstance(opt, QuantOptimizer):
        metrics["quantized_fraction_end"] = opt.quantized_fraction()
        if metrics["quantized_fraction_end"] < 1.0:
            opt.hard_quantize_()  # training stopped before anneal_end
        metrics["layers"] = layer_levels(opt, model)
    metrics["test_acc"] = evaluate(model, data.x_test.to(cfg.device), data.y_test.to(cfg.device))
    metrics["train_acc"] = evaluate(model, x_tr, y_tr)
    metrics["history"] = history
    metrics["model"] = model
    metrics["optimizer"] = opt
    return metrics
