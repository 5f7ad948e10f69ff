"""The discrete geometric-Wasserstein gradient-ascent flow of node weights (TAR's inner maximisation).

TAR (Zheng et al., ICML 2025, Sec. 3 and Alg. 1) looks for a worst-case distribution ``q`` over the
training nodes by moving probability mass **along the edges** of a transport graph G0. The paper's
method section was not available to us: the update below is a *reconstruction* from TAR's ancestor
GDRO (Liu et al., NeurIPS 2022) and discrete optimal transport on graphs (Maas 2011; Chow, Huang, Li and
Zhou 2012). Every choice that the paper fixes but we could not read is an option.

Inner objective (entropy-regularised risk)::

    F(q; l) = sum_i q_i l_i + beta * H(q),      H(q) = -sum_i q_i log q_i

Potential and flow (ascent: mass moves towards higher potential)::

    Phi_i   = dF/dq_i = l_i - beta * (log q_i + 1)
    dq_i/dt = sum_{j in N0(i)} w_ij * theta_ij(q) * (Phi_i - Phi_j)

One explicit Euler step moves ``flux_ij = w_ij * theta_ij * (Phi_j - Phi_i)`` from i to j on each
undirected edge, so the total mass is conserved exactly (up to rounding).

**The step-size bound.** With the ``upwind`` mobility (theta = the donor's mass) node i loses at most
``tau * r_i * q_i`` in a step, where ``r_i = sum_j w_ij * max(Phi_j - Phi_i, 0)``. Hence

    tau <= 1 / max_i r_i                                    (positivity bound)

keeps every q_i >= 0 exactly, and ``tau < 1 / max_i r_i`` keeps it > 0. Near the Gibbs fixed point the
entropy term is stiff (rates up to ``2 * max_i s_i`` with ``s_i = beta * sum_j w_ij theta_ij / q_i``), so
explicit Euler also needs ``tau <= 1 / max_i s_i`` (stability bound). :func:`step_bound` returns
``min(1/max r, 1/max s)``; with ``cfl=c`` every step uses ``tau_eff = min(tau, c * bound)``, and with
``on_exceed="raise"`` a step size above ``c * bound`` is an error instead of being capped.

``on_exceed="limit"`` (our option, not the paper's) replaces the one global cap by a per-donor flux
limiter: every edge's flux is scaled by its donor's factor ``min(1, c / (tau r_i))``, so each node still
loses at most a fraction c of its mass (positivity and conservation hold exactly), while nodes far
from the binding one move with the full step. The global cap lets one extreme loss difference freeze
the whole flow; the limiter does not. The stability cap (``tau <= c / max s``) stays global.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import torch
from torch import Tensor

SCHEMES = ("upwind", "arithmetic", "logmean")
EXCEED = ("cap", "raise", "limit")
EPS = 1e-12

__all__ = [
    "EXCEED",
    "SCHEMES",
    "FlowResult",
    "StepSizeError",
    "entropy_objective",
    "gibbs_limit",
    "gw_flow",
    "gw_step",
    "potential",
    "step_bound",
]


class StepSizeError(ValueError):
    """``step_size`` above the step-size bound with ``on_exceed="raise"``."""


@dataclass
class FlowResult:
    """Output of :func:`gw_flow`: the weights and what the flow did."""

    q: Tensor
    tau_eff: list[float] = field(default_factory=list)  # the step actually taken, per inner step
    total_time: float = 0.0  # sum of tau_eff
    uniform: bool = False  # True when the flow did nothing (q is exactly the start)
    clipped_mass: float = 0.0  # mass removed by the positivity clip (0 for upwind within the bound)


def _check_graph(edge_index: Tensor, n: int, edge_weight: Tensor | None) -> None:
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, m], got {list(edge_index.shape)}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        raise ValueError(
            f"edge_index holds node ids outside [0, {n - 1}] "
            f"(min {int(edge_index.min())}, max {int(edge_index.max())})"
        )
    if edge_weight is not None:
        if edge_weight.shape != (edge_index.size(1),):
            raise ValueError(
                f"edge_weight must have shape [{edge_index.size(1)}], got {list(edge_weight.shape)}"
            )
        if not torch.isfinite(edge_weight).all() or bool((edge_weight < 0).any()):
            raise ValueError("edge_weight must be finite and >= 0")


def _validate(q: Tensor, loss: Tensor, beta: float, scheme: str) -> None:
    if q.dim() != 1:
        raise ValueError(f"q must be a vector [n], got shape {list(q.shape)}")
    if loss.shape != q.shape:
        raise ValueError(
            f"loss has {loss.numel()} entries but there are {q.numel()} training nodes "
            f"(shape {list(loss.shape)} vs {list(q.shape)})"
        )
    if not torch.isfinite(loss).all():
        raise ValueError("loss holds NaN or inf")
    if not (math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta must be a finite number >= 0, got {beta}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")


def potential(q: Tensor, loss: Tensor, beta: float) -> Tensor:
    """``Phi_i = l_i - beta (log max(q_i, eps) + 1)``: the first variation of F."""
    if beta == 0:
        return loss.clone()
    return loss - beta * (torch.log(q.clamp_min(EPS)) + 1.0)


def entropy_objective(q: Tensor, loss: Tensor, beta: float) -> float:
    """``F(q; l) = sum q_i l_i + beta H(q)`` (with 0 log 0 = 0)."""
    ent = -(q * torch.log(q.clamp_min(EPS))).sum()
    return float((q * loss).sum() + beta * ent)


def _mobility(q: Tensor, src: Tensor, dst: Tensor, dphi: Tensor, scheme: str) -> Tensor:
    """theta_ij on each canonical edge (src=i, dst=j); ``dphi = Phi_j - Phi_i``."""
    qi, qj = q[src], q[dst]
    if scheme == "upwind":
        # mass moves i -> j when Phi_j > Phi_i: the donor is i
        return torch.where(dphi > 0, qi, qj)
    if scheme == "arithmetic":
        return 0.5 * (qi + qj)
    # logmean (q_i - q_j) / (log q_i - log q_j), equal to q_i when q_i == q_j
    li, lj = torch.log(qi.clamp_min(EPS)), torch.log(qj.clamp_min(EPS))
    diff = li - lj
    close = diff.abs() < 1e-10
    safe = torch.where(close, torch.ones_like(diff), diff)
    return torch.where(close, 0.5 * (qi + qj), (qi - qj) / safe)


def _rates(
    q: Tensor,
    phi: Tensor,
    src: Tensor,
    dst: Tensor,
    w: Tensor,
    beta: float,
    scheme: str,
    both: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(flux per edge, outflow rate r per node, entropy stiffness s per node, donor per edge)."""
    n = q.numel()
    dphi = phi[dst] - phi[src]
    theta = _mobility(q, src, dst, dphi, scheme)
    wt = w * theta
    flux = wt * dphi  # > 0: mass moves src -> dst
    donor = torch.where(dphi > 0, src, dst)
    qc = q.clamp_min(EPS)
    # outflow per unit mass: the donor of each edge loses w * theta * |dphi|
    if scheme == "upwind":  # theta is the donor's own mass: r_i = sum_j w_ij max(Phi_j - Phi_i, 0),
        # computed without dividing by q so that it stays exact for q_i below EPS
        r = torch.zeros(n, dtype=q.dtype, device=q.device).index_add_(0, donor, (w * dphi).abs())
    else:
        r = torch.zeros(n, dtype=q.dtype, device=q.device).index_add_(0, donor, flux.abs()) / qc
    if beta > 0:
        idx = both if both is not None else torch.cat([src, dst])
        tot = torch.zeros(n, dtype=q.dtype, device=q.device).index_add_(0, idx, wt.repeat(2))
        s = tot * beta / qc
    else:
        s = torch.zeros_like(q)
    return flux, r, s, donor


def _canonical(edge_index: Tensor, edge_weight: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    src, dst = edge_index[0], edge_index[1]
    keep = src != dst
    src, dst = src[keep], dst[keep]
    w = (
        edge_weight[keep]
        if edge_weight is not None
        else torch.ones(src.numel(), dtype=torch.float64, device=src.device)
    )
    return src, dst, w


def step_bound(
    q: Tensor,
    loss: Tensor,
    edge_index: Tensor,
    beta: float = 0.1,
    *,
    scheme: str = "upwind",
    edge_weight: Tensor | None = None,
) -> float:
    """The largest explicit step that keeps the next iterate valid: ``min(1/max r_i, 1/max s_i)``.

    ``r_i`` is the outflow rate per unit mass (the positivity bound: q stays >= 0 for any
    ``tau <= 1/max r``, exactly for ``scheme="upwind"``) and ``s_i`` the entropy stiffness (stability
    near the fixed point). A term whose maximum is 0 is dropped; ``inf`` means any step is safe.
    ``edge_index`` holds each undirected edge once (either direction).
    """
    _validate(q, loss, beta, scheme)
    _check_graph(edge_index, q.numel(), edge_weight)
    src, dst, w = _canonical(edge_index, edge_weight)
    w = w.to(q.dtype)
    phi = potential(q, loss.to(q.dtype), beta)
    _, r, s, _ = _rates(q, phi, src, dst, w, beta, scheme)
    bound = math.inf
    for rate in (r, s):
        top = float(rate.max()) if rate.numel() else 0.0
        if top > 0:
            bound = min(bound, 1.0 / top)
    return bound


def gw_step(
    q: Tensor,
    loss: Tensor,
    edge_index: Tensor,
    beta: float,
    step_size: float,
    *,
    scheme: str = "upwind",
    edge_weight: Tensor | None = None,
    cfl: float | None = 0.9,
    on_exceed: str = "cap",
) -> tuple[Tensor, float, float]:
    """One explicit Euler step of the flow. Returns ``(q_next, tau_eff, clipped_mass)``.

    ``cfl=c`` in (0, 1] caps the step at ``c * step_bound(...)`` (``on_exceed="cap"``, the default),
    raises ``ValueError`` when ``step_size`` is above it (``on_exceed="raise"``), or limits each
    donor's outflow to ``c * q_i`` (``on_exceed="limit"``). ``cfl=None`` takes
    ``step_size`` as given and warns if an entry goes negative before the clip.
    """
    _validate(q, loss, beta, scheme)
    _check_graph(edge_index, q.numel(), edge_weight)
    if not (math.isfinite(step_size) and step_size >= 0):
        raise ValueError(f"step_size must be a finite number >= 0, got {step_size}")
    if on_exceed not in EXCEED:
        raise ValueError(f"on_exceed must be 'cap', 'raise' or 'limit', got {on_exceed!r}")
    if cfl is not None and not (0 < cfl <= 1):
        raise ValueError(f"cfl must be in (0, 1] or None, got {cfl}")
    src, dst, w = _canonical(edge_index, edge_weight)
    w = w.to(q.dtype)
    loss = loss.to(q.dtype)
    new, tau_eff, clipped = _step(q, loss, src, dst, w, beta, step_size, scheme, cfl, on_exceed)
    return new, float(tau_eff), float(clipped)


def _step(
    q: Tensor,
    loss: Tensor,
    src: Tensor,
    dst: Tensor,
    w: Tensor,
    beta: float,
    tau: float,
    scheme: str,
    cfl: float | None,
    on_exceed: str,
    both: Tensor | None = None,
    mass: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """One step, all on the device: returns ``(q_next, tau_eff, clipped_mass)`` as tensors.

    Nothing here reads a value back to the host (no ``float()``/``item()``/``bool()`` on a tensor)
    except the two modes that must: ``on_exceed="raise"`` (to raise) and ``cfl=None`` (to warn).
    """
    if both is None:
        both = torch.cat([src, dst])
    phi = potential(q, loss, beta)
    flux, r, s, donor = _rates(q, phi, src, dst, w, beta, scheme, both)
    inf = torch.full((), math.inf, dtype=q.dtype, device=q.device)
    tau_t = torch.full((), tau, dtype=q.dtype, device=q.device)
    tau_eff = tau_t
    if cfl is not None and on_exceed == "limit":
        # the global stability cap stays; the positivity cap becomes a per-donor flux limiter
        top = s.max() if s.numel() else torch.zeros((), dtype=q.dtype, device=q.device)
        tau_eff = torch.where(top * tau > cfl, cfl / top.clamp_min(EPS), tau_t)
        rt = r * tau_eff
        factor = torch.where(rt > cfl, cfl / rt.clamp_min(EPS), torch.ones_like(r))
        flux = flux * factor[donor]
    elif cfl is not None:
        # min(1/max r, 1/max s) = 1 / max(max r, max s); a zero maximum drops out (bound = inf)
        top = torch.maximum(r.max(), s.max())
        bound = torch.where(top > 0, 1.0 / top.clamp_min(EPS * EPS), inf)
        over = tau_t > cfl * bound * (1 + 1e-12)
        if on_exceed == "raise" and bool(over):
            b = float(bound)
            raise StepSizeError(
                f"step_size={tau:g} exceeds the step-size bound cfl * min(1/max r, 1/max s) = "
                f"{cfl:g} * {b:.6g} = {cfl * b:.6g}; lower step_size or use on_exceed='cap'"
            )
        tau_eff = torch.where(over, cfl * bound, tau_t)
    delta = torch.zeros_like(q).index_add_(0, both, torch.cat([-flux, flux]))
    new = q + tau_eff * delta
    clipped = new.clamp_max(0).sum().neg()
    # within the bound only rounding (|x| ~ 1e-16 * tau * flux) can go below zero: no warning then
    if cfl is None and scheme == "upwind":
        lowest = float(new.min())
        if lowest < -1e-12:
            warnings.warn(
                f"gw_flow: step_size={tau:g} without the CFL cap made {int((new < 0).sum())} "
                "weight(s) negative; they were clipped to 0 (use cfl=0.9 or a smaller step_size)",
                RuntimeWarning,
                stacklevel=3,
            )
    new = new.clamp_min(0)
    new = new * ((q.sum() if mass is None else mass) / new.sum())
    return new, tau_eff, clipped


class _UpwindPlan:
    """The default step (upwind mobility, CFL cap) with one gather and one scatter per step.

    Every undirected edge is held in both directions (tail x -> head y). One ``index_select`` on the
    concatenation [Phi, q] reads Phi and q at the tails and heads, and one ``index_add_`` into a flat
    [3n] buffer accumulates per node the net mass change, the outflow rate
    r_x = sum_y w_xy max(Phi_y - Phi_x, 0) and sum_y w_xy theta_xy (for the entropy stiffness s_x).
    The result equals :func:`_step` with ``scheme="upwind"`` up to the order of floating-point sums.
    """

    def __init__(self, src: Tensor, dst: Tensor, w: Tensor, n: int, tau: float, cfl: float):
        self.m = src.numel()
        self.n = n
        tail, head = torch.cat([src, dst]), torch.cat([dst, src])
        self.gather = torch.cat([tail, head, tail + n, head + n])
        # scatter: -out at tails, +out at heads (net change), rate at tails (r), w*theta at both
        # ends of each undirected edge (theta is symmetric)
        self.scatter = torch.cat([tail, head, tail + n, tail + 2 * n])
        self.w = None if bool((w == 1).all()) else w
        self.w2 = None if self.w is None else torch.cat([w, w])
        self.tau = torch.full((), tau, dtype=torch.float64, device=src.device)
        self.cfl = cfl

    def step(self, q: Tensor, loss: Tensor, beta: float) -> tuple[Tensor, Tensor, Tensor]:
        """One step without the renormalisation (the caller rescales once, after the loop): upwind
        conserves mass exactly up to rounding. Returns (q_next, tau_eff, negative mass clipped)."""
        n, m, m2 = self.n, self.m, 2 * self.m
        qc = q.clamp_min(EPS)
        # Phi up to the constant -beta, which cancels in every difference
        phi = torch.add(loss, qc.log(), alpha=-beta) if beta > 0 else loss
        g = torch.cat([phi, q]).index_select(0, self.gather)
        q_t, q_h = g[2 * m2 : 3 * m2], g[3 * m2 :]
        dphi = g[m2 : 2 * m2] - g[:m2]  # > 0: the tail donates to the head
        rate = dphi.clamp_min(0)
        if self.w2 is not None:
            rate = rate * self.w2
        out = q_t * rate  # mass per unit time tail -> head (upwind: the donor's own mass)
        # theta per undirected edge = the donor's mass; on a tie the canonical head's (as _mobility)
        theta = torch.where(dphi[:m] > 0, q_t[:m], q_h[:m])
        theta = theta * (beta if self.w is None else self.w * beta)
        acc = torch.zeros(3 * n, dtype=q.dtype, device=q.device).index_add_(
            0, self.scatter, torch.cat([out.neg(), out, rate, theta, theta])
        )
        # min(1/max r, 1/max s): one maximum over r and s = beta * sum_j w theta / q
        top = torch.maximum(acc[n : 2 * n], acc[2 * n :] / qc).max()
        tau_eff = torch.minimum(self.tau, self.cfl / top)  # top = 0 gives inf: the step is tau
        new = torch.addcmul(q, acc[:n], tau_eff)
        clipped = new.clamp_max(0).sum()
        return new.clamp_min(0), tau_eff, clipped


def gw_flow(
    q: Tensor | None,
    loss: Tensor,
    edge_index: Tensor,
    beta: float = 0.1,
    step_size: float = 1.0,
    steps: int = 20,
    *,
    scheme: str = "upwind",
    edge_weight: Tensor | None = None,
    cfl: float | None = 0.9,
    on_exceed: str = "cap",
) -> FlowResult:
    """Run ``steps`` explicit Euler steps of the GW gradient-ascent flow of F from ``q`` (TAR Alg. 1, inner loop).

    Args:
        q: start weights [n] (a distribution); None for uniform 1/n.
        loss: per-node losses [n], treated as constants (detached).
        edge_index: transport graph G0 on the n nodes [2, m], each undirected edge once
            (self-loops are ignored; a pair listed twice counts twice).
        beta: entropy coefficient (>= 0).
        step_size: tau, the requested step (>= 0).
        steps: T_in, the number of inner steps (>= 0).
        scheme: edge mobility theta_ij: ``upwind`` (positivity-preserving), ``arithmetic``, ``logmean``.
        edge_weight: w_ij >= 0 per edge [m] (default 1).
        cfl: c in (0, 1]: cap every step at c times :func:`step_bound`; None: no cap.
        on_exceed: ``cap`` (default) or ``raise`` when step_size is above the capped bound, or
            ``limit``: a per-donor flux limiter instead of one global cap (see the module docstring).

    Returns a :class:`FlowResult`. T_in = 0, tau = 0 or an empty G0 return the start vector itself
    (``uniform=True`` when it is the uniform start). The flow runs in float64 without autograd.
    """
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    if not (math.isfinite(step_size) and step_size >= 0):
        raise ValueError(f"step_size must be a finite number >= 0, got {step_size}")
    if on_exceed not in EXCEED:
        raise ValueError(f"on_exceed must be 'cap', 'raise' or 'limit', got {on_exceed!r}")
    if cfl is not None and not (0 < cfl <= 1):
        raise ValueError(f"cfl must be in (0, 1] or None, got {cfl}")
    loss = loss.detach()
    n = loss.numel()
    if loss.dim() != 1 or n == 0:
        raise ValueError(f"loss must be a non-empty vector [n], got shape {list(loss.shape)}")
    start_uniform = q is None
    if q is None:
        q = torch.full((n,), 1.0 / n, dtype=torch.float64, device=loss.device)
    else:
        q = q.detach().to(torch.float64)
        if q.shape != loss.shape:
            raise ValueError(
                f"loss has {n} entries but q has {q.numel()} (shape {list(q.shape)}); "
                "they must match the number of training nodes"
            )
        if not torch.isfinite(q).all() or bool((q < 0).any()):
            raise ValueError("q must be finite and >= 0")
    loss64 = loss.to(torch.float64)
    _validate(q, loss64, beta, scheme)
    _check_graph(edge_index, n, edge_weight)
    src, dst, w = _canonical(edge_index, edge_weight)
    w = w.to(torch.float64)
    if steps == 0 or step_size == 0 or src.numel() == 0:
        return FlowResult(q=q.clone(), uniform=start_uniform)
    return _flow(q, loss64, src, dst, w, beta, step_size, steps, scheme, cfl, on_exceed)


def _flow(
    q: Tensor,
    loss: Tensor,
    src: Tensor,
    dst: Tensor,
    w: Tensor,
    beta: float,
    step_size: float,
    steps: int,
    scheme: str,
    cfl: float | None,
    on_exceed: str,
) -> FlowResult:
    """The inner loop on validated float64 inputs. The T_in steps stay on the device: the step sizes
    and clipped masses are read back once, after the loop (one host sync per flow, not per step)."""
    both = torch.cat([src, dst])
    taus: list[Tensor] = []
    clipped = torch.zeros((), dtype=q.dtype, device=q.device)
    fast = scheme == "upwind" and cfl is not None and on_exceed == "cap"
    with torch.no_grad():
        mass = q.sum()
        if fast:
            assert cfl is not None
            plan = _UpwindPlan(src, dst, w, q.numel(), step_size, cfl)
            clips = []
            for _ in range(steps):
                q, tau_eff, clip = plan.step(q, loss, beta)
                taus.append(tau_eff)
                clips.append(clip)
            q = q * (mass / q.sum())
            clipped = torch.stack(clips).sum().neg()
        else:
            for _ in range(steps):
                q, tau_eff, clip = _step(
                    q, loss, src, dst, w, beta, step_size, scheme, cfl, on_exceed, both, mass
                )
                taus.append(tau_eff)
                clipped = clipped + clip
    result = FlowResult(q=q)
    values = torch.stack([*taus, clipped]).tolist()  # the one read-back
    result.tau_eff = [float(t) for t in values[:-1]]
    result.clipped_mass = float(values[-1])
    result.total_time = float(sum(result.tau_eff))
    return result


def gibbs_limit(
    loss: Tensor, beta: float, edge_index: Tensor, mass: Tensor | None = None
) -> Tensor:
    """The flow's long-time limit for beta > 0: Gibbs weights ``softmax(l / beta)`` within each connected
    component of G0, each component keeping its initial mass (``mass``: the start q, default uniform)."""
    if beta <= 0:
        raise ValueError(f"gibbs_limit needs beta > 0, got {beta}")
    n = loss.numel()
    _check_graph(edge_index, n, None)
    comp = connected_components(edge_index, n)
    start = (
        torch.full((n,), 1.0 / n, dtype=torch.float64)
        if mass is None
        else mass.detach().to(torch.float64)
    )
    loss = loss.detach().to(torch.float64)
    out = torch.zeros(n, dtype=torch.float64)
    for c in torch.unique(comp):
        idx = (comp == c).nonzero().flatten()
        out[idx] = start[idx].sum() * torch.softmax(loss[idx] / beta, dim=0)
    return out


def connected_components(edge_index: Tensor, n: int) -> Tensor:
    """Component label per node (union-find; labels are the smallest node id of each component)."""
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in edge_index.t().tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return torch.tensor([find(i) for i in range(n)], dtype=torch.long)
