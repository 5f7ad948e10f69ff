import math

import cft_calibration as C
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st


def onehot_conf(conf, pred, k=4):
    """Rows with probability `conf` on `pred` and the rest spread evenly."""
    conf = torch.as_tensor(conf, dtype=torch.float64)
    p = ((1 - conf) / (k - 1))[:, None].repeat(1, k)
    p[torch.arange(len(pred)), torch.as_tensor(pred)] = conf
    return p


def test_all_confidence_one_gives_ece_one_minus_accuracy():
    p = onehot_conf([1.0] * 10, [0] * 10)
    y = torch.tensor([0] * 7 + [1] * 3)
    assert C.conf_ece(p, y) == pytest.approx(0.3, abs=1e-12)
    assert C.accuracy(p, y) == pytest.approx(0.7)


def test_two_bin_hand_example():
    # bin [0.6, 0.7): conf 0.65 x2, one right -> |0.5 - 0.65| = 0.15, weight 2/4
    # bin [0.9, 1.0]: conf 0.95 x2, both right -> |1 - 0.95| = 0.05, weight 2/4
    p = onehot_conf([0.65, 0.65, 0.95, 0.95], [0, 0, 1, 1])
    y = torch.tensor([0, 2, 1, 1])
    assert C.conf_ece(p, y) == pytest.approx(0.5 * 0.15 + 0.5 * 0.05, abs=1e-12)
    assert C.mce(p, y) == pytest.approx(0.15, abs=1e-12)


@pytest.mark.parametrize(("c", "expected"), [(0.1, 1), (0.9, 9), (1.0, 9), (0.0, 0), (0.45, 4)])
def test_edges_land_in_the_documented_bin(c, expected):
    assert int(C.bin_indices(torch.tensor([c], dtype=torch.float64))[0]) == expected
    assert int(C.bin_indices(torch.tensor([c], dtype=torch.float32))[0]) == expected


@pytest.mark.reference
def test_equals_torchmetrics_multiclass_calibration_error():
    tm = pytest.importorskip("torchmetrics.classification")
    g = torch.Generator().manual_seed(0)
    z = torch.randn(500, 4, generator=g) * 2
    p = torch.softmax(z, -1)
    y = torch.randint(0, 4, (500,), generator=g)
    ref = tm.MulticlassCalibrationError(num_classes=4, n_bins=10, norm="l1")(p.float(), y)
    assert C.conf_ece(p, y) == pytest.approx(float(ref), abs=1e-5)


@pytest.mark.reference
def test_classwise_equals_mean_of_torchmetrics_binary_calibration_errors():
    tm = pytest.importorskip("torchmetrics.classification")
    g = torch.Generator().manual_seed(1)
    p = torch.softmax(torch.randn(400, 4, generator=g).double() * 1.5, -1)
    y = torch.randint(0, 4, (400,), generator=g)
    # each class term: binary ECE of the probability p_k against 1{y = k}
    terms = [
        float(tm.BinaryCalibrationError(n_bins=10, norm="l1")(p[:, k].float(), (y == k).long()))
        for k in range(4)
    ]
    assert C.classwise_ece(p, y) == pytest.approx(float(np.mean(terms)), abs=1e-6)


def test_classwise_is_invariant_to_a_joint_permutation_of_options_and_labels():
    g = torch.Generator().manual_seed(2)
    p = torch.softmax(torch.randn(300, 4, generator=g), -1)
    y = torch.randint(0, 4, (300,), generator=g)
    perm = torch.tensor([2, 0, 3, 1])
    inv = torch.argsort(perm)
    assert C.classwise_ece(p[:, perm], inv[y]) == pytest.approx(C.classwise_ece(p, y), abs=1e-12)


def test_k2_classwise_hand_example():
    # K = 2, conf-ECE and cw-ECE on one hand-made example
    p = torch.tensor([[0.8, 0.2], [0.8, 0.2], [0.3, 0.7], [0.3, 0.7]], dtype=torch.float64)
    y = torch.tensor([0, 1, 1, 1])
    # conf: bin 0.8 -> acc 0.5 (gap .3), bin 0.7 -> acc 1 (gap .3): ECE 0.3
    assert C.conf_ece(p, y) == pytest.approx(0.3)
    # class 0: p=0.8 (freq 0.5, gap .3), p=0.3 (freq 0, gap .3) -> 0.3; class 1 symmetric -> 0.3
    assert C.classwise_ece(p, y) == pytest.approx(0.3)


def test_sampling_labels_from_the_model_gives_ece_near_zero():
    g = torch.Generator().manual_seed(3)
    n = 40000
    p = torch.softmax(torch.randn(n, 4, generator=g) * 1.5, -1)
    y = torch.multinomial(p, 1, generator=g).squeeze(1)
    assert C.conf_ece(p, y) < 3 * math.sqrt(10 / n)
    assert C.classwise_ece(p, y) < 3 * math.sqrt(10 / n)


def test_known_miscalibration_equals_closed_form():
    # confidence 0.9 everywhere, labels drawn so accuracy is exactly 0.6 -> ECE = 0.3
    p = onehot_conf([0.9] * 100, [0] * 100)
    y = torch.tensor([0] * 60 + [1] * 40)
    assert C.conf_ece(p, y) == pytest.approx(0.3, abs=1e-12)
    assert C.overconfidence_gap(p, y) == pytest.approx(0.3, abs=1e-12)


@given(st.integers(10, 400), st.integers(2, 20), st.integers(0, 10_000))
def test_equal_mass_bins_hold_equal_counts(n, m, seed):
    g = torch.Generator().manual_seed(seed)
    conf = torch.rand(n, generator=g)
    idx = C.bin_indices(conf, m, binning="mass")
    counts = torch.bincount(idx, minlength=m)
    assert int(counts.max() - counts.min()) <= 1
    if n % m == 0:
        assert bool((counts == n // m).all())
    # monotone: a higher bin never holds a lower confidence than a lower bin's maximum
    for b in range(m - 1):
        if counts[b] and counts[b + 1]:
            assert conf[idx == b].max() <= conf[idx == b + 1].min()


def test_brier_and_nll_hand_values():
    p = torch.tensor([[0.5, 0.5], [0.9, 0.1]], dtype=torch.float64)
    y = torch.tensor([0, 1])
    assert C.brier_score(p, y) == pytest.approx(((0.25 + 0.25) + (0.81 + 0.81)) / 2)
    assert C.nll(p, y) == pytest.approx(-(math.log(0.5) + math.log(0.1)) / 2)


def test_masked_options_are_ignored():
    p = torch.tensor([[0.7, 0.3, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    y = torch.tensor([0, 2])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    m = C.evaluate_probs(p, y, mask=mask)
    assert m["accuracy"] == 1.0
    with pytest.raises(ValueError, match="masked"):
        C.conf_ece(
            torch.tensor([[0.5, 0.3, 0.2]]),
            torch.tensor([0]),
            mask=torch.tensor([[True, True, False]]),
        )


@pytest.mark.parametrize(
    ("probs", "labels", "match"),
    [
        (torch.ones(3, 4) / 4, torch.tensor([0, 1]), "labels must have shape"),
        (torch.ones(3), torch.tensor([0, 1, 2]), r"shape \[N, K\]"),
        (torch.tensor([[0.5, float("nan")]]), torch.tensor([0]), "NaN"),
        (torch.tensor([[0.9, 0.3]]), torch.tensor([0]), "sum to 1"),
        (torch.ones(2, 4) / 4, torch.tensor([0, 4]), r"\[0, 3\]"),
        (torch.empty(0, 4), torch.empty(0, dtype=torch.long), "empty"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(probs, labels, match):
    with pytest.raises(ValueError, match=match):
        C.conf_ece(probs, labels)


def test_reliability_table_counts_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    from cft_calibration.plots import plot_classwise_reliability, plot_reliability

    g = torch.Generator().manual_seed(4)
    p = torch.softmax(torch.randn(200, 4, generator=g) * 2, -1)
    y = torch.randint(0, 4, (200,), generator=g)
    table = C.reliability_table(p, y)
    assert sum(r["count"] for r in table) == 200
    png = plot_reliability({"a": (p, y, None), "b": (p, y, None)}, tmp_path / "r.png")
    cw = plot_classwise_reliability(p, y, tmp_path / "cw.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and cw.stat().st_size > 1000


def test_reliability_bars_are_the_bin_statistics_they_are_labelled():
    """Every plotted bar's height is read back from the figure and matched, bin by bin, against
    reliability_table: the "accuracy" bars carry the bin accuracies and the "mean confidence" bars the
    mean confidences, in bins where accuracy is above confidence as well as below it (the old
    overlay drew what looked like min(accuracy, confidence))."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from cft_calibration.plots import reliability_figure

    g = torch.Generator().manual_seed(7)
    p = torch.softmax(torch.randn(400, 4, generator=g) * 2.5, -1)
    y = torch.randint(0, 4, (400,), generator=g)
    y[:150] = p[:150].argmax(1)  # some bins underconfident, others overconfident
    rows = [r for r in C.reliability_table(p, y) if r["count"]]
    assert any(r["accuracy"] > r["confidence"] for r in rows)
    assert any(r["accuracy"] < r["confidence"] for r in rows)
    fig = reliability_figure({"m": (p, y, None)})
    try:
        ax, ax_hist = fig.axes[0], fig.axes[1]
        bars = {c.get_label(): list(c.patches) for c in ax.containers}
        assert set(bars) == {"accuracy", "mean confidence"}
        for label, key in (("accuracy", "accuracy"), ("mean confidence", "confidence")):
            patches = sorted(bars[label], key=lambda b: b.get_x())
            assert len(patches) == len(rows)
            for patch, row in zip(patches, rows):
                assert patch.get_y() == 0.0  # drawn from zero, nothing stacked or overlaid
                assert patch.get_height() == pytest.approx(row[key], abs=1e-12)
                assert (
                    row["lower"]
                    <= patch.get_x()
                    < patch.get_x() + patch.get_width()
                    <= (row["upper"] + 1e-12)
                )
        counts = [b.get_height() for b in ax_hist.containers[0].patches]
        assert counts == [r["count"] for r in C.reliability_table(p, y)]
    finally:
        plt.close(fig)
