"""Private baselines used by the demo/benchmarks: SAM(SGD) and AdaHessian."""

import pytest
import torch
from sassha_optim._baselines import SAM, AdaHessian


def quadratic_closure(opt, w, a):
    def closure():
        opt.zero_grad()
        loss = (0.5 * a * w**2).sum()
        loss.backward(create_graph=bool(getattr(opt, "create_graph", False)))
        return loss

    return closure


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
