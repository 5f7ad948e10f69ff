import pytest
import tar_gnn as T
import torch
import torch.nn.functional as F
from tar_gnn.transport import COMPLETE_MAX


def small_data(seed=0):
    return T.make_csbm_ood(200, seed=seed)


def test_transport_graphs():
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    mask = torch.tensor([True, False, True, True, False])
    induced = T.build_transport_graph(ei, mask, "induced")
    assert induced.tolist() == [[1], [2]]  # train positions of nodes 2-3
    khop = T.build_transport_graph(ei, mask, "khop:2")
    assert sorted(map(tuple, khop.t().tolist())) == [(0, 1), (1, 2)]  # 0-2 via 1, 2-3 direct
    assert T.build_transport_graph(ei, mask, "none").numel() == 0
    assert T.build_transport_graph(ei, mask, "complete").size(1) == 3
    knn = T.build_transport_graph(ei, mask, "knn:1", features=torch.eye(3) + 0.1)
    assert knn.size(1) >= 1
    with pytest.raises(ValueError, match="not one of"):
        T.parse_transport_graph("ring")
    big = torch.ones(COMPLETE_MAX + 1, dtype=torch.bool)
    with pytest.raises(ValueError, match="n <= 5000"):
        T.build_transport_graph(torch.zeros(2, 0, dtype=torch.long), big, "complete")


def test_sym_norm_weights():
    pairs = torch.tensor([[0, 0], [1, 2]])
    w = T.edge_weights(pairs, 3, "sym_norm")
    assert torch.allclose(w, torch.tensor([1 / 2**0.5, 1 / 2**0.5], dtype=torch.float64))


def test_weighter_wraps_a_pyg_model_loss():
    from torch_geometric.nn import GCNConv

    data = small_data()
    conv = GCNConv(data.num_features, 4)
    rw = T.TARWeighter(data, beta=0.1, steps=10)
    out = conv(data.x, data.edge_index)
    per_node = F.cross_entropy(out[data.train_mask], data.y[data.train_mask], reduction="none")
    q = rw(per_node)
    assert not q.requires_grad and q.numel() == int(data.train_mask.sum())
    assert abs(q.sum().item() - 1) < 1e-10
    # the weighted loss's gradient is sum_i q_i grad l_i
    loss = rw.weighted_loss(per_node)
    (g,) = torch.autograd.grad(loss, conv.lin.weight, retain_graph=True)
    q2 = rw.q.float()
    (g_ref,) = torch.autograd.grad((q2 * per_node).sum(), conv.lin.weight)
    assert torch.allclose(g, g_ref, atol=1e-6)
    assert rw.last["corr_q_loss"] > 0


def test_weighter_state_dict_round_trip():
    data = small_data()
    rw = T.TARWeighter(data, warm_start=True)
    loss = torch.rand(int(data.train_mask.sum()))
    rw(loss)
    state = rw.state_dict()
    other = T.TARWeighter(data, warm_start=True)
    other.load_state_dict(state)
    assert torch.equal(other(loss), rw(loss))


def test_weighter_none_graph_is_exactly_uniform():
    data = small_data()
    rw = T.TARWeighter(data, transport_graph="none")
    loss = torch.rand(int(data.train_mask.sum()))
    q = rw(loss)
    assert rw.is_uniform and torch.equal(q, torch.full_like(q, 1 / q.numel()))
    assert torch.equal(rw.weighted_loss(loss), loss.mean())


def test_tar_with_no_transport_reproduces_erm_bit_for_bit():
    data = small_data()
    cfg = T.TrainConfig(epochs=5, hidden=16, layers=2)
    erm = T.train_node_classifier(data, T.ERM(), cfg, seed=3)
    tar = T.train_node_classifier(data, T.TAR(transport_graph="none"), cfg, seed=3)
    tar0 = T.train_node_classifier(data, T.TAR(steps=0), cfg, seed=3)
    assert erm.history == tar.history == tar0.history
    for a, b in zip(erm.model.parameters(), tar.model.parameters()):
        assert torch.equal(a, b)


def test_flow_every_and_uniform_mix():
    data = small_data()
    n = int(data.train_mask.sum())
    rw = T.TARWeighter(data, flow_every=2, uniform_mix=0.5)
    q1 = rw(torch.rand(n))
    q2 = rw(torch.rand(n))
    assert torch.equal(q1, q2)  # reused between flows
    assert q1.min().item() >= 0.5 / n - 1e-12


def test_knn_on_embeddings():
    data = small_data()
    n = int(data.train_mask.sum())
    rw = T.TARWeighter(data, transport_graph="knn:5", knn_space="embedding")
    with pytest.raises(ValueError, match="embedding"):
        rw(torch.rand(n))
    q = rw(torch.rand(n), embedding=torch.randn(n, 8))
    assert abs(q.sum().item() - 1) < 1e-10


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"beta": -0.1}, "beta"),
        ({"steps": -1}, "steps"),
        ({"step_size": -1.0}, "step_size"),
        ({"transport_graph": "ring"}, "transport_graph"),
        ({"cfl": 2.0}, "cfl"),
        ({"uniform_mix": 1.0}, "uniform_mix"),
    ],
)
def test_weighter_rejects_bad_options(kw, match):
    with pytest.raises(ValueError, match=match):
        T.TARWeighter(**kw)


def test_weighter_rejects_wrong_loss_length():
    data = small_data()
    rw = T.TARWeighter(data)
    with pytest.raises(ValueError, match="training nodes"):
        rw(torch.rand(3))
