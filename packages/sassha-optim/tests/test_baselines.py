"""Private baselines used by the demo/benchmarks: SAM(SGD), AdaHessian and Sophia-H."""

import io

import pytest
import torch
from sassha_optim._baselines import SAM, AdaHessian, SophiaH


def quadratic_closure(opt, w, a):
    def closure():
        opt.zero_grad()
        loss = (0.5 * a * w**2).sum()
        loss.backward(create_graph=bool(getattr(opt, "create_graph", False)))
        return loss

    return closure


@pytest.mark.slow
@pytest.mark.reference
def test_sam_matches_pytorch_optimizer():
    po = pytest.importorskip("pytorch_optimizer")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))
    ref.load_state_dict(model.state_dict())
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    kw = {"rho": 0.1, "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3}
    ours = SAM(model.parameters(), torch.optim.SGD, **kw)
    theirs = po.SAM(ref.parameters(), torch.optim.SGD, **kw)
    loss_fn = torch.nn.functional.cross_entropy
    for _ in range(5):

        def closure():
            ours.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            return loss

        ours.step(closure)
        loss_fn(ref(x), y).backward()
        theirs.first_step(zero_grad=True)
        loss_fn(ref(x), y).backward()
        theirs.second_step(zero_grad=True)
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_adahessian_first_step_closed_form():
    a = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    w0 = torch.tensor([1.0, -2.0, 0.5, 1.5], dtype=torch.float64)
    w = torch.nn.Parameter(w0.clone())
    lr, eps, lam, b1, b2 = 0.15, 1e-4, 0.01, 0.9, 0.999
    opt = AdaHessian([w], lr=lr, eps=eps, weight_decay=lam, betas=(b1, b2))
    opt.step(quadratic_closure(opt, w, a))
    # m̂ = g, v̂ = |diag H|² = a², κ = 1: w₁ = w₀(1 − ηλ) − η g / (a + eps)
    expected = w0 * (1 - lr * lam) - lr * (a * w0) / (a + eps)
    torch.testing.assert_close(w.detach(), expected, rtol=0, atol=1e-12)
    assert opt.hvp_calls == 1 and not w.grad.requires_grad


def test_sam_step_without_closure_and_bad_rho():
    w = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError, match="rho"):
        SAM([w], torch.optim.SGD, rho=-1.0, lr=0.1)
    with pytest.raises(RuntimeError, match="closure"):
        SAM([w], torch.optim.SGD, lr=0.1).step()


# ---------------------------------------------------------------------------------- Sophia-H
def sophia_closed_form_step(w, m, h, a, lr, b1, b2, gamma, eps, lam, refresh):
    """One Sophia-H step on ½ Σ a w² written from its update (diag Hessian: Ĥ = a exactly)."""
    g = a * w
    m = b1 * m + (1 - b1) * g
    if refresh:
        h = b2 * h + (1 - b2) * a
    ratio = (m.abs() / (gamma * h.clamp(min=0) + eps)).clamp(max=1.0)
    return w * (1 - lr * lam) - lr * m.sign() * ratio, m, h


def test_sophiah_first_step_closed_form_with_and_without_clipping():
    a = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    w0 = torch.tensor([1.0, -2.0, 1e-6, 1.5], dtype=torch.float64)
    w = torch.nn.Parameter(w0.clone())
    lr, b1, b2, gamma, eps, lam = 0.1, 0.9, 0.999, 0.01, 1e-4, 0.01
    opt = SophiaH([w], lr=lr, betas=(b1, b2), clip_threshold=gamma, eps=eps, weight_decay=lam)
    opt.step(quadratic_closure(opt, w, a))
    m1 = (1 - b1) * a * w0
    h1 = (1 - b2) * a
    clipped = m1.abs() > gamma * h1 + eps
    assert clipped[[0, 1, 3]].all() and not clipped[2]  # both regimes are exercised
    # clipped coordinates take the sign step η·sign(m); the others η·m/(γh + eps)
    expected = torch.where(
        clipped,
        w0 * (1 - lr * lam) - lr * m1.sign(),
        w0 * (1 - lr * lam) - lr * m1 / (gamma * h1 + eps),
    )
    torch.testing.assert_close(w.detach(), expected, rtol=0, atol=1e-15)
    assert opt.hvp_calls == 1 and not w.grad.requires_grad


def test_sophiah_without_curvature_is_sign_momentum():
    """Degenerate case: on a linear loss (Hessian 0) h stays 0, so wherever |m| > eps the clip is
    active and Sophia-H is sign descent with momentum, w ← w(1 − ηλ) − η sign(m)."""
    c = torch.tensor([0.5, -1.0, 2.0, -4.0], dtype=torch.float64)
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5, 1.5], dtype=torch.float64))
    lr, lam, b1 = 0.01, 0.1, 0.9
    opt = SophiaH([w], lr=lr, betas=(b1, 0.99), weight_decay=lam, update_period=2)
    ref, m = w.detach().clone(), torch.zeros(4, dtype=torch.float64)
    for _ in range(6):

        def closure():
            loss = (c * w).sum() + 0.0 * (w**2).sum()  # a graph, but a zero Hessian
            loss.backward(create_graph=opt.create_graph)
            return loss

        opt.step(closure)
        m = b1 * m + (1 - b1) * c
        ref = ref * (1 - lr * lam) - lr * m.sign()
        torch.testing.assert_close(w.detach(), ref, rtol=0, atol=1e-15)
        assert torch.count_nonzero(opt.state[w]["hessian_ema"]) == 0


def test_sophiah_lazy_recurrence_matches_closed_form():
    a = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5, 1.5], dtype=torch.float64))
    kw = {"lr": 0.05, "b1": 0.9, "b2": 0.99, "gamma": 5.0, "eps": 1e-4, "lam": 0.0}
    opt = SophiaH([w], lr=0.05, betas=(0.9, 0.99), clip_threshold=5.0, eps=1e-4, update_period=3)
    ref, m, h = (
        w.detach().clone(),
        torch.zeros(4, dtype=torch.float64),
        torch.zeros(4, dtype=torch.float64),
    )
    for t in range(1, 11):
        opt.step(quadratic_closure(opt, w, a))
        ref, m, h = sophia_closed_form_step(ref, m, h, a, refresh=(t - 1) % 3 == 0, **kw)
        torch.testing.assert_close(w.detach(), ref, rtol=1e-12, atol=1e-14)
    assert opt.hvp_calls == 4  # steps 1, 4, 7, 10


@pytest.mark.reference
def test_sophiah_matches_pytorch_optimizer_reparametrised():
    """pytorch_optimizer.SophiaH clamps m/max(h, eps') to ±p and scales by its lr: with p = γ,
    lr' = η/γ, λ' = λγ, our eps = 0 and a positive diagonal Hessian the two updates are equal."""
    po = pytest.importorskip("pytorch_optimizer")
    a = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    w0 = torch.tensor([1.0, -2.0, 0.01, 1.5], dtype=torch.float64)
    ours_w, theirs_w = torch.nn.Parameter(w0.clone()), torch.nn.Parameter(w0.clone())
    lr, gamma, lam = 0.02, 0.5, 0.1
    ours = SophiaH([ours_w], lr=lr, betas=(0.9, 0.99), clip_threshold=gamma, eps=0.0,
                   weight_decay=lam, update_period=2)  # fmt: skip
    theirs = po.SophiaH([theirs_w], lr=lr / gamma, betas=(0.9, 0.99), p=gamma, eps=1e-12,
                        weight_decay=lam * gamma, update_period=2,
                        hessian_distribution="rademacher")  # fmt: skip
    for _ in range(9):
        ours.step(quadratic_closure(ours, ours_w, a))
        theirs.zero_grad()
        (0.5 * a * theirs_w**2).sum().backward(create_graph=True)
        theirs.step()
        torch.testing.assert_close(ours_w.detach(), theirs_w.detach(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    ("cls", "buffers"),
    [(SophiaH, ("exp_avg", "hessian_ema")), (AdaHessian, ("exp_avg", "exp_hessian_diag_sq"))],
)
def test_hessian_baselines_state_dict_lockstep_resume_and_errors(cls, buffers):
    """Both Hessian baselines share the lazy-Hutchinson shell: a resumed copy (counters and probe
    generator from the state dict, a different constructor seed) steps in lockstep, bit for bit."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))

    def step(m, o):
        def closure():
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward(create_graph=o.create_graph)
            return loss

        o.step(closure)

    opt = cls(model.parameters(), lr=0.01, update_period=3, seed=4)
    for _ in range(5):
        step(model, opt)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)
    model2 = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    model2.load_state_dict(saved["model"])
    opt2 = cls(model2.parameters(), lr=0.01, update_period=3, seed=99)
    opt2.load_state_dict(saved["opt"])
    for _ in range(6):
        step(model, opt)
        step(model2, opt2)
    for p, q in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p, q)
        for key in buffers:
            assert torch.equal(opt.state[p][key], opt2.state[q][key])
    assert opt.hvp_calls == opt2.hvp_calls == 4 and opt2.global_step == 11
    w = torch.nn.Parameter(torch.ones(2))
    bad = [{"lr": -1.0}, {"update_period": 0}]
    if cls is SophiaH:
        bad += [{"clip_threshold": 0.0}, {"betas": (1.0, 0.9)}]
    for kwargs in bad:
        with pytest.raises(ValueError):
            cls([w], **kwargs)
    (w**2).sum().backward()
    with pytest.raises(RuntimeError, match=f"{cls.__name__}: Hessian refresh due .* no graph"):
        cls([w]).step()
