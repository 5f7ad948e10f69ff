"""Render benchmarks/results/*.json into the README region between the results markers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"
NAMES = {
    "sgd": "SGD (momentum 0.9)",
    "adamw": "AdamW",
    "sam": "SAM(SGD)",
    "adahessian": "AdaHessian (k=1)",
    "sassha": "**Sassha (k=10)**",
    "sassha-k1": "Sassha (k=1)",
    "sassha-rho0": "Sassha ρ=0 (ablation)",
    "sassha-official": 'Sassha, official behaviour (`bias_correction="step"`, `hvp_point="reference"`)',
}


def load(name: str) -> dict | None:
    path = HERE / "results" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def pm(summary: dict, digits: int = 2) -> str:
    """``mean ± sample std`` (ddof=1), just the mean for a single seed."""
    if summary.get("std") is None:
        return f"{summary['mean']:.{digits}f}"
    return f"{summary['mean']:.{digits}f} ± {summary['std']:.{digits}f}"


def accuracy_table(acc: dict) -> list[str]:
    tasks = acc["tasks"]
    header = ["optimizer"]
    for task, t in tasks.items():
        header += [f"{task} test acc % ({t['epochs']} ep)", f"{task} test loss", f"{task} λ_max"]
    header.append("HVPs per run (digits)")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    first = next(iter(tasks.values()))
    row = ["majority class (trivial)"]
    for t in tasks.values():
        row += [f"{t['majority_class_test_accuracy']:.2f}", "", ""]
    lines.append("| " + " | ".join([*row, "0"]) + " |")
    for name in first["optimizers"]:
        row = [NAMES.get(name, name)]
        for t in tasks.values():
            r = t["optimizers"][name]
            row += [pm(r["test_accuracy"]), pm(r["test_loss"], 3), f"{r['lambda_max']['mean']:.3g}"]
        row.append(str(first["optimizers"][name]["hvp_calls"]))
        lines.append("| " + " | ".join(row) + " |")
    notes = []
    for task, t in tasks.items():
        tg = t["targets"]
        opts = t["optimizers"]
        baselines = [n for n in ("sgd", "adamw", "sam", "adahessian") if n in opts]
        best = max(baselines, key=lambda n: opts[n]["test_accuracy"]["mean"])
        gain = opts["sassha"]["test_accuracy"]["mean"] - opts[best]["test_accuracy"]["mean"]
        notes.append(
            f"{task} ({t['model']}, {t['n_train']} train / {t['n_test']} test, batch {t['batch_size']}): "
            f"Sassha ≥ AdamW: **{'met' if tg['sassha_ge_adamw'] else 'missed'}**, "
            f"Sassha ≥ SAM: **{'met' if tg['sassha_ge_sam'] else 'missed'}**; Sassha − best "
            f"baseline ({NAMES.get(best, best)}): {gain:+.2f} points; standardised inputs "
            f"|x| ≤ {t['x_train_abs_max']:.1f} (train), {t['x_test_abs_max']:.1f} (test)"
        )
    for (
        task,
        t,
    ) in tasks.items():  # the paper's claim (Sec. 6): flatter minima with the SAM perturbation
        opts = t["optimizers"]
        if "sassha-rho0" in opts:
            pairs = zip(opts["sassha"]["runs"], opts["sassha-rho0"]["runs"])
            wins = sum(a["lambda_max"] < b["lambda_max"] for a, b in pairs)
            notes.append(
                f"{task}: λ_max(Sassha ρ=0.2) < λ_max(Sassha ρ=0) in {wins}/{len(opts['sassha']['runs'])} seeds"
            )
    return [*lines, "", *[f"- {n}" for n in notes]]


def timing_table(tim: dict) -> list[str]:
    lines = [
        "| optimizer | ms / step (incl. forward+backward) | × AdamW | × SAM |",
        "|---|---|---|---|",
    ]
    for name, ms in tim["ms_per_step"].items():
        lines.append(
            f"| {NAMES.get(name, name)} | {ms:.2f} | {tim['ratio_to_adamw'][name]:.2f} | "
            f"{tim['ratio_to_sam'][name]:.2f} |"
        )
    met = tim["target_sassha_k10_le_1.5x_adamw"]
    return [
        *lines,
        "",
        f"- {tim['model']}; median over {tim['repeats']} interleaved repeats of "
        f"{tim['steps_per_block']}-step blocks. Target Sassha(k=10) ≤ 1.5× AdamW: "
        f"**{'met' if met else 'missed'}**.",
    ]


def memory_table(mem: dict) -> list[str]:
    lines = [
        "| optimizer | state (MiB) | state / params | state × AdamW | peak RSS increase during training (MiB) |",
        "|---|---|---|---|---|",
    ]
    for name, r in mem["optimizers"].items():
        lines.append(
            f"| {NAMES.get(name, name)} | {r['state_bytes'] / 2**20:.1f} | {r['state_over_params']:.1f} | "
            f"{r['state_ratio_to_adamw']:.2f} | {r['peak_rss_increase_mib']:.1f} |"
        )
    return [
        *lines,
        "",
        f"- {mem['model']}; one fresh process per optimizer; state = tensor bytes in "
        "`optimizer.state` after training (Sassha: `exp_avg`, `exp_hessian_diag`, `hessian`).",
    ]


def standardisation_table(std: dict) -> list[str]:
    header = [
        "task",
        "optimizer",
        "standardisation",
        "test acc %",
        "test loss",
        "train loss",
        "max \\|x\\| train",  # escaped: a bare | splits a Markdown table cell
        "max \\|x\\| test",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    labels = {"legacy": "std + 1e-6 (0.1.0)", "floor": "max(std, 0.1·σ) (now)"}
    for task, t in std["tasks"].items():
        for name in t["floor"]["optimizers"]:
            for variant in ("legacy", "floor"):
                v = t[variant]
                r = v["optimizers"][name]
                lines.append(
                    f"| {task} ({t['epochs']} ep) | {NAMES.get(name, name)} | {labels[variant]} | "
                    f"{r['test_accuracy']:.2f} | {r['test_loss']:.3f} | {r['train_loss']:.4f} | "
                    f"{v['x_train_abs_max']:.3g} | {v['x_test_abs_max']:.3g} |"
                )
    return [
        *lines,
        "",
        f"- One seed ({std['seed']}), the protocol of (a) otherwise; σ = the std of all "
        "training entries.",
    ]


def startup_table(st: dict) -> list[str]:
    if "skipped" in st:
        return [f"- skipped: {st['skipped']}"]
    n = len(st["seeds"])
    lines = [
        "| configuration | largest single-step weight change (per seed) | at step | D̂^α of that "
        "weight | m̂ of that weight | weights with D̂^α < eps | batch loss after 30 steps | "
        "batch loss at the end | held-out acc % | HVPs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def each(runs: list[dict], key: str, fmt: str) -> str:
        return " / ".join(format(r[key], fmt) for r in runs)

    for name, c in st["configs"].items():
        runs = c["runs"]
        acc = [r["test_accuracy"] for r in runs]
        mean = sum(acc) / len(acc)
        std = (sum((a - mean) ** 2 for a in acc) / (len(acc) - 1)) ** 0.5 if len(acc) > 1 else None
        lines.append(
            f"| {name} | {each(runs, 'max_step', '.3g')} | {each(runs, 'at_step', 'd')} | "
            f"{each(runs, 'dhat_alpha', '.2g')} | {each(runs, 'mhat', '.2g')} | "
            f"{each(runs, 'coords_dhat_below_eps', 'd')} of {runs[0]['n_params']} | "
            f"{each(runs, 'loss_at_30', '.3f')} | {each(runs, 'loss_at_end', '.3f')} | "
            + (f"{mean:.2f} ± {std:.2f}" if std is not None else f"{mean:.2f}")
            + f" | {runs[0]['hvp_calls']} |"
        )
    return [
        *lines,
        "",
        f"- {st['task']}; {st['settings']}; seeds {st['seeds']} (values per seed separated by "
        f"/, held-out accuracy mean ± sample std (ddof=1) over N = {n} seeds). D̂^α and m̂ are "
        "read at the step of the largest change; the step of a weight is about "
        "lr·m̂/(D̂^α + eps).",
    ]


def paper_table(paper: dict) -> list[str]:
    names = list(paper["gpt2_validation_loss"])
    lines = ["| paper (reported) | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines.append(
        "| GPT-2 small val. loss | "
        + " | ".join(f"{paper['gpt2_validation_loss'][n]}" for n in names)
        + " |"
    )
    lines.append(
        "| GPT-2 small perplexity | "
        + " | ".join(f"{paper['gpt2_perplexity'][n]}" for n in names)
        + " |"
    )
    lam = paper["lambda_max_resnet32_cifar100"]
    return [
        *lines,
        "",
        f"Source: {paper['source']}. λ_max at convergence, ResNet-32/CIFAR-100 "
        f"(paper (reported), {paper['lambda_max_source']}): "
        + ", ".join(f"{k} {v}" for k, v in lam.items())
        + ".",
    ]


def _produced(payload: dict) -> str:
    m = payload["machine"]
    return (
        f"Produced by `{payload['command']}` on {m['cores']} CPU cores (torch {m['torch']}, "
        f"Python {m['python']}, 1 thread)"
    )


def render() -> str:
    acc, tim, mem = load("accuracy"), load("timing"), load("memory")
    std = load("standardisation")
    start = load("startup")
    if not (acc or tim or mem or std or start):
        return "No benchmark results yet: run `python benchmarks/run.py`."
    out = ["Numbers generated from `benchmarks/results/*.json` by `benchmarks/render.py`."]
    if acc:
        n = len(acc["seeds"])
        spread = (
            f"mean ± sample std (ddof=1) over N = {n} seeds {acc['seeds']}"
            if n > 1
            else f"one seed {acc['seeds']}"
        )
        version = acc.get("sassha_optim")
        out += [
            "",
            f"**(a) Accuracy**, {spread}; {_produced(acc)}"
            + (f" with sassha-optim {version}" if version else "")
            + ". λ_max = top Hessian eigenvalue of the training loss at the end (power "
            "iteration, ≤ 2,000 training samples):",
            "",
        ]
        out += accuracy_table(acc)
    if tim:
        out += ["", f"**(b) Time per step**; {_produced(tim)}:", "", *timing_table(tim)]
    if mem:
        out += ["", f"**(c) Memory**; {_produced(mem)}:", "", *memory_table(mem)]
    if std:
        out += [
            "",
            f"**(d) Standardisation of the inputs** (0.1.0 against now); {_produced(std)}:",
            "",
            *standardisation_table(std),
        ]
    if start:
        out += [
            "",
            f"**(e) Lazy-Hessian start-up on a CNN without batch norm** (sassha-optim "
            f"{start.get('sassha_optim')}); {_produced(start)}:",
            "",
            *startup_table(start),
        ]
    if acc and "paper_reported" in acc:
        out += ["", "**Paper (reported)** (different tasks and scale; for orientation only):", ""]
        out += paper_table(acc["paper_reported"])
    return "\n".join(out)


def main() -> int:
    text = README.read_text()
    if START not in text or END not in text:
        print(f"{README}: results markers not found", file=sys.stderr)
        return 1
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{render()}\n{END}{tail}")
    print(f"rendered results into {README.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
