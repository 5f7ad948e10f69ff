import json

import pytest
from rsd_skills.cli import main

TINY = [
    "--hidden", "16", "--n-traj", "4", "--grad-steps", "3", "--batch-size", "32",
    "--min-buffer", "40", "--episode-length", "10", "--quiet",
]  # fmt: skip


@pytest.mark.slow
def test_train_evaluate_and_resume_end_to_end(tmp_path):
    out = tmp_path / "run"
    argv = [
        "train",
        "--algo",
        "rsd",
        "--maze",
        "u",
        "--epochs",
        "3",
        "--eval-every",
        "1",
        "--repeat-time",
        "1",
    ]
    assert main([*argv, *TINY, "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["algo"] == "rsd" and res["epochs"] == 3 and res["env_steps"] == 120
    assert 1 <= res["coverage"]["coverage"] <= 7
    assert [p["epoch"] for p in res["curve"]] == [0, 1, 2, 3]
    assert (out / "checkpoint.pt").is_file() and (out / "trajectories.png").is_file()
    # evaluate writes its own file beside the training results
    assert (
        main(["evaluate", "--checkpoint", str(out / "checkpoint.pt"), "--quiet", "--out", str(out)])
        == 0
    )
    ev = json.loads((out / "evaluate.json").read_text())
    assert ev["coverage"]["coverage"] == res["coverage"]["coverage"]
    # resume to 5 epochs into another folder: the curve continues
    out2 = tmp_path / "more"
    resume = ["train", "--resume", str(out / "checkpoint.pt"), "--epochs", "5", "--eval-every", "1"]
    assert main([*resume, *TINY, "--out", str(out2)]) == 0
    more = json.loads((out2 / "results.json").read_text())
    assert more["epochs"] == 5 and [p["epoch"] for p in more["curve"]] == [0, 1, 2, 3, 4, 5]
    assert more["history"][:3] == res["history"]


def test_existing_results_are_not_replaced_without_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--algo", "metra", "--env", "point", "--epochs", "1", *TINY, "--out", str(out)]
    assert main(argv) == 0
    before = (out / "results.json").read_bytes()
    assert main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "results.json").read_bytes() == before
    assert main([*argv, "--overwrite"]) == 0


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["train", "--epochs", "0"], "--epochs"),
        (["train", "--algo", "sac"], "--algo"),
        (["train", "--env", "mars"], "--env"),
        (["train", "--env", "halfcheetah"], "--env"),
        (["train", "--env", "NoSuchEnv-v3"], "--env"),
        (["train", "--env", "HalfCheetah-v5", "--xy-dims", "0,1,2"], "--xy-dims"),
        (["train", "--maze", "does-not-exist.txt"], "--maze"),
        (["train", "--lr", "-1"], "--lr"),
        (["demo", "--algos", "rsd,ppo"], "--algos"),
        (["evaluate"], "--checkpoint"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(tmp_path, capsys, argv, flag):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and flag in err[0]
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_corrupt_checkpoint_and_nan_maze_name_their_flag(tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"garbage")
    assert main(["evaluate", "--checkpoint", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "--checkpoint" in capsys.readouterr().err
    maze = tmp_path / "maze.txt"
    maze.write_text("11111\n1nan01\n11111\n")
    assert main(["train", "--maze", str(maze), "--out", str(tmp_path / "o2")]) == 2
    assert "row 2" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_quick_beats_random_actions_on_coverage(tmp_path):
    assert main(["demo", "--quick", "--quiet", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    random_cov = res["random_actions"][0]["coverage"]
    assert res["summary"]["rsd"]["coverage_mean"] > random_cov
    assert res["summary"]["metra"]["coverage_mean"] > random_cov
