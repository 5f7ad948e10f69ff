"""The command line, end to end on tiny data of every dataset kind (offline)."""

import calendar
import json

import numpy as np
import pytest
from cli_cases import write_metr_la
from phynfp import simulate_river, write_lamah_folder
from phynfp.cli import build_cli, main

TINY = ["--epochs", "2", "--max-batches", "3", "--hidden", "8", "--quiet"]


def run(argv, capsys=None):
    code = main(argv)
    return code


def results(out):
    return json.loads((out / "results.json").read_text())


def test_cli_declares_train_evaluate_demo():
    names = [c["name"] for c in build_cli().describe()]
    assert names == ["train", "evaluate", "demo"]


def test_train_river_synth_reports_direction_and_evaluate_reads_checkpoint(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--dataset", "river-synth", "--nodes", "12", "--hours", "1500", "--models",
            "mlp,gcn,phynfp", "--out", str(out), "--cache-dir", str(tmp_path / "cache"), *TINY]  # fmt: skip
    assert main(argv) == 0
    res = results(out)
    for key in ("command", "config", "versions", "seed", "wall_time_s", "machine"):
        assert key in res
    m = res["models"]
    assert m["phynfp"]["summary"]["leakage"]["mean"] == 0.0  # information flows downstream only
    assert m["mlp"]["summary"]["g_train"]["mean"] == 0.0
    assert m["gcn"]["summary"]["g_flip"]["mean"] == 0.0  # symmetric: flipping changes nothing
    assert m["phynfp"]["summary"]["g_flip"]["mean"] != 0.0
    assert (out / "model.pt").is_file()
    ev = tmp_path / "eval"
    assert main(["evaluate", "--checkpoint", str(out / "model.pt"), "--out", str(ev), "--quiet",
                 "--cache-dir", str(tmp_path / "cache")]) == 0  # fmt: skip
    got = json.loads((ev / "evaluate.json").read_text())
    assert got["test"]["mse"] == pytest.approx(m["phynfp"]["runs"][0]["forward"]["mse"], rel=1e-5)
    assert got["perturbation"]["leakage"] == 0.0
    assert main(argv) == 2  # refuses to overwrite


def test_train_on_metr_la_folder(tmp_path):
    folder = write_metr_la(tmp_path / "metr", steps=400)
    out = tmp_path / "run"
    assert main(["train", "--dataset", f"metr-la:{folder}", "--models", "persistence,phynfp",
                 "--no-reverse", "--layers", "2", "--out", str(out), *TINY]) == 0  # fmt: skip
    res = results(out)
    assert res["layers"] == 2
    assert res["models"]["phynfp"]["runs"][0]["reversed"] is None


@pytest.mark.slow
def test_train_on_lamah_folder(tmp_path):
    years = [2014, 2015, 2016]
    hours = sum(24 * (366 if calendar.isleap(y) else 365) for y in years)
    sim = simulate_river(num_nodes=5, hours=hours, seed=2)
    write_lamah_folder(tmp_path / "lamah", sim.edge_index, sim.edge_attr, sim.features, years)
    out = tmp_path / "run"
    assert main(["train", "--dataset", f"lamah:{tmp_path / 'lamah'}", "--models", "gcn,phynfp",
                 "--train-stride", "24", "--out", str(out), *TINY]) == 0  # fmt: skip
    assert results(out)["dataset"] == "lamah"


@pytest.mark.slow
def test_train_on_wntr_network(tmp_path):
    pytest.importorskip("wntr")
    out = tmp_path / "run"
    cache = tmp_path / "cache"
    assert main(["train", "--dataset", "wntr:Net1", "--scenarios", "3", "--hours", "30", "--models",
                 "persistence,phynfp", "--out", str(out), "--cache-dir", str(cache), *TINY]) == 0  # fmt: skip
    res = results(out)
    assert res["dataset"] == "wntr:Net1"
    assert np.isfinite(res["models"]["phynfp"]["summary"]["mse"]["mean"])
    assert list(cache.glob("*.npz"))


def test_bad_input_is_one_line_with_exit_2(tmp_path, capsys):
    assert main(["train", "--dataset", "no-such", "--out", str(tmp_path / "a")]) == 2
    assert "--dataset" in capsys.readouterr().err
    assert main(["train", "--preset", "official", "--out", str(tmp_path / "b"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--layers" in err[0]
    bad = write_metr_la(tmp_path / "nan", nan=True)
    assert main(["train", "--dataset", f"metr-la:{bad}", "--out", str(tmp_path / "c")]) == 2
    assert "row 8, column 3" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_quick_runs(tmp_path):
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out), "--quiet"]) == 0
    res = results(out)
    assert res["quick"] is True
    assert res["models"]["phynfp"]["summary"]["leakage"]["mean"] == 0.0


def test_absurd_values_are_refused_before_any_work_and_leave_no_out(tmp_path, capsys):
    for flag, bad in [("--lr", "1e30"), ("--epochs", "100000000000"), ("--clamp", "0"),
                      ("--hours", "0"), ("--threads", "0"), ("--nodes", "1000000000000")]:  # fmt: skip
        out = tmp_path / flag.strip("-")
        assert main(["train", flag, bad, "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0], err
        assert not out.exists()


def test_a_run_that_trains_nothing_fails_with_one_line_and_writes_no_results(
    tmp_path, capsys, monkeypatch
):
    import dataclasses

    from phynfp import experiment

    real = experiment.fit  # every batch non-finite: what lr = 1e30 did before it was out of bounds

    def diverging(model, data, cfg, **kwargs):
        return real(model, data, dataclasses.replace(cfg, lr=1e30), **kwargs)

    monkeypatch.setattr(experiment, "fit", diverging)
    out = tmp_path / "run"
    argv = ["train", "--dataset", "river-synth", "--nodes", "8", "--hours", "1200", "--models",
            "mlp", "--no-reverse", "--out", str(out), *TINY]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--lr" in err[0] and "non-finite" in err[0]
    assert not out.exists()  # the failed run removed the --out folder it created
