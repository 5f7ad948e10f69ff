"""The zero-inflated panel (> 90 % zeros, known best ranking) and NLL training recovering it."""

import warnings

import pytest
import torch
from bpr_topk import (
    bpr,
    evaluate_heuristic,
    load_topk_folder,
    make_zero_inflated,
    topk_mask,
    write_topk_folder,
)
from bpr_topk.experiment import EvalConfig, TrainConfig, evaluate_rows, train_one


def _reach(rate, scores, k):
    """Expected share of the best K sites' events caught by the top K of ``scores`` (noise-free)."""
    lam = rate.expand_as(scores)
    return float(((lam * topk_mask(scores, k)).sum(-1) / (lam * topk_mask(lam, k)).sum(-1)).mean())


def test_zero_inflated_panel_is_zero_heavy_with_the_stated_means():
    d = make_zero_inflated(400, seed=1, steps=(60, 5, 5))
    y = torch.cat([d.train.y, d.valid.y, d.test.y]).float()
    assert float((y == 0).float().mean()) > 0.9
    rate = d.oracle_scores
    assert rate is not None and rate.shape == (400,) and bool((rate > 0).all())
    # E[y_ts] = λ_s: the overall mean matches and site means follow the rates
    assert float(y.mean()) == pytest.approx(float(rate.mean()), rel=0.1)
    site_mean = y.mean(0)
    hi, lo = rate > rate.quantile(0.9), rate < rate.quantile(0.5)
    assert float(site_mean[hi].mean()) > 10 * float(site_mean[lo].mean())
    assert d.feature_names[-1] == "mean_counts_past" and "prev_counts_01back" in d.feature_names
    with pytest.raises(ValueError, match="zero_prob must be in"):
        make_zero_inflated(10, zero_prob=1.0)


def test_zero_inflated_round_trip_and_lag_columns_match_the_history(tmp_path):
    d = make_zero_inflated(30, seed=2, steps=(8, 2, 2))
    write_topk_folder(d, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = load_topk_folder(tmp_path)
    for s in ("train", "valid", "test"):
        assert torch.equal(back.split(s).y, d.split(s).y)
        assert torch.allclose(back.split(s).X, d.split(s).X, atol=1e-4)
    hist, _ = d.y_history()
    j = d.feature_names.index("prev_counts_01back")
    lag1 = d.train.X[1:, :, j] * d.feature_std[j] + d.feature_mean[j]
    assert torch.allclose(lag1, hist[: d.train.num_steps - 1], atol=1e-4)


def test_nll_training_recovers_the_best_ranking():
    """NLL-only NegBin training on a > 90 % zero panel: its top K catches at least 90 % of the
    oracle's expected events (ranking by the true rates), its test BPR is far above the chance
    decision and within 25 % of the oracle ranking's, and above every heuristic's."""
    d = make_zero_inflated(200, seed=0)
    k = 10
    cfg = TrainConfig(epochs=300, lr=0.1, val_samples=200)
    model, _ = train_one(d, "negbin", k, "nll", 1.0, 0, cfg)
    with torch.no_grad():
        scores = model.mean(d.test.X, d.test.time)
    rate = d.oracle_scores
    assert rate is not None
    assert _reach(rate, scores, k) >= 0.9
    zero_reach = k / d.num_sites * float(rate.sum()) / float(rate.topk(k).values.sum())
    assert zero_reach < 0.3
    learned = evaluate_rows(model, d, k, "NLL-only", EvalConfig(3, 500), 1.0)[0]["bpr"]
    oracle = float(bpr(d.test.y, rate.expand(d.test.num_steps, -1), k).mean())
    zero = evaluate_heuristic(d, "test", k, "zero")["bpr"]
    assert learned > zero + 0.15
    assert learned >= 0.75 * oracle
    heuristics = [
        evaluate_heuristic(d, "test", k, r, w)["bpr"]
        for r, w in [("last", 1), ("avg", 5), ("avg", 10)]
    ]
    assert learned > max(heuristics)
