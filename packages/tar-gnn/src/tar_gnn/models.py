"""Node classifiers: a stack of graph convolutions, ReLU and dropout, then a linear head.

GOOD's node-task default is a 3-layer GCN with hidden width 300 and dropout 0.5; ``gin`` and ``sage``
swap the convolution for PyG's ``GINConv``/``SAGEConv``. The GCN layer is written here on
``torch.sparse`` (Kipf and Welling's renormalised propagation D^-1/2 (A + I) D^-1/2 X W), so that a
sparse bag-of-words input (Planetoid) costs O(nnz) in the first layer. Any PyG model works with
:class:`~tar_gnn.TARWeighter`; these are what the CLI and benchmarks train.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

ARCHS = ("gcn", "gin", "sage")

__all__ = ["ARCHS", "GNN", "GCNLayer", "fast_dropout", "gcn_propagation", "sparse_input"]


def fast_dropout(h: Tensor, p: float, training: bool) -> Tensor:
    """Inverted dropout from a uniform draw: the same distribution as ``F.dropout``, about 3x faster on
    CPU (``bernoulli_`` dominated the GCN's epoch time)."""
    if not training or p == 0:
        return h
    keep = torch.empty_like(h).uniform_() >= p
    return h * keep * (1.0 / (1.0 - p))


def gcn_propagation(
    edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32
) -> Tensor:
    """D^-1/2 (A + I) D^-1/2 as a sparse COO tensor [N, N] of ``dtype`` (A symmetrised, duplicates
    merged)."""
    ei = edge_index.long()
    loops = torch.arange(num_nodes, device=ei.device)
    row = torch.cat([ei[0], ei[1], loops])
    col = torch.cat([ei[1], ei[0], loops])
    key = torch.unique(row * num_nodes + col)
    row, col = key // num_nodes, key % num_nodes
    deg = torch.bincount(row, minlength=num_nodes).to(dtype)
    val = deg[row].rsqrt() * deg[col].rsqrt()
    return torch.sparse_coo_tensor(
        torch.stack([row, col]), val, (num_nodes, num_nodes), check_invariants=False
    ).coalesce()


class GCNLayer(nn.Module):
    """``P (X W) + b`` with P from :func:`gcn_propagation`; ``X`` may be a sparse tensor."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x: Tensor, prop: Tensor) -> Tensor:
        h = torch.sparse.mm(x, self.weight) if x.is_sparse else x @ self.weight
        return torch.sparse.mm(prop, h) + self.bias


class GNN(nn.Module):
    """``layers`` graph convolutions of width ``hidden`` (ReLU, dropout), then ``Linear(hidden, classes)``.

    Shapes: ``x`` ``[|V|, F_in]``, ``edge_index`` ``[2, |E|]`` -> logits ``[|V|, classes]``.
    """

    def __init__(
        self,
        in_dim: int,
        num_classes: int,
        *,
        hidden: int = 300,
        layers: int = 3,
        dropout: float = 0.5,
        arch: str = "gcn",
    ) -> None:
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"arch must be one of {', '.join(ARCHS)}, got {arch!r}")
        if layers < 1 or hidden < 1 or in_dim < 1 or num_classes < 2:
            raise ValueError(
                f"GNN needs layers >= 1, hidden >= 1, in_dim >= 1, num_classes >= 2; got "
                f"{layers}, {hidden}, {in_dim}, {num_classes}"
            )
        if not 0 <= dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.arch = arch
        self.in_dim = in_dim
        self.num_classes = num_classes
        self.hidden = hidden
        self.num_layers = layers
        self.dropout = dropout
        convs: list[nn.Module] = []
        self._prop: tuple[tuple[int, int, int, int, torch.dtype], Tensor] | None = None
        for i in range(layers):
            d_in = in_dim if i == 0 else hidden
            if arch == "gcn":
                convs.append(GCNLayer(d_in, hidden))
                continue
            from torch_geometric.nn import GINConv, SAGEConv

            if arch == "sage":
                convs.append(SAGEConv(d_in, hidden))
            else:
                mlp = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
                convs.append(GINConv(mlp))
        self.convs = nn.ModuleList(convs)
        self.head = nn.Linear(hidden, num_classes)

    def config(self) -> dict[str, object]:
        return {
            "in_dim": self.in_dim,
            "num_classes": self.num_classes,
            "hidden": self.hidden,
            "layers": self.num_layers,
            "dropout": self.dropout,
            "arch": self.arch,
        }

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()  # type: ignore[operator]
        self.head.reset_parameters()

    def _propagation(self, edge_index: Tensor, n: int) -> Tensor:
        dtype = self.head.weight.dtype  # a model moved to float64 propagates in float64
        key = (edge_index.data_ptr(), edge_index.size(1), n, int(edge_index.sum()), dtype)
        if self._prop is None or self._prop[0] != key:
            self._prop = (key, gcn_propagation(edge_index, n, dtype=dtype))
        return self._prop[1]

    def embed(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """Node representations before the linear head ``[|V|, hidden]``."""
        h = x
        if self.arch == "gcn":
            graph: Tensor = self._propagation(edge_index, x.size(0))
        else:
            graph = edge_index
            if h.is_sparse:
                h = h.to_dense()
        for conv in self.convs:
            h = conv(h, graph)
            h = torch.relu(h)
            h = fast_dropout(h, self.dropout, self.training)
        return h

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.head(self.embed(x, edge_index))


def sparse_input(x: Tensor, arch: str, max_density: float = 0.1) -> Tensor:
    """``x`` as a sparse tensor when it is mostly zeros and the GCN layer can use it (else ``x``)."""
    if arch != "gcn" or x.is_sparse or x.numel() == 0:
        return x
    density = float((x != 0).sum()) / x.numel()
    return x.to_sparse() if density <= max_density else x
