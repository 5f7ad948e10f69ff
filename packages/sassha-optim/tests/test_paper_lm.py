"""The official GPT-2 recipe as a preset (`Sassha.paper_lm`, `paper_lm_schedule`) and the options
it is made of (`rho_warmup`, `clip_before_perturbation`, `moment_bias_correction`, `StepSwitch`)."""

from __future__ import annotations

import itertools
import math
import pickle

import pytest
import torch
from sassha_optim import Sassha, StepSwitch, paper_lm_schedule
from torch import nn


def _quadratic(a: torch.Tensor, w0: torch.Tensor):
    """Separable quadratic L = ½ Σ a_i w_i²: Hessian diag(a), Hutchinson exact (z ⊙ Hz = a)."""
    w = nn.Parameter(w0.clone())

    def closure():
        return 0.5 * (a * w * w).sum()

    return w, closure


def test_preset_settings_are_the_papers():
    w = nn.Parameter(torch.ones(3))
    opt = Sassha.paper_lm([w], total_steps=50_000)
    g = opt.param_groups[0]
    assert g["lr"] == 0.3 and g["betas"] == (0.965, 0.99) and g["weight_decay"] == 2e-4
    assert g["rho"] == 0.02 and g["eps"] == 1e-4
    alpha = g["hessian_power"]
    assert isinstance(alpha, StepSwitch)
    assert (alpha.steps, alpha(1), alpha(2000), alpha(2001)) == (2000, 1.0, 1.0, 0.8)
    o = opt.options
    assert o["lazy_hessian"] == 10 and o["rho_warmup"] == 2000
    assert o["bias_correction"] == "none" and o["moment_bias_correction"] is False
    assert o["max_grad_norm"] == 1.0 and o["clip_before_perturbation"] is True
    assert Sassha.paper_lm([w], total_steps=1000, rho=0.05).param_groups[0]["rho"] == 0.05
    assert Sassha.paper_lm([w], total_steps=1000).options["rho_warmup"] == 40


def test_preset_closed_form_alpha_switch_and_no_bias_correction():
    """Two steps on a diagonal quadratic with N = 1: step 1 has ρ = 0 and α = 1, step 2 ρ > 0 and
    α = 0.8; no bias correction of m or D. Hessian refreshed on both steps (warm-up of k)."""
    a = torch.tensor([0.5, 2.0, 4.0])
    w0 = torch.tensor([0.3, -0.2, 0.1])  # ‖g‖ < 1: clipping inactive
    w, closure = _quadratic(a, w0)
    lr, b1, b2, eps, lam, rho = 0.1, 0.965, 0.99, 1e-4, 2e-4, 0.02
    opt = Sassha.paper_lm([w], total_steps=25, lr=lr)  # N = round(0.04 · 25) = 1
    opt.step(closure)
    m = (1 - b1) * a * w0
    d = (1 - b2) * a
    w1 = w0 * (1 - lr * lam) - lr * m / (d**1.0 + eps)
    torch.testing.assert_close(w.detach(), w1, rtol=1e-6, atol=1e-9)
    assert opt.param_groups[0]["_hessian_power_value"] == 1.0
    opt.step(closure)
    g1 = a * w1
    wt = w1 + rho * g1 / g1.norm()  # gradient and Hessian at w + ε (Hessian constant here)
    m = b1 * m + (1 - b1) * a * wt
    d = b2 * d + (1 - b2) * a
    w2 = w1 * (1 - lr * lam) - lr * m / (d**0.8 + eps)
    torch.testing.assert_close(w.detach(), w2, rtol=1e-6, atol=1e-9)
    assert opt.param_groups[0]["_hessian_power_value"] == 0.8
    # the package default (bias-corrected) would differ by 1/(1 − β1) already at step 1
    w_bc, closure_bc = _quadratic(a, w0)
    Sassha.paper_lm([w_bc], total_steps=25, lr=lr, moment_bias_correction=True).step(closure_bc)
    assert not torch.allclose(w_bc.detach(), w1, rtol=1e-3)


def _mlp(seed: int) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    return model, x, y


def test_rho_warmup_equals_unperturbed_then_perturbs():
    """ρ warm-up of 3 steps: identical to ρ = 0 (one closure call per step) for 3 steps, different
    (two calls) from step 4 on."""
    runs = {}
    for name, kw in {"warm": {"rho": 0.1, "rho_warmup": 3}, "zero": {"rho": 0.0}}.items():
        model, x, y = _mlp(0)
        opt = Sassha(model.parameters(), lr=0.05, lazy_hessian=2, **kw)
        calls = []

        def closure(model=model, x=x, y=y, calls=calls):
            calls.append(1)
            return nn.functional.mse_loss(model(x), y)

        traj = []
        for _ in range(4):
            n = len(calls)
            opt.step(closure)
            traj.append(([p.detach().clone() for p in model.parameters()], len(calls) - n))
        runs[name] = traj
    for t in range(3):
        assert runs["warm"][t][1] == 1
        for p, q in zip(runs["warm"][t][0], runs["zero"][t][0]):
            assert torch.equal(p, q)
    assert runs["warm"][3][1] == 2
    assert any(not torch.equal(p, q) for p, q in zip(runs["warm"][3][0], runs["zero"][3][0]))


def test_clipping_happens_before_the_ascent_step():
    """ε = ρ c g/(‖c g‖ + perturb_eps) with c the clip coefficient: with perturb_eps = 1 the clipped
    and the unclipped ε differ, and the perturbed weights match the clipped one."""
    model, x, y = _mlp(1)
    loss = 100 * nn.functional.mse_loss(model(x), y)  # ‖g‖ ≫ 1
    loss.backward()
    params = list(model.parameters())
    g = [p.grad.clone() for p in params]
    w = [p.detach().clone() for p in params]
    norm = torch.sqrt(sum((t * t).sum() for t in g))
    assert norm > 5
    rho, peps, cap = 0.5, 1.0, 1.0
    opt = Sassha(
        params, rho=rho, perturb_eps=peps, max_grad_norm=cap, clip_before_perturbation=True
    )
    opt.perturb_weights(zero_grad=False)
    coef = cap / (float(norm) + 1e-6)
    for p, p0, gi in zip(params, w, g):
        clipped = rho * coef * gi / (coef * norm + peps)
        unclipped = rho * gi / (norm + peps)
        torch.testing.assert_close(p.detach() - p0, clipped, rtol=1e-5, atol=1e-8)
        assert not torch.allclose(clipped, unclipped, rtol=1e-2, atol=0)
        torch.testing.assert_close(p.grad, coef * gi)  # the first-pass gradient itself is clipped
    # without the option the first pass is not clipped
    with torch.no_grad():
        for p, p0, gi in zip(params, w, g):
            p.copy_(p0)
            p.grad = gi.clone()
    plain = Sassha(params, rho=rho, perturb_eps=peps, max_grad_norm=cap)
    plain.perturb_weights(zero_grad=False)
    for p, p0, gi in zip(params, w, g):
        torch.testing.assert_close(p.detach() - p0, rho * gi / (norm + peps), rtol=1e-5, atol=1e-8)


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_schedule_warmup_cosine_floor():
    w = nn.Parameter(torch.ones(2))
    opt = Sassha.paper_lm([w], total_steps=100, lr=0.3)
    sched = paper_lm_schedule(opt, total_steps=100)
    lrs = []
    for _ in range(100):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step()
    lrs.append(opt.param_groups[0]["lr"])
    assert lrs[0] == pytest.approx(0.3 / 5) and lrs[3] == pytest.approx(0.3 * 4 / 5)
    assert lrs[4] == pytest.approx(0.3)  # peak after N = 4 warm-up steps
    assert all(b <= a + 1e-15 for a, b in itertools.pairwise(lrs[4:]))
    assert lrs[100] == pytest.approx(1.5e-5)
    assert lrs[52] == pytest.approx(1.5e-5 + (0.3 - 1.5e-5) * 0.5)


def test_preset_state_dict_and_pickle_round_trip():
    model, x, y = _mlp(2)
    opt = Sassha.paper_lm(model.parameters(), total_steps=50)
    for _ in range(3):
        opt.step(lambda: nn.functional.mse_loss(model(x), y))
    pickle.dumps(opt.param_groups[0]["hessian_power"])
    sd = opt.state_dict()
    assert sd["sassha"]["options"]["rho_warmup"] == 2
    other = Sassha.paper_lm(model.parameters(), total_steps=50)
    other.load_state_dict(sd)
    assert isinstance(other.param_groups[0]["hessian_power"], StepSwitch)
    assert other.global_step == 3


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"clip_before_perturbation": True}, "clip_before_perturbation"),
        ({"rho_warmup": -1}, "rho_warmup"),
        ({"rho_warmup": 1.5}, "rho_warmup"),
        ({"moment_bias_correction": "no"}, "moment_bias_correction"),
    ],
)
def test_new_options_reject_bad_values(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Sassha([nn.Parameter(torch.ones(2))], **kwargs)


def test_preset_and_schedule_reject_bad_values():
    w = [nn.Parameter(torch.ones(2))]
    with pytest.raises(ValueError, match="total_steps"):
        Sassha.paper_lm(w, total_steps=0)
    with pytest.raises(ValueError, match="warmup_fraction"):
        Sassha.paper_lm(w, total_steps=10, warmup_fraction=1.5)
    with pytest.raises(ValueError, match="steps"):
        StepSwitch(-1, 1.0, 0.8)
    assert math.isfinite(StepSwitch(0, 1.0, 0.8)(1))
