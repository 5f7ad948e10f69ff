"""Shared arithmetic of all methods. Pure torch; both engines call only
:func:`client_update`, :func:`server_payload` and :func:`server_aggregate`.

Notation: ``w`` parameters (ordered ``named_parameters()``), ``e`` the EMA (trajectory) model,
``h_i`` the client dual (paper ``u_i = -h_i / beta``), ``H = sum_i h_i`` kept by the server,
``c`` / ``c_i`` SCAFFOLD control variates.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import FedConfig
from .guard import DivergenceError, local_steps
from .methods import (
    Criterion,
    LocalRound,
    Method,
    Params,
    _clone,
    get_method,
    kl_to_teacher,
    trajectory_kl,
)

__all__ = [
    "ClientFailure",
    "ClientReply",
    "Params",
    "Payload",
    "ServerState",
    "client_fails",
    "client_generator",
    "client_update",
    "init_server_state",
    "kl_to_teacher",
    "sample_clients",
    "server_aggregate",
    "server_payload",
    "trajectory_kl",
]


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
    client_store: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Client states kept by the server (``dual_store='server'``: stateless clients)."""

    def params(self) -> Params:
        return {k: self.w[k] for k in self.names}

    def state_dict(self) -> dict[str, Any]:
        """Checkpoint (w, e, H, c, h_server, client_store, round, lr, tallies)."""
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
class ClientFailure(RuntimeError):
    """A client that drops out mid-round (simulated with ``fail_fraction``, or a real fault)."""


def client_fails(seed: int, round_t: int, partition_id: int, fail_fraction: float) -> bool:
    """Whether client ``partition_id`` drops out in round ``t`` (Bernoulli(``fail_fraction``) keyed
    on ``(seed, t, partition_id)``, so both engines and every method see the same failures)."""
    if fail_fraction <= 0:
        return False
    rng = np.random.default_rng([int(seed), int(round_t), int(partition_id), 0xFA11])
    return bool(rng.random() < fail_fraction)


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
    method: str | Method,
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
    """Local training of one client, driven by the hooks of the method's object
    (:mod:`fedgmt.methods`): FedGMT's client update (the official code
    ``system/flcore/clients/clientgmt.py``) or a baseline's (FedSAM, FedDyn Alg. 1, SCAFFOLD Alg. 1
    option II, FedSpeed).

    Per batch: ``l = CE(z, y) + method.extra_loss`` (FedGMT: ``gamma tau^2 KL(softmax(s/tau) ||
    softmax(z/tau))``), backward, ``method.after_backward`` (SAM), then the parameter-only gradient
    terms of ``method.gradient_hook`` (``h_i / beta``, FedDyn's ``(1/beta)(w - w_t)``, ``prox``,
    SCAFFOLD's ``c - c_i``) right before the SGD step. They are added in a step pre-hook of the
    torch optimiser, so under DP-SGD they are added after Opacus' noise. After training
    ``method.client_end`` updates the state (``h_i <- h_i + (w - w_t)``, SCAFFOLD's ``c_i``).

    ``client_state`` (keys ``h``, ``c_i``, ``ema``, ``participations``, ``dp``) is updated only
    when the round completes: a client that fails mid-round (:class:`ClientFailure`, simulated with
    ``cfg.fail_fraction``) keeps its previous state. ``criterion(z, y)`` replaces cross-entropy
    (custom objectives, e.g. quadratics).
    """
    algo = get_method(method)
    t0 = time.perf_counter()
    crit: Criterion = criterion or F.cross_entropy
    x, y = data
    n = len(y)
    if n == 0:
        raise ValueError(f"client {partition_id} has no training data")
    model.load_state_dict(payload.arrays)
    model.train()
    params: Params = dict(model.named_parameters())
    lr = float(payload.lr)
    r = LocalRound(
        model=model,
        params=params,
        w_t=_clone(params),
        payload=payload,
        cfg=cfg,
        lr=lr,
        state=dict(client_state),
        partition_id=partition_id,
        x=x,
    )
    algo.client_begin(r)
    fail_at = None
    if client_fails(cfg.seed, payload.round, partition_id, cfg.fail_fraction):
        fail_at = max(1, local_steps(n, cfg.batch_size, cfg.local_epochs) // 2)

    # fresh optimiser every round: momentum restarts (as in the official code)
    opt = torch.optim.SGD(
        list(params.values()), lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
    )
    opt.register_step_pre_hook(lambda *_: algo.gradient_hook(r))

    train_module: nn.Module = model
    step_opt: torch.optim.Optimizer = opt
    dp_ctx = None
    if cfg.dp:
        from .dp import make_private  # optional dependency: fedgmt[dp]

        dp_ctx = make_private(model, opt, x, y, cfg, r.state, generator)
        train_module, step_opt = dp_ctx.module, dp_ctx.optimizer
        batches: Iterable[tuple[Tensor, Tensor, Tensor | None]] = (
            (xb, yb, None) for xb, yb in dp_ctx.batches()
        )
    else:
        batches = _batches(x, y, cfg.batch_size, cfg.local_epochs, generator)

    steps, loss_sum, kl_sum = 0, 0.0, 0.0
    try:
        for xb, yb, idx in batches:
            if len(yb) == 0:
                continue
            if fail_at is not None and steps >= fail_at:
                raise ClientFailure(
                    f"client {partition_id} dropped out at step {steps} of round {payload.round} "
                    f"(simulated, fail_fraction={cfg.fail_fraction:g})"
                )
            step_opt.zero_grad(set_to_none=True)
            z = train_module(xb)
            loss = crit(z, yb)
            extra = algo.extra_loss(r, z, xb, idx)
            if extra is not None:
                kl_sum += float(extra.detach())
                loss = loss + extra
            if not torch.isfinite(loss):
                raise DivergenceError(
                    f"non-finite local loss at round {payload.round} step {steps + 1} on client "
                    f"{partition_id} (lr={lr:g}, beta={cfg.beta:g}); lower lr or raise beta"
                )
            loss.backward()
            algo.after_backward(r, crit, xb, yb)
            step_opt.step()
            steps += 1
            loss_sum += float(loss.detach())
    except BaseException:
        if dp_ctx is not None:
            dp_ctx.close()  # the model is reused: drop Opacus' hooks
        raise

    # --- after training -------------------------------------------------------------------
    with torch.no_grad():
        delta = {k: params[k].detach() - r.w_t[k] for k in r.w_t}
    control_delta = algo.client_end(r, delta, steps)
    r.state["participations"] = int(r.state.get("participations", 0)) + 1
    metrics: dict[str, float] = {
        "num-examples": float(n),
        "partition-id": float(partition_id),
        "steps": float(steps),
        "participations": float(r.state["participations"]),
        "train-loss": loss_sum / max(steps, 1),
        "kl-loss": kl_sum / max(steps, 1),
    }
    if dp_ctx is not None:
        metrics["dp-epsilon"] = dp_ctx.finish()
    metrics["client-time"] = time.perf_counter() - t0
    arrays = {k: v.detach().clone() for k, v in model.state_dict().items()}
    client_state.clear()
    client_state.update(r.state)  # commit: the round completed
    return ClientReply(partition_id, n, arrays, metrics, control_delta)


# ---------------------------------------------------------------------------- server
def init_server_state(
    method: str | Method, cfg: FedConfig, w_1: dict[str, Tensor], names: Sequence[str]
) -> ServerState:
    """``e_1 = w_1``, ``H = 0``, ``c = 0`` (server initialisation; ``method.server_init``)."""
    algo = get_method(method)
    w = {k: v.detach().clone() for k, v in w_1.items()}
    state = ServerState(w=w, names=list(names), num_clients=cfg.num_clients, lr=cfg.lr)
    algo.server_init(state, cfg)
    return state


def server_payload(method: str | Method, state: ServerState) -> Payload:
    """Payload of round ``state.round``: ``(w_t, eta_t)`` plus the method's extras (``e_t``, ``c``)."""
    extras = get_method(method).payload_extras(state)
    return Payload(arrays=state.w, lr=state.lr, round=state.round, **extras)


def server_aggregate(
    method: str | Method, state: ServerState, replies: Sequence[ClientReply], cfg: FedConfig
) -> dict[str, float]:
    """One server round, in place on ``state`` (FedGMT: the official
    ``system/flcore/servers/servergmt.py``; FedDyn Alg. 1; SCAFFOLD Alg. 1).

    ``w_bar = sum_i p_i w_i`` over the replies that arrived; then ``method.server_update``: dual
    methods ``H += sum_i (w_i - w_t)``, ``w_{t+1} = w_bar + H/N``; SCAFFOLD
    ``w_{t+1} = w_t + eta_g (w_bar - w_t)``, ``c += (1/N) sum_i Delta c_i``; FedGMT also
    ``e_{t+1} = alpha e_t + (1 - alpha) w_{t+1}`` (parameters only). Always ``eta_{t+1} = d eta_t``.
    A round in which no client replied leaves the model and every server state unchanged.

    Raises:
        ValueError: duplicate partition ids.
        DivergenceError: non-finite ``w_{t+1}`` or ``H``.
    """
    algo = get_method(method)
    if not replies:
        state.round += 1
        state.lr *= cfg.lr_decay
        return {"num-clients": 0.0, "client-time": 0.0, "train-loss": 0.0}
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

    w_next = algo.server_update(state, replies, w_bar, cfg)

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
