"""Issue 33: the history forecaster, training to convergence, the DAML trade-off rule and the
survey twin (the positive control)."""

import math
from dataclasses import replace

import pytest
import torch
from bpr_topk import (
    DAMLLoss,
    NegBinMixedEffects,
    Split,
    TopKData,
    best_heuristic,
    bpr,
    fit,
    heuristic_scores,
    make_survey_twin,
    with_heuristic_offset,
    with_site_history_features,
)
from bpr_topk.experiment import make_model
from bpr_topk.metrics import nanmean
from bpr_topk.models import build_model
from bpr_topk.train import select_checkpoint
from test_train import Rates, _split


def test_survey_twin_is_zero_inflated_and_an_average_beats_the_last_count():
    gaps = []
    for seed in range(3):
        d = make_survey_twin(400, seed=seed)
        ys = torch.cat([d.train.y, d.valid.y, d.test.y])
        assert 0.8 <= float((ys == 0).float().mean()) <= 0.95
        best = best_heuristic(d, 40)
        by = {r["method"]: r for r in best["all"]}
        assert best["rule"] in ("avg", "mean")
        gaps.append(by["avg over 5"]["test_bpr"] - by["last step"]["test_bpr"])
    assert min(gaps) > 0.03
    with pytest.raises(ValueError, match="persistence must be in"):
        make_survey_twin(20, persistence=1.0)


def test_history_features_are_log1p_heuristics_standardised_on_train_and_drop_raw_lags():
    d = make_survey_twin(60, seed=1)
    h = with_site_history_features(d, windows=(1, 5))
    assert not any(n.startswith("prev_") for n in h.feature_names)
    assert h.feature_names == [
        "habitat",
        "log1p_avg_counts_1steps",
        "log1p_avg_counts_5steps",
        "log1p_mean_counts_past",
        "zeros_counts_10steps",
    ]
    j = h.feature_names.index("log1p_avg_counts_5steps")
    for s in ("train", "test"):
        raw = h.split(s).X[..., j] * h.feature_std[j] + h.feature_mean[j]
        want = torch.log1p(heuristic_scores(d, s, "avg", 5))
        assert torch.allclose(raw, want, atol=1e-5)
    z = h.feature_names.index("zeros_counts_10steps")
    frac = h.test.X[..., z] * h.feature_std[z] + h.feature_mean[z]
    assert float(frac.min()) >= -1e-6 and float(frac.max()) <= 1 + 1e-6
    assert torch.allclose(h.train.X.mean((0, 1)), torch.zeros(5), atol=1e-4)
    with pytest.raises(ValueError, match="already has"):
        with_site_history_features(h, windows=(1, 5))


@pytest.mark.parametrize("window", [1, 5])
def test_the_negbin_model_represents_a_moving_average_exactly(window):
    """Weight sd on log1p_avg_W (exp link, q = 1/2): the mean is 1 + avg_W, so the mean ranking
    and its BPR are the heuristic's to float precision."""
    d = make_survey_twin(80, seed=2)
    h = with_site_history_features(d)
    j = h.feature_names.index(f"log1p_avg_counts_{window}steps")
    m = NegBinMixedEffects(h.num_sites, h.num_features, link="exp").init_at_mean(h.train.y)
    with torch.no_grad():
        m.beta[j] = h.feature_std[j]
        m.beta0.fill_(float(h.feature_mean[j]))
    for s in ("valid", "test"):
        sp = h.split(s)
        mean = m.mean(sp.X, sp.time)
        heur = heuristic_scores(d, s, "avg", window)
        assert torch.allclose(mean, 1 + heur, rtol=1e-4)
        assert nanmean(bpr(sp.y, mean, 8)) == pytest.approx(nanmean(bpr(sp.y, heur, 8)), abs=1e-6)


def test_init_at_mean_starts_at_the_average_count():
    y = torch.tensor([[0, 2, 4], [1, 0, 5]])
    for link in ("exp", "softplus"):
        m = NegBinMixedEffects(3, 2, link=link).init_at_mean(y)
        mean = m.mean(torch.randn(2, 3, 2), torch.zeros(2, 3))
        assert torch.allclose(mean, torch.full((2, 3), 2.0), atol=1e-5)


def test_budget_doubles_while_the_best_epoch_is_the_last():
    """Valid optimum at rate 10 approached slowly: with max_epochs the budget grows until the
    best checkpoint is no longer the last validation (or the cap is hit)."""
    train, valid = _split(10.0, 4), _split(10.0, 2)

    def run(**kw):
        torch.manual_seed(0)
        model = Rates(6, math.log(0.5))
        return fit(
            model,
            train,
            valid,
            DAMLLoss(2, objective="nll"),
            lr=0.01,
            val_freq=10,
            progress=False,
            **kw,
        )

    capped = run(epochs=20, max_epochs=80)
    assert capped.budget == 80 and capped.best_epoch == 80 and capped.at_budget_end
    assert len(capped.states) == len(capped.history) == 9
    plain = run(epochs=20)
    assert plain.budget == 20 and plain.best_epoch == 20 and plain.at_budget_end
    free = run(epochs=20, max_epochs=5000)
    assert not free.at_budget_end and free.best_epoch < free.budget
    assert abs(float(free.best_state["log_rate"]) - math.log(10)) < 0.05
    with pytest.raises(ValueError, match="max_epochs must be >= epochs"):
        run(epochs=20, max_epochs=10)


def test_tradeoff_rule_picks_a_moved_checkpoint_the_paper_rule_does_not():
    """A warm-started DAML history: epoch 0 is the ML model (best NLL). The paper's rule keeps it;
    the trade-off rule takes the best BPR within 1 % of the reference NLL; the code rule the
    best nll − 30·bpr."""
    h = [
        {"epoch": 0, "valid_nll": 1.000, "valid_bpr": 0.40},
        {"epoch": 10, "valid_nll": 1.005, "valid_bpr": 0.45},
        {"epoch": 20, "valid_nll": 1.009, "valid_bpr": 0.47},
        {"epoch": 30, "valid_nll": 1.300, "valid_bpr": 0.50},
    ]
    assert select_checkpoint(h, "daml", "paper", reference_bpr=0.40) == 0
    assert select_checkpoint(h, "daml", "tradeoff", reference_nll=1.0) == 2
    assert select_checkpoint(h, "daml", "tradeoff", reference_nll=1.0, nll_tolerance=0.4) == 3
    assert select_checkpoint(h, "daml", "tradeoff", reference_nll=0.5) == 0  # none within: best NLL
    assert select_checkpoint(h, "daml", "code", lam=30.0) == 3
    assert select_checkpoint(h, "nll", "tradeoff") == 0
    with pytest.raises(ValueError, match="nll_tolerance must be >= 0"):
        select_checkpoint(h, "daml", "tradeoff", nll_tolerance=-1.0)


def test_train_cli_history_forecaster_flags_reach_the_run(tmp_path):
    import json

    from bpr_topk.cli import main

    argv = ["train", "--quiet", "--dataset", "zeroinflated", "--sites", "40", "--K", "4"]
    argv += ["--objective", "nll", "--epochs", "10", "--max-epochs", "40", "--link", "exp"]
    argv += ["--start", "mean", "--history-features", "--selection", "tradeoff"]
    argv += ["--no-site-slopes", "--dispersion", "site"]
    argv += ["--eval-trials", "1", "--eval-samples", "20", "--out", str(tmp_path)]
    assert main(argv) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    ckpt = torch.load(tmp_path / "model.pt", weights_only=True)
    assert "heuristic_data" not in (tmp_path / "results.json").read_text()
    tc = res["train_config"]
    assert tc["site_slopes"] is False and tc["dispersion"] == "site"
    assert ckpt["config"]["dispersion"] == "site" and ckpt["config"]["site_slopes"] is False
    assert ckpt["state_dict"]["delta"].shape == (40,)
    rank = ["rank", "--quiet", "--dataset", "zeroinflated", "--sites", "40", "--K", "4"]
    rank += ["--checkpoint", str(tmp_path / "model.pt"), "--out", str(tmp_path / "rank")]
    assert main(rank) == 0  # the checkpoint rebuilds the per-site dispersion model
    assert torch.count_nonzero(ckpt["state_dict"]["b1"]) == 0
    assert tc["max_epochs"] == 40 and tc["init"] == "mean" and tc["selection"] == "tradeoff"
    assert res["budget"] in (10, 20, 40) and isinstance(res["best_epoch_at_budget_end"], bool)
    assert res["best_epoch_at_budget_end"] == (res["best_epoch"] == res["budget"])
    assert "log1p_avg_counts_10steps" in ckpt["feature_names"]
    assert not any(n.startswith("prev_") for n in ckpt["feature_names"])
    cmp = res["heuristic_comparison"]
    assert cmp["best_heuristic"]["valid_bpr"] == max(h["valid_bpr"] for h in cmp["heuristics"])
    # the heuristics read the data as given (its lag columns), not the history features
    from bpr_topk import make_zero_inflated

    raw = best_heuristic(make_zero_inflated(40, seed=0), 4)
    assert cmp["best_heuristic"]["valid_bpr"] == pytest.approx(raw["valid_bpr"])
    assert cmp["best_heuristic"]["test_bpr"] == pytest.approx(raw["test_bpr"])


def test_early_stopping_budget_extends_until_patience_runs_out():
    """Valid NLL still improving (slowly) when the budget ends: with early stopping the budget
    doubles until `patience` validations pass without improvement, or the cap."""
    train, valid = (
        _split(10.0, 4),
        _split(3.0, 2),
    )  # the valid optimum (rate 3) is passed on the way
    torch.manual_seed(0)
    res = fit(Rates(6, math.log(0.5)), train, valid, DAMLLoss(2, objective="nll"), epochs=20,
              lr=0.05, val_freq=10, progress=False, early_stopping="nll", patience=3,
              max_epochs=2000)  # fmt: skip
    assert res.stopped_epoch is not None and not res.at_budget_end
    assert res.budget > 20 and res.best_epoch < res.stopped_epoch
    best = min(h["valid_nll"] for h in res.history)
    assert next(h for h in res.history if h["epoch"] == res.best_epoch)["valid_nll"] == best


def test_train_arguments_resolve_to_the_history_forecaster_unless_raw_features():
    """The defaults of the forecaster, without training: history features with exp link, mean
    start and no slopes by default; --raw-features the pre-0.5.0 ones; explicit flags win."""
    from bpr_topk._contract import config_from
    from bpr_topk.cli import build_cli
    from bpr_topk.config import TrainRunConfig
    from bpr_topk.runs import load_data, train_config

    parser = build_cli().commands["train"].parser
    base = ["--dataset", "zeroinflated", "--sites", "40"]

    def resolve(*extra):
        run = config_from(parser.parse_args([*base, *extra]), TrainRunConfig)
        loaded = load_data(run, run.model)
        cfg = train_config(run, loaded.features)
        return loaded.features, (cfg.link, cfg.init, cfg.site_slopes), loaded.data.feature_names

    features, cfg, names = resolve()
    assert features == "history" and cfg == ("exp", "mean", False)
    assert "log1p_avg_counts_5steps" in names and "prev_counts_01back" not in names
    features, cfg, names = resolve("--raw-features")
    assert features == "raw" and cfg == ("softplus", "official", True)
    assert "prev_counts_01back" in names and "log1p_avg_counts_5steps" not in names
    assert resolve("--link", "softplus", "--site-slopes")[1] == ("softplus", "mean", True)
    assert resolve("--dataset", "synthetic7")[0] == "raw"  # no features: the mixture model


@pytest.mark.slow
def test_train_cli_defaults_to_the_history_forecaster_and_keeps_the_old_one_behind_a_flag(
    tmp_path, capsys
):
    """0.5.0: on data with feature columns `train` uses the history forecaster by default (history
    features, exp link, mean start, no per-site slopes); --raw-features is the pre-0.5.0 one."""
    import json

    from bpr_topk.cli import main

    base = ["train", "--quiet", "--dataset", "zeroinflated", "--sites", "40", "--K", "4"]
    base += ["--objective", "nll", "--epochs", "2", "--eval-trials", "1", "--eval-samples", "20"]
    runs = {}
    for name, extra in (("default", []), ("raw", ["--raw-features"])):
        assert main([*base, *extra, "--out", str(tmp_path / name)]) == 0
        res = json.loads((tmp_path / name / "results.json").read_text())
        names = torch.load(tmp_path / name / "model.pt", weights_only=True)["feature_names"]
        runs[name] = (res["features"], res["train_config"], names)
    features, tc, names = runs["default"]
    assert features == "history" and "log1p_avg_counts_5steps" in names
    assert (tc["link"], tc["init"], tc["site_slopes"]) == ("exp", "mean", False)
    features, tc, names = runs["raw"]
    assert features == "raw" and "prev_counts_01back" in names
    assert (tc["link"], tc["init"], tc["site_slopes"]) == ("softplus", "official", True)
    # an explicit flag wins over the forecaster's default; the two choices exclude each other
    assert main([*base, "--site-slopes", "--link", "softplus", "--out", str(tmp_path / "x")]) == 0
    tc = json.loads((tmp_path / "x" / "results.json").read_text())["train_config"]
    assert (tc["link"], tc["site_slopes"]) == ("softplus", True)
    capsys.readouterr()
    argv = [*base, "--raw-features", "--history-features", "--out", str(tmp_path / "y")]
    assert main(argv) == 2
    assert "--history-features" in capsys.readouterr().err


def test_history_protocol_extends_a_fine_tune_whose_checkpoint_is_its_last_epoch():
    from bpr_topk import make_zero_inflated, with_site_history_features
    from bpr_topk.experiment import EvalConfig, TrainConfig, history_protocol

    data = with_site_history_features(make_zero_inflated(30, seed=0))
    cfg = TrainConfig(
        epochs=20, max_epochs=40, patience=2, num_score_samples=8, num_perturb_samples=8,
        val_samples=20, val_freq=5,
    )  # fmt: skip
    rows = history_protocol(
        data, 3, 0, cfg, EvalConfig(trials=1, num_samples=20), nll_lrs=(0.1,),
        finetune_lrs=(0.01,), finetune_epochs=10,
    )  # fmt: skip
    assert rows[0]["method"] == "NLL-only" and len(rows) == 5
    for r in rows[1:]:
        assert r["budget"] in (10, 20, 40)
        assert r["at_budget_end"] == (r["best_epoch"] == r["budget"])
        # a run is only left on its last epoch when the 4x cap stopped the doubling
        assert not r["at_budget_end"] or r["budget"] == 40 or r["rule"] != "paper"
    alone = history_protocol(
        data, 3, 0, cfg, EvalConfig(trials=1, num_samples=20), nll_lrs=(0.1,), finetune_lrs=(),
    )  # fmt: skip
    assert alone == rows[:1]  # no fine-tunes: the same NLL-only row, alone


def _panel_without_lags(seed: int = 0, sites: int = 30) -> TopKData:
    """Counts only (one constant feature, no lag columns): the heuristics read the y history."""
    g = torch.Generator().manual_seed(seed)
    rate = torch.rand(sites, generator=g) * 4
    splits = {}
    for i, (s, n) in enumerate((("train", 8), ("valid", 3), ("test", 3))):
        y = torch.poisson(rate.expand(n, sites), generator=g).long()
        t = torch.arange(n, dtype=torch.float32) + 8 * (i > 0) + 3 * (i > 1)
        splits[s] = Split(torch.zeros(n, sites, 1), y, t[:, None].expand(n, sites), t.tolist())
    return TopKData(**splits, site_ids=[str(i) for i in range(sites)], feature_names=["const"])


@pytest.mark.parametrize(("rule", "window"), [("avg", 5), ("last", 1), ("mean", 1)])
def test_offset_model_starts_at_the_heuristic_ranking(rule, window):
    """log μ = log(h + c) + f_θ with f_θ a constant at the start: the mean is e^β0·(h + c), so
    the mean ranking and its BPR are the heuristic's exactly (ties included)."""
    d = make_survey_twin(80, seed=3)
    h = with_heuristic_offset(with_site_history_features(d), rule, window, 0.1, source=d)
    m = make_model("negbin", h, 0, "exp", site_slopes=False)
    assert isinstance(m, NegBinMixedEffects) and m.offset_feature == h.num_features - 1
    assert m.beta.numel() == h.num_features - 1  # the offset has no weight of its own
    m.init_at_mean(h.train.y, h.train.X)
    with torch.no_grad():
        train_mean = m.mean(h.train.X, h.train.time).mean()
        assert float(train_mean) == pytest.approx(float(h.train.y.float().mean()), rel=1e-4)
        for s in ("valid", "test"):
            sp = h.split(s)
            mean = m.mean(sp.X, sp.time)
            heur = heuristic_scores(d, s, rule, window)
            assert torch.allclose(mean, torch.exp(m.beta0) * (heur + 0.1), rtol=1e-5)
            assert nanmean(bpr(sp.y, mean, 8)) == nanmean(bpr(sp.y, heur, 8))
            order = torch.argsort(mean, dim=-1, stable=True)
            assert torch.equal(order, torch.argsort(heur, dim=-1, stable=True))
        # the column is an offset, not a feature: moving every weight leaves its coefficient at 1
        rebuilt = build_model("negbin", m.config())
        rebuilt.load_state_dict(m.state_dict())
        rebuilt.beta.add_(1.0)
        X = h.valid.X.clone()
        X[..., -1] += 0.5
        ratio = rebuilt.mean(X, h.valid.time) / rebuilt.mean(h.valid.X, h.valid.time)
        assert torch.allclose(ratio, torch.full_like(ratio, math.exp(0.5)), rtol=1e-5)
    with pytest.raises(ValueError, match="needs link='exp'"):
        NegBinMixedEffects(3, 2, link="softplus", offset_feature=1)
    with pytest.raises(ValueError, match="offset_feature must be"):
        NegBinMixedEffects(3, 2, offset_feature=2)
    with pytest.raises(ValueError, match="already has an offset"):
        with_heuristic_offset(h, rule, window, 0.1, source=d)


def test_heuristic_offset_uses_past_counts_only():
    """Raising every count of valid step i changes the offset from step i + 1 on and nowhere
    before (train and valid steps <= i): no leakage of the step being forecast."""
    d = _panel_without_lags()
    i = 1
    base = with_heuristic_offset(d, "avg", 3, 0.1)
    y = d.valid.y.clone()
    y[i] += 5
    moved = with_heuristic_offset(replace(d, valid=replace(d.valid, y=y)), "avg", 3, 0.1)
    assert torch.equal(base.train.X, moved.train.X)
    assert torch.equal(base.valid.X[: i + 1], moved.valid.X[: i + 1])
    assert not torch.equal(base.valid.X[i + 1], moved.valid.X[i + 1])
    assert not torch.equal(base.test.X[0], moved.test.X[0])  # within the 3-step window
    want = torch.log(heuristic_scores(d, "valid", "avg", 3) + 0.1)
    assert torch.allclose(base.valid.X[..., -1], want)
    with pytest.raises(ValueError, match="c must be"):
        with_heuristic_offset(d, "avg", 3, 0.0)
