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
- arms: AdamW (betas 0.9/0.99, λ 0.1), SAM-AdamW (same, ρ 0.05), Sophia-H (betas 0.965/0.99,
  γ 0.01, k 10, λ 0.1), **Sassha** with the package defaults (α = ½, ``bias_correction="refresh"``)
  and the paper's GPT-2 betas 0.965/0.99, ρ 0.02, k 10, eps 1e-4, λ 2e-4, and **Sassha (paper
  recipe)**, ``Sassha.paper_lm``: α = 1 for the first 4 % of the steps then 0.8, no bias
  correction, ρ = 0 during those steps, gradient clipping 1.0 before the perturbation and before
  the update. Decoupled weight decay on matrices only (as nanoGPT and the official trainer).
  Every arm uses the recipe's schedule (``paper_lm_schedule``): linear warm-up over the first 4 %
  of its steps, then cosine decay to 1.5e-5/0.3 of the peak.
- budgets: *equal iterations* (the paper's convention): every arm makes ``--steps`` steps;
  *equal gradient evaluations* (a forward+backward = 1, a Hessian-vector product = 1 more):
  every arm gets the evaluations default Sassha uses in ``--steps`` steps (AdamW makes about
  2.1× as many steps, SAM-AdamW about 1.05×, Sophia-H about 1.9×); *equal wall time*: from the
  validation curves of the equal-gradient-evaluation runs, the loss of each run at the shortest
  mean training time of the arms (the longer runs are cut before the end of their schedule).
- selection: the peak learning rate of each arm and budget on seed 0 by the selection-split loss
  at the end, from a grid (``LR_GRIDS``) that is extended by one value (×3 or ÷3) while the best
  value sits on its edge; the selected values are written to the JSON and used for all seeds.
- metrics: validation loss (mean cross-entropy per character, nats) on the whole validation split
  at the end; paired differences over seeds (Sassha − AdamW, ...) with 95 % t intervals and the
  verdicts *ahead* (interval below 0: lower loss), *tie*, *behind*. Trivial baselines: the uniform
  model (ln V) and the unigram model of the training characters.
- Hessian noise: at the batch used, the relative variance of the one-probe Hutchinson estimate of
  the Hessian diagonal across probes (fixed batch) and of its mean across batches, at the weights
  after a short AdamW run, for ``--probe-batches`` batch sizes.

Writes ``results/lm.json`` after every run (``--resume`` skips finished runs).
Usage: ``python benchmarks/lm.py [--quick] [--resume]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
from _common import machine, paired_interval, summarize
from sassha_optim import NonFiniteError, Sassha, __version__, paper_lm_schedule
from sassha_optim._baselines import SAM, SophiaH
from sassha_optim.functional import rademacher_like
from torch import Tensor, nn

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DATA = Path(os.environ.get("ICML25_DATA", HERE.parents[2].parent / "shared" / "data"))

# Starting grids (×3 spacing); `select` extends a grid while its best value is on an edge.
LR_GRIDS = {
    "adamw": [0.01, 0.03, 0.1],
    "sam-adamw": [0.003, 0.01, 0.03],
    "sophia-h": [1e-4, 3e-4, 1e-3],
    "sassha": [0.1, 0.3, 1.0],
    "sassha-paper": [0.03, 0.1, 0.3],
}
MAX_EXTENSIONS = 3
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
    "sassha-paper": {"preset": "Sassha.paper_lm(groups, total_steps=steps, lr=lr, seed=seed)"},
}
NAMES = {
    "adamw": "AdamW",
    "sam-adamw": "SAM-AdamW",
    "sophia-h": "Sophia-H (k=10)",
    "sassha": "Sassha (k=10, package defaults)",
    "sassha-paper": "Sassha (k=10, paper's GPT-2 recipe)",
}
# Paper (reported): GPT-2 small on OpenWebText, validation loss (LOG-postech/Sassha,
# language_tasks/modeling/README.md)
PAPER_GPT2 = {
    "AdamW": 2.9622,
    "SAM-AdamW": 2.9558,
    "Sophia-G": 2.9307,
    "Sophia-G + SAM": 2.9319,
    "SPlus": 2.9435,
    "Sassha": 2.9173,
}
# Diagnostic of the Hessian noise: the better Sassha arm (by its seed-0 selection score) again
# with more probes per refresh, at its selected lr and equal iterations.
PROBES_SUFFIX, DIAGNOSTIC_PROBES = "+probes4", 4
PAIRS = [
    ("sassha+probes4", "sassha"),
    ("sassha-paper+probes4", "sassha-paper"),
    ("sassha", "adamw"),
    ("sassha-paper", "adamw"),
    ("sassha-paper", "sassha"),
    ("sassha", "sam-adamw"),
    ("sassha-paper", "sam-adamw"),
    ("sassha", "sophia-h"),
    ("sassha-paper", "sophia-h"),
]


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


def load_data(text_path: Path, context: int, probe_blocks: int) -> tuple[dict, int, list, Tensor]:
    """Tokens of tinyshakespeare split by position (85 / 5 / 10 %), as blocks of ``context + 1``;
    returns (data, characters, vocabulary, add-one-smoothed unigram log-probabilities)."""
    text = text_path.read_text(encoding="utf-8")
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    tokens = torch.tensor([index[c] for c in text], dtype=torch.long)
    n = len(tokens)
    a, b = int(0.85 * n), int(0.90 * n)
    train, select, val = tokens[:a], tokens[a:b], tokens[b:]
    counts = torch.bincount(train, minlength=len(chars)).double() + 1.0  # add-one smoothing
    logp = (counts / counts.sum()).log()
    val_blocks = as_blocks(val, context)
    data = {
        "vocab": len(chars),
        "train": train,
        "select": as_blocks(select, context),
        "val": val_blocks,
        "val_probe": val_blocks[:: max(1, len(val_blocks) // probe_blocks)][:probe_blocks],
        "select_tokens": select,
        "val_tokens": val,
    }
    return data, n, chars, logp


# ----------------------------------------------------------------------------------------- train
def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay = [p for p in model.parameters() if p.dim() >= 2 and not _is_embedding(model, p)]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def _is_embedding(model: nn.Module, p: Tensor) -> bool:
    return any(p is m.weight for m in model.modules() if isinstance(m, nn.Embedding))


def refreshes(steps: int, k: int = 10, warmup: int = 10) -> int:
    """Hessian refreshes of Sassha in ``steps`` steps (every step of the warm-up, then every k)."""
    return sum(1 for t in range(1, steps + 1) if t <= warmup or (t - 1) % k == 0)


def step_kind(name: str, t: int, steps: int) -> str:
    """Kind of step ``t`` (1-based) of arm ``name`` in a run of ``steps`` steps: its
    forward+backward passes and whether it makes a Hessian-vector product."""
    name = name.removesuffix(PROBES_SUFFIX)
    refresh = t <= 10 or (t - 1) % 10 == 0  # Sassha: Hessian warm-up k = 10, then every k
    if name == "adamw":
        return "1 pass"
    if name == "sam-adamw":
        return "2 passes"
    if name == "sophia-h":  # HVP on steps 1, 11, 21, ...
        return "1 pass + HVP" if (t - 1) % 10 == 0 else "1 pass"
    passes = 2
    if name == "sassha-paper" and t <= round(0.04 * steps):  # ρ warm-up: one pass
        passes = 1
    return f"{passes} pass{'es' if passes > 1 else ''}" + (" + HVP" if refresh else "")


def modelled_seconds(cost: dict[str, float], name: str, steps: int, upto: int) -> float:
    """Modelled training time of the first ``upto`` steps of a run of ``steps`` steps, from the
    interleaved per-kind step costs of ``lm_step_cost.py``."""
    return sum(cost[step_kind(name, t, steps)] for t in range(1, upto + 1))


def steps_for(name: str, budget: str, steps: int, wall: dict | None = None) -> int:
    """Steps of arm ``name`` under ``budget`` ("iters", "grad_evals" or "wall_time", the last
    from ``lm_step_cost.json``) for ``--steps`` steps."""
    if budget == "iters" or name.startswith("sassha"):
        return steps
    if budget == "wall_time":
        if wall is None:
            raise ValueError("wall_time budget needs results/lm_step_cost.json")
        return int(wall["steps_at_equal_wall_time"][name])
    evals = 2 * steps + refreshes(steps)  # default Sassha's gradient evaluations
    if name == "adamw":
        return evals
    if name == "sam-adamw":
        return evals // 2
    s = int(evals / 1.1)  # Sophia-H: one HVP every 10 steps (steps 1, 11, ...)
    while s + math.ceil(s / 10) > evals:
        s -= 1
    return s


def build(name: str, model: nn.Module, lr: float, seed: int, steps: int) -> torch.optim.Optimizer:
    extra = {}
    if name.endswith(PROBES_SUFFIX):  # diagnostic: more Hutchinson probes per refresh
        name, extra = name[: -len(PROBES_SUFFIX)], {"n_samples": DIAGNOSTIC_PROBES}
    if name == "sassha-paper":
        groups = param_groups(model, 2e-4)
        return Sassha.paper_lm(groups, total_steps=steps, lr=lr, seed=seed, **extra)
    cfg = dict(CONFIGS[name])
    groups = param_groups(model, cfg.pop("weight_decay"))
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, **cfg)
    if name == "sam-adamw":
        return SAM(groups, torch.optim.AdamW, lr=lr, **cfg)
    if name == "sophia-h":
        return SophiaH(groups, lr=lr, seed=seed, **cfg)
    return Sassha(groups, lr=lr, seed=seed, **cfg, **extra)


def sample_batch(train: Tensor, batch: int, context: int, gen: torch.Generator) -> Tensor:
    offsets = torch.randint(0, len(train) - context - 1, (batch,), generator=gen)
    return torch.stack([train[o : o + context + 1] for o in offsets.tolist()])


def train_step(
    name: str, opt: torch.optim.Optimizer, model: nn.Module, batch: Tensor
) -> tuple[Tensor, int]:
    """One optimizer step of arm ``name`` on ``batch``; returns the loss and the forward+backward
    passes it made (Sassha: 2, or 1 during the ρ warm-up; SAM: 2; others 1)."""

    def closure() -> Tensor:
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(model, batch)
        loss.backward(create_graph=bool(getattr(opt, "create_graph", False)))
        return loss

    if name == "adamw":
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(model, batch)
        loss.backward()
        opt.step()
        return loss, 1
    passes = 1
    if isinstance(opt, Sassha):
        passes = 2 if opt._any_rho() else 1  # ρ warm-up: one pass
    elif isinstance(opt, SAM):
        passes = 2
    return opt.step(closure), passes  # type: ignore[return-value]


def run_one(name: str, lr: float, seed: int, steps: int, data: dict, args) -> dict:
    torch.manual_seed(seed)
    model = TinyGPT(data["vocab"], args.context, args.width, args.layers, args.heads)
    opt = build(name, model, lr, seed, steps)
    sched = paper_lm_schedule(opt.base_optimizer if isinstance(opt, SAM) else opt, steps)
    train = data["train"]
    gen = torch.Generator().manual_seed(seed)
    eval_every = max(1, steps // args.evals)
    curve: list[dict] = []
    grad_evals, elapsed, diverged = 0, 0.0, False
    for step in range(steps):
        start = time.perf_counter()
        batch = sample_batch(train, args.batch, args.context, gen)
        passes, loss = 1, torch.tensor(math.nan)
        try:
            loss, passes = train_step(name, opt, model, batch)
        except NonFiniteError:
            diverged = True
        sched.step()
        elapsed += time.perf_counter() - start
        grad_evals += passes
        if diverged or not math.isfinite(float(loss.detach())):
            diverged = True
            curve.append(
                {"step": step + 1, "grad_evals": None, "seconds": elapsed, "val": math.nan}
            )
            break
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            curve.append(
                {
                    "step": step + 1,
                    "grad_evals": grad_evals + int(getattr(opt, "hvp_calls", 0)),
                    "seconds": elapsed,  # training time only (evaluation excluded)
                    "val": mean_loss(model, data["val_probe"]),
                    "train_batch_loss": float(loss.detach()),
                }
            )
    select = math.nan if diverged else mean_loss(model, data["select"])
    val = math.nan if diverged else mean_loss(model, data["val"])
    return {
        "arm": name,
        "seed": seed,
        "lr": lr,
        "steps": steps,
        "diverged": diverged,
        "grad_evals": grad_evals + int(getattr(opt, "hvp_calls", 0)),
        "seconds": elapsed,
        "hvp_calls": int(getattr(opt, "hvp_calls", 0)),
        "select_loss": select,
        "val_loss": val,
        "curve": curve,
    }


def _next_lr(lr: float, up: bool) -> float:
    """The neighbour of ``lr`` on the 1-3-10 grid."""
    mant = float(f"{lr:.1e}".split("e")[0])
    factor = (3.0 if mant < 2 else 10 / 3) if up else (1 / 3 if mant > 2 else 0.3 / 1)
    return float(f"{lr * factor:.1g}")


# ------------------------------------------------------------------------------ Hessian noise
def probe_variance(data: dict, args, batches: list[int], seed: int = 0) -> dict:
    """Relative variance of the one-probe Hutchinson diagonal across probes and across batches.

    At the weights after ``args.probe_warm_steps`` AdamW steps (lr 0.01, seed ``seed``), for each
    batch size B: ``nb`` batches × ``npr`` Rademacher probes, ``Ĥ_{b,j} = z_j ⊙ H_b z_j``. Per
    coordinate, ``v_probe`` = mean over batches of the variance over probes (the noise of one
    probe at a fixed batch), ``v_batch`` = variance over batches of the probe mean minus
    ``v_probe / npr`` (the sampling noise of the batch), ``s = (grand mean)²``. Reported as
    ``Σ v / Σ s`` over all coordinates (relative variance of a single estimate), and for the
    D that Sassha keeps: an EMA with β2 = 0.99 averages about n_eff = min(refreshes,
    (1 + β2)/(1 − β2)) estimates, so its relative variance is about (v_probe + v_batch)/n_eff/s.
    """
    torch.manual_seed(seed)
    model = TinyGPT(data["vocab"], args.context, args.width, args.layers, args.heads)
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=0.01, betas=(0.9, 0.99))
    gen = torch.Generator().manual_seed(seed + 1000)
    for _ in range(args.probe_warm_steps):
        opt.zero_grad(set_to_none=True)
        lm_loss(model, sample_batch(data["train"], 32, args.context, gen)).backward()
        opt.step()
    params = list(model.parameters())
    zgen = torch.Generator().manual_seed(seed + 2000)
    out: dict = {
        "weights": f"after {args.probe_warm_steps} AdamW steps (lr 0.01, batch 32, seed {seed})",
        "batches": args.probe_nb,
        "probes": args.probe_np,
        "by_batch": {},
    }
    for b in batches:
        est = []  # [batch][probe] -> flat tensor
        for _ in range(args.probe_nb):
            batch = sample_batch(data["train"], b, args.context, gen)
            grads = torch.autograd.grad(lm_loss(model, batch), params, create_graph=True)
            row = [_one_probe(grads, params, zgen) for _ in range(args.probe_np)]
            est.append(torch.stack(row))
            del grads
        e = torch.stack(est)  # batches × probes × parameters
        v_probe = e.var(dim=1, unbiased=True).mean(0)
        v_batch = (e.mean(1).var(dim=0, unbiased=True) - v_probe / args.probe_np).clamp(min=0)
        s = e.mean((0, 1)).pow(2)
        rp, rb = float(v_probe.sum() / s.sum()), float(v_batch.sum() / s.sum())
        out["by_batch"][str(b)] = {
            "tokens": b * args.context,
            "rel_var_probe": rp,
            "rel_var_batch": rb,
            "probe_share": rp / (rp + rb) if rp + rb > 0 else math.nan,
        }
    return out


def _one_probe(grads: tuple[Tensor, ...], params: list[Tensor], zgen: torch.Generator) -> Tensor:
    """``z ⊙ Hz`` for one Rademacher probe, flattened (keeps the graph for the next probe)."""
    z = [rademacher_like(p, zgen) for p in params]
    hz = torch.autograd.grad(grads, params, grad_outputs=z, retain_graph=True)
    return torch.cat([(h * zi).reshape(-1) for h, zi in zip(hz, z)]).detach()


# ----------------------------------------------------------------------------------------- main
TASKS = [  # in order of importance, so that an interrupted run has the main rows first
    ("iters", "adamw"),
    ("iters", "sassha"),
    ("iters", "sassha-paper"),
    ("grad_evals", "adamw"),
    ("iters", "probes"),  # the Hessian-noise diagnostic (PROBES_SUFFIX)
    ("iters", "sam-adamw"),
    ("iters", "sophia-h"),
    ("grad_evals", "sam-adamw"),
    ("grad_evals", "sophia-h"),
    ("grad_evals", "sassha"),  # same runs as at equal iterations
    ("grad_evals", "sassha-paper"),
    # equal wall time (needs results/lm_step_cost.json): lr borrowed from equal evaluations
    ("wall_time", "adamw"),
    ("wall_time", "sam-adamw"),
    ("wall_time", "sophia-h"),
]


def _key(name: str, steps: int, lr: float, seed: int) -> str:
    return f"{name}|{steps}|{lr:g}|{seed}"


def _score(res: dict) -> float:
    return res["select_loss"] if math.isfinite(res["select_loss"]) else math.inf


def verdict(iv: dict) -> str:
    """For a difference of losses (arm − other): lower is better."""
    if iv["low"] is None:
        return "n/a"
    if iv["high"] < 0:
        return "ahead"
    if iv["low"] > 0:
        return "behind"
    return "tie"


def summarize_payload(payload: dict) -> None:
    """Rows per budget and paired differences from the runs so far; with the interleaved step
    costs (``step_cost``) also the modelled training time of every row and curve point."""
    runs = payload["runs"]
    seeds = payload["protocol"]["seeds"]
    for budget in ("grad_evals", "wall_time"):
        # Sassha's runs at equal evaluations and at equal wall time are its runs at equal iterations
        sel_b = payload["selection"].get(budget)
        if sel_b is None:
            continue
        for name in ("sassha", "sassha-paper"):
            if name not in sel_b and "lr" in payload["selection"]["iters"].get(name, {}):
                sel_b[name] = payload["selection"]["iters"][name]
    cost = payload.get("step_cost", {}).get("seconds_per_step")
    results: dict = {}
    for budget, arms in payload["selection"].items():
        for name, sel in arms.items():
            if "lr" not in sel:
                continue
            rs = [runs.get(_key(name, sel["steps"], sel["lr"], s)) for s in seeds]
            if any(r is None for r in rs):
                continue
            row = {
                "lr": sel["lr"],
                "steps": sel["steps"],
                "grad_evals": summarize([r["grad_evals"] for r in rs]),
                "hvp_calls": rs[0]["hvp_calls"],
                "val_loss": summarize([r["val_loss"] for r in rs]),
                "seconds": summarize([r["seconds"] for r in rs]),
                "diverged": sum(r["diverged"] for r in rs),
                "keys": [_key(name, sel["steps"], sel["lr"], s) for s in seeds],
            }
            base = name.removesuffix(PROBES_SUFFIX)
            if cost and base in cost:
                row["modelled_seconds"] = modelled_seconds(
                    cost[base], name, sel["steps"], sel["steps"]
                )
                row["curves_modelled_seconds"] = [  # [modelled s, val] per point, per seed
                    [
                        [modelled_seconds(cost[base], name, sel["steps"], c["step"]), c["val"]]
                        for c in runs[key]["curve"]
                        if c["grad_evals"] is not None
                    ]
                    for key in row["keys"]
                ]
            results.setdefault(budget, {})[name] = row
    payload["results"] = results
    paired: dict = {}
    for budget, rows in results.items():
        for a, b in PAIRS:
            if a in rows and b in rows:
                iv = paired_interval(rows[a]["val_loss"]["values"], rows[b]["val_loss"]["values"])
                iv["verdict"] = verdict(iv)
                paired.setdefault(budget, {})[f"{a} - {b}"] = iv
    payload["paired"] = paired
    # robustness: the same differences without the seeds where either arm stalled or diverged
    payload["outliers"] = outliers = _outliers(results)
    robust: dict = {}
    for budget, rows in results.items():
        for a, b in PAIRS:
            bad = set(outliers.get(budget, {}).get(a, [])) | set(
                outliers.get(budget, {}).get(b, [])
            )
            if a in rows and b in rows and bad:
                keep = [i for i in range(len(seeds)) if i not in bad]
                va, vb = rows[a]["val_loss"]["values"], rows[b]["val_loss"]["values"]
                iv = paired_interval([va[i] for i in keep], [vb[i] for i in keep])
                iv["verdict"] = verdict(iv)
                iv["without_seeds"] = sorted(seeds[i] for i in bad)
                robust.setdefault(budget, {})[f"{a} - {b}"] = iv
    payload["paired_without_outliers"] = robust


def _outliers(results: dict) -> dict:
    """Seeds whose final validation loss is more than 0.15 nats above the median of the arm's
    seeds (a stalled or diverged run), per budget and arm."""
    out: dict = {}
    for budget, rows in results.items():
        for name, row in rows.items():
            vals = row["val_loss"]["values"]
            finite = sorted(v for v in vals if math.isfinite(v))
            if not finite:
                continue
            med = (
                finite[len(finite) // 2]
                if len(finite) % 2
                else 0.5 * sum(finite[len(finite) // 2 - 1 : len(finite) // 2 + 1])
            )
            bad = [i for i, v in enumerate(vals) if not math.isfinite(v) or v > med + 0.15]
            if bad:
                out.setdefault(budget, {})[name] = bad
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA / "tinyshakespeare")
    parser.add_argument("--arms", default=",".join(CONFIGS), help="comma-separated arms")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=200, help="steps at equal iterations")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--evals", type=int, default=8, help="validation evaluations per run")
    parser.add_argument("--probe-blocks", type=int, default=128, help="val blocks for the curves")
    parser.add_argument("--probe-batches", default="32,64,128", help="batch sizes for the "
                        "Hutchinson-noise measurement ('none' skips it)")  # fmt: skip
    parser.add_argument("--probe-nb", type=int, default=4, help="batches per batch size")
    parser.add_argument("--probe-np", type=int, default=4, help="probes per batch")
    parser.add_argument("--probe-warm-steps", type=int, default=100)
    parser.add_argument(
        "--no-diagnostic",
        action="store_true",
        help=f"skip the Hessian-noise diagnostic (Sassha with {DIAGNOSTIC_PROBES} probes)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run (writes results/quick/)")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument(
        "--summarize-only",
        action="store_true",
        help="with --resume: run nothing, recompute the summaries of the JSON and render",
    )
    parser.add_argument("--no-render", action="store_true", help="do not rewrite the README")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.quick:
        args.steps, args.batch, args.seeds, args.evals, args.probe_blocks = 20, 8, "0,1", 2, 8
        args.probe_batches, args.probe_nb, args.probe_np, args.probe_warm_steps = "4,8", 2, 2, 3
    names = args.arms.split(",")
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        print(f"--arms: unknown {bad} (accepted: {', '.join(CONFIGS)})", file=sys.stderr)
        return 2
    text_path = args.data / "input.txt" if args.data.is_dir() else args.data
    if not text_path.exists():
        print(f"tinyshakespeare not found at {text_path} (pass --data DIR)", file=sys.stderr)
        return 2
    data, n, chars, logp = load_data(text_path, args.context, args.probe_blocks)
    train, select, val = data["train"], data["select_tokens"], data["val_tokens"]
    folder = RESULTS / "quick" if args.quick else RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    out_path = folder / "lm.json"
    seeds = [int(s) for s in args.seeds.split(",")]
    argv_used = sys.argv[1:] if argv is None else argv
    n_params = sum(
        p.numel()
        for p in TinyGPT(len(chars), args.context, args.width, args.layers, args.heads).parameters()
    )
    evals_budget = 2 * args.steps + refreshes(args.steps)
    cost_path = folder / "lm_step_cost.json"
    step_cost = json.loads(cost_path.read_text()) if cost_path.exists() else None
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
            "batch_size": args.batch,
            "steps": args.steps,
            "grad_evals_budget": evals_budget,
            "steps_at_equal_grad_evals": {
                k: steps_for(k, "grad_evals", args.steps) for k in CONFIGS
            },
            "equal_wall_time": "the modelled training time of default Sassha's steps, from "
            "per-step costs measured interleaved in one process (benchmarks/lm_step_cost.py); "
            "every other arm gets the steps that fit in it (its schedule spans them) at the lr "
            "selected at equal gradient evaluations (not reselected); Sassha's rows are its "
            "runs at equal iterations",
            "schedule": "paper_lm_schedule: linear warm-up over the first 4% of the steps, "
            "cosine to 1.5e-5/0.3 of the peak",
            "configs": {
                k: {kk: list(v) if isinstance(v, tuple) else v for kk, v in c.items()}
                for k, c in CONFIGS.items()
            },
            "lr_grids": LR_GRIDS,
            "selection": "peak lr per arm and budget on seed 0 by the selection-split loss at the "
            f"end; a grid whose best value is on an edge is extended (at most {MAX_EXTENSIONS} times)",
            "seeds": seeds,
            "curves": f"validation loss on {len(data['val_probe'])} evenly spaced validation "
            "blocks; final numbers on the whole validation split",
        },
        "baselines": {
            "uniform": math.log(len(chars)),
            "unigram": float(-(logp[val]).mean()),
        },
        "paper_reported": {
            "source": "LOG-postech/Sassha language_tasks/modeling/README.md (GPT-2 small, "
            "OpenWebText, 50k iterations, validation loss)",
            "val_loss": PAPER_GPT2,
        },
        "runs": {},
        "selection": {},
    }
    if step_cost is not None:
        payload["step_cost"] = {
            k: step_cost[k]
            for k in (
                "command",
                "protocol",
                "seconds_per_step",
                "samples",
                "min_max",
                "equal_wall_time_s",
                "steps_at_equal_wall_time",
                "modelled_seconds_at_budget",
            )
        }
    if args.resume and out_path.exists():
        old = json.loads(out_path.read_text())
        if (
            old["protocol"]["steps"] != args.steps
            or old["protocol"]["batch"] != payload["protocol"]["batch"]
        ):
            print("--resume: the JSON was written with other --steps/--batch", file=sys.stderr)
            return 2
        for key in ("runs", "selection", "probe_variance"):
            if key in old:
                payload[key] = old[key]
        payload["wall_time_before_resume_s"] = old.get("wall_time_s", 0.0)
        payload["commands_before_resume"] = [*old.get("commands_before_resume", []), old["command"]]
    total_start = time.perf_counter()

    def save() -> None:
        payload["wall_time_s"] = (
            time.perf_counter() - total_start + payload.get("wall_time_before_resume_s", 0.0)
        )
        summarize_payload(payload)
        out_path.write_text(json.dumps(payload, indent=1))

    if args.probe_batches != "none" and "probe_variance" not in payload:
        start = time.perf_counter()
        pv = probe_variance(data, args, [int(x) for x in args.probe_batches.split(",")])
        pv["seconds"] = time.perf_counter() - start
        payload["probe_variance"] = pv
        for bsz, r in pv["by_batch"].items():
            print(
                f"[hessian noise] batch {bsz}: relative variance across probes "
                f"{r['rel_var_probe']:.3g}, across batches {r['rel_var_batch']:.3g}",
                flush=True,
            )
        save()

    runs = payload["runs"]
    if args.summarize_only:
        if not args.resume:
            print("--summarize-only needs --resume", file=sys.stderr)
            return 2
        payload["command"] = payload["commands_before_resume"].pop()  # nothing was run
        payload["wall_time_s"] = payload.pop("wall_time_before_resume_s")
        summarize_payload(payload)
        out_path.write_text(json.dumps(payload, indent=1))
        if not (args.no_render or args.quick):
            import render

            render.main()
        return 0

    def run_cached(name: str, lr: float, seed: int, steps: int, tag: str) -> dict:
        key = _key(name, steps, lr, seed)
        if key not in runs:
            res = run_one(name, lr, seed, steps, data, args)
            runs[key] = res
            print(
                f"[{tag}] {name:12s} lr {lr:<7g} seed {seed} steps {steps}: selection "
                f"{res['select_loss']:.4f} val {res['val_loss']:.4f} ({res['seconds']:.0f}s"
                f"{', diverged' if res['diverged'] else ''})",
                flush=True,
            )
            save()
        return runs[key]

    for budget, name in TASKS:
        if name == "probes":
            bases = [
                n
                for n in ("sassha", "sassha-paper")
                if n in names and "lr" in payload["selection"]["iters"].get(n, {})
            ]
            if args.no_diagnostic or not bases:
                continue
            sels = payload["selection"]["iters"]
            base = min(bases, key=lambda n: sels[n]["scores"][f"{sels[n]['lr']:g}"])
            diag = base + PROBES_SUFFIX
            sels[diag] = {
                "steps": args.steps,
                "lr": sels[base]["lr"],
                "grid": [sels[base]["lr"]],
                "extended": [],
                "borrowed_from": base,
            }
            for seed in seeds:
                run_cached(diag, sels[base]["lr"], seed, args.steps, "diagnostic")
            save()
            continue
        if name not in names:
            continue
        if budget == "wall_time":
            ge_sel = payload["selection"].get("grad_evals", {}).get(name, {})
            if step_cost is None or "lr" not in ge_sel:
                print(f"[wall_time] {name}: skipped (needs {cost_path.name} and the "
                      "equal-evaluation selection)", flush=True)  # fmt: skip
                continue
            steps = steps_for(name, budget, args.steps, step_cost)
            sel = payload["selection"].setdefault(budget, {})
            sel[name] = {"steps": steps, "lr": ge_sel["lr"], "grid": [ge_sel["lr"]],
                         "extended": [], "borrowed_from": "grad_evals"}  # fmt: skip
            for seed in seeds:
                run_cached(name, ge_sel["lr"], seed, steps, budget)
            save()
            continue
        steps = steps_for(name, budget, args.steps)
        sel = (
            payload["selection"]
            .setdefault(budget, {})
            .setdefault(name, {"steps": steps, "grid": list(LR_GRIDS[name]), "extended": []})
        )
        grid = sel["grid"]
        while True:
            scores = {lr: _score(run_cached(name, lr, seeds[0], steps, "select")) for lr in grid}
            best = min(grid, key=lambda lr: scores[lr])
            edge = best in (min(grid), max(grid)) and math.isfinite(scores[best])
            if not edge or len(sel["extended"]) >= MAX_EXTENSIONS:
                break
            new = _next_lr(best, up=best == max(grid))
            grid.append(new)
            grid.sort()
            sel["extended"].append(new)
        sel["scores"] = {f"{lr:g}": scores[lr] for lr in grid}
        sel["lr"] = best
        sel["on_edge"] = edge
        save()
        for seed in seeds[1:]:
            run_cached(name, best, seed, steps, budget)
    save()
    print(f"wrote {out_path.relative_to(HERE.parent)}", flush=True)
    if not (args.no_render or args.quick):
        import render  # README tables and results/lm_validation_loss.png from the JSON

        render.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
