"""(g) Step time of Sassha against the official step and SAM, interleaved and paired in one process.

Arms (MLP 784-256-256-10, batch 128, synthetic inputs, each from the same initial weights):

- ``sam``: SAM(SGD), the package preset;
- ``sassha`` (k = 10) and ``sassha-k1`` (k = 1): this package, closure API, defaults;
- ``sassha-cache`` (k = 10, ``cache_denominator=True``): the same steps, bitwise, with
  ``D̂^α + eps`` kept between refreshes (no ``pow``/``div``/``add`` on the other nine steps);
- ``official-k1``, ``official-k10``: the official code's step, written here from its published
  behaviour (README: Deviations): the trainer's loop (plain backward at w; perturb;
  ``backward(create_graph=True)`` at w + ε on *every* step; restore w through ``.data``; then the
  optimizer step), a Hutchinson product every k steps at the restored weights, step-count bias
  correction, per-parameter Python loops and per-parameter state.

Protocol: ``--repeats`` rounds; in each round every arm runs one block of ``--block`` steps (a
multiple of 10, so every block holds the same number of Hessian refreshes) in a rotated order (A/B/
A/B...), so load on the machine hits every arm alike. Per arm the median of the block means; per
pair (e.g. ``sassha-k1`` / ``official-k1``) the ratio within each round, with min/median/max over
rounds. A phase profile (``--profile-steps`` k = 1 steps of each implementation, interleaved) splits
one step into first pass, perturbation, second pass, Hessian-vector product (+ restore) and update.
A second profile does the same at k = 10 for ``sassha``, ``sassha-cache`` and SAM (explicit loop,
steps with and without a refresh kept apart) and splits the gap to SAM into the refresh, the update
phase and the rest; a third times the update rules alone on the MLP's tensors (``functional.sassha``
without a refresh, with and without the cached denominator, against torch's functional SGD with
momentum and AdamW), interleaved, median over rounds.

Writes benchmarks/results/step_time.json (``--quick``: results/quick/) and re-renders the README.
Usage: OMP_NUM_THREADS=1 nice -n 15 python benchmarks/step_time.py [--repeats 61] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from _common import machine
from sassha_optim import __version__
from sassha_optim.training import MLP, build_optimizer, make_closure
from torch import Tensor, nn

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PAIRS = {
    "sassha-k1 / official-k1": ("sassha-k1", "official-k1"),
    "sassha / official-k10": ("sassha", "official-k10"),
    "sassha / sam": ("sassha", "sam"),
    "sassha-cache / sam": ("sassha-cache", "sam"),
    "sassha-cache / sassha": ("sassha-cache", "sassha"),
    "sassha-k1 / sam": ("sassha-k1", "sam"),
    "official-k1 / sam": ("official-k1", "sam"),
}
TARGETS = {"sassha-k1 / official-k1": 0.8, "sassha / sam": 1.05, "sassha-cache / sam": 1.05}
SETTINGS = {"lr": 0.15, "rho": 0.2, "weight_decay": 5e-4 / 0.15}  # the "sassha" preset's values


class OfficialStep:
    """The official code's Sassha step as its behaviour is published (not its code): per-parameter
    loops, a graph on every second pass, ``.data`` restore, the HVP at the restored weights, the
    Hessian estimate kept in a per-parameter buffer (zeroed and accumulated on refresh steps, its
    absolute value made as a new tensor on every step) and ``D / (1 − β2^t)`` with ``t`` the step
    of the last refresh. ``phases`` (if given) collects the seconds spent in each part of a step."""

    def __init__(self, model: nn.Module, k: int, seed: int = 0) -> None:
        self.model, self.k = model, k
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.lr, self.rho, self.wd = SETTINGS["lr"], SETTINGS["rho"], SETTINGS["weight_decay"]
        self.beta1, self.beta2, self.alpha, self.eps = 0.9, 0.999, 0.5, 1e-4
        self.t = 0
        self.gen = torch.Generator().manual_seed(seed)
        self.m = [torch.zeros_like(p) for p in self.params]
        self.d = [torch.zeros_like(p) for p in self.params]
        self.c2 = [1.0 for _ in self.params]
        self.hess = [torch.zeros_like(p) for p in self.params]

    def step(self, x: Tensor, y: Tensor, phases: dict[str, float] | None = None) -> None:
        clock = _Clock(phases)
        for p in self.params:
            p.grad = None
        nn.functional.cross_entropy(self.model(x), y).backward()
        clock("first pass")
        with torch.no_grad():
            norm = torch.stack([p.grad.norm(2) for p in self.params]).norm(2)  # type: ignore[union-attr]
            scale = self.rho / (norm + 1e-12)
            shifts = []
            for p in self.params:
                e = p.grad * scale
                p.add_(e)
                shifts.append(e)
        for p in self.params:
            p.grad = None
        clock("perturbation")
        nn.functional.cross_entropy(self.model(x), y).backward(create_graph=True)
        clock("second pass")
        for p, e in zip(self.params, shifts):
            p.data.sub_(e)
        refresh = self.t % self.k == 0
        if refresh:  # Ĥ accumulated into a per-parameter buffer, zeroed first, divided by n = 1
            grads = [p.grad for p in self.params]
            z = [torch.randint(0, 2, p.shape, generator=self.gen) * 2.0 - 1.0 for p in self.params]
            hz = torch.autograd.grad(grads, self.params, grad_outputs=z)  # type: ignore[arg-type]
            with torch.no_grad():
                for h, zi, buf in zip(hz, z, self.hess):
                    buf.zero_()
                    buf += h * zi / 1
        clock("Hessian-vector product + restore")
        self.t += 1
        with torch.no_grad():
            for i, p in enumerate(self.params):
                g = p.grad.detach()  # type: ignore[union-attr]
                self.hess[i] = self.hess[i].abs().clone()  # |Ĥ| made anew on every step
                p.mul_(1 - self.lr * self.wd)
                self.m[i].mul_(self.beta1).add_(g, alpha=1 - self.beta1)
                if refresh:
                    self.d[i].mul_(self.beta2).add_(self.hess[i], alpha=1 - self.beta2)
                    self.c2[i] = (1 - self.beta2**self.t) ** self.alpha
                denom = (self.d[i] ** self.alpha / self.c2[i]).add_(self.eps)
                p.addcdiv_(self.m[i], denom, value=-self.lr / (1 - self.beta1**self.t))
                p.grad = None
        clock("update")


class _Clock:
    def __init__(self, phases: dict[str, float] | None) -> None:
        self.phases, self.last = phases, time.perf_counter()

    def __call__(self, name: str) -> None:
        if self.phases is not None:
            now = time.perf_counter()
            self.phases[name] = self.phases.get(name, 0.0) + now - self.last
            self.last = now


def _data() -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(128, 784, generator=gen), torch.randint(0, 10, (128,), generator=gen)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return MLP(784, 10, (256, 256))


def _arms(x: Tensor, y: Tensor) -> dict[str, Callable[[], object]]:
    arms: dict[str, Callable[[], object]] = {}
    for name in ("sam", "sassha", "sassha-cache", "sassha-k1"):
        model = _model()
        opt = _build(name, model)
        closure = make_closure(opt, model, x, y)
        arms[name] = lambda opt=opt, closure=closure: opt.step(closure)
    for k in (1, 10):
        official = OfficialStep(_model(), k)
        arms[f"official-k{k}"] = lambda official=official: official.step(x, y)
    return arms


def _build(name: str, model: nn.Module) -> torch.optim.Optimizer:
    if name == "sassha-cache":
        return build_optimizer("sassha", model.parameters(), {"cache_denominator": True})
    return build_optimizer(name, model.parameters())


def _sam_phases(opt, model: nn.Module, x: Tensor, y: Tensor, phases: dict[str, float]) -> None:
    """One SAM(SGD) step by the same phases (its two steps; the restore in ``second_step`` is
    the bitwise copy of w, the rest of it the base SGD step)."""
    clock = _Clock(phases)
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    clock("first pass")
    opt.first_step(zero_grad=True)
    clock("perturbation")
    nn.functional.cross_entropy(model(x), y).backward()
    clock("second pass")
    with torch.no_grad():
        for group in opt.param_groups:
            for p in group["params"]:
                if "old_p" in opt.state[p]:
                    p.copy_(opt.state[p].pop("old_p"))
    clock("Hessian-vector product + restore")
    opt.base_optimizer.step()
    opt.zero_grad(set_to_none=True)
    clock("update")


def profile_k10(x: Tensor, y: Tensor, steps: int) -> dict:
    """k = 10 phases of ``sassha``, ``sassha-cache`` and SAM(SGD), interleaved step by step;
    Sassha's steps with and without a refresh are summed apart (``steps`` a multiple of 10, after
    the Hessian warm-up, so a tenth of them refresh)."""
    arms = {n: (_build(n, m := _model()), m) for n in ("sassha", "sassha-cache", "sam")}
    for _ in range(20):  # past the Hessian warm-up (k = 10 steps) and allocator warm-up
        for name, (opt, model) in arms.items():
            (_sam_phases if name == "sam" else _ours_phases)(opt, model, x, y, {})
    totals: dict[str, dict[str, dict[str, float]]] = {n: {} for n in arms}
    counts: dict[str, dict[str, int]] = {n: {} for n in arms}
    for _ in range(steps):
        for name, (opt, model) in arms.items():
            kind = "refresh" if name != "sam" and opt.hessian_due else "other"  # type: ignore[attr-defined]
            counts[name][kind] = counts[name].get(kind, 0) + 1
            phases = totals[name].setdefault(kind, {})
            (_sam_phases if name == "sam" else _ours_phases)(opt, model, x, y, phases)
    ms = {
        n: {k: {ph: 1000 * v / counts[n][k] for ph, v in t.items()} for k, t in kinds.items()}
        for n, kinds in totals.items()
    }
    sam = ms["sam"]["other"]
    gap = {}
    for name in ("sassha", "sassha-cache"):
        other, ref = ms[name]["other"], ms[name]["refresh"]
        frac = counts[name]["refresh"] / steps
        gap[name] = {
            "sam_ms": sum(sam.values()),
            "step_ms": frac * sum(ref.values()) + (1 - frac) * sum(other.values()),
            "refresh_ms": frac * (sum(ref.values()) - sum(other.values())),
            "update_ms": other["update"] - sam["update"],
            "rest_ms": sum(v - sam[ph] for ph, v in other.items() if ph != "update"),
        }
    return {"steps": steps, "ms_per_step": ms, "refresh_fraction": 0.1, "gap_to_sam": gap}


def update_rules(repeats: int, calls: int = 20) -> dict:
    """The update rules alone on the MLP's parameter shapes (no autograd): ms per call of
    ``functional.sassha`` without a refresh (denominator recomputed / cached), torch's functional
    SGD with momentum and weight decay (SAM's base step) and AdamW; interleaved, median over
    ``repeats`` rounds of ``calls`` calls."""
    from sassha_optim.functional import sassha as sassha_update
    from torch.optim.adamw import adamw
    from torch.optim.sgd import sgd

    shapes = [p.shape for p in _model().parameters()]
    gen = torch.Generator().manual_seed(0)

    def tensors() -> list[Tensor]:
        return [torch.randn(s, generator=gen) * 1e-2 for s in shapes]

    params, grads, m, d = tensors(), tensors(), tensors(), [t.abs() for t in tensors()]
    n = len(params)
    dens: list[Tensor | None] = [None] * n
    kw = {"lr": 1e-4, "beta1": 0.9, "beta2": 0.999, "weight_decay": 3e-3, "hessian_power": 0.5}
    bufs: list[Tensor | None] = [torch.zeros_like(p) for p in params]
    am, av = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    steps_t = [torch.tensor(1.0) for _ in params]

    def run_sassha(cache: bool) -> None:
        sassha_update(params, grads, m, d, None, [5] * n, [1] * n, eps=1e-4, foreach=False,
                      denominators=dens if cache else None, **kw)  # fmt: skip

    rules: dict[str, Callable[[], None]] = {
        "sassha (no refresh)": lambda: run_sassha(False),
        "sassha, cached denominator": lambda: run_sassha(True),
        "SGD momentum (SAM's base)": lambda: sgd(
            params,
            grads,
            bufs,
            foreach=False,
            weight_decay=5e-4,
            momentum=0.9,
            lr=1e-4,
            dampening=0.0,
            nesterov=False,
            maximize=False,
        ),
        "AdamW": lambda: adamw(
            params,
            grads,
            am,
            av,
            [],
            steps_t,
            foreach=False,
            amsgrad=False,
            beta1=0.9,
            beta2=0.999,
            lr=1e-4,
            weight_decay=1e-2,
            eps=1e-8,
            maximize=False,
        ),
    }
    times: dict[str, list[float]] = {k: [] for k in rules}
    with torch.no_grad():
        for f in rules.values():
            for _ in range(5):
                f()
        names = list(rules)
        for r in range(repeats):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                start = time.perf_counter()
                for _ in range(calls):
                    rules[name]()
                times[name].append(1000 * (time.perf_counter() - start) / calls)
    return {
        "repeats": repeats,
        "calls_per_round": calls,
        "ms_per_call": {k: statistics.median(v) for k, v in times.items()},
        "ms_min_max": {k: [min(v), max(v)] for k, v in times.items()},
    }


def _ours_phases(opt, model: nn.Module, x: Tensor, y: Tensor, phases: dict[str, float]) -> None:
    """One Sassha step through the explicit loop, timed by phase (``unperturb`` computes the due
    HVP at w + ε, then restores w; ``step`` then only updates)."""
    clock = _Clock(phases)
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    clock("first pass")
    opt.perturb_weights()
    clock("perturbation")
    nn.functional.cross_entropy(model(x), y).backward(create_graph=opt.create_graph)
    clock("second pass")
    opt.unperturb()
    clock("Hessian-vector product + restore")
    opt.step()
    opt.zero_grad(set_to_none=True)
    clock("update")


def profile(x: Tensor, y: Tensor, steps: int) -> dict:
    model = _model()
    opt = build_optimizer("sassha-k1", model.parameters())
    official = OfficialStep(_model(), 1)
    totals: dict[str, dict[str, float]] = {"sassha-k1": {}, "official-k1": {}}
    for _ in range(3):  # warm-up
        _ours_phases(opt, model, x, y, {})
        official.step(x, y, {})
    for _ in range(steps):
        _ours_phases(opt, model, x, y, totals["sassha-k1"])
        official.step(x, y, totals["official-k1"])
    return {
        "steps": steps,
        "ms_per_step": {
            arm: {phase: 1000 * s / steps for phase, s in t.items()} for arm, t in totals.items()
        },
    }


def run(repeats: int, block: int, warmup: int, profile_steps: int) -> dict:
    x, y = _data()
    arms = _arms(x, y)
    for step in arms.values():
        for _ in range(warmup):
            step()
    names = list(arms)
    blocks: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            start = time.perf_counter()
            for _ in range(block):
                arms[name]()
            blocks[name].append(1000 * (time.perf_counter() - start) / block)
        print(f"round {r + 1}/{repeats}: " + "  ".join(f"{n} {blocks[n][-1]:.1f}" for n in names))
    ratios = {}
    for label, (a, b) in PAIRS.items():
        per_round = [u / v for u, v in zip(blocks[a], blocks[b])]
        ratios[label] = {
            "min": min(per_round),
            "median": statistics.median(per_round),
            "max": max(per_round),
            "per_round": per_round,
        }
    return {
        "model": "MLP 784-256-256-10, batch 128, synthetic inputs",
        "settings": "lr 0.15, rho 0.2, weight decay 5e-4/0.15, eps 1e-4, alpha 0.5 (all Sassha arms)",
        "repeats": repeats,
        "steps_per_block": block,
        "warmup_steps": warmup,
        "ms_per_step": {n: statistics.median(b) for n, b in blocks.items()},
        "blocks_ms": blocks,
        "ratios": ratios,
        "targets": {
            label: {"bound": bound, "met": ratios[label]["median"] <= bound}
            for label, bound in TARGETS.items()
        },
        "profile": profile(x, y, profile_steps),
        "profile_k10": profile_k10(x, y, 10 * max(1, profile_steps // 2)),
        "update_rules": update_rules(max(5, repeats // 2)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=61, help="rounds (default 61)")
    parser.add_argument(
        "--block", type=int, default=20, help="steps per block (multiple of 10; default 20)"
    )
    parser.add_argument("--quick", action="store_true", help="3 rounds; writes results/quick/")
    parser.add_argument("--no-render", action="store_true", help="do not rewrite the README")
    args = parser.parse_args(argv)
    if args.block <= 0 or args.block % 10:
        parser.error(f"--block must be a positive multiple of 10, got {args.block}")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
    repeats = 3 if args.quick else args.repeats
    start = time.perf_counter()
    payload = run(repeats, args.block, 10, 5 if args.quick else 60)
    argv_used = argv if argv is not None else sys.argv[1:]
    out = {
        "command": ("python benchmarks/step_time.py " + " ".join(argv_used)).strip(),
        "sassha_optim": __version__,
        "machine": machine(),
        "quick": args.quick,
        "wall_time_s": time.perf_counter() - start,
        **payload,
    }
    folder = RESULTS / "quick" if args.quick else RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "step_time.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path.relative_to(HERE.parent)}")
    for label, r in out["ratios"].items():
        print(f"{label:26s} min {r['min']:.3f}  median {r['median']:.3f}  max {r['max']:.3f}")
    if not (args.no_render or args.quick):
        subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    return 0 if all(math.isfinite(v) for v in out["ms_per_step"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
