"""Cur-MGAE training: alternating S-steps (difficulty measurer + self-paced scheduler) and w-steps
(masked reconstruction), Algorithm 1 of the paper. The baselines run in the same loop.

``CurMGAE.fit`` is made of parts a user can replace: the masking strategy (an
:class:`~curmgae.masking.EdgeMasker`, passed as ``masker=``), the optimizer (``optimizer=``, a
``torch.optim.Optimizer`` or a factory of one), and the methods :meth:`CurMGAE.select_mask`,
:meth:`CurMGAE.train_epoch`, :meth:`CurMGAE.reconstruction_loss`, :meth:`CurMGAE.sample_negatives` and
:meth:`CurMGAE.validate` for subclasses. All randomness comes from ``CurMGAE.generator``; ``fit`` never
reseeds the global RNG."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch_geometric.data import Data

from .config import CurMGAEConfig
from .data import prepare_graph
from .evaluation import link_metrics
from .losses import bce_loss, full_softmax_loss, sampled_softmax_loss
from .masking import (
    CurriculumMask,
    EdgeMasker,
    MaskContext,
    edge_units,
    expand_units,
    masker_from_config,
)
from .models import CrossCorrelationDecoder, GNNEncoder, build_backbone, score_pairs
from .scheduler import SelfPacedEdgeScheduler, residuals

#: ``optimizer=`` of :class:`CurMGAE`: an optimizer over the model's parameters, or a factory of one
OptimizerLike = torch.optim.Optimizer | Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]


@dataclass
class FitHistory:
    """What ``fit`` returns: per-epoch loss and wall time, validation AUCs and the curriculum trace."""

    losses: list[float] = field(default_factory=list)
    epoch_times: list[float] = field(default_factory=list)
    epoch_cpu_times: list[float] = field(default_factory=list)
    val_auc: list[tuple[int, float]] = field(default_factory=list)
    best_epoch: int = 0
    stopped_epoch: int = 0
    #: first epoch that model selection and early stopping considered (the curriculum's end)
    selection_start: int = 1
    trace: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "losses": self.losses,
            "epoch_times": self.epoch_times,
            "epoch_cpu_times": self.epoch_cpu_times,
            "val_auc": self.val_auc,
            "best_epoch": self.best_epoch,
            "stopped_epoch": self.stopped_epoch,
            "selection_start": self.selection_start,
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


@dataclass
class TrainingGraph:
    """The training graph as ``fit`` uses it: features, message-passing ``edge_index``, the masking
    units ``[2, M]``, the training-edge keys that ``negatives="exclude_edges"`` rejects, planted
    difficulty per unit (trace only) and the prepared ``Data`` (with ``val_pos``/``val_neg``)."""

    data: Data
    x: Tensor
    edge_index: Tensor
    units: Tensor
    num_nodes: int
    banned: Tensor | None
    difficulty: Tensor | None


class CurMGAE(nn.Module):
    """Masked graph autoencoder with a structure-aware curriculum (Cur-MGAE).

    ``CurMGAE(encoder, decoder, config).fit(data)`` trains on any PyG ``Data`` (its ``edge_index`` is the
    training graph); ``embed`` returns frozen node embeddings, ``score`` link probabilities. With
    ``config.masking`` = ``random``/``path``/``none`` the same loop trains the S2GAE, MaskGAE-path and
    reconstruct-everything baselines.

    Encoders must map ``(x, edge_index)`` to the list of every layer's output; decoders map
    ``(hs, pairs[2, B])`` to logits ``[B]``.

    Args:
        masker: the masking strategy (default: the one ``config.masking`` names; see
            :mod:`curmgae.masking`): any :class:`~curmgae.masking.EdgeMasker`.
        optimizer: a ``torch.optim.Optimizer`` over this model's parameters, or a factory
            ``params -> Optimizer`` (default: Adam with ``config.lr`` and ``config.weight_decay``).
        generator: the source of every random draw of ``fit`` (masks, negatives, batch order and
            the dropout of the built-in modules); ``fit(seed=...)`` reseeds it, never the global RNG.
    """

    def __init__(
        self,
        encoder: nn.Module,
        decoder: nn.Module,
        config: CurMGAEConfig | None = None,
        *,
        masker: EdgeMasker | None = None,
        optimizer: OptimizerLike | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.config = config or CurMGAEConfig()
        if isinstance(decoder, CrossCorrelationDecoder) and isinstance(encoder, GNNEncoder):
            want = encoder.hidden * encoder.num_layers**2
            if decoder.in_channels != want:
                raise ValueError(
                    f"decoder input width {decoder.in_channels} does not match hidden*K^2 = {want}"
                )
        self.generator = generator if generator is not None else torch.Generator()
        for module in (encoder, decoder):  # built-in modules draw their dropout masks from it
            if hasattr(module, "generator"):
                setattr(module, "generator", self.generator)  # noqa: B010
        self.masker: EdgeMasker = masker if masker is not None else masker_from_config(self.config)
        if isinstance(optimizer, torch.optim.Optimizer):
            self.optimizer = optimizer
        else:
            factory = optimizer or self._default_optimizer
            self.optimizer = factory(self.parameters())
        #: residuals of the latest S-step (the difficulty measurer's output), None before the first
        self.last_residuals: Tensor | None = None

    def _default_optimizer(self, params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.Adam(params, lr=self.config.lr, weight_decay=self.config.weight_decay)

    @classmethod
    def from_config(
        cls,
        in_channels: int,
        config: CurMGAEConfig | None = None,
        **kwargs: Any,
    ) -> CurMGAE:
        """Build the S2GAE-style backbone described by ``config`` (encoder Eq. 1, decoder Eq. 2);
        ``kwargs`` (``masker``, ``optimizer``, ``generator``) go to the constructor."""
        config = config or CurMGAEConfig()
        return cls(*build_backbone(in_channels, config), config=config, **kwargs)

    @property
    def scheduler(self) -> SelfPacedEdgeScheduler | None:
        """The self-paced scheduler of a curriculum masker, else None."""
        return self.masker.scheduler if isinstance(self.masker, CurriculumMask) else None

    def reset_parameters(self, seed: int | None = None) -> None:
        """Re-initialise the encoder's and decoder's weights and clear the optimizer's state.

        With ``seed``, the initialisation draws from a fork of the global RNG seeded with it
        (``torch.random.fork_rng``), so the caller's global RNG state is left as it was."""
        if seed is None:
            self._reset_modules()
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                self._reset_modules()
        self.optimizer.state.clear()

    def _reset_modules(self) -> None:
        for mod in (self.encoder, self.decoder):
            for m in mod.modules():
                if m is not mod and hasattr(m, "reset_parameters"):
                    m.reset_parameters()  # type: ignore[operator]

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
        """Difficulty measurer (Algorithm 1 lines 7-8): residuals of the existing ``units``, eval mode,
        no gradient.

        ``config.difficulty="full"``: the encoder sees the full training graph ``A`` (nothing masked),
        so every edge is scored while it is visible to message passing. ``"held_out"``: the units are
        split into ``config.held_out_folds`` random folds (from :attr:`generator`) and each fold is
        scored by the encoder on the graph without that fold, i.e. each edge is scored as it is when
        masked, which is the task the w-step trains on."""
        cfg = self.config
        if cfg.difficulty == "full":
            return residuals(self.score(x, edge_index, units), cfg.residual)
        M = units.size(1)
        fold = torch.randperm(M, generator=self.generator) % int(cfg.held_out_folds)
        scores = torch.empty(M)
        for f in range(int(cfg.held_out_folds)):
            out = fold == f
            if not bool(out.any()):
                continue
            visible = expand_units(units[:, ~out], cfg.mask_unit)
            scores[out] = self.score(x, visible, units[:, out]).float()
        return residuals(scores, cfg.residual)

    def link_prediction(self, data: Data, split: str = "test") -> dict[str, float]:
        """AUC/AP on ``data.<split>_pos`` / ``data.<split>_neg`` with the training graph as input."""
        pos, neg = getattr(data, f"{split}_pos"), getattr(data, f"{split}_neg")
        s = self.score(data.x, data.edge_index, torch.cat([pos, neg], 1))
        return link_metrics(s[: pos.size(1)], s[pos.size(1) :])

    # ------------------------------------------------------------------------------ training parts
    def training_graph(self, data: Data, unit_difficulty: Tensor | None = None) -> TrainingGraph:
        """Prepare ``data`` for ``fit``: symmetrised training graph, masking units, banned keys."""
        cfg = self.config
        g = prepare_graph(data) if not hasattr(data, "train_pos") else data
        ei, n = g.edge_index, int(g.num_nodes)
        units = edge_units(ei, cfg.mask_unit)
        if units.size(1) < 1:
            raise ValueError("curmgae needs at least one edge to mask (the graph has none)")
        banned = None
        if cfg.negatives == "exclude_edges":  # training graph only: val/test edges are never seen
            banned = (ei[0].minimum(ei[1]) * n + ei[0].maximum(ei[1])).unique()
        if unit_difficulty is None:
            unit_difficulty = _unit_difficulty(g, cfg.mask_unit)
        return TrainingGraph(g, g.x, ei, units, n, banned, unit_difficulty)

    def select_mask(self, epoch: int, graph: TrainingGraph) -> Tensor | None:
        """Which units are hidden this epoch (S-step or a baseline's mask): the masker's choice, or
        None to keep the previous mask. Residuals are computed only when the masker asks."""

        def measure() -> Tensor:
            self.last_residuals = self.edge_residuals(graph.x, graph.edge_index, graph.units)
            return self.last_residuals

        ctx = MaskContext(
            epoch, graph.units, graph.num_nodes, self.config.mask_unit, measure, graph.difficulty
        )
        return self.masker(ctx)

    def sample_negatives(self, num: int, graph: TrainingGraph) -> Tensor:
        """``num`` negative pairs for the BCE loss: uniform (S2GAE) or excluding training edges."""
        if graph.banned is None:
            return sample_uniform_pairs(num, graph.num_nodes, self.generator)
        return sample_excluding(num, graph.num_nodes, graph.banned, self.generator)

    def reconstruction_loss(self, hs: list[Tensor], pos: Tensor, graph: TrainingGraph) -> Tensor:
        """Reconstruction loss of a batch of positives (paper Eq. 3 / S2GAE BCE)."""
        cfg = self.config

        def score(p: Tensor) -> Tensor:
            return self.decoder(hs, p)

        n = graph.num_nodes
        if cfg.loss == "sampled_softmax":
            return sampled_softmax_loss(
                score, pos, n, cfg.num_negatives, self.generator, cfg.softmax_on_probabilities
            )
        if cfg.loss == "full_softmax":
            return full_softmax_loss(score, pos, n, cfg.softmax_on_probabilities)
        return bce_loss(score(pos), score(self.sample_negatives(pos.size(1), graph)))

    def train_epoch(self, graph: TrainingGraph, mask: Tensor) -> float:
        """w-step: reconstruct the masked units from the visible graph, in batches of
        ``config.batch_size`` positives (None: one full-batch step, as S2GAE's link prediction), the
        encoder recomputed for every batch, gradient norms clipped per module. Returns the mean loss."""
        cfg = self.config
        if self.masker.keep_visible:
            visible = graph.edge_index
            positives = expand_units(graph.units[:, mask], cfg.mask_unit)
        else:
            visible = expand_units(graph.units[:, ~mask], cfg.mask_unit)
            positives = expand_units(graph.units[:, mask], cfg.mask_unit)
        self.train()
        total, count = 0.0, 0
        perm = positives[:, torch.randperm(positives.size(1), generator=self.generator)]
        bs = cfg.batch_size or max(perm.size(1), 1)
        for start in range(0, perm.size(1), bs):
            pos = perm[:, start : start + bs]
            self.optimizer.zero_grad()
            hs = self.encoder(graph.x, visible)
            loss = self.reconstruction_loss(hs, pos, graph)
            loss.backward()
            nn.utils.clip_grad_norm_(self.encoder.parameters(), cfg.grad_clip)
            nn.utils.clip_grad_norm_(self.decoder.parameters(), cfg.grad_clip)
            self.optimizer.step()
            total += float(loss.detach()) * pos.size(1)
            count += pos.size(1)
        return total / max(count, 1)

    def validate(self, graph: TrainingGraph) -> float | None:
        """Model-selection score: validation AUC when the data has ``val_pos``/``val_neg``."""
        g = graph.data
        if getattr(g, "val_pos", None) is None or g.val_pos.numel() == 0:
            return None
        return self.link_prediction(g, "val")["auc"]

    # ------------------------------------------------------------------------------------ training
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
        carries ``val_pos``/``val_neg`` (from :func:`curmgae.split_edges`), the validation AUC is
        checked every ``eval_every`` epochs, training stops after ``patience`` checks without a
        gain (never when ``patience`` is None), and the best weights are restored at the end. With
        ``config.select_after_curriculum`` (default) only epochs from ``masker.selection_start()``
        on (the curriculum's end, ``floor(ramp_frac*epochs)``; epoch 1 for the baselines) can be
        selected or count towards patience; earlier validation AUCs are recorded in ``val_auc``.

        ``seed`` reseeds :attr:`generator` (and, with ``reset``, the weight initialisation, through
        :meth:`reset_parameters`); the global RNG state is left unchanged. ``unit_difficulty`` (or
        ``data.train_difficulty``/``data.edge_difficulty``) are planted difficulty labels used only to
        report the composition of the curriculum in the trace.
        """
        cfg = self.config
        T = int(epochs or cfg.epochs)
        if T < 1:
            raise ValueError(f"epochs={epochs!r} must be an integer >= 1")
        graph = self.training_graph(data, unit_difficulty)
        self.generator.manual_seed(seed)
        if reset:
            self.reset_parameters(seed=seed)
        self.masker.reset(graph.units.size(1), T, self.generator)
        self.last_residuals = None
        hist = FitHistory()
        # model selection and early stopping look only at epochs where the curriculum has finished
        start = self.masker.selection_start() if cfg.select_after_curriculum else 1
        hist.selection_start = min(max(int(start), 1), T)
        best_auc, best_state, waited = -1.0, None, 0
        mask = torch.zeros(graph.units.size(1), dtype=torch.bool)
        iterator: Any = range(1, T + 1)
        if progress:
            from tqdm import tqdm

            iterator = tqdm(iterator, desc=f"fit[{type(self.masker).__name__}]", leave=False)
        for epoch in iterator:
            t0, c0 = time.perf_counter(), time.process_time()
            new_mask = self.select_mask(epoch, graph)  # S-step (curriculum) or a baseline's mask
            if new_mask is not None:
                mask = new_mask
            hist.losses.append(self.train_epoch(graph, mask))  # w-step
            hist.epoch_times.append(time.perf_counter() - t0)
            hist.epoch_cpu_times.append(time.process_time() - c0)
            hist.stopped_epoch = epoch
            if epoch % cfg.eval_every == 0 or epoch == T:
                auc = self.validate(graph)
                if auc is None:
                    continue
                hist.val_auc.append((epoch, auc))
                if epoch < hist.selection_start:
                    continue
                if auc > best_auc:
                    best_auc, best_state, waited = auc, copy.deepcopy(self.state_dict()), 0
                    hist.best_epoch = epoch
                else:
                    waited += 1
                    if cfg.patience is not None and waited >= cfg.patience:
                        break
        if best_state is not None:
            self.load_state_dict(best_state)
        else:
            hist.best_epoch = hist.stopped_epoch
        hist.trace = list(self.masker.trace)
        return hist


def _unit_difficulty(g: Data, mask_unit: str) -> Tensor | None:
    """Planted difficulty labels aligned with the masking units, when the data carries them."""
    if getattr(g, "train_difficulty", None) is not None and mask_unit == "undirected":
        return g.train_difficulty  # type: ignore[no-any-return]
    ed = getattr(g, "edge_difficulty", None)
    if ed is None or ed.numel() != g.edge_index.size(1):
        return None
    return ed[g.edge_index[0] < g.edge_index[1]] if mask_unit == "undirected" else ed
