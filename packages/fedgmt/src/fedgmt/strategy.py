"""Flower strategies: :class:`AlgorithmStrategy` subclasses Flower's message-based ``FedAvg`` and
overrides only sampling/payload (``configure_train``) and aggregation (``aggregate_train``), which
call the shared core. Thin subclasses name the methods.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from logging import INFO, WARNING
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.common import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from torch import nn

from . import algorithms as core
from .config import FedConfig
from .dataset import FederatedData
from .guard import CollapseDetector, DivergenceError, DivergenceMonitor, check_stability
from .metrics import History, evaluate
from .model import make_model
from .records import config_record, from_record, to_record
from .reference import cost_counters, mark_divergence, record_round, should_stop

__all__ = [
    "STRATEGIES",
    "AlgorithmStrategy",
    "FedAvgRef",
    "FedDyn",
    "FedGMT",
    "FedGMTStrategy",
    "FedSAM",
    "FedSpeed",
    "Scaffold",
    "handshake",
]


def handshake(
    grid: Grid, cfg: FedConfig, timeout: float = 120.0
) -> tuple[dict[int, int], list[int]]:
    """Query every node for its ``partition-id`` and ``n_i``; require ids exactly ``0..N-1``.

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
    replies = list(grid.send_and_receive(msgs, timeout=timeout))
    node_of: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for r in replies:
        if r.has_error():
            raise RuntimeError(
                f"handshake failed on node {r.metadata.src_node_id}: {r.error.reason}"
            )
        m = r.content.metric_records["metrics"]
        pid = int(m["partition-id"])  # type: ignore[arg-type]
        node_of[pid] = r.metadata.src_node_id
        sizes[pid] = int(m["num-examples"])  # type: ignore[arg-type]
    if sorted(node_of) != list(range(cfg.num_clients)):
        raise ValueError(
            f"expected {cfg.num_clients} nodes with partition-id 0..{cfg.num_clients - 1}, got "
            f"{len(node_of)} (set options.num-supernodes={cfg.num_clients} in the Flower "
            "configuration)"
        )
    return node_of, [sizes[i] for i in range(cfg.num_clients)]


class AlgorithmStrategy(FedAvg):
    """Flower ``FedAvg`` subclass driving one method of :mod:`fedgmt.algorithms`.

    Sampling is by partition id with ``default_rng([seed, t])`` (paired across methods and equal
    to the reference engine); the node map comes from a query handshake on first use.
    """

    method = "fedavg"

    def __init__(
        self,
        cfg: FedConfig | None = None,
        *,
        data: FederatedData | None = None,
        node_of: dict[int, int] | None = None,
        **cfg_overrides: Any,
    ) -> None:
        cfg = (cfg or FedConfig()).replace(method=self.method, **cfg_overrides)
        super().__init__(
            fraction_train=cfg.fraction_train,
            fraction_evaluate=0.0,
            min_train_nodes=1,
            min_evaluate_nodes=0,
            min_available_nodes=1,
        )
        self.cfg = cfg
        self.data = data
        self.node_of = node_of
        self.state: core.ServerState | None = None
        self.history = History(method=cfg.method)
        self._detector = CollapseDetector(data.num_classes if data else 10)
        self._t_round = 0.0
        self._model: nn.Module | None = None
        self._monitor: DivergenceMonitor | None = None

    def summary(self) -> None:
        log(INFO, "\t├──> %s (fedgmt) over Flower FedAvg", type(self).__name__)
        super().summary()

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._t_round = time.perf_counter()
        cfg = self.cfg
        if self.node_of is None:
            self.node_of, sizes = handshake(grid, cfg)
            check_stability(sizes, cfg)
        if self.state is None:
            w_1 = from_record(arrays)
            if self.data is not None:
                self._model = make_model(
                    cfg, self.data.input_dim, self.data.num_classes, self.data.vocab_size
                )
                names = core.param_names(self._model)
                self.history.cost = cost_counters(cfg.method, self._model)
            else:
                names = [k for k in w_1 if "running_" not in k and "num_batches" not in k]
            self.state = core.init_server_state(cfg.method, cfg, w_1, names)
            initial_loss = None
            if self.data is not None and self._model is not None:
                self._model.load_state_dict(w_1)
                initial_loss = evaluate(self._model, self.data.x_test, self.data.y_test)[1]
            self._monitor = DivergenceMonitor(
                self.data.num_classes if self.data else 10, self.state.params(), initial_loss
            )
        sampled = core.sample_clients(cfg.seed, server_round, cfg.num_clients, cfg.num_sampled)
        self.history.sampled.append(sampled)
        payload = core.server_payload(cfg.method, self.state)
        content = RecordDict(
            {
                "arrays": to_record(payload.arrays),
                "config": config_record(
                    cfg, **{"round-lr": payload.lr, "server-round": server_round}
                ),
            }
        )
        if payload.ema is not None:
            content["ema"] = to_record(payload.ema)
        if payload.control is not None:
            content["control"] = to_record(payload.control)
        log(INFO, "configure_train: round %s samples partitions %s", server_round, sampled)
        return self._construct_messages(
            content, [self.node_of[p] for p in sampled], MessageType.TRAIN
        )

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        valid, errors = self._check_and_log_replies(replies, is_train=True, validate=False)
        parsed = []
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
            parsed.append(
                core.ClientReply(
                    partition_id=int(m["partition-id"]),
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
        if not parsed:
            reasons = "; ".join(str(e.error.reason) for e in errors)
            log(WARNING, "round %s: no valid replies (%s)", server_round, reasons)
            if errors and ("non-finite" in reasons or "DivergenceError" in reasons):
                raise DivergenceError(f"round {server_round}: {reasons}")
            if errors:
                raise RuntimeError(f"round {server_round}: every sampled client failed: {reasons}")
            return None, None
        assert self.state is not None and self._monitor is not None
        agg = core.server_aggregate(self.cfg.method, self.state, parsed, self.cfg)
        if self.data is not None and self._model is not None:
            record_round(
                self.history, self.cfg, server_round, self._model, self.state, self.data, agg,
                [r.metrics for r in parsed], self._detector, time.perf_counter() - self._t_round,
                self._monitor,
            )  # fmt: skip
        else:  # no server test set: watch the clients' train loss and the global weights
            self.history.rounds.append(server_round)
            self.history.train_loss.append(agg["train-loss"])
            reason = self._monitor.check(self.state.params(), train_loss=agg["train-loss"])
            if reason is not None:
                mark_divergence(self.history, self.cfg, server_round, reason)
        if should_stop(self.history, self.cfg):
            # ends Strategy.start; run_server keeps the history (diverged, round, reason)
            raise DivergenceError(self.history.divergence_reason or "diverged")
        metrics = MetricRecord({k: float(v) for k, v in agg.items()})
        if self.history.dp_epsilon_max:
            metrics["dp-epsilon-max"] = self.history.dp_epsilon_max[-1]
            metrics["dp-epsilon-mean"] = self.history.dp_epsilon_mean[-1]
        return to_record(self.state.w), metrics


class FedGMT(AlgorithmStrategy):
    """FedGMT: EMA trajectory teacher + KL + dual ``h_i / beta`` + server ``H / N`` correction."""

    method = "fedgmt"


FedGMTStrategy = FedGMT


class FedGMTKL(AlgorithmStrategy):
    """FedGMT with the dual off (beta = inf)."""

    method = "fedgmt-kl"


class FedAvgRef(AlgorithmStrategy):
    """FedAvg through the shared core (same sampling/seeding as the other methods)."""

    method = "fedavg"


class FedSAM(AlgorithmStrategy):
    method = "fedsam"


class FedDyn(AlgorithmStrategy):
    method = "feddyn"


class Scaffold(AlgorithmStrategy):
    method = "scaffold"


class FedSpeed(AlgorithmStrategy):
    method = "fedspeed"


STRATEGIES: dict[str, type[AlgorithmStrategy]] = {
    s.method: s for s in (FedGMT, FedGMTKL, FedAvgRef, FedSAM, FedDyn, Scaffold, FedSpeed)
}
