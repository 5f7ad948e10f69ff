import numpy as np
import pytest
import safer_dtr as S
from hypothesis import given
from hypothesis import strategies as st


def _random(seed, n=200, L=25):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, L, n)
    p = rng.dirichlet(np.ones(L), n)
    return y, p


@pytest.mark.reference
def test_micro_auc_equals_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    y, p = _random(0)
    onehot = np.eye(25)[y]
    assert S.micro_auc(y, p) == pytest.approx(
        metrics.roc_auc_score(onehot, p, average="micro"), abs=1e-12
    )


@pytest.mark.reference
def test_macro_auc_skips_absent_classes_and_equals_sklearn_on_present():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    y = rng.choice([0, 1, 4, 7], 150)
    p = rng.dirichlet(np.ones(25), 150)
    auc, skipped = S.macro_auc(y, p)
    assert skipped == 21
    ref = np.mean([metrics.roc_auc_score(y == c, p[:, c]) for c in (0, 1, 4, 7)])
    assert auc == pytest.approx(ref, abs=1e-12)


def test_roc_auc_ties_and_degenerate():
    assert S.roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert S.roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert np.isnan(S.roc_auc([1, 1], [0.1, 0.2]))


@given(st.integers(0, 1000))
def test_ranking_metric_identities(seed):
    y, p = _random(seed, n=60)
    acc = S.accuracy(y, p)
    assert S.hit_rate_at_k(y, p, 1) == pytest.approx(acc)
    assert S.mrr_at_k(y, p, 1) == pytest.approx(acc)
    assert S.mrr_at_k(y, p, 3) <= S.hit_rate_at_k(y, p, 3) + 1e-12
    assert S.mrr_at_k(y, p, 3, hits_only=True) >= S.mrr_at_k(y, p, 3) - 1e-12
    assert S.hit_rate_at_k(y, p, 25) == 1.0


def test_mrr_hand_example_and_pessimistic_ties():
    p = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [0.1, 0.2, 0.7]])
    y = np.array([0, 1, 0])  # ranks 1, 2, 3
    assert S.mrr_at_k(y, p, 3) == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert S.mrr_at_k(y, p, 2) == pytest.approx((1 + 1 / 2) / 3)
    assert S.mrr_at_k(y, p, 2, hits_only=True) == pytest.approx((1 + 1 / 2) / 2)
    flat = np.full((2, 25), 1 / 25)
    assert S.hit_rate_at_k([0, 5], flat, 3) == 0.0  # a constant score earns no hits from ties


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="labels"):
        S.hit_rate_at_k([30], np.ones((1, 25)))
    with pytest.raises(ValueError, match=r"probs \[N, L\]"):
        S.micro_auc([0, 1], np.ones(25))
    with pytest.raises(ValueError, match="NaN"):
        S.accuracy([0], np.full((1, 25), np.nan))
    m = S.recommendation_metrics([], np.zeros((0, 25)))
    assert m["n"] == 0 and np.isnan(m["macro_auc"])
