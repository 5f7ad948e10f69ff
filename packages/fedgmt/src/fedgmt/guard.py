"""Stability guard for the dual (spec 3.5) and divergence errors.

In a zero-curvature direction the dual acts as a constant gradient ``h_i / beta``; K steps of
momentum SGD from zero momentum multiply ``h_i`` by ``1 - kappa_i`` per participation, with
``kappa_i = eta * S(K_i, mu) / beta`` and ``S(K, mu) = sum_{k=1..K} (1 - mu^k) / (1 - mu)``.
``kappa >= 2`` diverges.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from .config import FedConfig

__all__ = [
    "CollapseDetector",
    "DivergenceError",
    "StabilityReport",
    "UnstableDualError",
    "check_stability",
    "kappa",
    "local_steps",
    "momentum_sum",
]


class DivergenceError(RuntimeError):
    """A non-finite loss, global model or dual: the run diverged."""


class UnstableDualError(ValueError):
    """Pre-flight guard: kappa_max >= 2 for a dual method without prox."""


def momentum_sum(num_steps: int, momentum: float) -> float:
    """``S(K, mu) = sum_{k=1..K} (1 - mu^k) / (1 - mu)`` (``K`` when ``mu = 0``)."""
    if momentum == 0:
        return float(num_steps)
    return sum((1.0 - momentum**k) / (1.0 - momentum) for k in range(1, num_steps + 1))


def local_steps(num_examples: int, batch_size: int, local_epochs: int) -> int:
    """``K_i = E * ceil(n_i / B)`` (the last partial batch is kept)."""
    return local_epochs * math.ceil(num_examples / batch_size)


def kappa(num_examples: int, cfg: FedConfig, lr: float | None = None) -> float:
    """``kappa_i = eta * S(K_i, mu) / beta`` (0 when the dual is off)."""
    beta = cfg.effective_beta
    if math.isinf(beta):
        return 0.0
    k = local_steps(num_examples, cfg.batch_size, cfg.local_epochs)
    return (cfg.lr if lr is None else lr) * momentum_sum(k, cfg.momentum) / beta


@dataclass
class StabilityReport:
    """Result of the pre-flight check."""

    kappa_max: float
    client: int
    steps: int
    verdict: str  # "stable" | "oscillating" | "unstable" | "not-applicable"
    message: str


def check_stability(
    sizes: Sequence[int], cfg: FedConfig, *, strict: bool = True
) -> StabilityReport:
    """Pre-flight guard of spec 3.5 over all clients' sizes ``n_i``.

    Applies to the dual methods without a prox term (FedGMT with ``prox = 0``). With
    ``strict=True`` and ``kappa_max >= 2`` raises :class:`UnstableDualError` unless
    ``cfg.allow_unstable``; ``1 <= kappa_max < 2`` warns.
    """
    if not sizes:
        raise ValueError("check_stability needs at least one client size")
    applies = cfg.method == "fedgmt" and cfg.prox == 0 and not math.isinf(cfg.effective_beta)
    kappas = [kappa(int(n), cfg) for n in sizes]
    i = max(range(len(kappas)), key=kappas.__getitem__)
    k_steps = local_steps(int(sizes[i]), cfg.batch_size, cfg.local_epochs)
    kmax = kappas[i] if applies else 0.0
    msg = (
        f"fedgmt: unstable dual for lr={cfg.lr} beta={cfg.beta} momentum={cfg.momentum}: "
        f"client {i} takes {k_steps} local steps, kappa={kappas[i]:.2f} >= 2; lower lr, "
        "raise beta, reduce local epochs, or set prox>0"
    )
    if not applies:
        return StabilityReport(0.0, i, k_steps, "not-applicable", "guard not applicable")
    if kmax >= 2:
        if strict and not cfg.allow_unstable:
            raise UnstableDualError(msg)
        return StabilityReport(kmax, i, k_steps, "unstable", msg)
    if kmax >= 1:
        text = f"fedgmt: dual oscillates (kappa={kmax:.2f} for client {i}); it still decays"
        warnings.warn(text, stacklevel=2)
        return StabilityReport(kmax, i, k_steps, "oscillating", text)
    return StabilityReport(kmax, i, k_steps, "stable", f"kappa_max={kmax:.3f} < 1: stable")


class CollapseDetector:
    """Flags accuracy <= 1/C + 0.02 for 3 consecutive rounds after having exceeded 1/C + 0.2."""

    def __init__(self, num_classes: int, patience: int = 3) -> None:
        self.chance = 1.0 / num_classes
        self.patience = patience
        self.armed = False
        self.low = 0

    def update(self, accuracy: float) -> bool:
        if accuracy > self.chance + 0.2:
            self.armed = True
        if self.armed and accuracy <= self.chance + 0.02:
            self.low += 1
        else:
            self.low = 0
        return self.low >= self.patience
