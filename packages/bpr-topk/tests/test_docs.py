"""The README and the benchmark results as users read them: portable paths only."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1]
README = PKG / "README.md"
RESULTS = PKG / "benchmarks" / "results"
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|tmp|root|Users|usr|opt|mnt)/")


def _readme() -> str:
    if not README.is_file():
        pytest.skip("README.md is not beside the tests")
    return README.read_text(encoding="utf-8")


def test_readme_data_paths_resolve_from_the_repository_root():
    text = _readme()
    bare = [m.start() for m in re.finditer(r"(?<![./\w])shared/data", text)]
    assert not bare, "write ../shared/data/... (relative to the repository root)"
    assert "../shared/data/bpr/cook_county" in text


def test_readme_installs_from_the_repository_and_from_an_index():
    text = _readme()
    assert "pip install ./packages/bpr-topk" in text and "pip install bpr-topk" in text


def test_readme_and_results_hold_no_machine_path():
    assert not MACHINE_PATH.search(_readme())
    files = sorted(RESULTS.glob("*.json"))
    if not files:
        pytest.skip("no benchmark results beside the tests")
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not MACHINE_PATH.search(text), path.name
        assert json.loads(text)["command"].startswith(
            (
                "python benchmarks/run.py",
                "python benchmarks/history.py",
                "python benchmarks/history_variants.py",
                "python benchmarks/history_dispersion.py",
            )
        )


def test_benchmark_command_is_stored_relative_to_the_package(tmp_path, monkeypatch):
    script = PKG / "benchmarks" / "run.py"
    if not script.is_file():
        pytest.skip("benchmarks/ is not beside the tests")
    spec = importlib.util.spec_from_file_location("bpr_topk_bench_run", script)
    assert spec is not None and spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "argv", ["run.py"])
    spec.loader.exec_module(run)
    shared = PKG.parents[2] / "shared" / "data" / "bpr" / "cook_county"
    argv = [str(script), "--only", "hotspots", "--data", str(shared), f"--data={tmp_path}"]
    command = run.portable_command(argv)
    assert command.startswith("python benchmarks/run.py --only hotspots --data ")
    assert str(PKG) not in command and str(tmp_path) not in command
    assert "../../../shared/data/bpr/cook_county" in command or "<...>/cook_county" in command


def test_demo_default_is_the_setting_benchmark_c_selected_on_validation():
    """The demo's λ and fine-tuning learning rate are the ones benchmark (c) chose on the
    validation split (hotspots.json ``selection``), so README and demo tell the same story."""
    from bpr_topk.runs import demo_setup

    path = RESULTS / "hotspots.json"
    if not path.is_file():
        pytest.skip("no hotspots benchmark result beside the tests")
    res = json.loads(path.read_text(encoding="utf-8"))
    cfg = demo_setup("hotspots", 0, quick=True)[3]
    chosen = res["selection"]["selected"]
    assert res["demo_default_is_selected"] is True
    assert {key: getattr(cfg, key) for key in chosen} == chosen
    assert res["train_config"]["selection"] == cfg.selection == "code"
