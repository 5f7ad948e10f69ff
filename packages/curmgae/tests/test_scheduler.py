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


# ------------------------------------------------------------------------ quantile pace (0.3.0)
def test_pacing_functions_closed_form():
    """The three pacing functions at hand-computable points, and their end points."""
    from curmgae.scheduler import pacing_fraction

    assert pacing_fraction(0.5, 0.1, 0.7, "linear") == pytest.approx(0.4)
    assert pacing_fraction(0.25, 0.1, 0.7, "root") == pytest.approx(0.1 + 0.6 * 0.5)
    assert pacing_fraction(0.5, 0.1, 0.7, "geometric") == pytest.approx(0.1 * 7**0.5)
    for pacing in ("linear", "root", "geometric"):
        assert pacing_fraction(0.0, 0.1, 0.7, pacing) == pytest.approx(0.1)
        assert pacing_fraction(1.0, 0.1, 0.7, pacing) == pytest.approx(0.7)
        assert pacing_fraction(3.0, 0.1, 0.7, pacing) == pytest.approx(
            0.7
        )  # clipped after the ramp
    # root is ahead of linear, geometric behind it, strictly inside the ramp
    for p in (0.2, 0.5, 0.8):
        lin = pacing_fraction(p, 0.1, 0.7, "linear")
        assert (
            pacing_fraction(p, 0.1, 0.7, "geometric") < lin < pacing_fraction(p, 0.1, 0.7, "root")
        )


@pytest.mark.parametrize("pacing", ["linear", "root", "geometric"])
@pytest.mark.parametrize("split", [0.5, 1.0])
def test_quantile_pace_masked_fraction_follows_pacing_function(pacing, split):
    """On a fixed residual distribution the masked fraction at every S-step equals the pacing
    function's target rho_t (within 2 edges), until the cap floor(mask_ratio*M) holds."""
    from curmgae.scheduler import pacing_fraction

    M, T = 2000, 30
    R = torch.rand(M, generator=torch.Generator().manual_seed(3))
    s = SelfPacedEdgeScheduler(
        M, lambda_pace="quantile", pacing=pacing, split_ratio=split, total_epochs=T
    )
    r = s.ramp_epochs
    for e in range(1, T + 1):
        mask = s.step(R, e)
        rho = pacing_fraction(e / r, 0.1, 0.7, pacing)
        entry = s.trace[-1]
        assert entry["rho"] == pytest.approx(rho)
        assert abs(int(mask.sum()) - min(rho * M, s.cap)) <= 2, (e, int(mask.sum()), rho)
        assert entry["masked_fraction"] == int(mask.sum()) / M
        if split == 1.0:  # the whole masked set is the lowest-residual rho_t fraction
            assert float(R[mask].max()) <= float(R[~mask].min())


def test_quantile_pace_keeps_moving_when_first_residuals_are_nearly_constant():
    """The bug of 0.2.0: an untrained decoder gives residuals ~0.5 with a tiny spread, the additive
    ramp (calibrated once on them) spans less than that 0.001 spread, and once residuals fall K_t
    hits the cap at the second S-step. The quantile pace recalibrates on the current residuals: K_t
    follows rho_t."""
    M, T = 2000, 30
    g = torch.Generator().manual_seed(0)
    R0 = 0.5 + 1e-3 * torch.rand(M, generator=g)  # untrained: all ~ 0.5
    later = [0.1 + 0.05 * torch.rand(M, generator=g) * (1 + t / T) for t in range(T)]
    additive = SelfPacedEdgeScheduler(M, lambda_pace="additive", total_epochs=T)
    quantile = SelfPacedEdgeScheduler(M, lambda_pace="quantile", total_epochs=T)
    for s in (additive, quantile):
        s.step(R0, 1)
        for e in range(2, T + 1):
            s.step(later[e - 2], e)
    assert additive.trace[1]["capped"]  # 0.2.0's behaviour, kept under lambda_pace="additive"
    ks = [e["K_t"] for e in quantile.trace]
    assert not quantile.trace[1]["capped"]
    assert ks[1] < 0.25 * M
    r = quantile.ramp_epochs
    assert all(b > a for a, b in itertools.pairwise(ks[: r - 1]))  # still growing in the ramp
    assert quantile.trace[-1]["capped"] or ks[-1] >= quantile.cap - 2
    # the trace records the residual quantiles lambda was set from
    e = quantile.trace[5]
    assert e["residual_q10"] <= e["residual_q50"] <= e["residual_q90"]
    assert e["residual_q10"] <= e["lambda"] <= e["residual_q90"]


def test_geometric_pacing_needs_a_positive_start():
    with pytest.raises(ValueError, match="geometric"):
        SelfPacedEdgeScheduler(10, lambda_pace="quantile", pacing="geometric", init_mask_ratio=0.0)
    with pytest.raises(ValueError, match="pacing"):
        SelfPacedEdgeScheduler(10, pacing="cosine")


def test_unsized_scheduler_and_reset():
    s = SelfPacedEdgeScheduler(lambda_pace="quantile")
    with pytest.raises(RuntimeError, match="reset"):
        s.step(torch.rand(5))
    s.reset(40, total_epochs=10, seed=1)
    assert s.M == 40 and s.cap == 28 and s.S.shape == (40,) and s.T == 10
    m1 = s.step(torch.linspace(0, 1, 40), 1)
    s.reset(40, seed=1)  # a new curriculum: empty trace, same draws
    assert s.trace == [] and torch.equal(s.step(torch.linspace(0, 1, 40), 1), m1)
    fresh = SelfPacedEdgeScheduler()  # load_state_dict sizes a scheduler built without num_edges
    fresh.load_state_dict(s.state_dict())
    assert fresh.M == 40 and torch.equal(fresh.S, s.S)
    with pytest.raises(ValueError, match="at least one edge"):
        s.reset(0)


def test_random_tie_break_samples_the_curriculum_set_uniformly():
    """With gamma = 0 every edge of C_t = {R < lambda} has S = 1: tie_break='random' takes the
    difficulty part uniformly from C_t (never outside it), 'residual' takes its easiest edges."""
    M = 1000
    R = torch.rand(M, generator=torch.Generator().manual_seed(0))
    kw = dict(lambda_pace="quantile", init_mask_ratio=0.4, split_ratio=0.5, min_mask_ratio=0.0)
    res = SelfPacedEdgeScheduler(M, tie_break="residual", **kw)
    rnd = SelfPacedEdgeScheduler(M, tie_break="random", **kw)
    res.step(R, 0)
    rnd.step(R, 0)
    lam = rnd.trace[0]["lambda"]
    in_ct = R < lam
    assert int(in_ct.sum()) == rnd.trace[0]["K_t"]
    chosen_rnd, chosen_res = rnd.difficulty_mask, res.difficulty_mask
    assert int(chosen_rnd.sum()) == int(chosen_res.sum()) == rnd.trace[0]["K_t"] // 2
    assert bool(in_ct[chosen_rnd].all())
    assert float(R[chosen_res].max()) < float(R[chosen_rnd].max())  # residual: the easiest half
    # uniform over C_t: the chosen edges' mean residual is close to C_t's mean, not its lower half
    assert abs(float(R[chosen_rnd].mean()) - float(R[in_ct].mean())) < 0.03


def test_pace_end_one_admits_every_edge():
    M, T = 500, 20
    R = torch.rand(M, generator=torch.Generator().manual_seed(1))
    s = SelfPacedEdgeScheduler(M, lambda_pace="quantile", pace_end=1.0, total_epochs=T)
    for e in range(1, T + 1):
        s.step(R, e)
    assert s.trace[-1]["rho"] == 1.0 and s.trace[-1]["lambda"] == pytest.approx(float(R.max()))
    with pytest.raises(ValueError, match="pace_end"):
        SelfPacedEdgeScheduler(M, pace_end=0.05)  # below init_mask_ratio
