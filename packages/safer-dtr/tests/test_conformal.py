import numpy as np
import pytest
import safer_dtr as S
from hypothesis import given
from hypothesis import strategies as st
from safer_dtr.conformal import LinearRegressor, NotFittedError


def test_pvalue_hand_example_no_tie():
    kh_cal = [0.1, 0.2, 0.3, 0.4]
    k_cal = [0.5, 0.05, 0.6, 0.7]
    # nulls (κ >= 0.3): indices 0, 2, 3; two have κ̂ < 0.35, none ties -> (2 + U) / 5
    for u in (0.0, 0.37, 1.0):
        p = S.conformal_pvalues(kh_cal, k_cal, [0.35], 0.3, u=[u])
        assert p[0] == pytest.approx((2 + u) / 5)


def test_pvalue_hand_example_with_tie():
    p = S.conformal_pvalues([0.1, 0.2, 0.3, 0.4], [0.5, 0.05, 0.6, 0.7], [0.3], 0.3, u=[0.25])
    assert p[0] == pytest.approx((1 + 2 * 0.25) / 5)


def test_pvalue_ignores_non_null_calibration_points():
    p = S.conformal_pvalues([0.0, 0.1, 0.2], [0.0, 0.0, 0.0], [5.0], 0.3, u=[0.5])
    assert p[0] == pytest.approx(0.5 / 4)


def test_pvalue_rejects_bad_input():
    with pytest.raises(ValueError, match="differ in length"):
        S.conformal_pvalues([0.1, 0.2], [0.1], [0.1], 0.3)
    with pytest.raises(ValueError, match="NaN"):
        S.conformal_pvalues([np.nan], [0.1], [0.1], 0.3)
    with pytest.raises(ValueError, match="at least one calibration"):
        S.conformal_pvalues([], [], [0.1], 0.3)


def _bh_reference(p, alpha):
    from statsmodels.stats.multitest import multipletests

    return multipletests(p, alpha=alpha, method="fdr_bh")[0]


@pytest.mark.slow
@pytest.mark.reference
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=40),
    st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.5, 0.9]),
)
def test_bh_equals_statsmodels(p, alpha):
    p = np.array(p)
    np.testing.assert_array_equal(S.bh_select(p, alpha), _bh_reference(p, alpha))


@pytest.mark.reference
@given(st.lists(st.sampled_from([0.0, 0.01, 0.02, 0.05, 0.1, 0.3, 1.0]), min_size=1, max_size=30))
def test_bh_equals_scipy_adjusted_on_ties(p):
    scipy_stats = pytest.importorskip("scipy.stats")
    p = np.array(p)
    for alpha in (0.05, 0.1, 0.25):
        adjusted = scipy_stats.false_discovery_control(p, method="bh")
        np.testing.assert_array_equal(S.bh_select(p, alpha), adjusted <= alpha)


def test_bh_boundaries():
    assert not S.bh_select([0.5, 0.9, 0.7], 0.1).any()  # k = 0: empty
    assert S.bh_select([0.2, 0.3, 0.5], 0.5).all()  # alpha >= max p: all
    assert S.bh_select([0.05], 0.05).tolist() == [True]  # m = 1, boundary is <=
    assert S.bh_select([0.0500001], 0.05).tolist() == [False]
    # p_(2) = 0.1 <= 0.1 * 2 / 2 selects both although p_(1) > 0.1 / 2
    assert S.bh_select([0.1, 0.1], 0.1).tolist() == [True, True]
    assert S.bh_select([], 0.1).shape == (0,)
    with pytest.raises(ValueError, match="alpha"):
        S.bh_select([0.1], 0.0)


def _exchangeable(rng, n, d=3, noise=0.1):
    X = rng.normal(size=(n, d))
    kappa = 0.3 + 0.15 * X[:, 0] - 0.1 * X[:, 1] + noise * rng.normal(size=n)
    return X, kappa


def test_selective_super_uniformity():
    """P(p_j <= t and H_j true) <= t (+ 3 MC s.e.): the property the FDR proof rests on."""
    rng = np.random.default_rng(0)
    X_fit, k_fit = _exchangeable(rng, 200)
    model = LinearRegressor(1.0).fit(X_fit, k_fit)
    c, reps, n, m = 0.3, 400, 60, 40
    hits = {t: [] for t in (0.05, 0.1, 0.2)}
    for _ in range(reps):
        X, k = _exchangeable(rng, n + m)
        kh = model.predict(X)
        p = S.conformal_pvalues(kh[:n], k[:n], kh[n:], c, rng=rng)
        null = k[n:] >= c
        for t in hits:
            hits[t].append(np.mean((p <= t) & null))
    for t, values in hits.items():
        values = np.array(values)
        se = values.std(ddof=1) / np.sqrt(reps)
        assert values.mean() <= t + 3 * se, (t, values.mean(), se)


@pytest.mark.parametrize("c", [0.2, 0.3, 0.45])
def test_fdr_control_monte_carlo(c):
    """Mean FDP over 500 exchangeable draws <= alpha + 3 s.e. (Thm. 5.1). The tolerance is the Monte
    Carlo error of the mean FDP: 3 s.e. makes a false alarm of a correct method < 0.2 % per check."""
    rng = np.random.default_rng(1)
    X_fit, k_fit = _exchangeable(rng, 150)
    alphas = (0.05, 0.1, 0.2)
    fdp = {a: [] for a in alphas}
    power = {a: [] for a in alphas}
    for _ in range(500):
        X, k = _exchangeable(rng, 150)
        sel = S.ConformalSelector(alpha=0.1, c=c, random_state=rng).fit(X_fit, k_fit)
        with _nowarn():
            sel.calibrate(X[:100], k[:100])
        p = sel.pvalues(X[100:])
        for a in alphas:
            m = S.selection_metrics(S.bh_select(p, a), k[100:], c)
            fdp[a].append(m["fdp"])
            power[a].append(m["power"])
    for a in alphas:
        v = np.array(fdp[a])
        assert v.mean() <= a + 3 * v.std(ddof=1) / np.sqrt(len(v)), (a, v.mean())
    means = [np.mean(power[a]) for a in alphas]
    assert means == sorted(means)  # power non-decreasing in alpha on average


class _nowarn:
    def __enter__(self):
        import warnings

        self._c = warnings.catch_warnings()
        self._c.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        self._c.__exit__(*exc)


def test_uninformative_regressor_keeps_fdr_and_has_no_power():
    rng = np.random.default_rng(2)
    fdps, powers = [], []
    for _ in range(300):
        k = rng.uniform(0, 1, 150)
        noise = rng.normal(size=(150, 2))  # independent of κ
        sel = S.ConformalSelector(alpha=0.05, c=0.5, random_state=rng).fit(noise[:50], k[:50])
        sel.calibrate(noise[50:100], k[50:100])
        m = S.selection_metrics(sel.select(noise[100:]), k[100:], 0.5)
        fdps.append(m["fdp"])
        powers.append(m["power"])
    assert np.mean(fdps) <= 0.05 + 3 * np.std(fdps, ddof=1) / np.sqrt(300)
    assert np.mean(powers) < 0.05


def test_selector_lifecycle_order_is_enforced():
    X = np.random.default_rng(0).normal(size=(20, 2))
    k = X[:, 0]
    sel = S.ConformalSelector(c=0.0)
    with pytest.raises(NotFittedError, match="call fit before calibrate"):
        sel.calibrate(X, k)
    with pytest.raises(NotFittedError, match="call fit and calibrate"):
        sel.select(X)
    sel.fit(X, k)
    with pytest.raises(NotFittedError, match="call fit and calibrate"):
        sel.select(X)
    sel.calibrate(X, k)
    assert sel.select(X).shape == (20,)
    assert sel.pvalues_.shape == (20,) and sel.selected_.dtype == bool
    sel.fit(X, k)  # refitting forgets the calibration
    with pytest.raises(NotFittedError):
        sel.select(X)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"alpha": 0.0}, "'alpha' parameter"),
        ({"alpha": 1.5}, "'alpha' parameter"),
        ({"c": float("nan")}, "'c' parameter"),
        ({"regressor": "forest"}, "'regressor' parameter"),
        ({"ridge_alpha": -1.0}, "'ridge_alpha' parameter"),
    ],
)
def test_selector_validates_parameters_at_fit(params, match):
    sel = S.ConformalSelector(**params)  # __init__ only stores
    assert sel.get_params()[next(iter(params))] is not None
    with pytest.raises(ValueError, match=match):
        sel.fit(np.zeros((4, 2)), np.zeros(4))


def test_selector_shape_errors_and_params():
    X = np.random.default_rng(0).normal(size=(30, 3))
    sel = S.ConformalSelector(c=0.0).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="fitted on 3"):
        sel.calibrate(X[:, :2], X[:, 0])
    with pytest.raises(ValueError, match="differ in length"):
        sel.calibrate(X, X[:5, 0])
    with pytest.raises(ValueError, match="2-D"):
        sel.calibrate(X[:, 0], X[:, 0])
    assert sel.set_params(alpha=0.2).alpha == 0.2
    with pytest.raises(ValueError, match="invalid parameter"):
        sel.set_params(beta=1)
    assert "ConformalSelector(alpha=0.2" in repr(sel)


def test_selector_warns_without_null_calibration_points():
    X = np.random.default_rng(0).normal(size=(30, 2))
    sel = S.ConformalSelector(c=10.0).fit(X, X[:, 0])
    with pytest.warns(RuntimeWarning, match="selects everything"):
        sel.calibrate(X, X[:, 0])
    assert sel.select(X).all()  # p <= 1/(n+1) everywhere


def test_identity_regressor_uses_scores_directly():
    k = np.linspace(0, 1, 50)
    sel = S.ConformalSelector(c=0.5, regressor="identity", random_state=0).fit(k, k)
    sel.calibrate(k, k)
    np.testing.assert_array_equal(sel.predict_kappa(k), k)
    mask = sel.select(np.array([0.01, 0.99]))
    assert mask.tolist() == [True, False]


@pytest.mark.reference
def test_linear_regressor_equals_sklearn_ridge_on_standardised_features():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5)) * [1, 2, 3, 4, 5]
    y = X @ rng.normal(size=5) + rng.normal(size=80)
    ours = LinearRegressor(1.0).fit(X, y).predict(X)
    ref = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(X, y).predict(X)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-10)
    assert sklearn.__version__


def test_repeated_selection_shapes_and_protocols():
    rng = np.random.default_rng(0)
    X, k = _exchangeable(rng, 200)
    res = S.repeated_selection(X, k, c=0.3, alphas=[0.1, 0.2], reps=20, seed=0)
    assert res["fdp"].shape == (20, 2) and res["protocol"] == "pooled"
    res2 = S.repeated_selection(X, k, c=0.3, alphas=[0.1], reps=5, seed=0, test=np.arange(50))
    assert res2["protocol"] == "fixed-test" and res2["power"].shape == (5, 1)
    assert np.all(res["n_sel"][:, 0] <= res["n_sel"][:, 1])  # BH selection grows with alpha
