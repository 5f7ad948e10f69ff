import itertools
import math

import pytest
import torch
from curmgae import SelfPacedEdgeScheduler, residuals, solve_selection, solve_selection_adam
from curmgae.scheduler import objective
from hypothesis import given, settings
from hypothesis import strategies as st

GRID = torch.linspace(0, 1, 10001, dtype=torch.float64)


@settings(max_examples=60, deadline=None)
@given(
    R=st.floats(0, 2),
    lam=st.floats(0, 2),
    beta=st.floats(0.1, 2),
    gamma=st.floats(0, 5),
    s_prev=st.floats(0, 1),
    penalty=st.sampled_from(["l1", "squared"]),
)
def test_closed_form_matches_brute_force(R, lam, beta, gamma, s_prev, penalty):
    """Eq. 4 per-edge problem: the closed form attains the grid minimum (resolution 1e-4)."""
    Rt = torch.tensor([R], dtype=torch.float64)
    S = solve_selection(Rt, lam, beta, gamma, torch.tensor([s_prev], dtype=torch.float64), penalty)
    assert 0.0 <= float(S) <= 1.0
    vals = objective(GRID, R, lam, beta, gamma, s_prev, penalty)
    f_star = float(objective(S, R, lam, beta, gamma, s_prev, penalty))
    assert f_star <= float(vals.min()) + 1e-6
    if gamma > 0 or (penalty == "squared" and lam > 0):  # strictly convex: unique minimiser
        assert abs(float(S) - float(GRID[vals.argmin()])) < 1e-3 + 1e-3 * (gamma == 0)


def test_threshold_rule_gamma0():
    R = torch.tensor([0.1, 0.3, 0.5, 0.7])
    for penalty in ("l1", "squared"):
        S = solve_selection(R, 0.4, penalty=penalty)
        assert ((S >= 0.5) == (R < 0.4)).all()
    # documented tie rule: beta*R == lambda is not selected under l1
    assert float(solve_selection(torch.tensor([0.4]), 0.4)) == 0.0


def test_lambda_large_selects_all_small_selects_none():
    R = torch.rand(50)
    assert (solve_selection(R, 1e6) == 1).all()
    assert (solve_selection(R, 0.0) == 0).all()
    sched = SelfPacedEdgeScheduler(50, mask_ratio=1.0, lambda_init=1e6, mu=0.0, min_mask_ratio=0.0)
    assert sched.step(R).all()
    sched = SelfPacedEdgeScheduler(50, lambda_init=-1.0, mu=0.0, min_mask_ratio=0.0)
    assert not sched.step(R).any()


def test_adam_solver_agrees_with_closed_form_away_from_threshold():
    g = torch.Generator().manual_seed(0)
    R = torch.rand(500, generator=g) * 2
    lam = 1.0
    far = (R - lam).abs() > 0.2
    a = solve_selection_adam(R, lam, penalty="l1") >= 0.5
    c = solve_selection(R, lam, penalty="l1") >= 0.5
    assert (a[far] == c[far]).all()


def test_residuals_constant_logit():
    g = torch.sigmoid(torch.zeros(7))
    assert torch.allclose(residuals(g, "abs"), torch.full((7,), 0.5))
    assert torch.allclose(residuals(g, "squared"), torch.full((7,), 0.25))
    with pytest.raises(ValueError, match="residual="):
        residuals(g, "l3")


@pytest.mark.parametrize("split", [0.0, 0.5, 1.0])
def test_split_parts_and_counts(split):
    M = 200
    R = torch.linspace(0, 1, M)[torch.randperm(M, generator=torch.Generator().manual_seed(1))]
    s = SelfPacedEdgeScheduler(M, split_ratio=split, mask_ratio=0.6, min_mask_ratio=0.05)
    for epoch in range(1, 30):
        mask = s.step(R * (1 - epoch / 60), epoch)
        K = s.trace[-1]["K_t"]
        assert math.ceil(0.05 * M) <= int(mask.sum()) <= math.floor(0.6 * M)
        assert int(mask.sum()) == max(K, math.ceil(0.05 * M))
        n_diff = int(s.difficulty_mask.sum())
        assert n_diff == math.floor(split * K)
        if n_diff:  # the difficulty part is exactly the lowest-residual edges (gamma = 0)
            lowest = torch.argsort(R)[:n_diff]
            assert s.difficulty_mask[lowest].all()
        if split == 1.0:
            assert (mask == s.difficulty_mask).all() or int(mask.sum()) > K  # only the guard adds


def test_lambda_monotone_and_frozen_when_capped():
    M = 100
    R = torch.rand(M, generator=torch.Generator().manual_seed(3))
    s = SelfPacedEdgeScheduler(M, mask_ratio=0.5, total_epochs=30)
    lams = []
    for epoch in range(1, 31):
        s.step(R, epoch)
        lams.append(s.lam)
    assert all(b >= a for a, b in itertools.pairwise(lams))
    capped = [e for e in s.trace if e["capped"]]
    assert capped, "the cap must be reached within the ramp"
    i = capped[0]["t"]
    assert lams[i] == lams[-1]  # frozen after the cap


def test_auto_calibration_selects_init_ratio():
    R = torch.rand(1000, generator=torch.Generator().manual_seed(0))
    s = SelfPacedEdgeScheduler(1000, init_mask_ratio=0.1, split_ratio=1.0, min_mask_ratio=0.0)
    s.step(R, 1)
    assert abs(s.trace[0]["K_t"] - 100) <= 2


@pytest.mark.parametrize("pace", ["rcl_inverse", "rcl_inverse_full", "linear", "quantile"])
def test_other_paces_run(pace):
    R = torch.rand(100)
    s = SelfPacedEdgeScheduler(100, lambda_pace=pace, total_epochs=20)
    for e in range(1, 21):
        s.step(R, e)
    assert len(s.trace) == 20


def test_state_dict_round_trip_resumes_identically():
    R = torch.rand(80, generator=torch.Generator().manual_seed(0))
    a = SelfPacedEdgeScheduler(80, seed=5)
    for e in range(1, 4):
        a.step(R, e)
    b = SelfPacedEdgeScheduler(80, seed=99)
    b.load_state_dict(a.state_dict())
    for e in range(4, 8):
        assert torch.equal(a.step(R, e), b.step(R, e))


def test_bad_input():
    with pytest.raises(ValueError, match="at least one edge"):
        SelfPacedEdgeScheduler(0)
    with pytest.raises(ValueError, match="mask_ratio"):
        SelfPacedEdgeScheduler(10, mask_ratio=1.5)
    with pytest.raises(ValueError, match="split_ratio"):
        SelfPacedEdgeScheduler(10, split_ratio=-0.1)
    with pytest.raises(ValueError, match="penalty"):
        solve_selection(torch.rand(3), 1.0, penalty="l2")
    with pytest.raises(ValueError, match="shape"):
        SelfPacedEdgeScheduler(10).step(torch.rand(11))
