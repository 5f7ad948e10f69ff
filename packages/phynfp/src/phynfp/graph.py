"""Directed-graph helpers: validation, orientation, acyclicity, longest paths, reachability.

Convention used everywhere in this package: ``edge_index[0]`` is the **source = upstream** node and
``edge_index[1]`` the **target = downstream** node (PyG's ``flow="source_to_target"``).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "check_graph",
    "check_tree",
    "downstream_nodes",
    "flip_edges",
    "is_dag",
    "longest_path",
    "perturbation_node",
    "symmetrize",
    "topological_order",
    "upstream_nodes",
]


def check_graph(
    edge_index: Tensor,
    num_nodes: int,
    edge_attr: Tensor | None = None,
    edge_dim: int | None = None,
    *,
    where: str = "graph",
) -> None:
    """Raise ``ValueError`` with a clear message unless ``edge_index``/``edge_attr`` describe a valid graph.

    Checks: ``edge_index`` is an integer tensor of shape [2, E] with entries in [0, num_nodes);
    ``edge_attr`` (when given) has E rows, ``edge_dim`` columns (when given) and finite values.
    """
    if not isinstance(edge_index, Tensor):
        raise ValueError(
            f"{where}: edge_index must be a torch.Tensor, got {type(edge_index).__name__}"
        )
    if edge_index.is_floating_point() or edge_index.dtype == torch.bool or edge_index.is_complex():
        raise ValueError(
            f"{where}: edge_index must hold integers (torch.long), got dtype {edge_index.dtype}"
        )
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(
            f"{where}: edge_index must have shape [2, E] (row 0 = upstream source, row 1 = "
            f"downstream target), got {list(edge_index.shape)}"
        )
    if edge_index.numel() > 0:
        lo, hi = int(edge_index.min()), int(edge_index.max())
        if lo < 0 or hi >= num_nodes:
            raise ValueError(
                f"{where}: edge_index holds node ids in [{lo}, {hi}], outside [0, {num_nodes}) "
                f"for a graph of {num_nodes} nodes"
            )
    if edge_attr is None:
        return
    num_edges = edge_index.size(1)
    if edge_attr.dim() != 2 or edge_attr.size(0) != num_edges:
        raise ValueError(
            f"{where}: edge_attr must have shape [E, edge_dim] with E = {num_edges} edges, got "
            f"{list(edge_attr.shape)}"
        )
    if edge_dim is not None and edge_attr.size(1) != edge_dim:
        raise ValueError(
            f"{where}: edge_attr has {edge_attr.size(1)} columns, the layer expects edge_dim = "
            f"{edge_dim}"
        )
    if edge_attr.numel() and not bool(torch.isfinite(edge_attr).all()):
        bad = int((~torch.isfinite(edge_attr)).any(dim=1).nonzero()[0, 0])
        raise ValueError(f"{where}: edge_attr holds NaN or inf (first at edge {bad})")


def flip_edges(edge_index: Tensor) -> Tensor:
    """The reversed graph: every edge j → i becomes i → j (edge attributes keep their order)."""
    return edge_index.flip(0)


def symmetrize(edge_index: Tensor, edge_attr: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """The edge multiset E ∪ flip(E) in a canonical order (so ``symmetrize(G)`` equals ``symmetrize(Gᵀ)``
    exactly, not only up to summation order). Attributes travel with their edges."""
    ei = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    attr = None if edge_attr is None else torch.cat([edge_attr, edge_attr], dim=0)
    if ei.size(1) == 0:
        return ei, attr
    order = torch.arange(ei.size(1), device=ei.device)
    keys: list[Tensor] = []
    if attr is not None:  # least significant keys first, stable sorts
        keys += [attr[:, c] for c in range(attr.size(1) - 1, -1, -1)]
    keys += [ei[0], ei[1]]
    for key in keys:
        perm = torch.sort(key[order], stable=True).indices
        order = order[perm]
    return ei[:, order], (None if attr is None else attr[order])


def _adjacency(edge_index: Tensor, num_nodes: int, reverse: bool = False) -> list[list[int]]:
    src, dst = edge_index.detach().cpu().numpy()
    if reverse:
        src, dst = dst, src
    adj: list[list[int]] = [[] for _ in range(num_nodes)]
    for s, d in zip(src.tolist(), dst.tolist()):
        adj[s].append(d)
    return adj


def topological_order(edge_index: Tensor, num_nodes: int) -> list[int] | None:
    """Kahn's order of the nodes (upstream first), or None when the graph has a cycle."""
    check_graph(edge_index, num_nodes)
    adj = _adjacency(edge_index, num_nodes)
    indeg = np.bincount(edge_index[1].cpu().numpy(), minlength=num_nodes).astype(np.int64)
    queue = deque(int(i) for i in np.flatnonzero(indeg == 0))
    order = []
    while queue:
        node = queue.popleft()
        order.append(node)
        for nxt in adj[node]:
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                queue.append(nxt)
    return order if len(order) == num_nodes else None


def is_dag(edge_index: Tensor, num_nodes: int) -> bool:
    """True when the directed graph has no cycle (self-loops and 2-cycles count as cycles)."""
    return topological_order(edge_index, num_nodes) is not None


def longest_path(edge_index: Tensor, num_nodes: int) -> int:
    """Number of edges on the longest directed path (the ``num_layers="auto"`` depth).

    Raises ``ValueError`` on a cyclic graph, where the longest path is undefined.
    """
    order = topological_order(edge_index, num_nodes)
    if order is None:
        raise ValueError("graph has a cycle; longest path undefined — pass num_layers")
    adj = _adjacency(edge_index, num_nodes)
    depth = [0] * num_nodes
    for node in order:
        for nxt in adj[node]:
            depth[nxt] = max(depth[nxt], depth[node] + 1)
    return max(depth, default=0)


def check_tree(edge_index: Tensor, num_nodes: int, *, where: str = "graph") -> int:
    """Check that the graph is a rooted in-tree (every node but one outlet has exactly one out-edge,
    no cycle); returns the outlet. Raises ``ValueError`` naming the first violation."""
    check_graph(edge_index, num_nodes, where=where)
    outdeg = np.bincount(edge_index[0].cpu().numpy(), minlength=num_nodes)
    many = np.flatnonzero(outdeg > 1)
    if many.size:
        raise ValueError(
            f"{where}: node {int(many[0])} has {int(outdeg[many[0]])} downstream edges; a river tree "
            "needs at most one per node"
        )
    if not is_dag(edge_index, num_nodes):
        raise ValueError(f"{where}: the graph has a cycle, but a tree (a DAG) is required")
    roots = np.flatnonzero(outdeg == 0)
    if roots.size != 1:
        raise ValueError(
            f"{where}: a rooted tree has one outlet (node without downstream edge); found "
            f"{roots.size}: {roots[:5].tolist()}"
        )
    return int(roots[0])


def _reachable(adj: list[list[int]], start: int) -> set[int]:
    seen = {start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in adj[node]:
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    seen.discard(start)
    return seen


def downstream_nodes(edge_index: Tensor, num_nodes: int, node: int) -> set[int]:
    """Nodes reachable from ``node`` along edge directions (``node`` itself excluded)."""
    return _reachable(_adjacency(edge_index, num_nodes), node)


def upstream_nodes(edge_index: Tensor, num_nodes: int, node: int) -> set[int]:
    """Nodes from which ``node`` is reachable (``node`` itself excluded)."""
    return _reachable(_adjacency(edge_index, num_nodes, reverse=True), node)


def perturbation_node(edge_index: Tensor, num_nodes: int) -> int:
    """The node used by the perturbation test: among nodes with both an in- and an out-edge, the one
    maximising min(#upstream, #downstream) (a mid-depth node on a river tree); ties: lowest id."""
    check_graph(edge_index, num_nodes)
    down = _adjacency(edge_index, num_nodes)
    up = _adjacency(edge_index, num_nodes, reverse=True)
    best, best_score = -1, -1
    for node in range(num_nodes):
        if not down[node] or not up[node]:
            continue
        score = min(len(_reachable(down, node)), len(_reachable(up, node)))
        if score > best_score:
            best, best_score = node, score
    if best < 0:
        raise ValueError("no node has both an upstream and a downstream neighbour")
    return best
