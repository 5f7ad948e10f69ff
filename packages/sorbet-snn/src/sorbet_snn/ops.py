"""Sorbet's shift-and-add building blocks: PoT rounding, binary weights, LSQ activation quantisers,
PTsoftmax (paper Algorithm 2) and BSPN (paper Algorithm 1), each with a straight-through estimator
where the official release has none.

Notation: ``PoT(x) = sign(x) 2^round(log2|x|)`` (nearest power of two in the log domain, PoT(0) = 0);
``NPoT(x)`` for x > 0 is the nearest power of two in the linear domain (ties go up).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "BSPN",
    "BinaryWeight",
    "LSQQuantizer",
    "binarize",
    "npot",
    "pot",
    "ptsoftmax",
]


def pot(x: Tensor) -> Tensor:
    """``sign(x) * 2^round(log2|x|)``, with ``pot(0) = 0`` (no gradient; see :func:`_ste`)."""
    mag = x.abs()
    safe = torch.where(mag > 0, mag, torch.ones_like(mag))
    out = torch.sign(x) * torch.exp2(torch.round(torch.log2(safe)))
    return torch.where(mag > 0, out, torch.zeros_like(x))


def npot(x: Tensor) -> Tensor:
    """Nearest power of two of ``x > 0`` in the linear domain; a tie between 2^k and 2^(k+1) goes up.

    ``npot(3) == 4`` (a tie), ``npot(2.9) == 2``, ``npot(3.1) == 4``; powers of two map to themselves.
    Non-positive inputs give 0.
    """
    pos = x > 0
    safe = torch.where(pos, x, torch.ones_like(x))
    lo = torch.exp2(torch.floor(torch.log2(safe)))
    lo = torch.where(lo > safe, lo / 2, lo)  # guard log2 rounding at exact powers
    lo = torch.where(lo * 2 <= safe, lo * 2, lo)
    hi = lo * 2
    out = torch.where(safe - lo < hi - safe, lo, hi)
    return torch.where(pos, out, torch.zeros_like(x))


class _STE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, value: Tensor) -> Tensor:
        return value.detach().clone()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g, None


def _ste(x: Tensor, value: Tensor) -> Tensor:
    """Forward exactly ``value``, backward identity to ``x`` (straight-through estimator).

    (``x + (value - x).detach()`` would carry float rounding into the forward value.)"""
    if value.shape != x.shape:
        value = value.expand_as(x)
    out: Tensor = _STE.apply(x, value)
    return out


# ----------------------------------------------------------------------------------- binary weights


def binarize(
    weight: Tensor, *, row_wise: bool = False, zero_sign: str = "plus", pot_scale: bool = False
) -> Tensor:
    """BWN binarisation ``W_b = m * sign(W - mu)`` (as BiT, which Sorbet builds on), identity STE.

    ``mu = mean(W)`` over the whole matrix, ``m = mean(|W|)`` (of W itself) per matrix, or per row
    when ``row_wise`` (the word embedding). ``zero_sign="plus"`` maps ``W == mu`` to +1 (strictly
    binary); ``"zero"`` keeps the official ``sign(0) = 0``. ``pot_scale`` rounds m with NPoT.
    """
    if zero_sign not in ("plus", "zero"):
        raise ValueError(f"zero_sign must be 'plus' or 'zero', got {zero_sign!r}")
    w = weight.detach()
    mu = w.mean()
    m = w.abs().mean(dim=1, keepdim=True) if row_wise else w.abs().mean()
    if pot_scale:
        m = npot(m)
    sign = torch.sign(w - mu)
    if zero_sign == "plus":
        sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return _ste(weight, m * sign)


class BinaryWeight(nn.Module):
    """A module form of :func:`binarize` (used as a parametrisation-free helper by the layers)."""

    def __init__(
        self, *, row_wise: bool = False, zero_sign: str = "plus", pot_scale: bool = False
    ) -> None:
        super().__init__()
        binarize(torch.zeros(1, 1), zero_sign=zero_sign)  # validate early
        self.row_wise = row_wise
        self.zero_sign = zero_sign
        self.pot_scale = pot_scale

    def forward(self, weight: Tensor) -> Tensor:
        return binarize(
            weight, row_wise=self.row_wise, zero_sign=self.zero_sign, pot_scale=self.pot_scale
        )


# ----------------------------------------------------------------------------------------- LSQ


class _LSQ(torch.autograd.Function):
    """``alpha * clamp(round(x/alpha), Qn, Qp)`` with the LSQ gradients (as in BiT)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, alpha: Tensor, qn: int, qp: int, one_bit: bool) -> Tensor:
        r = x / alpha
        if one_bit:
            q = torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))
        else:
            q = torch.clamp(torch.round(r), qn, qp)
        ctx.save_for_backward(x, alpha)
        ctx.qn, ctx.qp, ctx.one_bit = qn, qp, one_bit
        return q * alpha

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        x, alpha = ctx.saved_tensors
        qn, qp = ctx.qn, ctx.qp
        r = x / alpha
        inside = (r >= qn) & (r <= qp)
        gx = g * inside.to(g.dtype)
        scale = 1.0 / math.sqrt(x.numel() * max(qp, 1))
        if ctx.one_bit:
            da = torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))
        else:
            da = torch.where(
                r < qn,
                torch.full_like(r, float(qn)),
                torch.where(r > qp, torch.full_like(r, float(qp)), torch.round(r) - r),
            )
        galpha = (g * da).sum() * scale
        return gx, galpha.reshape(alpha.shape), None, None, None


class LSQQuantizer(nn.Module):
    """Learned-step ("elastic") activation quantiser with a power-of-two initial step.

    Signed, b bits: ``Qn = -2^(b-1)``, ``Qp = 2^(b-1) - 1``; unsigned: ``Qn = 0``, ``Qp = 2^b - 1``.
    ``q = clamp(round((x - m0)/alpha), Qn, Qp)`` and ``x_hat = alpha q + m0``, where ``m0`` is 0 or,
    with ``unsigned_offset="batch_min_pot"`` (the official code), ``PoT(min x)``. The step is
    initialised on the first forward as ``NPoT(2 mean|x| / sqrt(Qp))`` (signed) or ``NPoT(4 mean|x| /
    sqrt(Qp))`` (unsigned); ``alpha_pot="always"`` keeps it a power of two by an STE every forward.

    Args:
        bits: activation bits b (>= 1; 32 or more turns the quantiser into the identity).
        signed: symmetric grid (True) or non-negative grid (False).
        alpha_pot: ``"init"`` (default, official) or ``"always"``.
        unsigned_offset: ``"none"`` (default) or ``"batch_min_pot"`` (official).
    """

    initialized: Tensor

    def __init__(
        self,
        bits: int = 4,
        *,
        signed: bool = True,
        alpha_pot: str = "init",
        unsigned_offset: str = "none",
    ) -> None:
        super().__init__()
        if bits < 1:
            raise ValueError(f"bits must be >= 1, got {bits}")
        if alpha_pot not in ("init", "always"):
            raise ValueError(f"alpha_pot must be 'init' or 'always', got {alpha_pot!r}")
        if unsigned_offset not in ("none", "batch_min_pot"):
            raise ValueError(
                f"unsigned_offset must be 'none' or 'batch_min_pot', got {unsigned_offset!r}"
            )
        self.bits = bits
        self.signed = signed
        self.alpha_pot = alpha_pot
        self.unsigned_offset = unsigned_offset
        self.alpha = nn.Parameter(torch.ones(()))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))

    @property
    def enabled(self) -> bool:
        return self.bits < 32

    @property
    def qrange(self) -> tuple[int, int]:
        if self.signed:
            if self.bits == 1:
                return -1, 1
            return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        return 0, 2**self.bits - 1

    def extra_repr(self) -> str:
        return f"bits={self.bits}, signed={self.signed}, alpha_pot={self.alpha_pot!r}"

    def offset(self, x: Tensor) -> Tensor:
        """``m0``: the PoT of the tensor minimum (``"batch_min_pot"``, b >= 2, unsigned), else 0."""
        if self.signed or self.unsigned_offset == "none" or self.bits == 1:
            return torch.zeros((), dtype=x.dtype, device=x.device)
        return pot(x.detach().min())

    def step(self, x: Tensor) -> Tensor:
        """The step alpha used on ``x`` (initialising it on the first call)."""
        if not bool(self.initialized):
            with torch.no_grad():
                qp = max(self.qrange[1], 1)
                factor = 2.0 if self.signed else 4.0
                xs = x.detach() - self.offset(x)
                a0 = factor * xs.abs().mean() / math.sqrt(qp)
                a0 = npot(a0.clamp_min(1e-5).to(self.alpha.dtype))
                self.alpha.copy_(a0)
                self.initialized.fill_(True)
        alpha = self.alpha.clamp_min(1e-5)
        if self.alpha_pot == "always":
            alpha = _ste(alpha, npot(alpha.detach()))
        return alpha

    def levels(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Integer levels ``q`` (as a float tensor holding integers), the step and the offset m0."""
        m0 = self.offset(x)
        alpha = self.step(x)
        qn, qp = self.qrange
        r = (x - m0) / alpha
        if self.signed and self.bits == 1:
            q = torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))
        else:
            q = torch.clamp(torch.round(r), qn, qp)
        return q.detach(), alpha.detach(), m0

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return x
        m0 = self.offset(x)
        alpha = self.step(x)
        qn, qp = self.qrange
        return _LSQ.apply(x - m0, alpha, qn, qp, self.signed and self.bits == 1) + m0


# ---------------------------------------------------------------------------------- PTsoftmax


def ptsoftmax(
    scores: Tensor,
    mask: Tensor | None = None,
    *,
    ceil: bool = True,
    partition: str = "npot",
    grad: str = "ste",
) -> Tensor:
    """Power-of-two softmax over the last dimension (paper Algorithm 2).

    ``s = scores + mask`` (additive mask, -10000 on masked keys); ``a = 2^(ceil(s) - max ceil(s))``;
    ``p = a / NPoT(sum a)``. Every output is 0 or a power of two, the row maximum is ``1/NPoT(Z)`` and
    row sums lie in [0.75, 1.5).

    ``grad="ste"`` (default) back-propagates through the surrogate ``sg(Z/NPoT(Z)) *
    softmax2(s)`` (a base-2 softmax of the un-ceiled scores, scaled by the detached partition-rounding
    factor); ``grad="official"`` keeps the official release's behaviour, where ``ceil`` blocks every
    gradient to the scores. ``ceil=False, partition="exact"`` gives exactly ``softmax(s ln 2)``.
    """
    if partition not in ("npot", "exact"):
        raise ValueError(f"partition must be 'npot' or 'exact', got {partition!r}")
    if grad not in ("ste", "official"):
        raise ValueError(f"grad must be 'ste' or 'official', got {grad!r}")
    s = scores if mask is None else scores + mask
    s_hat = torch.ceil(s) if ceil else s
    m = s_hat.amax(dim=-1, keepdim=True).detach()
    a = torch.exp2(s_hat - m)
    z = a.sum(dim=-1, keepdim=True)
    z_hat = npot(z.detach()) if partition == "npot" else z
    p = a / z_hat
    if grad == "official" or not ceil:
        return p  # official: ceil has zero derivative, so no gradient reaches the scores
    ratio = (z / z_hat).detach()
    surrogate = ratio * torch.softmax(s * math.log(2.0), dim=-1)
    return _ste(surrogate, p)  # forward exactly p, gradient of the surrogate


# --------------------------------------------------------------------------------------- BSPN


class _PowerNormFn(torch.autograd.Function):
    """``y = gamma_hat * x / sqrt(var + eps) + beta`` with PowerNorm's approximate backward.

    ``g = dy * gamma`` (raw gamma), ``dx = (g - 0.1 e z) / sqrt(psi + eps)`` with the batch ``psi``,
    and the running buffer ``e += mean_n[(g - 0.1 e z) z]`` updated in the backward pass.
    """

    @staticmethod
    def forward(
        ctx: Any,
        xt: Tensor,
        gamma: Tensor,
        beta: Tensor,
        gamma_hat: Tensor,
        var: Tensor,
        psi: Tensor,
        e: Tensor,
        valid: Tensor,
        eps: float,
    ) -> Tensor:
        z = xt / torch.sqrt(var + eps)
        ctx.save_for_backward(z, gamma, psi, valid)
        ctx.e = e
        ctx.eps = eps
        return gamma_hat * z + beta

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        z, gamma, psi, valid = ctx.saved_tensors
        e: Tensor = ctx.e
        g = dy * gamma
        approx = g - 0.1 * e * z
        dx = approx / torch.sqrt(psi + ctx.eps)
        with torch.no_grad():
            rows = (approx * z).reshape(-1, z.shape[-1])[valid.reshape(-1)]
            if rows.numel():
                e.add_(rows.mean(dim=0).to(e.dtype))
        dims = tuple(range(dy.dim() - 1))
        dgamma = (dy * z).sum(dim=dims)
        dbeta = dy.sum(dim=dims)
        return dx, dgamma, dbeta, None, None, None, None, None, None


class BSPN(nn.Module):
    """Bit-Shifting PowerNorm (paper Algorithm 1): PowerNorm with power-of-two scalings and outputs.

    Step 1 (both modes): per token and channel group, ``x~ = x / 2^ceil(log2(mean_g|x| + eps))``.
    Training: ``psi = mean_tokens x~^2`` (padding excluded with ``mask_padding``), ``z = x~ /
    sqrt(psi + eps)`` during warm-up, ``x~ / sqrt(phi + eps)`` after it, ``y = PoT(gamma) z + beta``;
    the running ``phi`` follows the official update order. Eval: ``y = PoT(gamma / sqrt(phi + eps))
    x~ + beta`` (one shift and one add per element). Both modes end with ``y = PoT(y)``.

    Args:
        hidden_size: H; groups: G (H must be divisible by G); eps: 1e-5; warmup: W iterations.
        mask_padding: exclude padding tokens from ``psi`` (default; the official code includes them).
        backward: ``"powernorm"`` (default, official approximate backward) or ``"autograd"``.
        output_pot: round outputs to powers of two; output_pot_ste: with an STE (default) or without
            (official: every upstream gradient is then exactly zero).
        pot_scale: round gamma (training) and the fused scale (eval) to powers of two.
        group_scaling: step 1 on (default) or off.
    """

    running_phi: Tensor
    grad_e: Tensor
    iters: Tensor

    def __init__(
        self,
        hidden_size: int,
        groups: int = 1,
        *,
        eps: float = 1e-5,
        warmup: int = 1000,
        mask_padding: bool = True,
        backward: str = "powernorm",
        output_pot: bool = True,
        output_pot_ste: bool = True,
        pot_scale: bool = True,
        group_scaling: bool = True,
    ) -> None:
        super().__init__()
        if groups < 1 or hidden_size % groups:
            raise ValueError(f"BSPN: hidden_size {hidden_size} is not divisible by groups {groups}")
        if backward not in ("powernorm", "autograd"):
            raise ValueError(f"backward must be 'powernorm' or 'autograd', got {backward!r}")
        if warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {warmup}")
        self.hidden_size = hidden_size
        self.groups = groups
        self.eps = eps
        self.warmup = warmup
        self.mask_padding = mask_padding
        self.backward_mode = backward
        self.output_pot = output_pot
        self.output_pot_ste = output_pot_ste
        self.pot_scale = pot_scale
        self.group_scaling = group_scaling
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.register_buffer("running_phi", torch.ones(hidden_size))
        self.register_buffer("grad_e", torch.zeros(hidden_size))
        self.register_buffer("iters", torch.zeros((), dtype=torch.long))

    def extra_repr(self) -> str:
        return f"{self.hidden_size}, groups={self.groups}, warmup={self.warmup}"

    def group_scale(self, x: Tensor) -> Tensor:
        """Step 1: divide each channel group of each token by ``2^ceil(log2(mean|x| + eps))``."""
        if not self.group_scaling:
            return x
        shape = x.shape
        xg = x.reshape(*shape[:-1], self.groups, shape[-1] // self.groups)
        mu = xg.detach().abs().mean(dim=-1, keepdim=True)
        divisor = torch.exp2(torch.ceil(torch.log2(mu + self.eps)))
        return (xg / divisor).reshape(shape)

    def _valid(self, x: Tensor, mask: Tensor | None) -> Tensor:
        if mask is None or not self.mask_padding:
            return torch.ones(x.shape[:-1], dtype=torch.bool, device=x.device)
        return mask.to(torch.bool).reshape(x.shape[:-1])

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x``: (..., H); ``mask``: (...) with 1 for real tokens, 0 for padding (optional)."""
        if x.shape[-1] != self.hidden_size:
            raise ValueError(f"BSPN expects last dimension {self.hidden_size}, got {x.shape[-1]}")
        xt = self.group_scale(x)
        if self.training:
            y = self._train_forward(xt, self._valid(x, mask))
        else:
            k = self.weight / torch.sqrt(self.running_phi + self.eps)
            if self.pot_scale:
                k = _ste(k, pot(k.detach()))
            y = k * xt + self.bias
        if not self.output_pot:
            return y
        rounded = pot(y.detach())
        return _ste(y, rounded) if self.output_pot_ste else rounded

    def _train_forward(self, xt: Tensor, valid: Tensor) -> Tensor:
        rows = xt.reshape(-1, self.hidden_size)[valid.reshape(-1)]
        if rows.shape[0] == 0:
            rows = xt.reshape(-1, self.hidden_size)
        if rows.shape[0] < 64 and not getattr(self, "_warned_small", False):
            self._warned_small = True
            warnings.warn(
                f"BSPN: batch statistics over only {rows.shape[0]} tokens (< 64); power "
                "normalisation is unstable with very small batches",
                stacklevel=3,
            )
        psi = (rows * rows).mean(dim=0)
        self.iters += 1
        it = int(self.iters)
        use_batch = it <= self.warmup
        with torch.no_grad():
            phi = self.running_phi
            if it < self.warmup:
                phi.mul_((it - 1) / it).add_(psi.detach().to(phi.dtype) / it)
            phi_used = phi.clone()  # the value before this step's momentum update (post warm-up)
            phi.mul_(0.9).add_(0.1 * psi.detach().to(phi.dtype))
        gamma_hat = _ste(self.weight, pot(self.weight.detach())) if self.pot_scale else self.weight
        if self.backward_mode == "autograd":
            var = psi if use_batch else phi_used.to(xt.dtype)
            return gamma_hat * (xt / torch.sqrt(var + self.eps)) + self.bias
        var = psi.detach() if use_batch else phi_used.to(xt.dtype)
        out: Tensor = _PowerNormFn.apply(
            xt,
            self.weight,
            self.bias,
            gamma_hat.detach(),
            var,
            psi.detach(),
            self.grad_e,
            valid,
            self.eps,
        )
        return out


def relu_or_gelu(x: Tensor, kind: str) -> Tensor:
    """The FFN / pooler activation by name: ``relu``, ``gelu`` (erf form, as BERT) or ``tanh``."""
    if kind == "relu":
        return F.relu(x)
    if kind == "gelu":
        return F.gelu(x)
    if kind == "tanh":
        return torch.tanh(x)
    raise ValueError(f"unknown activation {kind!r}; accepted: relu, gelu, tanh")
