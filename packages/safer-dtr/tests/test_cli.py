import json

import numpy as np
import pytest
from safer_dtr.cli import build_cli, main

TINY = ["--n-stays", "200", "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "16",
        "--epochs-stage1", "2", "--epochs-refine", "2", "--epochs-finetune", "1", "--batch-size", "32",
        "--encoder", "hashing", "--hash-dim", "32", "--quiet"]  # fmt: skip


def _json(path):
    return json.loads(path.read_text())


@pytest.mark.slow
def test_train_recommend_evaluate_synthetic(tmp_path):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--out", str(out)]) == 0
    res = _json(out / "results.json")
    assert (out / "model.pt").is_file() and res["subcommand"] == "train"
    assert set(res["metrics_test"]) >= {"SAFER", "SAFER-F (stage 1)", "majority class"}
    assert main(["recommend", "--alpha", "0.2", "--out", str(out), "--quiet"]) == 0
    rec = _json(out / "recommend.json")
    assert rec["alpha"] == 0.2 and 0 <= rec["realized_fdp"] <= 1
    lines = (out / "recommendations.csv").read_text().splitlines()
    assert lines[0].startswith("icustayid,released") and len(lines) == rec["n_test"] + 1
    assert main(["evaluate", "--reps", "10", "--alphas", "0.1,0.3", "--cs", "0.3",
                 "--mortality-epochs", "1", "--out", str(out), "--quiet"]) == 0  # fmt: skip
    ev = _json(out / "evaluate.json")
    assert list(ev["selection"]) == ["0.3"] and ev["selection"]["0.3"]["alphas"] == [0.1, 0.3]
    assert "oracle_cf" in ev["mortality"]["methods"]["SAFER"]
    # results are kept: a second train into the same folder is refused
    assert main(["train", *TINY, "--out", str(out)]) == 2


def test_generate_then_train_on_folder(tmp_path, capsys):
    data = tmp_path / "cohort"
    assert main(["generate", "--n-stays", "150", "--out", str(data), "--quiet"]) == 0
    assert {p.name for p in data.iterdir()} >= {
        "mimictable.csv",
        "notes.csv",
        "oracle.npz",
        "generate.json",
    }
    out = tmp_path / "run"
    assert main(["train", *TINY, "--data", str(data), "--out", str(out)]) == 0
    assert "mimictable.csv" in _json(out / "results.json")["data"]
    assert (
        main(["recommend", "--out", str(out), "--quiet"]) == 2
    )  # a folder checkpoint needs --data
    assert "argument --data" in capsys.readouterr().err
    assert main(["recommend", "--data", str(data), "--out", str(out), "--quiet"]) == 0


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["recommend", "--alpha", "0"], "--alpha"),
        (["recommend", "--alpha", "1"], "--alpha"),
        (["recommend", "--c", "1.5"], "--c"),
        (["evaluate", "--alphas", "0.1,1.2"], "--alphas"),
        (["train", "--heads", "3", "--d-model", "16"], "--heads"),
        (["train", "--encoder", "hf"], "--encoder-path"),
        (["recommend"], "--checkpoint"),
        (["generate", "--n-stays", "1000000000000"], "--n-stays"),
        (["train", "--epochs-stage1", "0"], "--epochs-stage1"),
        (["train", "--lr-stage1", "1e30"], "--lr-stage1"),
        (["demo", "--reps", "100000000000"], "--reps"),
        (["demo", "--methods", "SAFER,XGBoost"], "--methods"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, capsys, argv, flag):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]


def test_bad_checkpoint_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"garbage")
    assert main(["recommend", "--checkpoint", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "--checkpoint" in capsys.readouterr().err


def test_every_flag_has_a_default_in_its_help():
    for command in build_cli().describe():
        for option in command["options"]:
            if option["takes_value"] and option["flags"][0] not in ("--config",):
                assert "default" in option["help"], (command["name"], option["flags"])


@pytest.mark.slow
def test_demo_quick_direction(tmp_path):
    """Robust direction on the quick demo: realized FDR at or below α on average over the splits
    (within 3 Monte Carlo s.e.) and SAFER above the random baseline on survivor HR@3."""
    out = tmp_path / "demo"
    argv = ["demo", "--quick", "--n-stays", "400", "--reps", "100", "--cs", "0.3",
            "--alphas", "0.1,0.3,0.5", "--methods", "SAFER,random", "--mortality-epochs", "1",
            "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    res = _json(out / "results.json")
    sel = res["selection"]["0.3"]
    for a, f, se in zip(sel["alphas"], sel["fdr"]["mean"], sel["fdr"]["se"]):
        assert f <= a + 3 * se
    m = res["metrics"]
    assert m["SAFER"]["survivors"]["hr@3"] > m["random"]["survivors"]["hr@3"] + 0.2
    assert res["seeds"] == 1 and np.isfinite(res["kappa"]["test"]["mean_survivors"])
