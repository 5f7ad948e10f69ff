"""The jobs as Python calls (``sassha_optim.experiments`` on ``sassha_optim.config``), as the README shows."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sassha_optim import DemoConfig, EvaluateConfig, TrainConfig, run_demo, run_evaluate, run_train
from sassha_optim.config import OPTIMIZER_NAMES, ConfigError
from sassha_optim.training import OPTIMIZERS


def test_train_then_evaluate_from_python(tmp_path):
    result = run_train(TrainConfig(data="synthetic", epochs=1, hidden=(8,)), out=tmp_path)
    assert result.checkpoint == tmp_path / "checkpoint.pt" and result.checkpoint.is_file()
    assert result.metrics.steps > 0 and result.overrides == {}
    evaluated = run_evaluate(EvaluateConfig(checkpoint=str(result.checkpoint)))
    assert evaluated.metrics["test"]["accuracy"] == pytest.approx(result.metrics.test_accuracy)
    assert run_train(TrainConfig(data="synthetic", epochs=1, hidden=(8,))).checkpoint is None


def test_demo_from_python_without_files():
    cfg = DemoConfig(data="synthetic", optimizers=("sassha",), seeds=1, epochs=1, hidden=(8,))
    result = run_demo(cfg)
    assert result.plot is None and result.seeds == [0] and set(result.summary) == {"sassha"}


def test_configs_refuse_bad_values_naming_the_field(tmp_path):
    for kwargs, name in [
        ({"epochs": 0}, "epochs"),
        ({"lr": 1e30}, "lr"),
        ({"optimizer": "adam"}, "optimizer"),
        ({"optimizer": "sgd", "rho": 0.1}, "rho"),
        ({"optimizer": "adamw", "lazy_hessian": 2}, "lazy_hessian"),
        ({"data": str(tmp_path / "absent")}, "data"),
    ]:
        with pytest.raises(ConfigError) as info:
            TrainConfig(**{"data": "synthetic", **kwargs})
        assert info.value.field == name
    with pytest.raises(TypeError):
        TrainConfig()  # data is required


def test_the_config_lists_every_preset():
    assert set(OPTIMIZER_NAMES) == set(OPTIMIZERS)


def test_the_cli_and_the_configs_do_not_import_torch():
    code = (
        "import sys; from sassha_optim.cli import build_cli; build_cli()\n"
        "import sassha_optim.config\n"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_mnist_by_name_reads_icml25_data(tmp_path, monkeypatch):
    from test_data_cli import fake_mnist

    monkeypatch.delenv("ICML25_DATA", raising=False)
    cfg = TrainConfig(data="mnist", epochs=1, hidden=(8,))
    with pytest.raises(ConfigError, match="ICML25_DATA is not set") as info:
        run_train(cfg)
    assert info.value.field == "data"
    fake_mnist(tmp_path / "shared" / "mnist" / "raw")
    monkeypatch.setenv("ICML25_DATA", str(tmp_path / "shared"))
    result = run_train(cfg)
    assert result.data_note == "data: MNIST ($ICML25_DATA/mnist/raw)" and result.n_train > 0
