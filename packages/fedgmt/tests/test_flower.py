"""Flower engine: the strategy and ClientApp driven in process (no Ray), the whole ServerApp
(``run_server``) on an in-process grid, and the Ray simulation: same global model as the reference
loop for the same seed and sampling; divergence detected on the Flower path too."""

import os

import pytest
import torch
from fedgmt import FedConfig, run_reference
from fedgmt.client_app import client_handlers
from fedgmt.dataset import load_federated_data
from fedgmt.model import make_model
from fedgmt.strategy import STRATEGIES
from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)


@pytest.fixture(autouse=True)
def _task_identity():
    """Messages built outside a Flower runtime need a task identity (run/node id)."""
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1
    yield


SMALL = dict(num_rounds=3, num_clients=4, fraction_train=0.5, local_epochs=1, min_partition_size=10)


def flower_in_process(cfg):
    """Drive AlgorithmStrategy + ClientApp with real Messages and per-node context.state."""
    data = load_federated_data(cfg)
    node_of = {pid: 1000 + pid for pid in range(cfg.num_clients)}
    strategy = STRATEGIES[cfg.method](cfg, data=data, node_of=node_of)
    _, train = client_handlers()
    contexts = {
        1000 + pid: Context(run_id=1, node_id=1000 + pid, state=RecordDict(), run_config={},
                            node_config={"partition-id": pid, "num-partitions": cfg.num_clients})
        for pid in range(cfg.num_clients)
    }  # fmt: skip
    model = make_model(cfg, data.input_dim, data.num_classes, data.vocab_size)
    arrays = ArrayRecord(model.state_dict())
    for t in range(1, cfg.num_rounds + 1):
        msgs = list(strategy.configure_train(t, arrays, ConfigRecord(), grid=None))
        replies = [train(m, contexts[m.metadata.dst_node_id]) for m in msgs]
        arrays, _ = strategy.aggregate_train(t, replies)
    return strategy, contexts


@pytest.mark.parametrize("method", ["fedgmt", "scaffold"])
def test_strategy_and_clientapp_match_reference(method):
    cfg = FedConfig(method=method, **SMALL)
    strategy, contexts = flower_in_process(cfg)
    ref = run_reference(cfg)
    assert strategy.history.accuracy == ref.accuracy
    assert strategy.history.sampled == ref.sampled
    for k, v in ref.final_arrays.items():
        torch.testing.assert_close(strategy.state.w[k], v, atol=1e-6, rtol=0)
    key = "h" if method == "fedgmt" else "c_i"
    touched = [c for c in contexts.values() if key in c.state.array_records]
    assert touched and any(
        float(torch.as_tensor(a.numpy()).abs().sum()) > 0
        for c in touched for a in c.state.array_records[key].values()
    )  # fmt: skip


def _reply(pid, n, arrays, node=1):
    content = RecordDict(
        {"arrays": arrays, "metrics": MetricRecord({"num-examples": n, "partition-id": pid})}
    )
    return Message(content, dst_node_id=node, message_type="train")


def test_aggregate_requires_partition_id_and_rejects_duplicates():
    cfg = FedConfig(method="fedavg", **SMALL)
    s = STRATEGIES["fedavg"](cfg, node_of={i: i for i in range(4)})
    w = {"w": torch.zeros(2)}
    list(s.configure_train(1, ArrayRecord(w), ConfigRecord(), grid=None))
    bad = Message(RecordDict({"arrays": ArrayRecord(w), "metrics": MetricRecord({"num-examples": 3})}),
                  dst_node_id=1, message_type="train")  # fmt: skip
    with pytest.raises(ValueError, match="partition-id"):
        s.aggregate_train(1, [bad])
    with pytest.raises(ValueError, match="duplicate"):
        s.aggregate_train(1, [_reply(0, 3, ArrayRecord(w)), _reply(0, 3, ArrayRecord(w))])


def test_handshake_requires_all_partitions():
    from fedgmt.strategy import handshake

    class Grid:
        def get_node_ids(self):
            return [1, 2]

        def send_and_receive(self, msgs, timeout):
            return [
                Message(RecordDict({"metrics": MetricRecord({"partition-id": 0, "num-examples": 5})}),
                        dst_node_id=1, message_type="query")
            ]  # fmt: skip

    with pytest.raises(ValueError, match=r"expected 4 nodes with partition-id 0\.\.3, got 1"):
        handshake(Grid(), FedConfig(num_clients=4), timeout=0.1)


class InProcessGrid:
    """A Flower ``Grid`` that hands every message to this package's ClientApp handlers in process,
    one ``context.state`` per node (what a SuperLink with N SuperNodes does, without processes)."""

    def __init__(self, num_clients):
        self.query, self.train = client_handlers()
        self.contexts = {
            1000 + pid: Context(run_id=1, node_id=1000 + pid, state=RecordDict(), run_config={},
                                node_config={"partition-id": pid, "num-partitions": num_clients})
            for pid in range(num_clients)
        }  # fmt: skip

    def get_node_ids(self):
        return list(self.contexts)

    def send_and_receive(self, messages, timeout=None):
        out = []
        for m in messages:
            handler = self.query if m.metadata.message_type == MessageType.QUERY else self.train
            out.append(handler(m, self.contexts[m.metadata.dst_node_id]))
        return out


def test_run_server_on_in_process_grid_matches_reference():
    from fedgmt.server_app import run_server

    cfg = FedConfig(method="fedgmt", **SMALL)
    strategy = run_server(InProcessGrid(cfg.num_clients), cfg)
    ref = run_reference(cfg)
    assert strategy.history.accuracy == ref.accuracy and not strategy.history.diverged


@pytest.mark.parametrize("server_eval", [True, False])
def test_flower_server_detects_exploding_run(server_eval):
    """lr 100: finite but exploding numbers. The ServerApp stops after round 1 and records it, with
    the server test set (test loss) and without it (clients' train loss / weights)."""
    from fedgmt.server_app import run_server

    cfg = FedConfig(method="fedgmt", lr=100.0, allow_unstable=True, **SMALL)
    strategy = run_server(InProcessGrid(cfg.num_clients), cfg, server_eval=server_eval)
    h = strategy.history
    assert h.diverged and h.diverged_at_round == 1 and h.rounds == [1]
    assert "exceeds" in h.divergence_reason
    ref = run_reference(cfg)
    assert ref.diverged and ref.diverged_at_round == 1


@pytest.mark.slow
def test_ray_simulation_matches_reference():
    """Flower's simulation engine (Ray): 4 nodes x 2 rounds, FedGMT."""
    pytest.importorskip("ray")
    from fedgmt import run

    cfg = FedConfig(method="fedgmt", beta=100.0, **{**SMALL, "num_rounds": 2})
    sim = run(cfg, engine="flower")
    ref = run_reference(cfg)
    assert sim.accuracy == ref.accuracy
    for k, v in ref.final_arrays.items():
        torch.testing.assert_close(sim.final_arrays[k], v, atol=1e-6, rtol=0)


def test_ray_temp_dir_is_kept_out_of_the_virtualenv(monkeypatch, tmp_path):
    """Ray's workers die on a temp dir inside $VIRTUAL_ENV (nox's $TMPDIR) and the driver hangs."""
    from fedgmt.simulation import _ray_temp_dir

    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "elsewhere" / ".." / "tmp"))
    _ray_temp_dir()
    assert os.environ["RAY_TMPDIR"] == "/tmp"
    monkeypatch.delenv("RAY_TMPDIR")
    monkeypatch.setenv("TMPDIR", str(tmp_path.parent))
    _ray_temp_dir()
    assert "RAY_TMPDIR" not in os.environ
