"""Ablation of the curriculum on any Planetoid-format folder or the synthetic graph, same protocol as
run.py, fewer seeds: the package default against the 0.2.0 rule, the paced masked count alone
(split_ratio 0: as many masked edges as the curriculum says, chosen at random), a constant masked
count with the curriculum choosing only the composition, and the random-mask backbone. Writes
results/ablation_<dataset>.json; render.py adds it to the README.

    python packages/curmgae/benchmarks/ablation.py --dataset ../shared/data/planetoid/Cora [--seeds 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

import torch
from curmgae import split_edges
from curmgae._contract import versions, write_json
from curmgae.pipeline import evaluate, make_config, pretrain
from run import HERE, METRICS, command_line, load_benchmark_dataset, machine, summarize

#: the curriculum of 0.2.0: additive pace calibrated once, the easiest edges of C_t first
OLD_CURRICULUM: dict[str, Any] = {
    "lambda_pace": "additive",
    "pacing": "linear",
    "pace_end": None,
    "tie_break": "residual",
    "min_mask_ratio": 0.05,
    "update_every": 1,
}
#: variant -> (method, config overrides)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "Cur-MGAE, package default": ("curmgae", {}),
    "Cur-MGAE, additive pace (0.2.0 default)": ("curmgae", OLD_CURRICULUM),
    "paced masked count only (split_ratio 0: random edges)": ("curmgae", {"split_ratio": 0.0}),
    "constant masked count 0.7 (curriculum sets the composition only)": (
        "curmgae",
        {"min_mask_ratio": 0.7},
    ),
    "random-mask backbone (s2gae)": ("s2gae", {}),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="synthetic", help="'synthetic' or a Planetoid folder")
    ap.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    ap.add_argument("--epochs", type=int, default=None, help="training epochs (default: 200)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    overrides = {"epochs": args.epochs} if args.epochs else {}
    data, name = load_benchmark_dataset(args.dataset)
    t0 = time.perf_counter()
    per_seed: dict[str, dict[str, list[float]]] = {v: {k: [] for k in METRICS} for v in VARIANTS}
    traces: dict[str, list[dict[str, Any]]] = {}
    for seed in range(args.seeds):
        split = split_edges(data, seed=234 + seed)
        for variant, (method, grid) in VARIANTS.items():
            cfg = make_config(method, **{**overrides, **grid})
            model, hist = pretrain(method, split, cfg, seed=seed)
            res = evaluate(model, split, seed=seed)
            if seed == 0 and hist.trace:
                traces[variant] = hist.trace
            for k in METRICS:
                per_seed[variant][k].append(res[k])
            print(
                f"seed {seed} {variant}: " + " ".join(f"{k}={res[k]:.4f}" for k in METRICS),
                flush=True,
            )
    out = HERE / "results" / f"ablation_{name.lower()}.json"
    write_json(
        out,
        {
            "dataset": name,
            "epochs": make_config("curmgae", **overrides).epochs,
            "seeds": list(range(args.seeds)),
            "variants": {v: {"method": m, "overrides": o} for v, (m, o) in VARIANTS.items()},
            "default_config": make_config("curmgae", **overrides).to_dict(),
            "command": command_line(),
            "machine": machine(1),
            "versions": versions("curmgae", "torch-geometric", "scikit-learn"),
            "spread": "std = sample standard deviation over seeds (ddof=1)",
            "per_seed": per_seed,
            "summary": summarize(per_seed),
            "curriculum_traces_seed0": traces,
            "wall_time_s": time.perf_counter() - t0,
        },
    )
    print(f"wrote {out}")
    return subprocess.call([sys.executable, str(HERE / "render.py")])


if __name__ == "__main__":
    raise SystemExit(main())
