"""The teacher sanity gate: distillation stops when the teacher is no better than the trivial
baseline on validation (accuracy vs the best constant prediction, CoLA Matthews vs 0, STS-B
correlation vs 0)."""

import math
from types import SimpleNamespace

import pytest
import torch
from sorbet_snn.distill import gate_report, teacher_gate
from torch import nn


class Oracle(nn.Module):
    """Predicts what the first token says: class ``ids[:, 0]`` (one-hot logits), or its value."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.classes = classes

    def forward(self, ids, mask=None, types=None):
        if self.classes == 1:
            return SimpleNamespace(logits=ids[:, :1].double())
        return SimpleNamespace(logits=nn.functional.one_hot(ids[:, 0], self.classes).double())


def val_set(pred, labels):
    pred = torch.as_tensor(pred)
    ids = torch.stack([pred, torch.zeros_like(pred)], 1)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "token_type_ids": torch.zeros_like(ids), "labels": torch.as_tensor(labels)}  # fmt: skip


@pytest.mark.parametrize("task", ["SST-2", "MRPC", "RTE"])
def test_classification_gate_is_accuracy_above_majority_by_the_margin(task):
    labels = [1] * 60 + [0] * 40  # majority class 1 (from the training labels): accuracy 0.6
    train_labels = torch.tensor([1, 1, 0])
    margin = 1.645 * math.sqrt(0.6 * 0.4 / 100)  # 0.0806
    majority = teacher_gate(Oracle(2), val_set([1] * 100, labels), train_labels, task)
    assert not majority["passed"] and majority["baseline"] == 0.6 and majority["value"] == 0.6
    assert math.isclose(majority["margin"], margin)
    assert "not above the majority class" in majority["message"]
    assert "--no-teacher-gate" in majority["message"]
    near = [1] * 60 + [1] * 33 + [0] * 7  # accuracy 0.67 < 0.6 + margin: within noise
    assert not teacher_gate(Oracle(2), val_set(near, labels), train_labels, task)["passed"]
    good = [1] * 60 + [1] * 29 + [0] * 11  # 0.71 > 0.6806
    ok = teacher_gate(Oracle(2), val_set(good, labels), train_labels, task)
    assert ok["passed"] and math.isclose(ok["value"], 0.71)
    assert "--no-teacher-gate" not in ok["message"]


def test_classification_gate_takes_the_best_constant_when_the_training_majority_is_rarer():
    # RTE-like: class 1 is the training majority but only 44 % of validation; a teacher at 54 %
    # is within noise of always predicting class 0 (56 %), though far above class 1's 44 %
    labels = [1] * 44 + [0] * 56
    train_labels = torch.tensor([1, 1, 0])
    chance = [1] * 30 + [0] * 14 + [0] * 24 + [1] * 32  # 30 + 24 = 54 right
    gate = teacher_gate(Oracle(2), val_set(chance, labels), train_labels, "RTE")
    assert math.isclose(gate["value"], 0.54) and gate["baseline"] == 0.56 and not gate["passed"]
    assert math.isclose(gate["margin"], 1.645 * math.sqrt(0.56 * 0.44 / 100))
    assert "best constant prediction (always class 0" in gate["message"]
    assert "training majority class gets 0.4400" in gate["message"]
    # the same decision from recorded metrics, without the model (how a benchmark re-checks a run)
    again = gate_report({"accuracy": 0.54, "main": 0.54}, torch.tensor(labels), train_labels, "RTE")
    assert {k: again[k] for k in ("baseline", "passed", "n")} == {"baseline": 0.56, "passed": False,
                                                                   "n": 100}  # fmt: skip
    assert math.isclose(again["margin"], gate["margin"]) and again["message"] == gate["message"]


def test_cola_gate_is_matthews_above_zero():
    labels = [1] * 70 + [0] * 30
    train_labels = torch.tensor([1, 1, 0])
    majority = teacher_gate(Oracle(2), val_set([1] * 100, labels), train_labels, "CoLA")
    # always the majority class: accuracy 0.7 but Matthews correlation 0, the metric CoLA reports
    assert majority["metric"] == "Matthews correlation" and majority["value"] == 0.0
    assert not majority["passed"] and math.isclose(majority["margin"], 1.645 / 10)
    # every positive right, 10 of the 30 negatives found: tp 70, tn 10, fp 20, fn 0,
    # MCC = 700 / sqrt(90 * 70 * 30 * 10) = 0.509 > 0.1645
    found = [1] * 70 + [0] * 10 + [1] * 20
    ok = teacher_gate(Oracle(2), val_set(found, labels), train_labels, "CoLA")
    assert ok["passed"] and math.isclose(ok["value"], 700 / math.sqrt(90 * 70 * 30 * 10))


def test_regression_gate_is_correlation_above_zero():
    gold = torch.linspace(0, 5, 100, dtype=torch.float64)
    flat = teacher_gate(Oracle(1), val_set(torch.full((100,), 3), gold), gold, "STS-B")
    assert flat["value"] == 0.0 and not flat["passed"]  # a constant has no correlation
    assert "0 (a constant predictor)" in flat["message"]
    noisy = gold.flip(0)  # perfectly anti-correlated: not better than a constant
    assert not teacher_gate(Oracle(1), val_set(noisy.long(), gold), gold, "STS-B")["passed"]
    ok = teacher_gate(Oracle(1), val_set((gold * 10).long(), gold), gold, "STS-B")
    assert ok["passed"] and ok["value"] > 0.99 and math.isclose(ok["margin"], 0.1645)
