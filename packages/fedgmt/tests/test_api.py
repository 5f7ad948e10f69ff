"""The jobs as Python calls (``fedgmt.experiments`` on ``fedgmt.config``), as the README shows,
and the configs' ranges."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from fedgmt import (
    METHODS,
    ConfigError,
    DemoConfig,
    EvaluateConfig,
    FedConfig,
    partition_stats,
    run_study,
    stability_check,
)
from fedgmt.cli import main
from fedgmt.methods import REGISTRY

TINY = dict(num_rounds=2, num_clients=4, fraction_train=0.5, local_epochs=1, max_train_samples=400)


def test_readme_quickstart_call(tmp_path):
    """The README's ``run_study`` call (shortened) returns the summary the CLI writes."""
    study = run_study(FedConfig(**TINY), methods=("fedavg", "fedgmt"), seeds=(0,), store=tmp_path)
    assert set(study.summary) == {"fedavg", "fedgmt"} and not study.diverged
    assert 0.0 <= study.summary["fedgmt"]["last_k_mean"] <= 1.0
    assert (tmp_path / "models" / "fedgmt-seed0.pt").is_file()
    from fedgmt import evaluate_model

    ev = evaluate_model(EvaluateConfig(model=tmp_path / "models" / "fedgmt-seed0.pt"))
    assert ev.test_accuracy == study.runs[1]["accuracy"][-1]
    assert study.as_dict()["fed_config"]["num_rounds"] == 2


def test_partition_and_check_calls():
    cfg = FedConfig(**TINY)
    part = partition_stats(cfg)
    assert part.stats["num_clients"] == 4 and sum(part.sizes) == part.data["train_samples"]
    assert stability_check(cfg).verdict in ("stable", "oscillating", "unstable", "not-applicable")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"lr": 1e30}, "lr"),
        ({"lr": 0.0}, "lr"),
        ({"num_rounds": 10**11}, "num_rounds"),
        ({"local_epochs": 10**9}, "local_epochs"),
        ({"beta": 1e300}, "beta"),
        ({"num_clients": 10**12}, "num_clients"),
        ({"fraction_train": 1.5}, "fraction_train"),
        ({"dataset": "cifar"}, "dataset"),
        ({"method": "fedfoo"}, "method"),
        ({"model": "cnn"}, "model"),
        ({"data_dir": "/tmp"}, "data_dir"),
        ({"method": "fedsam", "dp": True}, "dp"),
        ({"central_dp": "server-fixed-clipping"}, "central_dp"),
        ({"seed": -1}, "seed"),
    ],
)
def test_config_refuses_bad_values_naming_the_field(kwargs, name):
    with pytest.raises(ConfigError) as info:
        FedConfig(**kwargs)
    assert info.value.field == name


def test_every_number_has_an_upper_bound_and_beta_takes_inf():
    for f in FedConfig.__dataclass_fields__.values():
        spec = f.metadata["icml25"]
        if f.type.startswith(("int", "float")):
            assert spec.high is not None, f.name
    assert FedConfig(beta=math.inf).effective_beta == math.inf
    assert set(METHODS) <= set(REGISTRY)
    with pytest.raises(ConfigError):
        DemoConfig(seeds=(-1,))


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["run", "--lr", "1e30"], "--lr"),
        (["run", "--rounds", "100000000000"], "--rounds"),
        (["compare", "--num-rounds", "1e11"], "--num-rounds"),
        (["run", "--beta", "1e300"], "--beta"),
        (["partition", "--num-clients", "1000000000000"], "--num-clients"),
        (["run", "--seed", "99999999999"], "--seed"),
        (["demo", "--seeds", "0,-1"], "--seeds"),
    ],
)
def test_absurd_flags_are_one_line_exit_2(argv, flag, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"argument {flag}" in err, err
    assert not (tmp_path / "o").exists()


def test_beta_inf_on_the_command_line(tmp_path):
    from fedgmt.cli import build_cli, resolve_config

    assert resolve_config(build_cli().parse(["run", "--beta", "inf"])).beta == math.inf


def test_help_and_config_do_not_import_torch_or_flwr():
    code = (
        "import sys, fedgmt, fedgmt.config; from fedgmt.cli import build_cli; build_cli()\n"
        "bad = [m for m in ('torch', 'flwr', 'numpy') if m in sys.modules]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
