import math

import numpy as np
import pytest
import torch
from rsd_skills import RSD, Config, SkillTrainer
from rsd_skills.generator import AgentSnapshot, estimate_value, regret
from rsd_skills.sac import SAC

T = 20


def tiny(**kw):
    base = dict(hidden=32, n_traj=4, grad_steps=10, batch_size=64, min_buffer=80, replay_size=5000)
    base.update(kw)
    return Config(**base)


def make_rsd(**kw):
    cfg = tiny(**kw).resolved("rsd", T, 2)
    return RSD(2, cfg, T, 2, np.zeros(2)), cfg


def zero_phi(method):
    with torch.no_grad():
        for p in method.phi.parameters():
            p.zero_()


def test_psi_is_bounded_and_zero_for_zero_phi():
    m, _ = make_rsd()
    x = torch.randn(100, 2) * 1000
    psi = m.psi(x)
    assert (psi.abs() <= 1).all()
    zero_phi(m)
    assert torch.equal(m.psi(x), torch.zeros(100, 2))


def test_reward_is_positive_towards_the_goal_and_telescopes():
    m, _ = make_rsd()
    obs = torch.linspace(0, 1, T + 1)[:, None].repeat(1, 2)  # a straight episode
    z = m.psi(obs[-1:]).expand(T, -1) * 1.0
    batch = {"obs": obs[:-1], "next_obs": obs[1:], "z": z}
    r = m.reward(batch)
    psi0, psi_t = m.psi(obs[:1])[0], m.psi(obs[-1:])[0]
    expected = T * (torch.linalg.vector_norm(z[0] - psi0) - torch.linalg.vector_norm(z[0] - psi_t))
    torch.testing.assert_close(r.sum(), expected, rtol=1e-6, atol=1e-6)
    step = {"obs": obs[:1], "next_obs": obs[1:2], "z": m.psi(obs[1:2])}
    if not torch.equal(m.psi(obs[:1]), m.psi(obs[1:2])):
        assert m.reward(step).item() > 0


def test_constraint_term_never_exceeds_slack_over_t_and_lambda_moves_the_right_way():
    m, cfg = make_rsd()
    obs = torch.randn(256, 2)
    far = {"obs": obs, "next_obs": obs + 50.0, "s0": torch.zeros(256, 2), "z": torch.rand(256, 2)}
    lam0 = m.log_lambda.item()
    logs = m.update(far, torch.Generator().manual_seed(0))
    assert logs["constraint"] <= cfg.dual_slack / T + 1e-12
    assert logs["constraint"] < 0 and m.log_lambda.item() > lam0  # violated: λ grows
    m, cfg = make_rsd()  # fresh Adam state for the second case
    near = {"obs": obs, "next_obs": obs, "s0": torch.zeros(256, 2), "z": torch.rand(256, 2)}
    lam1 = m.log_lambda.item()
    logs = m.update(near, torch.Generator().manual_seed(0))
    assert logs["constraint"] == pytest.approx(cfg.dual_slack / T)  # satisfied: clamped at ε/T
    assert m.log_lambda.item() < lam1  # and λ shrinks


def test_representation_constraint_holds_after_training_on_a_tiny_env():
    # a large learning rate so that the objective pushes Ψ steps to the bound within a few epochs
    cfg = tiny(grad_steps=30, lr=3e-3)
    tr = SkillTrainer("rsd", "point", cfg, seed=0, env_kwargs={"horizon": T})
    tr.train(8)
    batch = tr.buffer.sample(2000, np.random.default_rng(0))
    with torch.no_grad():
        step = torch.linalg.vector_norm(
            tr.method.psi(batch["next_obs"]) - tr.method.psi(batch["obs"]), dim=-1
        )
    steps = step.numpy() * T  # in units of the bound 1/T
    assert np.quantile(steps, 0.95) <= 1.05  # ||Ψ(s')−Ψ(s)|| ≤ 1/T (soft, through the dual)
    assert np.quantile(steps, 0.99) <= 1.15
    assert np.median(steps) > 0.3  # and the objective has pushed steps towards the bound


def test_value_estimate_equals_a_hand_computation():
    sac = SAC(4, 2, hidden=8, depth=1, alpha_init=0.5)
    s0, z = torch.tensor([0.3, -0.2]), torch.tensor([[0.5, 0.1], [-0.4, 0.9]])
    noise = torch.randn(3, 2, 2)
    x = torch.cat([s0.expand(2, -1), z], -1)
    expected = torch.zeros(2)
    for eps in noise:
        mean, log_std = sac.policy(x)
        u = mean + log_std.exp() * eps
        a = torch.tanh(u)
        logp = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).sum(-1)
        logp = logp - torch.log(1 - a.pow(2)).sum(-1)
        expected += (torch.min(sac.q1(x, a), sac.q2(x, a)) - 0.5 * logp) / 3
    torch.testing.assert_close(estimate_value(sac, s0, z, noise), expected, rtol=1e-4, atol=1e-5)


def test_regret_is_zero_against_an_identical_snapshot_and_v_before_any_snapshot():
    sac = SAC(4, 2, hidden=8, depth=1)
    snap = AgentSnapshot(4, 2, 8, 1)
    snap.copy_from(sac)
    s0, z = torch.zeros(2), torch.rand(6, 2) * 2 - 1
    reg = regret(sac, snap, s0, z, 3, torch.Generator().manual_seed(1))
    assert torch.equal(reg, torch.zeros(6))
    v = estimate_value(sac, s0, z, torch.randn(3, 6, 2, generator=torch.Generator().manual_seed(2)))
    reg0 = regret(sac, None, s0, z, 3, torch.Generator().manual_seed(2))
    torch.testing.assert_close(reg0, v, rtol=0, atol=0)


def test_regret_sign_on_a_constructed_case():
    # the current Qs are the snapshot's plus 1 for skills with z_0 > 0 only: regret is +1 there, 0 elsewhere
    sac = SAC(4, 2, hidden=8, depth=1)
    snap = AgentSnapshot(4, 2, 8, 1)
    snap.copy_from(sac)

    class Shifted(torch.nn.Module):
        def __init__(self, q, shift):
            super().__init__()
            self.q, self.shift = q, shift

        def forward(self, x, a):
            return self.q(x, a) + self.shift(x)

    sac.q1 = Shifted(snap.q1, lambda x: (x[:, 2] > 0).float())
    sac.q2 = Shifted(snap.q2, lambda x: (x[:, 2] > 0).float())
    z = torch.tensor([[0.5, 0.0], [-0.5, 0.0], [0.9, 0.3]])
    reg = regret(sac, snap, torch.zeros(2), z, 3, torch.Generator().manual_seed(0))
    torch.testing.assert_close(reg, torch.tensor([1.0, 0.0, 1.0]))
    # a value that dropped gives negative regret
    sac.q1 = Shifted(snap.q1, lambda x: torch.full((len(x),), -2.0))
    sac.q2 = Shifted(snap.q2, lambda x: torch.full((len(x),), -2.0))
    assert (regret(sac, snap, torch.zeros(2), z, 3, torch.Generator().manual_seed(0)) < 0).all()


def test_rsd_skills_are_goals_in_the_box_and_zero_shot_skill_is_psi_of_the_goal():
    m, _ = make_rsd()
    z = m.eval_skills(500, torch.Generator().manual_seed(0))
    assert z.min() >= -1 and z.max() <= 1 and z.abs().max() > 0.9
    g = torch.randn(5, 2)
    torch.testing.assert_close(m.goal_skill(g, torch.zeros(5, 2)), m.psi(g))
    assert math.isclose(m.cfg.repr_max_step, T)
