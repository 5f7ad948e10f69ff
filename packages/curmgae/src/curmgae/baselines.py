"""GAE baseline from PyG (``torch_geometric.nn.GAE``): GCN encoder, inner-product decoder,
``GAE.recon_loss`` on all training edges with PyG's negative sampling (a baseline of the paper's
experiments, Sec. 3)."""

from __future__ import annotations

import copy
import random
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.data import Data
from torch_geometric.nn import GAE, GCNConv

from .config import CurMGAEConfig
from .method import CurMGAE, FitHistory
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
    """Kipf & Welling's GAE through ``torch_geometric.nn.GAE``; same ``fit``/``embed``/``score`` API."""

    def __init__(self, in_channels: int, config: CurMGAEConfig | None = None) -> None:
        config = config or CurMGAEConfig(decoder="inner_product", masking="none")
        super().__init__(PyGGCNEncoder(in_channels, config.hidden), InnerProductDecoder(), config)

    def fit(  # type: ignore[override]
        self,
        data: Data,
        epochs: int | None = None,
        seed: int = 0,
        progress: bool = False,
        reset: bool = True,
        unit_difficulty: Tensor | None = None,
    ) -> FitHistory:
        """Full-batch GAE training, model selection on validation AUC when ``data.val_pos`` exists."""
        cfg = self.config
        T = int(epochs or cfg.epochs)
        torch.manual_seed(seed)
        random.seed(seed)  # PyG's negative_sampling draws with Python's `random` for small graphs
        if reset:
            self._reset()
        gae = GAE(lambda x, ei: self.encoder(x, ei)[-1])
        opt = torch.optim.Adam(self.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        hist, best_auc, best_state = FitHistory(), -1.0, None
        has_val = getattr(data, "val_pos", None) is not None
        for epoch in range(1, T + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            self.train()
            opt.zero_grad()
            z = gae.encode(data.x, data.edge_index)
            loss = gae.recon_loss(z, data.edge_index)
            loss.backward()
            opt.step()
            hist.epoch_times.append(time.perf_counter() - t0)
            hist.epoch_cpu_times.append(time.process_time() - c0)
            hist.losses.append(float(loss.detach()))
            if has_val and (epoch % cfg.eval_every == 0 or epoch == T):
                auc = self.link_prediction(data, "val")["auc"]
                hist.val_auc.append((epoch, auc))
                if auc > best_auc:
                    best_auc, best_state, hist.best_epoch = (
                        auc,
                        copy.deepcopy(self.state_dict()),
                        epoch,
                    )
        if best_state is not None:
            self.load_state_dict(best_state)
        return hist
