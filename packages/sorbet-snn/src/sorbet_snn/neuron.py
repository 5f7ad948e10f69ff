"""The integrate-and-fire neuron of Sorbet's spike re-encoding (paper Algorithm 4, "Average IF model").

No leak, reset by subtraction, at most one spike per step, a constant integer input level ``x`` for
``T`` steps, ``u_0 = 0``::

    u_t = u_{t-1} + x;   s_t = 1[u_t >= theta];   u_t <- u_t - theta * s_t

Both the step-by-step simulator and the closed form ``N(t) = clamp(floor(t x / theta), 0, t)``,
``s_t = N(t) - N(t-1)`` run in exact arithmetic: integer levels, ``theta = num / den`` a rational, the
membrane an int64 in units of ``1/den``. They agree bit for bit on every input and every T.
Spike tensors are time-first, ``[T, ...]`` (spikingjelly's multi-step layout).
"""

from __future__ import annotations

from fractions import Fraction

import torch
from torch import Tensor, nn

__all__ = [
    "IFNeuron",
    "if_closed_form",
    "if_counts",
    "if_simulate",
    "threshold",
]


def threshold(time_steps: int, mode: str = "official") -> Fraction:
    """The firing threshold as an exact rational.

    ``"official"``: ``0.95 (T - 1e-4) = 19 (10^4 T - 1) / (2 10^5)`` (15.199905 at T = 16), which
    gives ``N(T) = x`` for every integer level ``0 <= x <= T - 1`` only while ``T <= 16``: a larger T
    raises a ValueError. ``"exact"``: ``theta = T``, so ``N(T) = x`` for every ``0 <= x <= T``.
    """
    if time_steps < 1:
        raise ValueError(f"time_steps must be >= 1, got {time_steps}")
    if mode == "exact":
        return Fraction(time_steps)
    if mode == "official":
        if time_steps > 16:
            raise ValueError(
                f"theta_mode='official' (theta = 0.95 (T - 1e-4)) is not exact for T = {time_steps} "
                "> 16: the spike count then differs from the level; use theta_mode='exact'"
            )
        return Fraction(19 * (10**4 * time_steps - 1), 2 * 10**5)
    raise ValueError(f"theta mode must be 'official' or 'exact', got {mode!r}")


def _as_levels(levels: Tensor) -> Tensor:
    """Integer levels as int64; non-integer values raise a ValueError (quantise them first)."""
    if not torch.is_tensor(levels):
        levels = torch.as_tensor(levels)
    if levels.dtype.is_floating_point:
        if not bool(torch.isfinite(levels).all()):
            raise ValueError("IF neuron input holds NaN or inf; expected integer levels")
        if not bool((levels == torch.round(levels)).all()):
            raise ValueError(
                "IF neuron input must be integer levels (quantise real values first); "
                "got non-integer values"
            )
        return levels.to(torch.int64)
    if levels.dtype == torch.bool or levels.is_complex():
        raise ValueError(f"IF neuron input must be integer levels, got dtype {levels.dtype}")
    return levels.to(torch.int64)


def _theta(theta: Fraction | int) -> tuple[int, int]:
    theta = Fraction(theta)
    if theta <= 0:
        raise ValueError(f"theta must be > 0, got {theta}")
    return theta.numerator, theta.denominator


def if_simulate(levels: Tensor, time_steps: int, theta: Fraction | int) -> Tensor:
    """Step-by-step simulation: spikes ``[T, *levels.shape]`` (uint8), one membrane update per step."""
    x = _as_levels(levels)
    _theta(theta)
    if time_steps < 1:
        raise ValueError(f"time_steps must be >= 1, got {time_steps}")
    neuron = IFNeuron(theta)
    out = torch.empty((time_steps, *x.shape), dtype=torch.uint8, device=x.device)
    for t in range(time_steps):
        out[t] = neuron.step(x)
    return out


def if_counts(levels: Tensor, time_steps: int, theta: Fraction | int) -> Tensor:
    """Closed-form spike count after T steps, ``N(T) = clamp(floor(T x / theta), 0, T)`` (int64)."""
    x = _as_levels(levels)
    num, den = _theta(theta)
    n = torch.div(time_steps * x * den, num, rounding_mode="floor")
    return n.clamp(0, time_steps)


def if_closed_form(levels: Tensor, time_steps: int, theta: Fraction | int) -> Tensor:
    """Closed-form spike train ``[T, *levels.shape]`` (uint8): ``s_t = N(t) - N(t-1)``."""
    x = _as_levels(levels)
    num, den = _theta(theta)
    if time_steps < 1:
        raise ValueError(f"time_steps must be >= 1, got {time_steps}")
    t = torch.arange(0, time_steps + 1, dtype=torch.int64, device=x.device)
    t = t.reshape(-1, *([1] * x.dim()))
    n = torch.div(t * (x * den), num, rounding_mode="floor")
    n = torch.minimum(n.clamp_min(0), t)
    return (n[1:] - n[:-1]).to(torch.uint8)


class IFNeuron(nn.Module):
    """A stateful integrate-and-fire neuron for step-by-step simulation.

    ``step(x)`` integrates one step and returns the spikes; ``forward(x, T)`` resets, then runs T steps
    and returns ``[T, ...]`` spikes. Call :meth:`reset` between inputs (``forward`` does it): the
    membrane is state, and a neuron that is never reset carries charge into the next sample.
    """

    def __init__(self, theta: Fraction | int) -> None:
        super().__init__()
        self.num, self.den = _theta(theta)
        self.membrane: Tensor | None = None

    def reset(self) -> None:
        """Forget the membrane potential (u = 0)."""
        self.membrane = None

    def step(self, levels: Tensor) -> Tensor:
        x = _as_levels(levels)
        if self.membrane is None or self.membrane.shape != x.shape:
            self.membrane = torch.zeros_like(x)
        u = self.membrane + x * self.den
        spikes = u >= self.num
        self.membrane = u - self.num * spikes.to(torch.int64)
        return spikes.to(torch.uint8)

    def forward(self, levels: Tensor, time_steps: int) -> Tensor:
        self.reset()
        out = torch.stack([self.step(levels) for _ in range(time_steps)])
        self.reset()
        return out
