"""Language-model QAT benchmark: a small character-level transformer on tiny Shakespeare, full
precision vs PTQ vs STE vs BinaryRelax vs PARQ at 2, 3 and 4 bits (greedy LSBQ levels), 3 seeds.

Protocol (all on CPU, one thread; see the README's results section):
1. selection on the validation split only (seed 100, never a reported seed): the learning rate of
   full precision, then for each QAT method per-tensor vs per-channel levels at 2 bits (the
   choice is kept at 3 and 4 bits);
2. seeds 0, 1, 2 with the selected values: validation and test loss (nats/char) of the exported
   (hard-quantized) model, bits per quantized weight of the exported file; PTQ = the
   full-precision runs rounded to the same levels; the unigram loss is the trivial baseline;
3. step time: every method's full training step (forward, backward, optimizer) and optimizer
   step, interleaved in one process, median over rounds, as a ratio to full precision's.

Writes benchmarks/results/lm.json (lm_quick.json with --quick), then renders the README tables.
Usage: python benchmarks/lm.py [--quick] [--data PATH]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import parq_optim
import torch
from _common import machine, summarize
from parq_optim.lm import LMConfig, build_lm, evaluate_lm, lm_quant_groups, train_lm
from parq_optim.text import CharCorpus, load_text, make_corpus, random_windows, unigram_loss

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DATA = Path(os.environ.get("ICML25_DATA", HERE.parents[2].parent / "shared" / "data"))
DEFAULT_TEXT = DATA / "tinyshakespeare" / "input.txt"
QAT = ["ste", "binaryrelax", "parq"]
BITS = [2, 3, 4]
SEEDS = [0, 1, 2]
SELECT_SEED = 100
LR_GRID = [1e-3, 3e-3, 1e-2]


def protocol(quick: bool) -> LMConfig:
    """The fixed part of every run (chosen to fit the time budget, not tuned)."""
    return LMConfig(
        quantizer="lsbq",
        d_model=64,
        n_layers=2,
        n_heads=4,
        context=32,
        batch_size=32,
        steps=150 if quick else 1500,
        lr_warmup=10 if quick else 50,
        weight_decay=0.01,
        grad_clip=1.0,
        quant_period=10,
        steepness=10.0,
        anneal_end_frac=0.9,
        eval_every=25 if quick else 100,
        eval_windows=32 if quick else 64,
    )


def synthetic_corpus(seed: int = 0, n: int = 200_000) -> CharCorpus:
    """An order-1 Markov chain over 16 symbols with a known entropy rate (the best possible loss):
    each symbol is followed by one of 4 successors with probabilities (0.55, 0.25, 0.15, 0.05)."""
    g = torch.Generator().manual_seed(seed)
    k = 16
    succ = torch.stack([torch.randperm(k, generator=g)[:4] for _ in range(k)])
    probs = torch.tensor([0.55, 0.25, 0.15, 0.05])
    draws = torch.multinomial(probs, n, replacement=True, generator=g)
    ids = [0]
    for d in draws[1:].tolist():
        ids.append(int(succ[ids[-1], d]))
    text = "".join("abcdefghijklmnop"[i] for i in ids)
    return make_corpus(text, name="synthetic-markov")


def entropy_rate() -> float:
    p = torch.tensor([0.55, 0.25, 0.15, 0.05], dtype=torch.float64)
    return float(-(p * p.log()).sum())


def run(cfg: LMConfig, corpus: CharCorpus, label: str) -> dict:
    t0 = time.perf_counter()
    r = train_lm(cfg, corpus)
    keep = {
        "val_loss": r["val_loss"],
        "test_loss": r["test_loss"],
        "storage": r.get("storage"),
        "quantized_fraction_end": r.get("quantized_fraction_end"),
        "history": r["history"],
        "wall_time_s": time.perf_counter() - t0,
    }
    print(
        f"{label:<44} val {r['val_loss']:.4f} test {r['test_loss']:.4f} "
        f"({keep['wall_time_s']:.0f} s)",
        flush=True,
    )
    keep["model"] = r["model"]
    return keep


@torch.no_grad()
def ptq_loss(model: torch.nn.Module, cfg: LMConfig, corpus: CharCorpus) -> dict:
    """Round a full-precision model's block weights to ``cfg``'s levels (no training)."""
    model = copy.deepcopy(model)
    quantizer = parq_optim.make_quantizer(cfg.quantizer)
    for p in lm_quant_groups(model, cfg.bits)[0]["params"]:
        q, _ = quantizer.quantize(p, cfg.bits, dim=-1 if cfg.per_channel else None)
        p.copy_(q)
    return {
        "val_loss": evaluate_lm(model, corpus.val, cfg.context),
        "test_loss": evaluate_lm(model, corpus.test, cfg.context),
    }


def select(base: LMConfig, corpus: CharCorpus) -> dict:
    """Hyper-parameters chosen on the validation split (seed ``SELECT_SEED``)."""
    lr_runs = {}
    for lr in LR_GRID:
        cfg = replace(base, method="fp", lr=lr, seed=SELECT_SEED)
        lr_runs[lr] = run(cfg, corpus, f"select fp lr={lr:g}")["val_loss"]
    lr = min(lr_runs, key=lr_runs.__getitem__)
    granularity: dict[str, dict] = {}
    for method in QAT:
        losses = {}
        for per_channel in (False, True):
            cfg = replace(
                base, method=method, bits=2, lr=lr, per_channel=per_channel, seed=SELECT_SEED
            )
            name = "per-channel" if per_channel else "per-tensor"
            losses[name] = run(cfg, corpus, f"select {method} 2-bit {name}")["val_loss"]
        granularity[method] = {
            "val_loss": losses,
            "selected": min(losses, key=losses.__getitem__),
        }
    return {
        "seed": SELECT_SEED,
        "split": "val",
        "lr": {"grid_val_loss": {str(k): v for k, v in lr_runs.items()}, "selected": lr},
        "granularity_at_2_bits": granularity,
    }


def main_runs(base: LMConfig, corpus: CharCorpus, sel: dict, seeds: list[int]) -> list[dict]:
    lr = sel["lr"]["selected"]
    rows: list[dict] = []
    fp_models = {}
    per_seed: dict[str, list] = {"val": [], "test": [], "history": []}
    for s in seeds:
        r = run(replace(base, method="fp", lr=lr, seed=s), corpus, f"fp seed {s}")
        fp_models[s] = r.pop("model")
        per_seed["val"].append(r["val_loss"])
        per_seed["test"].append(r["test_loss"])
        per_seed["history"].append(r["history"])
    rows.append(
        {
            "method": "fp",
            "bits": "fp",
            "per_channel": None,
            "val_loss": per_seed["val"],
            "test_loss": per_seed["test"],
            "val": summarize(per_seed["val"]),
            "test": summarize(per_seed["test"]),
            "bits_per_weight": 32.0,
            "history": per_seed["history"],
        }
    )
    for bits in BITS:
        for method in ["ptq", *QAT]:
            # PTQ rounds with PARQ's selected granularity (the same levels as the PARQ rows)
            key = "parq" if method == "ptq" else method
            per_channel = sel["granularity_at_2_bits"][key]["selected"] == "per-channel"
            cfg = replace(base, method=method, bits=bits, lr=lr, per_channel=per_channel)
            vals, tests, bpw, hist, qfrac = [], [], [], [], []
            for s in seeds:
                if method == "ptq":
                    r = ptq_loss(fp_models[s], replace(cfg, method="parq", seed=s), corpus)
                else:
                    r = run(replace(cfg, seed=s), corpus, f"{method} {bits}-bit seed {s}")
                    bpw.append(r["storage"]["bits_per_weight"])
                    hist.append(r["history"])
                    qfrac.append(r["quantized_fraction_end"])
                vals.append(r["val_loss"])
                tests.append(r["test_loss"])
            rows.append(
                {
                    "method": method,
                    "bits": bits,
                    "per_channel": per_channel,
                    "val_loss": vals,
                    "test_loss": tests,
                    "val": summarize(vals),
                    "test": summarize(tests),
                    "bits_per_weight": statistics.fmean(bpw) if bpw else None,
                    "quantized_fraction_end": qfrac or None,
                    "history": hist or None,
                }
            )
    return rows


def timing(base: LMConfig, corpus: CharCorpus, sel: dict, quick: bool) -> dict:
    """Median training-step and optimizer-step time of every method, interleaved in one process,
    as ratios to full precision's (the unquantized AdamW)."""
    lr = sel["lr"]["selected"]
    rounds, block = (3, 10) if quick else (15, 10)  # a block holds one level-set refresh
    setups = {"fp": replace(base, method="fp", lr=lr)}
    for bits in BITS:
        for method in QAT:
            pc = sel["granularity_at_2_bits"][method]["selected"] == "per-channel"
            setups[f"{method}/{bits}"] = replace(
                base, method=method, bits=bits, lr=lr, per_channel=pc
            )
    built = {k: build_lm(cfg, corpus.vocab_size) for k, cfg in setups.items()}
    g = torch.Generator().manual_seed(0)
    batch = random_windows(corpus.train, base.context, base.batch_size, g)

    def steps(key: str, n: int) -> tuple[float, float]:
        model, opt, _ = built[key]
        total = inner = 0.0
        for _ in range(n):
            t0 = time.perf_counter()
            opt.zero_grad()
            logits = model(batch[0])
            torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[1].flatten()).backward()
            t1 = time.perf_counter()
            opt.step()
            t2 = time.perf_counter()
            total += t2 - t0
            inner += t2 - t1
        return total / n, inner / n

    for key in built:  # warm-up: lazy optimizer state, first level sets
        steps(key, block)
    samples: dict[str, dict[str, list[float]]] = {k: {"step": [], "opt": []} for k in built}
    for i in range(rounds):
        order = list(built)
        order = order[i % len(order) :] + order[: i % len(order)]  # rotate: load hits all alike
        for key in order:
            step_s, opt_s = steps(key, block)
            samples[key]["step"].append(step_s)
            samples[key]["opt"].append(opt_s)
    med = {k: {m: statistics.median(v[m]) for m in v} for k, v in samples.items()}
    rows = []
    for key, m in med.items():
        method, _, bits = key.partition("/")
        rows.append(
            {
                "method": method,
                "bits": int(bits) if bits else "fp",
                "median_step_s": m["step"],
                "median_opt_step_s": m["opt"],
                "step_ratio_to_fp": m["step"] / med["fp"]["step"],
                "opt_step_ratio_to_fp": m["opt"] / med["fp"]["opt"],
            }
        )
    return {"rounds": rounds, "steps_per_block": block, "rows": rows, "samples_s": samples}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="150 steps, 1 seed, fewer rounds")
    ap.add_argument(
        "--data",
        default=None,
        help="a UTF-8 text file, or 'synthetic' (an order-1 Markov chain with a known entropy "
        "rate) (default: ../shared/data/tinyshakespeare/input.txt beside the repository)",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = " ".join(
        ["python", "benchmarks/lm.py", *(argv if argv is not None else sys.argv[1:])]
    )
    t0 = time.perf_counter()
    if args.data == "synthetic":
        corpus, data_name, best = synthetic_corpus(), "synthetic-markov", entropy_rate()
    else:
        path = Path(args.data) if args.data else DEFAULT_TEXT
        if not path.is_file():
            print(f"no text file at {path}: pass --data PATH or --data synthetic", file=sys.stderr)
            return 2
        corpus, data_name, best = load_text(path), path.parent.name or path.name, None
    base = protocol(args.quick)
    seeds = SEEDS[:1] if args.quick else SEEDS
    print(f"data {data_name}: vocab {corpus.vocab_size}, splits {len(corpus.train)}/"
          f"{len(corpus.val)}/{len(corpus.test)} characters", flush=True)  # fmt: skip
    sel = select(base, corpus)
    rows = main_runs(base, corpus, sel, seeds)
    tim = timing(base, corpus, sel, args.quick)
    n_params = sum(p.numel() for p in build_lm(base, corpus.vocab_size)[0].parameters())
    out = {
        "data": data_name,
        "splits": {
            "train": len(corpus.train),
            "val": len(corpus.val),
            "test": len(corpus.test),
            "rule": "contiguous: first 90% train, next 5% validation, last 5% test",
        },
        "vocab_size": corpus.vocab_size,
        "entropy_rate": best,
        "unigram": {
            "val_loss": unigram_loss(corpus, "val"),
            "test_loss": unigram_loss(corpus, "test"),
        },
        "protocol": {k: v for k, v in asdict(base).items() if k not in ("method", "bits", "seed")},
        "model": f"CharTransformer: {base.n_layers} layers, d_model {base.d_model}, "
        f"{base.n_heads} heads, context {base.context}; {n_params} parameters",
        "quantized": "every nn.Linear weight of the blocks (qkv, proj, fc, out); embeddings, "
        "LayerNorms, biases and the output head in full precision",
        "seeds": seeds,
        "spread": "sample standard deviation (ddof=1) over the seeds; null for one seed",
        "selection": sel,
        "rows": rows,
        "timing": tim,
        "command": command,
        "quick": args.quick,
        "machine": machine(),
        "wall_time_s": time.perf_counter() - t0,
    }
    name = "lm_quick" if args.quick else "lm"
    if args.data == "synthetic":
        name += "_synthetic"
    (RESULTS / f"{name}.json").write_text(json.dumps(out, indent=1))
    print(f"wrote results/{name}.json in {out['wall_time_s'] / 60:.1f} min", flush=True)
    subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
