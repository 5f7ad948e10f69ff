"""Reconstruction losses (paper Eq. 3 and the S2GAE binary cross-entropy form)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

FULL_SOFTMAX_MAX_NODES = 20_000

#: ``score(pairs[2, B]) -> logits[B]`` for the current encoder output.
ScoreFn = Callable[[Tensor], Tensor]


def bce_loss(pos_logits: Tensor, neg_logits: Tensor) -> Tensor:
    """S2GAE loss ``mean(-log g_pos) + mean(-log(1 - g_neg))``, computed stably on logits.

    Two means (positives, negatives) are added, not one mean over the concatenation.
    """
    pos = F.binary_cross_entropy_with_logits(pos_logits, torch.ones_like(pos_logits))
    neg = F.binary_cross_entropy_with_logits(neg_logits, torch.zeros_like(neg_logits))
    return pos + neg


def _softmax_at_zero(logits: Tensor, on_probabilities: bool) -> Tensor:
    """``-log softmax(logits)[:, 0]`` averaged over rows; Eq. 3 literal form on ``sigmoid`` if asked."""
    z = torch.sigmoid(logits) if on_probabilities else logits
    return -(z[:, 0] - torch.logsumexp(z, dim=1)).mean()


def sampled_softmax_loss(
    score: ScoreFn,
    pos: Tensor,
    num_nodes: int,
    k: int,
    generator: torch.Generator | None = None,
    on_probabilities: bool = False,
) -> Tensor:
    """InfoNCE approximation of Eq. 3: softmax over ``[s(v,u), s(v,v'_1..k)]``, ``v'`` uniform."""
    b = pos.size(1)
    neg_dst = torch.randint(num_nodes, (b, k), generator=generator, device=pos.device)
    neg_pairs = torch.stack([pos[0].repeat_interleave(k), neg_dst.reshape(-1)])
    logits = torch.cat([score(pos)[:, None], score(neg_pairs).view(b, k)], dim=1)
    return _softmax_at_zero(logits, on_probabilities)


def full_softmax_loss(
    score: ScoreFn,
    pos: Tensor,
    num_nodes: int,
    on_probabilities: bool = False,
    chunk_pairs: int = 1 << 16,
) -> Tensor:
    r"""Paper Eq. 3 exactly: :math:`-\frac{1}{|E|}\sum \log \frac{\exp s(v,u)}{\sum_{v'} \exp s(v,v')}`.

    ``O(N)`` decoder calls per positive; refused when ``num_nodes > 20,000``.
    """
    if num_nodes > FULL_SOFTMAX_MAX_NODES:
        raise ValueError(
            f"loss='full_softmax' needs N decoder calls per positive; num_nodes={num_nodes} exceeds "
            f"{FULL_SOFTMAX_MAX_NODES}; use loss='sampled_softmax' or 'bce'"
        )
    rows = max(1, chunk_pairs // num_nodes)
    all_v = torch.arange(num_nodes, device=pos.device)
    losses = []
    for start in range(0, pos.size(1), rows):
        p = pos[:, start : start + rows]
        b = p.size(1)
        pairs = torch.stack([p[0].repeat_interleave(num_nodes), all_v.repeat(b)])
        cand = score(pairs).view(b, num_nodes)
        logits = torch.cat([score(p)[:, None], cand], dim=1)
        z = torch.sigmoid(logits) if on_probabilities else logits
        # numerator s(v,u); the denominator sums over all v' in V (which contains u once).
        losses.append(-(z[:, 0] - torch.logsumexp(z[:, 1:], dim=1)))
    return torch.cat(losses).mean()
