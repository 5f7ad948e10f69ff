"""Mid-stage resume: a stage stopped (time budget) or killed after k steps and rerun ends with exactly
the weights and checkpoint selection of an uninterrupted run."""

import pytest
import torch
from sorbet_snn.distill import (
    PipelineSettings,
    StageInterrupted,
    StageSettings,
    run_pipeline,
    stage_progress,
)
from transformers import BertForSequenceClassification

from .conftest import tiny_batch, tiny_bert_config


def _data(n, seed):
    ids, mask = tiny_batch(seed, batch=n, length=8)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
            "labels": (ids[:, 1] % 2).long()}  # fmt: skip


# 3 epochs of 3 batches (the last one short): epoch boundaries, dropout (the tiny config keeps BERT's
# 0.1) and, in S0, checkpoint selection every 2 steps all cross an interruption; S1 keeps its last
# step (eval_every 0), so its weights depend on every step's data order and random state
QUICK = StageSettings(epochs=3, batch_size=8, eval_every=2, lr=1e-3, alpha_lr=1e-3)
LAST = StageSettings(epochs=3, batch_size=8, eval_every=0, lr=1e-3, alpha_lr=1e-3)
DATA = (_data(20, 0), _data(8, 1), _data(8, 2))


def _teacher():
    torch.manual_seed(0)
    return BertForSequenceClassification(tiny_bert_config()).eval()


def _run(out, **kw):
    settings = PipelineSettings(stages=("S0", "S1"), teacher=QUICK, student=LAST,
                                finetune_teacher="always", teacher_gate=False, **kw)  # fmt: skip
    return run_pipeline(_teacher(), *DATA, "SST-2", out, settings, quiet=True, log=lambda _: None)


def _assert_same(a, b):
    for stage in ("S0", "S1"):
        assert a["stages"][stage]["best_step"] == b["stages"][stage]["best_step"]
        assert a["stages"][stage]["val"] == b["stages"][stage]["val"]
        assert a["stages"][stage]["dev"] == b["stages"][stage]["dev"]
    sa, sb = a["final"].state_dict(), b["final"].state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name
    fa, fb = a["fp_teacher"].state_dict(), b["fp_teacher"].state_dict()
    assert all(torch.equal(fa[k], fb[k]) for k in fa)


def test_budget_stops_each_step_and_reruns_match_an_uninterrupted_run(tmp_path):
    reference = _run(tmp_path / "ref")
    stops = []
    for _ in range(20):  # a deadline already past: every call trains one step, saves and stops
        try:
            resumed = _run(tmp_path / "cut", deadline=0.0)
            break
        except StageInterrupted as stop:
            stops.append((stop.stage, stop.step))
            assert "rerun the same command to continue" in str(stop)
    else:
        pytest.fail("never finished")
    assert stops[:3] == [("S0", 1), ("S0", 2), ("S0", 3)]
    assert ("S1", 1) in stops
    _assert_same(reference, resumed)
    assert not list((tmp_path / "cut" / "stages").glob("*partial*"))  # replaced by the stages


def test_kill_after_a_periodic_save_resumes_exactly(tmp_path, monkeypatch):
    import sorbet_snn.distill as distill

    reference = _run(tmp_path / "ref")
    calls = {"n": 0}
    real = distill._label_loss

    def dying(*args):
        calls["n"] += 1
        if calls["n"] == 6:  # killed during step 6 of S0; the last save was at step 4
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(distill, "_label_loss", dying)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "cut", save_every=2)
    progress = stage_progress(tmp_path / "cut", "S0")
    assert progress["status"] == "partial" and progress["step"] == 4 and progress["steps"] == 9
    assert [h["step"] for h in progress["history"]] == [2, 4]
    resumed = _run(tmp_path / "cut", save_every=2)
    _assert_same(reference, resumed)
    assert stage_progress(tmp_path / "cut", "S1")["status"] == "done"


def test_partial_state_with_other_settings_is_refused(tmp_path):
    with pytest.raises(StageInterrupted):
        _run(tmp_path, deadline=0.0)
    settings = PipelineSettings(stages=("S0",), teacher=StageSettings(epochs=2, batch_size=8),
                                finetune_teacher="always", teacher_gate=False)  # fmt: skip
    with pytest.raises(ValueError, match="other settings"):
        run_pipeline(_teacher(), *DATA, "SST-2", tmp_path, settings, quiet=True,
                     log=lambda _: None)  # fmt: skip
