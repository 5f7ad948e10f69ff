"""Writing and reading a quantized model: per tensor (or per row) a level table ``Q`` plus integer
codes packed at ``ceil(log2 |Q|)`` bits each; everything else (biases, norms, buffers) in float.

``load_quantized`` rebuilds the float ``state_dict`` (``w = Q[code]``), so a model saved after
training loads back with bit-identical weights.
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

__all__ = ["dequantize", "load_quantized", "pack_codes", "save_quantized", "unpack_codes"]

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
