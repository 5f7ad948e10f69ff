import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from parq_optim import (
    ProxBinaryRelax,
    ProxHardQuant,
    ProxPARQ,
    ProxSoftQuant,
    nearest,
    normalized_mirror_sigmoid,
)

Q4 = torch.tensor([-1.5, -0.5, 0.5, 1.5], dtype=torch.float64)


def u17():
    return torch.linspace(-2, 2, 17, dtype=torch.float64)


# ---- schedule ---------------------------------------------------------------------------------
def test_sigmoid_endpoints_and_midpoint():
    assert normalized_mirror_sigmoid(0, 0, 100, 10, 0.5) == pytest.approx(1.0, abs=1e-15)
    assert normalized_mirror_sigmoid(50, 0, 100, 10, 0.5) == pytest.approx(0.5, abs=1e-12)
    assert normalized_mirror_sigmoid(99.999, 0, 100, 10, 0.5) == pytest.approx(0.0, abs=1e-4)


def test_sigmoid_strictly_decreasing_and_symmetric():
    vals = [normalized_mirror_sigmoid(t, 10, 110, 7.0, 0.5) for t in range(10, 110)]
    assert all(a > b for a, b in itertools.pairwise(vals))
    for f in (0.1, 0.25, 0.4):
        a = normalized_mirror_sigmoid(f * 100, 0, 100, 7.0, 0.5)
        b = normalized_mirror_sigmoid((1 - f) * 100, 0, 100, 7.0, 0.5)
        assert a + b == pytest.approx(1.0, abs=1e-12)


def test_sigmoid_small_steepness_is_linear_large_is_step():
    for t in range(0, 100, 7):
        assert normalized_mirror_sigmoid(t, 0, 100, 1e-3, 0.5) == pytest.approx(
            1 - t / 100, abs=1e-3
        )
    assert normalized_mirror_sigmoid(40, 0, 100, 500, 0.5) > 0.999
    assert normalized_mirror_sigmoid(60, 0, 100, 500, 0.5) < 1e-3
    assert normalized_mirror_sigmoid(60, 0, 100, 5000, 0.5) < 1e-100  # no overflow


def test_sigmoid_formula_by_hand():
    s, c, f = 4.0, 0.3, 0.25
    st_ = 1 / (1 + math.exp(s * (f - c)))
    s1, s2 = 1 / (1 + math.exp(-s / 2)), 1 / (1 + math.exp(s / 2))
    assert normalized_mirror_sigmoid(25, 0, 100, s, c) == pytest.approx((st_ - s2) / (s1 - s2))


@pytest.mark.parametrize("t", [-1, 100, 150])
def test_sigmoid_outside_window_rejected(t):
    with pytest.raises(ValueError, match="t1 <= t < t2"):
        normalized_mirror_sigmoid(t, 0, 100, 10, 0.5)


# ---- PARQ closed form ---------------------------------------------------------------------------
def test_parq_before_start_is_identity_without_clamp():
    p = u17()
    assert ProxPARQ(10, 20).apply_(p, None, Q4, step_count=9) == 1.0
    torch.testing.assert_close(p, u17(), rtol=0, atol=0)  # ±2 unclamped


def test_parq_at_start_identity_inside_clamped_outside():
    p = u17()
    r = ProxPARQ(10, 20).apply_(p, None, Q4, step_count=10)
    assert r == 1.0
    torch.testing.assert_close(p, u17().clamp(-1.5, 1.5), rtol=0, atol=0)


def test_parq_half_slope_closed_form():
    # steepness tiny -> r = 1 - f; choose f = 1/2 -> r = 1/2 (up to 1e-9)
    prox = ProxPARQ(0, 100, steepness=1e-6)
    p = u17()
    r = prox.apply_(p, None, Q4, step_count=50)
    assert r == pytest.approx(0.5, abs=1e-9)
    u = u17()
    expect = []
    for x in u.tolist():
        i = sum(q < x for q in Q4.tolist())
        lo, hi = Q4[max(i - 1, 0)].item(), Q4[min(i, 3)].item()
        c = (lo + hi) / 2
        expect.append(min(max(c + (x - c) / r, lo), hi))
    torch.testing.assert_close(p, torch.tensor(expect, dtype=torch.float64), rtol=0, atol=1e-15)
    # hand values: centre of (-0.5, 0.5) is 0 -> fixed; u = 0.25 -> 0.5; u = 1.0 = centre of
    # (0.5, 1.5) -> fixed; u = 0.75 -> 1.0 - 0.5 = 0.5
    idx = {x: k for k, x in enumerate(u.tolist())}
    assert p[idx[0.0]] == 0.0 and p[idx[1.0]] == 1.0
    assert p[idx[0.25]].item() == pytest.approx(0.5) and p[idx[0.75]].item() == pytest.approx(0.5)


def test_parq_after_end_is_nearest_ties_low():
    p = u17()
    assert ProxPARQ(0, 10).apply_(p, None, Q4, step_count=10) == 0.0
    expect = []
    for x in u17().tolist():
        d = [abs(x - q) for q in Q4.tolist()]
        expect.append(Q4[d.index(min(d))].item())  # index() picks the first = lower level on ties
    torch.testing.assert_close(p, torch.tensor(expect, dtype=torch.float64), rtol=0, atol=0)
    assert nearest(Q4, torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64)).tolist() == [
        -0.5,
        0.5,
        -1.5,
    ]


def test_parq_uses_q_after_end_when_given():
    p = u17()
    q = torch.full_like(p, 0.5)
    ProxPARQ(0, 10).apply_(p, q, Q4, step_count=11)
    assert torch.equal(p, q)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 99), st.integers(0, 2**31 - 1))
def test_parq_invariants(t, seed):
    g = torch.Generator().manual_seed(seed)
    Q = torch.sort(torch.randn(5, generator=g, dtype=torch.float64)).values
    u = torch.sort(3 * torch.randn(200, generator=g, dtype=torch.float64)).values
    prox = ProxPARQ(0, 100, steepness=10)
    w = u.clone()
    r = prox.apply_(w, None, Q, step_count=t)
    assert r == max(torch.finfo(torch.float64).tiny, normalized_mirror_sigmoid(t, 0, 100, 10, 0.5))
    assert torch.all(w[1:] >= w[:-1])  # monotone
    assert torch.all((w >= Q[0]) & (w <= Q[-1]))
    lev = Q.clone()
    prox.apply_(lev, None, Q, step_count=t)
    torch.testing.assert_close(lev, Q, rtol=0, atol=1e-12)  # levels are fixed points


def test_parq_per_row_equals_per_tensor_loop():
    g = torch.Generator().manual_seed(3)
    u = torch.randn(6, 40, generator=g)
    Q = torch.sort(torch.randn(6, 4, generator=g), dim=1).values
    prox = ProxPARQ(0, 50)
    for t in (0, 10, 30, 49, 50):
        w = u.clone()
        prox.apply_(w, None, Q, step_count=t, dim=-1)
        for i in range(6):
            wi = u[i].clone()
            prox.apply_(wi, None, Q[i], step_count=t)
            torch.testing.assert_close(w[i], wi, rtol=0, atol=0)


# ---- other maps ---------------------------------------------------------------------------------
def test_hard_quant_is_bruteforce_argmin():
    g = torch.Generator().manual_seed(1)
    Q = torch.sort(torch.randn(7, generator=g, dtype=torch.float64)).values
    u = torch.randn(500, generator=g, dtype=torch.float64)
    w = u.clone()
    assert ProxHardQuant().apply_(w, None, Q, step_count=0) is None
    brute = Q[(u[:, None] - Q[None]).abs().argmin(1)]
    torch.testing.assert_close(w, brute, rtol=0, atol=0)
    q = torch.zeros_like(u)
    ProxHardQuant().apply_(w, q, Q, step_count=0)
    assert torch.equal(w, q)


def test_binary_relax_formula():
    prox = ProxBinaryRelax(10, 20)
    u = u17()
    w = u.clone()
    prox.apply_(w, None, Q4, step_count=5)
    assert torch.equal(w, u)
    w = u.clone()
    prox.apply_(w, None, Q4, step_count=13)
    theta = 0.3
    torch.testing.assert_close(w, (1 - theta) * u + theta * nearest(Q4, u), rtol=0, atol=1e-15)
    w = u.clone()
    prox.apply_(w, None, Q4, step_count=20)
    assert torch.equal(w, nearest(Q4, u))


def test_soft_quant_bounds_monotone_hard_after_end():
    prox = ProxSoftQuant(0, 100)
    u = torch.linspace(-2, 2, 301, dtype=torch.float64)
    for t in (0, 30, 90):
        w = u.clone()
        prox.apply_(w, None, Q4, step_count=t)
        assert torch.all(w[1:] >= w[:-1] - 1e-12)
        assert torch.all((w >= Q4[0] - 1e-12) & (w <= Q4[-1] + 1e-12))
    w = u.clone()
    prox.apply_(w, None, Q4, step_count=100)
    assert torch.equal(w, nearest(Q4, u))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: ProxPARQ(10, 5), "anneal_start must be < anneal_end"),
        (lambda: ProxPARQ(5, 5), "anneal_start must be < anneal_end"),
        (lambda: ProxPARQ(0, 5, steepness=0), "steepness must be > 0"),
        (lambda: ProxPARQ(0, 5, anneal_center=1.5), "anneal_center"),
        (lambda: ProxBinaryRelax(7, 3), "anneal_end"),
        (lambda: ProxSoftQuant(0, 5, t_start=5, t_end=1), "t_start"),
    ],
)
def test_bad_prox_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_empty_level_set_rejected():
    with pytest.raises(ValueError, match="empty level set"):
        ProxPARQ(0, 10).apply_(u17(), None, torch.empty(0, dtype=torch.float64), step_count=3)
    with pytest.raises(ValueError, match="empty level set"):
        ProxHardQuant().apply_(u17(), None, torch.empty(0, dtype=torch.float64), step_count=3)


def test_negative_anneal_start_accepted_and_from_epochs():
    assert ProxPARQ(-1, 0).anneal_end == 0
    p = ProxPARQ.from_epochs(1, 3, steps_per_epoch=10, steepness=5)
    assert (p.anneal_start, p.anneal_end, p.steepness) == (10, 30, 5)
