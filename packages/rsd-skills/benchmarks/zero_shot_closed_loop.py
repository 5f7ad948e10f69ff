"""Diagnosis: does METRA's zero-shot lead over RSD on point maze come from its closed-loop skill?

In the 300-epoch point-maze study RSD (and RSD-uniform) reach far fewer goals zero-shot than METRA.
The two evaluations differ in one respect besides the methods: METRA/LSD recompute their skill
z_t = n(φ(g) − φ(s_t)) at every step (closed loop), RSD keeps z = Ψ(g) fixed for the episode, as the
official RSD evaluation also does for METRA (``recompute=False``: z computed once at s0). This
retrains METRA with each finished run's exact settings (``benchmarks/results/finished/<study>/``),
checks that the retrained run reproduces the study's zero-shot success rate, and then evaluates the
same trained agent both ways; paired over seeds against the study's RSD runs.

Usage (from the package folder): ``python benchmarks/zero_shot_closed_loop.py [--seeds 0,1,2,3,4]``
(``--resume`` keeps finished seeds). Writes ``benchmarks/results/zero_shot_closed_loop.json``;
``benchmarks/render.py`` puts it into the README.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import job, t_interval  # noqa: E402

STUDY = "point_maze-medium-300ep"
OUT = HERE / "results" / "zero_shot_closed_loop.json"


def both_ways(trainer: Any) -> dict[str, dict[str, float]]:
    from rsd_skills import evaluate_zero_shot

    out = {}
    for name, recompute in (("closed_loop", True), ("fixed_at_s0", False)):
        z = evaluate_zero_shot(trainer, recompute=recompute)
        out[name] = {"success_rate": z["success_rate"], "final_distance": z["final_distance"]}
    return out


def summarise(seeds: dict[str, Any]) -> dict[str, Any]:
    keys = sorted(seeds, key=int)
    ar = {
        w: [seeds[k]["metra"][w]["success_rate"] for k in keys]
        for w in ("closed_loop", "fixed_at_s0")
    }
    ar["RSD"] = [seeds[k]["rsd_success_rate"] for k in keys]
    pairs = {
        "closed_loop − fixed_at_s0 (METRA)": ("closed_loop", "fixed_at_s0"),
        "METRA fixed_at_s0 − RSD": ("fixed_at_s0", "RSD"),
        "METRA closed_loop − RSD": ("closed_loop", "RSD"),
    }
    rows = {name: [x - y for x, y in zip(ar[a], ar[b])] for name, (a, b) in pairs.items()}
    return {name: t_interval(d, min_seeds=5) for name, d in rows.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds of the study")
    p.add_argument("--resume", action="store_true", help="keep the finished seeds of the JSON")
    args = p.parse_args(argv)
    finished = HERE / "results" / "finished" / STUDY
    payload: dict[str, Any] = json.loads(OUT.read_text()) if args.resume and OUT.exists() else {}
    payload.update({"study": STUDY, "command": "python benchmarks/zero_shot_closed_loop.py "
                    + " ".join(argv if argv is not None else sys.argv[1:])})  # fmt: skip
    seeds = payload.setdefault("seeds", {})
    for seed in (int(s) for s in args.seeds.split(",")):
        if str(seed) in seeds:
            continue
        metra = json.loads((finished / f"metra-{seed}.json").read_text())
        rsd = json.loads((finished / f"rsd-{seed}.json").read_text())
        start = time.perf_counter()
        out = job(metra["spec"], on_trained=both_ways)
        seeds[str(seed)] = {
            "metra": out["after"],
            "reproduces_study": out["final"]["success_rate"] == metra["final"]["success_rate"],
            "study_metra_success_rate": metra["final"]["success_rate"],
            "rsd_success_rate": rsd["final"]["success_rate"],
            "seconds": round(time.perf_counter() - start),
        }
        print(seed, seeds[str(seed)], flush=True)
        payload["summary"] = summarise(seeds)
        OUT.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
