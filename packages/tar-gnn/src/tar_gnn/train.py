"""One full-batch training loop for every method (TAR Alg. 1's outer loop; GOOD's protocol).

After every epoch the model is evaluated on ID-val, ID-test, OOD-val and OOD-test. The reported
OOD-test accuracy is the one at the epoch with the best OOD-val accuracy (GOOD's model selection);
ID-test is also reported at the best ID-val epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor

from .config import TrainConfig
from .methods import TAR, Method, StepContext, per_node_loss
from .models import GNN, sparse_input
from .splits import MASKS

__all__ = [
    "NonFiniteLossError",
    "TrainConfig",
    "TrainResult",
    "evaluate_masks",
    "masks_accuracy",
    "train_node_classifier",
]

EVAL_MASKS = ("id_val_mask", "id_test_mask", "ood_val_mask", "ood_test_mask")


class NonFiniteLossError(FloatingPointError):
    """The training loss stopped being finite: the run trained nothing worth reporting."""


@dataclass
class TrainResult:
    """Selected metrics, per-epoch history, timing and the trained model."""

    metrics: dict[str, float]
    history: list[dict[str, float]]
    epoch_time_s: list[float]
    model: GNN
    best_epoch: int
    best_id_epoch: int
    diagnostics: list[dict[str, float]] = field(default_factory=list)


def masks_accuracy(logits: Tensor, y: Tensor, mask: Tensor) -> dict[str, float]:
    """Accuracy, balanced accuracy (mean per-class recall) and macro-F1 over ``mask``."""
    if int(mask.sum()) == 0:
        return {"acc": float("nan"), "bacc": float("nan"), "f1": float("nan")}
    pred = logits[mask].argmax(dim=1)
    true = y[mask]
    acc = float((pred == true).double().mean())
    classes = torch.unique(true)
    recalls, f1s = [], []
    for c in classes:
        tp = float(((pred == c) & (true == c)).sum())
        pos = float((true == c).sum())
        predicted = float((pred == c).sum())
        recalls.append(tp / pos)
        prec = tp / predicted if predicted else 0.0
        rec = tp / pos
        f1s.append(0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec))
    return {"acc": acc, "bacc": sum(recalls) / len(recalls), "f1": sum(f1s) / len(f1s)}


def evaluate_masks(model: torch.nn.Module, data: Any) -> dict[str, float]:
    """Accuracy (and balanced accuracy, macro-F1) of ``model`` on every mask ``data`` holds."""
    model.eval()
    arch = getattr(model, "arch", "")
    with torch.no_grad():
        logits = model(sparse_input(data.x, arch), data.edge_index)
    out: dict[str, float] = {}
    for name in MASKS:
        mask = getattr(data, name, None)
        if mask is None:
            continue
        short = name.replace("_mask", "")
        for key, value in masks_accuracy(logits, data.y, mask).items():
            out[f"{short}_{key}"] = value
    return out


def train_node_classifier(
    data: Any,
    method: Method,
    config: TrainConfig | None = None,
    *,
    seed: int = 0,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    flagged: Tensor | None = None,
) -> TrainResult:
    """Train a :class:`~tar_gnn.GNN` on ``data.train_mask`` with ``method``'s objective.

    ``config.epochs`` auto means 100 epochs. A loss that stops being finite raises
    :class:`NonFiniteLossError`. The random state is forked, so the caller's global RNG is left as it was. ``flagged`` [N] (e.g.
    ``data.minority``) makes TAR runs log the weight mass on the flagged training nodes.
    """
    cfg = config or TrainConfig()
    dev = torch.device(cfg.device)
    for name in ("train_mask", "ood_val_mask", "ood_test_mask"):
        if getattr(data, name, None) is None:
            raise ValueError(f"data has no {name}; build a split first (tar_gnn.make_split)")
    train_mask = data.train_mask.bool()
    if int(train_mask.sum()) == 0:
        raise ValueError("train_mask selects no node")
    method.setup(data, train_mask.cpu())
    env = getattr(data, "env_id", None)
    env_tr = env[train_mask].to(dev) if env is not None else None
    x, edge_index, y = data.x.to(dev), data.edge_index.to(dev), data.y.to(dev)
    in_dim = x.size(1)
    x = sparse_input(x, cfg.arch)
    y_tr = y[train_mask.to(dev)]
    tm = train_mask.to(dev)
    masks = {k: getattr(data, k).to(dev) for k in EVAL_MASKS if getattr(data, k, None) is not None}
    flag_tr = flagged[train_mask].bool() if flagged is not None else None
    devices = [dev.index] if dev.type == "cuda" and dev.index is not None else None
    with torch.random.fork_rng(devices=devices if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        model = GNN(
            in_dim,
            int(data.y.max()) + 1,
            hidden=cfg.hidden,
            layers=cfg.layers,
            dropout=cfg.dropout,
            arch=cfg.arch,
        ).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, list(cfg.milestones), gamma=cfg.gamma)

        def eval_loss() -> Tensor:
            model.eval()
            with torch.no_grad():
                out = per_node_loss(model(x, edge_index)[tm], y_tr)
            model.train()
            return out

        def embedding() -> Tensor:
            model.eval()
            with torch.no_grad():
                out = model.embed(x, edge_index)[tm]
            model.train()
            return out

        ctx = StepContext(env=env_tr, eval_loss=eval_loss, embedding=embedding)
        history: list[dict[str, float]] = []
        diagnostics: list[dict[str, float]] = []
        times: list[float] = []
        for epoch in range(cfg.n_epochs):
            model.train()
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            logits = model(x, edge_index)[tm]
            loss = method.loss(logits, y_tr, ctx)
            if not bool(torch.isfinite(loss.detach())):
                raise NonFiniteLossError(
                    f"the training loss is {float(loss.detach())} at epoch {epoch}: training "
                    "diverged and nothing is reported (a smaller learning rate may help)"
                )
            loss.backward()
            opt.step()
            sched.step()
            times.append(time.perf_counter() - start)
            diag = method.diagnostics()
            if isinstance(method, TAR) and flag_tr is not None and method.weighter.q is not None:
                q = method.weighter.q
                diag["flagged_mass"] = float(q[flag_tr.to(q.device)].sum())
                diag["flagged_share"] = float(flag_tr.double().mean())
            diagnostics.append(diag)
            model.eval()
            with torch.no_grad():
                out = model(x, edge_index)
            row = {"epoch": float(epoch), "train_loss": float(loss.detach())}
            for name, mask in masks.items():
                row[name.replace("_mask", "_acc")] = (
                    float((out[mask].argmax(1) == y[mask]).double().mean())
                    if int(mask.sum())
                    else float("nan")
                )
            history.append(row)
            if on_epoch is not None:
                on_epoch(epoch, row)
    best = _argmax(history, "ood_val_acc")
    best_id = _argmax(history, "id_val_acc") if "id_val_acc" in history[0] else best
    metrics = {
        "ood_test_acc": history[best]["ood_test_acc"],
        "ood_val_acc": history[best]["ood_val_acc"],
        "id_test_acc_at_ood_val": history[best].get("id_test_acc", float("nan")),
        "id_test_acc": history[best_id].get("id_test_acc", float("nan")),
        "id_val_acc": history[best_id].get("id_val_acc", float("nan")),
        "ood_test_acc_at_id_val": history[best_id]["ood_test_acc"],
        "best_epoch": float(best),
        "epoch_time_s": float(sorted(times)[len(times) // 2]),
    }
    return TrainResult(metrics, history, times, model, best, best_id, diagnostics)


def _argmax(history: list[dict[str, float]], key: str) -> int:
    best, value = 0, -1.0
    for i, row in enumerate(history):
        v = row.get(key, float("nan"))
        if v == v and v > value:  # first maximum; NaN never wins
            best, value = i, v
    return best


def config_dict(cfg: TrainConfig) -> dict[str, Any]:
    """The fields of ``cfg`` as JSON values (auto epochs as the number they stand for)."""
    out = asdict(cfg)
    out["epochs"] = cfg.n_epochs
    out["milestones"] = list(cfg.milestones)
    return out
