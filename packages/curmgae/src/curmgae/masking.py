"""Edge masking units and the masking strategies: one small object per strategy with one interface,
``masker(context) -> mask``: :class:`RandomMask` (S2GAE), :class:`PathMask` (MaskGAE), :class:`NoMask`
(GAE) and :class:`CurriculumMask` (Cur-MGAE, Algorithm 1).

A *unit* is what gets masked: an undirected edge (default; stored once as ``u < v`` and removed from
message passing in both directions) or a directed copy (``mask_unit="directed"``, S2GAE's ``dm`` mode,
which leaks the target through the reverse copy; reproduced only on request).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .config import DIFFICULTY_NAMES
from .data import both_directions, canonical_edges
from .scheduler import SelfPacedEdgeScheduler


def edge_units(edge_index: Tensor, mask_unit: str = "undirected") -> Tensor:
    """Masking units ``[2, M]`` of a symmetric, coalesced ``edge_index``."""
    return canonical_edges(edge_index) if mask_unit == "undirected" else edge_index


def expand_units(units: Tensor, mask_unit: str = "undirected") -> Tensor:
    """Units -> directed edges: both orientations for undirected units, identity for directed ones."""
    return both_directions(units) if mask_unit == "undirected" else units


def random_mask(num_units: int, ratio: float, generator: torch.Generator) -> Tensor:
    """S2GAE masking ("w/o Curri."): exactly ``floor(ratio*M)`` units uniformly at random."""
    mask = torch.zeros(num_units, dtype=torch.bool)
    mask[torch.randperm(num_units, generator=generator)[: math.floor(ratio * num_units)]] = True
    return mask


def path_mask(
    units: Tensor,
    num_nodes: int,
    mask_unit: str,
    root_ratio: float,
    walk_length: int,
    generator: torch.Generator,
) -> Tensor:
    """MaskGAE-style path masking: random walks of ``walk_length`` steps from ``root_ratio*N`` random
    roots; every unit traversed is masked (pure torch, no ``torch_cluster``)."""
    directed = expand_units(units, mask_unit)
    m = units.size(1)
    unit_of = torch.arange(directed.size(1)) % m
    order = torch.argsort(directed[0] * num_nodes + directed[1])
    src, dst, unit_of = directed[0, order], directed[1, order], unit_of[order]
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(src, minlength=num_nodes), 0)
    n_roots = max(1, round(root_ratio * num_nodes))
    cur = torch.randperm(num_nodes, generator=generator)[:n_roots]
    mask = torch.zeros(m, dtype=torch.bool)
    for _ in range(walk_length):
        deg = rowptr[cur + 1] - rowptr[cur]
        cur = cur[deg > 0]
        deg = deg[deg > 0]
        if cur.numel() == 0:
            break
        offset = (torch.rand(cur.numel(), generator=generator) * deg).long().clamp_max(deg - 1)
        e = rowptr[cur] + offset
        mask[unit_of[e]] = True
        cur = dst[e]
    return mask


# ------------------------------------------------------------------------------ masking strategies
@dataclass
class MaskContext:
    """What a masking strategy may look at when it chooses the masked units of one epoch.

    ``residuals()`` runs the difficulty measurer (Algorithm 1 lines 7-8: the encoder on the full
    training graph, eval mode, no gradient) only when a strategy asks for it. ``difficulty`` holds
    planted labels (0 easy, 1 medium, 2 hard) aligned with ``units`` when the graph has them; they are
    used for the trace only."""

    epoch: int
    units: Tensor
    num_nodes: int
    mask_unit: str
    residuals: Callable[[], Tensor]
    difficulty: Tensor | None = None


class EdgeMasker:
    """A masking strategy: ``masker(context) -> bool mask [M]`` over the masking units, or ``None`` to
    keep the previous epoch's mask. One small object per strategy, in the spirit of PyG's transforms
    (and MaskGAE's ``MaskEdge``/``MaskPath``): pass one to ``CurMGAE(..., masker=...)`` to replace the
    curriculum.

    ``reset(num_units, total_epochs, generator)`` is called by ``fit`` before the first epoch; all
    randomness must come from that generator. With ``keep_visible = True`` the masked units are
    reconstructed but stay in message passing (GAE-style training on every edge)."""

    keep_visible: bool = False

    def __init__(self) -> None:
        self.generator = torch.Generator()
        self.num_units = 0
        self.total_epochs = 1
        self.trace: list[dict[str, Any]] = []

    def reset(self, num_units: int, total_epochs: int, generator: torch.Generator) -> None:
        self.num_units, self.total_epochs, self.generator = num_units, total_epochs, generator
        self.trace = []

    def __call__(self, ctx: MaskContext) -> Tensor | None:
        raise NotImplementedError

    def selection_start(self) -> int:
        """First epoch whose validation score may select the model or count towards early stopping
        (1: every epoch; a curriculum returns the epoch at which it has finished)."""
        return 1

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"

    def _params(self) -> dict[str, Any]:
        return {}


class RandomMask(EdgeMasker):
    """S2GAE's masking, the paper's "w/o Curri.": exactly ``floor(ratio*M)`` units drawn uniformly at
    random every epoch."""

    def __init__(self, ratio: float = 0.7) -> None:
        super().__init__()
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"mask_ratio={ratio!r} is outside the accepted range (0, 1]")
        self.ratio = ratio

    def __call__(self, ctx: MaskContext) -> Tensor:
        return random_mask(ctx.units.size(1), self.ratio, self.generator)

    def _params(self) -> dict[str, Any]:
        return {"ratio": self.ratio}


class PathMask(EdgeMasker):
    """MaskGAE-style path masking: random walks of ``walk_length`` steps from ``root_ratio*N`` roots."""

    def __init__(self, root_ratio: float = 0.7, walk_length: int = 3) -> None:
        super().__init__()
        self.root_ratio, self.walk_length = root_ratio, walk_length

    def __call__(self, ctx: MaskContext) -> Tensor:
        return path_mask(
            ctx.units,
            ctx.num_nodes,
            ctx.mask_unit,
            self.root_ratio,
            self.walk_length,
            self.generator,
        )

    def _params(self) -> dict[str, Any]:
        return {"root_ratio": self.root_ratio, "walk_length": self.walk_length}


class NoMask(EdgeMasker):
    """Reconstruct every training edge while it stays visible (GAE-style, no masking)."""

    keep_visible = True

    def __call__(self, ctx: MaskContext) -> Tensor:
        return torch.ones(ctx.units.size(1), dtype=torch.bool)


class CurriculumMask(EdgeMasker):
    """Cur-MGAE's structure-aware curriculum (Algorithm 1): every ``scheduler.update_every`` epochs,
    the residuals of the training edges (difficulty measurer) go through the self-paced
    :class:`~curmgae.scheduler.SelfPacedEdgeScheduler` (Eq. 4 S-step, K_t, cap, lambda pacing),
    which returns the mask; in between the previous mask is kept.

    The scheduler's trace gets, per S-step, the mean planted difficulty of the masked edges and the
    easy/medium/hard shares and residuals of the difficulty-chosen part when the graph carries
    planted labels (``MaskContext.difficulty``)."""

    def __init__(self, scheduler: SelfPacedEdgeScheduler | None = None) -> None:
        super().__init__()
        self.scheduler = scheduler if scheduler is not None else SelfPacedEdgeScheduler()

    @classmethod
    def from_config(cls, config: Any) -> CurriculumMask:
        return cls(SelfPacedEdgeScheduler.from_config(config))

    def reset(self, num_units: int, total_epochs: int, generator: torch.Generator) -> None:
        super().reset(num_units, total_epochs, generator)
        seed = int(torch.randint(2**62, (1,), generator=generator))
        self.scheduler.reset(num_units, total_epochs, seed=seed)
        self.trace = self.scheduler.trace

    def selection_start(self) -> int:
        """The epoch at which the curriculum reaches its full mask schedule
        (:attr:`SelfPacedEdgeScheduler.curriculum_end`)."""
        return self.scheduler.curriculum_end

    def __call__(self, ctx: MaskContext) -> Tensor | None:
        if (ctx.epoch - 1) % self.scheduler.update_every != 0:
            return None  # keep the previous mask
        R = ctx.residuals()
        mask = self.scheduler.step(R, ctx.epoch)
        self.trace = self.scheduler.trace
        if ctx.difficulty is not None:
            _annotate(self.trace[-1], mask, self.scheduler.difficulty_mask, ctx.difficulty, R)
        return mask

    def _params(self) -> dict[str, Any]:
        s = self.scheduler
        return {"lambda_pace": s.lambda_pace, "pacing": s.pacing, "update_every": s.update_every}


def _annotate(
    entry: dict[str, Any], mask: Tensor, chosen: Tensor, difficulty: Tensor, R: Tensor
) -> None:
    """Mean planted difficulty (0 easy, 1 medium, 2 hard) of the masked and of the difficulty-chosen
    edges, the easy/medium/hard shares of the latter and the mean residual per level."""
    part = difficulty[chosen]
    entry["mean_difficulty_masked"] = float(difficulty[mask].float().mean()) if mask.any() else None
    entry["mean_difficulty_difficulty"] = float(part.float().mean()) if part.numel() else None
    for level, name in enumerate(DIFFICULTY_NAMES):
        entry[f"share_{name}"] = float((part == level).float().mean()) if part.numel() else None
        at = difficulty == level
        entry[f"residual_{name}"] = float(R[at].mean()) if bool(at.any()) else None


def masker_from_config(config: Any) -> EdgeMasker:
    """The masking strategy named by ``config.masking``: ``curriculum`` (Cur-MGAE), ``random``
    (S2GAE), ``path`` (MaskGAE) or ``none`` (GAE)."""
    if config.masking == "curriculum":
        return CurriculumMask.from_config(config)
    if config.masking == "random":
        return RandomMask(config.mask_ratio)
    if config.masking == "path":
        return PathMask(config.path_root_ratio, config.walk_length)
    if config.masking == "none":
        return NoMask()
    raise ValueError(f"masking={config.masking!r} is not accepted")
