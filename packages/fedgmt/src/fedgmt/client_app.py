"""Flower ClientApp (Message API): ``@app.train()`` runs :func:`fedgmt.algorithms.client_update`,
``@app.query()`` answers the server's handshake. Per-client state (dual ``h_i``, SCAFFOLD ``c_i``,
client EMA, DP accountant history) lives in ``context.state`` (``dual_store='client'``) or travels
with each message (``dual_store='server'``: the server keeps it, the client is stateless).

The whole :class:`~fedgmt.config.FedConfig` travels in each message's ``config`` record, and the
node's partition comes from ``context.node_config["partition-id"]``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import Tensor, nn

from . import algorithms as core
from .config import FedConfig
from .dataset import load_federated_data
from .model import make_model
from .records import (
    STATE_PREFIX,
    carries_client_state,
    config_from_record,
    from_record,
    load_client_state,
    save_client_state,
    to_record,
)

__all__ = ["app", "make_client_app"]

ModelFn = Callable[[FedConfig], nn.Module]
DataFn = Callable[[FedConfig, int], tuple[Tensor, Tensor]]


def _default_model_fn(cfg: FedConfig) -> nn.Module:
    d = load_federated_data(cfg)
    return make_model(cfg, d.input_dim, d.num_classes, d.vocab_size)


def _default_data_fn(cfg: FedConfig, pid: int) -> tuple[Tensor, Tensor]:
    return load_federated_data(cfg).client(pid)


def _partition_id(context: Context) -> int:
    if "partition-id" not in context.node_config:
        raise ValueError(
            "node_config lacks 'partition-id' (start the SuperNode with "
            '--node-config "partition-id=0 num-partitions=N")'
        )
    return int(context.node_config["partition-id"])


Handler = Callable[[Message, Context], Message]


def client_handlers(
    model_fn: ModelFn | None = None, data_fn: DataFn | None = None
) -> tuple[Handler, Handler]:
    """The (query, train) message handlers registered by :func:`make_client_app`."""
    model_fn = model_fn or _default_model_fn
    data_fn = data_fn or _default_data_fn

    def query(msg: Message, context: Context) -> Message:
        cfg = config_from_record(msg.content.config_records["config"])
        pid = _partition_id(context)
        n = len(data_fn(cfg, pid)[1])
        metrics = MetricRecord({"partition-id": pid, "num-examples": n})
        return Message(RecordDict({"metrics": metrics}), reply_to=msg)

    def train(msg: Message, context: Context) -> Message:
        rec = msg.content.config_records["config"]
        cfg = config_from_record(rec)
        torch.set_num_threads(cfg.client_threads)
        pid = _partition_id(context)
        t = int(rec["server-round"])  # type: ignore[arg-type]
        content = msg.content
        payload = core.Payload(
            arrays=from_record(content.array_records["arrays"]),
            lr=float(rec["round-lr"]),  # type: ignore[arg-type]
            round=t,
            ema=from_record(content.array_records["ema"])
            if "ema" in content.array_records
            else None,
            control=from_record(content.array_records["control"])
            if "control" in content.array_records
            else None,
        )
        # dual_store='server': the message carries this client's state (a stateless client);
        # else it lives in context.state. A client that raises (a failure mid-round) replies with
        # an error and leaves its state as it was.
        carried = carries_client_state(content)
        client_state = (
            load_client_state(content, STATE_PREFIX)
            if carried
            else load_client_state(context.state)
        )
        reply = core.client_update(
            cfg.method,
            model_fn(cfg),
            data_fn(cfg, pid),
            payload,
            client_state,
            cfg,
            core.client_generator(cfg.seed, t, pid),
            partition_id=pid,
        )
        metrics = MetricRecord(dict(reply.metrics))  # type: ignore[arg-type]
        out = RecordDict({"arrays": to_record(reply.arrays), "metrics": metrics})
        if reply.control_delta is not None:
            out["control-delta"] = to_record(reply.control_delta)
        if carried:
            save_client_state(out, client_state, STATE_PREFIX)
        else:
            save_client_state(context.state, client_state)
        return Message(out, reply_to=msg)

    return query, train


def make_client_app(model_fn: ModelFn | None = None, data_fn: DataFn | None = None) -> ClientApp:
    """A ClientApp over the user's ``model_fn(cfg)`` and ``data_fn(cfg, partition_id)``
    (defaults: this package's models and deterministic partitions)."""
    query, train = client_handlers(model_fn, data_fn)
    app = ClientApp()
    app.query()(query)
    app.train()(train)
    return app


app = make_client_app()
"""The default ClientApp (``[tool.flwr.app.components] clientapp``)."""
