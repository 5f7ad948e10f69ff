"""Directional sensitivity. The paper's exact formula is not public; three measures are reported:

* training-orientation gap  G_train = (MSE_rev − MSE_fwd) / MSE_fwd, each model trained and tested on
  its own orientation (the official reversed-edge study);
* evaluation flip gap       G_flip = (MSE(f_fwd on reversed edges) − MSE(f_fwd)) / MSE(f_fwd);
* perturbation leakage: add the ramp (0.2δ, 0.5δ, δ) (z-units; δ = 0.5 as in the official
  perturbation study) to the target variable of node p at the last three window steps, take the
  mean absolute response r_i of every node over test windows, and report
  leakage = Σ_{i not downstream of p} r_i / Σ_{i downstream of p or p} r_i (0 for a model that only
  sends information downstream).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from .data import FluxDataset
from .graph import downstream_nodes, perturbation_node, upstream_nodes

__all__ = ["gap", "perturbation_response"]


def gap(mse_other: float, mse_forward: float) -> float:
    """(MSE_other − MSE_fwd) / MSE_fwd."""
    return (mse_other - mse_forward) / mse_forward if mse_forward > 0 else float("nan")


@torch.no_grad()
def perturbation_response(
    model: nn.Module,
    data: FluxDataset,
    *,
    node: int | None = None,
    delta: float = 0.5,
    split: str = "test",
    max_windows: int = 256,
    batch_size: int = 64,
    reference: FluxDataset | None = None,
) -> dict[str, Any]:
    """Perturb node ``node`` (default: :func:`~phynfp.graph.perturbation_node`) of the first group of
    ``split`` and measure the response. Up/downstream sets come from ``reference`` (default ``data``):
    pass the forward dataset when ``data`` is its reversal, so that "downstream" stays physical."""
    model.eval()
    group, starts = data.splits[split][0]
    g = data.groups[group]
    ref = (reference or data).groups[group]
    n = g.num_nodes
    p = perturbation_node(ref.edge_index, n) if node is None else int(node)
    down = downstream_nodes(ref.edge_index, n, p)
    up = upstream_nodes(ref.edge_index, n, p)
    starts = starts[:max_windows]
    ramp = torch.tensor([0.2, 0.5, 1.0]) * delta
    response = torch.zeros(n, dtype=torch.float64)
    for i in range(0, len(starts), batch_size):
        chunk = starts[i : i + batch_size]
        x, _ = data.batch(group, chunk)
        extra = data.model_inputs(model, group, chunk)
        base = model(x, g.edge_index, g.edge_attr, **extra).squeeze(-1)
        xp = x.clone()
        xp[:, p, -3:, data.target_index] += ramp.to(x.dtype)
        pert = model(xp, g.edge_index, g.edge_attr, **extra).squeeze(-1)
        response += (pert - base).abs().sum(0).double()
    response /= max(len(starts), 1)
    inside = sorted(down | {p})
    outside = [i for i in range(n) if i not in down and i != p]
    num = float(response[outside].sum())
    den = float(response[inside].sum())
    return {
        "node": p,
        "delta": delta,
        "windows": len(starts),
        "num_downstream": len(down),
        "num_upstream": len(up),
        "leakage": num / den if den > 0 else float("nan"),
        "response_self": float(response[p]),
        "response_downstream": float(response[sorted(down)].mean()) if down else 0.0,
        "response_upstream": float(response[sorted(up)].mean()) if up else 0.0,
        "response_other": float(np.mean([float(response[i]) for i in outside if i not in up]))
        if len(outside) > len(up)
        else 0.0,
    }
