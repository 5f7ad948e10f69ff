"""Run (h) full_glue on one GPU inside a fixed wall-clock budget, as parallel processes.

One process per (task, seed) of ``python benchmarks/run.py --only full_glue``; each writes its own
results/full_glue/<task>-seed<S>.json. The plan is decided by a rule fixed before any run, from
throughput measured on the same machine first:

1. smoke: one tiny SST-2 run on the device (200 training examples, gate off, in a temporary folder)
   must finish, or nothing else starts;
2. probe: seconds per training step of S0 and S1 on SST-2 (batch 32), measured with 3 processes at
   once (``_full_throughput`` of run.py); the projected time of one SST-2 seed is
   4,148 x S0 + 3 x 2,074 x S1 x 1.2 steps (S2/S3 cost more than S1) plus 10 %;
3. if 3 SST-2 seeds in parallel fit the time left: all of SST-2; CoLA and RTE (3 seeds each) start
   beside them only if the projection is under half the time left (so up to 2x contention still
   fits). Otherwise SST-2 alone on the largest seeded training subset that fits (rounded down to a
   thousand), recorded in every run's JSON.

Usage (from packages/sorbet-snn): python benchmarks/full_glue_parallel.py --device cuda
    --budget-s 540 [--data DIR] [--log-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SST2_TRAIN = 67349 - 1000  # the (f) recipe holds 1,000 out for validation
S0_STEPS = 2 * math.ceil(SST2_TRAIN / 32)
S1_STEPS = math.ceil(SST2_TRAIN / 32)


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    """``python <args>`` from the package folder, one thread, unbuffered, output to ``log``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, *args], cwd=HERE.parent, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)  # fmt: skip


def _python(code: str, log: Path) -> subprocess.Popen:
    return _spawn(["-c", code], log)


def _run(args: list[str], log: Path) -> subprocess.Popen:
    return _spawn([str(HERE / "run.py"), *args], log)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="torch device of every run")
    p.add_argument("--budget-s", type=float, required=True, help="wall-clock seconds for it all")
    p.add_argument("--data", type=Path, default=None, help="the shared data folder")
    p.add_argument("--log-dir", type=Path, default=HERE / "runs" / "full_glue_logs")
    a = p.parse_args()
    start = time.time()
    a.log_dir.mkdir(parents=True, exist_ok=True)
    data = ["--data", str(a.data)] if a.data else []
    data_root = a.data or Path(os.environ.get("ICML25_DATA", HERE.parents[2].parent / "shared"
                                              / "data"))  # fmt: skip
    plan: dict = {"budget_s": a.budget_s, "device": a.device}

    smoke = (
        "import sys, dataclasses; sys.path.insert(0, 'benchmarks'); import run; "
        "from pathlib import Path; import tempfile; "
        "r = {**run.FULL_GLUE['SST-2'], 'train_subset': 200, 'val_size': 60, "
        "'teacher_epochs': 0.5, 'epochs': 0.2, 'eval_every': 2}; "
        "o = run._study_config; "
        "run._study_config = lambda *x, **k: dataclasses.replace(o(*x, **k), teacher_gate=False); "
        f"res = run._run_seed(r, Path({str(data_root / 'glue' / 'SST-2')!r}), "
        "Path(tempfile.mkdtemp()), 0, lambda w: None, lambda: None, "
        f"device={a.device!r}); print('SMOKE OK', res['stages']['S4']['dev'])"
    )
    t = time.time()
    rc = _python(smoke, a.log_dir / "smoke.log").wait()
    plan["smoke_s"] = round(time.time() - t, 1)
    if rc != 0:
        print((a.log_dir / "smoke.log").read_text()[-4000:])
        print(f"smoke failed (exit {rc}); nothing else started", flush=True)
        return 1
    probe = (
        "import sys, json; sys.path.insert(0, 'benchmarks'); import run; from pathlib import Path; "
        f"print('PROBE', json.dumps(run._full_throughput(Path({str(data_root / 'glue' / 'SST-2')!r}), "
        f"steps=42, device={a.device!r})))"
    )
    t = time.time()
    procs = [_python(probe, a.log_dir / f"probe{i}.log") for i in range(3)]
    if any(pr.wait() != 0 for pr in procs):
        print("probe failed; see probe logs", flush=True)
        return 1
    probes = []
    for i in range(3):
        line = [x for x in (a.log_dir / f"probe{i}.log").read_text().splitlines()
                if x.startswith("PROBE ")][-1]  # fmt: skip
        probes.append(json.loads(line[6:]))
    plan["probe_s"] = round(time.time() - t, 1)
    s0 = max(pr["S0"]["s_per_step"] for pr in probes)
    s1 = max(pr["S1"]["s_per_step"] for pr in probes)
    seed_s = 1.1 * (S0_STEPS * s0 + 3 * S1_STEPS * s1 * 1.2)
    left = a.budget_s - (time.time() - start) - 30
    plan.update(s0_s_per_step=s0, s1_s_per_step=s1, projected_sst2_seed_s=round(seed_s),
                left_s=round(left))  # fmt: skip
    runs = []
    if seed_s <= left:
        plan["sst2_train_subset"] = None
        runs.append(["--tasks", "SST-2"])
        plan["with_cola_rte"] = seed_s <= left / 2
        if plan["with_cola_rte"]:
            runs += [["--tasks", "CoLA"], ["--tasks", "RTE"]]
    else:
        subset = int(SST2_TRAIN * left / seed_s) // 1000 * 1000
        plan.update(sst2_train_subset=subset, with_cola_rte=False)
        if subset < 1000:
            print("PLAN", json.dumps(plan), "\nnot even 1,000 examples fit; nothing started")
            return 1
        runs.append(["--tasks", "SST-2", "--train-subset", str(subset)])
    print("PLAN", json.dumps(plan), flush=True)
    for folder in (a.log_dir, HERE / "results" / "full_glue"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
    procs = []
    for extra in runs:
        for seed in (0, 1, 2):
            name = f"{extra[1]}-seed{seed}"
            procs.append(_run(["--only", "full_glue", *extra, "--seeds", str(seed), "--device",
                               a.device, *data], a.log_dir / f"{name}.log"))  # fmt: skip
    deadline = start + a.budget_s - 10
    while any(pr.poll() is None for pr in procs) and time.time() < deadline:
        time.sleep(2)
    for pr in procs:
        if pr.poll() is None:
            pr.kill()
    done = sorted(x.name for x in (HERE / "results" / "full_glue").glob("*-seed*.json"))
    print(f"finished runs: {done} ({time.time() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
