"""``QuantOptimizer``: PARQ / AProx quantization-aware training as a wrapper around any
``torch.optim`` optimizer (the AProx iteration of Jin et al., ICML 2025, with the practical
inverse-slope schedule of the official code).

The base optimizer updates the full-precision latent ``u`` (kept as ``state[p]["latent"]``); after
each step the model weight becomes ``w = prox(u)`` for the parameters of every group that carries a
``quant_bits`` key (``0`` = ternary, ``>= 16`` or absent = not quantized).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import Optimizer

from .distributed import ShardedStats, local, shard_group
from .prox import ProxBinaryRelax, ProxHardQuant, ProxMap, ProxPARQ, ProxSoftQuant
from .quant import (
    LSBQuantizer,
    MaxUnifQuantizer,
    Quantizer,
    TernaryUnifQuantizer,
    UnifQuantizer,
    nearest,
    nearest_index,
)

__all__ = [
    "PROX_MAPS",
    "QUANTIZERS",
    "QuantOptimizer",
    "build_quant_optimizer",
    "make_prox",
    "make_quantizer",
    "quant_param_groups",
    "quant_view",
]


def quant_view(p: Tensor, block_size: int | None, per_channel: bool) -> tuple[Tensor, int | None]:
    """The 2-D (or 1-D) view of ``p`` that one level set (or one per row) is fitted to.

    Blocks: ``(numel/B, B)`` row-major; per-channel: conv kernels ``(O, I, kh, kw) -> (O, I*kh*kw)``;
    1-D tensors stay per-tensor.  Returns ``(view, dim)`` with ``dim = -1`` for per-row levels.
    """
    v = p
    if block_size is not None:
        v = (v.unsqueeze(0) if v.dim() == 1 else v).reshape(-1, block_size)
    per_row = per_channel and v.dim() > 1
    if per_row and v.dim() > 2:
        v = v.flatten(start_dim=1)
    return v, (-1 if per_row else None)


def _write_back(p: Tensor, view: Tensor) -> None:
    """Copy ``view`` into ``p`` when reshaping had to copy (non-contiguous parameters)."""
    if view is not p and (view.data_ptr() != p.data_ptr() or not p.is_contiguous()):
        p.copy_(view.reshape(p.shape))


def _fit_levels(
    quantizer: Quantizer,
    p: Tensor,
    view: Tensor,
    b: int,
    dim: int | None,
    block: int | None,
) -> tuple[Tensor | None, Tensor]:
    """``quantizer.quantize`` on ``view`` (the local rows of ``p``): per row on the local rows;
    per tensor over every shard when ``p`` is a row-sharded DTensor (global statistics)."""
    if dim is not None:
        if view.numel() == 0:  # a rank without rows of this parameter
            return None, view.new_empty((0, quantizer.get_quant_size(b)))
        return quantizer.quantize(view, b, dim=dim)
    group = shard_group(p)
    if group is None:
        return quantizer.quantize(view, b)
    if quantizer.sharded_stats:
        return quantizer.quantize(view, b, stats=ShardedStats(p.numel(), group))
    # a quantizer without sharded statistics: fit it to the gathered whole tensor
    from torch.distributed.tensor import distribute_tensor

    full = p.full_tensor()  # type: ignore[attr-defined]
    q_full, Q = quantizer.quantize(quant_view(full, block, False)[0], b)
    q_dt = distribute_tensor(
        q_full.reshape(full.shape),
        p.device_mesh,  # type: ignore[attr-defined]
        p.placements,  # type: ignore[attr-defined]
        src_data_rank=None,  # every rank holds q_full: slice, no communication
    )
    return q_dt.to_local().reshape(view.shape), Q


def _gather_rows(p: Tensor, t: Tensor, width: int) -> Tensor:
    """The whole-tensor version of ``t``, which holds ``width`` values per local row of the
    row-sharded DTensor ``p`` (codes, level sets): an ``all_gather`` along the rows of ``p``;
    returns shape ``(p.size(0), width)``."""
    from torch.distributed.tensor import DTensor

    per_row = t.reshape(local(p).size(0), width)
    dt = DTensor.from_local(
        per_row,
        p.device_mesh,  # type: ignore[attr-defined]
        p.placements,  # type: ignore[attr-defined]
        shape=torch.Size((p.size(0), width)),
        stride=(width, 1),
    )
    return dt.full_tensor()


class QuantOptimizer(Optimizer):
    """Quantization-aware training by proximal maps around a base optimizer.

    Args:
        base_optimizer: any ``torch.optim.Optimizer`` that does not need a closure to step.
        quantizer: default :class:`~parq_optim.Quantizer` (target-set estimator).
        prox_map: :class:`~parq_optim.ProxMap` (``ProxPARQ``, ``ProxHardQuant`` = STE, ...).
        warmup_steps: full-precision steps before QAT starts (default 0).
        quant_period: recompute the level sets ``Q`` every this many QAT steps (default 10).
        quant_per_channel: one level set per output channel (row), or per block (default False).
        quant_shrink: divide ``u`` by ``gamma = max(1, sum of lr)`` before the prox (default False).
        anneal_wd_frac: ``phi`` in ``wd = r*phi*wd_0 + (1-phi)*wd_0`` (default 0 = off).
        group_quantizer_map: ``{i: quantizer}`` for the ``i``-th *quantized* group.

    ``param_groups``, ``state`` and ``defaults`` are the base optimizer's objects, so LR schedulers
    work whether attached to the wrapper or to the base optimizer.
    """

    def __init__(
        self,
        base_optimizer: Optimizer,
        quantizer: Quantizer,
        prox_map: ProxMap,
        warmup_steps: int = 0,
        quant_period: int = 10,
        quant_per_channel: bool = False,
        quant_shrink: bool = False,
        anneal_wd_frac: float = 0.0,
        group_quantizer_map: dict[int, Quantizer] | None = None,
    ) -> None:
        if not isinstance(base_optimizer, Optimizer):
            raise TypeError(
                f"base_optimizer must be a torch.optim.Optimizer, got {base_optimizer!r}"
            )
        if isinstance(base_optimizer, (torch.optim.LBFGS, QuantOptimizer)):
            raise TypeError(
                "QuantOptimizer does not support base optimizers that require a closure "
                f"(got {type(base_optimizer).__name__})"
            )
        if not isinstance(quantizer, Quantizer):
            raise TypeError(f"quantizer must be a parq_optim.Quantizer, got {quantizer!r}")
        if not isinstance(prox_map, ProxMap):
            raise TypeError(f"prox_map must be a parq_optim.ProxMap, got {prox_map!r}")
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {warmup_steps!r}")
        if not isinstance(quant_period, int) or quant_period < 1:
            raise ValueError(f"quant_period must be an integer >= 1, got {quant_period!r}")
        if not 0.0 <= anneal_wd_frac <= 1.0:
            raise ValueError(f"anneal_wd_frac must be in [0, 1], got {anneal_wd_frac}")
        self.base_optimizer = base_optimizer
        self.quantizer = quantizer
        self.prox_map = prox_map
        self.group_quantizer_map = dict(group_quantizer_map or {})
        self.warmup_steps = warmup_steps
        self.quant_period = quant_period
        self.quant_per_channel = quant_per_channel
        self.quant_shrink = quant_shrink
        self.anneal_wd_frac = anneal_wd_frac
        self._steps_without_quant = 0
        for i, group in enumerate(self.regularized_param_groups()):
            self._init_group(i, group)
        if not any(True for _ in self.regularized_param_groups()):
            warnings.warn(
                "QuantOptimizer: no parameter group has 'quant_bits' < 16; it will behave exactly "
                "like the base optimizer",
                UserWarning,
                stacklevel=2,
            )

    def _init_group(self, i: int, group: dict[str, Any]) -> None:
        b = group["quant_bits"]
        self._get_quantizer(i).check_bits(b)
        block = group.get("quant_block_size")
        if block is not None:
            if not isinstance(block, int) or block < 1:
                raise ValueError(f"quant_block_size must be a positive integer, got {block!r}")
            for p in group["params"]:
                if p.dim() > 2:
                    raise ValueError(
                        f"quant_block_size={block} needs parameters with <= 2 dims, got shape "
                        f"{tuple(p.shape)}"
                    )
                if p.size(-1) % block:
                    raise ValueError(
                        f"quant_block_size={block} does not divide the last dim {p.size(-1)} "
                        f"of a parameter of shape {tuple(p.shape)}"
                    )
            if not self.quant_per_channel:
                warnings.warn(
                    "quant_block_size has no effect without quant_per_channel=True: one level set "
                    "per tensor is used (torchao behaviour)",
                    UserWarning,
                    stacklevel=3,
                )
        for p in group["params"]:
            shard_group(p)  # NotImplementedError for a DTensor layout that splits rows
        group.setdefault("cumu_lr", 0.0)
        if self.anneal_wd_frac > 0:
            group.setdefault("initial_wd", group["weight_decay"])

    # ---- delegation -------------------------------------------------------------------------
    @property
    def param_groups(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return self.base_optimizer.param_groups

    @property
    def state(self) -> Any:  # type: ignore[override]
        return self.base_optimizer.state

    @property
    def defaults(self) -> dict[str, Any]:  # type: ignore[override]
        return self.base_optimizer.defaults

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails: forward to the base optimizer
        if name == "base_optimizer" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.base_optimizer, name)

    def __repr__(self) -> str:
        base = "\n    ".join(repr(self.base_optimizer).split("\n"))
        return (
            f"{type(self).__name__}(\n  {base},\n  quantizer={self.quantizer!r},\n"
            f"  prox_map={self.prox_map!r},\n  warmup_steps={self.warmup_steps}, "
            f"quant_period={self.quant_period}, quant_per_channel={self.quant_per_channel}\n)"
        )

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.base_optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        self.base_optimizer.add_param_group(param_group)
        if param_group.get("quant_bits", 16) < 16:
            n = sum(1 for _ in self.regularized_param_groups())
            self._init_group(n - 1, self.param_groups[-1])

    def state_dict(self) -> dict[str, Any]:
        """The base optimizer's state dict (contains ``latent``, ``quants``, ``num_steps``, ...)."""
        return self.base_optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any], start_step: int | None = None) -> None:
        """Load into the base optimizer; ``start_step`` overrides ``num_steps``."""
        self.base_optimizer.load_state_dict(state_dict)
        if start_step is not None:
            self.num_steps = start_step

    # ---- bookkeeping ------------------------------------------------------------------------
    def regularized_param_groups(self) -> Iterator[dict[str, Any]]:
        """Yield the parameter groups that are quantized (``quant_bits < 16``)."""
        for group in self.param_groups:
            if group.get("quant_bits", 16) < 16:
                yield group

    def _quantized_params(self) -> Iterator[tuple[int, dict[str, Any], Tensor]]:
        for i, group in enumerate(self.regularized_param_groups()):
            for p in group["params"]:
                if p.requires_grad:
                    yield i, group, p

    def _get_quantizer(self, i: int) -> Quantizer:
        return self.group_quantizer_map.get(i, self.quantizer)

    @property
    def num_steps(self) -> int:
        """Optimizer steps taken (warm-up included); stored in the first quantized group."""
        for group in self.regularized_param_groups():
            return int(group.setdefault("num_steps", 0))
        return self._steps_without_quant

    @num_steps.setter
    def num_steps(self, value: int) -> None:
        for group in self.regularized_param_groups():
            group["num_steps"] = value
            return
        self._steps_without_quant = value

    @property
    def inv_slope(self) -> float | None:
        """Last inverse slope ``r_t`` returned by the prox map (None before any)."""
        for group in self.regularized_param_groups():
            return group.get("inv_slope")
        return None

    # ---- the algorithm ----------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One AProx step: ``u_{t+1} = u_t - lr * g(w_t)`` by the base optimizer, then
        ``w_{t+1} = prox(u_{t+1})``.

        A closure is evaluated first, at the current (quantized) weights ``w_t``; its gradient then
        drives the base optimizer's update of the latent ``u``.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        t = self.num_steps
        if t < self.warmup_steps or not any(True for _ in self.regularized_param_groups()):
            self.base_optimizer.step()
            self.num_steps = t + 1
            return loss
        with torch.no_grad():
            self._qat_step(t)
        self.num_steps = t + 1
        return loss

    def _qat_step(self, t: int) -> None:
        snapshots: dict[Tensor, Tensor] = {}
        for _, _, p in self._quantized_params():
            if t == self.warmup_steps or "latent" not in self.state.get(p, {}):
                # held outside the base state so lazy-initialising optimizers (Adam) see it empty
                snapshots[p] = p.detach().clone()
            else:
                p.copy_(self.state[p]["latent"])  # u_t back into the parameter
        self.base_optimizer.step()  # u_{t+1} from the gradient taken at w_t
        for p, u in snapshots.items():
            self.state[p]["latent"] = u
        refresh = (t - self.warmup_steps) % self.quant_period == 0
        for i, group in enumerate(self.regularized_param_groups()):
            quantizer = self._get_quantizer(i)
            group["cumu_lr"] += group["lr"]
            gamma = max(1.0, group["cumu_lr"])
            b, block = group["quant_bits"], group.get("quant_block_size")
            r = None
            for p in group["params"]:
                if not p.requires_grad:
                    continue
                state = self.state[p]
                state["latent"].copy_(p)
                lp = local(p)  # the local rows of a sharded (FSDP2) parameter, else p
                if self.quant_shrink:
                    lp.div_(gamma)
                view, dim = quant_view(lp, block, self.quant_per_channel)
                q = None
                if refresh or "quants" not in state:
                    q, Q = _fit_levels(quantizer, p, view, b, dim, block)
                    state["quants"] = Q.to(p.dtype)
                r = self.prox_map.apply_(view, q, state["quants"], step_count=t, dim=dim)
                _write_back(lp, view)
            if r:  # a positive inverse slope (PARQ): log it, anneal weight decay
                if self.anneal_wd_frac > 0:
                    wd0, phi = group["initial_wd"], self.anneal_wd_frac
                    group["weight_decay"] = r * phi * wd0 + (1 - phi) * wd0
                group["inv_slope"] = r

    @torch.no_grad()
    def restore_latent_params(self) -> None:
        """Copy the latent ``u`` back into the parameters (e.g. to evaluate full precision)."""
        for _, _, p in self._quantized_params():
            if "latent" in self.state.get(p, {}):
                p.copy_(self.state[p]["latent"])

    @torch.no_grad()
    def save_latent_params(self) -> None:
        """Store the current parameters as the latent ``u``."""
        for _, _, p in self._quantized_params():
            if "latent" in self.state.get(p, {}):
                self.state[p]["latent"].copy_(p)
            else:
                self.state[p]["latent"] = p.detach().clone()

    def _levels(self, i: int, group: dict[str, Any], p: Tensor, view: Tensor, dim: int | None):
        """The stored level set of ``p`` (the local rows' under FSDP2), or a fresh fit."""
        state = self.state.get(p, {})
        if "quants" in state:
            return state["quants"]
        quantizer, block = self._get_quantizer(i), group.get("quant_block_size")
        return _fit_levels(quantizer, p, view, group["quant_bits"], dim, block)[1]

    @torch.no_grad()
    def hard_quantize_(self) -> None:
        """Set every quantized parameter to ``nearest(Q, u)`` (``u/gamma`` with ``quant_shrink``)
        using the stored level sets; the latent ``u`` is left unchanged.  Use it to evaluate or
        export a model whose training stopped before ``anneal_end``."""
        for i, group, p in self._quantized_params():
            state = self.state.get(p, {})
            u = local(state["latent"] if "latent" in state else p).detach().clone()
            if self.quant_shrink:
                u.div_(max(1.0, group["cumu_lr"]))
            view, dim = quant_view(u, group.get("quant_block_size"), self.quant_per_channel)
            Q = self._levels(i, group, p, view, dim)
            lp = local(p)
            lp.copy_(nearest(Q, view, dim).reshape(lp.shape))

    @torch.no_grad()
    def quantized_fraction(self, rtol: float = 1e-6) -> float:
        """Fraction of quantized entries lying on a level of their ``Q`` (within ``rtol*max|Q|``,
        which absorbs the last-bit variants of greedy LSBQ's ``q = p - r``)."""
        hit, total = 0, 0
        for i, group, p in self._quantized_params():
            view, dim = quant_view(
                local(p).detach(), group.get("quant_block_size"), self.quant_per_channel
            )
            Q = self._levels(i, group, p, view, dim)
            tol = rtol * Q.abs().max() if Q.numel() else 0.0
            count = int(((view - nearest(Q, view, dim)).abs() <= tol).sum())
            process_group = shard_group(p)
            if process_group is not None:  # FSDP2: add up the local rows of every rank
                import torch.distributed as dist

                c = torch.tensor(count, dtype=torch.float64, device=view.device)
                dist.all_reduce(c, group=process_group)
                count = int(c.item())
            hit += count
            total += p.numel()
        return hit / total if total else 0.0

    @torch.no_grad()
    def export_quantized(self, model: nn.Module) -> dict[str, dict[str, Any]]:
        """Integer codes + level tables of every quantized parameter of ``model``.

        Returns ``{name: {"codes": indices into levels (uint8 when |Q| <= 256), "levels": Q,
        "shape": original shape, "dim": None or -1, "block_size": B or None,
        "per_channel": bool}}``.  Codes are ``nearest(Q, w)`` of the current weights ``w``.
        Under FSDP2 every rank must call it: the codes and per-row level sets of the local rows
        are gathered, and every rank receives the whole tensors.
        """
        groups = {id(p): (i, g) for i, g, p in self._quantized_params()}
        out: dict[str, dict[str, Any]] = {}
        for name, p in model.named_parameters():
            if id(p) not in groups:
                continue
            i, group = groups[id(p)]
            block = group.get("quant_block_size")
            view, dim = quant_view(local(p).detach(), block, self.quant_per_channel)
            Q = self._levels(i, group, p, view, dim)
            codes = nearest_index(Q, view, dim)
            if shard_group(p) is not None:  # FSDP2: gather the rows of every rank
                full_view, _ = quant_view(
                    torch.empty(p.shape, device="meta"), block, self.quant_per_channel
                )
                rows = p.size(0)
                codes = _gather_rows(p, codes, p.numel() // rows).reshape(full_view.shape)
                if dim is not None:
                    m = Q.size(-1)
                    Q = _gather_rows(p, Q, full_view.size(0) // rows * m).reshape(-1, m)
            out[name] = {
                "codes": codes.to(_code_dtype(Q.size(-1))).cpu(),
                "levels": Q.detach().clone().cpu(),
                "shape": tuple(p.shape),
                "dim": dim,
                "block_size": block,
                "per_channel": self.quant_per_channel,
            }
        return out

    def torchao_convert(self, model: nn.Module, *, prefer_affine: bool = True) -> dict[str, str]:
        """Convert ``model``'s quantized ``nn.Linear``/``nn.Embedding`` weights to torchao
        quantized tensors in place (:func:`parq_optim.export.torchao_convert`)."""
        from .export import torchao_convert

        return torchao_convert(model, self, prefer_affine=prefer_affine)


def _code_dtype(m: int) -> torch.dtype:
    return torch.uint8 if m <= 256 else (torch.int16 if m <= 2**15 else torch.int32)


def quant_param_groups(
    model: nn.Module,
    bits: int,
    *,
    block_size: int | None = None,
    include: tuple[type[nn.Module], ...] = (nn.Linear, nn.Conv1d, nn.Conv2d),
    exclude: Callable[[str, nn.Module], bool] | None = None,
    no_decay_1d: bool = True,
) -> list[dict[str, Any]]:
    """Parameter groups for :class:`QuantOptimizer`: the weights (``dim >= 2``) of ``include``
    modules get ``quant_bits = bits``; everything else (biases, norms, embeddings) stays full
    precision, with ``weight_decay = 0`` when ``no_decay_1d``.  Shared parameters appear once;
    ``exclude(name, module) -> True`` keeps a module full precision."""
    if not isinstance(bits, int) or bits < 0:
        raise ValueError(f"bits must be an integer >= 0 (0 = ternary), got {bits!r}")
    seen: set[int] = set()
    quant: list[Tensor] = []
    for name, module in model.named_modules():
        if not isinstance(module, include) or (exclude is not None and exclude(name, module)):
            continue
        w = getattr(module, "weight", None)
        if isinstance(w, nn.Parameter) and w.dim() >= 2 and id(w) not in seen:
            seen.add(id(w))
            quant.append(w)
    other = [p for p in model.parameters() if id(p) not in seen]
    groups: list[dict[str, Any]] = []
    if quant:
        g: dict[str, Any] = {"params": quant, "quant_bits": bits}
        if block_size is not None:
            g["quant_block_size"] = block_size
        groups.append(g)
    if other:
        groups.append({"params": other, **({"weight_decay": 0.0} if no_decay_1d else {})})
    return groups


QUANTIZERS: dict[str, Callable[[], Quantizer]] = {
    "unif": UnifQuantizer,
    "maxunif": MaxUnifQuantizer,
    "ternary": TernaryUnifQuantizer,
    "lsbq": LSBQuantizer,
    "lsbq-optimal": lambda: LSBQuantizer(optimal=True),
}

PROX_MAPS = ("parq", "ste", "binaryrelax", "softquant")


def make_quantizer(name: str) -> Quantizer:
    """Quantizer by name: one of ``QUANTIZERS``."""
    if name not in QUANTIZERS:
        raise ValueError(f"unknown quantizer {name!r}; choose from {sorted(QUANTIZERS)}")
    return QUANTIZERS[name]()


def make_prox(
    name: str, anneal_start: int = 0, anneal_end: int = 1, steepness: float = 10.0
) -> ProxMap:
    """Prox map by name: ``parq``, ``ste`` (hard quantization), ``binaryrelax``, ``softquant``."""
    if name == "parq":
        return ProxPARQ(anneal_start, anneal_end, steepness=steepness)
    if name in ("ste", "hard"):
        return ProxHardQuant()
    if name == "binaryrelax":
        return ProxBinaryRelax(anneal_start, anneal_end)
    if name == "softquant":
        return ProxSoftQuant(anneal_start, anneal_end)
    raise ValueError(f"unknown prox map {name!r}; choose from {list(PROX_MAPS)}")


def build_quant_optimizer(
    base_optimizer: Optimizer,
    quantizer: Quantizer | str,
    prox_map: ProxMap | str,
    warmup_steps: int = 0,
    quant_period: int = 10,
    quant_per_channel: bool = False,
    quant_shrink: bool = False,
    anneal_wd_frac: float = 0.0,
    group_quantizer_map: dict[int, Quantizer] | None = None,
    *,
    anneal_start: int | None = None,
    anneal_end: int | None = None,
    steepness: float = 10.0,
) -> QuantOptimizer:
    """Same arguments as :class:`QuantOptimizer`; ``quantizer`` and ``prox_map`` may also be names
    (then ``anneal_start`` defaults to ``warmup_steps`` and ``anneal_end`` is required for the
    annealed maps)."""
    if isinstance(quantizer, str):
        quantizer = make_quantizer(quantizer)
    if isinstance(prox_map, str):
        start = warmup_steps if anneal_start is None else anneal_start
        if anneal_end is None and prox_map not in ("ste", "hard"):
            raise ValueError(f"prox_map={prox_map!r} needs anneal_end (a step count)")
        prox_map = make_prox(prox_map, start, anneal_end or start + 1, steepness)
    return QuantOptimizer(
        base_optimizer,
        quantizer,
        prox_map,
        warmup_steps=warmup_steps,
        quant_period=quant_period,
        quant_per_channel=quant_per_channel,
        quant_shrink=quant_shrink,
        anneal_wd_frac=anneal_wd_frac,
        group_quantizer_map=group_quantizer_map,
    )
