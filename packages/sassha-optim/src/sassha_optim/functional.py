"""Functional core of Sassha, in the style of torch.optim's functional API (``torch.optim.adam``).

The :class:`~sassha_optim.Sassha` class is a thin shell over these functions: it keeps the state
(moments, counters, probe generators), runs the two passes and calls

- :func:`hutchinson_diagonal` (update step 4: ``Ĥ = (1/n) Σ_j z_j ⊙ ∇²L · z_j`` with Rademacher
  probes from :func:`rademacher_like`),
- :func:`all_reduce_coalesced` (data parallel: average ``g̃`` and the signed ``Ĥ`` across ranks),
- :func:`sassha` (update steps 4 (EMA of ``|Ĥ|``), 6, 7 and 8 over lists of tensors), which
  dispatches to a per-tensor loop or to ``torch._foreach_*`` kernels with the same arithmetic.

Steps refer to the numbered update in :mod:`sassha_optim.optim` (paper Sec. 4, Alg. 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import torch
from torch import Tensor

__all__ = [
    "all_reduce_coalesced",
    "bias_correction2",
    "hutchinson_diagonal",
    "rademacher_like",
    "sassha",
]

BIAS_CORRECTIONS = ("refresh", "step", "none")


def rademacher_like(p: Tensor, generator: torch.Generator) -> Tensor:
    """Probe with i.i.d. entries ±1 (probability ½ each), same shape/dtype/device as ``p``.

    ``randint(0, 2)`` draws {0, 1} (upper bound exclusive), mapped to {−1, +1}; this avoids the
    all −1 probe bug of drawing from ``randint(-1, 1)`` (seen in a third-party implementation).
    """
    z = torch.randint(0, 2, p.shape, generator=generator, device=p.device, dtype=p.dtype)
    return z.mul_(2).sub_(1)


def hutchinson_diagonal(
    grads: Sequence[Tensor | None],
    params: Sequence[Tensor],
    probes: Callable[[], list[Tensor]],
    n_samples: int = 1,
) -> tuple[list[Tensor], bool]:
    """Hutchinson estimate ``Ĥ = (1/n) Σ_j z_j ⊙ (∇² L · z_j)`` of diag ∇²L (update step 4).

    ``grads`` are gradients built with ``create_graph=True`` (``None`` or graph-free entries are
    left out of the differentiated outputs and get ``Ĥ = 0``); ``probes()`` returns one fresh
    Rademacher probe per parameter. The graph is freed after the last probe. Returns the (signed)
    estimates and whether some gradient lacked a graph.
    """
    with_graph = [i for i, g in enumerate(grads) if g is not None and g.requires_grad]
    outputs = [cast(Tensor, grads[i]) for i in with_graph]
    estimate: list[Tensor] = []
    for j in range(n_samples):
        z = probes()
        hz = torch.autograd.grad(
            outputs,
            list(params),
            grad_outputs=[z[i] for i in with_graph],
            retain_graph=j < n_samples - 1,
            allow_unused=True,
        )
        if j == 0:  # z ⊙ Hz directly, not into a zero-filled accumulator (exact: z = ±1)
            estimate = [
                torch.zeros_like(p) if hz_i is None else hz_i * z_i
                for p, z_i, hz_i in zip(params, z, hz)
            ]
            continue
        for est, z_i, hz_i in zip(estimate, z, hz):
            if hz_i is not None:
                est.addcmul_(z_i, hz_i)
    if n_samples > 1:
        torch._foreach_div_(estimate, float(n_samples))
    return estimate, len(with_graph) < len(params)


def all_reduce_coalesced(
    tensors: Sequence[Tensor], mean: bool = True, group: object = None
) -> None:
    """All-reduce ``tensors`` in place (sum, or average over ranks when ``mean``), one flat buffer
    per (device, dtype) and collective. Needs an initialised ``torch.distributed`` process group."""
    import torch.distributed as dist

    world = dist.get_world_size(group)  # type: ignore[arg-type]
    buckets: dict[tuple[torch.device, torch.dtype], list[Tensor]] = {}
    for t in tensors:
        buckets.setdefault((t.device, t.dtype), []).append(t)
    for bucket in buckets.values():
        flat = torch.cat([t.reshape(-1) for t in bucket])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)  # type: ignore[arg-type]
        if mean:
            flat.div_(world)
        offset = 0
        for t in bucket:
            n = t.numel()
            t.copy_(flat[offset : offset + n].view_as(t))
            offset += n


def bias_correction2(
    mode: str, beta2: float, alpha: float, hessian_refreshes: int, last_refresh_step: int
) -> float:
    """``c2^α`` of update step 7: ``(1 − β2^{n_ref})^α`` (``"refresh"``), ``(1 − β2^{t_ref})^α``
    (``"step"``, official code) or 1 (``"none"``); 1 before the first refresh."""
    if mode == "refresh":
        return (1 - beta2**hessian_refreshes) ** alpha if hessian_refreshes > 0 else 1.0
    if mode == "step":
        return (1 - beta2**last_refresh_step) ** alpha if last_refresh_step > 0 else 1.0
    if mode == "none":
        return 1.0
    raise ValueError(f"Invalid bias_correction: {mode!r} (expected one of {BIAS_CORRECTIONS})")


def sassha(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_hessian_diags: list[Tensor],
    hessians: Sequence[Tensor | None] | None,
    steps: list[int],
    hessian_refreshes: list[int],
    last_refresh_steps: list[int] | None = None,
    bias_corrections2: list[float] | None = None,
    foreach: bool | None = None,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    weight_decay: float,
    hessian_power: float,
    eps: float,
    bias_correction: str = "refresh",
    moment_bias_correction: bool = True,
    denominators: list[Tensor | None] | None = None,
) -> None:
    r"""Functional Sassha update (steps 4, 6, 7, 8), in place on ``params`` and the state lists.

    For every parameter ``i``:

    - if ``hessians[i]`` is a tensor (this step refreshes the curvature), it is replaced in place
      by ``|Ĥ|`` and ``D ← β2 D + (1 − β2)|Ĥ|`` (``exp_hessian_diags[i]``); otherwise D is untouched;
    - ``m ← β1 m + (1 − β1) g̃`` (``exp_avgs[i]``, ``grads[i]`` = gradient at ``w + ε``);
    - if the parameter has had a refresh (``hessian_refreshes[i] > 0``; a parameter without one
      has D = 0 and waits):
      ``w ← w (1 − ηλ) − η m̂ / (D^α / c2^α + eps)`` with ``m̂ = m / (1 − β1^s)``, ``s = steps[i]``.

    ``steps``, ``hessian_refreshes`` and ``last_refresh_steps`` are the counters *after* this step
    (the caller increments them, as ``Sassha`` does). ``c2^α`` comes from ``bias_corrections2`` when
    given (the official code stores ``(1 − β2^{t_ref})^{α_{t_ref}}`` at refresh time), otherwise
    from :func:`bias_correction2` with ``bias_correction``. ``foreach=None`` uses the
    ``torch._foreach_*`` kernels when every tensor is on CUDA; both paths compute the same
    arithmetic (``mul_`` + ``add_`` EMAs, ``pow`` → ``div_`` → ``add_`` denominator, ``addcdiv_``).
    ``moment_bias_correction=False`` uses ``m̂ = m`` (the official language-model variant).

    ``denominators`` (optional, one entry per parameter) caches ``D^α / c2^α + eps`` between
    refreshes: an entry that is a tensor is used as this step's denominator as it is (the caller
    guarantees that D, α, c2 and eps have not changed since it was made); an entry that is None
    is computed as usual and stored into the list. The result is bitwise the same as without the
    cache (the same operations on the same values); it saves the ``pow``, ``div`` and ``add``
    passes and an allocation on the steps between refreshes.
    """
    n = len(params)
    lists: dict[str, Sequence[object]] = {
        "grads": grads,
        "exp_avgs": exp_avgs,
        "exp_hessian_diags": exp_hessian_diags,
        "steps": steps,
        "hessian_refreshes": hessian_refreshes,
    }
    if hessians is not None:
        lists["hessians"] = list(hessians)
    if last_refresh_steps is not None:
        lists["last_refresh_steps"] = last_refresh_steps
    if bias_corrections2 is not None:
        lists["bias_corrections2"] = bias_corrections2
    for name, values in lists.items():
        if len(values) != n:
            raise ValueError(f"sassha: {name} has {len(values)} entries for {n} params")
    if denominators is not None and len(denominators) != n:
        raise ValueError(f"sassha: denominators has {len(denominators)} entries for {n} params")
    if bias_corrections2 is None:
        if bias_correction == "step" and last_refresh_steps is None:
            raise ValueError('sassha: bias_correction="step" needs last_refresh_steps')
        refs = last_refresh_steps if last_refresh_steps is not None else [0] * n
        bias_corrections2 = [
            bias_correction2(bias_correction, beta2, hessian_power, r, t)
            for r, t in zip(hessian_refreshes, refs)
        ]
    hs: list[Tensor | None] = list(hessians) if hessians is not None else [None] * n
    bc1 = [1 - beta1**s if moment_bias_correction else 1.0 for s in steps]
    active = [r > 0 for r in hessian_refreshes]
    if foreach is None:
        foreach = all(p.is_cuda for p in params)
    kernel = _multi_tensor_sassha if foreach else _single_tensor_sassha
    with torch.no_grad():
        kernel(
            params,
            grads,
            exp_avgs,
            exp_hessian_diags,
            hs,
            bc1,
            [float(b) for b in bias_corrections2],
            active,
            denominators=denominators,
            lr=float(lr),
            beta1=beta1,
            beta2=beta2,
            weight_decay=weight_decay,
            alpha=float(hessian_power),
            eps=eps,
        )


def _single_tensor_sassha(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_hessian_diags: list[Tensor],
    hessians: list[Tensor | None],
    bias_corrections1: list[float],
    bias_corrections2: list[float],
    active: list[bool],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    weight_decay: float,
    alpha: float,
    eps: float,
    denominators: list[Tensor | None] | None = None,
) -> None:
    """Readable reference loop over the tensors (update steps 4, 6, 7, 8)."""
    for i, (p, g, m, d, h, bc1, bc2, go) in enumerate(
        zip(
            params,
            grads,
            exp_avgs,
            exp_hessian_diags,
            hessians,
            bias_corrections1,
            bias_corrections2,
            active,
        )
    ):
        if h is not None:
            h.abs_()  # stable Hessian approximation: |Ĥ|
            d.mul_(beta2).add_(h, alpha=1 - beta2)  # D ← β2 D + (1 − β2)|Ĥ|
        m.mul_(beta1).add_(g, alpha=1 - beta1)  # m ← β1 m + (1 − β1) g̃
        if not go:
            continue
        if weight_decay != 0:
            p.mul_(1 - lr * weight_decay)  # decoupled weight decay
        denom = denominators[i] if denominators is not None else None
        if denom is None:
            denom = d.pow(alpha).div_(bc2).add_(eps)  # D̂^α + eps, D̂^α = D^α / c2^α
            if denominators is not None:
                denominators[i] = denom
        p.addcdiv_(m, denom, value=-lr / bc1)  # w ← w − η m̂ / (D̂^α + eps)


def _multi_tensor_sassha(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_hessian_diags: list[Tensor],
    hessians: list[Tensor | None],
    bias_corrections1: list[float],
    bias_corrections2: list[float],
    active: list[bool],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    weight_decay: float,
    alpha: float,
    eps: float,
    denominators: list[Tensor | None] | None = None,
) -> None:
    """``torch._foreach_*`` version of :func:`_single_tensor_sassha`, per (device, dtype)."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for i, p in enumerate(params):
        groups.setdefault((p.device, p.dtype), []).append(i)
    for idx in groups.values():
        refreshed = [i for i in idx if hessians[i] is not None]
        if refreshed:
            h_ref = [cast(Tensor, hessians[i]) for i in refreshed]
            d_ref = [exp_hessian_diags[i] for i in refreshed]
            torch._foreach_abs_(h_ref)
            torch._foreach_mul_(d_ref, beta2)
            torch._foreach_add_(d_ref, h_ref, alpha=1 - beta2)
        m_all = [exp_avgs[i] for i in idx]
        torch._foreach_mul_(m_all, beta1)
        torch._foreach_add_(m_all, [grads[i] for i in idx], alpha=1 - beta1)
        go = [i for i in idx if active[i]]
        if not go:
            continue
        p_go = [params[i] for i in go]
        if weight_decay != 0:
            torch._foreach_mul_(p_go, 1 - lr * weight_decay)
        cached: list[Tensor | None] = (
            denominators if denominators is not None else [None] * len(params)
        )
        new = [i for i in go if cached[i] is None]
        if new:
            fresh = torch._foreach_pow([exp_hessian_diags[i] for i in new], alpha)
            torch._foreach_div_(fresh, [bias_corrections2[i] for i in new])
            torch._foreach_add_(fresh, eps)
            for i, t in zip(new, fresh):
                cached[i] = t
        denom = [cast(Tensor, cached[i]) for i in go]
        step_sizes = [-lr / bias_corrections1[i] for i in go]
        torch._foreach_addcdiv_(p_go, [exp_avgs[i] for i in go], denom, step_sizes)
