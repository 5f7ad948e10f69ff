"""PyTorch Geometric, imported once with its import-time deprecation warnings silenced.

PyG 2.x calls ``torch.jit.script`` at import, which recent torch releases flag as deprecated; the
warning says nothing about this package's use of PyG, so it is filtered here and only here."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch_geometric")
    from torch_geometric.nn import DirGNNConv, GATConv, GCNConv, MessagePassing, SAGEConv

__all__ = ["DirGNNConv", "GATConv", "GCNConv", "MessagePassing", "SAGEConv"]
