"""Closed-form, reference-equivalence and API tests of :class:`sassha_optim.Sassha` (update of paper Sec. 4)."""

import copy
import io
import math
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sassha_optim import NonFiniteError, Sassha, hutchinson_diagonal, rademacher_like

A = (0.5, 1.0, 2.0, 4.0)
C = (0.1, 0.2, 0.3, 0.4)
W0 = (1.0, -2.0, 0.5, 1.5)


def quartic(a, c):
    """Separable f(w) = Σ ½ a w² + ¼ c w⁴ written with powers; returns f, f', f''."""
    a = torch.tensor(a, dtype=torch.float64)
    c = torch.tensor(c, dtype=torch.float64)
    return (
        lambda w: (0.5 * a * w**2 + 0.25 * c * w**4).sum(),
        lambda w: a * w + c * w**3,
        lambda w: a + 3 * c * w**2,
    )


def make_closure(opt, f, w, counter=None):
    def closure():
        if counter is not None:
            counter.append(1)
        loss = f(w)
        loss.backward(create_graph=opt.create_graph)
        return loss

    return closure


def param(values=W0):
    return torch.nn.Parameter(torch.tensor(values, dtype=torch.float64))


# ---------------------------------------------------------------------------------- closed form
@pytest.mark.parametrize("c", [(0.0, 0.0, 0.0, 0.0), C])
@pytest.mark.parametrize("hvp_point", ["perturbed", "reference"])
@pytest.mark.parametrize("bias_correction", ["refresh", "step", "none"])
def test_first_step_closed_form(c, hvp_point, bias_correction):
    f, df, d2f = quartic(A, c)
    w = param()
    w0 = w.detach().clone()
    lr, rho, lam, eps, b1, b2 = 0.1, 0.2, 0.01, 1e-4, 0.9, 0.999
    opt = Sassha(
        [w],
        lr=lr,
        rho=rho,
        weight_decay=lam,
        eps=eps,
        betas=(b1, b2),
        hvp_point=hvp_point,
        bias_correction=bias_correction,
        keep_hessian=True,
    )
    opt.step(make_closure(opt, f, w))
    g = df(w0)
    w_tilde = w0 + rho * g / (g.norm() + 1e-12)
    g_tilde = df(w_tilde)
    h = d2f(w_tilde if hvp_point == "perturbed" else w0).abs()
    if bias_correction == "none":
        h = (1 - b2) * h
    expected = w0 * (1 - lr * lam) - lr * g_tilde / (h**0.5 + eps)
    torch.testing.assert_close(w.detach(), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        opt.hessian(w), d2f(w_tilde if hvp_point == "perturbed" else w0).abs()
    )


@settings(max_examples=25, deadline=None)
@given(
    a=st.lists(st.floats(0.1, 10.0), min_size=3, max_size=3),
    w0=st.lists(st.floats(-3.0, 3.0).filter(lambda v: abs(v) > 1e-3), min_size=3, max_size=3),
    lr=st.floats(1e-3, 0.5),
    rho=st.floats(0.0, 0.5),
    alpha=st.floats(0.0, 1.0),
)
def test_first_step_property_diagonal_quadratic(a, w0, lr, rho, alpha):
    """Hutchinson is exact on diagonal Hessians: one step is deterministic for any probe."""
    f, df, d2f = quartic(a, (0.0, 0.0, 0.0))
    w = param(w0)
    w_init = w.detach().clone()
    opt = Sassha([w], lr=lr, rho=rho, hessian_power=alpha, eps=1e-8)
    opt.step(make_closure(opt, f, w))
    g = df(w_init)
    w_tilde = w_init + rho * g / (g.norm() + 1e-12) if rho > 0 else w_init
    expected = w_init - lr * df(w_tilde) / (d2f(w_tilde).abs() ** alpha + 1e-8)
    torch.testing.assert_close(w.detach(), expected, rtol=1e-10, atol=1e-12)


def reference_recurrence(w0, a, steps, k, lr, rho, b1, b2, eps, mode, alpha=0.5, warmup=0):
    """Plain-Python Sassha on f = Σ ½ a w² (constant Hessian a), update steps 1-8 of paper Sec. 4
    (refresh on the first ``warmup`` steps and on steps 1, k+1, 2k+1, ...)."""
    w = list(w0)
    m = [0.0] * len(w)
    d = [0.0] * len(w)
    n_ref = t_ref = 0
    bc2_stored = 1.0
    trace = []
    for t in range(1, steps + 1):
        g = [ai * wi for ai, wi in zip(a, w)]
        norm = math.sqrt(sum(gi * gi for gi in g))
        wt = [wi + rho * gi / (norm + 1e-12) for wi, gi in zip(w, g)]
        gt = [ai * wi for ai, wi in zip(a, wt)]
        if t <= warmup or (t - 1) % k == 0:
            d = [b2 * di + (1 - b2) * abs(ai) for di, ai in zip(d, a)]
            n_ref, t_ref = n_ref + 1, t
            bc2_stored = (1 - b2**t_ref) ** alpha
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, gt)]
        bc1 = 1 - b1**t
        bc2 = {"refresh": (1 - b2**n_ref) ** alpha, "step": bc2_stored, "none": 1.0}[mode]
        w = [wi - lr * (mi / bc1) / (di**alpha / bc2 + eps) for wi, mi, di in zip(w, m, d)]
        trace.append((list(w), [di**alpha / bc2 for di in d], n_ref, t_ref))
    return trace


@pytest.mark.parametrize("warmup", [0, None, 5])
@pytest.mark.parametrize("mode", ["refresh", "step", "none"])
def test_multistep_recurrence_lazy(mode, warmup):
    """warmup=0 is the official schedule; None (default) refreshes on each of the first k steps."""
    f, _, _ = quartic(A, (0.0,) * 4)
    w = param()
    k, lr, rho, b1, b2, eps = 3, 0.05, 0.1, 0.9, 0.99, 1e-4
    opt = Sassha(
        [w],
        lr=lr,
        rho=rho,
        betas=(b1, b2),
        eps=eps,
        lazy_hessian=k,
        bias_correction=mode,
        hessian_warmup=warmup,
    )
    n_warm = k if warmup is None else warmup
    trace = reference_recurrence(W0, A, 20, k, lr, rho, b1, b2, eps, mode, warmup=n_warm)
    for t, (w_ref, dhat_ref, n_ref, t_ref) in enumerate(trace, start=1):
        opt.step(make_closure(opt, f, w))
        state = opt.state[w]
        assert state["hessian_refreshes"] == n_ref and state["last_refresh_step"] == t_ref
        torch.testing.assert_close(
            w.detach(), torch.tensor(w_ref, dtype=torch.float64), rtol=1e-12, atol=1e-12
        )
        if mode == "refresh":  # constant curvature: D̂ = |a| at every step (to rounding)
            dhat = state["exp_hessian_diag"] / (1 - b2**n_ref)
            torch.testing.assert_close(
                dhat, torch.tensor(A, dtype=torch.float64), rtol=1e-12, atol=0
            )
        if (
            mode == "step"
        ):  # D̂ underestimated by (1 − β2^{n_ref}) / (1 − β2^{t_ref}) (README: Deviations)
            dhat = state["exp_hessian_diag"] / (1 - b2**t_ref)
            factor = (1 - b2**n_ref) / (1 - b2**t_ref)
            torch.testing.assert_close(dhat, factor * torch.tensor(A, dtype=torch.float64))
        torch.testing.assert_close(
            state["exp_hessian_diag"] ** 0.5 / state.get("bias_correction2", 1.0)
            if mode == "step"
            else (state["exp_hessian_diag"] / ((1 - b2**n_ref) if mode == "refresh" else 1.0))
            ** 0.5,
            torch.tensor(dhat_ref, dtype=torch.float64),
        )
        assert opt.global_step == t
        assert opt.hvp_calls == sum(s <= n_warm or (s - 1) % k == 0 for s in range(1, t + 1))


# ---------------------------------------------------------------------------------- reductions
def test_reduction_rho0_alpha0_is_momentum():
    f, df, _ = quartic(A, C)
    w = param()
    lr, lam, eps, b1 = 0.1, 0.05, 1e-4, 0.9
    opt = Sassha([w], lr=lr, rho=0.0, hessian_power=0.0, weight_decay=lam, eps=eps, lazy_hessian=2)
    ref, m = torch.tensor(W0, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    for t in range(1, 8):
        calls = []
        opt.step(make_closure(opt, f, w, calls))
        assert len(calls) == 1  # ρ = 0: one backward per step
        m = b1 * m + (1 - b1) * df(ref)
        ref = ref * (1 - lr * lam) - lr * (m / (1 - b1**t)) / (1 + eps)
        torch.testing.assert_close(w.detach(), ref, rtol=0, atol=1e-12)


def test_reduction_newton_on_quadratic():
    """ρ = 0, α = 1, β1 = β2 = 0, eps = 0, λ = 0 on ½ a w²: w ← (1 − η) w."""
    f, _, _ = quartic(A, (0.0,) * 4)
    w = param()
    lr = 0.3
    opt = Sassha([w], lr=lr, rho=0.0, hessian_power=1.0, betas=(0.0, 0.0), eps=0.0, lazy_hessian=1)
    ref = torch.tensor(W0, dtype=torch.float64)
    for _ in range(5):
        opt.step(make_closure(opt, f, w))
        ref = (1 - lr) * ref
        torch.testing.assert_close(w.detach(), ref, rtol=1e-14, atol=1e-14)


def neg_log(w):
    """f(w) = −Σ log(−w) on w < 0: f'' = 1/w² = (f')², so Hutchinson's diag H equals g²."""
    return -torch.log(-w).sum()


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_equivalent_to_adamw_when_hessian_is_squared_gradient(weight_decay):
    """ρ = 0, k = 1, α = ½, D = EMA(g²): Sassha is AdamW (torch) and an independent Adam loop."""
    w0 = (-1.0, -2.0, -0.5, -3.0)
    lr, betas, eps = 0.01, (0.9, 0.999), 1e-8
    w = param(w0)
    opt = Sassha(
        [w], lr=lr, betas=betas, eps=eps, rho=0.0, lazy_hessian=1, weight_decay=weight_decay
    )
    w_torch = param(w0)
    adamw = torch.optim.AdamW([w_torch], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    ref = torch.tensor(w0, dtype=torch.float64)
    m = v = torch.zeros(4, dtype=torch.float64)
    for t in range(1, 26):
        opt.step(make_closure(opt, neg_log, w))
        adamw.zero_grad()
        neg_log(w_torch).backward()
        adamw.step()
        g = -1.0 / ref  # independent Adam written from the paper of Kingma & Ba + decoupled wd
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        ref = ref * (1 - lr * weight_decay)
        ref = ref - lr * (m / (1 - betas[0] ** t)) / ((v / (1 - betas[1] ** t)).sqrt() + eps)
        torch.testing.assert_close(w.detach(), ref, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(w.detach(), w_torch.detach(), rtol=1e-12, atol=1e-12)


def test_decoupled_weight_decay_difference():
    f, _, _ = quartic(A, C)
    out = {}
    for lam in (0.0, 0.3):
        w = param()
        opt = Sassha([w], lr=0.1, weight_decay=lam)
        opt.step(make_closure(opt, f, w))
        out[lam] = w.detach()
    expected = -0.1 * 0.3 * torch.tensor(W0, dtype=torch.float64)
    torch.testing.assert_close(out[0.3] - out[0.0], expected, rtol=0, atol=1e-14)


# ---------------------------------------------------------------------------------- Hutchinson
def test_hutchinson_unbiased_on_spd_quadratic():
    gen = torch.Generator().manual_seed(1)
    b = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    a = b @ b.T + 5 * torch.eye(5, dtype=torch.float64)
    w = param([0.3, -0.2, 0.1, 0.5, -0.4])
    n = 1500
    probe_gen = torch.Generator().manual_seed(0)
    estimates = []
    for _ in range(n):
        (g,) = torch.autograd.grad(0.5 * w @ a @ w, w, create_graph=True)
        est, _ = hutchinson_diagonal([g], [w], lambda: [rademacher_like(w, probe_gen)])
        estimates.append(est[0])
    est = torch.stack(estimates)
    off = a - torch.diag(torch.diag(a))
    std = (off**2).sum(1).sqrt() / math.sqrt(n)  # Var = Σ_{j≠i} A_ij² / N
    assert ((est.mean(0) - torch.diag(a)).abs() < 5 * std).all()
    # more samples per estimate shrink the variance
    (g,) = torch.autograd.grad(0.5 * w @ a @ w, w, create_graph=True)
    var1 = est.var(0)
    est8 = [
        hutchinson_diagonal(
            [torch.autograd.grad(0.5 * w @ a @ w, w, create_graph=True)[0]],
            [w],
            lambda: [rademacher_like(w, probe_gen)],
            n_samples=8,
        )[0][0]
        for _ in range(150)
    ]
    assert (torch.stack(est8).var(0) < var1).all()


def test_rademacher_probes():
    gen = torch.Generator().manual_seed(3)
    p = torch.empty(20000, dtype=torch.float32)
    z = rademacher_like(p, gen)
    assert z.dtype == p.dtype and z.shape == p.shape
    assert set(z.unique().tolist()) == {-1.0, 1.0}
    assert abs(z.mean().item()) < 5 / math.sqrt(z.numel())
    z2 = rademacher_like(p, torch.Generator().manual_seed(3))
    assert torch.equal(z, z2)
    assert set(rademacher_like(p.to(torch.bfloat16), gen).unique().tolist()) == {-1.0, 1.0}


# ---------------------------------------------------------------------------------- laziness / API
@pytest.mark.parametrize("warmup", [0, None])
def test_lazy_hessian_schedule_and_flags(warmup):
    f, _, _ = quartic(A, C)
    w = param()
    k, n, steps = 4, 2, 10
    opt = Sassha([w], lazy_hessian=k, n_samples=n, lr=0.01, hessian_warmup=warmup)
    n_warm = k if warmup is None else warmup
    previous = None
    for t in range(1, steps + 1):
        due = t <= n_warm or (t - 1) % k == 0
        assert opt.hessian_due is due
        f(w).backward()
        assert opt.create_graph is False  # not perturbed yet
        opt.perturb_weights()
        assert opt.create_graph is due and opt.is_perturbed
        f(w).backward(create_graph=opt.create_graph)
        opt.step()
        opt.zero_grad()
        d = opt.state[w]["exp_hessian_diag"].clone()
        if not due:
            assert torch.equal(d, previous)
        previous = d
        assert not opt.is_perturbed
    refreshes = math.ceil(steps / k) + (0 if warmup == 0 else k - 1)
    assert opt.hvp_calls == n * refreshes


def test_refresh_without_graph_raises():
    f, _, _ = quartic(A, C)
    w = param()
    w0 = w.detach().clone()
    opt = Sassha([w])
    f(w).backward()
    opt.perturb_weights()
    f(w).backward()  # forgot create_graph
    with pytest.raises(RuntimeError, match="Hessian refresh due at step 1"):
        opt.step()
    assert not opt.is_perturbed
    torch.testing.assert_close(w.detach(), w0, rtol=0, atol=1e-15)


def test_no_graph_left_after_step():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    opt = Sassha(model.parameters(), lazy_hessian=1)

    opt.step(ce_closure(opt, model, x, y))
    assert all(not p.grad.requires_grad for p in model.parameters())


def mlp_problem(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    model.to(dtype)
    gen = torch.Generator().manual_seed(100)
    x = torch.randn(32, 6, generator=gen).to(dtype)
    y = torch.randint(0, 3, (32,), generator=gen)
    return model, x, y


def ce(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def ce_closure(opt, model, x, y):
    return make_closure(opt, lambda _: ce(model, x, y), None)


def run_style(style, hvp_point, steps=7, **kw):
    model, x, y = mlp_problem()
    opt = Sassha(model.parameters(), lr=0.05, lazy_hessian=3, hvp_point=hvp_point, **kw)
    losses = []
    for _ in range(steps):
        if style == "closure":
            losses.append(opt.step(ce_closure(opt, model, x, y)).item())
        else:
            opt.zero_grad()
            loss = ce(model, x, y)
            loss.backward()
            losses.append(loss.item())
            opt.perturb_weights()
            ce(model, x, y).backward(create_graph=opt.create_graph)
            if style == "official":
                opt.unperturb()
            opt.step()
    return [p.detach().clone() for p in model.parameters()], losses, opt


@pytest.mark.parametrize("hvp_point", ["perturbed", "reference"])
def test_closure_explicit_and_official_loops_identical(hvp_point):
    ref, ref_losses, _ = run_style("closure", hvp_point)
    for style in ("explicit", "official"):
        params, losses, _ = run_style(style, hvp_point)
        assert losses == ref_losses
        for a, b in zip(ref, params):
            assert torch.equal(a, b)


def test_closure_call_counts_and_returned_loss():
    f, _, _ = quartic(A, C)
    w = param()
    opt = Sassha([w], rho=0.2)
    calls = []
    loss = opt.step(make_closure(opt, f, w, calls))
    assert len(calls) == 2
    torch.testing.assert_close(loss.detach(), f(torch.tensor(W0, dtype=torch.float64)))
    opt_no_grad = Sassha([param()])
    with pytest.raises(RuntimeError, match="closure did not produce gradients"):
        opt_no_grad.step(lambda: torch.tensor(1.0))


def test_determinism_and_seed():
    a, _, _ = run_style("closure", "perturbed", seed=5)
    b, _, _ = run_style("closure", "perturbed", seed=5)
    c, _, _ = run_style("closure", "perturbed", seed=6)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert any(not torch.equal(x, y) for x, y in zip(a, c))


# ---------------------------------------------------------------------------------- state dict
def test_state_dict_lockstep_resume():
    model, x, y = mlp_problem()
    opt = Sassha(model.parameters(), lr=0.05, lazy_hessian=3, n_samples=2)

    def step(m, o):
        o.step(ce_closure(o, m, x, y))

    for _ in range(7):
        step(model, opt)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)
    model2, _, _ = mlp_problem(seed=1)
    model2.load_state_dict(saved["model"])
    opt2 = Sassha(model2.parameters(), lr=0.05, lazy_hessian=3, n_samples=2)
    opt2.load_state_dict(saved["opt"])
    # refreshes at steps 1, 2, 3 (warm-up of k = 3 steps), 4 and 7, two probes each
    assert opt2.global_step == 7 and opt2.hvp_calls == opt.hvp_calls == 2 * 5
    for _ in range(8):
        step(model, opt)
        step(model2, opt2)
    for p, q in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p, q)
        s, s2 = opt.state[p], opt2.state[q]
        assert set(s) == set(s2) and "hessian" not in s  # lean state by default
        for key in ("exp_avg", "exp_hessian_diag"):
            assert torch.equal(s[key], s2[key])
        assert s["step"] == s2["step"] == 15 and s["hessian_refreshes"] == s2["hessian_refreshes"]


@pytest.mark.parametrize("foreach", [False, True])
def test_lean_state_two_tensors_per_parameter_and_same_arithmetic(foreach):
    """keep_hessian=False (default) stores exp_avg and exp_hessian_diag only, like AdamW's two
    buffers, and gives bitwise the same trajectory as keep_hessian=True."""
    runs = []
    for keep in (False, True):
        model, x, y = mlp_problem()
        opt = Sassha(
            model.parameters(), lr=0.05, lazy_hessian=2, keep_hessian=keep, foreach=foreach
        )
        for _ in range(5):
            opt.step(ce_closure(opt, model, x, y))
        tensors = [
            [v for v in opt.state[p].values() if torch.is_tensor(v)] for p in model.parameters()
        ]
        assert all(len(t) == (3 if keep else 2) for t in tensors)
        assert all((opt.hessian(p) is None) is not keep for p in model.parameters())
        runs.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


FIXTURE = Path(__file__).parent / "data" / "sassha-0.2.0-state.pt"


def test_checkpoint_saved_by_0_2_0_loads_and_continues():
    """tests/data/sassha-0.2.0-state.pt: a Linear(3,4)-Tanh-Linear(4,2) model and the state_dict of
    ``Sassha(lr=0.05, lazy_hessian=3)`` after 4 closure steps, both saved by sassha-optim 0.2.0 (old
    layout: a third ``hessian`` buffer, no ``hessian_warmup`` option)."""
    saved = torch.load(FIXTURE, weights_only=True)
    assert saved["version"] == "0.2.0" and "hessian" in saved["optimizer"]["state"][0]
    assert "hessian_warmup" not in saved["optimizer"]["sassha"]["options"]

    def fresh(state):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        model.load_state_dict(state)
        return model

    # 0.3.0 with 0.2.0's schedule (hessian_warmup=0) retraces the saved run from the same init
    model = fresh(saved["init"])
    opt = Sassha(model.parameters(), lr=0.05, lazy_hessian=3, hessian_warmup=0, keep_hessian=True)
    for _ in range(4):
        opt.step(ce_closure(opt, model, saved["x"], saved["y"]))
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, saved["model"][key], rtol=1e-6, atol=1e-7)
    for i, p in enumerate(model.parameters()):
        for key in ("exp_avg", "exp_hessian_diag", "hessian"):
            torch.testing.assert_close(opt.state[p][key], saved["optimizer"]["state"][i][key])
    # the saved state loads into the lean default (no warning, the third buffer dropped) and runs
    resumed = fresh(saved["model"])
    opt2 = Sassha(resumed.parameters(), lr=0.05, lazy_hessian=3, hessian_warmup=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt2.load_state_dict(saved["optimizer"])
    assert opt2.global_step == 4 and opt2.hvp_calls == 2
    for p, q in zip(model.parameters(), resumed.parameters()):
        assert set(opt2.state[q]) == set(opt.state[p]) - {"hessian"}
    for _ in range(3):
        opt.step(ce_closure(opt, model, saved["x"], saved["y"]))
        opt2.step(ce_closure(opt2, resumed, saved["x"], saved["y"]))
    for a, b in zip(model.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_setstate_fills_options_added_after_0_2_0():
    """An optimizer pickled by 0.2.0 has no hessian_warmup option; __setstate__ restores 0.2.0's
    schedule (no warm-up) and default (keep_hessian=True)."""
    model, x, y = mlp_problem()
    opt = Sassha(model.parameters(), lazy_hessian=3)
    state = dict(opt.__dict__)
    state["options"] = {
        k: v for k, v in opt.options.items() if k not in ("hessian_warmup", "keep_hessian")
    }
    old = Sassha.__new__(Sassha)
    old.__setstate__(state)
    assert old.options["hessian_warmup"] == 0 and old.options["keep_hessian"] is True
    old.step(ce_closure(old, model, x, y))
    assert old.global_step == 1 and not old.hessian_due  # step 2: no refresh, as in 0.2.0


def test_load_state_dict_without_sassha_key_and_callable_power():
    model, x, y = mlp_problem()
    opt = Sassha(model.parameters(), lazy_hessian=2, hessian_power=lambda t: 1.0 / (1 + t))
    for _ in range(3):
        opt.step(ce_closure(opt, model, x, y))
    sd = opt.state_dict()
    assert sd["param_groups"][0]["hessian_power"] == pytest.approx(0.25)
    torch.save(sd, io.BytesIO())  # picklable despite the lambda
    sd = copy.deepcopy(sd)
    del sd["sassha"]
    fn = lambda t: 0.5  # noqa: E731
    opt2 = Sassha(model.parameters(), lazy_hessian=2, hessian_power=fn)
    opt2.load_state_dict(sd)
    assert opt2.global_step == 3 and opt2.hvp_calls == 3  # warm-up of k = 2, then step 3
    assert opt2.param_groups[0]["hessian_power"] is fn


def test_load_state_dict_warns_on_option_mismatch():
    w = param()
    opt = Sassha([w], lazy_hessian=3)
    opt2 = Sassha([param()], lazy_hessian=5)
    with pytest.warns(UserWarning, match="lazy_hessian"):
        opt2.load_state_dict(opt.state_dict())


# ---------------------------------------------------------------------------------- param groups
def test_param_groups_per_group_hyperparameters():
    f, df, _ = quartic(A, (0.0,) * 4)
    w1, w2 = param((1.0, -2.0)), param((0.5, 1.5))
    frozen = torch.nn.Parameter(torch.ones(2, dtype=torch.float64), requires_grad=False)
    unused = param((3.0, 3.0))
    a = torch.tensor(A, dtype=torch.float64)
    groups = [
        {"params": [w1], "lr": 0.1, "rho": 0.1, "weight_decay": 0.2, "hessian_power": 1.0},
        {"params": [w2, frozen, unused], "lr": 0.05, "rho": 0.3},
    ]
    opt = Sassha(groups, eps=1e-6)

    w_init = torch.cat([w1, w2]).detach()
    opt.step(make_closure(opt, lambda _: f(torch.cat([w1, w2])), None))
    g = df(w_init)
    norm = g.norm()
    rho = torch.tensor([0.1, 0.1, 0.3, 0.3], dtype=torch.float64)
    g_tilde = a * (w_init + rho * g / (norm + 1e-12))
    lr = torch.tensor([0.1, 0.1, 0.05, 0.05], dtype=torch.float64)
    power = torch.tensor([1.0, 1.0, 0.5, 0.5], dtype=torch.float64)
    decay = torch.tensor([0.2, 0.2, 0.0, 0.0], dtype=torch.float64)
    expected = w_init * (1 - lr * decay) - lr * g_tilde / (a**power + 1e-6)
    torch.testing.assert_close(torch.cat([w1, w2]).detach(), expected, rtol=0, atol=1e-12)
    assert len(opt.state[unused]) == 0 and len(opt.state[frozen]) == 0
    assert torch.equal(unused.detach(), torch.tensor([3.0, 3.0], dtype=torch.float64))


def test_optimizer_wide_key_in_group_rejected():
    with pytest.raises(ValueError, match="lazy_hessian"):
        Sassha([{"params": [param()], "lazy_hessian": 3}])


# ---------------------------------------------------------------------------------- foreach / dtypes
@pytest.mark.parametrize("dtype,rtol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_foreach_matches_loop(dtype, rtol):
    results = []
    for foreach in (False, True):
        model, x, y = mlp_problem(dtype=dtype)
        opt = Sassha(
            model.parameters(), lr=0.05, lazy_hessian=2, weight_decay=0.01, foreach=foreach
        )
        for _ in range(5):
            opt.step(ce_closure(opt, model, x, y))
        results.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * 1e-2)


def test_bfloat16_runs_and_state_dtypes():
    model, x, y = mlp_problem(dtype=torch.bfloat16)
    opt = Sassha(model.parameters(), lr=0.01, lazy_hessian=1)

    opt.step(ce_closure(opt, model, x, y))
    for p in model.parameters():
        assert opt.state[p]["exp_avg"].dtype == torch.bfloat16
        assert opt.state[p]["exp_hessian_diag"].dtype == torch.bfloat16
        assert torch.isfinite(p).all()


# ---------------------------------------------------------------------------------- validation / errors
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lr": -0.1}, "lr: -0.1"),
        ({"eps": -1e-3}, "eps"),
        ({"rho": -0.2}, "rho: -0.2"),
        ({"betas": (1.0, 0.999)}, "index 0"),
        ({"betas": (0.9, -0.1)}, "index 1"),
        ({"lazy_hessian": 0}, "lazy_hessian: 0"),
        ({"lazy_hessian": 2.5}, "lazy_hessian: 2.5"),
        ({"n_samples": 0}, "n_samples: 0"),
        ({"hessian_power": -0.5}, "hessian_power: -0.5"),
        ({"weight_decay": -1.0}, "weight_decay"),
        ({"bias_correction": "adam"}, "bias_correction: 'adam'"),
        ({"hvp_point": "middle"}, "hvp_point: 'middle'"),
        ({"grad_reduce": "max"}, "grad_reduce: 'max'"),
        ({"nonfinite": "ignore"}, "nonfinite: 'ignore'"),
        ({"max_grad_norm": 0.0}, "max_grad_norm"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Sassha([param()], **kwargs)


def test_callable_power_negative_and_double_perturb_and_sparse_and_complex():
    f, _, _ = quartic(A, C)
    w = param()
    opt = Sassha([w], hessian_power=lambda t: -1.0)
    with pytest.raises(ValueError, match="hessian_power"):
        opt.step(make_closure(opt, f, w))
    opt = Sassha([w])
    f(w).backward()
    opt.perturb_weights(zero_grad=False)
    with pytest.raises(RuntimeError, match="twice"):
        opt.perturb_weights()
    emb = torch.nn.Embedding(5, 2, sparse=True)
    opt = Sassha(emb.parameters())
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.perturb_weights()
    with pytest.raises(ValueError, match="complex"):
        Sassha([torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))])


# ---------------------------------------------------------------------------------- non-finite
def test_nonfinite_loss_raises_and_state_intact():
    w = param()
    opt = Sassha([w], lazy_hessian=1)
    f, _, _ = quartic(A, C)
    opt.step(make_closure(opt, f, w))
    before = copy.deepcopy(opt.state_dict())
    w_before = w.detach().clone()
    with pytest.raises(NonFiniteError, match="non-finite"):
        opt.step(make_closure(opt, lambda v: f(v) * float("nan"), w))
    assert torch.equal(w.detach(), w_before) and not opt.is_perturbed
    assert opt.global_step == 1
    assert torch.equal(opt.state[w]["exp_avg"], before["state"][0]["exp_avg"])


def singular(v):
    """Finite loss and gradient at v = 0 but infinite curvature: f = Σ |v|^1.5 + ½ v²."""
    return (v.abs() ** 1.5 + 0.5 * v**2).sum()


def test_nonfinite_hessian_raises_or_skips():
    w = param((0.0, 1.0, 2.0, 3.0))
    opt = Sassha([w], rho=0.0, lazy_hessian=1)
    with pytest.raises(NonFiniteError, match="Hessian"):
        opt.step(make_closure(opt, singular, w))
    assert opt.global_step == 0 and len(opt.state[w]) == 0
    opt = Sassha([w], rho=0.0, lazy_hessian=1, nonfinite="skip")
    opt.step(make_closure(opt, singular, w))
    assert opt.skipped_steps == 1 and opt.global_step == 0 and len(opt.state[w]) == 0
    assert torch.equal(w.detach(), torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64))
    # a non-finite loss is skipped too, and a later finite step proceeds normally
    opt.step(make_closure(opt, lambda v: singular(v) * float("inf"), w))
    assert opt.skipped_steps == 2
    f, _, _ = quartic(A, C)
    opt.step(make_closure(opt, f, w))
    assert opt.global_step == 1 and torch.isfinite(w).all()


def test_adaptive_perturbation_closed_form():
    f, df, d2f = quartic(A, (0.0,) * 4)
    w = param()
    w0 = w.detach().clone()
    lr, rho, eps = 0.1, 0.05, 1e-4
    opt = Sassha([w], lr=lr, rho=rho, eps=eps, adaptive=True)
    opt.step(make_closure(opt, f, w))
    g = df(w0)
    w_tilde = w0 + rho * w0**2 * g / ((w0.abs() * g).norm() + 1e-12)
    expected = w0 - lr * df(w_tilde) / (d2f(w_tilde).abs() ** 0.5 + eps)
    torch.testing.assert_close(w.detach(), expected, rtol=0, atol=1e-12)


def test_max_grad_norm_clips_perturbed_gradient():
    f, df, _ = quartic(A, (0.0,) * 4)
    w = param()
    w0 = w.detach().clone()
    lr, clip = 0.1, 0.5
    opt = Sassha([w], lr=lr, rho=0.0, hessian_power=0.0, betas=(0.0, 0.999), eps=0.0,
                 max_grad_norm=clip)  # fmt: skip
    opt.step(make_closure(opt, f, w))
    g = df(w0)
    expected = w0 - lr * g * (clip / (g.norm() + 1e-6))
    torch.testing.assert_close(w.detach(), expected, rtol=1e-12, atol=1e-12)


def test_running_stats_helpers_restore_momentum():
    from sassha_optim import disable_running_stats, enable_running_stats

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4, momentum=0.3))
    disable_running_stats(model)
    before = model[1].running_mean.clone()
    model(torch.randn(8, 3))
    assert torch.equal(model[1].running_mean, before)
    enable_running_stats(model)
    assert model[1].momentum == 0.3
    model(torch.randn(8, 3))
    assert not torch.equal(model[1].running_mean, before)


@pytest.mark.parametrize("nonfinite", ["raise", "skip"])
def test_nonfinite_loss_at_perturbed_point_restores_weights(nonfinite):
    f, _, _ = quartic(A, C)
    w = param()
    opt = Sassha([w], nonfinite=nonfinite)
    calls = []

    def closure():  # finite at w, NaN at w + ε
        calls.append(1)
        loss = f(w) * (float("nan") if len(calls) == 2 else 1.0)
        loss.backward(create_graph=opt.create_graph)
        return loss

    if nonfinite == "raise":
        with pytest.raises(NonFiniteError, match="perturbed point"):
            opt.step(closure)
    else:
        opt.step(closure)
        assert opt.skipped_steps == 1
    assert not opt.is_perturbed and opt.global_step == 0
    assert torch.equal(w.detach(), torch.tensor(W0, dtype=torch.float64))


TRAJECTORIES = Path(__file__).parent / "data" / "sassha-0.4.0-trajectories.pt"


def _trajectory_model() -> torch.nn.Module:
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))


@pytest.mark.parametrize("name", ["k1", "k10", "k3-n2-official", "k1-adaptive-clip"])
def test_update_unchanged_since_0_4_0(name):
    """tests/data/sassha-0.4.0-trajectories.pt: weights and D after 12 closure steps of
    ``Sassha(lr=0.05, rho=0.1, weight_decay=0.01, seed=3, **options)`` on a fixed 6-8-8-3 MLP and
    batch, saved by sassha-optim 0.4.0, before the 0.5.0 step-time work (Hutchinson product without
    a zero-filled accumulator, one ``float()`` of the perturbation norm). The step must compute the
    same update (bitwise on the machine that wrote the file; 1e-5 relative elsewhere: another CPU's
    SIMD kernels round some float32 sums differently and 12 steps amplify it — seen 1.4e-6 relative
    on one weight of k3-n2-official; a wrong term or a lost step moves the weights far more)."""
    saved = torch.load(TRAJECTORIES, weights_only=True)
    assert saved["version"] == "0.4.0"
    run = saved["runs"][name]
    model = _trajectory_model()
    opt = Sassha(model.parameters(), lr=0.05, rho=0.1, weight_decay=0.01, seed=3, **run["options"])
    for _ in range(12):
        opt.step(ce_closure(opt, model, saved["x"], saved["y"]))
    for p, want, d in zip(model.parameters(), run["params"], run["exp_hessian_diag"]):
        torch.testing.assert_close(p.detach(), want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt.state[p]["exp_hessian_diag"], d, rtol=1e-5, atol=1e-8)
