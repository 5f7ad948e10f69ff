"""The Python calls behind the CLI (the README quickstart) and the config bounds."""

import json
import subprocess
import sys

import pytest
import torch
from sorbet_snn import (
    DistillConfig,
    EnergyConfig,
    EvaluateConfig,
    ExportConfig,
    run_distill,
    run_energy,
    run_evaluate,
    run_export,
)
from sorbet_snn.cli import main
from sorbet_snn.config import ConfigError, DemoConfig, glue_folder
from sorbet_snn.data import word_tokenizer, write_synthetic_glue
from transformers import BertConfig, BertForSequenceClassification


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A small synthetic SST-2 folder and a tiny word-level teacher with a classification head."""
    root = tmp_path_factory.mktemp("api")
    data = write_synthetic_glue(root / "SST-2", (300, 100, 20), seed=0)
    teacher = root / "teacher"
    tok = word_tokenizer(teacher)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                     num_labels=2)  # fmt: skip
    BertForSequenceClassification(cfg).save_pretrained(str(teacher))
    return root, data, teacher


def test_quickstart_python_calls(tiny, tmp_path):
    """The README quickstart: distil, then evaluate, export and count energy, all from Python."""
    _, data, teacher = tiny
    cfg = DistillConfig(data=data, teacher=teacher, stages=("S1", "S2", "S3", "S4"), max_steps=3,
                        max_len=16, val_size=50, eval_every=0, teacher_gate=False)  # fmt: skip
    result = run_distill(cfg, tmp_path / "run")
    res = result.as_dict()
    assert list(res) == ["task", "teacher", "train_examples", "val_examples", "dev_split",
                         "dev_examples", "stages", "majority_baseline", "teacher_gate",
                         "energy"]  # fmt: skip
    assert res["teacher_gate"]["passed"] is False  # a random teacher, distilled anyway
    assert res["stages"]["S4"]["agreement_with_S3"] == 1.0 and res["stages"]["S3"]["steps"] == 3
    assert (
        result.snn_dir == tmp_path / "run" / "snn" and (result.snn_dir / "spiking.json").is_file()
    )
    ev = run_evaluate(EvaluateConfig(model=result.snn_dir, data=data))
    assert ev.forward == "spiking" and ev.metrics == res["stages"]["S4"]["dev"]
    exp = run_export(ExportConfig(model=tmp_path / "run" / "stages" / "S3"), tmp_path / "exp")
    assert exp.time_steps == 16 and (exp.folder / "spiking.json").is_file()
    energy = run_energy(EnergyConfig(model=exp.folder, data=data, max_examples=10))
    assert energy.report["samples"] == 10 and energy.as_dict()["e_snn_pJ"] > 0


def test_diverged_training_fails_naming_the_rate(tiny, tmp_path, monkeypatch, capsys):
    import sorbet_snn.distill as distill

    def diverge(*args, desc="train", **kwargs):
        raise FloatingPointError(f"{desc}: loss is nan at step 1")

    monkeypatch.setattr(distill, "train_stage", diverge)
    _, data, teacher = tiny
    out = tmp_path / "o"
    argv = ["distill", "--data", str(data), "--teacher", str(teacher), "--stages", "S1,S2,S3",
            "--max-len", "16", "--no-teacher-gate", "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--lr" in err[0] and "diverged" in err[0]
    assert not out.exists()  # no results for a run that did not train


def test_s3_diverging_at_its_own_rate_names_s3_lr(tiny, tmp_path, monkeypatch, capsys):
    import sorbet_snn.distill as distill

    real = distill.train_stage

    def diverge_in_s3(*args, desc="train", **kwargs):
        if desc.startswith("S3"):
            raise FloatingPointError(f"{desc}: loss is nan at step 1")
        return real(*args, desc=desc, **kwargs)

    monkeypatch.setattr(distill, "train_stage", diverge_in_s3)
    _, data, teacher = tiny
    argv = ["distill", "--data", str(data), "--teacher", str(teacher), "--stages", "S1,S2,S3",
            "--max-len", "16", "--max-steps", "1", "--s3-lr", "5", "--no-teacher-gate",
            "--out", str(tmp_path / "o"), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--s3-lr" in err[0] and "S3" in err[0]


def test_random_teacher_stops_at_the_gate_in_one_line(tiny, tmp_path, capsys):
    """A teacher no better than a constant prediction: distil stops before S1, one line, exit 2."""
    _, data, teacher = tiny
    out = tmp_path / "o"
    argv = ["distill", "--data", str(data), "--teacher", str(teacher), "--stages", "S1,S2,S3,S4",
            "--max-len", "16", "--val-size", "50", "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--teacher-gate" in err[0] and "--no-teacher-gate" in err[0]
    assert "not above the majority class" in err[0] or "not above the best constant" in err[0]
    assert not (out / "stages" / "S1").exists()  # stopped before distilling
    with pytest.raises(ConfigError, match="teacher gate") as info:
        run_distill(DistillConfig(data=data, teacher=teacher, stages=("S1",), max_len=16,
                                  val_size=50), tmp_path / "p")  # fmt: skip
    assert info.value.field == "teacher_gate"


@pytest.mark.parametrize(
    ("cls", "kwargs", "field"),
    [
        (DistillConfig, {"lr": 1e30}, "lr"),
        (DistillConfig, {"epochs": 1e11}, "epochs"),
        (DistillConfig, {"teacher_lr": -1.0}, "teacher_lr"),
        (DistillConfig, {"train_subset": 0}, "train_subset"),
        (DistillConfig, {"max_steps": 10**11}, "max_steps"),
        (DistillConfig, {"bits": 5}, "bits"),
        (DistillConfig, {"stages": ("S1", "S4")}, "stages"),
        (EnergyConfig, {"e_ac": 1e30}, "e_ac"),
        (EnergyConfig, {"max_examples": 0}, "max_examples"),
        (EvaluateConfig, {"max_len": 10**11}, "max_len"),
    ],
)
def test_bounds_name_the_field(tmp_path, cls, kwargs, field):
    base = {"data": tmp_path}
    if cls is not DistillConfig:
        base["model"] = tmp_path
    with pytest.raises(ConfigError) as info:
        cls(**base, **kwargs)
    assert info.value.field == field


def test_demo_seeds_bounded():
    with pytest.raises(ConfigError, match="seeds"):
        DemoConfig(seeds=10**11)


@pytest.mark.parametrize("flag", ["--lr", "--epochs", "--batch-size", "--teacher-lr"])
def test_absurd_flags_refused_before_work(tmp_path, capsys, flag):
    value = "1e30" if flag in ("--lr", "--teacher-lr", "--epochs") else "100000000000"
    rc = main(["distill", "--data", str(tmp_path), flag, value, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and flag in err[0]
    assert not (tmp_path / "o").exists()


def test_task_name_reads_icml25_data(tmp_path, monkeypatch):
    (tmp_path / "glue" / "RTE").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICML25_DATA", str(tmp_path))
    assert glue_folder("RTE") == tmp_path / "glue" / "RTE"
    monkeypatch.delenv("ICML25_DATA")
    with pytest.raises(ConfigError, match="ICML25_DATA is not set") as info:
        DistillConfig(data="SST-2")
    assert info.value.field == "data"


def test_help_imports_no_torch():
    code = ("import sys; from sorbet_snn.cli import build_cli; build_cli(); "
            "import sorbet_snn.config; print(json.dumps(sorted(m for m in ('torch', 'transformers', "
            "'numpy') if m in sys.modules)))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert json.loads(out.stdout) == []
