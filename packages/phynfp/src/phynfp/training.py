"""One training loop for PhyNFP and every baseline (the official code's protocol, train.py):
MSE on z-scored targets over all nodes, Adam (lr 1e-3, weight decay 1e-5), gradient-norm clipping
at 1.0, ReduceLROnPlateau(0.5, patience 5, min 1e-6) on validation MSE, best-validation checkpoint,
NaN/inf batches skipped; optional gradient accumulation as in the official code (the loss is not
divided and clipping runs after every micro-batch)."""

from __future__ import annotations

import copy
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .data import FluxDataset

__all__ = ["TrainConfig", "TrainResult", "TrainingFailed", "evaluate", "fit", "nse", "predict"]


class TrainingFailed(RuntimeError):
    """No usable model came out of :func:`fit`: every training batch had a non-finite loss (so no
    optimiser step was taken), or the validation MSE was non-finite after every epoch (the weights
    diverged). Raised instead of returning the untrained initial weights as if they were a result."""


@dataclass
class TrainConfig:
    epochs: int = 200
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 1e-5
    clip: float | None = 1.0
    accumulate: int = 1
    patience: int = 5
    max_batches: int | None = None  # per epoch: a random subset of the training batches
    physics_loss_weight: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 0 or self.batch_size < 1 or self.accumulate < 1:
            raise ValueError(f"invalid TrainConfig: {self}")
        if not self.lr > 0 or self.weight_decay < 0:
            raise ValueError(f"invalid TrainConfig: lr {self.lr}, weight_decay {self.weight_decay}")


@dataclass
class TrainResult:
    best_epoch: int
    best_val_mse: float
    history: list[dict[str, float]] = field(default_factory=list)
    epoch_times: list[float] = field(default_factory=list)
    skipped_batches: int = 0
    trained_batches: int = 0
    # epoch -> the best-validation state among epochs 1..epoch (``fit(snapshot_epochs=...)``): the
    # model a shorter budget would have kept, for paired budget comparisons within one run.
    snapshots: dict[int, dict[str, Tensor]] = field(default_factory=dict, repr=False)

    @property
    def epoch_time(self) -> float:
        return statistics.median(self.epoch_times) if self.epoch_times else float("nan")

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "snapshots"}
        out["epoch_time_median_s"] = self.epoch_time
        return out


def _batches(
    data: FluxDataset, split: str, batch_size: int, rng: np.random.Generator | None
) -> list[tuple[int, np.ndarray]]:
    """Batches that never mix groups (one graph per batch); shuffled when ``rng`` is given."""
    out = []
    for group, starts in data.splits[split]:
        order = rng.permutation(starts) if rng is not None else starts
        for i in range(0, len(order), batch_size):
            out.append((group, order[i : i + batch_size]))
    if rng is not None:
        perm = rng.permutation(len(out))
        out = [out[i] for i in perm]
    return out


def _has_params(model: nn.Module) -> bool:
    return any(p.requires_grad for p in model.parameters())


def _physics_penalty(pred: Tensor, data: FluxDataset, group: int) -> Tensor:
    """Mean of relu(−Q̂)² on de-normalised predictions (negative discharge); not the paper's loss."""
    g = data.groups[group]
    q = pred * g.std.to(pred) + g.mean.to(pred)
    return torch.relu(-q).pow(2).mean()


@torch.no_grad()
def predict(
    model: nn.Module, data: FluxDataset, split: str, batch_size: int = 64, device: str = "cpu"
) -> list[tuple[int, Tensor, Tensor]]:
    """Per group: (group, ŷ [S, N], y [S, N]) in z-scored units, windows in time order."""
    model.eval()
    out = []
    for group, starts in data.splits[split]:
        g = data.groups[group]
        ei, ea = g.edge_index.to(device), g.edge_attr.to(device)
        preds, ys = [], []
        for i in range(0, len(starts), batch_size):
            chunk = starts[i : i + batch_size]
            x, y = data.batch(group, chunk)
            extra = {k: v.to(device) for k, v in data.model_inputs(model, group, chunk).items()}
            preds.append(model(x.to(device), ei, ea, **extra).squeeze(-1).cpu())
            ys.append(y)
        if preds:
            out.append((group, torch.cat(preds), torch.cat(ys)))
    return out


def nse(
    pred: np.ndarray,
    obs: np.ndarray,
    reference: str = "test_mean",
    train_std: np.ndarray | None = None,
) -> np.ndarray:
    """Nash-Sutcliffe efficiency per node (columns): 1 − Σ(ŷ−y)² / Σ(y−ȳ)².

    ``reference="train_std"``: Kirschstein & Sun's variant 1 − MSE_i / σ_i² with the training std."""
    err = ((pred - obs) ** 2).sum(0)
    if reference == "train_std":
        if train_std is None:
            raise ValueError("nse(reference='train_std') needs train_std")
        return 1.0 - err / obs.shape[0] / np.maximum(train_std**2, 1e-12)
    den = ((obs - obs.mean(0)) ** 2).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, 1.0 - err / np.where(den > 0, den, 1.0), np.nan)


def evaluate(
    model: nn.Module,
    data: FluxDataset,
    split: str = "test",
    batch_size: int = 64,
    device: str = "cpu",
) -> dict[str, float]:
    """Test MSE (z-scored, all nodes and windows) and NSE per node on de-normalised values
    (median and mean over nodes; groups evaluated separately, then pooled)."""
    total, count = 0.0, 0
    scores = []
    for group, pred, y in predict(model, data, split, batch_size, device):
        total += float(((pred - y) ** 2).sum())
        count += y.numel()
        g = data.groups[group]
        scale, shift = g.std.numpy(), g.mean.numpy()
        scores.append(nse(pred.numpy() * scale + shift, y.numpy() * scale + shift))
    values = np.concatenate(scores) if scores else np.array([np.nan])
    finite = values[np.isfinite(values)]
    return {
        "mse": total / max(count, 1),
        "nse_median": float(np.median(finite)) if finite.size else float("nan"),
        "nse_mean": float(np.mean(finite)) if finite.size else float("nan"),
    }


def fit(
    model: nn.Module,
    data: FluxDataset,
    config: TrainConfig,
    *,
    device: str = "cpu",
    progress: Any = None,
    snapshot_epochs: tuple[int, ...] = (),
) -> TrainResult:
    """Train ``model`` on ``data``'s train split; keep the best validation-MSE state (loaded at the end).

    ``snapshot_epochs``: after each of these epochs, keep a copy of the best state so far in
    ``result.snapshots`` (what training for only that many epochs would have returned)."""
    model.to(device)
    if not _has_params(model) or config.epochs == 0:
        val = evaluate(model, data, "val", device=device)["mse"]
        return TrainResult(best_epoch=0, best_val_mse=val)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode="min", factor=0.5, patience=config.patience, min_lr=1e-6
    )
    best_state = copy.deepcopy(model.state_dict())
    best_val, best_epoch = math.inf, 0
    result = TrainResult(best_epoch=0, best_val_mse=math.inf)
    graphs = {
        i: (g.edge_index.to(device), g.edge_attr.to(device)) for i, g in enumerate(data.groups)
    }
    for epoch in range(1, config.epochs + 1):
        model.train()
        batches = _batches(data, "train", config.batch_size, rng)
        if config.max_batches is not None:
            batches = batches[: config.max_batches]
        start = time.perf_counter()
        total, seen = 0.0, 0
        opt.zero_grad(set_to_none=True)
        for step, (group, starts) in enumerate(batches, start=1):
            x, y = data.batch(group, starts)
            ei, ea = graphs[group]
            extra = {k: v.to(device) for k, v in data.model_inputs(model, group, starts).items()}
            pred = model(x.to(device), ei, ea, **extra).squeeze(-1)
            loss = ((pred - y.to(device)) ** 2).mean()
            if config.physics_loss_weight > 0:
                loss = loss + config.physics_loss_weight * _physics_penalty(pred, data, group)
            if not torch.isfinite(loss):
                result.skipped_batches += 1
                opt.zero_grad(set_to_none=True)
                continue
            loss.backward()
            result.trained_batches += 1
            if config.clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), config.clip)
            if step % config.accumulate == 0 or step == len(batches):
                opt.step()
                opt.zero_grad(set_to_none=True)
            total += float(loss.detach()) * y.numel()
            seen += y.numel()
        result.epoch_times.append(time.perf_counter() - start)
        val = evaluate(model, data, "val", device=device)["mse"]
        sched.step(val)
        result.history.append(
            {
                "epoch": epoch,
                "train_mse": total / max(seen, 1),
                "val_mse": val,
                "lr": opt.param_groups[0]["lr"],
            }
        )
        if val < best_val:
            best_val, best_epoch = val, epoch
            best_state = copy.deepcopy(model.state_dict())
        if epoch in snapshot_epochs and best_epoch > 0:
            result.snapshots[epoch] = best_state
        if progress is not None:
            progress.update(1)
            progress.set_postfix(val=f"{val:.4f}")
    total_batches = result.trained_batches + result.skipped_batches
    if result.trained_batches == 0:
        raise TrainingFailed(
            f"no batch trained: all {total_batches} training batches gave a non-finite loss "
            f"(NaN/inf) and were skipped; lower the learning rate (lr {config.lr:g})"
        )
    if best_epoch == 0:
        raise TrainingFailed(
            f"training diverged: the validation MSE was non-finite after every one of "
            f"{config.epochs} epochs ({result.skipped_batches} of {total_batches} training batches "
            f"skipped as non-finite); lower the learning rate (lr {config.lr:g})"
        )
    model.load_state_dict(best_state)
    result.best_epoch, result.best_val_mse = best_epoch, best_val
    return result
