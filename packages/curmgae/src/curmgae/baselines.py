"""GAE baseline from PyG (``torch_geometric.nn.GAE``): GCN encoder, inner-product decoder,
``GAE.recon_loss`` on all training edges with PyG's negative sampling (a baseline of the paper's
experiments, Sec. 3)."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GAE, GCNConv

from .config import CurMGAEConfig
from .masking import NoMask
from .method import CurMGAE, TrainingGraph, sample_excluding
from .models import InnerProductDecoder


class PyGGCNEncoder(nn.Module):
    """The encoder of PyG's autoencoder example (``GCNConv -> ReLU -> GCNConv``, no final ReLU);
    returns ``[h^(1), z]`` so that Cur-MGAE's evaluation code applies unchanged."""

    def __init__(self, in_channels: int, hidden: int = 128) -> None:
        super().__init__()
        self.conv1, self.conv2 = GCNConv(in_channels, 2 * hidden), GCNConv(2 * hidden, hidden)

    def forward(self, x: Tensor, edge_index: Tensor) -> list[Tensor]:
        h = F.relu(self.conv1(x, edge_index))
        return [h, self.conv2(h, edge_index)]


class GAEBaseline(CurMGAE):
    """Kipf & Welling's GAE through ``torch_geometric.nn.GAE``; same ``fit``/``embed``/``score`` API.

    One full-batch step per epoch on every training edge (no masking, :class:`~curmgae.masking.NoMask`)
    with ``GAE.recon_loss``; its negatives (as many as the positives, non-edges of the training graph,
    no self-pairs, like PyG's ``negative_sampling``) are drawn from the model's generator and passed
    to ``recon_loss``, so the run is reproducible without reseeding the global RNG. No gradient
    clipping. ``fit``, model selection and early stopping are :class:`CurMGAE`'s."""

    def __init__(
        self, in_channels: int, config: CurMGAEConfig | None = None, **kwargs: Any
    ) -> None:
        config = config or CurMGAEConfig(decoder="inner_product", masking="none")
        kwargs.setdefault("masker", NoMask())
        super().__init__(
            PyGGCNEncoder(in_channels, config.hidden), InnerProductDecoder(), config, **kwargs
        )

    def train_epoch(self, graph: TrainingGraph, mask: Tensor) -> float:
        # a plain function as GAE's encoder: GAE() would otherwise reset the encoder's weights
        gae = GAE(lambda x, ei: self.encoder(x, ei)[-1])
        ei = graph.edge_index
        n = graph.num_nodes
        banned = (ei[0].minimum(ei[1]) * n + ei[0].maximum(ei[1])).unique()
        neg = sample_excluding(ei.size(1), n, banned, self.generator)
        self.train()
        self.optimizer.zero_grad()
        z = gae.encode(graph.x, ei)
        loss = gae.recon_loss(z, ei, neg)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())
