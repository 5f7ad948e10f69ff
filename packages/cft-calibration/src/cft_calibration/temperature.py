"""Temperature scaling (Guo et al. 2017), the paper's post-hoc baseline, fitted with a working gradient.

The official ``inference_temperature.py`` recomputes the loss under ``no_grad`` and wraps it in a fresh
leaf tensor, so the temperature gets no gradient and L-BFGS stops at its initial value T = 1.5
(reproduced by ``mode="official"``). Here the held-out logits are collected once, T = exp(tau) with
tau_0 = 0, and NLL(tau) = -(1/N) sum_i log softmax(z_i / T)_{y_i} is minimised by L-BFGS (strong-Wolfe
line search, <= 100 iterations) and, as a check and fallback, by a bounded golden-section search on
tau in [-3, 3]; the better of the two is kept. NLL is convex in beta = 1/T, so the optimum is unique.
Scaling by a positive T never changes the argmax, hence never the accuracy.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
from torch import Tensor

__all__ = ["TemperatureScaler", "temperature_nll"]

_MASKED = -1e30


def _prep(logits: Any, labels: Any, mask: Any = None) -> tuple[Tensor, Tensor]:
    z = torch.as_tensor(logits).detach().to(torch.float64).cpu()
    y = torch.as_tensor(labels).detach().cpu().long()
    if z.ndim != 2 or z.shape[0] == 0 or z.shape[1] < 2:
        raise ValueError(f"logits must have shape [N >= 1, K >= 2], got {tuple(z.shape)}")
    if y.shape != (z.shape[0],):
        raise ValueError(f"labels must have shape [{z.shape[0]}], got {tuple(y.shape)}")
    if ((y < 0) | (y >= z.shape[1])).any():
        raise ValueError(f"labels must lie in [0, {z.shape[1] - 1}]")
    valid = torch.isfinite(z) if mask is None else torch.as_tensor(mask).cpu().bool()
    if mask is not None and valid.shape != z.shape:
        raise ValueError(f"mask must have shape {tuple(z.shape)}, got {tuple(valid.shape)}")
    if torch.isnan(z).any() or (torch.isinf(z) & valid).any() or (z == math.inf).any():
        raise ValueError("logits hold NaN or +inf (absent options must be -inf or masked)")
    if not valid.gather(1, y[:, None]).all():
        raise ValueError("a label points at an absent option")
    return z.masked_fill(~valid, _MASKED), y


def temperature_nll(logits: Tensor, labels: Tensor, temperature: float | Tensor) -> Tensor:
    """Mean NLL of ``softmax(logits / T)`` at the gold labels (absent options: logit -inf)."""
    z, y = _prep(logits, labels)
    t = torch.as_tensor(temperature, dtype=torch.float64)
    return torch.nn.functional.cross_entropy(z / t, y)


class TemperatureScaler:
    """Fit one temperature on held-out logits by NLL; ``transform`` returns calibrated probabilities.

    Parameters
    ----------
    mode : ``"lbfgs"`` (default) or ``"official"`` (reproduces the official code's zero-gradient bug:
        T stays at ``init_temperature`` = 1.5 and a warning is issued).
    max_iter : L-BFGS iterations (default 100).
    tau_bounds : search interval of tau = log T for the bounded scalar search (default (-3, 3)).

    Attributes (after ``fit``): ``temperature_`` (float), ``nll_before_`` / ``nll_after_``, ``info_``.
    """

    def __init__(
        self,
        mode: str = "lbfgs",
        max_iter: int = 100,
        tau_bounds: tuple[float, float] = (-3.0, 3.0),
        init_temperature: float = 1.5,
    ) -> None:
        if mode not in ("lbfgs", "official"):
            raise ValueError(f"mode must be 'lbfgs' or 'official', got {mode!r}")
        if max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {max_iter}")
        if not tau_bounds[0] < tau_bounds[1]:
            raise ValueError(f"tau_bounds must be increasing, got {tau_bounds}")
        if not init_temperature > 0:
            raise ValueError(f"init_temperature must be > 0, got {init_temperature}")
        self.mode = mode
        self.max_iter = max_iter
        self.tau_bounds = tau_bounds
        self.init_temperature = init_temperature

    def fit(self, logits: Any, labels: Any, mask: Any = None) -> TemperatureScaler:
        z, y = _prep(logits, labels, mask)

        def nll_at(tau: float) -> float:
            return float(torch.nn.functional.cross_entropy(z * math.exp(-tau), y))

        self.nll_before_ = nll_at(0.0)
        if self.mode == "official":
            warnings.warn(
                "TemperatureScaler(mode='official') reproduces the official code: the loss has no "
                "gradient with respect to T, so T stays at its initial value",
                stacklevel=2,
            )
            self.temperature_ = self.init_temperature
            self.nll_after_ = nll_at(math.log(self.init_temperature))
            self.info_: dict[str, Any] = {"mode": "official"}
            return self

        tau = torch.zeros((), dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS(
            [tau], lr=1.0, max_iter=self.max_iter, line_search_fn="strong_wolfe"
        )

        def closure() -> Tensor:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(z * torch.exp(-tau), y)
            loss.backward()
            return loss

        opt.step(closure)
        tau_lbfgs = float(tau.detach())
        lo, hi = self.tau_bounds
        tau_lbfgs_c = min(max(tau_lbfgs, lo), hi) if math.isfinite(tau_lbfgs) else 0.0
        tau_golden = _golden(nll_at, lo, hi)
        candidates = {"lbfgs": tau_lbfgs_c, "golden": tau_golden}
        best = min(candidates, key=lambda k: nll_at(candidates[k]))
        self.temperature_ = math.exp(candidates[best])
        self.nll_after_ = nll_at(candidates[best])
        self.info_ = {
            "mode": "lbfgs",
            "chosen": best,
            "tau_lbfgs": tau_lbfgs,
            "tau_golden": tau_golden,
            "nll_lbfgs": nll_at(tau_lbfgs_c),
            "nll_golden": nll_at(tau_golden),
        }
        return self

    def _check(self) -> float:
        if not hasattr(self, "temperature_"):
            raise RuntimeError("TemperatureScaler is not fitted: call fit(logits, labels) first")
        return self.temperature_

    def scale(self, logits: Any) -> Tensor:
        """Logits divided by the fitted temperature (absent options stay -inf)."""
        t = self._check()
        z = torch.as_tensor(logits).detach().to(torch.float64)
        return z / t

    def transform(self, logits: Any) -> Tensor:
        """Calibrated probabilities softmax(z / T), shape [N, K] (float64)."""
        return torch.softmax(self.scale(logits), dim=-1)

    def __repr__(self) -> str:
        fitted = f", temperature_={self.temperature_:.4f}" if hasattr(self, "temperature_") else ""
        return f"TemperatureScaler(mode={self.mode!r}{fitted})"


def _golden(f: Any, lo: float, hi: float, tol: float = 1e-7, max_iter: int = 200) -> float:
    """Minimise a unimodal f on [lo, hi] by golden-section search."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(max_iter):
        if b - a < tol:
            break
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2
