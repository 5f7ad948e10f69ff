import math

import pytest
import torch
from bpr_topk import PerturbedTopK, perturbed_topk, topk_mask
from hypothesis import given, settings
from hypothesis import strategies as st


def _phi(x):
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _Phi(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("noise", ["normal", "gumbel"])
def test_rows_sum_to_k(noise):
    r = torch.randn(4, 9)
    b = perturbed_topk(r, 3, 0.5, 64, noise=noise, forward="smoothed")
    assert torch.allclose(b.sum(-1), torch.full((4,), 3.0))
    assert torch.equal(perturbed_topk(r, 3, 0.5, 8, noise=noise).sum(-1), torch.full((4,), 3.0))


def test_small_sigma_gives_hard_mask_and_shift_invariance():
    r = torch.tensor([0.3, 0.9, 0.1, 0.5])
    b = perturbed_topk(r, 2, 1e-5, 50, forward="smoothed")
    assert torch.equal(b, topk_mask(r, 2))
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    a = perturbed_topk(r, 2, 0.3, 200, forward="smoothed", generator=g1)
    c = perturbed_topk(r + 0.25, 2, 0.3, 200, forward="smoothed", generator=g2)
    assert torch.allclose(a, c)


def test_closed_form_value_and_gradient_s2_k1():
    """E[b_1] = Φ((r1 − r2)/(σ√2)); ∂E[b_1]/∂r_1 = φ(·)/(σ√2) = −∂E[b_1]/∂r_2 (within 4 SE)."""
    J, sigma = 100_000, 0.5
    r = torch.tensor([0.2, 0.0], dtype=torch.float64, requires_grad=True)
    g = torch.Generator().manual_seed(0)
    b = perturbed_topk(r, 1, sigma, J, forward="smoothed", generator=g)
    d = (0.2 - 0.0) / (sigma * math.sqrt(2))
    p = _Phi(d)
    assert b[0].item() == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / J))
    (grad,) = torch.autograd.grad(b[0], r)
    expected = _phi(d) / (sigma * math.sqrt(2))
    # per-draw estimator mask_1 * z / sigma; its SE bounds the MC error
    se = math.sqrt(p / sigma**2 / J)
    assert grad[0].item() == pytest.approx(expected, abs=4 * se)
    assert grad[1].item() == pytest.approx(-expected, abs=4 * se)


def test_gradient_does_not_scale_with_num_samples():
    r = torch.tensor([0.5, 0.2, 0.1, 0.0], requires_grad=True)
    w = torch.tensor([1.0, -1.0, 0.5, 0.0])
    grads = []
    for J in (1000, 10000):
        g = torch.Generator().manual_seed(1)
        (grad,) = torch.autograd.grad((perturbed_topk(r, 2, 0.3, J, generator=g) * w).sum(), r)
        grads.append(grad)
    assert torch.allclose(grads[0], grads[1], atol=0.35)
    assert grads[1].abs().max() > 0.1


def test_hard_forward_value_and_smoothed_share_gradient():
    r = torch.tensor([0.4, 0.3, 0.2], requires_grad=True)
    outs = []
    for fwd in ("hard", "smoothed"):
        g = torch.Generator().manual_seed(5)
        b = perturbed_topk(r, 1, 0.1, 500, forward=fwd, generator=g)
        (grad,) = torch.autograd.grad((b * torch.tensor([1.0, 2.0, 3.0])).sum(), r)
        outs.append((b.detach(), grad))
    assert torch.equal(outs[0][0], torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(outs[0][1], outs[1][1])


def test_dtype_batch_and_module():
    r = torch.randn(2, 3, 5, dtype=torch.float64)
    m = PerturbedTopK(2, sigma=0.1, num_samples=10, noise="gumbel")
    out = m(r)
    assert out.dtype == torch.float64 and out.shape == r.shape
    assert "gumbel" in repr(m)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sigma": 0.0}, "sigma must be > 0"),
        ({"num_samples": 0}, "num_samples must be >= 1"),
        ({"noise": "uniform"}, "noise must be"),
        ({"forward": "soft"}, "forward must be"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        perturbed_topk(torch.randn(4), 2, **kwargs)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(2, 9),
    st.data(),
    st.floats(1e-3, 2.0),
    st.sampled_from(["normal", "gumbel"]),
)
def test_property_rows_sum_to_k_and_gradient_sums_to_zero(batch, S, data, sigma, noise):
    """Rows of b̂ sum to K, entries lie in [0, 1], and the backward pass is finite."""
    k = data.draw(st.integers(1, S))
    r = torch.randn(batch, S, dtype=torch.float64, requires_grad=True)
    b = perturbed_topk(r, k, sigma, 16, noise=noise, forward="smoothed")
    assert torch.allclose(b.sum(-1), torch.full((batch,), float(k), dtype=torch.float64))
    assert bool(((b >= 0) & (b <= 1)).all())
    (g,) = torch.autograd.grad((b * torch.randn_like(b)).sum(), r)
    assert bool(torch.isfinite(g).all())
