"""Sassha: Sharpness-aware Adaptive Second-order optimization with Stable Hessian Approximation.

Shin, Lee, Chung & Lee, ICML 2025 (arXiv:2502.18153). Written from the update of the paper's Sec. 4
(Method); "step N" in the comments refers to our numbering of that update, listed here:

1. ``g_t = ∇L_B(w_t)``                                     (first backward, no graph)
2. ``ε_t = ρ g_t / (‖g_t‖₂ + perturb_eps)``                 (:meth:`Sassha.perturb_weights`)
3. ``g̃_t = ∇L_B(w_t + ε_t)``                               (second backward, graph only on refresh)
4. ``Ĥ = (1/n) Σ_j z_j ⊙ ∇²L_B · z_j`` every ``k`` steps,    (:func:`hutchinson_diagonal`)
   ``D ← β2 D + (1 − β2) |Ĥ|``
5. ``w_t = w̃ − ε_t``                                       (restore)
6. ``m ← β1 m + (1 − β1) g̃_t``,  ``m̂ = m / (1 − β1^s)``
7. ``D̂ = D / c2``                                          (``bias_correction``)
8. ``w ← w (1 − ηλ) − η m̂ / (D̂^α + eps)``
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import torch
from torch import Tensor
from torch.optim import Optimizer

from .functional import (
    all_reduce_coalesced,
    hutchinson_diagonal,
    rademacher_like,
    sassha,
)

__all__ = [
    "NonFiniteError",
    "Sassha",
    "StepSwitch",
    "disable_running_stats",
    "enable_running_stats",
    "hutchinson_diagonal",
    "paper_lm_schedule",
    "rademacher_like",
]

HessianPower = float | Callable[[int], float]

_GROUP_KEYS = ("lr", "betas", "weight_decay", "rho", "eps", "perturb_eps", "hessian_power")
_GLOBAL_KEYS = (
    "lazy_hessian",
    "hessian_warmup",
    "n_samples",
    "bias_correction",
    "hvp_point",
    "seed",
    "distributed",
    "grad_reduce",
    "sync_perturbation_grad",
    "keep_hessian",
    "max_grad_norm",
    "clip_before_perturbation",
    "rho_warmup",
    "moment_bias_correction",
    "nonfinite",
    "cache_denominator",
)
_BIAS_CORRECTIONS = ("refresh", "step", "none")
_HVP_POINTS = ("perturbed", "reference")
_GRAD_REDUCES = ("mean", "sum")
_NONFINITE = ("raise", "skip")
_CYCLE_WARNING = r"Using backward\(\) with create_graph=True"
_NO_GRAPH = (
    "Sassha: Hessian refresh due at step {t} but gradients have no graph; "
    "call loss.backward(create_graph=optimizer.create_graph)"
)


class NonFiniteError(FloatingPointError):
    """Raised when a loss, gradient or Hessian estimate is NaN/Inf (``nonfinite="raise"``)."""


def _check(cond: bool, name: str, value: Any, accepted: str) -> None:
    if not cond:
        raise ValueError(f"Invalid {name}: {value!r} (expected {accepted})")


def _validate_group_values(values: dict[str, Any]) -> None:
    """Check the per-group hyperparameters present in ``values`` (torch.optim style messages)."""
    if "lr" in values:
        lr = values["lr"]
        if isinstance(lr, Tensor):
            lr = float(lr)
        _check(isinstance(lr, int | float) and lr >= 0.0, "lr", values["lr"], "a float >= 0")
    if "betas" in values:
        betas = values["betas"]
        _check(
            isinstance(betas, Sequence) and len(betas) == 2,
            "betas",
            betas,
            "a pair (beta1, beta2)",
        )
        for i, b in enumerate(betas):
            _check(0.0 <= b < 1.0, f"beta parameter at index {i} (betas)", b, "0 <= beta < 1")
    for key in ("weight_decay", "rho", "eps", "perturb_eps"):
        if key in values:
            _check(values[key] >= 0.0, key, values[key], "a float >= 0")
    if "hessian_power" in values:
        alpha = values["hessian_power"]
        if not callable(alpha):
            _check(
                isinstance(alpha, int | float) and alpha >= 0.0,
                "hessian_power",
                alpha,
                "a float >= 0 or a callable step -> float",
            )
    if values.get("adaptive") not in (None, True, False):
        raise ValueError(f"Invalid adaptive: {values['adaptive']!r} (expected True or False)")


def _finite(loss: Any) -> bool:
    """Whether a loss (tensor or number) is finite; a scalar costs one ``float()``."""
    if isinstance(loss, Tensor):
        loss = loss.detach()
        if loss.numel() != 1:
            return bool(torch.isfinite(loss).all())
    return math.isfinite(float(loss))


class StepSwitch:
    """Piecewise-constant schedule ``t -> before if t <= steps else after`` (picklable).

    Used as ``hessian_power`` by :meth:`Sassha.paper_lm`: α = 1 for the first ``steps`` steps,
    then 0.8 (the official GPT-2 recipe: the first 2,000 of 50,000 iterations).
    """

    def __init__(self, steps: int, before: float, after: float) -> None:
        _check(
            isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0,
            "steps",
            steps,
            "an integer >= 0",
        )
        self.steps, self.before, self.after = steps, float(before), float(after)

    def __call__(self, t: int) -> float:
        return self.before if t <= self.steps else self.after

    def __repr__(self) -> str:
        return f"StepSwitch(steps={self.steps}, before={self.before}, after={self.after})"


def _grads(params: Sequence[Tensor]) -> list[Tensor]:
    """Gradients of parameters known to have one."""
    return [cast(Tensor, p.grad) for p in params]


class Sassha(Optimizer):
    r"""Sassha optimizer (drop-in :class:`torch.optim.Optimizer`).

    Per step (paper Sec. 4; steps 1-8 of the module docstring): gradient at ``w``; SAM
    perturbation ``ε = ρ g/‖g‖``; gradient ``g̃`` at ``w + ε``; every ``lazy_hessian`` steps a Hutchinson estimate ``Ĥ`` of the Hessian diagonal at
    the perturbed point, stabilised as ``D ← β2 D + (1 − β2)|Ĥ|``; then the Adam-like update
    ``w ← w(1 − ηλ) − η m̂ / (D̂^α + eps)`` with ``α = hessian_power`` (paper: ½).

    Closure API (the closure runs forward + backward, calls
    ``loss.backward(create_graph=opt.create_graph)`` and returns the loss)::

        loss = opt.step(closure)

    or a closure that only returns the loss, which the optimizer differentiates with
    ``torch.autograd.grad`` (no parameter↔gradient reference cycle, no torch warning)::

        loss = opt.step(lambda: loss_fn(model(x), y))

    Explicit loop::

        loss_fn(model(x), y).backward()
        opt.perturb_weights()
        loss_fn(model(x), y).backward(create_graph=opt.create_graph)
        opt.step()
        opt.zero_grad()

    Args:
        params: iterable of parameters or param groups.
        lr: learning rate η (default: 0.15).
        betas: (β1, β2) of the first moment and of the Hessian EMA (default: (0.9, 0.999)).
        weight_decay: decoupled weight decay λ, applied as ``w ← w(1 − ηλ)`` (default: 0).
            The official trainers pass ``wd/lr``; to reproduce their configs use ``wd/lr`` here.
        rho: SAM radius ρ; 0 disables the perturbation (one backward per step) (default: 0.2).
        lazy_hessian: refresh interval k of the Hessian estimate (default: 10).
        hessian_warmup: refresh the Hessian on every one of the first ``hessian_warmup`` steps,
            then on steps 1, k+1, 2k+1, ... as usual; None means ``lazy_hessian`` (default: None).
            Without it, a coordinate whose curvature estimate at step 1 is (near) zero, e.g. a
            weight reading a ReLU channel that is dead on the first batch, moves by up to
            ``lr·m̂/eps`` per step until the refresh at step k+1 once its gradient appears; on a
            small CNN this made single steps of 10² to 10³ (README: Deviations). 0 disables the
            warm-up: with ``bias_correction="step"`` and ``hvp_point="reference"`` this
            reproduces the official code.
        n_samples: Rademacher probes per refresh (default: 1).
        hessian_power: exponent α (float ≥ 0 or callable ``f(step) -> float``) (default: 0.5).
        eps: added to ``D̂^α`` in the denominator (default: 1e-4).
        perturb_eps: added to the gradient norm in ε (default: 1e-12).
        adaptive: ASAM-style perturbation ``ε = ρ w²⊙g / ‖|w|⊙g‖`` (experimental) (default: False).
        bias_correction: ``"refresh"`` divides D by ``1 − β2^{n_ref}`` (number of refreshes,
            default), ``"step"`` by ``1 − β2^{t_ref}`` (official code), ``"none"`` not at all.
        hvp_point: ``"perturbed"`` (HVP at ``w + ε``, paper, default) or ``"reference"`` (official
            code: weights restored through ``.data`` before the HVP).
        keep_hessian: also keep the last ``|Ĥ|`` in the state, returned by ``hessian(p)``: a third
            buffer per parameter that no update reads (default: False, so the state is
            ``exp_avg`` and ``exp_hessian_diag``, two tensors per parameter as in AdamW).
        max_grad_norm: optional global clipping of ``g̃`` after the HVP (default: None).
        clip_before_perturbation: also clip the first-pass gradient ``g`` to global norm
            ``max_grad_norm`` before ``ε`` is formed from it, as the official language-model
            trainer does (default: False). ``ε = ρ g/(‖g‖ + perturb_eps)`` does not depend on the
            scale of ``g`` except through ``perturb_eps``, so this changes ``ε`` only when
            ``‖g‖`` is comparable to ``perturb_eps``; it also clips the ``p.grad`` that
            ``perturb_weights(zero_grad=False)`` leaves behind. Needs ``max_grad_norm``.
        rho_warmup: for the first ``rho_warmup`` steps there is no perturbation (ε = 0, as
            ρ = 0: the closure runs once, one backward per step), then ``rho`` applies
            (official GPT-2 recipe: the first 2,000 iterations) (default: 0).
        moment_bias_correction: divide ``m`` by ``1 − β1^s`` (default: True); False is the
            official language-model variant (no bias correction of either moment together with
            ``bias_correction="none"``).
        distributed: ``"auto"`` all-reduces ``g̃`` and ``Ĥ`` when a process group with world size
            > 1 is initialised; ``True``/``False`` force it (default: "auto").
        grad_reduce: ``"mean"`` or ``"sum"`` for those all-reduces (default: "mean").
        sync_perturbation_grad: also all-reduce the first-pass gradient before computing ε
            (default: False, per-worker perturbations as in the official code).
        seed: seed of the per-device probe generators (same on every rank) (default: 0).
        foreach: use ``torch._foreach_*`` kernels; None = only when all parameters are on CUDA.
        cache_denominator: keep ``D̂^α + eps`` of every parameter between refreshes and reuse it
            on the steps that do not refresh (``D``, ``α``, ``c2`` and ``eps`` unchanged), instead
            of recomputing it (``pow``, ``div``, ``add`` and an allocation per tensor per step).
            Bitwise the same trajectory; costs one more tensor per parameter between steps
            (not in the ``state_dict``: rebuilt after loading) (default: False).
        nonfinite: ``"raise"`` (default) raises :class:`NonFiniteError` on a NaN/Inf loss,
            gradient or Hessian estimate; ``"skip"`` restores ``w``, leaves the state untouched and
            counts the step in :attr:`skipped_steps`. Either way the state is never corrupted.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 0.15,
        betas: tuple[float, float] = (0.9, 0.999),
        weight_decay: float = 0.0,
        rho: float = 0.2,
        lazy_hessian: int = 10,
        hessian_warmup: int | None = None,
        n_samples: int = 1,
        hessian_power: HessianPower = 0.5,
        eps: float = 1e-4,
        perturb_eps: float = 1e-12,
        adaptive: bool = False,
        bias_correction: str = "refresh",
        hvp_point: str = "perturbed",
        keep_hessian: bool = False,
        max_grad_norm: float | None = None,
        clip_before_perturbation: bool = False,
        rho_warmup: int = 0,
        moment_bias_correction: bool = True,
        distributed: bool | str = "auto",
        grad_reduce: str = "mean",
        sync_perturbation_grad: bool = False,
        seed: int = 0,
        foreach: bool | None = None,
        nonfinite: str = "raise",
        cache_denominator: bool = False,
    ) -> None:
        _validate_group_values(
            {
                "lr": lr,
                "betas": betas,
                "weight_decay": weight_decay,
                "rho": rho,
                "eps": eps,
                "perturb_eps": perturb_eps,
                "hessian_power": hessian_power,
                "adaptive": adaptive,
            }
        )
        _check(
            isinstance(lazy_hessian, int)
            and not isinstance(lazy_hessian, bool)
            and lazy_hessian >= 1,
            "lazy_hessian",
            lazy_hessian,
            "an integer >= 1",
        )
        if hessian_warmup is None:
            hessian_warmup = lazy_hessian
        _check(
            isinstance(hessian_warmup, int)
            and not isinstance(hessian_warmup, bool)
            and hessian_warmup >= 0,
            "hessian_warmup",
            hessian_warmup,
            "an integer >= 0",
        )
        _check(
            isinstance(n_samples, int) and not isinstance(n_samples, bool) and n_samples >= 1,
            "n_samples",
            n_samples,
            "an integer >= 1",
        )
        _check(
            bias_correction in _BIAS_CORRECTIONS,
            "bias_correction",
            bias_correction,
            f"one of {_BIAS_CORRECTIONS}",
        )
        _check(hvp_point in _HVP_POINTS, "hvp_point", hvp_point, f"one of {_HVP_POINTS}")
        _check(grad_reduce in _GRAD_REDUCES, "grad_reduce", grad_reduce, f"one of {_GRAD_REDUCES}")
        _check(nonfinite in _NONFINITE, "nonfinite", nonfinite, f"one of {_NONFINITE}")
        _check(
            distributed in ("auto", True, False),
            "distributed",
            distributed,
            "'auto', True or False",
        )
        _check(
            max_grad_norm is None or max_grad_norm > 0,
            "max_grad_norm",
            max_grad_norm,
            "None or a float > 0",
        )
        _check(
            clip_before_perturbation in (True, False)
            and (not clip_before_perturbation or max_grad_norm is not None),
            "clip_before_perturbation",
            clip_before_perturbation,
            "True or False; True needs max_grad_norm",
        )
        _check(
            isinstance(rho_warmup, int) and not isinstance(rho_warmup, bool) and rho_warmup >= 0,
            "rho_warmup",
            rho_warmup,
            "an integer >= 0",
        )
        _check(
            moment_bias_correction in (True, False),
            "moment_bias_correction",
            moment_bias_correction,
            "True or False",
        )
        _check(isinstance(seed, int), "seed", seed, "an integer")
        _check(
            cache_denominator in (True, False),
            "cache_denominator",
            cache_denominator,
            "True or False",
        )
        self.options: dict[str, Any] = {
            "lazy_hessian": lazy_hessian,
            "hessian_warmup": hessian_warmup,
            "n_samples": n_samples,
            "bias_correction": bias_correction,
            "hvp_point": hvp_point,
            "seed": seed,
            "distributed": distributed,
            "grad_reduce": grad_reduce,
            "sync_perturbation_grad": sync_perturbation_grad,
            "keep_hessian": keep_hessian,
            "max_grad_norm": max_grad_norm,
            "clip_before_perturbation": clip_before_perturbation,
            "rho_warmup": rho_warmup,
            "moment_bias_correction": moment_bias_correction,
            "nonfinite": nonfinite,
            "cache_denominator": cache_denominator,
        }
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "weight_decay": weight_decay,
            "rho": rho,
            "eps": eps,
            "perturb_eps": perturb_eps,
            "hessian_power": hessian_power,
            "adaptive": adaptive,
            "foreach": foreach,
        }
        self._global_step = 0
        self._hvp_calls = 0
        self.skipped_steps = 0
        self._generators: dict[str, torch.Generator] = {}
        self._saved_weights: dict[Tensor, Tensor] = {}
        self._perturbed = False
        self._pending_hessian: dict[Tensor, Tensor] | None = None
        self._skip_pending = False
        self._warned_partial_graph = False
        self._graph_grads: dict[Tensor, Tensor] = {}
        self._cycle_warning_seen = False
        # cache_denominator: parameter -> (what the denominator was made from, D̂^α + eps)
        self._denominators: dict[Tensor, tuple[tuple[float, ...], Tensor]] = {}
        super().__init__(params, defaults)

    @classmethod
    def paper_lm(
        cls,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        total_steps: int,
        lr: float = 0.3,
        warmup_fraction: float = 0.04,
        **overrides: Any,
    ) -> Sassha:
        """The official GPT-2 recipe (paper Sec. 5, language modelling) as a preset.

        With ``N = round(warmup_fraction · total_steps)`` (paper: 2,000 of 50,000 iterations):
        ``hessian_power`` α = 1 for steps ``t ≤ N`` and 0.8 after (:class:`StepSwitch`); no bias
        correction of either moment (``bias_correction="none"``, ``moment_bias_correction=False``);
        ρ = 0 for the first ``N`` steps (``rho_warmup=N``), then ρ = 0.02; gradient clipping to
        global norm 1.0 of the first-pass gradient before the perturbation and of ``g̃`` before
        the update (``max_grad_norm=1.0``, ``clip_before_perturbation=True``); betas
        (0.965, 0.99), λ = 2e-4 (the trainer gives weight decay to Linear weights only: pass such
        param groups), k = 10, eps 1e-4. The peak ``lr`` 0.3 is the paper's for GPT-2 small.
        Pair it with :func:`paper_lm_schedule` (warm-up over the same ``N`` steps, cosine to
        1.5e-5/0.3 of the peak). Any constructor argument in ``overrides`` replaces the preset's.
        Not reproduced: the trainer sums (``grad_reduce="sum"``) and all-reduces the first-pass
        gradient under data parallelism (pass ``grad_reduce``/``sync_perturbation_grad``).

            opt = Sassha.paper_lm(groups, total_steps=T)
            sched = paper_lm_schedule(opt, total_steps=T)
        """
        _check(
            isinstance(total_steps, int) and not isinstance(total_steps, bool) and total_steps >= 1,
            "total_steps",
            total_steps,
            "an integer >= 1",
        )
        _check(0.0 <= warmup_fraction < 1.0, "warmup_fraction", warmup_fraction, "0 <= value < 1")
        n = round(warmup_fraction * total_steps)
        kwargs: dict[str, Any] = {
            "lr": lr,
            "betas": (0.965, 0.99),
            "weight_decay": 2e-4,
            "rho": 0.02,
            "lazy_hessian": 10,
            "eps": 1e-4,
            "hessian_power": StepSwitch(n, 1.0, 0.8),
            "bias_correction": "none",
            "moment_bias_correction": False,
            "rho_warmup": n,
            "max_grad_norm": 1.0,
            "clip_before_perturbation": True,
        }
        kwargs.update(overrides)
        return cls(params, **kwargs)

    # ------------------------------------------------------------------ setup / properties
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        bad = [k for k in param_group if k in _GLOBAL_KEYS]
        if bad:
            raise ValueError(
                f"Invalid param group key(s) {bad}: these options are optimizer-wide; "
                "pass them to the Sassha constructor"
            )
        _validate_group_values(param_group)
        params = param_group["params"]
        for p in [params] if isinstance(params, Tensor) else list(params):
            if isinstance(p, Tensor) and p.is_complex():
                raise ValueError("Sassha does not support complex parameters")
            if type(p).__name__ == "DTensor":
                raise NotImplementedError("Sassha does not support FSDP/DTensor parameters (v1)")
        super().add_param_group(param_group)

    @property
    def global_step(self) -> int:
        """Number of completed steps; the current step is ``t = global_step + 1``."""
        return self._global_step

    @property
    def hvp_calls(self) -> int:
        """Total Hessian-vector products computed (``n_samples`` per refresh)."""
        return self._hvp_calls

    @property
    def hessian_due(self) -> bool:
        """Whether this step refreshes the Hessian: ``t <= hessian_warmup`` or ``(t − 1) mod k == 0``
        (lazy Hessian, step 4)."""
        if self._global_step < self.options["hessian_warmup"]:
            return True
        return self._global_step % self.options["lazy_hessian"] == 0

    @property
    def is_perturbed(self) -> bool:
        """Whether the weights currently hold ``w + ε``."""
        return self._perturbed

    @property
    def create_graph(self) -> bool:
        """Whether the backward the user is about to run must use ``create_graph=True``."""
        return self.hessian_due and (self._perturbed or not self._any_rho())

    def _any_rho(self) -> bool:
        """Whether this step perturbs: some group has ρ > 0 and the ρ warm-up is over."""
        if self._global_step < self.options["rho_warmup"]:
            return False
        return any(g["rho"] > 0 for g in self.param_groups)

    def _params_with_grad(self) -> list[Tensor]:
        out = []
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if p.grad.is_sparse:
                        raise RuntimeError("Sassha does not support sparse gradients")
                    out.append(p)
        return out

    def _distributed(self) -> tuple[bool, bool]:
        mode = self.options["distributed"]
        if mode is False:
            return False, False
        import torch.distributed as dist

        on = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        if mode is True and not on:
            raise RuntimeError("Sassha(distributed=True) needs an initialised process group")
        return on, self.options["grad_reduce"] == "mean"

    def _generator(self, device: torch.device) -> torch.Generator:
        key = str(device)
        if key not in self._generators:
            gen = torch.Generator(device=device)
            gen.manual_seed(self.options["seed"])
            self._generators[key] = gen
        return self._generators[key]

    def hessian(self, p: Tensor) -> Tensor | None:
        """Last ``|Ĥ|`` for parameter ``p`` (None before the first refresh or if not kept)."""
        return self.state.get(p, {}).get("hessian")

    def _nonfinite(self, what: str) -> bool:
        """Handle a non-finite value: raise, or mark the step as skipped (returns True)."""
        if self.options["nonfinite"] == "raise":
            self._restore_if_perturbed()
            self._skip_pending = False
            self._pending_hessian = None
            raise NonFiniteError(
                f"Sassha: non-finite {what} at step {self._global_step + 1}; the weights were "
                "restored and the optimizer state is unchanged (nonfinite='skip' skips such steps)"
            )
        return True

    # ------------------------------------------------------------------ perturbation
    @torch.no_grad()
    def perturb_weights(self, zero_grad: bool = True) -> None:
        """Move to ``w̃ = w + ε`` with ``ε = ρ g/(‖g‖₂ + perturb_eps)`` (update step 2).

        The norm is global over all parameters with a gradient; ``adaptive`` groups use
        ``ε = ρ w²⊙g / (‖|w|⊙g‖₂ + perturb_eps)``. Clears the gradients when ``zero_grad``.
        """
        if self._perturbed:
            raise RuntimeError("Sassha: perturb_weights() called twice without step()/unperturb()")
        params = self._params_with_grad()
        if not params:
            raise RuntimeError("Sassha: perturb_weights() needs gradients; call backward() first")
        grads = _grads(params)
        on, mean = self._distributed()
        if on and self.options["sync_perturbation_grad"]:
            grads = [g.detach().clone() for g in grads]
            all_reduce_coalesced(grads, mean)
        if self.options["clip_before_perturbation"]:  # official LM trainer: clip, then ε
            _clip_(grads, self.options["max_grad_norm"])
        adaptive = {p: g["adaptive"] for g in self.param_groups for p in g["params"]}
        scaled = [g * p.abs() if adaptive[p] else g for p, g in zip(params, grads)]
        norms = torch._foreach_norm(scaled)
        norm = torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]))
        if not math.isfinite(float(norm)):
            self._skip_pending = self._nonfinite("first-pass gradient norm")
        self._saved_weights = {}
        by_param = {p: i for i, p in enumerate(params)}
        norm_value = float(norm)
        if not self._skip_pending and self._any_rho():  # ρ warm-up: ε = 0
            for group in self.param_groups:
                if group["rho"] == 0:
                    continue
                scale = group["rho"] / (norm_value + group["perturb_eps"])
                for p in group["params"]:
                    if p not in by_param:
                        continue
                    g = grads[by_param[p]]
                    e = g * p * p * scale if group["adaptive"] else g * scale
                    self._saved_weights[p] = p.clone()  # w, restored bitwise in step 5
                    p.add_(e)
        self._perturbed = True
        if zero_grad:
            self.zero_grad(set_to_none=True)

    perturb = perturb_weights

    def _restore(self) -> None:
        """Restore ``w`` (step 5) by copying the saved ``w`` (bitwise, unlike ``w̃ − ε``, so data-
        parallel ranks with per-worker ε stay identical); through ``.data`` in ``"reference"``."""
        reference = self.options["hvp_point"] == "reference"
        with torch.no_grad():
            for p, w in self._saved_weights.items():
                (p.data if reference else p).copy_(w)
        self._saved_weights = {}
        self._perturbed = False

    def unperturb(self) -> None:
        """Restore ``w`` (no-op if not perturbed). In ``"perturbed"`` mode the due HVP is computed
        first, so calling this before :meth:`step` or not gives identical results."""
        if not self._perturbed:
            return
        if self.options["hvp_point"] == "perturbed" and self.hessian_due and not self._skip_pending:
            self._compute_hessian()
        self._restore()

    # ------------------------------------------------------------------ Hessian
    def _compute_hessian(self) -> None:
        params = self._params_with_grad()
        if not any(
            self._graph_grads.get(p, g).requires_grad for p, g in zip(params, _grads(params))
        ):
            self._restore_if_perturbed()
            raise RuntimeError(_NO_GRAPH.format(t=self._global_step + 1))

        def probes() -> list[Tensor]:
            return [rademacher_like(p, self._generator(p.device)) for p in params]

        grads = [self._graph_grads.get(p, g) for p, g in zip(params, _grads(params))]
        estimate, partial = hutchinson_diagonal(grads, params, probes, self.options["n_samples"])
        self._graph_grads = {}
        if partial and not self._warned_partial_graph:
            warnings.warn(
                "Sassha: some gradients carry no graph; their Hessian estimate is 0",
                stacklevel=3,
            )
            self._warned_partial_graph = True
        self._hvp_calls += self.options["n_samples"]
        on, mean = self._distributed()
        if on:  # average the signed estimate across ranks before |.| (as the official trainer)
            all_reduce_coalesced(estimate, mean)
        self._pending_hessian = dict(zip(params, estimate))

    def _restore_if_perturbed(self) -> None:
        if self._perturbed:
            self._restore()

    # ------------------------------------------------------------------ step
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """One Sassha step. With a ``closure``, runs the whole two-pass cycle; without, finishes
        the explicit loop (HVP if due, restore ``w``, update). Returns the first-pass loss."""
        loss = None
        if closure is not None:
            loss = self._run_closure(closure)
        try:
            refresh = self.hessian_due
            if refresh and self._pending_hessian is None and not self._skip_pending:
                if self.options["hvp_point"] == "reference":
                    self._restore_if_perturbed()
                self._compute_hessian()
            self._restore_if_perturbed()
            params = self._params_with_grad()
            for p, g in zip(params, _grads(params)):  # free the graph (no create_graph cycle)
                p.grad = g.detach()
            if self._skip_pending:
                return self._skip(loss)
            hessian = self._pending_hessian if refresh else None
            grads = _grads(params)
            on, mean = self._distributed()
            if on:
                all_reduce_coalesced(grads, mean)
            if not self._all_finite(grads) and self._nonfinite("gradient"):
                return self._skip(loss)
            if hessian is not None and not self._all_finite(list(hessian.values())):
                if self._nonfinite("Hessian estimate"):
                    return self._skip(loss)
            if self.options["max_grad_norm"] is not None and grads:
                torch.nn.utils.clip_grad_norm_(params, self.options["max_grad_norm"])
            self._update(hessian)
            self._global_step += 1
        finally:
            self._pending_hessian = None
            self._skip_pending = False
            self._graph_grads = {}
            self._restore_if_perturbed()
        return loss

    def _skip(self, loss: Tensor | None) -> Tensor | None:
        self.skipped_steps += 1
        self.zero_grad(set_to_none=True)
        return loss

    @staticmethod
    def _all_finite(tensors: list[Tensor]) -> bool:
        if not tensors:
            return True
        norms = torch._foreach_norm(tensors)
        return bool(torch.isfinite(torch.stack([n.to(norms[0].device) for n in norms])).all())

    def _run_closure(self, closure: Callable[[], Tensor]) -> Tensor | None:
        if self._perturbed:
            raise RuntimeError("Sassha: step(closure) called while perturbed; call unperturb()")
        self.zero_grad(set_to_none=True)
        loss = self._call_closure(closure)
        if loss is not None and not _finite(loss):
            self._skip_pending = self._nonfinite("loss")
            return loss
        if not self._params_with_grad():
            raise RuntimeError("closure did not produce gradients")
        if self._any_rho():
            self.perturb_weights(zero_grad=True)
            if self._skip_pending:
                return loss
            second = self._call_closure(closure)
            if second is not None and not _finite(second):
                self._skip_pending = self._nonfinite("loss at the perturbed point")
            if not self._params_with_grad():
                self._restore()
                raise RuntimeError("closure did not produce gradients")
        return loss

    def _call_closure(self, closure: Callable[[], Tensor]) -> Tensor | None:
        """Run the closure under ``enable_grad``. A closure that returns the loss without calling
        ``backward`` is differentiated here with ``torch.autograd.grad``: the graph-carrying
        gradients needed for the HVP then stay inside the optimizer (``p.grad`` gets detached
        copies), so no parameter↔gradient reference cycle is made and torch does not warn.

        With a closure that calls ``loss.backward(create_graph=opt.create_graph)`` torch warns
        about that cycle; ``step()`` breaks it (every gradient is detached before it returns,
        README: memory), so after the first graph-building call the warning is not repeated."""
        self._graph_grads = {}
        create = self.create_graph
        with torch.enable_grad(), warnings.catch_warnings():
            if self._cycle_warning_seen:
                warnings.filterwarnings("ignore", message=_CYCLE_WARNING, category=UserWarning)
            loss = closure()
        if create:
            self._cycle_warning_seen = True
        if (
            not self._params_with_grad()
            and isinstance(loss, Tensor)
            and loss.requires_grad
            and loss.numel() == 1
        ):
            params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
            grads = torch.autograd.grad(loss, params, create_graph=create, allow_unused=True)
            for p, g in zip(params, grads):
                if g is None:
                    continue
                if g.requires_grad:
                    self._graph_grads[p] = g
                    g = g.detach()
                p.grad = g
        return loss

    @torch.no_grad()
    def _update(self, hessian: dict[Tensor, Tensor] | None) -> None:
        """Counters and lazy state, then :func:`~sassha_optim.functional.sassha` per group."""
        t = self._global_step + 1
        mode = self.options["bias_correction"]
        alphas = []  # α_t of every group, validated before any state changes
        for group in self.param_groups:
            alpha = group["hessian_power"]
            alpha = float(alpha(t)) if callable(alpha) else float(alpha)
            _validate_group_values({"hessian_power": alpha})
            alphas.append(alpha)
        for group, alpha in zip(self.param_groups, alphas):
            group["_hessian_power_value"] = alpha
            beta1, beta2 = group["betas"]
            lists: dict[str, list[Any]] = {
                k: [] for k in ("p", "g", "m", "d", "h", "s", "n_ref", "t_ref", "bc2", "den", "key")
            }
            cache = self._denominators if self.options["cache_denominator"] else None
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:  # lazy state initialisation
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_hessian_diag"] = torch.zeros_like(p)
                    state["hessian_refreshes"] = 0
                    state["last_refresh_step"] = 0
                    if mode == "step":
                        state["bias_correction2"] = 1.0
                state["step"] += 1
                h = None
                if hessian is not None:
                    h = hessian[p]  # made |Ĥ| in place by the functional update
                    state["hessian_refreshes"] += 1
                    state["last_refresh_step"] = state["step"]
                    if mode == "step":  # stored as in the official code (README: Deviations)
                        state["bias_correction2"] = (1 - beta2 ** state["step"]) ** alpha
                    if self.options["keep_hessian"]:
                        state["hessian"] = h
                if cache is not None:  # valid while D, α, c2 and eps are unchanged
                    cache_key = (
                        alpha,
                        float(group["eps"]),
                        float(beta2),
                        float(state["hessian_refreshes"]),
                        float(state["last_refresh_step"]),
                        float(state.get("bias_correction2", 1.0)),
                    )
                    hit = cache.get(p)
                    lists["key"].append(cache_key)
                    lists["den"].append(
                        hit[1] if h is None and hit is not None and hit[0] == cache_key else None
                    )
                for key, value in (
                    ("p", p),
                    ("g", p.grad),
                    ("m", state["exp_avg"]),
                    ("d", state["exp_hessian_diag"]),
                    ("h", h),
                    ("s", state["step"]),
                    ("n_ref", state["hessian_refreshes"]),
                    ("t_ref", state["last_refresh_step"]),
                    ("bc2", state.get("bias_correction2", 1.0)),
                ):
                    lists[key].append(value)
            if not lists["p"]:
                continue
            sassha(
                lists["p"],
                lists["g"],
                lists["m"],
                lists["d"],
                lists["h"],
                lists["s"],
                lists["n_ref"],
                lists["t_ref"],
                lists["bc2"] if mode == "step" else None,
                group["foreach"],
                lr=float(group["lr"]),
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                hessian_power=alpha,
                eps=group["eps"],
                bias_correction=mode,
                moment_bias_correction=self.options["moment_bias_correction"],
                denominators=lists["den"] if cache is not None else None,
            )
            if cache is not None:
                for p, key, den in zip(lists["p"], lists["key"], lists["den"]):
                    if den is not None:
                        cache[p] = (key, den)

    # ------------------------------------------------------------------ state dict
    def __setstate__(self, state: dict[str, Any]) -> None:
        """Defaults for what later versions added, so optimizers pickled by 0.2.0 still load."""
        super().__setstate__(state)
        options = self.__dict__.setdefault("options", {})
        options.setdefault("hessian_warmup", 0)  # 0.2.0 had no warm-up: keep its schedule
        options.setdefault("keep_hessian", True)  # 0.2.0's default
        options.setdefault("clip_before_perturbation", False)  # added in 0.6.0
        options.setdefault("rho_warmup", 0)
        options.setdefault("moment_bias_correction", True)
        options.setdefault("cache_denominator", False)  # added in 0.7.0
        for key, value in (
            ("_global_step", 0),
            ("_hvp_calls", 0),
            ("skipped_steps", 0),
            ("_generators", {}),
            ("_saved_weights", {}),
            ("_perturbed", False),
            ("_pending_hessian", None),
            ("_skip_pending", False),
            ("_warned_partial_graph", False),
            ("_graph_grads", {}),
            ("_cycle_warning_seen", False),
            ("_denominators", {}),
        ):
            self.__dict__.setdefault(key, value)
        for group in self.param_groups:
            group.setdefault("adaptive", False)
            group.setdefault("foreach", None)
            group.setdefault("perturb_eps", 1e-12)

    def state_dict(self) -> dict[str, Any]:
        sd = super().state_dict()
        for group in sd["param_groups"]:  # a callable α is not picklable: store its last value
            if callable(group.get("hessian_power")):
                group["hessian_power"] = group.get("_hessian_power_value", 0.0)
        sd["sassha"] = {
            "global_step": self._global_step,
            "hvp_calls": self._hvp_calls,
            "skipped_steps": self.skipped_steps,
            "generators": {k: g.get_state() for k, g in self._generators.items()},
            "options": dict(self.options),
        }
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        extra = state_dict.pop("sassha", None)
        callables = [g["hessian_power"] for g in self.param_groups]
        super().load_state_dict(state_dict)
        for group, alpha in zip(self.param_groups, callables):
            if callable(alpha):
                group["hessian_power"] = alpha
        if not self.options["keep_hessian"]:  # e.g. a 0.2.0 checkpoint: drop the unused buffer
            for per_param in self.state.values():
                per_param.pop("hessian", None)
        self._generators = {}
        self._denominators = {}  # D may have changed: rebuild the cached denominators
        if extra is None:
            steps = [s.get("step", 0) for s in self.state.values()]
            refreshes = [s.get("hessian_refreshes", 0) for s in self.state.values()]
            self._global_step = int(max(steps, default=0))
            self._hvp_calls = int(max(refreshes, default=0)) * self.options["n_samples"]
            return
        self._global_step = int(extra["global_step"])
        self._hvp_calls = int(extra["hvp_calls"])
        self.skipped_steps = int(extra.get("skipped_steps", 0))
        for device, gen_state in extra.get("generators", {}).items():
            self._generator(torch.device(device)).set_state(gen_state)
        diff = {
            k: (v, self.options.get(k))
            for k, v in extra.get("options", {}).items()
            if self.options.get(k) != v and k != "keep_hessian"  # keep_hessian: no arithmetic
        }
        if diff:
            warnings.warn(
                f"Sassha.load_state_dict: optimizer-wide options differ (saved, current): {diff}",
                stacklevel=2,
            )


@torch.no_grad()
def _clip_(grads: list[Tensor], max_norm: float) -> None:
    """Scale ``grads`` in place to global norm ≤ ``max_norm`` (the coefficient of
    ``torch.nn.utils.clip_grad_norm_``: ``max_norm / (‖g‖ + 1e-6)``, capped at 1)."""
    if not grads:
        return
    norms = torch._foreach_norm(grads)
    total = torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]))
    coef = float(max_norm / (total + 1e-6))
    if coef < 1.0:
        torch._foreach_mul_(grads, coef)


def paper_lm_schedule(
    optimizer: Optimizer,
    total_steps: int,
    warmup_fraction: float = 0.04,
    min_lr_ratio: float = 1.5e-5 / 0.3,
) -> torch.optim.lr_scheduler.LambdaLR:
    """Learning-rate schedule of the official GPT-2 recipe: linear warm-up over the first
    ``round(warmup_fraction · total_steps)`` steps (paper: 2,000 of 50,000 = 4 %), then cosine
    decay to ``min_lr_ratio`` × the peak at ``total_steps`` (paper: 1.5e-5 for a peak of 0.3).

    The factor at scheduler step ``i`` (0-based, i.e. before optimizer step ``i + 1``) is
    ``(i + 1)/(N + 1)`` for ``i < N`` and ``r + (1 − r)·½(1 + cos(π (i − N)/(T − N)))`` after,
    with ``N`` the warm-up steps, ``T = total_steps`` and ``r = min_lr_ratio``; call
    ``scheduler.step()`` after each ``optimizer.step()``.
    """
    _check(
        isinstance(total_steps, int) and not isinstance(total_steps, bool) and total_steps >= 1,
        "total_steps",
        total_steps,
        "an integer >= 1",
    )
    _check(0.0 <= warmup_fraction < 1.0, "warmup_fraction", warmup_fraction, "0 <= value < 1")
    _check(0.0 <= min_lr_ratio <= 1.0, "min_lr_ratio", min_lr_ratio, "0 <= value <= 1")
    warm = round(warmup_fraction * total_steps)

    def factor(i: int) -> float:
        if i < warm:
            return (i + 1) / (warm + 1)
        progress = min(1.0, (i - warm) / max(1, total_steps - warm))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def disable_running_stats(model: torch.nn.Module) -> None:
    """Freeze BatchNorm running statistics (momentum 0) for the perturbed forward pass."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module._sassha_momentum = module.momentum  # type: ignore[assignment]
            module.momentum = 0.0


def enable_running_stats(model: torch.nn.Module) -> None:
    """Undo :func:`disable_running_stats`."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and hasattr(
            module, "_sassha_momentum"
        ):
            module.momentum = module._sassha_momentum  # type: ignore[assignment]
            del module._sassha_momentum
