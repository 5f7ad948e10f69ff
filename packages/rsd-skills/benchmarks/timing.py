"""Training throughput (environment steps per second, updates included) of each method, interleaved.

For each MLP width, every method trains on the medium point maze in the same process: two warm-up
epochs, then ``--repeats`` interleaved blocks of ``--block`` epochs per method (RSD's generator rounds
fall inside the blocks). The median block gives env steps/s; ratios are to METRA, measured alongside.
Writes ``benchmarks/results/timing.json``. Usage: ``python benchmarks/timing.py [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", default="rsd,rsd_uniform,metra,lsd,diayn")
    p.add_argument("--widths", default="64,256")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--block", type=int, default=6)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    from rsd_skills import Config, SkillTrainer, __version__, make_env

    algos = args.algos.split(",")
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    out: dict = {}
    for width in [int(w) for w in args.widths.split(",")]:
        trainers = {
            a: SkillTrainer(
                a,
                make_env("point_maze", maze="medium"),
                Config(hidden=width, min_buffer=800),
                seed=0,
            )
            for a in algos
        }
        for tr in trainers.values():
            tr.train(2)
        blocks: dict[str, list[float]] = {a: [] for a in algos}
        for _ in range(args.repeats):
            for a, tr in trainers.items():
                start = time.perf_counter()
                tr.train(args.block)
                blocks[a].append(time.perf_counter() - start)
        steps = args.block * trainers[algos[0]].cfg.n_traj * trainers[algos[0]].horizon
        rate = {a: steps / statistics.median(b) for a, b in blocks.items()}
        out[str(width)] = {
            a: {
                "env_steps_per_second": rate[a],
                "ratio_to_metra": rate[a] / rate["metra"] if "metra" in rate else None,
                "block_seconds": blocks[a],
            }
            for a in algos
        }
        print(width, {a: round(r) for a, r in rate.items()}, flush=True)
    payload = {
        "command": "python benchmarks/timing.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "package_version": __version__,
        "machine": {
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": 1,
            "python": platform.python_version(),
            "load_average_at_start": load,
        },
        "env": "point_maze medium (T=100, 8 episodes and 50 gradient steps per epoch, minibatch 256)",
        "block_epochs": args.block,
        "repeats": args.repeats,
        "widths": out,
    }
    (HERE / "results" / "timing.json").write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
