import cft_calibration as C
import torch


def test_a_calibrated_predictor_is_witnessed_calibratable():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(4000, 4, generator=g) * 1.5
    y = torch.multinomial(torch.softmax(z, -1), 1, generator=g).squeeze(1)
    rep = C.diagnose(z, y)
    assert rep["zero_ece_reachable_by_ts"] and rep["regime"].startswith("calibratable")
    assert abs(rep["all"]["overconfidence_gap"]) < 0.03


def test_overconfidence_is_reported_and_ts_fixes_pure_scaling():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(4000, 4, generator=g) * 1.5
    y = torch.multinomial(torch.softmax(z, -1), 1, generator=g).squeeze(1)
    rep = C.diagnose(z * 5, y)
    assert rep["all"]["overconfidence_gap"] > 0.1
    assert rep["heldout_conf_ece_after_ts"] < rep["heldout_conf_ece_before_ts"]
    assert rep["temperature"] > 3


def test_never_claims_the_non_calibratable_regime():
    g = torch.Generator().manual_seed(2)
    # miscalibration that one temperature cannot fix: right answers very confident, wrong ones flat
    y = torch.randint(0, 4, (3000,), generator=g)
    z = torch.zeros(3000, 4)
    right = torch.rand(3000, generator=g) < 0.5
    z[right, :] = -3.0
    z[right, y[right]] = 3.0
    z[~right, (y[~right] + 1) % 4] = 0.3
    rep = C.diagnose(z, y)
    assert rep["regime"] in ("undetermined", "calibratable (empirical witness)")
    assert "not implemented" in rep["note"]
