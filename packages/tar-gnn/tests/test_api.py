"""The jobs as Python calls (``tar_gnn.run_*`` on ``tar_gnn.config``), as the README's quickstart shows."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tar_gnn as T
from tar_gnn.config import (
    ARCH_NAMES,
    GOOD_NAMES,
    METHOD_NAMES,
    SCHEME_NAMES,
    ConfigError,
    DataConfig,
    TrainConfig,
    TrainRunConfig,
)


def test_train_evaluate_split_from_python(tmp_path):
    cfg = TrainRunConfig(n_nodes=200, epochs=3, hidden=8, layers=2, baselines=("erm",))
    result = T.run_train(cfg, out=tmp_path)
    assert set(result.methods) == {"tar", "erm"} and result.seeds == [0]
    assert result.train_config["epochs"] == 3 and result.checkpoint == tmp_path / "model.pt"
    assert 0 <= result.methods["tar"]["mean_std"]["ood_test_acc"]["mean"] <= 1
    evaluated = T.run_evaluate(T.EvaluateConfig(n_nodes=200, checkpoint=str(result.checkpoint)))
    assert 0 <= evaluated.metrics["ood_test_acc"] <= 1
    split = T.run_split(T.SplitConfig(n_nodes=200))
    assert split.path is None and split.sizes["train_mask"] > 0


def test_auto_epochs():
    assert TrainRunConfig().n_epochs == 200  # csbm
    assert TrainConfig().n_epochs == 100  # GOOD's
    assert TrainRunConfig(n_nodes=60, epochs=7).train_config().epochs == 7


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"epochs": 10**11}, "epochs"),
        ({"epochs": 0}, "epochs"),
        ({"beta": 1e300}, "beta"),
        ({"lr": 1e30}, "lr"),
        ({"lr": 0.0}, "lr"),
        ({"n_nodes": 10**12}, "n_nodes"),
        ({"dropout": 1.0}, "dropout"),
        ({"cfl": 0.0}, "cfl"),
        ({"step_size": float("nan")}, "step_size"),
        ({"method": "adam"}, "method"),
        ({"baselines": ("erm", "sgd")}, "baselines"),
        ({"domain": "colour"}, "domain"),
        ({"transport_graph": "ring"}, "transport_graph"),
        ({"transport_graph": "khop:0"}, "transport_graph"),
        ({"dataset": "csbm", "data": "."}, "data"),
        ({"dataset": "file"}, "data"),
    ],
)
def test_configs_refuse_bad_values_naming_the_field(kwargs, name):
    with pytest.raises(ConfigError) as info:
        TrainRunConfig(**kwargs)
    assert info.value.field == name


def test_named_dataset_resolves_under_icml25_data(monkeypatch, tmp_path):
    (tmp_path / "planetoid" / "Cora").mkdir(parents=True)
    monkeypatch.setenv("ICML25_DATA", str(tmp_path))
    assert DataConfig(dataset="cora").data == tmp_path / "planetoid" / "Cora"
    monkeypatch.delenv("ICML25_DATA")
    with pytest.raises(ConfigError, match="ICML25_DATA"):
        DataConfig(dataset="cora")


def test_the_configs_list_what_the_library_accepts():
    from tar_gnn.data import GOOD_NAMES as GOOD
    from tar_gnn.flow import SCHEMES
    from tar_gnn.methods import METHODS
    from tar_gnn.models import ARCHS

    assert set(METHOD_NAMES) == set(METHODS) and tuple(ARCH_NAMES) == tuple(ARCHS)
    assert tuple(SCHEME_NAMES) == tuple(SCHEMES) and tuple(GOOD_NAMES) == tuple(GOOD)


class _Diverges(T.ERM):
    def loss(self, logits, y, ctx):
        return super().loss(logits, y, ctx) * float("nan")


def test_a_run_whose_loss_is_not_finite_fails(tmp_path):
    data = T.make_csbm_ood(100, seed=0)
    with pytest.raises(T.NonFiniteLossError):
        T.train_node_classifier(data, _Diverges(), TrainConfig(epochs=2, hidden=4))
    from tar_gnn.experiments import train_methods

    T.methods.METHODS["diverges"] = _Diverges
    try:
        with pytest.raises(ConfigError) as info:
            train_methods(data, {"d": ("diverges", {})}, [0], TrainConfig(epochs=2, hidden=4))
    finally:
        del T.methods.METHODS["diverges"]
    assert info.value.field == "lr" and "diverged" in str(info.value)


def test_the_cli_and_the_configs_do_not_import_torch():
    code = (
        "import sys; from tar_gnn.cli import build_cli; build_cli()\n"
        "import tar_gnn.config, tar_gnn\n"
        "heavy = [m for m in ('torch', 'numpy', 'torch_geometric') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_the_readme_quickstart_call_on_cora(tmp_path, cora_dir, monkeypatch):
    monkeypatch.setenv("ICML25_DATA", str(cora_dir.parents[1]))
    # the README's call, with 2 epochs, width 8 and one seed
    cfg = T.TrainRunConfig(
        dataset="cora", shift="covariate", hidden=8, seeds=1, epochs=2, baselines=("erm",)
    )
    result = T.run_train(cfg, out=tmp_path)
    assert result.data_name == "Cora" and result.split["source"] == "built"
    assert set(result.methods["tar"]["mean_std"]["ood_test_acc"]) == {"mean", "std"}
    assert (tmp_path / "model.pt").is_file()
