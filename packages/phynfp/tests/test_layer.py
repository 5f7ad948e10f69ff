"""PhyNFPConv and PhyNFP: causality, batching, equivariance, gradients, presets, bad input."""

import warnings

import pytest
import torch
from conftest import chain, small_tree
from phynfp import GraphBaseline, PhyNFP, PhyNFPConv, downstream_nodes, longest_path, upstream_nodes

EDGE_DIM = 3


def model64(num_layers=4, **kw):
    torch.manual_seed(0)
    return PhyNFP(6 * 2, EDGE_DIM, 8, num_layers, **kw).double()


def inputs(n=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, 2, generator=g, dtype=torch.float64)
    return x


def test_repr_and_output_shape():
    conv = PhyNFPConv(16, edge_dim=3)
    assert repr(conv) == "PhyNFPConv(16, edge_dim=3, mode=upwind, orientation=downstream)"
    ei, n = small_tree()
    out = conv(torch.randn(n, 16), ei, torch.randn(ei.size(1), 3))
    assert out.shape == (n, 16)
    assert conv(torch.randn(5, n, 16), ei, torch.randn(ei.size(1), 3)).shape == (5, n, 16)


@pytest.mark.parametrize("physics", ["saint_venant", "aw_rascle"])
def test_perturbation_changes_only_downstream_nodes_exactly(physics):
    ei, n = small_tree()
    attr = torch.randn(ei.size(1), EDGE_DIM, dtype=torch.float64)
    model = model64(num_layers=longest_path(ei, n), physics=physics)
    x = inputs(n)
    with torch.no_grad():
        base = model(x, ei, attr)
        for p in range(n):
            xp = x.clone()
            xp[p, -1, 0] += 1.0
            changed = {i for i in range(n) if not torch.equal(model(xp, ei, attr)[i], base[i])}
            allowed = downstream_nodes(ei, n, p) | {p}
            assert changed <= allowed, (p, changed, allowed)
            assert p in changed


def test_perturbation_reaches_only_within_num_layers_hops():
    ei = chain(6)
    attr = torch.randn(5, EDGE_DIM, dtype=torch.float64)
    model = model64(num_layers=2)
    x = inputs(6)
    with torch.no_grad():
        base = model(x, ei, attr)
        xp = x.clone()
        xp[0, -1, 0] += 1.0
        out = model(xp, ei, attr)
    changed = [i for i in range(6) if not torch.equal(out[i], base[i])]
    assert changed == [0, 1, 2]


def test_reversed_edges_send_information_upstream_only():
    ei, n = small_tree()
    attr = torch.randn(ei.size(1), EDGE_DIM, dtype=torch.float64)
    model = model64(num_layers=3)
    x = inputs(n)
    rev = ei.flip(0)
    with torch.no_grad():
        base = model(x, rev, attr)
        xp = x.clone()
        xp[1, -1, 0] += 1.0
        out = model(xp, rev, attr)
    changed = {i for i in range(n) if not torch.equal(out[i], base[i])}
    assert changed == upstream_nodes(ei, n, 1) | {1}


def test_flipping_edges_changes_phynfp_output_but_not_symmetric_gcn():
    ei, n = small_tree()
    attr = torch.randn(ei.size(1), EDGE_DIM)
    x = torch.randn(n, 6, 2)
    torch.manual_seed(0)
    phy = PhyNFP(12, EDGE_DIM, 8, 3)
    torch.manual_seed(0)
    gcn = GraphBaseline("gcn", 12, EDGE_DIM, 8, 3)
    with torch.no_grad():
        assert not torch.allclose(phy(x, ei, attr), phy(x, ei.flip(0), attr))
        assert torch.equal(gcn(x, ei, attr), gcn(x, ei.flip(0), attr))


def test_batched_graphs_of_different_sizes_match_one_by_one():
    from torch_geometric.data import Batch, Data

    torch.manual_seed(0)
    model = PhyNFP(12, EDGE_DIM, 8, 3)
    graphs = []
    for n in (3, 7, 5):
        ei = chain(n) if n != 7 else small_tree()[0]
        graphs.append(
            Data(x=torch.randn(n, 6, 2), edge_index=ei, edge_attr=torch.randn(ei.size(1), 3))
        )
    batch = Batch.from_data_list(graphs)
    with torch.no_grad():
        together = model(batch.x, batch.edge_index, batch.edge_attr)
        alone = torch.cat([model(g.x, g.edge_index, g.edge_attr) for g in graphs])
    torch.testing.assert_close(together, alone)


def test_leading_batch_dimension_matches_per_sample_calls():
    ei, n = small_tree()
    attr = torch.randn(ei.size(1), 3)
    torch.manual_seed(0)
    model = PhyNFP(12, EDGE_DIM, 8, 3)
    x = torch.randn(4, n, 6, 2)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, ei, attr), torch.stack([model(xi, ei, attr) for xi in x])
        )


def test_permutation_equivariance():
    ei, n = small_tree()
    attr = torch.randn(ei.size(1), 3, dtype=torch.float64)
    model = model64(num_layers=3)
    x = inputs(n)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(3))
    inv = torch.argsort(perm)  # new id of old node i is inv[i]
    with torch.no_grad():
        out = model(x, ei, attr)
        out_p = model(x[perm], inv[ei], attr)
    torch.testing.assert_close(out_p, out[perm])


def test_gradients_reach_edge_mlps_dt_and_every_dg():
    ei, n = small_tree()
    model = PhyNFP(12, EDGE_DIM, 8, 3)
    model(torch.randn(n, 6, 2), ei, torch.randn(ei.size(1), 3)).pow(2).sum().backward()
    assert model.dt.grad is not None and model.dt.grad != 0
    for conv in model.convs:
        assert conv.dg.grad is not None and conv.dg.grad != 0
        for mlp in (conv.phi_x, conv.phi_z):
            assert mlp.lin1.weight.grad is not None and mlp.lin1.weight.grad.abs().sum() > 0


def test_param_sharing_keeps_one_layer():
    shared = PhyNFP(12, EDGE_DIM, 8, 5, param_sharing=True)
    separate = PhyNFP(12, EDGE_DIM, 8, 5)
    one = sum(p.numel() for p in shared.convs[0].parameters())
    assert len(shared.convs) == 1
    assert (
        sum(p.numel() for p in separate.parameters()) - sum(p.numel() for p in shared.parameters())
        == 4 * one
    )


def test_auto_layers_is_longest_path_and_cycles_raise():
    ei, n = small_tree()
    assert (
        PhyNFP(12, 3, 8, "auto", edge_index=ei, num_nodes=n).num_layers == longest_path(ei, n) == 2
    )
    cyclic = torch.tensor([[0, 1, 2], [1, 2, 0]])
    with pytest.raises(
        ValueError, match="graph has a cycle; longest path undefined — pass num_layers"
    ):
        PhyNFP(12, 3, 8, "auto", edge_index=cyclic, num_nodes=3)
    with pytest.raises(ValueError, match="needs the graph"):
        PhyNFP(12, 3, 8, "auto")


def test_official_preset_uses_code_operators():
    model = PhyNFP.from_preset("official", 12, 3, hidden_channels=8, num_layers=2)
    assert model.mode == "code" and model.num_layers == 2
    with pytest.raises(ValueError, match="unknown preset"):
        PhyNFP.from_preset("paper", 12, 3)


def test_shared_dt_initialised_like_official_code():
    model = PhyNFP(12, 3, 8, 2)
    assert float(model.dt.detach()) == pytest.approx(0.7)
    assert all(float(c.dg.detach()) == pytest.approx(0.5) for c in model.convs)
    assert all(c.dt is None for c in model.convs)  # one Δt for all layers


def test_state_dict_round_trip():
    ei, n = small_tree()
    attr, x = torch.randn(ei.size(1), 3), torch.randn(n, 6, 2)
    a = PhyNFP(12, 3, 8, 3)
    b = PhyNFP(12, 3, 8, 3)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        assert torch.equal(a(x, ei, attr), b(x, ei, attr))


def test_operator_pattern_is_built_once_per_graph():
    ei, n = small_tree()
    conv = PhyNFPConv(4, edge_dim=3)
    attr = torch.randn(ei.size(1), 3)
    conv(torch.randn(n, 4), ei, attr)
    first = conv.patterns(ei, n)
    conv(torch.randn(n, 4), ei, attr)
    assert conv.patterns(ei, n) is first
    other = ei.clone()
    assert conv.patterns(other, n) is not first  # another graph object: built anew


def test_missing_edge_features_raise_clear_error():
    ei, n = small_tree()
    with pytest.raises(ValueError, match=r"needs edge_attr of shape \[E, 3\]"):
        PhyNFPConv(4, edge_dim=3)(torch.randn(n, 4), ei)
    with pytest.raises(ValueError, match=r"needs edge_attr of shape \[E, 3\]"):
        PhyNFP(12, 3, 8, 2)(torch.randn(n, 6, 2), ei)


@pytest.mark.parametrize(
    ("edge_index", "edge_attr", "x", "match"),
    [
        (torch.tensor([[0, 9], [1, 2]]), torch.randn(2, 3), torch.randn(3, 6, 2), "outside"),
        (
            torch.tensor([[0.0, 1.0], [1.0, 2.0]]),
            torch.randn(2, 3),
            torch.randn(3, 6, 2),
            "must hold integers",
        ),
        (
            chain(3),
            torch.randn(3, 3),
            torch.randn(3, 6, 2),
            r"edge_attr must have shape \[E, edge_dim\]",
        ),
        (chain(3), torch.randn(2, 4), torch.randn(3, 6, 2), "layer expects edge_dim = 3"),
        (chain(3), torch.randn(2, 3), torch.full((3, 6, 2), float("nan")), "NaN"),
        (chain(3), torch.randn(2, 3), torch.randn(3, 5, 2), r"W·F = 12"),
    ],
)
def test_bad_input_raises_value_error(edge_index, edge_attr, x, match):
    with pytest.raises(ValueError, match=match):
        PhyNFP(12, 3, 8, 2)(x, edge_index, edge_attr)


def test_bad_layer_options_raise():
    with pytest.raises(ValueError, match="channels must be even"):
        PhyNFPConv(5, 3, physics="aw_rascle")
    with pytest.raises(ValueError, match="mode must be one of"):
        PhyNFPConv(4, 3, mode="backward")
    with pytest.raises(ValueError, match="edge_dim must be >= 1"):
        PhyNFPConv(4, 0)


def test_empty_edge_set_warns_and_acts_per_node():
    model = PhyNFP(12, 3, 8, 2)
    x = torch.randn(3, 6, 2)
    with pytest.warns(UserWarning, match="no edges"):
        out = model(x, torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = model(x[:1], torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 3))
    torch.testing.assert_close(out[:1], alone)


@torch.no_grad()
def test_clamp_bounds_layer_output():
    conv = PhyNFPConv(4, 3, clamp=0.1)
    ei, n = small_tree()
    out = conv(10 * torch.randn(n, 4), ei, torch.randn(ei.size(1), 3))
    assert float(out.abs().max()) <= 0.1 + 1e-7
    assert (
        float(
            PhyNFPConv(4, 3, clamp=None)(10 * torch.ones(n, 4), ei, torch.randn(6, 3)).abs().max()
        )
        > 0.1
    )


def test_substeps_reach_exactly_layers_times_substeps_plus_one_hops_downstream():
    ei = chain(10)
    attr = torch.randn(9, EDGE_DIM, dtype=torch.float64)
    model = model64(num_layers=2, substeps=2)
    assert model.receptive_field == 6
    x = inputs(10)
    with torch.no_grad():
        base = model(x, ei, attr)
        xp = x.clone()
        xp[1, -1, 0] += 1.0
        out = model(xp, ei, attr)
    changed = [i for i in range(10) if not torch.equal(out[i], base[i])]
    assert changed == [1, 2, 3, 4, 5, 6, 7]  # node 1 and the 6 hops below it, nothing upstream


def test_substeps_auto_reaches_the_longest_path_and_needs_upwind():
    from phynfp.models import substeps_for_reach

    ei = chain(12)
    model = PhyNFP(12, EDGE_DIM, 8, 3, substeps="auto", edge_index=ei, num_nodes=12)
    assert model.substeps == 3 and model.receptive_field == 12 >= longest_path(ei, 12)
    assert [substeps_for_reach(r, 4) for r in (1, 4, 5, 41)] == [0, 0, 1, 10]
    with pytest.raises(ValueError, match="substeps need mode='upwind'"):
        PhyNFPConv(8, EDGE_DIM, mode="code", substeps=2)
    with pytest.raises(ValueError, match="substeps must be an integer >= 0"):
        PhyNFPConv(8, EDGE_DIM, substeps=-1)


@pytest.mark.parametrize("c", [0.05, 0.5, 0.9])
def test_courant_init_sets_the_substep_rate_in_closed_form(c):
    # On a chain every node has one in-edge (normalised share 1), so k = 2 sub-steps are
    # v_i <- v_i + c (v_{i-1} - v_i) twice, and the source (node 0) keeps its value.
    ei = chain(4)
    conv = PhyNFPConv(2, EDGE_DIM, substeps=2, courant_init=c).double()
    assert torch.sigmoid(conv.courant).item() == pytest.approx(c, rel=1e-6)  # float32 init
    pattern = conv.patterns(ei, 4)[0]
    weight = conv.edge_weights(torch.randn(3, EDGE_DIM, dtype=torch.float64))[0]
    v = torch.randn(4, 2, dtype=torch.float64)
    expect = v.clone()
    for _ in range(2):
        prev = expect.clone()
        expect[1:] = prev[1:] + c * (prev[:-1] - prev[1:])
    assert torch.allclose(conv.transport(pattern, weight, v), expect, atol=1e-12)
    model = PhyNFP(12, EDGE_DIM, 8, 2, substeps=1, courant_init=c)
    assert all(torch.sigmoid(m.courant).item() == pytest.approx(c) for m in model.convs)
    conv.reset_parameters()  # reset keeps the initial rate
    assert torch.sigmoid(conv.courant).item() == pytest.approx(c, rel=1e-6)  # float32 init


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, float("nan")])
def test_courant_init_outside_the_open_unit_interval_is_refused(bad):
    with pytest.raises(ValueError, match=r"courant_init must be in \(0, 1\)"):
        PhyNFPConv(8, EDGE_DIM, substeps=1, courant_init=bad)


def test_dynamic_orientation_equals_static_operators_for_constant_signs():
    ei, n = small_tree()
    attr = torch.randn(ei.size(1), EDGE_DIM, dtype=torch.float64)
    x = inputs(n).unsqueeze(0).repeat(2, 1, 1, 1)  # two samples over one graph
    models = {o: model64(num_layers=3, orientation=o, substeps=1) for o in ("downstream", "upstream", "dynamic")}  # fmt: skip
    state = models["downstream"].state_dict()
    for m in models.values():
        m.load_state_dict(state)
    assert models["dynamic"].needs_edge_sign and not models["downstream"].needs_edge_sign
    sign = torch.tensor([[1.0] * 6, [-1.0] * 6], dtype=torch.float64)  # sample 0 follows, 1 opposes
    with torch.no_grad():
        dyn = models["dynamic"](x, ei, attr, edge_sign=sign)
        assert torch.allclose(dyn[0], models["downstream"](x[0], ei, attr), atol=1e-12)
        assert torch.allclose(dyn[1], models["upstream"](x[1], ei, attr), atol=1e-12)
        # One reversed edge (5 → 2 becomes 2 → 5): node 5 now hears node 2, node 2 no longer node 5.
        mixed = torch.ones(1, 6, dtype=torch.float64)
        mixed[0, 2] = -1.0
        xp = x[:1].clone()
        xp[0, 2, -1, 0] += 1.0
        moved = models["dynamic"](xp, ei, attr, edge_sign=mixed) - models["dynamic"](
            x[:1], ei, attr, edge_sign=mixed
        )
        assert moved[0, 5].abs().max() > 0 and moved[0, 6].abs().max() == 0
    with pytest.raises(ValueError, match="needs edge_sign"):
        models["dynamic"](x, ei, attr)
    with pytest.raises(ValueError, match="edge_sign must have shape"):
        models["dynamic"](x, ei, attr, edge_sign=torch.ones(3, 6, dtype=torch.float64))
