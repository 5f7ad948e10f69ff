"""One small object per federated method: its client-side hooks and its server-side update.

Both engines (the in-process reference loop and the Flower apps) drive local training and
aggregation through :func:`fedgmt.algorithms.client_update` and
:func:`fedgmt.algorithms.server_aggregate`, which call the hooks of the method's object:

client side (one :class:`LocalRound` per participation)
    :meth:`Method.client_begin` (read the client state, build the teacher),
    :meth:`Method.extra_loss` (added to the cross-entropy of every batch),
    :meth:`Method.after_backward` (may replace the gradient, e.g. SAM),
    :meth:`Method.gradient_hook` (parameter-only gradient terms, added right before each SGD step, so
    also after Opacus' noise), :meth:`Method.client_end` (end-of-round state update);

server side
    :meth:`Method.server_init` (extra server state), :meth:`Method.payload` (what is sent),
    :meth:`Method.server_update` (``w_{t+1}`` from the weighted average ``w_bar``).

Adding a method means adding one subclass with a ``name``; it is registered on definition and
accepted everywhere a method name is (``FedConfig.method``, the CLI, the Flower apps).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

if TYPE_CHECKING:  # pragma: no cover
    from .algorithms import ClientReply, Payload, ServerState
    from .config import FedConfig

__all__ = [
    "REGISTRY",
    "FedAvg",
    "FedDyn",
    "FedGMT",
    "FedGMTKL",
    "FedSAM",
    "FedSpeed",
    "LocalRound",
    "Method",
    "Scaffold",
    "get_method",
    "kl_to_teacher",
    "trajectory_kl",
]

Params = dict[str, Tensor]
Criterion = Callable[[Tensor, Tensor], Tensor]

REGISTRY: dict[str, type[Method]] = {}
"""Method name -> class, filled by :meth:`Method.__init_subclass__` in definition order."""


def _clone(p: Params) -> Params:
    return {k: v.detach().clone() for k, v in p.items()}


def _zeros_like(p: Params) -> Params:
    return {k: torch.zeros_like(v) for k, v in p.items()}


def trajectory_kl(z: Tensor, s: Tensor, tau: float) -> Tensor:
    """``tau^2 * (1/B) sum_b KL(softmax(s_b/tau) || softmax(z_b/tau))`` (the client loss of FedGMT).

    Its gradient w.r.t. ``z`` is ``tau * (softmax(z/tau) - softmax(s/tau)) / B``.
    """
    return kl_to_teacher(z, F.log_softmax(s / tau, dim=1), tau)


def kl_to_teacher(z: Tensor, teacher_logp: Tensor, tau: float) -> Tensor:
    """:func:`trajectory_kl` with the teacher given as log-probabilities ``log_softmax(s/tau)``."""
    return (tau**2) * F.kl_div(
        F.log_softmax(z / tau, dim=1), teacher_logp, reduction="batchmean", log_target=True
    )


@torch.no_grad()
def _teacher_logp(teacher: nn.Module, x: Tensor, tau: float, chunk: int = 4096) -> Tensor:
    return torch.cat(
        [F.log_softmax(teacher(x[s : s + chunk]) / tau, dim=1) for s in range(0, len(x), chunk)]
    )


@dataclass
class LocalRound:
    """Everything one client's local round shares between the hooks of its method.

    ``state`` is a private copy of the client state; the engine commits it only when the round
    finishes, so a client that fails mid-round keeps its previous state (its dual ``h_i`` included).
    """

    model: nn.Module
    params: Params
    w_t: Params
    payload: Payload
    cfg: FedConfig
    lr: float
    state: dict[str, Any]
    partition_id: int
    x: Tensor
    extras: dict[str, Any] = field(default_factory=dict)


class Method:
    """Base class: FedAvg's behaviour, hooks that do nothing.

    Class attributes describe the method for the cost counters and the guards.
    """

    name: ClassVar[str] = ""
    passes: ClassVar[tuple[int, int]] = (1, 1)
    """Forward and backward passes per local step."""
    models_moved: ClassVar[tuple[int, int]] = (1, 1)
    """Models sent down and up per client and round."""
    dp_ok: ClassVar[bool] = True
    """Local DP-SGD (Opacus) is sound for this method."""
    central_dp_ok: ClassVar[bool] = True
    """A central-DP wrapper that noises only the aggregate protects this method (no server state
    built from un-noised client updates)."""
    stateful_clients: ClassVar[bool] = False
    """The client keeps state across rounds (dual, control variate, own EMA)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            REGISTRY[cls.name] = cls

    # ------------------------------------------------------------------ configuration
    def beta(self, cfg: FedConfig) -> float:
        """beta of the dual (``inf``: no dual)."""
        return math.inf

    def uses_kl(self, cfg: FedConfig) -> bool:
        """True when the trajectory KL term (and so the EMA teacher) is active."""
        return False

    def has_dual(self, cfg: FedConfig) -> bool:
        return not math.isinf(self.beta(cfg))

    # ------------------------------------------------------------------ client hooks
    def client_begin(self, r: LocalRound) -> None:
        """Read the client state and the payload before the first step."""

    def extra_loss(self, r: LocalRound, z: Tensor, xb: Tensor, idx: Tensor | None) -> Tensor | None:
        """A term added to ``CE(z, y)`` of every batch (None: nothing)."""
        return None

    def after_backward(self, r: LocalRound, criterion: Criterion, xb: Tensor, yb: Tensor) -> None:
        """Called after ``loss.backward()``; may replace ``p.grad`` (SAM)."""

    def gradient_hook(self, r: LocalRound) -> None:
        """Add parameter-only terms to ``p.grad``; runs right before every SGD step."""

    def client_end(self, r: LocalRound, delta: Params, steps: int) -> Params | None:
        """Update ``r.state`` after training; return SCAFFOLD's ``Delta c_i`` or None."""
        return None

    # ------------------------------------------------------------------ server hooks
    def server_init(self, state: ServerState, cfg: FedConfig) -> None:
        """Create the method's server state (EMA, ``H``, ``c``)."""

    def payload_extras(self, state: ServerState) -> dict[str, Any]:
        """Extra fields of the payload (``ema``, ``control``)."""
        return {}

    def server_update(
        self,
        state: ServerState,
        replies: Sequence[ClientReply],
        w_bar: dict[str, Tensor],
        cfg: FedConfig,
    ) -> dict[str, Tensor]:
        """``w_{t+1}`` from the weighted average ``w_bar`` of the replies (FedAvg: ``w_bar``)."""
        return w_bar

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _add_sam_gradient(
    model: nn.Module, params: Params, crit: Criterion, xb: Tensor, yb: Tensor, rho: float
) -> None:
    """Replace ``p.grad`` by the SAM gradient at ``w + rho g / (||g|| + 1e-12)`` (FedSAM)."""
    with torch.no_grad():
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params.values()]
        norm = torch.sqrt(torch.stack([(g * g).sum() for g in grads]).sum())
        eps = [g * (rho / (norm + 1e-12)) for g in grads]
        for p, e in zip(params.values(), eps):
            p.add_(e)
    for p in params.values():
        p.grad = None
    crit(model(xb), yb).backward()
    with torch.no_grad():
        for p, e in zip(params.values(), eps):
            p.sub_(e)


def _grad(p: Tensor) -> Tensor:
    if p.grad is None:
        p.grad = torch.zeros_like(p)
    return p.grad


# ---------------------------------------------------------------------------------- methods
class FedAvg(Method):
    """FedAvg (McMahan et al. 2017): local cross-entropy, ``w_{t+1} = sum_i p_i w_i``."""

    name = "fedavg"


class _SAMStep(Method):
    """The SAM gradient: each SGD step uses the gradient at ``w + rho g/||g||`` (two forward and
    two backward passes; per-sample DP clipping does not apply to it)."""

    passes = (2, 2)
    dp_ok = False

    def after_backward(self, r: LocalRound, criterion: Criterion, xb: Tensor, yb: Tensor) -> None:
        _add_sam_gradient(r.model, r.params, criterion, xb, yb, r.cfg.rho)


class FedSAM(_SAMStep, FedAvg):
    """FedSAM (Qu et al. 2022): FedAvg with the SAM gradient."""

    name = "fedsam"


class _DualMixin(Method):
    """The ADMM/FedDyn dual: client ``g += h_i/beta``, ``h_i += Delta_i``; server
    ``H += sum_i Delta_i``, ``w_{t+1} = w_bar + H/N`` (``dual_average='active'``: the mean ``h_i``
    of the replying clients)."""

    central_dp_ok = False
    stateful_clients = True

    def beta(self, cfg: FedConfig) -> float:
        return float(cfg.beta)

    def client_begin(self, r: LocalRound) -> None:
        super().client_begin(r)
        if self.has_dual(r.cfg):
            r.extras["h"] = r.state.get("h") or _zeros_like(r.w_t)
            r.extras["beta"] = self.beta(r.cfg)

    def client_end(self, r: LocalRound, delta: Params, steps: int) -> Params | None:
        out = super().client_end(r, delta, steps)
        h = r.extras.get("h")
        if h is not None:
            r.state["h"] = {k: h[k] + delta[k] for k in r.w_t}
        return out

    def server_init(self, state: ServerState, cfg: FedConfig) -> None:
        super().server_init(state, cfg)
        if self.has_dual(cfg):
            state.H = _zeros_like(state.params())

    def server_update(
        self,
        state: ServerState,
        replies: Sequence[ClientReply],
        w_bar: dict[str, Tensor],
        cfg: FedConfig,
    ) -> dict[str, Tensor]:
        w_next = super().server_update(state, replies, w_bar, cfg)
        if not self.has_dual(cfg):
            return w_next
        assert state.H is not None
        w_t = state.w
        for r in replies:
            d = {k: r.arrays[k] - w_t[k] for k in state.names}
            for k in state.names:
                state.H[k] += d[k]
            if cfg.dual_average == "active":
                prev = state.h_server.get(r.partition_id) or _zeros_like(d)
                state.h_server[r.partition_id] = {k: prev[k] + d[k] for k in d}
        pids = [r.partition_id for r in replies]
        for k in state.names:
            if cfg.dual_average == "active":
                corr = sum(state.h_server[i][k] for i in pids) / len(pids)
            else:
                corr = state.H[k] / state.num_clients
            w_next[k] = w_next[k] + corr
        return w_next


class FedDyn(_DualMixin, FedAvg):
    """FedDyn (Acar et al. 2021, Alg. 1) with ``alpha = 1/beta`` and the squared penalty:
    client gradient ``CE + h_i/beta + (1/beta)(w - w_t)``."""

    name = "feddyn"

    def gradient_hook(self, r: LocalRound) -> None:
        h, beta = r.extras.get("h"), self.beta(r.cfg)
        with torch.no_grad():
            for k, p in r.params.items():
                g = _grad(p)
                if h is not None:
                    g.add_(h[k], alpha=1.0 / beta)
                g.add_(p - r.w_t[k], alpha=1.0 / beta)


class FedSpeed(_SAMStep, FedDyn):
    """FedSpeed in the FL-SAM form: FedSAM's gradient plus the (squared) FedDyn regulariser."""

    name = "fedspeed"


class Scaffold(FedAvg):
    """SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II): local gradient ``CE + c - c_i``;
    ``c_i+ = c_i - c + (w_t - w_i)/(eta S(K_i, mu))``; server ``w_{t+1} = w_t + eta_g (w_bar - w_t)``,
    ``c += (1/N) sum_i Delta c_i``."""

    name = "scaffold"
    models_moved = (2, 2)
    central_dp_ok = False
    stateful_clients = True

    def client_begin(self, r: LocalRound) -> None:
        control = r.payload.control
        if control is None:
            raise ValueError("scaffold payload lacks the server control variate 'control'")
        c_i = r.state.get("c_i") or _zeros_like(r.w_t)
        r.extras["c_i"] = c_i
        r.extras["c_diff"] = {k: control[k] - c_i[k] for k in r.w_t}

    def gradient_hook(self, r: LocalRound) -> None:
        c_diff = r.extras["c_diff"]
        with torch.no_grad():
            for k, p in r.params.items():
                _grad(p).add_(c_diff[k])

    def client_end(self, r: LocalRound, delta: Params, steps: int) -> Params | None:
        from .guard import momentum_sum

        c_i, control = r.extras["c_i"], r.payload.control
        assert control is not None
        with torch.no_grad():
            # K_i * eta generalised to momentum SGD: eta * S(K_i, mu) (= K_i * eta when mu = 0)
            k_eta = r.lr * momentum_sum(max(steps, 1), r.cfg.momentum)
            c_plus = {k: c_i[k] - control[k] - delta[k] / k_eta for k in r.w_t}
            r.state["c_i"] = c_plus
            return {k: c_plus[k] - c_i[k] for k in r.w_t}

    def server_init(self, state: ServerState, cfg: FedConfig) -> None:
        state.c = _zeros_like(state.params())

    def payload_extras(self, state: ServerState) -> dict[str, Any]:
        return {"control": state.c}

    def server_update(
        self,
        state: ServerState,
        replies: Sequence[ClientReply],
        w_bar: dict[str, Tensor],
        cfg: FedConfig,
    ) -> dict[str, Tensor]:
        w_t = state.w
        w_next = {
            k: (w_t[k] + cfg.server_lr * (w_bar[k] - w_t[k]))
            if torch.is_floating_point(w_t[k])
            else w_bar[k]
            for k in w_t
        }
        assert state.c is not None
        for r in replies:
            if r.control_delta is None:
                raise ValueError(f"scaffold reply of client {r.partition_id} lacks control-delta")
            for k in state.names:
                state.c[k] += r.control_delta[k] / state.num_clients
        return w_next


class FedGMT(_DualMixin, FedAvg):
    """FedGMT (the official FL-SAM code, ``clientgmt.py`` / ``servergmt.py``).

    Client: ``l = CE(z, y) + gamma tau^2 KL(softmax(s/tau) || softmax(z/tau))`` with ``s`` the EMA
    teacher ``e_t`` (stop-gradient), gradient ``+ h_i/beta`` (+ the optional ``prox (w - w_t)``),
    ``h_i += Delta_i``. Server: ``w_{t+1} = w_bar + H/N``, ``e_{t+1} = alpha e_t + (1-alpha) w_{t+1}``
    (parameters only).
    """

    name = "fedgmt"
    passes = (2, 1)
    models_moved = (2, 1)

    def uses_kl(self, cfg: FedConfig) -> bool:
        return cfg.gamma > 0

    # -- client
    def client_begin(self, r: LocalRound) -> None:
        super().client_begin(r)
        cfg = r.cfg
        if not self.uses_kl(cfg):
            return
        if cfg.ema_location == "client":
            ema = r.state.get("ema")
            ema = _clone(r.w_t) if ema is None else ema
            ema = {k: cfg.ema_alpha * ema[k] + (1 - cfg.ema_alpha) * r.w_t[k] for k in ema}
            r.state["ema"] = ema
        else:
            if r.payload.ema is None:
                raise ValueError("fedgmt payload lacks the EMA model 'ema'")
            ema = r.payload.ema
        teacher = copy.deepcopy(r.model)
        with torch.no_grad():
            for k, p in teacher.named_parameters():
                p.copy_(ema[k])
                p.requires_grad_(False)
        teacher.train(cfg.teacher_mode == "train")
        r.extras["teacher"] = teacher
        if not cfg.dp:
            # The teacher e_t is frozen during the round, so its outputs on the client's data are
            # computed once (one pass over n_i samples instead of one teacher forward per step).
            r.extras["teacher_all"] = _teacher_logp(teacher, r.x, cfg.tau)

    def extra_loss(self, r: LocalRound, z: Tensor, xb: Tensor, idx: Tensor | None) -> Tensor | None:
        teacher = r.extras.get("teacher")
        if teacher is None:
            return None
        teacher_all = r.extras.get("teacher_all")
        if teacher_all is not None and idx is not None:
            t_logp = teacher_all[idx]
        else:
            t_logp = _teacher_logp(teacher, xb, r.cfg.tau)
        return r.cfg.gamma * kl_to_teacher(z, t_logp, r.cfg.tau)

    def gradient_hook(self, r: LocalRound) -> None:
        h = r.extras.get("h")
        prox = r.cfg.prox
        if h is None and prox <= 0:
            return
        beta = r.extras.get("beta", math.inf)
        with torch.no_grad():
            for k, p in r.params.items():
                g = _grad(p)
                if h is not None:
                    g.add_(h[k], alpha=1.0 / beta)
                if prox > 0:
                    g.add_(p - r.w_t[k], alpha=prox)

    # -- server
    def server_init(self, state: ServerState, cfg: FedConfig) -> None:
        super().server_init(state, cfg)
        if self.uses_kl(cfg) and cfg.ema_location == "server":
            state.ema = _clone(state.params())

    def payload_extras(self, state: ServerState) -> dict[str, Any]:
        return {"ema": state.ema}

    def server_update(
        self,
        state: ServerState,
        replies: Sequence[ClientReply],
        w_bar: dict[str, Tensor],
        cfg: FedConfig,
    ) -> dict[str, Tensor]:
        w_next = super().server_update(state, replies, w_bar, cfg)
        if state.ema is not None:
            a = cfg.ema_alpha
            state.ema = {k: a * state.ema[k] + (1 - a) * w_next[k] for k in state.names}
        return w_next


class FedGMTKL(FedGMT):
    """FedGMT with the dual off (beta = inf): the trajectory KL alone. An EMA of released global
    models is post-processing, so a central-DP wrapper protects it."""

    name = "fedgmt-kl"
    central_dp_ok = True
    stateful_clients = False

    def beta(self, cfg: FedConfig) -> float:
        return math.inf


def get_method(method: str | Method) -> Method:
    """The method object for a name (or the object itself)."""
    if isinstance(method, Method):
        return method
    cls = REGISTRY.get(method)
    if cls is None:
        raise ValueError(f"unknown method {method!r}: expected one of {', '.join(REGISTRY)}")
    return cls()
