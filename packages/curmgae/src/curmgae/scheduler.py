"""Edge-difficulty measurer and self-paced mask scheduler (paper section 2.2, Eq. 4, Algorithm 1).

The S-objective of Eq. 4 restricted to existing edges separates per edge (on an existing edge,
``S*A - A = S - 1``):

* ``penalty="l1"``:      ``min_S beta*R*S + lambda*(1-S) + gamma/2 (S - S_prev)^2``
  -> ``S* = clip(S_prev + (lambda - beta*R)/gamma, 0, 1)``; for ``gamma=0``: ``S* = 1[beta*R < lambda]``.
* ``penalty="squared"``: ``min_S beta*R*S + lambda*(1-S)^2 + gamma/2 (S - S_prev)^2``
  -> ``S* = clip((2 lambda - beta*R + gamma*S_prev) / (2 lambda + gamma), 0, 1)``.

Ties (``beta*R == lambda``) are not selected under ``l1`` with ``gamma=0`` (``S* = 0``).

The minimiser does not change when ``lambda``, ``beta`` and ``gamma`` are scaled together, so
:func:`solve_selection` first scales them by a power of two (exact) that brings ``max(lambda, gamma)``
into [0.5, 1): tiny (even subnormal) values give the same selection as their normal-range multiples,
instead of products that round to zero.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from .config import (
    LAMBDA_PACES,
    PACINGS,
    PENALTIES,
    RANDOM_POOLS,
    RESIDUALS,
    S_SOLVERS,
    TIE_BREAKS,
)

#: residual quantiles recorded in the trace at every S-step (``residual_q10`` ... ``residual_q90``)
TRACE_QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
#: the :class:`curmgae.CurMGAEConfig` fields that :meth:`SelfPacedEdgeScheduler.from_config` reads
CONFIG_FIELDS = (
    "mask_ratio",
    "split_ratio",
    "beta",
    "gamma",
    "penalty",
    "s_solver",
    "lambda_pace",
    "pacing",
    "lambda_init",
    "mu",
    "base_lambda",
    "start_lambda",
    "init_mask_ratio",
    "ramp_frac",
    "min_mask_ratio",
    "random_pool",
    "update_every",
    "anti_curriculum",
    "tie_break",
    "pace_end",
)


def pacing_fraction(progress: float, start: float, end: float, pacing: str = "linear") -> float:
    """Target masked fraction ``rho`` at ``progress`` ``p`` in [0, 1] of the ramp (clipped), growing
    from ``start`` to ``end`` with a pacing function of competence-based curricula:

    * ``linear``:    ``rho = start + (end - start) * p``;
    * ``root``:      ``rho = start + (end - start) * sqrt(p)`` (fast early, slow late);
    * ``geometric``: ``rho = start * (end / start) ** p`` (slow early, fast late; ``start > 0``).
    """
    if pacing not in PACINGS:
        raise ValueError(f"pacing={pacing!r} is not accepted; choose one of {', '.join(PACINGS)}")
    p = min(max(progress, 0.0), 1.0)
    if pacing == "linear":
        rho = start + (end - start) * p
    elif pacing == "root":
        rho = start + (end - start) * math.sqrt(p)
    else:
        if start <= 0:
            raise ValueError(f"pacing='geometric' needs a start fraction > 0; got {start!r}")
        rho = start * (end / start) ** p
    return min(max(rho, 0.0), 1.0)


def residuals(scores: Tensor, kind: str = "abs") -> Tensor:
    """Reconstruction residual of existing edges (Algorithm 1, line 8): ``R_e = |A_e - g_e|`` with
    ``A_e = 1`` (``abs``, the paper's L2 norm of a scalar) or ``(1 - g_e)^2`` (``squared``, RCL).

    ``scores`` are probabilities ``g_e`` in [0, 1]."""
    if kind not in RESIDUALS:
        raise ValueError(f"residual={kind!r} is not accepted; choose one of {', '.join(RESIDUALS)}")
    r = 1.0 - scores
    return r.abs() if kind == "abs" else r * r


def objective(
    S: Tensor,
    R: Tensor,
    lam: float,
    beta: float = 1.0,
    gamma: float = 0.0,
    S_prev: Tensor | float = 0.0,
    penalty: str = "l1",
) -> Tensor:
    """Per-edge value of the separable S-objective of Eq. 4 (see module docstring)."""
    f = lam * (1.0 - S) if penalty == "l1" else lam * (1.0 - S) ** 2
    return beta * R * S + f + 0.5 * gamma * (S - S_prev) ** 2


def _scaled_product(beta: float, R: Tensor, k: int) -> Tensor:
    """``beta * R * 2**k`` (float64) from mantissas and exponents: exact up to one rounding, where the
    plain product would round subnormal values to zero or overflow in between."""
    m_beta, e_beta = math.frexp(beta)
    m_r, e_r = torch.frexp(R)
    shift = (e_r.to(torch.int64) + (e_beta + k)).double()
    half = torch.div(shift, 2, rounding_mode="floor")
    two = torch.tensor(2.0, dtype=torch.float64)
    return (m_r * m_beta) * torch.pow(two, half) * torch.pow(two, shift - half)


def solve_selection(
    R: Tensor,
    lam: float,
    beta: float = 1.0,
    gamma: float = 0.0,
    S_prev: Tensor | None = None,
    penalty: str = "l1",
) -> Tensor:
    """Closed-form minimiser of the separable S-objective of Eq. 4 (module docstring), in [0, 1]^M."""
    if penalty not in PENALTIES:
        raise ValueError(
            f"penalty={penalty!r} is not accepted; choose one of {', '.join(PENALTIES)}"
        )
    if gamma < 0:
        raise ValueError(f"gamma={gamma!r} must be >= 0")
    for label, value in (("lam", lam), ("beta", beta), ("gamma", gamma)):
        if not math.isfinite(value):
            raise ValueError(f"{label}={value!r} must be a finite number")
    dtype = R.dtype if R.is_floating_point() else torch.get_default_dtype()
    S_prev = torch.zeros_like(R, dtype=torch.float64) if S_prev is None else S_prev.double()
    R = R.double()  # the scaled products below must not overflow float32
    if lam == 0 and gamma == 0:
        # objective beta*R*S: S = 0 (ties with R = 0 go to 0, as under l1)
        return torch.zeros_like(R, dtype=dtype)
    # exact rescaling by 2**-e so that max(|lam|, gamma) lies in [0.5, 1) (module docstring)
    e = math.frexp(max(abs(lam), gamma))[1]
    lam_s, gamma_s = math.ldexp(lam, -e), math.ldexp(gamma, -e)
    b = _scaled_product(beta, R, -e)  # beta * R * 2**-e without intermediate under/overflow
    if penalty == "l1":
        if gamma_s == 0:  # gamma == 0 (or negligible next to lam): the threshold rule
            S = (b < lam_s).double()
            return (S if gamma == 0 else torch.where(b == lam_s, S_prev, S)).to(dtype)
        return (S_prev + (lam_s - b) / gamma_s).clamp(0.0, 1.0).to(dtype)
    curvature = 2 * lam_s + gamma_s
    if curvature > 0:
        return ((2 * lam_s - b + gamma_s * S_prev) / curvature).clamp(0.0, 1.0).to(dtype)
    # lam < 0 and 2*lam + gamma <= 0: concave objective, the minimum is at an endpoint
    f0 = lam_s + 0.5 * gamma_s * S_prev**2
    f1 = b + 0.5 * gamma_s * (1 - S_prev) ** 2
    return (f1 < f0).to(dtype)


def solve_selection_adam(
    R: Tensor,
    lam: float,
    beta: float = 1.0,
    penalty: str = "l1",
    steps: int = 10,
    lr: float = 0.1,
    S_init: Tensor | None = None,
) -> Tensor:
    """RCL's solver: Adam on the objective without proximal term, S clamped to [0, 1] after each step."""
    S = (torch.zeros_like(R) if S_init is None else S_init.clone()).requires_grad_(True)
    opt = torch.optim.Adam([S], lr=lr)
    with torch.enable_grad():
        for _ in range(steps):
            opt.zero_grad()
            objective(S, R.detach(), lam, beta, 0.0, 0.0, penalty).sum().backward()
            opt.step()
            with torch.no_grad():
                S.clamp_(0.0, 1.0)
    return S.detach()


def chosen_vs_unchosen(R: Tensor, chosen: Tensor) -> dict[str, float | None]:
    """Diagnostic of one S-step: how hard the difficulty-chosen edges are against the others.

    ``rank_chosen`` is the mean percentile rank (0 = easiest edge, 1 = hardest) of the chosen edges'
    residuals among all M edges (0.5 for a uniform sample); ``median_chosen``/``median_unchosen`` and
    the 10%/90% quantiles of both groups (None when a group is empty)."""
    out: dict[str, float | None] = {}
    M = R.numel()
    ranks = torch.empty(M, dtype=torch.float64)
    ranks[torch.argsort(R, stable=True)] = torch.arange(M, dtype=torch.float64) / max(M - 1, 1)
    out["rank_chosen"] = float(ranks[chosen].mean()) if bool(chosen.any()) else None
    probs = torch.tensor((0.1, 0.5, 0.9), dtype=torch.float64)
    for name, part in (("chosen", R[chosen]), ("unchosen", R[~chosen])):
        qs = torch.quantile(part.double(), probs).tolist() if part.numel() else [None] * 3
        out[f"q10_{name}"], out[f"median_{name}"], out[f"q90_{name}"] = qs
    return out


class SelfPacedEdgeScheduler:
    """Self-paced edge-mask scheduler (Algorithm 1, lines 9-19).

    ``step(R, epoch)`` solves for ``S`` (closed form or Adam), counts the curriculum set
    ``C_t = {e : S_e >= 0.5}``, caps its size at ``floor(mask_ratio*M)`` (freezing lambda) or paces lambda,
    then returns the boolean mask = ``floor(split_ratio*K_t)`` edges with highest ``S`` (ties: smaller
    residual with ``tie_break="residual"``, or uniformly at random with ``tie_break="random"``) plus
    ``K_t - floor(split_ratio*K_t)`` random edges, topped up to ``ceil(min_mask_ratio*M)`` random
    edges (a guard that is not in the paper). With ``gamma = 0`` every edge of ``C_t`` has ``S = 1``,
    so the tie rule decides which of them form the difficulty part: the easiest ones (``residual``),
    or a uniform sample of the edges the curriculum has admitted so far (``random``, the sampling of
    competence-based curricula).

    ``anti_curriculum=True`` ranks edges by *negated* residuals (hardest first; diagnostic only).

    The pace is tied to the training budget: from the first S-step at or after epoch
    ``floor(ramp_frac*T)`` (:attr:`curriculum_end`) on, the curriculum has *finished* and exactly
    ``cap`` edges are masked whatever the lambda rule (rules whose lambda would still be growing, or a
    stalled ``additive`` pace, are cut short there). ``CurMGAE.fit`` starts model selection and early
    stopping at that epoch. Each trace entry records ``finished`` and :func:`chosen_vs_unchosen` of
    the difficulty part (how hard the chosen edges are against the others).

    ``lambda_pace="quantile"`` recalibrates lambda on the *current* residuals at every S-step:
    ``lambda_t = beta * quantile(R_t, rho_t)`` with the target fraction ``rho_t`` growing from
    ``init_mask_ratio`` to ``pace_end`` (default ``mask_ratio``; 1 admits every edge) over the first
    ``ramp_frac`` of the epochs along ``pacing`` (:func:`pacing_fraction`). The curriculum size then
    follows ``rho_t`` whatever the scale or spread of the residuals, whereas ``additive`` calibrates
    once, on the first residuals (of an untrained decoder: all about 0.5 with a spread of a few
    thousandths, so its whole planned ramp spans almost no residual and K_t reaches the cap at the
    second S-step once training starts; the README gives the measured values).

    The keyword defaults are 0.2.0's (``lambda_pace="additive"``); :meth:`from_config` with a default
    :class:`~curmgae.CurMGAEConfig` gives the package default (``rcl_inverse``, chosen on validation).
    """

    def __init__(
        self,
        num_edges: int | None = None,
        *,
        mask_ratio: float = 0.7,
        split_ratio: float = 0.5,
        beta: float = 1.0,
        gamma: float = 0.0,
        penalty: str = "l1",
        s_solver: str = "closed_form",
        lambda_pace: str = "additive",
        pacing: str = "linear",
        lambda_init: float | None = None,
        mu: float | None = None,
        base_lambda: float = 1.0,
        start_lambda: float = 1e-3,
        init_mask_ratio: float = 0.1,
        ramp_frac: float = 2.0 / 3.0,
        min_mask_ratio: float = 0.05,
        random_pool: str = "remaining",
        total_epochs: int = 200,
        update_every: int = 1,
        anti_curriculum: bool = False,
        tie_break: str = "residual",
        pace_end: float | None = None,
        seed: int = 0,
    ) -> None:
        for name, val, choices in (
            ("tie_break", tie_break, TIE_BREAKS),
            ("penalty", penalty, PENALTIES),
            ("s_solver", s_solver, S_SOLVERS),
            ("lambda_pace", lambda_pace, LAMBDA_PACES),
            ("pacing", pacing, PACINGS),
            ("random_pool", random_pool, RANDOM_POOLS),
        ):
            if val not in choices:
                raise ValueError(
                    f"{name}={val!r} is not accepted; choose one of {', '.join(choices)}"
                )
        if not 0.0 < mask_ratio <= 1.0:
            raise ValueError(f"mask_ratio={mask_ratio!r} is outside the accepted range (0, 1]")
        if not 0.0 <= split_ratio <= 1.0:
            raise ValueError(f"split_ratio={split_ratio!r} is outside the accepted range [0, 1]")
        if pacing == "geometric" and init_mask_ratio <= 0:
            raise ValueError(
                f"pacing='geometric' needs init_mask_ratio > 0; got {init_mask_ratio!r}"
            )
        if int(update_every) < 1 or int(total_epochs) < 1:
            raise ValueError(
                f"update_every={update_every!r} and total_epochs={total_epochs!r} must be >= 1"
            )
        self.pacing = pacing
        self.mask_ratio, self.split_ratio = mask_ratio, split_ratio
        self.beta, self.gamma, self.penalty, self.s_solver = beta, gamma, penalty, s_solver
        self.lambda_pace, self.base_lambda, self.start_lambda = (
            lambda_pace,
            base_lambda,
            start_lambda,
        )
        self.lambda_init, self.mu_init = lambda_init, mu
        self.tie_break = tie_break
        self.pace_end = mask_ratio if pace_end is None else float(pace_end)
        if not init_mask_ratio <= self.pace_end <= 1.0:
            raise ValueError(
                f"pace_end={pace_end!r} is outside the accepted range "
                f"[init_mask_ratio={init_mask_ratio!r}, 1]"
            )
        self.init_mask_ratio, self.ramp_frac = init_mask_ratio, ramp_frac
        self.min_mask_ratio, self.random_pool = min_mask_ratio, random_pool
        self.T, self.update_every, self.anti_curriculum = (
            int(total_epochs),
            int(update_every),
            anti_curriculum,
        )
        # per-graph state, sized by reset(num_edges) (here when num_edges is given)
        self.M = 0
        self.cap = self.floor_count = 0
        self.ramp_epochs = self.n_ramp = 1
        self.lam: float | None = lambda_init
        self.mu: float | None = mu
        self.S = torch.zeros(0)
        self.difficulty_mask = torch.zeros(0, dtype=torch.bool)
        self.t = 0
        self.generator = torch.Generator().manual_seed(seed)
        self.trace: list[dict[str, Any]] = []
        if num_edges is not None:
            self.reset(num_edges)

    @classmethod
    def from_config(
        cls,
        config: Any,
        num_edges: int | None = None,
        total_epochs: int | None = None,
        seed: int = 0,
    ) -> SelfPacedEdgeScheduler:
        """The scheduler described by a :class:`curmgae.CurMGAEConfig` (``mask_ratio``, ``split_ratio``,
        ``beta``, ``gamma``, ``penalty``, ``s_solver``, ``lambda_pace``, ``pacing``, ...), over
        ``total_epochs`` (default ``config.epochs``); sized now when ``num_edges`` is given, else by
        :meth:`reset`."""
        kwargs = {name: getattr(config, name) for name in CONFIG_FIELDS}
        return cls(
            num_edges,
            **kwargs,
            total_epochs=int(total_epochs if total_epochs is not None else config.epochs),
            seed=seed,
        )

    def reset(
        self, num_edges: int, total_epochs: int | None = None, seed: int | None = None
    ) -> None:
        """Start a new curriculum over ``num_edges`` masking units (and ``total_epochs`` epochs, when
        given): S = 0, lambda and mu back to their initial values (auto-calibrated when None), an
        empty trace; the random part's generator is reseeded when ``seed`` is given."""
        if num_edges < 1:
            raise ValueError("curmgae needs at least one edge to mask (num_edges=0)")
        if total_epochs is not None:
            if int(total_epochs) < 1:
                raise ValueError(f"total_epochs={total_epochs!r} must be >= 1")
            self.T = int(total_epochs)
        self.M = int(num_edges)
        self.cap = math.floor(self.mask_ratio * self.M)
        self.floor_count = min(self.cap, math.ceil(self.min_mask_ratio * self.M))
        self.ramp_epochs = max(1, math.floor(self.ramp_frac * self.T))
        self.n_ramp = max(1, math.ceil(self.ramp_epochs / self.update_every))
        self.lam, self.mu = self.lambda_init, self.mu_init
        self.S = torch.zeros(self.M)
        self.difficulty_mask = torch.zeros(self.M, dtype=torch.bool)
        self.t = 0
        self.trace = []
        if seed is not None:
            self.generator.manual_seed(seed)

    @property
    def curriculum_end(self) -> int:
        """First epoch of the finished curriculum: the first S-step at or after ``floor(ramp_frac*T)``
        (S-steps run at epochs 1, 1 + update_every, ...). From it on, ``cap`` edges are masked."""
        u = self.update_every
        return 1 + u * math.ceil(max(self.ramp_epochs - 1, 0) / u)

    # ----------------------------------------------------------------------------------- lambda pacing
    def _calibrate(self, R: Tensor) -> None:
        """Auto-calibration of the additive pace (our reconstruction of Algorithm 1's step size mu; the
        paper's rule, App. D.3, is not available): ~init_mask_ratio edges selected at first."""
        if self.lam is None:
            self.lam = self.beta * float(torch.quantile(R, self.init_mask_ratio))
        if self.mu is None:
            target = self.beta * float(torch.quantile(R, self.mask_ratio))
            self.mu = max(target - self.lam, 0.0) / self.n_ramp

    def target_fraction(self, epoch: int) -> float:
        """``rho_t`` of the ``quantile`` pace at ``epoch``: :func:`pacing_fraction` of the progress
        ``epoch / floor(ramp_frac*T)`` from ``init_mask_ratio`` to ``mask_ratio``."""
        return pacing_fraction(
            epoch / self.ramp_epochs, self.init_mask_ratio, self.pace_end, self.pacing
        )

    def _scheduled_lambda(self, R: Tensor, epoch: int) -> float:
        T, r = self.T, self.ramp_epochs
        if self.lambda_pace == "rcl_inverse":
            return self.base_lambda / (r + 1 - epoch) if epoch < r else self.base_lambda
        if self.lambda_pace == "rcl_inverse_full":
            return self.base_lambda / max(T + 1 - epoch, 1)
        if self.lambda_pace == "linear":
            return (epoch / T) * self.base_lambda + self.start_lambda
        return self.beta * float(torch.quantile(R, self.target_fraction(epoch)))

    # ----------------------------------------------------------------------------------------- S-step
    def step(self, R: Tensor, epoch: int = 0) -> Tensor:
        """One S-step (Algorithm 1 lines 9-19) on residuals ``R`` [M]; returns the boolean mask [M]."""
        R = R.detach().float().cpu()
        if self.M == 0:
            raise RuntimeError("the scheduler is not sized yet: call reset(num_edges) first")
        if R.shape != (self.M,):
            raise ValueError(f"residuals must have shape [{self.M}]; got {tuple(R.shape)}")
        R_rank = -R if self.anti_curriculum else R
        R_sel = R_rank - R_rank.min() if self.anti_curriculum else R_rank  # keep residuals >= 0
        if self.lambda_pace == "additive":
            self._calibrate(R_sel)
        else:
            self.lam = self._scheduled_lambda(R_sel, epoch)
        lam = float(self.lam)  # type: ignore[arg-type]
        if self.s_solver == "closed_form":
            S = solve_selection(R_sel, lam, self.beta, self.gamma, self.S, self.penalty)
        else:
            S = solve_selection_adam(R_sel, lam, self.beta, self.penalty, S_init=self.S)
        self.S = S
        K = int((S >= 0.5).sum())
        # the pace is tied to the budget: from epoch floor(ramp_frac*T) on, the curriculum has finished
        # and the full mask schedule (cap = floor(mask_ratio*M) masked edges) holds, whatever lambda
        finished = epoch >= self.ramp_epochs
        capped = K >= self.cap or finished
        if capped:
            K = self.cap
        elif self.lambda_pace == "additive":
            self.lam = lam + float(self.mu)  # type: ignore[arg-type]
        # difficulty part: highest S, ties broken by smaller residual (lexicographic stable sort)
        if self.tie_break == "residual":  # ties in S: smaller residual first
            order = torch.sort(R_sel, stable=True).indices
        else:  # ties in S: uniformly at random (competence-based sampling from C_t)
            order = torch.randperm(self.M, generator=self.generator)
        order = order[torch.sort(-S[order], stable=True).indices]
        n_diff = math.floor(self.split_ratio * K)
        difficulty = order[:n_diff]
        mask = torch.zeros(self.M, dtype=torch.bool)
        mask[difficulty] = True
        # random part: from the remaining edges (default) or from C_t minus the difficulty part
        pool_mask = ~mask & (S >= 0.5) if self.random_pool == "curriculum" else ~mask
        pool = pool_mask.nonzero().view(-1)
        mask[pool[torch.randperm(pool.numel(), generator=self.generator)[: K - n_diff]]] = True
        missing = max(K, self.floor_count) - int(mask.sum())
        if (
            missing > 0
        ):  # guard (min_mask_ratio, not in the paper): random top-up from unmasked edges
            rest = (~mask).nonzero().view(-1)
            mask[rest[torch.randperm(rest.numel(), generator=self.generator)[:missing]]] = True
        self.difficulty_mask = torch.zeros(self.M, dtype=torch.bool)
        self.difficulty_mask[difficulty] = True
        qs = torch.quantile(R.double(), torch.tensor(TRACE_QUANTILES, dtype=torch.float64))
        entry: dict[str, Any] = {
            "t": self.t,
            "epoch": epoch,
            "lambda": lam,
            "mu": self.mu,
            "rho": self.target_fraction(epoch) if self.lambda_pace == "quantile" else None,
            "K_t": K,
            "cap": self.cap,
            "num_edges": self.M,
            "capped": capped,
            "n_difficulty": n_diff,
            "n_masked": int(mask.sum()),
            "masked_fraction": int(mask.sum()) / self.M,
            "mean_residual": float(R.mean()),
            "mean_residual_masked": float(R[mask].mean()) if bool(mask.any()) else None,
            "mean_residual_difficulty": float(R[difficulty].mean()) if n_diff else None,
        }
        for q, v in zip(TRACE_QUANTILES, qs.tolist(), strict=True):
            entry[f"residual_q{round(100 * q)}"] = v
        entry["finished"] = finished
        entry.update(chosen_vs_unchosen(R, self.difficulty_mask))
        self.trace.append(entry)
        self.t += 1
        return mask

    # -------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            "S": self.S.clone(),
            "lam": self.lam,
            "mu": self.mu,
            "t": self.t,
            "rng": self.generator.get_state(),
            "trace": list(self.trace),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["S"].numel() != self.M:  # a scheduler built without num_edges: size it first
            self.reset(int(state["S"].numel()))
        self.S = state["S"].clone()
        self.lam, self.mu, self.t = state["lam"], state["mu"], state["t"]
        self.generator.set_state(state["rng"])
        self.trace = list(state["trace"])
