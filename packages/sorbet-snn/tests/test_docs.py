import json
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1]
MACHINE_PATH = re.compile(r"(/home/|/tmp/|/work/|/root/|[A-Za-z]:\\\\)")


def test_readme_has_results_and_no_machine_paths():
    readme = PKG / "README.md"
    if not readme.is_file():
        pytest.skip("README.md is not beside the tests")
    text = readme.read_text(encoding="utf-8")
    start, end = text.index("<!-- results:start -->"), text.index("<!-- results:end -->")
    assert start < end
    assert not MACHINE_PATH.search(text)


def test_results_json_hold_no_machine_paths():
    for path in sorted((PKG / "benchmarks" / "results").rglob("*.json")):
        text = path.read_text(encoding="utf-8")
        json.loads(text)
        assert not MACHINE_PATH.search(text), path.name
