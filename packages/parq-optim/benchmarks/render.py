"""Render benchmarks/results/*.json into the README region between the results markers."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"
METHODS = [
    ("fp", "full precision"),
    ("ptq", "PTQ (trivial)"),
    ("ste", "STE"),
    ("binaryrelax", "BinaryRelax"),
    ("parq", "PARQ"),
]
BASELINES = ("ptq", "ste", "binaryrelax")  # the quantized baselines PARQ is measured against
NAMES = dict(METHODS)


def cell(row: dict | None) -> str:
    """``mean ± sample std`` (ddof=1), or the mean alone for one seed."""
    if row is None:
        return "—"
    std = row.get("std") if len(row.get("test_acc", [])) > 1 else None
    return f"{row['mean']:.2f}" if std is None else f"{row['mean']:.2f} ± {std:.2f}"


def _load(name: str) -> dict | None:
    for suffix in ("", "_quick"):
        path = HERE / "results" / f"{name}{suffix}.json"
        if path.is_file():
            return json.loads(path.read_text())
    return None


def accuracy_table(res: dict) -> list[str]:
    m = res["machine"]
    n = len(res["seeds"])
    spread = f"mean ± sample std (ddof=1) over {n} seeds {res['seeds']}" if n > 1 else "1 seed"
    standardized = res.get("standardization", "with the train mean and std + 1e-6")
    lines = [
        f"**Accuracy** (test top-1 %, {spread}; greedy LSBQ levels, SGD momentum 0.9, cosine LR, "
        f"anneal window [0, 0.9·T) steps; features standardized {standardized}; all quantized "
        "layers end with exactly |Q| "
        f"values: {all(r['levels_equal_Q'] in (None, True) for r in res['rows'])}). "
        f"Command: `{res['command']}`{' (quick run)' if res['quick'] else ''}; "
        f"{m['cpu_count']} cores, torch {m['torch']}, Python {m['python']}, "
        f"{res['wall_time_s'] / 60:.1f} min.",
        "",
        "| dataset | bits | "
        + " | ".join(lbl for _, lbl in METHODS)
        + " | PARQ − best baseline | paper (reported) |",
        "|---|---|" + "---|" * (len(METHODS) + 2),
    ]
    rows = res["rows"]
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        fp = next((r for r in rows if r["dataset"] == ds and r["method"] == "fp"), None)
        for bits in dict.fromkeys(
            r["bits"] for r in rows if r["dataset"] == ds and r["bits"] != "fp"
        ):
            found = {
                key: fp
                if key == "fp"
                else next(
                    (
                        x
                        for x in rows
                        if x["dataset"] == ds and x["bits"] == bits and x["method"] == key
                    ),
                    None,
                )
                for key, _ in METHODS
            }
            base = [(found[k]["mean"], k) for k in BASELINES if found[k] is not None]
            if found["parq"] is not None and base:
                best, key = max(base)
                gain = found["parq"]["mean"] - best
                verdict = f"{gain:+.2f} vs {NAMES[key]}" + (" **missed**" if gain < 0 else "")
            else:
                verdict = "—"
            cells = [cell(found[key]) for key, _ in METHODS]
            lines.append(f"| {ds} | {bits} | " + " | ".join(cells) + f" | {verdict} | n/a |")
    lines += [
        "",
        "Full precision does not depend on the bit width (the same runs are repeated per row); "
        "PTQ rounds those full-precision models to the levels without any training. "
        '"PARQ − best baseline" compares the means with the best quantized baseline of the row '
        "(PTQ, STE, BinaryRelax); **missed** marks rows where PARQ is below it. The paper's "
        "CIFAR-10/ImageNet tables were not available when this package was written, so the "
        '"paper (reported)" column is empty by design.',
    ]
    return lines


def timing_table(res: dict) -> list[str]:
    m = res["machine"]
    lines = [
        f"**Optimizer step time** ({res['model']}; median over {res['rounds']} interleaved blocks "
        f"of {res['steps_per_block']} steps, torchao {res['torchao']}). Command: "
        f"`{res['command']}`{' (quick run)' if res['quick'] else ''}; {m['cpu_count']} cores, "
        f"torch threads {m['torch_threads']}.",
        "",
        "| base | per-channel | base step (ms) | parq-optim (ms) | torchao (ms) | parq-optim / base | "
        "parq-optim / torchao |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        med = r["median_step_s"]
        ao, ratio = med.get("torchao"), r["ours_over_torchao"]
        ao_ms = "n/a" if ao is None else f"{1e3 * ao:.2f}"
        ratio_s = "n/a" if ratio is None else f"{ratio:.2f}"
        lines.append(
            f"| {r['base_optimizer']} | {r['per_channel']} | {1e3 * med['base']:.2f} | "
            f"{1e3 * med['ours']:.2f} | {ao_ms} | {r['ours_over_base']:.2f} | {ratio_s} |"
        )
    return lines


def main() -> int:
    parts: list[str] = []
    acc, tim = _load("accuracy"), _load("timing")
    if acc:
        parts += [*accuracy_table(acc), ""]
    if tim:
        parts += [*timing_table(tim), ""]
    if not parts:
        parts = ["No benchmark results yet: run `python benchmarks/run.py`.", ""]
    text = README.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{README}: results markers not found")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(head + START + "\n" + "\n".join(parts) + END + tail)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
