"""Benchmarks of Sassha against SGD, AdamW, SAM(SGD) and AdaHessian (paper Sec. 5 protocol, scaled to CPU).

(a) accuracy: digits MLP (60 epochs) and a real-MNIST subset MLP, 3 seeds, test accuracy + λ_max;
(b) time per optimizer step including forward/backward, as a ratio to AdamW and SAM measured in the
    same process (median over interleaved repeats of blocks of steps), Sassha k ∈ {1, 10};
(c) memory: optimizer-state tensor bytes and peak RSS of a fresh process per optimizer;
(d) standardisation: the accuracy protocol (seed 0) with version 0.1.0's ``std + 1e-6`` and with the
    floored std of ``sassha_optim.data`` (test loss and the largest standardised |x|).
(e) start-up: a small CNN without batch norm on MNIST (5,120 training images, batch 256, 60 steps,
    3 seeds) with and without the Hessian warm-up: the largest single-step weight change, the D̂^α
    and m̂ of that coordinate, training-batch loss after 30/60 steps and held-out accuracy.

(f) rss: resident memory (VmRSS) sampled over 2,000 steps of a fresh process per configuration:
    Sassha with the documented closure (``backward(create_graph=opt.create_graph)``) at k = 10 and
    k = 1, with a loss-only closure, AdamW for reference, and a leaking control (SGD with
    ``backward(create_graph=True)`` and no ``zero_grad``, 500 steps); growth and slope, and how
    often torch's reference-cycle warning reached the user.

Writes benchmarks/results/{accuracy,timing,memory,standardisation,startup,rss}.json, then runs
render.py (README table). The label-noise and language-model benchmarks are separate scripts
(label_noise.py, lm.py).
Usage: python benchmarks/run.py [--quick] [--only accuracy,timing,memory,standardisation,startup,rss]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import sassha_optim.data as data_module
import torch
from _common import machine, summarize
from sassha_optim import __version__
from sassha_optim._baselines import SAM
from sassha_optim.data import STD_FLOOR, Split, load_digits, load_folder
from sassha_optim.training import MLP, build_optimizer, make_closure, top_hessian_eigenvalue, train

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DATA = Path(os.environ.get("ICML25_DATA", HERE.parents[2].parent / "shared" / "data"))
MNIST = Path(os.environ.get("SASSHA_OPTIM_DATA_DIR", DATA / "mnist" / "raw"))
ACCURACY_OPTIMIZERS = [
    "sgd",
    "adamw",
    "sam",
    "adahessian",
    "sophia-h",
    "sassha",
    "sassha-rho0",
    "sassha-official",
]
TIMING_OPTIMIZERS = ["sgd", "adamw", "sam", "sam-adamw", "adahessian", "sassha-k1", "sassha"]
MEMORY_OPTIMIZERS = ["sgd", "adamw", "sam", "adahessian", "sophia-h", "sassha"]

# Numbers the paper's authors report (official repository README; paper Sec. 3). Not comparable with our CPU-scale tasks.
PAPER_REPORTED = {
    "source": "LOG-postech/Sassha language_tasks/modeling/README.md (GPT-2 small, OpenWebText)",
    "gpt2_validation_loss": {
        "AdamW": 2.9622,
        "SAM-AdamW": 2.9558,
        "Sophia-G": 2.9307,
        "Sassha": 2.9173,
    },
    "gpt2_perplexity": {"AdamW": 19.353, "SAM-AdamW": 19.196, "Sophia-G": 18.751, "Sassha": 18.491},
    "lambda_max_resnet32_cifar100": {"SGD": 265, "Shampoo": 436374, "Sassha": 107},
    "lambda_max_source": "third-party summary of the paper (not checked against the PDF)",
}


def write(name: str, payload: dict, quick: bool) -> Path:
    folder = RESULTS / "quick" if quick else RESULTS  # smoke runs never overwrite the README's data
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1))
    print(f"wrote {path}", flush=True)
    return path


def majority_accuracy(split: Split) -> float:
    """Test accuracy (%) of always predicting the most frequent training label (trivial baseline)."""
    top = int(torch.bincount(split.y_train).argmax())
    return 100.0 * float((split.y_test == top).float().mean())


# ----------------------------------------------------------------------------------------- (a)
def accuracy(quick: bool) -> dict:
    seeds = [0] if quick else [0, 1, 2]
    tasks: list[tuple[str, Split, dict]] = [
        ("digits", load_digits(seed=0), {"epochs": 10 if quick else 60, "batch_size": 64}),
    ]
    if MNIST.exists():
        mnist = load_folder(MNIST, max_train=2000 if quick else 10000, seed=0)
        tasks.append(("mnist", mnist, {"epochs": 1 if quick else 8, "batch_size": 128}))
    else:
        print(f"MNIST not found at {MNIST}: skipping the MNIST task", flush=True)
    out: dict = {"seeds": seeds, "tasks": {}}
    for task, split, cfg in tasks:
        rows: dict = {}
        for name in ACCURACY_OPTIMIZERS:
            runs = []
            for seed in seeds:
                torch.manual_seed(seed)
                model = MLP(split.n_features, split.n_classes, (128, 128))
                res = train(model, name, split, seed=seed, **cfg)
                sub = min(len(split.x_train), 2000)  # λ_max on a fixed 2,000-sample subset
                lam = top_hessian_eigenvalue(
                    model, split.x_train[:sub], split.y_train[:sub], seed=seed
                )
                runs.append(
                    {
                        "seed": seed,
                        "test_accuracy": res.test_accuracy,
                        "test_loss": res.test_loss,
                        "train_loss": res.train_loss,
                        "lambda_max": lam,
                        "seconds": res.seconds,
                        "hvp_calls": res.hvp_calls,
                    }
                )
                print(
                    f"[{task}] {name:16s} seed {seed}: acc {res.test_accuracy:6.2f}  "
                    f"test loss {res.test_loss:.4f}  train loss {res.train_loss:.4f}  "
                    f"λmax {lam:8.4f}  {res.seconds:5.1f}s",
                    flush=True,
                )
            rows[name] = {
                "runs": runs,
                "test_accuracy": summarize([r["test_accuracy"] for r in runs]),
                "test_loss": summarize([r["test_loss"] for r in runs]),
                "train_loss": summarize([r["train_loss"] for r in runs]),
                "lambda_max": summarize([r["lambda_max"] for r in runs]),
                "hvp_calls": runs[0]["hvp_calls"],
            }
        out["tasks"][task] = {
            "n_train": len(split.x_train),
            "n_test": len(split.x_test),
            "model": f"MLP {split.n_features}-128-128-{split.n_classes}",
            **cfg,
            "standardisation": f"train mean/std per feature, std floored at {STD_FLOOR} x the "
            "std of all training entries",
            "x_train_abs_max": float(split.x_train.abs().max()),
            "x_test_abs_max": float(split.x_test.abs().max()),
            "majority_class_test_accuracy": majority_accuracy(split),
            "optimizers": rows,
            "targets": {
                "sassha_ge_adamw": rows["sassha"]["test_accuracy"]["mean"]
                >= rows["adamw"]["test_accuracy"]["mean"],
                "sassha_ge_sam": rows["sassha"]["test_accuracy"]["mean"]
                >= rows["sam"]["test_accuracy"]["mean"],
            },
        }
    return out


# ----------------------------------------------------------------------------------------- (d)
STANDARDISATION_OPTIMIZERS = ["sgd", "sam", "sassha"]


def _legacy_standardize(x_train, x_test, name="data"):
    """Version 0.1.0's standardisation, ``std + 1e-6`` (kept here only for the comparison)."""
    mean = x_train.mean(0, keepdim=True)
    std = x_train.std(0, keepdim=True) + 1e-6
    return (x_train - mean) / std, (x_test - mean) / std


@contextlib.contextmanager
def legacy_standardisation():
    saved = data_module._standardize
    data_module._standardize = _legacy_standardize
    try:
        yield
    finally:
        data_module._standardize = saved


def standardisation(quick: bool) -> dict:
    """The accuracy protocol (seed 0) with 0.1.0's ``std + 1e-6`` and with the floored std."""
    loaders = {"digits": (lambda: load_digits(seed=0), 10 if quick else 60, 64)}
    if MNIST.exists():
        n = 2000 if quick else 10000
        loaders["mnist"] = (lambda: load_folder(MNIST, max_train=n, seed=0), 1 if quick else 8, 128)
    out: dict = {
        "seed": 0,
        "floor": f"std floored at {STD_FLOOR} x the std of all training entries",
        "legacy": "std + 1e-6 (sassha-optim 0.1.0)",
        "tasks": {},
    }
    for task, (load, epochs, batch) in loaders.items():
        variants: dict = {}
        for variant in ("legacy", "floor"):
            if variant == "legacy":
                with legacy_standardisation():
                    split = load()
            else:
                split = load()
            rows = {}
            for name in STANDARDISATION_OPTIMIZERS:
                torch.manual_seed(0)
                model = MLP(split.n_features, split.n_classes, (128, 128))
                res = train(model, name, split, seed=0, epochs=epochs, batch_size=batch)
                rows[name] = {
                    "test_accuracy": res.test_accuracy,
                    "test_loss": res.test_loss,
                    "train_loss": res.train_loss,
                }
                print(
                    f"[standardisation {task} {variant}] {name:8s} acc {res.test_accuracy:6.2f}  "
                    f"test loss {res.test_loss:.4f}  train loss {res.train_loss:.4f}",
                    flush=True,
                )
            variants[variant] = {
                "x_train_abs_max": float(split.x_train.abs().max()),
                "x_test_abs_max": float(split.x_test.abs().max()),
                "optimizers": rows,
            }
        out["tasks"][task] = {"epochs": epochs, "batch_size": batch, **variants}
    return out


# ----------------------------------------------------------------------------------------- (b)
def timing(quick: bool) -> dict:
    """Interleaved blocks of `block` steps (a multiple of k = 10, so each block holds the same
    number of Hessian refreshes); per optimizer the median over repeats of the block mean."""
    repeats, block, warmup = (3, 10, 3) if quick else (7, 20, 10)
    d_in, hidden, batch = 784, (256, 256), 128
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(batch, d_in, generator=gen), torch.randint(0, 10, (batch,), generator=gen)
    state = {}
    for name in TIMING_OPTIMIZERS:
        torch.manual_seed(0)
        model = MLP(d_in, 10, hidden)
        if name == "sam-adamw":  # SAM over AdamW: an Adam-type update like Sassha's, for context
            opt = SAM(model.parameters(), torch.optim.AdamW, rho=0.15, lr=1e-2, weight_decay=0.05)
        else:
            opt = build_optimizer(name, model.parameters())
        closure = make_closure(opt, model, x, y)
        for _ in range(warmup):
            opt.step(closure)
        state[name] = (opt, closure, [])
    for _ in range(repeats):
        for opt, closure, blocks in state.values():
            start = time.perf_counter()
            for _ in range(block):
                opt.step(closure)
            blocks.append((time.perf_counter() - start) / block)
    per_step = {name: statistics.median(blocks) for name, (_, _, blocks) in state.items()}
    return {
        "model": f"MLP {d_in}-{hidden[0]}-{hidden[1]}-10, batch {batch}, synthetic inputs",
        "repeats": repeats,
        "steps_per_block": block,
        "warmup_steps": warmup,
        "ms_per_step": {k: 1000 * v for k, v in per_step.items()},
        "blocks_ms": {k: [1000 * b for b in blocks] for k, (_, _, blocks) in state.items()},
        "ratio_to_adamw": {k: v / per_step["adamw"] for k, v in per_step.items()},
        "ratio_to_sam": {k: v / per_step["sam"] for k, v in per_step.items()},
        "target_sassha_k10_le_1.5x_adamw": per_step["sassha"] / per_step["adamw"] <= 1.5,
        "target_sassha_k10_le_1.05x_sam": per_step["sassha"] / per_step["sam"] <= 1.05,
    }


# ----------------------------------------------------------------------------------------- (c)
def _status_mib(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _memory_child(name: str, steps: int, queue) -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = MLP(784, 10, (1024, 1024))
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, 784, generator=gen), torch.randint(0, 10, (256,), generator=gen)
    opt = build_optimizer(name, model.parameters())
    closure = make_closure(opt, model, x, y)
    before = _status_mib("VmRSS")
    try:  # reset the peak RSS (VmHWM) so that imports do not hide the training peak (Linux >= 4.0)
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    for _ in range(steps):
        opt.step(closure)
    states = [
        opt.state,
        getattr(opt, "base_optimizer", opt).state,
    ]  # SAM keeps momentum in its base
    tensors = {
        id(v): v for st in states for s in st.values() for v in s.values() if torch.is_tensor(v)
    }
    queue.put(
        {
            "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "state_bytes": sum(v.numel() * v.element_size() for v in tensors.values()),
            "rss_before_mib": before,
            "peak_rss_mib": _status_mib("VmHWM"),
        }
    )


def memory(quick: bool) -> dict:
    ctx = mp.get_context("spawn")
    rows = {}
    for name in MEMORY_OPTIMIZERS:
        queue = ctx.Queue()
        proc = ctx.Process(target=_memory_child, args=(name, 3 if quick else 12, queue))
        proc.start()
        rows[name] = queue.get(timeout=300)
        proc.join(timeout=60)
        rows[name]["peak_rss_increase_mib"] = (
            rows[name]["peak_rss_mib"] - rows[name]["rss_before_mib"]
        )
        print(
            f"[memory] {name:10s} state {rows[name]['state_bytes'] / 2**20:7.2f} MiB  "
            f"peak RSS +{rows[name]['peak_rss_increase_mib']:.1f} MiB",
            flush=True,
        )
    adamw = rows["adamw"]
    for row in rows.values():
        row["state_ratio_to_adamw"] = row["state_bytes"] / adamw["state_bytes"]
        row["state_over_params"] = row["state_bytes"] / row["param_bytes"]
    return {"model": "MLP 784-1024-1024-10, batch 256, fp32", "optimizers": rows}


# ----------------------------------------------------------------------------------------- (f)
RSS_CONFIGS = {
    "sassha k=10, documented closure": ("sassha", "backward", {}),
    "sassha k=1, documented closure": ("sassha", "backward", {"lazy_hessian": 1}),
    "sassha k=10, loss-only closure": ("sassha", "loss", {}),
    "adamw (reference)": ("adamw", "backward", {}),
    "control: SGD, backward(create_graph=True), no zero_grad": ("sgd", "leak", {"lr": 1e-5}),
}


def _rss_child(
    name: str, closure_kind: str, overrides: dict, steps: int, every: int, queue
) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = MLP(784, 10, (256, 256))
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(128, 784, generator=gen), torch.randint(0, 10, (128,), generator=gen)
    opt = build_optimizer(name, model.parameters(), overrides)
    loss_fn = torch.nn.functional.cross_entropy
    if closure_kind == "backward":
        closure = make_closure(opt, model, x, y)
    elif closure_kind == "loss":

        def closure():
            return loss_fn(model(x), y)

    samples = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(1, steps + 1):
            if closure_kind == "leak":  # the graph-carrying gradients accumulate step after step
                loss_fn(model(x), y).backward(create_graph=True)
                opt.step()
            else:
                opt.step(closure)
            if step % every == 0 or step == 1:
                samples.append((step, _status_mib("VmRSS")))
    queue.put(
        {
            "samples": samples,
            "cycle_warnings": sum("reference cycle" in str(w.message) for w in caught),
        }
    )


def rss(quick: bool) -> dict:
    """VmRSS over a long run, one fresh process per configuration."""
    ctx = mp.get_context("spawn")
    steps, every = (200, 20) if quick else (2000, 50)
    rows = {}
    for label, (name, kind, overrides) in RSS_CONFIGS.items():
        n = min(steps, 500) if kind == "leak" else steps
        queue = ctx.Queue()
        proc = ctx.Process(target=_rss_child, args=(name, kind, overrides, n, every, queue))
        proc.start()
        row = queue.get(timeout=1800)
        proc.join(timeout=60)
        pts = [(s, r) for s, r in row["samples"] if s >= n // 10]
        xs, ys = [s for s, _ in pts], [r for _, r in pts]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)
        row.update(
            {
                "optimizer": name,
                "closure": kind,
                "overrides": overrides,
                "steps": n,
                "rss_at_10pct_mib": ys[0],
                "rss_at_end_mib": ys[-1],
                "growth_mib": ys[-1] - ys[0],
                "slope_mib_per_1000_steps": 1000 * slope,
            }
        )
        rows[label] = row
        print(
            f"[rss] {label:55s} {ys[0]:7.1f} -> {ys[-1]:7.1f} MiB over steps {xs[0]}-{n} "
            f"(slope {1000 * slope:+.2f} MiB/1000 steps, {row['cycle_warnings']} warnings)",
            flush=True,
        )
    return {
        "model": "MLP 784-256-256-10, batch 128, fp32, synthetic inputs",
        "steps": steps,
        "sample_every": every,
        "configs": rows,
    }


# ----------------------------------------------------------------------------------------- (e)
STARTUP_CONFIGS = {
    "no warm-up (0.2.0 default)": {"hessian_warmup": 0},
    "official (no warm-up)": {
        "hessian_warmup": 0,
        "bias_correction": "step",
        "hvp_point": "reference",
    },
    "warm-up k = 10 (0.3.0 default)": {},
    "official + warm-up k = 10": {"bias_correction": "step", "hvp_point": "reference"},
    "k = 1 (no laziness)": {"lazy_hessian": 1},
    "eps = 1e-2, no warm-up": {"hessian_warmup": 0, "eps": 1e-2},
}


def _cnn(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )


def _startup_run(split: Split, seed: int, steps: int, batch: int, kw: dict) -> dict:
    from sassha_optim import Sassha

    x = split.x_train.view(-1, 1, 28, 28)
    y = split.y_train
    model = _cnn(seed)
    params = list(model.parameters())
    opts = {"lr": 0.15, "rho": 0.2, "lazy_hessian": 10, "eps": 1e-4, "weight_decay": 5e-4 / 0.15}
    opt = Sassha(params, seed=seed, **{**opts, **kw})
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(x), generator=gen)
    losses, worst = [], {"max_step": 0.0}
    for t in range(steps):
        idx = order[(t * batch) % len(x) :][:batch]
        closure = make_closure(opt, model, x[idx], y[idx])
        before = torch.cat([p.detach().flatten() for p in params])
        losses.append(float(opt.step(closure)))
        change = (torch.cat([p.detach().flatten() for p in params]) - before).abs()
        c = int(change.argmax())
        if float(change[c]) > worst["max_step"]:
            states = [opt.state[p] for p in params]
            b2 = 0.999
            dhat = torch.cat(
                [
                    (s["exp_hessian_diag"] / (1 - b2 ** max(s["hessian_refreshes"], 1)))
                    .sqrt()
                    .flatten()
                    for s in states
                ]
            )
            mhat = torch.cat([(s["exp_avg"] / (1 - 0.9 ** s["step"])).flatten() for s in states])
            worst = {
                "max_step": float(change[c]),
                "at_step": t + 1,
                "dhat_alpha": float(dhat[c]),
                "mhat": float(mhat[c]),
                "coords_dhat_below_eps": int((dhat < opt.param_groups[0]["eps"]).sum()),
                "coords_step_above_1": int((change > 1).sum()),
            }
    from sassha_optim.training import evaluate

    test = evaluate(model, split.x_test.view(-1, 1, 28, 28), split.y_test)
    return {
        **worst,
        "n_params": sum(p.numel() for p in params),
        "loss_at_30": losses[29] if len(losses) >= 30 else None,
        "loss_at_end": losses[-1],
        "min_loss": min(losses),
        "test_accuracy": test["accuracy"],
        "hvp_calls": opt.hvp_calls,
    }


def startup(quick: bool) -> dict:
    seeds = [0] if quick else [0, 1, 2]
    steps, batch = (30, 128) if quick else (60, 256)
    if not MNIST.exists():
        return {"skipped": f"MNIST not found (set SASSHA_OPTIM_DATA_DIR); looked in {MNIST.name}"}
    split = load_folder(MNIST, max_train=batch * 20, max_test=2000, seed=0)
    out: dict = {
        "task": f"MNIST CNN (conv16-pool-conv32-pool-linear, no batch norm), {len(split.x_train)} "
        f"train images, held-out {len(split.x_test)} test images, batch {batch}, {steps} steps",
        "settings": "lr 0.15, rho 0.2, k 10, eps 1e-4, weight decay 5e-4/0.15 (README settings)",
        "seeds": seeds,
        "configs": {},
    }
    for name, kw in STARTUP_CONFIGS.items():
        runs = [_startup_run(split, seed, steps, batch, kw) for seed in seeds]
        out["configs"][name] = {"options": kw, "runs": runs}
        print(name, [(r["max_step"], r["loss_at_end"]) for r in runs], flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1 seed, few epochs, few repeats; writes results/quick/, no README render",
    )
    parser.add_argument(
        "--only",
        default="accuracy,timing,memory,standardisation,startup,rss",
        help="comma-separated subset of accuracy,timing,memory,standardisation,startup,rss "
        "(default: all)",
    )
    parser.add_argument("--no-render", action="store_true", help="do not rewrite the README table")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
    torch.set_num_threads(1)
    command = "python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    common = {
        "command": command.strip(),
        "sassha_optim": __version__,
        "machine": machine(),
        "quick": args.quick,
    }
    jobs = {
        "accuracy": accuracy,
        "timing": timing,
        "memory": memory,
        "standardisation": standardisation,
        "startup": startup,
        "rss": rss,
    }
    for name in args.only.split(","):
        start = time.perf_counter()
        payload = jobs[name](args.quick)
        extra = {"paper_reported": PAPER_REPORTED} if name == "accuracy" else {}
        write(
            name,
            {**common, "wall_time_s": time.perf_counter() - start, **extra, **payload},
            args.quick,
        )
    if not (args.no_render or args.quick):
        subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
