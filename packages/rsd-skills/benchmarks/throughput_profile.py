"""Where each method's training CPU time goes: the components of ``benchmarks/timing.py``'s run, by method.

The same workload as ``timing.py`` (point maze medium, ``--epochs`` epochs, fresh trainers with seed 0,
one torch thread), the methods interleaved epoch by epoch with the order alternating; each component of a
training epoch is timed with the process's CPU time by wrapping the trainer's calls:

* ``skills``: the method's choice of this epoch's skills (RSD: its generator rounds and mixture);
* ``rollouts``: the lockstep episodes;
* ``replay``: minibatch sampling;
* ``phi_step``: the representation (and λ) step, gradient clip included;
* ``reward``: the intrinsic reward under the updated φ;
* ``sac_step``: the SAC step, gradient clip included;
* ``clip_norms``: the global gradient norms of the clip (inside ``phi_step`` and ``sac_step``; RSD clips
  at 3, METRA and LSD do not clip);
* ``other``: the rest of the epoch (bookkeeping, logs).

The wrappers add a few microseconds per call to every method alike, so the totals run slightly above
``timing.py``'s. Writes ``benchmarks/results/throughput_profile.json``.
Usage: ``python benchmarks/throughput_profile.py [--epochs 60]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
COMPONENTS = ("skills", "rollouts", "replay", "phi_step", "reward", "sac_step", "clip_norms")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", default="rsd,rsd_uniform,metra")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--epochs", type=int, default=60)
    args = p.parse_args(argv)
    if args.epochs < 1 or args.width < 1:
        p.error("--epochs and --width must be >= 1")
    torch.set_num_threads(1)
    from rsd_skills import Config, SkillTrainer, __version__, make_env
    from rsd_skills import sac as sac_module

    algos = args.algos.split(",")
    spent: dict[str, dict[str, float]] = {a: defaultdict(float) for a in algos}
    current = [algos[0]]

    def timed(fn: Callable[..., Any], key: str) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[current[0]][key] += time.process_time() - t0

        return wrapper

    trainers = {
        a: SkillTrainer(a, make_env("point_maze", maze="medium"), Config(hidden=args.width), seed=0)
        for a in algos
    }
    for tr in trainers.values():
        tr.method.train_skills = timed(tr.method.train_skills, "skills")  # type: ignore[method-assign]
        tr.collect = timed(tr.collect, "rollouts")  # type: ignore[method-assign]
        tr.buffer.sample = timed(tr.buffer.sample, "replay")  # type: ignore[method-assign]
        tr.method.update = timed(tr.method.update, "phi_step")  # type: ignore[method-assign]
        tr.method.reward = timed(tr.method.reward, "reward")  # type: ignore[method-assign]
        tr.agent.update = timed(tr.agent.update, "sac_step")  # type: ignore[method-assign]
    clip_grads = sac_module.clip_grads
    sac_module.clip_grads = timed(clip_grads, "clip_norms")  # clip_and_step looks it up here
    total = dict.fromkeys(algos, 0.0)
    try:
        for epoch in range(args.epochs):
            for a in algos if epoch % 2 == 0 else algos[::-1]:
                current[0] = a
                t0 = time.process_time()
                trainers[a].train(1)
                total[a] += time.process_time() - t0
    finally:
        sac_module.clip_grads = clip_grads
    components = {}
    for a in algos:
        parts = {k: spent[a].get(k, 0.0) for k in COMPONENTS}
        top = sum(v for k, v in parts.items() if k != "clip_norms")
        components[a] = {**parts, "other": total[a] - top, "total": total[a]}
    payload = {
        "command": "python benchmarks/throughput_profile.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "package_version": __version__,
        "env": "point_maze medium (T=100, 8 episodes and 50 gradient steps per epoch, minibatch 256)",
        "width": args.width,
        "epochs": args.epochs,
        "env_steps": {a: tr.env_steps for a, tr in trainers.items()},
        "generator_rounds": {a: getattr(tr.method, "rounds", None) for a, tr in trainers.items()},
        "cpu_seconds": components,
    }
    out = HERE / "results" / "throughput_profile.json"
    out.write_text(json.dumps(payload, indent=1) + "\n")
    print({a: {k: round(v, 2) for k, v in c.items()} for a, c in components.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
