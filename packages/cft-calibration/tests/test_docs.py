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
    assert "../shared/data/mmlu" in text and "../shared/data/openbookqa/Main" in text


def test_readme_installs_from_the_repository_and_from_an_index():
    text = _readme()
    assert (
        "pip install ./packages/cft-calibration" in text and "pip install cft-calibration" in text
    )


def test_readme_and_results_hold_no_machine_path():
    assert not MACHINE_PATH.search(_readme())
    files = sorted(RESULTS.glob("*.json"))
    if not files:
        pytest.skip("no benchmark results beside the tests")
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not MACHINE_PATH.search(text), path.name
        command = json.loads(text)["command"]
        assert command.startswith(
            (
                "python benchmarks/run.py",
                "python benchmarks/positive_control.py",
                "python benchmarks/comparison.py",
            )
        ), path.name


def test_benchmark_command_is_stored_relative_to_the_package(tmp_path, monkeypatch):
    script = PKG / "benchmarks" / "run.py"
    if not script.is_file():
        pytest.skip("benchmarks/ is not beside the tests")
    spec = importlib.util.spec_from_file_location("cft_bench_run", script)
    assert spec is not None and spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "argv", ["run.py"])
    spec.loader.exec_module(run)
    argv = [str(script), "--only", "mmlu", f"--data={tmp_path}"]
    command = run.portable_command(argv)
    assert command.startswith("python benchmarks/run.py --only mmlu --data=")
    assert str(PKG) not in command and str(tmp_path) not in command
