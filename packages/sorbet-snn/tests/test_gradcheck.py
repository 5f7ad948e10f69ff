"""Float64 ``torch.autograd.gradcheck`` of every custom autograd Function in ``sorbet_snn.ops``.

``_STE``, ``_LSQ`` and ``_PowerNormFn`` have hard (piecewise-constant) forwards with surrogate
backwards, so a plain gradcheck of the package Function cannot pass. Two kinds of check are used:

* direct: a regime in which the package backward *is* the true derivative of the package forward,
  and the package Function itself is gradchecked there;
* probe: a Function defined here whose forward is the smooth function the package backward claims to
  differentiate and whose backward is the package backward (the package Function is run under
  ``torch.enable_grad()`` on detached leaf copies, and ``torch.autograd.grad`` returns its gradient).
  gradcheck of the probe proves that the package backward equals the derivative of that smooth
  surrogate, compared against central finite differences of an expression written independently here.

Test points are fixed (no randomness) and kept at least 0.2 steps away from every rounding and clip
discontinuity, so the surrogates are locally smooth around each point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest
import torch
from sorbet_snn.ops import _LSQ, _STE, _PowerNormFn, pot
from torch import Tensor
from torch.autograd import gradcheck

DT = torch.float64


def _package_grad(
    fn: Callable[..., Tensor], inputs: Sequence[Tensor], wrt: Sequence[int], g: Tensor
) -> tuple[Tensor, ...]:
    """VJP ``g`` through the package Function ``fn`` w.r.t. ``inputs[i]`` for ``i`` in ``wrt``."""
    with torch.enable_grad():
        leaves = [t.detach().clone().requires_grad_(i in wrt) for i, t in enumerate(inputs)]
        out = fn(*leaves)
        return torch.autograd.grad(out, [leaves[i] for i in wrt], g)


# ------------------------------------------------------------------------------------------ _STE


def test_ste_gradcheck_identity_regime():
    """``_STE.apply(x, x)`` is the identity map, whose derivative the STE backward (identity to x,
    nothing to value) is exactly: gradcheck of the package Function itself passes."""
    x = torch.linspace(-2.0, 3.0, 7, dtype=DT).reshape(7, 1).repeat(1, 2).requires_grad_()
    assert gradcheck(lambda t: _STE.apply(t, t), (x,))


class _STEProbe(torch.autograd.Function):
    """forward: the identity (the surrogate the STE differentiates); backward: ``_STE``'s backward
    with a hard ``value = pot(x)``."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        (gx,) = _package_grad(lambda t: _STE.apply(t, pot(t.detach())), [x], [0], g)
        return gx


def test_ste_probe_hard_value():
    """With a hard forward value (``pot(x)``, piecewise constant), the gradient reaching ``x`` is
    still the derivative of the identity: the forward value never leaks into the backward."""
    x = torch.tensor([[-2.7, -0.6, 0.3], [0.9, 1.4, 5.1]], dtype=DT, requires_grad=True)
    assert gradcheck(_STEProbe.apply, (x,))
    # and the value input gets no gradient at all
    v = pot(x.detach()).requires_grad_()
    out = _STE.apply(x, v)
    out.sum().backward()
    assert v.grad is None
    assert torch.equal(out, pot(x.detach()))


# ------------------------------------------------------------------------------------------ _LSQ

ALPHA = 0.5  # an exact power of two: x = ALPHA * r is exact in float64
# (Qn, Qp, one_bit): signed 4-bit, unsigned 4-bit, signed 2-bit, and the 1-bit (sign) branch.
LSQ_CASES = [(-8, 7, False), (0, 15, False), (-2, 1, False), (-1, 1, True)]


def _lsq_ratios(qn: int, qp: int) -> list[float]:
    """Fixed r = x/alpha values: inside the clip range (fractional part 0.2 or 0.7, away from the
    rounding half-points and >= 0.2 from both clip edges), and >= 0.3 beyond each clip edge."""
    inside = [k + f for k in range(qn, qp) for f in (0.2, 0.7)]
    below = [qn - 0.3, qn - 1.6, qn - 4.1]
    above = [qp + 0.3, qp + 1.6, qp + 4.1]
    return inside + below + above


def _lsq_x(qn: int, qp: int) -> Tensor:
    return (ALPHA * torch.tensor(_lsq_ratios(qn, qp), dtype=DT)).reshape(1, -1)


def _lsq_scale(numel: int, qp: int) -> float:
    """LSQ's gradient scale g = 1/sqrt(N Qp) (Esser et al. 2020), Qp = 1 for one bit."""
    return 1.0 / math.sqrt(numel * max(qp, 1))


class _LSQWrtX(torch.autograd.Function):
    """forward: ``alpha * clamp(x/alpha, Qn, Qp)`` (LSQ with round() straight-through) for fixed
    alpha; backward: ``_LSQ``'s backward w.r.t. x."""

    @staticmethod
    def forward(ctx, x, alpha, qn, qp, one_bit):
        ctx.save_for_backward(x, alpha)
        ctx.args = (qn, qp, one_bit)
        return alpha * torch.clamp(x / alpha, qn, qp)

    @staticmethod
    def backward(ctx, g):
        x, alpha = ctx.saved_tensors
        qn, qp, one_bit = ctx.args
        (gx,) = _package_grad(lambda a, b: _LSQ.apply(a, b, qn, qp, one_bit), [x, alpha], [0], g)
        return gx, None, None, None, None


class _LSQWrtAlpha(torch.autograd.Function):
    """forward, per element, for fixed x (q = round(x/alpha) frozen, which it is locally since the
    points sit away from half-integers; below/above the clip range):

        scale * (alpha * q - x * log(alpha)),   scale * alpha * Qn,   scale * alpha * Qp

    whose alpha-derivatives are scale * (q - x/alpha), scale * Qn, scale * Qp, i.e. LSQ's step
    gradient; for one bit: scale * alpha * sign(x) (sign(0) = +1). backward: ``_LSQ``'s backward
    w.r.t. alpha (summed over elements, as the VJP of the elementwise map)."""

    @staticmethod
    def forward(ctx, alpha, x, qn, qp, one_bit):
        ctx.save_for_backward(x, alpha)
        ctx.args = (qn, qp, one_bit)
        scale = _lsq_scale(x.numel(), qp)
        if one_bit:
            return scale * alpha * torch.where(x >= 0, 1.0, -1.0).to(x.dtype)
        r = x / alpha
        inner = alpha * torch.round(r) - x * torch.log(alpha)
        out = torch.where(r < qn, alpha * qn, torch.where(r > qp, alpha * qp, inner))
        return scale * out

    @staticmethod
    def backward(ctx, g):
        x, alpha = ctx.saved_tensors
        qn, qp, one_bit = ctx.args
        (ga,) = _package_grad(lambda a, b: _LSQ.apply(a, b, qn, qp, one_bit), [x, alpha], [1], g)
        return ga, None, None, None, None


@pytest.mark.parametrize(("qn", "qp", "one_bit"), LSQ_CASES)
def test_lsq_x_gradient_is_clamp_derivative(qn, qp, one_bit):
    """The x-gradient of ``_LSQ`` is exactly the derivative of ``alpha * clamp(x/alpha, Qn, Qp)``:
    1 strictly inside the clip range, 0 beyond either edge (both sides tested), also in the one-bit
    branch (where Qn, Qp = -1, 1)."""
    x = _lsq_x(qn, qp).requires_grad_()
    alpha = torch.tensor(ALPHA, dtype=DT)
    assert gradcheck(lambda t: _LSQWrtX.apply(t, alpha, qn, qp, one_bit), (x,))


@pytest.mark.parametrize(("qn", "qp", "one_bit"), LSQ_CASES)
def test_lsq_alpha_gradient_is_scaled_step_gradient(qn, qp, one_bit):
    """The alpha-gradient of ``_LSQ`` is ``1/sqrt(N Qp)`` times the derivative of ``alpha * q`` with
    round() straight-through: ``round(r) - r`` inside, ``Qn`` below, ``Qp`` above (``sign(x)`` for
    one bit), summed over the N elements; checked on points inside and on both sides of the range."""
    x = _lsq_x(qn, qp)
    alpha = torch.tensor(ALPHA, dtype=DT, requires_grad=True)
    assert gradcheck(lambda a: _LSQWrtAlpha.apply(a, x, qn, qp, one_bit), (alpha,))


@pytest.mark.parametrize(("qn", "qp", "one_bit"), LSQ_CASES)
def test_lsq_direct_in_clipped_regime(qn, qp, one_bit):
    """Where every element is beyond the clip range (and, for one bit, |x| > alpha), the forward is
    constant in x and the package backward's x-gradient, 0, is the true derivative: gradcheck of
    ``_LSQ`` itself w.r.t. x passes (alpha held fixed)."""
    r = [qn - 0.3, qn - 2.4, qp + 0.3, qp + 2.4]
    x = (ALPHA * torch.tensor(r, dtype=DT)).requires_grad_()
    alpha = torch.tensor(ALPHA, dtype=DT)
    assert gradcheck(lambda t: _LSQ.apply(t, alpha, qn, qp, one_bit), (x,))


def test_lsq_forward_values():
    """The probes' surrogates agree with the package forward where they should: the forward is
    alpha * clamp(round(x/alpha)), and alpha * sign(x) (sign(0) = +1) for one bit."""
    x = _lsq_x(-8, 7)
    alpha = torch.tensor(ALPHA, dtype=DT)
    expect = alpha * torch.clamp(torch.round(x / alpha), -8, 7)
    assert torch.equal(_LSQ.apply(x, alpha, -8, 7, False), expect)
    x1 = torch.tensor([-1.3, -0.2, 0.0, 0.4, 2.0], dtype=DT)
    expect1 = alpha * torch.tensor([-1.0, -1.0, 1.0, 1.0, 1.0], dtype=DT)
    assert torch.equal(_LSQ.apply(x1, alpha, -1, 1, True), expect1)


# ------------------------------------------------------------------------------------ _PowerNormFn

EPS = 1e-5
B, T, H = 2, 3, 4


def _pn_inputs() -> dict[str, Tensor]:
    """Fixed float64 inputs: xt [B, T, H], per-channel gamma/beta/var/psi [H]."""
    xt = torch.linspace(-1.7, 2.3, B * T * H, dtype=DT).reshape(B, T, H)
    xt = xt * torch.tensor([1.0, -0.5, 2.0, 0.8], dtype=DT)
    return {
        "xt": xt,
        "gamma": torch.tensor([0.7, -1.3, 2.2, 0.4], dtype=DT),
        "beta": torch.tensor([0.1, -0.2, 0.3, 0.05], dtype=DT),
        "var": torch.tensor([0.9, 1.6, 0.3, 2.5], dtype=DT),
        "psi": torch.tensor([1.2, 0.7, 0.45, 3.1], dtype=DT),
    }


def test_powernorm_direct_frozen_statistics():
    """Regime gamma_hat = gamma (the same tensor), psi = var held constant, e = 0 and ``valid`` all
    False: the forward is ``gamma * xt / sqrt(var + eps) + beta`` and the package backward is its
    true gradient w.r.t. xt, gamma and beta (statistics frozen). gradcheck of ``_PowerNormFn``
    itself passes, and the running buffer e is left untouched by the repeated backwards."""
    p = _pn_inputs()
    xt, gamma, beta = (p[k].clone().requires_grad_() for k in ("xt", "gamma", "beta"))
    var = p["var"]
    e = torch.zeros(H, dtype=DT)
    valid = torch.zeros(B, T, dtype=torch.bool)

    def fn(xt, gamma, beta):
        return _PowerNormFn.apply(xt, gamma, beta, gamma, var, var, e, valid, EPS)

    assert gradcheck(fn, (xt, gamma, beta))
    assert torch.equal(e, torch.zeros(H, dtype=DT))


class _PNProbe(torch.autograd.Function):
    """forward: the sum of one surrogate per input, each with the other inputs frozen:

    * w.r.t. xt: ``gamma * xt / sqrt(psi + eps)`` (raw gamma, batch psi: the surrogate PowerNorm's
      backward differentiates, with PoT(gamma) straight-through and the running var frozen);
    * w.r.t. gamma: ``gamma * z`` with ``z = xt / sqrt(var + eps)`` (PoT straight-through);
    * w.r.t. beta: ``beta``.

    The three are summed (each depends on one input only), so the probe's true gradient w.r.t. each
    input is the per-input surrogate. backward: ``_PowerNormFn``'s backward with gamma_hat =
    PoT(gamma) (a different tensor), var != psi, e = 0 and no valid rows."""

    @staticmethod
    def forward(ctx, xt, gamma, beta, xt0, gamma0, var, psi):
        ctx.save_for_backward(xt, gamma, beta, var, psi)
        by_x = gamma0 * xt / torch.sqrt(psi + EPS)
        by_gamma = gamma * (xt0 / torch.sqrt(var + EPS))
        return by_x + by_gamma + beta

    @staticmethod
    def backward(ctx, g):
        xt, gamma, beta, var, psi = ctx.saved_tensors
        e = torch.zeros(H, dtype=DT)
        valid = torch.zeros(xt.shape[:-1], dtype=torch.bool)

        def fn(xt, gamma, beta):
            gamma_hat = pot(gamma.detach())
            return _PowerNormFn.apply(xt, gamma, beta, gamma_hat, var, psi, e, valid, EPS)

        grads = _package_grad(fn, [xt, gamma, beta], [0, 1, 2], g)
        assert torch.equal(e, torch.zeros(H, dtype=DT))
        return (*grads, None, None, None, None)


def test_powernorm_probe_pot_gamma_and_batch_psi():
    """With gamma_hat = PoT(gamma) != gamma and var (running phi) != psi (batch), the package
    backward is the gradient of the surrogate ``gamma * xt / sqrt(psi + eps)`` w.r.t. xt, of
    ``gamma * xt / sqrt(var + eps)`` w.r.t. gamma and of ``beta`` w.r.t. beta, each with the other
    inputs and all statistics frozen (e = 0, buffer not updated)."""
    p = _pn_inputs()
    xt, gamma, beta = (p[k].clone().requires_grad_() for k in ("xt", "gamma", "beta"))
    assert not torch.equal(pot(p["gamma"]), p["gamma"])
    xt0, gamma0 = p["xt"], p["gamma"]  # the frozen copies each per-input surrogate holds fixed

    def fn(xt, gamma, beta):
        return _PNProbe.apply(xt, gamma, beta, xt0, gamma0, p["var"], p["psi"])

    # Finite differences move one input at a time while the frozen copies stay at the base point,
    # so each column of the numerical Jacobian is the per-input surrogate's derivative.
    assert gradcheck(fn, (xt, gamma, beta))


def test_powernorm_backward_with_nonzero_e():
    """With e != 0 the backward is not the VJP of any function (``-0.1 e z`` does not scale with the
    upstream gradient), so it is checked against the documented formula instead:
    ``dx = (g - 0.1 e z) / sqrt(psi + eps)`` with ``g = dy * gamma`` (raw gamma), ``dgamma =
    sum(dy z)``, ``dbeta = sum(dy)``, and e is updated in place by the mean over valid (b, t) rows
    of ``(g - 0.1 e z) z``, all with the e from before the update."""
    p = _pn_inputs()
    xt, gamma, beta = (p[k].clone().requires_grad_() for k in ("xt", "gamma", "beta"))
    var, psi = p["var"], p["psi"]
    gamma_hat = pot(p["gamma"])
    e0 = torch.tensor([0.3, -1.1, 0.6, 2.0], dtype=DT)
    e = e0.clone()
    valid = torch.tensor([[True, True, False], [True, False, False]])
    dy = torch.linspace(-0.8, 1.1, B * T * H, dtype=DT).reshape(B, T, H).flip(-1)

    y = _PowerNormFn.apply(xt, gamma, beta, gamma_hat, var, psi, e, valid, EPS)
    z = p["xt"] / torch.sqrt(var + EPS)
    torch.testing.assert_close(y, gamma_hat * z + p["beta"], rtol=0, atol=1e-15)
    dx, dgamma, dbeta = torch.autograd.grad(y, (xt, gamma, beta), dy)

    approx = dy * p["gamma"] - 0.1 * e0 * z
    torch.testing.assert_close(dx, approx / torch.sqrt(psi + EPS), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(dgamma, (dy * z).sum(dim=(0, 1)), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(dbeta, dy.sum(dim=(0, 1)), rtol=1e-14, atol=1e-14)
    rows = (approx * z)[valid]  # [3, H]: rows (0,0), (0,1), (1,0)
    assert rows.shape == (3, H)
    torch.testing.assert_close(e, e0 + rows.mean(dim=0), rtol=1e-14, atol=1e-14)

    # no valid row: e unchanged
    e2 = e0.clone()
    y2 = _PowerNormFn.apply(
        xt, gamma, beta, gamma_hat, var, psi, e2, torch.zeros(B, T, dtype=torch.bool), EPS
    )
    torch.autograd.grad(y2, xt, dy)
    assert torch.equal(e2, e0)
