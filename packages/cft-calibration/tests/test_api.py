"""The library entry points: configs with bounds, one call per command, and what the CLI makes of them."""

import dataclasses
import importlib
import json
import subprocess
import sys

import cft_calibration as C
import pytest
import torch
from cft_calibration.cli import build_cli, main
from cft_calibration.config import (
    AlignConfig,
    DemoConfig,
    EvaluateConfig,
    FinetuneConfig,
    PipelineConfig,
    RegimeConfig,
    TrainConfig,
)


def jsonl(tmp_path, n=40):
    rows = [
        {"question": f"Which word is a fruit number {i} ?", "choices": ["apple", "dog", "iron", "red"],
         "answer": i % 4 if i % 3 else 0}
        for i in range(n)
    ]  # fmt: skip
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_readme_quickstart_call_finetunes_and_evaluates(tmp_path):
    pytest.importorskip("transformers")
    data = jsonl(tmp_path)
    # the README's call, on the random tiny model and a 40-question file
    result = C.run_finetune(
        C.FinetuneConfig(model="tiny-clm", data=data, method="rcft", epochs=1, lr=1e-3)
    )
    assert result.n_train == 36 and result.n_val == 4 and len(result.e_steps) == 1
    assert result.train_config["sft_loss"] == "full_vocab" and result.files == []
    assert set(result.as_dict()) >= {"before", "after", "history", "selected_epoch"}
    ev = C.run_evaluate(C.EvaluateConfig(model="tiny-clm", data=data, max_questions=10))
    assert ev.n_items == 10 and 0 <= ev.metrics["conf_ece"] <= 1
    assert ev.temperature_scaling is None and "temperature_scaling" not in ev.as_dict()


@pytest.mark.parametrize(
    ("cls", "kwargs", "field"),
    [
        (TrainConfig, {"lr": 1e30}, "lr"),
        (TrainConfig, {"epochs": 0}, "epochs"),
        (TrainConfig, {"epochs": 10**11}, "epochs"),
        (TrainConfig, {"e_step_every": 0}, "e_step_every"),
        (AlignConfig, {"beta": 1e300}, "beta"),
        (AlignConfig, {"steps": -1}, "steps"),
        (PipelineConfig, {"lam": float("nan")}, "lam"),
        (PipelineConfig, {"lams": (1.0, 1e30)}, "lams"),
        (PipelineConfig, {"methods": ("cft", "magic")}, "methods"),
        (DemoConfig, {"seeds": 0}, "seeds"),
        (DemoConfig, {"max_questions": 0}, "max_questions"),
        (FinetuneConfig, {"model": "tiny-clm", "data": "synthetic-category", "lr": 1e30}, "lr"),
        (
            FinetuneConfig,
            {"model": "tiny-clm", "data": "synthetic-category", "epochs": 0},
            "epochs",
        ),
        (EvaluateConfig, {"model": "tiny-clm", "data": "no/such/file.jsonl"}, "data"),
        (RegimeConfig, {"model": "tiny-clm", "data": "synthetic-category", "bins": 1}, "bins"),
    ],
)
def test_configs_refuse_values_outside_their_bounds_naming_the_field(cls, kwargs, field):
    with pytest.raises(C.ConfigError, match=field) as info:
        cls(**kwargs)
    assert info.value.field == field


def test_none_is_a_word_not_zero():
    cfg = FinetuneConfig(model="tiny-clm", data="synthetic-category")
    assert cfg.epochs is None and cfg.max_questions is None and cfg.e_step_every == 1
    assert (
        DemoConfig().max_questions is None and TrainConfig(e_step_every=None).e_step_every is None
    )


def test_every_numeric_config_field_has_both_bounds():
    for cls in (TrainConfig, AlignConfig, PipelineConfig, EvaluateConfig, FinetuneConfig,
                RegimeConfig, DemoConfig):  # fmt: skip
        for f in dataclasses.fields(cls):
            spec = f.metadata.get("icml25")
            kind = str(f.type)
            if spec is not None and ("int" in kind or "float" in kind):
                assert spec.low is not None and spec.high is not None, (cls.__name__, f.name)


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--lr", "1e30"), ("--epochs", "0"), ("--epochs", "1e11"), ("--max-questions", "0"),
     ("--lam", "1e300"), ("--e-step-every", "0")],
)  # fmt: skip
def test_cli_refuses_absurd_values_in_one_line(tmp_path, capsys, flag, value):
    out = tmp_path / "o"
    argv = ["finetune", "--model", "tiny-clm", "--data", "synthetic-category", flag, value]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and not out.exists()


def test_a_diverging_run_fails_in_one_line_without_results(tmp_path, capsys, monkeypatch):
    pytest.importorskip("transformers")
    T = importlib.import_module("cft_calibration.train")

    def diverge(*args, **kwargs):
        raise FloatingPointError("non-finite loss at epoch 1, step 1")

    monkeypatch.setattr(T, "train", diverge)
    out = tmp_path / "o"
    rc = main(["finetune", "--model", "tiny-clm", "--data", str(jsonl(tmp_path)), "--out",
               str(out), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--lr" in err[0] and "diverged" in err[0]
    assert not out.exists()


def test_train_stops_on_a_non_finite_loss():
    task = C.synthetic_feature_mcqa({"train": 32}, seed=0).splits["train"]
    task.features[0, 0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="non-finite"):
        C.train(C.FeatureScorer(task.features.shape[-1], hidden=4), task, TrainConfig(epochs=1))


def test_named_data_sets_come_from_icml25_data(tmp_path, monkeypatch):
    from cft_calibration.experiments import resolve_data

    monkeypatch.delenv("ICML25_DATA", raising=False)
    with pytest.raises(C.ConfigError, match="ICML25_DATA"):
        resolve_data("mmlu")
    (tmp_path / "openbookqa" / "Main").mkdir(parents=True)
    monkeypatch.setenv("ICML25_DATA", str(tmp_path))
    assert resolve_data("openbookqa") == tmp_path / "openbookqa" / "Main"
    with pytest.raises(C.ConfigError, match="does not exist"):
        resolve_data("mmlu")


def test_flags_are_the_config_fields():
    configs = {"evaluate": EvaluateConfig, "finetune": FinetuneConfig, "regime": RegimeConfig,
               "demo": DemoConfig}  # fmt: skip
    for command in build_cli().describe():
        dests = {o["dest"] for o in command["options"]}
        cls = configs[command["name"]]
        fields = {f.name for f in dataclasses.fields(cls) if f.metadata["icml25"].flag}
        assert fields <= dests, command["name"]


def test_help_imports_no_torch():
    code = (
        "import sys\nfrom cft_calibration.cli import main\n"
        "try:\n    main(['finetune', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('heavy:', sorted(m for m in ('torch', 'numpy', 'transformers') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "heavy: []" in proc.stdout, proc.stderr[-500:]


def test_lazy_names_resolve():
    assert C.TrainConfig is TrainConfig and C.run_demo.__module__ == "cft_calibration.experiments"
    assert isinstance(torch.zeros(1), torch.Tensor) and "run_finetune" in dir(C)


def test_paper_scale_presets_the_official_lora_setting(capsys):
    from cft_calibration.experiments import paper_scale_config

    cfg = FinetuneConfig(model="tiny-clm", data="synthetic-category", paper_scale=True)
    big = paper_scale_config(cfg)
    assert (big.lora, big.lora_r, big.lora_alpha, big.lr, big.epochs, big.batch_size) == (
        True, 128, 64, 5e-6, 5, 2,
    )  # fmt: skip
    plain = FinetuneConfig(model="tiny-clm", data="synthetic-category")
    assert paper_scale_config(plain) is plain
    with pytest.raises(SystemExit):
        main(["finetune", "--help"])
    assert "--paper-scale" in capsys.readouterr().out
