"""Direction of the effect on CPU: 1-bit LSBQ, hidden 16, 3 seeds (PARQ and BinaryRelax above STE,
as the official code shows on digits; full precision highest)."""

import statistics

import pytest
from parq_optim.data import make_synthetic
from parq_optim.train import TrainConfig, train


@pytest.mark.slow
def test_parq_and_binaryrelax_beat_ste_at_one_bit():
    acc = {}
    for method in ("fp", "ste", "binaryrelax", "parq"):
        runs = [
            train(TrainConfig(method=method, bits=1, epochs=20, seed=s), make_synthetic(seed=s))
            for s in range(3)
        ]
        acc[method] = statistics.fmean(r["test_acc"] for r in runs)
        for r in runs:
            for layer in r.get("layers", {}).values():
                assert layer["distinct_snapped"] == layer["levels"] == 2
    assert acc["parq"] > acc["ste"]
    assert acc["binaryrelax"] > acc["ste"]
    assert acc["fp"] >= max(acc["ste"], acc["binaryrelax"], acc["parq"])
