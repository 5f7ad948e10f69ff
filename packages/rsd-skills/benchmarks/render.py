"""Render benchmarks/results/*.json into the README region between the results markers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"
NAMES = {
    "random": "random actions (trivial)",
    "diayn": "DIAYN",
    "lsd": "LSD",
    "metra": "METRA",
    "rsd_uniform": "RSD-uniform (ablation: no generator)",
    "rsd": "**RSD**",
}


def pm(s: dict[str, Any], digits: int = 2) -> str:
    """``mean ± sample std`` (ddof=1), just the mean for a single seed."""
    if s.get("std") is None:
        return f"{s['mean']:.{digits}f}"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"


def table(res: dict[str, Any]) -> list[str]:
    n = len(res["seeds"])
    cells = res.get("max_cells")
    of = f" of {cells}" if cells else ""
    stochastic = "coverage_stochastic" in res["methods"]["random"]
    header = [
        "method",
        f"coverage{of}, prior skills",
        "coverage, U[−1,1]^d skills",
        "coverage, own final skills",
    ]
    if stochastic:
        header.append("coverage, prior skills, sampled actions")
    header += [
        "cells visited in training",
        f"zero-shot AR ({res['n_goals']} goals, δ={res['success_radius']:g})",
        "zero-shot FD",
        "mean abs action",
        "env steps/s",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for algo, m in res["methods"].items():
        row = [
            NAMES.get(algo, algo),
            pm(m["coverage"], 1),
            pm(m["coverage_box"], 1) if algo != "random" else "",
            pm(m["coverage_own"], 1) if algo != "random" else "",
        ]
        if stochastic:
            row.append(pm(m["coverage_stochastic"], 1) if algo != "random" else "")
        row += [
            pm(m["train_cells"], 1) if "train_cells" in m else "",
            pm(m["success_rate"], 2),
            pm(m["final_distance"], 2),
            pm(m["mean_abs_action"], 2) if "mean_abs_action" in m else "0.50 (uniform)",
            f"{m['env_steps_per_second']['mean']:.0f}" if "env_steps_per_second" in m else "",
        ]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    floor = res["methods"]["random"].get("standing_coverage")
    seeds = f"{n} seed{'s' if n > 1 else ''} ({', '.join(map(str, res['seeds']))})"
    if partial(res):
        seeds = "seeds finished so far: " + "; ".join(
            f"{NAMES.get(a, a)} {', '.join(map(str, s))}" for a, s in res["finished_seeds"].items()
        )
        seeds += f"; random actions {', '.join(map(str, res['seeds']))}"
    lines.append(
        f"{seeds}, "
        + ("mean ± sample std (ddof=1); " if n > 1 else "")
        + f"{res['epochs']} epochs × {res['config']['n_traj']} trajectories × T={res['horizon']} = "
        f"{res['env_steps_per_run']:,} environment steps per run, "
        f"{res['config']['grad_steps']} gradient steps per epoch, MLPs {res['config']['hidden']}×"
        f"{res['config']['depth']}. Coverage: distinct cells reached by 64 skills with deterministic "
        "(mean) actions unless marked; *prior* = the method's evaluation prior (RSD and RSD-uniform "
        "U[−1,1]^d, METRA/LSD the unit sphere); *own* = the distribution each method trains on at the end "
        "(RSD: its generator mixture). Zero-shot goal reaching uses each method's goal skill and does "
        "not depend on the skill distribution. Mean abs action: |tanh μ| of the policy along the prior "
        "skills' trajectories (uniform random actions: 0.5)."
        + (
            f" A body that does not move (mid-range actions) covers {floor['mean']:.0f} cell(s) here."
            if floor
            else ""
        )
    )
    return lines


PAIR_NAMES = {
    "coverage_box": "coverage, U[−1,1]^d skills",
    "coverage_own": "coverage, own final skills",
    "coverage_stochastic": "coverage, sampled actions",
    "success_rate": "zero-shot AR",
}


def partial(res: dict[str, Any]) -> bool:
    """A study run in parts that has not finished all its runs yet."""
    return res.get("finished_runs", 0) < res.get("planned_runs", 0)


def targets(res: dict[str, Any]) -> list[str]:
    paired = res.get("paired", {})
    if not paired:
        return []
    n = len(res["seeds"])
    m = res["methods"]
    out = []
    if "metra" in m and "rsd" not in m:
        det, sto, rnd = (
            m["metra"]["coverage"]["mean"],
            m["metra"].get("coverage_stochastic", {}).get("mean"),
            m["random"]["coverage"]["mean"],
        )
        word = "met" if det > rnd else "missed"
        out += [
            f"- Target METRA coverage (deterministic skills) > random actions at "
            f"{res['env_steps_per_run']:,} steps: **{word}** ({det:.0f} vs {rnd:.0f} cells"
            + (f"; with sampled actions METRA covers {sto:.0f}" if sto is not None else "")
            + ").",
            "",
        ]
    head = (
        "Paired differences over the seeds both methods have finished so far, mean and 95% t "
        "interval; a verdict (*ahead* = interval above 0, *tie* = contains 0, *behind* = below 0) only "
        "from 5 paired seeds, *not yet measured* before:"
        if partial(res)
        else f"Paired differences over the {n} seeds (same seed = same environment resets), mean and 95% "
        "t interval; *ahead* = interval above 0, *tie* = contains 0, *behind* = below 0:"
        if n > 1
        else "Differences, one seed (no interval):"
    )
    out += [
        head,
        "",
        "| comparison | metric | difference | 95% t interval | verdict |",
        "|---|---|---|---|---|",
    ]
    for key, d in paired.items():
        pair, metric = key.split(":")
        a, b = pair.split("-")
        interval = "" if d["low"] is None else f"[{d['low']:+.2f}, {d['high']:+.2f}]"
        out.append(
            f"| {NAMES.get(a, a)} − {NAMES.get(b, b)} | {PAIR_NAMES.get(metric, metric)} | "
            f"{d['mean']:+.2f} | {interval} | {d['verdict']} |"
        )
    out.append("")
    return out


def render() -> str:
    parts = []
    paths = sorted(
        (
            p
            for p in (HERE / "results").glob("*.json")
            if p.stem not in ("timing", "throughput_profile", "zero_shot_closed_loop")
        ),
        key=lambda p: (not p.stem.startswith("point_maze"), p.stem),
    )
    for path in paths:
        res = json.loads(path.read_text())
        name = res["benchmark"]
        parts += [
            f"### {name}",
            "",
            f"Command: `{res['command']}` ({res['wall_seconds'] / 60:.0f} min of runs, one at a "
            f"time, on {res['machine']['cores']} shared cores, torch {res['machine']['torch']}).",
            "",
        ]
        if partial(res):
            parts += [
                f"**In progress: {res['finished_runs']} of {res['planned_runs']} runs finished** (a "
                "study in parts: the same command continues it; finished runs are kept in "
                f"`benchmarks/results/finished/{name}/`).",
                "",
            ]
        parts += [*table(res), "", *targets(res), ""]
        for key in (
            "coverage",
            "coverage_stochastic",
            "mean_abs_action",
            "success_rate",
            "regret_snr",
        ):
            png = HERE / "results" / f"{name}-{key}.png"
            if png.exists():
                parts.append(f"![{name} {key}](benchmarks/results/{png.name})")
        parts.append("")
        pngs = sorted((HERE / "results").glob(f"{name}-trajectories-*.png"))
        if pngs:
            parts.append(" ".join(f"![{p.stem}](benchmarks/results/{p.name})" for p in pngs))
            parts.append("")
    parts += closed_loop_table()
    parts += timing_table()
    parts += profile_table()
    return "\n".join(parts).rstrip() + "\n"


def closed_loop_table() -> list[str]:
    """The zero-shot diagnosis (``benchmarks/zero_shot_closed_loop.py``): METRA's skill recomputed
    every step vs fixed at s0, against RSD's fixed z = Ψ(g)."""
    path = HERE / "results" / "zero_shot_closed_loop.json"
    if not path.exists():
        return []
    res = json.loads(path.read_text())
    seeds = sorted(res["seeds"], key=int)
    same = sum(res["seeds"][k]["reproduces_study"] for k in seeds)
    lines = [
        f"### zero-shot diagnosis: closed-loop skills ({res['study']})",
        "",
        f"Command: `{res['command'].strip()}`. METRA retrained with each finished run's settings "
        f"(seeds {', '.join(seeds)}; the retrained run reproduces the study's zero-shot success "
        f"rate exactly in {same} of {len(seeds)}), then the same trained agent evaluated with its "
        "skill recomputed every step (closed loop, the study's METRA number) and with z computed "
        "once at s0 (as RSD's z = Ψ(g) is, and as the official RSD evaluation runs METRA); RSD's "
        "success rates are the study's. Paired over seeds, 95% t interval:",
        "",
        "| comparison (zero-shot AR) | difference | 95% t interval | verdict |",
        "|---|---|---|---|",
    ]
    for name, d in res["summary"].items():
        ci = "" if d["low"] is None else f"[{d['low']:+.2f}, {d['high']:+.2f}]"
        lines.append(f"| {name} | {d['mean']:+.2f} | {ci} | {d['verdict']} |")
    return [*lines, ""]


def timing_table() -> list[str]:
    path = HERE / "results" / "timing.json"
    if not path.exists():
        return []
    res = json.loads(path.read_text())
    widths = list(res["widths"])
    algos = list(res["widths"][widths[0]])
    repeats = res.get("repeats", 1)
    what = f"median of {repeats} repeats" if repeats > 1 else "one run"
    header = ["method"] + [
        f"{w}×2 MLPs: env steps per CPU second, {what} (÷ METRA, paired)" for w in widths
    ]
    lines = [
        "### training throughput",
        "",
        f"Command: `{res['command'].strip()}`: {res['env']}; the methods interleaved in one process, one "
        f"torch thread, a whole run of {res['epochs']} epochs each in blocks of {res['block_epochs']} "
        "(updates and RSD's generator rounds included, evaluation excluded)"
        + (
            f", the order of the methods alternating from block to block, the whole run repeated "
            f"{repeats} times with fresh trainers; the ratio to METRA is the median over repeats of "
            "each repeat's paired ratio"
            if repeats > 1
            else ""
        )
        + "; env steps per CPU second of the process, so other jobs on the machine do not inflate "
        "the times.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for a in algos:
        row = [NAMES.get(a, a)]
        for w in widths:
            r = res["widths"][w][a]
            row.append(f"{r['env_steps_per_second']:.0f} ({r['ratio_to_metra']:.2f})")
        lines.append("| " + " | ".join(row) + " |")
    w = widths[0]
    r = res["widths"][w].get("rsd")
    if r is not None and r["ratio_to_metra"] is not None:
        ci = r.get("ratio_to_metra_ci95")
        if ci is None:
            word = "met" if r["ratio_to_metra"] >= 0.9 else "missed"
            detail = f"{r['ratio_to_metra']:.2f}"
        else:
            word = "met" if ci[0] >= 0.9 else "missed"
            if ci[0] < 0.9 <= ci[1]:
                word += " (not shown: the interval contains 0.9)"
            detail = (
                f"median paired ratio {r['ratio_to_metra']:.3f}; per repeat "
                + ", ".join(f"{x:.3f}" for x in r["ratio_to_metra_repeats"])
                + f"; mean {r['ratio_to_metra_mean']:.3f}, 95% t interval "
                f"[{ci[0]:.3f}, {ci[1]:.3f}] over {repeats} repeats"
            )
        lines += [
            "",
            f"- Target RSD env steps/s ≥ 0.9 × METRA ({w}×2 MLPs): **{word}** ({detail}). Rule: "
            "*met* when the 95% t interval of the paired ratio lies at or above 0.9 (its lower end "
            "≥ 0.9), *missed* otherwise.",
        ]
    return [*lines, ""]


PROFILE_ROWS = {
    "skills": "skill choice (RSD: generator rounds)",
    "rollouts": "rollouts",
    "replay": "replay sampling",
    "phi_step": "φ (and λ) step",
    "reward": "intrinsic reward",
    "sac_step": "SAC step",
    "clip_norms": "… of which gradient-clip norms (φ and SAC steps)",
    "other": "other",
    "total": "total",
}


def profile_table() -> list[str]:
    """Where the CPU time goes, per method (``benchmarks/throughput_profile.py``)."""
    path = HERE / "results" / "throughput_profile.json"
    if not path.exists():
        return []
    res = json.loads(path.read_text())
    cpu = res["cpu_seconds"]
    algos = list(cpu)
    diff = "rsd" in cpu and "metra" in cpu
    header = ["component", *(NAMES.get(a, a) for a in algos)] + (["RSD − METRA"] if diff else [])
    lines = [
        "Where the CPU time goes (seconds of the process's CPU time over the whole run; command: "
        f"`{res['command'].strip()}`, {res['epochs']} epochs of {res['width']}×2 MLPs, the methods "
        "interleaved epoch by epoch; the wrappers that time the components add a little to every "
        "method):",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for key, label in PROFILE_ROWS.items():
        row = [label, *(f"{cpu[a][key]:.2f}" for a in algos)]
        if diff:
            row.append(f"{cpu['rsd'][key] - cpu['metra'][key]:+.2f}")
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def main() -> None:
    text = README.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{README} lacks the results markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(head + START + "\n" + render() + END + tail, encoding="utf-8")
    print(f"rendered {README}")


if __name__ == "__main__":
    main()
