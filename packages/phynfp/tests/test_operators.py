"""Difference operators: hand-computed matrices, analytic properties, sparse/dense agreement."""

import pytest
import torch
from conftest import chain, small_tree
from hypothesis import given
from hypothesis import strategies as st
from phynfp import PhyNFPConv, build_pattern, difference_operator
from phynfp.operators import apply_operator

W = torch.tensor([2.0, 3.0])  # weights of edges 0→1 and 1→2


def dense(mode="upwind", orientation="downstream", role="advection", weight=W, ei=None, n=3):
    ei = chain(3) if ei is None else ei
    return difference_operator(ei, weight, n, mode, orientation, role=role, layout="dense")


def test_chain_upwind_downstream_matrix():
    expected = torch.tensor([[1.0, 0, 0], [-2, 2, 0], [0, -3, 3]])
    assert torch.equal(dense(), expected)


def test_chain_upwind_upstream_matrix():
    expected = torch.tensor([[2.0, -2, 0], [0, 3, -3], [0, 0, 1]])
    assert torch.equal(dense(orientation="upstream"), expected)


def test_chain_upwind_bidirectional_is_sum_of_both():
    expected = torch.tensor([[3.0, -2, 0], [-2, 5, -3], [0, -3, 4]])
    assert torch.equal(dense(orientation="bidirectional"), expected)
    assert torch.equal(dense(orientation="bidirectional"), dense() + dense(orientation="upstream"))


def test_chain_code_mode_matrix_has_same_sign_off_diagonals():
    expected = torch.tensor([[1.0, 0, 0], [2, 2, 0], [0, 3, 3]])
    assert torch.equal(dense(mode="code"), expected)


def test_chain_central_mode_matrices():
    lap = torch.tensor([[-2.0, 2, 0], [2, -5, 3], [0, 3, -3]])
    assert torch.equal(dense(mode="central"), lap)
    elev = torch.tensor([[0.0, 2, 0], [2, 0, 3], [0, 3, 0]])
    assert torch.equal(dense(mode="central", role="elevation"), elev)


def test_layer_operators_on_chain_are_learned_paper_matrices():
    """D1 = (1/Δx)⊙D̂, D2 = (Δz/Δx)⊙D̂ with Δx = softplus(φ1(e)) + 1e-3, Δz = φ2(e)."""
    torch.manual_seed(0)
    conv = PhyNFPConv(4, edge_dim=3)
    ei, attr = chain(3), torch.randn(2, 3)
    with torch.no_grad():
        dx = torch.nn.functional.softplus(conv.phi_x(attr)) + 1e-3
        dz = conv.phi_z(attr)
        d1, d2 = conv.operators(ei, attr, 3, layout="dense")
    hat = torch.tensor([[1.0, 0, 0], [-1, 1, 0], [0, -1, 1]])  # the paper's D̂
    w1 = torch.stack([torch.ones(()), 1 / dx[0], 1 / dx[1]])  # source row keeps c_src = 1
    w2 = torch.stack([torch.ones(()), dz[0] / dx[0], dz[1] / dx[1]])
    torch.testing.assert_close(d1, w1[:, None] * hat)
    torch.testing.assert_close(d2, w2[:, None] * hat)


def test_code_mode_matches_independent_dense_formula():
    ei, n = small_tree()
    w = torch.rand(ei.size(1)) + 0.1
    expected = torch.zeros(n, n)
    for e, (j, i) in enumerate(ei.t().tolist()):
        expected[i, j] += w[e]
        expected[i, i] += w[e]
    for i in range(n):
        if expected[i, i] == 0:
            expected[i, i] = 1.0
    torch.testing.assert_close(dense(mode="code", weight=w, ei=ei, n=n), expected)


def test_upwind_annihilates_constants_except_at_sources():
    ei, n = small_tree()
    d = dense(weight=torch.rand(ei.size(1)) + 0.5, ei=ei, n=n)
    out = d @ torch.ones(n)
    sources = {3, 4, 5, 6}
    for i in range(n):
        assert out[i] == pytest.approx(1.0 if i in sources else 0.0, abs=1e-6)


def test_confluence_rows_sum_to_zero():
    ei, n = small_tree()
    d = dense(weight=torch.rand(ei.size(1)) + 0.5, ei=ei, n=n)
    torch.testing.assert_close(d[[0, 1, 2]].sum(1), torch.zeros(3))


def test_unit_path_step_shifts_one_node_downstream():
    n = 6
    d = dense(weight=torch.ones(n - 1), ei=chain(n), n=n)
    v = torch.arange(1.0, n + 1)
    shifted = (torch.eye(n) - d) @ v
    assert torch.equal(shifted, torch.cat([torch.zeros(1), v[:-1]]))


def test_unit_path_step_on_flipped_graph_shifts_upstream():
    n = 6
    d = dense(weight=torch.ones(n - 1), ei=chain(n).flip(0), n=n)
    v = torch.arange(1.0, n + 1)
    assert torch.equal((torch.eye(n) - d) @ v, torch.cat([v[1:], torch.zeros(1)]))


@given(st.floats(0.0, 1.0), st.lists(st.floats(0.0, 10.0), min_size=5, max_size=5))
def test_partial_step_is_convex_combination(alpha, values):
    n = 5
    d = dense(weight=torch.ones(n - 1, dtype=torch.float64), ei=chain(n), n=n).double()
    v = torch.tensor(values, dtype=torch.float64)
    out = (torch.eye(n, dtype=torch.float64) - alpha * d) @ v
    assert bool((out >= -1e-12).all())
    assert float(out.abs().max()) <= float(v.abs().max()) + 1e-12


def test_reversal_gives_transposed_off_diagonal_pattern():
    ei, n = small_tree()
    w = torch.rand(ei.size(1)) + 0.5
    fwd, rev = dense(weight=w, ei=ei, n=n), dense(weight=w, ei=ei.flip(0), n=n)
    off = ~torch.eye(n, dtype=torch.bool)
    assert not torch.equal(fwd, rev)
    torch.testing.assert_close(rev[off], fwd.t()[off])


def test_sparse_and_dense_builders_agree():
    ei, n = small_tree()
    w = torch.rand(ei.size(1))
    for mode in ("upwind", "code", "central"):
        for orientation in ("downstream", "upstream", "bidirectional"):
            sp = difference_operator(ei, w, n, mode, orientation)
            assert sp.is_sparse
            torch.testing.assert_close(
                sp.to_dense(), dense(mode, orientation, weight=w, ei=ei, n=n)
            )


def test_gather_scatter_application_equals_matrix_product():
    ei, n = small_tree()
    w = torch.rand(ei.size(1))
    v = torch.randn(2, n, 4)
    for mode in ("upwind", "code", "central"):
        for role in ("advection", "elevation"):
            pattern = build_pattern(ei, n, mode, "bidirectional", role)
            d = dense(mode, "bidirectional", role, weight=w, ei=ei, n=n)
            torch.testing.assert_close(apply_operator(pattern, w, v), d @ v)


def test_bad_operator_arguments_are_rejected():
    with pytest.raises(ValueError, match="mode must be one of"):
        difference_operator(chain(3), W, 3, mode="forward")
    with pytest.raises(ValueError, match="orientation must be one of"):
        difference_operator(chain(3), W, 3, orientation="sideways")
    with pytest.raises(ValueError, match=r"weight must have shape \[E\]"):
        difference_operator(chain(3), torch.ones(3), 3)
    with pytest.raises(ValueError, match="outside"):
        difference_operator(chain(3), W, 2)
