"""Cora ablation of the curriculum knobs the paper leaves open (lambda pace, split ratio), same
protocol as run.py, fewer seeds. Writes results/cora_ablation.json; render.py adds it to the README.

    python packages/curmgae/benchmarks/ablation.py [--seeds 3] [--epochs 30]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch
from curmgae import load_planetoid, split_edges
from curmgae._contract import versions, write_json
from curmgae.pipeline import evaluate, make_config, pretrain
from run import HERE, METRICS, data_root, summarize

VARIANTS = {
    "curmgae (default: additive pace, split 0.5)": ("curmgae", {}),
    "curmgae, lambda_pace=quantile": ("curmgae", {"lambda_pace": "quantile"}),
    "curmgae, split_ratio=0.25": ("curmgae", {"split_ratio": 0.25}),
    "random-mask backbone (s2gae)": ("s2gae", {}),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    ap.add_argument("--epochs", type=int, default=30, help="training epochs (default 30)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    raw = data_root() / "planetoid"
    if not (raw / "Cora" / "raw").is_dir():
        print(f"Cora not found under {raw}; skipping the ablation", file=sys.stderr)
        return 0
    data = load_planetoid(raw, "Cora")
    t0 = time.perf_counter()
    per_seed = {v: {k: [] for k in METRICS} for v in VARIANTS}
    for seed in range(args.seeds):
        split = split_edges(data, seed=234 + seed)
        for name, (method, overrides) in VARIANTS.items():
            cfg = make_config(method, epochs=args.epochs, eval_every=5, **overrides)
            model, _ = pretrain(method, split, cfg, seed=seed)
            res = evaluate(model, split, seed=seed)
            for k in METRICS:
                per_seed[name][k].append(res[k])
            print(
                f"seed {seed} {name}: " + " ".join(f"{k}={res[k]:.4f}" for k in METRICS), flush=True
            )
    summary = summarize(per_seed)
    out = HERE / "results" / "cora_ablation.json"
    write_json(
        out,
        {
            "dataset": "Cora",
            "epochs": args.epochs,
            "seeds": list(range(args.seeds)),
            "command": " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
            "versions": versions("curmgae", "torch-geometric", "scikit-learn"),
            "spread": "std = sample standard deviation over seeds (ddof=1)",
            "per_seed": per_seed,
            "summary": summary,
            "wall_time_s": time.perf_counter() - t0,
        },
    )
    print(f"wrote {out}")
    return subprocess.call([sys.executable, str(HERE / "render.py")])


if __name__ == "__main__":
    raise SystemExit(main())
