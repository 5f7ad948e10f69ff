"""The functional core (sassha_optim.functional): kernels, the public ``sassha(...)`` and the class
as a shell over it; closures without ``backward`` and the create_graph reference-cycle warning."""

import copy
import math
import warnings

import pytest
import torch
from sassha_optim import Sassha
from sassha_optim.functional import (
    _multi_tensor_sassha,
    _single_tensor_sassha,
    bias_correction2,
    hutchinson_diagonal,
    rademacher_like,
    sassha,
)


def random_lists(dtype, n=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(3, 5), (7,), (2, 2, 3), (1,)][:n]

    def rnd(shape, positive=False):
        t = torch.randn(shape, generator=gen, dtype=torch.float64)
        return (t.abs() if positive else t).to(dtype)

    return {
        "params": [rnd(s) for s in shapes],
        "grads": [rnd(s) for s in shapes],
        "exp_avgs": [rnd(s) for s in shapes],
        "exp_hessian_diags": [rnd(s, positive=True) for s in shapes],
        "hessians": [rnd(s) if i % 2 == 0 else None for i, s in enumerate(shapes)],
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_single_tensor_and_foreach_kernels_are_bitwise_equal(dtype):
    """Same arithmetic in both paths: on CPU the results are bitwise equal in float32 and float64;
    in bfloat16 ``_foreach_mul_`` by a Python scalar rounds differently from ``Tensor.mul_`` (torch
    2.13), so there the paths agree to one bf16 ulp of the tensor's scale."""
    results = []
    for kernel in (_single_tensor_sassha, _multi_tensor_sassha):
        t = random_lists(dtype)
        kernel(
            t["params"],
            t["grads"],
            t["exp_avgs"],
            t["exp_hessian_diags"],
            t["hessians"],
            [1 - 0.9**3, 1 - 0.9**1, 1 - 0.9**7, 1 - 0.9**2],
            [0.3, 1.0, 0.05, 0.7],
            [True, True, False, True],
            lr=0.1,
            beta1=0.9,
            beta2=0.99,
            weight_decay=0.01,
            alpha=0.5,
            eps=1e-4,
        )
        results.append(t)
    a, b = results
    for key in ("params", "exp_avgs", "exp_hessian_diags"):
        for x, y in zip(a[key], b[key]):
            if dtype == torch.bfloat16:
                scale = float(x.float().abs().max())  # within one bf16 ulp of the tensor's scale
                torch.testing.assert_close(x.float(), y.float(), rtol=0, atol=2**-7 * scale)
            else:
                assert torch.equal(x, y), key
    for x, y in zip(a["hessians"], b["hessians"]):
        assert (x is None and y is None) or (torch.equal(x, y) and bool((x >= 0).all()))


def test_kernel_matches_update_equations():
    """One functional step against steps 4, 6, 7, 8 written out in float64."""
    t = random_lists(torch.float64)
    before = copy.deepcopy(t)
    lr, b1, b2, lam, alpha, eps = 0.1, 0.9, 0.99, 0.01, 0.5, 1e-4
    steps, refreshes = [3, 1, 7, 2], [2, 1, 0, 1]
    sassha(
        t["params"],
        t["grads"],
        t["exp_avgs"],
        t["exp_hessian_diags"],
        t["hessians"],
        steps,
        refreshes,
        lr=lr,
        beta1=b1,
        beta2=b2,
        weight_decay=lam,
        hessian_power=alpha,
        eps=eps,
    )
    for i in range(4):
        h = before["hessians"][i]
        d = before["exp_hessian_diags"][i]
        if h is not None:
            d = b2 * d + (1 - b2) * h.abs()
        m = b1 * before["exp_avgs"][i] + (1 - b1) * before["grads"][i]
        w = before["params"][i]
        if refreshes[i] > 0:
            d_hat = d / (1 - b2 ** refreshes[i])
            w = w * (1 - lr * lam) - lr * (m / (1 - b1 ** steps[i])) / (d_hat**alpha + eps)
        torch.testing.assert_close(t["params"][i], w, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(t["exp_avgs"][i], m, rtol=0, atol=1e-15)
        torch.testing.assert_close(t["exp_hessian_diags"][i], d, rtol=0, atol=1e-15)


def test_bias_correction2_modes_and_validation():
    assert bias_correction2("refresh", 0.99, 0.5, 4, 31) == pytest.approx((1 - 0.99**4) ** 0.5)
    assert bias_correction2("step", 0.99, 0.5, 4, 31) == pytest.approx((1 - 0.99**31) ** 0.5)
    assert bias_correction2("none", 0.99, 0.5, 4, 31) == 1.0
    assert bias_correction2("refresh", 0.99, 0.5, 0, 0) == 1.0
    with pytest.raises(ValueError, match="bias_correction"):
        bias_correction2("steps", 0.99, 0.5, 1, 1)
    t = random_lists(torch.float64)
    kw = {
        "lr": 0.1,
        "beta1": 0.9,
        "beta2": 0.99,
        "weight_decay": 0.0,
        "hessian_power": 0.5,
        "eps": 1e-4,
    }
    with pytest.raises(ValueError, match="steps has 3 entries"):
        sassha(
            t["params"],
            t["grads"],
            t["exp_avgs"],
            t["exp_hessian_diags"],
            None,
            [1] * 3,
            [1] * 4,
            **kw,
        )
    with pytest.raises(ValueError, match="last_refresh_steps"):
        sassha(t["params"], t["grads"], t["exp_avgs"], t["exp_hessian_diags"], None, [1] * 4, [1] * 4,
               bias_correction="step", **kw)  # fmt: skip


def mlp_problem(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    gen = torch.Generator().manual_seed(seed + 1)
    return model, torch.randn(24, 5, generator=gen), torch.randint(0, 3, (24,), generator=gen)


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("mode", ["refresh", "step", "none"])
def test_functional_loop_reproduces_the_class(foreach, mode):
    """A hand-written loop over the public functional pieces (SAM perturbation, hutchinson_diagonal
    with the class's probe stream, sassha(...)) equals the Sassha class bitwise."""
    lr, rho, k, b1, b2, lam = 0.05, 0.1, 3, 0.9, 0.99, 0.01
    model, x, y = mlp_problem()
    ref = copy.deepcopy(model)
    opt = Sassha(model.parameters(), lr=lr, rho=rho, betas=(b1, b2), weight_decay=lam, lazy_hessian=k,
                 hessian_warmup=0, bias_correction=mode, foreach=foreach, seed=3)  # fmt: skip
    params = list(ref.parameters())
    m = [torch.zeros_like(p) for p in params]
    d = [torch.zeros_like(p) for p in params]
    gen = torch.Generator().manual_seed(3)
    n_ref = t_ref = 0
    loss_fn = torch.nn.functional.cross_entropy
    for t in range(1, 8):

        def closure():
            loss = loss_fn(model(x), y)
            loss.backward(create_graph=opt.create_graph)
            return loss

        opt.step(closure)
        refresh = (t - 1) % k == 0
        g = torch.autograd.grad(loss_fn(ref(x), y), params)
        norm = torch.linalg.vector_norm(torch.stack([gi.norm() for gi in g]))
        saved = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p, gi in zip(params, g):
                p.add_(gi * (rho / (float(norm) + 1e-12)))
        g2 = torch.autograd.grad(loss_fn(ref(x), y), params, create_graph=refresh)
        h = None
        if refresh:
            h, _ = hutchinson_diagonal(
                g2, params, lambda: [rademacher_like(p, gen) for p in params]
            )
            n_ref, t_ref = n_ref + 1, t
        with torch.no_grad():
            for p, w in zip(params, saved):
                p.copy_(w)
        bcs = [(1 - b2**t_ref) ** 0.5] * len(params) if mode == "step" else None
        sassha(params, [gi.detach() for gi in g2], m, d, h, [t] * len(params), [n_ref] * len(params),
               [t_ref] * len(params), bcs, foreach, lr=lr, beta1=b1, beta2=b2, weight_decay=lam,
               hessian_power=0.5, eps=1e-4, bias_correction=mode)  # fmt: skip
        for a, b in zip(model.parameters(), params):
            assert torch.equal(a, b), t
    for p, mi, di in zip(model.parameters(), m, d):
        assert torch.equal(opt.state[p]["exp_avg"], mi)
        assert torch.equal(opt.state[p]["exp_hessian_diag"], di)


# ----------------------------------------------------------------------- closures and the warning
def run(closure_kind, steps=7, **kw):
    model, x, y = mlp_problem()
    opt = Sassha(model.parameters(), lr=0.05, lazy_hessian=2, **kw)
    for _ in range(steps):
        if closure_kind == "backward":

            def closure():
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward(create_graph=opt.create_graph)
                return loss

        else:  # the loss only: the optimizer differentiates it (torch.autograd.grad)

            def closure():
                return torch.nn.functional.cross_entropy(model(x), y)

        loss = opt.step(closure)
        assert all(not p.grad.requires_grad for p in model.parameters())
    return [p.detach().clone() for p in model.parameters()], opt, loss


@pytest.mark.parametrize(
    "kw", [{}, {"rho": 0.0}, {"hvp_point": "reference", "bias_correction": "step"}]
)
def test_loss_only_closure_equals_backward_closure(kw):
    a, opt_a, loss_a = run("backward", **kw)
    b, opt_b, loss_b = run("loss", **kw)
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert opt_a.hvp_calls == opt_b.hvp_calls and torch.equal(loss_a.detach(), loss_b.detach())


def test_loss_only_closure_makes_no_reference_cycle_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run("loss", steps=6)
    assert not [w for w in caught if "reference cycle" in str(w.message)]


def test_create_graph_cycle_warning_is_not_repeated_on_each_refresh():
    """torch may warn about the parameter↔gradient cycle of ``backward(create_graph=True)`` (some
    versions once per process, some on every call); the closure here re-raises that exact warning
    on every graph-building call, as the latter would. Over 12 refreshes it reaches the user once."""
    model, x, y = mlp_problem()
    opt = Sassha(model.parameters(), lr=0.05, lazy_hessian=1)
    message = (
        "Using backward() with create_graph=True will create a reference cycle between the "
        "parameter and its gradient which can cause a memory leak."
    )

    def closure():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if opt.create_graph:
            warnings.warn(message, UserWarning, stacklevel=1)
        loss.backward(create_graph=opt.create_graph)
        return loss

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(12):
            opt.step(closure)
        other = [w for w in caught if "reference cycle" not in str(w.message)]
        warnings.warn("an unrelated warning still shows", UserWarning, stacklevel=1)
    assert opt.hvp_calls == 12
    assert sum("reference cycle" in str(w.message) for w in caught) == 1
    assert not other and "unrelated" in str(caught[-1].message)


def test_loss_only_closure_errors():
    model, x, y = mlp_problem()
    opt = Sassha(model.parameters())
    with pytest.raises(RuntimeError, match="closure did not produce gradients"):
        opt.step(lambda: torch.nn.functional.cross_entropy(model(x), y).detach())
    assert not opt.is_perturbed and opt.global_step == 0
    loss = opt.step(lambda: torch.nn.functional.cross_entropy(model(x), y))
    assert math.isfinite(float(loss.detach())) and opt.global_step == 1


# ---------------------------------------------------------------- cached denominator (0.7.0)
def _trajectory(steps=25, **kw):
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)
    ).double()
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(32, 6, generator=gen).double(), torch.randint(0, 3, (32,), generator=gen)
    opt = Sassha(model.parameters(), lr=0.1, rho=0.1, lazy_hessian=3, weight_decay=1e-2, **kw)
    for _ in range(steps):
        opt.step(lambda: torch.nn.functional.cross_entropy(model(x), y))
    return model, opt


def _alpha_schedule(t):  # changes α on step 9, which does not refresh (k = 3: 1-4, 7, 10, ...)
    return 0.5 if t < 9 else 0.8


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"foreach": True},
        {"bias_correction": "step", "hessian_warmup": 0},
        {"bias_correction": "none"},
        {"hessian_power": _alpha_schedule},
        {"hessian_power": _alpha_schedule, "foreach": True},
    ],
)
def test_cache_denominator_is_bitwise_the_same_trajectory(kw):
    """``cache_denominator=True`` reuses ``D̂^α + eps`` between refreshes: the same weights and
    state, bit for bit, including across an α change between refreshes (the cache is rebuilt)."""
    ref_model, ref = _trajectory(**kw)
    model, opt = _trajectory(cache_denominator=True, **kw)
    for a, b in zip(ref_model.parameters(), model.parameters()):
        assert torch.equal(a, b)
    for p, q in zip(ref_model.parameters(), model.parameters()):
        for key in ("exp_avg", "exp_hessian_diag"):
            assert torch.equal(ref.state[p][key], opt.state[q][key])
    assert len(opt._denominators) == 4 and not ref._denominators


def test_cache_denominator_reuses_between_refreshes_and_rebuilds_on_refresh():
    model, opt = _trajectory(steps=4, cache_denominator=True)  # steps 1-4 refresh (warm-up)
    p = next(model.parameters())
    x, y = torch.randn(8, 6).double(), torch.randint(0, 3, (8,))

    def closure():
        return torch.nn.functional.cross_entropy(model(x), y)

    first = opt._denominators[p][1]
    opt.step(closure)  # step 5: no refresh -> same tensor object
    assert opt._denominators[p][1] is first
    opt.step(closure)  # step 6
    assert opt._denominators[p][1] is first
    opt.step(closure)  # step 7 refreshes -> a new denominator from the new D
    new = opt._denominators[p][1]
    assert new is not first
    d = opt.state[p]["exp_hessian_diag"]
    c2 = (1 - 0.999 ** opt.state[p]["hessian_refreshes"]) ** 0.5
    assert torch.equal(new, d.pow(0.5).div_(c2).add_(1e-4))


def test_cache_denominator_state_dict_round_trip_continues_bitwise():
    """The cache is not in the ``state_dict``; a resumed optimizer rebuilds it from D."""
    ref_model, _ = _trajectory(steps=20, cache_denominator=True)
    model, opt = _trajectory(steps=8, cache_denominator=True)
    sd = copy.deepcopy(opt.state_dict())
    assert all("denominator" not in k for s in sd["state"].values() for k in s)
    opt2 = Sassha(model.parameters(), lr=0.1, rho=0.1, lazy_hessian=3, weight_decay=1e-2,
                  cache_denominator=True)  # fmt: skip
    opt2.load_state_dict(sd)
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(32, 6, generator=gen).double(), torch.randint(0, 3, (32,), generator=gen)
    for _ in range(12):
        opt2.step(lambda: torch.nn.functional.cross_entropy(model(x), y))
    for a, b in zip(ref_model.parameters(), model.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("foreach", [False, True])
def test_functional_denominators_are_filled_then_used(foreach):
    t = random_lists(torch.float64)
    n = len(t["params"])
    kw = dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, hessian_power=0.5, eps=1e-4)
    dens: list = [None] * n
    sassha(t["params"], t["grads"], t["exp_avgs"], t["exp_hessian_diags"], None, [1] * n,
           [1] * n, foreach=foreach, denominators=dens, **kw)  # fmt: skip
    c2 = (1 - 0.99) ** 0.5
    for d, den in zip(t["exp_hessian_diags"], dens):
        assert torch.equal(den, d.pow(0.5).div_(c2).add_(1e-4))
    # a given entry is used as it is: a denominator of 1 gives w ← w − η m̂ for that tensor
    params = [p.clone() for p in t["params"]]
    ones = [torch.ones_like(p) for p in params]
    m = [a.clone() for a in t["exp_avgs"]]
    sassha(params, t["grads"], m, t["exp_hessian_diags"], None, [2] * n, [1] * n,
           foreach=foreach, denominators=list(ones), **kw)  # fmt: skip
    for p0, p1, mi in zip(t["params"], params, m):
        assert torch.equal(p1, p0.addcdiv(mi, torch.ones_like(p0), value=-0.1 / (1 - 0.9**2)))
    with pytest.raises(ValueError, match="denominators has 1 entries"):
        sassha(params, t["grads"], m, t["exp_hessian_diags"], None, [2] * n, [1] * n,
               denominators=[None], **kw)  # fmt: skip


def test_cache_denominator_validation_and_group_key():
    w = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError, match="cache_denominator"):
        Sassha([w], cache_denominator="yes")
    opt = Sassha([w], cache_denominator=True)
    with pytest.raises(ValueError, match="optimizer-wide"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))], "cache_denominator": 1})
