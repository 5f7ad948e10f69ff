import numpy as np
import pytest
import torch
from rsd_skills import Config, SkillTrainer, evaluate_coverage, evaluate_zero_shot, random_baseline
from rsd_skills.trainer import read_checkpoint


def tiny(**kw):
    base = dict(
        hidden=16, n_traj=4, grad_steps=4, batch_size=32, min_buffer=40, replay_size=2000,
        repeat_time=1, window_size=3, gen_steps=4,
    )  # fmt: skip
    base.update(kw)
    return Config(**base)


def make(algo="rsd", seed=0, **kw):
    return SkillTrainer(
        algo, "point_maze", tiny(**kw), seed=seed, env_kwargs={"maze": "u", "horizon": 10}
    )


def params(tr):
    return torch.cat(
        [p.detach().flatten() for p in [*tr.agent.parameters(), *tr.method.parameters()]]
    )


def test_same_seed_gives_identical_logs_and_a_different_seed_does_not():
    a, b, c = make(seed=3), make(seed=3), make(seed=4)
    la, lb, lc = a.train(3), b.train(3), c.train(3)
    assert la == lb
    assert torch.equal(params(a), params(b))
    assert la != lc


@pytest.mark.parametrize("algo", ["rsd", "metra"])
def test_checkpoint_save_load_resumes_exactly(tmp_path, algo):
    straight = make(algo)
    straight.train(6)
    first = make(algo)
    first.train(3)
    path = first.save(tmp_path / "ckpt.pt")
    resumed = SkillTrainer.load(path)
    assert resumed.epoch == 3 and resumed.env_steps == first.env_steps
    resumed.train(3)
    assert resumed.history == straight.history
    assert torch.equal(params(resumed), params(straight))
    if algo == "rsd":
        assert resumed.method.rounds == straight.method.rounds > 0
        assert torch.equal(resumed.method.population.locs(), straight.method.population.locs())


def test_evaluation_metrics_are_well_formed_and_random_baseline_is_low():
    tr = make("metra")
    cov = evaluate_coverage(tr)
    assert 1 <= cov["coverage"] <= 7 and cov["xy"].shape == (64, 11, 2)
    zero = evaluate_zero_shot(tr)
    assert zero["n_goals"] == 6 and 0 <= zero["success_rate"] <= 1
    assert len(zero["per_goal_distance"]) == 6
    rand = random_baseline(tr.env)
    assert rand["coverage"] >= 1 and "zero_shot" in rand


def test_time_limit_is_not_terminal_unless_asked():
    tr = make("metra")
    tr.train(1)
    assert tr.buffer.data["terminal"][: len(tr.buffer)].sum() == 0
    tr = make("metra", timeout_is_terminal=True)
    tr.train(1)
    assert tr.buffer.data["terminal"][: len(tr.buffer)].sum() == 4  # the last step of each episode


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"dim_option": 0}, "dim_option"),
        ({"window_size": 0}, "window_size"),
        ({"repeat_time": 0}, "repeat_time"),
        ({"lr": float("nan")}, "lr"),
        ({"gamma": 1.5}, "gamma"),
        ({"metra_constraint": "l1"}, "metra_constraint"),
        ({"gen_std_init": 0.9}, "gen_std"),
        ({"min_buffer": 10, "replay_size": 5}, "min_buffer"),
    ],
)
def test_invalid_config_is_rejected_with_the_field_named(kw, field):
    with pytest.raises(ValueError, match=field):
        Config(**kw).validate()


def test_unknown_algo_environment_and_bad_horizon():
    with pytest.raises(ValueError, match="rsd, rsd_uniform, metra, lsd, diayn"):
        SkillTrainer("sac", "point")
    with pytest.raises(ValueError, match="point, point_maze, ant"):
        SkillTrainer("rsd", "moon")
    with pytest.raises(ValueError, match="horizon"):
        SkillTrainer("rsd", "point", env_kwargs={"horizon": 0})
    with pytest.raises(ValueError, match="seed"):
        SkillTrainer("rsd", "point", seed=-1)


def test_bad_checkpoints_are_rejected_with_a_clear_message(tmp_path):
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        read_checkpoint(empty)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="cannot be read"):
        read_checkpoint(junk)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(ValueError, match="not an rsd-skills checkpoint"):
        read_checkpoint(other)
    tr = make("metra")
    state = tr.state()
    state["agent"]["q1.net.0.weight"][0, 0] = float("nan")
    torch.save(state, tmp_path / "nan.pt")
    with pytest.raises(ValueError, match="NaN"):
        read_checkpoint(tmp_path / "nan.pt")
    del state["buffer"]
    torch.save(state, tmp_path / "partial.pt")
    with pytest.raises(ValueError, match="buffer"):
        read_checkpoint(tmp_path / "partial.pt")


def test_actions_are_mapped_onto_the_environment_bounds():
    tr = make("metra")
    np.testing.assert_allclose(
        tr.to_env_action(np.array([[-1.0, 1.0], [0.0, 0.5]])), [[-0.2, 0.2], [0.0, 0.1]]
    )
