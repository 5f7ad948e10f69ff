"""Render benchmarks/results/cora.json into the README region between the results markers."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"
LABELS = {
    "curmgae": "Cur-MGAE (ours)",
    "s2gae": "random-mask backbone (S2GAE-like, ours)",
    "path": "path masking (MaskGAE-style, ours)",
    "gae": "GAE (PyG, ours)",
}


def _summary(res: dict) -> dict:
    """Mean and sample std (ddof=1) per method and metric, recomputed from the per-seed values."""
    return {
        m: {
            k: {
                "mean": statistics.fmean(v),
                "std": statistics.stdev(v) if len(v) > 1 else None,
                "median": statistics.median(v),
            }
            for k, v in vals.items()
        }
        for m, vals in res["per_seed"].items()
    }


def _cell(summary: dict, key: str, scale: float = 100.0) -> str:
    s = summary[key]
    if s["std"] is None:
        return f"{scale * s['mean']:.2f}"
    return f"{scale * s['mean']:.2f} ± {scale * s['std']:.2f}"


def render(res: dict, name: str = "cora.json") -> str:
    lines = [
        f"Dataset: {res['dataset']}; {len(res['seeds'])} seeds; {res['epochs']} epochs per run "
        f"(scaled down from S2GAE's 200); mean ± sample std (ddof=1) over the "
        f"{len(res['seeds'])} seeds, in %. "
        f"torch {res['versions']['torch']}, {res['machine']['torch_threads']} CPU thread(s).",
        "",
        "| method | LP AUC | LP AP | NC acc (SVM 5-fold) | NC acc (linear probe) "
        "| epoch CPU time / backbone |",
        "|---|---|---|---|---|---|",
    ]
    for m, s in _summary(res).items():
        ratio = s["time_ratio"]["median"]
        wall = s["wall_time_ratio"]["median"]
        lines.append(
            f"| {LABELS.get(m, m)} | {_cell(s, 'lp_auc')} | {_cell(s, 'lp_ap')} | "
            f"{_cell(s, 'nc_svm_acc')} | {_cell(s, 'nc_probe_acc')} | {ratio:.2f}× (wall {wall:.2f}×) |"
        )
    for vals in res["paper_reported"].values():
        lp = f"{100 * vals['lp_auc']:.2f}" if "lp_auc" in vals else "–"
        nc = f"{100 * vals['nc_svm_acc']:.2f}" if "nc_svm_acc" in vals else "–"
        lines.append(f"| S2GAE, paper (reported) | {lp} | – | {nc} | – | – |")
    lines.append("| Cur-MGAE, paper (reported) | not available | – | not available | – | – |")
    t = res["targets"]
    yes = {True: "met", False: "missed"}
    lines += [
        "",
        "Targets (mean over seeds): Cur-MGAE ≥ random-mask backbone on LP AUC: "
        f"**{yes[t['lp_auc_ge_backbone']]}**; on NC (SVM): **{yes[t['nc_svm_ge_backbone']]}**; "
        f"on NC (linear probe): **{yes[t['nc_probe_ge_backbone']]}**; epoch time ≤ 1.3× backbone: "
        f"**{yes[t['epoch_time_le_1.3x']]}**.",
        "",
        f"Produced by `{res['command']}` in {res['wall_time_s'] / 60:.1f} min wall time"
        + (f", {res['cpu_time_s'] / 60:.1f} min CPU" if "cpu_time_s" in res else "")
        + f" (per-seed values in `benchmarks/results/{name}`).",
    ]
    abl = HERE / "results" / "cora_ablation.json"
    if name == "cora.json" and abl.is_file():
        lines += ["", *render_ablation(json.loads(abl.read_text()))]
    return "\n".join(lines)


def render_ablation(res: dict) -> list[str]:
    lines = [
        f"Ablation of the knobs the paper leaves open (Cora, {len(res['seeds'])} seeds, "
        f"{res['epochs']} epochs, mean ± sample std (ddof=1); `{res['command']}`):",
        "",
        "| variant | LP AUC | LP AP | NC acc (SVM 5-fold) | NC acc (linear probe) |",
        "|---|---|---|---|---|",
    ]
    for v, s in _summary(res).items():
        cells = " | ".join(_cell(s, k) for k in ("lp_auc", "lp_ap", "nc_svm_acc", "nc_probe_acc"))
        lines.append(f"| {v} | {cells} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = (
        Path(argv[0]) if argv and not argv[0].startswith("--") else HERE / "results" / "cora.json"
    )
    table = render(json.loads(path.read_text()), path.name)
    if "--stdout" in argv:
        print(table)
        return 0
    text = README.read_text()
    if START not in text or END not in text:
        print(f"README markers {START} / {END} not found in {README}", file=sys.stderr)
        return 1
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{table}\n{END}{tail}")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
