"""benchmarks/comparison.py's pure parts: the MMLU-internal subject rule, the positive-control gate
and the render of a setting whose control failed (no tables, the verdict line, the diagnosis)."""

import importlib.util
import sys
from pathlib import Path

import cft_calibration as C
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def comparison():
    script = BENCH / "comparison.py"
    if not script.is_file():
        pytest.skip("benchmarks/ is not beside the tests")
    sys.path.insert(0, str(BENCH))  # its sibling scripts (run, positive_control) are imported
    try:
        spec = importlib.util.spec_from_file_location("cft_bench_comparison", script)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.path.remove(str(BENCH))


def _items(counts):
    out = []
    for subject, n in counts.items():
        out += [
            C.MCItem(f"{subject}{i}", "q", ["a", "b", "c", "d"], 0, subject=subject)
            for i in range(n)
        ]
    return out


def test_mmlu_subjects_takes_the_largest_until_enough(comparison):
    items = _items({"law": 50, "math": 30, "art": 30, "bio": 10})
    # ties by name: art before math
    assert comparison.mmlu_subjects(items, 60) == ["art", "law"]
    assert comparison.mmlu_subjects(items, 50) == ["law"]
    assert comparison.mmlu_subjects(items, 111) == ["art", "bio", "law", "math"]
    with pytest.raises(ValueError, match="fewer than"):
        comparison.mmlu_subjects(items, 121)


def _base_cell(acc):
    test = {s: {"accuracy": acc, "conf_ece": 0.05} for s in ("id_test", "ood_test")}
    history = [{"epoch": e, "loss": 1.3, "val": {"accuracy": 0.26}} for e in range(3)]
    history[0].pop("loss")
    diagnosis = {
        "train_accuracy": 0.41,
        "majority_letter": 2,
        "majority_letter_id_accuracy": 0.262,
        "per_subject": {"law": {"n": 1000, "accuracy": 0.24}, "math": {"n": 1000, "accuracy": 0.3}},
    }
    cell = {"test": test, "history": history, "selected_epoch": 2, "diagnosis": diagnosis}
    return {**cell, "seconds": 1.0}


def test_control_gate_and_failed_render(comparison):
    cells = {"mmlu/0/base": _base_cell(0.27)}
    ctl = comparison.control(cells, "mmlu", 2000)
    assert ctl["seeds"] == [0] and not ctl["passed"]
    lo, hi = ctl["wilson95"][0]
    assert lo < 0.27 < hi and ctl["lowest_lower"] == lo
    assert comparison.control({}, "mmlu", 2000) == {}
    assert comparison.control({"mmlu/0/base": _base_cell(0.40)}, "mmlu", 2000)["passed"]

    r = {"protocol": comparison.PROTOCOL, "n": {"mmlu": {"id_test": 2000}}}
    text = "\n".join(comparison.minilm_body(r, cells, "mmlu"))
    assert "positive control failed: no calibration verdict on MMLU-internal" in text
    assert f"seed 0 0.270 [{lo:.3f}, {hi:.3f}]" in text
    assert "accuracy on its own 1,800 training questions 0.410" in text
    assert "most frequent letter (C) scores 0.262" in text
    assert text.index("math 0.300") < text.index("law 0.240")  # best subject first
    assert "above chance (0.25) in 1 of 2 subjects (math)" in text
    assert "| method |" not in text  # no calibration tables after a failed control

    passed = "\n".join(comparison.minilm_body(r, {"mmlu/0/base": _base_cell(0.40)}, "mmlu"))
    assert "**passed**" in passed and "| base (SFT, before DPO) | 1 |" in passed


def _method_cell(ece, acc=0.47, epoch=None, epochs=None):
    cell = {"test": {s: {"accuracy": acc, "conf_ece": ece} for s in ("id_test", "ood_test")}}
    cell["seconds"] = 1.0
    if epoch is not None:
        cell.update(selected_epoch=epoch, epochs=epochs)
    return cell


def test_wide_grid_block_pairs_the_extended_cft_with_the_references(comparison):
    cells = {}
    for s in range(5):
        cells[f"obqa/{s}/aligned"] = _method_cell(0.30)
        cells[f"obqa/{s}/cft"] = _method_cell(0.08, epoch=4, epochs=4)
        cells[f"obqa/{s}/long_sft"] = _method_cell(0.05 + 0.001 * s)
        cells[f"obqa/{s}/ts"] = _method_cell(0.08)
        cells[f"obqa/{s}/cft_wide"] = _method_cell(0.06 - 0.001 * s, epoch=8 if s else 5, epochs=8)
    cells["obqa/0/cft_wide"]["reproduced"] = {"base": {"id_test_accuracy": [0.4705, 0.4700]}}
    r = {
        "protocol": comparison.PROTOCOL,
        "grid_protocol": comparison.GRID,
        "commands": {"obqa/cft_wide": "python benchmarks/comparison.py --stages cft_wide"},
    }
    text = "\n".join(comparison.wide_grids(r, cells, "obqa"))
    assert "| CFT, 8-epoch grid | 5 |" in text
    assert "| CFT, 8-epoch grid − long SFT | 5 |" in text
    assert "| CFT, 8-epoch grid − temperature scaling | 5 | -0.022" in text
    assert "**ahead**" in text and "**behind**" in text  # vs TS ahead, vs long SFT behind
    assert "seed 0: CFT, 8-epoch grid epoch 5/8 ·" in text and "epoch 8/8 (edge)" in text
    assert "rebuilt for seeds [0]" in text and "cells: 5.0e-04" in text
    assert "base, 8-epoch grid |" not in text  # no base_wide cells, no row
    assert comparison.wide_grids(r, {}, "obqa") == []


def test_wide_grid_block_names_the_verdicts_that_change(comparison):
    cells = {}
    for s in range(5):
        cells[f"obqa/{s}/cft"] = _method_cell(0.08 + 0.002 * (s - 2), epoch=4, epochs=4)
        cells[f"obqa/{s}/long_sft"] = _method_cell(0.05)
        cells[f"obqa/{s}/ts"] = _method_cell(0.08)
        cells[f"obqa/{s}/cft_wide"] = _method_cell(0.05 + 0.001 * (s - 2), epoch=6, epochs=8)
    r = {"protocol": comparison.PROTOCOL, "grid_protocol": comparison.GRID, "commands": {}}
    r["commands"]["obqa/cft_wide"] = "c"
    text = "\n".join(comparison.wide_grids(r, cells, "obqa"))
    assert "against long SFT in domain: behind → tied with" in text
    assert "against temperature scaling in domain: tied with → ahead of" in text
    del cells["obqa/4/cft_wide"]  # 4 seeds: no verdicts, so nothing is said to change
    assert "verdicts that change" not in "\n".join(comparison.wide_grids(r, cells, "obqa"))


def test_obqa_wide_trains_base_and_cft_on_the_extended_grids(comparison):
    assert comparison.wide_of("base", "obqa_wide") == "base_wide"
    assert comparison.wide_of("cft", "obqa_wide") == "cft_wide"
    assert comparison.wide_of("long_sft", "obqa_wide") == "long_sft"
    assert comparison.wide_of("base", "obqa") == "base"
    assert comparison.wide_of("cft_wide", "obqa") == "cft_wide"
    assert comparison.DATA_OF["obqa_wide"] == "obqa"
    assert comparison.GRID["base_wide"]["epochs"] > comparison.PROTOCOL["base"]["epochs"]
