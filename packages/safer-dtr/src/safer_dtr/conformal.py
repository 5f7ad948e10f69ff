"""Conformal selection with Benjamini–Hochberg FDR control (paper Sec. 5, Eq. 8, Thm. 5.1, App. A.2).

This is conformal *selection* (Jin & Candès 2023, "Selection by prediction with conformal p-values",
JMLR): for each test patient j the null hypothesis is H_j: κ_{n+j} ≥ c ("uncertain"); rejecting H_j
releases the recommendation. With calibration pairs (x_i, κ_i), a regressor κ̂ fitted on other data,
and U_j ~ Unif(0, 1),

    p_j = [ Σ_i 1{κ̂_i < κ̂_{n+j}, κ_i ≥ c} + U_j (1 + Σ_i 1{κ̂_i = κ̂_{n+j}, κ_i ≥ c}) ] / (n + 1)   (Eq. 8)

and BH at level α on (p_j) selects a set whose false discovery rate E[V / max(1, R)] is at most α
when calibration and test points are exchangeable (Thm. 5.1).

The paper's proof writes the clipped score as J(x, y) = κ(x) + 2M·1{y ≥ c}; the score that reproduces
Eq. 8 with Ĵ_{n+j} = J(x_{n+j}, c) is J(x, y) = κ̂(x) + 2M·1{y < c} with M > sup|κ̂| (then no non-null
calibration score can tie with or fall below a test score). App. A.2 restates Eq. 8 with an extra "+1"
in the first count; Eq. 8 is implemented here.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "ConformalSelector",
    "LinearRegressor",
    "NotFittedError",
    "bh_select",
    "conformal_pvalues",
    "fdr_monte_carlo_test",
    "repeated_selection",
    "selection_metrics",
]


class NotFittedError(RuntimeError):
    """A ConformalSelector method was called out of order (fit → calibrate → select)."""


def _as_1d(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds NaN or inf")
    return arr


def conformal_pvalues(
    kappa_hat_cal: Any,
    kappa_cal: Any,
    kappa_hat_test: Any,
    c: float,
    *,
    rng: np.random.Generator | int | None = None,
    u: Any = None,
) -> np.ndarray:
    """Randomised conformal p-values of Eq. 8 for H_j: κ_{n+j} ≥ c.

    Only null calibration points (κ_i ≥ c) are counted; the denominator is n + 1 over all calibration
    points. ``u`` fixes the uniforms (one per test point); otherwise they are drawn from ``rng``.
    """
    kh_cal = _as_1d(kappa_hat_cal, "kappa_hat_cal")
    k_cal = _as_1d(kappa_cal, "kappa_cal")
    kh_test = _as_1d(kappa_hat_test, "kappa_hat_test")
    if len(kh_cal) != len(k_cal):
        raise ValueError(
            f"kappa_hat_cal and kappa_cal differ in length: {len(kh_cal)} != {len(k_cal)}"
        )
    if len(kh_cal) == 0:
        raise ValueError("conformal p-values need at least one calibration point")
    if not np.isfinite(c):
        raise ValueError(f"c must be finite, got {c}")
    if u is None:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        u = gen.random(len(kh_test))
    u = np.asarray(u, dtype=float)
    if u.shape != kh_test.shape or (u < 0).any() or (u > 1).any():
        raise ValueError("u must hold one value in [0, 1] per test point")
    null = np.sort(kh_cal[k_cal >= c])
    less = np.searchsorted(null, kh_test, side="left")
    equal = np.searchsorted(null, kh_test, side="right") - less
    return (less + u * (1.0 + equal)) / (len(kh_cal) + 1.0)


def bh_select(pvalues: Any, alpha: float) -> np.ndarray:
    """Benjamini–Hochberg at level α: k = max{r : p_(r) ≤ α r / m}; select {j : p_j ≤ p_(k)}.

    Returns a boolean mask (all False when no r qualifies). Ties at the boundary are selected
    (``≤``), as in statsmodels' ``fdr_bh``.
    """
    p = _as_1d(pvalues, "pvalues")
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    m = len(p)
    if m == 0:
        return np.zeros(0, dtype=bool)
    order = np.sort(p)
    ok = np.flatnonzero(order <= alpha * np.arange(1, m + 1) / m)
    if not ok.size:
        return np.zeros(m, dtype=bool)
    return p <= order[ok[-1]]


def selection_metrics(selected: Any, kappa_test: Any, c: float) -> dict[str, float]:
    """False discovery proportion V / max(1, R) and power #{true discoveries} / max(1, #non-nulls),
    with the *true* test κ (nulls: κ ≥ c)."""
    sel = np.asarray(selected, dtype=bool)
    k = _as_1d(kappa_test, "kappa_test")
    if sel.shape != k.shape:
        raise ValueError("selected and kappa_test must have the same length")
    null = k >= c
    r = int(sel.sum())
    v = int((sel & null).sum())
    nonnull = int((~null).sum())
    return {
        "fdp": v / max(1, r),
        "power": (r - v) / max(1, nonnull),
        "n_selected": float(r),
        "null_fraction": float(null.mean()) if len(k) else float("nan"),
    }


def fdr_monte_carlo_test(fdp: Any, alpha: float) -> dict[str, float]:
    """One-sided Monte Carlo test of H0: FDR <= alpha from i.i.d. replicate FDPs (random splits).

    FDR is estimated by the mean FDP; z = (mean - alpha) / (sd / sqrt(R)) and the p-value
    P(Z >= z) is the normal approximation (fine for R >= 100 replicates). A small p-value is evidence
    that the realized FDR exceeds alpha; a mean above alpha with a large p-value is Monte Carlo noise.
    """
    f = _as_1d(fdp, "fdp")
    if len(f) < 2:
        raise ValueError("the Monte Carlo test needs at least 2 replicates")
    mean = float(f.mean())
    se = float(f.std(ddof=1) / np.sqrt(len(f)))
    if se == 0.0:
        z = 0.0 if mean == alpha else (float("inf") if mean > alpha else float("-inf"))
    else:
        z = (mean - alpha) / se
    p = 0.5 * math.erfc(z / math.sqrt(2.0))
    return {"mean": mean, "se": se, "z": z, "p_value": p, "reps": float(len(f))}


class LinearRegressor:
    """Ridge regression on standardised features (``alpha=0``: ordinary least squares), closed form.

    ``fit(X, y)``, ``predict(X)``. The intercept is not penalised.
    """

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha

    def fit(self, X: Any, y: Any) -> LinearRegressor:
        X = np.asarray(X, dtype=float)
        y = _as_1d(y, "y")
        if X.ndim != 2 or len(X) != len(y):
            raise ValueError(f"X must be [n, d] with n = len(y) = {len(y)}, got {X.shape}")
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha}")
        self.mean_ = X.mean(0)
        sd = X.std(0)
        self.scale_ = np.where(sd > 0, sd, 1.0)
        Z = (X - self.mean_) / self.scale_
        self.intercept_ = float(y.mean())
        yc = y - self.intercept_
        if self.alpha > 0:
            A = Z.T @ Z + self.alpha * np.eye(Z.shape[1])
            self.coef_ = np.linalg.solve(A, Z.T @ yc)
        else:
            self.coef_ = np.linalg.lstsq(Z, yc, rcond=None)[0]
        return self

    def predict(self, X: Any) -> np.ndarray:
        if not hasattr(self, "coef_"):
            raise NotFittedError("LinearRegressor is not fitted: call fit(X, y) first")
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != len(self.coef_):
            raise ValueError(f"X must be [n, {len(self.coef_)}], got {X.shape}")
        return np.asarray(((X - self.mean_) / self.scale_) @ self.coef_ + self.intercept_)


class ConformalSelector:
    """Select test points whose κ is certified below ``c`` at FDR level ``alpha``.

    Lifecycle (enforced): ``fit(X_fit, kappa_fit)`` fits the regressor κ̂ on data disjoint from the
    calibration and test points; ``calibrate(X_cal, kappa_cal)`` stores the calibration scores;
    ``pvalues(X_test)`` / ``select(X_test)`` give the Eq. 8 p-values and the BH selection.

    Parameters
    ----------
    alpha : float, default 0.1
        Target FDR, in (0, 1).
    c : float, default 0.3
        Uncertainty threshold (on the scale of the κ labels; the normalised scale in SAFER).
    regressor : {"ridge", "ols", "identity"} or an object with ``fit``/``predict``, default "ridge"
        κ̂: Ridge on standardised X (paper), least squares (paper App. C.2), the identity (X holds the
        scores themselves, as the official ``conformal_fdr.py``), or any regressor.
    ridge_alpha : float, default 1.0
        Ridge penalty.
    random_state : int, numpy Generator or None
        Source of the uniforms U_j.

    Attributes
    ----------
    regressor_ : the fitted κ̂.
    calibration_scores_ : ndarray [n]  κ̂ of the calibration points.
    calibration_null_ : ndarray [n] bool  κ_i ≥ c.
    pvalues_ : ndarray [m]  p-values of the last ``pvalues``/``select`` call.
    selected_ : ndarray [m] bool  the last selection.

    Parameters are only stored by ``__init__`` and validated by ``fit`` (scikit-learn's convention, so
    ``get_params``/``set_params`` work); the class does not inherit from scikit-learn, which is not a
    dependency.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); k = 0.5 + 0.2 * X[:, 0] + 0.05 * rng.normal(size=300)
    >>> sel = ConformalSelector(alpha=0.1, c=0.5, random_state=0)
    >>> mask = sel.fit(X[:100], k[:100]).calibrate(X[100:200], k[100:200]).select(X[200:])
    >>> mask.shape
    (100,)
    """

    _PARAMS = ("alpha", "c", "regressor", "ridge_alpha", "random_state")

    def __init__(
        self,
        *,
        alpha: float = 0.1,
        c: float = 0.3,
        regressor: Any = "ridge",
        ridge_alpha: float = 1.0,
        random_state: Any = None,
    ) -> None:
        self.alpha = alpha
        self.c = c
        self.regressor = regressor
        self.ridge_alpha = ridge_alpha
        self.random_state = random_state

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._PARAMS}

    def set_params(self, **params: Any) -> ConformalSelector:
        for key, value in params.items():
            if key not in self._PARAMS:
                raise ValueError(f"invalid parameter {key!r} for ConformalSelector")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._PARAMS)
        return f"ConformalSelector({args})"

    def _validate_params(self) -> None:
        a = self.alpha
        if not isinstance(a, (int, float)) or not 0.0 < float(a) < 1.0:
            raise ValueError(
                f"The 'alpha' parameter of ConformalSelector must be a float in (0, 1). Got {a!r}."
            )
        if not isinstance(self.c, (int, float)) or not np.isfinite(self.c):
            raise ValueError(
                f"The 'c' parameter of ConformalSelector must be a finite float. Got {self.c!r}."
            )
        r = self.regressor
        if isinstance(r, str) and r not in ("ridge", "ols", "identity"):
            raise ValueError(
                "The 'regressor' parameter of ConformalSelector must be 'ridge', 'ols', 'identity' "
                f"or an object with fit/predict. Got {r!r}."
            )
        if not isinstance(r, str) and not (hasattr(r, "fit") and hasattr(r, "predict")):
            raise ValueError(
                f"The 'regressor' parameter of ConformalSelector has no fit/predict: {r!r}."
            )
        if not isinstance(self.ridge_alpha, (int, float)) or self.ridge_alpha < 0:
            raise ValueError(
                f"The 'ridge_alpha' parameter of ConformalSelector must be >= 0. Got {self.ridge_alpha!r}."
            )

    def _features(self, X: Any, name: str) -> np.ndarray:
        if self.regressor == "identity":
            return _as_1d(X, name)
        arr = np.asarray(X, dtype=float)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D [n, d], got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} holds NaN or inf")
        n_in = getattr(self, "n_features_in_", None)
        if n_in is not None and arr.shape[1] != n_in:
            raise ValueError(
                f"{name} has {arr.shape[1]} features, the selector was fitted on {n_in}"
            )
        return arr

    def _predict(self, X: np.ndarray) -> np.ndarray:
        if self.regressor == "identity":
            return X
        return _as_1d(self.regressor_.predict(X), "κ̂ predictions")

    def fit(self, X: Any, kappa: Any) -> ConformalSelector:
        """Fit κ̂ on (X, κ); returns self."""
        self._validate_params()
        for attr in ("calibration_scores_", "calibration_null_", "pvalues_", "selected_"):
            self.__dict__.pop(attr, None)
        self.__dict__.pop("n_features_in_", None)
        k = _as_1d(kappa, "kappa")
        Xf = self._features(X, "X")
        if len(Xf) != len(k):
            raise ValueError(f"X and kappa differ in length: {len(Xf)} != {len(k)}")
        if self.regressor == "identity":
            self.regressor_: Any = "identity"
        else:
            if len(k) < 2:
                raise ValueError("fitting κ̂ needs at least 2 points")
            self.n_features_in_ = Xf.shape[1]
            if isinstance(self.regressor, str):
                alpha = 0.0 if self.regressor == "ols" else float(self.ridge_alpha)
                self.regressor_ = LinearRegressor(alpha).fit(Xf, k)
            else:
                self.regressor_ = self.regressor.fit(Xf, k)
                if self.regressor_ is None:  # fit returned None instead of self
                    self.regressor_ = self.regressor
        self._rng = (
            self.random_state
            if isinstance(self.random_state, np.random.Generator)
            else np.random.default_rng(self.random_state)
        )
        return self

    def calibrate(self, X_cal: Any, kappa_cal: Any) -> ConformalSelector:
        """Store κ̂ and the null indicator κ_i ≥ c of the calibration points; returns self."""
        if not hasattr(self, "regressor_"):
            raise NotFittedError("Incorrect method order: call fit before calibrate.")
        k = _as_1d(kappa_cal, "kappa_cal")
        Xc = self._features(X_cal, "X_cal")
        if len(Xc) != len(k):
            raise ValueError(f"X_cal and kappa_cal differ in length: {len(Xc)} != {len(k)}")
        if len(k) == 0:
            raise ValueError("calibrate needs at least one calibration point")
        self.calibration_scores_ = self._predict(Xc)
        self.calibration_null_ = k >= self.c
        if not self.calibration_null_.any():
            warnings.warn(
                f"no calibration point has κ >= c = {self.c}: every p-value is <= 1/(n+1) = "
                f"{1 / (len(k) + 1):.3g}, so BH selects everything whenever alpha >= 1/(n+1)",
                RuntimeWarning,
                stacklevel=2,
            )
        self.__dict__.pop("pvalues_", None)
        self.__dict__.pop("selected_", None)
        return self

    def predict_kappa(self, X: Any) -> np.ndarray:
        """κ̂ of new points."""
        if not hasattr(self, "regressor_"):
            raise NotFittedError("Incorrect method order: call fit before predict_kappa.")
        return self._predict(self._features(X, "X"))

    def pvalues(self, X_test: Any, *, u: Any = None) -> np.ndarray:
        """Conformal p-values (Eq. 8) of the test points [m]."""
        if not hasattr(self, "calibration_scores_"):
            raise NotFittedError(
                "Incorrect method order: call fit and calibrate before pvalues/select."
            )
        kh = self._predict(self._features(X_test, "X_test"))
        n = len(self.calibration_scores_)
        null = np.sort(self.calibration_scores_[self.calibration_null_])
        if u is None:
            u = self._rng.random(len(kh))
        u = np.asarray(u, dtype=float)
        if u.shape != kh.shape:
            raise ValueError("u must hold one value per test point")
        less = np.searchsorted(null, kh, side="left")
        equal = np.searchsorted(null, kh, side="right") - less
        self.pvalues_ = (less + u * (1.0 + equal)) / (n + 1.0)
        return self.pvalues_

    def select(self, X_test: Any, *, u: Any = None) -> np.ndarray:
        """Boolean mask [m] of the test points selected by BH at level ``alpha``."""
        p = self.pvalues(X_test, u=u)
        self.selected_ = bh_select(p, float(self.alpha))
        return self.selected_


def repeated_selection(
    H: np.ndarray,
    kappa: np.ndarray,
    *,
    c: float | None = None,
    alphas: Sequence[float],
    reps: int = 500,
    c_quantile: float | None = None,
    fit_frac: float = 0.7,
    test: np.ndarray | None = None,
    test_frac: float = 0.5,
    regressor: Any = "ridge",
    ridge_alpha: float = 1.0,
    seed: int = 0,
) -> dict[str, Any]:
    """FDR and power of conformal selection over repeated random splits, with the true test κ.

    Protocol (paper Sec. 6.3 / App. C.2, with the official evaluation flaws fixed): each repetition
    splits the held-out patients into a calibration part (``fit_frac`` of it to fit κ̂, the rest to
    calibrate) and a test part, draws fresh U_j, and records FDP and power at every α. With ``test``
    (indices into H) the test set is fixed and only the calibration patients (the others) are resplit;
    otherwise (default) calibration and test are redrawn too (``test_frac`` to test), which is the
    expectation Thm. 5.1 bounds.

    Threshold: either ``c`` (on the normalised κ scale) or ``c_quantile`` = q, which sets c in each
    repetition to the q-quantile of the true κ of the κ̂-fit part. That part is disjoint from the
    calibration and test points, so c is fixed given it and the guarantee holds; the null fraction is
    then about 1 - q at every cohort size (a fixed c on the κ scale means different null fractions at
    different cohort sizes, because κ's distribution moves with the amount of training data).

    Returns per-repetition arrays [reps, len(alphas)] for conformal selection, for the plug-in
    threshold κ̂ < c (no guarantee; constant over α) and for a random selection of the conformal
    selection's size; plus the null fraction per repetition.
    """
    H = np.asarray(H, dtype=float)
    kappa = np.asarray(kappa, dtype=float)
    n = len(kappa)
    if H.shape[0] != n:
        raise ValueError("H and kappa differ in length")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if (c is None) == (c_quantile is None):
        raise ValueError("give exactly one of c and c_quantile")
    if c_quantile is not None and not 0.0 < c_quantile < 1.0:
        raise ValueError(f"c_quantile must be in (0, 1), got {c_quantile}")
    alphas = [float(a) for a in alphas]
    rng = np.random.default_rng(seed)
    shape = (reps, len(alphas))
    out = {k: np.zeros(shape) for k in ("fdp", "power", "n_sel", "rand_fdp", "rand_power")}
    plug = {k: np.zeros(reps) for k in ("fdp", "power", "n_sel")}
    null_frac = np.zeros(reps)
    c_used = np.zeros(reps)
    no_null = 0
    for r in range(reps):
        if test is None:
            perm = rng.permutation(n)
            n_test = round(test_frac * n)
            te, pool = perm[:n_test], perm[n_test:]
        else:
            te = np.asarray(test)
            pool = rng.permutation(np.setdiff1d(np.arange(n), te))
        n_fit = round(fit_frac * len(pool))
        fit_idx, cal_idx = pool[:n_fit], pool[n_fit:]
        c_r = float(np.quantile(kappa[fit_idx], c_quantile)) if c_quantile is not None else c
        assert c_r is not None
        c_used[r] = c_r
        sel = ConformalSelector(
            alpha=alphas[0], c=c_r, regressor=regressor, ridge_alpha=ridge_alpha, random_state=rng
        )
        X = kappa if regressor == "identity" else H
        sel.fit(X[fit_idx], kappa[fit_idx])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sel.calibrate(X[cal_idx], kappa[cal_idx])
        no_null += int(not sel.calibration_null_.any())
        p = sel.pvalues(X[te])
        k_te = kappa[te]
        null_frac[r] = float((k_te >= c_r).mean())
        for a, alpha in enumerate(alphas):
            mask = bh_select(p, alpha)
            m = selection_metrics(mask, k_te, c_r)
            out["fdp"][r, a], out["power"][r, a], out["n_sel"][r, a] = (
                m["fdp"], m["power"], m["n_selected"]
            )  # fmt: skip
            rand = np.zeros(len(te), dtype=bool)
            rand[rng.choice(len(te), int(mask.sum()), replace=False)] = True
            mr = selection_metrics(rand, k_te, c_r)
            out["rand_fdp"][r, a], out["rand_power"][r, a] = mr["fdp"], mr["power"]
        mp = selection_metrics(sel.predict_kappa(X[te]) < c_r, k_te, c_r)
        plug["fdp"][r], plug["power"][r], plug["n_sel"][r] = (
            mp["fdp"],
            mp["power"],
            mp["n_selected"],
        )
    return {
        "alphas": alphas,
        "c": c,
        "c_quantile": c_quantile,
        "c_values": c_used,
        "reps": reps,
        "protocol": "fixed-test" if test is not None else "pooled",
        **out,
        "plugin_fdp": plug["fdp"],
        "plugin_power": plug["power"],
        "plugin_n_sel": plug["n_sel"],
        "null_fraction": null_frac,
        "reps_without_null_calibration": no_null,
    }
