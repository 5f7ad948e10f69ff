"""Writing and reading a quantized model.

* The package's own format (no dependency): per tensor (or per row / block) a level table ``Q``
  plus integer codes packed at ``ceil(log2 |Q|)`` bits each; everything else (biases, norms,
  buffers) in float. ``load_quantized`` rebuilds the float ``state_dict`` (``w = Q[code]``), so a
  model saved after training loads back with bit-identical weights.
* torchao's quantized tensor subclasses (:func:`torchao_convert`, needs ``torchao``): the weights
  of ``nn.Linear`` / ``nn.Embedding`` modules become ``IntxUnpackedToInt8Tensor`` (torchao's
  affine ``(q - zero_point) * scale`` format, what torchao's own PARQ ``torchao_convert`` produces)
  when their level sets are exact affine grids (``UnifQuantizer``, ``MaxUnifQuantizer``,
  ``TernaryUnifQuantizer``), else ``CodebookQuantizedTensor`` (torchao's lookup-table format,
  for LSBQ's non-uniform levels). Either way the converted module computes with exactly the
  weights ``Q[code]``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .optim import QuantOptimizer

__all__ = [
    "affine_grid",
    "dequantize",
    "load_quantized",
    "pack_codes",
    "save_quantized",
    "torchao_convert",
    "unpack_codes",
]

FORMAT = "parq-optim/1"


def _bits_per_code(m: int) -> int:
    return max(1, math.ceil(math.log2(m))) if m > 1 else 1


def pack_codes(codes: Tensor, nbits: int) -> Tensor:
    """Pack non-negative integer codes (< 2**nbits) into a flat uint8 tensor, MSB first."""
    c = codes.reshape(-1).to(torch.int64).cpu().numpy()
    if c.size and (c.min() < 0 or c.max() >= 2**nbits):
        raise ValueError(f"codes outside [0, 2**{nbits}) cannot be packed at {nbits} bits")
    planes = (c[:, None] >> np.arange(nbits - 1, -1, -1)) & 1
    return torch.from_numpy(np.packbits(planes.astype(np.uint8).reshape(-1)))


def unpack_codes(packed: Tensor, nbits: int, count: int) -> Tensor:
    """Inverse of :func:`pack_codes`: ``count`` codes as int64."""
    bits = np.unpackbits(packed.cpu().numpy(), count=count * nbits).reshape(count, nbits)
    return torch.from_numpy(bits.astype(np.int64) @ (1 << np.arange(nbits - 1, -1, -1)))


def dequantize(entry: dict[str, Any]) -> Tensor:
    """Float tensor ``Q[codes]`` (per row: ``Q.gather(1, codes)``) in the original shape."""
    Q, codes = entry["levels"], entry["codes"].to(torch.int64)
    w = Q[codes] if entry["dim"] is None else Q.gather(1, codes)
    return w.reshape(entry["shape"])


@torch.no_grad()
def save_quantized(model: nn.Module, optimizer: QuantOptimizer, path: str | os.PathLike) -> dict:
    """Write ``model`` with its quantized weights as codes + levels (see module docstring).

    Returns a report: ``file_bytes``, ``quantized_params``, ``bits_per_weight`` (code bits + level
    tables over the quantized weights), ``fp_params``, ``bits_per_param_overall``.
    """
    entries = optimizer.export_quantized(model)
    by_id = {id(p): n for n, p in model.named_parameters() if n in entries}
    tensors: dict[str, dict[str, Any]] = {}
    fp: dict[str, Tensor] = {}
    code_bits = level_count = fp_count = 0
    for key, value in model.state_dict(keep_vars=True).items():
        name = by_id.get(id(value))
        if name is None:
            fp[key] = value.detach().cpu().clone()
            fp_count += value.numel() if value.is_floating_point() else 0
            continue
        e = entries[name]
        nbits = _bits_per_code(e["levels"].size(-1))
        tensors[key] = {
            "packed": pack_codes(e["codes"], nbits),
            "nbits": nbits,
            "view_shape": tuple(e["codes"].shape),
            "levels": e["levels"],
            "shape": e["shape"],
            "dim": e["dim"],
        }
        code_bits += e["codes"].numel() * nbits
        level_count += e["levels"].numel()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": FORMAT, "quantized": tensors, "float": fp}, path)
    n_quant = sum(int(np.prod(t["shape"])) for t in tensors.values())
    bits_q = code_bits + 32 * level_count
    return {
        "file": str(path),
        "file_bytes": path.stat().st_size,
        "quantized_params": n_quant,
        "fp_params": fp_count,
        "bits_per_weight": bits_q / n_quant if n_quant else float("nan"),
        "storage_bits": bits_q + 32 * fp_count,
        "bits_per_param_overall": (bits_q + 32 * fp_count) / max(1, n_quant + fp_count),
        "fp32_bytes": 4 * (n_quant + fp_count),
    }


def load_quantized(path: str | os.PathLike, model: nn.Module | None = None) -> dict[str, Tensor]:
    """Read a file written by :func:`save_quantized` and return the float ``state_dict``; when
    ``model`` is given, also load it (strict)."""
    blob = torch.load(Path(path), map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ValueError(f"{path}: not a parq-optim quantized model (format {FORMAT!r} expected)")
    sd: dict[str, Tensor] = dict(blob["float"])
    for key, t in blob["quantized"].items():
        count = int(np.prod(t["view_shape"]))
        codes = unpack_codes(t["packed"], t["nbits"], count).reshape(t["view_shape"])
        sd[key] = dequantize(
            {"levels": t["levels"], "codes": codes, "dim": t["dim"], "shape": t["shape"]}
        )
    if model is not None:
        model.load_state_dict(sd)
    return sd


# ---- torchao ----------------------------------------------------------------------------------
def affine_grid(levels: Tensor, nbits: int) -> tuple[Tensor, Tensor] | None:
    """``(scale, zero_point)`` with ``(k - 2**(nbits-1) - zero_point) * scale == levels[..., k]``
    bitwise in the levels' dtype for every ``k`` (torchao's affine dequantization of the signed
    code ``k - 2**(nbits-1)``), one pair per row of ``levels`` (shape ``(m,)`` or ``(rows, m)``);
    ``None`` when some row is not such a grid.  ``zero_point`` is a half-integer."""
    Q = levels.reshape(-1, levels.size(-1))
    m = Q.size(-1)
    if m < 2 or m > 2**nbits:
        return None
    k = torch.arange(m, dtype=Q.dtype) - 2 ** (nbits - 1)
    # the offset o = Q_0 / s is a half-integer; estimate s from the span, then try neighbours
    s0 = (Q[:, -1] - Q[:, 0]) / (m - 1)
    if not bool(torch.all(s0 > 0)):
        return None
    offset = torch.round(2 * Q[:, 0] / s0) / 2
    zp = -(2 ** (nbits - 1)) - offset  # (k - 2^(n-1) - zp) = k + offset
    best_scale = torch.full_like(s0, math.nan)
    last = (m - 1 + offset).abs()
    base = torch.where(last > 0, Q[:, -1] / (m - 1 + offset), s0)
    for candidate in _neighbours(base) + _neighbours(s0):
        grid = (k.unsqueeze(0) - zp.unsqueeze(1)) * candidate.unsqueeze(1)
        exact = torch.all(grid == Q, dim=1) & torch.isnan(best_scale)
        best_scale = torch.where(exact, candidate, best_scale)
    if bool(torch.isnan(best_scale).any()):
        return None
    return best_scale, zp


def _neighbours(x: Tensor, width: int = 2) -> list[Tensor]:
    out, up, down = [x], x, x
    for _ in range(width):
        up = torch.nextafter(up, torch.full_like(up, math.inf))
        down = torch.nextafter(down, torch.full_like(down, -math.inf))
        out += [up, down]
    return out


@torch.no_grad()
def torchao_convert(
    model: nn.Module, optimizer: QuantOptimizer, *, prefer_affine: bool = True
) -> dict[str, str]:
    """Replace the quantized weights of ``model``'s ``nn.Linear`` and ``nn.Embedding`` modules by
    torchao quantized tensors (weight-only: activations stay in float), in place.

    The codes are ``nearest(Q, w)`` of the current weights (call ``optimizer.hard_quantize_()``
    first if training stopped before ``anneal_end``).  A weight whose level sets are exact affine
    grids becomes ``IntxUnpackedToInt8Tensor`` (unless ``prefer_affine=False``), any other one
    ``CodebookQuantizedTensor``; the module then computes with the weights ``Q[code]`` exactly.
    Other quantized parameters (conv kernels) are left as they are.  Returns ``{parameter name:
    "intx" | "codebook" | "kept: <why>"}``.  Needs ``torchao`` (``pip install
    "parq-optim[reference]"``); converted models are for inference (no gradients)."""
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torchao.prototype.quantization.codebook_coreml.codebook_quantized_tensor import (
                CodebookQuantizedTensor,
            )
            from torchao.quantization.quantize_.workflows import IntxUnpackedToInt8Tensor
    except ImportError as e:
        raise ImportError(
            f'torchao_convert needs torchao ({e}); install it: pip install "parq-optim[reference]"'
        ) from e
    entries = optimizer.export_quantized(model)
    owner = {
        f"{name}.weight" if name else "weight": module
        for name, module in model.named_modules()
        if isinstance(module, (nn.Linear, nn.Embedding))
    }
    report: dict[str, str] = {}
    for name, entry in entries.items():
        module = owner.get(name)
        if module is None:
            report[name] = "kept: not the weight of an nn.Linear or nn.Embedding"
            continue
        weight = module.weight
        Q, codes = entry["levels"].to(weight.device), entry["codes"].to(weight.device).long()
        m = Q.size(-1)
        nbits = _bits_per_code(m)
        rows, cols = weight.shape
        # one level set per (row block, column block): per tensor, per row, or per block of B
        if entry["dim"] is None:
            block = [rows, cols]
        elif entry["block_size"] is None:
            block = [1, cols]
        else:
            block = [1, int(entry["block_size"])]
        n_blocks = (rows // block[0], cols // block[1])
        codes2d = codes.reshape(rows, cols)
        grid = affine_grid(Q, nbits) if prefer_affine else None
        if grid is not None:
            scale, zp = grid
            new: Tensor = IntxUnpackedToInt8Tensor(
                qdata=(codes2d - 2 ** (nbits - 1)).to(torch.int8),
                scale=scale.reshape(n_blocks).to(weight.dtype),
                zero_point=zp.reshape(n_blocks).to(weight.dtype),
                target_dtype=getattr(torch, f"int{nbits}"),
                block_size=tuple(block),
                dtype=weight.dtype,
                activation_quantization=None,
            )
            report[name] = "intx"
        else:
            table = Q.reshape(-1, m)
            if m < 2**nbits:  # pad to 2**nbits entries (never indexed)
                pad = table[:, -1:].expand(-1, 2**nbits - m)
                table = torch.cat([table, pad], dim=1)
            new = CodebookQuantizedTensor(
                codes=codes2d.to(torch.uint8),
                codebook=table.reshape(*n_blocks, 2**nbits, 1).to(weight.dtype),
                code_dtype=getattr(torch, f"uint{nbits}"),
                block_size=block,
                shape=weight.shape,
                dtype=weight.dtype,
            )
            report[name] = "codebook"
        module.weight = nn.Parameter(new, requires_grad=False)
    return report
