"""Time per step of each language-model arm, measured interleaved in one process, for the
equal-wall-time budget of ``benchmarks/lm.py``.

The runs of ``lm.py`` were timed one after another on a shared machine whose load changed, so
their own clocks are not comparable between arms. Here every arm's step is timed in the same
process, one thread, on the same batches, in an order rotated every round:

- a step's *kind* is what it computes: forward+backward passes (1 or 2) and whether it makes a
  Hessian-vector product (Sassha's and Sophia-H's refresh steps); within an arm, steps of one kind
  cost the same whatever the weights (dense operations of fixed shapes);
- each round builds every arm afresh (seed 0, the learning rate ``lm.py`` selected, its schedule)
  and times its first ``--steps`` steps one by one exactly as ``lm.py`` times them (batch
  sampling, the optimizer step with its passes, the scheduler step; no evaluation); the first
  20 steps hold every kind (the Hessian warm-up and the ρ warm-up of the paper recipe included);
- the cost of a kind is the median over all its steps in all ``--rounds`` rounds; the modelled
  training time of a run of ``s`` steps is the sum of the costs of the kinds of its steps (from
  the arm's refresh and ρ schedules, checked against the kinds observed here).

The *equal wall time* ``T`` is the modelled time of default Sassha's ``--budget-steps`` steps;
every other arm gets the largest number of steps whose modelled time is at most ``T`` (its
schedule then spans those steps), the paper recipe's ``--budget-steps`` steps fit in ``T``.
Writes ``results/lm_step_cost.json`` (``--quick``: results/quick/), which ``lm.py`` reads.
Usage: OMP_NUM_THREADS=1 nice -n 15 python benchmarks/lm_step_cost.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from _common import machine
from lm import (
    CONFIGS,
    DATA,
    RESULTS,
    SAM,
    TinyGPT,
    build,
    load_data,
    modelled_seconds,
    paper_lm_schedule,
    sample_batch,
    step_kind,
    train_step,
)
from sassha_optim import __version__

ARMS = ("adamw", "sam-adamw", "sophia-h", "sassha", "sassha-paper")


def measure(data: dict, lrs: dict[str, float], budget_steps: dict[str, int], args) -> dict:
    samples: dict[str, dict[str, list[float]]] = {n: {} for n in lrs}
    names = list(lrs)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            torch.manual_seed(0)
            model = TinyGPT(data["vocab"], args.context, args.width, args.layers, args.heads)
            steps = budget_steps[name]
            opt = build(name, model, lrs[name], 0, steps)
            sched = paper_lm_schedule(opt.base_optimizer if isinstance(opt, SAM) else opt, steps)
            gen = torch.Generator().manual_seed(0)
            for t in range(1, args.steps + 1):
                hvp = int(getattr(opt, "hvp_calls", 0))
                start = time.perf_counter()
                batch = sample_batch(data["train"], args.batch, args.context, gen)
                _, passes = train_step(name, opt, model, batch)
                sched.step()
                seconds = time.perf_counter() - start
                kind = f"{passes} pass{'es' if passes > 1 else ''}" + (
                    " + HVP" if int(getattr(opt, "hvp_calls", 0)) > hvp else ""
                )
                expected = step_kind(name, t, steps)
                if kind != expected:
                    raise RuntimeError(f"{name} step {t}: observed {kind!r}, expected {expected!r}")
                samples[name].setdefault(kind, []).append(seconds)
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA / "tinyshakespeare")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per arm and round")
    parser.add_argument(
        "--budget-steps", type=int, default=None, help="default Sassha's steps (lm.json's)"
    )
    parser.add_argument("--quick", action="store_true", help="2 rounds of 12 steps, tiny batch")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 12:
        parser.error("--rounds must be >= 1 and --steps >= 12 (every kind of step)")
    torch.set_num_threads(1)
    folder = RESULTS / "quick" if args.quick else RESULTS
    lm_json = json.loads((folder / "lm.json").read_text())
    pr = lm_json["protocol"]
    args.batch, args.context = pr["batch_size"], int(pr["batch"].split(" x ")[1].split()[0])
    model_desc = pr["model"]
    args.layers = int(model_desc.split(" layers")[0].split(", ")[-1])
    args.width = int(model_desc.split("width ")[1].split(",")[0])
    args.heads = int(model_desc.split(" heads")[0].split(", ")[-1])
    if args.quick:
        args.rounds, args.steps = 2, 12
    text_path = args.data / "input.txt" if args.data.is_dir() else args.data
    if not text_path.exists():
        print(f"tinyshakespeare not found at {text_path} (pass --data DIR)", file=sys.stderr)
        return 2
    data = load_data(text_path, args.context, 8)[0]
    sel = lm_json["selection"]
    lrs, budget_steps = {}, {}
    for name in ARMS:
        budget = "iters" if name.startswith("sassha") else "grad_evals"
        if "lr" not in sel.get(budget, {}).get(name, {}):
            print(
                f"lm.json: no selected lr for {name} ({budget}); run lm.py first", file=sys.stderr
            )
            return 2
        lrs[name], budget_steps[name] = sel[budget][name]["lr"], sel[budget][name]["steps"]
    start = time.perf_counter()
    samples = measure(data, lrs, budget_steps, args)
    cost = {n: {k: statistics.median(v) for k, v in kinds.items()} for n, kinds in samples.items()}
    total = args.budget_steps or pr["steps"]
    t_equal = modelled_seconds(cost["sassha"], "sassha", total, total)
    steps_at_t = {}
    for name in ARMS:
        if name.startswith("sassha"):
            steps_at_t[name] = total
            continue
        s = 1
        while modelled_seconds(cost[name], name, s + 1, s + 1) <= t_equal:
            s += 1
        steps_at_t[name] = s
    out = {
        "command": ("python benchmarks/lm_step_cost.py " + " ".join(argv or sys.argv[1:])).strip(),
        "sassha_optim": __version__,
        "machine": machine(),
        "wall_time_s": time.perf_counter() - start,
        "protocol": {
            "rounds": args.rounds,
            "steps_per_round": args.steps,
            "order": "arms rotated every round; each arm rebuilt (seed 0) every round",
            "lrs": lrs,
            "threads": 1,
            "configs": list(CONFIGS),
        },
        "seconds_per_step": cost,
        "samples": {n: {k: len(v) for k, v in kinds.items()} for n, kinds in samples.items()},
        "min_max": {
            n: {k: [min(v), max(v)] for k, v in kinds.items()} for n, kinds in samples.items()
        },
        "equal_wall_time_s": t_equal,
        "budget_steps": total,
        "steps_at_equal_wall_time": steps_at_t,
        "modelled_seconds_at_budget": {
            n: modelled_seconds(cost[n], n, steps_at_t[n], steps_at_t[n]) for n in ARMS
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lm_step_cost.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path.relative_to(RESULTS.parent.parent)}")
    for n in ARMS:
        kinds = ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in cost[n].items())
        print(f"{n:13s} {kinds}; steps at equal wall time {steps_at_t[n]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
