"""Flower strategy: :class:`AlgorithmStrategy` subclasses Flower's message-based ``FedAvg`` and
overrides only sampling/payload (``configure_train``) and aggregation (``aggregate_train``), which
call the method's object (:mod:`fedgmt.methods`) through the shared core. One class for every
method: ``AlgorithmStrategy(FedConfig(method="feddyn"))``.

Only Flower's public API is used (``Message``, the records, ``Grid``, ``FedAvg``'s constructor and
``Strategy.start``). Faults: error replies (a ClientApp that raised, a node the SuperLink reports
unavailable) and missing replies (no answer within ``round_timeout``) are logged, recorded in
``history.failures`` and left out of the round; the round aggregates what arrived.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Iterable
from logging import INFO, WARNING
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.common import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from torch import nn

from . import algorithms as core
from .checkpoint import Checkpoint, save_checkpoint
from .config import FedConfig
from .dataset import FederatedData
from .guard import CollapseDetector, DivergenceError, DivergenceMonitor, check_stability
from .methods import Method, get_method
from .metrics import History, evaluate
from .model import make_model
from .records import (
    STATE_PREFIX,
    carries_client_state,
    config_record,
    from_record,
    load_client_state,
    save_client_state,
    to_record,
)
from .reference import cost_counters, mark_divergence, record_round, should_stop

__all__ = ["AlgorithmStrategy", "CentralDPError", "FedGMTStrategy", "handshake"]

EMPTY_ROUNDS_LIMIT = 3
"""Consecutive rounds without any reply after which the run stops with an error."""


class CentralDPError(ValueError):
    """A central-DP wrapper around a method whose server state re-adds un-noised client updates."""


def handshake(
    grid: Grid, cfg: FedConfig, timeout: float = 120.0
) -> tuple[dict[int, int], list[int]]:
    """Query every node for its ``partition-id`` and ``n_i``; require ids exactly ``0..N-1``.

    Nodes that do not answer within ``timeout`` (e.g. a killed SuperNode the SuperLink still
    lists) are ignored as long as every partition id answered.
    Returns (partition-id -> node-id, sizes ordered by partition id).
    """
    deadline = time.time() + timeout
    while len(node_ids := list(grid.get_node_ids())) < cfg.num_clients and time.time() < deadline:
        time.sleep(0.2)
    msgs = [
        Message(RecordDict({"config": config_record(cfg)}), dst_node_id=n,
                message_type=MessageType.QUERY)
        for n in node_ids
    ]  # fmt: skip
    replies = _collect_handshake(grid, msgs, cfg.num_clients, timeout)
    node_of: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for r in replies:
        if r.has_error():
            log(WARNING, "handshake: node %s: %s", r.metadata.src_node_id, r.error.reason)
            continue
        m = r.content.metric_records["metrics"]
        pid = int(m["partition-id"])  # type: ignore[arg-type]
        node_of[pid] = r.metadata.src_node_id
        sizes[pid] = int(m["num-examples"])  # type: ignore[arg-type]
    if sorted(node_of) != list(range(cfg.num_clients)):
        failed = [r.error.reason for r in replies if r.has_error()]
        if failed:
            raise RuntimeError(f"handshake failed: {'; '.join(map(str, failed))}")
        raise ValueError(
            f"expected {cfg.num_clients} nodes with partition-id 0..{cfg.num_clients - 1}, got "
            f"{len(node_of)} (set options.num-supernodes={cfg.num_clients} in the Flower "
            "configuration)"
        )
    return node_of, [sizes[i] for i in range(cfg.num_clients)]


def _collect_handshake(
    grid: Grid, msgs: list[Message], num_clients: int, timeout: float
) -> list[Message]:
    """Replies to the handshake queries; returns as soon as every partition id has answered, so a
    node the SuperLink still lists after it was killed only costs the wait of its own reply."""
    if not hasattr(grid, "push_messages"):
        return list(grid.send_and_receive(msgs, timeout=timeout))
    pending = {i for i in grid.push_messages(msgs) if i}
    replies: list[Message] = []
    seen: set[int] = set()
    deadline = time.time() + timeout
    while pending and time.time() < deadline:
        for r in grid.pull_messages(list(pending)):
            pending.discard(r.metadata.reply_to_message_id)
            replies.append(r)
            if not r.has_error() and "metrics" in r.content.metric_records:
                seen.add(int(r.content.metric_records["metrics"]["partition-id"]))  # type: ignore[arg-type]
        if seen >= set(range(num_clients)):
            break
        time.sleep(0.2)
    return replies


def _central_dp_message(method: str, wrapper: str) -> str:
    return (
        f"fedgmt: central DP ({wrapper}) is refused for method {method}: it noises only the "
        "aggregate, while the server state of this method (the dual sum H or SCAFFOLD's control "
        "variate) re-adds un-noised client updates to every later model. Use fedgmt-kl, fedavg or "
        "fedsam under central DP, or local DP-SGD (--dp / dp=true) with any method."
    )


class AlgorithmStrategy(FedAvg):
    """Flower ``FedAvg`` subclass driving one method of :mod:`fedgmt.methods`.

    Sampling is by partition id with ``default_rng([seed, t])`` (paired across methods and equal
    to the reference engine); the node map comes from a query handshake on first use.

    Args:
        cfg: the run configuration; ``cfg.method`` names the method (``method=`` overrides it
            with a name or a :class:`~fedgmt.methods.Method` object).
        data: the server's test data (None: no server-side evaluation).
        node_of: partition id -> node id (None: handshake in the first round).
        resume: a :class:`~fedgmt.checkpoint.Checkpoint` to continue from (Flower's rounds
            ``1, 2, ...`` are then rounds ``done + 1, done + 2, ...`` of the run).
        checkpoint: file written after every completed round.
        run_log: JSON-lines file with one record per round (replies, failures, accuracy).
    """

    def __init__(
        self,
        cfg: FedConfig | None = None,
        *,
        method: str | Method | None = None,
        data: FederatedData | None = None,
        node_of: dict[int, int] | None = None,
        resume: Checkpoint | None = None,
        checkpoint: str | os.PathLike[str] | None = None,
        run_log: str | os.PathLike[str] | None = None,
        **cfg_overrides: Any,
    ) -> None:
        cfg = (cfg or FedConfig()).replace(**cfg_overrides)
        if method is not None:
            algo = get_method(method)
            cfg = cfg.replace(method=algo.name)
        else:
            algo = get_method(cfg.method)
        super().__init__(
            fraction_train=cfg.fraction_train,
            fraction_evaluate=0.0,
            min_train_nodes=1,
            min_evaluate_nodes=0,
            min_available_nodes=1,
        )
        self.cfg = cfg
        self.algo = algo
        self.data = data
        self.node_of = node_of
        self.checkpoint = Path(checkpoint) if checkpoint else None
        self.run_log = Path(run_log) if run_log else None
        self.state: core.ServerState | None = None
        self.history = History(method=cfg.method)
        self.round_offset = 0
        self._detector = CollapseDetector(data.num_classes if data else 10)
        self._t_round = 0.0
        self._model: nn.Module | None = None
        self._monitor: DivergenceMonitor | None = None
        self._pending: dict[int, int] = {}  # node id -> partition id of this round's messages
        self._sent: list[tuple[Message, int]] = []  # this round's messages and partition ids
        self._empty_rounds = 0
        if resume is not None:
            self.state = resume.state
            self.history = resume.history
            self.round_offset = resume.rounds_done
            for acc in self.history.accuracy:
                self._detector.update(acc)

    def summary(self) -> None:
        log(INFO, "\t├──> AlgorithmStrategy(%s) (fedgmt) over Flower FedAvg", self.cfg.method)
        super().summary()

    # ------------------------------------------------------------------------ helpers
    def _check_wrapper(self) -> None:
        """Refuse a central-DP wrapper (``DifferentialPrivacy*FixedClipping``) around a method
        whose server state is built from un-noised client updates."""
        frame = inspect.currentframe()
        try:
            caller_frame = frame.f_back.f_back if frame and frame.f_back else None
            caller = caller_frame.f_locals.get("self") if caller_frame else None
        finally:
            del frame
        if caller is None or caller is self or getattr(caller, "strategy", None) is not self:
            return
        name = type(caller).__name__
        if "DifferentialPrivacy" in name and not self.algo.central_dp_ok:
            raise CentralDPError(_central_dp_message(self.cfg.method, name))

    def _init_state(self, arrays: ArrayRecord) -> None:
        cfg = self.cfg
        w_1 = from_record(arrays)
        if self.data is not None:
            self._model = make_model(
                cfg, self.data.input_dim, self.data.num_classes, self.data.vocab_size
            )
            names = core.param_names(self._model)
        else:
            names = [k for k in w_1 if "running_" not in k and "num_batches" not in k]
        if self.state is None:
            self.state = core.init_server_state(self.algo, cfg, w_1, names)
        if self._model is not None:
            self.history.cost = {**cost_counters(cfg.method, self._model), **self.history.cost}
        initial_loss, initial_params = None, {k: w_1[k] for k in names}
        if self.data is not None and self._model is not None:
            # references of the divergence monitor: the seeded w_1 (also when resuming)
            initial_params = {k: v.detach().clone() for k, v in self._model.named_parameters()}
            initial_loss = evaluate(self._model, self.data.x_test, self.data.y_test)[1]
        self._monitor = DivergenceMonitor(
            self.data.num_classes if self.data else 10, initial_params, initial_loss
        )

    def _adopt_external_arrays(self, arrays: ArrayRecord) -> None:
        """The global model was changed between rounds outside this strategy (a central-DP
        wrapper noised it): adopt it where that is sound, refuse otherwise."""
        assert self.state is not None
        incoming = from_record(arrays)
        same = incoming.keys() == self.state.w.keys() and all(
            torch.equal(incoming[k], self.state.w[k]) for k in incoming
        )
        if same:
            return
        if not self.algo.central_dp_ok:
            raise CentralDPError(
                _central_dp_message(self.cfg.method, "the global model was changed between rounds")
            )
        if self.state.ema is not None:  # e_{t+1} = alpha e_t + (1 - alpha) w_{t+1}, released w
            a = self.cfg.ema_alpha
            self.state.ema = {
                k: self.state.ema[k] + (1 - a) * (incoming[k] - self.state.w[k])
                for k in self.state.names
            }
        self.state.w = incoming

    # ------------------------------------------------------------------------ training
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._check_wrapper()
        self._t_round = time.perf_counter()
        cfg = self.cfg
        t = server_round + self.round_offset
        if self.node_of is None:
            self.node_of, sizes = handshake(grid, cfg)
            check_stability(sizes, cfg)
        if self._monitor is None:
            self._init_state(arrays)
        else:
            self._adopt_external_arrays(arrays)
        assert self.state is not None
        sampled = core.sample_clients(cfg.seed, t, cfg.num_clients, cfg.num_sampled)
        self.history.sampled.append(sampled)
        payload = core.server_payload(self.algo, self.state)
        base = {
            "arrays": to_record(payload.arrays),
            "config": config_record(cfg, **{"round-lr": payload.lr, "server-round": t}),
        }
        if payload.ema is not None:
            base["ema"] = to_record(payload.ema)
        if payload.control is not None:
            base["control"] = to_record(payload.control)
        shared = RecordDict(base)  # type: ignore[arg-type]
        messages = []
        self._pending, self._sent = {}, []
        for pid in sampled:
            node = self.node_of[pid]
            self._pending[node] = pid
            content = shared
            if cfg.dual_store == "server":  # per-node payload: this client's state
                content = RecordDict(dict(base))  # type: ignore[arg-type]
                save_client_state(content, self.state.client_store.get(pid, {}), STATE_PREFIX)
            msg = Message(content=content, message_type=MessageType.TRAIN, dst_node_id=node)
            messages.append(msg)
            self._sent.append((msg, pid))
        log(INFO, "configure_train: round %s samples partitions %s", t, sampled)
        return messages

    def _pid_of_reply(self, msg: Message) -> int:
        """Partition id of a reply: by the message it answers (the SuperLink's own error replies,
        e.g. for an unavailable node, come from the SuperLink, not the node), else by node."""
        rid = msg.metadata.reply_to_message_id
        if rid:
            for sent, pid in self._sent:
                if sent.metadata.message_id == rid:
                    return pid
        return self._pending.get(msg.metadata.src_node_id, -1)

    def _record_failures(self, t: int, errors: list[Message], replied: set[int]) -> None:
        for msg in errors:
            pid = self._pid_of_reply(msg)
            reason = str(msg.error.reason)
            log(WARNING, "round %s: client %s failed: %s", t, pid, reason)
            self.history.failures.append({"round": t, "partition_id": pid, "reason": reason})
        for pid in sorted(set(self._pending.values()) - replied):
            reason = f"no reply within round_timeout={self.cfg.round_timeout:g} s"
            log(WARNING, "round %s: client %s: %s", t, pid, reason)
            self.history.failures.append({"round": t, "partition_id": pid, "reason": reason})

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        t = server_round + self.round_offset
        replies = list(replies)
        valid = [m for m in replies if not m.has_error()]
        errors = [m for m in replies if m.has_error()]
        log(INFO, "aggregate_train: %s results and %s failures", len(valid), len(errors))
        self._record_failures(t, errors, {self._pid_of_reply(m) for m in replies})
        parsed: list[core.ClientReply] = []
        states: dict[int, dict[str, Any]] = {}
        for msg in valid:
            c = msg.content
            if "metrics" not in c.metric_records or "arrays" not in c.array_records:
                raise ValueError("train reply lacks 'arrays' or 'metrics'")
            m: dict[str, Any] = dict(c.metric_records["metrics"])
            for key in ("num-examples", "partition-id"):
                if key not in m:
                    raise ValueError(
                        f"train reply of node {msg.metadata.src_node_id} lacks '{key}'"
                    )
            pid = int(m["partition-id"])
            parsed.append(
                core.ClientReply(
                    partition_id=pid,
                    num_examples=int(m["num-examples"]),
                    arrays=from_record(c.array_records["arrays"]),
                    metrics={k: float(v) for k, v in m.items()},
                    control_delta=(
                        from_record(c.array_records["control-delta"])
                        if "control-delta" in c.array_records
                        else None
                    ),
                )
            )
            if carries_client_state(c):
                states[pid] = load_client_state(c, STATE_PREFIX)
        reasons = "; ".join(str(e.error.reason) for e in errors)
        if not parsed:
            log(WARNING, "round %s: no valid replies (%s)", t, reasons or "none arrived")
            if errors and ("non-finite" in reasons or "DivergenceError" in reasons):
                raise DivergenceError(f"round {t}: {reasons}")
            self._empty_rounds += 1
            if self._empty_rounds >= EMPTY_ROUNDS_LIMIT:
                raise RuntimeError(
                    f"round {t}: no client replied in {EMPTY_ROUNDS_LIMIT} consecutive rounds "
                    f"({reasons or 'no replies'})"
                )
        else:
            self._empty_rounds = 0
        assert self.state is not None and self._monitor is not None
        agg = core.server_aggregate(self.algo, self.state, parsed, self.cfg)
        self.state.client_store.update(states)
        if self.data is not None and self._model is not None:
            record_round(
                self.history, self.cfg, t, self._model, self.state, self.data, agg,
                [r.metrics for r in parsed], self._detector, time.perf_counter() - self._t_round,
                self._monitor,
            )  # fmt: skip
        else:  # no server test set: watch the clients' train loss and the global weights
            self.history.rounds.append(t)
            self.history.train_loss.append(agg["train-loss"])
            reason = self._monitor.check(
                self.state.params(), train_loss=agg["train-loss"] if parsed else None
            )
            if reason is not None:
                mark_divergence(self.history, self.cfg, t, reason)
        self._after_round(t, parsed)
        if should_stop(self.history, self.cfg):
            # ends Strategy.start; run_server keeps the history (diverged, round, reason)
            raise DivergenceError(self.history.divergence_reason or "diverged")
        metrics = MetricRecord({k: float(v) for k, v in agg.items()})
        if self.history.dp_epsilon_max:
            metrics["dp-epsilon-max"] = self.history.dp_epsilon_max[-1]
            metrics["dp-epsilon-mean"] = self.history.dp_epsilon_mean[-1]
        return to_record(self.state.w), metrics

    def _after_round(self, t: int, parsed: list[core.ClientReply]) -> None:
        """Checkpoint and run log of a completed round."""
        assert self.state is not None
        if self.checkpoint is not None:
            save_checkpoint(self.checkpoint, self.cfg, self.state, None, self.history, "flower")
        if self.run_log is not None:
            h = self.history
            record = {
                "round": t,
                "replied": sorted(r.partition_id for r in parsed),
                "failed": [f for f in h.failures if f["round"] == t],
                "accuracy": h.accuracy[-1] if h.accuracy and h.rounds[-1] == t else None,
            }
            self.run_log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.run_log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")


FedGMTStrategy = AlgorithmStrategy
"""Alias: ``FedGMTStrategy(cfg)`` runs ``cfg.method`` (FedGMT by default)."""
