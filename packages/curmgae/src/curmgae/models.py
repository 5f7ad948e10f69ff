"""Backbone of Cur-MGAE: a GNN encoder that keeps every layer's output (paper Eq. 1) and the
cross-layer correlation decoder (paper Eq. 2), plus the inner-product decoder of the ablation."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GCNConv, GINConv, SAGEConv

from .config import DECODERS, ENCODERS, CurMGAEConfig


def dropout(x: Tensor, p: float, training: bool, generator: torch.Generator | None) -> Tensor:
    """``F.dropout`` that draws its mask from ``generator`` (the global RNG when None), so that
    ``CurMGAE.fit`` is reproducible without reseeding the global RNG."""
    if not training or p == 0.0:
        return x
    if generator is None:
        return F.dropout(x, p=p, training=True)
    keep = torch.empty_like(x).bernoulli_(1.0 - p, generator=generator)
    return x * keep / (1.0 - p)


def _check_pairs(pairs: Tensor) -> None:
    if pairs.dim() != 2 or pairs.size(0) != 2:
        raise ValueError(f"pairs must have shape [2, B]; got {tuple(pairs.shape)}")


class GNNEncoder(nn.Module):
    r"""K-layer GNN, paper Eq. 1: :math:`h^{(k)} = \mathrm{ReLU}(\mathrm{Conv}_k(h^{(k-1)}, \tilde A + I))`.

    Returns the list ``[h^(1), ..., h^(K)]`` (each ``[N, hidden]``). As in S2GAE, ReLU is applied to the
    last layer too and dropout is applied to ``h^(k)`` before it enters layer ``k+1``.
    """

    def __init__(
        self,
        in_channels: int,
        hidden: int = 128,
        num_layers: int = 2,
        dropout: float = 0.5,
        conv: str = "gcn",
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers={num_layers!r} must be an integer >= 1")
        if conv not in ENCODERS:
            raise ValueError(f"conv={conv!r} is not accepted; choose one of {', '.join(ENCODERS)}")
        self.in_channels, self.hidden, self.num_layers = in_channels, hidden, num_layers
        self.dropout, self.conv = dropout, conv
        self.convs = nn.ModuleList(
            [self._make_conv(in_channels if k == 0 else hidden, hidden) for k in range(num_layers)]
        )
        self.generator: torch.Generator | None = None

    def _make_conv(self, c_in: int, c_out: int) -> nn.Module:
        if self.conv == "gcn":
            return GCNConv(c_in, c_out)  # adds self-loops + symmetric normalisation (= S2GAE)
        if self.conv == "sage":
            return SAGEConv(c_in, c_out)
        mlp = nn.Sequential(nn.Linear(c_in, c_out), nn.ReLU(), nn.Linear(c_out, c_out))
        return GINConv(mlp)

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()  # type: ignore[operator]

    def forward(self, x: Tensor, edge_index: Tensor) -> list[Tensor]:
        hs: list[Tensor] = []
        h = x
        for k, conv in enumerate(self.convs):
            h = F.relu(conv(h, edge_index))
            if k < self.num_layers - 1:
                h = dropout(h, self.dropout, self.training, self.generator)
            hs.append(h)
        return hs


class CrossCorrelationDecoder(nn.Module):
    r"""Cross-layer correlation decoder, paper Eq. 2.

    :math:`e_{v,u} = \Vert_{k=1}^{K}\Vert_{j=1}^{K}\, h_v^{(k)} \odot h_u^{(j)}` (k outer, j inner,
    width ``hidden * K**2``) fed to an MLP with ``decode_layers`` linear layers; returns the logit
    :math:`s(v,u)` (``g = sigmoid(s)``).
    """

    def __init__(
        self,
        hidden: int,
        num_layers: int,
        channels: int = 256,
        decode_layers: int = 2,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        if decode_layers < 2:
            raise ValueError(f"decode_layers={decode_layers!r} must be an integer >= 2")
        self.hidden, self.num_layers = hidden, num_layers
        self.in_channels = hidden * num_layers * num_layers
        self.dropout = dropout
        dims = [self.in_channels] + [channels] * (decode_layers - 1) + [1]
        self.lins = nn.ModuleList([nn.Linear(a, b) for a, b in itertools.pairwise(dims)])
        self.generator: torch.Generator | None = None

    def reset_parameters(self) -> None:
        for lin in self.lins:
            lin.reset_parameters()  # type: ignore[operator]

    def features(self, hs: list[Tensor], pairs: Tensor) -> Tensor:
        """The cross-layer Hadamard features ``e_{v,u}`` of Eq. 2, shape ``[B, hidden*K*K]``."""
        _check_pairs(pairs)
        if len(hs) * len(hs) * hs[0].size(-1) != self.in_channels:
            raise ValueError(
                f"decoder input width {self.in_channels} does not match hidden*K^2 = "
                f"{hs[0].size(-1)}*{len(hs)}^2 of the encoder output"
            )
        h_v = torch.stack([h[pairs[0]] for h in hs])  # [K, B, d]
        h_u = torch.stack([h[pairs[1]] for h in hs])
        e = h_v[:, None] * h_u[None, :]  # [K (k), K (j), B, d]
        return e.permute(2, 0, 1, 3).reshape(pairs.size(1), -1)

    def forward(self, hs: list[Tensor], pairs: Tensor) -> Tensor:
        z = self.features(hs, pairs)
        for lin in self.lins[:-1]:
            z = dropout(F.relu(lin(z)), self.dropout, self.training, self.generator)
        return self.lins[-1](z).squeeze(-1)


class InnerProductDecoder(nn.Module):
    r"""Ablation "w/o CC Dec.": :math:`s(v,u) = \langle h_v^{(K)}, h_u^{(K)} \rangle` (a logit)."""

    def reset_parameters(self) -> None:
        return None

    def forward(self, hs: list[Tensor], pairs: Tensor) -> Tensor:
        _check_pairs(pairs)
        z = hs[-1]
        return (z[pairs[0]] * z[pairs[1]]).sum(-1)


def score_pairs(decoder: nn.Module, hs: list[Tensor], pairs: Tensor, symmetric: bool) -> Tensor:
    """Decoder logits; with ``symmetric`` the score is ``(s(v,u) + s(u,v)) / 2``: Eq. 2's decoder is not
    symmetric in (v, u), so residuals and evaluation use the average of both orientations."""
    s = decoder(hs, pairs)
    if symmetric:
        s = 0.5 * (s + decoder(hs, pairs.flip(0)))
    return s


def build_backbone(in_channels: int, config: CurMGAEConfig) -> tuple[GNNEncoder, nn.Module]:
    """Encoder and decoder as described by ``config``."""
    encoder = GNNEncoder(
        in_channels, config.hidden, config.num_layers, config.dropout, config.encoder
    )
    if config.decoder not in DECODERS:
        raise ValueError(f"decoder={config.decoder!r} is not accepted; choose one of {DECODERS}")
    decoder: nn.Module
    if config.decoder == "cross":
        decoder = CrossCorrelationDecoder(
            config.hidden,
            config.num_layers,
            config.decode_channels,
            config.decode_layers,
            config.dropout,
        )
    else:
        decoder = InnerProductDecoder()
    return encoder, decoder
