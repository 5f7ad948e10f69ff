"""Issue 29's comparison: CFT, RCFT, long SFT, temperature scaling and label smoothing side by side,
after a fine-tuned MiniLM is made overconfident by real DPO; paired over seeds, in-domain and
out-of-domain, with test sets of >= 2,000 questions.

Setting ``obqa`` (the one implemented): all-MiniLM-L6-v2 as ``BertForMultipleChoice``;
``TopLayerScorer`` caches the frozen embeddings + first 5 layers once, and every stage trains the
last transformer layer, the pooler and the classifier (CPU budget; the positive control fine-tunes
every weight). Fixed splits (the same for every seed and method, so differences are paired):
in-domain test = OpenBookQA official test (500) + dev (500) + 1,000 questions drawn from train
(2,000); out-of-domain test = 2,000 MMLU test questions drawn over all 57 subjects (no MMLU subject
is trained on). Per seed the remaining 3,957 train questions are split into base (SFT + DPO),
calibration-train and validation.

Per seed: base SFT (epoch selected by validation accuracy) -> real DPO against the frozen base
(``dpo_align``; gold over every wrong option) = the *aligned* model -> from the aligned model:
temperature scaling (fit on validation), CFT (SFT, epoch by the paper's rule: lowest validation ECE
within ``acc_tol`` of the best validation accuracy), label smoothing (the CFT run with smoothing),
long SFT (every epoch, last kept) and RCFT (long SFT + the EM-ECE regulariser, Alg. 1). Every
(setting, seed, stage) is a cell written to the JSON as soon as it finishes; ``--resume`` skips
finished cells (base and aligned weights and the cached states are kept under ``--work``).

Usage (from packages/cft-calibration; single-threaded):
    python benchmarks/comparison.py --seeds 0 1 2 3 4 --resume
    python benchmarks/comparison.py --render-only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

import cft_calibration as C
import torch
from cft_calibration.cached import HiddenSplit, TopLayerScorer
from run import require_openbookqa, write_readme  # the sibling script: one README block writer

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
RESULT = HERE / "results" / "comparison.json"
DEFAULT_DATA = Path(os.environ.get("ICML25_DATA", PKG.parents[1].parent / "shared" / "data"))
METHODS = ("ts", "cft", "ls", "long_sft", "rcft")
STAGES = ("uniform", "base", "aligned", *METHODS)
NAMES = {
    "uniform": "uniform (trivial)",
    "base": "base (SFT, before DPO)",
    "aligned": "aligned (SFT + DPO)",
    "ts": "temperature scaling",
    "cft": "CFT",
    "ls": "label smoothing",
    "long_sft": "long SFT",
    "rcft": "RCFT (EM-ECE)",
}
# Settings fixed before any run (no tuning on test). Sizes are the CPU budget.
PROTOCOL: dict[str, Any] = {
    "train_layers": 1,
    "max_length": 64,
    "id_test_from_train": 1000,
    "ood_test": 2000,
    "val": 500,
    "base_questions": 1800,
    "base": {"epochs": 4, "lr": 1e-4, "batch_size": 16, "select": "acc"},
    "dpo": {"steps": 150, "lr": 1e-4, "beta": 0.1, "batch_size": 32, "rejected": "all"},
    "cft": {"epochs": 4, "lr": 5e-5, "batch_size": 16, "select": "ece_within_acc", "acc_tol": 0.01},
    "long": {"epochs": 8, "lr": 5e-5, "batch_size": 16, "select": "last"},
    "label_smoothing": 0.1,
    "lam": 1.0,
    "n_bins": 10,
    "ni_margin": 0.02,
}
# Setting ``causal``: run_causal_lm's defaults (CausalLMConfig) except the data, fixed in advance.
CAUSAL: dict[str, Any] = {"questions": 2000, "threads": 1}


# ------------------------------------------------------------------------------------ data


def fixed_splits(data: Path) -> dict[str, list[C.MCItem]]:
    """The seed-independent splits: in-domain test, OOD test, and the train pool."""
    folder = data / "openbookqa" / "Main"
    train = C.load_openbookqa(folder, split="train")
    rng = random.Random(12345)
    idx = list(range(len(train)))
    rng.shuffle(idx)
    k = PROTOCOL["id_test_from_train"]
    id_test = (
        C.load_openbookqa(folder, split="test")
        + C.load_openbookqa(folder, split="dev")
        + [train[i] for i in idx[:k]]
    )
    pool = [train[i] for i in sorted(idx[k:])]
    mmlu = C.load_mmlu(data / "mmlu", split="test")
    midx = list(range(len(mmlu)))
    random.Random(54321).shuffle(midx)
    ood = [mmlu[i] for i in sorted(midx[: PROTOCOL["ood_test"]])]
    return {"id_test": id_test, "ood_test": ood, "pool": pool}


def load_cache(args: argparse.Namespace) -> tuple[TopLayerScorer, dict[str, HiddenSplit]]:
    """The scorer (pretrained MiniLM top, new classifier) and the cached bottom states of every split
    (computed once, saved under ``--work``)."""
    import transformers
    from cft_calibration.features import minilm_path

    path = minilm_path()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the new classifier head: the same start for every seed
        model = transformers.AutoModelForMultipleChoice.from_pretrained(path)
    scorer = TopLayerScorer(
        model, tok, PROTOCOL["train_layers"], PROTOCOL["max_length"], torch.float16
    )
    cache: dict[str, HiddenSplit] = {}
    args.work.mkdir(parents=True, exist_ok=True)
    splits = None
    for name in ("id_test", "ood_test", "pool"):
        f = args.work / f"cache_{name}.pt"
        if f.is_file():
            cache[name] = HiddenSplit(**torch.load(f))
            continue
        splits = splits or fixed_splits(args.data)
        t0 = time.perf_counter()
        hs = scorer.encode(splits[name], batch_size=32)
        torch.save(vars(hs), f)
        cache[name] = hs
        print(f"cached {name}: {len(hs)} questions, {time.perf_counter() - t0:.0f} s", flush=True)
    return scorer, cache


def seed_splits(pool: HiddenSplit, seed: int) -> dict[str, HiddenSplit]:
    g = torch.Generator().manual_seed(1000 + seed)
    perm = torch.randperm(len(pool), generator=g).tolist()
    v, b = PROTOCOL["val"], PROTOCOL["base_questions"]
    return {
        "val": pool.subset(perm[:v]),
        "base": pool.subset(perm[v : v + b]),
        "cal": pool.subset(perm[v + b :]),
    }


# ----------------------------------------------------------------------------------- stages


def metrics(probs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    return C.evaluate_probs(probs, labels, mask=mask, n_bins=PROTOCOL["n_bins"])


def evaluate(scorer: Any, cache: dict[str, HiddenSplit], transform: Any = None) -> dict[str, Any]:
    out = {}
    for split in ("id_test", "ood_test"):
        z, m, y = C.predict(scorer, cache[split], 256)
        p = transform(z) if transform is not None else torch.softmax(z, -1)
        out[split] = metrics(p, y, m)
    return out


def tcfg(spec: dict[str, Any], seed: int, **extra: Any) -> C.TrainConfig:
    return C.TrainConfig(**spec, n_bins=PROTOCOL["n_bins"], eval_batch_size=256, seed=seed, **extra)


def run_cell(
    stage: str,
    seed: int,
    scorer0: TopLayerScorer,
    cache: dict[str, HiddenSplit],
    work: Path,
) -> dict[str, Any]:
    import copy

    sp = seed_splits(cache["pool"], seed)
    t0 = time.perf_counter()
    cell: dict[str, Any] = {}
    if stage == "uniform":
        cell["test"] = {
            s: metrics(cache[s].mask.double() / cache[s].mask.sum(1, keepdim=True), cache[s].labels,
                       cache[s].mask)
            for s in ("id_test", "ood_test")
        }  # fmt: skip
    elif stage == "base":
        model = copy.deepcopy(scorer0)
        fit = C.train(model, sp["base"], tcfg(PROTOCOL["base"], seed * 100 + 1), None, sp["val"])
        torch.save(model.state_dict(), work / f"seed{seed}_base.pt")
        cell.update(selected_epoch=fit.selected_epoch, history=fit.history)
        cell["test"] = evaluate(model, cache)
    elif stage == "aligned":
        model = copy.deepcopy(scorer0)
        model.load_state_dict(torch.load(work / f"seed{seed}_base.pt"))
        d = PROTOCOL["dpo"]
        res = C.dpo_align(model, sp["base"], C.DPOConfig(**d, seed=seed * 100 + 2))
        torch.save(model.state_dict(), work / f"seed{seed}_aligned.pt")
        last = res.history[-10:]
        cell["dpo_last10"] = {
            k: sum(h[k] for h in last) / len(last) for k in ("loss", "margin", "reward_accuracy")
        }
        cell["val"] = C.evaluate_scorer(model, sp["val"], 256, PROTOCOL["n_bins"])
        cell["test"] = evaluate(model, cache)
    else:
        model = copy.deepcopy(scorer0)
        model.load_state_dict(torch.load(work / f"seed{seed}_aligned.pt"))
        if stage == "ts":
            z, m, y = C.predict(model, sp["val"], 256)
            ts = C.TemperatureScaler().fit(z, y, m)
            cell["temperature"] = ts.temperature_
            cell["test"] = evaluate(model, cache, ts.transform)
        else:
            offset = {"cft": 10, "ls": 11, "long_sft": 12, "rcft": 13}[stage]
            s = seed * 100 + offset
            if stage == "cft":
                cfg, reg = tcfg(PROTOCOL["cft"], s), None
            elif stage == "ls":
                cfg = tcfg(PROTOCOL["cft"], s, label_smoothing=PROTOCOL["label_smoothing"])
                reg = None
            elif stage == "long_sft":
                cfg, reg = tcfg(PROTOCOL["long"], s), None
            else:
                cfg = tcfg(PROTOCOL["long"], s, e_step_every=1)
                reg = C.EMECERegularizer(PROTOCOL["n_bins"], PROTOCOL["lam"])
            fit = C.train(model, sp["cal"], cfg, reg, sp["val"])
            cell.update(selected_epoch=fit.selected_epoch, epochs=cfg.epochs, history=fit.history)
            cell["test"] = evaluate(model, cache)
    cell["seconds"] = time.perf_counter() - t0
    return cell


def run_causal_cell(seed: int, data: Path) -> dict[str, Any]:
    """Setting ``causal``: ``run_causal_lm`` (a 2-layer GPT-2 trained from scratch, real DPO, then
    TS / CFT / long SFT / RCFT with LoRA) on the same in-domain test (2,000) and OOD test (2,000) as
    ``obqa``; per seed 2,000 questions of the train pool split 40/15/30/15 % into base / DPO /
    calibration-train / validation."""
    from cft_calibration.causal import _FRACTIONS

    fixed = fixed_splits(data)
    rng = random.Random(seed)
    pool = rng.sample(fixed["pool"], CAUSAL["questions"])
    parts = C.split_items(pool, list(_FRACTIONS.values()), seed=seed)
    splits = dict(zip(_FRACTIONS, parts, strict=True))
    splits["test"] = fixed["id_test"]
    cfg = C.CausalLMConfig(**{k: v for k, v in CAUSAL.items() if k != "questions"}, seed=seed)
    t0 = time.perf_counter()
    res = C.run_causal_lm(cfg, splits=splits)
    cell: dict[str, Any] = {"selected": res.selected, "dpo": res.dpo, "stage_seconds": res.seconds}
    ts = C.TemperatureScaler()
    ts.temperature_ = res.selected["temperature"]
    cell["test"] = {}
    for name, scorer in res.scorers.items():
        z, m, y = C.predict(scorer, fixed["ood_test"], 64)
        p = ts.transform(z) if name == "ts" else torch.softmax(z, -1)
        cell["test"][name] = {"id_test": res.methods[name], "ood_test": metrics(p, y, m)}
    cell["seconds"] = time.perf_counter() - t0
    return cell


# ------------------------------------------------------------------------------------ driver


def load_results() -> dict[str, Any]:
    if RESULT.is_file():
        return json.loads(RESULT.read_text(encoding="utf-8"))
    return {}


def save(r: dict[str, Any]) -> None:
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULT.with_suffix(".tmp")
    tmp.write_text(json.dumps(C._contract.portable(r), indent=1) + "\n", encoding="utf-8")
    tmp.replace(RESULT)


def run(args: argparse.Namespace) -> None:
    r = load_results() if args.resume else {}
    for key, want in (("protocol", PROTOCOL), ("causal_protocol", CAUSAL)):
        if r and key in r and r[key] != json.loads(json.dumps(want)):
            raise SystemExit(f"--resume: the JSON was written under another {key}; start afresh")
    r["command"] = "python benchmarks/comparison.py --seeds {} --resume".format(
        " ".join(map(str, args.seeds))
    )
    r["protocol"], r["causal_protocol"] = PROTOCOL, CAUSAL
    r.setdefault("cells", {})
    r["machine"] = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "package": C.__version__,
    }
    t0 = time.perf_counter()
    scorer0, cache = load_cache(args)
    r["n"] = {k: len(v) for k, v in cache.items()}
    r["cache_seconds_this_sitting"] = time.perf_counter() - t0
    save(r)
    if args.cache_only:
        return
    todo = [
        (setting, seed, stage)
        for setting in args.settings
        for seed in args.seeds
        for stage in (STAGES if setting == "obqa" else ("all",))
    ]
    for setting, seed, stage in todo:
        key = f"{setting}/{seed}/{stage}"
        if key in r["cells"]:
            continue
        if args.stop_at and time.time() > args.stop_at:
            print("stop time reached; rerun with --resume to continue", flush=True)
            return
        if setting == "causal":
            cell = run_causal_cell(seed, args.data)
            r["cells"][key] = cell
            save(r)
            for name, t in cell["test"].items():
                print(f"{key} {name}: ID acc {t['id_test']['accuracy']:.3f} ECE "
                      f"{t['id_test']['conf_ece']:.3f}; OOD acc {t['ood_test']['accuracy']:.3f}",
                      flush=True)  # fmt: skip
        else:
            cell = run_cell(stage, seed, scorer0, cache, args.work)
            r["cells"][key] = cell
            save(r)
            t = cell["test"]
            print(
                f"{key}: {cell['seconds']:.0f} s; ID acc {t['id_test']['accuracy']:.3f} "
                f"ECE {t['id_test']['conf_ece']:.3f}; OOD acc {t['ood_test']['accuracy']:.3f} "
                f"ECE {t['ood_test']['conf_ece']:.3f}",
                flush=True,
            )


# ------------------------------------------------------------------------------------ render

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_interval(xs: list[float]) -> tuple[float, float, float]:
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = T975.get(n - 1, 1.96) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def seeds_with(cells: dict[str, Any], stages: list[str], setting: str = "obqa") -> list[int]:
    seeds = sorted({int(k.split("/")[1]) for k in cells if k.startswith(setting + "/")})
    return [s for s in seeds if all(f"{setting}/{s}/{st}" in cells for st in stages)]


def flat_cells(cells: dict[str, Any]) -> dict[str, Any]:
    """Cells keyed setting/seed/method (a causal cell holds every method of its seed)."""
    out = {}
    for key, cell in cells.items():
        setting, seed, _stage = key.split("/")
        if setting == "causal":
            for name, t in cell["test"].items():
                sec = cell["stage_seconds"].get({"aligned": "dpo"}.get(name, name), 0.0)
                out[f"causal/{seed}/{name}"] = {"test": t, "seconds": sec}
        else:
            out[key] = cell
    return out


def means_table(cells: dict[str, Any], setting: str, stages: tuple[str, ...]) -> list[str]:
    hdr = "| method | seeds | ID acc | ID conf-ECE | OOD acc | OOD conf-ECE | s / seed |"
    lines = [hdr, "|---|---|---|---|---|---|---|"]
    for st in stages:
        ss = seeds_with(cells, [st], setting)
        if not ss:
            lines.append(f"| {NAMES[st]} | 0 | not yet measured | | | | |")
            continue
        vals = []
        for split in ("id_test", "ood_test"):
            for m in ("accuracy", "conf_ece"):
                xs = [cells[f"{setting}/{s}/{st}"]["test"][split][m] for s in ss]
                mean, lo, hi = t_interval(xs)
                vals.append(f"{mean:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if len(xs) >= 2 else ""))
        sec = sum(cells[f"{setting}/{s}/{st}"]["seconds"] for s in ss) / len(ss)
        lines.append(f"| {NAMES[st]} | {len(ss)} | " + " | ".join(vals) + f" | {sec:.0f} |")
    lines += [
        "",
        "Means over the seeds; brackets: 95% t interval over seeds (from 2 seeds on). The uniform "
        "row's accuracy is that of always answering the first option (argmax of a tie).",
        "",
    ]
    return lines


def diff_table(
    cells: dict[str, Any], setting: str, methods: tuple[str, ...], margin: float
) -> list[str]:
    pairs = [(m, "aligned") for m in methods] + [
        (m, ref) for ref in ("long_sft", "ts") for m in ("cft", "rcft")
    ]
    lines = [
        "Paired differences (method minus reference, same seeds and test questions). ECE: "
        "negative is better, *ahead* when the interval lies below 0, *behind* above 0, *tie* when "
        f"it contains 0. Accuracy: non-inferiority with margin {margin}: *non-inferior* when the "
        f"interval's lower end is above -{margin}, *inferior* when its upper end is below "
        f"-{margin}, else *inconclusive*. Verdicts only from 5 seeds on.",
        "",
        "| method − reference | seeds | Δ ID conf-ECE | Δ OOD conf-ECE | Δ ID acc | Δ OOD acc |",
        "|---|---|---|---|---|---|",
    ]
    for m, ref in pairs:
        ss = seeds_with(cells, [m, ref], setting)
        if not ss:
            lines.append(f"| {NAMES[m]} − {NAMES[ref]} | 0 | not yet measured | | | |")
            continue
        row = []
        for metric in ("conf_ece", "accuracy"):
            for split in ("id_test", "ood_test"):
                xs = [
                    cells[f"{setting}/{s}/{m}"]["test"][split][metric]
                    - cells[f"{setting}/{s}/{ref}"]["test"][split][metric]
                    for s in ss
                ]
                mean, lo, hi = t_interval(xs)
                txt = f"{mean:+.3f}" + (f" [{lo:+.3f}, {hi:+.3f}]" if len(ss) >= 2 else "")
                if len(ss) >= 5:
                    if metric == "conf_ece":
                        word = "ahead" if hi < 0 else ("behind" if lo > 0 else "tie")
                    else:
                        word = (
                            "non-inferior"
                            if lo > -margin
                            else ("inferior" if hi < -margin else "inconclusive")
                        )
                    txt += f" **{word}**"
                row.append(txt)
        lines.append(f"| {NAMES[m]} − {NAMES[ref]} | {len(ss)} | " + " | ".join(row) + " |")
    return lines


def control_line(cells: dict[str, Any], setting: str, n: int) -> str:
    """The positive control of a setting: each seed's base in-domain accuracy, 95% Wilson lower
    bound against chance (1/4) + 0.05."""
    from positive_control import wilson

    ss = seeds_with(cells, ["base"], setting)
    if not ss:
        return ""
    lows = [wilson(round(cells[f"{setting}/{s}/base"]["test"]["id_test"]["accuracy"] * n), n)[0]
            for s in ss]  # fmt: skip
    verdict = "passed" if min(lows) > 0.30 else "failed"
    return (
        f"Positive control (base in-domain accuracy above chance 0.25 + 0.05, per seed on the 95% "
        f"Wilson interval over {n:,} questions): lowest lower bound {min(lows):.3f} over "
        f"{len(ss)} seed(s) → **{verdict}**."
        + (
            " The comparison below is not evidence about knowledge-adding fine-tuning here."
            if verdict == "failed"
            else ""
        )
    )


def verdict(cells: dict[str, Any], setting: str, m: str, ref: str, split: str) -> str:
    """The ECE verdict word of method m against ref on a test split ('' below 5 seeds)."""
    ss = seeds_with(cells, [m, ref], setting)
    if len(ss) < 5:
        return ""
    xs = [
        cells[f"{setting}/{s}/{m}"]["test"][split]["conf_ece"]
        - cells[f"{setting}/{s}/{ref}"]["test"][split]["conf_ece"]
        for s in ss
    ]
    _, lo, hi = t_interval(xs)
    return "ahead of" if hi < 0 else ("behind" if lo > 0 else "tied with")


def reading(cells: dict[str, Any], setting: str) -> str:
    """One sentence per reference, built from the verdicts (ECE, paired, >= 5 seeds)."""
    out = []
    for ref in ("long_sft", "ts"):
        parts = []
        for m in ("cft", "rcft"):
            words = [verdict(cells, setting, m, ref, sp) for sp in ("id_test", "ood_test")]
            if all(words):
                parts.append(
                    f"{NAMES[m]} is {words[0]} {NAMES[ref]} in domain and {words[1]} it out of "
                    "domain"
                )
        if parts:
            out.append("; ".join(parts))
    if not out:
        return ""
    return "**Reading (conf-ECE, paired, from the table):** " + ". ".join(out) + "."


def render(r: dict[str, Any]) -> str:
    raw = r.get("cells", {})
    cells = flat_cells(raw)
    p = r["protocol"]
    margin = p["ni_margin"]
    done = seeds_with(cells, ["base"])
    lines = [
        "**(a) Setting `obqa`** — all-MiniLM-L6-v2 as "
        "`BertForMultipleChoice`; embeddings + layers 1–5 frozen and cached once "
        "(`TopLayerScorer`), layer 6 + pooler + classifier trained in every stage (the CPU budget); "
        f"in-domain test {r['n']['id_test']:,} OpenBookQA questions (official test + dev + 1,000 "
        f"held-out train), out-of-domain test {r['n']['ood_test']:,} MMLU questions over all 57 "
        f"subjects (never trained on); per seed {p['base_questions']} base / {p['val']} validation / "
        f"{r['n']['pool'] - p['base_questions'] - p['val']} calibration-train questions from the "
        f"rest of OpenBookQA train. Base SFT {p['base']['epochs']} epochs (lr {p['base']['lr']}, "
        f"epoch by validation accuracy) → real DPO ({p['dpo']['steps']} steps of "
        f"{p['dpo']['batch_size']} questions, beta {p['dpo']['beta']}, lr {p['dpo']['lr']}, gold "
        f"over every wrong option, frozen base as reference) = *aligned*; then from the aligned "
        f"model: TS (fit on validation); CFT ({p['cft']['epochs']} epochs, lr {p['cft']['lr']}, "
        f"epoch by the paper's rule: lowest validation ECE within {p['cft']['acc_tol']} of the best "
        f"validation accuracy); LS (the CFT run with smoothing {p['label_smoothing']}); long SFT "
        f"({p['long']['epochs']} epochs, last kept); RCFT (long SFT + EM-ECE, lambda {p['lam']}, "
        f"E-step every epoch, last kept). conf-ECE with {p['n_bins']} equal-width bins. "
        f"Seeds with a base model: {len(done)}; command `{r['command']}`.",
        "",
    ]
    lines += [control_line(cells, "obqa", r["n"]["id_test"]), ""]
    lines += means_table(cells, "obqa", STAGES)
    lines += diff_table(cells, "obqa", METHODS, margin)
    if reading(cells, "obqa"):
        lines += ["", reading(cells, "obqa")]
    diag = []
    for s in done:
        be = cells[f"obqa/{s}/base"]["selected_epoch"]
        edge = " (edge)" if be in (0, p["base"]["epochs"]) else ""
        bits = [f"seed {s}: base epoch {be}/{p['base']['epochs']}{edge}"]
        a = cells.get(f"obqa/{s}/aligned")
        if a:
            bits.append(f"DPO reward accuracy {a['dpo_last10']['reward_accuracy']:.2f}")
        t = cells.get(f"obqa/{s}/ts")
        if t:
            bits.append(f"T = {t['temperature']:.2f}")
        for m in ("cft", "ls"):
            c = cells.get(f"obqa/{s}/{m}")
            if c:
                edge = " (edge)" if c["selected_epoch"] in (0, c["epochs"]) else ""
                bits.append(f"{m.upper()} epoch {c['selected_epoch']}/{c['epochs']}{edge}")
        diag.append("; ".join(bits))
    if diag:
        lines += ["", "Selections per seed: " + " · ".join(diag) + "."]
    cs = seeds_with(cells, ["base"], "causal")
    cp = r.get("causal_protocol", CAUSAL)
    lines += [
        "",
        "**(b) Setting `causal`** — `run_causal_lm` (`CausalLMConfig` defaults: a 2-layer GPT-2 "
        "layout decoder, hidden 64, trained from random init on the official flat prompt with the "
        "completion-only letter loss; real DPO on all weights; TS, CFT, long SFT and RCFT with "
        f"LoRA r 8), per seed {cp['questions']} OpenBookQA train-pool questions split 40/15/30/15 % "
        "into base / DPO / calibration-train / validation; the same in-domain and OOD tests as (a) "
        f"(OOD words outside the decoder's word vocabulary read as unknown). Seeds: {len(cs)}.",
        "",
    ]
    cdiag = []
    for s in cs:
        sel = raw[f"causal/{s}/all"]["selected"]
        t = sel["temperature"]
        edge = " (edge of the search range e^±3)" if abs(math.log(t)) > 2.99 else ""
        cdiag.append(
            f"seed {s}: base epoch {sel['base_epoch']}/{cp.get('base_epochs', 10)}; "
            f"T = {t:.2f}{edge}; CFT epoch {sel['cft_epoch']}/{cp.get('cft_epochs', 3)}"
            + (" (edge)" if sel["cft_epoch"] in (0, cp.get("cft_epochs", 3)) else "")
        )
    causal_stages = ("base", "aligned", "ts", "cft", "long_sft", "rcft")
    lines += [control_line(cells, "causal", r["n"]["id_test"]), ""]
    lines += means_table(cells, "causal", causal_stages)
    lines += diff_table(cells, "causal", ("ts", "cft", "long_sft", "rcft"), margin)
    if cdiag:
        lines += ["", "Selections per seed: " + " · ".join(cdiag) + "."]
    left = {
        "obqa": sorted(set(range(5)) - set(seeds_with(cells, list(STAGES)))),
        "causal": sorted(set(range(5)) - set(cs)),
    }
    missing = [f"`{k}` seeds {v} (of 5)" for k, v in left.items() if v] + [
        "setting `mmlu` (train on some MMLU subjects, in-domain test >= 2,000 questions of those "
        "subjects, out-of-domain = held-out subjects)",
        "every stage fine-tuning all six MiniLM layers (here: the last layer, pooler and "
        "classifier); the epoch grids extended where a selection sits on the edge",
    ]
    lines += [
        "",
        "**Not yet measured:** " + "; ".join(missing) + ". Continue with "
        "`python benchmarks/comparison.py --seeds 0 1 2 3 4 --resume` (finished cells are "
        "skipped; the cached states are rebuilt once if `runs/comparison` is gone).",
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--work", type=Path, default=PKG / "runs" / "comparison",
                   help="cached states and per-seed weights")  # fmt: skip
    p.add_argument("--settings", nargs="+", choices=("obqa", "causal"), default=["obqa", "causal"],
                   help="benchmark settings, run in this order")  # fmt: skip
    p.add_argument("--resume", action="store_true", help="keep finished cells of the JSON")
    p.add_argument("--cache-only", action="store_true", help="only build the cached states")
    p.add_argument("--stop-at", type=float, default=None, help="unix time: start no cell after")
    p.add_argument("--render-only", action="store_true", help="re-render the README from the JSON")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    if not args.render_only:
        require_openbookqa(args.data)
        run(args)
    write_readme(render(load_results()), "comparison")
    print("README comparison block rendered", file=sys.stderr)


if __name__ == "__main__":
    main()
