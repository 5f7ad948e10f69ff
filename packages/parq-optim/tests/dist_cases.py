"""Scenarios of the distributed tests: the same QAT run under DistributedDataParallel, under FSDP2
(``fully_shard``, DTensor parameters) with 2 gloo processes, and in one process on the whole
batch. Imported by the spawned workers, so it imports nothing from pytest."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from parq_optim import (
    LSBQuantizer,
    ProxBinaryRelax,
    ProxHardQuant,
    ProxPARQ,
    Quantizer,
    QuantOptimizer,
    UnifQuantizer,
)
from torch import nn

STEPS = 12
BATCH = 16  # the global batch; each of the 2 ranks takes half
ANNEAL_END = 8  # the last 4 steps are hard quantization


class SignMeanQuantizer(Quantizer):
    """A user quantizer without sharded statistics: levels ``±mean|p|`` (the optimizer fits it to
    the gathered whole tensor under FSDP2)."""

    def get_quant_size(self, b: int) -> int:
        return 2

    def _quantize(self, p, b, dim):
        v = p.abs().mean(dim=dim, keepdim=dim is not None)
        Q = torch.cat([-v.reshape(-1, 1), v.reshape(-1, 1)], dim=1)
        Q = Q.reshape(-1) if dim is None else Q
        q = torch.where(p >= 0, v, -v)
        return q, Q


SCENARIOS: dict[str, dict] = {
    # replicated parameters: every rank applies the same map to the same tensors
    "ddp/sgd/parq/lsbq/per-tensor": {"wrap": "ddp", "opt": "sgd", "prox": "parq"},
    # FSDP2: per-tensor levels from global statistics (all_reduce of mean|p| per greedy step)
    "fsdp/sgd/parq/lsbq/per-tensor": {"wrap": "fsdp", "opt": "sgd", "prox": "parq"},
    # per-channel uniform levels (local rows), AdamW, STE
    "fsdp/adamw/ste/unif/per-channel": {
        "wrap": "fsdp",
        "opt": "adamw",
        "prox": "ste",
        "quantizer": "unif",
        "per_channel": True,
    },
    # exact least-squares LSBQ per tensor: the level search over the gathered |p| of every shard
    "fsdp/sgd/binaryrelax/lsbq-optimal/per-tensor": {
        "wrap": "fsdp",
        "opt": "sgd",
        "prox": "binaryrelax",
        "quantizer": "lsbq-optimal",
        "center": True,
    },
    # a user quantizer without sharded statistics: fitted to the gathered whole tensor
    "fsdp/sgd/parq/custom/per-tensor": {
        "wrap": "fsdp",
        "opt": "sgd",
        "prox": "parq",
        "quantizer": "custom",
        "bits": 1,
    },
    # blocks of 4 (3-bit uniform) on the first layer, per-row greedy LSBQ on the others
    "fsdp/sgd/parq/blocks/per-channel": {
        "wrap": "fsdp",
        "opt": "sgd",
        "prox": "parq",
        "quantizer": "unif",
        "per_channel": True,
        "blocks": True,
    },
}


def make_model() -> nn.Module:
    torch.manual_seed(0)
    # 7 and 3 rows split unevenly over 2 ranks; the last layer's single row leaves rank 1 empty
    return nn.Sequential(nn.Linear(8, 7), nn.Tanh(), nn.Linear(7, 3), nn.Tanh(), nn.Linear(3, 1))


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [
        (torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 1, generator=g))
        for _ in range(STEPS)
    ]


def build(model: nn.Module, spec: dict) -> QuantOptimizer:
    weights = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    biases = [m.bias for m in model.modules() if isinstance(m, nn.Linear)]
    if spec.get("blocks"):
        groups = [
            {"params": weights[:1], "quant_bits": 3, "quant_block_size": 4},
            {"params": weights[1:], "quant_bits": 1},
            {"params": biases, "weight_decay": 0.0},
        ]
        qmap: dict[int, Quantizer] | None = {1: LSBQuantizer()}
    else:
        bits = spec.get("bits", 2)
        groups = [{"params": weights, "quant_bits": bits}, {"params": biases, "weight_decay": 0.0}]
        qmap = None
    if spec["opt"] == "sgd":
        base: torch.optim.Optimizer = torch.optim.SGD(
            groups, lr=0.1, momentum=0.9, weight_decay=1e-3
        )
    else:
        base = torch.optim.AdamW(groups, lr=0.02, weight_decay=1e-2)
    center = spec.get("center", False)
    quantizer = {
        "lsbq": LSBQuantizer(center=center),
        "lsbq-optimal": LSBQuantizer(center=center, optimal=True),
        "unif": UnifQuantizer(center=center),
        "custom": SignMeanQuantizer(),
    }[spec.get("quantizer", "lsbq")]
    prox = {
        "parq": ProxPARQ(0, ANNEAL_END, steepness=5),
        "ste": ProxHardQuant(),
        "binaryrelax": ProxBinaryRelax(0, ANNEAL_END),
    }[spec["prox"]]
    return QuantOptimizer(
        base,
        quantizer,
        prox,
        quant_period=3,
        quant_per_channel=spec.get("per_channel", False),
        group_quantizer_map=qmap,
    )


def full(t: torch.Tensor) -> torch.Tensor:
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().clone()


def run(spec: dict, rank: int = 0, world: int = 1) -> dict:
    """One run; with ``world == 2`` inside an initialised gloo group, wrapped as ``spec['wrap']``.
    Returns whole tensors (gathered) of every step."""
    model = make_model()
    params = model
    if world > 1 and spec["wrap"] == "ddp":
        params = model
        model = nn.parallel.DistributedDataParallel(model)
    elif world > 1:
        from torch.distributed.fsdp import fully_shard

        fully_shard(model)
        params = model
    opt = build(params, spec)
    quantized = [p for g in opt.regularized_param_groups() for p in g["params"]]
    trajectory = []
    for x, y in batches():
        n = len(x) // world
        xb, yb = x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]
        opt.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
        trajectory.append(
            {
                "w": [full(p) for p in quantized],
                "latent": [full(opt.state[p]["latent"]) for p in quantized],
            }
        )
    module = model.module if hasattr(model, "module") else model
    export = opt.export_quantized(module)
    return {
        "trajectory": trajectory,
        "export": {k: {"codes": v["codes"], "levels": v["levels"]} for k, v in export.items()},
        "quantized_fraction": opt.quantized_fraction(),
        "num_steps": opt.num_steps,
        "cumu_lr": [g["cumu_lr"] for g in opt.regularized_param_groups()],
        "placements": [str(getattr(p, "placements", "plain")) for p in quantized],
    }


def unsupported_layout() -> str:
    """The error for a DTensor parameter sharded along its columns (rows split over ranks)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (2,))
    w = nn.Parameter(distribute_tensor(torch.randn(4, 6), mesh, [Shard(1)]))
    base = torch.optim.SGD([{"params": [w], "quant_bits": 2}], lr=0.1)
    try:
        QuantOptimizer(base, LSBQuantizer(), ProxHardQuant())
    except NotImplementedError as e:
        return str(e)
    return "no error"


def worker(rank: int, world: int, store: str, out: str) -> None:
    """Entry point of each spawned process: every scenario, results saved per rank."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        results = {name: run(spec, rank, world) for name, spec in SCENARIOS.items()}
        results["unsupported_layout"] = unsupported_layout()
        torch.save(results, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
