import copy
import math

import cft_calibration as C
import pytest
import torch
from cft_calibration.pipeline import PipelineConfig


@pytest.fixture(scope="module")
def small_task():
    sizes = {"base": 600, "align": 200, "train": 500, "val": 300, "test": 1000}
    return C.synthetic_feature_mcqa(sizes, seed=3).splits


def test_dpo_loss_is_ln2_when_policy_equals_reference():
    lp = torch.log_softmax(torch.randn(10, 4), -1)
    loss = C.dpo_option_loss(lp[:, 0], lp[:, 1], lp[:, 0], lp[:, 1], beta=0.1)
    assert float(loss) == pytest.approx(math.log(2), abs=1e-7)


def test_dpo_margin_increases_after_one_small_step(small_task):
    s = small_task["align"]
    scorer = C.FeatureScorer(16, hidden=0)
    ref = copy.deepcopy(scorer)
    idx = list(range(64))
    y_w, y_l = s.labels[:64], (s.labels[:64] + 1) % 4

    def margin():
        with torch.no_grad():
            a = scorer(scorer.batch(s, idx)).option_logprobs
            r = ref(ref.batch(s, idx)).option_logprobs
        rows = torch.arange(64)
        return float(((a[rows, y_w] - r[rows, y_w]) - (a[rows, y_l] - r[rows, y_l])).mean())

    before = margin()
    opt = torch.optim.SGD(scorer.parameters(), lr=0.1)
    out = scorer(scorer.batch(s, idx))
    with torch.no_grad():
        r = ref(ref.batch(s, idx)).option_logprobs
    rows = torch.arange(64)
    loss = C.dpo_option_loss(
        out.option_logprobs[rows, y_w], out.option_logprobs[rows, y_l], r[rows, y_w], r[rows, y_l]
    )
    loss.backward()
    opt.step()
    assert before == pytest.approx(0.0, abs=1e-6)
    assert margin() > before


def _trained_base(task, seed=0):
    # Seed the scorer's initialisation (it drew from whatever state earlier tests left).
    torch.manual_seed(seed)
    scorer = C.FeatureScorer(16, hidden=32, dropout=0.0)
    C.train(scorer, task["base"], C.TrainConfig(epochs=8, lr=3e-3, batch_size=32, seed=seed))
    return scorer


def test_alignment_raises_confidence_and_ece_and_cft_and_ts_lower_it(small_task):
    base = _trained_base(small_task)
    m_base = C.evaluate_scorer(base, small_task["test"])
    aligned = copy.deepcopy(base)
    C.simulate_alignment(aligned, small_task["align"], C.AlignConfig(steps=150, lr=5e-3, seed=1))
    m_al = C.evaluate_scorer(aligned, small_task["test"])
    assert m_al["mean_confidence"] > m_base["mean_confidence"] + 0.1
    assert m_al["conf_ece"] > m_base["conf_ece"] + 0.05
    assert abs(m_al["accuracy"] - m_base["accuracy"]) < 0.08
    cft = copy.deepcopy(aligned)
    res = C.train_cft(
        cft,
        small_task["train"],
        small_task["val"],
        C.TrainConfig(epochs=6, lr=3e-3, batch_size=16, select="ece_within_acc"),
    )
    m_cft = C.evaluate_scorer(cft, small_task["test"])
    assert m_cft["conf_ece"] < m_al["conf_ece"] - 0.03
    assert 0 <= res.selected_epoch <= 6
    z, m, y = C.predict(aligned, small_task["val"])
    ts = C.TemperatureScaler().fit(z, y, m)
    zt, mt, yt = C.predict(aligned, small_task["test"])
    p = ts.transform(zt)
    assert C.conf_ece(p, yt, mask=mt) < 0.5 * m_al["conf_ece"]
    assert C.accuracy(p, yt, mask=mt) == m_al["accuracy"]


def test_training_is_deterministic_under_a_seed_and_leaves_global_rng_alone(small_task):
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        scorer = C.FeatureScorer(16, hidden=16)
        state = torch.random.get_rng_state()
        C.train_rcft(scorer, small_task["train"], C.TrainConfig(epochs=2, lr=1e-3, seed=7))
        assert torch.equal(torch.random.get_rng_state(), state)
        runs.append(torch.cat([p.flatten() for p in scorer.parameters()]))
    assert torch.equal(runs[0], runs[1])


def test_e_step_runs_every_epoch_by_default_and_once_in_official_mode(small_task):
    reg = C.EMECERegularizer()
    res = C.train_rcft(
        C.FeatureScorer(16, hidden=8), small_task["train"], C.TrainConfig(epochs=3), reg
    )
    assert reg.n_e_steps == 3 and len(res.e_steps) == 3
    off = C.official_regularizer()
    cfg = C.TrainConfig(epochs=3, e_step_every=None, official=True, alpha=1.0)
    res = C.train_rcft(C.FeatureScorer(16, hidden=8), small_task["train"], cfg, off)
    assert off.n_e_steps == 1 and res.history[-1]["reg"] > 0


def test_e_step_data_moves_the_e_step_to_another_split(small_task):
    """The E-step scores ``e_step_data`` when given (its first table is that split's, under the
    initial weights) and ``train_data`` otherwise; an empty split is refused by name."""

    def filled(table):  # the bins the E-step saw (an empty bin's accuracy is nan)
        return [(b["bin"], b["count"], b["accuracy"]) for b in table if b["count"]]

    cfg = C.TrainConfig(epochs=1, e_step_every=None)
    torch.manual_seed(0)
    scorer = C.FeatureScorer(16, hidden=8)
    want = {}
    for name in ("train", "val"):
        reg = C.e_step(copy.deepcopy(scorer), small_task[name], C.EMECERegularizer())
        want[name] = filled(reg.bin_table())
    assert want["train"] != want["val"]
    for name, kw in (("val", {"e_step_data": small_task["val"]}), ("train", {})):
        res = C.train_rcft(copy.deepcopy(scorer), small_task["train"], cfg, **kw)
        assert filled(res.e_steps[0]) == want[name]
    empty = small_task["val"].subset([]) if hasattr(small_task["val"], "subset") else []
    with pytest.raises(ValueError, match="e_step_data is empty"):
        C.train_rcft(copy.deepcopy(scorer), small_task["train"], cfg, e_step_data=empty)


def test_rcft_regulariser_alone_lowers_ece(small_task):
    base = _trained_base(small_task)
    aligned = copy.deepcopy(base)
    C.simulate_alignment(aligned, small_task["align"], C.AlignConfig(steps=150, lr=5e-3, seed=1))
    before = C.evaluate_scorer(aligned, small_task["test"])["conf_ece"]
    # lambda large: the regulariser dominates the SFT term
    C.train_rcft(
        aligned,
        small_task["train"],
        C.TrainConfig(epochs=4, lr=3e-3, batch_size=32),
        C.EMECERegularizer(lam=50.0),
    )
    assert C.evaluate_scorer(aligned, small_task["test"])["conf_ece"] < before


def test_label_smoothing_ce_spreads_only_over_valid_options():
    logits = torch.tensor([[2.0, 0.0, float("-inf")]])
    mask = torch.tensor([[True, True, False]])
    y = torch.tensor([0])
    ls = C.option_ce(logits, y, mask, 0.2)
    logp = torch.log_softmax(logits, -1)
    assert float(ls) == pytest.approx(
        float(-(0.8 * logp[0, 0] + 0.2 * (logp[0, 0] + logp[0, 1]) / 2))
    )


def test_causal_lm_full_vocab_sft_lowers_the_loss():
    pytest.importorskip("transformers")
    from cft_calibration.tiny import tiny_causal_lm

    data = C.synthetic_category_mcqa({"train": 48, "val": 24}, noise=0.0, seed=0)
    texts = [it.question + " " + " ".join(it.choices) for it in data["train"] + data["val"]]
    model, tok = tiny_causal_lm(texts, seed=0)
    scorer = C.LetterScorer(model, tok)
    cfg = C.TrainConfig(epochs=3, lr=3e-3, batch_size=16, sft_loss="full_vocab")
    res = C.train_rcft(scorer, data["train"], cfg, C.EMECERegularizer(), data["val"])
    assert res.history[-1]["sft"] < res.history[0]["sft"]
    assert all(math.isfinite(h["loss"]) for h in res.history)


def test_lora_wraps_a_causal_lm_and_trains_only_adapters():
    pytest.importorskip("peft")
    from cft_calibration.tiny import tiny_causal_lm

    data = C.synthetic_category_mcqa({"train": 16}, seed=0)["train"]
    model, tok = tiny_causal_lm([it.question + " " + " ".join(it.choices) for it in data])
    scorer = C.LetterScorer(C.apply_lora(model, r=4, alpha=8), tok)
    trainable = [n for n, p in scorer.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
    C.train(scorer, data, C.TrainConfig(epochs=1, lr=1e-3, batch_size=8))


def test_pipeline_runs_every_method_and_cft_beats_aligned(small_task):
    cfg = PipelineConfig(
        hidden=32,
        base=C.TrainConfig(epochs=6, lr=3e-3, batch_size=32, select="acc"),
        dpo=C.DPOConfig(steps=120, lr=5e-3),
        cft=C.TrainConfig(epochs=5, lr=3e-3, batch_size=16, select="ece_within_acc"),
        long=C.TrainConfig(epochs=5, lr=3e-3, batch_size=16),
    )
    out = C.run_pipeline(small_task, cfg, seed=0)
    m = out["methods"]
    assert set(m) == {
        "uniform",
        "base",
        "aligned",
        "ts",
        "ls",
        "cft",
        "long_sft",
        "rcft",
        "rcft_once",
    }
    assert m["ts"]["test"]["accuracy"] == m["aligned"]["test"]["accuracy"]
    assert m["cft"]["test"]["conf_ece"] < m["aligned"]["test"]["conf_ece"]
    assert m["rcft"]["test"]["conf_ece"] < m["aligned"]["test"]["conf_ece"]


def test_bad_configs_are_rejected():
    with pytest.raises(ValueError, match="lr"):
        C.TrainConfig(lr=0)
    with pytest.raises(ValueError, match="select"):
        C.TrainConfig(select="best")
    with pytest.raises(ValueError, match="pref"):
        C.AlignConfig(pref="gold")
    s = C.synthetic_feature_mcqa({"a": 10}).splits["a"]
    with pytest.raises(ValueError, match="needs val_data"):
        C.train(C.FeatureScorer(16), s, C.TrainConfig(select="acc"))
    with pytest.raises(ValueError, match="LetterScorer"):
        C.train(C.FeatureScorer(16), s, C.TrainConfig(sft_loss="full_vocab"))


def test_lora_on_a_multiple_choice_model_keeps_the_new_head_trainable():
    pytest.importorskip("peft")
    from cft_calibration.tiny import tiny_mc_model

    model, _ = tiny_mc_model(["a b c d"])
    wrapped = C.apply_lora(model, r=4, alpha=8)
    trainable = [n for n, p in wrapped.named_parameters() if p.requires_grad]
    assert any("classifier" in n for n in trainable) and any("lora" in n for n in trainable)
