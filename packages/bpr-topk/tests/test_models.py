import math

import pytest
import torch
from bpr_topk import NegBinMixedEffects, TruncatedNormal, TruncNormMixture
from torch.distributions import MultivariateNormal, NegativeBinomial


def _negbin(link="exp"):
    m = NegBinMixedEffects(6, 3, link=link, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        m.b0.normal_()
        m.b1.normal_(0, 0.1)
    X, time = torch.randn(4, 6, 3), torch.arange(4.0)[:, None].expand(4, 6)
    return m, X, time


@pytest.mark.parametrize("link", ["exp", "softplus"])
def test_negbin_log_prob_and_mean_formula(link):
    m, X, time = _negbin(link)
    eta = m.beta0 + X @ m.beta + m.b0 + m.b1 * time
    g = torch.exp(eta) if link == "exp" else torch.nn.functional.softplus(eta)
    q = torch.sigmoid(m.zeta)
    y = torch.randint(0, 5, (4, 6))
    ref = NegativeBinomial(total_count=g, probs=q).log_prob(y.float())
    assert torch.allclose(m.log_prob(y, X, time), ref, atol=1e-5)
    assert torch.allclose(m.mean(X, time), g * q / (1 - q), rtol=1e-5)
    assert sum(p.numel() for p in m.parameters()) == 2 * 6 + 3 + 5


def test_mvn_prior_matches_torch():
    m, _, _ = _negbin()
    ref = MultivariateNormal(torch.zeros(2), m.covariance()).log_prob(torch.stack([m.b0, m.b1], -1))
    assert torch.allclose(m.log_prior(), ref.sum(), rtol=1e-5)
    code = NegBinMixedEffects(6, 3, prior="code")
    assert code.log_prior().item() == 0.0  # b = 0 at init; no log-det term


@pytest.mark.parametrize("link", ["exp", "softplus"])
def test_per_site_dispersion_keeps_the_mean_and_sets_each_sites_variance(link):
    m, X, time = _negbin(link)
    site = NegBinMixedEffects(6, 3, link=link, dispersion="site", dispersion_scale=0.5)
    site.load_state_dict({**m.state_dict(), "delta": torch.zeros(6)})
    y = torch.randint(0, 5, (4, 6))
    # δ = 0: the global model exactly (log-probability and prior)
    assert torch.equal(site.log_prob(y, X, time), m.log_prob(y, X, time))
    n0 = torch.distributions.Normal(0.0, 0.5).log_prob(torch.zeros(6)).sum()
    assert torch.allclose(site.log_prior(), m.log_prior() + n0)
    with torch.no_grad():
        site.delta.copy_(torch.linspace(-2, 2, 6))
    q_s = torch.sigmoid(m.zeta + site.delta)
    mean = m.mean(X, time)
    # the mean does not move with δ; the variance is mean / (1 − q_s) (closed form)
    assert torch.allclose(site.mean(X, time), mean, rtol=1e-5)
    assert torch.allclose(site(X, time).variance, mean / (1 - q_s), rtol=1e-5)
    g = torch.exp(m.eta(X, time)) if link == "exp" else torch.nn.functional.softplus(m.eta(X, time))
    ref = NegativeBinomial(total_count=g * torch.exp(-site.delta), probs=q_s)
    assert torch.allclose(site.log_prob(y, X, time), ref.log_prob(y.float()), atol=1e-5)
    ref_prior = torch.distributions.Normal(0.0, 0.5).log_prob(site.delta).sum()
    assert torch.allclose(site.log_prior() - m.log_prior(), ref_prior, rtol=1e-5)
    assert sum(p.numel() for p in site.parameters()) == 3 * 6 + 3 + 5
    # a checkpoint's config rebuilds it
    from bpr_topk.models import build_model

    again = build_model("negbin", site.config())
    again.load_state_dict(site.state_dict())
    assert torch.equal(again.log_prob(y, X, time), site.log_prob(y, X, time))
    with pytest.raises(ValueError, match="dispersion must be"):
        NegBinMixedEffects(3, 2, dispersion="tract")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dispersion_scale must be"):
        NegBinMixedEffects(3, 2, dispersion="site", dispersion_scale=0.0)


def test_random_intercept_only_prior_is_the_marginal_of_b0_and_bounded():
    """With the slopes held at 0 the prior is Σ_s log N(b_0s; 0, σ0²): it does not depend on
    σ1 or ρ (the bivariate density at b_1 = 0 grows without bound as σ1 → 0, ρ → ±1)."""
    m = NegBinMixedEffects(6, 3, site_slopes=False, generator=torch.Generator().manual_seed(0))
    assert not m.b1.requires_grad and m.config()["site_slopes"] is False
    with torch.no_grad():
        m.b0.normal_()
    s0 = torch.nn.functional.softplus(m.sigma0_raw)
    ref = torch.distributions.Normal(0.0, s0).log_prob(m.b0).sum()
    assert torch.allclose(m.log_prior(), ref, rtol=1e-6)
    before = m.log_prior().item()
    with torch.no_grad():
        m.sigma1_raw.fill_(-30.0)  # σ1 → 0
        m.rho_raw.fill_(10.0)  # ρ → 1
    assert m.log_prior().item() == pytest.approx(before, rel=1e-6)
    m.log_prior().backward()
    assert m.sigma1_raw.grad is None and m.rho_raw.grad is None
    # the bivariate prior at b = 0 is unbounded there (what the option avoids)
    full = NegBinMixedEffects(6, 3)
    full.load_state_dict(m.state_dict())
    with torch.no_grad():
        full.b0.zero_()
    assert full.log_prior().item() > 6 * 25


def test_truncated_normal_integrates_to_one_and_samples_in_support():
    d = TruncatedNormal(torch.tensor([5.0, 140.0]), torch.tensor([3.0, 20.0]), 0.0, 150.0)
    x = torch.linspace(0, 150, 200_001)[:, None]
    dens = d.log_prob(x).exp()
    integral = torch.trapezoid(dens, x[:, 0], dim=0)
    assert torch.allclose(integral, torch.ones(2), atol=1e-4)
    s = d.sample((5000,))
    assert float(s.min()) >= 0.0 and float(s.max()) <= 150.0
    assert torch.allclose(s.mean(0), d.mean, rtol=0.03)
    assert d.log_prob(torch.tensor([-1.0, 151.0])).isinf().all()


def test_mixture_shapes_official_init_and_state_dict_round_trip():
    m = TruncNormMixture.official_init(3)
    X = torch.zeros(10, 7, 0)
    assert m.sample(4, X).shape == (4, 10, 7)
    assert m.log_prob(torch.ones(4, 10, 7) * 20, X).shape == (4, 10, 7)
    m2 = TruncNormMixture(**m.config())
    m2.load_state_dict(m.state_dict())
    y = torch.full((10, 7), 30.0)
    assert torch.equal(m.log_prob(y, X), m2.log_prob(y, X))
    a, b = TruncNormMixture.official_init(0), TruncNormMixture.official_init(1)
    assert not torch.equal(a.mu_raw, b.mu_raw)


def test_bad_model_inputs():
    with pytest.raises(ValueError, match="link must be"):
        NegBinMixedEffects(3, 2, link="log")
    m = NegBinMixedEffects(3, 2)
    with pytest.raises(ValueError, match="X must have shape"):
        m(torch.zeros(2, 3, 4), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="needs covariates"):
        m()
    with pytest.raises(ValueError, match="M must be"):
        m.sample(0, torch.zeros(2, 3, 2), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="low < high"):
        TruncatedNormal(torch.zeros(1), torch.ones(1), 1.0, 0.0)
    assert math.isfinite(float(m.log_prior().detach()))
