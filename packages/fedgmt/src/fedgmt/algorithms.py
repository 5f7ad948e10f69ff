"""Shared arithmetic of all methods. Pure torch; both engines call only
:func:`client_update`, :func:`server_payload` and :func:`server_aggregate`.

Notation: ``w`` parameters (ordered ``named_parameters()``), ``e`` the EMA (trajectory) model,
``h_i`` the client dual (paper ``u_i = -h_i / beta``), ``H = sum_i h_i`` kept by the server,
``c`` / ``c_i`` SCAFFOLD control variates.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import DUAL_METHODS, METHODS, SAM_METHODS, FedConfig
from .guard import DivergenceError, momentum_sum

__all__ = [
    "ClientReply",
    "Params",
    "Payload",
    "ServerState",
    "client_generator",
    "client_update",
    "init_server_state",
    "sample_clients",
    "server_aggregate",
    "server_payload",
    "trajectory_kl",
]

Params = dict[str, Tensor]
Criterion = Callable[[Tensor, Tensor], Tensor]


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: expected one of {', '.join(METHODS)}")


def method_beta(method: str, cfg: FedConfig) -> float:
    """beta of the dual for ``method`` (``inf``: no dual)."""
    if method in DUAL_METHODS:
        return float(cfg.beta)
    return math.inf


def method_uses_kl(method: str, cfg: FedConfig) -> bool:
    return method in ("fedgmt", "fedgmt-kl") and cfg.gamma > 0


def _clone(p: Params) -> Params:
    return {k: v.detach().clone() for k, v in p.items()}


def _zeros_like(p: Params) -> Params:
    return {k: torch.zeros_like(v) for k, v in p.items()}


def param_names(model: nn.Module) -> list[str]:
    return [n for n, _ in model.named_parameters()]


# ---------------------------------------------------------------------------- messages
@dataclass
class Payload:
    """What the server sends in round ``t``: ``w_t`` (full state dict), ``e_t``, ``c``, ``eta_t``."""

    arrays: dict[str, Tensor]
    lr: float
    round: int
    ema: Params | None = None
    control: Params | None = None


@dataclass
class ClientReply:
    """What a client returns: ``w_i`` (full state dict), ``n_i`` and, for SCAFFOLD, ``Delta c_i``."""

    partition_id: int
    num_examples: int
    arrays: dict[str, Tensor]
    metrics: dict[str, float] = field(default_factory=dict)
    control_delta: Params | None = None


@dataclass
class ServerState:
    """Server state: ``w``, ``e``, ``H``, ``c``, the learning rate and participation tallies."""

    w: dict[str, Tensor]
    names: list[str]
    num_clients: int
    lr: float
    round: int = 1
    ema: Params | None = None
    H: Params | None = None
    c: Params | None = None
    h_server: dict[int, Params] = field(default_factory=dict)
    participations: dict[int, int] = field(default_factory=dict)

    def params(self) -> Params:
        return {k: self.w[k] for k in self.names}

    def state_dict(self) -> dict[str, Any]:
        """Checkpoint (w, e, H, c, h_server, round, lr, tallies)."""
        return copy.deepcopy(self.__dict__)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> ServerState:
        return cls(**copy.deepcopy(state))


# ---------------------------------------------------------------------------- seeding
def client_generator(seed: int, round_t: int, partition_id: int) -> torch.Generator:
    """``torch.Generator`` seeded by ``SeedSequence([seed, t, partition_id])`` (both engines)."""
    s = np.random.SeedSequence([int(seed), int(round_t), int(partition_id)]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(s))


def sample_clients(seed: int, round_t: int, num_clients: int, num_sampled: int) -> list[int]:
    """``S_t``: ``default_rng([seed, t]).choice(N, m, replace=False)``, sorted."""
    rng = np.random.default_rng([int(seed), int(round_t)])
    return sorted(int(i) for i in rng.choice(num_clients, num_sampled, replace=False))


# ---------------------------------------------------------------------------- client
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


def _batches(
    x: Tensor, y: Tensor, batch_size: int, epochs: int, generator: torch.Generator
) -> Iterable[tuple[Tensor, Tensor, Tensor | None]]:
    n = len(y)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator)
        for start in range(0, n, batch_size):
            idx = perm[start : start + batch_size]
            yield x[idx], y[idx], idx


def client_update(
    method: str,
    model: nn.Module,
    data: tuple[Tensor, Tensor],
    payload: Payload,
    client_state: dict[str, Any],
    cfg: FedConfig,
    generator: torch.Generator,
    *,
    partition_id: int = 0,
    criterion: Criterion | None = None,
) -> ClientReply:
    """Local training of one client: FedGMT's client update (the paper's client step, as in the
    official code ``system/flcore/clients/clientgmt.py``) or a baseline's (FedSAM, FedDyn Alg. 1,
    SCAFFOLD Alg. 1 option II, FedSpeed).

    Per batch: ``l = CE(z, y) + gamma tau^2 KL(softmax(s/tau) || softmax(z/tau))`` (FedGMT),
    backward, then the parameter-only gradient terms are added right before the SGD step:
    ``h_i / beta`` (dual), ``(1/beta)(w - w_t)`` (FedDyn/FedSpeed squared penalty),
    ``prox (w - w_t)`` (FedGMT option) and ``c - c_i`` (SCAFFOLD). They are added in a step
    pre-hook of the torch optimiser, so under DP-SGD they are added after Opacus' noise (3.7).
    After training: ``h_i <- h_i + (w - w_t)``; SCAFFOLD option II updates ``c_i``.

    ``client_state`` is modified in place (keys ``h``, ``c_i``, ``ema``, ``participations``,
    ``dp``). ``criterion(z, y)`` replaces cross-entropy (custom objectives, e.g. quadratics).
    """
    _check_method(method)
    t0 = time.perf_counter()
    crit: Criterion = criterion or F.cross_entropy
    x, y = data
    n = len(y)
    if n == 0:
        raise ValueError(f"client {partition_id} has no training data")
    model.load_state_dict(payload.arrays)
    model.train()
    params: Params = dict(model.named_parameters())
    w_t = _clone(params)
    beta = method_beta(method, cfg)
    dual = not math.isinf(beta)
    lr = float(payload.lr)

    # --- teacher e_t (stop-gradient) -----------------------------------------------------
    teacher: nn.Module | None = None
    if method_uses_kl(method, cfg):
        if cfg.ema_location == "client":
            ema = client_state.get("ema")
            ema = _clone(w_t) if ema is None else ema
            ema = {k: cfg.ema_alpha * ema[k] + (1 - cfg.ema_alpha) * w_t[k] for k in ema}
            client_state["ema"] = ema
        else:
            if payload.ema is None:
                raise ValueError("fedgmt payload lacks the EMA model 'ema'")
            ema = payload.ema
        teacher = copy.deepcopy(model)
        with torch.no_grad():
            for k, p in teacher.named_parameters():
                p.copy_(ema[k])
                p.requires_grad_(False)
        teacher.train(cfg.teacher_mode == "train")

    # --- constant linear terms -----------------------------------------------------------
    h: Params | None = None
    if dual:
        h = client_state.get("h") or _zeros_like(w_t)
    c_diff: Params | None = None
    c_i: Params | None = None
    if method == "scaffold":
        if payload.control is None:
            raise ValueError("scaffold payload lacks the server control variate 'control'")
        c_i = client_state.get("c_i") or _zeros_like(w_t)
        c_diff = {k: payload.control[k] - c_i[k] for k in w_t}
    dyn = method in ("feddyn", "fedspeed")
    prox = cfg.prox if method == "fedgmt" else 0.0

    def add_linear_terms(*_: Any) -> None:
        with torch.no_grad():
            for k, p in params.items():
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                g = p.grad
                if h is not None:
                    g.add_(h[k], alpha=1.0 / beta)
                if dyn:
                    g.add_(p - w_t[k], alpha=1.0 / beta)
                if prox > 0:
                    g.add_(p - w_t[k], alpha=prox)
                if c_diff is not None:
                    g.add_(c_diff[k])

    # fresh optimiser every round: momentum restarts (as in the official code)
    opt = torch.optim.SGD(
        list(params.values()), lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
    )
    opt.register_step_pre_hook(add_linear_terms)

    train_module: nn.Module = model
    step_opt: torch.optim.Optimizer = opt
    dp_ctx = None
    if cfg.dp:
        from .dp import make_private  # optional dependency: fedgmt[dp]

        dp_ctx = make_private(model, opt, x, y, cfg, client_state, generator)
        train_module, step_opt = dp_ctx.module, dp_ctx.optimizer
        batches: Iterable[tuple[Tensor, Tensor, Tensor | None]] = (
            (xb, yb, None) for xb, yb in dp_ctx.batches()
        )
        teacher_all = None
    else:
        batches = _batches(x, y, cfg.batch_size, cfg.local_epochs, generator)
        # The teacher e_t is frozen during the round, so its outputs on the client's data are
        # computed once (one pass over n_i samples instead of one teacher forward per step).
        teacher_all = _teacher_logp(teacher, x, cfg.tau) if teacher is not None else None

    sam = method in SAM_METHODS
    rho = cfg.rho
    steps, loss_sum, kl_sum = 0, 0.0, 0.0
    for xb, yb, idx in batches:
        if len(yb) == 0:
            continue
        step_opt.zero_grad(set_to_none=True)
        z = train_module(xb)
        loss = crit(z, yb)
        if teacher is not None:
            if teacher_all is not None and idx is not None:
                t_logp = teacher_all[idx]
            else:
                t_logp = _teacher_logp(teacher, xb, cfg.tau)
            kl = cfg.gamma * kl_to_teacher(z, t_logp, cfg.tau)
            kl_sum += float(kl.detach())
            loss = loss + kl
        if not torch.isfinite(loss):
            raise DivergenceError(
                f"non-finite local loss at round {payload.round} step {steps + 1} on client "
                f"{partition_id} (lr={lr:g}, beta={cfg.beta:g}); lower lr or raise beta"
            )
        loss.backward()
        if sam:
            _sam_gradient(model, params, crit, xb, yb, rho)
        step_opt.step()
        steps += 1
        loss_sum += float(loss.detach())

    # --- after training -------------------------------------------------------------------
    with torch.no_grad():
        delta = {k: params[k].detach() - w_t[k] for k in w_t}
        if h is not None:
            client_state["h"] = {k: h[k] + delta[k] for k in w_t}
        control_delta = None
        if c_i is not None and payload.control is not None:
            # K_i * eta generalised to momentum SGD: eta * S(K_i, mu) (= K_i * eta when mu = 0)
            k_eta = lr * momentum_sum(max(steps, 1), cfg.momentum)
            c_plus = {k: c_i[k] - payload.control[k] - delta[k] / k_eta for k in w_t}
            control_delta = {k: c_plus[k] - c_i[k] for k in w_t}
            client_state["c_i"] = c_plus
    client_state["participations"] = int(client_state.get("participations", 0)) + 1
    metrics: dict[str, float] = {
        "num-examples": float(n),
        "partition-id": float(partition_id),
        "steps": float(steps),
        "participations": float(client_state["participations"]),
        "train-loss": loss_sum / max(steps, 1),
        "kl-loss": kl_sum / max(steps, 1),
    }
    if dp_ctx is not None:
        metrics["dp-epsilon"] = dp_ctx.finish()
    metrics["client-time"] = time.perf_counter() - t0
    arrays = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return ClientReply(partition_id, n, arrays, metrics, control_delta)


def _sam_gradient(
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


# ---------------------------------------------------------------------------- server
def init_server_state(
    method: str, cfg: FedConfig, w_1: dict[str, Tensor], names: Sequence[str]
) -> ServerState:
    """``e_1 = w_1``, ``H = 0``, ``c = 0`` (server initialisation)."""
    _check_method(method)
    w = {k: v.detach().clone() for k, v in w_1.items()}
    names = list(names)
    params = {k: w[k] for k in names}
    state = ServerState(w=w, names=names, num_clients=cfg.num_clients, lr=cfg.lr)
    if method_uses_kl(method, cfg) and cfg.ema_location == "server":
        state.ema = _clone(params)
    if not math.isinf(method_beta(method, cfg)):
        state.H = _zeros_like(params)
    if method == "scaffold":
        state.c = _zeros_like(params)
    return state


def server_payload(method: str, state: ServerState) -> Payload:
    """Payload of round ``state.round``: ``(w_t, e_t, c, eta_t)``."""
    return Payload(arrays=state.w, lr=state.lr, round=state.round, ema=state.ema, control=state.c)


def server_aggregate(
    method: str, state: ServerState, replies: Sequence[ClientReply], cfg: FedConfig
) -> dict[str, float]:
    """One server round, in place on ``state`` (FedGMT: the official
    ``system/flcore/servers/servergmt.py``; FedDyn Alg. 1; SCAFFOLD Alg. 1).

    ``w_bar = sum_i p_i w_i``; dual methods: ``H += sum_i (w_i - w_t)``, ``w_{t+1} = w_bar + H/N``
    (``dual_average='active'``: ``+ (1/m) sum_{i in S_t} h_i``); SCAFFOLD:
    ``w_{t+1} = w_t + eta_g (w_bar - w_t)``, ``c += (1/N) sum_i Delta c_i``; FedGMT:
    ``e_{t+1} = alpha e_t + (1 - alpha) w_{t+1}`` (parameters only); ``eta_{t+1} = d eta_t``.

    Raises:
        ValueError: no replies, or duplicate partition ids.
        DivergenceError: non-finite ``w_{t+1}`` or ``H``.
    """
    _check_method(method)
    if not replies:
        raise ValueError(f"round {state.round}: no client replies to aggregate")
    replies = sorted(replies, key=lambda r: r.partition_id)
    pids = [r.partition_id for r in replies]
    if len(set(pids)) != len(pids):
        raise ValueError(f"round {state.round}: duplicate partition ids in replies: {pids}")
    w_t = state.w
    if cfg.aggregation_weights == "uniform":
        p = [1.0 / len(replies)] * len(replies)
    else:
        total = float(sum(r.num_examples for r in replies))
        p = [r.num_examples / total for r in replies]

    w_bar: dict[str, Tensor] = {}
    for k, v in w_t.items():
        if not torch.is_floating_point(v):
            w_bar[k] = replies[0].arrays[k].clone()  # integer buffers: take the first
            continue
        acc = torch.zeros_like(v)
        for p_i, r in zip(p, replies):
            acc += p_i * r.arrays[k]
        w_bar[k] = acc

    beta = method_beta(method, cfg)
    if method == "scaffold":
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
    else:
        w_next = w_bar
    if not math.isinf(beta):
        assert state.H is not None
        for r in replies:
            d = {k: r.arrays[k] - w_t[k] for k in state.names}
            for k in state.names:
                state.H[k] += d[k]
            if cfg.dual_average == "active":
                prev = state.h_server.get(r.partition_id) or _zeros_like(d)
                state.h_server[r.partition_id] = {k: prev[k] + d[k] for k in d}
        for k in state.names:
            if cfg.dual_average == "active":
                corr = sum(state.h_server[i][k] for i in pids) / len(pids)
            else:
                corr = state.H[k] / state.num_clients
            w_next[k] = w_next[k] + corr
    if state.ema is not None:
        a = cfg.ema_alpha
        state.ema = {k: a * state.ema[k] + (1 - a) * w_next[k] for k in state.names}

    for k, v in w_next.items():
        if torch.is_floating_point(v) and not torch.isfinite(v).all():
            raise DivergenceError(
                f"non-finite global model after round {state.round} (parameter {k}); "
                f"lr={cfg.lr:g} beta={cfg.beta:g}: lower lr or raise beta"
            )
    if state.H is not None and not all(torch.isfinite(v).all() for v in state.H.values()):
        raise DivergenceError(
            f"non-finite dual sum H after round {state.round}; lr={cfg.lr:g} beta={cfg.beta:g}"
        )
    for r in replies:
        expected = state.participations.get(r.partition_id, 0) + 1
        state.participations[r.partition_id] = expected
        got = r.metrics.get("participations")
        if got is not None and int(got) != expected:
            warnings.warn(
                f"client {r.partition_id} reports {int(got)} participations, server counted "
                f"{expected}: it lost its dual state",
                stacklevel=2,
            )
    state.w = w_next
    state.round += 1
    state.lr *= cfg.lr_decay
    return {
        "num-clients": float(len(replies)),
        "client-time": float(sum(r.metrics.get("client-time", 0.0) for r in replies)),
        "train-loss": float(
            sum(pi * r.metrics.get("train-loss", 0.0) for pi, r in zip(p, replies))
        ),
    }
