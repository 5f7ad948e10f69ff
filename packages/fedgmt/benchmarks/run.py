"""Benchmarks (reference engine, scaled down for CPU): accuracy vs rounds on digits under
Dirichlet 0.1 / 0.01 / near-IID (alpha = 100), seeds 0-2, FedGMT vs FedAvg/FedSAM/FedDyn/SCAFFOLD;
client compute time per round as a ratio to FedAvg and FedSAM in the same run; DP trade-off.

Writes ``benchmarks/results/digits.json`` and ``benchmarks/results/dp.json`` then calls
``render.py``. ``--quick`` runs fewer rounds/seeds (smoke check of the pipeline).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch
from fedgmt import FedConfig, run_reference
from fedgmt.guard import UnstableDualError

HERE = Path(__file__).resolve().parent
METHODS = ["fedgmt", "fedavg", "fedsam", "feddyn", "scaffold"]
SPLITS = {"dir0.1": 0.1, "dir0.01": 0.01, "near-iid (dir100)": 100.0}


def machine() -> dict:
    return {
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": 1,
    }


def accuracy_benchmark(rounds: int, seeds: list[int]) -> dict:
    out: dict = {"splits": {}}
    for split, alpha in SPLITS.items():
        per: dict = {
            m: {"last10": [], "client_time": [], "curve": [], "diverged": []} for m in METHODS
        }
        ratios_avg, ratios_sam = [], []
        for seed in seeds:
            times = {}
            for m in METHODS:
                cfg = FedConfig(method=m, dirichlet_alpha=alpha, num_rounds=rounds, seed=seed)
                try:
                    h = run_reference(cfg)
                except UnstableDualError as err:
                    per[m]["last10"].append(None)
                    per[m]["diverged"].append(str(err))
                    continue
                per[m]["last10"].append(h.last_k_accuracy(10))
                per[m]["client_time"].append(h.median_client_time())
                per[m]["curve"].append([round(a, 4) for a in h.accuracy])
                per[m]["diverged"].append(h.diverged)
                times[m] = h.median_client_time()
                print(f"{split} seed {seed} {m}: {h.last_k_accuracy(10):.4f}", flush=True)
            if {"fedgmt", "fedavg", "fedsam"} <= set(times):
                ratios_avg.append(times["fedgmt"] / times["fedavg"])
                ratios_sam.append(times["fedgmt"] / times["fedsam"])
        for m in METHODS:
            vals = [v for v in per[m]["last10"] if v is not None]
            per[m]["mean"] = statistics.mean(vals) if vals else None
            per[m]["std"] = statistics.stdev(vals) if len(vals) > 1 else None  # ddof=1
        out["splits"][split] = {
            "alpha": alpha,
            "methods": per,
            "time_ratio_fedgmt_over_fedavg": ratios_avg,
            "time_ratio_fedgmt_over_fedsam": ratios_sam,
            "median_ratio_fedavg": statistics.median(ratios_avg) if ratios_avg else None,
            "median_ratio_fedsam": statistics.median(ratios_sam) if ratios_sam else None,
        }
    return out


def mnist_benchmark(rounds: int, seeds: list[int], data_dir: str | None) -> dict:
    """MNIST (subsampled to 6,000 train images), Dir(0.1), 20 clients, 5 per round, B=50, E=1,
    MLP 784-200-200-10; beta = 100 (kappa_max < 1). Also the compute-bound timing regime."""
    per: dict = {m: {"last10": [], "client_time": [], "curve": []} for m in METHODS}
    ratios_avg, ratios_sam = [], []
    for seed in seeds:
        times = {}
        for m in METHODS:
            cfg = FedConfig(
                method=m, dataset="mnist", data_dir=data_dir, max_train_samples=6000,
                num_clients=20, fraction_train=0.25, num_rounds=rounds, batch_size=50,
                local_epochs=1, beta=100.0, dirichlet_alpha=0.1, seed=seed,
            )  # fmt: skip
            h = run_reference(cfg)
            per[m]["last10"].append(h.last_k_accuracy(10))
            per[m]["client_time"].append(h.median_client_time())
            per[m]["curve"].append([round(a, 4) for a in h.accuracy])
            times[m] = h.median_client_time()
            print(f"mnist seed {seed} {m}: {h.last_k_accuracy(10):.4f}", flush=True)
        ratios_avg.append(times["fedgmt"] / times["fedavg"])
        ratios_sam.append(times["fedgmt"] / times["fedsam"])
    for m in METHODS:
        per[m]["mean"] = statistics.mean(per[m]["last10"])
        per[m]["std"] = statistics.stdev(per[m]["last10"]) if len(seeds) > 1 else None  # ddof=1
    return {
        "methods": per,
        "time_ratio_fedgmt_over_fedavg": ratios_avg,
        "time_ratio_fedgmt_over_fedsam": ratios_sam,
        "median_ratio_fedavg": statistics.median(ratios_avg),
        "median_ratio_fedsam": statistics.median(ratios_sam),
        "setup": "MNIST 6,000-image train subsample, Dir(0.1), 20 clients, 5 per round, B=50, "
        "E=1, lr 0.01, mu 0.9, MLP 784-200-200-10, beta 100, rho 0.05",
        "rounds": rounds,
        "seeds": seeds,
    }


def timing_benchmark(repeats: int = 5) -> dict:
    """Client compute time of one local update (E=5, 100 samples, B=50: 10 steps), methods
    interleaved, median over repeats, on random 28x28 inputs (timing does not depend on the
    values): the MNIST CNN (compute-bound) and the 2NN MLP."""
    from fedgmt import algorithms as core
    from fedgmt.model import make_model

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(100, 784, generator=g), torch.randint(0, 10, (100,), generator=g)
    out: dict = {"repeats": repeats, "models": {}}
    for arch in ("cnn", "mlp"):
        cfg = FedConfig(dataset="mnist", model=arch, batch_size=50, local_epochs=5, beta=100.0)
        model = make_model(cfg, 784, 10)
        w = {k: v.detach().clone() for k, v in model.state_dict().items()}
        ema = {k: v.detach().clone() + 0.01 for k, v in model.named_parameters()}
        times: dict = {m: [] for m in ("fedavg", "fedgmt", "fedsam")}
        for _ in range(repeats):
            for m in times:
                payload = core.Payload(arrays=w, lr=0.01, round=1, ema=ema)
                t0 = time.perf_counter()
                core.client_update(m, model, (x, y), payload, {}, cfg.replace(method=m),
                                   core.client_generator(0, 1, 0))  # fmt: skip
                times[m].append(time.perf_counter() - t0)
        med = {m: statistics.median(v) for m, v in times.items()}
        out["models"][arch] = {
            "seconds": times,
            "median_s": med,
            "ratio_fedgmt_over_fedavg": med["fedgmt"] / med["fedavg"],
            "ratio_fedgmt_over_fedsam": med["fedgmt"] / med["fedsam"],
            "ratio_fedsam_over_fedavg": med["fedsam"] / med["fedavg"],
        }
        print(f"timing {arch}: {out['models'][arch]['ratio_fedgmt_over_fedsam']:.2f} x FedSAM")
    return out


def dp_benchmark(rounds: int, noises: list[float]) -> dict:
    rows = []
    for noise in noises:
        for m in ("fedgmt", "fedavg"):
            cfg = FedConfig(
                method=m, num_rounds=rounds, dp=True, dp_noise=noise, dp_clip=1.0, dp_delta=1e-3,
                dirichlet_alpha=0.1,
            )  # fmt: skip
            h = run_reference(cfg)
            rows.append(
                {
                    "method": m, "noise": noise, "last10": h.last_k_accuracy(10),
                    "epsilon_max": max(h.dp_epsilon_max) if h.dp_epsilon_max else None,
                    "epsilon_mean_last": h.dp_epsilon_mean[-1] if h.dp_epsilon_mean else None,
                    "diverged": h.diverged,
                }
            )  # fmt: skip
            print(f"dp sigma={noise} {m}: {rows[-1]['last10']:.4f} eps={rows[-1]['epsilon_max']}")
    return {"rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="5 rounds, 1 seed, no DP sweep")
    p.add_argument("--no-render", action="store_true", help="do not rewrite the README table")
    p.add_argument("--only-timing", action="store_true", help="only the timing micro-benchmark")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rounds, seeds = (5, [0]) if args.quick else (60, [0, 1, 2])
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    timing = timing_benchmark(2 if args.quick else 5)
    timing.update(machine=machine(), command="python benchmarks/run.py", torch_threads=1)
    if not args.quick:
        (results / "timing.json").write_text(json.dumps(timing, indent=1))
    if args.only_timing:
        if not args.no_render:
            subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
        return 0
    acc = accuracy_benchmark(rounds, seeds)
    acc.update(
        machine=machine(), command="python benchmarks/run.py" + (" --quick" if args.quick else ""),
        seeds=seeds, rounds=rounds, quick=args.quick, engine="reference",
        setup="digits, 20 clients, 5 per round, B=16, E=5, lr 0.01, mu 0.9, MLP 64-64-10; "
        "FedGMT gamma 1 tau 3 alpha 0.95 beta 10; FedSAM rho 0.05",
        wall_time_s=time.perf_counter() - t0,
    )  # fmt: skip
    name = "digits_quick.json" if args.quick else "digits.json"
    (results / name).write_text(json.dumps(acc, indent=1))
    mnist_dir = (
        Path(os.environ.get("ICML25_DATA", HERE.parents[3] / "shared" / "data")) / "mnist" / "raw"
    )
    if mnist_dir.exists() and not args.quick:
        t1 = time.perf_counter()
        mn = mnist_benchmark(40, seeds, str(mnist_dir))
        mn.update(machine=machine(), command="python benchmarks/run.py", engine="reference",
                  wall_time_s=time.perf_counter() - t1)  # fmt: skip
        (results / "mnist.json").write_text(json.dumps(mn, indent=1))
    elif not args.quick:
        print(f"MNIST benchmark skipped: {mnist_dir} not found")
    if not args.quick:
        t1 = time.perf_counter()
        dp = dp_benchmark(30, [0.5, 1.0, 2.0])
        dp.update(
            machine=machine(), command="python benchmarks/run.py", rounds=30, seed=0,
            setup="digits Dir(0.1), DP-SGD (Opacus RDP), clip 1.0, delta 1e-3, Poisson sampling",
            wall_time_s=time.perf_counter() - t1,
        )  # fmt: skip
        (results / "dp.json").write_text(json.dumps(dp, indent=1))
    if not args.no_render and not args.quick:
        subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    print(f"benchmark wall time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
