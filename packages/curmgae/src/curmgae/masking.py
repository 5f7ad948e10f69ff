"""Edge masking units and the non-curriculum masking strategies (random = S2GAE, path = MaskGAE).

A *unit* is what gets masked: an undirected edge (default; stored once as ``u < v`` and removed from
message passing in both directions) or a directed copy (``mask_unit="directed"``, S2GAE's ``dm`` mode,
which leaks the target through the reverse copy; reproduced only on request).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .data import both_directions, canonical_edges


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
