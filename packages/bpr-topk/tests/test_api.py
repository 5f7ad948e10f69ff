"""The library entry points (issue 24): each CLI subcommand is one call on a config dataclass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bpr_topk import (
    BaselineConfig,
    ConfigError,
    DemoConfig,
    EvaluateConfig,
    TrainRunConfig,
    run_baseline,
    run_evaluate,
    run_toy,
    run_train,
)
from bpr_topk.cli import main


def test_readme_quickstart_call_trains_and_compares_with_the_best_heuristic(tmp_path):
    """The README's Python call (on embedded data and a small budget instead of Cook County)."""
    cfg = TrainRunConfig(
        dataset="zeroinflated", sites=40, K=4, objective="nll", lr=0.03, epochs=10,
        early_stopping="nll", patience=2, eval_trials=1, eval_samples=20, val_freq=5,
    )  # fmt: skip
    result = run_train(cfg, out=tmp_path / "nll")
    cmp = result.heuristic_comparison
    assert 0 <= cmp["model"]["test_bpr"] <= 1 and cmp["best_heuristic"]["method"]
    assert result.features == "history" and result.method == "NLL-only"
    assert {p.name for p in result.files} == {"model.pt", "training.png"}
    d = result.as_dict()
    assert d["train_config"]["link"] == "exp" and d["best_epoch"] == result.fit.best_epoch
    # the saved model is scored again by the evaluate call, beside the heuristics
    ev = run_evaluate(
        EvaluateConfig(
            dataset="zeroinflated", sites=40, K=4, eval_trials=1, eval_samples=20,
            checkpoints=(tmp_path / "nll" / "model.pt",),
        )
    )  # fmt: skip
    assert ev.metrics[0]["method"] == "NLL-only" and ev.metrics[0]["checkpoint"]


def test_baseline_and_toy_calls():
    res = run_baseline(BaselineConfig(dataset="zeroinflated", sites=40, K=4))
    assert res.as_dict()["best_selected_on"] == "valid"
    assert res.best_method in {r["method"] for r in res.heuristics}
    assert [round(r["ratio"], 3) for r in run_toy().table] == [0.543, 0.630, 0.817]


@pytest.mark.parametrize(
    ("cls", "kwargs", "field"),
    [
        (TrainRunConfig, {"lr": 1e30}, "lr"),
        (TrainRunConfig, {"epochs": 100_000_000_000}, "epochs"),
        (TrainRunConfig, {"lam": 1e300}, "lam"),
        (TrainRunConfig, {"sigma": 0.0}, "sigma"),
        (TrainRunConfig, {"objective": "mse"}, "objective"),
        (TrainRunConfig, {"search_eps": (0.5, 1.5)}, "search_eps"),
        (TrainRunConfig, {"sites": 10**12}, "sites"),
        (DemoConfig, {"seeds": 0}, "seeds"),
        (EvaluateConfig, {"checkpoints": ("/no/such/model.pt",)}, "checkpoints"),
    ],
)
def test_configs_refuse_out_of_range_values_naming_the_field(cls, kwargs, field):
    with pytest.raises(ConfigError) as info:
        cls(**kwargs)
    assert info.value.field == field and field in str(info.value)


def test_k_above_the_sites_is_refused_by_the_call_naming_k():
    with pytest.raises(ConfigError, match="exceeds the number of sites") as info:
        run_baseline(BaselineConfig(dataset="synthetic7", K=9))
    assert info.value.field == "K"


def test_cook_county_by_name_reads_icml25_data(tmp_path, monkeypatch):
    monkeypatch.delenv("ICML25_DATA", raising=False)
    with pytest.raises(ConfigError, match="ICML25_DATA") as info:
        TrainRunConfig(dataset="cook_county")
    assert info.value.field == "data"
    folder = tmp_path / "bpr" / "cook_county"
    folder.mkdir(parents=True)
    monkeypatch.setenv("ICML25_DATA", str(tmp_path))
    assert Path(TrainRunConfig(dataset="cook_county").data) == folder


def test_training_that_never_happened_fails_with_one_line(tmp_path, capsys, monkeypatch):
    """Every epoch's loss non-finite: no numbers, one line naming --lr, exit 2, no --out left."""
    import bpr_topk.runs as runs
    from bpr_topk.experiment import make_model
    from bpr_topk.train import FitResult

    def nan_fit(data, kind, k, objective, eps, seed, cfg, *args, **kwargs):
        nan = float("nan")
        history = [
            {"epoch": float(e), "loss": nan, "valid_nll": nan, "valid_bpr": nan}
            for e in (0, 10, 20)
        ]
        return make_model(kind, data, seed), FitResult({}, 0, history)

    monkeypatch.setattr(runs, "train_one", nan_fit)
    out = tmp_path / "out"
    argv = ["train", "--quiet", "--dataset", "synthetic7", "--objective", "nll", "--epochs", "20"]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bpr-topk: error: argument --lr: training never")
    assert not out.exists()


@pytest.mark.slow
def test_help_does_not_import_torch():
    code = (
        "import sys; from bpr_topk.cli import build_cli; build_cli(); "
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_results_json_keeps_its_field_names(tmp_path):
    """The CLI writes the call's as_dict() beside the contract's fields."""
    argv = ["baseline", "--quiet", "--dataset", "zeroinflated", "--sites", "40", "--K", "4"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "baseline.json").read_text())
    assert {"data", "K", "split", "window", "heuristics", "best", "best_method"} <= set(res)
