"""Benchmark on any Planetoid-format folder or the synthetic graph: Cur-MGAE vs the random-mask backbone
(S2GAE), MaskGAE-style path masking on the same backbone, PyG's GAE and trivial baselines (Adamic-Adar
and raw-feature cosine for links; raw features and the majority class for nodes). Link prediction
(85/5/10 split, AUC/AP) and node classification (SVM 5-fold CV and linear probe), several seeds, epoch
time as a ratio to the random-mask backbone in the same process. Every trained method uses the package
defaults, which are S2GAE's small-graph link-prediction protocol (200 epochs, Adam lr 0.01, one
full-batch step per epoch, decoder 2 x 256, mask ratio 0.7, validation AUC every epoch, patience 50).
Writes results/<dataset>.json and the diagnostic plot results/<dataset>_curriculum.png (seed 0), then
renders the README tables.

    python packages/curmgae/benchmarks/run.py --dataset ../shared/data/planetoid/Cora   # 5 seeds
    python packages/curmgae/benchmarks/run.py --dataset synthetic
    python packages/curmgae/benchmarks/run.py --dataset synthetic --quick    # 2 seeds, 5 epochs (smoke)
    python packages/curmgae/benchmarks/run.py --dataset ../shared/data/planetoid/Cora --fixed-split \
        --methods s2gae       # S2GAE's convention: 5 runs on one split (seed 234)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from curmgae import load_planetoid, make_curriculum_sbm, split_edges
from curmgae._contract import versions, write_json
from curmgae.evaluation import (
    adamic_adar,
    feature_cosine,
    linear_probe,
    link_metrics,
    majority_accuracy,
    majority_cv,
    svm_cv,
)
from curmgae.pipeline import evaluate, make_config, node_masks, plot_curriculum, pretrain
from torch_geometric.data import Data

HERE = Path(__file__).resolve().parent
METHODS = ("curmgae", "s2gae", "path", "gae")
TRIVIAL = ("adamic_adar", "raw_features", "majority")
BASELINE = "s2gae"
METRICS = ("lp_auc", "lp_ap", "nc_svm_acc", "nc_probe_acc")
TIMES = ("epoch_s", "epoch_cpu_s", "time_ratio", "wall_time_ratio", "best_epoch", "stopped_epoch")
#: S2GAE README numbers (qiaoyu-tan/S2GAE, their protocol); Cur-MGAE's own table was not available.
PAPER = {"s2gae": {"lp_auc": 0.9505, "lp_auc_std": 0.0076, "nc_svm_acc": 0.8615, "nc_std": 0.0025}}
PLANETOID_LABELS = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}


def summarize(per_seed: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, dict]]:
    """Mean, sample standard deviation (ddof=1; None for one seed), median and count per metric."""
    return {
        m: {
            k: {
                "mean": statistics.fmean(v),
                "std": statistics.stdev(v) if len(v) > 1 else None,
                "median": statistics.median(v),
                "n": len(v),
            }
            for k, v in vals.items()
            if v
        }
        for m, vals in per_seed.items()
    }


def load_benchmark_dataset(spec: str) -> tuple[Data, str]:
    """``--dataset``: ``synthetic`` (the quick planted-difficulty SBM: 1,000 nodes, 5,000 edges) or a
    Planetoid-format folder (``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`` in the folder or
    in its ``raw/``), e.g. ``../shared/data/planetoid/Cora``. Returns the graph and its name."""
    if spec == "synthetic":
        return make_curriculum_sbm(quick=True, seed=0), "synthetic"
    folder = Path(spec)
    if not folder.is_dir():
        raise SystemExit(f"--dataset {spec}: not 'synthetic' and not a folder")
    for raw in (folder / "raw", folder):
        hits = sorted(raw.glob("ind.*.graph"))
        if hits:
            name = hits[0].name.split(".")[1]
            return load_planetoid(folder, name), PLANETOID_LABELS.get(name, name)
    raise SystemExit(f"--dataset {spec}: no Planetoid raw files (ind.<name>.graph) found")


def command_line() -> str:
    """The command as run from the repository root, with path arguments made relative to it (no path
    of the machine is stored)."""
    repo = HERE.parents[2]
    args = []
    for a in sys.argv[1:]:
        p = Path(a)
        if not a.startswith("-") and (p.exists() or p.is_absolute()):
            a = os.path.relpath(p.resolve(), repo)
        args.append(a)
    return " ".join(["python", f"packages/curmgae/benchmarks/{Path(sys.argv[0]).name}", *args])


def machine(threads: int) -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "torch_threads": threads,
        "python": platform.python_version(),
        "processor": platform.processor(),
    }


def trivial_baselines(split: Data, seed: int) -> dict[str, dict[str, float]]:
    """Scores that need no training: Adamic-Adar on the training graph (links), raw features (cosine
    for links; SVM and linear probe for nodes), the majority class (nodes)."""
    pairs = torch.cat([split.test_pos, split.test_neg], 1)
    n_pos = split.test_pos.size(1)
    aa = adamic_adar(split.edge_index, split.num_nodes, pairs)
    cos = feature_cosine(split.x, pairs)
    lp_aa = link_metrics(aa[:n_pos], aa[n_pos:])
    lp_cos = link_metrics(cos[:n_pos], cos[n_pos:])
    tr, va, te = node_masks(split, seed)
    return {
        "adamic_adar": {"lp_auc": lp_aa["auc"], "lp_ap": lp_aa["ap"]},
        "raw_features": {
            "lp_auc": lp_cos["auc"],
            "lp_ap": lp_cos["ap"],
            "nc_svm_acc": svm_cv(split.x, split.y)["acc"],
            "nc_probe_acc": linear_probe(split.x, split.y, tr, va, te, seed=seed)["acc"],
        },
        "majority": {
            "nc_svm_acc": majority_cv(split.y),
            "nc_probe_acc": majority_accuracy(split.y, tr, te),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dataset",
        default="synthetic",
        help="'synthetic' (default) or a Planetoid-format folder, e.g. ../shared/data/planetoid/Cora",
    )
    ap.add_argument("--quick", action="store_true", help="2 seeds, 5 epochs; does not touch README")
    ap.add_argument(
        "--epochs", type=int, default=None, help="training epochs (default: 200; quick 5)"
    )
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 5; quick 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument(
        "--fixed-split",
        action="store_true",
        help="every seed on the one split of seed 234 (S2GAE's convention: runs differ by training "
        "seed only); default: split seed 234 + seed, so the spread covers the split too",
    )
    ap.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated trained methods (default: {','.join(METHODS)}; s2gae is needed)",
    )
    args = ap.parse_args(argv)
    methods = tuple(m for m in args.methods.split(",") if m)
    if BASELINE not in methods or any(m not in METHODS for m in methods):
        raise SystemExit(f"--methods {args.methods}: choose among {', '.join(METHODS)}, with s2gae")
    overrides: dict[str, Any] = {}
    if args.epochs or args.quick:
        overrides["epochs"] = args.epochs or 5
    seeds = list(range(args.seeds or (2 if args.quick else 5)))
    torch.set_num_threads(args.threads)
    data, dataset = load_benchmark_dataset(args.dataset)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    per_seed: dict[str, dict[str, list[float]]] = {
        m: {k: [] for k in (*METRICS, *TIMES)} for m in (*methods, *TRIVIAL)
    }
    trace: list[dict[str, Any]] = []
    for seed in seeds:
        split = split_edges(data, seed=234 if args.fixed_split else 234 + seed)
        for name, vals in trivial_baselines(split, seed).items():
            for k, v in vals.items():
                per_seed[name][k].append(v)
        epoch_s, epoch_cpu = {}, {}
        for method in methods:
            cfg = make_config(method, **overrides)
            model, hist = pretrain(method, split, cfg, seed=seed)
            res = evaluate(model, split, seed=seed)
            epoch_s[method] = statistics.median(hist.epoch_times)
            epoch_cpu[method] = statistics.median(hist.epoch_cpu_times)
            for k in METRICS:
                per_seed[method][k].append(res[k])
            per_seed[method]["epoch_s"].append(epoch_s[method])
            per_seed[method]["epoch_cpu_s"].append(epoch_cpu[method])
            per_seed[method]["best_epoch"].append(hist.best_epoch)
            per_seed[method]["stopped_epoch"].append(hist.stopped_epoch)
            if method == "curmgae" and seed == seeds[0]:
                trace = hist.trace
            print(
                f"seed {seed} {method:8s} "
                + " ".join(f"{k}={res[k]:.4f}" for k in METRICS)
                + f" epoch={epoch_s[method]:.3f}s cpu={epoch_cpu[method]:.3f}s "
                f"best={hist.best_epoch} stop={hist.stopped_epoch}",
                flush=True,
            )
        for method in methods:
            per_seed[method]["time_ratio"].append(epoch_cpu[method] / epoch_cpu[BASELINE])
            per_seed[method]["wall_time_ratio"].append(epoch_s[method] / epoch_s[BASELINE])
    summary = summarize(per_seed)
    targets = {}
    if "curmgae" in methods:
        cur, base = summary["curmgae"], summary[BASELINE]
        targets = {
            "lp_auc_ge_backbone": cur["lp_auc"]["mean"] >= base["lp_auc"]["mean"],
            "nc_svm_ge_backbone": cur["nc_svm_acc"]["mean"] >= base["nc_svm_acc"]["mean"],
            "nc_probe_ge_backbone": cur["nc_probe_acc"]["mean"] >= base["nc_probe_acc"]["mean"],
            "epoch_time_le_1.3x": cur["time_ratio"]["median"] <= 1.3,
        }
    name = dataset.lower() + ("_fixed_split" if args.fixed_split else "")
    name += "_quick" if args.quick else ""
    out = HERE / "results" / f"{name}.json"
    cfg0 = make_config("curmgae", **overrides)
    payload = {
        "benchmark": "link prediction + node classification, Cur-MGAE vs baselines",
        "dataset": dataset,
        "command": command_line(),
        "machine": machine(args.threads),
        "versions": versions("curmgae", "torch-geometric", "scikit-learn"),
        "spread": "std = sample standard deviation over seeds (ddof=1)",
        "epochs": cfg0.epochs,
        "patience": cfg0.patience,
        "seeds": seeds,
        "split": "85/5/10 undirected edges, split seed "
        + ("234 for every seed (S2GAE's convention)" if args.fixed_split else "234+seed")
        + ", val/test negatives = non-edges",
        "fixed_split": args.fixed_split,
        "protocol": "S2GAE small-graph link prediction (qiaoyu-tan/S2GAE s2gae_small_lp.py "
        "defaults): 200 epochs, Adam lr 0.01, one full-batch step per epoch, hidden 128, 2 GCN "
        "layers, decoder 2 layers x 256, dropout 0.5, mask ratio 0.7, validation AUC every epoch, "
        "patience 50, test at the best validation epoch",
        "nc_protocols": {
            "nc_svm_acc": "RBF SVC, KFold(5, shuffle, random_state=42) over all labelled nodes, "
            "concat features (S2GAE's protocol)",
            "nc_probe_acc": "linear probe on the dataset's node split (Planetoid: public split; "
            "synthetic: seeded 10/10/80), concat features",
        },
        "trivial": {
            "adamic_adar": "Adamic-Adar on the training graph (links only)",
            "raw_features": "cosine of raw features (links); raw features in the SVM / probe (nodes)",
            "majority": "most frequent training label (nodes only)",
        },
        "timing": "median epoch CPU time (time.process_time, 1 thread; S-step + w-step, without the "
        "validation pass) per run, as a ratio to s2gae (random-mask backbone) in the same process "
        "and seed; reported: median over seeds. CPU time is used because the machine is shared and "
        "wall time fluctuates; wall-time ratios are kept as wall_time_ratio",
        "per_seed": per_seed,
        "model_config": cfg0.to_dict(),
        "curriculum_trace_seed0": trace,
        "summary": summary,
        "targets": targets,
        "paper_reported": PAPER if dataset == "Cora" else {},
        "wall_time_s": time.perf_counter() - t_start,
        "cpu_time_s": time.process_time() - cpu_start,
    }
    write_json(out, payload)
    print(f"wrote {out} ({payload['wall_time_s']:.0f} s)")
    if trace and not args.quick:
        plot_curriculum(trace, HERE / "results" / f"{name}_curriculum.png")
    cmd = [sys.executable, str(HERE / "render.py")]
    if args.quick or args.fixed_split:
        cmd += [str(out), "--stdout"]
    return subprocess.call(cmd)


if __name__ == "__main__":
    raise SystemExit(main())
