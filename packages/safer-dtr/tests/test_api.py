"""The jobs as Python calls (the README quickstart), config bounds and the schema's home."""

import subprocess
import sys

import numpy as np
import pytest
from safer_dtr.config import (
    ALL_METHODS,
    PRESET_NAMES,
    ConfigError,
    DemoConfig,
    EvaluateConfig,
    GenerateConfig,
    RecommendConfig,
    TrainRunConfig,
)
from safer_dtr.jobs import run_evaluate, run_generate, run_recommend, run_train

TINY = {"n_stays": 150, "d_model": 16, "heads": 2, "layers": 1, "d_ff": 16, "epochs_stage1": 2,
        "epochs_refine": 1, "epochs_finetune": 1, "batch_size": 64, "encoder": "hashing",
        "hash_dim": 32}  # fmt: skip


def test_quickstart_train_recommend_evaluate(tmp_path):
    """README quickstart: train, then recommend and evaluate from the checkpoint, all in Python."""
    trained = run_train(TrainRunConfig(**TINY), out=tmp_path)
    assert trained.files == [tmp_path / "model.pt"] and trained.model is not None
    hr3 = trained.results["metrics_test"]["SAFER"]["survivors"]["hr@3"]
    assert 0 <= hr3 <= 1 and set(trained.results) >= {
        "data",
        "train_config",
        "kappa_test",
        "history",
    }
    rec = run_recommend(RecommendConfig(alpha=0.3), out=tmp_path)
    assert 0 <= rec.results["n_released"] <= rec.results["n_test"]
    assert (tmp_path / "recommendations.csv").is_file()
    ev = run_evaluate(
        EvaluateConfig(reps=5, cs=(0.3,), alphas=(0.2,), mortality_epochs=0), tmp_path
    )
    assert list(ev.results["selection"]) == ["0.3"] and ev.results["mortality"] == {}


def test_generate_without_out_writes_nothing(tmp_path):
    res = run_generate(GenerateConfig(n_stays=60, cohort_seed=1))
    assert res.files == [] and res.results["n_stays"] == 60 and res.cohort.n_stays == 60


@pytest.mark.parametrize(
    ("cls", "kwargs", "field"),
    [
        (GenerateConfig, {"n_stays": 10**12}, "n_stays"),
        (TrainRunConfig, {"epochs_stage1": 0}, "epochs_stage1"),
        (TrainRunConfig, {"lr_stage1": 1e30}, "lr_stage1"),
        (TrainRunConfig, {"gamma": 1e300}, "gamma"),
        (TrainRunConfig, {"heads": 3, "d_model": 16}, "heads"),
        (TrainRunConfig, {"encoder": "hf"}, "encoder_path"),
        (TrainRunConfig, {"data": "/no/such/folder"}, "data"),
        (DemoConfig, {"methods": ("SAFER", "XGBoost")}, "methods"),
        (DemoConfig, {"reps": 10**11}, "reps"),
        (RecommendConfig, {"alpha": 1.0}, "alpha"),
        (EvaluateConfig, {"alphas": (0.1, 1.2)}, "alphas"),
    ],
)
def test_config_refuses_out_of_range_values(cls, kwargs, field):
    with pytest.raises(ConfigError) as info:
        cls(**kwargs)
    assert info.value.field == field


def test_missing_checkpoint_names_the_field(tmp_path):
    with pytest.raises(ConfigError) as info:
        run_recommend(RecommendConfig(), out=tmp_path)
    assert info.value.field == "checkpoint"


def test_diverged_training_fails_naming_the_learning_rate(tmp_path, monkeypatch):
    """Training that never happened (every stage-1 batch non-finite) raises instead of reporting
    numbers, and nothing is saved."""
    from safer_dtr import pipeline

    monkeypatch.setattr(pipeline, "_fit_ce", lambda *a, **k: [float("nan")])
    with pytest.raises(ConfigError) as info:
        run_train(TrainRunConfig(**TINY), out=tmp_path)
    assert info.value.field == "lr_stage1" and "non-finite" in str(info.value)
    assert not (tmp_path / "model.pt").exists()


def test_config_names_match_the_library():
    from safer_dtr.experiment import RULES, TRAINED_BASELINES
    from safer_dtr.synthetic import PRESETS

    assert tuple(sorted(PRESETS)) == PRESET_NAMES
    assert ALL_METHODS == ("SAFER", "SAFER-F", "SAFER-N", "SAFER-U", *TRAINED_BASELINES, *RULES)


def test_help_and_config_import_no_torch():
    code = "import sys, safer_dtr.cli, safer_dtr.config; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_schema_lives_in_the_loader():
    """data.py owns the table schema; synthetic.py depends on data, not the reverse."""
    import ast
    import inspect

    import safer_dtr.data as data
    import safer_dtr.synthetic as synthetic

    tree = ast.parse(inspect.getsource(data))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "synthetic" not in imported and synthetic.VITALS_COLUMNS is data.VITALS_COLUMNS
    assert len(data.VITALS_COLUMNS) == 45 and np.all(
        [c in data.REQUIRED_COLUMNS for c in data.DEMO_COLUMNS]
    )
