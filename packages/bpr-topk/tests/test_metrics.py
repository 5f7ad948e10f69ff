import itertools

import pytest
import torch
from bpr_topk import bpr, regret, topk_mask
from hypothesis import given, settings
from hypothesis import strategies as st


def test_hand_computed_five_sites():
    y = torch.tensor([5.0, 0.0, 3.0, 8.0, 1.0])
    r = torch.tensor([0.9, 0.8, 0.1, 0.5, 0.2])  # picks sites 0, 1 for K=2
    # numerator 5 + 0 = 5; best K=2 is 8 + 5 = 13
    assert bpr(y, r, 2).item() == pytest.approx(5 / 13)
    mask = torch.tensor([True, False, False, True, False])
    assert bpr(y, mask).item() == pytest.approx(1.0)


def test_perfect_ranking_and_k_equals_s():
    y = torch.tensor([[2, 0, 7, 1], [0, 3, 3, 1]])
    assert torch.allclose(bpr(y, y.float(), 2), torch.ones(2))
    assert torch.allclose(bpr(y, torch.randn(2, 4), 4), torch.ones(2))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 20), min_size=6, max_size=6),
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=6, max_size=6),
    st.floats(0.1, 10),
    st.floats(-3, 3),
    st.integers(1, 6),
)
def test_invariant_to_positive_affine_maps(ys, rs, scale, shift, k):
    y = torch.tensor(ys, dtype=torch.float64)
    if y.sum() == 0:
        y[0] = 1.0
    r = torch.tensor(rs, dtype=torch.float64).round(decimals=1)  # creates ties
    base = bpr(y, r, k)
    assert 0.0 <= base.item() <= 1.0 + 1e-12
    # scale by powers of two keeps exact float equality of ties
    assert torch.allclose(bpr(y, r * 2.0, k), base)
    assert torch.allclose(bpr(y, r + 4.0, k), base)


def _all_tie_breaks(y, r, k):
    vals = []
    for perm in itertools.permutations(range(len(r))):
        # stable sort on descending r with this tie order
        order = sorted(perm, key=lambda i: -r[i])
        sel = order[:k]
        vals.append(sum(y[i] for i in sel))
    best = sum(sorted(y, reverse=True)[:k])
    return sum(vals) / len(vals) / best


def test_expected_ties_equal_enumeration_and_random_average():
    y = [4.0, 1.0, 6.0, 2.0, 3.0]
    r = [1.0, 2.0, 1.0, 1.0, 0.0]
    for k in (1, 2, 3, 4):
        exact = _all_tie_breaks(y, r, k)
        got = bpr(torch.tensor(y), torch.tensor(r), k).item()
        assert got == pytest.approx(exact)
        g = torch.Generator().manual_seed(0)
        rnd = bpr(
            torch.tensor(y).expand(4000, 5),
            torch.tensor(r).expand(4000, 5),
            k,
            ties="random",
            generator=g,
        )
        assert rnd.mean().item() == pytest.approx(exact, abs=0.02)
    first = bpr(torch.tensor(y), torch.tensor(r), 2, ties="first").item()
    assert min(abs(first - v) for v in (0.5, 0.7, 0.3)) < 1e-6


def test_zero_denominator():
    y = torch.tensor([[0, 0, 0], [1, 2, 0]])
    r = torch.tensor([[1.0, 2.0, 3.0], [1.0, 3.0, 2.0]])
    with pytest.warns(RuntimeWarning, match="undefined"):
        out = bpr(y, r, 1)
    assert torch.isnan(out[0]) and out[1].item() == pytest.approx(1.0)
    assert bpr(y, r, 1, zero_division=1.0)[0].item() == 1.0
    assert bpr(y, r, 1, zero_division=0.0)[0].item() == 0.0


def test_regret_is_weighted_one_minus_bpr():
    y = torch.tensor([[5.0, 1.0, 0.0], [2.0, 2.0, 6.0]])
    r = torch.tensor([[0.0, 1.0, 2.0], [3.0, 2.0, 1.0]])
    # step 0: best 5, got 0; step 1: best 6, got 2 -> regret (5 + 4) / 11
    assert regret(y, r, 1).item() == pytest.approx(9 / 11)


def test_topk_mask_rows_sum_to_k():
    r = torch.randn(3, 7)
    assert torch.equal(topk_mask(r, 3).sum(-1), torch.full((3,), 3.0))


@pytest.mark.parametrize("k", [0, 6, -1, 2.5])
def test_bad_k(k):
    with pytest.raises(ValueError, match=r"k must be in \[1, S\]"):
        bpr(torch.ones(5), torch.ones(5), k)


def test_bad_inputs():
    with pytest.raises(ValueError, match="same shape"):
        bpr(torch.ones(5), torch.ones(4), 2)
    with pytest.raises(ValueError, match="non-negative"):
        bpr(torch.tensor([1.0, -1.0]), torch.ones(2), 1)
    with pytest.raises(ValueError, match="k is required"):
        bpr(torch.ones(3), torch.ones(3))
    with pytest.raises(ValueError, match="ties must be"):
        bpr(torch.ones(3), torch.ones(3), 1, ties="mean")
    with pytest.raises(ValueError, match="same K"):
        bpr(torch.ones(2, 3), torch.tensor([[True, False, False], [True, True, False]]))
