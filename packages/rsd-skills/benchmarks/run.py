"""Benchmark: coverage and zero-shot goal reaching of RSD vs RSD-uniform vs METRA vs LSD vs random actions.

Every method trains on the same environment with the same SAC core, networks and budget (epochs × N_τ × T
environment steps). Every ``--eval-every`` epochs the 64-skill deterministic coverage (skills from the
method's evaluation prior) and the zero-shot goal-reaching metrics are measured, so the curves compare
methods at equal environment steps. At the end, coverage is also measured with skills from U[−1, 1]^d
("box", the same for every method) and from each method's own final training distribution ("own"; RSD:
its generator mixture), and with ``--stochastic-eval`` with sampled (not mean) actions.

Each (method, seed) run writes ``benchmarks/results/finished/<benchmark>/<algo>-<seed>.json`` when it
ends (a committed folder, so finished runs survive the session); ``--resume`` skips the runs already
there (same settings), so an interrupted benchmark continues, in a later session too, with the same
command. A study too long for one sitting runs in parts: ``--max-runs N`` starts at most N runs and
``--deadline HH:MM`` (UTC) starts none that would not end by then (judged from the finished runs' wall
times); runs go seed-major (seed 0 of every method, then seed 1, ...). The summary
``benchmarks/results/<benchmark>.json`` (per-seed numbers, paired differences with 95% t intervals over
the seeds both methods finished, curves, machine, command, how many runs are finished) and PNG plots
are written from the finished runs, then the README results section is rendered
(``benchmarks/render.py``). A paired difference gets a verdict only from ``MIN_VERDICT_SEEDS`` (5) seeds;
before that it reads *not yet measured*.

Usage (from the package folder): ``python benchmarks/run.py [--quick] [--env point_maze] [--epochs 150]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MIN_VERDICT_SEEDS = 5  # no ahead / tie / behind from fewer paired seeds
PAIRS = (("rsd", "metra"), ("rsd", "rsd_uniform"), ("rsd", "lsd"), ("metra", "random"))
# two-sided 95% Student t quantiles t_{0.975, df}, df = 1..30
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_interval(diffs: list[float], min_seeds: int = 1) -> dict[str, Any]:
    """Mean of paired differences with its 95% t interval and the verdict word (*not yet measured* below
    ``min_seeds`` pairs)."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    mean = float(d.mean())
    if n < 2:
        word = "n/a (1 seed)" if min_seeds <= 1 else f"not yet measured ({n} of {min_seeds} seeds)"
        return {
            "mean": mean,
            "low": None,
            "high": None,
            "n": n,
            "verdict": word,
            "values": d.tolist(),
        }
    half = T975[min(n - 1, 30) - 1] * float(d.std(ddof=1)) / math.sqrt(n)
    low, high = mean - half, mean + half
    verdict = "ahead" if low > 0 else "behind" if high < 0 else "tie"
    if n < min_seeds:
        verdict = f"not yet measured ({n} of {min_seeds} seeds)"
    return {
        "mean": mean,
        "low": low,
        "high": high,
        "n": n,
        "verdict": verdict,
        "values": d.tolist(),
    }


def job(spec: dict[str, Any], on_trained: Any = None) -> dict[str, Any]:
    """One (method, seed) run; ``on_trained(trainer)``, if given, runs after the last evaluation and
    its result is returned under ``"after"`` (extra measurements of the trained agent)."""
    import torch

    torch.set_num_threads(1)
    from rsd_skills import Config, SkillTrainer, evaluate_coverage, evaluate_zero_shot, make_env

    env = make_env(spec["env"], **spec["env_kwargs"])
    cfg = Config(**spec["config"])
    trainer = SkillTrainer(spec["algo"], env, cfg, seed=spec["seed"])
    curve: list[dict[str, float]] = []

    def measure(tr: SkillTrainer, final: bool = False) -> dict[str, Any]:
        cov = evaluate_coverage(tr)
        zero = evaluate_zero_shot(tr)
        point: dict[str, Any] = {
            "epoch": tr.epoch,
            "env_steps": tr.env_steps,
            "coverage": cov["coverage"],
            "train_cells": len(tr.visited),
            "final_distance": zero["final_distance"],
            "success_rate": zero["success_rate"],
            "intrinsic_return": cov["intrinsic_return"],
            "mean_abs_action": cov["mean_abs_action"],
        }
        if spec["stochastic_eval"]:
            point["coverage_stochastic"] = evaluate_coverage(tr, deterministic=False)["coverage"]
        if final:
            point["coverage_box"] = evaluate_coverage(tr, skills="box")["coverage"]
            point["coverage_own"] = evaluate_coverage(tr, skills="own")["coverage"]
        curve.append(point)
        return cov

    measure(trainer)
    start = time.perf_counter()
    for epoch in range(spec["epochs"]):
        trainer.train_epoch()
        last = epoch + 1 == spec["epochs"]
        if (epoch + 1) % spec["eval_every"] == 0 or last:
            cov = measure(trainer, final=last)
    wall = time.perf_counter() - start
    history = trainer.history
    extra = {
        k: history[-1][k] for k in ("population", "rounds", "population_spread") if k in history[-1]
    }
    rounds = []  # the regret signal-to-noise measured at each generator round (RSD, when enabled)
    seen = 0.0
    for rec in history:
        if rec.get("rounds", 0.0) > seen and "round_reg_snr" in rec:
            seen = rec["rounds"]
            rounds.append(
                {
                    "round": int(seen),
                    "env_steps": rec["env_steps"],
                    "signal_std": rec["round_reg_signal_std"],
                    "noise_std": rec["round_reg_noise_std"],
                    "snr": rec["round_reg_snr"],
                }
            )
    return {
        "algo": spec["algo"],
        "seed": spec["seed"],
        "spec": spec,
        "final": curve[-1],
        "curve": curve,
        "regret_rounds": rounds,
        "train_seconds": trainer.train_seconds,
        "wall_seconds": wall,
        "env_steps_per_second": trainer.env_steps / trainer.train_seconds,
        "grad_steps": trainer.grad_steps,
        **({"after": on_trained(trainer)} if on_trained is not None else {}),
        "xy": cov["xy"].round(3).tolist() if spec["seed"] == spec["plot_seed"] else None,
        "skills": cov["skills"].round(4).tolist() if spec["seed"] == spec["plot_seed"] else None,
        **extra,
    }


def random_job(spec: dict[str, Any]) -> dict[str, Any]:
    from rsd_skills import make_env, random_baseline

    env = make_env(spec["env"], **spec["env_kwargs"])
    res = random_baseline(env, seed=spec["seed"])
    cov = res["coverage"]
    return {
        "algo": "random",
        "seed": spec["seed"],
        "final": {
            "coverage": cov,
            "coverage_box": cov,
            "coverage_own": cov,
            "coverage_stochastic": cov,
            "standing_coverage": res["standing_coverage"],
            "final_distance": res["zero_shot"]["final_distance"],
            "success_rate": res["zero_shot"]["success_rate"],
        },
        "xy": res["xy"].round(3).tolist() if spec["seed"] == spec["plot_seed"] else None,
    }


def summary(values: list[float]) -> dict[str, Any]:
    arr = np.asarray(values, dtype=float)
    return {
        "mean": float(arr.mean()),
        "std": float(arr.std(ddof=1)) if len(arr) > 1 else None,  # sample std, ddof=1
        "values": arr.tolist(),
    }


def machine() -> dict[str, Any]:
    import torch

    return {
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads_per_job": 1,
        "python": platform.python_version(),
        "system": platform.system(),
        "arch": platform.machine(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="point_maze", help="point_maze, point, ant or a gymnasium id")
    p.add_argument("--maze", default="medium")
    p.add_argument("--algos", default="rsd,rsd_uniform,metra,lsd")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--epochs", type=int, default=150)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument(
        "--stochastic-eval", action="store_true", help="also coverage with sampled actions"
    )
    p.add_argument(
        "--regret-diagnostic", type=int, default=64, help="RSD: skills per regret SNR measurement"
    )
    p.add_argument("--resume", action="store_true", help="keep the finished runs of this benchmark")
    p.add_argument(
        "--max-runs", type=int, default=None, help="start at most this many runs (then summarise)"
    )
    p.add_argument(
        "--deadline",
        default=None,
        help="HH:MM (UTC, today): start no run expected to end later (from finished runs' wall times)",
    )
    p.add_argument("--tag", default="", help="suffix of the benchmark name")
    p.add_argument("--no-render", action="store_true", help="do not render the README")
    p.add_argument("--quick", action="store_true", help="smoke run into results/quick/")
    args = p.parse_args(argv)
    if args.quick:
        args.epochs, args.eval_every, args.seeds = 4, 2, "0,1"
    if args.max_runs is not None and args.max_runs < 0:
        p.error(f"--max-runs must be >= 0, got {args.max_runs}")
    if args.deadline is not None:
        try:
            hour, minute = (int(x) for x in args.deadline.split(":"))
            if not (0 <= hour < 24 and 0 <= minute < 60):
                raise ValueError
        except ValueError:
            p.error(f"--deadline must be HH:MM (UTC), got {args.deadline!r}")
    return args


def deadline_epoch(text: str | None) -> float | None:
    """``HH:MM`` UTC today as a Unix time (None: no deadline)."""
    if text is None:
        return None
    import datetime as dt

    hour, minute = (int(x) for x in text.split(":"))
    now = dt.datetime.now(dt.timezone.utc)
    return now.replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    algos = args.algos.split(",")
    env_kwargs: dict[str, Any] = {"maze": args.maze} if args.env == "point_maze" else {}
    config: dict[str, Any] = {"hidden": args.hidden, "regret_diagnostic": args.regret_diagnostic}
    if args.quick:
        config.update({"min_buffer": 400, "grad_steps": 5})
    name = args.env + (f"-{args.maze}" if args.env == "point_maze" else "") + args.tag
    folder = RESULTS / "quick" if args.quick else RESULTS
    runs_dir = folder / ("runs" if args.quick else "finished") / name
    runs_dir.mkdir(parents=True, exist_ok=True)
    base = {
        "env": args.env,
        "env_kwargs": env_kwargs,
        "config": config,
        "epochs": args.epochs,
        "eval_every": args.eval_every,
        "plot_seed": seeds[0],
        "stochastic_eval": args.stochastic_eval,
    }
    info = machine()
    started = time.perf_counter()
    runs = []
    started_runs = 0
    deadline = deadline_epoch(args.deadline)
    for seed in seeds:  # seed-major: a stopped benchmark leaves complete paired seeds
        for algo in algos:
            spec = {**base, "algo": algo, "seed": seed}
            path = runs_dir / f"{algo}-{seed}.json"
            if args.resume and path.exists():
                old = json.loads(path.read_text())
                if old.get("spec") == spec:
                    runs.append(old)
                    continue
            if args.max_runs is not None and started_runs >= args.max_runs:
                continue
            if deadline is not None:
                walls = [r["wall_seconds"] for r in runs if r["algo"] == algo] or [
                    r["wall_seconds"] for r in runs
                ]
                expected = max(walls) * 1.1 if walls else 0.0
                if time.time() + expected > deadline:
                    print(f"{algo} seed {seed}: not started (would end after {args.deadline} UTC)")
                    continue
            started_runs += 1
            out = job(spec)
            path.write_text(json.dumps(out) + "\n")
            runs.append(out)
            f = out["final"]
            print(
                f"{algo:12s} seed {seed}: coverage {f['coverage']} (box {f['coverage_box']}, own "
                f"{f['coverage_own']}), AR {f['success_rate']:.2f}, {out['train_seconds']:.0f} s",
                flush=True,
            )
    if not runs:
        print("no finished runs yet: nothing to summarise")
        return 0
    randoms = [random_job({**base, "seed": s}) for s in seeds]
    payload = aggregate(args, argv, algos, seeds, config, env_kwargs, runs, randoms, info)
    # the runs' own wall time (a resumed benchmark counts its earlier sessions too)
    payload["wall_seconds"] = sum(r["wall_seconds"] for r in runs)
    payload["wall_seconds_this_session"] = time.perf_counter() - started
    from rsd_skills import make_env
    from rsd_skills._contract import portable

    env = make_env(args.env, **env_kwargs)
    plots(payload, env, folder, name)  # drops the trajectories from the runs once drawn
    (folder / f"{name}.json").write_text(json.dumps(portable(payload), indent=1) + "\n")
    print(f"wrote {folder / (name + '.json')}")
    if not args.quick and not args.no_render:
        sys.path.insert(0, str(HERE))
        import render

        render.main()
    return 0


def aggregate(
    args: argparse.Namespace,
    argv: list[str] | None,
    algos: list[str],
    seeds: list[int],
    config: dict[str, Any],
    env_kwargs: dict[str, Any],
    runs: list[dict[str, Any]],
    randoms: list[dict[str, Any]],
    info: dict[str, Any],
) -> dict[str, Any]:
    from rsd_skills import Config, __version__, make_env

    env = make_env(args.env, **env_kwargs)
    cfg = Config(**config).resolved("rsd", env.horizon, env.act_dim)
    keys = ["coverage", "coverage_box", "coverage_own", "final_distance", "success_rate"]
    if args.stochastic_eval:
        keys.append("coverage_stochastic")
    methods: dict[str, Any] = {}
    for algo in ["random", *algos]:
        rs = sorted(
            (r for r in (randoms if algo == "random" else runs) if r["algo"] == algo),
            key=lambda r: r["seed"],
        )
        if not rs:  # a study in parts: this method has no finished run yet
            continue
        entry: dict[str, Any] = {k: summary([r["final"][k] for r in rs]) for k in keys}
        if algo == "random":
            entry["standing_coverage"] = summary([r["final"]["standing_coverage"] for r in rs])
        else:
            entry["train_cells"] = summary([r["final"]["train_cells"] for r in rs])
            entry["mean_abs_action"] = summary([r["final"]["mean_abs_action"] for r in rs])
            entry["coverage_auc"] = summary(
                [float(np.mean([c["coverage"] for c in r["curve"]])) for r in rs]
            )
            entry["env_steps_per_second"] = summary([r["env_steps_per_second"] for r in rs])
        entry["runs"] = rs
        methods[algo] = entry
    paired: dict[str, Any] = {}
    for a, b in PAIRS:
        if a not in methods or b not in methods:
            continue
        # the seeds both finished (all of them once the study is complete)
        by_seed = {m: {r["seed"]: r["final"] for r in methods[m]["runs"]} for m in (a, b)}
        both = sorted(set(by_seed[a]) & set(by_seed[b]))
        if not both:
            continue
        for key in ("coverage_box", "coverage_own", "success_rate", "coverage_stochastic"):
            if key not in keys:
                continue
            diffs = [by_seed[a][s][key] - by_seed[b][s][key] for s in both]
            paired[f"{a}-{b}:{key}"] = {
                **t_interval(diffs, min_seeds=min(MIN_VERDICT_SEEDS, len(seeds))),
                "seeds": both,
            }
    if "metra" in methods:
        for algo in algos:
            if algo not in methods:
                continue
            methods[algo]["steps_per_second_ratio_to_metra"] = (
                methods[algo]["env_steps_per_second"]["mean"]
                / methods["metra"]["env_steps_per_second"]["mean"]
            )
    return {
        "benchmark": args.env + (f"-{args.maze}" if args.env == "point_maze" else "") + args.tag,
        "command": "python benchmarks/run.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "package_version": __version__,
        "machine": info,
        "seeds": seeds,
        "planned_runs": len(algos) * len(seeds),
        "finished_runs": len(runs),
        "finished_seeds": {
            a: [r["seed"] for r in m["runs"]] for a, m in methods.items() if a != "random"
        },
        "epochs": args.epochs,
        "env_steps_per_run": args.epochs * cfg.n_traj * env.horizon,
        "eval_every": args.eval_every,
        "horizon": env.horizon,
        "max_cells": getattr(env, "max_cells", None),
        "n_goals": len(env.goals()),
        "success_radius": env.success_radius,
        "config": cfg.to_dict(),
        "hyperparameter_selection": "none: the package defaults with hidden width "
        f"{args.hidden} for every method (no tuning on any split)",
        "methods": methods,
        "paired": paired,
        "paper": {
            "claim": "RSD outperforms baselines in efficiency and diversity; 15% zero-shot improvement "
            "in high-dimensional environments (abstract)",
            "numbers_for_this_environment": None,
        },
    }


def plots(payload: dict[str, Any], env: Any, folder: Path, name: str) -> None:
    from rsd_skills.evaluation import _pyplot, plot_curves, plot_trajectories

    methods = payload["methods"]
    n = len(payload["seeds"])
    keys = [("coverage", "coverage (cells, 64 prior skills)"), ("success_rate", "zero-shot AR")]
    if any(
        "coverage_stochastic" in c
        for m in methods.values()
        for r in m["runs"]
        for c in r.get("curve", [])
    ):
        keys.append(("coverage_stochastic", "coverage, sampled actions"))
        keys.append(("mean_abs_action", "mean |tanh μ| of the policy"))
    for key, label in keys:
        curves = {
            algo: [[(c["env_steps"], c[key]) for c in r["curve"]] for r in m["runs"]]
            for algo, m in methods.items()
            if algo != "random"
        }
        plot_curves(
            curves,
            folder / f"{name}-{key}.png",
            ylabel=label,
            title=f"{name}, mean ± sample std over {n} seeds",
            ceiling=payload["max_cells"] if key.startswith("coverage") else None,
            baseline=methods["random"][key]["mean"] if key in methods["random"] else None,
        )
    rounds = [
        r["regret_rounds"] for r in methods.get("rsd", {}).get("runs", []) if r.get("regret_rounds")
    ]
    plt = _pyplot()
    if rounds and plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.2), dpi=110)
        length = min(len(r) for r in rounds)
        idx = np.arange(1, length + 1)
        for key, label in (
            ("signal_std", "std over z of mean Reg"),
            ("noise_std", "std over noise draws"),
        ):
            ys = np.array([[p[key] for p in r[:length]] for r in rounds])
            axes[0].plot(idx, ys.mean(0), label=label)
        axes[0].set(xlabel="generator round", ylabel="std of Reg(z)", yscale="log")
        axes[0].legend(fontsize=8)
        snr = np.array([[p["snr"] for p in r[:length]] for r in rounds])
        axes[1].plot(idx, snr.mean(0), color="C2")
        if len(rounds) > 1:
            sd = snr.std(0, ddof=1)
            axes[1].fill_between(idx, snr.mean(0) - sd, snr.mean(0) + sd, color="C2", alpha=0.2)
        axes[1].axhline(1.0, color="0.5", ls=":", lw=1)
        axes[1].set(
            xlabel="generator round",
            ylabel="signal / noise",
            title=f"RSD regret SNR, {len(rounds)} seeds",
        )
        fig.tight_layout()
        fig.savefig(folder / f"{name}-regret_snr.png")
        plt.close(fig)
    for algo, m in methods.items():
        run = next((r for r in m["runs"] if r.get("xy") is not None), None)
        if run is None:
            continue
        skills = np.asarray(run["skills"]) if run.get("skills") is not None else None
        plot_trajectories(
            env,
            np.asarray(run["xy"]),
            folder / f"{name}-trajectories-{algo}.png",
            f"{algo}: 64 skills, seed {run['seed']}, coverage {run['final']['coverage']}",
            skills,
        )
        run.pop("xy", None)
        run.pop("skills", None)


if __name__ == "__main__":
    sys.exit(main())
