"""Recipe options of the distillation: the loss terms, the S1 split (stage ablation), the
learning-rate / epochs selection on validation and a learning rate of its own for S3."""

import json
import shutil
from types import SimpleNamespace

import pytest
import torch
from sorbet_snn import SorbetForSequenceClassification, convert_teacher
from sorbet_snn.distill import (
    S1_SPLIT,
    PipelineSettings,
    StageSettings,
    kd_loss,
    rep_loss,
    run_pipeline,
    soft_cross_entropy,
)
from transformers import BertForSequenceClassification, BertModel

from .conftest import tiny_batch, tiny_bert_config


def _out(logits, hidden):
    return SimpleNamespace(logits=logits, hidden_states=hidden)


def test_rep_only_loss_ignores_the_logits():
    torch.manual_seed(0)
    hs = [torch.randn(2, 3, 4, requires_grad=True) for _ in range(3)]
    ht = [torch.randn(2, 3, 4) for _ in range(3)]
    s = torch.randn(2, 2, requires_grad=True)
    t = torch.randn(2, 2)
    both, parts = kd_loss(_out(s, hs), _out(t, ht))
    assert torch.allclose(both, soft_cross_entropy(s, t) + rep_loss(hs, ht))
    rep, parts = kd_loss(_out(s, hs), _out(t, ht), terms="rep")
    assert torch.equal(rep, rep_loss(hs, ht)) and parts["logit"] == 0.0
    other, _ = kd_loss(_out(s * 10, hs), _out(t, ht), terms="rep")  # logits do not matter
    assert torch.equal(rep, other)
    rep.backward()
    assert s.grad is None and hs[0].grad is not None  # only the hidden states get a gradient
    with pytest.raises(ValueError, match="terms"):
        kd_loss(_out(s, hs), _out(t, ht), terms="logits")


def test_split_s1_plan_and_what_each_step_changes():
    assert PipelineSettings().student_plan() == ["S1", "S2", "S3"]
    assert PipelineSettings(split_s1=True).student_plan() == ["S1a", "S1b", "S1", "S2", "S3"]
    torch.manual_seed(0)
    fp, _ = convert_teacher(BertForSequenceClassification(tiny_bert_config()), "fp")
    s1a, _ = convert_teacher(fp, "S1", **S1_SPLIT["S1a"])
    s1b, _ = convert_teacher(s1a, "S1", **S1_SPLIT["S1b"])
    s1, _ = convert_teacher(s1b, "S1")
    fields = ("weight_bits", "act_bits", "ffn_act", "pooler_act", "softmax", "norm")
    got = [tuple(getattr(m.config, f) for f in fields) for m in (fp, s1a, s1b, s1)]
    assert got == [
        (32, 32, "gelu", "tanh", "softmax", "layernorm"),  # teacher
        (1, 32, "gelu", "tanh", "softmax", "layernorm"),  # S1a: binary weights only
        (1, 4, "gelu", "tanh", "softmax", "layernorm"),  # S1b: + 4-bit activations
        (1, 4, "relu", "relu", "softmax", "layernorm"),  # S1: + ReLU swaps
    ]
    ids, mask = tiny_batch()
    with torch.no_grad():
        ref = fp(ids, mask).logits
        s1a.eval()
        assert not torch.allclose(s1a(ids, mask).logits, ref)  # the weights are binary now


def _data(n, seed):
    ids, mask = tiny_batch(seed, batch=n, length=8)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
            "labels": (ids[:, 1] % 2).long()}  # fmt: skip


def test_pipeline_runs_the_split_and_selects_the_rate_on_validation(tmp_path):
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(tiny_bert_config()).eval()
    train, val, dev = _data(16, 0), _data(8, 1), _data(8, 2)
    quick = StageSettings(epochs=1, batch_size=8, eval_every=0, max_steps=1)
    settings = PipelineSettings(stages=("S1",), student=quick, teacher_gate=False, split_s1=True,
                                student_grid=((1e-3, 1.0), (1e-5, 1.0)))  # fmt: skip
    assert [c.lr for c in settings.candidates()] == [1e-3, 1e-5]
    res = run_pipeline(teacher, train, val, dev, "SST-2", tmp_path, settings, quiet=True,
                       log=lambda _: None)  # fmt: skip
    assert list(res["stages"]) == ["S1a", "S1b", "S1", "teacher"]
    assert res["stages"]["S1a"]["config"]["act_bits"] == 32
    assert res["stages"]["S1b"]["config"]["ffn_act"] == "gelu"
    assert res["stages"]["S1"]["config"]["ffn_act"] == "relu"
    for stage in ("S1a", "S1b", "S1"):
        sel = res["stages"][stage]["selection"]
        assert [t["lr"] for t in sel] == [1e-3, 1e-5]
        assert res["stages"][stage]["val"] == max(t["val"] for t in sel)
    assert res["teacher_gate"]["passed"] in (True, False)  # recorded even when not enforced


def test_distill_config_grids_cross():
    from sorbet_snn.config import DistillConfig
    from sorbet_snn.experiments import _pipeline_settings

    cfg = DistillConfig(data=".", lr_grid=(1e-3, 1e-4), epochs_grid=(1.0, 2.0), distill_loss="rep")
    settings = _pipeline_settings(cfg, False)
    assert settings.student_grid == ((1e-3, 1.0), (1e-3, 2.0), (1e-4, 1.0), (1e-4, 2.0))
    assert settings.student.distill_loss == "rep"
    assert _pipeline_settings(DistillConfig(data="."), False).student_grid == ()


def test_s3_learning_rate_of_its_own_resumes_s1_s2_and_retrains_only_s3(tmp_path):
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(tiny_bert_config()).eval()
    train, val, dev = _data(16, 0), _data(8, 1), _data(8, 2)
    quick = StageSettings(epochs=1, lr=1e-3, batch_size=8, eval_every=0, max_steps=2)
    base = PipelineSettings(stages=("S1", "S2", "S3"), student=quick, teacher_gate=False)
    run_pipeline(teacher, train, val, dev, "SST-2", tmp_path / "a", base, quiet=True,
                 log=lambda _: None)  # fmt: skip
    for stage in ("S1", "S2"):  # the S3 arm starts from the same S1 and S2
        shutil.copytree(tmp_path / "a" / "stages" / stage, tmp_path / "b" / "stages" / stage)
    arm = PipelineSettings(stages=("S1", "S2", "S3"), student=quick, teacher_gate=False,
                           stage_lr={"S3": 1e-5}, student_grid=((1e-3, 1.0), (1e-4, 1.0)))  # fmt: skip
    assert arm.stage_settings("S2").lr == 1e-3 and arm.stage_settings("S3").lr == 1e-5
    assert [c.lr for c in arm.candidates("S3")] == [1e-5]  # its own rate, not the grid
    assert [c.lr for c in arm.candidates("S2")] == [1e-3, 1e-4]
    arm.student_grid = ()
    lines: list[str] = []
    res = run_pipeline(teacher, train, val, dev, "SST-2", tmp_path / "b", arm, quiet=True,
                       log=lines.append)  # fmt: skip
    assert any(line.startswith("S1: resumed") for line in lines)
    assert any(line.startswith("S2: resumed") for line in lines)
    assert not any(line.startswith("S3: resumed") for line in lines)
    saved = json.loads((tmp_path / "b" / "stages" / "S3" / "stage.json").read_text())
    assert saved["key"]["settings"]["lr"] == 1e-5
    assert "selection" not in res["stages"]["S3"]
    a3 = json.loads((tmp_path / "a" / "stages" / "S3" / "stage.json").read_text())
    assert a3["key"]["settings"]["lr"] == 1e-3


def test_distill_config_s3_lr():
    from sorbet_snn.config import ConfigError, DistillConfig
    from sorbet_snn.experiments import _pipeline_settings

    assert _pipeline_settings(DistillConfig(data="."), False).stage_lr == {}
    cfg = DistillConfig(data=".", lr=1e-3, s3_lr=1e-4, lr_grid=(1e-3, 3e-4))
    settings = _pipeline_settings(cfg, False)
    assert settings.stage_lr == {"S3": 1e-4} and settings.student.lr == 1e-3
    with pytest.raises(ConfigError, match="s3_lr"):
        DistillConfig(data=".", s3_lr=0.0)


def test_s1_epochs_of_its_own_train_s1_longer_outside_the_grid(tmp_path):
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(tiny_bert_config()).eval()
    train, val, dev = _data(16, 0), _data(8, 1), _data(8, 2)
    quick = StageSettings(epochs=1, lr=1e-3, batch_size=8, eval_every=0)
    arm = PipelineSettings(stages=("S1", "S2"), student=quick, teacher_gate=False,
                           stage_epochs={"S1": 3.0}, student_grid=((1e-3, 1.0), (1e-4, 1.0)))  # fmt: skip
    assert arm.stage_settings("S1").epochs == 3.0 and arm.stage_settings("S2").epochs == 1.0
    assert [(c.lr, c.epochs) for c in arm.candidates("S1")] == [(1e-3, 3.0)]  # not the grid
    assert [c.lr for c in arm.candidates("S2")] == [1e-3, 1e-4]
    arm.student_grid = ()
    res = run_pipeline(teacher, train, val, dev, "SST-2", tmp_path / "b", arm, quiet=True,
                       log=lambda _: None)  # fmt: skip
    assert res["stages"]["S1"]["steps"] == 6 and res["stages"]["S2"]["steps"] == 2  # 16 / 8 a epoch
    saved = json.loads((tmp_path / "b" / "stages" / "S1" / "stage.json").read_text())
    assert saved["key"]["settings"]["epochs"] == 3.0
    with pytest.raises(ValueError, match="other settings"):  # a saved S1 of 1 epoch is not reused
        run_pipeline(teacher, train, val, dev, "SST-2", tmp_path / "b",
                     PipelineSettings(stages=("S1",), student=quick, teacher_gate=False),
                     resume=True, quiet=True, log=lambda _: None)  # fmt: skip


def test_distill_config_s1_epochs():
    from sorbet_snn.config import ConfigError, DistillConfig
    from sorbet_snn.experiments import _pipeline_settings

    assert _pipeline_settings(DistillConfig(data="."), False).stage_epochs == {}
    settings = _pipeline_settings(DistillConfig(data=".", epochs=1.0, s1_epochs=3.0), False)
    assert settings.stage_epochs == {"S1a": 3.0, "S1b": 3.0, "S1": 3.0}
    assert settings.student.epochs == 1.0 and settings.stage_settings("S3").epochs == 1.0
    with pytest.raises(ConfigError, match="s1_epochs"):
        DistillConfig(data=".", s1_epochs=0.0)


def test_a_headless_teachers_new_classifier_comes_from_the_runs_seed(tmp_path):
    """The classifier a headless teacher gets is drawn from the run's seed, so a rerun of the same
    seed makes the same teacher whatever torch's global generator holds (torch seeds it from OS
    entropy at start-up)."""
    torch.manual_seed(0)
    teacher = BertModel(tiny_bert_config()).eval()
    train, val, dev = _data(16, 0), _data(8, 1), _data(8, 2)
    quick = StageSettings(epochs=1, lr=1e-3, batch_size=8, eval_every=0, max_steps=1, seed=3)
    weights = []
    for run, global_seed in enumerate((11, 12)):
        torch.manual_seed(global_seed)
        settings = PipelineSettings(stages=("S0",), teacher=quick, finetune_teacher="always",
                                    teacher_gate=False)  # fmt: skip
        run_pipeline(teacher, train, val, dev, "SST-2", tmp_path / str(run), settings, quiet=True,
                     log=lambda _: None)  # fmt: skip
        model = SorbetForSequenceClassification.from_pretrained(
            str(tmp_path / str(run) / "stages" / "S0")
        )
        weights.append(model.classifier.weight.detach().clone())
    assert torch.equal(weights[0], weights[1])
