"""Training loop, metrics and optimizer presets shared by the CLI and the benchmarks.

The sharpness metrics λ_max and tr(H) are those the paper reports (Sec. 3 and Sec. 6); the presets
follow the official repository's image-classification configurations, scaled to small MLPs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import Tensor, nn

from ._baselines import SAM, AdaHessian, SophiaH
from .data import Split
from .optim import Sassha

__all__ = [
    "MLP",
    "OPTIMIZERS",
    "build_optimizer",
    "evaluate",
    "hessian_trace",
    "make_closure",
    "top_hessian_eigenvalue",
    "train",
]

WD = 5e-4  # weight decay in "config units" (official trainers divide it by lr for decoupled rules)

# Official image-classification configurations, scaled to small MLPs; Sassha/AdamW/AdaHessian/Sophia-H get λ = WD / lr (official convention).
OPTIMIZERS: dict[str, dict[str, Any]] = {
    "sgd": {"lr": 0.1, "momentum": 0.9, "weight_decay": WD},
    "adamw": {"lr": 1e-2, "weight_decay": WD / 1e-2},
    "sam": {"lr": 0.1, "rho": 0.15, "momentum": 0.9, "weight_decay": WD},
    "adahessian": {"lr": 0.15, "eps": 1e-4, "update_period": 1, "weight_decay": WD / 0.15},
    "sophia-h": {
        "lr": 1e-3,
        "clip_threshold": 0.01,
        "eps": 1e-4,
        "update_period": 1,
        "weight_decay": WD / 1e-3,
    },
    "sassha": {"lr": 0.15, "rho": 0.2, "lazy_hessian": 10, "weight_decay": WD / 0.15},
    "sassha-k1": {"lr": 0.15, "rho": 0.2, "lazy_hessian": 1, "weight_decay": WD / 0.15},
    "sassha-rho0": {"lr": 0.15, "rho": 0.0, "lazy_hessian": 10, "weight_decay": WD / 0.15},
    "sassha-official": {
        "lr": 0.15,
        "rho": 0.2,
        "lazy_hessian": 10,
        "weight_decay": WD / 0.15,
        "bias_correction": "step",
        "hvp_point": "reference",
        "hessian_warmup": 0,  # the official schedule: refresh on steps 1, k+1, ... only
    },
}


class MLP(nn.Sequential):
    """``d_in → hidden… → n_classes`` with ReLU."""

    def __init__(self, d_in: int, n_classes: int, hidden: tuple[int, ...] = (128, 128)) -> None:
        layers: list[nn.Module] = []
        for h in hidden:
            layers += [nn.Linear(d_in, h), nn.ReLU()]
            d_in = h
        layers.append(nn.Linear(d_in, n_classes))
        super().__init__(*layers)


def build_optimizer(
    name: str, params: Any, overrides: dict[str, Any] | None = None, seed: int = 0
) -> torch.optim.Optimizer:
    """Optimizer by preset name (``OPTIMIZERS``) with keyword overrides."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r} (expected one of {sorted(OPTIMIZERS)})")
    kw = {**OPTIMIZERS[name], **(overrides or {})}
    if name.startswith("sassha"):
        return Sassha(params, seed=seed, **kw)
    if name == "sgd":
        return torch.optim.SGD(params, **kw)
    if name == "adamw":
        return torch.optim.AdamW(params, **kw)
    if name == "sam":
        return SAM(params, torch.optim.SGD, **kw)
    if name == "sophia-h":
        return SophiaH(params, seed=seed, **kw)
    return AdaHessian(params, seed=seed, **kw)


def make_closure(
    opt: torch.optim.Optimizer, model: nn.Module, x: Tensor, y: Tensor
) -> Callable[[], Tensor]:
    """Forward + backward; builds a graph only when the optimizer asks (``create_graph``)."""

    def closure() -> Tensor:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward(create_graph=bool(getattr(opt, "create_graph", False)))
        return loss

    return closure


@torch.no_grad()
def evaluate(model: nn.Module, x: Tensor, y: Tensor, batch: int = 4096) -> dict[str, float]:
    """Mean cross-entropy and accuracy (%) in eval mode."""
    model.eval()
    loss, correct = 0.0, 0
    for i in range(0, len(x), batch):
        out = model(x[i : i + batch])
        loss += float(nn.functional.cross_entropy(out, y[i : i + batch], reduction="sum"))
        correct += int((out.argmax(1) == y[i : i + batch]).sum())
    model.train()
    return {"loss": loss / len(x), "accuracy": 100.0 * correct / len(x)}


def _hvp(model: nn.Module, x: Tensor, y: Tensor, v: list[Tensor]) -> list[Tensor]:
    params = [p for p in model.parameters() if p.requires_grad]
    loss = nn.functional.cross_entropy(model(x), y)
    grads = torch.autograd.grad(loss, params, create_graph=True)
    return list(torch.autograd.grad(grads, params, grad_outputs=v))


def top_hessian_eigenvalue(
    model: nn.Module, x: Tensor, y: Tensor, iters: int = 30, seed: int = 0
) -> float:
    """λ_max of the Hessian of the mean training loss by power iteration (30 iterations, seeded start)."""
    gen = torch.Generator().manual_seed(seed)
    v = [torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in model.parameters()]
    eig = 0.0
    for _ in range(iters):
        norm = math.sqrt(sum(float((t * t).sum()) for t in v))
        v = [t / norm for t in v]
        hv = _hvp(model, x, y, v)
        eig = sum(float((a * b).sum()) for a, b in zip(v, hv))
        v = [t.detach() for t in hv]
    return eig


def hessian_trace(
    model: nn.Module, x: Tensor, y: Tensor, probes: int = 100, seed: int = 0
) -> float:
    """Hutchinson estimate of tr(H) with Rademacher probes."""
    gen = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(probes):
        z = [
            torch.randint(0, 2, p.shape, generator=gen).to(p.dtype) * 2 - 1
            for p in model.parameters()
        ]
        total += sum(float((a * b).sum()) for a, b in zip(z, _hvp(model, x, y, z)))
    return total / probes


@dataclass
class TrainResult:
    test_accuracy: float
    test_loss: float
    train_loss: float
    seconds: float
    steps: int
    seconds_per_step: float
    hvp_calls: int
    history: list[dict[str, float]] = field(default_factory=list)


def train(
    model: nn.Module,
    optimizer_name: str,
    split: Split,
    epochs: int = 60,
    batch_size: int = 64,
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
    progress: Callable[[int], Any] | None = None,
    eval_every: int = 0,
) -> TrainResult:
    """Minibatch training with MultiStep LR ×0.1 at 50 % and 75 % of the steps (as the
    official CIFAR schedule: ×0.1 at epochs 80 and 120 of 160)."""
    torch.manual_seed(seed)
    opt = build_optimizer(optimizer_name, model.parameters(), overrides, seed=seed)
    steps_per_epoch = math.ceil(len(split.x_train) / batch_size)
    total = epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.MultiStepLR(
        opt.base_optimizer if isinstance(opt, SAM) else opt,
        milestones=[total // 2, (3 * total) // 4],
        gamma=0.1,
    )
    gen = torch.Generator().manual_seed(seed)
    history = []
    start = time.perf_counter()
    for epoch in range(epochs):
        order = torch.randperm(len(split.x_train), generator=gen)
        running = 0.0
        for i in range(steps_per_epoch):
            idx = order[i * batch_size : (i + 1) * batch_size]
            closure = make_closure(opt, model, split.x_train[idx], split.y_train[idx])
            loss = cast(Tensor | None, opt.step(closure))  # type: ignore[arg-type]
            running += float(loss.detach()) if loss is not None else float("nan")
            sched.step()
        entry = {"epoch": epoch + 1, "batch_loss": running / steps_per_epoch}
        if eval_every and ((epoch + 1) % eval_every == 0 or epoch + 1 == epochs):
            entry["test_accuracy"] = evaluate(model, split.x_test, split.y_test)["accuracy"]
        history.append(entry)
        if progress is not None:
            progress(1)
    seconds = time.perf_counter() - start
    test = evaluate(model, split.x_test, split.y_test)
    train_metrics = evaluate(model, split.x_train, split.y_train)
    return TrainResult(
        test_accuracy=test["accuracy"],
        test_loss=test["loss"],
        train_loss=train_metrics["loss"],
        seconds=seconds,
        steps=total,
        seconds_per_step=seconds / total,
        hvp_calls=int(getattr(opt, "hvp_calls", 0)),
        history=history,
    )
