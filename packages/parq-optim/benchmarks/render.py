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


LM_NAMES = {
    "fp": "full precision",
    "ptq": "PTQ (trivial)",
    "ste": "STE",
    "binaryrelax": "BinaryRelax",
    "parq": "PARQ",
}


def _ms(row: dict, key: str) -> str:
    """``mean ± sample std`` of the row's ``key`` summary, or the mean alone for one seed."""
    summary = row[key]
    std = summary["std"]
    return f"{summary['mean']:.4f}" if std is None else f"{summary['mean']:.4f} ± {std:.4f}"


def lm_table(res: dict) -> list[str]:
    m, p, sel = res["machine"], res["protocol"], res["selection"]
    n = len(res["seeds"])
    spread = f"mean ± sample std (ddof=1) over {n} seeds {res['seeds']}" if n > 1 else "1 seed"
    timing = {(r["method"], r["bits"]): r for r in res["timing"]["rows"]}
    lr_grid = ", ".join(f"{k}: {v:.4f}" for k, v in sel["lr"]["grid_val_loss"].items())
    gran = "; ".join(
        f"{LM_NAMES[k]} {v['selected']} ("
        + ", ".join(f"{g} {x:.4f}" for g, x in v["val_loss"].items())
        + ")"
        for k, v in sel["granularity_at_2_bits"].items()
    )
    lines = [
        f"**Language model** ({res['data']}, character level; {res['model']}; quantized: "
        f"{res['quantized']}; greedy LSBQ levels; AdamW betas (0.9, 0.95), weight decay "
        f"{p['weight_decay']}, batch {p['batch_size']} windows, {p['steps']} steps, linear "
        f"warm-up {p['lr_warmup']} steps then cosine, gradient clipping {p['grad_clip']}; PARQ "
        f"and BinaryRelax anneal over [0, {p['anneal_end_frac']}·T) steps, PARQ steepness "
        f"{p['steepness']}, level sets refreshed every {p['quant_period']} steps; splits "
        f"{res['splits']['rule']}). Loss in nats per character on the exported (hard-quantized) "
        f"weights, {spread}. Command: `{res['command']}`"
        f"{' (quick run)' if res['quick'] else ''}; {m['cpu_count']} cores, torch threads "
        f"{m['torch_threads']}, torch {m['torch']}, {res['wall_time_s'] / 60:.1f} min.",
        "",
        f"Selected on the validation split (seed {sel['seed']}, never a reported seed): learning "
        f"rate {sel['lr']['selected']:g} (full precision, val loss {lr_grid}), used by every "
        f"method; level granularity at 2 bits per method, kept at 3 and 4 bits: {gran}. PTQ "
        "uses PARQ's granularity.",
        "",
        "| bits | method | levels | val loss | test loss | bits / weight (exported) | "
        "train step / fp | optimizer step / fp |",
        "|---|---|---|---|---|---|---|---|",
        f"| — | unigram (trivial) | — | {res['unigram']['val_loss']:.4f} | "
        f"{res['unigram']['test_loss']:.4f} | — | — | — |",
    ]
    for row in res["rows"]:
        key = (row["method"], row["bits"])
        t = timing.get(key)
        step = f"{t['step_ratio_to_fp']:.2f}" if t else "—"
        opt = f"{t['opt_step_ratio_to_fp']:.2f}" if t else "—"
        levels = (
            "—"
            if row["per_channel"] is None
            else ("per channel" if row["per_channel"] else "per tensor")
        )
        bpw = "—" if row["bits_per_weight"] is None else f"{row['bits_per_weight']:.2f}"
        bits = "32 (fp)" if row["bits"] == "fp" else row["bits"]
        lines.append(
            f"| {bits} | {LM_NAMES[row['method']]} | {levels} | {_ms(row, 'val')} | "
            f"{_ms(row, 'test')} | {bpw} | {step} | {opt} |"
        )
    verdicts = []
    for bits in dict.fromkeys(r["bits"] for r in res["rows"] if r["bits"] != "fp"):
        by = {r["method"]: r for r in res["rows"] if r["bits"] == bits}
        if "parq" in by and "ste" in by:
            d = by["parq"]["val"]["mean"] - by["ste"]["val"]["mean"]
            others = [k for k in ("ptq", "ste", "binaryrelax") if k in by]
            best = min(others, key=lambda k: by[k]["val"]["mean"])
            gain = by["parq"]["val"]["mean"] - by[best]["val"]["mean"]
            verdicts.append(
                f"{bits} bits: PARQ − STE {d:+.4f} ({'met' if d <= 0 else '**missed**'}), "
                f"PARQ − best baseline ({LM_NAMES[best]}) {gain:+.4f}"
            )
    t = res["timing"]
    lines += [
        "",
        "Mean validation loss (lower is better): " + "; ".join(verdicts) + ". Times: the full "
        "training step (forward, backward, optimizer) and the optimizer step alone of every "
        f"method, interleaved in one process, median over {t['rounds']} rounds of "
        f"{t['steps_per_block']} steps (each round holds one level-set refresh), as a ratio to "
        "full precision's AdamW. Bits per weight: code bits (⌈log₂|Q|⌉) plus the 32-bit level "
        "tables, over the quantized weights (the package's packed format; embeddings, head, "
        "norms and biases stay 32-bit and are not counted). The paper reports no "
        "character-level language-model numbers.",
    ]
    return lines


def distributed_table(res: dict) -> list[str]:
    lines = [
        f"**Sharded vs one process** ({res['what']}). Command: `{res['command']}`; torch "
        f"{res['machine']['torch']}.",
        "",
        "| scenario | steps | max abs. diff. of w | max rel. diff. of w | max abs. diff. of u | "
        "max abs. diff. of Q | final codes equal |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        lines.append(
            f"| {r['scenario']} | {r['steps']} | {r['max_abs_diff_w']:.1e} | "
            f"{r['max_rel_diff_w']:.1e} | {r['max_abs_diff_latent']:.1e} | "
            f"{r['max_abs_diff_levels']:.1e} | {r['final_codes_equal']} |"
        )
    return lines


def main() -> int:
    parts: list[str] = []
    acc, tim = _load("accuracy"), _load("timing")
    lm, dist = _load("lm"), _load("distributed")
    if lm:
        parts += [*lm_table(lm), ""]
    if dist:
        parts += [*distributed_table(dist), ""]
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
