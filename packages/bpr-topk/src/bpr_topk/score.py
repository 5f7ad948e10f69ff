"""Score-function (REINFORCE) gradient of the sample-based ratio rating (paper Eq. 10).

The rating ``r = (1/M) Σ_m f(y⁽ᵐ⁾)`` uses detached samples, so autograd alone gives it no gradient.
:func:`score_function_rating` returns the same value ``r`` but attaches the estimator

    joint    (Eq. 10):  ∂r_s/∂φ ≈ (1/M) Σ_m f_s(y⁽ᵐ⁾) ∇_φ log p_φ(y⁽ᵐ⁾)
    per_site (code)   :  ∂r_s/∂φ ≈ (1/M) Σ_m f_s(y⁽ᵐ⁾) ∇_φ log p_φ(y_s⁽ᵐ⁾)

through a surrogate ("magic box" ``exp(L − stop_grad(L)) = 1``), so any loss built on ``r`` gets
``∇_φ J = Σ_s (∂J/∂r_s) ∂r_s/∂φ`` from **one** ``backward()`` with memory O(M·S), instead of the
official code's M×S×P Jacobian. :func:`explicit_jacobian_grad` is that Jacobian route, kept as the
reference for tests and the memory benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import torch
from torch import Tensor

ScoreMode = Literal["joint", "per_site"]
Baseline = Literal["loo"] | None


def _check_mode(mode: str, baseline: str | None, num_samples: int) -> None:
    if mode not in ("joint", "per_site"):
        raise ValueError(f"mode must be 'joint' or 'per_site'; got {mode!r}")
    if baseline not in (None, "loo"):
        raise ValueError(f"baseline must be None or 'loo'; got {baseline!r}")
    if baseline == "loo" and num_samples < 2:
        raise ValueError("baseline='loo' needs at least M=2 samples")


def _centred(f: Tensor, baseline: Baseline) -> Tensor:
    """``f − mean_{m'≠m} f`` (leave-one-out baseline) or ``f`` itself."""
    if baseline is None:
        return f
    num = f.shape[0]
    loo_mean = (f.sum(0, keepdim=True) - f) / (num - 1)
    return f - loo_mean


def score_function_rating(
    log_prob: Tensor,
    f: Tensor,
    mode: ScoreMode = "joint",
    baseline: Baseline = None,
) -> Tensor:
    """Ratio rating with the score-function gradient attached (Eq. 7 value, Eq. 10 gradient).

    Args:
        log_prob: per-site log-probabilities ``log p_φ(y_s⁽ᵐ⁾)`` of the **detached** samples,
            ``[M, ..., S]``, differentiable in the model parameters φ.
        f: per-sample ratio values ``f(y⁽ᵐ⁾)`` ``[M, ..., S]`` (no gradient needed).
        mode: ``"joint"`` (Eq. 10, unbiased; default) or ``"per_site"`` (official code: drops the
            cross terms ``f_s ∇ log p(y_s')``, s' ≠ s).
        baseline: ``None`` or ``"loo"`` (leave-one-out control variate; unbiased, M ≥ 2).

    Returns:
        ``r`` ``[..., S]`` with value exactly ``f.mean(0)``.
    """
    if log_prob.shape != f.shape:
        raise ValueError(
            f"log_prob and f must have the same shape [M, ..., S]; got {tuple(log_prob.shape)} "
            f"and {tuple(f.shape)}"
        )
    _check_mode(mode, baseline, f.shape[0])
    f = f.detach()
    logp = log_prob.sum(-1, keepdim=True) if mode == "joint" else log_prob
    magic_minus_one = torch.exp(logp - logp.detach()) - 1.0  # value 0, gradient ∇ log p
    return f.mean(0) + (_centred(f, baseline) * magic_minus_one).mean(0)


def score_function_surrogate(
    log_prob: Tensor,
    f: Tensor,
    grad_r: Tensor,
    mode: ScoreMode = "joint",
    baseline: Baseline = None,
) -> Tensor:
    """Scalar surrogate Ψ for the score-function gradient (Eq. 10) whose gradient is ``Σ_s g_r,s ∂r_s/∂φ``.

    joint: ``Ψ = (1/M) Σ_m [Σ_s g_r,s f_s(y⁽ᵐ⁾)] log p_φ(y⁽ᵐ⁾)``;
    per_site: ``Ψ = (1/M) Σ_m Σ_s g_r,s f_s(y⁽ᵐ⁾) log p_φ(y_s⁽ᵐ⁾)``. ``grad_r`` is ``[..., S]``.
    """
    r = score_function_rating(log_prob, f, mode, baseline)
    return (r * grad_r.detach()).sum()


def _contraction_weights(f: Tensor, grad_r: Tensor, mode: ScoreMode, baseline: Baseline) -> Tensor:
    w = _centred(f.detach(), baseline) * grad_r.detach() / f.shape[0]
    return w.sum(-1) if mode == "joint" else w


def explicit_jacobian_grad(
    log_prob_fn: Callable[[], Tensor],
    params: Sequence[Tensor],
    f: Tensor,
    grad_r: Tensor,
    mode: ScoreMode = "joint",
    baseline: Baseline = None,
    chunk_size: int = 256,
) -> list[Tensor]:
    """Reference route: materialise the Jacobian of log-probabilities, then contract it.

    ``per_site`` builds the ``[M, ..., S, P]`` Jacobian of ``log p(y_s⁽ᵐ⁾)`` (the official code's
    approach, O(M·S·P) memory); ``joint`` builds ``[M, ..., P]``. Returns gradients shaped like
    ``params``. Used by the tests (equality with the surrogate) and the memory benchmark.
    """
    _check_mode(mode, baseline, f.shape[0])
    logp = log_prob_fn()
    outputs = logp.sum(-1) if mode == "joint" else logp
    flat = outputs.reshape(-1)
    n_out = flat.numel()
    sizes = [p.numel() for p in params]
    jac = flat.new_zeros((n_out, sum(sizes)))
    for start in range(0, n_out, chunk_size):
        stop = min(start + chunk_size, n_out)
        basis = torch.zeros((stop - start, n_out), dtype=flat.dtype, device=flat.device)
        basis[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
        rows = torch.autograd.grad(
            flat, list(params), basis, retain_graph=True, is_grads_batched=True, allow_unused=True
        )
        jac[start:stop] = torch.cat(
            [
                torch.zeros(stop - start, n, dtype=flat.dtype, device=flat.device)
                if g is None
                else g.reshape(stop - start, n)
                for g, n in zip(rows, sizes)
            ],
            dim=1,
        )
    w = _contraction_weights(f, grad_r, mode, baseline).reshape(-1)
    grad_flat = w @ jac
    return [g.view_as(p) for g, p in zip(grad_flat.split(sizes), params)]
