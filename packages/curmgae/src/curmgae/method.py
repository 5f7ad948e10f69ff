"""Cur-MGAE training: alternating S-steps (difficulty measurer + self-paced scheduler) and w-steps
(masked reconstruction), Algorithm 1 of the paper. The baselines run in the same loop."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch_geometric.data import Data

from .config import DIFFICULTY_NAMES, CurMGAEConfig
from .data import prepare_graph
from .evaluation import link_metrics
from .losses import bce_loss, full_softmax_loss, sampled_softmax_loss
from .masking import edge_units, expand_units, path_mask, random_mask
from .models import CrossCorrelationDecoder, GNNEncoder, build_backbone, score_pairs
from .scheduler import SelfPacedEdgeScheduler, residuals


@dataclass
class FitHistory:
    """What ``fit`` returns: per-epoch loss and wall time, validation AUCs and the curriculum trace."""

    losses: list[float] = field(default_factory=list)
    epoch_times: list[float] = field(default_factory=list)
    epoch_cpu_times: list[float] = field(default_factory=list)
    val_auc: list[tuple[int, float]] = field(default_factory=list)
    best_epoch: int = 0
    trace: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "losses": self.losses,
            "epoch_times": self.epoch_times,
            "epoch_cpu_times": self.epoch_cpu_times,
            "val_auc": self.val_auc,
            "best_epoch": self.best_epoch,
            "trace": self.trace,
        }


def sample_uniform_pairs(num: int, num_nodes: int, generator: torch.Generator) -> Tensor:
    """S2GAE negatives: both endpoints uniform over V (may hit true edges)."""
    return torch.randint(num_nodes, (2, num), generator=generator)


def sample_excluding(
    num: int, num_nodes: int, banned_keys: Tensor, generator: torch.Generator
) -> Tensor:
    """Uniform pairs rejected when a self-pair or an edge of the *training* graph (sorted keys)."""
    out = torch.empty(2, 0, dtype=torch.long)
    while out.size(1) < num:
        cand = torch.randint(num_nodes, (2, 2 * (num - out.size(1)) + 8), generator=generator)
        keys = cand[0].minimum(cand[1]) * num_nodes + cand[0].maximum(cand[1])
        ok = (cand[0] != cand[1]) & ~torch.isin(keys, banned_keys)
        out = torch.cat([out, cand[:, ok]], 1)
    return out[:, :num]


class CurMGAE(nn.Module):
    """Masked graph autoencoder with a structure-aware curriculum (Cur-MGAE).

    ``CurMGAE(encoder, decoder, config).fit(data)`` trains on any PyG ``Data`` (its ``edge_index`` is the
    training graph); ``embed`` returns frozen node embeddings, ``score`` link probabilities. With
    ``config.masking`` = ``random``/``path``/``none`` the same loop trains the S2GAE, MaskGAE-path and
    reconstruct-everything baselines.

    Encoders must map ``(x, edge_index)`` to the list of every layer's output; decoders map
    ``(hs, pairs[2, B])`` to logits ``[B]``.
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module, config: CurMGAEConfig | None = None):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.config = config or CurMGAEConfig()
        if isinstance(decoder, CrossCorrelationDecoder) and isinstance(encoder, GNNEncoder):
            want = encoder.hidden * encoder.num_layers**2
            if decoder.in_channels != want:
                raise ValueError(
                    f"decoder input width {decoder.in_channels} does not match hidden*K^2 = {want}"
                )
        self.scheduler: SelfPacedEdgeScheduler | None = None

    @classmethod
    def from_config(cls, in_channels: int, config: CurMGAEConfig | None = None) -> CurMGAE:
        """Build the S2GAE-style backbone described by ``config`` (encoder Eq. 1, decoder Eq. 2)."""
        config = config or CurMGAEConfig()
        return cls(*build_backbone(in_channels, config), config=config)

    # ------------------------------------------------------------------------------------- inference
    @torch.no_grad()
    def hidden_states(self, x: Tensor, edge_index: Tensor) -> list[Tensor]:
        """Every layer's output on ``edge_index``, eval mode, no gradient."""
        was = self.training
        self.eval()
        hs = self.encoder(x, edge_index)
        self.train(was)
        return hs

    def embed(self, data: Data, edge_index: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``(last, concat)`` embeddings: ``h^(K)`` and ``[h^(1) || ... || h^(K)]`` (eval mode).

        Uses ``data.full_edge_index`` when present (node classification sees the whole graph)."""
        ei = (
            edge_index
            if edge_index is not None
            else getattr(data, "full_edge_index", data.edge_index)
        )
        hs = self.hidden_states(data.x, ei)
        return hs[-1], torch.cat(hs, dim=1)

    @torch.no_grad()
    def score(self, x: Tensor, edge_index: Tensor, pairs: Tensor) -> Tensor:
        """Link probabilities ``g(v,u)`` (symmetrised when ``config.symmetric_score``), eval mode."""
        hs = self.hidden_states(x, edge_index)
        was = self.training
        self.eval()
        s = score_pairs(self.decoder, hs, pairs, self.config.symmetric_score)
        self.train(was)
        return torch.sigmoid(s)

    def edge_residuals(self, x: Tensor, edge_index: Tensor, units: Tensor) -> Tensor:
        """Difficulty measurer (Algorithm 1 lines 7-8): residuals of the existing ``units`` with the
        encoder on the full training graph ``A`` (nothing masked), eval mode, no gradient."""
        return residuals(self.score(x, edge_index, units), self.config.residual)

    def link_prediction(self, data: Data, split: str = "test") -> dict[str, float]:
        """AUC/AP on ``data.<split>_pos`` / ``data.<split>_neg`` with the training graph as input."""
        pos, neg = getattr(data, f"{split}_pos"), getattr(data, f"{split}_neg")
        s = self.score(data.x, data.edge_index, torch.cat([pos, neg], 1))
        return link_metrics(s[: pos.size(1)], s[pos.size(1) :])

    # ------------------------------------------------------------------------------------- training
    def _reset(self) -> None:
        for mod in (self.encoder, self.decoder):
            for m in mod.modules():
                if m is not mod and hasattr(m, "reset_parameters"):
                    m.reset_parameters()  # type: ignore[operator]

    def _loss(
        self, hs: list[Tensor], pos: Tensor, n: int, gen: torch.Generator, banned: Tensor | None
    ) -> Tensor:
        """Reconstruction loss of a batch of positives (paper Eq. 3 / S2GAE BCE)."""
        cfg = self.config

        def score(p: Tensor) -> Tensor:
            return self.decoder(hs, p)

        if cfg.loss == "sampled_softmax":
            return sampled_softmax_loss(
                score, pos, n, cfg.num_negatives, gen, cfg.softmax_on_probabilities
            )
        if cfg.loss == "full_softmax":
            return full_softmax_loss(score, pos, n, cfg.softmax_on_probabilities)
        neg = (
            sample_uniform_pairs(pos.size(1), n, gen)
            if banned is None
            else sample_excluding(pos.size(1), n, banned, gen)
        )
        return bce_loss(score(pos), score(neg))

    def _select_mask(
        self, epoch: int, x: Tensor, edge_index: Tensor, units: Tensor, n: int, gen: torch.Generator
    ) -> Tensor | None:
        cfg = self.config
        if cfg.masking == "curriculum":
            if self.scheduler is None:
                raise RuntimeError("scheduler missing")  # set up in fit
            if (epoch - 1) % cfg.update_every != 0:
                return None  # keep the previous mask
            R = self.edge_residuals(x, edge_index, units)
            self._last_R = R
            return self.scheduler.step(R, epoch)
        if cfg.masking == "random":
            return random_mask(units.size(1), cfg.mask_ratio, gen)
        if cfg.masking == "path":
            return path_mask(units, n, cfg.mask_unit, cfg.path_root_ratio, cfg.walk_length, gen)
        return torch.zeros(units.size(1), dtype=torch.bool)

    def fit(
        self,
        data: Data,
        epochs: int | None = None,
        seed: int = 0,
        progress: bool = False,
        reset: bool = True,
        unit_difficulty: Tensor | None = None,
    ) -> FitHistory:
        """Pretrain on ``data`` (Algorithm 1). ``data.edge_index`` is the training graph; when ``data``
        carries ``val_pos``/``val_neg`` (from :func:`curmgae.split_edges`), the weights with the best
        validation AUC (checked every ``eval_every`` epochs) are restored at the end.

        ``unit_difficulty`` (or ``data.train_difficulty``/``data.edge_difficulty``) are planted
        difficulty labels used only to report the composition of the curriculum in the trace.
        """
        cfg = self.config
        T = int(epochs or cfg.epochs)
        if T < 1:
            raise ValueError(f"epochs={epochs!r} must be an integer >= 1")
        g = prepare_graph(data) if not hasattr(data, "train_pos") else data
        x, ei, n = g.x, g.edge_index, g.num_nodes
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        if reset:
            self._reset()
        units = edge_units(ei, cfg.mask_unit)
        M = units.size(1)
        if unit_difficulty is None:
            unit_difficulty = _unit_difficulty(g, cfg.mask_unit)
        if cfg.masking == "curriculum":
            self.scheduler = SelfPacedEdgeScheduler(
                M,
                mask_ratio=cfg.mask_ratio,
                split_ratio=cfg.split_ratio,
                beta=cfg.beta,
                gamma=cfg.gamma,
                penalty=cfg.penalty,
                s_solver=cfg.s_solver,
                lambda_pace=cfg.lambda_pace,
                lambda_init=cfg.lambda_init,
                mu=cfg.mu,
                base_lambda=cfg.base_lambda,
                start_lambda=cfg.start_lambda,
                init_mask_ratio=cfg.init_mask_ratio,
                ramp_frac=cfg.ramp_frac,
                min_mask_ratio=cfg.min_mask_ratio,
                random_pool=cfg.random_pool,
                total_epochs=T,
                update_every=cfg.update_every,
                anti_curriculum=cfg.anti_curriculum,
                seed=seed,
            )
        banned = None
        if cfg.negatives == "exclude_edges":  # training graph only: val/test edges are never seen
            banned = (ei[0].minimum(ei[1]) * n + ei[0].maximum(ei[1])).unique()
        opt = torch.optim.Adam(self.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        has_val = getattr(g, "val_pos", None) is not None and g.val_pos.numel() > 0
        hist = FitHistory()
        best_auc, best_state = -1.0, None
        mask = torch.zeros(M, dtype=torch.bool)
        iterator: Any = range(1, T + 1)
        if progress:
            from tqdm import tqdm

            iterator = tqdm(iterator, desc=f"fit[{cfg.masking}]", leave=False)
        for epoch in iterator:
            t0, c0 = time.perf_counter(), time.process_time()
            # ---- S-step (curriculum) or baseline mask: which units are hidden this epoch
            new_mask = self._select_mask(epoch, x, ei, units, n, gen)
            if new_mask is not None:
                mask = new_mask
                if cfg.masking == "curriculum" and self.scheduler is not None:
                    self._annotate_trace(mask, unit_difficulty)
            if cfg.masking == "none":
                visible, positives = ei, ei
            else:
                visible = expand_units(units[:, ~mask], cfg.mask_unit)
                positives = expand_units(units[:, mask], cfg.mask_unit)
            # ---- w-step: reconstruct the masked edges from the visible graph
            self.train()
            total, count = 0.0, 0
            perm = positives[:, torch.randperm(positives.size(1), generator=gen)]
            bs = cfg.batch_size or max(perm.size(1), 1)
            for start in range(0, perm.size(1), bs):
                pos = perm[:, start : start + bs]
                opt.zero_grad()
                hs = self.encoder(x, visible)
                loss = self._loss(hs, pos, n, gen, banned)
                loss.backward()
                nn.utils.clip_grad_norm_(self.encoder.parameters(), cfg.grad_clip)
                nn.utils.clip_grad_norm_(self.decoder.parameters(), cfg.grad_clip)
                opt.step()
                total += float(loss.detach()) * pos.size(1)
                count += pos.size(1)
            hist.epoch_times.append(time.perf_counter() - t0)
            hist.epoch_cpu_times.append(time.process_time() - c0)
            hist.losses.append(total / max(count, 1))
            if has_val and (epoch % cfg.eval_every == 0 or epoch == T):
                auc = self.link_prediction(g, "val")["auc"]
                hist.val_auc.append((epoch, auc))
                if auc > best_auc:
                    best_auc, best_state = auc, copy.deepcopy(self.state_dict())
                    hist.best_epoch = epoch
        if best_state is not None:
            self.load_state_dict(best_state)
        else:
            hist.best_epoch = T
        if self.scheduler is not None:
            hist.trace = self.scheduler.trace
        return hist

    def _annotate_trace(self, mask: Tensor, difficulty: Tensor | None) -> None:
        """Add the easy/medium/hard shares of the difficulty-chosen part to the latest trace entry."""
        if difficulty is None or self.scheduler is None:
            return
        entry = self.scheduler.trace[-1]
        part = difficulty[self.scheduler.difficulty_mask]
        for level, name in enumerate(DIFFICULTY_NAMES):
            entry[f"share_{name}"] = float((part == level).float().mean()) if part.numel() else None
            entry[f"residual_{name}"] = float(self._last_R[difficulty == level].mean())


def _unit_difficulty(g: Data, mask_unit: str) -> Tensor | None:
    """Planted difficulty labels aligned with the masking units, when the data carries them."""
    if getattr(g, "train_difficulty", None) is not None and mask_unit == "undirected":
        return g.train_difficulty
    ed = getattr(g, "edge_difficulty", None)
    if ed is None or ed.numel() != g.edge_index.size(1):
        return None
    return ed[g.edge_index[0] < g.edge_index[1]] if mask_unit == "undirected" else ed
