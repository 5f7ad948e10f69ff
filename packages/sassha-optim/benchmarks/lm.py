"""Language-model benchmark: the paper's GPT-2 pre-training comparison (Sec. 5), scaled down to a
character-level transformer on tinyshakespeare, on CPU.

Protocol (all numbers are flags):

- data: ``input.txt`` of tinyshakespeare (``--data``, default ``../shared/data/tinyshakespeare`` beside
  the repository, or ``$ICML25_DATA/tinyshakespeare``), characters as tokens, split by position:
  the first 85 % train, the next 5 % a selection split (learning rates are chosen there), the last
  10 % validation (reported; used for nothing else).
- model: a decoder-only transformer (``--layers`` 2, ``--width`` 64, 4 heads, context ``--context``
  64, pre-LayerNorm, GELU MLP ×4, learned positions, no dropout), written here with explicit
  masked softmax attention (second derivatives through it are exact).
- budget: every optimizer gets the same number of gradient evaluations (``--grad-evals``; one
  forward+backward = 1, a Hessian-vector product = 1 more), so AdamW makes G steps, SAM-AdamW G/2,
  Sophia-H (k = 10) about G/1.1 and Sassha (k = 10) about G/2.1. Batch 32 × 64 tokens; learning rate
  warm-up over the first 10 % of the steps, then cosine decay to 10 %; decoupled weight decay on
  matrices only (as nanoGPT and the official GPT-2 trainer).
- optimizers: AdamW (betas 0.9/0.99, λ 0.1), SAM-AdamW (same, ρ 0.05), Sophia-H (betas 0.965/0.99,
  γ 0.01, k 10, λ 0.1), Sassha with the paper's GPT-2 settings where they transfer (betas 0.965/0.99,
  ρ 0.02, k 10, eps 1e-4, λ 2e-4) and its default α = 0.5 and ``bias_correction="refresh"``. The peak
  learning rate of each is selected from a grid (``LR_GRIDS``: 3 values, plus one beyond the edge
  the first selection chose) on seed 0 by the selection-split loss at the end of the budget; the
  selected values are written to the JSON and used for all seeds.
- metrics: validation loss (mean cross-entropy per character, nats) on the whole validation split at
  the end (equal gradient evaluations) and, from the curves, at equal wall time (the shortest run's
  total time; under a shared CPU wall times are noisy); ``render.py`` draws the curves into
  ``results/lm_validation_loss.png``.
  Trivial baselines: the uniform model (ln V) and the unigram model of the training characters.

Writes ``results/lm.json`` after every run (``--resume`` skips finished runs).
Usage: ``python benchmarks/lm.py [--quick] [--resume]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from _common import machine, summarize
from sassha_optim import Sassha, __version__
from sassha_optim._baselines import SAM, SophiaH
from torch import Tensor, nn

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DATA = Path(os.environ.get("ICML25_DATA", HERE.parents[2].parent / "shared" / "data"))

# A 3-point grid each; the first full run selected an edge value for every optimizer, so each grid
# got one more value beyond that edge (`--resume` ran only the new candidates, on seed 0).
LR_GRIDS = {
    "adamw": [1e-3, 3e-3, 1e-2, 3e-2],
    "sam-adamw": [1e-3, 3e-3, 1e-2, 3e-2],
    "sophia-h": [1e-4, 3e-4, 1e-3, 3e-3],
    "sassha": [0.03, 0.1, 0.3, 1.0],
}
CONFIGS = {
    "adamw": {"betas": (0.9, 0.99), "weight_decay": 0.1},
    "sam-adamw": {"betas": (0.9, 0.99), "weight_decay": 0.1, "rho": 0.05},
    "sophia-h": {
        "betas": (0.965, 0.99),
        "weight_decay": 0.1,
        "clip_threshold": 0.01,
        "eps": 1e-4,
        "update_period": 10,
    },
    "sassha": {
        "betas": (0.965, 0.99),
        "weight_decay": 2e-4,
        "rho": 0.02,
        "lazy_hessian": 10,
        "eps": 1e-4,
    },
}


# ----------------------------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, context: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)
        for m in self.modules():
            if isinstance(m, nn.Linear | nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx: Tensor) -> Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


def lm_loss(model: nn.Module, batch: Tensor) -> Tensor:
    logits = model(batch[:, :-1])
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)
    )


@torch.no_grad()
def mean_loss(model: nn.Module, blocks: Tensor, batch: int = 64) -> float:
    """Mean per-character cross-entropy over non-overlapping blocks (all predictions weighted equally)."""
    total, n = 0.0, 0
    for i in range(0, len(blocks), batch):
        b = blocks[i : i + batch]
        total += float(lm_loss(model, b)) * b.shape[0]
        n += b.shape[0]
    return total / n


def as_blocks(tokens: Tensor, context: int, limit: int | None = None) -> Tensor:
    n = (len(tokens) - 1) // context
    blocks = torch.stack([tokens[i * context : i * context + context + 1] for i in range(n)])
    return blocks[:limit] if limit else blocks


# ----------------------------------------------------------------------------------------- train
def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay = [p for p in model.parameters() if p.dim() >= 2 and not _is_embedding(model, p)]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def _is_embedding(model: nn.Module, p: Tensor) -> bool:
    return any(p is m.weight for m in model.modules() if isinstance(m, nn.Embedding))


def build(name: str, model: nn.Module, lr: float, seed: int) -> tuple[torch.optim.Optimizer, int]:
    """Optimizer and its mean cost per step in gradient evaluations ×10 (k = 10 refreshes)."""
    cfg = dict(CONFIGS[name])
    groups = param_groups(model, cfg.pop("weight_decay"))
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, **cfg), 10
    if name == "sam-adamw":
        return SAM(groups, torch.optim.AdamW, lr=lr, **cfg), 20
    if name == "sophia-h":
        return SophiaH(groups, lr=lr, seed=seed, **cfg), 11
    return Sassha(groups, lr=lr, seed=seed, **cfg), 21


def run_one(name: str, lr: float, seed: int, data: dict, args) -> dict:
    torch.manual_seed(seed)
    model = TinyGPT(data["vocab"], args.context, args.width, args.layers, args.heads)
    opt, cost10 = build(name, model, lr, seed)
    steps = args.grad_evals * 10 // cost10
    warm = max(1, steps // 10)

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        progress = (step - warm) / max(1, steps - warm)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    sched = torch.optim.lr_scheduler.LambdaLR(
        opt.base_optimizer if isinstance(opt, SAM) else opt, factor
    )
    train = data["train"]
    gen = torch.Generator().manual_seed(seed)
    eval_every = max(1, steps // args.evals)
    curve: list[dict] = []
    evals_done, elapsed = 0, 0.0
    for step in range(steps):
        start = time.perf_counter()
        offsets = torch.randint(0, len(train) - args.context - 1, (args.batch,), generator=gen)
        batch = torch.stack([train[o : o + args.context + 1] for o in offsets.tolist()])

        def closure(batch: Tensor = batch) -> Tensor:
            opt.zero_grad(set_to_none=True)
            loss = lm_loss(model, batch)
            loss.backward(create_graph=bool(getattr(opt, "create_graph", False)))
            return loss

        if name == "adamw":
            opt.zero_grad(set_to_none=True)
            loss = lm_loss(model, batch)
            loss.backward()
            opt.step()
        else:
            loss = opt.step(closure)  # type: ignore[assignment]
        sched.step()
        elapsed += time.perf_counter() - start
        if not math.isfinite(float(loss.detach())):
            curve.append(
                {"step": step + 1, "grad_evals": None, "seconds": elapsed, "val": math.nan}
            )
            break
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            passes = 2 if name in ("sam-adamw", "sassha") else 1
            evals_done = (step + 1) * passes + int(getattr(opt, "hvp_calls", 0))
            curve.append(
                {
                    "step": step + 1,
                    "grad_evals": evals_done,
                    "seconds": elapsed,  # training time only (evaluation excluded)
                    "val": mean_loss(model, data["val_probe"]),
                    "train_batch_loss": float(loss.detach()),
                }
            )
    return {
        "seed": seed,
        "lr": lr,
        "steps": steps,
        "grad_evals": evals_done,
        "seconds": elapsed,
        "hvp_calls": int(getattr(opt, "hvp_calls", 0)),
        "select_loss": mean_loss(model, data["select"]),
        "val_loss": mean_loss(model, data["val"]),
        "curve": curve,
    }


def loss_at_time(curve: list[dict], seconds: float) -> float:
    """Validation-probe loss at the last evaluation not later than ``seconds`` of training."""
    done = [c["val"] for c in curve if c["seconds"] <= seconds + 1e-9]
    return done[-1] if done else math.nan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA / "tinyshakespeare")
    parser.add_argument("--optimizers", default=",".join(CONFIGS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--grad-evals", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--evals", type=int, default=15, help="validation evaluations per run")
    parser.add_argument("--probe-blocks", type=int, default=256, help="val blocks for the curves")
    parser.add_argument("--quick", action="store_true", help="smoke run (writes results/quick/)")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--no-render", action="store_true", help="do not rewrite the README")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.quick:
        args.grad_evals, args.seeds, args.evals, args.probe_blocks = 60, "0", 3, 16
    text_path = args.data / "input.txt" if args.data.is_dir() else args.data
    if not text_path.exists():
        print(f"tinyshakespeare not found at {text_path} (pass --data DIR)", file=sys.stderr)
        return 2
    text = text_path.read_text(encoding="utf-8")
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    tokens = torch.tensor([index[c] for c in text], dtype=torch.long)
    n = len(tokens)
    a, b = int(0.85 * n), int(0.90 * n)
    train, select, val = tokens[:a], tokens[a:b], tokens[b:]
    counts = torch.bincount(train, minlength=len(chars)).double() + 1.0  # add-one smoothing
    logp = (counts / counts.sum()).log()
    data = {
        "vocab": len(chars),
        "train": train,
        "select": as_blocks(select, args.context),
        "val": as_blocks(val, args.context),
        "val_probe": as_blocks(val, args.context)[
            :: max(1, len(val) // args.context // args.probe_blocks)
        ][: args.probe_blocks],
    }
    folder = RESULTS / "quick" if args.quick else RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    out_path = folder / "lm.json"
    seeds = [int(s) for s in args.seeds.split(",")]
    names = args.optimizers.split(",")
    argv_used = sys.argv[1:] if argv is None else argv
    n_params = sum(
        p.numel()
        for p in TinyGPT(len(chars), args.context, args.width, args.layers, args.heads).parameters()
    )
    payload: dict = {
        "command": ("python benchmarks/lm.py " + " ".join(argv_used)).strip(),
        "sassha_optim": __version__,
        "machine": machine(),
        "protocol": {
            "data": f"tinyshakespeare, {n} characters, vocabulary {len(chars)}; by position: "
            f"train {len(train)}, selection {len(select)}, validation {len(val)}",
            "model": f"decoder-only transformer, {args.layers} layers, width {args.width}, "
            f"{args.heads} heads, context {args.context}, {n_params} parameters",
            "batch": f"{args.batch} x {args.context} tokens",
            "grad_evals": args.grad_evals,
            "schedule": "linear warm-up over 10% of the steps, cosine to 10% of the peak",
            "configs": {
                k: {kk: list(v) if isinstance(v, tuple) else v for kk, v in c.items()}
                for k, c in CONFIGS.items()
            },
            "lr_grids": LR_GRIDS,
            "selection": "peak lr per optimizer on seed 0 by the selection-split loss at the end",
            "seeds": seeds,
            "curves": f"validation loss on {len(data['val_probe'])} evenly spaced validation blocks; "
            "final numbers on the whole validation split",
        },
        "baselines": {
            "uniform": math.log(len(chars)),
            "unigram": float(-(logp[val]).mean()),
        },
        "optimizers": {},
        "selection": {},
    }
    if args.resume and out_path.exists():
        old = json.loads(out_path.read_text())
        payload["optimizers"], payload["selection"] = old["optimizers"], old["selection"]
        payload["wall_time_before_resume_s"] = old.get("wall_time_s", 0.0)
        payload["command_before_resume"] = old.get("command")
    total_start = time.perf_counter()

    def save() -> None:
        payload["wall_time_s"] = (
            time.perf_counter() - total_start + payload.get("wall_time_before_resume_s", 0.0)
        )
        out_path.write_text(json.dumps(payload, indent=1))

    for name in names:
        row = payload["optimizers"].setdefault(name, {"runs": []})
        cand = payload["selection"].setdefault(name, {})
        missing = [lr for lr in LR_GRIDS[name] if f"{lr:g}" not in cand]
        if missing or "lr" not in row:  # (a resumed run may extend a grid)
            for lr in missing:
                res = run_one(name, lr, seeds[0], data, args)
                cand[f"{lr:g}"] = res
                print(
                    f"[select] {name:9s} lr {lr:g}: selection loss {res['select_loss']:.4f} "
                    f"val {res['val_loss']:.4f} ({res['seconds']:.0f}s, {res['steps']} steps)",
                    flush=True,
                )
                save()
            best = min(
                LR_GRIDS[name],
                key=lambda lr: (
                    cand[f"{lr:g}"]["select_loss"]
                    if math.isfinite(cand[f"{lr:g}"]["select_loss"])
                    else math.inf
                ),
            )
            if row.get("lr") != best:  # new selection: its seed-0 run, then the other seeds
                row["lr"] = best
                row["runs"] = [cand[f"{best:g}"]]
            payload["selection"][name] = {
                k: {"select_loss": v["select_loss"]} for k, v in cand.items()
            }
            save()
        done = {r["seed"] for r in row["runs"]}
        for seed in seeds:
            if seed in done:
                continue
            res = run_one(name, row["lr"], seed, data, args)
            row["runs"].append(res)
            print(
                f"[run] {name:9s} seed {seed}: val {res['val_loss']:.4f} ({res['seconds']:.0f}s)",
                flush=True,
            )
            save()
        row["runs"].sort(key=lambda r: r["seed"])
        row["val_loss"] = summarize([r["val_loss"] for r in row["runs"]])
        row["seconds"] = summarize([r["seconds"] for r in row["runs"]])
        save()
    opts = payload["optimizers"]
    shortest = min(statistics.fmean(r["seconds"] for r in row["runs"]) for row in opts.values())
    payload["equal_wall_time_s"] = shortest
    for row in opts.values():
        row["val_probe_at_equal_time"] = summarize(
            [loss_at_time(r["curve"], shortest) for r in row["runs"]]
        )
        row["val_probe_at_end"] = summarize([r["curve"][-1]["val"] for r in row["runs"]])
    if {"sassha", "adamw"} <= set(opts):
        payload["targets"] = {
            "sassha_val_le_adamw_equal_grad_evals": opts["sassha"]["val_loss"]["mean"]
            <= opts["adamw"]["val_loss"]["mean"]
        }
    save()
    print(f"wrote {out_path.relative_to(HERE.parent)}", flush=True)
    if not (args.no_render or args.quick):
        import render  # README tables and results/lm_validation_loss.png from the JSON

        render.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
