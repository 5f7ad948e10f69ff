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
    "sam-adamw": "SAM(AdamW)",
    "adahessian": "AdaHessian (k=1)",
    "sophia-h": "Sophia-H (k=1)",
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
        baselines = [n for n in ("sgd", "adamw", "sam", "adahessian", "sophia-h") if n in opts]
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
    vs_sam = tim["ratio_to_sam"]["sassha"]
    return [
        *lines,
        "",
        f"- {tim['model']}; median over {tim['repeats']} interleaved repeats of "
        f"{tim['steps_per_block']}-step blocks, all optimizers in the same process. Target "
        f"Sassha(k=10) ≤ 1.05× SAM: **{'met' if vs_sam <= 1.05 else 'missed'}** "
        f"({vs_sam:.3f}×)"
        + (
            f"; against SAM over AdamW (an Adam-type update like Sassha's) "
            f"{tim['ms_per_step']['sassha'] / tim['ms_per_step']['sam-adamw']:.3f}×"
            if "sam-adamw" in tim["ms_per_step"]
            else ""
        )
        + f"; Sassha(k=10) ≤ 1.5× AdamW: **{'met' if met else 'missed'}**.",
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
        "`optimizer.state` after training. Sassha keeps 2 tensors per parameter, `exp_avg` and "
        "`exp_hessian_diag`, like AdamW (`keep_hessian=True` adds the last `|Ĥ|` as a third); SAM "
        "and SGD keep the momentum buffer; AdaHessian and Sophia-H two moments.",
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


def rss_table(rss: dict) -> list[str]:
    lines = [
        "| configuration | steps | RSS at 10 % of the steps (MiB) | RSS at the end (MiB) | growth "
        "(MiB) | slope (MiB / 1,000 steps) | reference-cycle warnings shown |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in rss["configs"].items():
        lines.append(
            f"| {name} | {r['steps']} | {r['rss_at_10pct_mib']:.1f} | {r['rss_at_end_mib']:.1f} | "
            f"{r['growth_mib']:+.1f} | {r['slope_mib_per_1000_steps']:+.2f} | {r['cycle_warnings']} |"
        )
    return [
        *lines,
        "",
        f"- {rss['model']}; VmRSS sampled every {rss['sample_every']} steps in a fresh process per "
        "configuration; slope = least-squares fit from 10 % of the steps to the end. The control "
        "keeps graph-carrying gradients across steps (no `zero_grad`), the leak the warning is "
        "about, to show that the measurement sees one.",
    ]


LN_NAMES = {
    "sgd": "SGD (momentum 0.9)",
    "adamw": "AdamW",
    "sam": "SAM(SGD)",
    "adahessian": "AdaHessian (k=1)",
    "sophia-h": "Sophia-H (k=1)",
    "sassha": "**Sassha (k=10)**",
}


def label_noise_tables(ln: dict) -> list[str]:
    rates = list(ln["rates"])
    pr = ln["protocol"]
    names = list(next(iter(ln["rates"].values()))["optimizers"])
    pct = [f"{100 * float(r):.0f} %" for r in rates]
    h1 = ["optimizer", "ρ (selected on val.)"]
    for p in pct:
        h1 += [f"{p}: final", f"{p}: best epoch (oracle)"]
    lines = ["| " + " | ".join(h1) + " |", "|" + "---|" * len(h1)]
    row = ["majority class (trivial)", ""]
    for r in rates:
        acc = ln["rates"][r]["majority_class_test_accuracy"]
        row += [f"{acc:.2f}", f"{acc:.2f}"]
    lines.append("| " + " | ".join(row) + " |")
    for n in names:
        rhos = sorted({ln["rates"][r]["optimizers"][n].get("rho") for r in rates} - {None})
        row = [LN_NAMES.get(n, n), " / ".join(f"{x:g}" for x in rhos) if rhos else "—"]
        if rhos:
            row[1] = " / ".join(f"{ln['rates'][r]['optimizers'][n]['rho']:g}" for r in rates)
        for r in rates:
            o = ln["rates"][r]["optimizers"][n]
            row += [pm(o["final_test_accuracy"]), pm(o["best_test_accuracy"])]
        lines.append("| " + " | ".join(row) + " |")
    h2 = ["optimizer"]
    h2 += [f"{p}: at best val. epoch" for p in pct]
    h2 += [f"{p}: train acc. on noisy labels" for p in pct]
    h2 += [f"{p}: λ_max" for p in pct]
    lines2 = ["| " + " | ".join(h2) + " |", "|" + "---|" * len(h2)]
    for n in names:
        os_ = [ln["rates"][r]["optimizers"][n] for r in rates]
        row = [LN_NAMES.get(n, n)]
        row += [pm(o["val_selected_test_accuracy"]) for o in os_]
        row += [pm(o["final_train_noisy_accuracy"], 1) for o in os_]
        row += [f"{o['lambda_max']['mean']:.3g}" for o in os_]
        lines2.append("| " + " | ".join(row) + " |")
    notes = []
    for r, p in zip(rates, pct):
        o = ln["rates"][r]["optimizers"]
        if {"sassha", "adamw", "sam"} <= set(o):
            s_ = o["sassha"]["final_test_accuracy"]["mean"]
            base = [n for n in names if n != "sassha"]
            best = max(base, key=lambda n: o[n]["final_test_accuracy"]["mean"])
            notes.append(
                f"{p} noise: Sassha ≥ AdamW (final, mean): "
                f"**{'met' if s_ >= o['adamw']['final_test_accuracy']['mean'] else 'missed'}**; "
                f"Sassha ≥ SAM: **{'met' if s_ >= o['sam']['final_test_accuracy']['mean'] else 'missed'}**; "
                f"Sassha − best baseline ({LN_NAMES.get(best, best)}): "
                f"{s_ - o[best]['final_test_accuracy']['mean']:+.2f} points"
            )
    for r, p in zip(rates, pct):
        o = ln["rates"][r]["optimizers"]
        mem = [
            f"{LN_NAMES.get(n, n)} peak {o[n]['best_test_accuracy']['mean']:.1f} → final "
            f"{o[n]['final_test_accuracy']['mean']:.1f}, noisy-train {o[n]['final_train_noisy_accuracy']['mean']:.1f}"
            for n in ("sgd", "adamw")
            if n in o
        ]
        notes.append(
            f"{p} noise, memorisation (a model that ignores the wrong labels scores about "
            f"{100 - 100 * float(r):.0f} % on the noisy training labels): " + "; ".join(mem)
        )
    n_seeds = len(pr["seeds"])
    return [
        f"Test accuracy % on clean test labels, mean ± sample std (ddof=1) over N = {n_seeds} "
        f"seeds {pr['seeds']}. {pr['data']}; {pr['model']}; {pr['epochs']} epochs, batch "
        f'{pr["batch_size"]}, {pr["schedule"]}; noise {pr["noise"]}. "best epoch" peeks at the '
        'test set (an oracle, as papers on label noise often report); "at best val. epoch" '
        f"stops on the noisy validation split instead. ρ grid {pr['rho_grid']}: {pr['selection']}.",
        "",
        *lines,
        "",
        *lines2,
        "",
        *[f"- {x}" for x in notes],
        "",
        "![test accuracy per epoch at each noise rate](benchmarks/results/label_noise_curves.png)",
    ]


LM_NAMES = {
    "adamw": "AdamW",
    "sam-adamw": "SAM-AdamW",
    "sophia-h": "Sophia-H (k=10)",
    "sassha": "**Sassha (k=10), package defaults**",
    "sassha-paper": "**Sassha (k=10), paper's GPT-2 recipe** (`Sassha.paper_lm`)",
    "sassha+probes4": "Sassha (k=10), package defaults, 4 probes per refresh (diagnostic)",
    "sassha-paper+probes4": "Sassha (k=10), paper's recipe, 4 probes per refresh (diagnostic)",
}
LM_BUDGETS = {
    "iters": "equal iterations (paper's convention)",
    "grad_evals": "equal gradient evaluations",
    "wall_time": "equal wall time (modelled from interleaved step costs)",
}


def _iv(iv: dict | None) -> str:
    if not iv or iv.get("low") is None:
        return ""
    return f"{iv['mean']:+.4f} [{iv['low']:+.4f}, {iv['high']:+.4f}] **{iv['verdict']}**"


def lm_table(lm: dict) -> list[str]:
    """Rows at equal iterations / gradient evaluations / wall time, paired intervals, Hessian
    noise, selection grids and the paper's GPT-2 numbers (labelled)."""
    pr = lm["protocol"]
    res = lm.get("results", {})
    it, ge, wt = res.get("iters", {}), res.get("grad_evals", {}), res.get("wall_time", {})
    sc = lm.get("step_cost")
    t = sc["equal_wall_time_s"] if sc else None
    vocab = pr["data"].split("vocabulary ")[1].split(";")[0]
    u, g = lm["baselines"]["uniform"], lm["baselines"]["unigram"]
    lines = [
        "| arm | equal iterations: lr, steps | val. loss | equal gradient evaluations: lr, "
        "steps (evaluations) | val. loss | equal wall time"
        + (f" ({t:.1f} s modelled)" if t else "")
        + ": lr, steps (modelled s) | val. loss |",
        "|---|---|---|---|---|---|---|",
        f"| uniform over the {vocab} characters (trivial) | | {u:.4f} | | {u:.4f} | | {u:.4f} |",
        f"| unigram model of the training characters (trivial) | | {g:.4f} | | {g:.4f} | "
        f"| {g:.4f} |",
    ]
    for n, label in LM_NAMES.items():
        a, b, c = it.get(n), ge.get(n), wt.get(n)
        if not (a or b or c):
            continue
        cells = [label]
        cells += [f"{a['lr']:g}, {a['steps']}", pm(a["val_loss"], 4)] if a else ["", ""]
        if b:
            cells += [
                f"{b['lr']:g}, {b['steps']} ({b['grad_evals']['mean']:.0f})",
                pm(b["val_loss"], 4),
            ]
        else:
            cells += ["", ""]
        if c:
            ms = f" ({c['modelled_seconds']:.1f})" if "modelled_seconds" in c else ""
            cells += [f"{c['lr']:g}, {c['steps']}{ms}", pm(c["val_loss"], 4)]
        else:
            cells += ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    paired = lm.get("paired", {})
    pairs = sorted({k for v in paired.values() for k in v}, key=lambda k: (k.split(" - ")[1], k))
    plines = [
        "| difference of val. loss (95 % t interval over seeds; below 0 = first arm ahead) | "
        + " | ".join(LM_BUDGETS[b] for b in LM_BUDGETS if b in paired)
        + " |",
        "|---|" + "---|" * sum(b in paired for b in LM_BUDGETS),
    ]
    short = {"adamw": "AdamW", "sam-adamw": "SAM-AdamW", "sophia-h": "Sophia-H",
             "sassha": "Sassha (defaults)", "sassha-paper": "Sassha (paper recipe)",
             "sassha+probes4": "Sassha (defaults), 4 probes",
             "sassha-paper+probes4": "Sassha (paper recipe), 4 probes"}  # fmt: skip
    for pair in pairs:
        x, y = pair.split(" - ")
        plines.append(
            f"| {short.get(x, x)} − {short.get(y, y)} | "
            + " | ".join(_iv(paired[b].get(pair)) for b in LM_BUDGETS if b in paired)
            + " |"
        )
    robust = lm.get("paired_without_outliers", {})
    if robust:
        plines += [
            "",
            "Robustness: the same differences without the seeds where either arm stalled or "
            "diverged (final loss more than 0.15 nats above the median of that arm's seeds):",
            "",
            "| difference (without the flagged seeds) | budget | seeds left out | interval |",
            "|---|---|---|---|",
        ]
        for budget, pairs_b in robust.items():
            for pair, iv in pairs_b.items():
                x, y = pair.split(" - ")
                plines.append(
                    f"| {short.get(x, x)} − {short.get(y, y)} | {LM_BUDGETS[budget]} | "
                    f"{iv['without_seeds']} | "
                    + (_iv(iv) or f"{iv['mean']:+.4f} (n = {iv['n']}, no interval)")
                    + " |"
                )
    notes = []
    for budget, arms_o in lm.get("outliers", {}).items():
        for name, idx in arms_o.items():
            row = res[budget][name]
            vals = row["val_loss"]["values"]
            notes.append(
                f"Stalled or diverged seeds, {LM_BUDGETS[budget]}, {short.get(name, name)}: "
                + ", ".join(f"seed {pr['seeds'][i]} ({vals[i]:.4f})" for i in idx)
                + f" ({row['diverged']} diverged, i.e. stopped on a non-finite value); kept in "
                "every row and interval above."
            )
    if sc:
        kinds = "; ".join(
            f"{short.get(n, n)}: " + ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in c.items())
            for n, c in sc["seconds_per_step"].items()
        )
        spr = sc["protocol"]
        notes.append(
            f"Equal wall time: {pr.get('equal_wall_time', '')}. Step costs (median over "
            f"{spr['rounds']} interleaved rounds of {spr['steps_per_round']} steps per arm, one "
            f"thread, same batches; `{sc['command']}`): {kinds}. Modelled time T = "
            f"{sc['equal_wall_time_s']:.1f} s (default Sassha's {pr['steps']} steps); steps "
            "that fit in T: "
            + ", ".join(f"{short.get(n, n)} {v}" for n, v in sc["steps_at_equal_wall_time"].items())
            + "."
        )
    pv = lm.get("probe_variance")
    if pv:
        parts = [
            f"batch {bsz} ({r['tokens']} tokens): across probes {r['rel_var_probe']:.2f}, "
            f"across batches {r['rel_var_batch']:.2f}"
            for bsz, r in pv["by_batch"].items()
        ]
        notes.append(
            "Hessian noise (relative variance Σ var / Σ mean² of the one-probe Hutchinson "
            f"diagonal, {pv['batches']} batches × {pv['probes']} probes, weights {pv['weights']}): "
            + "; ".join(parts)
            + "."
        )
    for budget, arms in lm.get("selection", {}).items():
        sel = "; ".join(
            f"{short.get(n, n)}: "
            + ", ".join(f"{k} → {v:.4f}" for k, v in c.get("scores", {}).items())
            + (
                f" (extended by {', '.join(f'{x:g}' for x in c['extended'])})"
                if c["extended"]
                else ""
            )
            + (" **still on the edge**" if c.get("on_edge") else "")
            for n, c in arms.items()
            if "scores" in c
            and not (budget in ("grad_evals", "wall_time") and n.startswith("sassha"))
            and "borrowed_from" not in c
        )
        if sel:
            notes.append(f"Selection-split loss per peak lr (seed 0), {LM_BUDGETS[budget]}: {sel}.")
    if lm.get("commands_before_resume"):
        notes.append(
            "Run as "
            + ", then ".join(f"`{c}`" for c in [*lm["commands_before_resume"], lm["command"]])
            + " (resumed from the JSON); the time is the sum."
        )
    paper = lm.get("paper_reported")
    ptab = []
    if paper:
        v = paper["val_loss"]
        ptab = [
            "| paper (reported), GPT-2 small | " + " | ".join(v) + " |",
            "|---|" + "---|" * len(v),
            "| val. loss | " + " | ".join(f"{x}" for x in v.values()) + " |",
            "",
            f"Source: {paper['source']}; one run each, no interval; Sassha − AdamW = "
            f"{v['Sassha'] - v['AdamW']:+.4f} at equal iterations.",
        ]
    return [
        f"Validation loss in nats per character, mean ± sample std (ddof=1) over N = "
        f"{len(pr['seeds'])} seeds {pr['seeds']}. {pr['data']}; {pr['model']}; batch "
        f"{pr['batch']}; equal iterations: {pr['steps']} steps; equal gradient evaluations: "
        f"{pr['grad_evals_budget']} (default Sassha's in {pr['steps']} steps; a forward+backward "
        f"= 1, an HVP = 1); {pr['schedule']}; {pr['selection']}.",
        "",
        *lines,
        "",
        *plines,
        "",
        *[f"- {x}" for x in notes],
        "",
        *ptab,
        "",
        "![validation loss against steps, gradient evaluations and wall time](benchmarks/results/lm_validation_loss.png)",
    ]


def plot_label_noise(ln: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = list(ln["rates"])
    fig, axes = plt.subplots(2, len(rates), figsize=(4.2 * len(rates), 6.5), sharex=True)
    colors = {n: f"C{i}" for i, n in enumerate(LN_NAMES)}
    colors["sassha"] = "k"
    for j, r in enumerate(rates):
        for n, o in ln["rates"][r]["optimizers"].items():
            for i, run in enumerate(o["runs"]):
                ep = [h["epoch"] for h in run["history"]]
                kw = {"color": colors.get(n, "k"), "alpha": 0.7, "lw": 1.6 if n == "sassha" else 1}
                axes[0][j].plot(ep, [h["test_accuracy"] for h in run["history"]],
                                label=LN_NAMES.get(n, n).strip("*") if i == 0 else None, **kw)  # fmt: skip
                axes[1][j].plot(ep, [h["train_noisy_accuracy"] for h in run["history"]], **kw)
        axes[0][j].set_title(f"{100 * float(r):.0f} % symmetric label noise")
        axes[0][j].set_ylim(bottom=max(0, axes[0][j].get_ylim()[0]))
        axes[1][j].axhline(100 - 100 * float(r), color="grey", ls=":")
        axes[1][j].set_xlabel("epoch")
    axes[0][0].set_ylabel("clean test accuracy %")
    axes[1][0].set_ylabel("accuracy on the noisy training labels %")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_lm(lm: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4), sharey=True)
    colors = {"adamw": "C0", "sam-adamw": "C1", "sophia-h": "C2", "sassha": "C3",
              "sassha-paper": "k"}  # fmt: skip
    res, runs = lm.get("results", {}), lm["runs"]
    for col, (budget, xkey) in enumerate(
        [("iters", "step"), ("grad_evals", "grad_evals"), ("wall_time", "modelled")]
    ):
        for name, row in res.get(budget, {}).items():
            if name.endswith("+probes4"):
                continue
            for i, key in enumerate(row["keys"]):
                pts = [c for c in runs[key]["curve"] if c["grad_evals"] is not None]
                label = f"{name} (lr {row['lr']:g})" if i == 0 else None
                if xkey == "modelled":
                    if "curves_modelled_seconds" not in row:
                        continue
                    xs, ys = zip(*row["curves_modelled_seconds"][i], strict=True)
                else:
                    xs, ys = [c[xkey] for c in pts], [c["val"] for c in pts]
                axes[col].plot(xs, ys, label=label,
                               color=colors.get(name, "grey"), alpha=0.8)  # fmt: skip
    for ax in axes:
        ax.axhline(lm["baselines"]["unigram"], color="grey", ls=":")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if lm.get("step_cost"):
        axes[2].axvline(lm["step_cost"]["equal_wall_time_s"], color="grey", ls="--", lw=0.8)
    axes[0].set_xlabel("step (equal iterations)")
    axes[1].set_xlabel("gradient evaluations (equal-evaluation runs; an HVP counts 1)")
    axes[2].set_xlabel("modelled training time (s; interleaved step costs; equal-time runs)")
    axes[0].set_ylabel("validation loss (nats/char, curve subset)")
    axes[0].set_ylim(top=lm["baselines"]["unigram"] + 0.15)
    fig.suptitle(
        "tinyshakespeare, char-level transformer; dotted: unigram model; one line per seed"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


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


STEP_ARMS = {
    "sam": "SAM(SGD)",
    "sassha": "**Sassha (k=10)**",
    "sassha-cache": "**Sassha (k=10), `cache_denominator=True`**",
    "sassha-k1": "Sassha (k=1)",
    "official-k1": "official step (k=1)",
    "official-k10": "official step (k=10)",
}


def step_time_table(st: dict) -> list[str]:
    """(g): ms per step per arm, paired per-round ratios (min / median / max), verdicts, profile."""
    lines = ["| arm | ms / step (median of block means) |", "|---|---|"]
    lines += [f"| {STEP_ARMS.get(n, n)} | {ms:.2f} |" for n, ms in st["ms_per_step"].items()]
    lines += ["", "| ratio (same round) | min | median | max | target |", "|---|---|---|---|---|"]
    for label, r in st["ratios"].items():
        target = st["targets"].get(label)
        verdict = (
            f"≤ {target['bound']}×: **{'met' if target['met'] else 'missed'}**" if target else ""
        )
        lines.append(
            f"| {label} | {r['min']:.3f} | {r['median']:.3f} | {r['max']:.3f} | {verdict} |"
        )
    prof = st["profile"]
    arms = list(prof["ms_per_step"])
    phases = list(prof["ms_per_step"][arms[0]])
    lines += [
        "",
        f"Where a k = 1 step goes (ms per step, mean over {prof['steps']} steps of each, "
        "interleaved; phases from the explicit loop):",
        "",
        "| phase | " + " | ".join(STEP_ARMS.get(a, a) for a in arms) + " |",
        "|---|" + "---|" * len(arms),
    ]
    for ph in phases:
        lines.append(
            f"| {ph} | " + " | ".join(f"{prof['ms_per_step'][a][ph]:.2f}" for a in arms) + " |"
        )
    totals = [sum(prof["ms_per_step"][a].values()) for a in arms]
    lines.append("| total | " + " | ".join(f"{t:.2f}" for t in totals) + " |")
    ms = st["ms_per_step"]
    refresh = (ms["sassha-k1"] - ms["sassha"]) * 10 / 9  # 9 more refreshes per 10 steps at k = 1
    rest = ms["sassha"] - refresh / 10
    ours, theirs = prof["ms_per_step"]["sassha-k1"], prof["ms_per_step"]["official-k1"]
    passes = ("first pass", "second pass", "Hessian-vector product + restore")
    shared = sum(ours[p] for p in passes)
    return [
        *lines,
        "",
        f"- Where the k = 1 target goes: both steps run the same three autograd passes (first "
        f"pass, second pass with a graph, Hessian-vector product): {shared:.2f} of our "
        f"{sum(ours.values()):.2f} ms ({100 * shared / sum(ours.values()):.0f} %) against "
        f"{sum(theirs[p] for p in passes):.2f} ms in the official step. The rest (perturbation and "
        f"update) is {sum(ours.values()) - shared:.2f} ms here and "
        f"{sum(theirs.values()) - sum(theirs[p] for p in passes):.2f} ms there, so even a free "
        f"optimizer would stay above {shared / sum(theirs.values()):.2f}× the official step.",
        *_k10_lines(st, refresh, rest),
        f"- {st['model']}; {st['settings']}. {st['repeats']} rounds; in each round every arm runs "
        f"one block of {st['steps_per_block']} steps, in an order rotated every round, after "
        f"{st['warmup_steps']} warm-up steps; ratios are taken within each round (paired). The "
        "official step is the official code's published behaviour written here (graph on every "
        "second pass, restore through `.data`, HVP at the restored weights, per-parameter loops).",
    ]


def _k10_lines(st: dict, refresh: float, rest: float) -> list[str]:
    """The k = 10 diagnosis: the gap to SAM split by the k = 10 phase profile, and the update
    rules timed alone."""
    ms = st["ms_per_step"]
    out = [
        f"- Where the k = 10 target goes (from the rows above): one refresh (graph-building "
        f"second pass, Rademacher probes, Hessian-vector product) costs {refresh:.2f} ms "
        f"((k1 − k10) × 10/9), {refresh / 10:.2f} ms per step at k = 10, "
        f"{100 * refresh / 10 / ms['sam']:.0f} % of a SAM step; without it Sassha(k = 10) would "
        f"take {rest:.2f} ms, {rest / ms['sam']:.3f}× SAM."
    ]
    prof = st.get("profile_k10")
    if prof:
        heads = [
            f"{STEP_ARMS.get(a, a)}, {kind} steps"
            for a, kinds in prof["ms_per_step"].items()
            for kind in kinds
        ]
        rows = [
            "",
            f"k = 10 phase profile ({prof['steps']} steps of each arm after 20 warm-up steps, "
            "interleaved step by step; ms per step; Sassha's refresh steps and other steps apart):",
            "",
            "| phase | " + " | ".join(heads) + " |",
            "|---|" + "---|" * len(heads),
        ]
        first = next(iter(prof["ms_per_step"].values()))
        phases = list(next(iter(first.values())))
        for ph in [*phases, "total"]:
            cells = [
                f"{sum(t.values()) if ph == 'total' else t[ph]:.2f}"
                for kinds in prof["ms_per_step"].values()
                for t in kinds.values()
            ]
            rows.append(f"| {ph} | " + " | ".join(cells) + " |")
        rows += [
            "",
            "| gap to SAM(SGD), ms per step (a tenth of the steps refresh) | refresh | update "
            "phase | rest (passes, perturbation, restore) | Sassha step | SAM step | ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        for arm, g in prof["gap_to_sam"].items():
            rows.append(
                f"| {STEP_ARMS.get(arm, arm)} | {g['refresh_ms']:+.2f} | {g['update_ms']:+.2f} | "
                f"{g['rest_ms']:+.2f} | {g['step_ms']:.2f} | {g['sam_ms']:.2f} | "
                f"{g['step_ms'] / g['sam_ms']:.3f} |"
            )
        out = [*rows, "", *out]
    ur = st.get("update_rules")
    if ur:
        out.append(
            f"- The update rules alone on the MLP's tensors (ms per call, median over "
            f"{ur['repeats']} interleaved rounds of {ur['calls_per_round']} calls): "
            + ", ".join(f"{k} {v:.3f}" for k, v in ur["ms_per_call"].items())
            + ". Recomputing D̂^α + eps (`pow`, `div`, `add` and an allocation per tensor) is "
            "what makes Sassha's update dearer than SGD's momentum step on the steps without a "
            "refresh; `cache_denominator=True` removes it (bitwise the same steps, one more "
            "tensor per parameter), which leaves the refresh as the part of the gap that no "
            "implementation of the method can remove."
        )
    return out


def issue31_lines(lm: dict | None, st: dict | None) -> list[str]:
    """Issue 31's deliverables with their verdicts and intervals, from lm.json and step_time.json."""
    out = [
        "**Issue 31: deliverables and verdicts** (rendered from `lm.json` and `step_time.json`):",
        "",
    ]
    if lm:
        paired, seeds = lm.get("paired", {}), lm["protocol"]["seeds"]
        res = lm.get("results", {})

        def cell(budget: str, pair: str) -> str:
            iv = paired.get(budget, {}).get(pair)
            return _iv(iv).replace("**", "") if iv else "not run"

        for budget in LM_BUDGETS:
            if budget not in paired:
                out.append(f"- Language model, {LM_BUDGETS[budget]}: not run.")
                continue
            diverged = sum(r["diverged"] for r in res.get(budget, {}).values())
            out.append(
                f"- Language model, {LM_BUDGETS[budget]} ({len(seeds)} seeds, 95 % t): paper "
                f"recipe − AdamW {cell(budget, 'sassha-paper - adamw')}; package defaults − "
                f"AdamW {cell(budget, 'sassha - adamw')}; paper recipe − SAM-AdamW "
                f"{cell(budget, 'sassha-paper - sam-adamw')}; paper recipe − Sophia-H "
                f"{cell(budget, 'sassha-paper - sophia-h')}; diverged runs: {diverged}."
            )
        stalled = [
            f"{LM_BUDGETS[b]}: {n} seed(s) {[seeds[i] for i in idx]}"
            for b, arms in lm.get("outliers", {}).items()
            for n, idx in arms.items()
        ]
        out.append(
            "- Stalled seeds (final loss > 0.15 nats above the arm's median; kept in every "
            "interval, robustness table under Language model below): "
            + ("; ".join(stalled) if stalled else "none")
            + "."
        )
        out.append(
            "- Paper recipe available as a preset (`Sassha.paper_lm`: α 1 → 0.8, clipping before "
            "the perturbation, ρ warm-up, no bias correction) and compared with the defaults: "
            f"recipe − defaults at equal iterations {cell('iters', 'sassha-paper - sassha')}."
        )
        edges = [
            f"{n} ({LM_BUDGETS[b]})"
            for b, arms in lm.get("selection", {}).items()
            for n, c in arms.items()
            if c.get("on_edge")
        ]
        out.append(
            "- Learning-rate grids extended until no selection sits on an edge (AdamW included): "
            + ("met" if not edges else "missed for " + ", ".join(edges))
            + " (the equal-wall-time rows use the lr selected at equal gradient evaluations)."
        )
        pv = lm.get("probe_variance")
        if pv:
            parts = ", ".join(
                f"batch {b}: {r['rel_var_probe']:.1f} across probes, {r['rel_var_batch']:.2f} "
                "across batches"
                for b, r in pv["by_batch"].items()
            )
            out.append(
                f"- Hessian noise reported (relative variance of the one-probe estimate: {parts}); "
                "the probe part does not shrink with the batch, so no batch size makes one "
                "estimate signal-dominated; 4 probes per refresh instead of 1, paper recipe: "
                f"{cell('iters', 'sassha-paper+probes4 - sassha-paper')}."
            )
    if st:
        r1, r10 = st["ratios"]["sassha-k1 / official-k1"], st["ratios"]["sassha / sam"]
        t = st["targets"]

        def word(label: str) -> str:
            return "met" if t[label]["met"] else "missed"

        prof = st["profile"]["ms_per_step"]
        passes = ("first pass", "second pass", "Hessian-vector product + restore")
        bound = sum(prof["sassha-k1"][p] for p in passes) / sum(prof["official-k1"].values())
        out.append(
            f"- k = 1 ≤ 0.8× the official step: {word('sassha-k1 / official-k1')}, median "
            f"{r1['median']:.3f}× (min {r1['min']:.3f}, max {r1['max']:.3f}); the three autograd "
            f"passes that both steps share bound any implementation at {bound:.2f}× (profile "
            "under (g))."
        )
        line = (
            f"- k = 10 ≤ 1.05× SAM in the same run: {word('sassha / sam')} with the defaults, "
            f"median {r10['median']:.3f}× (min {r10['min']:.3f}, max {r10['max']:.3f})"
        )
        if "sassha-cache / sam" in st["ratios"]:
            rc = st["ratios"]["sassha-cache / sam"]
            line += (
                f"; {word('sassha-cache / sam')} with `cache_denominator=True` (bitwise the same "
                f"steps), median {rc['median']:.3f}× (min {rc['min']:.3f}, max {rc['max']:.3f})"
            )
        gap = st.get("profile_k10", {}).get("gap_to_sam", {})
        if gap:
            g = gap.get("sassha-cache", gap.get("sassha"))
            line += (
                f". Of the gap to SAM ({g['sam_ms']:.2f} ms per step in the k = 10 profile), the "
                f"refresh costs {g['refresh_ms']:+.2f} ms per step "
                f"({100 * g['refresh_ms'] / g['sam_ms']:.1f} % of a SAM step), the update phase "
                f"{g['update_ms']:+.2f} ms with the cache and "
                f"{gap['sassha']['update_ms']:+.2f} ms without"
            )
        out.append(line + ".")
    return out


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
    rss, ln, lm = load("rss"), load("label_noise"), load("lm")
    if not (acc or tim or mem or std or start or rss or ln or lm or load("step_time")):
        return "No benchmark results yet: run `python benchmarks/run.py`."
    out = ["Numbers generated from `benchmarks/results/*.json` by `benchmarks/render.py`."]
    if lm or load("step_time"):
        out += ["", *issue31_lines(lm, load("step_time"))]
    if ln:
        out += [
            "",
            f"**Label noise** (the paper's noisy-label experiment, scaled down; sassha-optim "
            f"{ln['sassha_optim']}); {_produced(ln)} in {ln['wall_time_s'] / 60:.0f} min:",
            "",
            *label_noise_tables(ln),
        ]
    if lm:
        out += [
            "",
            f"**Language model** (the paper's GPT-2 comparison, scaled down; sassha-optim "
            f"{lm['sassha_optim']}); {_produced(lm)} in {lm['wall_time_s'] / 60:.0f} min:",
            "",
            *lm_table(lm),
        ]
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
    step = load("step_time")
    if step:
        out += [
            "",
            f"**(g) Step time against the official step and SAM** (sassha-optim "
            f"{step['sassha_optim']}); {_produced(step)}:",
            "",
            *step_time_table(step),
        ]
    if mem:
        out += ["", f"**(c) Memory**; {_produced(mem)}:", "", *memory_table(mem)]
    if rss:
        out += [
            "",
            f"**(f) Memory over a long run** (sassha-optim {rss.get('sassha_optim')}); "
            f"{_produced(rss)}:",
            "",
            *rss_table(rss),
        ]
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


def plots() -> None:
    """PNG figures from the JSON (needs matplotlib, the [bench] extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib not installed: figures not redrawn (pip install 'sassha-optim[bench]')")
        return
    ln, lm = load("label_noise"), load("lm")
    if ln:
        plot_label_noise(ln, HERE / "results" / "label_noise_curves.png")
    if lm:
        plot_lm(lm, HERE / "results" / "lm_validation_loss.png")


def main() -> int:
    plots()
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
