"""Reference test: tar-gnn's ``GCNLayer`` + ``gcn_propagation`` against PyG's ``GCNConv``.

``gcn_propagation`` documents ``D^-1/2 (A + I) D^-1/2`` with A symmetrised and duplicate edges
merged (a 0/1 adjacency; an existing self loop counts once). PyG's ``GCNConv`` (``normalize=True``,
``add_self_loops=True``, ``improved=False``) computes the same operator on the edge list it is given,
adding a self loop only where one is missing, but it neither symmetrises nor merges duplicates. So
``GCNLayer(x, gcn_propagation(edges))`` must equal ``GCNConv(x, to_undirected(edges))``, PyG's own
``to_undirected`` (which also coalesces duplicates), with the same weights (``GCNConv.lin.weight`` is
``[out, in]``, ``GCNLayer.weight`` is ``[in, out]``) and bias.

Tolerances: float32 (the dtype tar-gnn trains in): ``atol = rtol = 1e-5``. float64 (the propagation
matrix built in float64 with ``gcn_propagation(..., dtype=torch.float64)``): ``atol = 1e-10``,
``rtol = 0``.
"""

from __future__ import annotations

import pytest
import torch
from tar_gnn.models import GCNLayer, gcn_propagation
from torch import Tensor

pytestmark = pytest.mark.reference

pyg_nn = pytest.importorskip("torch_geometric.nn")
pyg_utils = pytest.importorskip("torch_geometric.utils")

TOL = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}, torch.float64: {"atol": 1e-10, "rtol": 0.0}}


def _random_undirected(n: int, m: int, seed: int) -> Tensor:
    """m random distinct non-loop pairs of n nodes, both directions listed."""
    g = torch.Generator().manual_seed(seed)
    pairs = torch.combinations(torch.arange(n), 2)
    pick = pairs[torch.randperm(len(pairs), generator=g)[:m]].T
    return torch.cat([pick, pick.flip(0)], dim=1)


def _graphs() -> dict[str, tuple[Tensor, int]]:
    """(edge_index, num_nodes) for each case."""
    und = _random_undirected(9, 14, seed=0)
    directed = _random_undirected(10, 12, seed=1)[:, :12]  # one direction of each edge only
    messy = torch.tensor(
        [
            [0, 1, 1, 0, 2, 2, 3, 4, 4, 5, 0, 3],
            [1, 0, 0, 1, 2, 3, 2, 5, 5, 4, 1, 3],
        ]
    )  # duplicates (0-1 four times, 4-5 three times), self loops (2, 3), isolated nodes 6, 7
    return {
        "undirected": (und, 9),
        "one_direction": (directed, 10),
        "duplicates_selfloops_isolated": (messy, 8),
        "no_edges": (torch.empty(2, 0, dtype=torch.long), 4),
        "star_hub_loop_isolated": (torch.tensor([[0, 0, 0, 0], [1, 2, 3, 0]]), 6),
    }


GRAPHS = _graphs()


def _pair(in_dim: int, out_dim: int, dtype: torch.dtype, seed: int):
    torch.manual_seed(seed)
    ours = GCNLayer(in_dim, out_dim).to(dtype)
    with torch.no_grad():
        ours.bias.copy_(torch.linspace(-0.5, 0.5, out_dim, dtype=dtype))  # a non-zero bias
    ref = pyg_nn.GCNConv(in_dim, out_dim).to(dtype)
    with torch.no_grad():
        assert ref.lin.weight.shape == (out_dim, in_dim)
        ref.lin.weight.copy_(ours.weight.T)
        ref.bias.copy_(ours.bias)
    return ours, ref


def _features(n: int, d: int, dtype: torch.dtype, seed: int, sparse: bool) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=dtype)
    if sparse:  # bag-of-words-like: about 70 % zeros
        x = x * (torch.rand(n, d, generator=g) < 0.3).to(dtype)
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense_x", "sparse_x"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_gcn_layer_equals_pyg_gcnconv(name, sparse, dtype):
    """Same output as ``GCNConv`` on the symmetrised, de-duplicated graph, with dense or sparse
    (COO) X, including self loops given in the input, duplicate edges, one-direction edges and
    isolated nodes (whose output is ``x W + b``: degree 1 from the added self loop)."""
    edge_index, n = GRAPHS[name]
    ours, ref = _pair(5, 3, dtype, seed=len(name))
    x = _features(n, 5, dtype, seed=7, sparse=sparse)
    prop = gcn_propagation(edge_index, n, dtype=dtype)
    assert prop.dtype == dtype
    out = ours(x.to_sparse() if sparse else x, prop)
    expect = ref(x, pyg_utils.to_undirected(edge_index, num_nodes=n))
    torch.testing.assert_close(out, expect, **TOL[dtype])


def test_isolated_node_output_is_linear_map():
    """An isolated node keeps only its own (self-loop) term: ``x W + b`` in both implementations."""
    edge_index, n = GRAPHS["duplicates_selfloops_isolated"]
    ours, ref = _pair(5, 3, torch.float64, seed=3)
    x = _features(n, 5, torch.float64, seed=2, sparse=False)
    out = ours(x, gcn_propagation(edge_index, n, dtype=torch.float64))
    lin = x @ ours.weight + ours.bias
    torch.testing.assert_close(out[6:], lin[6:].detach(), **TOL[torch.float64])
    expect = ref(x, pyg_utils.to_undirected(edge_index, num_nodes=n))
    torch.testing.assert_close(expect[6:], lin[6:].detach(), **TOL[torch.float64])


def test_duplicates_matter_to_pyg():
    """The messy graph exercises the merging: PyG's ``GCNConv`` on the raw edge list (duplicates
    counted as multi-edges, one-direction edges not mirrored) differs from ``GCNLayer``, which merges."""
    edge_index, n = GRAPHS["duplicates_selfloops_isolated"]
    ours, ref = _pair(5, 3, torch.float64, seed=4)
    x = _features(n, 5, torch.float64, seed=5, sparse=False)
    out = ours(x, gcn_propagation(edge_index, n, dtype=torch.float64))
    raw = ref(x, edge_index)
    assert not torch.allclose(out, raw, atol=1e-3)


def test_gradients_match_pyg():
    """Weight, bias and input gradients of a scalar loss agree too (float64, dense X)."""
    edge_index, n = GRAPHS["undirected"]
    ours, ref = _pair(5, 3, torch.float64, seed=6)
    x1 = _features(n, 5, torch.float64, seed=8, sparse=False).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    w = torch.linspace(-1.0, 1.0, n * 3, dtype=torch.float64).reshape(n, 3)
    (ours(x1, gcn_propagation(edge_index, n, dtype=torch.float64)) * w).sum().backward()
    (ref(x2, pyg_utils.to_undirected(edge_index, num_nodes=n)) * w).sum().backward()
    tol = TOL[torch.float64]
    torch.testing.assert_close(ours.weight.grad, ref.lin.weight.grad.T, **tol)
    torch.testing.assert_close(ours.bias.grad, ref.bias.grad, **tol)
    torch.testing.assert_close(x1.grad, x2.grad, **tol)
