"""The ``fedgmt`` command line end to end: results files, bad input, divergence, presets."""

import json

import pytest
from fedgmt import cli
from fedgmt.cli import build_cli, main, resolve_configs

from . import cli_cases

FAST = ["--engine", "reference", "--rounds", "3", "--local-epochs", "1", "--quiet"]


def test_run_reference_writes_results_with_contract_fields(tmp_path, capsys):
    rc = main(["run", "--strategy", "fedavg,fedgmt", *FAST, "--out", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert set(res["summary"]) == {"fedavg", "fedgmt"} and res["versions"]["torch"]
    for key in ("command", "config", "versions", "seed", "wall_time_s", "machine", "data"):
        assert key in res
    assert res["diverged"] is False and res["diverged_runs"] == []
    assert res["fed_config"]["num_rounds"] == 3
    assert str(tmp_path) not in (tmp_path / "results.json").read_text()
    assert (tmp_path / "accuracy.png").exists()


def test_single_seed_table_has_no_zero_std_and_names_the_data(tmp_path, capsys):
    argv = ["run", "--strategy", "fedavg", *FAST[:-1], "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "± 0.00" not in out and "(seed 0)" in out
    assert "data: scikit-learn digits (embedded, no download)" in out
    summary = json.loads((tmp_path / "results.json").read_text())["summary"]["fedavg"]
    assert summary["last_k_std"] is None and summary["num_seeds"] == 1


def test_two_seeds_report_sample_std(tmp_path, capsys):
    argv = ["run", "--strategy", "fedavg", "--seeds", "0,1", *FAST[:-1], "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "mean ± sample std over 2 seeds" in capsys.readouterr().out
    res = json.loads((tmp_path / "results.json").read_text())
    a, b = (r["last_k_accuracy"] for r in res["runs"])
    # ddof = 1 over two values: |a - b| / sqrt(2)
    assert res["summary"]["fedavg"]["last_k_std"] == pytest.approx(abs(a - b) / 2**0.5)


def test_config_file_yaml(tmp_path):
    (tmp_path / "c.yaml").write_text(
        "rounds: 2\nlocal-epochs: 1\nstrategy: fedavg\nengine: reference\n"
    )
    argv = ["run", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 0
    assert json.loads((tmp_path / "results.json").read_text())["fed_config"]["num_rounds"] == 2


def test_preset_layers_under_config_and_flags(tmp_path):
    """agnews-dir01 sets lr 0.1, E = 2 and 20 clients; --config and flags override it."""
    parse = build_cli().parse
    (cfg,) = resolve_configs(parse(["run", "--preset", "agnews-dir01"]), ["fedgmt"])
    assert (cfg.dataset, cfg.lr, cfg.local_epochs, cfg.beta) == ("agnews", 0.1, 2, 100.0)
    (tmp_path / "c.json").write_text('{"lr": 0.2, "local_epochs": 3}')
    args = parse(["run", "--preset", "agnews-dir01", "--config", str(tmp_path / "c.json")])
    (cfg,) = resolve_configs(args, ["fedgmt"])
    assert (cfg.lr, cfg.local_epochs, cfg.beta) == (0.2, 3, 100.0)
    args = parse(
        ["run", "--preset", "agnews-dir01", "--config", str(tmp_path / "c.json"), "--lr", "0.3"]
    )
    (cfg,) = resolve_configs(args, ["fedgmt"])
    assert (cfg.lr, cfg.local_epochs) == (0.3, 3)
    (tmp_path / "p.json").write_text('{"preset": "mnist-dir01"}')
    args = parse(["run", "--config", str(tmp_path / "p.json"), "--num-clients", "7"])
    (cfg,) = resolve_configs(args, ["fedgmt"])
    assert (cfg.dataset, cfg.num_clients, cfg.batch_size) == ("mnist", 7, 50)


@pytest.mark.parametrize(
    "argv, flag, needle",
    [
        (["run", "--dirichlet", "0"], "--dirichlet", "number > 0"),
        (["run", "--fraction", "1.5"], "--fraction", "<= 1"),
        (["run", "--strategy", "fedfoo"], "--strategy", "fedfoo"),
        (["run", "--num-clients", "5000", "--engine", "reference"], "--num-clients",
         "cannot give each of 5000"),
        (["run", "--engine", "spark"], "--engine", "spark"),
        (["run", "--device", "tpu"], "--device", "tpu"),
        (["run", "--rounds", "x"], "--rounds", "integer"),
        (["run", "--lr", "-1"], "--lr", "> 0"),
        (["run", "--beta", "0"], "--beta", "or inf (the dual off)"),
        (["run", "--strategy", "fedsam", "--dp"], "--dp", "SAM-based"),
        (["run", "--lr", "0.05", "--engine", "reference"], None, "unstable dual"),
        (["run", "--model", "cnn"], "--model", "28x28"),
        (["check", "--lr", "nan"], "--lr", "finite"),
        (["partition", "--min-partition-size", "0"], "--min-partition-size", ">= 1"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(argv, flag, needle, capsys, tmp_path):
    rc = main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert flag is None or f"argument {flag}" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_data_dir_with_embedded_dataset_is_refused(tmp_path, capsys):
    assert main(["run", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "argument --data-dir: is read only with dataset mnist, agnews" in (
        capsys.readouterr().err
    )


def test_nan_data_cases_name_the_data_flag(tmp_path, capsys):
    """Every data-path case of tests/cli_cases.py (what conformance runs) is a one-line usage error."""
    cases = cli_cases.nan_data(tmp_path)
    declared = {c["name"] for c in build_cli().describe()}
    assert set(cases) == declared
    for name, case in cases.items():
        if isinstance(case, str):
            continue
        argv, flag = case
        rc = main([name, *argv, "--out", str(tmp_path / f"out-{name}")])
        err = capsys.readouterr().err
        assert rc == 2 and f"argument {flag}" in err and len(err.strip().splitlines()) == 1, err
        assert "NaN" in err or "nan" in err


def test_internal_error_is_a_traceback_not_a_usage_error(tmp_path, monkeypatch):
    """A ValueError from inside the method is a bug: it propagates (exit 1), it is not exit 2."""
    from fedgmt import algorithms

    def broken(*args, **kwargs):
        raise ValueError("internal failure")

    monkeypatch.setattr(algorithms, "server_aggregate", broken)
    with pytest.raises(ValueError, match="internal failure"):
        main(["run", *FAST, "--out", str(tmp_path)])


def test_each_subcommand_has_its_own_file_and_none_is_replaced(tmp_path, capsys):
    out = ["--out", str(tmp_path)]
    assert main(["partition", "--quiet", *out]) == 0
    assert main(["check", "--quiet", *out]) == 0
    assert (tmp_path / "partition.json").exists() and (tmp_path / "check.json").exists()
    writes = {c["name"]: c["writes"][0] for c in build_cli().describe()}
    assert writes == {
        "run": "results.json",
        "compare": "compare.json",
        "demo": "results.json",
        "partition": "partition.json",
        "check": "check.json",
        "evaluate": "evaluate.json",
    }
    before = (tmp_path / "partition.json").read_text()
    capsys.readouterr()
    assert main(["partition", "--num-clients", "5", "--quiet", *out]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (tmp_path / "partition.json").read_text() == before
    assert main(["partition", "--num-clients", "5", "--quiet", "--overwrite", *out]) == 0
    assert json.loads((tmp_path / "partition.json").read_text())["partition"]["num_clients"] == 5


def test_check_unstable_exits_3_and_partition_stats(tmp_path, capsys):
    assert main(["check", "--lr", "0.05", "--batch-size", "16", "--out", str(tmp_path)]) == 3
    assert "unstable" in capsys.readouterr().out
    assert json.loads((tmp_path / "check.json").read_text())["verdict"] == "unstable"
    argv = ["partition", "--num-clients", "100", "--dirichlet", "0.01", "--min-partition-size", "1"]
    assert main([*argv, "--stats", "--out", str(tmp_path)]) == 0
    assert "samples per label" in capsys.readouterr().out


@pytest.mark.parametrize("policy, rounds_run", [("stop", 1), ("warn", 3)])
def test_exploding_run_is_recorded_as_diverged_and_exits_3(tmp_path, capsys, policy, rounds_run):
    """lr 100 (the issue's case): the loss explodes to ~1e17 while staying finite; before, the run
    ended with rc 0 and "diverged": false."""
    argv = ["run", "--allow-unstable", "--lr", "100", "--on-divergence", policy, *FAST]
    with pytest.warns(UserWarning, match="training continues") if policy == "warn" else _nothing():
        rc = main([*argv, "--out", str(tmp_path)])
    assert rc == cli.DIVERGED == 3
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["diverged"] is True and res["summary"]["fedgmt"]["diverged"] is True
    (run,) = res["runs"]
    assert run["diverged"] is True and run["diverged_at_round"] == 1
    assert "exceeds 100 x the starting loss" in run["divergence_reason"]
    assert len(run["rounds"]) == rounds_run
    assert "DIVERGED: round 1" in capsys.readouterr().err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
