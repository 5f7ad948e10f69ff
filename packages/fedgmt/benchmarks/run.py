"""Benchmarks (reference engine, scaled down for CPU; the Flower engine gives the same numbers).

Suites (``--suite``, default ``all``):

* ``main``: digits, MNIST (6,000-image subsample) and AG News (frozen all-MiniLM-L6-v2 sentence
  embeddings) x Dirichlet {0.01, 0.1, 100 (near-IID)} x FedGMT / FedAvg / FedSAM / FedDyn /
  SCAFFOLD x seeds 0-2, plus a dropout row per dataset (Dir 0.1, each sampled client fails mid-round
  with probability 0.3). Writes ``results/<dataset>.json``.
* ``tuning``: digits Dir(0.01), where FedGMT trailed FedDyn with the official defaults: a grid per
  method (FedGMT gamma, EMA alpha, beta, tau, prox; FedDyn beta; FedSAM rho; SCAFFOLD server lr),
  every run on the same 80% of the training set, selection by the mean last-10 accuracy on the
  held-out 20% validation split (never the test set); the test accuracy of the selected setting is
  reported. Writes ``results/tuning.json``.

Protocol choices made before looking at test numbers: lr is the official 0.01 on digits and MNIST;
on AG News it is chosen by a FedAvg sweep on the validation split (Dir 0.1, seed 0); beta is the
smallest of {10, 30, 100, 300, 1000} whose worst-case kappa_max (the stability guard) is <= 0.5
over the three splits, used by FedGMT and FedDyn alike (alpha_dyn = 1/beta).
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
from typing import Any

import torch
from fedgmt import FedConfig, run_reference
from fedgmt.dataset import load_federated_data
from fedgmt.guard import UnstableDualError, kappa

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
METHODS = ["fedgmt", "fedavg", "fedsam", "feddyn", "scaffold"]
SPLITS = {"dir0.01": 0.01, "dir0.1": 0.1, "near-iid (dir100)": 100.0}
DROPOUT = 0.3
BETAS = (10.0, 30.0, 100.0, 300.0, 1000.0)


def data_root() -> Path:
    return Path(os.environ.get("ICML25_DATA", HERE.parents[3] / "shared" / "data"))


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "torch_threads": 1,
    }


def base_config(dataset: str) -> dict[str, Any]:
    """The scaled-down setting of each dataset (before lr/beta selection)."""
    if dataset == "digits":
        return {"dataset": "digits", "num_rounds": 60}
    if dataset == "mnist":
        return {
            "dataset": "mnist", "data_dir": str(data_root() / "mnist" / "raw"),
            "max_train_samples": 6000, "num_clients": 20, "fraction_train": 0.25,
            "num_rounds": 40, "batch_size": 50, "local_epochs": 1,
        }  # fmt: skip
    return {
        "dataset": "agnews-minilm", "data_dir": str(data_root() / "ag_news"), "num_clients": 20,
        "fraction_train": 0.25, "num_rounds": 40, "batch_size": 32, "local_epochs": 2,
    }  # fmt: skip


def choose_beta(base: dict[str, Any], lr: float) -> tuple[float, dict[str, float]]:
    """Smallest beta with kappa_max <= 0.5 on every split (the guard's stability law)."""
    kmax: dict[str, float] = {}
    for beta in BETAS:
        worst = 0.0
        for split, alpha in SPLITS.items():
            cfg = FedConfig(**{**base, "lr": lr, "beta": beta, "dirichlet_alpha": alpha})
            sizes = load_federated_data(cfg).partition.sizes
            k = max(kappa(n, cfg) for n in sizes)
            kmax[f"beta={beta:g} {split}"] = k
            worst = max(worst, k)
        if worst <= 0.5:
            return beta, kmax
    return BETAS[-1], kmax


def choose_lr(base: dict[str, Any], grid: tuple[float, ...]) -> tuple[float, dict[str, float]]:
    """FedAvg lr sweep on the validation split (Dir 0.1, seed 0)."""
    scores = {}
    for lr in grid:
        cfg = FedConfig(
            **{**base, "method": "fedavg", "lr": lr, "dirichlet_alpha": 0.1, "val_fraction": 0.2}
        )
        h = run_reference(cfg)
        scores[f"{lr:g}"] = h.last_k_val_accuracy(10)
        print(f"lr sweep {cfg.dataset} lr={lr:g}: val {scores[f'{lr:g}']:.4f}", flush=True)
    best = max(scores, key=scores.__getitem__)
    return float(best), scores


def one_run(cfg: FedConfig) -> dict[str, Any]:
    try:
        h = run_reference(cfg)
    except UnstableDualError as err:
        return {"last10": None, "refused": str(err)}
    return {
        "last10": h.last_k_accuracy(10),
        "val_last10": h.last_k_val_accuracy(10) if h.val_accuracy else None,
        "client_time": h.median_client_time(),
        "curve": [round(a, 4) for a in h.accuracy],
        "diverged": h.diverged,
        "failures": len(h.failures),
    }


def summarise(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    vals = [r["last10"] for r in per_seed if r.get("last10") is not None]
    return {
        "last10": [r.get("last10") for r in per_seed],
        "mean": statistics.mean(vals) if vals else None,
        "std": statistics.stdev(vals) if len(vals) > 1 else None,  # ddof=1
        "client_time": [r.get("client_time") for r in per_seed],
        "curve": [r.get("curve") for r in per_seed],
        "diverged": [r.get("diverged") for r in per_seed],
        "failures": [r.get("failures") for r in per_seed],
    }


def main_suite(dataset: str, seeds: list[int], quick: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    base = base_config(dataset)
    if quick:
        base["num_rounds"] = 4
    selection: dict[str, Any] = {}
    if dataset == "agnews-minilm":
        lr, scores = choose_lr(base, (0.003, 0.01, 0.03, 0.1) if not quick else (0.01,))
        selection["lr_sweep_fedavg_val"] = scores
    else:
        lr = 0.01
    beta, kmax = choose_beta(base, lr)
    selection.update({"lr": lr, "beta": beta, "kappa_max": kmax})
    print(f"{dataset}: lr={lr:g} beta={beta:g}", flush=True)
    out: dict[str, Any] = {"splits": {}, "selection": selection}
    rows = [(split, alpha, 0.0) for split, alpha in SPLITS.items()]
    rows.append((f"dir0.1, {int(DROPOUT * 100)}% dropout", 0.1, DROPOUT))
    for split, alpha, fail in rows:
        res: dict[str, Any] = {"alpha": alpha, "fail_fraction": fail, "methods": {}}
        for m in METHODS:
            per = []
            for seed in seeds:
                cfg = FedConfig(**{**base, "method": m, "lr": lr, "beta": beta,
                                   "dirichlet_alpha": alpha, "fail_fraction": fail, "seed": seed})  # fmt: skip
                r = one_run(cfg)
                per.append(r)
                print(f"{dataset} {split} {m} seed {seed}: {r['last10']}", flush=True)
            res["methods"][m] = summarise(per)
        out["splits"][split] = res
    base_view = {k: v for k, v in base.items() if k != "data_dir"}
    out.update(
        dataset=dataset, setup=base_view, seeds=seeds, rounds=base["num_rounds"],
        engine="reference", machine=machine(), quick=quick,
        command="python benchmarks/run.py --suite main" + (" --quick" if quick else ""),
        wall_time_s=time.perf_counter() - t0,
    )  # fmt: skip
    return out


TUNING_GRID: dict[str, list[dict[str, Any]]] = {
    "fedgmt": [
        {"gamma": g, "ema_alpha": a, "beta": b, "tau": 3.0}
        for g in (0.5, 1.0, 2.0)
        for a in (0.95, 0.995)
        for b in (10.0, 30.0)
    ]
    + [{"gamma": 1.0, "ema_alpha": 0.95, "beta": 10.0, "tau": 1.0}]
    + [{"gamma": 1.0, "ema_alpha": 0.95, "beta": b, "prox": 1.0 / b} for b in (10.0, 30.0)]
    + [{"gamma": 0.0, "beta": b} for b in (10.0, 30.0)],
    "feddyn": [{"beta": b} for b in (3.0, 10.0, 30.0, 100.0)],
    "fedsam": [{"rho": r} for r in (0.01, 0.05, 0.1)],
    "scaffold": [{"server_lr": s} for s in (0.5, 1.0)],
    "fedavg": [{}],
}


def tuning_suite(seeds: list[int], quick: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    base = {"dataset": "digits", "num_rounds": 4 if quick else 60, "dirichlet_alpha": 0.01,
            "val_fraction": 0.2}  # fmt: skip
    out: dict[str, Any] = {"methods": {}}
    for m, grid in TUNING_GRID.items():
        cands = []
        for params in grid[:2] if quick else grid:
            per = []
            for seed in seeds:
                cfg = FedConfig(**{**base, **params, "method": m, "seed": seed})
                per.append(one_run(cfg))
            vals = [r["val_last10"] for r in per if r.get("val_last10") is not None]
            tests = [r["last10"] for r in per if r.get("last10") is not None]
            cand = {
                "params": params,
                "val_mean": statistics.mean(vals) if vals else None,
                "test": tests,
                "test_mean": statistics.mean(tests) if tests else None,
                "test_std": statistics.stdev(tests) if len(tests) > 1 else None,
            }
            cands.append(cand)
            print(
                f"tuning {m} {params}: val {cand['val_mean']} test {cand['test_mean']}", flush=True
            )
        ok = [c for c in cands if c["val_mean"] is not None]
        best = max(ok, key=lambda c: c["val_mean"])
        official = {
            "fedgmt": {"gamma": 1.0, "ema_alpha": 0.95, "beta": 10.0, "tau": 3.0},
            "feddyn": {"beta": 10.0},
            "fedsam": {"rho": 0.05},
            "scaffold": {"server_lr": 1.0},
        }.get(m, {})
        default = next((c for c in cands if c["params"] == official), cands[0])
        out["methods"][m] = {"candidates": cands, "selected": best, "default": default}
    out.update(
        setup="digits Dir(0.01), 20 clients, 5 per round, B=16, E=5, lr 0.01, mu 0.9, "
        f"{base['num_rounds']} rounds; 20% of the training set held out for validation",
        seeds=seeds, engine="reference", machine=machine(), quick=quick,
        command="python benchmarks/run.py --suite tuning" + (" --quick" if quick else ""),
        wall_time_s=time.perf_counter() - t0,
    )  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--suite", choices=("main", "tuning", "all"), default="all")
    p.add_argument(
        "--dataset",
        choices=("digits", "mnist", "agnews-minilm", "all"),
        default="all",
        help="datasets of the main suite",
    )
    p.add_argument("--quick", action="store_true", help="4 rounds, 1 seed (pipeline check)")
    p.add_argument("--no-render", action="store_true", help="do not rewrite the README table")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    seeds = [0] if args.quick else [0, 1, 2]
    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    t0 = time.perf_counter()
    if args.suite in ("main", "all"):
        names = ["digits", "mnist", "agnews-minilm"] if args.dataset == "all" else [args.dataset]
        for name in names:
            if name == "mnist" and not (data_root() / "mnist" / "raw").is_dir():
                print(f"MNIST skipped: {data_root() / 'mnist' / 'raw'} not found")
                continue
            if name == "agnews-minilm" and not (data_root() / "ag_news" / "test.csv").is_file():
                print("AG News skipped: test.csv not found")
                continue
            res = main_suite(name, seeds, args.quick)
            (RESULTS / f"{name}{suffix}.json").write_text(json.dumps(res, indent=1))
    if args.suite in ("tuning", "all"):
        res = tuning_suite(seeds, args.quick)
        (RESULTS / f"tuning{suffix}.json").write_text(json.dumps(res, indent=1))
    if not args.no_render and not args.quick:
        subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    print(f"benchmark wall time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
