import math
import warnings

import cft_calibration as C
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st


def grid_optimum(z, y):
    taus = torch.linspace(-3, 3, 6001, dtype=torch.float64)
    nlls = torch.stack(
        [torch.nn.functional.cross_entropy(z.double() * math.exp(-t), y) for t in taus]
    )
    return math.exp(float(taus[nlls.argmin()]))


def test_recovers_the_scale_of_a_calibrated_linear_scorer():
    task = C.synthetic_feature_mcqa({"val": 20000}, seed=0)
    s = task.splits["val"]
    true_logits = (
        task.beta_star * s.features @ task.w_star
    )  # softmax of these is the Bayes posterior
    z = true_logits / task.beta_star  # scaled by 1 / beta*
    ts = C.TemperatureScaler().fit(z, s.labels)
    assert ts.temperature_ == pytest.approx(1 / task.beta_star, rel=0.05)


def test_equals_the_bounded_scalar_optimum():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(2000, 4, generator=g) * 5
    y = torch.multinomial(torch.softmax(z / 3, -1), 1, generator=g).squeeze(1)
    ts = C.TemperatureScaler().fit(z, y)
    assert ts.temperature_ == pytest.approx(grid_optimum(z, y), rel=1e-3)
    assert ts.temperature_ != pytest.approx(1.0, abs=0.1)  # it moved (the official bug keeps T)


@given(st.integers(0, 10_000), st.floats(0.1, 8.0))
def test_never_increases_nll_on_the_fit_set_and_keeps_accuracy(seed, scale):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(300, 4, generator=g) * scale
    y = torch.randint(0, 4, (300,), generator=g)
    ts = C.TemperatureScaler().fit(z, y)
    assert ts.temperature_ > 0
    assert ts.nll_after_ <= ts.nll_before_ + 1e-9
    p = ts.transform(z)
    assert torch.equal(p.argmax(1), z.argmax(1))
    assert C.accuracy(p, y) == C.accuracy(torch.softmax(z.double(), -1), y)


def test_changes_confidence_but_not_accuracy():
    g = torch.Generator().manual_seed(2)
    z = torch.randn(1000, 4, generator=g) * 6  # overconfident
    y = torch.multinomial(torch.softmax(z / 4, -1), 1, generator=g).squeeze(1)
    p0 = torch.softmax(z.double(), -1)
    ts = C.TemperatureScaler().fit(z, y)
    p1 = ts.transform(z)
    assert p1.max(1).values.mean() < p0.max(1).values.mean() - 0.05
    assert C.accuracy(p1, y) == C.accuracy(p0, y)
    assert C.conf_ece(p1, y) < C.conf_ece(p0, y)


def test_official_mode_keeps_the_initial_temperature_and_warns():
    z = torch.randn(100, 4) * 5
    y = torch.randint(0, 4, (100,))
    with pytest.warns(UserWarning, match="no gradient"):
        ts = C.TemperatureScaler(mode="official").fit(z, y)
    assert ts.temperature_ == 1.5


def test_absent_options_stay_at_zero_probability():
    z = torch.tensor([[2.0, 1.0, float("-inf")], [0.5, 1.5, 0.0]] * 20)
    y = torch.tensor([0, 1] * 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ts = C.TemperatureScaler().fit(z, y)
    p = ts.transform(z)
    assert torch.all(p[0::2, 2] == 0) and torch.allclose(
        p.sum(1), torch.ones(40, dtype=torch.float64)
    )


def test_bad_input_and_unfitted_use():
    with pytest.raises(ValueError, match="NaN"):
        C.TemperatureScaler().fit(torch.tensor([[float("nan"), 1.0]]), torch.tensor([0]))
    with pytest.raises(ValueError, match="labels"):
        C.TemperatureScaler().fit(torch.zeros(3, 4), torch.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="not fitted"):
        C.TemperatureScaler().transform(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="mode"):
        C.TemperatureScaler(mode="grid")
