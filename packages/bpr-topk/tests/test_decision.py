"""SPO+ and PG for top-K (Table C.2 baselines): closed-form losses and gradients."""

import pytest
import torch
from bpr_topk import (
    PGTopK,
    SPOPlusTopK,
    TruncNormMixture,
    fit,
    make_synthetic7,
    pg_topk,
    spo_plus_topk,
    topk_oracle,
)
from hypothesis import given
from hypothesis import strategies as st


def _grad(fn, r, *args, **kw):
    r = torch.tensor(r, dtype=torch.float64, requires_grad=True)
    loss = fn(r, *args, **kw)
    loss.sum().backward()
    return float(loss.detach()), r.grad.tolist()


def test_topk_oracle_picks_the_cheapest_sites():
    assert topk_oracle(torch.tensor([3.0, -1.0, 0.0, -5.0]), 2).tolist() == [0, 1, 0, 1]


def test_spo_plus_closed_form_value_and_subgradient():
    """y = (3, 1, 0), K = 1, unscaled: c = (−3, −1, 0); r = (0, 2, 1) so ĉ = (0, −2, −1).
    w*(c) = site 0, 2ĉ − c = (3, −3, −2) so w*(2ĉ − c) = site 1:
    ℓ = −(−3) + 2·0 − (−3) = 6 and ∂ℓ/∂ĉ = 2(e0 − e1), i.e. ∂ℓ/∂r = (−2, 2, 0)."""
    y = torch.tensor([3.0, 1.0, 0.0], dtype=torch.float64)
    loss, grad = _grad(spo_plus_topk, [0.0, 2.0, 1.0], y, 1, scale_truth=False)
    assert loss == pytest.approx(6.0) and grad == pytest.approx([-2.0, 2.0, 0.0])


@given(
    st.lists(st.integers(0, 30), min_size=3, max_size=10),
    st.lists(st.floats(0, 1, allow_nan=False), min_size=10, max_size=10),
    st.integers(1, 9),
    st.booleans(),
)
def test_spo_plus_is_nonnegative(ys, rs, k, scale):
    y = torch.tensor(ys, dtype=torch.float64)
    r = torch.tensor(rs[: len(ys)], dtype=torch.float64)
    k = min(k, len(ys))
    assert float(spo_plus_topk(r, y, k, scale)) >= -1e-12


def test_spo_plus_is_zero_when_the_prediction_is_the_truth():
    y = torch.tensor([[5.0, 1.0, 3.0, 0.0, 2.0]], dtype=torch.float64)
    assert float(spo_plus_topk(y / y.sum(), y, 2, scale_truth=True)) == pytest.approx(
        0.0, abs=1e-12
    )
    assert float(spo_plus_topk(y, y, 2, scale_truth=False)) == pytest.approx(0.0, abs=1e-12)


def test_pg_equals_the_true_cost_of_the_decision_when_no_ranking_changes():
    """y = (3, 1, 0), r = (5, 1, 0), h = 1: ĉ − h c = (−2, 0, 0) keeps site 0 chosen, so
    ℓ = cᵀw*(ĉ) = −3 and the gradient vanishes."""
    y = torch.tensor([3.0, 1.0, 0.0], dtype=torch.float64)
    loss, grad = _grad(pg_topk, [5.0, 1.0, 0.0], y, 1, h=1.0, scale_truth=False)
    assert loss == pytest.approx(-3.0) and grad == pytest.approx([0.0, 0.0, 0.0])


def test_pg_closed_form_when_the_decision_changes():
    """y = (4, 0, 1), r = (2, 1, 0), h = 1: w*(ĉ) = site 0, ĉ − h c = (2, −1, 1) so
    w*(ĉ − h c) = site 1: ℓ = (−2 − (−1)) / 1 = −1, ∂ℓ/∂ĉ = (e0 − e1)/h, ∂ℓ/∂r = (−1, 1, 0)."""
    y = torch.tensor([4.0, 0.0, 1.0], dtype=torch.float64)
    loss, grad = _grad(pg_topk, [2.0, 1.0, 0.0], y, 1, h=1.0, scale_truth=False)
    assert loss == pytest.approx(-1.0) and grad == pytest.approx([-1.0, 1.0, 0.0])
    _, grad2 = _grad(pg_topk, [2.0, 1.0, 0.0], y, 1, h=2.0, scale_truth=False)
    assert grad2 == pytest.approx([-0.5, 0.5, 0.0])  # (w1 − w2)/h with the same two decisions


def test_bad_arguments():
    y = torch.ones(3)
    with pytest.raises(ValueError, match="h must be > 0"):
        pg_topk(torch.zeros(3), y, 1, h=0.0)
    with pytest.raises(ValueError, match="same shape"):
        spo_plus_topk(torch.zeros(2), y, 1)
    with pytest.raises(TypeError, match="SPOPlusTopK does not use eps"):
        SPOPlusTopK(5, eps=0.9)
    with pytest.raises(ValueError, match="h must be > 0"):
        PGTopK(5, h=-1.0)


@pytest.mark.parametrize("cls", [SPOPlusTopK, PGTopK])
def test_decision_focused_training_runs_through_the_score_function(cls):
    """One backward through the score-function surrogate reaches the model parameters, and fit
    keeps the checkpoint with the best valid BPR (these objectives have no likelihood)."""
    data = make_synthetic7(0, num_train=20, num_valid=10, num_test=10)
    torch.manual_seed(0)
    model = TruncNormMixture.official_init(0)
    loss = cls(5, num_score_samples=10, num_perturb_samples=5, denominator_offset=0.0)
    out = loss(model, data.train.y, data.train.X, data.train.time)
    out.loss.backward()
    assert torch.isfinite(out.loss) and out.decision.sum(-1).eq(5).all()
    assert any(float(p.grad.abs().sum()) > 0 for p in model.parameters())
    res = fit(model, data.train, data.valid, loss, epochs=6, lr=0.1, val_freq=2,
              val_samples=20, progress=False)  # fmt: skip
    best = max(range(len(res.history)), key=lambda i: res.history[i]["valid_bpr"])
    assert res.best_epoch == res.history[best]["epoch"]


@pytest.mark.slow
@pytest.mark.parametrize(("objective", "name"), [("spo+", "SPO+"), ("pg", "PG")])
def test_train_cli_runs_the_decision_focused_baselines(tmp_path, objective, name):
    import json

    from bpr_topk.cli import main

    argv = ["train", "--quiet", "--dataset", "synthetic7", "--objective", objective]
    argv += ["--epochs", "4", "--M", "5", "--J", "5", "--eval-trials", "1", "--eval-samples", "50"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["metrics"][0]["method"] == name and 0 <= res["metrics"][0]["bpr"] <= 1
    assert res["train_config"]["pg_h"] == 1.0
