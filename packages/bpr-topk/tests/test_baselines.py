"""Heuristic baselines (Table C.2 rows last / avg / zero) on hand-made panels, in closed form."""

import json

import pytest
import torch
from bpr_topk import (
    Split,
    TopKData,
    best_heuristic,
    bpr,
    evaluate_heuristic,
    heuristic_scores,
    lag_columns,
    make_panel,
)
from bpr_topk.cli import main
from hypothesis import given
from hypothesis import strategies as st

TRAIN = [[1, 0, 0, 2], [0, 3, 0, 1]]
VALID = [[2, 0, 1, 0]]
TEST = [[0, 1, 4, 1], [3, 0, 0, 2]]


def _split(rows, t0, X=None):
    y = torch.tensor(rows)
    T, S = y.shape
    X = torch.zeros(T, S, 0) if X is None else X
    time = torch.arange(t0, t0 + T, dtype=torch.float32)[:, None].expand(T, S)
    return Split(X, y, time, [float(t0 + i) for i in range(T)])


def _panel(X=None, names=(), mean=None, std=None):
    Xs = X or (None, None, None)
    F = len(names)
    return TopKData(
        _split(TRAIN, 0, Xs[0]),
        _split(VALID, 2, Xs[1]),
        _split(TEST, 3, Xs[2]),
        site_ids=["a", "b", "c", "d"],
        feature_names=list(names),
        feature_mean=torch.zeros(F) if mean is None else mean,
        feature_std=torch.ones(F) if std is None else std,
    )


def test_last_ranks_by_the_previous_step_closed_form():
    d = _panel()
    scores = heuristic_scores(d, "test", "last")
    assert scores.tolist() == [VALID[0], TEST[0]]  # y_{t-1} from the y history
    res = evaluate_heuristic(d, "test", 2, "last")
    # step 0: picks a, c -> 0 + 4 of the best 4 + 1;  step 1: picks c, then a tie b/d of 1s:
    # last = [0, 1, 4, 1] -> c (4) and one of b, d (expected: half each) -> (0 + (0 + 2) / 2) / 5
    assert res["bpr_per_step"] == pytest.approx([4 / 5, 1 / 5])
    assert res["bpr"] == pytest.approx(0.5) and res["source"] == "y history"
    assert res["mae"] == pytest.approx((2 + 1 + 3 + 1 + 3 + 1 + 4 + 1) / 8)


def test_avg_over_w_uses_the_available_history_closed_form():
    d = _panel()
    avg2 = heuristic_scores(d, "test", "avg", window=2)
    assert avg2[0].tolist() == [1.0, 1.5, 0.5, 0.5]  # mean of valid[0] and train[1]
    res = evaluate_heuristic(d, "test", 2, "avg", window=2)
    assert res["bpr_per_step"][0] == pytest.approx(1 / 5)  # sites b, a: 1 + 0 of 5
    # at the first training step there is no history: all scores tie (0), like `zero`
    first = heuristic_scores(d, "train", "avg", window=10)
    assert torch.equal(first[0], torch.zeros(4))
    # at the second only one step exists: avg over 10 = that step
    assert first[1].tolist() == [float(v) for v in TRAIN[0]]
    # the window longer than the whole history averages all of it
    assert heuristic_scores(d, "test", "avg", window=10)[1].tolist() == [
        sum(col) / 4 for col in zip(*TRAIN, *VALID, TEST[0])
    ]


def test_zero_is_the_expected_tie_bpr_closed_form():
    d = _panel()
    res = evaluate_heuristic(d, "test", 2, "zero")
    expected = [(2 / 4) * 6 / 5, (2 / 4) * 5 / 5]  # (K/S)·Σy / Σ_topK y
    assert res["bpr_per_step"] == pytest.approx(expected) and res["source"] == "none"


@given(
    st.lists(st.integers(0, 20), min_size=2, max_size=12).filter(lambda v: sum(v) > 0),
    st.integers(1, 12),
)
def test_zero_rule_matches_the_closed_form_on_any_counts(values, k):
    k = min(k, len(values))
    y = torch.tensor([values], dtype=torch.float32)
    got = float(bpr(y, torch.zeros_like(y), k)[0])
    top = sorted(values, reverse=True)[:k]
    assert got == pytest.approx(k / len(values) * sum(values) / sum(top), rel=1e-5)


def test_lag_columns_are_preferred_and_read_unstandardised():
    names = ["prev_x_02back", "z", "prev_x_01back"]
    assert lag_columns(names) == {2: 0, 1: 2}
    raw = {s: torch.zeros(len(r), 4, 3) for s, r in (("tr", TRAIN), ("va", VALID), ("te", TEST))}
    raw["te"][..., 2] = torch.tensor([[5.0, 0, 0, 1], [0, 0, 7, 0]])  # y_{t-1} per the column
    raw["te"][..., 0] = torch.tensor([[1.0, 1, 0, 0], [1, 0, 0, 3]])  # y_{t-2}
    mean, std = torch.tensor([0.5, 0.0, 2.0]), torch.tensor([2.0, 1.0, 4.0])
    Xs = tuple((x - mean) / std for x in raw.values())  # standardised as the loader does
    d = _panel(Xs, names, mean, std)
    last = heuristic_scores(d, "test", "last")
    assert torch.allclose(last, raw["te"][..., 2])
    avg3 = heuristic_scores(d, "test", "avg", window=3)  # lags 1, 2 from columns, 3 from history
    third = torch.tensor([TRAIN[0], TRAIN[1]], dtype=torch.float32)  # steps 3-3, 4-3
    assert torch.allclose(avg3, (raw["te"][..., 2] + raw["te"][..., 0] + third) / 3)
    assert evaluate_heuristic(d, "test", 2, "avg", 3)["source"] == "lag columns 1-2 + y history"


def test_lag_columns_agree_with_the_y_history_on_a_generated_panel():
    p = make_panel(36, seed=3)
    no_lags = TopKData(p.train, p.valid, p.test, p.site_ids, feature_names=[], name="x")
    for rule in ("last", "avg"):
        a = heuristic_scores(p, "test", rule, 5)
        b = heuristic_scores(no_lags, "test", rule, 5)
        assert torch.allclose(a, b)


def test_best_heuristic_is_chosen_on_validation():
    d = _panel()
    best = best_heuristic(d, 2, window=2)
    by = {r["rule"]: r for r in best["all"]}
    assert best["valid_bpr"] == max(r["valid_bpr"] for r in by.values())
    assert set(by) == {"last", "avg", "mean", "zero"} and "test_bpr" in best
    windows = [r["window"] for r in best["all"] if r["rule"] == "avg"]
    assert windows == [2, 3, 5, 10]


def test_all_history_mean_in_closed_form():
    """Every past count of the hand-made panel: TRAIN + VALID before test step 0, + TEST[0]."""
    got = heuristic_scores(_panel(), "test", "mean")
    want = torch.tensor([[1, 1, 1 / 3, 1], [0.75, 1, 1.25, 1]])
    assert torch.allclose(got, want)
    assert evaluate_heuristic(_panel(), "test", 2, "mean")["method"] == "all-history mean"


def test_best_heuristic_maximises_valid_bpr_over_the_family_with_the_asked_window():
    d = _panel()
    best = best_heuristic(d, 1, window=4)
    by = {r["method"]: r for r in best["all"]}
    assert "avg over 4" in by and best["method"] == max(by, key=lambda m: by[m]["valid_bpr"])
    top_test = max(r["test_bpr"] for r in best["all"])
    assert best["valid_bpr"] == max(r["valid_bpr"] for r in best["all"])
    assert best["test_bpr"] <= top_test


def test_bad_rule_and_window():
    with pytest.raises(ValueError, match="rule must be one of"):
        heuristic_scores(_panel(), "test", "median")
    with pytest.raises(ValueError, match="window must be >= 1"):
        heuristic_scores(_panel(), "test", "avg", window=0)


def test_baseline_command_writes_its_own_file_with_the_api_numbers(tmp_path):
    argv = ["baseline", "--quiet", "--dataset", "panel", "--sites", "36", "--K", "4"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    text = (tmp_path / "baseline.json").read_text()
    res = json.loads(text)
    methods = [r["method"] for r in res["heuristics"]]
    assert methods[:2] == ["last step", "avg over 2"] and methods[-2:] == [
        "all-history mean",
        "chance (ŷ=0)",
    ]
    p = make_panel(36, seed=0)
    for row in res["heuristics"]:
        want = evaluate_heuristic(p, "test", 4, row["rule"], row["window"] or 5)["bpr"]
        assert row["bpr"] == pytest.approx(want)
    assert res["best_method"] == best_heuristic(p, 4, 5)["method"]
    assert main([*argv, "--rule", "last", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "baseline-last.json").is_file()
    assert (tmp_path / "baseline.json").read_text() == text  # the first result is kept


def test_history_features_are_the_avg_heuristic_standardised_on_train(tmp_path):
    """A 2-step mean feature on the hand-made panel (no lag columns: the y history), past steps
    only; z-scored with the training statistics, which are stored for the lag read-back."""
    from bpr_topk import with_history_features

    data = _panel()
    out = with_history_features(data, [2])
    assert out.feature_names == ["avg_counts_2steps"] and data.num_features == 0
    raw = {  # mean of the previous (up to) 2 steps of the history TRAIN + VALID + TEST
        "train": [[0, 0, 0, 0], [1, 0, 0, 2]],
        "valid": [[0.5, 1.5, 0, 1.5]],
        "test": [[1, 1.5, 0.5, 0.5], [1, 0.5, 2.5, 0.5]],
    }
    mu, sd = out.feature_mean[0], out.feature_std[0]
    train = torch.tensor(raw["train"], dtype=torch.float32)
    assert float(mu) == pytest.approx(float(train.mean()))
    assert float(sd) == pytest.approx(float(train.std()))
    for split, rows in raw.items():
        got = out.split(split).X[..., 0] * sd + mu
        assert torch.allclose(got, torch.tensor(rows, dtype=torch.float32), atol=1e-6), split
        assert torch.equal(out.split(split).y, data.split(split).y)
    with pytest.raises(ValueError, match="already has the feature"):
        with_history_features(out, [2])
    with pytest.raises(ValueError, match="every window must be an integer >= 1"):
        with_history_features(data, [0])


@pytest.mark.slow
def test_history_windows_flag_reaches_the_model_and_the_checkpoint_check(tmp_path, capsys):
    base = ["--dataset", "zeroinflated", "--sites", "40", "--quiet"]
    argv = ["train", *base, "--objective", "nll", "--epochs", "2", "--eval-trials", "1"]
    argv += ["--eval-samples", "20", "--history-windows", "10,20", "--out", str(tmp_path / "t")]
    assert main(argv) == 0
    res = json.loads((tmp_path / "t" / "results.json").read_text())
    assert res["model"] == "negbin"
    ckpt = torch.load(tmp_path / "t" / "model.pt", weights_only=True)
    assert {"avg_counts_10steps", "avg_counts_20steps"} <= set(ckpt["feature_names"])
    rank = ["rank", *base, "--checkpoint", str(tmp_path / "t" / "model.pt")]
    assert main([*rank, "--out", str(tmp_path / "r")]) == 2  # without the same windows
    assert "--history-windows and --history-features or --raw-features" in capsys.readouterr().err
    assert main([*rank, "--history-windows", "10,20", "--out", str(tmp_path / "r")]) == 0


def _lagged_panel(before):
    """The hand-made panel with lag columns prev_counts_02back, prev_counts_01back built from the
    y history preceded by the steps ``before`` (source index -2, -1)."""
    history = [*before, *TRAIN, *VALID, *TEST]
    X, t = [], 0
    for rows in (TRAIN, VALID, TEST):
        steps = []
        for _ in rows:
            i = t + len(before)  # position of this step in `history`
            steps.append([[history[i - 2][s], history[i - 1][s]] for s in range(4)])
            t += 1
        X.append(torch.tensor(steps, dtype=torch.float32))
    return _panel(X, ("prev_counts_02back", "prev_counts_01back"))


def test_zero_padded_lag_columns_are_unavailable_not_zero_counts():
    """Lag columns that reach back before the first observed step hold zero padding (Cook County's
    first train year): those entries are left out of the heuristics' means and the history
    features instead of counting as observed zeros; a step with any count is kept."""
    from bpr_topk import with_site_history_features
    from bpr_topk.baselines import lagged_counts

    d = _lagged_panel([[0, 0, 0, 0], [1, 0, 2, 0]])  # step -2: padding, step -1: observed
    values, ok = lagged_counts(d, "train", 2)
    assert ok[0].tolist() == [False] * 4 and ok[1].all()  # source -2 (padding), then -1
    assert values[1].tolist() == [1.0, 0.0, 2.0, 0.0]
    avg2 = heuristic_scores(d, "train", "avg", window=2)
    assert avg2[0].tolist() == [1.0, 0.0, 2.0, 0.0]  # the one observed step, not halved
    assert avg2[1].tolist() == [(a + b) / 2 for a, b in zip(TRAIN[0], [1, 0, 2, 0])]
    hist = with_site_history_features(d, [2], zero_window=2)
    j = hist.feature_names.index("zeros_counts_2steps")
    zeros = hist.train.X[0, :, j] * hist.feature_std[j] + hist.feature_mean[j]
    assert zeros.tolist() == pytest.approx([0.0, 1.0, 0.0, 1.0])  # of 1 observed step
    # valid and test never reach the padding: unchanged from reading the columns as counts
    assert heuristic_scores(d, "test", "avg", window=2)[0].tolist() == [
        (a + b) / 2 for a, b in zip(VALID[0], TRAIN[1])
    ]
    real = _lagged_panel([[0, 0, 1, 0], [1, 0, 2, 0]])  # step -2 has a count: observed
    assert lagged_counts(real, "train", 2)[1].all()
    assert heuristic_scores(real, "train", "avg", window=2)[0].tolist() == [0.5, 0.0, 1.5, 0.0]
