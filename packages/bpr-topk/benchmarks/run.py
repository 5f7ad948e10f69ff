"""Benchmarks for bpr-topk (writes benchmarks/results/*.json, then renders the README table).

(a) cook_county: test BPR@100 / NLL / MAE for NLL-only, DAML ε=1, BPR-only, SPO+, PG, mean
    ranking and the heuristics, 3 seeds (paper Table C.2 beside ours); NLL-only and DAML again
    with a 10-step site-mean feature (``with_history_features``); settings searched on valid.
(b) step_memory: time and peak memory of one DAML training step at Cook County size,
    one-backward surrogate vs the explicit M×S×P Jacobian (official code's route), same run.
(c) hotspots: the CLI demo's embedded panel (covariates carry the signal, the NegBin model is
    misspecified), NLL-only vs DAML vs BPR-only beside the heuristic family, 5 seeds.
(d) zeroinflated: the zero-inflated panel (> 90 % zeros, known best ranking), NLL-only, DAML,
    BPR-only, SPO+ and PG (selected on validation, App. C.2) beside the heuristics and the
    oracle, 5 seeds (``--methods`` to train fewer).
Every table compares with the heuristic chosen on the valid split, with paired 95 % t intervals
over seeds (``benchmarks/stats.py``).

Usage (from packages/bpr-topk): python benchmarks/run.py [--quick] [--data DIR] [--only NAME ...]
    [--seeds N] [--methods ...] [--reuse-selection] [--rescore]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import bpr_topk as B
import torch
from bpr_topk.experiment import (
    EvalConfig,
    TrainConfig,
    baseline_rows,
    compare,
    parse_method,
    summarise,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling stats.py, when imported
from stats import paired_vs_heuristic

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DEFAULT_DATA = (
    Path(os.environ.get("ICML25_DATA", HERE.parents[2].parent / "shared" / "data"))
    / "bpr"
    / "cook_county"
)
PAPER_C2 = {  # Table C.2, Cook County IL 2021-22, test: (MAE, RMSE, BPR-100)
    "NLL-only": (1.03, 1.58, 0.78),
    "DAML eps=1.0": (1.12, 1.84, 0.80),
    "BPR-only": (70.31, 152.72, 0.82),
    "avg over 5": (0.99, 1.58, 0.80),
    "last step": (1.07, 1.66, 0.76),
    "chance (ŷ=0)": (1.37, 2.46, 0.20),
    "PG": (5.65, 17.03, 0.80),
    "SPO+": (1.25, 2.38, 0.74),
}


# Settings searched on the validation split only (``compare(..., grids=...)``, the grid of
# ``train --search``): the NLL-only learning rate, then the learning rate of each warm-started
# fine-tune. σ stays 0.01 and ε 1 (Table C.2) to fit the CPU budget (one DAML fine-tune of
# Cook County takes about a minute on the shared 2-core machine).
FINETUNE_LRS = [0.01, 0.03]
GRIDS: dict[str, dict[str, list[float]]] = {
    "nll": {"lr": [0.03, 0.1, 0.3]},
    "daml": {"lr": FINETUNE_LRS},
    "bpr": {"lr": FINETUNE_LRS},
    "spo+": {"lr": FINETUNE_LRS},
    "pg": {"lr": FINETUNE_LRS},
}
QUICK_GRIDS: dict[str, dict[str, list[float]]] = {
    "nll": {"lr": [0.1]},
    "daml": {"lr": [0.01, 0.03]},
}


def portable_command(argv: list[str]) -> str:
    """The command as run from the package folder, without a path of this machine.

    Paths inside the package become relative to it (``benchmarks/run.py``), paths beside the
    repository (the shared data) relative to the package folder (``../../../shared/data/...``),
    anything else ``<...>/<name>``.
    """
    package = HERE.parent
    workspace = package.parents[2]  # the folder that holds the repository and shared/
    out = ["python"]
    for token in argv:
        flag, eq, value = token.partition("=") if token.startswith("--") else ("", "", token)
        if value.startswith("-") or not value:
            out.append(token)  # a flag (or --flag= with nothing after it)
            continue
        path = Path(value)
        if path.is_absolute() or (Path.cwd() / path).exists():
            full = (Path.cwd() / path).resolve()
            if full.is_relative_to(workspace):
                value = os.path.relpath(full, package)
            else:
                value = f"<...>/{full.name}"
        out.append(f"{flag}{eq}{value}")
    return " ".join(shlex.quote(t) for t in out)


def machine() -> dict[str, object]:
    return {
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def load(data_dir: Path) -> B.TopKData:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return B.load_topk_folder(data_dir)


def bench_cook(data_dir: Path, quick: bool, n_seeds: int | None = None) -> dict[str, object]:
    data = load(data_dir)
    cfg = TrainConfig(
        epochs=60 if quick else 200,
        lr=0.1,
        link="softplus",
        num_score_samples=20 if quick else 50,
        num_perturb_samples=50,
        sigma=0.01,
        baseline="loo",
        val_samples=200,
        warm_start=True,
        finetune_epochs=20 if quick else 200,
        finetune_lr=0.01,
    )
    ev = EvalConfig(trials=3 if quick else 10, num_samples=1000, window=5)
    seeds = [0] if quick else list(range(n_seeds or 3))
    t0 = time.time()
    methods = ["NLL-only", "DAML eps=1.0", "BPR-only", "SPO+", "PG"]
    grids = QUICK_GRIDS if quick else GRIDS
    rows = compare(data, "negbin", 100, methods, seeds, cfg, ev, grids=grids)
    # the same model given the history that "avg over 10" uses: a 10-step site-mean feature
    hist = B.with_history_features(data, [HISTORY_WINDOW])
    for r in compare(hist, "negbin", 100, ["NLL-only", "DAML eps=1.0"], seeds, cfg, ev,
                     grids=grids):  # fmt: skip
        if r["ranking"] == "ratio":
            rows.append({**r, "method": f"{r['method']}{HISTORY_SUFFIX}"})
    res = {
        "name": "cook_county",
        "K": 100,
        "seeds": seeds,
        "train_config": vars(cfg),
        "eval_config": vars(ev),
        "rows": rows,
        "paper_table_c2": {k: dict(zip(("mae", "rmse", "bpr"), v)) for k, v in PAPER_C2.items()},
        "grids": grids,
        "selected_settings": selected_settings(rows),
        "history_features": hist.feature_names[data.num_features :],
        "wall_time_s": time.time() - t0,
    }
    return finish_cook(res, data, ev)


def finish_cook(res: dict[str, Any], data: B.TopKData, ev: EvalConfig) -> dict[str, Any]:
    """Add the heuristic family's rows to the learned rows of ``res`` (the comparison row is the
    member best on the valid split), then the summary, the targets and the paired intervals."""
    rows = [r for r in res["rows"] if r.get("ranking") != "history"]
    rows += baseline_rows(data, 100, ev)
    summary = summarise(rows)
    nll_only = next(s for s in summary if s["method"] == "NLL-only")
    daml = next(s for s in summary if s["method"] == "DAML eps=1.0")
    daml_hist = next(s for s in summary if s["method"] == f"DAML eps=1.0{HISTORY_SUFFIX}")
    nll_hist = next(s for s in summary if s["method"] == f"NLL-only{HISTORY_SUFFIX}")
    best = valid_best_heuristic(rows, summary)
    res.update(
        rows=rows,
        summary=summary,
        best_heuristic=best["method"],
        paired=paired_vs_heuristic(rows),
        targets={
            "daml_bpr_ge_nll_only": daml["bpr"] >= nll_only["bpr"],
            "daml_nll_within_5pct": daml["nll"] <= 1.05 * nll_only["nll"],
            "daml_bpr_ge_best_heuristic": daml["bpr"] >= best["bpr"],
            "daml_bpr_ge_paper": daml["bpr"] >= PAPER_C2["DAML eps=1.0"][2],
            "daml_history_bpr_ge_nll_only_history": daml_hist["bpr"] >= nll_hist["bpr"],
            "daml_history_bpr_ge_best_heuristic": daml_hist["bpr"] >= best["bpr"],
            "daml_history_bpr_ge_paper": daml_hist["bpr"] >= PAPER_C2["DAML eps=1.0"][2],
        },
    )
    return res


HISTORY_WINDOW = 10
HISTORY_SUFFIX = " + 10-step mean feature"
REUSE_SELECTION = False  # --reuse-selection: (c) keeps the λ / lr selection of its JSON
ZEROINFLATED_METHODS = ["NLL-only", "DAML eps=1.0", "BPR-only", "SPO+", "PG"]  # --methods


# ------------------------------------------------------------------------ (c) hotspots


HOTSPOTS_GRID = {"lam": [1.0, 3.0, 10.0], "finetune_lr": [0.01, 0.03]}
HOTSPOTS_SELECTION_SEEDS = [0, 1, 2, 3, 4]
NLL_TOLERANCE = 1.05  # a DAML setting may cost at most 5 % of NLL-only's valid NLL


def select_hotspots_setting(
    data: B.TopKData, kind: str, k: int, cfg: TrainConfig, seeds: list[int]
) -> dict[str, object]:
    """Choose DAML's λ and fine-tuning learning rate for the demo on the validation split only.

    Every setting of ``HOTSPOTS_GRID`` fine-tunes DAML from the NLL-only fit of each seed; a
    setting scores the mean over seeds of its selected checkpoint's valid BPR and valid NLL
    (from the training history, never the test split). Among the settings whose mean valid
    NLL is within 5 % of NLL-only's, the one with the highest mean valid BPR is chosen.
    """
    from itertools import product

    from bpr_topk.experiment import selected_valid_bpr, train_one

    def valid_of(result: B.FitResult) -> tuple[float, float]:
        best = next(h for h in result.history if h["epoch"] == result.best_epoch)
        return best["valid_bpr"], best["valid_nll"]

    keys = list(HOTSPOTS_GRID)
    settings = [dict(zip(keys, v)) for v in product(*(HOTSPOTS_GRID[key] for key in keys))]
    nll_valid: list[tuple[float, float]] = []
    scores: list[list[tuple[float, float]]] = [[] for _ in settings]
    for seed in seeds:
        _, nll_fit = train_one(data, kind, k, "nll", 1.0, seed, cfg)
        nll_valid.append(valid_of(nll_fit))
        reference = selected_valid_bpr(nll_fit)
        for i, setting in enumerate(settings):
            trial = replace(cfg, **setting)
            _, fit = train_one(
                data, kind, k, "daml", 1.0, seed, trial, reference, init_state=nll_fit.best_state
            )
            scores[i].append(valid_of(fit))
    nll_bpr = statistics.mean(b for b, _ in nll_valid)
    nll_nll = statistics.mean(n for _, n in nll_valid)
    trials = [
        {
            **setting,
            "valid_bpr": statistics.mean(b for b, _ in sc),
            "valid_nll": statistics.mean(n for _, n in sc),
            "valid_bpr_per_seed": [b for b, _ in sc],
        }
        for setting, sc in zip(settings, scores)
    ]
    chosen = choose_setting(trials, nll_nll)
    return {
        "seeds": seeds,
        "grid": HOTSPOTS_GRID,
        "rule": "among the settings with mean valid NLL <= 1.05 x NLL-only's, those whose mean "
        "valid BPR is within one standard error (over seeds) of the highest; of these, the lowest "
        "mean valid NLL",
        "nll_only_valid": {"valid_bpr": nll_bpr, "valid_nll": nll_nll},
        "trials": trials,
        "selected": {key: chosen[key] for key in keys},
    }


def choose_setting(trials: list[dict[str, Any]], nll_only_valid_nll: float) -> dict[str, Any]:
    """The App. C.2 idea applied to settings, with the one-standard-error rule: among the
    settings within 5 % of NLL-only's valid NLL, keep those whose mean valid BPR is within one
    standard error (over seeds) of the best mean, and of these the one with the lowest valid NLL
    (a BPR difference smaller than the seed-to-seed noise does not buy likelihood)."""
    ok = [t for t in trials if t["valid_nll"] <= NLL_TOLERANCE * nll_only_valid_nll] or trials
    best = max(ok, key=lambda t: t["valid_bpr"])
    per_seed = best["valid_bpr_per_seed"]
    se = statistics.stdev(per_seed) / len(per_seed) ** 0.5 if len(per_seed) > 1 else 0.0
    near = [t for t in ok if t["valid_bpr"] >= best["valid_bpr"] - se]
    return min(near, key=lambda t: t["valid_nll"])


def bench_hotspots(data_dir: Path, quick: bool, n_seeds: int | None = None) -> dict[str, object]:
    """The demo's setting (``bpr-topk demo``), same data, budget and evaluation, over seeds.

    First the demo's λ and fine-tuning learning rate are selected on the validation split
    (:func:`select_hotspots_setting`, seeds 0-4); the table then uses the selected setting, and
    ``demo_default_is_selected`` records whether it is the demo's embedded default.
    """
    from bpr_topk.runs import demo_setup

    data, k, kind, cfg, ev, about = demo_setup("hotspots", 0, quick)
    t0 = time.time()
    previous = RESULTS / "hotspots.json"
    if REUSE_SELECTION and previous.is_file():  # the validation-only selection of an earlier run
        selection = json.loads(previous.read_text())["selection"]
        selection["reused_from"] = json.loads(previous.read_text())["command"]
    else:
        selection = select_hotspots_setting(
            data, kind, k, cfg, [0] if quick else HOTSPOTS_SELECTION_SEEDS
        )
    chosen = selection["selected"]
    assert isinstance(chosen, dict)
    default = {key: getattr(cfg, key) for key in chosen}
    cfg = replace(cfg, **chosen)
    seeds = [0] if quick else list(range(n_seeds or 5))
    rows = compare(data, kind, k, ["NLL-only", "DAML eps=1.0", "BPR-only"], seeds, cfg, ev)
    rows += baseline_rows(data, k, ev)  # the family; the comparison row is best on valid
    return {
        "name": "hotspots",
        "data": data.name,
        "data_description": about,
        "K": k,
        "seeds": seeds,
        "train_config": vars(cfg),
        "eval_config": vars(ev),
        "selection": selection,
        "demo_default": default,
        "demo_default_is_selected": default == chosen,
        "rows": rows,
        "summary": summarise(rows),
        "best_heuristic": next(r["method"] for r in rows if r.get("best_on_valid")),
        "paired": paired_vs_heuristic(rows),
        "wall_time_s": time.time() - t0,
    }


# ------------------------------------------------------------------- (d) zero-inflated panel


def zeroinflated_setup(quick: bool) -> tuple[B.TopKData, int, TrainConfig, EvalConfig]:
    """Data, K and budget of benchmark (d) (shared with its test)."""
    data = B.make_zero_inflated(200, seed=0)
    cfg = TrainConfig(
        epochs=100 if quick else 300,
        lr=0.1,
        link="softplus",
        num_score_samples=20 if quick else 50,
        num_perturb_samples=50,
        sigma=0.01,
        baseline="loo",
        val_samples=200,
        warm_start=True,
        finetune_epochs=30 if quick else 150,
        finetune_lr=0.01,
        selection="paper",
    )
    return data, 10, cfg, EvalConfig(trials=3 if quick else 10, num_samples=1000, window=5)


def selected_settings(rows: list[dict[str, object]]) -> dict[str, list[dict[str, object]]]:
    """Per method, the settings chosen on validation for each seed (from ``compare``'s rows)."""
    out: dict[str, list[dict[str, object]]] = {}
    for r in rows:
        sel = r.get("selected")
        if isinstance(sel, dict) and r.get("ranking") == "ratio":
            keep = ("lr", "sigma", "eps", "best_epoch")
            out.setdefault(str(r["method"]), []).append(
                {"seed": r["seed"], **{key: sel[key] for key in keep if key in sel}}
            )
    return out


def valid_best_heuristic(
    rows: list[dict[str, object]], summary: list[dict[str, Any]]
) -> dict[str, Any]:
    """The summary row of the heuristic chosen on the validation split (``best_on_valid``)."""
    chosen = next(r["method"] for r in rows if r.get("best_on_valid"))
    return next(s for s in summary if s["method"] == chosen)


def bench_zeroinflated(
    data_dir: Path, quick: bool, n_seeds: int | None = None
) -> dict[str, object]:
    """Zero-inflated panel (> 90 % zeros, known best ranking): learned models vs heuristics."""
    data, k, cfg, ev = zeroinflated_setup(quick)
    seeds = [0] if quick else list(range(n_seeds or 5))
    t0 = time.time()
    methods = ZEROINFLATED_METHODS
    grids = QUICK_GRIDS if quick else GRIDS
    rows = compare(data, "negbin", k, methods, seeds, cfg, ev, grids=grids)
    rows += baseline_rows(data, k, ev)  # the family; the comparison row is best on valid
    rate = data.oracle_scores
    assert rate is not None
    y = data.test.y
    oracle = B.bpr(y, rate.expand(y.shape[0], -1), k)
    rows.append(
        {
            "method": "oracle (true rates)",
            "ranking": "oracle",
            "nll": float("nan"),
            "bpr": float(oracle.mean()),
            "mae": float((rate - y.float()).abs().mean()),
            "rmse": float((rate - y.float()).pow(2).mean().sqrt()),
        }
    )
    summary = summarise(rows)
    by = {s["method"]: s for s in summary}
    best = valid_best_heuristic(rows, summary)
    y_all = torch.cat([data.train.y, data.valid.y, data.test.y])
    return {
        "name": "zeroinflated",
        "data": data.name,
        "zero_fraction": float((y_all == 0).float().mean()),
        "grids": {o: g for o, g in grids.items() if any(o == parse_method(m)[0] for m in methods)},
        "selected_settings": selected_settings(rows),
        "K": k,
        "seeds": seeds,
        "train_config": vars(cfg),
        "eval_config": vars(ev),
        "rows": rows,
        "summary": summary,
        "best_heuristic": best["method"],
        "paired": paired_vs_heuristic(rows),
        "targets": {
            "daml_bpr_ge_best_heuristic": by["DAML eps=1.0"]["bpr"] >= best["bpr"],
            "daml_bpr_ge_nll_only": by["DAML eps=1.0"]["bpr"] >= by["NLL-only"]["bpr"],
        },
        "wall_time_s": time.time() - t0,
    }


# ------------------------------------------------------------------------ (b) memory / time


def _peak_reset() -> int:
    """Reset the kernel's peak-RSS mark (Linux) and return the current RSS in bytes."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status("VmRSS")


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _step_worker(method: str, M: int, repeats: int, grad_file: str, data_dir: str) -> None:
    """Runs in a subprocess: one training step per repeat; prints JSON with time and memory."""
    torch.set_num_threads(1)
    data = load(Path(data_dir))
    tr = data.train
    model = B.NegBinMixedEffects(data.num_sites, data.num_features, link="softplus",
                                 generator=torch.Generator().manual_seed(0))  # fmt: skip
    params = list(model.parameters())
    kw = {"num_score_samples": M, "num_perturb_samples": 50, "score": "per_site"}
    times, cpu_times, peaks, grads = [], [], [], None
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        loss = B.DAMLLoss(100, generator=torch.Generator().manual_seed(0), **kw)
        base = _peak_reset()
        t, c = time.perf_counter(), time.process_time()
        if method == "surrogate":
            loss(model, tr.y, tr.X, tr.time).loss.backward()
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        else:
            grads = explicit_step(model, loss, tr)
        times.append(time.perf_counter() - t)
        cpu_times.append(time.process_time() - c)
        peaks.append(_status("VmHWM") - base)
    torch.save([g.detach() for g in grads], grad_file)  # type: ignore[union-attr]
    print(json.dumps({"times": times, "cpu_times": cpu_times, "peak_bytes": peaks}))


def explicit_step(model: B.NegBinMixedEffects, loss: B.DAMLLoss, tr: B.Split) -> list[torch.Tensor]:
    """Official-code route: per time step, the [M, S, P] Jacobian of per-site log-probs."""
    params = list(model.parameters())
    samples = model.sample(loss.num_score_samples, tr.X, tr.time)
    f = B.ratio_values(samples, loss.denominator_offset)
    r = f.mean(0).requires_grad_(True)
    b = B.perturbed_topk(r, loss.k, loss.sigma, loss.num_perturb_samples, generator=loss.generator)
    y = tr.y.to(r.dtype)
    best = (y * B.topk_mask(y, loss.k)).sum(-1)
    hinge = torch.relu(loss.eps - (y * b).sum(-1) / best)
    (g_r,) = torch.autograd.grad(loss.lam * hinge.sum(), r)
    total = [torch.zeros_like(p) for p in params]
    for t in range(tr.y.shape[0]):
        X, tt = tr.X[t : t + 1], tr.time[t : t + 1]
        grads = B.explicit_jacobian_grad(
            lambda X=X, tt=tt, t=t: model.log_prob(samples[:, t : t + 1], X, tt),
            params, f[:, t : t + 1], g_r[t : t + 1], "per_site", chunk_size=512,
        )  # fmt: skip
        total = [a + g for a, g in zip(total, grads)]
    nll_grads = torch.autograd.grad(
        B.nll_term(model, tr.y, tr.X, tr.time), params, allow_unused=True
    )
    return [a + (g if g is not None else 0) for a, g in zip(total, nll_grads)]


def bench_memory(data_dir: Path, quick: bool, n_seeds: int | None = None) -> dict[str, object]:
    M = 10 if quick else 20
    out: dict[str, object] = {"name": "step_memory", "M": M, "J": 50, "score": "per_site"}
    grads = {}
    with tempfile.TemporaryDirectory() as tmp:
        for method, reps in (("surrogate", 5), ("explicit_jacobian", 2 if quick else 3)):
            gf = str(Path(tmp) / f"{method}.pt")
            cmd = [
                sys.executable,
                __file__,
                "--_worker",
                method,
                str(M),
                str(reps),
                gf,
                str(data_dir),
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rec = json.loads(res.stdout.strip().splitlines()[-1])
            out[method] = {
                "times_s": rec["times"],
                "median_time_s": statistics.median(rec["times"]),
                "cpu_times_s": rec["cpu_times"],
                "median_cpu_time_s": statistics.median(rec["cpu_times"]),
                "peak_bytes": rec["peak_bytes"],
                "median_peak_bytes": statistics.median(rec["peak_bytes"]),
            }
            grads[method] = torch.load(gf)
    data = load(data_dir)
    P = 2 * data.num_sites + data.num_features + 5
    sur, exp = out["surrogate"], out["explicit_jacobian"]  # type: ignore[index]
    num = max(
        float((a - b).abs().max()) for a, b in zip(grads["surrogate"], grads["explicit_jacobian"])
    )
    den = max(float(b.abs().max()) for b in grads["explicit_jacobian"])
    out.update(
        S=data.num_sites, T=data.train.num_steps, P=P,
        jacobian_bytes_per_step=M * data.num_sites * P * 4,
        memory_ratio=exp["median_peak_bytes"] / max(sur["median_peak_bytes"], 1),  # type: ignore[index]
        time_ratio=exp["median_cpu_time_s"] / sur["median_cpu_time_s"],  # type: ignore[index]
        grad_max_rel_diff=num / den,
    )  # fmt: skip
    return out


BENCHES = {
    "cook_county": bench_cook,
    "step_memory": bench_memory,
    "hotspots": bench_hotspots,
    "zeroinflated": bench_zeroinflated,
}


def rescore(names: list[str], data_dir: Path) -> int:
    """Benchmarks (a) and (c) again without retraining: the heuristic rows are deterministic
    functions of the data, so the learned rows of ``results/<name>.json`` are kept and the
    heuristic rows, the comparison row (best on valid), the targets and the paired intervals are
    recomputed with the current heuristic family."""
    for name in (n for n in names if n in ("cook_county", "hotspots")):
        path = RESULTS / f"{name}.json"
        res = json.loads(path.read_text())
        ev = EvalConfig(**res["eval_config"])
        if name == "cook_county":
            res = finish_cook(res, load(data_dir), ev)
        else:
            from bpr_topk.runs import demo_setup

            data, k = demo_setup("hotspots", 0, False)[:2]
            rows = [r for r in res["rows"] if r.get("ranking") != "history"]
            rows += baseline_rows(data, k, ev)
            res.update(
                rows=rows,
                summary=summarise(rows),
                best_heuristic=next(r["method"] for r in rows if r.get("best_on_valid")),
                paired=paired_vs_heuristic(rows),
            )
        res["rescored"] = portable_command(sys.argv)
        path.write_text(json.dumps(res, indent=2, default=str))
        print(f"rescored {path.name}: best heuristic on valid {res['best_heuristic']}")
    subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    return 0


def main() -> int:
    global REUSE_SELECTION, ZEROINFLATED_METHODS
    if len(sys.argv) > 1 and sys.argv[1] == "--_worker":
        _, _, method, M, reps, gf, data_dir = sys.argv
        _step_worker(method, int(M), int(reps), gf, data_dir)
        return 0
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="1 seed, short training, small M")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Cook County folder")
    p.add_argument(
        "--only", nargs="+", choices=list(BENCHES), default=list(BENCHES), help="benchmarks to run"
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="seeds 0..N-1 (default: 3 for cook_county, 5 for hotspots and zeroinflated)",
    )
    p.add_argument(
        "--rescore",
        action="store_true",
        help="cook_county and hotspots: keep the learned rows of their JSON and recompute the "
        "heuristic family's rows, the best heuristic on valid, the targets and the paired "
        "intervals (no training)",
    )
    p.add_argument(
        "--reuse-selection",
        action="store_true",
        help="hotspots: keep the validation-only λ / learning-rate selection stored in its JSON "
        "(seeds 0-4) instead of rerunning it",
    )
    p.add_argument(
        "--methods",
        nargs="+",
        choices=ZEROINFLATED_METHODS,
        default=None,
        help="zeroinflated: the learned methods to train (default: all five)",
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    REUSE_SELECTION = args.reuse_selection
    ZEROINFLATED_METHODS = args.methods or ZEROINFLATED_METHODS
    if args.rescore:
        return rescore(list(args.only), args.data)
    names = list(args.only)
    if not (args.data / "train_x.csv").is_file():
        print(f"Cook County data not found at {args.data}; skipping cook_county, step_memory")
        names = [n for n in names if n in ("hotspots", "zeroinflated")]
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {"machine": machine(), "command": portable_command(sys.argv), "quick": args.quick}
    for fn in (BENCHES[n] for n in names):
        t = time.time()
        res = fn(args.data, args.quick, args.seeds)
        res.update(meta)
        res["bench_wall_time_s"] = time.time() - t
        path = RESULTS / f"{res['name']}.json"
        path.write_text(json.dumps(res, indent=2, default=str))
        print(f"wrote {path} ({res['bench_wall_time_s']:.0f} s)")
    subprocess.run([sys.executable, str(HERE / "render.py")], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
