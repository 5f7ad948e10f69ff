import numpy as np
import pytest
import safer_dtr as S
import torch
from safer_dtr import pipeline

TINY = {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 16, "epochs_stage1": 2,
        "epochs_refine": 2, "epochs_finetune": 1, "batch_size": 32}  # fmt: skip


def test_refinement_sees_only_training_survivors(small_cohort, monkeypatch):
    _, _, prepared = small_cohort
    seen = []
    original = pipeline.SAFER._fit_refiner

    def spy(self, data, survivors, rng, tick):
        seen.append(np.asarray(survivors).copy())
        return original(self, data, survivors, rng, tick)

    monkeypatch.setattr(pipeline.SAFER, "_fit_refiner", spy)
    S.SAFER(S.TrainConfig(**TINY), prepared.note_dim).fit(prepared, seed=0)
    (idx,) = seen
    assert np.all(prepared.tensors.died[idx] == 0)
    assert set(idx) <= set(prepared.split["train"])
    train = prepared.split["train"]
    assert len(idx) == int((prepared.tensors.died[train] == 0).sum())


def test_fit_is_deterministic_and_state_dict_round_trips(small_cohort):
    _, _, prepared = small_cohort
    a = S.SAFER(S.TrainConfig(**TINY), prepared.note_dim).fit(prepared, seed=7)
    b = S.SAFER(S.TrainConfig(**TINY), prepared.note_dim).fit(prepared, seed=7)
    test = prepared.split["test"]
    pa, pb = a.predict(prepared.tensors, test), b.predict(prepared.tensors, test)
    torch.testing.assert_close(pa["logits"], pb["logits"], rtol=0, atol=0)
    c = S.SAFER.from_state_dict(a.state_dict())
    pc = c.predict(prepared.tensors, test)
    for k in ("logits", "h", "kappa", "kappa_norm"):
        torch.testing.assert_close(pc[k], pa[k], rtol=0, atol=0)
    assert (pa["kappa"] >= 0).all() and pa["kappa_norm"].min() >= 0 and pa["kappa_norm"].max() <= 1
    f = a.stage1_net()
    assert not torch.equal(
        f.state_dict()["classifier.3.weight"], a.net.state_dict()["classifier.3.weight"]
    )
    with pytest.raises(ValueError, match="not a SAFER checkpoint"):
        S.SAFER.from_state_dict({"net": {}})


def test_global_rng_untouched_by_fit(small_cohort):
    _, _, prepared = small_cohort
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)
    S.SAFER(S.TrainConfig(**{**TINY, "epochs_stage1": 1, "epochs_refine": 1, "epochs_finetune": 0}),
            prepared.note_dim).fit(prepared, seed=0)  # fmt: skip
    torch.testing.assert_close(torch.rand(3), expected)


def test_train_config_validation():
    with pytest.raises(ValueError, match="risk_mode"):
        S.TrainConfig(risk_mode="x")
    with pytest.raises(ValueError, match="batch_size"):
        S.TrainConfig(batch_size=0)
    q = S.TrainConfig.quick()
    assert (q.d_model, q.epochs_stage1, q.epochs_refine, q.epochs_finetune) == (64, 10, 10, 5)
    assert S.TrainConfig.from_dict(q.to_dict()) == q


def test_run_experiment_small_end_to_end(small_cohort):
    gen, _, prepared = small_cohort
    cfg = S.TrainConfig(**TINY)
    res, _ = S.run_experiment(prepared, cfg, seed=0, oracle=gen, reps=10, mortality_epochs=1,
                              methods=["SAFER", "SAFER-F", "LogReg", "majority class", "carry-forward",
                                       "random"], baseline_epochs=1, cs=(0.3,), alphas=(0.1, 0.5))  # fmt: skip
    assert set(res["metrics"]) == {
        "SAFER",
        "SAFER-F",
        "LogReg",
        "majority class",
        "carry-forward",
        "random",
    }
    sel = res["selection"]["0.3"]
    assert len(sel["fdr"]["mean"]) == 2 and sel["reps"] == 10
    m = res["mortality"]
    assert 0 <= m["methods"]["SAFER"]["oracle_cf"] <= 1
    assert res["metrics"]["majority class"]["survivors"]["macro_auc"] == 0.5
    with pytest.raises(ValueError, match="unknown method"):
        S.run_experiment(prepared, cfg, methods=["SAFER", "XGBoost"])
