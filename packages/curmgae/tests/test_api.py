"""The jobs as Python calls (``curmgae.experiments`` on ``curmgae.config``), as the README shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from curmgae import (
    ConfigError,
    CurMGAEConfig,
    DemoConfig,
    EvaluateConfig,
    PretrainConfig,
    run_evaluate,
    run_pretrain,
)
from curmgae.cli import main
from curmgae.experiments import resolve_root
from curmgae.method import CurMGAE

TINY = CurMGAEConfig(epochs=2, hidden=8, batch_size=4096)


def test_readme_quickstart_pretrain_then_evaluate(tmp_path):
    """The README's call (fewer epochs): the checkpoint it writes scores the same test edges."""
    result = run_pretrain(PretrainConfig(quick=True, model=TINY), out=tmp_path)
    assert result.checkpoint == tmp_path / "model.pt" and result.checkpoint.is_file()
    assert result.config.epochs == 2 and result.config.masking == "curriculum"
    assert 0.0 <= result.metrics["val_auc"] <= 1.0 and result.history.trace
    scores = run_evaluate(EvaluateConfig(checkpoint=result.checkpoint, task="link"))
    assert set(scores.metrics) == {"lp_auc", "lp_ap"} and scores.method == "curmgae"
    assert set(result.as_dict()) >= {"metrics", "model_config", "config_sources", "history"}


@pytest.mark.parametrize(
    ("cls", "kwargs", "name"),
    [
        (CurMGAEConfig, {"lr": 1e30}, "lr"),
        (CurMGAEConfig, {"lr": 0.0}, "lr"),
        (CurMGAEConfig, {"epochs": 10**11}, "epochs"),
        (CurMGAEConfig, {"beta": 1e300}, "beta"),
        (CurMGAEConfig, {"hidden": -(10**11)}, "hidden"),
        (CurMGAEConfig, {"batch_size": 0}, "batch_size"),
        (CurMGAEConfig, {"patience": 1.5}, "patience"),
        (CurMGAEConfig, {"encoder": "gat"}, "encoder"),
        (CurMGAEConfig, {"mask_ratio": 0.01}, "mask_ratio"),  # below min_mask_ratio
        (PretrainConfig, {"split_seed": -1}, "split_seed"),
        (PretrainConfig, {"method": "bogus"}, "method"),
        (PretrainConfig, {"threads": 10**6}, "threads"),
        (EvaluateConfig, {"probe_epochs": 10**11}, "probe_epochs"),
        (EvaluateConfig, {"task": "graph"}, "task"),
        (DemoConfig, {"seeds": 0}, "seeds"),
        (DemoConfig, {"epochs": 1e30}, "epochs"),
    ],
)
def test_configs_refuse_bad_values_naming_the_field(cls, kwargs, name):
    with pytest.raises(ConfigError, match=name) as info:
        cls(**kwargs)
    assert info.value.field == name


def test_absurd_flags_are_one_line_naming_the_flag(tmp_path, capsys):
    for argv, flag in [
        (["pretrain", "--weight-decay", "1e30"], "--weight-decay"),
        (["pretrain", "--num-negatives", "-100000000000"], "--num-negatives"),
        (["pretrain", "--split-seed", "100000000000"], "--split-seed"),
        (["demo", "--seeds", "100000000000"], "--seeds"),
    ]:
        assert main([*argv, "--out", str(tmp_path / "o")]) == 2
        err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert len(err) == 1 and flag in err[0], err
    assert not (tmp_path / "o").exists()  # a refused run leaves no --out behind


def test_method_presets_and_conflicts():
    assert PretrainConfig(method="s2gae").model_config().masking == "random"
    assert PretrainConfig(method="split1").model_config().split_ratio == 1.0
    keep = PretrainConfig(method="s2gae", model=CurMGAEConfig(epochs=7)).model_config()
    assert keep.epochs == 7 and keep.masking == "random"
    with pytest.raises(ConfigError) as info:
        PretrainConfig(method="split0", model=CurMGAEConfig(split_ratio=0.3)).model_config()
    assert info.value.field == "split_ratio"
    with pytest.raises(ConfigError) as info:
        PretrainConfig(method="gae", model=CurMGAEConfig(loss="full_softmax")).model_config()
    assert info.value.field == "loss"


def test_named_datasets_resolve_under_icml25_data(tmp_path, monkeypatch):
    (tmp_path / "planetoid").mkdir()
    monkeypatch.setenv("ICML25_DATA", str(tmp_path))
    assert resolve_root("Cora", None) == tmp_path / "planetoid"
    assert resolve_root("Cora", Path("elsewhere")) == Path("elsewhere")
    assert resolve_root("synthetic", None) is None
    with pytest.raises(ConfigError, match="amazon") as info:
        resolve_root("amazon:Photo", None)
    assert info.value.field == "root"
    monkeypatch.delenv("ICML25_DATA")
    with pytest.raises(ConfigError, match="ICML25_DATA is not set"):
        resolve_root("Cora", None)


def test_a_run_with_a_non_finite_loss_reports_no_numbers(monkeypatch):
    monkeypatch.setattr(CurMGAE, "train_epoch", lambda self, graph, mask: float("nan"))
    with pytest.raises(ConfigError, match="non-finite loss from epoch 1") as info:
        run_pretrain(PretrainConfig(quick=True, model=TINY))
    assert info.value.field == "lr"
