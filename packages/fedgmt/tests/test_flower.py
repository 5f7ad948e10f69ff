"""Flower engine: the strategy and ClientApp driven in process (no Ray), the whole ServerApp
(``run_server``) on an in-process grid, and the Ray simulation: same global model as the reference
loop for the same seed and sampling; divergence detected on the Flower path too."""

import json
import os

import pytest
import torch
from fedgmt import FedConfig, run_reference
from fedgmt.client_app import client_handlers
from fedgmt.dataset import load_federated_data
from fedgmt.model import make_model
from fedgmt.strategy import AlgorithmStrategy
from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Error,
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
    strategy = AlgorithmStrategy(cfg, data=data, node_of=node_of)
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
    s = AlgorithmStrategy(cfg, node_of={i: i for i in range(4)})
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
    one ``context.state`` per node (what a SuperLink with N SuperNodes does, without processes).

    A handler that raises gets an error reply, as Flower's runtime gives (code 2,
    CLIENT_APP_RAISED_EXCEPTION); nodes in ``dead`` never reply (a killed SuperNode)."""

    def __init__(self, num_clients, dead=None):
        self.dead = dict(dead or {})  # node id -> first round in which it no longer replies
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
            node = m.metadata.dst_node_id
            handler = self.query if m.metadata.message_type == MessageType.QUERY else self.train
            if handler is self.train:
                t = int(m.content.config_records["config"]["server-round"])
                if node in self.dead and t >= self.dead[node]:
                    continue
            try:
                out.append(handler(m, self.contexts[node]))
            except Exception as err:
                out.append(Message(Error(2, f"{type(err).__name__}: {err}"), reply_to=m))
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


# ------------------------------------------------------------------------------- faults, state


def test_client_failures_are_left_out_and_match_the_reference():
    """30% of sampled clients raise inside the ClientApp mid-round: the run goes on, each round
    aggregates what arrived, the failures are logged, and the model equals the reference loop's
    (which leaves out the same clients)."""
    from fedgmt.server_app import run_server

    cfg = FedConfig(method="fedgmt", fail_fraction=0.3, **{**SMALL, "num_rounds": 4})
    strategy = run_server(InProcessGrid(cfg.num_clients), cfg)
    ref = run_reference(cfg)
    h = strategy.history
    assert h.failures and len(h.rounds) == 4 and not h.diverged
    got = sorted((f["round"], f["partition_id"]) for f in h.failures)
    assert got == sorted((f["round"], f["partition_id"]) for f in ref.failures)
    assert all("ClientFailure" in f["reason"] for f in h.failures)
    assert h.accuracy == ref.accuracy
    for k, v in ref.final_arrays.items():
        torch.testing.assert_close(strategy.state.w[k], v, atol=1e-6, rtol=0)


def test_dead_node_is_left_out_and_its_dual_survives(tmp_path):
    """The node of partition 1 stops replying after round 1 (a killed SuperNode): rounds 2-3
    aggregate the others, the run log records it, and its dual h_1 stays as round 1 left it."""
    from fedgmt.server_app import run_server

    cfg = FedConfig(method="fedgmt", **{**SMALL, "fraction_train": 1.0})
    one = InProcessGrid(cfg.num_clients)
    run_server(one, cfg.replace(num_rounds=1))
    grid = InProcessGrid(cfg.num_clients, dead={1001: 2})
    log = tmp_path / "rounds.jsonl"
    strategy = run_server(grid, cfg, run_log=log)
    h = strategy.history
    assert h.rounds == [1, 2, 3] and not h.diverged
    assert [(f["round"], f["partition_id"]) for f in h.failures] == [(2, 1), (3, 1)]
    assert "no reply" in h.failures[0]["reason"]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["replied"] for x in lines] == [[0, 1, 2, 3], [0, 2, 3], [0, 2, 3]]
    assert lines[1]["failed"][0]["partition_id"] == 1
    after_round_1 = one.contexts[1001].state.array_records["h"].to_torch_state_dict()
    for k, v in grid.contexts[1001].state.array_records["h"].to_torch_state_dict().items():
        assert torch.equal(v, after_round_1[k])
    assert strategy.state.participations == {0: 3, 1: 1, 2: 3, 3: 3}


def test_dual_store_server_equals_client_store():
    """dual_store='server': stateless clients (nothing in context.state), duals kept by the server
    and sent with each message; same trajectory as duals kept in context.state."""
    from fedgmt.server_app import run_server

    cfg = FedConfig(method="fedgmt", fail_fraction=0.2, **{**SMALL, "num_rounds": 4})
    grid_c, grid_s = InProcessGrid(cfg.num_clients), InProcessGrid(cfg.num_clients)
    a = run_server(grid_c, cfg)
    b = run_server(grid_s, cfg.replace(dual_store="server"))
    assert a.history.accuracy == b.history.accuracy
    for k, v in a.state.w.items():
        assert torch.equal(v, b.state.w[k])
    assert all(len(c.state.array_records) == 0 for c in grid_s.contexts.values())
    for pid, ctx in grid_c.contexts.items():
        if "h" in ctx.state.array_records:
            h_client = ctx.state.array_records["h"].to_torch_state_dict()
            h_server = b.state.client_store[pid - 1000]["h"]
            for k, v in h_client.items():
                assert torch.equal(v, h_server[k])


def test_flower_resume_equals_uninterrupted(tmp_path):
    """Checkpoint after round 2, a new run (new grid: SuperNode memory lost) resumes to round 4 with
    dual_store='server' and ends where the uninterrupted run does."""
    from fedgmt.server_app import run_server

    cfg = FedConfig(method="fedgmt", dual_store="server", fail_fraction=0.2,
                    **{**SMALL, "num_rounds": 4})  # fmt: skip
    full = run_server(InProcessGrid(cfg.num_clients), cfg)
    ckpt = tmp_path / "checkpoint.pt"
    run_server(InProcessGrid(cfg.num_clients), cfg.replace(num_rounds=2), checkpoint=ckpt)
    rest = run_server(InProcessGrid(cfg.num_clients), cfg, checkpoint=ckpt, resume=True)
    assert rest.history.rounds == [1, 2, 3, 4]
    assert rest.history.accuracy == full.history.accuracy
    assert rest.history.failures == full.history.failures
    for k, v in full.state.w.items():
        assert torch.equal(v, rest.state.w[k])
    with pytest.raises(ValueError, match="needs dual_store='server'"):
        run_server(InProcessGrid(4), cfg.replace(dual_store="client"), checkpoint=ckpt, resume=True)


def test_central_dp_wrapper_refused_for_dual_methods_and_allowed_for_fedgmt_kl():
    from fedgmt.server_app import run_server
    from fedgmt.strategy import CentralDPError
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping

    cfg = FedConfig(method="fedgmt", **SMALL)
    wrapped = DifferentialPrivacyServerSideFixedClipping(
        AlgorithmStrategy(cfg, node_of={i: i for i in range(4)}), 0.1, 1.0, 2
    )
    with pytest.raises(CentralDPError, match=r"central DP .* is refused for method fedgmt"):
        list(wrapped.configure_train(1, ArrayRecord({"w": torch.zeros(2)}), ConfigRecord(), None))
    with pytest.raises(ValueError, match="central_dp"):
        cfg.replace(central_dp="server-fixed-clipping")
    kl = FedConfig(method="fedgmt-kl", central_dp="server-fixed-clipping", dp_noise=0.01,
                   dp_clip=10.0, **SMALL)  # fmt: skip
    h = run_server(InProcessGrid(kl.num_clients), kl).history
    assert h.rounds == [1, 2, 3] and all(a > 0.1 for a in h.accuracy)


def test_only_public_flower_api_is_used():
    """No private Flower member (``_name``) is used by the package."""
    import re
    from pathlib import Path

    import fedgmt

    src = Path(fedgmt.__file__).parent
    bad = []
    for path in src.glob("*.py"):
        text = path.read_text()
        bad += [f"{path.name}: {m}" for m in re.findall(r"self\._(?:construct|check_and)\w*", text)]
        bad += [f"{path.name}: {m}" for m in re.findall(r"from flwr\S*\._\w+", text)]
        bad += [f"{path.name}: {m}" for m in re.findall(r"super\(\)\._(?!_)\w+", text)]
    assert not bad
