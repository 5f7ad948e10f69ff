import pytest
import torch
from bpr_topk import (
    NegBinMixedEffects,
    explicit_jacobian_grad,
    ratio_values,
    score_function_rating,
    score_function_surrogate,
)
from torch.distributions import Poisson

W = torch.tensor([1.0, 2.0], dtype=torch.float64)


def _grad_estimate(theta0, f_fn, mode, M=200_000, seed=0, baseline=None):
    """Score-function estimate of dE[f_s]/dθ for two Poisson sites λ_s = θ w_s, and its SE."""
    torch.manual_seed(seed)
    theta = torch.tensor(theta0, dtype=torch.float64, requires_grad=True)
    y = Poisson(theta.detach() * W).sample((M,))
    f = f_fn(y)
    lp = Poisson(theta * W).log_prob(y)
    grads = []
    for s in range(2):
        r = score_function_rating(lp, f, mode, baseline)
        (g,) = torch.autograd.grad(r[s], theta, retain_graph=True)
        grads.append(g.item())
    # per-sample terms for the SE
    score = (
        (y / theta.detach() - W)
        if mode == "per_site"
        else (y / theta.detach() - W).sum(-1, keepdim=True)
    )
    terms = f * score
    se = terms.std(0) / M**0.5
    return torch.tensor(grads, dtype=torch.float64), se


def _exact_expectation(theta, f_fn, n=60):
    a = torch.arange(n, dtype=torch.float64)
    y1, y2 = torch.meshgrid(a, a, indexing="ij")
    y = torch.stack([y1, y2], -1).reshape(-1, 2)
    p = Poisson(theta * W).log_prob(y).sum(-1).exp()
    return (f_fn(y) * p[:, None]).sum(0)


def test_linear_f_joint_and_per_site_agree_with_analytic():
    c = 3.0
    for mode in ("joint", "per_site"):
        g, se = _grad_estimate(1.5, lambda y: y / c, mode)
        assert torch.allclose(g, W / c, atol=float(4 * se.max()))


def test_ratio_f_joint_unbiased_per_site_biased_with_shared_theta():
    f_fn = lambda y: ratio_values(y, 1.0)  # noqa: E731
    theta, h = 1.5, 1e-5
    fd = (_exact_expectation(theta + h, f_fn) - _exact_expectation(theta - h, f_fn)) / (2 * h)
    g_joint, se_joint = _grad_estimate(theta, f_fn, "joint")
    assert torch.allclose(g_joint, fd, atol=float(4 * se_joint.max()))
    g_site, se_site = _grad_estimate(theta, f_fn, "per_site")
    gap = (g_site - fd).abs()
    assert bool((gap > 6 * se_site).all()), (g_site, fd, se_site)


def test_site_specific_params_per_site_drops_cross_terms():
    torch.manual_seed(0)
    lam = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = Poisson(lam.detach()).sample((50_000,))
    f = ratio_values(y, 1.0)
    lp = Poisson(lam).log_prob(y)
    jac = {}
    for mode in ("joint", "per_site"):
        r = score_function_rating(lp, f, mode)
        jac[mode] = torch.stack(
            [torch.autograd.grad(r[s], lam, retain_graph=True)[0] for s in range(2)]
        )
    # diagonal ∂r_s/∂λ_s: identical estimators; off-diagonal: per_site is exactly 0
    assert torch.allclose(jac["joint"].diagonal(), jac["per_site"].diagonal())
    assert jac["per_site"][0, 1].item() == 0.0 and jac["per_site"][1, 0].item() == 0.0
    assert jac["joint"][0, 1].item() < 0  # more events elsewhere lower my share


def test_loo_baseline_same_mean_lower_variance():
    f_fn = lambda y: ratio_values(y, 1.0)  # noqa: E731
    plain = torch.stack([_grad_estimate(1.5, f_fn, "joint", M=50, seed=s)[0] for s in range(300)])
    loo = torch.stack(
        [_grad_estimate(1.5, f_fn, "joint", M=50, seed=s, baseline="loo")[0] for s in range(300)]
    )
    assert torch.allclose(plain.mean(0), loo.mean(0), atol=0.01)
    assert bool((loo.var(0) < plain.var(0)).all())


def test_value_is_exact_mean_of_f():
    lp = torch.randn(5, 3, requires_grad=True)
    f = torch.rand(5, 3)
    assert torch.equal(score_function_rating(lp, f), f.mean(0))


@pytest.mark.parametrize("mode", ["joint", "per_site"])
def test_surrogate_equals_explicit_jacobian_product(mode):
    """3-parameter Poisson model; same samples; torch.func.jacrev reference."""
    torch.manual_seed(0)
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0], dtype=torch.float64)
    phi = torch.tensor([0.3, 0.5, -0.2], dtype=torch.float64, requires_grad=True)

    def log_prob_of(params, y):
        rate = torch.exp(params[0] + params[1] * x + params[2] * x**2)
        return Poisson(rate).log_prob(y)

    y = Poisson(torch.exp(phi[0] + phi[1] * x + phi[2] * x**2).detach()).sample((6,))
    f = ratio_values(y, 1.0)
    g_r = torch.tensor([0.7, -1.2, 0.4, 2.0], dtype=torch.float64)
    psi = score_function_surrogate(log_prob_of(phi, y), f, g_r, mode)
    (grad_surrogate,) = torch.autograd.grad(psi, phi)

    jac = torch.func.jacrev(lambda p: log_prob_of(p, y))(phi.detach())  # [M, S, P]
    if mode == "joint":
        dr = (f[..., None] * jac.sum(1, keepdim=True)).mean(0)  # ∂r_s/∂φ [S, P]
    else:
        dr = (f[..., None] * jac).mean(0)
    expected = g_r @ dr
    assert torch.allclose(grad_surrogate, expected, rtol=1e-10, atol=1e-12)
    (grad_ref,) = explicit_jacobian_grad(
        lambda: log_prob_of(phi, y), [phi], f, g_r, mode, chunk_size=5
    )
    assert torch.allclose(grad_ref, expected, rtol=1e-10, atol=1e-12)


def test_surrogate_equals_explicit_jacobian_on_negbin_model():
    torch.manual_seed(1)
    torch.set_default_dtype(torch.float64)
    try:
        model = NegBinMixedEffects(5, 2, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            model.b0.normal_()
        X, time = torch.randn(3, 5, 2), torch.arange(3.0)[:, None].expand(3, 5)
        y = model.sample(4, X, time)
        f = ratio_values(y)
        g_r = torch.randn(3, 5)
        params = list(model.parameters())
        for mode in ("joint", "per_site"):
            psi = score_function_surrogate(model.log_prob(y, X, time), f, g_r, mode)
            grads = torch.autograd.grad(psi, params, allow_unused=True)
            ref = explicit_jacobian_grad(
                lambda: model.log_prob(y, X, time), params, f, g_r, mode, chunk_size=7
            )
            for a, b, p in zip(grads, ref, params):
                a = torch.zeros_like(p) if a is None else a  # prior-only parameters
                assert torch.allclose(a, b, rtol=1e-9, atol=1e-10)
    finally:
        torch.set_default_dtype(torch.float32)


def test_bad_inputs():
    with pytest.raises(ValueError, match="same shape"):
        score_function_rating(torch.zeros(3, 2), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="mode must be"):
        score_function_rating(torch.zeros(3, 2), torch.zeros(3, 2), mode="sites")
    with pytest.raises(ValueError, match="M=2"):
        score_function_rating(torch.zeros(1, 2), torch.zeros(1, 2), baseline="loo")
