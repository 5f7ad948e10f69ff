"""Sharded (FSDP2 / DTensor) parameters: local shards, global per-tensor statistics.

Under ``DistributedDataParallel`` every process holds the whole parameter and the same gradient,
so :class:`~parq_optim.QuantOptimizer` needs nothing special: every rank applies the same
deterministic map to the same tensors.  Under FSDP2 (``torch.distributed.fsdp.fully_shard``) a
parameter is a ``DTensor`` whose rows are split over the ranks (placement ``Shard(0)``).  The
optimizer then works on each rank's local rows and

* per-channel / per-block level sets need nothing else: every row (and every block of a row)
  lies on one rank;
* per-tensor level sets are fitted to the whole tensor: the quantizers take their statistics
  (``mean|p|``, ``max|p|``, and for exact least-squares LSBQ the sorted ``|p|``) over all shards
  through :class:`ShardedStats` (``all_reduce`` of one scalar per statistic; an ``all_gather`` of
  ``|p|`` for the exact LSBQ search), so every rank holds the same level set as an unsharded run.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["ShardedStats", "is_dtensor", "local", "shard_group"]


def is_dtensor(t: Any) -> bool:
    """Whether ``t`` is a ``torch.distributed.tensor.DTensor`` (without importing it)."""
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def local(t: Tensor) -> Tensor:
    """The local shard of a DTensor (an alias: in-place writes reach the DTensor when grad mode
    is off), or ``t`` itself."""
    if is_dtensor(t):
        with torch.no_grad():
            return t.to_local()  # type: ignore[attr-defined,no-any-return]
    return t


def shard_group(p: Tensor) -> Any | None:
    """The process group over which the rows of DTensor ``p`` are split, or ``None`` when ``p``
    is not sharded (a plain tensor, or a DTensor replicated on every rank).

    Raises ``NotImplementedError`` for layouts whose rows are not whole on one rank: sharding
    on a dim other than 0, more than one sharded mesh dim, or a ``Partial`` placement.
    """
    if not is_dtensor(p):
        return None
    placements = p.placements  # type: ignore[attr-defined]
    sharded = []
    for i, placement in enumerate(placements):
        if placement.is_replicate():
            continue
        if placement.is_shard() and getattr(placement, "dim", None) == 0:
            sharded.append(i)
            continue
        raise NotImplementedError(
            f"QuantOptimizer supports DTensor parameters sharded on dim 0 (FSDP2's default) or "
            f"replicated; got placements {tuple(placements)} for a parameter of shape "
            f"{tuple(p.shape)}"
        )
    if len(sharded) > 1:
        raise NotImplementedError(
            f"QuantOptimizer supports DTensor parameters sharded over one mesh dim; got "
            f"placements {tuple(placements)}"
        )
    if not sharded:
        return None
    return p.device_mesh.get_group(sharded[0])  # type: ignore[attr-defined]


class ShardedStats:
    """Per-tensor statistics over every shard of a row-sharded tensor (:class:`TensorStats`).

    Args:
        numel: number of elements of the whole tensor.
        group: the process group holding the shards (``None``: the default group).

    ``mean`` and ``amax`` take an element-wise function of the local shard and return a 0-d
    tensor that is the same on every rank; ``gather`` returns the values of every shard, flat.
    The sum behind ``mean`` adds the ranks' partial sums, so it can differ from a one-process
    ``mean`` in the last bits (float tolerance, not bitwise).
    """

    def __init__(self, numel: int, group: Any | None = None) -> None:
        self.numel = int(numel)
        self.group = group

    def mean(self, x: Tensor) -> Tensor:
        import torch.distributed as dist

        s = x.sum()
        dist.all_reduce(s, group=self.group)
        return s / self.numel

    def amax(self, x: Tensor) -> Tensor:
        import torch.distributed as dist

        m = x.max() if x.numel() else torch.full((), -torch.inf, dtype=x.dtype, device=x.device)
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=self.group)
        return m

    def gather(self, x: Tensor) -> Tensor:
        import torch.distributed as dist

        x = x.reshape(-1)
        world = dist.get_world_size(self.group)
        size = torch.tensor([x.numel()], device=x.device)
        sizes = [torch.zeros_like(size) for _ in range(world)]
        dist.all_gather(sizes, size, group=self.group)
        counts = [int(c) for c in sizes]
        longest = max(counts)
        padded = torch.zeros(longest, dtype=x.dtype, device=x.device)
        padded[: x.numel()] = x
        parts = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(parts, padded, group=self.group)
        return torch.cat([part[:c] for part, c in zip(parts, counts)])
