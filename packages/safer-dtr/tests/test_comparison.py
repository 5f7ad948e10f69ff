import math

import numpy as np
import pytest
import safer_dtr as S
from safer_dtr.comparison import (
    ComparisonConfig,
    paired_difference,
    per_class_auc,
    pooled_fdr_test,
    run_comparison_seed,
    select_finetune,
    t_quantile_975,
)
from safer_dtr.conformal import fdr_monte_carlo_test


def test_t_quantile_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 5, 9, 19, 30, 31, 45, 100, 1000):
        assert abs(t_quantile_975(df) - stats.t.ppf(0.975, df)) < 1e-3, df
    with pytest.raises(ValueError, match="df"):
        t_quantile_975(0)


def test_paired_difference_interval_and_verdicts():
    d = paired_difference([3.0, 4.0, 5.0], [2.0, 2.0, 2.0])  # differences 1, 2, 3
    assert d["mean"] == pytest.approx(2.0) and d["sd"] == pytest.approx(1.0)
    half = 4.303 / math.sqrt(3)  # 2.48 > 2: the interval contains 0
    assert d["ci95"] == pytest.approx([2.0 - half, 2.0 + half])
    assert d["verdict"] == "tie" and d["wins"] == 3
    assert paired_difference([4.0, 4.5, 5.0], [2.0, 2.0, 2.0])["verdict"] == "ahead"
    assert paired_difference([1.0, -1.0, 0.5], [0.0, 0.0, 0.0])["verdict"] == "tie"
    assert paired_difference([-1.0, -1.2, -0.9], [0.0, 0.0, 0.0])["verdict"] == "behind"
    with pytest.raises(ValueError, match="at least 2"):
        paired_difference([1.0], [0.0])


def test_monte_carlo_fdr_test():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    fdp = rng.random(400) * 0.2
    t = fdr_monte_carlo_test(fdp, 0.1)
    se = fdp.std(ddof=1) / math.sqrt(400)
    assert t["se"] == pytest.approx(se)
    assert t["p_value"] == pytest.approx(stats.norm.sf((fdp.mean() - 0.1) / se))
    assert fdr_monte_carlo_test(np.full(10, 0.3), 0.1)["p_value"] == 0.0
    # pooling per-seed summaries equals the test on all replicates together
    parts = [rng.random(50) * 0.3, rng.random(50) * 0.1, rng.random(50) * 0.2]
    cells = [{"fdr_mean": [p.mean()], "fdr_sd": [p.std(ddof=1)], "reps": 50} for p in parts]
    pooled = pooled_fdr_test(cells, 0, 0.1)
    direct = fdr_monte_carlo_test(np.concatenate(parts), 0.1)
    assert pooled["mean"] == pytest.approx(direct["mean"])
    assert pooled["se"] == pytest.approx(direct["se"])
    assert pooled["p_value"] == pytest.approx(direct["p_value"])


def test_quantile_threshold_fixes_the_null_fraction_and_controls_fdr():
    rng = np.random.default_rng(1)
    n = 600
    H = rng.normal(size=(n, 3))
    kappa = 1 / (1 + np.exp(-(H[:, 0] + 0.5 * rng.normal(size=n))))
    alphas = (0.1, 0.2)
    for q in (0.3, 0.7):
        res = S.repeated_selection(H, kappa, c_quantile=q, alphas=alphas, reps=200, seed=2)
        assert abs(res["null_fraction"].mean() - (1 - q)) < 0.03
        assert res["c_values"].std() > 0  # c is set per repetition from the κ̂-fit part
        for a, alpha in enumerate(alphas):
            t = fdr_monte_carlo_test(res["fdp"][:, a], alpha)
            assert t["mean"] <= alpha + 3 * t["se"]
    with pytest.raises(ValueError, match="exactly one"):
        S.repeated_selection(H, kappa, alphas=alphas, reps=2)
    with pytest.raises(ValueError, match="exactly one"):
        S.repeated_selection(H, kappa, c=0.3, c_quantile=0.5, alphas=alphas, reps=2)
    with pytest.raises(ValueError, match="c_quantile"):
        S.repeated_selection(H, kappa, c_quantile=1.0, alphas=alphas, reps=2)


def test_comparison_config_errors():
    with pytest.raises(ValueError, match="methods"):
        ComparisonConfig(methods=("SAFER", "TAHDNet"))
    with pytest.raises(ValueError, match="SAFER"):
        ComparisonConfig(methods=("LSTM",))
    with pytest.raises(ValueError, match="n_stays"):
        ComparisonConfig(n_stays=10)
    with pytest.raises(ValueError, match="gamma"):
        ComparisonConfig(train={"gamma": -1.0})


def test_per_class_auc_is_the_macro_auc_by_class():
    from safer_dtr.metrics import macro_auc, roc_auc

    rng = np.random.default_rng(0)
    y = rng.integers(0, 6, 300)
    died = (rng.random(300) < 0.2).astype(int)
    y[died == 1] = 7  # a class present only among the deceased counts as absent
    p = rng.dirichlet(np.ones(25), 300)
    res = per_class_auc(y, died, {"m": p})
    keep = died == 0
    assert res["positives"] == np.bincount(y[keep], minlength=25).tolist()
    aucs = res["auc"]["m"]
    assert aucs[7] is None and aucs[10] is None
    assert aucs[3] == pytest.approx(roc_auc(y[keep] == 3, p[keep][:, 3]))
    present = [a for a in aucs if a is not None]
    assert len(present) == 6
    assert np.mean(present) == pytest.approx(macro_auc(y[keep], p[keep])[0])


@pytest.mark.slow
def test_comparison_seed_and_finetune_selection_smoke():
    train = {"d_model": 16, "n_heads": 2, "epochs_stage1": 1, "epochs_refine": 1,
             "epochs_finetune": 1, "batch_size": 64}  # fmt: skip
    cfg = ComparisonConfig(n_stays=200, train=train, baseline_epochs=1, fdr_reps=3,
                           fdr_alphas=(0.1, 0.2), fdr_quantiles=(0.5,), fdr_cs=(0.3,))  # fmt: skip
    res = run_comparison_seed(cfg, 0)
    assert set(res["metrics"]) == {*cfg.methods, "SAFER (notes ablated)"}
    assert set(res["selection"]["cells"]) == {"q0.5", "c0.3"}
    pcs = res["per_class_survivors"]
    assert set(pcs["auc"]) == {
        "SAFER",
        "SAFER-F",
        "SAFER (notes ablated)",
        "SAFER-F (notes ablated)",
    }
    aucs = [a for a in pcs["auc"]["SAFER"] if a is not None]
    assert np.mean(aucs) == pytest.approx(res["metrics"]["SAFER"]["survivors"]["macro_auc"])
    assert res["split_sizes"]["test"] == 60
    sel = select_finetune(cfg, [7], [{"lr_finetune": 1e-5, "epochs_finetune": 1},
                                     {"lr_finetune": 1e-3, "epochs_finetune": 1}])  # fmt: skip
    assert sel.chosen in sel.candidates and len(sel.scores[0]) == 1
