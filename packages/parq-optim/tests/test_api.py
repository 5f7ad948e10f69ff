"""The jobs as Python calls (the README quickstart) and the configs' bounds and cross-field checks."""

import json
import subprocess
import sys

import pytest
from parq_optim._contract import ConfigError
from parq_optim.cli import main
from parq_optim.config import (
    MAX_BITS,
    QUANTIZER_NAMES,
    DemoConfig,
    ExportConfig,
    TrainRunConfig,
)
from parq_optim.experiments import run_demo, run_export, run_train


def test_readme_quickstart_python_calls(tmp_path):
    run = run_train(TrainRunConfig(data="synthetic", bits=1, epochs=2, hidden=16), out=tmp_path)
    assert run.diverged is None and run.checkpoint == tmp_path / "checkpoint.pt"
    assert run.record["test_acc"] > 50 and run.record["train_config"]["method"] == "parq"
    exported = run_export(ExportConfig(checkpoint=run.checkpoint), out=tmp_path)
    assert exported.record["roundtrip_max_abs_diff"] == 0.0 and exported.file.is_file()


def test_run_demo_returns_the_rows_the_cli_writes():
    result = run_demo(DemoConfig(quick=True, epochs=1, seeds=1))
    methods = ("fp", "ste", "binaryrelax", "parq")
    assert [r["method"] for r in result.rows] == [*methods, *methods[1:]]
    assert result.plot is None and set(result.as_dict()) >= {"rows", "seeds", "diverged"}


def test_quantizer_names_agree_with_the_library():
    from parq_optim.optim import QUANTIZERS
    from parq_optim.train import MAX_BITS as TRAIN_MAX_BITS

    assert sorted(QUANTIZER_NAMES) == sorted(QUANTIZERS) and MAX_BITS == TRAIN_MAX_BITS


@pytest.mark.parametrize(
    ("cls", "field", "value"),
    [
        (TrainRunConfig, "lr", 1e30),
        (TrainRunConfig, "lr", -1e30),
        (TrainRunConfig, "epochs", 10**11),
        (TrainRunConfig, "steps", 10**11),
        (TrainRunConfig, "bits", MAX_BITS + 1),
        (TrainRunConfig, "anneal_end_frac", 0.0),
        (TrainRunConfig, "steepness", float("nan")),
        (DemoConfig, "seeds", 10**11),
        (DemoConfig, "weight_decay", 1e30),
        (ExportConfig, "checkpoint", "no/such/file.pt"),
    ],
)
def test_configs_refuse_absurd_values_naming_the_field(cls, field, value):
    with pytest.raises(ConfigError) as err:
        cls(**{field: value})
    assert err.value.field == field


@pytest.mark.parametrize(
    "argv", [["--lr", "1e30"], ["--epochs", "100000000000"], ["--heads", "-100000000000"]]
)
def test_cli_refuses_absurd_values_before_any_work(argv, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["train", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"argument {argv[0]}" in err and not out.exists()


def test_cross_field_checks_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match="charlm") as err:
        TrainRunConfig(steps=10)
    assert err.value.field == "steps"
    with pytest.raises(ConfigError) as err:
        TrainRunConfig(model="charlm", data="synthetic")
    assert err.value.field == "data"
    with pytest.raises(ConfigError) as err:  # found by the library call, before any data is read
        run_train(TrainRunConfig(quantizer="unif", bits=0))
    assert err.value.field == "bits"


def test_named_datasets_come_from_icml25_data(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ICML25_DATA", raising=False)
    with pytest.raises(ConfigError, match="ICML25_DATA is not set"):
        run_train(TrainRunConfig(model="charlm", data="tinyshakespeare", steps=2))
    folder = tmp_path / "tinyshakespeare"
    folder.mkdir()
    (folder / "input.txt").write_text("To be, or not to be: that is the question. " * 60)
    monkeypatch.setenv("ICML25_DATA", str(tmp_path))
    out = tmp_path / "run"
    argv = [
        "train",
        "--model",
        "charlm",
        "--data",
        "tinyshakespeare",
        "--steps",
        "2",
        "--hidden",
        "8",
        "--heads",
        "2",
        "--layers",
        "1",
        "--context",
        "8",
        "--quiet",
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    res = json.loads((out / "results.json").read_text())
    assert res["model"] == "charlm" and res["config"]["data"] == "tinyshakespeare"
    assert res["history"][-1]["step"] == 2


def test_training_that_never_happened_fails_with_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "train",
        "--data",
        "synthetic",
        "--epochs",
        "1",
        "--hidden",
        "8",
        "--lr",
        "1e6",
        "--quiet",
        "--out",
        str(out),
    ]
    assert main(argv) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "diverged" in err
    res = json.loads((out / "results.json").read_text())
    assert res["checkpoint"] is None and "test_acc" not in res


def test_help_imports_no_torch():
    code = (
        "import sys; from parq_optim.cli import build_cli; build_cli(); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
