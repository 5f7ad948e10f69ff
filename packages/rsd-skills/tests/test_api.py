"""The library calls behind the CLI (issue 24): the README quickstart's call, bounds refusals naming the
field (library) and the flag (CLI), and a run in which training never happened."""

import subprocess
import sys

import pytest
from rsd_skills import (
    Config,
    ConfigError,
    DemoConfig,
    EvaluateConfig,
    TrainConfig,
    run_evaluate,
    run_train,
)
from rsd_skills.cli import main

TINY = {
    "hidden": 16, "n_traj": 4, "grad_steps": 3, "batch_size": 32, "min_buffer": 40,
    "episode_length": 10,
}  # fmt: skip
RESULT_KEYS = {
    "algo", "env", "resolved_config", "epochs", "env_steps", "grad_steps", "train_seconds",
    "env_steps_per_second", "coverage", "zero_shot", "curve", "history",
}  # fmt: skip


def test_quickstart_call_train_then_evaluate(tmp_path):
    cfg = TrainConfig(algo="metra", env="point", epochs=2, eval_every=1, **TINY)
    result = run_train(cfg)  # out=folder also writes the checkpoint and plots
    assert set(result.as_dict()) == RESULT_KEYS  # the results file's fields, as before
    assert result.epochs == 2 and result.env_steps == 80 and result.grad_steps == 6
    assert [p["epoch"] for p in result.curve] == [0, 1, 2]
    assert result.resolved_config["lambda_init"] == 30.0  # the per-algorithm default, resolved
    checkpoint = result.trainer.save(tmp_path / "checkpoint.pt")
    ev = run_evaluate(EvaluateConfig(checkpoint=checkpoint, n_skills=8))
    assert ev.epoch == 2 and {"coverage", "random_actions"} <= set(ev.as_dict())


@pytest.mark.parametrize(
    ("cls", "kw", "name"),
    [
        (Config, {"lr": 1e30}, "lr"),
        (Config, {"n_traj": 10**11}, "n_traj"),
        (Config, {"lambda_init": -1.0}, "lambda_init"),
        (TrainConfig, {"epochs": 10**11}, "epochs"),
        (TrainConfig, {"algo": "ppo"}, "algo"),
        (DemoConfig, {"seeds": 0}, "seeds"),
        (EvaluateConfig, {"checkpoint": "no-such.pt"}, "checkpoint"),
    ],
)
def test_out_of_range_fields_name_the_field(cls, kw, name):
    with pytest.raises(ConfigError) as info:
        cls(**kw)
    assert info.value.field == name


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["train", "--epochs", "1e11"], "--epochs"),
        (["train", "--n-traj", "100000000000"], "--n-traj"),
        (["train", "--lr", "1e30"], "--lr"),
        (["demo", "--seeds", "100000000000"], "--seeds"),
        (["evaluate", "--n-skills", "1e30", "--checkpoint", "x.pt"], "--n-skills"),
    ],
)
def test_absurd_flags_are_refused_before_any_work(tmp_path, capsys, argv, flag):
    out = tmp_path / "o"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]
    assert not out.exists()


def test_training_that_never_happened_fails_with_one_line(tmp_path, capsys):
    with pytest.raises(ConfigError, match="training never happened") as info:
        run_train(TrainConfig(env="point", epochs=1, **{**TINY, "min_buffer": 1000}))
    assert info.value.field == "min_buffer"
    out = tmp_path / "o"
    argv = ["train", "--env", "point", "--epochs", "1", "--min-buffer", "1000", "--hidden", "16"]
    assert main([*argv, "--episode-length", "10", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--min-buffer" in err[0] and "never happened" in err[0]
    assert not out.exists()  # a failed run leaves no empty --out folder


def test_environment_horizons_of_the_job_configs():
    from rsd_skills.experiments import build_env

    assert build_env(DemoConfig())[0].horizon == 100  # not the paper's 200
    assert build_env(TrainConfig())[0].horizon == 100
    assert build_env(TrainConfig(paper_scale=True))[0].horizon == 200
    assert build_env(TrainConfig(env="point", episode_length=7))[0].horizon == 7


def test_maze_names_agree_and_help_does_not_import_torch():
    from rsd_skills.config import MAZE_NAMES
    from rsd_skills.envs import MAZES

    assert MAZE_NAMES == tuple(MAZES)
    code = (
        "import sys, rsd_skills.cli; rsd_skills.cli.build_cli(); assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
