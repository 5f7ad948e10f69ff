import json
import math
from types import SimpleNamespace

import pytest
import torch
from sorbet_snn.distill import (
    PipelineSettings,
    StageSettings,
    metrics_for,
    rep_loss,
    run_pipeline,
    soft_cross_entropy,
)
from transformers import BertForSequenceClassification

from .conftest import tiny_batch, tiny_bert_config


def test_soft_cross_entropy_equals_its_formula():
    s = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
    t = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    expected = 0.0
    for i in range(2):
        ps = torch.log_softmax(s[i], 0)
        pt = torch.softmax(t[i], 0)
        expected += float(-(pt * ps).sum())
    assert math.isclose(float(soft_cross_entropy(s, t)), expected / 4, rel_tol=1e-6)


def test_soft_cross_entropy_gradient_is_zero_at_the_teacher():
    t = torch.randn(3, 4)
    s = t.clone().requires_grad_()
    soft_cross_entropy(s, t).backward()
    assert torch.allclose(s.grad, torch.zeros_like(s), atol=1e-7)


def test_rep_loss_sums_n_plus_one_terms_and_checks_shapes():
    hs = [torch.full((2, 3, 4), float(i)) for i in range(3)]
    ht = [torch.zeros(2, 3, 4) for _ in range(3)]
    assert float(rep_loss(hs, ht)) == 0 + 1 + 4
    with pytest.raises(ValueError, match="hidden size"):
        rep_loss([torch.zeros(2, 3, 4)], [torch.zeros(2, 3, 8)])
    with pytest.raises(ValueError, match="number of layers"):
        rep_loss(hs, ht[:2])


def test_metrics():
    pred, gold = torch.tensor([1, 0, 1, 1]), torch.tensor([1, 0, 0, 1])
    assert metrics_for("SST-2", pred, gold)["main"] == 0.75
    assert math.isclose(metrics_for("CoLA", pred, gold)["mcc"], 0.5773502691896258)
    assert math.isclose(metrics_for("MRPC", pred, gold)["f1"], 0.8)
    assert math.isclose(metrics_for("STS-B", gold.float(), gold.float())["main"], 1.0)


def _data(n, seed):
    ids, mask = tiny_batch(seed, batch=n, length=8)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": torch.zeros_like(ids),
        "labels": (ids[:, 1] % 2).long(),
    }


def test_pipeline_runs_every_stage_and_resumes(tmp_path):
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(tiny_bert_config()).eval()
    train, val, dev = _data(16, 0), _data(8, 1), _data(8, 2)
    quick = StageSettings(epochs=1, batch_size=8, eval_every=0)
    settings = PipelineSettings(teacher=quick, student=quick, finetune_teacher="always",
                                teacher_gate=False)  # fmt: skip
    logs: list[str] = []
    res = run_pipeline(teacher, train, val, dev, "SST-2", tmp_path, settings, quiet=True,
                       log=logs.append)  # fmt: skip
    assert list(res["stages"]) == ["S0", "S1", "S2", "S3", "S4"]
    assert res["stages"]["S4"]["agreement_with_S3"] == 1.0
    assert res["stages"]["S3"]["config"]["norm"] == "bspn"
    for stage in ("S0", "S1", "S2", "S3"):
        meta = json.loads((tmp_path / "stages" / stage / "stage.json").read_text())
        assert meta["key"]["stage"] == stage
    logs.clear()
    again = run_pipeline(teacher, train, val, dev, "SST-2", tmp_path, settings, quiet=True,
                         log=logs.append)  # fmt: skip
    assert sum("resumed" in line for line in logs) == 4
    assert again["stages"]["S3"]["dev"] == res["stages"]["S3"]["dev"]
    other = PipelineSettings(teacher=quick, student=StageSettings(epochs=2, batch_size=8,
                             eval_every=0), finetune_teacher="always", teacher_gate=False)  # fmt: skip
    with pytest.raises(ValueError, match="other settings"):
        run_pipeline(teacher, train, val, dev, "SST-2", tmp_path, other, quiet=True,
                     log=logs.append)  # fmt: skip


def test_training_step_reduces_kd_loss():
    from sorbet_snn import convert_teacher
    from sorbet_snn.distill import kd_loss

    torch.manual_seed(0)
    teacher = BertForSequenceClassification(tiny_bert_config()).eval()
    student, _ = convert_teacher(teacher, "S1", hidden_dropout_prob=0.0)
    data = _data(16, 3)
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
    losses = []
    student.train()
    for _ in range(30):
        with torch.no_grad():
            t = teacher(data["input_ids"], data["attention_mask"], output_hidden_states=True)
        t = SimpleNamespace(logits=t.logits, hidden_states=t.hidden_states)
        loss, _ = kd_loss(student(data["input_ids"], data["attention_mask"]), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert max(losses[-5:]) < losses[0]
