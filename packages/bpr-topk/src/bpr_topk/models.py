"""Probabilistic count forecasters (paper Sec. 5, Eq. 14 and Eq. 15).

Protocol: a model is an ``nn.Module`` whose ``forward(X, time)`` returns a
``torch.distributions.Distribution`` with ``batch_shape`` ending in S, factorised over sites.
:class:`ForecastModel` adds ``sample(M, X, time)``, ``log_prob(y, X, time)``, ``mean(X, time)``
and ``log_prior()``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributions import (
    Categorical,
    Distribution,
    MixtureSameFamily,
    NegativeBinomial,
    constraints,
)


def inverse_softplus(x: Tensor) -> Tensor:
    """Inverse of ``softplus`` for positive ``x``."""
    return x + torch.log(-torch.expm1(-x))


class ForecastModel(nn.Module):
    """Base class: forecast distribution ``p_φ(y_t | x_t)`` with batch shape ``[..., T, S]``."""

    num_sites: int

    def forward(self, X: Tensor | None = None, time: Tensor | None = None) -> Distribution:
        raise NotImplementedError

    @torch.no_grad()
    def sample(self, M: int, X: Tensor | None = None, time: Tensor | None = None) -> Tensor:
        """``M`` detached joint forecast samples, shape ``[M, T, S]`` (or ``[M, S]``)."""
        if M < 1:
            raise ValueError(f"M must be >= 1; got {M}")
        return self(X, time).sample((M,))

    def log_prob(self, y: Tensor, X: Tensor | None = None, time: Tensor | None = None) -> Tensor:
        """Per-site log-probabilities ``log p_φ(y_ts)``; ``y`` may carry leading sample dims."""
        return self(X, time).log_prob(y.to(torch.get_default_dtype()))

    def mean(self, X: Tensor | None = None, time: Tensor | None = None) -> Tensor:
        """Forecast mean ``E[y_ts]`` (the mean rating and the MAE point forecast)."""
        return self(X, time).mean

    def log_prior(self) -> Tensor:
        """Log prior density of random effects (0 when the model has none)."""
        return torch.zeros(())

    def config(self) -> dict[str, Any]:
        """Constructor arguments, so a checkpoint can rebuild the module."""
        raise NotImplementedError


class NegBinMixedEffects(ForecastModel):
    """Negative-binomial mixed-effects forecaster, paper Eq. 15.

    ``η_st = β0 + βᵀx_st + b_0s + b_1s·t``, ``y_st ~ NegBin(total_count=g(η_st), probs=q)``,
    ``q = sigmoid(ζ)``, ``(b_0s, b_1s) ~ N(0, Σ)`` with ``Σ = [[σ0², ρσ0σ1], [ρσ0σ1, σ1²]]``,
    ``ρ = tanh(u)``. Parameters: P = 2S + F + 5 (F + 4 with an offset column).

    ``dispersion="site"`` (ours; the paper's and the official model's ``q`` is one global
    parameter) gives every site its own dispersion at the same mean: ``q_s = sigmoid(ζ + δ_s)``
    and ``total_count = g(η_st)·exp(−δ_s)``, so the mean ``g(η_st)·e^ζ`` does not depend on
    ``δ`` and the variance is ``mean / (1 − q_s)``; ``δ_s ~ N(0, dispersion_scale²)`` enters
    :meth:`log_prior` (P = 3S + F + 5). With ``δ = 0`` the model equals the global one.

    ``offset_feature=j`` (ours) makes feature column ``j`` an *offset*: it enters ``η`` with the
    fixed coefficient 1 and is left out of ``βᵀx`` (β then has F − 1 entries), so
    ``η_st = o_st + β0 + βᵀx_st(without j) + b_0s + b_1s·t``. With the offset
    ``o = log(h + c)`` of a heuristic score h (:func:`~bpr_topk.baselines.with_heuristic_offset`)
    and the exp link the mean is ``(h + c)·exp(f_θ)``: at f_θ = constant
    (:meth:`init_at_mean`) the model ranks exactly as the heuristic, and training learns
    only the departure from it.

    ``site_slopes=False`` holds every ``b_1s`` at 0 (not trained) and makes the prior the
    univariate ``Σ_s log N(b_0s; 0, σ0²)``: with the bivariate prior and ``b_1 = 0`` the
    log-density grows without bound as ``σ1 → 0`` and ``ρ → ±1``, and the second of these
    shrinks every random intercept to 0 (the effective variance of ``b_0`` is ``σ0²(1 − ρ²)``).

    Args:
        num_sites: S.
        num_features: F.
        link: g, ``"exp"`` (paper, default) or ``"softplus"`` (official code).
        scale_link: map to σ0, σ1: ``"softplus"`` (paper App. E, default) or ``"exp"`` (code).
        prior: ``"mvn"`` full bivariate normal log-density summed over sites (default) or
            ``"code"`` (official: ``−½·mean((BΣ⁻¹)⊙B)``, no log-det term).
        generator: random source for the official N(0, 1) initialisation (b0 = b1 = 0).
        dispersion: ``"global"`` (Eq. 15, default) or ``"site"`` (per-site δ_s, see above).
        dispersion_scale: prior standard deviation of δ_s (``dispersion="site"`` only).
        site_slopes: learn the per-site random slopes ``b_1s`` (Eq. 15, default) or hold them
            at 0 with the random-intercept prior alone.
        offset_feature: index of the feature column used as a fixed offset of ``η`` (see
            above), or None (default: every feature gets a weight, Eq. 15).
    """

    def __init__(
        self,
        num_sites: int,
        num_features: int,
        link: Literal["exp", "softplus"] = "exp",
        scale_link: Literal["softplus", "exp"] = "softplus",
        prior: Literal["mvn", "code"] = "mvn",
        generator: torch.Generator | None = None,
        dispersion: Literal["global", "site"] = "global",
        dispersion_scale: float = 1.0,
        site_slopes: bool = True,
        offset_feature: int | None = None,
    ) -> None:
        super().__init__()
        if num_sites < 1 or num_features < 0:
            raise ValueError(
                f"num_sites must be >= 1 and num_features >= 0; got {num_sites}, {num_features}"
            )
        if link not in ("exp", "softplus"):
            raise ValueError(f"link must be 'exp' or 'softplus'; got {link!r}")
        if scale_link not in ("softplus", "exp"):
            raise ValueError(f"scale_link must be 'softplus' or 'exp'; got {scale_link!r}")
        if prior not in ("mvn", "code"):
            raise ValueError(f"prior must be 'mvn' or 'code'; got {prior!r}")
        if dispersion not in ("global", "site"):
            raise ValueError(f"dispersion must be 'global' or 'site'; got {dispersion!r}")
        if not (math.isfinite(dispersion_scale) and dispersion_scale > 0):
            raise ValueError(f"dispersion_scale must be > 0; got {dispersion_scale!r}")
        if offset_feature is not None and link != "exp":
            raise ValueError(f"offset_feature needs link='exp' (log μ = offset + f); got {link!r}")
        if offset_feature is not None and (
            isinstance(offset_feature, bool)
            or not isinstance(offset_feature, int)
            or not 0 <= offset_feature < num_features
        ):
            raise ValueError(
                f"offset_feature must be None or a feature index in 0..{num_features - 1}; "
                f"got {offset_feature!r}"
            )
        self.num_sites, self.num_features = num_sites, num_features
        self.link, self.scale_link, self.prior = link, scale_link, prior
        self.offset_feature = offset_feature
        keep = [j for j in range(num_features) if j != offset_feature]
        self.register_buffer("_keep", torch.tensor(keep, dtype=torch.long), persistent=False)

        def normal(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(shape, generator=generator))

        self.beta0 = normal()
        self.beta = normal(len(keep))
        self.b0 = nn.Parameter(torch.zeros(num_sites))
        self.b1 = nn.Parameter(torch.zeros(num_sites))
        self.sigma0_raw = normal()
        self.sigma1_raw = normal()
        self.rho_raw = normal()  # u, ρ = tanh(u)
        self.zeta = normal()  # q = sigmoid(ζ)
        self.dispersion, self.dispersion_scale = dispersion, float(dispersion_scale)
        self.site_slopes = bool(site_slopes)
        if not self.site_slopes:
            self.b1.requires_grad_(False)  # b_1 = 0, random intercept only
        if dispersion == "site":  # δ_s: per-site log-odds of q around ζ, mean unchanged
            self.delta = nn.Parameter(torch.zeros(num_sites))

    @torch.no_grad()
    def init_at_mean(self, y: Tensor, X: Tensor | None = None) -> NegBinMixedEffects:
        """Start at the constant forecast: β = 0, b0 = b1 = 0, q = ½ and β0 such that every
        site's mean is the average count of ``y`` (ours; the official initialisation draws β0, β
        and ζ from N(0, 1), which with many features starts far from the data). Returns self.

        With an offset (``offset_feature``) the mean is ``exp(o_st + β0)``: β0 then matches the
        average of ``y`` to that of ``exp(o)`` over the features ``X`` of the same steps (needed),
        so f_θ = β0 is a constant and the ranking is the offset's."""
        level = float(y.to(torch.float32).mean().clamp_min(1e-3))
        if self.offset_feature is not None:
            if X is None:
                raise ValueError("init_at_mean needs the features X of y's steps with an offset")
            o = X[..., self.offset_feature].to(torch.float32)
            self.beta.zero_()
            self.b0.zero_()
            self.b1.zero_()
            self.zeta.zero_()
            if self.dispersion == "site":
                self.delta.zero_()
            log_mean_offset = float(torch.logsumexp(o.flatten(), 0)) - math.log(o.numel())
            self.beta0.fill_(math.log(level) - log_mean_offset)
            return self
        self.beta.zero_()
        self.b0.zero_()
        self.b1.zero_()
        self.zeta.zero_()  # q = 1/2: mean = g(η)
        if self.dispersion == "site":
            self.delta.zero_()
        target = torch.tensor(level)
        self.beta0.copy_(torch.log(target) if self.link == "exp" else inverse_softplus(target))
        return self

    def config(self) -> dict[str, Any]:
        return {
            "num_sites": self.num_sites,
            "num_features": self.num_features,
            "link": self.link,
            "scale_link": self.scale_link,
            "prior": self.prior,
            "dispersion": self.dispersion,
            "dispersion_scale": self.dispersion_scale,
            "site_slopes": self.site_slopes,
            "offset_feature": self.offset_feature,
        }

    def eta(self, X: Tensor, time: Tensor) -> Tensor:
        """Linear predictor ``η_st`` ``[..., T, S]``."""
        if X.shape[-1] != self.num_features or X.shape[-2] != self.num_sites:
            raise ValueError(
                f"X must have shape [T, S={self.num_sites}, F={self.num_features}]; "
                f"got {tuple(X.shape)}"
            )
        if time.shape != X.shape[:-1]:
            raise ValueError(f"time must have shape {tuple(X.shape[:-1])}; got {tuple(time.shape)}")
        if self.offset_feature is None:
            return self.beta0 + X @ self.beta + self.b0 + self.b1 * time
        keep: Tensor = self._keep  # type: ignore[assignment]  # a registered buffer
        linear = X.index_select(-1, keep) @ self.beta
        return X[..., self.offset_feature] + self.beta0 + linear + self.b0 + self.b1 * time

    def forward(self, X: Tensor | None = None, time: Tensor | None = None) -> Distribution:
        if X is None or time is None:
            raise ValueError("NegBinMixedEffects needs covariates X [T, S, F] and time [T, S]")
        eta = self.eta(X, time)
        total_count = torch.exp(eta) if self.link == "exp" else F.softplus(eta)
        if self.dispersion == "site":  # q_s = sigmoid(ζ + δ_s), total count scaled by e^{−δ_s}
            total_count = total_count * torch.exp(-self.delta)
            logits = (self.zeta + self.delta).expand_as(eta)
        else:
            logits = self.zeta.expand_as(eta)
        return NegativeBinomial(total_count=total_count.clamp_min(1e-8), logits=logits)

    def _scales(self) -> tuple[Tensor, Tensor, Tensor]:
        act = F.softplus if self.scale_link == "softplus" else torch.exp
        return act(self.sigma0_raw), act(self.sigma1_raw), torch.tanh(self.rho_raw)

    def covariance(self) -> Tensor:
        """Random-effects covariance Σ (2×2)."""
        s0, s1, rho = self._scales()
        off = rho * s0 * s1
        return torch.stack([torch.stack([s0**2, off]), torch.stack([off, s1**2])])

    def log_prior(self) -> Tensor:
        """``Σ_s log N((b_0s, b_1s); 0, Σ)`` (``prior="mvn"``) or the official code's penalty,
        plus ``Σ_s log N(δ_s; 0, dispersion_scale²)`` with ``dispersion="site"``."""
        return self._random_effects_prior() + self._dispersion_prior()

    def _dispersion_prior(self) -> Tensor:
        if self.dispersion != "site":
            return torch.zeros(())
        tau = self.dispersion_scale
        z = self.delta / tau
        return (-0.5 * z**2 - math.log(tau) - 0.5 * math.log(2 * math.pi)).sum()

    def _random_effects_prior(self) -> Tensor:
        s0, s1, rho = self._scales()
        if not self.site_slopes:  # b_1 = 0: the marginal prior of b_0 alone
            z0 = self.b0 / s0
            if self.prior == "code":  # −¼·mean_s(b_sᵀΣ⁻¹b_s) with the 1×1 Σ = σ0²
                return -0.25 * (z0**2).mean()
            return (-0.5 * z0**2 - torch.log(s0) - 0.5 * math.log(2 * math.pi)).sum()
        B = torch.stack([self.b0, self.b1], dim=-1)  # [S, 2]
        if self.prior == "code":
            quad = (B @ torch.linalg.inv(self.covariance())) * B
            return -0.5 * quad.mean()
        one_m_rho2 = (1 - rho**2).clamp_min(1e-12)
        z0, z1 = self.b0 / s0, self.b1 / s1
        quad = (z0**2 - 2 * rho * z0 * z1 + z1**2) / one_m_rho2
        log_det = 2 * torch.log(s0) + 2 * torch.log(s1) + torch.log(one_m_rho2)
        return (-0.5 * quad - 0.5 * log_det - math.log(2 * math.pi)).sum()


class TruncatedNormal(Distribution):
    """Normal(loc, scale) truncated to ``[low, high]``; CDF via ``torch.special.ndtr``.

    Sampling uses the inverse CDF with clamping (written for this package).
    """

    arg_constraints: ClassVar[dict[str, constraints.Constraint]] = {
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    has_rsample = True

    def __init__(self, loc: Tensor, scale: Tensor, low: float, high: float) -> None:
        if not low < high:
            raise ValueError(f"need low < high; got low={low}, high={high}")
        self.loc, self.scale = torch.broadcast_tensors(loc, scale)
        self.low, self.high = float(low), float(high)
        self._alpha = (self.low - self.loc) / self.scale
        self._beta = (self.high - self.loc) / self.scale
        self._cdf_a = torch.special.ndtr(self._alpha)
        self._cdf_b = torch.special.ndtr(self._beta)
        self._log_z = torch.log((self._cdf_b - self._cdf_a).clamp_min(1e-30))
        super().__init__(batch_shape=self.loc.shape, validate_args=False)

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> Tensor:
        pdf = torch.exp(-0.5 * self._alpha**2) - torch.exp(-0.5 * self._beta**2)
        return self.loc + self.scale * pdf / math.sqrt(2 * math.pi) / torch.exp(self._log_z)

    def log_prob(self, value: Tensor) -> Tensor:
        z = (value - self.loc) / self.scale
        lp = -0.5 * z**2 - 0.5 * math.log(2 * math.pi) - torch.log(self.scale) - self._log_z
        inside = (value >= self.low) & (value <= self.high)
        return torch.where(inside, lp, torch.full_like(lp, -math.inf))

    def rsample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> Tensor:
        shape = self._extended_shape(torch.Size(sample_shape))
        u = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        eps = torch.finfo(self.loc.dtype).eps
        p = (self._cdf_a + u * (self._cdf_b - self._cdf_a)).clamp(eps, 1 - eps)
        x = self.loc + self.scale * torch.special.ndtri(p)
        return x.clamp(self.low, self.high)


class TruncNormMixture(ForecastModel):
    """Mixture of L truncated normals with per-site weights, paper Eq. 14 (synthetic experiment).

    Global component means ``μ_l = softplus(·)``, scales ``σ_l = softplus(·) + 0.2``, per-site
    weights ``π_s = softmax(·)``, support ``[low, high]`` (default [0, 150]). Deliberately
    misspecified for the 7-site synthetic data.
    """

    def __init__(
        self,
        num_sites: int,
        num_components: int = 2,
        low: float = 0.0,
        high: float = 150.0,
        init_means: Tensor | None = None,
        init_scales: Tensor | None = None,
        init_weights: Tensor | None = None,
    ) -> None:
        super().__init__()
        if num_sites < 1 or num_components < 1:
            raise ValueError(
                f"num_sites and num_components must be >= 1; got {num_sites}, {num_components}"
            )
        self.num_sites, self.num_components = num_sites, num_components
        self.low, self.high = float(low), float(high)
        means = init_means if init_means is not None else torch.linspace(20, 80, num_components)
        scales = init_scales if init_scales is not None else torch.full((num_components,), 5.0)
        weights = (
            init_weights
            if init_weights is not None
            else torch.full((num_sites, num_components), 1.0 / num_components)
        )
        if weights.shape != (num_sites, num_components):
            raise ValueError(
                f"init_weights must have shape {(num_sites, num_components)}; "
                f"got {tuple(weights.shape)}"
            )
        dt = torch.get_default_dtype()
        self.mu_raw = nn.Parameter(inverse_softplus(torch.as_tensor(means, dtype=dt)))
        self.sigma_raw = nn.Parameter(
            inverse_softplus((torch.as_tensor(scales, dtype=dt) - 0.2).clamp_min(1e-3))
        )
        self.logits = nn.Parameter(torch.log(torch.as_tensor(weights, dtype=dt).clamp_min(1e-8)))

    @classmethod
    def official_init(
        cls, index: int, num_sites: int = 7, num_components: int = 2
    ) -> TruncNormMixture:
        """The ``index``-th of the official random initialisations (``RandomState(1989)``)."""
        rng = np.random.RandomState(1989)
        for _ in range(index + 1):
            means = rng.uniform(8, 102, num_components)
            scales = rng.uniform(0.25, 8, num_components)
            weights = rng.dirichlet(np.full(num_components, 0.5), size=num_sites)
        return cls(
            num_sites,
            num_components,
            init_means=torch.as_tensor(means),
            init_scales=torch.as_tensor(scales).clamp_min(0.25),
            init_weights=torch.as_tensor(weights),
        )

    def config(self) -> dict[str, Any]:
        return {
            "num_sites": self.num_sites,
            "num_components": self.num_components,
            "low": self.low,
            "high": self.high,
        }

    def forward(self, X: Tensor | None = None, time: Tensor | None = None) -> Distribution:
        mu = F.softplus(self.mu_raw)
        sigma = F.softplus(self.sigma_raw) + 0.2
        logits: Tensor = self.logits
        if X is not None:
            if X.shape[-2] != self.num_sites:
                raise ValueError(f"X must have {self.num_sites} sites; got {tuple(X.shape)}")
            logits = logits.expand(*X.shape[:-1], self.num_components)
        comp = TruncatedNormal(mu.expand_as(logits), sigma.expand_as(logits), self.low, self.high)
        return MixtureSameFamily(Categorical(logits=logits), comp, validate_args=False)


MODELS: dict[str, type[ForecastModel]] = {
    "negbin": NegBinMixedEffects,
    "truncnorm": TruncNormMixture,
}


def build_model(name: str, config: dict[str, Any]) -> ForecastModel:
    """Rebuild a model from its registry name and :meth:`ForecastModel.config`."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}")
    return MODELS[name](**config)
