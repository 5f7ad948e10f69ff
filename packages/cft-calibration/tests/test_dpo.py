"""Real DPO on option preferences: the loss against its closed form on a hand-made case, the pairs it
builds, and what it does to a model (sharper, not more accurate)."""

import math

import cft_calibration as C
import pytest
import torch
from cft_calibration.synthetic import FeatureSplit


def _linear(w, b=0.0):
    s = C.FeatureScorer(2, hidden=0)
    with torch.no_grad():
        s.net.weight.copy_(torch.tensor([w]))
        s.net.bias.fill_(b)
    return s


def _hand_case():
    # two questions: 3 options and 2 valid options of 3 (the third masked out)
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[2.0, -1.0], [0.5, 0.5], [0.0, 0.0]]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    labels = torch.tensor([2, 0])
    return FeatureSplit(x, labels, mask)


def _closed_form(w_pol, w_ref, data, beta):
    """-mean over pairs of log sigmoid(beta [(l(y_w) - l_ref(y_w)) - (l(y_l) - l_ref(y_l))]) with
    l the log-softmax over the valid options, computed with plain floats."""

    def logsoftmax(w, feats):
        s = [w[0] * f[0] + w[1] * f[1] for f in feats]
        z = math.log(sum(math.exp(v) for v in s))
        return [v - z for v in s]

    terms = []
    for i in range(data.labels.shape[0]):
        feats = [data.features[i, k].tolist() for k in range(3) if data.mask[i, k]]
        lp, lr = logsoftmax(w_pol, feats), logsoftmax(w_ref, feats)
        y = int(data.labels[i])
        for j in range(len(feats)):
            if j != y:
                m = beta * ((lp[y] - lr[y]) - (lp[j] - lr[j]))
                terms.append(-math.log(1 / (1 + math.exp(-m))))
    return sum(terms) / len(terms), len(terms)


def test_dpo_loss_equals_its_closed_form_on_a_hand_made_case():
    data = _hand_case()
    pol, ref = _linear([1.0, -0.5]), _linear([0.5, 0.5])
    beta = 0.7
    want, n_pairs = _closed_form([1.0, -0.5], [0.5, 0.5], data, beta)
    assert (
        n_pairs == 3
    )  # (q1: gold 2 vs 0, 2 vs 1), (q2: gold 0 vs 1); the masked option is no pair
    out, ref_out = pol(pol.batch(data, [0, 1])), ref(ref.batch(data, [0, 1]))
    loss, margins = C.dpo_preference_loss(
        out.option_logprobs, ref_out.option_logprobs, out.labels, out.mask, beta
    )
    assert float(loss.detach()) == pytest.approx(want, abs=1e-6)
    assert margins.shape == (3,)
    # dpo_align records the loss of its first batch before stepping: the same closed form
    res = C.dpo_align(pol, data, C.DPOConfig(steps=1, lr=1e-3, beta=beta, batch_size=2), ref)
    assert res.history[0]["loss"] == pytest.approx(want, abs=1e-6)
    assert res.pairs_per_step == 3


def test_dpo_loss_is_ln2_at_the_reference_and_the_margin_grows():
    data = _hand_case()
    pol = _linear([1.0, -0.5])
    res = C.dpo_align(pol, data, C.DPOConfig(steps=30, lr=0.05, batch_size=2, grad_clip=None))
    assert res.history[0]["loss"] == pytest.approx(math.log(2), abs=1e-6)
    assert res.history[0]["margin"] == pytest.approx(0.0, abs=1e-7)
    assert res.history[-1]["margin"] > 0 and res.history[-1]["loss"] < math.log(2)


def test_preference_pairs_random_rejects_one_wrong_valid_option():
    labels = torch.tensor([0, 3, 1])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    rows, w, lo = C.preference_pairs(labels, mask, "random", torch.Generator().manual_seed(0))
    assert rows.tolist() == [0, 1, 2] and w.tolist() == [0, 3, 1]
    assert all(int(a) != int(b) and mask[r, b] for r, a, b in zip(rows, w, lo))
    assert lo[2] == 0  # the only wrong valid option of the third question
    with pytest.raises(ValueError, match="single valid option"):
        C.preference_pairs(torch.tensor([0]), torch.tensor([[True, False]]))
    with pytest.raises(ValueError, match="rejected"):
        C.DPOConfig(rejected="best")


def test_dpo_makes_a_fitted_model_overconfident_without_adding_accuracy():
    """Gold-preferred DPO on labels that are only 70% predictable (the synthetic task's Bayes
    accuracy) keeps raising the margin: confidence and conf-ECE go up on held-out data."""
    task = C.synthetic_feature_mcqa({"align": 400, "test": 1500}, seed=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # independent of the tests run before this one
        scorer = C.FeatureScorer(16, hidden=0)
    # fitted to about the Bayes accuracy (0.7), so DPO cannot add accuracy by finishing the fit
    C.train(scorer, task.splits["align"], C.TrainConfig(epochs=30, lr=2e-2))
    before = C.evaluate_scorer(scorer, task.splits["test"])
    C.dpo_align(scorer, task.splits["align"], C.DPOConfig(steps=200, lr=2e-2, seed=1))
    after = C.evaluate_scorer(scorer, task.splits["test"])
    assert after["mean_confidence"] > before["mean_confidence"] + 0.1
    assert after["conf_ece"] > before["conf_ece"] + 0.05
    assert abs(after["accuracy"] - before["accuracy"]) < 0.03
