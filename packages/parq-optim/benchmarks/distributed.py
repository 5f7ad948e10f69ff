"""Sharded vs unsharded: the scenarios of tests/dist_cases.py (DDP and FSDP2 with 2 gloo
processes on CPU, and one process on the whole batch), with the largest differences measured.

Writes benchmarks/results/distributed.json, then renders the README tables.
Usage: python benchmarks/distributed.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import dist_cases  # noqa: E402
from _common import machine  # noqa: E402


def max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> tuple[float, float]:
    """Largest absolute and relative (to the largest magnitude) difference over the tensors."""
    abs_d = max((x - y).abs().max().item() for x, y in zip(a, b))
    scale = max(y.abs().max().item() for y in b)
    return abs_d, abs_d / scale


def main() -> int:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(dist_cases.worker, args=(2, f"{tmp}/store", tmp), nprocs=2, join=True)
        sharded = torch.load(Path(tmp) / "rank0.pt", weights_only=False)
    rows = []
    for name, spec in dist_cases.SCENARIOS.items():
        ref = dist_cases.run(spec)
        got = sharded[name]
        w = [max_diff(a["w"], b["w"]) for a, b in zip(got["trajectory"], ref["trajectory"])]
        u = [
            max_diff(a["latent"], b["latent"]) for a, b in zip(got["trajectory"], ref["trajectory"])
        ]
        codes_equal = all(
            torch.equal(got["export"][k]["codes"], ref["export"][k]["codes"]) for k in ref["export"]
        )
        levels = max_diff(
            [got["export"][k]["levels"] for k in ref["export"]],
            [ref["export"][k]["levels"] for k in ref["export"]],
        )
        rows.append(
            {
                "scenario": name,
                "steps": len(w),
                "max_abs_diff_w": max(d[0] for d in w),
                "max_rel_diff_w": max(d[1] for d in w),
                "max_abs_diff_latent": max(d[0] for d in u),
                "max_abs_diff_levels": levels[0],
                "final_codes_equal": codes_equal,
                "quantized_fraction": [got["quantized_fraction"], ref["quantized_fraction"]],
            }
        )
        print(f"{name:<48} max|dw| {rows[-1]['max_abs_diff_w']:.2e} codes equal {codes_equal}")
    out = {
        "what": "2 gloo processes (DDP or FSDP2 fully_shard), each on half of a 16-sample batch, "
        f"vs one process on the whole batch; float32; {dist_cases.STEPS} steps, anneal window "
        f"[0, {dist_cases.ANNEAL_END}); model 8-7-3-1 (7, 3 and 1 rows over 2 ranks: uneven and "
        "empty shards)",
        "rows": rows,
        "command": "python benchmarks/distributed.py",
        "machine": machine(),
        "wall_time_s": time.perf_counter() - t0,
    }
    (HERE / "results" / "distributed.json").write_text(json.dumps(out, indent=1))
    subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
