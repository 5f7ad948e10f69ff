import hashlib
import importlib.util
import json
import statistics
from pathlib import Path

import pytest
from parq_optim.cli import build_cli, main

HERE = Path(__file__).resolve().parent


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run(argv, capsys):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def expect_usage_error(argv, flag, capsys, out_dir):
    rc, _, err = run([*argv, "--out", out_dir], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"argument {flag}" in lines[0], lines[0]
    assert not Path(out_dir).exists() or not any(Path(out_dir).iterdir())
    return lines[0]


def train_argv(out, *extra):
    return ["train", "--data", "synthetic", "--epochs", "1", "--hidden", "16", "--quiet",
            "--out", out, *extra]  # fmt: skip


def test_every_subcommand_is_declared_once_on_the_contract():
    cli = build_cli()
    assert list(cli.commands) == ["demo", "train", "export"]
    described = {c["name"]: c for c in cli.describe()}
    assert described["train"]["writes"] == ["results.json", "checkpoint.pt", "loss_curve.png"]
    assert described["export"]["writes"] == ["export.json", "model.parq.pt"]
    for command in described.values():  # every numeric flag has a range check
        raw = [o["flags"][0] for o in command["options"] if o["raw_type"] in ("int", "float")]
        assert raw == []


def test_demo_single_seed_says_data_and_prints_no_zero_spread(tmp_path, capsys):
    rc, out, _ = run(
        ["demo", "--quick", "--epochs", "2", "--seeds", "1", "--out", tmp_path], capsys
    )
    assert rc == 0
    assert "data: synthetic (embedded" in out
    assert "±" not in out and "1 seed" in out
    res = json.loads((tmp_path / "results.json").read_text())
    assert {r["method"] for r in res["rows"]} == {"fp", "ste", "binaryrelax", "parq"}
    assert res["n_seeds"] == 1 and all(r["std"] is None for r in res["rows"])
    assert res["data"] == "synthetic" and res["wall_time_s"] > 0 and "torch" in res["versions"]
    assert str(tmp_path) not in (tmp_path / "results.json").read_text()  # no machine paths


def test_demo_spread_is_the_sample_std_over_the_seeds(tmp_path, capsys):
    rc, out, _ = run(["demo", "--epochs", "2", "--seeds", "2", "--out", tmp_path], capsys)
    assert rc == 0 and "mean ± sample std over 2 seeds" in out
    for row in json.loads((tmp_path / "results.json").read_text())["rows"]:
        assert row["std"] == pytest.approx(statistics.stdev(row["test_acc"]))  # ddof=1


def test_train_then_export_keeps_every_result(tmp_path, capsys):
    out = tmp_path / "run"
    rc, _, _ = run(train_argv(out, "--epochs", "2", "--bits", "1"), capsys)
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["checkpoint"] == "checkpoint.pt" and res["diverged"] is None
    assert all(v["distinct_snapped"] <= 2 for v in res["layers"].values())
    before = {name: digest(out / name) for name in ("results.json", "checkpoint.pt")}
    export = ["export", "--checkpoint", out / "checkpoint.pt", "--out", out]
    rc, text, _ = run(export, capsys)
    assert rc == 0 and "bits/weight" in text
    rep = json.loads((out / "export.json").read_text())
    assert rep["roundtrip_max_abs_diff"] == 0.0 and rep["bits_per_weight"] < 2
    assert rep["file"] == "model.parq.pt" and rep["file_bytes"] > 0
    assert {name: digest(out / name) for name in before} == before  # train's files untouched
    exported = digest(out / "export.json")
    rc, _, err = run(export, capsys)  # a second export refuses to replace export.json
    assert rc == 2 and "--overwrite" in err and digest(out / "export.json") == exported
    assert run([*export, "--overwrite", "--quiet"], capsys)[0] == 0


def test_train_refuses_to_replace_a_checkpoint_without_overwrite(tmp_path, capsys):
    assert run(train_argv(tmp_path), capsys)[0] == 0
    good = digest(tmp_path / "checkpoint.pt")
    rc, _, err = run(train_argv(tmp_path), capsys)
    assert rc == 2 and "--overwrite" in err and digest(tmp_path / "checkpoint.pt") == good


def nan_csv(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a_train.csv").write_text("label,x,y\n0,1,2\n1,3,nan\n1,5,0\n0,2,2\n")
    (folder / "a_test.csv").write_text("label,x,y\n1,0,1\n0,1,1\n")
    return folder


def test_nan_csv_never_replaces_a_good_checkpoint(tmp_path, capsys):
    """Before: a NaN cell trained to all-NaN weights over the checkpoint, rc 0, 'test acc 12.00'."""
    out = tmp_path / "run"
    assert run(train_argv(out), capsys)[0] == 0
    good = {name: digest(out / name) for name in ("results.json", "checkpoint.pt")}
    data = nan_csv(tmp_path / "csv")
    rc, _, err = run(["train", "--data", data, "--overwrite", "--out", out], capsys)
    assert rc == 2 and "argument --data" in err and "line 3, column 3 ('y')" in err
    assert {name: digest(out / name) for name in good} == good


def test_divergence_keeps_the_old_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    assert run(train_argv(out), capsys)[0] == 0
    good = digest(out / "checkpoint.pt")
    rc, _, err = run(train_argv(out, "--lr", "1e6", "--overwrite"), capsys)
    assert rc == 3 and "diverged" in err and "checkpoint.pt was not written" in err
    assert digest(out / "checkpoint.pt") == good
    res = json.loads((out / "results.json").read_text())
    assert res["diverged"].startswith("training diverged") and res["checkpoint"] is None


def test_config_file(tmp_path, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"epochs": 1, "bits": 0, "prox": "ste", "data": "synthetic"}))
    assert run(["train", "--config", cfg, "--quiet", "--out", tmp_path / "o"], capsys)[0] == 0
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["config"]["bits"] == 0 and res["train_config"]["method"] == "ste"


def bad_files(tmp: Path) -> dict[str, Path]:
    files = {}
    empty = tmp / "empty-csv"
    empty.mkdir()
    (empty / "e_train.csv").write_text("")
    (empty / "e_test.csv").write_text("label,a\n0,1\n")
    files["empty"] = empty
    header = tmp / "header-csv"
    header.mkdir()
    (header / "h_train.csv").write_text("label,a,b\n")
    (header / "h_test.csv").write_text("label,a,b\n0,1,2\n")
    files["header"] = header
    flat = tmp / "flat-csv"
    flat.mkdir()
    (flat / "f_train.csv").write_text("label,a,b\n0,1,2\n1,3,4\n")
    (flat / "f_test.csv").write_text("label,a,b\n1,0,1\n")
    files["flat"] = flat
    for name, text in {
        "empty.yaml": "",
        "blank.json": "  \n",
        "bad.yaml": "epochs: [1, 2\n",
        "bad.json": '{"epochs": ',
        "list.yaml": "- 1\n- 2\n",
        "number.json": "3",
        "neg-lr.json": '{"lr": -1}',
    }.items():
        (tmp / name).write_text(text)
        files[name] = tmp / name
    (tmp / "junk.pt").write_bytes(b"not a checkpoint")
    files["junk.pt"] = tmp / "junk.pt"
    (tmp / "nul.txt").write_bytes(b"to be\x00or not" * 50)
    files["nul.txt"] = tmp / "nul.txt"
    (tmp / "latin1.txt").write_bytes(b"caf\xe9 " * 400)
    files["latin1.txt"] = tmp / "latin1.txt"
    (tmp / "short.txt").write_text("a short text")
    files["short.txt"] = tmp / "short.txt"
    (tmp / "ok.txt").write_text("To be, or not to be: that is the question. " * 60)
    files["ok.txt"] = tmp / "ok.txt"
    return files


BAD = [
    (["train", "--lr", "-1"], "--lr", "> 0"),
    (["train", "--weight-decay", "-1"], "--weight-decay", ">= 0"),
    (["train", "--steepness", "-1"], "--steepness", "> 0"),
    (["train", "--bits", "99"], "--bits", ">= 0 and <= 8"),
    (["train", "--bits", "-1"], "--bits", ">= 0 and <= 8"),
    (["train", "--prox", "magic"], "--prox", "expected one of"),
    (["train", "--quantizer", "unif", "--bits", "0"], "--bits", "b >= 1"),
    (["train", "--quantizer", "lsbq-optimal", "--bits", "3"], "--bits", "b in {0, 1, 2}"),
    (["train", "--quant-period", "0"], "--quant-period", ">= 1"),
    (["train", "--block-size", "4"], "--block-size", "--per-channel"),
    (["train", "--block-size", "5", "--per-channel"], "--block-size", "divide"),
    (["train", "--data", "{tmp}/no/such/dir"], "--data", "expected a path or one of"),
    (["train", "--data", "{empty}"], "--data", "e_train.csv is empty"),
    (["train", "--data", "{header}"], "--data", "no data rows"),
    (["train", "--data", "{flat}", "--model", "cnn"], "--model", "needs image data"),
    (["train", "--config", "{empty.yaml}"], "--config", "is empty"),
    (["train", "--config", "{blank.json}"], "--config", "is empty"),
    (["train", "--config", "{bad.yaml}"], "--config", "not valid YAML"),
    (["train", "--config", "{bad.json}"], "--config", "not valid JSON"),
    (["train", "--config", "{list.yaml}"], "--config", "not a mapping"),
    (["train", "--config", "{number.json}"], "--config", "not a mapping"),
    (["train", "--config", "{neg-lr.json}"], "--lr", "set in --config"),
    (["train", "--model", "charlm", "--data", "{nul.txt}"], "--data", "NUL bytes"),
    (["train", "--model", "charlm", "--data", "{latin1.txt}"], "--data", "not UTF-8"),
    (["train", "--model", "charlm", "--data", "{short.txt}"], "--data", "too few"),
    (["train", "--model", "charlm", "--data", "{flat}"], "--data", "one UTF-8 text file"),
    (["train", "--model", "charlm", "--data", "synthetic"], "--data", "one UTF-8 text file"),
    (
        ["train", "--model", "charlm", "--data", "{ok.txt}", "--context", "999"],
        "--context",
        "too few",
    ),
    (["train", "--model", "charlm", "--data", "{ok.txt}", "--heads", "3"], "--heads", "divisor"),
    (["train", "--model", "charlm", "--data", "{ok.txt}", "--epochs", "2"], "--epochs", "--steps"),
    (["train", "--model", "charlm", "--data", "{ok.txt}", "--steps", "0"], "--steps", ">= 1"),
    (["train", "--data", "{ok.txt}"], "--data", "text file is for --model charlm"),
    (["train", "--steps", "10"], "--steps", "is for --model charlm"),
    (["demo", "--quantizer", "unif"], "--quantizer", "1 bit and ternary"),
    (["demo", "--lr", "0"], "--lr", "> 0"),
    (["export", "--checkpoint", "{tmp}/no.pt"], "--checkpoint", "an existing file"),
    (["export", "--checkpoint", "{junk.pt}"], "--checkpoint", ""),
]


@pytest.mark.parametrize(("argv", "flag", "needle"), BAD, ids=lambda x: str(x)[:40])
def test_bad_input_is_one_line_naming_the_flag(argv, flag, needle, tmp_path, capsys):
    files = {"tmp": str(tmp_path), **{k: str(v) for k, v in bad_files(tmp_path).items()}}
    for key, value in files.items():
        argv = [a.replace("{" + key + "}", value) for a in argv]
    line = expect_usage_error(argv, flag, capsys, tmp_path / "out")
    assert needle in line


def test_export_of_a_full_precision_run_is_a_usage_error(tmp_path, capsys):
    assert run(train_argv(tmp_path / "fp", "--prox", "fp"), capsys)[0] == 0
    line = expect_usage_error(
        ["export", "--checkpoint", tmp_path / "fp" / "checkpoint.pt"],
        "--checkpoint",
        capsys,
        tmp_path / "out",
    )
    assert "full precision" in line


def load_cli_cases():
    spec = importlib.util.spec_from_file_location("parq_cli_cases", HERE / "cli_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nan_data_cases_fail_cleanly(tmp_path, capsys):
    cases = load_cli_cases().nan_data(tmp_path)
    commands = set(build_cli().commands)
    assert set(cases) == commands
    for name, case in cases.items():
        if isinstance(case, str):
            continue
        argv, flag = case
        line = expect_usage_error([name, *argv], flag, capsys, tmp_path / f"out-{name}")
        assert "nan" in line.lower()


def test_charlm_train_then_export(tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("To be, or not to be, that is the question:\n" * 80)
    out = tmp_path / "lm"
    argv = ["train", "--model", "charlm", "--data", text, "--steps", "30", "--hidden", "16",
            "--heads", "2", "--layers", "1", "--context", "16", "--bits", "2", "--prox", "parq",
            "--quiet", "--out", out]  # fmt: skip
    rc, _, _ = run(argv, capsys)
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["model"] == "charlm" and res["checkpoint"] == "checkpoint.pt"
    assert res["val_loss"] < res["unigram"]["val_loss"]  # 30 steps beat the trivial baseline
    assert res["quantized_fraction_end"] == 1.0 and res["storage"]["bits_per_weight"] > 2
    assert res["train_config"]["d_model"] == 16 and res["history"][-1]["step"] == 30
    assert str(tmp_path) not in (out / "results.json").read_text()
    has_mpl = importlib.util.find_spec("matplotlib") is not None
    assert (out / "loss_curve.png").is_file() == has_mpl
    rc, _, _ = run(
        ["export", "--checkpoint", out / "checkpoint.pt", "--quiet", "--out", out], capsys
    )
    assert rc == 0
    exp = json.loads((out / "export.json").read_text())
    assert exp["trained"]["model"] == "charlm" and exp["roundtrip_max_abs_diff"] == 0.0
