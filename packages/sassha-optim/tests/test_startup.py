"""Lazy-Hessian start-up on a small CNN without batch norm (README: Deviations, "Hessian warm-up").

With the official schedule (refresh on steps 1, k+1, ...) a coordinate whose Hutchinson estimate at
step 1 is zero (a weight that reads a ReLU channel dead on the first batch) keeps ``D̂ = 0`` until step
k+1; when its gradient appears it moves by ``lr·m̂/eps`` per step. ``hessian_warmup`` (default: k)
refreshes on each of the first k steps, after which the schedule is the paper's.
"""

import math

import pytest
import torch
from sassha_optim import Sassha
from torch import nn

SIDE, BATCH, N_BATCHES, STEPS = 16, 128, 4, 30


def strokes(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST-like images: three bright strokes per class prototype on a black 16×16 canvas, random
    1-pixel shifts and intensity noise, standardised per pixel with a floored std (as the loaders)."""
    gen = torch.Generator().manual_seed(seed)
    protos = torch.zeros(10, SIDE, SIDE)
    for c in range(10):
        for _ in range(3):
            r0, c0 = torch.randint(3, SIDE - 3, (2,), generator=gen).tolist()
            horizontal = bool(torch.randint(0, 2, (1,), generator=gen))
            half = int(torch.randint(4, SIDE - 4, (1,), generator=gen)) // 2
            if horizontal:
                protos[c, r0, max(0, c0 - half) : c0 + half] = 1
            else:
                protos[c, max(0, r0 - half) : r0 + half, c0] = 1
    y = torch.arange(n) % 10
    x = protos[y].clone()
    shifts = torch.randint(-1, 2, (n, 2), generator=gen)
    for i in range(n):
        x[i] = torch.roll(x[i], tuple(shifts[i].tolist()), (0, 1))
    x = (x + 0.1 * torch.rand(x.shape, generator=gen) * (x > 0)).clamp(0, 1).view(n, -1)
    std = x.std(0, correction=0).clamp_min(0.1 * x.std())
    return ((x - x.mean(0)) / std).view(n, 1, SIDE, SIDE), y


def cnn(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * (SIDE // 4) ** 2, 10),
    )


def train(**kw):
    """README settings (lr 0.15, ρ 0.2, k 10, eps 1e-4, λ = 5e-4/0.15) on 4 batches of 128, 30 steps.
    Returns the largest single-step weight change, the D̂^α and |m̂| of that coordinate at that
    step, and the loss on 512 held-out images."""
    x, y = strokes(BATCH * N_BATCHES + 512)
    x_test, y_test, x, y = x[-512:], y[-512:], x[:-512], y[:-512]
    model = cnn(seed=2)
    params = list(model.parameters())
    opt = Sassha(
        params, lr=0.15, rho=0.2, lazy_hessian=10, eps=1e-4, weight_decay=5e-4 / 0.15, **kw
    )
    worst = {"step": 0.0}
    for t in range(STEPS):
        i = (t * BATCH) % len(x)
        xb, yb = x[i : i + BATCH], y[i : i + BATCH]

        def closure(xb=xb, yb=yb):
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward(create_graph=opt.create_graph)
            return loss

        before = torch.cat([p.detach().flatten() for p in params])
        opt.step(closure)
        change = (torch.cat([p.detach().flatten() for p in params]) - before).abs()
        c = int(change.argmax())
        if float(change[c]) > worst["step"]:
            states = [opt.state[p] for p in params]
            dhat = torch.cat(
                [(s["exp_hessian_diag"] / (1 - 0.999 ** s["hessian_refreshes"])).sqrt().flatten()
                 for s in states]
            )  # fmt: skip
            mhat = torch.cat([(s["exp_avg"] / (1 - 0.9 ** s["step"])).flatten() for s in states])
            worst = {"step": float(change[c]), "dhat": float(dhat[c]), "mhat": float(mhat[c])}
    with torch.no_grad():
        test_loss = float(nn.functional.cross_entropy(model(x_test), y_test))
    return worst, test_loss, opt


def test_startup_diverges_without_warmup():
    """0.2.0 behaviour (``hessian_warmup=0``): steps of lr·m̂/eps on a zero-curvature coordinate."""
    worst, test_loss, _ = train(hessian_warmup=0)
    assert worst["step"] > 50  # a single step of more than 50 on one weight
    assert (
        worst["dhat"] < 1e-4
    )  # ... on a coordinate whose D̂^α is below eps (stale step-1 estimate)
    assert worst["step"] == pytest.approx(
        0.15 * abs(worst["mhat"]) / (worst["dhat"] + 1e-4), rel=0.05
    )
    assert test_loss > 2.0  # held-out loss at chance level (ln 10 = 2.30)


def test_startup_trains_with_default_warmup():
    """Default ``hessian_warmup`` (= k): no large steps, and the same run learns the task."""
    worst, test_loss, opt = train()
    assert worst["step"] < 1.0
    assert test_loss < 0.1 < math.log(10)
    # refreshes on steps 1..10 (warm-up) and 11, 21 (schedule), one probe each
    assert opt.hvp_calls == 12
