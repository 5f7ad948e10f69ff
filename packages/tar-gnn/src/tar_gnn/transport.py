"""Transport graphs G0 on the training nodes: where TAR's mass may move.

``induced`` (the default) is the subgraph of G on the training nodes; ``khop:h`` joins training nodes at
distance <= h in G (through any nodes); ``knn:k`` is a cosine kNN graph on features or embeddings (the
GDRO-style, topology-agnostic variant); ``complete`` joins all pairs (n <= 5,000); ``none`` has no edges
(the ERM control). Edges are returned as canonical undirected pairs (i < j) in training-node indices.
"""

from __future__ import annotations

import re

import numpy as np
import torch
from torch import Tensor

COMPLETE_MAX = 5000
TRANSPORT_GRAPHS = ("induced", "khop:<h>", "knn:<k>", "complete", "none")

__all__ = [
    "COMPLETE_MAX",
    "TRANSPORT_GRAPHS",
    "build_transport_graph",
    "edge_weights",
    "knn_graph",
    "parse_transport_graph",
]


def parse_transport_graph(spec: str) -> tuple[str, int]:
    """``"khop:2"`` -> ``("khop", 2)``; ``"induced"`` -> ``("induced", 0)``. Raises on anything else."""
    text = str(spec).strip()
    if text in ("induced", "complete", "none"):
        return text, 0
    match = re.fullmatch(r"(khop|knn)(?::(\d+))?", text)
    if match is None:
        raise ValueError(
            f"transport_graph={spec!r} is not one of {', '.join(TRANSPORT_GRAPHS)} "
            "(e.g. 'khop:2', 'knn:10')"
        )
    kind = match.group(1)
    value = int(match.group(2)) if match.group(2) else (2 if kind == "khop" else 10)
    if value < 1:
        raise ValueError(f"transport_graph={spec!r}: the number after ':' must be >= 1")
    return kind, value


def _canonical_pairs(a: Tensor, b: Tensor) -> Tensor:
    lo, hi = torch.minimum(a, b), torch.maximum(a, b)
    keep = lo != hi
    pairs = torch.stack([lo[keep], hi[keep]])
    if pairs.numel() == 0:
        return torch.zeros(2, 0, dtype=torch.long)
    return torch.unique(pairs, dim=1)


def _check_inputs(edge_index: Tensor, train_idx: Tensor, num_nodes: int) -> None:
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(
            f"edge_index holds node ids outside [0, {num_nodes - 1}] "
            f"(min {int(edge_index.min())}, max {int(edge_index.max())})"
        )
    if train_idx.numel() == 0:
        raise ValueError("there are no training nodes (train_mask is all False)")


def knn_graph(features: Tensor, k: int) -> Tensor:
    """Symmetrised cosine kNN graph on the rows of ``features`` [n, d] (canonical pairs)."""
    n = features.size(0)
    if n < 2:
        return torch.zeros(2, 0, dtype=torch.long)
    k = min(k, n - 1)
    x = torch.nn.functional.normalize(features.detach().to(torch.float32), dim=1)
    rows, cols = [], []
    for start in range(0, n, 2048):
        sim = x[start : start + 2048] @ x.t()
        idx = torch.arange(start, min(start + 2048, n))
        sim[torch.arange(idx.numel()), idx] = -float("inf")
        top = sim.topk(k, dim=1).indices
        rows.append(idx.repeat_interleave(k))
        cols.append(top.flatten())
    return _canonical_pairs(torch.cat(rows), torch.cat(cols))


def build_transport_graph(
    edge_index: Tensor,
    train_mask: Tensor,
    spec: str = "induced",
    *,
    num_nodes: int | None = None,
    features: Tensor | None = None,
) -> Tensor:
    """The transport graph G0 as canonical pairs [2, m0] over training-node positions 0..n-1.

    Training nodes are ordered as ``train_mask.nonzero()`` (ascending node id), the same order as
    ``out[train_mask]``. ``features`` [n_train, d] is needed for ``knn:k``.
    """
    kind, value = parse_transport_graph(spec)
    train_mask = train_mask.bool()
    num_nodes = int(num_nodes if num_nodes is not None else train_mask.numel())
    if train_mask.numel() != num_nodes:
        raise ValueError(f"train_mask has {train_mask.numel()} entries, expected {num_nodes}")
    train_idx = train_mask.nonzero().flatten()
    _check_inputs(edge_index, train_idx, num_nodes)
    n = train_idx.numel()
    pos = torch.full((num_nodes,), -1, dtype=torch.long)
    pos[train_idx] = torch.arange(n)
    edge_index = edge_index.cpu().long()
    if kind == "none":
        return torch.zeros(2, 0, dtype=torch.long)
    if kind == "complete":
        if n > COMPLETE_MAX:
            raise ValueError(
                f"transport_graph='complete' needs n <= {COMPLETE_MAX} training nodes, got {n}; "
                "use 'khop:2' or 'knn:10'"
            )
        return torch.combinations(torch.arange(n), 2).t().contiguous()
    if kind == "induced":
        a, b = pos[edge_index[0]], pos[edge_index[1]]
        keep = (a >= 0) & (b >= 0)
        return _canonical_pairs(a[keep], b[keep])
    if kind == "knn":
        if features is None:
            raise ValueError("transport_graph='knn:k' needs features (or embeddings) of the nodes")
        if features.size(0) != n:
            raise ValueError(f"knn features have {features.size(0)} rows, expected {n} (train)")
        return knn_graph(features, value)
    # khop: training pairs joined by a path of length <= h (through any node), sparse powers of A
    import scipy.sparse as sp

    ei = edge_index.numpy()
    data = np.ones(ei.shape[1], dtype=np.float32)
    adj = sp.coo_matrix((data, (ei[0], ei[1])), shape=(num_nodes, num_nodes)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.float32)
    reach = sp.identity(num_nodes, format="csr", dtype=np.float32)[:, train_idx.numpy()]
    frontier = reach
    for _ in range(value):
        frontier = (adj @ frontier > 0).astype(np.float32)
        reach = ((reach + frontier) > 0).astype(np.float32)
    sub = reach[train_idx.numpy()].tocoo()  # [n_train, n_train]
    return _canonical_pairs(torch.from_numpy(sub.row).long(), torch.from_numpy(sub.col).long())


def edge_weights(pairs: Tensor, n: int, kind: str | Tensor = "unit") -> Tensor:
    """w_ij per edge of G0: ``unit`` (1), ``sym_norm`` (1/sqrt(d_i d_j), degrees in G0) or a tensor [m0]."""
    m = pairs.size(1)
    if isinstance(kind, Tensor):
        w = kind.detach().to(torch.float64).flatten()
        if w.numel() != m:
            raise ValueError(f"edge_weight tensor has {w.numel()} entries, G0 has {m} edges")
        if not torch.isfinite(w).all() or bool((w < 0).any()):
            raise ValueError("edge_weight must be finite and >= 0")
        return w
    if kind == "unit":
        return torch.ones(m, dtype=torch.float64)
    if kind == "sym_norm":
        deg = torch.zeros(n, dtype=torch.float64)
        deg.index_add_(0, pairs[0], torch.ones(m, dtype=torch.float64))
        deg.index_add_(0, pairs[1], torch.ones(m, dtype=torch.float64))
        return 1.0 / torch.sqrt(deg[pairs[0]] * deg[pairs[1]]).clamp_min(1.0)
    raise ValueError(f"edge_weight must be 'unit', 'sym_norm' or a tensor, got {kind!r}")
