"""Training loop, metrics, baselines and the directional-sensitivity measures."""

import numpy as np
import pytest
import torch
from conftest import small_tree
from phynfp import (
    Climatology,
    ExperimentConfig,
    GraphBaseline,
    Persistence,
    PhyNFP,
    TrainConfig,
    evaluate,
    fit,
    make_river,
    nse,
    perturbation_response,
    resolve_layers,
    run_experiment,
)


@pytest.fixture(scope="module")
def tiny():
    return make_river(12, 2000, train_stride=4)


def test_nse_closed_form():
    obs = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    assert np.allclose(nse(obs, obs), 1.0)
    assert np.allclose(nse(np.full_like(obs, obs.mean(0)), obs), 0.0)
    pred = obs + np.array([[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0]])
    assert nse(pred, obs)[0] == pytest.approx(1 - 2 / 2)
    assert nse(obs + 1, obs, "train_std", np.array([2.0, 1.0])) == pytest.approx([1 - 1 / 4, 0.0])


def test_persistence_returns_last_observed_target_and_climatology_zero():
    x = torch.randn(5, 4, 24, 3)
    assert torch.equal(Persistence(24, 3)(x, None).squeeze(-1), x[..., -1, 0])
    assert torch.equal(Persistence(24, 3)(x.flatten(-2), None).squeeze(-1), x[..., -1, 0])
    assert torch.equal(Climatology()(x, None), torch.zeros(5, 4, 1))


def test_fit_improves_validation_mse_and_restores_best_state(tiny):
    torch.manual_seed(0)
    model = PhyNFP(tiny.window * tiny.num_features, tiny.edge_dim, 8, 3)
    before = evaluate(model, tiny, "val")["mse"]
    result = fit(model, tiny, TrainConfig(epochs=4, max_batches=8))
    assert result.best_val_mse < before
    assert evaluate(model, tiny, "val")["mse"] == pytest.approx(result.best_val_mse, rel=1e-5)
    assert result.best_epoch >= 1 and len(result.epoch_times) == 4


def test_fit_is_deterministic_under_a_seed(tiny):
    def run():
        torch.manual_seed(1)
        model = GraphBaseline("gcn", tiny.window * tiny.num_features, tiny.edge_dim, 8, 2)
        fit(model, tiny, TrainConfig(epochs=2, max_batches=4, seed=3))
        return evaluate(model, tiny)["mse"]

    assert run() == run()


@pytest.mark.parametrize("kind", ["mlp", "gcn", "gat", "sage"])
def test_symmetric_baselines_ignore_edge_direction_exactly(kind):
    ei, n = small_tree()
    attr = torch.randn(ei.size(1), 3)
    torch.manual_seed(0)
    model = GraphBaseline(kind, 12, 3, 8, 2)
    x = torch.randn(3, n, 6, 2)
    with torch.no_grad():
        assert torch.equal(model(x, ei, attr), model(x, ei.flip(0), attr))


def test_dirgnn_depends_on_edge_direction():
    ei, n = small_tree()
    torch.manual_seed(0)
    model = GraphBaseline("dirgnn", 12, 3, 8, 2)
    x = torch.randn(n, 6, 2)
    with torch.no_grad():
        assert not torch.allclose(model(x, ei), model(x, ei.flip(0)))


def test_gat_batched_equals_per_sample():
    ei, n = small_tree()
    attr = torch.randn(ei.size(1), 3)
    torch.manual_seed(0)
    model = GraphBaseline("gat", 12, 3, 8, 2)
    x = torch.randn(3, n, 6, 2)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, ei, attr), torch.stack([model(xi, ei, attr) for xi in x])
        )


def test_perturbation_leakage_is_zero_for_phynfp_and_positive_for_symmetric_gcn(tiny):
    torch.manual_seed(0)
    phy = PhyNFP(tiny.window * tiny.num_features, tiny.edge_dim, 8, 3)
    gcn = GraphBaseline("gcn", tiny.window * tiny.num_features, tiny.edge_dim, 8, 3)
    a = perturbation_response(phy, tiny, max_windows=16)
    b = perturbation_response(gcn, tiny, max_windows=16)
    assert a["leakage"] == 0.0 and a["response_self"] > 0
    assert b["leakage"] > 0


def test_resolve_layers_caps_and_handles_cycles(tiny):
    assert resolve_layers(tiny, "auto", 16)[0] == resolve_layers(tiny, "auto", 99)[0] <= 16
    assert resolve_layers(tiny, "auto", 1) == (1, resolve_layers(tiny, "auto", 1)[1])
    cyclic = tiny.with_headwater_reverse_edges()
    layers, rule = resolve_layers(cyclic, "auto", 5)
    assert layers == 5 and "cycles" in rule
    assert resolve_layers(cyclic, 7) == (7, "given")


def test_experiment_reports_gaps_and_invariances(tiny):
    cfg = ExperimentConfig(
        models=["persistence", "mlp", "gcn", "phynfp"],
        seeds=[0],
        hidden=8,
        train=TrainConfig(epochs=2, max_batches=4),
        perturb_windows=16,
    )
    results, models = run_experiment(tiny, cfg)
    m = results["models"]
    assert set(models) == {"persistence", "mlp", "gcn", "phynfp"}
    assert m["mlp"]["runs"][0]["g_train"] == 0.0 and m["gcn"]["runs"][0]["g_train"] == 0.0
    assert m["mlp"]["runs"][0]["reversed"]["mse"] == m["mlp"]["runs"][0]["forward"]["mse"]
    assert m["gcn"]["runs"][0]["g_flip"] == 0.0
    assert m["phynfp"]["runs"][0]["g_flip"] != 0.0
    assert m["phynfp"]["summary"]["leakage"]["mean"] == 0.0
    assert m["gcn"]["summary"]["epoch_time_ratio_to_gcn"] == pytest.approx(1.0)


def test_fit_raises_when_no_batch_trains_or_every_epoch_diverges(tiny):
    from phynfp import TrainingFailed

    torch.manual_seed(0)
    model = GraphBaseline("mlp", tiny.window * tiny.num_features, tiny.edge_dim, 8, 1)
    with pytest.raises(TrainingFailed, match="non-finite"):
        fit(model, tiny, TrainConfig(epochs=2, max_batches=3, lr=1e30))
    # A NaN in every target: every loss is non-finite, no optimiser step is taken.
    from dataclasses import replace

    g = tiny.groups[0]
    bad = replace(tiny, groups=[replace(g, target=torch.full_like(g.target, float("nan")))])
    with pytest.raises(TrainingFailed, match="no batch trained"):
        fit(model, bad, TrainConfig(epochs=1, max_batches=2))
