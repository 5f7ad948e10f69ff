"""Selection on validation: early stopping with patience on valid BPR or NLL (restores the best)."""

import json
import math

import pytest
import torch
from bpr_topk import DAMLLoss, ForecastModel, Split, fit
from bpr_topk.cli import main
from torch import nn
from torch.distributions import Poisson


class Rates(ForecastModel):
    """Independent Poisson sites with one shared log-rate (a closed-form NLL optimum)."""

    def __init__(self, num_sites: int, log_rate: float) -> None:
        super().__init__()
        self.num_sites = num_sites
        self.log_rate = nn.Parameter(torch.tensor(log_rate))

    def forward(self, X=None, time=None):
        shape = X.shape[:-1] if X is not None else (self.num_sites,)
        return Poisson(self.log_rate.exp().expand(shape))

    def config(self):
        return {"num_sites": self.num_sites, "log_rate": float(self.log_rate)}


def _split(value: float, steps: int, sites: int = 6) -> Split:
    y = torch.full((steps, sites), value).round().long()
    time = torch.zeros(steps, sites)
    return Split(torch.zeros(steps, sites, 0), y, time, [float(t) for t in range(steps)])


def _fit(monitor, **kw):
    torch.manual_seed(0)
    model = Rates(6, math.log(0.5))
    train, valid = _split(10.0, 4), _split(3.0, 2)  # train optimum rate 10, valid optimum 3
    res = fit(model, train, valid, DAMLLoss(2, objective="nll"), epochs=300, lr=0.05,
              val_freq=5, val_samples=20, progress=False, early_stopping=monitor, **kw)  # fmt: skip
    return model, res


def test_early_stopping_on_nll_stops_after_the_valid_optimum_and_restores_it():
    """The rate climbs from 0.5 towards the train optimum 10, passing the valid optimum 3: the
    valid NLL falls, then rises; with patience 3 training stops 3 validations after its minimum
    and the model holds the best-valid-NLL checkpoint (rate near 3), not the last one."""
    model, res = _fit("nll", patience=3)
    nll = [h["valid_nll"] for h in res.history]
    best = nll.index(min(nll))
    assert res.selection == "early_stopping:nll" and res.best_epoch == res.history[best]["epoch"]
    assert res.stopped_epoch == res.history[-1]["epoch"] == res.best_epoch + 3 * 5
    assert res.stopped_epoch < 300
    assert all(nll[i] >= nll[best] for i in range(best + 1, len(nll)))
    assert torch.equal(model.log_rate.detach(), res.best_state["log_rate"])
    assert math.exp(float(model.log_rate.detach())) == pytest.approx(3.0, rel=0.1)


def test_early_stopping_on_bpr_keeps_the_initial_checkpoint_when_bpr_never_improves():
    """Every site has the same valid count, so every ranking has valid BPR 1: no validation
    improves on epoch 0, training stops after ``patience`` validations and epoch 0 is restored."""
    model, res = _fit("bpr", patience=2)
    assert res.stopped_epoch == 10 and res.best_epoch == 0
    assert float(model.log_rate.detach()) == pytest.approx(math.log(0.5))


def test_without_early_stopping_the_whole_budget_runs():
    _, res = _fit(None)
    assert res.stopped_epoch is None and res.history[-1]["epoch"] == 300
    assert res.selection == "paper"


def test_min_delta_and_bad_arguments():
    _, res = _fit("nll", patience=1, min_delta=1e9)  # nothing counts as an improvement
    assert res.stopped_epoch == 5 and res.best_epoch == 5  # the best value still wins
    for kw, match in [
        ({"early_stopping": "mae"}, "early_stopping must be"),
        ({"early_stopping": "nll", "patience": 0}, "patience must be an integer >= 1"),
        ({"early_stopping": "nll", "min_delta": -1.0}, "min_delta must be >= 0"),
    ]:
        with pytest.raises(ValueError, match=match):
            fit(Rates(6, 0.0), _split(1, 2), _split(1, 1), DAMLLoss(2, objective="nll"),
                epochs=1, progress=False, **kw)  # fmt: skip


@pytest.mark.slow
def test_train_cli_early_stopping_is_recorded(tmp_path):
    argv = ["train", "--quiet", "--dataset", "synthetic7", "--objective", "nll", "--lr", "0.1"]
    argv += ["--epochs", "200", "--val-freq", "5", "--early-stopping", "bpr", "--patience", "2"]
    argv += ["--eval-trials", "1", "--eval-samples", "50", "--out", str(tmp_path)]
    assert main(argv) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["selection"] == "early_stopping:bpr"
    bpr = {h["epoch"]: h["valid_bpr"] for h in res["history"]}
    assert bpr[res["best_epoch"]] == max(bpr.values())
    assert res["stopped_epoch"] == max(bpr) < 200, res["stopped_epoch"]  # stopped early
    later = [v for e, v in bpr.items() if e > res["best_epoch"]]
    assert len(later) == 2 and max(later) <= bpr[res["best_epoch"]]  # patience 2


@pytest.mark.slow
def test_search_chooses_the_trial_on_validation_and_records_it(tmp_path):
    """NLL-only on synthetic7 with learning rates 1e-6 (barely moves) and 0.1: the search keeps
    the trial with the lower valid NLL and writes every trial and the choice to results.json."""
    argv = ["train", "--quiet", "--dataset", "synthetic7", "--objective", "nll", "--epochs", "20"]
    argv += ["--search", "--search-lr", "1e-6,0.1", "--eval-trials", "1", "--eval-samples", "50"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    trials, chosen = res["search"]["trials"], res["search"]["selected"]
    assert [t["lr"] for t in trials] == [1e-6, 0.1]
    assert chosen == min(trials, key=lambda t: t["valid_nll"]) and chosen["lr"] == 0.1
    assert res["train_config"]["lr"] == 0.1  # the chosen settings are the run's config


def test_search_grid_for_daml_and_bad_values(tmp_path, capsys):
    from bpr_topk import make_synthetic7
    from bpr_topk.experiment import TrainConfig, search_train

    data = make_synthetic7(0, 20, 10, 10)
    cfg = TrainConfig(epochs=2, num_score_samples=5, num_perturb_samples=5, val_samples=20)
    grid = {"lr": [0.01, 0.1], "sigma": [0.01], "eps": [1.0, 0.9]}
    _, _, trials, chosen = search_train(data, "truncnorm", 5, "daml", 0, cfg, grid)
    assert len(trials) == 4 and {t["eps"] for t in trials} == {1.0, 0.9}
    best_bpr = max(t["valid_bpr"] for t in trials)  # no reference: the max-BPR trial
    assert trials[chosen]["valid_bpr"] == best_bpr
    argv = ["train", "--quiet", "--dataset", "synthetic7", "--search", "--search-eps", "1.5"]
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert (
        "argument --search-eps: expected comma-separated: each a finite number > 0 and <= 1" in err
    )


def _history(*pairs):
    return [{"epoch": 10.0 * i, "valid_nll": n, "valid_bpr": b} for i, (n, b) in enumerate(pairs)]


def test_select_checkpoint_rules_on_a_hand_made_history():
    """App. C.2 (``paper``), the official score (``code``: nll·nll_weight − λ·bpr) and ``last``."""
    from bpr_topk.train import select_checkpoint

    # epoch 0: warm start; 10: best NLL; 20: best BPR at a higher NLL; 30: NaN BPR (no events)
    hist = _history((2.0, 0.30), (1.9, 0.32), (2.1, 0.50), (1.95, float("nan")))
    assert select_checkpoint(hist, "nll", "paper") == 1
    assert select_checkpoint(hist, "bpr", "paper") == 2
    assert select_checkpoint(hist, "daml", "paper", reference_bpr=0.30) == 1  # best NLL, BPR ok
    assert select_checkpoint(hist, "daml", "paper", reference_bpr=0.40) == 2
    assert select_checkpoint(hist, "daml", "paper", reference_bpr=0.90) == 2  # none: max BPR
    assert select_checkpoint(hist, "daml", "code", lam=3.0) == 2  # 2.1 − 1.5 < 1.9 − 0.96
    assert select_checkpoint(hist, "daml", "code", lam=0.1) == 1
    # an NLL-only run has no BPR term: the official score is its valid NLL, whatever λ says
    assert select_checkpoint(hist, "nll", "code", lam=30.0) == 1
    assert select_checkpoint(hist, "daml", "last") == 3
    with pytest.raises(ValueError, match="selection must be"):
        select_checkpoint(hist, "daml", "best")


def test_compare_with_grids_searches_on_validation_and_records_the_choice():
    from bpr_topk import make_synthetic7
    from bpr_topk.experiment import EvalConfig, TrainConfig, compare

    data = make_synthetic7(0, 20, 10, 10)
    cfg = TrainConfig(epochs=3, num_score_samples=4, num_perturb_samples=4, val_samples=20,
                      val_freq=1, denominator_offset=0.0)  # fmt: skip
    grids = {"nll": {"lr": [1e-6, 0.1]}, "daml": {"lr": [0.01, 0.1], "sigma": [0.01, 0.05]}}
    rows = compare(data, "truncnorm", 5, ["NLL-only", "DAML eps=1.0"], [0], cfg,
                   EvalConfig(trials=1, num_samples=20), grids=grids)  # fmt: skip
    by = {r["method"]: r for r in rows}
    nll, daml = by["NLL-only"], by["DAML eps=1.0"]
    assert [t["lr"] for t in nll["search"]] == [1e-6, 0.1]
    assert nll["selected"] == min(nll["search"], key=lambda t: t["valid_nll"])
    assert len(daml["search"]) == 4 and {t["eps"] for t in daml["search"]} == {1.0}
    assert daml["selected"] in daml["search"]
    assert daml["best_epoch"] == daml["selected"]["best_epoch"]


@pytest.mark.parametrize(
    ("objective", "sigmas", "epss"),
    [("daml", [0.01, 0.05], [1.0, 0.9]), ("bpr", [0.01, 0.05], [1.0]),
     ("nll", [0.01], [1.0]), ("spo+", [0.01], [1.0]), ("pg", [0.01], [1.0])],
)  # fmt: skip
def test_default_search_grid_varies_only_what_the_objective_uses(objective, sigmas, epss):
    """σ only matters with a perturbed top-K (DAML, BPR-only), ε only for DAML."""
    from bpr_topk.config import TrainRunConfig
    from bpr_topk.runs import search_grid

    grid = search_grid(TrainRunConfig(objective=objective, lr=0.03, sigma=0.01, eps=1.0))
    assert grid["lr"] == pytest.approx([0.01, 0.03, 0.09])
    assert grid["sigma"] == pytest.approx(sigmas) and grid["eps"] == pytest.approx(epss)
