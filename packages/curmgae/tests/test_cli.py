"""The command line: the README's commands keep every result, bad input is one line and exit 2."""

import hashlib
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from curmgae import load_checkpoint
from curmgae.cli import build_cli, main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_cases import nan_data, write_checkpoint, write_graph_npz

TINY = ["--quick", "--epochs", "3", "--hidden", "8", "--batch-size", "4096", "--quiet"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line_error(capsys, flag: str) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert flag in err[0] and "Traceback" not in err[0]
    return err[0]


@pytest.mark.slow
def test_readme_commands_keep_every_result(tmp_path, capsys):
    """pretrain, evaluate --task link, evaluate --task node with ONE --out: every file survives, and
    nothing is replaced without --overwrite. Link AUC on the planted graph beats chance."""
    out = tmp_path / "run"
    assert main(["pretrain", *TINY, "--out", str(out)]) == 0
    results = out / "results.json"
    first = _digest(results)
    assert main(["evaluate", "--task", "link", "--out", str(out), "--quiet"]) == 0
    assert (
        main(["evaluate", "--task", "node", "--protocol", "svm", "--out", str(out), "--quiet"]) == 0
    )
    assert {p.name for p in out.iterdir()} >= {
        "results.json",
        "model.pt",
        "evaluate-link.json",
        "evaluate-node.json",
    }
    assert _digest(results) == first  # evaluate never touches pretrain's results
    link = json.loads((out / "evaluate-link.json").read_text())
    node = json.loads((out / "evaluate-node.json").read_text())
    assert set(link["metrics"]) == {"lp_auc", "lp_ap"} and set(node["metrics"]) == {"nc_svm_acc"}
    assert link["metrics"]["lp_auc"] > 0.6  # 3 epochs already beat chance (0.5) on planted edges
    assert link["subcommand"] == "evaluate" and link["seed"] == 0 and link["versions"]["torch"]
    assert str(tmp_path) not in (out / "evaluate-link.json").read_text()  # no machine paths
    pre = json.loads(results.read_text())
    assert pre["subcommand"] == "pretrain" and pre["model_config"]["hidden"] == 8
    assert pre["config_sources"]["mask_ratio"].startswith("code:S2GAE")
    capsys.readouterr()

    link_digest = _digest(out / "evaluate-link.json")
    assert main(["evaluate", "--task", "link", "--out", str(out), "--quiet"]) == 2
    assert "evaluate-link.json already exists" in _one_line_error(capsys, "--overwrite")
    assert _digest(out / "evaluate-link.json") == link_digest
    model = _digest(out / "model.pt")
    assert main(["pretrain", *TINY, "--out", str(out)]) == 2
    _one_line_error(capsys, "--overwrite")
    assert _digest(out / "model.pt") == model and _digest(results) == first
    assert main(["evaluate", "--task", "link", "--out", str(out), "--quiet", "--overwrite"]) == 0


def test_declared_commands_and_result_files():
    cli = build_cli()
    files = {c["name"]: c["writes"] for c in cli.describe()}
    assert files["pretrain"] == ["results.json", "model.pt", "curriculum.png"]
    assert files["evaluate"] == ["evaluate-both.json"]  # evaluate-<task>.json
    assert files["demo"][0] == "results.json"
    for command in cli.describe():
        raw = [o["flags"][0] for o in command["options"] if o["raw_type"] in ("int", "float")]
        assert not raw, (command["name"], raw)


def test_bad_flag_values_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ICML25_DATA", raising=False)  # Cora then needs --root
    out = str(tmp_path / "o")
    for argv, flag in [
        (["pretrain", "--mask-ratio", "1.5"], "--mask-ratio"),
        (["pretrain", "--lr", "-1"], "--lr"),
        (["pretrain", "--epochs", "0"], "--epochs"),
        (["pretrain", "--method", "bogus"], "--method"),
        (["pretrain", "--method", "gae", "--loss", "full_softmax"], "--loss"),
        (["pretrain", "--method", "split0", "--split-ratio", "0.3"], "--split-ratio"),
        (["pretrain", "--lr", "1e30"], "--lr"),
        (["pretrain", "--epochs", "100000000000"], "--epochs"),
        (["pretrain", "--beta", "1e300"], "--beta"),
        (["pretrain", "--device", "cuda"], "--device"),
        (["evaluate", "--probe-epochs", "0"], "--probe-epochs"),
        (["demo", "--epochs", "0"], "--epochs"),
        (["pretrain", "--mask-ratio", "0.01"], "--mask-ratio"),  # below min_mask_ratio 0.05
        (["pretrain", "--dataset", "Cora"], "--root"),
        (["demo", "--seeds", "0"], "--seeds"),
    ]:
        assert main([*argv, "--out", out]) == 2, argv
        _one_line_error(capsys, flag)
    assert not Path(out).exists() or not any(Path(out).iterdir())


def test_config_file(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("epochs: 1\nhidden: 8\nquick: true\nbatch_size: 4096\n")
    assert main(["pretrain", "--config", str(cfg), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    r = json.loads((tmp_path / "o" / "results.json").read_text())
    assert r["config"]["epochs"] == 1 and r["model_config"]["epochs"] == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 0\n")
    assert main(["pretrain", "--config", str(bad), "--out", str(tmp_path / "p")]) == 2
    _one_line_error(capsys, "--epochs")


def test_missing_planetoid_files_named_on_the_command_line(tmp_path, capsys, planetoid):
    planetoid(tmp_path / "Cora")
    (tmp_path / "Cora" / "raw" / "ind.cora.ty").unlink()
    argv = ["pretrain", "--dataset", "Cora", "--root", str(tmp_path), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    line = _one_line_error(capsys, "--root")
    assert "ind.cora.ty" in line and "ind.cora.allx" not in line


def test_truncated_planetoid_file_is_one_line(tmp_path, capsys, planetoid):
    planetoid(tmp_path / "Cora")
    graph = tmp_path / "Cora" / "raw" / "ind.cora.graph"
    graph.write_bytes(graph.read_bytes()[:50])
    argv = ["pretrain", "--dataset", "Cora", "--root", str(tmp_path), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert "ind.cora.graph" in _one_line_error(capsys, "--root")


def test_pretrain_on_a_planetoid_folder_then_another_root(tmp_path, capsys, planetoid):
    """A second --root with other files is not served the first root's cached graph."""
    for name, seed in (("a", 0), ("b", 1)):
        planetoid(tmp_path / name / "Cora", seed=seed)
        out = tmp_path / f"out-{name}"
        argv = ["pretrain", "--dataset", "Cora", "--root", str(tmp_path / name), *TINY[1:]]
        assert main([*argv, "--out", str(out)]) == 0
    a = load_checkpoint(tmp_path / "out-a" / "model.pt")
    b = load_checkpoint(tmp_path / "out-b" / "model.pt")
    assert a["root"] != b["root"]
    ra = json.loads((tmp_path / "out-a" / "results.json").read_text())
    assert ra["data"].startswith("Cora") and "520 nodes" in ra["data"]


@pytest.mark.parametrize("damage", ["empty", "truncated", "nan", "not-a-checkpoint"])
def test_bad_checkpoint_is_one_line(tmp_path, capsys, damage):
    graph = write_graph_npz(tmp_path / "g.npz")
    ckpt = write_checkpoint(tmp_path / "model.pt", graph, nan=damage == "nan")
    if damage == "empty":
        ckpt.write_bytes(b"")
    elif damage == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[:300])
    elif damage == "not-a-checkpoint":
        torch.save({"weights": torch.ones(2)}, ckpt)
    assert main(["evaluate", "--checkpoint", str(ckpt), "--out", str(tmp_path / "o")]) == 2
    line = _one_line_error(capsys, "--checkpoint")
    expect = {
        "empty": "is empty",
        "truncated": "truncated",
        "nan": "non-finite",
        "not-a-checkpoint": "lacks",
    }
    assert expect[damage] in line and "model.pt" in line


def test_checkpoint_round_trip_and_default_location(tmp_path, capsys):
    graph = write_graph_npz(tmp_path / "g.npz")
    ckpt = load_checkpoint(write_checkpoint(tmp_path / "model.pt", graph))
    assert ckpt["method"] == "curmgae" and ckpt["config"].hidden == 4 and ckpt["in_channels"] == 3
    # evaluate without --checkpoint reads <out>/model.pt, and says so when it is absent
    assert main(["evaluate", "--out", str(tmp_path / "empty")]) == 2
    assert "model.pt not found" in _one_line_error(capsys, "--checkpoint")
    assert main(["evaluate", "--task", "link", "--out", str(tmp_path), "--quiet"]) == 0
    assert (tmp_path / "evaluate-link.json").is_file()


def test_nan_cases_give_one_line(tmp_path, capsys):
    """The conformance cases (tests/cli_cases.py) fail with the named flag, before any training."""
    for command, case in nan_data(tmp_path / "cases").items():
        if isinstance(case, str):
            continue
        argv, flag = case
        assert main([command, *argv, "--out", str(tmp_path / f"out-{command}")]) == 2
        assert "non-finite" in _one_line_error(capsys, flag)


def test_npz_without_edge_index(tmp_path, capsys):
    p = tmp_path / "g.npz"
    np.savez(p, x=np.ones((3, 2)))
    assert main(["pretrain", "--dataset", str(p), "--out", str(tmp_path / "o")]) == 2
    assert "missing field 'edge_index'" in _one_line_error(capsys, "--dataset")


def test_demo_says_its_data_and_spread(tmp_path, capsys):
    """One seed: no '± 0.00'; two seeds: mean ± sample std (ddof=1), as in results.json."""
    assert main(["demo", "--quick", "--epochs", "2", "--out", str(tmp_path / "one")]) == 0
    text = capsys.readouterr().out
    assert "data: synthetic curriculum graph (embedded" in text
    assert "1 seed(s)" in text and "±" not in text
    one = json.loads((tmp_path / "one" / "results.json").read_text())
    assert one["summary"]["curmgae"]["lp_auc"]["std"] is None and one["seeds"] == [0]
    assert (
        main(["demo", "--quick", "--epochs", "2", "--seeds", "2", "--out", str(tmp_path / "two")])
        == 0
    )
    text = capsys.readouterr().out
    assert "2 seed(s)" in text and "±" in text and "ddof=1" in text
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    values = two["per_seed"]["s2gae"]["lp_auc"]
    assert len(values) == 2 and two["summary"]["s2gae"]["lp_auc"]["std"] == pytest.approx(
        statistics.stdev(values)
    )
    assert f"{100 * statistics.fmean(values):.2f} ± {100 * statistics.stdev(values):.2f}" in text


def test_cli_on_cora_folder(tmp_path, data_root):
    root = data_root / "planetoid"
    if not (root / "Cora" / "raw").is_dir():
        pytest.skip(f"Cora raw files not found at {root / 'Cora' / 'raw'}")
    out = str(tmp_path / "cora")
    common = ["--out", out, "--quiet"]
    argv = ["--dataset", "Cora", "--root", str(root), "--epochs", "1", "--hidden", "16"]
    assert main(["pretrain", *argv, "--batch-size", "8192", *common]) == 0
    assert main(["evaluate", "--task", "link", *common]) == 0
    r = json.loads((tmp_path / "cora" / "evaluate-link.json").read_text())
    assert 0.5 < r["metrics"]["lp_auc"] <= 1.0
    assert r["data"].startswith("Cora") and "2,708 nodes" in r["data"]


def test_cli_extra_declares_the_plot_dependency():
    """`nox -s demo` and the README install curmgae[cli]; it must exist and bring matplotlib."""
    tomllib = pytest.importorskip("tomllib")
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("matplotlib") for d in extras["cli"])


def test_public_names_and_a_light_cli_import():
    """Every name in curmgae.__all__ resolves; importing the CLI loads neither torch_geometric nor
    torch, so usage errors (an unknown flag, a result that would be overwritten) come at once."""
    import subprocess

    import curmgae

    assert sorted(curmgae.__all__) == sorted(["__version__", *curmgae._EXPORTS])
    for name in curmgae.__all__:
        assert getattr(curmgae, name) is not None
    code = (
        "import sys, curmgae.cli; "
        "assert 'torch_geometric' not in sys.modules and 'torch' not in sys.modules, "
        "sorted(m for m in sys.modules if m.startswith('torch'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pretrain_pacing_flags_reach_the_config_and_the_trace(tmp_path):
    """--lambda-pace quantile --pacing root --pace-end 1 --tie-break random --update-every 2
    --patience 5 end up in results.json's model_config, and the trace has one S-step per 2 epochs
    with the pacing function's target rho_t."""
    out = tmp_path / "run"
    args = ["--lambda-pace", "quantile", "--pacing", "root", "--pace-end", "1"]
    args += ["--tie-break", "random", "--update-every", "2", "--patience", "5"]
    assert main(["pretrain", *TINY, *args, "--epochs", "4", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    cfg = res["model_config"]
    assert (cfg["lambda_pace"], cfg["pacing"], cfg["pace_end"]) == ("quantile", "root", 1.0)
    assert (cfg["tie_break"], cfg["update_every"], cfg["patience"]) == ("random", 2, 5)
    trace = res["history"]["trace"]
    assert [e["epoch"] for e in trace] == [1, 3]
    assert trace[0]["rho"] < trace[1]["rho"] <= 1.0


def test_bad_pace_end_is_one_line(capsys):
    assert main(["pretrain", *TINY, "--pace-end", "1.5", "--out", "x"]) == 2
    _one_line_error(capsys, "--pace-end")


def test_curriculum_rows_show_a_dash_while_the_difficulty_part_is_empty():
    """Early S-steps of the default (rcl_inverse) pace can admit no edge (K_t = 0): the demo's table
    shows '–' for the shares instead of failing on None."""
    from curmgae.cli import curriculum_rows

    empty = {"t": 0, "epoch": 1, "lambda": 0.0075, "K_t": 0, "cap": 70}
    empty.update(share_easy=None, share_medium=None, share_hard=None)
    full = {**empty, "t": 1, "epoch": 2, "K_t": 5, "share_easy": 0.6}
    full.update(share_medium=0.4, share_hard=0.0)
    rows = curriculum_rows([empty, full])
    assert rows[0][-3:] == ("–", "–", "–") and rows[1][-3:] == ("0.60", "0.40", "0.00")
    assert curriculum_rows([{k: v for k, v in empty.items() if not k.startswith("share")}])
