"""The README results renderer (benchmarks/render.py): sample std over seeds, gain vs the best
baseline in the table."""

import importlib.util
from pathlib import Path

import pytest

RENDER = Path(__file__).resolve().parents[1] / "benchmarks" / "render.py"


@pytest.fixture(scope="module")
def render():
    if not RENDER.is_file():
        pytest.skip(f"{RENDER} not found")
    spec = importlib.util.spec_from_file_location("fedgmt_render", RENDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cell_is_mean_and_sample_std(render):
    # ddof=1: std of (0.90, 0.92, 0.94) is 0.02 (the population std would be 0.0163)
    assert render.cell([0.90, 0.92, 0.94]) == "92.00 ± 2.00"
    assert render.cell([0.9]) == "90.00"  # one seed: no "± 0.00"
    assert render.cell([]) == "—"


def test_gain_is_against_the_best_baseline_in_the_table(render):
    means = {"fedgmt": 0.80, "fedavg": 0.65, "fedsam": 0.64, "feddyn": 0.83, "scaffold": 0.56}
    assert render.best_baseline(means) == ("feddyn", 0.83)
    assert render.gain_cell(means) == "-3.00 (vs feddyn)"
    paper = {"fedgmt": 79.45, "fedavg": 71.68, "fedsam": 72.27, "feddyn": 76.71}
    assert render.gain_cell(paper, scale=1.0) == "+2.74 (vs feddyn)"


def test_readme_results_block_is_the_rendered_json(render):
    readme = RENDER.parents[1] / "README.md"
    if not (RENDER.parent / "results" / "digits.json").is_file() or not readme.is_file():
        pytest.skip("benchmark results or README not found")
    block = readme.read_text().split(render.START, 1)[1].split(render.END, 1)[0]
    assert block.strip() == render.render(plot=False).strip()
    assert "FedGMT − best baseline" in block and "ddof=1" in block
