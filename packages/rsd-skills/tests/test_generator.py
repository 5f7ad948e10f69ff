import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rsd_skills import RSD, Config, Population, SkillGenerator
from rsd_skills.generator import confidence, tanh_normal_log_prob, train_generator


def cfg(**kw):
    return Config(hidden=16, n_traj=8, **kw).resolved("rsd", 20, 2)


@settings(max_examples=20)
@given(st.floats(-5, 5), st.floats(-5, 5), st.floats(-6, 3))
def test_samples_lie_in_the_box_and_std_in_bounds(m0, m1, log_std):
    gen = SkillGenerator(2)
    with torch.no_grad():
        gen.mean.copy_(torch.tensor([m0, m1]))
        gen.log_std.fill_(log_std)
    z = gen.rsample(200, torch.Generator().manual_seed(0))
    assert (z.abs() <= 1).all()
    std = gen.params()[1]
    assert ((std >= 0.1 - 1e-7) & (std <= 0.5 + 1e-7)).all()


def test_tanh_normal_log_prob_matches_change_of_variables():
    mu, std = torch.tensor([0.2, -0.4]), torch.tensor([0.3, 0.5])
    u = torch.tensor([[0.1, -0.2], [0.5, 0.3]])
    x = torch.tanh(u)
    ref = torch.distributions.Normal(mu, std).log_prob(u).sum(-1) - torch.log(1 - x**2).sum(-1)
    torch.testing.assert_close(tanh_normal_log_prob(x, mu, std), ref, rtol=1e-4, atol=1e-4)


def test_synthetic_regret_moves_the_generator_towards_its_peak_and_reset_restores_it():
    c = torch.tensor([0.5, -0.3])
    gen = SkillGenerator(2)
    start = torch.linalg.vector_norm(torch.tanh(gen.params()[0]) - c)
    train_generator(
        gen, lambda z: -((z - c) ** 2).sum(-1), Population(2, 10), torch.zeros(0, 2),
        cfg(w2=0.0, w3=0.0), torch.Generator().manual_seed(0),
    )  # fmt: skip
    end = torch.linalg.vector_norm(torch.tanh(gen.params()[0]) - c)
    assert end < 0.5 * start
    gen.reset()
    assert torch.equal(gen.mean, torch.zeros(2))
    assert torch.allclose(gen.log_std, torch.full((2,), math.log(0.3)))


def test_confidence_pulls_the_generator_towards_far_reached_states():
    reached = torch.tensor([[0.8, 0.8]]).repeat(16, 1) + 0.01 * torch.randn(16, 2)
    gen = SkillGenerator(2)
    train_generator(
        gen, lambda z: torch.zeros(len(z)), Population(2, 10), reached, cfg(w2=0.0, w3=3.0),
        torch.Generator().manual_seed(0),
    )  # fmt: skip
    loc = torch.tanh(gen.params()[0])
    assert torch.linalg.vector_norm(loc - torch.tensor([0.8, 0.8])) < 0.5 * math.sqrt(2 * 0.8**2)


def test_confidence_guards():
    mu, std = torch.zeros(2), torch.full((2,), 0.3)
    assert confidence(torch.zeros(0, 2), mu, std, 8).item() == 0.0
    few = torch.tensor([[0.9, 0.9], [0.0, 0.0]])
    assert confidence(few, mu, std, 8).item() == pytest.approx(
        min(0.0, tanh_normal_log_prob(few, mu, std).max().item())
    )
    assert confidence(torch.zeros(16, 2), mu, std, 8).item() <= 0.0


def test_population_add_rules():
    pop = Population(2, window=3)
    assert len(pop) == 1
    assert not pop.add(
        torch.tensor([0.05, 0.0]), torch.full((2,), 0.3), 0.1
    )  # within 0.1: not added
    assert pop.add(torch.tensor([1.0, 0.0]), torch.full((2,), 0.3), 0.1)
    assert pop.add(torch.tensor([0.0, 1.0]), torch.full((2,), 0.3), 0.1)
    with pytest.raises(ValueError, match="full"):
        pop.add(torch.tensor([-1.0, 0.0]), torch.full((2,), 0.3), 0.1)


def test_population_pop_removes_exactly_the_lowest_regret_member():
    pop = Population(2, window=4)
    for mu in ([1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]):
        pop.add(torch.tensor(mu), torch.full((2,), 0.3), 0.1)
    before = [m.mu.clone() for m in pop.members]
    index = pop.remove_lowest(torch.tensor([0.3, -0.2, 0.5, 0.1]))
    assert index == 1
    assert [m.mu.tolist() for m in pop.members] == [before[i].tolist() for i in (0, 2, 3)]


def test_mixture_weights_sum_to_one_respect_the_floor_and_follow_progress():
    pop = Population(2, window=10)
    pop.add(
        torch.tensor([2.0, 2.0]), torch.full((2,), 0.3), 0.1
    )  # component at tanh(2) ≈ (0.96, 0.96)
    x_old = torch.tensor([[0.0, 0.5]])
    x_new = torch.tensor([[0.9, 0.9]])  # the reached states moved towards the second component
    w = pop.mixture_weights(x_new, x_old)
    assert w.sum().item() == pytest.approx(1.0)
    assert (w >= 0.1 / 10 / (1 + 0.1 / 10 * 2) - 1e-9).all()
    assert w[1] > w[0]
    torch.testing.assert_close(pop.mixture_weights(x_new, torch.zeros(0, 2)), torch.full((2,), 0.5))
    z = pop.sample(100, w, torch.Generator().manual_seed(0))
    assert (z.abs() <= 1).all()
    unit = pop.sample(100, w, torch.Generator().manual_seed(0), unit=True)
    torch.testing.assert_close(torch.linalg.vector_norm(unit, dim=-1), torch.ones(100))


def test_round_trigger_fires_at_repeat_times_population_and_window_is_never_exceeded():
    c = Config(hidden=8, n_traj=4, repeat_time=2, window_size=3, gen_steps=3)
    c = c.resolved("rsd", 20, 2)
    m = RSD(2, c, 20, 2, torch.zeros(2).numpy())
    from rsd_skills.sac import SAC

    agent = SAC(4, 2, hidden=8, depth=2)
    g = torch.Generator().manual_seed(0)
    rounds_at = []
    for epoch in range(1, 40):
        before = m.rounds
        m.train_skills(4, g, True, agent)
        m.observe(torch.randn(4, 2))
        if m.rounds > before:
            rounds_at.append((epoch, len(m.population)))
        assert len(m.population) <= 3
    # the first round after repeat × 1 = 2 epochs; each later one after repeat × |population| epochs
    epochs = [e for e, _ in rounds_at]
    assert epochs[0] == 2
    for (e0, size), e1 in zip(rounds_at, epochs[1:]):
        assert e1 - e0 == 2 * size
    assert m.has_snapshot


def test_mlp_zero_token_generator_equals_the_free_generator():
    torch.manual_seed(0)
    free = SkillGenerator(2, arch="free")
    mlp = SkillGenerator(2, arch="mlp_zero_token", n_tokens=8, hidden=16, depth=2)
    for a, b in zip(free.params(), mlp.params()):
        torch.testing.assert_close(a, b)
    x = torch.tanh(torch.randn(8, 2))
    for g in (free, mlp):
        opt = torch.optim.Adam(g.parameters(), lr=3e-2)
        loss = -(g.log_prob(x) * torch.linspace(-1, 1, 8)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for a, b in zip(free.params(), mlp.params()):
        torch.testing.assert_close(a, b)
