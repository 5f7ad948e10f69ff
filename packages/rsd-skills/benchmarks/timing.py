"""Training throughput (environment steps per CPU second, updates included) of each method, interleaved.

For each MLP width, every method trains on the medium point maze in the same process for a whole run of
``--epochs`` epochs, interleaved in blocks of ``--block`` epochs (method A's block, then B's, ..., then A's
next block), so every method meets the same machine load and RSD's generator rounds fall where its
schedule puts them (frequent early, every 30 epochs once the population is full). Each block is timed
with the process's CPU time (one torch thread), which other jobs on a shared machine do not inflate;
the order of the methods alternates from block to block (A B ... then ... B A), so neither always runs
first after the other. The whole interleaved run is repeated ``--repeats`` times with fresh trainers (the
same seed, so every repeat does the same work): per repeat, env steps per CPU second = all steps / all block
CPU seconds and the ratio to METRA of the same repeat (paired). Reported: the median over repeats of the
rates and of the paired ratios, and the 95% t interval of the mean paired ratio.
Writes ``benchmarks/results/timing.json``. Usage: ``python benchmarks/timing.py [--epochs 150]``
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
sys.path.insert(0, str(HERE))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", default="rsd,rsd_uniform,metra,lsd,diayn")
    p.add_argument("--widths", default="64")
    p.add_argument("--epochs", type=int, default=150)
    p.add_argument("--block", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5, help="whole interleaved runs (paired ratios)")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.epochs < 1 or args.block < 1:
        p.error("--repeats, --epochs and --block must be >= 1")
    torch.set_num_threads(1)
    from rsd_skills import __version__

    algos = args.algos.split(",")
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    out: dict = {}
    for width in [int(w) for w in args.widths.split(",")]:
        runs = [one_run(algos, width, args.epochs, args.block) for _ in range(args.repeats)]
        out[str(width)] = summarise(algos, runs)
        print(width, {a: round(r["env_steps_per_second"]) for a, r in out[str(width)].items()})
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
        "repeats": args.repeats,
        "widths": out,
    }
    (HERE / "results" / "timing.json").write_text(json.dumps(payload, indent=1) + "\n")
    return 0


def one_run(algos: list[str], width: int, epochs: int, block: int) -> dict[str, dict]:
    """One interleaved run of every method (fresh trainers, seed 0); CPU and wall seconds per block."""
    from rsd_skills import Config, SkillTrainer, make_env

    trainers = {
        a: SkillTrainer(a, make_env("point_maze", maze="medium"), Config(hidden=width), seed=0)
        for a in algos
    }
    cpu: dict[str, list[float]] = {a: [] for a in algos}
    wall: dict[str, list[float]] = {a: [] for a in algos}
    done = 0
    while done < epochs:
        size = min(block, epochs - done)
        order = algos if (done // block) % 2 == 0 else algos[::-1]
        for a in order:
            c0, w0 = time.process_time(), time.perf_counter()
            trainers[a].train(size)
            cpu[a].append(time.process_time() - c0)
            wall[a].append(time.perf_counter() - w0)
        done += size
    return {
        a: {
            "env_steps": tr.env_steps,
            "cpu_seconds": sum(cpu[a]),
            "wall_seconds": sum(wall[a]),
            "block_cpu_seconds": cpu[a],
            "generator_rounds": getattr(tr.method, "rounds", None),
        }
        for a, tr in trainers.items()
    }


def t_interval(values: list[float]) -> list[float] | None:
    """95% t interval of the mean (None for fewer than two values)."""
    if len(values) < 2:
        return None
    from run import T975  # the quantile table of the benchmark script beside this one

    mean, sd = statistics.fmean(values), statistics.stdev(values)
    half = T975[min(len(values) - 1, 30) - 1] * sd / len(values) ** 0.5
    return [mean - half, mean + half]


def summarise(algos: list[str], runs: list[dict[str, dict]]) -> dict[str, dict]:
    """Per method: medians over repeats, and the paired ratios to METRA of each repeat."""
    out = {}
    for a in algos:
        rates = [r[a]["env_steps"] / r[a]["cpu_seconds"] for r in runs]
        ratios = (
            [
                rate / (r["metra"]["env_steps"] / r["metra"]["cpu_seconds"])
                for rate, r in zip(rates, runs)
            ]
            if "metra" in algos
            else None
        )
        blocks = [r[a]["block_cpu_seconds"] for r in runs]
        out[a] = {
            "env_steps_per_second": statistics.median(rates),
            "ratio_to_metra": statistics.median(ratios) if ratios else None,
            "env_steps": runs[0][a]["env_steps"],
            "cpu_seconds": statistics.median(r[a]["cpu_seconds"] for r in runs),
            "wall_seconds": statistics.median(r[a]["wall_seconds"] for r in runs),
            "block_cpu_seconds": [statistics.median(b) for b in zip(*blocks)],
            "generator_rounds": runs[0][a]["generator_rounds"],
            "env_steps_per_second_repeats": rates,
            "ratio_to_metra_repeats": ratios,
            "ratio_to_metra_mean": statistics.fmean(ratios) if ratios else None,
            "ratio_to_metra_ci95": t_interval(ratios) if ratios else None,
        }
    return out


if __name__ == "__main__":
    sys.exit(main())
