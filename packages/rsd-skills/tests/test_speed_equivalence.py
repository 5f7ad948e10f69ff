"""The throughput rewrites (issue 32) leave every number of a run unchanged.

``data/golden_runs.json`` was written by the code *before* the rewrites (0.3.0; ``python
tests/test_speed_equivalence.py`` rewrites it): for a tiny config with generator rounds (population
filling up, then members removed) and gradient clipping at 3, the per-epoch logs (losses, λ, α, regret,
population) and every parameter after training. The same seed must give the same values to 1e-3: the
file was written on another CPU, whose SIMD kernels round some float32 sums differently, and 8 epochs
of training amplify that (on the machine of 0.6.0 the 0.5.0 code itself differs from the file by up to
1.0e-4, in one bias of METRA's φ, and 2.5e-6 in RSD's generator log-std). A change of the arithmetic
(a wrong term, a lost step) moves these numbers far more; exact rewrites were checked bit for bit on one
machine, before against after.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from rsd_skills import Config, SkillTrainer

GOLDEN = Path(__file__).parent / "data" / "golden_runs.json"
ALGOS = ("rsd", "rsd_uniform", "metra")
EPOCHS = 8
TOL = 1e-3  # float32 rounding across CPUs (see the docstring)


def fingerprint(algo: str) -> dict:
    torch.set_num_threads(1)
    cfg = Config(
        hidden=8, n_traj=3, grad_steps=3, batch_size=16, min_buffer=30, replay_size=500,
        repeat_time=1, window_size=3, gen_steps=5,
    )  # fmt: skip
    tr = SkillTrainer(algo, "point_maze", cfg, seed=5, env_kwargs={"maze": "u", "horizon": 10})
    logs = tr.train(EPOCHS)
    params = {
        f"{group}.{name}": p.detach().flatten().tolist()
        for group, module in (("agent", tr.agent), ("method", tr.method))
        for name, p in module.state_dict().items()
        if p.is_floating_point()
    }
    extra = {
        k: v.flatten().tolist()
        for k, v in tr.method.extra_state().items()
        if isinstance(v, torch.Tensor)
    }
    if hasattr(tr.method, "population"):
        extra.update({f"population.{k}": v.flatten().tolist()
                      for k, v in tr.method.population.state().items()
                      if isinstance(v, torch.Tensor)})  # fmt: skip
    return {"logs": logs, "params": params, "extra": extra}


@pytest.mark.parametrize("algo", ALGOS)
def test_same_seed_same_numbers_as_before_the_rewrites(algo):
    want = json.loads(GOLDEN.read_text())[algo]
    got = fingerprint(algo)
    assert len(got["logs"]) == len(want["logs"]) == EPOCHS
    for epoch, (g, w) in enumerate(zip(got["logs"], want["logs"])):
        assert set(g) == set(w), f"epoch {epoch}: log keys differ"
        for key in w:
            assert g[key] == pytest.approx(w[key], rel=TOL, abs=TOL), (epoch, key)
    assert set(got["params"]) == set(want["params"])
    assert set(got["extra"]) == set(want["extra"])
    for section in ("params", "extra"):
        for name, values in want[section].items():
            torch.testing.assert_close(
                torch.tensor(got[section][name], dtype=torch.float64),
                torch.tensor(values, dtype=torch.float64),
                rtol=TOL,
                atol=TOL,
                msg=lambda m, name=name, section=section: f"{section} {name}: {m}",
            )


@pytest.mark.parametrize("scale", [0.5, 1 - 1e-5, 1 - 1e-7, 1.0, 1 + 1e-7, 2.0, float("inf")])
@pytest.mark.parametrize("shapes", [[(3, 4), (3,)], [()], [(1,)]])
def test_clip_fast_path_equals_clip_grad_norm_bit_for_bit(scale, shapes):
    # gradients scaled so that their norm sits below, at and above max_norm = 3 (and inf: non-finite)
    from rsd_skills.sac import clip_and_step

    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(s, generator=gen) for s in shapes]
    norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    grads = [g * (3.0 * scale / norm) for g in grads]
    ref = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    ours = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for r, o, g in zip(ref, ours, grads):
        r.grad, o.grad = g.clone(), g.clone()
    want = torch.nn.utils.clip_grad_norm_(ref, 3.0)
    got = clip_and_step(torch.optim.SGD(ours, lr=0.0), ours, 3.0)
    assert got == pytest.approx(float(want), rel=1e-6, nan_ok=True)
    for r, o in zip(ref, ours):
        assert torch.equal(r.grad, o.grad) or (r.grad.isnan().all() and o.grad.isnan().all())


def test_lean_adam_equals_torch_adam_bit_for_bit():
    # the generator's optimizer (0.5.0): torch.optim.Adam's single-tensor update, operation for operation
    from rsd_skills.generator import LeanAdam

    gen = torch.Generator().manual_seed(0)
    start = [torch.randn(2, generator=gen), torch.randn(3, 2, generator=gen)]
    ref = [torch.nn.Parameter(t.clone()) for t in start]
    ours = [torch.nn.Parameter(t.clone()) for t in start]
    opt_ref, opt_ours = torch.optim.Adam(ref, lr=0.03), LeanAdam(ours, lr=0.03)
    for step in range(60):
        grads = [torch.randn(t.shape, generator=gen) * 3 for t in start]
        if step % 7 == 3:
            grads[1] = None  # a parameter without a gradient is skipped (its step count too)
        opt_ref.zero_grad(set_to_none=True)
        opt_ours.zero_grad()
        for r, o, g in zip(ref, ours, grads):
            r.grad, o.grad = (None, None) if g is None else (g.clone(), g.clone())
        opt_ref.step()
        opt_ours.step()
        for r, o in zip(ref, ours):
            assert torch.equal(r, o), step


def test_prepared_value_estimate_equals_the_module_calls_bit_for_bit():
    # Regret/ValueEstimate walk prepared layer lists; the module path is the reference arithmetic
    from rsd_skills.generator import AgentSnapshot, Regret, ValueEstimate
    from rsd_skills.sac import SAC

    torch.manual_seed(0)
    agent = SAC(7, 2, hidden=16)
    snap = AgentSnapshot(7, 2, 16, 2)
    snap.copy_from(agent)
    with torch.no_grad():
        for p in agent.parameters():
            p.add_(0.1 * torch.randn_like(p))
    s0, z = torch.randn(5), torch.rand(8, 2) * 2 - 1
    for net in (agent, snap):
        fast, slow = ValueEstimate(net), ValueEstimate(net)
        slow.policy = slow.q1 = slow.q2 = None  # force the module calls
        noise = torch.randn(3, 8, 2)
        x = torch.cat([s0.expand(8, -1), z], -1).repeat(3, 1)
        eps = noise.reshape(24, 2)
        with torch.no_grad():
            half_sq = -0.5 * eps.pow(2)
            assert torch.equal(fast(x, eps, half_sq, 3, 8), slow(x, eps, half_sq, 3, 8))
    reg = Regret(agent, snap, s0, 3)
    a = reg(z, torch.Generator().manual_seed(4))
    b = reg(z, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and a.abs().sum() > 0


if __name__ == "__main__":  # regenerate (only from code known to be right)
    GOLDEN.write_text(json.dumps({a: fingerprint(a) for a in ALGOS}) + "\n")
    sys.exit(0)
