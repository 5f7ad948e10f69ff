import itertools
import math
from fractions import Fraction as F

import pytest
import torch
from curmgae import SelfPacedEdgeScheduler, residuals, solve_selection, solve_selection_adam
from hypothesis import example, given, settings
from hypothesis import strategies as st

GRID_N = 10_000  # brute-force resolution 1e-4


def _exact_objective(S, b, lam, gamma, s_prev, penalty):
    """Eq. 4's per-edge S-objective in exact rational arithmetic (``b`` = beta * R)."""
    f = lam * (1 - S) if penalty == "l1" else lam * (1 - S) ** 2
    return b * S + f + gamma / 2 * (S - s_prev) ** 2


def _grid_argmin(b, lam, gamma, s_prev, penalty):
    """Exact minimum of the objective over S = i / GRID_N (it is a quadratic in S: integer arithmetic)."""
    f0, fh, f1 = (_exact_objective(F(k, 2), b, lam, gamma, s_prev, penalty) for k in (0, 1, 2))
    a2 = 2 * (f1 - 2 * fh + f0)  # f(S) = a2 S^2 + a1 S + f0
    a1 = f1 - f0 - a2
    scale = a2.denominator * a1.denominator
    A, B = int(a2 * scale), int(a1 * scale * GRID_N)  # GRID_N^2 * scale * (f(i/N) - f0)
    best = min(range(GRID_N + 1), key=lambda i: A * i * i + B * i)
    return F(best, GRID_N), a2


@settings(max_examples=60)
@given(
    R=st.floats(0, 2),
    lam=st.floats(0, 2),
    beta=st.floats(0.1, 2),
    gamma=st.floats(0, 5),
    s_prev=st.floats(0, 1),
    penalty=st.sampled_from(["l1", "squared"]),
)
@example(R=0.0, lam=5e-324, beta=0.1, gamma=5e-324, s_prev=0.5, penalty="squared")
@example(R=5e-324, lam=5e-324, beta=0.1, gamma=5e-324, s_prev=0.0, penalty="l1")
@example(R=1e-300, lam=1e-300, beta=2.0, gamma=3e-310, s_prev=0.25, penalty="l1")
@example(R=0.5, lam=1.0, beta=1.0, gamma=1e-320, s_prev=0.5, penalty="l1")
def test_closed_form_matches_brute_force(R, lam, beta, gamma, s_prev, penalty):
    """Eq. 4 per-edge problem: the closed form attains the exact grid minimum (resolution 1e-4) and,
    where the objective is strictly convex, sits within one grid step of the grid minimiser. The
    brute force is exact (rational arithmetic), so it also holds for tiny and subnormal values, where
    float products round to zero (lam = gamma = 5e-324 once failed here)."""
    Rt = torch.tensor([R], dtype=torch.float64)
    S = float(
        solve_selection(Rt, lam, beta, gamma, torch.tensor([s_prev], dtype=torch.float64), penalty)
    )
    assert 0.0 <= S <= 1.0
    b, lam_q, gamma_q, sp = F(beta) * F(R), F(lam), F(gamma), F(s_prev)
    S_grid, curvature = _grid_argmin(b, lam_q, gamma_q, sp, penalty)
    f_star = _exact_objective(F(S), b, lam_q, gamma_q, sp, penalty)
    f_grid = _exact_objective(S_grid, b, lam_q, gamma_q, sp, penalty)
    size = max(b, lam_q, gamma_q, F(1, 10**300) * F(1, 10**300))  # the objective's scale
    assert f_star <= f_grid + size * F(1, 10**12)
    if curvature > 0:  # strictly convex: unique minimiser
        assert abs(S - float(S_grid)) <= 1e-4 + 1e-9


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
def test_other_paces_follow_their_schedules(pace):
    """lambda per S-update equals the documented rule of each pace (RCL's schedules, the quantile ramp),
    never decreases, and under ``quantile`` the curriculum size follows the ramp of the masked fraction."""
    M, T = 1000, 20
    R = torch.rand(M, generator=torch.Generator().manual_seed(0))
    s = SelfPacedEdgeScheduler(
        M, lambda_pace=pace, total_epochs=T, base_lambda=2.0, start_lambda=1e-3
    )
    r = s.ramp_epochs
    assert r == math.floor(2 / 3 * T)
    for e in range(1, T + 1):
        s.step(R, e)
        lam = s.trace[-1]["lambda"]
        if pace == "rcl_inverse":
            want = 2.0 / (r + 1 - e) if e < r else 2.0
        elif pace == "rcl_inverse_full":
            want = 2.0 / (T + 1 - e)
        elif pace == "linear":
            want = e / T * 2.0 + 1e-3
        else:
            rho = 0.1 + (0.7 - 0.1) * min(e / r, 1.0)
            want = float(torch.quantile(R, rho))
            k = s.trace[-1]["K_t"]
            assert abs(k - min(rho * M, s.cap)) <= 2, (e, k, rho)
        assert lam == pytest.approx(want, rel=1e-12), (pace, e)
    lams = [t["lambda"] for t in s.trace]
    assert all(b >= a for a, b in itertools.pairwise(lams))


def test_tiny_lambda_and_gamma_scale_free():
    """The S-step is invariant to scaling lambda, beta and gamma together, down to subnormal values."""
    R = torch.rand(200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    prev = torch.rand(200, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for penalty in ("l1", "squared"):
        ref = solve_selection(R, 0.5, 1.0, 0.75, prev, penalty)
        assert ((ref > 0) & (ref < 1)).any()  # interior values, not only the clipped ends
        for c in (2.0**-1000, 2.0**-1070):  # lam, beta, gamma stay exact; 2**-1070 is subnormal
            got = solve_selection(R, 0.5 * c, 1.0 * c, 0.75 * c, prev, penalty)
            assert torch.allclose(got, ref, rtol=0, atol=1e-12), (penalty, c)


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
