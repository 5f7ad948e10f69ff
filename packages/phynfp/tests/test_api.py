"""The jobs as Python calls (``phynfp.jobs`` on ``phynfp.config``), as the README's quickstart shows."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_cases import write_metr_la
from phynfp import EvaluateConfig, TrainRunConfig, run_evaluate, run_train
from phynfp.config import MODEL_NAMES, NETWORKS, ConfigError, DemoConfig


def test_train_then_evaluate_from_python(tmp_path):
    cfg = TrainRunConfig(nodes=12, hours=1500, models=("gcn", "phynfp"), epochs=2, max_batches=3,
                         hidden=8, reverse=False, cache_dir=str(tmp_path / "cache"))  # fmt: skip
    result = run_train(cfg, out=tmp_path)
    assert result.checkpoint == tmp_path / "model.pt" and result.checkpoint.is_file()
    phynfp = result.results["models"]["phynfp"]
    assert phynfp["summary"]["leakage"]["mean"] == 0.0  # downstream-only operators
    assert result.results["data_options"]["num_nodes"] == 12
    evaluated = run_evaluate(EvaluateConfig(checkpoint=result.checkpoint, cache_dir=cfg.cache_dir))
    assert evaluated.test["mse"] == pytest.approx(phynfp["runs"][0]["forward"]["mse"], rel=1e-5)
    assert set(evaluated.as_dict()) == {
        "dataset_arg",
        "test",
        "flip_eval",
        "g_flip",
        "perturbation",
    }


def test_configs_refuse_bad_values_naming_the_field(tmp_path):
    for kwargs, name in [
        ({"epochs": 100_000_000_000}, "epochs"),
        ({"epochs": 0}, "epochs"),
        ({"lr": 1e30}, "lr"),
        ({"lr": 0.0}, "lr"),
        ({"nodes": 10**12}, "nodes"),
        ({"clamp": 0.0}, "clamp"),
        ({"models": ("gcn", "nope")}, "models"),
        ({"dataset": "no-such"}, "dataset"),
        ({"dataset": "wntr:NoSuchNet"}, "dataset"),
        ({"dataset": f"metr-la:{tmp_path / 'absent'}"}, "dataset"),
        ({"preset": "official"}, "layers"),  # the longest path is undefined with 2-cycles
    ]:
        with pytest.raises(ConfigError) as info:
            TrainRunConfig(**kwargs)
        assert info.value.field == name, kwargs
    with pytest.raises(ConfigError) as info:
        DemoConfig(max_batches=0)
    assert info.value.field == "max_batches"
    with pytest.raises(TypeError):
        EvaluateConfig()  # checkpoint is required


def test_the_config_names_agree_with_the_library():
    from phynfp.models import MODEL_NAMES as models
    from phynfp.wdn import NETWORKS as networks

    assert MODEL_NAMES == models and NETWORKS == networks


def test_the_cli_and_the_configs_do_not_import_torch():
    code = (
        "import sys; from phynfp.cli import build_cli; build_cli()\n"
        "import phynfp.config, phynfp\n"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_metr_la_by_name_reads_icml25_data(tmp_path, monkeypatch):
    monkeypatch.delenv("ICML25_DATA", raising=False)
    with pytest.raises(ConfigError, match="ICML25_DATA is not set") as info:
        TrainRunConfig(dataset="metr-la")
    assert info.value.field == "dataset"
    write_metr_la(tmp_path / "shared" / "traffic_la_bay" / "metr_la", steps=400)
    monkeypatch.setenv("ICML25_DATA", str(tmp_path / "shared"))
    cfg = TrainRunConfig(dataset="metr-la", models=("persistence",), epochs=1, layers=2)
    assert cfg.dataset == f"metr-la:{tmp_path / 'shared' / 'traffic_la_bay'}"
    assert run_train(cfg).results["dataset"] == "metr-la"
