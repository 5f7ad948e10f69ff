"""Baselines for the demo and the benchmarks (private: not part of the public API).

- :class:`SAM`: sharpness-aware minimization wrapping any torch optimizer (Foret et al., 2021);
  the base optimizer's own weight decay (coupled L2 for SGD).
- :class:`AdaHessian`: diagonal-Hessian Adam (Yao et al., 2021) with Rademacher Hutchinson
  probes, spatial averaging of ``|Ĥ|`` for 4-D conv weights, ``v ← β2 v + (1 − β2) D²`` and
  ``w ← w(1 − ηλ) − η m̂ / (v̂^{κ/2} + eps)`` (Yao et al., 2021, with κ = 1).
- :class:`SophiaH`: Sophia with Hutchinson Hessian estimates (Liu et al., 2024), the baseline of the
  Sassha paper (Sec. 5): ``h ← β2 h + (1 − β2) Ĥ`` on refresh steps only, ``m ← β1 m + (1 − β1) g``,
  ``w ← w(1 − ηλ) − η sign(m) min(abs(m) / (γ max(h, 0) + eps), 1)``, no bias correction.
SGD and AdamW come from ``torch.optim``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor
from torch.optim import Optimizer

from .functional import hutchinson_diagonal, rademacher_like


def _closure_twice(opt: Any, closure: Callable[[], Tensor]) -> Tensor:
    """Shared two-pass SAM cycle: gradients at ``w``, perturb, gradients at ``w + ε``, update."""
    opt.zero_grad(set_to_none=True)
    with torch.enable_grad():
        loss = closure()
    opt.first_step(zero_grad=True)
    with torch.enable_grad():
        closure()
    opt.second_step()
    return loss


class SAM(Optimizer):
    """SAM: ``ε = ρ g / (‖g‖ + 1e-12)``, gradient at ``w + ε``, restore ``w`` by copy, base step."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        base_optimizer: type[Optimizer],
        rho: float = 0.05,
        adaptive: bool = False,
        **kwargs: Any,
    ) -> None:
        if rho < 0:
            raise ValueError(f"Invalid rho: {rho} (expected >= 0)")
        super().__init__(params, {"rho": rho, "adaptive": adaptive, **kwargs})
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        adaptive = {p: g["adaptive"] for g in self.param_groups for p in g["params"]}
        norm = torch.linalg.vector_norm(
            torch.stack([((p.abs() if adaptive[p] else 1.0) * p.grad).norm() for p in params])
        )
        for group in self.param_groups:
            scale = group["rho"] / (norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.clone()
                p.add_((p * p if group["adaptive"] else 1.0) * p.grad * scale)
        if zero_grad:
            self.zero_grad(set_to_none=True)

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if "old_p" in self.state[p]:
                    p.copy_(self.state[p].pop("old_p"))
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad(set_to_none=True)

    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor:  # type: ignore[override]
        if closure is None:
            raise RuntimeError("SAM.step needs a closure (or use first_step/second_step)")
        return _closure_twice(self, closure)


class _LazyHutchinson(Optimizer):
    """Shared shell of the Hessian baselines: a Hutchinson refresh (Rademacher probes from a
    seeded generator) on steps 1, k+1, 2k+1, ... with ``k = update_period``, the step and HVP
    counters, and a :meth:`state_dict` that carries them and the generator."""

    _state_key = "lazy_hutchinson"

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        defaults: dict[str, Any],
        update_period: int,
        seed: int,
    ) -> None:
        super().__init__(params, defaults)
        self.update_period = update_period
        self.generator = torch.Generator().manual_seed(seed)
        self.global_step = 0
        self.hvp_calls = 0

    @property
    def create_graph(self) -> bool:
        """Whether the next backward must build a graph (a Hessian refresh is due)."""
        return self.global_step % self.update_period == 0

    def _gradients_and_hessian(
        self, closure: Callable[[], Tensor] | None
    ) -> tuple[Tensor | None, list[Tensor], list[Tensor] | None]:
        """Run ``closure`` (if any); return the loss, the parameters with a gradient and, on a
        refresh step, their Hutchinson diagonal estimates (None otherwise)."""
        loss = None
        if closure is not None:
            self.zero_grad(set_to_none=True)
            with torch.enable_grad():
                loss = closure()
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not self.create_graph:
            return loss, params, None
        if not any(p.grad.requires_grad for p in params):  # type: ignore[union-attr]
            raise RuntimeError(
                f"{type(self).__name__}: Hessian refresh due at step {self.global_step + 1} but "
                "gradients have no graph; call loss.backward(create_graph=optimizer.create_graph)"
            )
        with torch.enable_grad():
            est, _ = hutchinson_diagonal(
                [p.grad for p in params],
                params,
                lambda: [rademacher_like(p, self.generator) for p in params],
            )
        self.hvp_calls += 1
        return loss, params, list(est)

    def state_dict(self) -> dict[str, Any]:
        sd = super().state_dict()
        sd[self._state_key] = {
            "global_step": self.global_step,
            "hvp_calls": self.hvp_calls,
            "generator": self.generator.get_state(),
            "update_period": self.update_period,
        }
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        extra = state_dict.pop(self._state_key, None)
        super().load_state_dict(state_dict)
        if extra is not None:
            self.global_step = int(extra["global_step"])
            self.hvp_calls = int(extra["hvp_calls"])
            self.generator.set_state(extra["generator"])


class AdaHessian(_LazyHutchinson):
    """AdaHessian baseline with Hutchinson refresh every ``update_period`` steps."""

    _state_key = "adahessian"

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 0.15,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-4,
        weight_decay: float = 0.0,
        hessian_power: float = 1.0,
        update_period: int = 1,
        seed: int = 0,
    ) -> None:
        if lr < 0:
            raise ValueError(f"Invalid lr: {lr} (expected >= 0)")
        if update_period < 1:
            raise ValueError(f"Invalid update_period: {update_period} (expected >= 1)")
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "hessian_power": hessian_power,
        }
        super().__init__(params, defaults, update_period, seed)

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        loss, params, est = self._gradients_and_hessian(closure)
        hessian: dict[Tensor, Tensor] | None = None
        if est is not None:
            hessian = {}
            for p, h in zip(params, est):
                h = h.abs()
                if h.dim() == 4:  # conv kernels: average over the spatial dims
                    h = h.mean(dim=(2, 3), keepdim=True).expand_as(h)
                hessian[p] = h
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.detach()
                p.grad = g
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_hessian_diag_sq"] = torch.zeros_like(p)
                state["step"] += 1
                if hessian is not None:
                    v = state["exp_hessian_diag_sq"]
                    v.mul_(beta2).addcmul_(hessian[p], hessian[p], value=1 - beta2)
                state["exp_avg"].mul_(beta1).add_(g, alpha=1 - beta1)
                t = state["step"]
                v_hat = state["exp_hessian_diag_sq"] / (1 - beta2**t)
                denom = v_hat.pow(group["hessian_power"] / 2).add_(group["eps"])
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.addcdiv_(state["exp_avg"], denom, value=-group["lr"] / (1 - beta1**t))
        self.global_step += 1
        return loss


class SophiaH(_LazyHutchinson):
    """Sophia-H baseline: clipped, diagonal-Hessian-preconditioned momentum (no bias correction).

    Per step: ``m ← β1 m + (1 − β1) g``; every ``update_period`` steps (steps 1, k+1, ...) a
    Hutchinson estimate ``Ĥ`` (Rademacher probes) enters ``h ← β2 h + (1 − β2) Ĥ`` (``h`` is not
    touched on other steps); then ``w ← w(1 − ηλ) − η sign(m) min(abs(m) / (γ max(h, 0) + eps), 1)``
    with ``γ = clip_threshold``. The clip is active where ``abs(m) > γ max(h, 0) + eps``: there the
    step is the sign step ``η sign(m)``. Defaults as the Sassha repository's trainer (lr 1e-3,
    betas (0.9, 0.999), γ 0.01, eps 1e-4; ``update_period`` 10 as in the Sophia paper).
    The probe generator, step and HVP counters are part of :meth:`state_dict`.
    """

    _state_key = "sophia"

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        clip_threshold: float = 0.01,
        eps: float = 1e-4,
        weight_decay: float = 0.0,
        update_period: int = 10,
        seed: int = 0,
    ) -> None:
        if lr < 0:
            raise ValueError(f"Invalid lr: {lr} (expected >= 0)")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Invalid betas: {betas} (expected 0 <= beta < 1)")
        if clip_threshold <= 0:
            raise ValueError(f"Invalid clip_threshold: {clip_threshold} (expected > 0)")
        if eps < 0 or weight_decay < 0:
            raise ValueError(f"Invalid eps/weight_decay: {eps}, {weight_decay} (expected >= 0)")
        if not isinstance(update_period, int) or update_period < 1:
            raise ValueError(f"Invalid update_period: {update_period} (expected an integer >= 1)")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "clip_threshold": clip_threshold,
            "eps": eps,
            "weight_decay": weight_decay,
        }
        super().__init__(params, defaults, update_period, seed)

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        loss, params, est = self._gradients_and_hessian(closure)
        hessian = None if est is None else dict(zip(params, est))
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.detach()
                p.grad = g  # free the double-backward graph
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["hessian_ema"] = torch.zeros_like(p)
                state["step"] += 1
                m, h = state["exp_avg"], state["hessian_ema"]
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                if hessian is not None:
                    h.mul_(beta2).add_(hessian[p], alpha=1 - beta2)
                ratio = m.abs().div_(h.clamp(min=0).mul(group["clip_threshold"]).add_(group["eps"]))
                update = m.sign().mul_(ratio.clamp_(max=1.0))
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(update, alpha=-group["lr"])
        self.global_step += 1
        return loss
