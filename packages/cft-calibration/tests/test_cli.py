import json
import subprocess
import sys

import pytest
from cft_calibration.cli import build_cli, main

pytest.importorskip("transformers")


def jsonl(tmp_path, n=40, name="d.jsonl"):
    lines = []
    for i in range(n):
        q = {
            "question": f"Which word is a fruit number {i} ?",
            "choices": ["apple", "dog", "iron", "red"],
            "answer": i % 4 if i % 3 else 0,
        }
        lines.append(json.dumps(q))
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_every_command_is_declared_with_its_own_results_file():
    described = {c["name"]: c["writes"][0] for c in build_cli().describe()}
    assert described == {
        "evaluate": "evaluate.json",
        "finetune": "finetune.json",
        "regime": "regime.json",
        "demo": "results.json",
    }


@pytest.mark.slow
def test_evaluate_with_a_tiny_model_writes_metrics_and_diagrams(tmp_path):
    data = jsonl(tmp_path)
    out = tmp_path / "out"
    rc = main(
        [
            "evaluate",
            "--model",
            "tiny-clm",
            "--data",
            str(data),
            "--calibration-data",
            str(data),
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0
    res = json.loads((out / "evaluate.json").read_text())
    assert res["n_items"] == 40 and 0 <= res["metrics"]["conf_ece"] <= 1
    assert res["temperature_scaling"]["metrics"]["accuracy"] == res["metrics"]["accuracy"]
    assert (out / "evaluate_reliability.png").stat().st_size > 1000
    assert str(tmp_path) not in (out / "evaluate.json").read_text()
    # a second run refuses to overwrite
    assert (
        main(["evaluate", "--model", "tiny-clm", "--data", str(data), "--out", str(out), "--quiet"])
        == 2
    )


def test_finetune_rcft_then_evaluate_the_saved_model(tmp_path):
    data = jsonl(tmp_path)
    out = tmp_path / "ft"
    rc = main(
        [
            "finetune",
            "--model",
            "tiny-clm",
            "--data",
            str(data),
            "--method",
            "rcft",
            "--epochs",
            "1",
            "--lr",
            "1e-3",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0
    res = json.loads((out / "finetune.json").read_text())
    assert (
        res["train_config"]["sft_loss"] == "full_vocab" and res["train_config"]["e_step_every"] == 1
    )
    assert len(res["e_steps"]) == 1 and res["n_val"] == 4
    rc = main(
        [
            "evaluate",
            "--model",
            str(out / "model"),
            "--data",
            str(data),
            "--out",
            str(tmp_path / "ev"),
            "--quiet",
        ]
    )
    assert rc == 0


def test_regime_reports_a_verdict_that_is_never_non_calibratable(tmp_path):
    out = tmp_path / "rg"
    assert (
        main(
            [
                "regime",
                "--model",
                "tiny-clm",
                "--data",
                str(jsonl(tmp_path)),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    res = json.loads((out / "regime.json").read_text())
    assert res["regime"] in ("undetermined", "calibratable (empirical witness)")


def test_bad_data_is_one_line_naming_the_flag(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Q", "choices": ["a", "b"], "answer": NaN}\n')
    rc = main(["evaluate", "--model", "tiny-clm", "--data", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--data" in err[0] and "bad.jsonl:1" in err[0]
    assert not (tmp_path / "o" / "evaluate.json").exists()


def test_model_folder_without_config_names_model(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    rc = main(
        [
            "evaluate",
            "--model",
            str(tmp_path / "empty"),
            "--data",
            str(jsonl(tmp_path)),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "--model" in err and "config.json" in err


@pytest.mark.slow
def test_demo_quick_on_the_embedded_data_cuts_the_aligned_models_ece(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cft_calibration.cli",
            "demo",
            "--quick",
            "--out",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    s = res["summary"]
    aligned = s["aligned"]["test_conf_ece"][0]
    assert s["aligned"]["test_conf_ece"][0] > s["base"]["test_conf_ece"][0]
    assert s["cft"]["test_conf_ece"][0] < aligned and s["rcft"]["test_conf_ece"][0] < aligned
    assert s["ts"]["test_accuracy"] == s["aligned"]["test_accuracy"]
    assert (out / "demo_reliability.png").is_file()
