"""Evaluation and the run history."""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass, field, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["History", "evaluate"]


@torch.no_grad()
def evaluate(model: nn.Module, x: Tensor, y: Tensor, batch_size: int = 1024) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of ``model`` on ``(x, y)``."""
    model.eval()
    correct, loss = 0, 0.0
    for s in range(0, len(y), batch_size):
        z = model(x[s : s + batch_size])
        loss += float(F.cross_entropy(z, y[s : s + batch_size], reduction="sum"))
        correct += int((z.argmax(1) == y[s : s + batch_size]).sum())
    return correct / len(y), loss / len(y)


@dataclass
class History:
    """Per-round curves of one run plus its cost counters."""

    method: str
    rounds: list[int] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    ema_accuracy: list[float] = field(default_factory=list)
    client_time: list[float] = field(default_factory=list)
    round_time: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    dp_epsilon_max: list[float] = field(default_factory=list)
    dp_epsilon_mean: list[float] = field(default_factory=list)
    dp_epsilon_client: list[dict[int, float]] = field(default_factory=list)
    sampled: list[list[int]] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Clients that failed or did not reply: ``{"round", "partition_id", "reason"}``."""
    diverged: bool = False
    diverged_at_round: int | None = None
    divergence_reason: str | None = None
    cost: dict[str, Any] = field(default_factory=dict)
    final_arrays: dict[str, Tensor] | None = field(default=None, repr=False)

    def last_k_accuracy(self, k: int = 10) -> float:
        """Mean test accuracy over the last ``k`` rounds (the headline metric)."""
        acc = self.accuracy[-k:]
        return float(sum(acc) / len(acc)) if acc else float("nan")

    def within_run_std(self, k: int = 10) -> float | None:
        """Sample std (ddof=1) of the test accuracy over the last ``k`` rounds (None below 2)."""
        acc = self.accuracy[-k:]
        return float(statistics.stdev(acc)) if len(acc) > 1 else None

    def median_client_time(self) -> float:
        return float(statistics.median(self.client_time)) if self.client_time else float("nan")

    def last_k_val_accuracy(self, k: int = 10) -> float:
        """Mean validation accuracy over the last ``k`` rounds (model selection; nan without a
        validation split)."""
        acc = self.val_accuracy[-k:]
        return float(sum(acc) / len(acc)) if acc else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "final_arrays"}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> History:
        """Inverse of :meth:`to_dict` (checkpoints); unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        hist = cls(**{k: copy.deepcopy(v) for k, v in d.items() if k in names})
        hist.dp_epsilon_client = [{int(k): v for k, v in e.items()} for e in hist.dp_epsilon_client]
        return hist
