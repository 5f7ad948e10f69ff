import argparse
import json
import re
import statistics
from pathlib import Path

import pytest
import torch
from bpr_topk import make_panel, write_topk_folder
from bpr_topk.cli import build_cli, main
from bpr_topk.experiment import format_table, summarise
from cli_cases import nan_folder

BASE = ["--quiet", "--dataset", "synthetic7", "--eval-trials", "2", "--eval-samples", "50"]


def _train(out, *extra):
    return main(["train", *BASE, "--objective", "nll", "--epochs", "5", *extra, "--out", str(out)])


def _error(capsys):
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    # a successful train before the failing call may have warned (heuristic better): not an error
    lines = [ln for ln in err.splitlines() if not ln.startswith("bpr-topk: warning:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.slow
def test_train_rank_evaluate_keep_each_others_results(tmp_path):
    """Following the README with one --out per run: every subcommand writes its own file."""
    nll, daml = tmp_path / "nll", tmp_path / "daml"
    assert _train(nll) == 0
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"epochs": 3, "M": 5, "J": 5, "objective": "daml"}))
    init = ["--init", str(nll / "model.pt")]
    assert main(["train", *BASE, *init, "--config", str(cfg), "--out", str(daml)]) == 0
    trained = (daml / "results.json").read_text()
    res = json.loads(trained)
    assert res["config"]["epochs"] == 3 and res["metrics"][0]["method"].startswith("DAML")
    assert res["subcommand"] == "train" and {"versions", "seed", "wall_time_s"} <= set(res)
    ckpt = str(daml / "model.pt")
    assert (
        main(["rank", "--quiet", "--checkpoint", ckpt, "--samples", "50", "--out", str(daml)]) == 0
    )
    assert (daml / "ranking.csv").is_file() and (daml / "rank.json").is_file()
    checkpoints = ["--checkpoints", str(nll / "model.pt"), ckpt]
    assert main(["evaluate", *BASE, *checkpoints, "--out", str(daml)]) == 0
    assert (daml / "evaluate.json").is_file() and (daml / "evaluate_pareto.png").is_file()
    assert (daml / "results.json").read_text() == trained  # the training run's results survive
    rank = json.loads((daml / "rank.json").read_text())
    assert rank["subcommand"] == "rank" and len(rank["bpr_per_step"]) == 500


def test_every_command_declares_its_own_results_file():
    writes = {c["name"]: c["writes"] for c in build_cli().describe()}
    assert writes["train"] == ["results.json", "model.pt", "training.png"]
    assert writes["rank"][0] == "rank.json" and writes["evaluate"][0] == "evaluate.json"
    assert writes["toy"] == ["toy.json"] and writes["demo"][0] == "results.json"


def test_toy_command(tmp_path):
    assert main(["toy", "--quiet", "--out", str(tmp_path)]) == 0
    table = json.loads((tmp_path / "toy.json").read_text())["table"]
    assert [round(r["ratio"], 3) for r in table] == [0.543, 0.630, 0.817]


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["train", "--K", "0"], "argument --K: expected an integer >= 1"),
        (["train", "--eps", "1.5"], "argument --eps"),
        (["train", "--K", "9"], "argument --K: 9 exceeds"),
        (["train", "--data", "/nonexistent/folder"], "argument --data"),
        (["train", "--objective", "mse"], "argument --objective"),
        (["train", "--epochs", "0"], "argument --epochs: expected an integer >= 1 and <= 1000000"),
        (["train", "--lr", "-1"], "argument --lr: expected a finite number > 0"),
        # absurd values are refused before any work, naming the flag and the accepted range
        (["train", "--lr", "1e30"], "argument --lr: expected a finite number > 0 and <= 10"),
        (["train", "--epochs", "100000000000"], "argument --epochs: expected an integer"),
        (["train", "--lam", "1e300"], "argument --lam: expected a finite number >= 0 and <= 1e+06"),
        (["train", "--dataset", "hotspots", "--sites", "1000000000000"], "argument --sites"),
        (["train", "--search-lr", "0.1,1e30"], "argument --search-lr"),
        (["evaluate", "--eval-samples", "1e11"], "argument --eval-samples"),
        (["demo", "--seeds", "100000000000"], "argument --seeds"),
        (["rank", "--checkpoint", "/nonexistent.pt"], "argument --checkpoint"),
        (["demo", "--seeds", "0"], "argument --seeds"),
    ],
)
def test_bad_input_exit_code_2(argv, match, capsys, tmp_path):
    assert main([*argv, "--quiet", "--out", str(tmp_path / "out")]) == 2
    assert match in _error(capsys)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_epochs_zero_cannot_replace_a_trained_model(tmp_path, capsys):
    assert _train(tmp_path) == 0
    before = (tmp_path / "model.pt").read_bytes()
    assert _train(tmp_path, "--epochs", "0", "--overwrite") == 2
    assert "--epochs: expected an integer >= 1" in _error(capsys)
    assert (tmp_path / "model.pt").read_bytes() == before


@pytest.mark.slow
def test_no_file_is_replaced_without_overwrite(tmp_path, capsys):
    assert _train(tmp_path) == 0
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert {"results.json", "model.pt", "training.png"} <= set(files)
    (tmp_path / "results.json").unlink()  # model.pt alone still blocks a second run
    assert _train(tmp_path, "--seed", "1") == 2
    line = _error(capsys)
    assert "model.pt already exists" in line and "--overwrite" in line
    assert (tmp_path / "model.pt").read_bytes() == files["model.pt"]
    assert _train(tmp_path, "--seed", "1", "--overwrite") == 0


def _panel_folder(tmp_path):
    folder = tmp_path / "panel"
    write_topk_folder(make_panel(16, seed=0), folder)
    return folder


def _replace_cell(path, row, value):
    lines = path.read_text().splitlines()
    cells = lines[row - 1].split(",")
    cells[-1] = value
    lines[row - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda f: _replace_cell(f / "train_y.csv", 3, "1.5"),
            r"train_y\.csv: row 3, column 'deaths': 1\.5 is not a whole number .*"
            "counts must be non-negative integers",
        ),
        (
            lambda f: _replace_cell(f / "valid_x.csv", 5, "nan"),
            r"valid_x\.csv: row 5, column 'prev_deaths_01back' holds an empty cell|holds nan",
        ),
        (lambda f: _replace_cell(f / "test_y.csv", 2, "inf"), r"test_y\.csv: row 2, .* inf"),
        (lambda f: (f / "test_x.csv").write_text(""), r"test_x\.csv is empty"),
        (
            lambda f: (f / "valid_x.csv").write_text(
                "\n".join((f / "valid_x.csv").read_text().splitlines()[:-2]) + "\n"
            ),
            r"valid_x\.csv \(14 rows\) and .*valid_y\.csv \(16 rows\) have different",
        ),
    ],
)
def test_bad_data_is_one_line_naming_data(tmp_path, capsys, edit, expected):
    folder = _panel_folder(tmp_path)
    edit(folder)
    out = tmp_path / "out"
    assert main(["train", "--quiet", "--data", str(folder), "--K", "2", "--out", str(out)]) == 2
    line = _error(capsys)
    assert line.startswith("bpr-topk: error: argument --data: ")
    assert re.search(expected, line), line
    assert not out.exists()  # a failed run removes the --out folder it created


def test_nan_case_of_the_conformance_check(tmp_path, capsys):
    folder = nan_folder(tmp_path)
    for command in ("train", "evaluate"):
        out = tmp_path / command
        assert main([command, "--quiet", "--data", str(folder), "--K", "2", "--out", str(out)]) == 2
        line = _error(capsys)
        assert "argument --data:" in line and "train_x.csv: row 4" in line


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty or truncated"),
        (b"hello", "is not a torch checkpoint"),
        ("list", "is not a bpr-topk checkpoint"),
    ],
)
def test_bad_checkpoints_name_their_flag(tmp_path, capsys, content, expected):
    bad = tmp_path / "model.pt"
    if content == "list":
        torch.save([1, 2], bad)
    else:
        bad.write_bytes(content)
    runs = [
        ["rank", "--quiet", "--checkpoint", str(bad)],
        ["evaluate", *BASE, "--checkpoints", str(bad)],
        ["train", *BASE, "--epochs", "1", "--init", str(bad)],
    ]
    for argv, flag in zip(runs, ("--checkpoint", "--checkpoints", "--init")):
        out = tmp_path / f"out-{flag.strip('-')}"
        assert main([*argv, "--out", str(out)]) == 2
        line = _error(capsys)
        assert f"argument {flag}: " in line and expected in line, line


@pytest.mark.slow
def test_checkpoint_of_other_data_is_rejected(tmp_path, capsys):
    assert _train(tmp_path / "nll") == 0
    argv = ["rank", "--quiet", "--dataset", "panel", "--sites", "16"]
    argv += ["--checkpoint", str(tmp_path / "nll" / "model.pt"), "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "argument --checkpoint: " in _error(capsys)


@pytest.mark.slow
def test_demo_quick_shows_daml_beating_nll_only_and_the_naive_baselines(tmp_path, capsys):
    """The demo's point on its embedded default (hotspots): DAML > NLL-only > naive baselines."""
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    console = capsys.readouterr().out
    assert console.startswith("data: hotspots500 (embedded;")
    assert "± 0.0" not in console and "one seed, so no ±" in console
    res = json.loads((tmp_path / "results.json").read_text())
    by = {s["method"]: s for s in res["summary"]}
    naive = ["avg over 5", "last step", "chance (ŷ=0)"]
    assert set(naive) <= set(by) and res["seeds"] == [0]
    assert by["DAML eps=1.0"]["bpr"] > by["NLL-only"]["bpr"] + 0.05
    assert by["NLL-only"]["bpr"] > max(by[m]["bpr"] for m in naive)
    assert by["DAML eps=1.0"]["nll"] < 1.1 * by["NLL-only"]["nll"]  # at a small NLL cost
    assert all(s["bpr_std"] is None for s in res["summary"])  # one seed: no spread claimed
    assert (tmp_path / "pareto.png").is_file()
    assert str(Path(tmp_path)) not in (tmp_path / "results.json").read_text()


def test_summary_std_is_sample_std_over_seeds_and_single_seeds_show_no_spread():
    rows = [{"method": "A", "bpr": v, "nll": 2 * v, "mae": v} for v in (0.5, 0.6, 0.9)]
    rows.append({"method": "B", "bpr": 0.7, "nll": float("nan"), "mae": 2.0})
    a, b = summarise(rows)
    assert a["n"] == 3 and a["bpr_std"] == pytest.approx(statistics.stdev([0.5, 0.6, 0.9]))
    assert b["n"] == 1 and b["bpr_std"] is None
    text = format_table([a, b])
    assert "0.6667 ± 0.2082" in text and "± 0.0000" not in text
    assert text.splitlines()[0].split()[-1] == "seeds"
    assert text.splitlines()[-1].split() == ["B", "0.7000", "—", "2.0000", "1"]


def test_every_command_refuses_devices_it_does_not_support() -> None:
    """The models build tensors and generators on the CPU: --device is declared cpu-only, so
    ``--device cuda`` is one usage line (exit 2) even on a machine that has CUDA."""
    for name, command in build_cli().commands.items():
        (action,) = [a for a in command.parser._actions if a.dest == "device"]
        assert action.type.accepts == "cpu", name
        with pytest.raises(argparse.ArgumentTypeError, match="supports cpu only"):
            action.type("cuda")


def _train_json(tmp_path, capsys, *argv):
    assert main(["train", "--quiet", "--objective", "nll", *argv, "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    return json.loads((tmp_path / "results.json").read_text()), err


@pytest.mark.slow
def test_train_warns_when_a_heuristic_beats_the_model(tmp_path, capsys):
    """On synthetic7 the site history is a near-perfect forecast (BPR 1): 5 epochs of NLL-only
    stay below it, so train says so on stderr and in results.json."""
    res, err = _train_json(tmp_path, capsys, *BASE[1:])
    cmp = res["heuristic_comparison"]
    best, model = cmp["best_heuristic"], cmp["model"]
    assert cmp["heuristic_better"] and best["valid_bpr"] > model["valid_bpr"]
    assert best["valid_bpr"] == max(h["valid_bpr"] for h in cmp["heuristics"])
    assert {h["rule"] for h in cmp["heuristics"]} == {"last", "avg", "mean", "zero"}
    (line,) = [ln for ln in err.splitlines() if "warning" in ln]
    assert line.startswith("bpr-topk: warning: the heuristic ") and "beats the trained" in line
    assert f"{best['valid_bpr']:.3f} vs {model['valid_bpr']:.3f}" in line


def test_train_prints_model_and_heuristic_bpr_and_no_warning_when_the_model_wins(tmp_path, capsys):
    """hotspots: the history is uninformative, NLL-only beats every heuristic on both splits."""
    argv = ["--dataset", "hotspots", "--sites", "200", "--epochs", "60", "--lr", "0.1"]
    argv += ["--eval-trials", "2", "--eval-samples", "200"]
    assert main(["train", "--objective", "nll", *argv, "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    cmp = json.loads((tmp_path / "results.json").read_text())["heuristic_comparison"]
    assert not cmp["heuristic_better"]
    assert cmp["model"]["test_bpr"] > cmp["best_heuristic"]["test_bpr"] + 0.1
    assert "(best heuristic on valid)" in captured.out
    assert f"{cmp['model']['valid_bpr']:.4f}" in captured.out


def test_several_target_columns_ask_for_the_cli_flag(tmp_path, capsys):
    """Issue 33: the CLI said 'choose one with target=' (the Python argument)."""
    write_topk_folder(make_panel(16, seed=0), tmp_path / "d")
    for s in ("train", "valid", "test"):
        path = tmp_path / "d" / f"{s}_y.csv"
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0] + ",cases", *(ln + ",1" for ln in lines[1:])]) + "\n")
    argv = ["baseline", "--quiet", "--data", str(tmp_path / "d"), "--K", "2"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    line = _error(capsys)
    assert "argument --target:" in line and "choose one with --target" in line, line
    assert "target=" not in line, line
    assert main([*argv, "--target", "cases", "--out", str(tmp_path / "o")]) == 0
