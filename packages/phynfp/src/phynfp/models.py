"""The full PhyNFP model (encoder → L physics layers → decoder) and the baselines, one calling convention.

Every model is called as ``model(x, edge_index, edge_attr)`` with node windows ``x`` of shape
[N, W, F] (or already flattened [N, W·F]), optionally with a leading batch dimension over one shared
graph ([B, N, W, F]); it returns [..., N, out_channels].
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .graph import check_graph, longest_path, symmetrize
from .layers import PhyNFPConv

__all__ = [
    "BASELINES",
    "MODEL_NAMES",
    "PRESETS",
    "Climatology",
    "GraphBaseline",
    "Persistence",
    "PhyNFP",
    "build_model",
    "substeps_for_reach",
]


@dataclass(frozen=True)
class Setting:
    value: Any
    source: str


# Where each default comes from: "official" = the official code (HaoyangJiang-WM/Graph), "paper" =
# the paper's form of the method, "ours" = this package's choice (reason in the README).
PRESETS: dict[str, dict[str, Setting]] = {
    "default": {
        "hidden_channels": Setting(128, "official (train.py)"),
        "num_layers": Setting("auto", "official perturbation study: longest upstream path"),
        "mode": Setting("upwind", "paper: D̂ with -1 off-diagonal, D2 = (Δz/Δx)·D̂"),
        "orientation": Setting("downstream", "official"),
        "dt_init": Setting(0.7, "official: one learnable Δt shared by all layers"),
        "dg_init": Setting(0.5, "official: learnable δg per layer"),
        "clamp": Setting(10.0, "official: ±10"),
        "eps_dx": Setting(1e-3, "ours: Δx = softplus(φ1) + 1e-3 is a positive distance"),
        "param_sharing": Setting(False, "official"),
        "edge_hidden": Setting(16, "official edge MLPs 3→16 (tanh)→1"),
    },
    "official": {
        "hidden_channels": Setting(128, "official"),
        "num_layers": Setting(15, "official sweep {15, 19, 23, 27} (train.py)"),
        "mode": Setting("code", "official builder: same-sign off-diagonals, unconstrained δx"),
        "orientation": Setting("downstream", "official"),
        "dt_init": Setting(0.7, "official"),
        "dg_init": Setting(0.5, "official"),
        "clamp": Setting(10.0, "official"),
        "eps_dx": Setting(1e-3, "unused in mode='code'"),
        "param_sharing": Setting(False, "official"),
        "edge_hidden": Setting(16, "official"),
    },
}


def _flat_windows(x: Tensor, in_channels: int, who: str) -> Tensor:
    """[..., N, W, F] or [..., N, W·F] → [..., N, W·F]; validates shape and finiteness."""
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise ValueError(f"{who}: x must be a floating-point tensor")
    if x.dim() >= 2 and x.size(-1) == in_channels:
        flat = x
    elif x.dim() >= 3 and x.size(-1) * x.size(-2) == in_channels:
        flat = x.flatten(-2)
    else:
        raise ValueError(
            f"{who}: x must have shape [N, W, F] or [N, W·F] with W·F = {in_channels} (optionally "
            f"with a leading batch dimension), got {list(x.shape)}"
        )
    if not bool(torch.isfinite(flat).all()):
        raise ValueError(f"{who}: x holds NaN or inf; clean or impute the series first")
    return flat


class PhyNFP(nn.Module):
    """PhyNFP (Jiang et al., ICML 2025): encoder → L :class:`PhyNFPConv` steps → decoder.

    ``u⁰ = Linear(W·F → H)(flatten(x))``, ``uˡ = Layer_l(uˡ⁻¹, edge_index, edge_attr, Δt)``,
    ``ŷ = Linear(H → out)(u^L)``, with one learnable Δt shared by all layers (official code).

    Args:
        in_channels: W·F, the flattened window length times the number of variables.
        edge_dim: number of edge features.
        hidden_channels: H. (default: 128)
        num_layers: L, or ``"auto"`` = the longest directed path of the graph given as
            ``edge_index``/``num_nodes`` (raises on cyclic graphs). (default: ``"auto"``)
        out_channels: outputs per node. (default: 1)
        mode, orientation, physics, clamp, c_src, eps_dx, edge_hidden: see :class:`PhyNFPConv`.
        param_sharing: reuse one layer (with its edge MLPs) L times (shared-weight recurrence).
            (default: False)
        substeps: linear upwind transport sub-steps inside every layer (:class:`PhyNFPConv`), so
            the model reaches L·(substeps + 1) hops upstream; ``"auto"`` picks the smallest value
            that reaches the longest path of the graph given as ``edge_index``/``num_nodes``.
            (default: 0)
        courant_init: initial Courant number of the sub-steps, in (0, 1) (see
            :class:`PhyNFPConv`). (default: 0.5)
        dt_init: initial shared Δt. (default: 0.7)
        dg_init: initial δg of every layer. (default: 0.5)
        edge_index, num_nodes: the graph, needed only for ``num_layers="auto"``.
    """

    def __init__(
        self,
        in_channels: int,
        edge_dim: int,
        hidden_channels: int = 128,
        num_layers: int | str = "auto",
        out_channels: int = 1,
        *,
        mode: str = "upwind",
        orientation: str = "downstream",
        physics: str = "saint_venant",
        param_sharing: bool = False,
        dt_init: float = 0.7,
        dg_init: float = 0.5,
        clamp: float | None = 10.0,
        c_src: float = 1.0,
        eps_dx: float = 1e-3,
        edge_hidden: int = 16,
        substeps: int | str = 0,
        courant_init: float = 0.5,
        edge_index: Tensor | None = None,
        num_nodes: int | None = None,
    ) -> None:
        super().__init__()
        if num_layers == "auto":
            if edge_index is None or num_nodes is None:
                raise ValueError(
                    "PhyNFP: num_layers='auto' (the longest path) needs the graph: pass edge_index and "
                    "num_nodes, or an integer num_layers"
                )
            num_layers = max(1, longest_path(edge_index, num_nodes))
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
            raise ValueError(
                f"PhyNFP: num_layers must be an integer >= 1 or 'auto', got {num_layers!r}"
            )
        if substeps == "auto":
            if edge_index is None or num_nodes is None:
                raise ValueError(
                    "PhyNFP: substeps='auto' (reach the longest path) needs the graph: pass "
                    "edge_index and num_nodes, or an integer substeps"
                )
            substeps = substeps_for_reach(longest_path(edge_index, num_nodes), num_layers)
        if not isinstance(substeps, int) or isinstance(substeps, bool) or substeps < 0:
            raise ValueError(
                f"PhyNFP: substeps must be an integer >= 0 or 'auto', got {substeps!r}"
            )
        if in_channels < 1 or hidden_channels < 1 or out_channels < 1:
            raise ValueError(
                f"PhyNFP: in/hidden/out channels must be >= 1, got {in_channels}/{hidden_channels}/"
                f"{out_channels}"
            )
        self.in_channels = in_channels
        self.edge_dim = edge_dim
        self.hidden_channels = hidden_channels
        self.num_layers = num_layers
        self.out_channels = out_channels
        self.param_sharing = param_sharing
        self.dt_init = dt_init
        self.encoder = nn.Linear(in_channels, hidden_channels)
        kwargs = dict(
            mode=mode,
            orientation=orientation,
            physics=physics,
            edge_hidden=edge_hidden,
            dt=None,
            dg_init=dg_init,
            clamp=clamp,
            c_src=c_src,
            eps_dx=eps_dx,
            substeps=substeps,
            courant_init=courant_init,
        )
        self.substeps = substeps
        count = 1 if param_sharing else num_layers
        self.convs = nn.ModuleList(
            [PhyNFPConv(hidden_channels, edge_dim, **kwargs) for _ in range(count)]  # type: ignore[arg-type]
        )
        self.dt = nn.Parameter(torch.tensor(float(dt_init)))
        self.decoder = nn.Linear(hidden_channels, out_channels)

    @property
    def mode(self) -> str:
        return str(self.convs[0].mode)

    @property
    def orientation(self) -> str:
        return str(self.convs[0].orientation)

    @property
    def needs_edge_sign(self) -> bool:
        """True for ``orientation="dynamic"``: ``forward`` needs each sample's flow signs."""
        return self.orientation == "dynamic"

    @property
    def receptive_field(self) -> int:
        """How many hops upstream the output hears: L·(substeps + 1)."""
        return self.num_layers * (self.substeps + 1)

    @classmethod
    def from_preset(cls, preset: str, in_channels: int, edge_dim: int, **overrides: Any) -> PhyNFP:
        """Build with the settings of ``PRESETS[preset]`` (``"default"`` or ``"official"``)."""
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
        settings = {k: s.value for k, s in PRESETS[preset].items()}
        settings.update(overrides)
        return cls(in_channels, edge_dim, **settings)

    def reset_parameters(self) -> None:
        self.encoder.reset_parameters()
        self.decoder.reset_parameters()
        for conv in self.convs:
            conv.reset_parameters()  # type: ignore[operator]
        with torch.no_grad():
            self.dt.fill_(float(self.dt_init))

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        edge_attr: Tensor | None = None,
        edge_sign: Tensor | None = None,
    ) -> Tensor:
        u = self.encoder(_flat_windows(x, self.in_channels, type(self).__name__))
        if edge_index.numel() == 0:
            warnings.warn(
                "PhyNFP: the graph has no edges; every node is predicted from its own window only",
                stacklevel=2,
            )
        for layer in range(self.num_layers):
            conv = self.convs[0 if self.param_sharing else layer]
            u = conv(u, edge_index, edge_attr, dt=self.dt, edge_sign=edge_sign)
        return self.decoder(u)


def substeps_for_reach(reach: int, num_layers: int) -> int:
    """The fewest transport sub-steps k with L·(k + 1) >= ``reach`` hops."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    return max(0, -(-max(reach, 1) // num_layers) - 1)


class Persistence(nn.Module):
    """ŷ = the last observed value of the target variable (a trivial baseline; no parameters)."""

    def __init__(self, window: int, num_features: int, target_index: int = 0) -> None:
        super().__init__()
        self.window, self.num_features, self.target_index = window, num_features, target_index

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        if x.size(-1) != self.num_features:
            x = x.unflatten(-1, (self.window, self.num_features))
        return x[..., -1, self.target_index].unsqueeze(-1)


class Climatology(nn.Module):
    """ŷ = the training mean of each node, i.e. 0 in z-scored units (a trivial baseline)."""

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        lead = x.shape[:-2] if x.dim() >= 3 else x.shape[:-1]
        return torch.zeros(*lead, 1, dtype=x.dtype, device=x.device)


class _EdgeWeightMLP(nn.Module):
    """Learned positive edge weights ``|MLP(e)|``, 3 → 16 → 16 → 1 with ReLU (as in the gTFP baselines)."""

    def __init__(self, edge_dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(edge_dim, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)
        )

    def forward(self, edge_attr: Tensor) -> Tensor:
        return self.net(edge_attr).squeeze(-1).abs()


BASELINES = ("mlp", "gcn", "gat", "sage", "dirgnn")


class GraphBaseline(nn.Module):
    """Baselines on PyG layers, with PhyNFP's encoder/decoder, width and depth.

    ``kind``:
      - ``"mlp"``: L hidden Linear layers with leaky-ReLU(0.01), no graph (official ``MLP``);
      - ``"gcn"``: ``GCNConv`` with learned edge weights ``|MLP(e)|``; ``"gat"``: ``GATConv`` with
        ``edge_dim`` attention; ``"sage"``: ``SAGEConv`` (mean); all three on the symmetrised graph
        E ∪ flip(E) when ``symmetric=True`` (default), which makes them orientation-invariant;
      - ``"dirgnn"``: PyG ``DirGNNConv(GCNConv, alpha=0.5, root_weight=True)`` on the directed graph
        (separate aggregation over in- and out-edges, Rossi et al. 2023).

    GNN layers use ReLU and a residual connection ``u + conv(u)`` (``residual=True``).
    """

    def __init__(
        self,
        kind: str,
        in_channels: int,
        edge_dim: int,
        hidden_channels: int = 128,
        num_layers: int = 2,
        out_channels: int = 1,
        *,
        symmetric: bool = True,
        residual: bool = True,
    ) -> None:
        super().__init__()
        if kind not in BASELINES:
            raise ValueError(f"unknown baseline {kind!r}; choose from {BASELINES}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        from ._pyg import DirGNNConv, GATConv, GCNConv, SAGEConv

        self.kind = kind
        self.in_channels = in_channels
        self.edge_dim = edge_dim
        self.num_layers = num_layers
        self.symmetric = symmetric and kind in ("gcn", "gat", "sage")
        self.residual = residual
        self.encoder = nn.Linear(in_channels, hidden_channels)
        self.decoder = nn.Linear(hidden_channels, out_channels)
        self.edge_mlp = _EdgeWeightMLP(edge_dim) if kind == "gcn" else None
        layers: list[nn.Module] = []
        for _ in range(num_layers):
            if kind == "mlp":
                layers.append(nn.Linear(hidden_channels, hidden_channels))
            elif kind == "gcn":
                layers.append(GCNConv(hidden_channels, hidden_channels))
            elif kind == "gat":
                layers.append(GATConv(hidden_channels, hidden_channels, edge_dim=edge_dim))
            elif kind == "sage":
                layers.append(SAGEConv(hidden_channels, hidden_channels))
            else:
                layers.append(DirGNNConv(GCNConv(hidden_channels, hidden_channels), alpha=0.5))
        self.layers = nn.ModuleList(layers)
        self._graph_cache: tuple[Tensor, Tensor | None, Tensor, Tensor | None] | None = None

    def _graph(self, edge_index: Tensor, edge_attr: Tensor | None) -> tuple[Tensor, Tensor | None]:
        if not self.symmetric:
            return edge_index, edge_attr
        hit = self._graph_cache
        if hit is not None and hit[0] is edge_index and hit[1] is edge_attr:
            return hit[2], hit[3]
        sym = symmetrize(edge_index, edge_attr)
        self._graph_cache = (edge_index, edge_attr, sym[0], sym[1])
        return sym

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        h = self.encoder(_flat_windows(x, self.in_channels, f"GraphBaseline({self.kind})"))
        if self.kind == "mlp":
            for lin in self.layers:
                h = F.leaky_relu(lin(h), 0.01)
            return self.decoder(h)
        num_nodes = h.size(-2)
        check_graph(edge_index, num_nodes, edge_attr, where=f"GraphBaseline({self.kind})")
        if self.kind in ("gcn", "gat") and edge_attr is None:
            raise ValueError(f"GraphBaseline({self.kind}) needs edge_attr [E, {self.edge_dim}]")
        ei, ea = self._graph(edge_index, edge_attr)
        lead = h.shape[:-2]
        if self.kind == "gat" and len(lead):  # GATConv takes [N, C]: use a block-diagonal batch
            batch = int(torch.tensor(lead).prod())
            offsets = (torch.arange(batch, device=ei.device) * num_nodes).repeat_interleave(
                ei.size(1)
            )
            ei = ei.repeat(1, batch) + offsets
            ea = None if ea is None else ea.repeat(batch, 1)
            h = h.reshape(batch * num_nodes, -1)
        weight = self.edge_mlp(ea) if self.edge_mlp is not None and ea is not None else None
        for conv in self.layers:
            if self.kind == "gcn":
                out = conv(h, ei, weight)
            elif self.kind == "gat":
                out = conv(h, ei, ea)
            else:
                out = conv(h, ei)
            out = F.relu(out)
            h = h + out if self.residual else out
        if self.kind == "gat" and len(lead):
            h = h.reshape(*lead, num_nodes, -1)
        return self.decoder(h)


MODEL_NAMES = ("persistence", "climatology", *BASELINES, "phynfp")


def build_model(
    name: str,
    *,
    window: int,
    num_features: int,
    edge_dim: int,
    hidden_channels: int,
    num_layers: int,
    target_index: int = 0,
    phynfp_options: dict[str, Any] | None = None,
) -> nn.Module:
    """One model by name (``MODEL_NAMES``) with the shared encoder/decoder sizes."""
    in_channels = window * num_features
    if name == "persistence":
        return Persistence(window, num_features, target_index)
    if name == "climatology":
        return Climatology()
    if name in BASELINES:
        return GraphBaseline(name, in_channels, edge_dim, hidden_channels, num_layers)
    if name == "phynfp":
        options = copy.deepcopy(phynfp_options or {})
        return PhyNFP(in_channels, edge_dim, hidden_channels, num_layers, **options)
    raise ValueError(f"unknown model {name!r}; choose from {MODEL_NAMES}")
