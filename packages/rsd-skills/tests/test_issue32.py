"""Evaluation skill sources, the standing floor of coverage, any gymnasium id, the regret SNR
diagnostic, paper scale and the throughput rewrites (batched passes, fused clipping) being exact."""

import numpy as np
import pytest
import torch
from rsd_skills import Config, GymVecEnv, SkillTrainer, evaluate_coverage, random_baseline
from rsd_skills.config import PAPER_SCALE
from rsd_skills.envs import make_env
from rsd_skills.generator import AgentSnapshot, Member, estimate_value
from rsd_skills.sac import SAC, clip_and_step

gym = pytest.importorskip("gymnasium")


class Slider(gym.Env):
    """(x, y, t) observation; actions in [−1, 1]² move (x, y) by 0.3·a; starts at (0.5, 0.5)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,))
    action_space = gym.spaces.Box(-1.0, 1.0, (2,))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.s = np.array([0.5, 0.5, 0.0])
        return self.s.copy(), {}

    def step(self, action):
        self.s[:2] += 0.3 * np.asarray(action)
        self.s[2] += 1
        return self.s.copy(), 0.0, False, False, {}


def tiny(**kw):
    base = dict(hidden=16, n_traj=4, grad_steps=2, batch_size=16, min_buffer=40, replay_size=500)
    base.update(kw)
    return Config(**base)


def slider_trainer(algo="metra"):
    env = GymVecEnv(Slider, horizon=20, xy_dims=(0, 1), goals=np.array([[3.0, 0.5]]))
    return SkillTrainer(algo, env, tiny(), seed=0)


def test_a_policy_that_does_not_move_scores_the_standing_floor_and_one_that_moves_beats_it():
    # Issue 32's Ant table: 4.0 ± 0.0 cells for every method = the floor of a body that stands still
    # (the Ant starts where four unit cells meet). The floor is now reported beside random actions,
    # and coverage must rise above it as soon as the deterministic policy moves.
    tr = slider_trainer()
    floor = random_baseline(tr.env, n_skills=8)["standing_coverage"]
    assert floor == 1  # (0.5, 0.5): one cell
    last = tr.agent.policy.net[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()  # tanh(μ) = 0: the mean action is the mid-range action
    still = evaluate_coverage(tr, n_skills=8)
    assert still["coverage"] == floor and still["mean_abs_action"] == 0.0
    sampled = evaluate_coverage(tr, n_skills=8, deterministic=False)
    assert sampled["coverage"] > floor  # the same policy's samples move
    with torch.no_grad():
        last.bias[0] = 3.0  # mean action +x, |tanh 3| ≈ 1
    moving = evaluate_coverage(tr, n_skills=8)
    assert moving["coverage"] >= 6 and moving["mean_abs_action"] > 0.45
    np.testing.assert_allclose(moving["xy"][:, -1, 0], 0.5 + 20 * 0.3 * np.tanh(3.0), rtol=1e-4)


def test_skill_sources_box_and_own():
    tr = SkillTrainer("rsd", "point_maze", tiny(), seed=0, env_kwargs={"maze": "u", "horizon": 10})
    pop = tr.method.population
    pop.members = [Member(torch.tensor([2.0, -2.0]), torch.full((2,), 0.01))]
    tr.method.weights = torch.ones(1)
    own = evaluate_coverage(tr, n_skills=16, skills="own")
    assert own["skill_source"] == "own"
    np.testing.assert_allclose(own["skills"], np.tile(np.tanh([2.0, -2.0]), (16, 1)), atol=0.05)
    box = evaluate_coverage(tr, n_skills=16, skills="box")
    assert (np.abs(box["skills"]) <= 1).all() and box["skills"].std() > 0.3
    assert np.array_equal(box["skills"], evaluate_coverage(tr, n_skills=16)["skills"])  # RSD prior
    metra = SkillTrainer("metra", "point", tiny(), seed=0)
    sphere = evaluate_coverage(metra, n_skills=8, skills="own")["skills"]
    np.testing.assert_allclose(np.linalg.norm(sphere, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="skills must be one of"):
        evaluate_coverage(metra, skills="gaussian")


def test_regret_diagnostic_measures_without_changing_the_run():
    kw = dict(repeat_time=1, window_size=3, gen_steps=3)
    a = SkillTrainer("rsd", "point", tiny(**kw), seed=1, env_kwargs={"horizon": 10})
    b = SkillTrainer(
        "rsd", "point", tiny(regret_diagnostic=16, **kw), seed=1, env_kwargs={"horizon": 10}
    )
    la, lb = a.train(8), b.train(8)
    assert [r["epoch"] for r in la] == [r["epoch"] for r in lb]
    for ra, rb in zip(la, lb):
        assert ra == {k: v for k, v in rb.items() if not k.startswith("round_reg_")}
    snr = [r for r in lb if "round_reg_snr" in r]
    assert snr and all(
        r["round_reg_noise_std"] >= 0 and r["round_reg_signal_std"] >= 0 for r in snr
    )


def test_batched_value_estimate_equals_the_per_draw_loop():
    torch.manual_seed(0)
    agent = SAC(5, 2, hidden=8)
    snap = AgentSnapshot(5, 2, 8, 2)
    snap.copy_from(agent)
    s0, z = torch.randn(3), torch.rand(7, 2)
    noise = torch.randn(4, 7, 2)
    x = torch.cat([s0.expand(7, -1), z], -1)
    loop = []
    for eps in noise:
        a, logp = agent.policy.sample(x, eps)
        loop.append(torch.min(agent.q1(x, a), agent.q2(x, a)) - agent.alpha * logp)
    expected = torch.stack(loop).mean(0)
    torch.testing.assert_close(estimate_value(agent, s0, z, noise), expected.detach())
    torch.testing.assert_close(estimate_value(snap, s0, z, noise), expected.detach())


def test_fused_clip_equals_clip_grad_norm():
    torch.manual_seed(0)
    nets = [torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)]
    for net in nets:
        net.weight.grad = torch.randn(3, 4) * 5
        net.bias.grad = torch.randn(3) * 5
    nets[1].load_state_dict(nets[0].state_dict())
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        q.grad = p.grad.clone()
    norm = torch.nn.utils.clip_grad_norm_(list(nets[0].parameters()), 3.0)
    opt = torch.optim.SGD(nets[1].parameters(), lr=0.0)
    got = clip_and_step(opt, list(nets[1].parameters()), 3.0)
    assert float(got) == pytest.approx(float(norm), rel=1e-6)
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    scalar = [torch.nn.Parameter(torch.tensor(-7.5)), torch.nn.Parameter(torch.tensor(-7.5))]
    for p in scalar:
        p.grad = torch.tensor(-7.5)
    torch.nn.utils.clip_grad_norm_([scalar[0]], 3.0)
    clip_and_step(torch.optim.SGD([scalar[1]], lr=0.0), [scalar[1]], 3.0)
    assert torch.equal(scalar[0].grad, scalar[1].grad)


def test_paper_scale_is_the_official_budget():
    cfg = Config.paper_scale()
    assert (cfg.hidden, cfg.n_traj, cfg.grad_steps, cfg.batch_size) == (1024, 16, 200, 1024)
    assert cfg.replay_size == 300_000 and cfg.min_buffer == 10_000
    assert Config.paper_scale(hidden=32).hidden == 32 and set(PAPER_SCALE) <= set(cfg.to_dict())


def test_unknown_environment_names_the_accepted_ones():
    with pytest.raises(ValueError, match="gymnasium id"):
        make_env("halfcheetah")


@pytest.mark.mujoco
def test_halfcheetah_by_gymnasium_id_reads_x_and_never_terminates(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    monkeypatch.chdir(
        tmp_path
    )  # MuJoCo writes MUJOCO_LOG.TXT (a model-compiler warning) in the cwd
    env = make_env("HalfCheetah-v5", horizon=5, xy_dims=(0,), norm_steps=50)
    assert env.obs_dim == 18 and env.spec()["env_id"] == "HalfCheetah-v5"
    _, info = env.reset(seed=0, num_envs=2)
    _, _, term, _, info = env.step(np.ones((2, env.act_dim)))
    np.testing.assert_allclose(info["xy"][0], [env._envs[0].unwrapped.data.qpos[0], 0.0])
    assert not term.any() and np.abs(env.goals()[:, 0]).min() >= 2.0
    hopper = make_env("Hopper-v5", horizon=3, xy_dims=(0,), norm_steps=30)
    assert not hopper._envs[0].unwrapped._terminate_when_unhealthy
    with pytest.raises(ValueError, match="unknown gymnasium environment id"):
        make_env("NoSuchEnv-v0")
