import json

import pytest
from parq_optim.cli import main


def test_demo_tiny_end_to_end(tmp_path):
    rc = main(
        ["demo", "--quick", "--epochs", "3", "--seeds", "1", "--quiet", "--out", str(tmp_path)]
    )
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert {r["method"] for r in res["rows"]} == {"fp", "ste", "binaryrelax", "parq"}
    assert "torch" in res["versions"] and res["wall_time_s"] > 0


def test_train_then_export(tmp_path, capsys):
    rc = main(
        [
            "train",
            "--data",
            "synthetic",
            "--bits",
            "1",
            "--prox",
            "parq",
            "--epochs",
            "2",
            "--per-channel",
            "--quiet",
            "--out",
            str(tmp_path / "t"),
        ]
    )
    assert rc == 0
    res = json.loads((tmp_path / "t" / "results.json").read_text())
    assert all(v["distinct_snapped"] <= 2 for v in res["metrics"]["layers"].values())
    rc = main(
        [
            "export",
            "--checkpoint",
            str(tmp_path / "t" / "checkpoint.pt"),
            "--quiet",
            "--out",
            str(tmp_path / "e"),
        ]
    )
    assert rc == 0
    rep = json.loads((tmp_path / "e" / "results.json").read_text())["report"]
    assert rep["roundtrip_max_abs_diff"] == 0.0 and rep["bits_per_weight"] < 2
    assert rep["file_bytes"] > 0 and "bits/weight" in capsys.readouterr().out


def test_config_file(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"epochs": 1, "bits": 0, "prox": "ste", "data": "synthetic"}))
    assert main(["train", "--config", str(cfg), "--quiet", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "results.json").read_text())["config"]["bits"] == 0


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["train", "--data", "synthetic", "--bits", "-1"], "--bits: got -1"),
        (["train", "--data", "synthetic", "--prox", "magic"], "--prox: got 'magic'"),
        (["train", "--data", "synthetic", "--quantizer", "unif", "--bits", "0"], "b >= 1"),
        (["train", "--data", "synthetic", "--quant-period", "0"], "--quant-period: got 0"),
        (["train", "--data", "/no/such/dir"], "--data: folder '/no/such/dir' not found"),
        (["export", "--checkpoint", "/no/file.pt"], "--checkpoint: file not found"),
    ],
)
def test_bad_input_exit_2(argv, needle, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
