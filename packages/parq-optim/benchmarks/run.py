"""Benchmarks of parq-optim (writes benchmarks/results/*.json, then renders the README table).

(a) accuracy: digits (MLP 64-16-16-10) and an MNIST subsample (MLP 784-64-64-10), 3 seeds,
    bits {1, ternary, 2, 4}, full precision vs post-training quantization of the full-precision
    model (PTQ, the trivial baseline) vs STE vs BinaryRelax vs PARQ (greedy LSBQ levels).
(b) optimizer step time: bare base optimizer, parq_optim.QuantOptimizer and torchao's
    QuantOptimizer, interleaved in one process; median over blocks of ``quant_period`` steps.

Usage: python benchmarks/run.py [--quick] [--only accuracy|timing]
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import parq_optim
import torch
from _common import machine, summarize
from parq_optim.data import STD_FLOOR, load_digits, load_folder, make_synthetic
from parq_optim.train import TrainConfig, evaluate, train
from torch import nn

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DATA = Path(os.environ.get("ICML25_DATA", HERE.parents[2].parent / "shared" / "data"))
MNIST = Path(os.environ.get("PARQ_OPTIM_DATA_DIR", DATA / "mnist" / "raw"))
BITS = [1, 0, 2, 4]
METHODS = ["fp", "ste", "binaryrelax", "parq"]


def fmt(row: dict) -> str:
    return f"{row['mean']:6.2f}" + ("" if row["std"] is None else f" ± {row['std']:.2f}")


@torch.no_grad()
def ptq_accuracy(model: nn.Module, bits: int, data) -> float:
    """Post-training quantization: every quantized weight of the full-precision model replaced by
    its greedy LSBQ hard quantization (per tensor), no training."""
    model = copy.deepcopy(model)
    for p in parq_optim.quant_param_groups(model, bits)[0]["params"]:
        q, _ = parq_optim.LSBQuantizer().quantize(p, bits)
        p.copy_(q)
    return evaluate(model, data.x_test, data.y_test)


def accuracy(quick: bool) -> dict:
    seeds = [0] if quick else [0, 1, 2]
    digits_cfg = {"model": "mlp", "hidden": 16, "epochs": 20 if quick else 60, "batch_size": 64}
    try:
        load_digits(0)
        setups = [("digits", functools.cache(lambda s: load_digits(seed=s)), digits_cfg)]
    except ImportError:  # no scikit-learn: the embedded synthetic preset instead
        setups = [("synthetic", functools.cache(lambda s: make_synthetic(seed=s)), digits_cfg)]
    if MNIST.is_dir():
        n_tr, n_te = (3000, 2000) if quick else (10000, 10000)
        mnist_cfg = {"model": "mlp", "hidden": 64, "epochs": 3 if quick else 8, "batch_size": 128}
        setups.append(
            (
                f"mnist-{n_tr // 1000}k",
                functools.cache(
                    lambda s, a=n_tr, b=n_te: load_folder(MNIST, max_train=a, max_test=b, seed=s)
                ),
                mnist_cfg,
            )
        )
    rows = []
    for name, loader, cfg in setups:
        ptq: dict[int, list[float]] = {b: [] for b in BITS}
        for bits in BITS:
            for method in METHODS:
                if method == "fp" and bits != BITS[0]:
                    continue
                per_seed, times, levels_ok = [], [], True
                for s in seeds:
                    data = loader(s)
                    tc = TrainConfig(method=method, bits=bits, quantizer="lsbq", seed=s, **cfg)
                    r = train(tc, data)
                    per_seed.append(r["test_acc"])
                    times.append(r["wall_time_s"])
                    for v in r.get("layers", {}).values():
                        levels_ok &= v["distinct_snapped"] == v["levels"]
                    if method == "fp":
                        for b in BITS:
                            ptq[b].append(ptq_accuracy(r["model"], b, data))
                rows.append(
                    {
                        "dataset": name,
                        "bits": "fp" if method == "fp" else label(bits),
                        "method": method,
                        "test_acc": per_seed,
                        **summarize(per_seed),
                        "wall_time_s": statistics.fmean(times),
                        "levels_equal_Q": levels_ok if method != "fp" else None,
                        "config": {**cfg, "quantizer": "lsbq", "optimizer": "sgd", "lr": 0.1},
                    }
                )
                print(
                    f"{name:>10} {rows[-1]['bits']!s:>7} {method:>12} {fmt(rows[-1])}", flush=True
                )
                if method == "fp":
                    for b in BITS:
                        rows.append(
                            {
                                "dataset": name,
                                "bits": label(b),
                                "method": "ptq",
                                "test_acc": ptq[b],
                                **summarize(ptq[b]),
                                "levels_equal_Q": None,
                                "config": {"quantizer": "lsbq", "of": "the fp runs above"},
                            }
                        )
    return {
        "seeds": seeds,
        "spread": "sample standard deviation (ddof=1) over the seeds; null for one seed",
        "standardization": "per feature, train mean and std floored at "
        f"{STD_FLOOR} x the RMS of the feature stds (parq_optim.data.standardize)",
        "rows": rows,
    }


def label(bits: int) -> str | int:
    return "ternary" if bits == 0 else bits


def _make_opts(kind: str, base_name: str, per_channel: bool, ao):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    groups = parq_optim.quant_param_groups(model, 2)
    if base_name == "sgd":
        base = torch.optim.SGD(groups, lr=0.01, momentum=0.9, weight_decay=1e-4)
    else:
        base = torch.optim.AdamW(groups, lr=1e-3, weight_decay=1e-2)
    lib = {"ours": parq_optim, "torchao": ao}.get(kind)
    opt = base
    if lib is not None:
        opt = lib.QuantOptimizer(
            base,
            lib.LSBQuantizer(),
            lib.ProxPARQ(0, 10**6),
            quant_period=10,
            quant_per_channel=per_channel,
        )
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
    nn.functional.cross_entropy(model(x), y).backward()
    return opt


def timing(quick: bool) -> dict:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torchao.prototype.parq as ao
    except Exception:  # torchao missing or broken: report our overhead only
        ao = None
    rounds, block = (5, 10) if quick else (25, 10)
    rows = []
    for base_name in ("sgd", "adamw"):
        for per_channel in (False, True):
            kinds = ["base", "ours"] + (["torchao"] if ao is not None else [])
            opts = {k: _make_opts(k, base_name, per_channel, ao) for k in kinds}
            for o in opts.values():  # warm-up (lazy state, first Q)
                for _ in range(block):
                    o.step()
            samples: dict[str, list[float]] = {k: [] for k in kinds}
            for _ in range(rounds):
                for k in kinds:  # interleaved so that machine load hits all alike
                    t0 = time.perf_counter()
                    for _ in range(block):
                        opts[k].step()
                    samples[k].append((time.perf_counter() - t0) / block)
            med = {k: statistics.median(v) for k, v in samples.items()}
            row = {
                "base_optimizer": base_name,
                "per_channel": per_channel,
                "median_step_s": med,
                "samples_s": samples,
                "ours_over_base": med["ours"] / med["base"],
                "ours_over_torchao": med["ours"] / med["torchao"] if ao is not None else None,
                "torchao_over_base": med["torchao"] / med["base"] if ao is not None else None,
            }
            rows.append(row)
            print(
                f"{base_name:>6} per_channel={per_channel!s:5} ours/base {row['ours_over_base']:.2f}"
                f"  ours/torchao {row['ours_over_torchao'] or float('nan'):.2f}",
                flush=True,
            )
    return {
        "model": "MLP 784-512-512-10 (669k quantized weights), 2-bit LSBQ, PARQ, quant_period 10",
        "rounds": rounds,
        "steps_per_block": block,
        "torchao": getattr(sys.modules.get("torchao"), "__version__", None),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 seed, fewer epochs and timing rounds")
    ap.add_argument("--only", choices=["accuracy", "timing"], default=None, help="run one part")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = " ".join(
        ["python", "benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]
    )
    suffix = "_quick" if args.quick else ""
    for name, fn in (("accuracy", accuracy), ("timing", timing)):
        if args.only not in (None, name):
            continue
        t0 = time.perf_counter()
        out = fn(args.quick)
        out.update(
            {
                "command": command,
                "quick": args.quick,
                "machine": machine(),
                "wall_time_s": time.perf_counter() - t0,
            }
        )
        (RESULTS / f"{name}{suffix}.json").write_text(json.dumps(out, indent=1))
    subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
