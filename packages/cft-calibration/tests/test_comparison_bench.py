"""benchmarks/comparison.py's pure parts: the MMLU-internal subject rule, the positive-control gate
and the render of a setting whose control failed (no tables, the verdict line, the diagnosis)."""

import importlib.util
import sys
from pathlib import Path

import cft_calibration as C
import pytest
import torch
from cft_calibration.cached import HiddenSplit

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


def test_seed_splits_give_the_same_questions_as_cached_states(comparison):
    import torch

    n = 40
    pool = comparison.HiddenSplit(
        torch.zeros(n, 2, 3, 1), torch.ones(n, 2, 3, dtype=torch.bool),
        torch.ones(n, 2, dtype=torch.bool), torch.arange(n) % 2,
    )  # fmt: skip
    items = [C.MCItem(f"q{i}", "q", ["a", "b"], i % 2) for i in range(n)]
    old = dict(comparison.PROTOCOL)
    comparison.PROTOCOL.update(val=5, base_questions=10)
    try:
        a, b = comparison.seed_splits(pool, 3), comparison.seed_splits(items, 3)
        again = comparison.seed_splits(items, 4)
    finally:
        comparison.PROTOCOL.clear()
        comparison.PROTOCOL.update(old)
    assert [len(b[k]) for k in ("val", "base", "cal")] == [5, 10, 25]
    for k in ("val", "base", "cal"):  # same permutation: labels of the cached split = the items'
        assert a[k].labels.tolist() == [it.answer for it in b[k]]
    assert [it.id for it in again["val"]] != [it.id for it in b["val"]]


def test_step_clock_epochs_and_median(comparison, monkeypatch):
    ticks = iter([0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0])
    monkeypatch.setattr(comparison.time, "perf_counter", lambda: next(ticks))
    clocks = []
    bar = comparison.clocked(clocks)(6, "train")
    for _ in range(6):
        bar.update(1)
    out = clocks[0].summary(steps_per_epoch=3)
    assert out["steps"] == 6 and out["step_seconds_median"] == 1.0
    assert out["epoch_seconds"] == [3.0, 9.0]  # the second holds the validation pass before it


def _full_cells(comparison, stages, step=2.0, val=30.0, test=200.0):
    cells = {}
    for s, st in stages:
        cell = {"test": {}, "seconds": 1.0}
        if st == "base":
            spe = 113
            cell["timing"] = {
                "steps": 8 * spe, "step_seconds_median": step, "test_seconds": test,
                "epoch_seconds": [spe * step + val] * 8,
            }  # fmt: skip
        cells[f"obqa_full/{s}/{st}"] = cell
    return cells


def test_full_cost_projection(comparison):
    r = {"cells": {}, "n": {"obqa_full": {"id_test": 2000, "ood_test": 2000, "pool": 3957}}}
    assert comparison.full_cost(r, "obqa_full") == {}
    r["cells"] = _full_cells(comparison, [(0, "uniform"), (0, "base")])
    cost = comparison.full_cost(r, "obqa_full")
    st = cost["stage_seconds"]
    assert cost["cells_done"] == 2 and cost["cells_total"] == 40
    assert cost["validation_pass_seconds"] == pytest.approx(30.0)
    assert st["base"] == pytest.approx(8 * 113 * 2.0 + 9 * 30.0 + 200.0)
    assert st["cft"] == st["ls"] and st["rcft"] > st["long_sft"] > st["ts"] == pytest.approx(30.0)
    assert not cost["dpo_step_measured"]
    assert cost["dpo_step_seconds"] == pytest.approx(2.0 * 2 * 4 / 3)
    assert cost["missing_seconds"] == pytest.approx(
        sum(st[x] for x in comparison.FULL_ORDER) * 5 - st["base"]
    )
    # losing the weights between sittings costs rebuilds: more sittings than the bare CPU time
    bare = cost["missing_seconds"] / (cost["sitting_minutes"] * 60)
    assert cost["sittings_left"] > bare and cost["rebuilds"] >= 1


def _full_results(comparison, cells):
    return {
        "cells": cells,
        "protocol": comparison.PROTOCOL,
        "grid_protocol": comparison.GRID,
        "full_protocol": comparison.FULL,
        "n": {"obqa_full": {"id_test": 2000, "ood_test": 2000, "pool": 3957}},
        "commands": {"obqa_full": "python benchmarks/comparison.py --settings obqa_full"},
    }


def test_full_section_shows_per_seed_numbers_only(comparison):
    cells = _full_cells(comparison, [(0, "uniform"), (0, "base")])
    for c in cells.values():
        c["test"] = {s: {"accuracy": 0.45, "conf_ece": 0.05} for s in ("id_test", "ood_test")}
    cells["obqa_full/0/base"].update(selected_epoch=8, epochs=8)
    r = _full_results(comparison, cells)
    r["full_cost"] = {"obqa_full": comparison.full_cost(r, "obqa_full")}
    text = "\n".join(comparison.full_section(r, cells))
    assert "2 of 40 cells measured (0 of 5 seeds with every stage)" in text
    assert "**Not complete: no comparison yet.**" in text
    assert (
        "| 0 | base (SFT, before DPO) | 0.450 | 0.050 | 0.450 | 0.050 | epoch 8/8 (edge) |" in text
    )
    assert "**passed**" in text and "Seeds with a base model so far: 0." in text
    assert "sittings**" in text and "no GPU run is reported here" in text
    for word in ("ahead", "behind", "tie", "non-inferior", "Paired differences"):
        assert word not in text


def test_device_flag_rejects_bad_and_absent_devices(comparison):
    import argparse

    import torch

    p = argparse.ArgumentParser()
    comparison.check_device(p, "cpu")  # accepted
    with pytest.raises(SystemExit):
        comparison.check_device(p, "gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            comparison.check_device(p, "cuda")


def test_full_stages_run_on_the_scorers_device(comparison, monkeypatch, tmp_path):
    """Every stage of ``obqa_full`` on a tiny BERT (on the CPU): the cells say where they ran, TS
    reuses the aligned model's stored test logits, and a rebuilt base model equals the first."""
    import torch
    from cft_calibration.tiny import tiny_mc_model

    words = ["red", "blue", "green", "cat", "dog", "sun", "moon", "tree"]
    rng = __import__("random").Random(0)

    def item(i):
        q = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
        return C.MCItem(f"q{i}", q, rng.sample(words, 4), rng.randrange(4))

    pool = [item(i) for i in range(30)]
    cache = {"pool": pool, "id_test": [item(100 + i) for i in range(6)],
             "ood_test": [item(200 + i) for i in range(6)]}  # fmt: skip
    model, tok = tiny_mc_model([" ".join(words)], layers=1, hidden=16, heads=2)
    scorer0 = C.MCScorer(model, tok, 32).to(torch.device("cpu"))
    monkeypatch.setitem(comparison.PROTOCOL, "val", 6)
    monkeypatch.setitem(comparison.PROTOCOL, "base_questions", 12)
    monkeypatch.setitem(comparison.PROTOCOL["dpo"], "steps", 2)
    monkeypatch.setitem(comparison.PROTOCOL["long"], "epochs", 1)
    monkeypatch.setitem(comparison.GRID["base_wide"], "epochs", 2)
    monkeypatch.setitem(comparison.GRID["cft_wide"], "epochs", 1)
    cells = {}
    for st in (*comparison.FULL_ORDER, *comparison.EXTRA):
        cells[f"obqa_full/0/{st}"] = comparison.run_cell(
            st, 0, scorer0, cache, tmp_path, "obqa_full"
        )
    assert {c["device"] for c in cells.values()} == {"cpu"}
    # the same start and batches, other bin accuracies: the first epoch's R differs
    rcft, held = cells["obqa_full/0/rcft"]["history"], cells["obqa_full/0/rcft_heldout"]["history"]
    assert held[0]["epoch"] == rcft[0]["epoch"] == 1 and held[0]["reg"] != rcft[0]["reg"]
    assert cells["obqa_full/0/base"]["epochs"] == 2 and cells["obqa_full/0/cft"]["epochs"] == 1
    assert len(cells["obqa_full/0/base"]["timing"]["epoch_seconds"]) == 2
    work = tmp_path / "obqa_full"
    assert (work / "seed0_aligned_test_logits.pt").is_file()
    a, t = cells["obqa_full/0/aligned"]["test"], cells["obqa_full/0/ts"]["test"]
    assert t["id_test"]["accuracy"] == a["id_test"]["accuracy"]  # TS keeps the argmax
    (work / "seed0_base.pt").unlink()
    again = comparison.reproduce(cells, "obqa_full", 0, scorer0, cache, tmp_path, ("base",))
    for new, old in again["base"].values():
        assert new == old


def test_projected_cost_adds_the_rebuilds(comparison, tmp_path):
    st = {"base": 100.0, "aligned": 50.0, "ts": 1.0, "cft": 80.0}
    r = {"full_cost": {"obqa_full": {"stage_seconds": st}}}
    assert comparison.projected(r, tmp_path, "obqa_full", 0, "cft") == 230.0
    assert comparison.projected(r, tmp_path, "obqa_full", 0, "aligned") == 150.0
    (tmp_path / "obqa_full" / "seed0_base.pt").write_bytes(b"")
    assert comparison.projected(r, tmp_path, "obqa_full", 0, "cft") == 130.0
    (tmp_path / "obqa_full" / "seed0_aligned.pt").write_bytes(b"")
    assert comparison.projected(r, tmp_path, "obqa_full", 0, "ts") == 1.0
    assert comparison.projected({}, tmp_path, "obqa_full", 0, "ts") is None


def test_save_takes_in_cells_another_sitting_wrote(comparison, monkeypatch, tmp_path):
    """Two sittings at once (one per seed) both load the JSON, then write it: the second writer keeps
    the first one's cell and recomputes the positive control over both seeds."""
    monkeypatch.setattr(comparison, "RESULT", tmp_path / "comparison.json")
    n = {"mmlu": {"id_test": 2000}}
    first = {"cells": {"mmlu/0/base": _base_cell(0.40)}, "n": n, "control": {}, "commands": {}}
    second = {"cells": {"mmlu/1/base": _base_cell(0.27)}, "n": n, "control": {}, "commands": {}}
    first["control"]["mmlu"] = comparison.control(first["cells"], "mmlu", 2000)
    second["control"]["mmlu"] = comparison.control(second["cells"], "mmlu", 2000)
    comparison.save(first)
    comparison.save(second)
    disk = comparison.load_results()
    assert set(disk["cells"]) == {"mmlu/0/base", "mmlu/1/base"}
    assert disk["control"]["mmlu"]["seeds"] == [0, 1] and not disk["control"]["mmlu"]["passed"]
    comparison.save(first)  # the first sitting writes again: nothing of the second is lost
    assert set(comparison.load_results()["cells"]) == {"mmlu/0/base", "mmlu/1/base"}


def test_ag_news_items_reads_the_original_csv(comparison, tmp_path):
    (tmp_path / "classes.txt").write_text("World\nSports\nBusiness\nSci/Tech\n")
    (tmp_path / "test.csv").write_text(
        '"3","Oil up","Prices rose\\\\again.\\\\news later."\n"2","Cup final","A ""great"" game."\n'
    )
    items = comparison.ag_news_items(tmp_path)
    assert [it.answer for it in items] == [2, 1]
    assert items[0].choices == ["World", "Sports", "Business", "Sci/Tech"]
    assert items[0].question == (
        f"Oil up. Prices rose again. news later. {comparison.NEWS['prompt']}"
    )
    assert items[1].question.startswith('Cup final. A "great" game.')


def test_causal_news_section_has_its_own_control_and_tables(comparison):
    def metrics(acc, ece):
        return {s: {"accuracy": acc, "conf_ece": ece} for s in ("id_test", "ood_test")}

    raw = {}
    for s in range(5):
        test = {name: metrics(0.60 + 0.01 * s, 0.05 + 0.01 * s) for name in
                ("base", "aligned", "ts", "cft", "long_sft", "rcft")}  # fmt: skip
        test["aligned"] = metrics(0.60 + 0.01 * s, 0.30)
        raw[f"causal_news/{s}/all"] = {
            "test": test,
            "stage_seconds": {"base": 1.0, "dpo": 1.0},
            "selected": {"base_epoch": 4, "temperature": 1.5, "cft_epoch": 2},
        }
    r = {"protocol": comparison.PROTOCOL, "cells": raw, "n": {}}
    text = "\n".join(comparison.causal_section(r, comparison.flat_cells(raw), "causal_news"))
    assert text.startswith("**(b2) Setting `causal_news`**")
    assert "lowest lower bound" in text and "**passed**" in text
    assert "| CFT − aligned (SFT + DPO) | 5 |" in text and "**ahead**" in text
    assert "seed 4: base epoch 4/10; T = 1.50; CFT epoch 2/3" in text


def test_causal_news_wide_block_flags_selections_on_its_own_grid(comparison):
    test = {name: {s: {"accuracy": 0.6, "conf_ece": 0.05} for s in ("id_test", "ood_test")}
            for name in ("base", "aligned", "ts", "cft", "long_sft", "rcft")}  # fmt: skip
    wide = comparison.NEWS_WIDE
    raw = {
        "causal_news_wide/0/all": {
            "test": test,
            "stage_seconds": {},
            "selected": {"base_epoch": wide["base_epochs"], "temperature": 2.0, "cft_epoch": 4},
        },
        "causal_news/0/all": {
            "test": test,
            "stage_seconds": {},
            "selected": {"base_epoch": 10, "temperature": 2.0, "cft_epoch": 3},
        },
    }
    r = {"protocol": comparison.PROTOCOL, "cells": raw, "n": {}}
    cells = comparison.flat_cells(raw)
    text = "\n".join(comparison.causal_section(r, cells, "causal_news_wide"))
    assert text.startswith("**(b3) Setting `causal_news_wide`**")
    assert f"base epoch {wide['base_epochs']}/{wide['base_epochs']} (edge)" in text
    assert f"CFT epoch 4/{wide['cft_epochs']}." in text  # inside the wider grid: no flag
    narrow = "\n".join(comparison.causal_section(r, cells, "causal_news"))
    assert "base epoch 10/10 (edge); T = 2.00; CFT epoch 3/3 (edge)" in narrow


def test_uniform_metrics_score_ties_as_the_first_option_on_items_and_cached_states(comparison):
    items = [C.MCItem(f"q{i}", "q", ["a", "b", "c", "d"], 0) for i in range(3)]
    items.append(C.MCItem("q3", "q", ["a", "b"], 1))  # k = 2: the tie's argmax is wrong
    got = comparison.uniform_metrics(items)
    assert got["accuracy"] == pytest.approx(0.75)
    mask = torch.tensor([[True] * 4] * 3 + [[True, True, False, False]])
    hidden = HiddenSplit(
        torch.zeros(4, 4, 1, 1), torch.ones(4, 4, 1), mask, torch.tensor([0, 0, 0, 1])
    )
    assert comparison.uniform_metrics(hidden) == pytest.approx(got)


def _causal_raw(setting, seeds):
    test = {name: {s: {"accuracy": 0.6, "conf_ece": 0.05} for s in ("id_test", "ood_test")}
            for name in ("base", "aligned", "ts", "cft", "long_sft", "rcft")}  # fmt: skip
    return {
        f"{setting}/{s}/all": {
            "test": test,
            "stage_seconds": {},
            "selected": {"base_epoch": 4, "temperature": 2.0, "cft_epoch": 2},
        }
        for s in seeds
    }


def test_causal_block_has_the_uniform_row_when_the_json_has_it(comparison):
    raw = _causal_raw("causal_news", range(5))
    uniform = {
        "causal_news": {s: {"accuracy": 0.25, "conf_ece": 0.01} for s in ("id_test", "ood_test")}
    }
    r = {"protocol": comparison.PROTOCOL, "cells": raw, "n": {}, "uniform": uniform}
    text = "\n".join(
        comparison.causal_section(r, comparison.flat_cells(raw, uniform), "causal_news")
    )
    assert "| uniform (trivial) | 5 | 0.250 [0.250, 0.250] | 0.010 [0.010, 0.010] |" in text
    assert "The uniform row's accuracy" in text
    assert "CFT is behind uniform (trivial) in domain and behind it out of domain" in text
    assert "conf-ECE, 0.010 in domain and 0.010 out" in text
    old = {k: v for k, v in r.items() if k != "uniform"}  # a JSON from before the uniform row
    text = "\n".join(comparison.causal_section(old, comparison.flat_cells(raw), "causal_news"))
    assert "uniform" not in text


def test_save_keeps_the_uniform_rows_another_sitting_wrote(comparison, monkeypatch, tmp_path):
    monkeypatch.setattr(comparison, "RESULT", tmp_path / "comparison.json")
    row = {s: {"accuracy": 0.25, "conf_ece": 0.01} for s in ("id_test", "ood_test")}
    first = {"cells": {}, "n": {}, "control": {}, "commands": {}, "uniform": {"causal": row}}
    comparison.save(first)
    second = {"cells": {"mmlu/1/base": _base_cell(0.27)}, "n": {}, "control": {}, "commands": {}}
    comparison.save(second)
    assert comparison.load_results()["uniform"] == {"causal": row}


def test_recorded_command_reproduces_every_sitting_without_scheduling_flags(
    comparison, monkeypatch, tmp_path
):
    """The README's command for a key names the seeds of every sitting that measured it and drops
    --stop-at (a copied past time would stop before the first cell) and --work."""
    assert comparison.without_scheduling(
        ["--seeds", "4", "--work", "/w", "--stop-at", "17", "--stop-at=3", "--work=/v", "--resume"]
    ) == ["--seeds", "4", "--resume"]
    cmd = "python benchmarks/comparison.py --settings obqa_full --seeds {} --resume"
    assert comparison.merge_command(cmd.format("0 1"), cmd.format("3 2")) == cmd.format("0 1 2 3")
    other = "python benchmarks/comparison.py --settings obqa_full --resume"  # default: all seeds
    assert comparison.merge_command(cmd.format("0"), other) == other
    monkeypatch.setattr(comparison, "RESULT", tmp_path / "comparison.json")
    key = "obqa_full/rcft_heldout"
    for seeds in ("0 1", "2"):  # two sittings at once, each loaded the JSON before the other wrote
        comparison.save({"cells": {}, "n": {}, "control": {}, "commands": {key: cmd.format(seeds)}})
    assert comparison.load_results()["commands"][key] == cmd.format("0 1 2")


def test_not_yet_measured_is_empty_once_every_cell_is_in(comparison):
    """The README's last line lists what is left, and nothing (not an empty list) once complete;
    MMLU-internal stops at its failed control, and extra stages are not required."""
    m = comparison
    cells = {f"obqa/{s}/{st}": {} for s in range(5) for st in (*m.STAGES, "cft_wide", "base_wide")}
    cells |= {f"{c}/{s}/base": {} for c in m.CAUSAL_SETTINGS for s in range(5)}
    cells |= {f"obqa_wide/{s}/{st}": {} for s in range(5) for st in (*m.WIDE_STAGES, "ls", "rcft")}
    cells |= {f"obqa_full/{s}/{st}": {} for s in range(5) for st in m.FULL_ORDER}
    cells["mmlu/0/base"] = _base_cell(0.27)
    r = {"n": {"mmlu": {"id_test": 2000}}}
    assert m.not_yet_measured(r, cells) == []
    del cells["obqa_full/4/rcft"], cells["causal_news_wider/3/base"]
    left = m.not_yet_measured(r, cells)
    assert left[0] == "`causal_news_wider` seeds [3] (of 5)"
    assert left[1].startswith("`obqa_full`, every stage fine-tuning all six MiniLM layers: 1 of 40")


def test_causal_news_wider_block_checks_it_reuses_the_wide_base_models(comparison):
    raw = {
        **_causal_raw("causal_news_wide", range(3)),
        **_causal_raw("causal_news_wider", range(2)),
    }
    raw["causal_news_wider/1/all"] = {
        **raw["causal_news_wider/1/all"],
        "test": {**raw["causal_news_wider/1/all"]["test"], "base": {
            s: {"accuracy": 0.7, "conf_ece": 0.05} for s in ("id_test", "ood_test")}},
    }  # fmt: skip
    r = {"protocol": comparison.PROTOCOL, "cells": raw, "n": {}}
    text = "\n".join(comparison.causal_section(r, comparison.flat_cells(raw), "causal_news_wider"))
    wider = comparison.NEWS_WIDER
    assert text.startswith("**(b4) Setting `causal_news_wider`**")
    assert f"CFT {wider['cft_epochs']}, long SFT and RCFT {wider['long_epochs']}" in text
    assert "equal `causal_news_wide`'s in 1 of 2 seeds measured in both" in text
    assert f"CFT epoch 2/{wider['cft_epochs']}." in text


def test_full_section_compares_once_complete_and_shows_the_heldout_e_step(comparison):
    def cell(ece, **extra):
        test = {s: {"accuracy": 0.5, "conf_ece": ece} for s in ("id_test", "ood_test")}
        return {"test": test, "seconds": 60.0, **extra}

    history = [{"reg": 0.08, "sft": 2.0, "val": {"conf_ece": 0.10}},
               {"reg": 0.01, "sft": 0.3, "val": {"conf_ece": 0.28}}]  # fmt: skip
    cells = {}
    for s in range(5):
        for st in comparison.FULL_ORDER:
            ece = 0.30 if st in ("aligned", "long_sft", "rcft") else 0.05 + 0.01 * s
            fit = {"selected_epoch": 2, "epochs": 8, "history": history} if st == "rcft" else {}
            cells[f"obqa_full/{s}/{st}"] = cell(ece, **fit)
    for s in (0, 1):
        cells[f"obqa_full/{s}/rcft_heldout"] = cell(0.10, selected_epoch=8, epochs=8,
                                                    history=history)  # fmt: skip
    r = _full_results(comparison, cells)
    text = "\n".join(comparison.full_section(r, cells))
    assert "Not complete" not in text
    assert comparison.full_done(cells, "obqa_full") == 40  # the extra stage is not counted
    assert "| CFT − long SFT | 5 |" in text and "**ahead**" in text
    assert "**Reading (conf-ECE, paired, from the table):**" in text
    assert "| 4 | RCFT (EM-ECE) | 0.500 | 0.300 |" in text
    assert "| 1 | RCFT, E-step on validation | 0.500 | 0.100 |" in text
    assert "E-step on the validation questions): seed 0: R 0.080 → 0.010" in text
    assert "seeds 0, 1). If RCFT fails" in text
    assert "| RCFT, E-step on validation − RCFT (EM-ECE) | 2 | -0.200 [-0.200, -0.200] |" in text
    # rcft 0.30, heldout 0.10, ts 0.05 + 0.01 s (seeds 0, 1): gain 0.200 of gap 0.245 on average
    assert "lowers RCFT's in-domain conf-ECE by 0.200 [0.200, 0.200], 82% of" in text
    assert (
        "Most of the gap is the E-step's data; with the regulariser at R = 0.010 on the last"
        in text
    )
