"""Float64 ``torch.autograd.gradcheck`` of ``PerturbedTopKFunction``'s Monte Carlo backward (Eq. 11).

The package backward estimates the Jacobian of the noise-smoothed top-K expectation
``F(r) = E[TOPKMASK(r + sigma z, K)]`` from J noise draws. Each test gradchecks a probe Function
whose forward is ``F`` in closed form (or by 1-D quadrature) and whose backward is the package
backward run with J draws from a freshly seeded ``torch.Generator`` (the same draws for every
backward call, so gradcheck's reentrancy check holds exactly).

Tolerance. Entry (l, i) of the estimated Jacobian is the mean over J draws of
``mask_l * score_i / sigma`` with ``mask_l`` in {0, 1} and ``score = grad(-log nu)(z)``, whose second
moment is 1 for both noises (normal: ``E[z^2] = 1``; Gumbel: ``score = 1 - exp(-z)`` with
``exp(-z) ~ Exp(1)``, so ``E[score^2] = Var Exp(1) = 1``). Hence every entry's Monte Carlo standard
error is at most ``SE = 1 / (sigma sqrt(J))``, and gradcheck runs with ``atol = 5 SE``, ``rtol = 0``
(the error is absolute, not relative). With sigma = 0.5 and J = 400 000, SE <= 3.2e-3 and
atol = 1.6e-2, against Jacobian entries of 0.1 to 0.6: a missing 1/sigma, a wrong score sign or a
wrong score function fails by many atol. The finite-difference side is exact to ~1e-9.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from bpr_topk.perturbed import PerturbedTopKFunction
from torch import Tensor
from torch.autograd import gradcheck

DT = torch.float64
SIGMA = 0.5
J = 400_000
SEED = 1234
SE = 1.0 / (SIGMA * math.sqrt(J))  # bound on each Jacobian entry's Monte Carlo standard error
ATOL = 5 * SE


class _Probe(torch.autograd.Function):
    """forward: ``expectation(r, k, sigma)``; backward: the package's Eq. 11 estimator."""

    @staticmethod
    def forward(ctx, r, k, noise, expectation):
        ctx.save_for_backward(r)
        ctx.k, ctx.noise = k, noise
        return expectation(r, k, SIGMA)

    @staticmethod
    def backward(ctx, g):
        # The package Function runs once per probe forward (on the first backward), on a detached
        # leaf copy; every later backward reuses its graph, i.e. the same J draws.
        if not hasattr(ctx, "package"):
            (r,) = ctx.saved_tensors
            gen = torch.Generator().manual_seed(SEED)
            with torch.enable_grad():
                leaf = r.detach().clone().requires_grad_()
                out = PerturbedTopKFunction.apply(leaf, ctx.k, SIGMA, J, ctx.noise, "hard", gen)
            ctx.package = (leaf, out)
        leaf, out = ctx.package
        (gr,) = torch.autograd.grad(out, leaf, g, retain_graph=True)
        return gr, None, None, None


def _check(r: Tensor, k: int, noise: str, expectation: Callable[[Tensor, int, float], Tensor]):
    r = r.to(DT).requires_grad_()
    assert gradcheck(lambda t: _Probe.apply(t, k, noise, expectation), (r,), atol=ATOL, rtol=0.0)
    # the package's smoothed forward estimates the same expectation (SE of a mean of 0/1 <= 0.5/sqrt(J))
    gen = torch.Generator().manual_seed(SEED)
    b = PerturbedTopKFunction.apply(r.detach(), k, SIGMA, J, noise, "smoothed", gen)
    torch.testing.assert_close(b, expectation(r.detach(), k, SIGMA), rtol=0, atol=5 * 0.5 / J**0.5)


# ---------------------------------------------------------------------------------- expectations


def _normal_s2_k1(r: Tensor, k: int, sigma: float) -> Tensor:
    """S = 2, K = 1, normal noise: ``P(r1 + sigma z1 > r2 + sigma z2) = Phi((r1 - r2)/(sigma sqrt 2))``."""
    assert r.shape[-1] == 2 and k == 1
    p1 = torch.special.ndtr((r[..., 0] - r[..., 1]) / (sigma * math.sqrt(2.0)))
    return torch.stack([p1, 1.0 - p1], dim=-1)


_T = torch.linspace(-12.0, 12.0, 4801, dtype=DT)  # quadrature grid for the standard normal


def _normal_quadrature(r: Tensor, k: int, sigma: float) -> Tensor:
    """1-D rows, normal noise, K = 1 or K = S - 1, by trapezoidal quadrature over ``t = z_i``:

    ``P(i is the max) = int phi(t) prod_{j != i} Phi(t + (r_i - r_j)/sigma) dt`` (K = 1) and
    ``P(i in top S-1) = 1 - int phi(t) prod_{j != i} (1 - Phi(t + (r_i - r_j)/sigma)) dt``.
    The integrand is smooth and decays like phi, so the error is far below 1e-9."""
    s = r.shape[-1]
    assert r.dim() == 1 and k in (1, s - 1)
    d = (r[:, None] - r[None, :]) / sigma  # d[i, j] = (r_i - r_j)/sigma
    cdf = torch.special.ndtr(_T[:, None, None] + d[None])  # [T, i, j]
    if k != 1:  # K = S - 1: P(i is the min), subtracted from 1 below
        cdf = 1.0 - cdf
    off = ~torch.eye(s, dtype=torch.bool)
    prod = torch.where(off[None], cdf, torch.ones_like(cdf)).prod(-1)  # [T, i]
    dens = torch.exp(-0.5 * _T**2) / math.sqrt(2.0 * math.pi)
    p = torch.trapezoid(dens[:, None] * prod, _T, dim=0)
    return p if k == 1 else 1.0 - p


def _gumbel_k1(r: Tensor, k: int, sigma: float) -> Tensor:
    """K = 1, standard (max-)Gumbel noise ``z = -log(-log u)``: the Gumbel-max trick gives
    ``P(argmax(r + sigma z) = i) = softmax(r / sigma)_i``."""
    assert k == 1
    return torch.softmax(r / sigma, dim=-1)


def _gumbel_s3_k2(r: Tensor, k: int, sigma: float) -> Tensor:
    """S = 3, K = 2, Gumbel noise: the top 2 of ``r + sigma z`` is a Plackett-Luce draw without
    replacement with ``p = softmax(r/sigma)``, so ``P(i in top 2) = p_i + sum_{j != i} p_j p_i/(1-p_j)``."""
    assert r.shape[-1] == 3 and k == 2
    p = torch.softmax(r / sigma, dim=-1)
    second = (
        p[..., None, :] * p[..., :, None] / (1.0 - p[..., None, :])
    )  # [.., i, j]: p_j p_i/(1-p_j)
    second = second * (1.0 - torch.eye(3, dtype=r.dtype))
    return p + second.sum(-1)


# ----------------------------------------------------------------------------------------- tests


def test_tolerance_is_tight_enough():
    """The stated atol (5 SE) is small next to the Jacobian entries being checked."""
    assert ATOL < 0.02
    # d P(b_1)/d r_1 for S = 2 at r1 - r2 = 0.3: phi(0.3/(sigma sqrt 2)) / (sigma sqrt 2) ~ 0.52
    entry = math.exp(-0.5 * (0.3 / (SIGMA * math.sqrt(2))) ** 2) / math.sqrt(2 * math.pi)
    assert entry / (SIGMA * math.sqrt(2)) > 20 * ATOL


@pytest.mark.parametrize(
    "r", [torch.tensor([0.3, 0.0]), torch.tensor([[0.3, 0.0], [-0.2, 0.4]])], ids=["1d", "batched"]
)
def test_normal_s2_k1(r):
    """S = 2, K = 1, normal noise: the package backward is, within 5 Monte Carlo SE per entry, the
    Jacobian of ``Phi((r1 - r2)/(sigma sqrt 2))`` (batched rows: block-diagonal, exactly 0 across
    rows)."""
    _check(r, 1, "normal", _normal_s2_k1)


@pytest.mark.parametrize("k", [1, 2])
def test_normal_s3_quadrature(k):
    """S = 3, K = 1 and K = 2, normal noise: the package backward matches the Jacobian of the
    smoothed top-K probabilities computed by quadrature (within 5 SE per entry)."""
    _check(torch.tensor([0.1, 0.4, -0.2]), k, "normal", _normal_quadrature)


def test_gumbel_k1_softmax():
    """S = 4, K = 1, Gumbel noise: the package backward (score ``1 - exp(-z)``) matches the Jacobian
    of ``softmax(r / sigma)`` (within 5 SE per entry)."""
    _check(torch.tensor([0.2, -0.1, 0.5, 0.0]), 1, "gumbel", _gumbel_k1)


def test_gumbel_s3_k2_plackett_luce():
    """S = 3, K = 2, Gumbel noise: the package backward matches the Jacobian of the Plackett-Luce
    top-2 inclusion probabilities (within 5 SE per entry)."""
    _check(torch.tensor([0.3, -0.2, 0.1]), 2, "gumbel", _gumbel_s3_k2)


def test_expectations_are_distributions():
    """Sanity of the closed forms themselves: rows sum to K, and the quadrature agrees with the
    S = 2 closed form."""
    r = torch.tensor([0.1, 0.4, -0.2], dtype=DT)
    for k, fn in [
        (1, _normal_quadrature),
        (2, _normal_quadrature),
        (1, _gumbel_k1),
        (2, _gumbel_s3_k2),
    ]:
        torch.testing.assert_close(fn(r, k, SIGMA).sum(), torch.tensor(float(k), dtype=DT))
    r2 = torch.tensor([0.3, 0.0], dtype=DT)
    torch.testing.assert_close(
        _normal_quadrature(r2, 1, SIGMA), _normal_s2_k1(r2, 1, SIGMA), rtol=0, atol=1e-10
    )
