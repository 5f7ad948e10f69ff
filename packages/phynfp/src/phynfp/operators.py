"""Directional difference operators on graphs (the paper's explicit difference matrices).

For per-edge weights ``w_e`` on edges ``e = (j → i)`` (``j`` upstream), the default ``mode="upwind"``
operator is the paper's first-order upwind derivative D̂ (``D̂_ii = 1``, ``D̂_ij = -1`` for the upstream
neighbour ``j``) weighted per edge:

    (D_w v)_i = Σ_{e=(j→i)} w_e (v_i − v_j)        nodes with at least one in-edge
    (D_w v)_i = c_src · v_i                        source (headwater) nodes

i.e. ``D_w = diag(d) − A_w`` with ``(A_w)_ij = Σ_{e=(j→i)} w_e`` and ``d_i = Σ_{e=(j→i)} w_e`` (``c_src``
for sources). ``D1 = D_{1/Δx}`` and ``D2 = D_{Δz/Δx}`` are the paper's ``(1/Δx) ⊙ D̂`` and
``(Δz/Δx) ⊙ D̂``.

``mode="code"`` is the builder of the official code (off-diagonal entries with the same sign as the
diagonal, ``d_i = 1`` for nodes without in-edges); ``mode="central"`` its (never called) second-order
helper: a weighted graph Laplacian for the advection operator, and off-diagonal weights without a
diagonal for the elevation operator.

Every operator is ``diag(d) + b · A_w`` over an *oriented edge list*; :class:`OperatorPattern` holds that
edge list and the diagonal counts for one graph, so a layer builds it once per graph (and caches it)
and only fills in the learned weights on each call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from .graph import check_graph

__all__ = [
    "MODES",
    "ORIENTATIONS",
    "OperatorPattern",
    "apply_operator",
    "build_pattern",
    "difference_operator",
]

Mode = Literal["upwind", "code", "central"]
Orientation = Literal["downstream", "upstream", "bidirectional"]
Role = Literal["advection", "elevation"]
MODES = ("upwind", "code", "central")
ORIENTATIONS = ("downstream", "upstream", "bidirectional")


@dataclass(frozen=True)
class OperatorPattern:
    """The sparsity pattern of one operator on one graph.

    ``index`` [2, E'] lists oriented edges (row 0 = the column j, row 1 = the row i of the matrix);
    ``edge_map`` [E'] says which input edge each entry takes its weight from; the operator is
    ``(D v)_i = (a · Σ_{e→i} w_e + c_src · roles_i) v_i + b · Σ_{e=(j→i)} w_e v_j`` where ``roles_i``
    counts how many of the summed one-directional operators treat node i as a source.
    """

    index: Tensor
    edge_map: Tensor
    roles: Tensor
    a: float
    b: float
    num_nodes: int

    def diagonal(self, weight: Tensor, c_src: float = 1.0) -> Tensor:
        """The diagonal d of the operator for per-input-edge weights ``weight`` [E]."""
        w = weight[self.edge_map]
        deg = torch.zeros(self.num_nodes, dtype=w.dtype, device=w.device)
        deg.index_add_(0, self.index[1], w)
        return self.a * deg + c_src * self.roles.to(w.dtype)


def build_pattern(
    edge_index: Tensor,
    num_nodes: int,
    mode: str = "upwind",
    orientation: str = "downstream",
    role: str = "advection",
) -> OperatorPattern:
    """The :class:`OperatorPattern` of an operator (see the module docstring for the formulas)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if orientation not in ORIENTATIONS:
        raise ValueError(f"orientation must be one of {ORIENTATIONS}, got {orientation!r}")
    if role not in ("advection", "elevation"):
        raise ValueError(f"role must be 'advection' or 'elevation', got {role!r}")
    check_graph(edge_index, num_nodes, where="difference operator")
    edge_index = edge_index.long()
    num_edges = edge_index.size(1)
    ids = torch.arange(num_edges, device=edge_index.device)
    if mode == "central":
        # Symmetric by construction: orientation does not matter.
        index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
        edge_map = torch.cat([ids, ids])
        roles = torch.zeros(num_nodes, dtype=torch.long, device=edge_index.device)
        a, b = (-1.0, 1.0) if role == "advection" else (0.0, 1.0)
        return OperatorPattern(index, edge_map, roles, a, b, num_nodes)
    parts = {
        "downstream": [edge_index],
        "upstream": [edge_index.flip(0)],
        "bidirectional": [edge_index, edge_index.flip(0)],
    }[orientation]
    index = torch.cat(parts, dim=1)
    edge_map = torch.cat([ids] * len(parts))
    roles = torch.zeros(num_nodes, dtype=torch.long, device=edge_index.device)
    for part in parts:
        indeg = torch.bincount(part[1], minlength=num_nodes)
        roles += (indeg == 0).long()
    a, b = (1.0, -1.0) if mode == "upwind" else (1.0, 1.0)
    return OperatorPattern(index, edge_map, roles, a, b, num_nodes)


def apply_operator(
    pattern: OperatorPattern, weight: Tensor, v: Tensor, c_src: float = 1.0
) -> Tensor:
    """``D_w v`` for node values ``v`` [..., N, C] (any leading batch dimensions), by gather/scatter."""
    w = weight[pattern.edge_map].to(v.dtype)
    diag = pattern.diagonal(weight, c_src).to(v.dtype)
    src, dst = pattern.index[0], pattern.index[1]
    msg = v.index_select(-2, src) * w.unsqueeze(-1)
    agg = torch.zeros_like(v).index_add_(-2, dst, msg)
    return diag.unsqueeze(-1) * v + pattern.b * agg


def difference_operator(
    edge_index: Tensor,
    weight: Tensor | None,
    num_nodes: int,
    mode: str = "upwind",
    orientation: str = "downstream",
    *,
    role: str = "advection",
    c_src: float = 1.0,
    layout: str = "sparse",
) -> Tensor:
    """The N × N difference operator as a ``torch.sparse_coo_tensor`` (``layout="dense"``: a dense tensor).

    Args:
        edge_index: [2, E] edges, row 0 upstream, row 1 downstream.
        weight: [E] per-edge weights (``1/Δx`` for D1, ``Δz/Δx`` for D2); None means all ones.
        num_nodes: N.
        mode: ``"upwind"`` (paper form, default), ``"code"`` (official builder) or ``"central"``.
        orientation: ``"downstream"`` (default), ``"upstream"`` (built on the flipped edges) or
            ``"bidirectional"`` (the sum of both).
        role: ``"advection"`` or ``"elevation"``; only ``mode="central"`` treats them differently.
        c_src: diagonal entry of source rows (default 1: a headwater receives zero inflow).
        layout: ``"sparse"`` or ``"dense"``.
    """
    pattern = build_pattern(edge_index, num_nodes, mode, orientation, role)
    if weight is None:
        weight = torch.ones(edge_index.size(1))
    if weight.dim() != 1 or weight.numel() != edge_index.size(1):
        raise ValueError(
            f"weight must have shape [E] = [{edge_index.size(1)}], got {list(weight.shape)}"
        )
    w = weight[pattern.edge_map]
    diag = pattern.diagonal(weight, c_src)
    nodes = torch.arange(num_nodes, device=edge_index.device)
    rows = torch.cat([pattern.index[1], nodes])
    cols = torch.cat([pattern.index[0], nodes])
    values = torch.cat([pattern.b * w, diag])
    op = torch.sparse_coo_tensor(
        torch.stack([rows, cols]), values, (num_nodes, num_nodes), check_invariants=False
    ).coalesce()
    if layout == "dense":
        return op.to_dense()
    if layout != "sparse":
        raise ValueError(f"layout must be 'sparse' or 'dense', got {layout!r}")
    return op
