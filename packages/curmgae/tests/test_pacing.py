"""0.4.0: the curriculum finishes within the stated fraction of the budget, model selection only
looks after it, the held-out difficulty measurer, the chosen/unchosen diagnostic and the positive
control's graph."""

import math

import pytest
import torch
from curmgae import CurMGAE, CurMGAEConfig, SelfPacedEdgeScheduler, make_noisy_sbm, split_edges
from curmgae.config import LAMBDA_PACES
from curmgae.masking import expand_units
from curmgae.scheduler import chosen_vs_unchosen, residuals


@pytest.mark.parametrize("pace", LAMBDA_PACES)
@pytest.mark.parametrize("update_every", [1, 3])
def test_every_pace_reaches_the_full_mask_schedule_by_the_end_of_the_ramp(pace, update_every):
    """Whatever the lambda rule (even one that stalls or one still far from 1), from the first S-step
    at or after floor(ramp_frac*T) the mask holds exactly cap = floor(mask_ratio*M) edges, and not
    before the ramp ends unless lambda got there."""
    M, T = 400, 30
    gen = torch.Generator().manual_seed(0)
    sched = SelfPacedEdgeScheduler(
        M, lambda_pace=pace, total_epochs=T, ramp_frac=0.5, update_every=update_every
    )
    end = sched.curriculum_end
    assert end >= math.floor(0.5 * T) and (end - 1) % update_every == 0
    assert end - math.floor(0.5 * T) < update_every
    for epoch in range(1, T + 1, update_every):
        R = 0.5 * torch.rand(M, generator=gen) + 0.5 / epoch  # residuals that fall with training
        mask = sched.step(R, epoch)
        entry = sched.trace[-1]
        if epoch >= end:
            assert entry["finished"] and int(mask.sum()) == sched.cap == math.floor(0.7 * M)
        else:
            assert not entry["finished"] and entry["K_t"] <= sched.cap
    # the schedule of 0.3.0's default starts small: the curriculum is not full from the first step
    assert sched.trace[0]["K_t"] < sched.cap or pace in ("additive", "linear")


def test_selection_and_early_stopping_only_look_after_the_curriculum(tiny_split):
    cfg = CurMGAEConfig(epochs=8, hidden=16, decode_channels=16, patience=1, ramp_frac=0.5)
    model = CurMGAE.from_config(tiny_split.num_features, cfg)
    hist = model.fit(tiny_split, seed=0)
    start = model.scheduler.curriculum_end
    assert hist.selection_start == start == 4
    assert hist.best_epoch >= start and hist.stopped_epoch >= start + 1
    assert len(hist.val_auc) == hist.stopped_epoch  # validated every epoch, before start too
    finished = [e for e in hist.trace if e["epoch"] >= start]
    assert finished and all(e["masked_fraction"] == e["cap"] / e["num_edges"] for e in finished)
    # without the window, patience 1 may stop before the curriculum has finished
    off = CurMGAE.from_config(
        tiny_split.num_features,
        CurMGAEConfig(**{**cfg.to_dict(), "select_after_curriculum": False}),
    )
    h2 = off.fit(tiny_split, epochs=3, seed=0)
    assert h2.selection_start == 1


def test_baselines_select_from_the_first_epoch(tiny_split):
    cfg = CurMGAEConfig(masking="random", epochs=4, hidden=16, decode_channels=16)
    hist = CurMGAE.from_config(tiny_split.num_features, cfg).fit(tiny_split, seed=0)
    assert hist.selection_start == 1


def test_held_out_residuals_score_each_edge_with_its_fold_hidden(tiny_split):
    cfg = CurMGAEConfig(hidden=16, decode_channels=16, difficulty="held_out", held_out_folds=3)
    model = CurMGAE.from_config(tiny_split.num_features, cfg)
    model.fit(tiny_split, epochs=30, seed=0)
    graph = model.training_graph(tiny_split)
    units, M = graph.units, graph.units.size(1)
    model.generator.manual_seed(5)
    R = model.edge_residuals(graph.x, graph.edge_index, units)
    model.generator.manual_seed(5)
    fold = torch.randperm(M, generator=model.generator) % 3
    for f in range(3):
        out = fold == f
        visible = expand_units(units[:, ~out], "undirected")
        want = residuals(model.score(graph.x, visible, units[:, out]), "abs")
        torch.testing.assert_close(R[out], want)
    model.config.difficulty = "full"  # same weights, the full-graph measurer
    R_full = model.edge_residuals(graph.x, graph.edge_index, units)
    # an edge hidden from message passing is harder to reconstruct than the same edge visible
    assert float(R.mean()) > float(R_full.mean())


def test_chosen_vs_unchosen_closed_form():
    R = torch.arange(10, dtype=torch.float)
    chosen = torch.zeros(10, dtype=torch.bool)
    chosen[:3] = True
    d = chosen_vs_unchosen(R, chosen)
    assert d["rank_chosen"] == pytest.approx((0 + 1 + 2) / 3 / 9)
    assert d["median_chosen"] == pytest.approx(1.0)
    assert d["median_unchosen"] == pytest.approx(6.0)
    assert d["q10_chosen"] == pytest.approx(0.2) and d["q90_unchosen"] == pytest.approx(8.4)
    none = chosen_vs_unchosen(R, torch.zeros(10, dtype=torch.bool))
    assert none["rank_chosen"] is None and none["median_chosen"] is None


def test_random_ties_choose_a_uniform_sample_of_the_admitted_set():
    """With every edge admitted (lambda above every residual), tie_break='random' gives chosen
    edges of mean rank about 0.5; tie_break='residual' gives the easiest ones (rank about 0.25)."""
    M = 2000
    R = torch.rand(M, generator=torch.Generator().manual_seed(1))
    ranks = {}
    for tie in ("random", "residual"):
        s = SelfPacedEdgeScheduler(M, lambda_pace="rcl_inverse", tie_break=tie, total_epochs=10)
        s.step(R, epoch=10)
        ranks[tie] = s.trace[-1]["rank_chosen"]
    assert abs(ranks["random"] - 0.5) < 0.03
    assert ranks["residual"] == pytest.approx((math.floor(0.35 * M) - 1) / 2 / (M - 1), abs=1e-6)


@pytest.mark.parametrize("bad", [{"difficulty": "masked"}, {"held_out_folds": 1}])
def test_config_rejects_bad_difficulty_settings(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        CurMGAEConfig(**bad)


def test_noisy_sbm_plants_the_stated_noise():
    g = make_noisy_sbm(n_classes=5, n_per_class=30, n_edges=600, noise=0.25, seed=3)
    und = g.edge_index[:, g.edge_index[0] < g.edge_index[1]]
    diff = g.edge_difficulty[g.edge_index[0] < g.edge_index[1]]
    assert und.size(1) == 600 and int((diff == 2).sum()) == 150
    same = g.y[und[0]] == g.y[und[1]]
    assert bool(same[diff == 0].all())  # clean edges are intra-class
    assert float(same[diff == 2].float().mean()) < 0.5  # noise edges mostly are not
    s = split_edges(g, seed=0)
    assert s.test_difficulty.numel() == s.test_pos.size(1)
    with pytest.raises(ValueError, match="noise"):
        make_noisy_sbm(noise=1.0)
