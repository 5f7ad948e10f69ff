import numpy as np
import pytest
import torch
from rsd_skills import DIAYN, LSD, METRA, Config, SkillTrainer
from rsd_skills.sac import SAC

T = 20


def metra(cls=METRA, **kw):
    cfg = Config(hidden=32, **kw).resolved(cls.name, T, 2)
    return cls(2, cfg, T)


@pytest.mark.slow
def test_metra_reward_sums_to_the_phi_displacement_along_z():
    m = metra()
    obs = torch.cumsum(torch.randn(T + 1, 2) * 0.1, 0)
    z = torch.nn.functional.normalize(torch.randn(1, 2), dim=-1).expand(T, -1)
    r = m.reward({"obs": obs[:-1], "next_obs": obs[1:], "z": z})
    expected = ((m.phi(obs[-1:]) - m.phi(obs[:1])) * z[:1]).sum()
    torch.testing.assert_close(r.sum(), expected, rtol=1e-5, atol=1e-5)


def test_metra_mean_sq_constraint_is_the_squared_norm_over_d():
    a, b = metra(dim_option=4), metra(dim_option=4, metra_constraint="mean_sq")
    dphi = torch.randn(10, 4)
    torch.testing.assert_close(b.constraint_distance(dphi), a.constraint_distance(dphi) / 4)


def test_metra_lambda_grows_on_a_violated_batch_and_defaults_differ_from_rsd():
    m = metra()
    assert m.log_lambda.exp().item() == pytest.approx(30.0)
    obs = torch.randn(128, 2)
    lam = m.log_lambda.item()
    m.update({"obs": obs, "next_obs": obs + 100, "z": torch.randn(128, 2)}, torch.Generator())
    assert m.log_lambda.item() > lam


def test_lsd_layers_have_spectral_norm_at_most_one():
    m = metra(LSD)
    obs = torch.randn(64, 2)
    for _ in range(20):  # power iterations run in training mode
        m.update({"obs": obs, "next_obs": obs + 0.1, "z": torch.randn(64, 2)}, torch.Generator())
    m.eval()
    for layer in m.phi:
        if isinstance(layer, torch.nn.Linear):
            sigma = torch.linalg.matrix_norm(layer.weight.detach(), ord=2)
            assert sigma.item() <= 1.0 + 0.05


def test_diayn_prior_reward_and_zero_shot_skill():
    m = metra(DIAYN)
    z = m.eval_skills(4000, torch.Generator().manual_seed(0))
    assert abs(z.mean().item()) < 0.05 and abs(z.std().item() - 1) < 0.05
    obs = torch.randn(5, 2)
    zz = torch.randn(5, 2)
    torch.testing.assert_close(m.reward({"obs": obs, "next_obs": obs, "z": zz}), m.log_q(zz, obs))
    torch.testing.assert_close(m.goal_skill(obs, obs), m.posterior(obs)[0])


def test_sac_target_uses_the_minimum_of_the_target_qs_and_the_entropy_term():
    sac = SAC(3, 1, hidden=8, depth=1, gamma=0.5, alpha_init=0.2)
    with torch.no_grad():
        sac.q1_targ.net[-1].bias.add_(5.0)  # the first target is larger: the minimum is the second
    x, a, x2 = torch.randn(16, 3), torch.rand(16, 1) * 2 - 1, torch.randn(16, 3)
    r, term = torch.randn(16), torch.zeros(16)
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(16, 1, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a2, logp2 = sac.policy.sample(x2, noise)
        q_next = torch.min(sac.q1_targ(x2, a2), sac.q2_targ(x2, a2)) - 0.2 * logp2
        assert torch.equal(q_next, sac.q2_targ(x2, a2) - 0.2 * logp2)
        target = r + 0.5 * q_next
        q1, q2 = sac.q1(x, a), sac.q2(x, a)
        expected = 0.5 * ((q1 - target) ** 2).mean() + 0.5 * ((q2 - target) ** 2).mean()
    logs = sac.update(x, a, r, x2, term, g)
    assert logs["loss_q"] == pytest.approx(expected.item(), rel=1e-5)


def test_sac_temperature_moves_log_pi_towards_the_entropy_target():
    x = torch.randn(32, 2)
    args = (x, torch.zeros(32, 1), torch.zeros(32), x, torch.zeros(32), torch.Generator())
    sac = SAC(2, 1, hidden=8, depth=1, target_entropy=50.0)  # entropy below the target: α grows
    a0 = sac.alpha.item()
    sac.update(*args)
    assert sac.alpha.item() > a0
    sac = SAC(2, 1, hidden=8, depth=1, target_entropy=-50.0)  # entropy above the target: α falls
    sac.update(*args)
    assert sac.alpha.item() < a0


@pytest.mark.slow
def test_sac_learns_a_one_dimensional_reach_task():
    # x ∈ [−1, 1], x' = clip(x + 0.25 a), reward −|x'|: reach the origin from anywhere
    torch.manual_seed(0)
    sac = SAC(1, 1, hidden=64, depth=2, lr=3e-3, gamma=0.8, alpha_init=0.05)
    rng = np.random.default_rng(0)
    g = torch.Generator().manual_seed(0)
    data = []
    x = rng.uniform(-1, 1)
    for step in range(600):
        a = sac.act(torch.tensor([[x]], dtype=torch.float32), g)[0, 0].item()
        x2 = float(np.clip(x + 0.25 * a, -1, 1))
        data.append((x, a, -abs(x2), x2))
        x = x2 if step % 8 != 7 else rng.uniform(-1, 1)
        if len(data) >= 64:
            idx = rng.integers(0, len(data), 64)
            b = torch.tensor([data[i] for i in idx], dtype=torch.float32)
            sac.update(b[:, :1], b[:, 1:2], b[:, 2], b[:, 3:4], torch.zeros(64), g)
    for start in (-0.8, 0.8):
        x = start
        for _ in range(6):
            a = sac.act(torch.tensor([[x]], dtype=torch.float32), deterministic=True)[0, 0].item()
            x = float(np.clip(x + 0.25 * a, -1, 1))
        assert abs(x) < 0.3, (start, x)


@pytest.mark.parametrize("algo", ["metra", "lsd", "diayn", "rsd_uniform"])
def test_every_method_trains_through_the_shared_loop(algo):
    cfg = Config(hidden=16, n_traj=4, grad_steps=3, batch_size=32, min_buffer=40, replay_size=1000)
    tr = SkillTrainer(algo, "point", cfg, seed=0, env_kwargs={"horizon": 10})
    records = tr.train(3)
    assert records[-1]["env_steps"] == 3 * 4 * 10
    assert "loss_q" in records[-1] and np.isfinite(records[-1]["loss_q"])
