"""Choose the default curriculum pacing on VALIDATION edges only. A small grid of the lambda rules
(the additive rule of 0.2.0, RCL's inverse schedule, the quantile target with linear, root and
geometric pacing, a quantile target that admits every edge with a uniform sample of the curriculum
set, a constant masked count, and S-steps every 5 epochs), a few seeds on each dataset given, the
best validation AUC of each run (the model-selection criterion of ``fit``). Test edges and node labels
are never read. The chosen rule has the highest mean validation AUC averaged over the datasets.
Writes results/pacing_selection.json; render.py adds the table to the README.

    python packages/curmgae/benchmarks/select_pacing.py --dataset synthetic \\
        --dataset ../shared/data/planetoid/Cora [--seeds 2] [--epochs 200]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from curmgae import split_edges
from curmgae._contract import versions, write_json
from curmgae.pipeline import make_config, pretrain
from run import HERE, command_line, load_benchmark_dataset, machine

#: name -> config overrides of the curmgae method
GRID: dict[str, dict[str, Any]] = {
    "additive (0.2.0)": {"lambda_pace": "additive"},
    "rcl_inverse": {"lambda_pace": "rcl_inverse"},
    "quantile, linear": {"lambda_pace": "quantile", "pacing": "linear"},
    "quantile, root": {"lambda_pace": "quantile", "pacing": "root"},
    "quantile, geometric": {"lambda_pace": "quantile", "pacing": "geometric"},
    "quantile, linear, to every edge, random ties": {
        "lambda_pace": "quantile",
        "pacing": "linear",
        "pace_end": 1.0,
        "tie_break": "random",
    },
    "quantile, linear, constant masked count": {
        "lambda_pace": "quantile",
        "pacing": "linear",
        "min_mask_ratio": 0.7,
    },
    "quantile, linear, update_every 5": {
        "lambda_pace": "quantile",
        "pacing": "linear",
        "update_every": 5,
    },
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dataset",
        action="append",
        default=None,
        help="'synthetic' or a Planetoid folder; repeat for several (default: synthetic)",
    )
    ap.add_argument("--seeds", type=int, default=2, help="number of seeds (default 2)")
    ap.add_argument("--epochs", type=int, default=None, help="training epochs (default: 200)")
    ap.add_argument("--out", default="pacing_selection.json", help="file name in results/")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    overrides = {"epochs": args.epochs} if args.epochs else {}
    t0 = time.perf_counter()
    per_seed: dict[str, dict[str, list[float]]] = {}
    for spec in args.dataset or ["synthetic"]:
        data, name = load_benchmark_dataset(spec)
        per_seed[name] = {v: [] for v in GRID}
        for seed in range(args.seeds):
            split = split_edges(data, seed=234 + seed)
            for variant, grid in GRID.items():
                cfg = make_config("curmgae", **{**overrides, **grid})
                _, hist = pretrain("curmgae", split, cfg, seed=seed)
                best = max(a for _, a in hist.val_auc)
                per_seed[name][variant].append(best)
                print(f"{name} seed {seed} {variant}: best val AUC {best:.4f}", flush=True)
    summary = {
        ds: {
            v: {
                "mean": statistics.fmean(x),
                "std": statistics.stdev(x) if len(x) > 1 else None,
                "n": len(x),
            }
            for v, x in vals.items()
        }
        for ds, vals in per_seed.items()
    }
    score = {v: statistics.fmean(summary[ds][v]["mean"] for ds in summary) for v in GRID}
    chosen = max(score, key=lambda v: score[v])
    out = HERE / "results" / args.out
    write_json(
        out,
        {
            "datasets": list(per_seed),
            "criterion": "best validation AUC (held-out validation edges) of each run, mean over "
            "seeds, then mean over the datasets; test edges and node labels are not used",
            "epochs": make_config("curmgae", **overrides).epochs,
            "seeds": list(range(args.seeds)),
            "grid": GRID,
            "command": command_line(),
            "machine": machine(1),
            "versions": versions("curmgae", "torch-geometric", "scikit-learn"),
            "spread": "std = sample standard deviation over seeds (ddof=1)",
            "per_seed_val_auc": per_seed,
            "summary": summary,
            "score": score,
            "chosen": chosen,
            "chosen_overrides": GRID[chosen],
            "wall_time_s": time.perf_counter() - t0,
        },
    )
    print(f"chosen: {chosen}; wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
