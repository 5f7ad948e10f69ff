import numpy as np
import pytest
from rsd_skills import Config, GymVecEnv, SkillTrainer

gym = pytest.importorskip("gymnasium")


class Slider(gym.Env):
    """A toy gymnasium env: 3-D observation (x, y, t), actions in [−1, 1]² move (x, y) by 0.1·a."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,))
    action_space = gym.spaces.Box(-1.0, 1.0, (2,))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.s = np.zeros(3)
        return self.s.copy(), {}

    def step(self, action):
        self.s[:2] += 0.1 * np.asarray(action)
        self.s[2] += 1
        return self.s.copy(), 0.0, False, False, {}


def test_any_gymnasium_env_with_a_position_trains_and_evaluates():
    env = GymVecEnv(Slider, horizon=10, xy_dims=(0, 1), goals=np.array([[0.5, 0.0], [0.0, -0.5]]))
    cfg = Config(hidden=16, n_traj=3, grad_steps=2, batch_size=16, min_buffer=30, replay_size=500)
    tr = SkillTrainer("metra", env, cfg, seed=0)
    tr.train(2)
    assert tr.env_steps == 60
    from rsd_skills import evaluate_coverage, evaluate_zero_shot

    assert evaluate_coverage(tr, n_skills=4)["coverage"] >= 1
    assert evaluate_zero_shot(tr)["n_goals"] == 2
    goal_obs = env.goal_obs(np.array([[0.5, 0.0]]))
    np.testing.assert_allclose(goal_obs, [[0.5, 0.0, 0.0]])


@pytest.mark.mujoco
@pytest.mark.slow
def test_ant_observation_position_and_a_two_epoch_smoke_run():
    pytest.importorskip("mujoco")
    from rsd_skills import make_ant

    env = make_ant(horizon=20, norm_steps=200)
    assert env.obs_dim == 29
    _obs, info = env.reset(seed=0, num_envs=2)
    _, _, term, _, info = env.step(np.zeros((2, env.act_dim)))
    qpos = env._envs[0].unwrapped.data.qpos[:2]
    np.testing.assert_allclose(info["xy"][0], qpos)
    assert not term.any()
    cfg = Config(hidden=16, n_traj=2, grad_steps=2, batch_size=16, min_buffer=40, replay_size=500)
    tr = SkillTrainer("rsd", env, cfg, seed=0)
    tr.train(2)
    assert tr.env_steps == 80
