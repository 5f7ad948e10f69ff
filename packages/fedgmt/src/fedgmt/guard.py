"""Stability guard for the dual, runtime divergence detection, and divergence errors.

The guard is our own analysis of the dual (not from the paper; see the README, Deviations): in a
zero-curvature direction the dual acts as a constant gradient ``h_i / beta``; K steps of
momentum SGD from zero momentum multiply ``h_i`` by ``1 - kappa_i`` per participation, with
``kappa_i = eta * S(K_i, mu) / beta`` and ``S(K, mu) = sum_{k=1..K} (1 - mu^k) / (1 - mu)``.
``kappa >= 2`` diverges.

At run time :class:`DivergenceMonitor` flags a round whose losses or weights are non-finite or have
exploded relative to the start of the run (both engines call it after every round).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from .config import FedConfig

__all__ = [
    "CollapseDetector",
    "DivergenceError",
    "DivergenceMonitor",
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
    """Pre-flight stability guard over all clients' sizes ``n_i`` (kappa_max, see the module).

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


LOSS_FACTOR = 100.0
"""A loss above ``LOSS_FACTOR`` times the starting loss counts as divergence."""
WEIGHT_FACTOR = 1000.0
"""A parameter norm above ``WEIGHT_FACTOR`` times the starting norm counts as divergence."""


def _norm(params: Mapping[str, torch.Tensor]) -> float:
    total = 0.0
    for v in params.values():
        if torch.is_floating_point(v):
            total += float(v.detach().double().pow(2).sum())
    return math.sqrt(total)


class DivergenceMonitor:
    """Flags a round whose numbers are non-finite or exploded relative to the start of the run.

    The references are taken before any training: the loss of the initial model ``w_1`` on the test
    set (or ``log C``, the cross-entropy of a uniform prediction, when it is not known or smaller)
    and the parameter norm ``||w_1||`` (at least 1). A round diverges when a test or train loss is
    non-finite or above ``loss_factor`` times the loss reference, or a parameter is non-finite or
    the parameter norm exceeds ``weight_factor`` times its reference. Healthy runs stay far below
    these factors (the test loss of a trained model is rarely above a few times ``log C``).
    """

    def __init__(
        self,
        num_classes: int,
        initial_params: Mapping[str, torch.Tensor],
        initial_loss: float | None = None,
        *,
        loss_factor: float = LOSS_FACTOR,
        weight_factor: float = WEIGHT_FACTOR,
    ) -> None:
        chance = math.log(max(int(num_classes), 2))
        start = initial_loss if initial_loss is not None and math.isfinite(initial_loss) else 0.0
        self.loss_ref = max(chance, float(start))
        self.weight_ref = max(1.0, _norm(initial_params))
        self.loss_factor = float(loss_factor)
        self.weight_factor = float(weight_factor)

    def check(
        self,
        params: Mapping[str, torch.Tensor],
        *,
        test_loss: float | None = None,
        train_loss: float | None = None,
    ) -> str | None:
        """The reason this round diverged, or None when its numbers look sane."""
        limit = self.loss_factor * self.loss_ref
        for name, value in (("test loss", test_loss), ("train loss", train_loss)):
            if value is None:
                continue
            if not math.isfinite(value):
                return f"non-finite {name} ({value})"
            if value > limit:
                return (
                    f"{name} {value:.3g} exceeds {self.loss_factor:g} x the starting loss "
                    f"{self.loss_ref:.3g}"
                )
        norm = _norm(params)
        if not math.isfinite(norm):
            bad = next(
                (
                    k
                    for k, v in params.items()
                    if torch.is_floating_point(v) and not torch.isfinite(v).all()
                ),
                "?",
            )
            return f"non-finite global model (parameter {bad})"
        if norm > self.weight_factor * self.weight_ref:
            return (
                f"parameter norm {norm:.3g} exceeds {self.weight_factor:g} x the starting norm "
                f"{self.weight_ref:.3g}"
            )
        return None
