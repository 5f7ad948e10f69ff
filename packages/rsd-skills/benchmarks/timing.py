"""Training throughput (environment steps per CPU second, updates included) of each method, interleaved.

For each MLP width, every method trains on the medium point maze in the same process for a whole run of
``--epochs`` epochs, interleaved in blocks of ``--block`` epochs (method A's block, then B's, ..., then A's
next block), so every method meets the same machine load and RSD's generator rounds fall where its
schedule puts them (frequent early, every 30 epochs once the population is full). Each block is timed
with the process's CPU time (one torch thread), which other jobs on a shared machine do not inflate;
env steps per CPU second = all steps / all block CPU seconds; ratios are to METRA, measured alongside.
Writes ``benchmarks/results/timing.json``. Usage: ``python benchmarks/timing.py [--epochs 150]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", default="rsd,rsd_uniform,metra,lsd,diayn")
    p.add_argument("--widths", default="64")
    p.add_argument("--epochs", type=int, default=150)
    p.add_argument("--block", type=int, default=10)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    from rsd_skills import Config, SkillTrainer, __version__, make_env

    algos = args.algos.split(",")
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    out: dict = {}
    for width in [int(w) for w in args.widths.split(",")]:
        trainers = {
            a: SkillTrainer(a, make_env("point_maze", maze="medium"), Config(hidden=width), seed=0)
            for a in algos
        }
        cpu: dict[str, list[float]] = {a: [] for a in algos}
        wall: dict[str, list[float]] = {a: [] for a in algos}
        done = 0
        while done < args.epochs:
            block = min(args.block, args.epochs - done)
            for a, tr in trainers.items():
                c0, w0 = time.process_time(), time.perf_counter()
                tr.train(block)
                cpu[a].append(time.process_time() - c0)
                wall[a].append(time.perf_counter() - w0)
            done += block
        steps = {a: tr.env_steps for a, tr in trainers.items()}
        rate = {a: steps[a] / sum(cpu[a]) for a in algos}
        out[str(width)] = {
            a: {
                "env_steps_per_second": rate[a],
                "ratio_to_metra": rate[a] / rate["metra"] if "metra" in rate else None,
                "env_steps": steps[a],
                "cpu_seconds": sum(cpu[a]),
                "wall_seconds": sum(wall[a]),
                "block_cpu_seconds": cpu[a],
                "generator_rounds": getattr(trainers[a].method, "rounds", None),
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
        "epochs": args.epochs,
        "block_epochs": args.block,
        "widths": out,
    }
    (HERE / "results" / "timing.json").write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
