import pytest
import torch
from bpr_topk import bpr, make_toy9, mean_rating, ratio_rating, topk_ratio_rating, toy9_outcomes

PAPER_B2 = {1: (0.107, 0.538), 3: (0.231, 0.625), 6: (0.636, 0.810)}  # K: (mean, ratio)


def expected_bpr(r: torch.Tensor, k: int) -> float:
    """Exact E[BPR] over the 64 outcomes of the toy for a fixed ranking r."""
    vals, probs = toy9_outcomes()
    return float((bpr(vals, r.expand_as(vals), k) * probs).sum())


def test_toy9_outcome_probabilities_sum_to_one():
    vals, probs = toy9_outcomes()
    assert vals.shape == (64, 9)
    assert probs.sum().item() == pytest.approx(1.0)


def test_ratio_rating_reproduces_app_b2_table():
    g = torch.Generator().manual_seed(0)
    samples = make_toy9(200_000, g)
    r_ratio = ratio_rating(samples, denominator_offset=0.0)
    r_mean = mean_rating(samples)
    # ratio: A > B > C ; mean: C > A > B
    assert r_ratio[:3].min() > r_ratio[3:6].max() > 0
    assert r_ratio[3:6].min() > r_ratio[6:].max()
    assert r_mean[6:].min() > r_mean[:3].max() > r_mean[3:6].max()
    for k, (paper_mean, paper_ratio) in PAPER_B2.items():
        got_mean, got_ratio = expected_bpr(r_mean, k), expected_bpr(r_ratio, k)
        assert got_mean == pytest.approx(paper_mean, abs=0.02)
        assert got_ratio == pytest.approx(paper_ratio, abs=0.02)
        assert got_ratio > got_mean


def test_exact_enumeration_values_app_b2():
    # App. B.2 toy, exact enumeration over the 2^6 outcomes of the random sites gives mean 0.100/0.223/0.631 and ratio 0.543/0.630/0.817
    vals, probs = toy9_outcomes()
    r_ratio = ((vals / vals.sum(-1, keepdim=True)) * probs[:, None]).sum(0)
    r_mean = (vals * probs[:, None]).sum(0)
    for k, m, rr in [(1, 0.100, 0.543), (3, 0.223, 0.630), (6, 0.631, 0.817)]:
        assert expected_bpr(r_mean, k) == pytest.approx(m, abs=1e-3)
        assert expected_bpr(r_ratio, k) == pytest.approx(rr, abs=1e-3)


def test_topk_ratio_rating_selects_same_sites_as_ratio_on_toy():
    samples = make_toy9(50_000, torch.Generator().manual_seed(1))
    a = topk_ratio_rating(samples, 3).argsort(descending=True)[:3]
    b = ratio_rating(samples).argsort(descending=True)[:3]
    assert set(a.tolist()) == set(b.tolist())


def test_zero_offset_raises_on_all_zero_sample():
    samples = torch.tensor([[0.0, 0.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="all-zero sample"):
        ratio_rating(samples, denominator_offset=0.0)
    assert torch.allclose(ratio_rating(samples), torch.tensor([0.125, 0.25]))
    with pytest.raises(ValueError, match=r"\[M, \.\.\., S\]"):
        ratio_rating(torch.ones(3))
