"""Training objectives under one loop: TAR and its baselines.

Each method turns the training nodes' logits into the scalar that is minimised. All share
:func:`per_node_loss` (cross-entropy per node). ``R_e`` is the mean loss on training environment e.

* ``erm``: mean loss.
* ``tar``: ``sum_i q_i l_i`` with q from the GW flow on the transport graph (:class:`TARWeighter`).
* ``irm``: mean + lambda * mean_e ||d R_e(w * logits) / dw at w = 1||^2 (IRMv1, GOOD's form).
* ``vrex``: mean + lambda * Var_e(R_e) (unbiased variance).
* ``groupdro``: ``good`` mode sum_e softmax(eta * R_e)_e R_e recomputed each step (GOOD's form);
  ``online``: persistent exponentiated-gradient group weights (Sagawa et al.).
* ``kldro``: label-free KL-DRO / Gibbs reweighting softmax(l / beta) (TAR's limit without topology).
* ``cvar``: label-free CVaR_alpha, the mean of the top ceil(alpha n) losses.
* ``cbe``: class-balanced ERM, weights proportional to 1 / (training count of the node's class).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .reweighter import TARWeighter

__all__ = [
    "ERM",
    "IRM",
    "KLDRO",
    "METHODS",
    "TAR",
    "CVaR",
    "ClassBalancedERM",
    "GroupDRO",
    "Method",
    "StepContext",
    "VREx",
    "make_method",
    "per_node_loss",
]


def per_node_loss(logits: Tensor, y: Tensor) -> Tensor:
    """Cross-entropy per node (no reduction)."""
    return F.cross_entropy(logits, y, reduction="none")


@dataclass
class StepContext:
    """What a method may read at one outer step (all over the training nodes, in mask order)."""

    env: Tensor | None = None
    eval_loss: Callable[[], Tensor] | None = None  # per-node loss of a no-dropout forward
    embedding: Callable[[], Tensor] | None = None  # hidden features of the training nodes


class Method:
    """Base class: ``setup`` once, then ``loss(logits, y, ctx)`` per outer step."""

    name = "base"
    needs_env = False

    def setup(self, data: Any, train_mask: Tensor) -> None:
        if self.needs_env:
            env = getattr(data, "env_id", None)
            if env is None:
                raise ValueError(
                    f"method {self.name!r} needs environment labels (data.env_id) and this dataset "
                    "has none; use a label-free method (erm, tar, kldro, cvar, cbe)"
                )
            n_env = int(torch.unique(env[train_mask]).numel())
            if n_env < 2:
                raise ValueError(
                    f"method {self.name!r} needs >= 2 training environments, found {n_env}"
                )

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        raise NotImplementedError

    def diagnostics(self) -> dict[str, float]:
        return {}

    def options(self) -> dict[str, Any]:
        return {}


def _env_risks(losses: Tensor, env: Tensor | None, name: str) -> tuple[Tensor, Tensor]:
    if env is None:
        raise ValueError(f"method {name!r} needs env_id for the training nodes")
    envs = torch.unique(env)
    risks = torch.stack([losses[env == e].mean() for e in envs])
    return envs, risks


class ERM(Method):
    name = "erm"

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        return per_node_loss(logits, y).mean()


class TAR(Method):
    """Topology-aware reweighting: the loss weighted by the GW flow's worst-case q (Alg. 1)."""

    name = "tar"

    def __init__(self, flow_loss: str = "train", **weighter: Any) -> None:
        if flow_loss not in ("train", "eval"):
            raise ValueError(f"flow_loss must be 'train' or 'eval', got {flow_loss!r}")
        self.flow_loss = flow_loss
        self.kwargs = weighter
        self.weighter = TARWeighter(**weighter)

    def setup(self, data: Any, train_mask: Tensor) -> None:
        self.weighter.setup(
            data.edge_index, train_mask, num_nodes=int(data.num_nodes), x=getattr(data, "x", None)
        )

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        losses = per_node_loss(logits, y)
        flow_losses = losses
        if self.flow_loss == "eval" and ctx.eval_loss is not None:
            flow_losses = ctx.eval_loss()
        emb = None
        if self.weighter.pairs is None and ctx.embedding is not None:
            emb = ctx.embedding()
        q = self.weighter(flow_losses.detach(), embedding=emb)
        if self.weighter.is_uniform:
            return losses.mean()  # exactly ERM's code path
        return (q.to(losses.device, losses.dtype) * losses).sum()

    def diagnostics(self) -> dict[str, float]:
        return dict(self.weighter.last)

    def options(self) -> dict[str, Any]:
        return {"flow_loss": self.flow_loss, **self.weighter.options()}


class IRM(Method):
    name = "irm"
    needs_env = True

    def __init__(self, lam: float = 1.0) -> None:
        self.lam = float(lam)

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        if ctx.env is None:
            raise ValueError("method 'irm' needs env_id for the training nodes")
        mean = per_node_loss(logits, y).mean()
        scale = torch.ones((), device=logits.device, requires_grad=True)
        penalty = logits.new_zeros(())
        envs = torch.unique(ctx.env)
        for e in envs:
            sel = ctx.env == e
            risk = F.cross_entropy(logits[sel] * scale, y[sel])
            (grad,) = torch.autograd.grad(risk, scale, create_graph=True)
            penalty = penalty + grad.pow(2)
        return mean + self.lam * penalty / len(envs)

    def options(self) -> dict[str, Any]:
        return {"lam": self.lam}


class VREx(Method):
    name = "vrex"
    needs_env = True

    def __init__(self, lam: float = 10.0) -> None:
        self.lam = float(lam)

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        losses = per_node_loss(logits, y)
        _, risks = _env_risks(losses, ctx.env, self.name)
        return losses.mean() + self.lam * torch.var(risks)

    def options(self) -> dict[str, Any]:
        return {"lam": self.lam}


class GroupDRO(Method):
    name = "groupdro"
    needs_env = True

    def __init__(self, eta: float = 0.1, mode: str = "good") -> None:
        if mode not in ("good", "online"):
            raise ValueError(f"groupdro mode must be 'good' or 'online', got {mode!r}")
        self.eta = float(eta)
        self.mode = mode
        self.w: Tensor | None = None

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        losses = per_node_loss(logits, y)
        _, risks = _env_risks(losses, ctx.env, self.name)
        if self.mode == "good":
            w = torch.softmax(self.eta * risks.detach(), dim=0)
        else:
            if self.w is None or self.w.numel() != risks.numel():
                self.w = torch.full_like(risks.detach(), 1.0 / risks.numel())
            w = self.w * torch.exp(self.eta * risks.detach())
            w = w / w.sum()
            self.w = w
        return (w * risks).sum()

    def options(self) -> dict[str, Any]:
        return {"eta": self.eta, "mode": self.mode}


class KLDRO(Method):
    name = "kldro"

    def __init__(self, beta: float = 1.0) -> None:
        if not beta > 0:
            raise ValueError(f"kldro beta must be > 0, got {beta}")
        self.beta = float(beta)

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        losses = per_node_loss(logits, y)
        q = torch.softmax(losses.detach() / self.beta, dim=0)
        return (q * losses).sum()

    def options(self) -> dict[str, Any]:
        return {"beta": self.beta}


class CVaR(Method):
    name = "cvar"

    def __init__(self, alpha: float = 0.2) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"cvar alpha must be in (0, 1], got {alpha}")
        self.alpha = float(alpha)

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        losses = per_node_loss(logits, y)
        k = max(1, math.ceil(self.alpha * losses.numel()))
        return losses.topk(k).values.mean()

    def options(self) -> dict[str, Any]:
        return {"alpha": self.alpha}


class ClassBalancedERM(Method):
    name = "cbe"

    def setup(self, data: Any, train_mask: Tensor) -> None:
        y = data.y[train_mask]
        counts = torch.bincount(y, minlength=int(data.y.max()) + 1).double()
        w = 1.0 / counts[y]
        self.w = (w / w.sum()).float()

    def loss(self, logits: Tensor, y: Tensor, ctx: StepContext) -> Tensor:
        losses = per_node_loss(logits, y)
        return (self.w.to(losses.device) * losses).sum()


METHODS: dict[str, type[Method]] = {
    "erm": ERM,
    "tar": TAR,
    "irm": IRM,
    "vrex": VREx,
    "groupdro": GroupDRO,
    "kldro": KLDRO,
    "cvar": CVaR,
    "cbe": ClassBalancedERM,
}


def make_method(name: str, **options: Any) -> Method:
    """Build a method by name with its own options (unknown names and options are errors)."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; accepted: {', '.join(METHODS)}")
    return METHODS[name](**options)
