"""``TARWeighter``: topology-aware dynamic reweighting of any PyG model's per-node loss (TAR, Alg. 1).

Usage around any model::

    rw = TARWeighter(data, beta=0.1, steps=20, transport_graph="induced")
    out = model(data.x, data.edge_index)
    per_node = F.cross_entropy(out[data.train_mask], data.y[data.train_mask], reduction="none")
    loss = rw.weighted_loss(per_node)      # sum_i q_i l_i with q from the GW flow (no gradient through q)
    loss.backward()
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from .flow import EXCEED, SCHEMES, FlowResult, _canonical, _flow, entropy_objective, gw_flow
from .transport import build_transport_graph, edge_weights, parse_transport_graph

__all__ = ["TARWeighter", "TopologyAwareReweighter", "weight_diagnostics"]


def weight_diagnostics(
    q: Tensor, loss: Tensor, flagged: Tensor | None = None, beta: float = 0.0
) -> dict[str, float]:
    """ESS/n, max q*n, corr(q, l), F(q) - F(uniform), and the mass on ``flagged`` nodes vs their share."""
    q = q.detach().to(torch.float64)
    loss = loss.detach().to(torch.float64)
    n = q.numel()
    uniform = torch.full_like(q, 1.0 / n)
    out = {
        "ess_frac": float(1.0 / (n * (q**2).sum())),
        "max_qn": float(q.max() * n),
        "objective_gain": entropy_objective(q, loss, beta) - entropy_objective(uniform, loss, beta),
    }
    if n > 1 and float(q.std()) > 0 and float(loss.std()) > 0:
        out["corr_q_loss"] = float(torch.corrcoef(torch.stack([q, loss]))[0, 1])
    else:
        out["corr_q_loss"] = 0.0
    if flagged is not None:
        flagged = flagged.bool().flatten()
        if flagged.numel() != n:
            raise ValueError(f"flagged has {flagged.numel()} entries, expected {n}")
        out["flagged_mass"] = float(q[flagged].sum())
        out["flagged_share"] = float(flagged.double().mean())
    return out


class TARWeighter:
    """Worst-case weights over the training nodes from the GW gradient flow on a transport graph.

    Args:
        data: a PyG ``Data`` (uses ``edge_index``, ``train_mask``, ``num_nodes`` and, for ``knn``, ``x``);
            or None and call :meth:`setup` later.
        beta: entropy coefficient (default 0.1).
        steps: T_in, inner flow steps per outer step (default 20).
        step_size: tau, the requested step, capped by the CFL bound (default 1.0).
        scheme: edge mobility ``upwind`` | ``arithmetic`` | ``logmean`` (default upwind).
        transport_graph: ``induced`` | ``khop:<h>`` | ``knn:<k>`` | ``complete`` | ``none``.
        edge_weight: ``unit`` | ``sym_norm`` | a tensor with one weight per G0 edge.
        warm_start: start each flow from the previous q instead of uniform (default False).
        flow_every: run the flow every k calls and reuse q in between (default 1).
        cfl: c in (0, 1] (default 0.9), or None/False to use step_size unchecked.
        on_exceed: ``cap`` (default), ``raise`` when step_size exceeds cfl times the bound, or
            ``limit`` (a per-donor flux limiter instead of one global cap).
        uniform_mix: alpha in [0, 1): q <- (1 - alpha) q + alpha / n after the flow (default 0).
        knn_space: ``features`` (default) or ``embedding`` (pass ``embedding=`` to each call).
        train_mask: overrides ``data.train_mask``.
    """

    def __init__(
        self,
        data: Any = None,
        *,
        beta: float = 0.1,
        steps: int = 20,
        step_size: float = 1.0,
        scheme: str = "upwind",
        transport_graph: str = "induced",
        edge_weight: str | Tensor = "unit",
        warm_start: bool = False,
        flow_every: int = 1,
        cfl: float | bool | None = 0.9,
        on_exceed: str = "cap",
        uniform_mix: float = 0.0,
        knn_space: str = "features",
        train_mask: Tensor | None = None,
    ) -> None:
        if not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta >= 0):
            raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
        if not (
            isinstance(step_size, (int, float)) and math.isfinite(step_size) and step_size >= 0
        ):
            raise ValueError(f"step_size must be a finite number >= 0, got {step_size!r}")
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
        parse_transport_graph(transport_graph)
        if not isinstance(flow_every, int) or flow_every < 1:
            raise ValueError(f"flow_every must be an integer >= 1, got {flow_every!r}")
        if cfl is False:
            cfl = None
        if cfl is True:
            cfl = 0.9
        if cfl is not None and not (0 < float(cfl) <= 1):
            raise ValueError(f"cfl must be in (0, 1], or None/False for no cap, got {cfl!r}")
        if on_exceed not in EXCEED:
            raise ValueError(f"on_exceed must be 'cap', 'raise' or 'limit', got {on_exceed!r}")
        if not (0 <= uniform_mix < 1):
            raise ValueError(f"uniform_mix must be in [0, 1), got {uniform_mix!r}")
        if knn_space not in ("features", "embedding"):
            raise ValueError(f"knn_space must be 'features' or 'embedding', got {knn_space!r}")
        if not isinstance(edge_weight, Tensor) and edge_weight not in ("unit", "sym_norm"):
            raise ValueError(
                f"edge_weight must be 'unit', 'sym_norm' or a tensor, got {edge_weight!r}"
            )
        self.beta = float(beta)
        self.steps = steps
        self.step_size = float(step_size)
        self.scheme = scheme
        self.transport_graph = transport_graph
        self.edge_weight = edge_weight
        self.warm_start = bool(warm_start)
        self.flow_every = flow_every
        self.cfl = None if cfl is None else float(cfl)
        self.on_exceed = on_exceed
        self.uniform_mix = float(uniform_mix)
        self.knn_space = knn_space
        self.q: Tensor | None = None
        self.calls = 0
        self._last: dict[str, float] | None = {}
        self._last_inputs: tuple[Tensor, Tensor, FlowResult] | None = None
        self.last_result: FlowResult | None = None
        self.pairs: Tensor | None = None
        self._canon: tuple[Tensor, Tensor, Tensor] | None = None
        self.weights: Tensor | None = None
        self.n = 0
        if data is not None:
            mask = train_mask if train_mask is not None else getattr(data, "train_mask", None)
            if mask is None:
                raise ValueError("TARWeighter(data): data has no train_mask; pass train_mask=")
            x = getattr(data, "x", None)
            self.setup(data.edge_index, mask, num_nodes=int(data.num_nodes), x=x)

    def options(self) -> dict[str, Any]:
        """Every option (for results files)."""
        return {
            "beta": self.beta,
            "steps": self.steps,
            "step_size": self.step_size,
            "scheme": self.scheme,
            "transport_graph": self.transport_graph,
            "edge_weight": self.edge_weight if isinstance(self.edge_weight, str) else "tensor",
            "warm_start": self.warm_start,
            "flow_every": self.flow_every,
            "cfl": self.cfl,
            "on_exceed": self.on_exceed,
            "uniform_mix": self.uniform_mix,
            "knn_space": self.knn_space,
        }

    def setup(
        self,
        edge_index: Tensor,
        train_mask: Tensor,
        *,
        num_nodes: int | None = None,
        x: Tensor | None = None,
    ) -> TARWeighter:
        """Build G0 once from the graph and the training mask (``x``: node features for ``knn``)."""
        mask = train_mask.bool().cpu()
        self._train_mask = mask
        self.n = int(mask.sum())
        self._edge_index = edge_index.cpu()
        self._num_nodes = int(num_nodes if num_nodes is not None else mask.numel())
        kind, _ = parse_transport_graph(self.transport_graph)
        self._canon = None
        if kind == "knn" and self.knn_space == "embedding":
            self.pairs = None  # built from the embedding at each call
        else:
            feats = x.cpu()[mask] if (kind == "knn" and x is not None) else None
            if kind == "knn" and feats is None:
                raise ValueError("transport_graph='knn:k' with knn_space='features' needs data.x")
            self.pairs = build_transport_graph(
                self._edge_index,
                mask,
                self.transport_graph,
                num_nodes=self._num_nodes,
                features=feats,
            )
            self.weights = edge_weights(self.pairs, self.n, self.edge_weight)
            src, dst, w = _canonical(self.pairs, self.weights)
            self._canon = (src, dst, w.to(torch.float64))
        self.q = None
        self.calls = 0
        return self

    def __call__(self, loss: Tensor, *, embedding: Tensor | None = None) -> Tensor:
        """Weights q [n_train] (sum 1, no grad) for the per-node losses ``loss`` [n_train]."""
        if self.n == 0:
            raise RuntimeError("TARWeighter: call setup(edge_index, train_mask) first")
        if loss.dim() != 1 or loss.numel() != self.n:
            raise ValueError(
                f"loss has {loss.numel()} entries (shape {list(loss.shape)}) but there are "
                f"{self.n} training nodes"
            )
        if not torch.isfinite(loss.detach()).all():
            raise ValueError("loss holds NaN or inf")
        loss = loss.detach().cpu()
        if self.pairs is None:  # knn on embeddings
            if embedding is None:
                raise ValueError(
                    "knn_space='embedding' needs embedding= (the training nodes' rows)"
                )
            if embedding.size(0) != self.n:
                raise ValueError(f"embedding has {embedding.size(0)} rows, expected {self.n}")
            _, k = parse_transport_graph(self.transport_graph)
            from .transport import knn_graph

            pairs = knn_graph(embedding.detach().cpu(), k)
            weights = edge_weights(pairs, self.n, self.edge_weight)
        else:
            pairs = self.pairs
            weights = self.weights if self.weights is not None else edge_weights(pairs, self.n)
        reuse = self.q is not None and self.calls % self.flow_every != 0
        self.calls += 1
        if reuse:
            assert self.q is not None
            return self.q.clone()
        start = self.q if (self.warm_start and self.q is not None) else None
        if embedding is None and self._canon is not None and start is None:
            # the fixed G0 was validated at setup: run the inner loop directly (no per-call graph
            # checks, no host sync inside the T_in steps)
            src, dst, w = self._canon
            if self.steps == 0 or self.step_size == 0 or src.numel() == 0:
                result = FlowResult(
                    q=torch.full((self.n,), 1.0 / self.n, dtype=torch.float64), uniform=True
                )
            else:
                q0 = torch.full((self.n,), 1.0 / self.n, dtype=torch.float64)
                result = _flow(
                    q0,
                    loss.to(torch.float64),
                    src,
                    dst,
                    w,
                    self.beta,
                    self.step_size,
                    self.steps,
                    self.scheme,
                    self.cfl,
                    self.on_exceed,
                )
        else:
            result = gw_flow(
                start,
                loss,
                pairs,
                self.beta,
                self.step_size,
                self.steps,
                scheme=self.scheme,
                edge_weight=weights,
                cfl=self.cfl,
                on_exceed=self.on_exceed,
            )
        q = result.q
        if self.uniform_mix > 0 and not result.uniform:
            q = (1 - self.uniform_mix) * q + self.uniform_mix / self.n
        self.q = q
        self.last_result = result
        # diagnostics are computed when read (``last``), not in the training step
        self._last = None
        self._last_inputs = (q, loss, result)
        return q.clone()

    @property
    def last(self) -> dict[str, float]:
        """Diagnostics of the last flow: ESS/n, max q*n, corr(q, l), F gain, mean tau_eff, flow time."""
        if self._last is None and self._last_inputs is not None:
            q, loss, result = self._last_inputs
            self._last = {
                **weight_diagnostics(q, loss, beta=self.beta),
                "tau_eff_mean": (
                    float(sum(result.tau_eff) / len(result.tau_eff)) if result.tau_eff else 0.0
                ),
                "flow_time": result.total_time,
            }
        return self._last if self._last is not None else {}

    @property
    def is_uniform(self) -> bool:
        """True when the last flow returned the uniform start untouched (the trainer then uses ERM's mean)."""
        return self.last_result is not None and self.last_result.uniform and self.uniform_mix == 0

    def weighted_loss(self, loss: Tensor, *, embedding: Tensor | None = None) -> Tensor:
        """``sum_i q_i l_i`` with q from the flow (no gradient through q); the plain mean when q is uniform."""
        q = self(loss, embedding=embedding)
        if self.is_uniform:
            return loss.mean()
        return (q.to(loss.device, loss.dtype) * loss).sum()

    def state_dict(self) -> dict[str, Any]:
        return {
            "options": self.options(),
            "q": None if self.q is None else self.q.clone(),
            "calls": self.calls,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        q = state.get("q")
        if q is not None and q.numel() != self.n:
            raise ValueError(f"state holds q for {q.numel()} nodes, this weighter has {self.n}")
        self.q = None if q is None else q.clone()
        self.calls = int(state.get("calls", 0))

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"TARWeighter({opts}, n={self.n})"


TopologyAwareReweighter = TARWeighter
