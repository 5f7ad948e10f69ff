import itertools
import math
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tar_gnn import (
    StepSizeError,
    connected_components,
    entropy_objective,
    gibbs_limit,
    gw_flow,
    gw_step,
    step_bound,
)


def path(n):
    return torch.stack([torch.arange(n - 1), torch.arange(1, n)])


@st.composite
def graphs(draw):
    n = draw(st.integers(2, 12))
    m = draw(st.integers(0, 3 * n))
    pairs = [(draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))) for _ in range(m)]
    ei = torch.tensor(pairs, dtype=torch.long).t() if pairs else torch.zeros(2, 0, dtype=torch.long)
    loss = torch.tensor(
        draw(st.lists(st.floats(0, 50, allow_nan=False), min_size=n, max_size=n)),
        dtype=torch.float64,
    )
    raw = torch.tensor(
        draw(st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n)), dtype=torch.float64
    )
    q = raw / raw.sum()
    return q, loss, ei


def test_two_nodes_one_step_closed_form():
    ei = torch.tensor([[0], [1]])
    loss = torch.tensor([0.9, 0.2], dtype=torch.float64)
    q = torch.tensor([0.5, 0.5], dtype=torch.float64)
    tau = 0.5  # bound is 1 / (l1 - l2) = 1.43
    new, tau_eff, _ = gw_step(q, loss, ei, beta=0.0, step_size=tau)
    assert tau_eff == tau
    assert new[0].item() == pytest.approx(0.5 + tau * 0.7 * 0.5, abs=1e-15)
    assert new[1].item() == pytest.approx(0.5 - tau * 0.7 * 0.5, abs=1e-15)


def test_gibbs_limit_on_a_path():
    torch.manual_seed(0)
    loss = torch.rand(10, dtype=torch.float64)
    res = gw_flow(None, loss, path(10), beta=1.0, steps=2000)
    target = torch.softmax(loss, 0)
    assert (res.q - target).abs().sum().item() < 1e-6


def test_error_to_gibbs_decays_geometrically():
    torch.manual_seed(1)
    loss = torch.rand(10, dtype=torch.float64)
    target = gibbs_limit(loss, 1.0, path(10))
    errs = [
        math.log((gw_flow(None, loss, path(10), beta=1.0, steps=t).q - target).abs().sum().item())
        for t in (100, 200, 300, 400)
    ]
    steps = [b - a for a, b in itertools.pairwise(errs)]
    assert all(s < 0 for s in steps)
    assert max(steps) / min(steps) < 1.5  # close to linear in log


def test_two_components_keep_their_mass_and_go_gibbs_within():
    ei = torch.tensor([[0, 1, 3, 4], [1, 2, 4, 5]])
    loss = torch.tensor([0.1, 0.5, 0.9, 0.3, 0.2, 0.8], dtype=torch.float64)
    res = gw_flow(None, loss, ei, beta=1.0, steps=3000)
    assert res.q[:3].sum().item() == pytest.approx(0.5, abs=1e-12)
    assert res.q[3:].sum().item() == pytest.approx(0.5, abs=1e-12)
    assert (res.q - gibbs_limit(loss, 1.0, ei)).abs().max().item() < 1e-8


def test_ascent_for_small_steps():
    g = torch.Generator().manual_seed(3)
    for _ in range(5):
        n = 15
        ei = torch.randint(0, n, (2, 40), generator=g)
        loss = torch.rand(n, generator=g, dtype=torch.float64) * 3
        q = torch.full((n,), 1.0 / n, dtype=torch.float64)
        f = entropy_objective(q, loss, 0.3)
        for _ in range(30):
            q, _, _ = gw_step(q, loss, ei, 0.3, 0.01)
            f_new = entropy_objective(q, loss, 0.3)
            assert f_new >= f - 1e-12
            f = f_new


def test_path_graph_weight_moves_toward_the_high_loss_end():
    loss = torch.linspace(0.0, 2.0, 8, dtype=torch.float64)
    q = gw_flow(None, loss, path(8), beta=0.1, steps=30).q
    assert q[-1] > 1 / 8 > q[0]
    assert bool((q[1:] > q[:-1]).all())  # increasing along the path toward the high-loss end
    # reversing the losses reverses the weights (equivariance on the mirrored path)
    q_rev = gw_flow(None, loss.flip(0), path(8), beta=0.1, steps=30).q
    assert torch.allclose(q_rev, q.flip(0), atol=1e-14)


@given(graphs(), st.floats(0.0, 1.0), st.floats(0.0, 2.0), st.sampled_from(["upwind"]))
def test_mass_and_positivity_for_any_step_within_the_bound(g, frac, beta, scheme):
    q, loss, ei = g
    bound = step_bound(q, loss, ei, beta, scheme=scheme)
    tau = frac * (bound if math.isfinite(bound) else 10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a negative entry would warn
        new, tau_eff, clipped = gw_step(q, loss, ei, beta, tau, cfl=None)
    assert tau_eff == tau
    assert clipped < 1e-15
    assert abs(new.sum().item() - 1.0) < 1e-10
    assert bool((new >= 0).all())
    if frac < 0.999:  # strictly below the bound (at the bound q_i may reach exactly 0)
        assert bool((new > 0).all())


@given(
    graphs(),
    st.floats(0.0, 10.0),
    st.integers(0, 30),
    st.floats(0.01, 100.0),
    st.sampled_from(["upwind", "arithmetic", "logmean"]),
    st.sampled_from(["cap", "limit"]),
)
def test_flow_invariants(g, beta, steps, tau, scheme, exceed):
    q, loss, ei = g
    res = gw_flow(q, loss, ei, beta, tau, steps, scheme=scheme, on_exceed=exceed)
    assert torch.isfinite(res.q).all()
    assert abs(res.q.sum().item() - 1.0) < 1e-10
    assert bool((res.q >= 0).all())
    if scheme == "upwind":
        assert res.clipped_mass < 1e-12  # positivity holds without the clip (up to rounding)
        if beta > 0:
            assert bool((res.q > 0).all())
    comp = connected_components(ei, q.numel())
    for c in torch.unique(comp):
        sel = comp == c
        assert abs(res.q[sel].sum().item() - q[sel].sum().item()) < 1e-10


def test_isolated_nodes_keep_uniform_weight():
    ei = torch.tensor([[0, 1], [1, 2]])  # nodes 3, 4 isolated
    loss = torch.tensor([0.0, 1.0, 5.0, 2.0, 0.5], dtype=torch.float64)
    q = gw_flow(None, loss, ei, beta=0.1, steps=50).q
    assert abs(q[3].item() - 0.2) < 1e-15 and abs(q[4].item() - 0.2) < 1e-15


def test_permutation_equivariance():
    g = torch.Generator().manual_seed(5)
    n = 12
    ei = torch.randint(0, n, (2, 30), generator=g)
    loss = torch.rand(n, generator=g, dtype=torch.float64)
    perm = torch.randperm(n, generator=g)
    inv = torch.argsort(perm)
    q = gw_flow(None, loss, ei, 0.1, 1.0, 15).q
    qp = gw_flow(None, loss[perm], inv[ei], 0.1, 1.0, 15).q
    assert torch.allclose(qp, q[perm], atol=1e-14)


@pytest.mark.parametrize("kw", [{"steps": 0}, {"step_size": 0.0}])
def test_degenerate_flow_returns_exactly_uniform(kw):
    loss = torch.rand(7, dtype=torch.float64)
    res = gw_flow(None, loss, path(7), **kw)
    assert res.uniform
    assert torch.equal(res.q, torch.full((7,), 1 / 7, dtype=torch.float64))
    res = gw_flow(None, loss, torch.zeros(2, 0, dtype=torch.long))
    assert torch.equal(res.q, torch.full((7,), 1 / 7, dtype=torch.float64))


def test_beta_zero_flows_up_the_loss():
    loss = torch.tensor([0.0, 1.0, 0.0, 3.0], dtype=torch.float64)
    q = gw_flow(None, loss, path(4), beta=0.0, steps=200).q
    # without entropy all mass ends on the local loss maxima (nodes 1 and 3)
    assert q[0] < 1e-6 and q[2] < 1e-6
    assert abs((q[1] + q[3]).item() - 1.0) < 1e-6 and q[3] > 0.25 and q[1] > 0.25


def test_no_grad_through_the_flow():
    loss = torch.rand(5, requires_grad=True)
    q = gw_flow(None, loss, path(5)).q
    assert not q.requires_grad


def test_step_size_beyond_the_bound_raises():
    loss = torch.tensor([0.0, 5.0, 0.0], dtype=torch.float64)
    with pytest.raises(StepSizeError, match="exceeds the step-size bound"):
        gw_flow(None, loss, path(3), beta=0.1, step_size=10.0, steps=1, on_exceed="raise")
    bound = step_bound(torch.full((3,), 1 / 3, dtype=torch.float64), loss, path(3), 0.1)
    ok = gw_flow(None, loss, path(3), beta=0.1, step_size=0.5 * bound, steps=1, on_exceed="raise")
    assert ok.tau_eff == [0.5 * bound]


def test_huge_step_without_cap_warns():
    loss = torch.tensor([0.0, 5.0, 0.0], dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="negative"):
        res = gw_flow(None, loss, path(3), beta=0.0, step_size=100.0, steps=1, cfl=None)
    assert bool((res.q >= 0).all()) and abs(res.q.sum().item() - 1) < 1e-12


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"beta": -1.0}, "beta"),
        ({"step_size": -1.0}, "step_size"),
        ({"steps": -1}, "steps"),
        ({"cfl": 1.5}, "cfl"),
        ({"scheme": "nope"}, "scheme"),
        ({"on_exceed": "nope"}, "on_exceed"),
    ],
)
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        gw_flow(None, torch.rand(4, dtype=torch.float64), path(4), **kw)


def test_bad_shapes():
    with pytest.raises(ValueError, match="training nodes"):
        gw_flow(torch.full((3,), 1 / 3), torch.rand(4), path(4))
    with pytest.raises(ValueError, match="outside"):
        gw_flow(None, torch.rand(4), torch.tensor([[0], [9]]))
    with pytest.raises(ValueError, match="NaN"):
        gw_flow(None, torch.tensor([0.0, float("nan")]), path(2))


def test_positivity_holds_for_weights_below_the_log_floor():
    # a node with q far below EPS = 1e-12 must still be protected by the cap (r_i exact for upwind)
    q = torch.tensor([1e-20, 0.5, 0.5 - 1e-20], dtype=torch.float64)
    loss = torch.tensor([0.0, 40.0, 0.0], dtype=torch.float64)
    res = gw_flow(q, loss, path(3), beta=1e-6, step_size=100.0, steps=30)
    assert bool((res.q > 0).all()) and res.clipped_mass == 0.0


@pytest.mark.parametrize("beta", [0.0, 0.1, 2.0])
def test_default_fast_step_equals_the_reference_step(beta):
    """The default (upwind, CFL cap) inner loop uses one gather and one scatter per step; it must equal
    the edge-by-edge reference step up to the order of floating-point sums, ties included."""
    from tar_gnn.flow import _canonical, _step

    torch.manual_seed(3)
    n = 40
    ei = torch.randint(0, n, (2, 120))
    loss = torch.rand(n, dtype=torch.float64)
    loss[:10] = 0.5  # exact ties in the potential
    res = gw_flow(None, loss, ei, beta=beta, steps=15)
    src, dst, w = _canonical(ei, None)
    q = torch.full((n,), 1.0 / n, dtype=torch.float64)
    taus = []
    for _ in range(15):
        q, tau, _ = _step(q, loss, src, dst, w, beta, 1.0, "upwind", 0.9, "cap")
        taus.append(float(tau))
    assert torch.allclose(res.q, q, rtol=1e-10, atol=1e-15)
    assert res.tau_eff == pytest.approx(taus, rel=1e-10)


def test_no_host_sync_inside_the_inner_loop(monkeypatch):
    """Reading a tensor back to Python (float/int/bool/item/tolist) happens a fixed number of times per
    flow, not once per inner step."""
    counts = {"n": 0}
    for name in ("__float__", "__int__", "__bool__", "item", "tolist"):
        original = getattr(torch.Tensor, name)

        def wrapped(self, *a, _orig=original, **k):
            counts["n"] += 1
            return _orig(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, wrapped)
    loss = torch.rand(30, dtype=torch.float64)
    ei = path(30)
    syncs = []
    for steps in (1, 20):
        counts["n"] = 0
        gw_flow(None, loss, ei, beta=0.1, steps=steps)
        syncs.append(counts["n"])
    assert syncs[0] == syncs[1]
