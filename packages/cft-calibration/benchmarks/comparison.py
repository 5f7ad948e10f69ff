"""Issue 29's comparison: CFT, RCFT, long SFT, temperature scaling and label smoothing side by side,
after a fine-tuned MiniLM is made overconfident by real DPO; paired over seeds, in-domain and
out-of-domain, with test sets of >= 2,000 questions.

Setting ``obqa``: all-MiniLM-L6-v2 as ``BertForMultipleChoice``;
``TopLayerScorer`` caches the frozen embeddings + first 5 layers once, and every stage trains the
last transformer layer, the pooler and the classifier (CPU budget; the positive control fine-tunes
every weight). Fixed splits (the same for every seed and method, so differences are paired):
in-domain test = OpenBookQA official test (500) + dev (500) + 1,000 questions drawn from train
(2,000); out-of-domain test = 2,000 MMLU test questions drawn over all 57 subjects (no MMLU subject
is trained on). Per seed the remaining 3,957 train questions are split into base (SFT + DPO),
calibration-train and validation.

Setting ``mmlu`` (MMLU-internal): the same model and stages on MMLU alone. In domain: the largest
MMLU subjects by question count until they hold 6,000 questions (10 subjects, 6,118 questions),
2,000 of them drawn as the in-domain test and the rest as the train pool; out of domain: 2,000
questions drawn over the other 47 subjects. Setting ``causal``: ``run_causal_lm`` on OpenBookQA
(see :func:`run_causal_cell`); setting ``causal_news``: the same on AG News topics asked as
4-option questions (``NEWS``; a task a decoder trained from scratch can learn); setting
``causal_news_wide``: ``causal_news`` on extended epoch grids (``NEWS_WIDE``); setting
``causal_news_wider``: ``causal_news_wide`` with longer CFT / long SFT / RCFT grids (``NEWS_WIDER``,
the same base and aligned models). Setting
``obqa_wide``: ``obqa`` rebuilt from the base up with base SFT and CFT on the extended epoch grids
(``GRID``). Setting ``obqa_full``: ``obqa_wide`` with every
weight trained: the same fixed splits, per-seed splits, seeds, stages, selection rules, learning
rates and epoch grids, but the scorer is the whole ``BertForMultipleChoice`` (``MCScorer``, the
library path of ``positive_control.py``), tokenised (question, option) pairs with ``only_first``
truncation at ``max_length`` 64 and padding to the longest pair of each batch; nothing is cached.
The validation and test questions are scored in order of token length, 32 at a time (less
padding; the metrics do not depend on the order, and the logits came out equal to the bit on 128
sorted questions at batches 16, 32 and 128); the aligned model's test logits are kept under
``--work`` and temperature scaling reuses them instead of scoring the test sets again. The
training batches are those of every other setting (no length bucketing: it would change the
runs). Each cell stores its timing (seconds per epoch and per step) and ``full_cost`` the
projected CPU time of the cells still missing (``FULL_SITTING_MIN``-minute sittings, weights
rebuilt per sitting). ``--device cuda`` (or any torch device) moves every model and batch there;
the cached states of the top-layer settings are still computed on the CPU.

Positive control first: a MiniLM setting's calibration stages run only while its base models pass
(lowest 95% Wilson lower bound of in-domain accuracy over the seeds above 0.30); ``--control-only``
runs just the base cells (the base cell of ``mmlu`` also stores a diagnosis: training accuracy,
the majority-letter baseline, in-domain accuracy per subject).

Extra stage ``rcft_heldout`` (``EXTRA``, run only when named in ``--stages``): RCFT with its E-step
on the validation questions, to test block (e)'s diagnosis of RCFT; rendered beside RCFT.

Every block starts with the trivial uniform scorer (1/k on each of a question's k options): a cell
per seed in the MiniLM settings, scored once per causal setting on its fixed tests (JSON key
``uniform``).

Per seed: base SFT (epoch selected by validation accuracy) -> real DPO against the frozen base
(``dpo_align``; gold over every wrong option) = the *aligned* model -> from the aligned model:
temperature scaling (fit on validation), CFT (SFT, epoch by the paper's rule: lowest validation ECE
within ``acc_tol`` of the best validation accuracy), label smoothing (the CFT run with smoothing),
long SFT (every epoch, last kept) and RCFT (long SFT + the EM-ECE regulariser, Alg. 1). Every
(setting, seed, stage) is a cell written to the JSON as soon as it finishes; ``--resume`` skips
finished cells (base and aligned weights and the cached states are kept under ``--work``).

Usage (from packages/cft-calibration; single-threaded):
    python benchmarks/comparison.py --seeds 0 1 2 3 4 --resume
    python benchmarks/comparison.py --settings mmlu --seeds 0 --control-only --resume
    python benchmarks/comparison.py --settings obqa_full --seeds 0 1 2 3 4 --resume --device cuda
    python benchmarks/comparison.py --settings obqa_full --seeds 0 --stages rcft_heldout --resume
    python benchmarks/comparison.py --render-only
"""

from __future__ import annotations

import argparse
import itertools
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
from run import (  # the sibling script: one README block writer
    portable_command,
    require_openbookqa,
    write_readme,
)

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
RESULT = HERE / "results" / "comparison.json"
DEFAULT_DATA = Path(os.environ.get("ICML25_DATA", PKG.parents[1].parent / "shared" / "data"))
SETTINGS = (
    "obqa",
    "causal",
    "mmlu",
    "obqa_wide",
    "obqa_full",
    "causal_news",
    "causal_news_wide",
    "causal_news_wider",
)
# The settings of ``run_causal_lm`` (one cell per seed holds every method).
CAUSAL_SETTINGS = ("causal", "causal_news", "causal_news_wide", "causal_news_wider")
# ``obqa_wide``: the obqa comparison rebuilt on the extended grids (GRID) from the base up; the
# same cached data and per-seed splits as ``obqa``, its own weights.
DATA_OF = {
    "obqa_wide": "obqa",
    "obqa_full": "obqa",
    "causal_news_wide": "causal_news",
    "causal_news_wider": "causal_news",
}
# ``obqa_full``: every weight of BertForMultipleChoice trained in every stage (no cached states).
FULL_SETTINGS = ("obqa_full",)
FULL: dict[str, Any] = {
    "trains": "every weight of BertForMultipleChoice (MCScorer)",
    "grids_of": "obqa_wide",
    "eval_order": "token length",
    # scoring batches: smaller ones are faster on one CPU thread and give the same logits (only
    # the padding differs; equal to the bit on 128 sorted questions at batches 16, 32 and 128)
    "eval_batch_size": 32,
}
# The length of one CPU sitting the projection in ``full_cost`` plans with (minutes, one thread).
FULL_SITTING_MIN = 100
SETTING_LABELS = {"obqa": "OpenBookQA", "mmlu": "MMLU-internal"}
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
    "base_wide": "base, 8-epoch grid",
    "cft_wide": "CFT, 8-epoch grid",
    "rcft_heldout": "RCFT, E-step on validation",
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
# Setting ``causal_news`` (added after ``causal``'s positive control failed: a 2-layer decoder
# trained from scratch on 800 OpenBookQA questions stays at chance): the same pipeline and budgets on
# a task such a decoder can learn, AG News topic classification (the shared data's 7,600-row
# original test split) asked as a 4-option question with fixed options. Fixed before any run: 2,000
# rows drawn once as the in-domain test, every other row in the per-seed pool (split 40/15/30/15 %);
# out of domain: the 2,000 MMLU questions of ``obqa`` (never trained on).
NEWS: dict[str, Any] = {
    "id_test": 2000,
    "prompt": "Which topic is this news story about?",
    "split_seed": 12345,
    "threads": 1,
}
# ``causal_news_wide``: ``causal_news`` on extended epoch grids (its first seeds selected the last
# base epoch, 10 of 10, and the last CFT epoch, 3 of 3); long SFT and RCFT run as many epochs as
# CFT's grid, as in ``obqa_wide``. Everything else as ``causal_news``.
NEWS_WIDE: dict[str, int] = {"base_epochs": 20, "cft_epochs": 6, "long_epochs": 6}
# ``causal_news_wider``: ``causal_news_wide`` with CFT, long SFT and RCFT on 10 epochs (its CFT
# selected the last epoch, 6 of 6, in 2 of 5 seeds). The base grid and every seed are
# ``causal_news_wide``'s, so its base and aligned models are the same (the block checks it).
NEWS_WIDER: dict[str, int] = {"base_epochs": 20, "cft_epochs": 10, "long_epochs": 10}
# The CausalLMConfig epoch overrides of each causal setting (none: CausalLMConfig's defaults).
CAUSAL_GRID: dict[str, dict[str, int]] = {
    "causal_news_wide": NEWS_WIDE,
    "causal_news_wider": NEWS_WIDER,
}
# Epoch grids extended after the 0.4.0 run put selections on the edge (base 4/4 in 4 of 5 ``obqa``
# seeds, CFT 4/4 in 3): extra stages, the same as ``base`` / ``cft`` but for the epochs (same data
# order seeds); ``cft_wide`` starts from the same aligned model as every other method of its seed.
GRID: dict[str, dict[str, Any]] = {"base_wide": {"epochs": 8}, "cft_wide": {"epochs": 8}}
# Extra stages, run only when named in --stages. ``rcft_heldout`` tests block (e)'s diagnosis of
# RCFT (its E-step reads bin accuracies off calibration-train questions the model has memorised):
# RCFT with the same seed, data order and lambda, but the E-step scores the validation questions
# (``train(e_step_data=...)``; a deviation from the paper, whose E-step reads the training set).
EXTRA = ("rcft_heldout",)
# Setting ``mmlu``: PROTOCOL's stages on MMLU alone, fixed before any run. In-domain subjects: the
# largest MMLU subjects by test-question count (ties by name) until they hold ``id_questions``;
# ``id_test`` of them drawn as the in-domain test, the rest is the train pool (per seed: PROTOCOL's
# val / base_questions, the remainder calibration-train); out of domain: ``ood_test`` questions
# drawn over every other subject.
MMLU: dict[str, Any] = {"id_questions": 6000, "id_test": 2000, "ood_test": 2000}


# ------------------------------------------------------------------------------------ data


def mmlu_subjects(items: list[C.MCItem], want: int) -> list[str]:
    """The largest subjects by question count (ties by name) until they hold >= ``want`` questions."""
    counts: dict[str, int] = {}
    for it in items:
        counts[str(it.subject)] = counts.get(str(it.subject), 0) + 1
    if sum(counts.values()) < want:
        raise ValueError(f"mmlu_subjects: {sum(counts.values())} questions, fewer than {want}")
    chosen, total = [], 0
    for name in sorted(counts, key=lambda k: (-counts[k], k)):
        if total >= want:
            break
        chosen.append(name)
        total += counts[name]
    return sorted(chosen)


def ag_news_items(folder: Path) -> list[C.MCItem]:
    """AG News rows (``test.csv``: class 1-4, title, description; ``classes.txt``: the topic names)
    as 4-option questions: the title and description (a backslash, the release's line break, read
    as a space), then ``NEWS["prompt"]``; the options are the
    four topics in the dataset's order, the answer the row's class."""
    import csv

    topics = (folder / "classes.txt").read_text(encoding="utf-8").split()
    if len(topics) != 4:
        raise SystemExit(f"{folder}/classes.txt: expected 4 topics, got {topics}")
    items = []
    with open(folder / "test.csv", newline="", encoding="utf-8") as fh:
        for i, (label, title, desc) in enumerate(csv.reader(fh)):
            text = f"{title}. {desc}".replace("\\", " ")  # a backslash marks a line break
            items.append(C.MCItem(f"ag{i}", f"{' '.join(text.split())} {NEWS['prompt']}",
                                  list(topics), int(label) - 1, subject="ag_news"))  # fmt: skip
    return items


def fixed_splits(data: Path, setting: str = "obqa") -> dict[str, list[C.MCItem]]:
    """The seed-independent splits of a setting: in-domain test, OOD test, and the train pool."""
    if setting == "causal_news":
        news = ag_news_items(data / "ag_news")
        idx = list(range(len(news)))
        random.Random(NEWS["split_seed"]).shuffle(idx)
        k = NEWS["id_test"]
        return {
            "id_test": [news[i] for i in sorted(idx[:k])],
            "ood_test": fixed_splits(data)["ood_test"],
            "pool": [news[i] for i in sorted(idx[k:])],
        }
    if setting == "mmlu":
        mmlu = C.load_mmlu(data / "mmlu", split="test")
        subjects = set(mmlu_subjects(mmlu, MMLU["id_questions"]))
        inside = [it for it in mmlu if it.subject in subjects]
        outside = [it for it in mmlu if it.subject not in subjects]
        idx = list(range(len(inside)))
        random.Random(12345).shuffle(idx)
        k = MMLU["id_test"]
        oidx = list(range(len(outside)))
        random.Random(54321).shuffle(oidx)
        return {
            "id_test": [inside[i] for i in sorted(idx[:k])],
            "ood_test": [outside[i] for i in sorted(oidx[: MMLU["ood_test"]])],
            "pool": [inside[i] for i in sorted(idx[k:])],
        }
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


def load_cache(
    args: argparse.Namespace, setting: str = "obqa"
) -> tuple[TopLayerScorer, dict[str, HiddenSplit]]:
    """The scorer (pretrained MiniLM top, new classifier) and the cached bottom states of every split
    of a setting (computed once, saved under ``--work``)."""
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
    work = setting_dir(args.work, setting)
    splits = None
    for name in ("id_test", "ood_test", "pool"):
        f = work / f"cache_{name}.pt"
        if f.is_file():
            cache[name] = HiddenSplit(**torch.load(f))
            continue
        splits = splits or fixed_splits(args.data, setting)
        t0 = time.perf_counter()
        hs = scorer.encode(splits[name], batch_size=32)
        torch.save(vars(hs), f)
        cache[name] = hs
        print(
            f"cached {setting} {name}: {len(hs)} questions, {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    return scorer, cache


def token_lengths(tokenizer: Any, items: list[C.MCItem]) -> list[int]:
    """Each question's longest (question, option) pair in tokens, as ``MCScorer`` encodes it."""
    from cft_calibration.scoring import encode_pairs

    return [
        int(encode_pairs(tokenizer, [it.question] * it.k, list(it.choices),
                         PROTOCOL["max_length"])["attention_mask"].sum(1).max())
        for it in items
    ]  # fmt: skip


def by_length(tokenizer: Any, items: list[C.MCItem]) -> list[C.MCItem]:
    """``items`` in order of token length (ties keep their order): an evaluation set whose
    batches pad little. Only for scoring; every metric here is a sum over questions."""
    lengths = token_lengths(tokenizer, items)
    return [items[i] for i in sorted(range(len(items)), key=lambda i: lengths[i])]


def load_full(
    args: argparse.Namespace, device: torch.device
) -> tuple[C.MCScorer, dict[str, list[C.MCItem]]]:
    """Setting ``obqa_full``: the whole MiniLM ``BertForMultipleChoice`` as an ``MCScorer`` on
    ``device`` (the classifier drawn as in :func:`load_cache`) and the fixed splits of ``obqa`` as
    questions; the two test sets in order of token length (the pool keeps its order, so the
    per-seed splits are the questions of ``obqa``'s)."""
    import transformers
    from cft_calibration.features import minilm_path

    path = minilm_path()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the new classifier head: the same start as load_cache's
        model = transformers.AutoModelForMultipleChoice.from_pretrained(path)
    scorer = C.MCScorer(model, tok, PROTOCOL["max_length"]).to(device)
    splits = fixed_splits(args.data, "obqa")
    for name in ("id_test", "ood_test"):
        splits[name] = by_length(tok, splits[name])
    return scorer, splits


def seed_splits(pool: Any, seed: int) -> dict[str, Any]:
    """A seed's validation / base / calibration-train split of the train pool (cached states or a
    list of questions: the same questions either way)."""
    g = torch.Generator().manual_seed(1000 + seed)
    perm = torch.randperm(len(pool), generator=g).tolist()
    v, b = PROTOCOL["val"], PROTOCOL["base_questions"]

    def take(idx: list[int]) -> Any:
        return pool.subset(idx) if isinstance(pool, HiddenSplit) else [pool[i] for i in idx]

    return {"val": take(perm[:v]), "base": take(perm[v : v + b]), "cal": take(perm[v + b :])}


class StepClock:
    """A progress bar for ``C.train`` / ``C.dpo_align`` that only records when each step ends."""

    def __init__(self, total: int) -> None:
        self.total, self.start, self.ends = total, time.perf_counter(), []

    def update(self, n: int = 1) -> None:
        self.ends.append(time.perf_counter())

    def close(self) -> None:
        pass

    def summary(self, steps_per_epoch: int | None = None) -> dict[str, Any]:
        """Median seconds per step; with ``steps_per_epoch`` also the seconds of each epoch: its
        steps and the validation pass before them (epoch 0's pass for the first epoch)."""
        gaps = sorted(b - a for a, b in itertools.pairwise(self.ends))
        out: dict[str, Any] = {"steps": len(self.ends),
                               "step_seconds_median": gaps[len(gaps) // 2] if gaps else None}  # fmt: skip
        if steps_per_epoch:
            marks = [self.start, *self.ends[steps_per_epoch - 1 :: steps_per_epoch]]
            out["epoch_seconds"] = [b - a for a, b in itertools.pairwise(marks)]
        return out


def clocked(holder: list[StepClock]) -> Any:
    """``progress`` factory for the library loops: the clock it made is appended to ``holder``."""

    def make(total: int, desc: str) -> StepClock:
        holder.append(StepClock(total))
        return holder[-1]

    return make


# ----------------------------------------------------------------------------------- stages


def metrics(probs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    return C.evaluate_probs(probs, labels, mask=mask, n_bins=PROTOCOL["n_bins"])


def uniform_metrics(split: HiddenSplit | list[C.MCItem]) -> dict[str, float]:
    """Test metrics of the trivial scorer that gives each of a question's k options 1/k (its
    accuracy is that of always answering the first option, the argmax of a tie)."""
    if isinstance(split, HiddenSplit):
        mask, labels = split.mask, split.labels
    else:
        k = max(it.k for it in split)
        mask = torch.tensor([[j < it.k for j in range(k)] for it in split])
        labels = torch.tensor([it.answer for it in split])
    return metrics(mask.double() / mask.sum(1, keepdim=True), labels, mask)


def test_logits(
    scorer: Any, cache: dict[str, Any], batch_size: int = 256
) -> dict[str, tuple[torch.Tensor, ...]]:
    """(logits, mask, labels) of both test sets (on the CPU)."""
    return {split: C.predict(scorer, cache[split], batch_size) for split in ("id_test", "ood_test")}


def evaluate(
    scorer: Any,
    cache: dict[str, Any],
    transform: Any = None,
    logits: Any = None,
    batch_size: int = 256,
) -> dict[str, Any]:
    """Test metrics of a scorer (or of its stored ``logits``), optionally after ``transform``."""
    logits = logits if logits is not None else test_logits(scorer, cache, batch_size)
    out = {}
    for split, (z, m, y) in logits.items():
        p = transform(z) if transform is not None else torch.softmax(z, -1)
        out[split] = metrics(p, y, m)
    return out


def tcfg(spec: dict[str, Any], seed: int, ebs: int = 256, **extra: Any) -> C.TrainConfig:
    return C.TrainConfig(**spec, n_bins=PROTOCOL["n_bins"], eval_batch_size=ebs, seed=seed, **extra)


def wide_of(stage: str, setting: str) -> str:
    """The GRID key a stage trains on: ``base_wide`` / ``cft_wide`` as named, and every base / CFT
    stage of ``obqa_wide`` and ``obqa_full``."""
    wide = setting in ("obqa_wide", *FULL_SETTINGS)
    return f"{stage}_wide" if wide and stage in ("base", "cft") else stage


def setting_dir(work: Path, setting: str) -> Path:
    """Where a setting's cached states and weights live: ``--work`` itself for ``obqa``, a
    sub-folder named after the setting otherwise."""
    out = work if setting == "obqa" else work / setting
    out.mkdir(parents=True, exist_ok=True)
    return out


def base_diagnosis(
    model: Any, sp: dict[str, HiddenSplit], cache: dict[str, HiddenSplit], subjects: list[str]
) -> dict[str, Any]:
    """What the positive control's diagnosis reads: accuracy on the base model's own training
    questions, the accuracy of always answering the training set's most frequent letter, and the
    in-domain test accuracy per subject."""
    train = C.evaluate_scorer(model, sp["base"], 256, PROTOCOL["n_bins"], full=False)
    letter = int(torch.bincount(sp["base"].labels).argmax())
    y = cache["id_test"].labels
    z, _, _ = C.predict(model, cache["id_test"], 256)
    hit = (z.argmax(-1) == y).tolist()
    per: dict[str, list[int]] = {}
    for name, h in zip(subjects, hit, strict=True):
        per.setdefault(name, []).append(int(h))
    return {
        "train_accuracy": train["accuracy"],
        "majority_letter": letter,
        "majority_letter_id_accuracy": float((y == letter).double().mean()),
        "per_subject": {k: {"n": len(v), "accuracy": sum(v) / len(v)} for k, v in per.items()},
    }


def run_cell(
    stage: str,
    seed: int,
    scorer0: Any,
    cache: dict[str, Any],
    work: Path,
    setting: str = "obqa",
    subjects: list[str] | None = None,
) -> dict[str, Any]:
    """One (setting, seed, stage) cell; ``subjects`` (the in-domain test questions' subjects) adds
    :func:`base_diagnosis` to a base cell. ``scorer0`` (a ``TopLayerScorer`` over cached states or,
    in ``obqa_full``, an ``MCScorer`` over questions) is copied, never trained; every stage runs on
    the device its parameters are on."""
    import copy

    sp = seed_splits(cache["pool"], seed)
    full = setting in FULL_SETTINGS
    if full:  # validation is only scored: in order of token length, as the test sets
        sp["val"] = by_length(scorer0.tokenizer, sp["val"])
    device = next(scorer0.parameters()).device
    ebs = FULL["eval_batch_size"] if full else 256
    work = setting_dir(work, setting)
    t0 = time.perf_counter()
    cell: dict[str, Any] = {"device": str(device)}
    clocks: list[StepClock] = []

    def load(name: str) -> Any:
        model = copy.deepcopy(scorer0)
        model.load_state_dict(torch.load(work / name, map_location=device))
        return model

    if stage == "uniform":
        cell["test"] = {s: uniform_metrics(cache[s]) for s in ("id_test", "ood_test")}
    elif stage in ("base", "base_wide"):
        model = copy.deepcopy(scorer0)
        spec = {**PROTOCOL["base"], **GRID.get(wide_of(stage, setting), {})}
        cfg = tcfg(spec, seed * 100 + 1, ebs)
        fit = C.train(model, sp["base"], cfg, None, sp["val"], clocked(clocks))
        if stage == "base":
            torch.save(model.state_dict(), work / f"seed{seed}_base.pt")
        cell.update(selected_epoch=fit.selected_epoch, epochs=spec["epochs"], history=fit.history)
        cell["timing"] = clocks[0].summary(math.ceil(len(sp["base"]) / cfg.batch_size))
        t1 = time.perf_counter()
        cell["test"] = evaluate(model, cache, batch_size=ebs)
        cell["timing"]["test_seconds"] = time.perf_counter() - t1
        if subjects is not None:
            cell["diagnosis"] = base_diagnosis(model, sp, cache, subjects)
    elif stage == "aligned":
        model = load(f"seed{seed}_base.pt")
        d = PROTOCOL["dpo"]
        res = C.dpo_align(model, sp["base"], C.DPOConfig(**d, seed=seed * 100 + 2),
                          progress=clocked(clocks))  # fmt: skip
        torch.save(model.state_dict(), work / f"seed{seed}_aligned.pt")
        cell["timing"] = clocks[0].summary()
        last = res.history[-10:]
        cell["dpo_last10"] = {
            k: sum(h[k] for h in last) / len(last) for k in ("loss", "margin", "reward_accuracy")
        }
        cell["val"] = C.evaluate_scorer(model, sp["val"], ebs, PROTOCOL["n_bins"])
        t1 = time.perf_counter()
        logits = test_logits(model, cache, ebs)
        cell["timing"]["test_seconds"] = time.perf_counter() - t1
        torch.save(logits, work / f"seed{seed}_aligned_test_logits.pt")
        cell["test"] = evaluate(model, cache, logits=logits)
    else:
        model = load(f"seed{seed}_aligned.pt")
        if stage == "ts":
            z, m, y = C.predict(model, sp["val"], ebs)
            ts = C.TemperatureScaler().fit(z, y, m)
            cell["temperature"] = ts.temperature_
            stored = work / f"seed{seed}_aligned_test_logits.pt"
            logits = torch.load(stored) if stored.is_file() else None
            cell["test"] = evaluate(model, cache, ts.transform, logits)
        else:
            offset = {"cft": 10, "cft_wide": 10, "ls": 11, "long_sft": 12, "rcft": 13,
                      "rcft_heldout": 13}[stage]  # fmt: skip
            s = seed * 100 + offset
            if stage in ("cft", "cft_wide"):
                cfg = tcfg({**PROTOCOL["cft"], **GRID.get(wide_of(stage, setting), {})}, s, ebs)
                reg = None
            elif stage == "ls":
                spec = {**PROTOCOL["cft"], **GRID.get(wide_of("cft", setting), {})}
                cfg = tcfg(spec, s, ebs, label_smoothing=PROTOCOL["label_smoothing"])
                reg = None
            elif stage == "long_sft":
                cfg, reg = tcfg(PROTOCOL["long"], s, ebs), None
            else:
                cfg = tcfg(PROTOCOL["long"], s, ebs, e_step_every=1)
                reg = C.EMECERegularizer(PROTOCOL["n_bins"], PROTOCOL["lam"])
            held = sp["val"] if stage == "rcft_heldout" else None
            fit = C.train(model, sp["cal"], cfg, reg, sp["val"], clocked(clocks), e_step_data=held)
            cell.update(selected_epoch=fit.selected_epoch, epochs=cfg.epochs, history=fit.history)
            cell["timing"] = clocks[0].summary(math.ceil(len(sp["cal"]) / cfg.batch_size))
            t1 = time.perf_counter()
            cell["test"] = evaluate(model, cache, batch_size=ebs)
            cell["timing"]["test_seconds"] = time.perf_counter() - t1
    cell["seconds"] = time.perf_counter() - t0
    return cell


def run_causal_cell(
    seed: int, data: Path, device: str = "cpu", setting: str = "causal"
) -> dict[str, Any]:
    """Setting ``causal``: ``run_causal_lm`` (a 2-layer GPT-2 trained from scratch, real DPO, then
    TS / CFT / long SFT / RCFT with LoRA) on the same in-domain test (2,000) and OOD test (2,000) as
    ``obqa``; per seed 2,000 questions of the train pool split 40/15/30/15 % into base / DPO /
    calibration-train / validation. Setting ``causal_news``: the same on AG News (``NEWS``), the
    whole pool split per seed."""
    from cft_calibration.causal import _FRACTIONS

    data_of = DATA_OF.get(setting, setting)
    fixed = fixed_splits(data, data_of)
    if data_of == "causal_news":
        pool = fixed["pool"]
    else:
        pool = random.Random(seed).sample(fixed["pool"], CAUSAL["questions"])
    parts = C.split_items(pool, list(_FRACTIONS.values()), seed=seed)
    splits = dict(zip(_FRACTIONS, parts, strict=True))
    splits["test"] = fixed["id_test"]
    threads = (NEWS if data_of == "causal_news" else CAUSAL)["threads"]
    cfg = C.CausalLMConfig(
        threads=threads, seed=seed, device=device, **CAUSAL_GRID.get(setting, {})
    )
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


SCHEDULING = ("--stop-at", "--work")  # when and where a sitting runs; neither changes a number


def without_scheduling(argv: list[str]) -> list[str]:
    """``argv`` without ``--stop-at`` and ``--work`` (and their values): the recorded command must
    reproduce the numbers, and a copied ``--stop-at`` in the past would stop before the first cell."""
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in SCHEDULING:
            skip = True
        elif not token.startswith(tuple(f + "=" for f in SCHEDULING)):
            out.append(token)
    return out


def merge_command(old: str | None, new: str) -> str:
    """The command to record for a key that ``old`` measured before: ``new``, with ``old``'s seeds
    added when the two differ only in ``--seeds`` (sittings that each ran some seeds of one setting)."""

    def split(command: str) -> tuple[list[str], set[str]]:
        tokens, seeds, rest, on = command.split(), set(), [], False
        for t in tokens:
            if t == "--seeds":
                on = True
                rest.append(t)
            elif on and t.isdigit():
                seeds.add(t)
            else:
                on = False
                rest.append(t)
        return rest, seeds

    if old is None:
        return new
    (old_rest, old_seeds), (new_rest, new_seeds) = split(old), split(new)
    if old_rest != new_rest or not new_seeds:
        return new
    seeds = " ".join(sorted(old_seeds | new_seeds, key=int))
    return " ".join(t if t != "--seeds" else f"--seeds {seeds}" for t in new_rest)


def load_results() -> dict[str, Any]:
    if not RESULT.is_file():
        return {}
    r: dict[str, Any] = json.loads(RESULT.read_text(encoding="utf-8"))
    if "id_test" in r.get("n", {}):  # written before the per-setting sizes (0.4.0)
        r["n"] = {"obqa": r["n"]}
    r.pop("cache_seconds_this_sitting", None)
    return r


def save(r: dict[str, Any]) -> None:
    """Write ``r``, first taking in the cells that another sitting running at the same time (say,
    one process per seed) has written since this one loaded the JSON: under a lock, the cells,
    commands, cache times and uniform rows on disk that ``r`` lacks are added, and the positive
    controls and full-model costs recomputed."""
    import fcntl
    import tempfile

    RESULT.parent.mkdir(parents=True, exist_ok=True)
    with open(Path(tempfile.gettempdir()) / "cft-calibration-comparison.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        disk = load_results()
        for key in ("cache_seconds", "uniform"):
            if key in disk or key in r:
                r[key] = {**disk.get(key, {}), **r.get(key, {})}
        if "commands" in disk or "commands" in r:
            on_disk = disk.get("commands", {})
            mine = {k: merge_command(on_disk.get(k), c) for k, c in r.get("commands", {}).items()}
            r["commands"] = {**on_disk, **mine}
        theirs = {k: c for k, c in disk.get("cells", {}).items() if k not in r["cells"]}
        if theirs:
            r["cells"].update(theirs)
            for setting in r.get("control", {}):
                if setting in r.get("n", {}):
                    r["control"][setting] = control(r["cells"], setting,
                                                    r["n"][setting]["id_test"])  # fmt: skip
            for setting in r.get("full_cost", {}):
                r["full_cost"][setting] = full_cost(r, setting)
        tmp = RESULT.with_suffix(".tmp")
        tmp.write_text(json.dumps(C._contract.portable(r), indent=1) + "\n", encoding="utf-8")
        tmp.replace(RESULT)


def reproduce(
    cells: dict[str, Any],
    setting: str,
    seed: int,
    scorer0: Any,
    cache: dict[str, Any],
    work: Path,
    stages: tuple[str, ...] = ("base", "aligned"),
) -> dict[str, Any]:
    """Rebuild a seed's base and aligned weights (lost with ``--work``) for a later stage and
    record how their test metrics compare with the stored cells (the check that the later stage
    starts from the same model as the finished ones); ``stages``: the weights to rebuild."""
    out = {}
    for stage in stages:
        new = run_cell(stage, seed, scorer0, cache, work, setting)["test"]
        old = cells.get(f"{setting}/{seed}/{stage}", {}).get("test")
        out[stage] = {
            f"{split}_{m}": [new[split][m], old[split][m] if old else None]
            for split in ("id_test", "ood_test")
            for m in ("accuracy", "conf_ece")
        }
        print(f"reproduced {setting}/{seed}/{stage}: {out[stage]}", flush=True)
    return out


FULL_ORDER = ("uniform", "base", "aligned", "ts", "cft", "ls", "long_sft", "rcft")


def full_cost(r: dict[str, Any], setting: str) -> dict[str, Any]:
    """The measured cost of a full-model setting and the projected CPU time of its missing cells
    ({} before a base cell). Rates: the base fit's median step (16 questions) and validation pass
    (500 questions), a test pass (4,000 questions), the DPO step when measured (else 4/3 of 32
    questions' training cost: the reference forward). Missing cells are planned in order (seed,
    then stage) into ``FULL_SITTING_MIN``-minute sittings, a cell that does not fit starting the
    next sitting; a sitting that continues a seed past its aligned model first rebuilds the base and
    aligned weights (they are not kept in git)."""
    cells = r["cells"]
    based = [c for k, c in cells.items() if k.startswith(setting + "/") and k.endswith("/base")
             and "timing" in c]  # fmt: skip
    if not based:
        return {}
    n = r["n"][setting]
    p, g = PROTOCOL, GRID
    val_n = p["val"]
    base_steps = math.ceil(p["base_questions"] / p["base"]["batch_size"])
    cal_n = n["pool"] - p["val"] - p["base_questions"]
    cal_steps = math.ceil(cal_n / p["cft"]["batch_size"])
    t = based[0]["timing"]
    rest = sorted(t["epoch_seconds"][1:] or t["epoch_seconds"])  # the first holds epoch 0's pass
    epoch = rest[len(rest) // 2]
    step = t["step_seconds_median"] or epoch / base_steps
    val_pass = max(0.0, epoch - base_steps * step)
    test_pass = t["test_seconds"]
    dpo = [c["timing"]["step_seconds_median"] for k, c in cells.items()
           if k.startswith(setting + "/") and k.endswith("/aligned") and "timing" in c]  # fmt: skip
    dpo_step = dpo[0] if dpo else step * p["dpo"]["batch_size"] / p["base"]["batch_size"] * 4 / 3
    e_base, e_cft, e_long = (
        g["base_wide"]["epochs"],
        g["cft_wide"]["epochs"],
        p["long"]["epochs"],
    )
    stage_s = {
        "uniform": 0.0,
        "base": e_base * base_steps * step + (e_base + 1) * val_pass + test_pass,
        "aligned": p["dpo"]["steps"] * dpo_step + val_pass + test_pass,
        "ts": val_pass,
        "cft": e_cft * cal_steps * step + (e_cft + 1) * val_pass + test_pass,
        "long_sft": e_long * cal_steps * step + e_long * val_pass + test_pass,
    }
    stage_s["ls"] = stage_s["cft"]
    stage_s["rcft"] = stage_s["long_sft"] + e_long * val_pass * cal_n / val_n
    stage_s["rcft_heldout"] = stage_s["long_sft"] + e_long * val_pass
    missing = [(s, st) for s in range(5) for st in FULL_ORDER if f"{setting}/{s}/{st}" not in cells]
    sitting, later = FULL_SITTING_MIN * 60.0, ("ts", "cft", "ls", "long_sft", "rcft")
    sittings, left, rebuilds = 0, 0.0, 0
    have: dict[int, str] = {}  # seed -> the newest weights ("base" / "aligned") of this sitting

    def rebuild(seed: int, st: str) -> float:
        """Seconds to rebuild the weights a cell starts from, when this sitting lacks them."""
        if st == "aligned" and seed not in have:
            return stage_s["base"]
        if st in later and have.get(seed) != "aligned":
            return stage_s["aligned"] + (stage_s["base"] if seed not in have else 0.0)
        return 0.0

    for s, st in missing:
        if stage_s[st] + rebuild(s, st) > left:
            sittings, left, have = sittings + 1, sitting, {}
        extra = rebuild(s, st)
        rebuilds += extra > 0
        left -= stage_s[st] + extra
        if st in ("base", "aligned", *later):
            have[s] = "base" if st == "base" else "aligned"
    return {
        "measured_on": "base cell, device " + based[0].get("device", "cpu"),
        "step_seconds": step,
        "epoch_seconds": epoch,
        "validation_pass_seconds": val_pass,
        "test_pass_seconds": test_pass,
        "dpo_step_seconds": dpo_step,
        "dpo_step_measured": bool(dpo),
        "stage_seconds": stage_s,
        "cells_total": 5 * len(FULL_ORDER),
        "cells_done": 5 * len(FULL_ORDER) - len(missing),
        "missing_seconds": sum(stage_s[st] for _, st in missing),
        "sitting_minutes": FULL_SITTING_MIN,
        "sittings_left": sittings,
        "rebuilds": rebuilds,
    }


def projected(r: dict[str, Any], work: Path, setting: str, seed: int, stage: str) -> float | None:
    """Projected seconds of a full-model cell (``full_cost``), with the rebuild of the base and
    aligned weights it starts from when ``--work`` lacks them (None without a projection)."""
    st = r.get("full_cost", {}).get(setting, {}).get("stage_seconds", {})
    if stage not in st:
        return None
    have = setting_dir(work, setting)
    base = (have / f"seed{seed}_base.pt").is_file()
    aligned = (have / f"seed{seed}_aligned.pt").is_file()
    cost = float(st[stage])
    if stage in (*METHODS, *EXTRA) and not aligned:
        cost += st["aligned"] + (0.0 if base else st["base"])
    elif stage == "aligned" and not base:
        cost += st["base"]
    return cost


def run(args: argparse.Namespace) -> None:
    r = load_results() if args.resume else {}
    protocols = (
        ("protocol", PROTOCOL),
        ("causal_protocol", CAUSAL),
        ("news_protocol", NEWS),
        ("news_wide_protocol", NEWS_WIDE),
        ("news_wider_protocol", NEWS_WIDER),
        ("mmlu_protocol", MMLU),
        ("grid_protocol", GRID),
        ("full_protocol", FULL),
    )
    for key, want in protocols:
        if r and key in r and r[key] != json.loads(json.dumps(want)):  # absent: added later
            raise SystemExit(f"--resume: the JSON was written under another {key}; start afresh")
    r["command"] = portable_command([sys.argv[0], *without_scheduling(sys.argv[1:])])
    r.update({key: want for key, want in protocols})
    for key in ("cells", "n", "control", "cache_seconds", "commands"):
        r.setdefault(key, {})
    extra = "/" + "+".join(args.stages) if args.stages else ""  # e.g. obqa/cft_wide
    if not args.cache_only:  # the commands that measured cells
        for setting in args.settings:
            key = setting + extra
            r["commands"][key] = merge_command(r["commands"].get(key), r["command"])
    r["machine"] = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "package": C.__version__,
    }
    device = torch.device(args.device)
    caches, subjects = {}, {}
    for setting in args.settings:
        if setting in CAUSAL_SETTINGS:  # no cache; the uniform row is scored here, once
            fixed = fixed_splits(args.data, DATA_OF.get(setting, setting))
            if setting != "causal":  # causal's sizes are obqa's
                r["n"][setting] = {k: len(v) for k, v in fixed.items()}
            r.setdefault("uniform", {})[setting] = {
                s: uniform_metrics(fixed[s]) for s in ("id_test", "ood_test")
            }
            save(r)
            continue
        t0 = time.perf_counter()
        if setting in FULL_SETTINGS:
            caches[setting] = load_full(args, device)
        else:
            scorer, cache = load_cache(args, DATA_OF.get(setting, setting))
            caches[setting] = (scorer.to(device), cache)
        r["n"][setting] = {k: len(v) for k, v in caches[setting][1].items()}
        r["cache_seconds"][setting] = time.perf_counter() - t0
        if setting == "mmlu":
            subjects[setting] = [
                str(it.subject) for it in fixed_splits(args.data, "mmlu")["id_test"]
            ]
            r["mmlu_subjects"] = sorted(set(subjects[setting]))
        save(r)
    if args.cache_only:
        return
    first = ("uniform", "base", "base_wide")  # run even when the positive control failed
    stages = ("uniform", "base") if args.control_only else tuple(args.stages or STAGES)
    todo = [
        (setting, seed, stage)
        for setting in args.settings
        for seed in args.seeds
        for stage in (("all",) if setting in CAUSAL_SETTINGS else stages)
    ]
    for setting, seed, stage in todo:
        key = f"{setting}/{seed}/{stage}"
        if key in r["cells"]:
            continue
        if args.stop_at and time.time() > args.stop_at:
            print("stop time reached; rerun with --resume to continue", flush=True)
            return
        cost = projected(r, args.work, setting, seed, stage)
        if args.stop_at and cost and time.time() + cost > args.stop_at:
            print(f"{key}: projected {cost / 60:.0f} min, past --stop-at; rerun with --resume to "
                  "continue", flush=True)  # fmt: skip
            return
        if setting not in CAUSAL_SETTINGS and stage not in first:
            ctl = control(r["cells"], setting, r["n"][setting]["id_test"])
            if ctl and not ctl["passed"]:
                print(f"{key}: skipped, the positive control of {setting} failed", flush=True)
                continue
        if setting in CAUSAL_SETTINGS:
            cell = run_causal_cell(seed, args.data, args.device, setting)
            r["cells"][key] = cell
            save(r)
            for name, t in cell["test"].items():
                print(f"{key} {name}: ID acc {t['id_test']['accuracy']:.3f} ECE "
                      f"{t['id_test']['conf_ece']:.3f}; OOD acc {t['ood_test']['accuracy']:.3f}",
                      flush=True)  # fmt: skip
        else:
            scorer0, cache = caches[setting]
            again = {}
            have = setting_dir(args.work, setting)
            if stage in (*METHODS, "cft_wide", *EXTRA):
                if not (have / f"seed{seed}_aligned.pt").is_file():
                    again = reproduce(r["cells"], setting, seed, scorer0, cache, args.work)
            elif stage == "aligned" and not (have / f"seed{seed}_base.pt").is_file():
                again = reproduce(r["cells"], setting, seed, scorer0, cache, args.work, ("base",))
            cell = run_cell(stage, seed, scorer0, cache, args.work, setting, subjects.get(setting))
            if again:
                cell["reproduced"] = again
            r["cells"][key] = cell
            if stage == "base":
                r["control"][setting] = control(r["cells"], setting, r["n"][setting]["id_test"])
            if setting in FULL_SETTINGS:
                r.setdefault("full_cost", {})[setting] = full_cost(r, setting)
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


def flat_cells(
    cells: dict[str, Any], uniform: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Cells keyed setting/seed/method (a causal cell holds every method of its seed; ``uniform``,
    the causal settings' uniform-row metrics, adds a uniform cell to each of its seeds)."""
    out = {}
    for key, cell in cells.items():
        setting, seed, _stage = key.split("/")
        if setting in CAUSAL_SETTINGS:
            for name, t in cell["test"].items():
                sec = cell["stage_seconds"].get({"aligned": "dpo"}.get(name, name), 0.0)
                out[f"{setting}/{seed}/{name}"] = {"test": t, "seconds": sec}
            if setting in (uniform or {}):
                out[f"{setting}/{seed}/uniform"] = {"test": uniform[setting], "seconds": 0.0}
        else:
            out[key] = cell
    return out


def means_table(
    cells: dict[str, Any], setting: str, stages: tuple[str, ...], note: bool = True
) -> list[str]:
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
    if note:
        lines += [
            "",
            "Means over the seeds; brackets: 95% t interval over seeds (from 2 seeds on)."
            + (
                " The uniform row's accuracy is that of always answering the first option (argmax "
                "of a tie)."
                if "uniform" in stages  # the sentence describes a row the table has
                else ""
            ),
        ]
    return [*lines, ""]


def diff_table(
    cells: dict[str, Any],
    setting: str,
    methods: tuple[str, ...],
    margin: float,
    pairs: list[tuple[str, str]] | None = None,
    explain: bool = True,
) -> list[str]:
    """Paired differences of ``pairs`` (default: every method against the aligned model, CFT and
    RCFT against long SFT and TS); ``explain`` puts the paragraph on how to read them first."""
    if pairs is None:
        pairs = [(m, "aligned") for m in methods] + [
            (m, ref) for ref in ("long_sft", "ts") for m in ("cft", "rcft")
        ]
    lines = []
    if explain:
        lines += [
            "Paired differences (method minus reference, same seeds and test questions). ECE: "
            "negative is better, *ahead* when the interval lies below 0, *behind* above 0, *tie* "
            f"when it contains 0. Accuracy: non-inferiority with margin {margin}: *non-inferior* "
            f"when the interval's lower end is above -{margin}, *inferior* when its upper end is "
            f"below -{margin}, else *inconclusive*. Verdicts only from 5 seeds on.",
            "",
        ]
    lines += [
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


def control(cells: dict[str, Any], setting: str, n: int) -> dict[str, Any]:
    """The positive control of a setting ({} before any base cell): each seed's base in-domain
    accuracy on ``n`` questions with its 95% Wilson interval; passed when the lowest lower bound
    over the seeds is above chance (1/4) + 0.05."""
    from positive_control import wilson

    ss = seeds_with(cells, ["base"], setting)
    if not ss:
        return {}
    accs = [cells[f"{setting}/{s}/base"]["test"]["id_test"]["accuracy"] for s in ss]
    ivs = [wilson(round(a * n), n) for a in accs]
    low = min(lo for lo, _ in ivs)
    return {
        "seeds": ss,
        "accuracy": accs,
        "wilson95": [list(iv) for iv in ivs],
        "lowest_lower": low,
        "threshold": 0.30,
        "passed": low > 0.30,
    }


def control_line(cells: dict[str, Any], setting: str, n: int, tables: bool = True) -> str:
    """The positive-control sentence of a setting ('' before any base cell); ``tables``: the
    comparison tables follow it."""
    ctl = control(cells, setting, n)
    if not ctl:
        return ""
    ss, lows = ctl["seeds"], [ctl["lowest_lower"]]
    verdict = "passed" if ctl["passed"] else "failed"
    return (
        f"Positive control (base in-domain accuracy above chance 0.25 + 0.05, per seed on the 95% "
        f"Wilson interval over {n:,} questions): lowest lower bound {min(lows):.3f} over "
        f"{len(ss)} seed(s) → **{verdict}**."
        + (
            " The comparison below is not evidence about knowledge-adding fine-tuning here."
            if verdict == "failed" and tables
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


def reading(cells: dict[str, Any], setting: str, methods: tuple[str, ...] = ("cft", "rcft")) -> str:
    """One sentence per reference, built from the verdicts (ECE, paired, >= 5 seeds); the trivial
    uniform scorer is a reference where the setting has its row."""
    out = []
    for ref in ("long_sft", "ts", "uniform"):
        parts = []
        for m in methods:
            words = [verdict(cells, setting, m, ref, sp) for sp in ("id_test", "ood_test")]
            if all(words):
                parts.append(
                    f"{NAMES[m]} is {words[0]} {NAMES[ref]} in domain and {words[1]} it out of "
                    "domain"
                )
        if parts:
            out.append("; ".join(parts))
            if ref == "uniform":
                t = cells[f"{setting}/{seeds_with(cells, [ref], setting)[0]}/{ref}"]["test"]
                out[-1] += (
                    f" (the uniform scorer's conf-ECE, {t['id_test']['conf_ece']:.3f} in domain "
                    f"and {t['ood_test']['conf_ece']:.3f} out, only says that its confidence 1/k "
                    "matches its accuracy: read it with the accuracy columns)"
                )
    if not out:
        return ""
    return "**Reading (conf-ECE, paired, from the table):** " + ". ".join(out) + "."


def selections(cells: dict[str, Any], setting: str, p: dict[str, Any]) -> list[str]:
    """The per-seed selections line of a MiniLM setting (edges flagged)."""
    diag = []
    for s in seeds_with(cells, ["base"], setting):
        c = cells[f"{setting}/{s}/base"]
        be, epochs = c["selected_epoch"], c.get("epochs", p["base"]["epochs"])
        edge = " (edge)" if be in (0, epochs) else ""
        bits = [f"seed {s}: base epoch {be}/{epochs}{edge}"]
        a = cells.get(f"{setting}/{s}/aligned")
        if a:
            bits.append(f"DPO reward accuracy {a['dpo_last10']['reward_accuracy']:.2f}")
        t = cells.get(f"{setting}/{s}/ts")
        if t:
            bits.append(f"T = {t['temperature']:.2f}")
        for m in ("cft", "ls"):
            c = cells.get(f"{setting}/{s}/{m}")
            if c:
                edge = " (edge)" if c["selected_epoch"] in (0, c["epochs"]) else ""
                bits.append(f"{m.upper()} epoch {c['selected_epoch']}/{c['epochs']}{edge}")
        diag.append("; ".join(bits))
    return ["", "Selections per seed: " + " · ".join(diag) + "."] if diag else []


def fit_summary(c: dict[str, Any], n: int) -> str:
    """A base-like cell as the diagnosis reads it: selection, fit of its own training questions,
    validation and loss by epoch, test accuracies (Wilson intervals over ``n`` questions)."""
    from positive_control import wilson

    d = c["diagnosis"]
    vals = ", ".join(f"{h['val']['accuracy']:.3f}" for h in c["history"])
    losses = ", ".join(f"{h['loss']:.3f}" for h in c["history"] if "loss" in h)
    acc = c["test"]["id_test"]["accuracy"]
    lo, hi = wilson(round(acc * n), n)
    return (
        f"selected epoch {c['selected_epoch']}/{c.get('epochs', PROTOCOL['base']['epochs'])}; "
        f"accuracy on its own {PROTOCOL['base_questions']:,} training questions "
        f"{d['train_accuracy']:.3f}; validation accuracy by epoch (0 = untrained head) {vals}; "
        f"training loss by epoch {losses} (ln 4 = {math.log(4):.3f}); in-domain test {acc:.3f} "
        f"[{lo:.3f}, {hi:.3f}], out-of-domain test {c['test']['ood_test']['accuracy']:.3f}"
    )


def failed_control(cells: dict[str, Any], setting: str, n: int, label: str) -> list[str]:
    """A failed positive control: the verdict line with each seed's accuracy and interval, and the
    measured diagnosis of the base cells (no calibration tables)."""
    from positive_control import wilson

    ctl = control(cells, setting, n)
    accs = ", ".join(
        f"seed {s} {a:.3f} [{lo:.3f}, {hi:.3f}]"
        for s, a, (lo, hi) in zip(ctl["seeds"], ctl["accuracy"], ctl["wilson95"], strict=True)
    )
    lines = [
        f"**Verdict:** positive control failed: no calibration verdict on {label}. Base "
        f"in-domain accuracy (95% Wilson interval over {n:,} questions): {accs}; the threshold is "
        f"a lower bound above {ctl['threshold']:.2f}. The calibration stages were not run.",
    ]
    for s in ctl["seeds"]:
        c = cells[f"{setting}/{s}/base"]
        d = c.get("diagnosis")
        if not d:
            continue
        per = sorted(d["per_subject"].items(), key=lambda kv: -kv[1]["accuracy"])
        subj = ", ".join(
            "{} {:.3f} [{:.3f}, {:.3f}] (n {})".format(
                k, v["accuracy"], *wilson(round(v["accuracy"] * v["n"]), v["n"]), v["n"]
            )
            for k, v in per
        )
        above = [k for k, v in per if wilson(round(v["accuracy"] * v["n"]), v["n"])[0] > 0.25]
        text = (
            f"Diagnosis, measured on the base model of seed {s}: {fit_summary(c, n)}. Always "
            f"answering the training set's most frequent letter ({'ABCD'[d['majority_letter']]}) "
            f"scores {d['majority_letter_id_accuracy']:.3f} in domain. In-domain test accuracy per "
            f"subject (95% Wilson intervals): {subj}; lower bound above chance (0.25) in "
            f"{len(above)} of {len(per)} subjects"
            + (f" ({', '.join(above)})" if above else "")
            + "."
        )
        wide = cells.get(f"{setting}/{s}/base_wide")
        if wide and "diagnosis" in wide:
            text += (
                f" The same base SFT on the {wide['epochs']}-epoch grid (diagnosis only): "
                f"{fit_summary(wide, n)}."
            )
        lines += ["", text]
    return lines


def wide_grids(r: dict[str, Any], cells: dict[str, Any], setting: str) -> list[str]:
    """The extended epoch grids of a setting (``GRID``): means, paired differences against the
    references of the main table, selections, and the check that the rebuilt aligned models are
    the stored ones ([] before any such cell)."""
    have = [st for st in GRID if seeds_with(cells, [st], setting)]
    if not have:
        return []
    g = r["grid_protocol"]
    lines = [
        "",
        "**Extended epoch grids** (the selections above sat on the grid's edge): "
        + "; ".join(
            f"{NAMES[st]} = {NAMES[st.removesuffix('_wide')]} with {g[st]['epochs']} epochs "
            "(same learning rate, schedule over the longer run, same data-order seed)"
            for st in have
        )
        + ". `base, 8-epoch grid` is measured on its own here"
        + (
            " (setting (d) below rebuilds the later stages from it)"
            if seeds_with(cells, ["base"], "obqa_wide")
            else " (nothing downstream is rebuilt from it)"
        )
        + "; `CFT, 8-epoch grid` starts from the same aligned model as the methods above. "
        "Commands: " + ", ".join(f"`{r['commands'][f'{setting}/{st}']}`" for st in have) + ".",
        "",
    ]
    lines += means_table(cells, setting, tuple(have), note=False)
    pairs = [("base_wide", "base")] if "base_wide" in have else []
    if "cft_wide" in have:
        pairs += [("cft_wide", ref) for ref in ("aligned", "cft", "long_sft", "ts")]
    lines += diff_table(cells, setting, (), r["protocol"]["ni_margin"], pairs)
    if text := reading(cells, setting, ("cft_wide",)):
        lines += ["", text]
    changed = [
        f"against {NAMES[ref]} {where}: {verdict(cells, setting, 'cft', ref, sp)} → "
        f"{verdict(cells, setting, 'cft_wide', ref, sp)}"
        for ref in ("long_sft", "ts")
        for sp, where in (("id_test", "in domain"), ("ood_test", "out of domain"))
        if verdict(cells, setting, "cft_wide", ref, sp)
        and verdict(cells, setting, "cft", ref, sp) != verdict(cells, setting, "cft_wide", ref, sp)
    ]
    if changed:
        lines += ["", "CFT's verdicts that change from the 4-epoch to the 8-epoch grid: "
                  + "; ".join(changed) + "."]  # fmt: skip
    sel, worst, edges, picks = [], 0.0, 0, 0
    for s in sorted({s for st in have for s in seeds_with(cells, [st], setting)}):
        bits = []
        for st in have:
            c = cells.get(f"{setting}/{s}/{st}")
            if c:
                edge = " (edge)" if c["selected_epoch"] in (0, c["epochs"]) else ""
                edges, picks = edges + bool(edge), picks + 1
                bits.append(f"{NAMES[st]} epoch {c['selected_epoch']}/{c['epochs']}{edge}")
                for pair in c.get("reproduced", {}).values():
                    worst = max([worst, *(abs(a - b) for a, b in pair.values() if b is not None)])
        sel.append(f"seed {s}: " + "; ".join(bits))
    lines += [
        "",
        "Selections per seed: " + " · ".join(sel) + f". On the grid's edge: {edges} of {picks}.",
    ]
    rebuilt = [s for s in seeds_with(cells, ["cft_wide"], setting)
               if "reproduced" in cells[f"{setting}/{s}/cft_wide"]]  # fmt: skip
    if rebuilt:
        lines[-1] += (
            f" The base and aligned models were rebuilt for seeds {rebuilt} (the weights are not "
            f"kept in git); largest difference of their test accuracy / conf-ECE from the stored "
            f"cells: {worst:.1e}."
        )
    return lines


def minilm_body(r: dict[str, Any], cells: dict[str, Any], setting: str) -> list[str]:
    """Control line, then the tables, reading and selections of a MiniLM setting, or, when its
    positive control failed, the verdict and the diagnosis instead of the tables."""
    p, n = r["protocol"], r["n"][setting]["id_test"]
    ctl = control(cells, setting, n)
    if ctl and not ctl["passed"] and setting != "obqa":  # obqa's tables were rendered in 0.4.0
        lines = [control_line(cells, setting, n, tables=False), ""]
        return lines + failed_control(cells, setting, n, SETTING_LABELS[setting])
    lines = [control_line(cells, setting, n), ""]
    lines += means_table(cells, setting, STAGES)
    lines += diff_table(cells, setting, METHODS, p["ni_margin"])
    if text := reading(cells, setting):
        lines += ["", text]
    return lines + selections(cells, setting, p) + wide_grids(r, cells, setting)


def mmlu_section(r: dict[str, Any], cells: dict[str, Any]) -> list[str]:
    n, mp, p = r["n"]["mmlu"], r["mmlu_protocol"], r["protocol"]
    names = r["mmlu_subjects"]
    subjects = f"{len(names)} subjects " + ", ".join(f"`{x}`" for x in names)
    full = len(seeds_with(cells, list(STAGES), "mmlu"))
    based = len(seeds_with(cells, ["base"], "mmlu"))
    return [
        "**(c) Setting `mmlu` (MMLU-internal)** — the model and stages of (a) on MMLU alone: "
        f"in domain the {subjects}; in-domain test {n['id_test']:,} of their questions, "
        f"out-of-domain test {n['ood_test']:,} questions over the other subjects (never trained "
        f"on); per seed {p['base_questions']} base / {p['val']} validation / "
        f"{n['pool'] - p['base_questions'] - p['val']} calibration-train questions from the rest "
        f"of the in-domain subjects (subjects fixed before any run: the largest by question count "
        f"until they hold {mp['id_questions']:,}). Seeds with a base model: {based}; with every "
        f"stage: {full} of 5; command `{r['commands']['mmlu']}`"
        + (
            f", diagnosis `{r['commands']['mmlu/base_wide']}`"
            if "mmlu/base_wide" in r["commands"]
            else ""
        )
        + ".",
        "",
        *minilm_body(r, cells, "mmlu"),
    ]


WIDE_STAGES = ("uniform", "base", "aligned", "ts", "cft", "long_sft")  # obqa_wide's first command


def wide_extra_done(cells: dict[str, Any]) -> bool:
    """Whether label smoothing and RCFT ran on the 8-epoch grids for all 5 seeds."""
    return len(seeds_with(cells, ["ls", "rcft"], "obqa_wide")) >= 5


def wide_section(r: dict[str, Any], cells: dict[str, Any]) -> list[str]:
    g, w = r["grid_protocol"], "obqa_wide"
    full = len(seeds_with(cells, list(WIDE_STAGES), w))
    extra = wide_extra_done(cells)
    cmds = [c for k, c in r["commands"].items() if k.startswith(w)]
    ran = "base, DPO, TS, CFT, long SFT" + (
        ", label smoothing and RCFT (a second command)"
        if extra
        else " (label smoothing and RCFT not run: the CPU time)"
    )
    return [
        f"**(d) Setting `{w}`** — (a) rebuilt from the base up on the extended grids: base SFT "
        f"{g['base_wide']['epochs']} epochs, CFT {g['cft_wide']['epochs']} epochs, everything else "
        "as in (a) (the same cached states, splits, seeds and test questions). Stages run: "
        f"{ran}. Seeds with these stages: {full} of 5; "
        + ("commands " if len(cmds) > 1 else "command ")
        + ", then ".join(f"`{c}`" for c in cmds)
        + ".",
        "",
        *minilm_body(r, cells, w),
    ]


def full_selection(c: dict[str, Any], stage: str) -> str:
    """What a full-model cell selected, in a few words."""
    if "selected_epoch" in c:
        edge = (
            " (edge)"
            if stage in ("base", "cft", "ls") and c["selected_epoch"] in (0, c["epochs"])
            else ""
        )
        return f"epoch {c['selected_epoch']}/{c['epochs']}{edge}"
    if "dpo_last10" in c:
        return f"DPO reward accuracy {c['dpo_last10']['reward_accuracy']:.2f} (last 10 steps)"
    if "temperature" in c:
        return f"T = {c['temperature']:.2f}"
    return ""


def full_done(cells: dict[str, Any], setting: str) -> int:
    """How many of a full-model setting's ``5 * len(FULL_ORDER)`` cells are measured (extra stages
    such as ``rcft_heldout`` are not counted)."""
    return sum(f"{setting}/{s}/{st}" in cells for s in range(5) for st in FULL_ORDER)


def heldout_lines(cells: dict[str, Any], setting: str, margin: float) -> list[str]:
    """The extra stage ``rcft_heldout`` against RCFT, long SFT and TS, paired (nothing before its
    first cell)."""
    ss = seeds_with(cells, ["rcft_heldout"], setting)
    if not ss:
        return []
    pairs = [("rcft_heldout", ref) for ref in ("rcft", "long_sft", "ts")]
    return [
        "",
        "**Testing the diagnosis: RCFT with its E-step on the validation questions** (stage "
        "`rcft_heldout`, a deviation: the paper's E-step reads the training set; the same seed, "
        f"data order and lambda as RCFT; seeds {', '.join(map(str, ss))}). If RCFT fails because "
        "its E-step reads bin accuracies off memorised calibration-train questions, this stage's "
        "conf-ECE falls below RCFT's.",
        "",
        *diff_table(cells, setting, (), margin, pairs, explain=False),
        *heldout_reading(cells, setting, ss),
    ]


def heldout_reading(cells: dict[str, Any], setting: str, ss: list[int]) -> list[str]:
    """How much of RCFT's in-domain gap to temperature scaling the held-out E-step closes, and what
    its training history says about the rest (from 2 seeds on, when intervals exist)."""
    if len(ss) < 2 or not all(f"{setting}/{s}/{st}" in cells for s in ss for st in ("rcft", "ts")):
        return []

    def id_ece(st: str, s: int) -> float:
        return cells[f"{setting}/{s}/{st}"]["test"]["id_test"]["conf_ece"]

    gain = t_interval([id_ece("rcft", s) - id_ece("rcft_heldout", s) for s in ss])
    gap = t_interval([id_ece("rcft", s) - id_ece("ts", s) for s in ss])
    hist = [cells[f"{setting}/{s}/rcft_heldout"]["history"] for s in ss]
    first, last = (sum(h[i]["val"]["conf_ece"] for h in hist) / len(ss) for i in (0, -1))
    reg = sum(h[-1]["reg"] for h in hist) / len(ss)
    share = gain[0] / gap[0]
    rest, why = (
        ("Most of the gap is not the E-step's data: with the regulariser still at ",
         "; the cross-entropy term's fit outweighs the regulariser at this lambda.")
        if share < 0.5
        else ("Most of the gap is the E-step's data; with the regulariser at ", ".")
    )  # fmt: skip
    return [
        "",
        f"Reading: over these {len(ss)} seeds the held-out E-step lowers RCFT's in-domain "
        f"conf-ECE by {gain[0]:.3f} [{gain[1]:.3f}, {gain[2]:.3f}], {share:.0%} of RCFT's gap "
        f"to temperature scaling ({gap[0]:.3f} [{gap[1]:.3f}, {gap[2]:.3f}]). {rest}"
        f"R = {reg:.3f} on the last epoch, validation conf-ECE rises from {first:.3f} after epoch "
        f"1 to {last:.3f} at the last epoch, which RCFT keeps{why}",
    ]


def full_section(r: dict[str, Any], cells: dict[str, Any], setting: str = "obqa_full") -> list[str]:
    """A full-model setting: protocol, progress, control line, per-seed numbers, and, once 5 seeds
    hold every stage, the means, paired differences and reading of the other settings (none before);
    the extra stage ``rcft_heldout`` when measured; the measured and projected cost."""
    g, p, fp = r["grid_protocol"], r["protocol"], r["full_protocol"]
    n = r["n"][setting]["id_test"]
    total = 5 * len(FULL_ORDER)
    done = full_done(cells, setting)
    complete = seeds_with(cells, list(FULL_ORDER), setting)
    cmds = [c for k, c in r["commands"].items() if k.split("/")[0] == setting]
    lines = [
        f"**(e) Setting `{setting}`** — (d) with every weight trained: all-MiniLM-L6-v2 as "
        "`BertForMultipleChoice` (`MCScorer`: embeddings, all six layers, pooler and classifier) "
        "in every stage, nothing cached; the same fixed splits, per-seed splits, seeds, stages, "
        f"learning rates, selection rules and epoch grids as (d) (base SFT "
        f"{g['base_wide']['epochs']} epochs, DPO {p['dpo']['steps']} steps, CFT and label "
        f"smoothing {g['cft_wide']['epochs']} epochs, long SFT and RCFT {p['long']['epochs']} "
        f"epochs). (Question, option) pairs are tokenised per batch (truncated at "
        f"{p['max_length']} tokens, padded to the batch's longest pair); validation and test "
        f"questions are scored in order of token length, {fp['eval_batch_size']} at a time (the "
        "same logits with less padding); temperature scaling reuses the aligned model's test "
        "logits. " + ("Commands " if len(cmds) > 1 else "Command ")
        + ", then ".join(f"`{c}`" for c in cmds) + ".",
        "",
    ]  # fmt: skip
    if len(complete) < 5:
        lines += [
            f"**Not complete: no comparison yet.** {done} of {total} cells measured "
            f"({len(complete)} of 5 seeds with every stage). Means, intervals and verdicts come "
            "only when every stage holds 5 seeds; below are the per-seed numbers of the cells "
            "measured.",
            "",
        ]
    ctl = control(cells, setting, n)
    if ctl:
        lines += [
            control_line(cells, setting, n)
            + f" Seeds with a base model so far: {', '.join(map(str, ctl['seeds']))}.",
            "",
        ]
    if len(complete) == 5:
        lines += means_table(cells, setting, FULL_ORDER)
        lines += diff_table(cells, setting, METHODS, p["ni_margin"])
        if text := reading(cells, setting):
            lines += ["", text]
        lines += ["", "Per seed:", ""]
    lines += [
        "| seed | stage | ID acc | ID conf-ECE | OOD acc | OOD conf-ECE | selected | min |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in range(5):
        for st in (*FULL_ORDER, *EXTRA):
            c = cells.get(f"{setting}/{s}/{st}")
            if not c:
                continue
            t = c["test"]
            lines.append(
                f"| {s} | {NAMES[st]} | {t['id_test']['accuracy']:.3f} | "
                f"{t['id_test']['conf_ece']:.3f} | {t['ood_test']['accuracy']:.3f} | "
                f"{t['ood_test']['conf_ece']:.3f} | {full_selection(c, st)} | "
                f"{c['seconds'] / 60:.1f} |"
            )
    for st, where in (("rcft", "calibration-train"), ("rcft_heldout", "validation")):
        per_seed = []
        for s in seeds_with(cells, [st], setting):
            h = cells[f"{setting}/{s}/{st}"]["history"]
            per_seed.append(
                f"seed {s}: R {h[0]['reg']:.3f} → {h[-1]['reg']:.3f}, validation conf-ECE "
                f"{h[0]['val']['conf_ece']:.3f} → {h[-1]['val']['conf_ece']:.3f}, SFT loss "
                f"{h[0]['sft']:.2f} → {h[-1]['sft']:.2f}"
            )
        if per_seed:
            lines += [
                "",
                f"{NAMES[st]}: the regulariser against held-out calibration, epoch 1 → last "
                "(from the cells' training history; R is the EM-ECE term on the training "
                f"batches, its bin accuracies estimated by the E-step on the {where} "
                "questions): " + " · ".join(per_seed) + ".",
            ]
    lines += heldout_lines(cells, setting, p["ni_margin"])
    cost = r.get("full_cost", {}).get(setting)
    if cost and cost["cells_done"] < cost["cells_total"]:
        dpo = (
            "measured" if cost["dpo_step_measured"] else "estimated: 4/3 of 32 questions' training"
        )
        lines += [
            "",
            f"Cost, measured on one CPU thread ({cost['measured_on']}): "
            f"{cost['step_seconds']:.2f} s per training step of {p['base']['batch_size']} "
            f"questions; **{cost['epoch_seconds']:.0f} s per base epoch** "
            f"({math.ceil(p['base_questions'] / p['base']['batch_size'])} steps and a validation "
            f"pass of {p['val']} questions, {cost['validation_pass_seconds']:.0f} s); "
            f"{cost['test_pass_seconds']:.0f} s to score both test sets; "
            f"{cost['dpo_step_seconds']:.2f} s per DPO step ({dpo}). Projected for the "
            f"{cost['cells_total'] - cost['cells_done']} missing cells: "
            f"{cost['missing_seconds'] / 3600:.1f} h of CPU time with the weights kept under "
            f"`--work`; in {cost['sitting_minutes']}-minute sittings that lose the weights "
            f"(each sitting that continues a seed first rebuilds its base and aligned models, "
            f"{cost['rebuilds']} rebuilds) **{cost['sittings_left']} sittings**. "
            "`--device cuda` moves every model and batch to a GPU; no GPU run is reported here.",
        ]
    return lines


def same_models(cells: dict[str, Any], ref: str, setting: str) -> str:
    """Whether ``setting``'s base and aligned models are ``ref``'s (same grid and seeds): their
    test metrics, compared seed by seed."""
    both = [s for s in seeds_with(cells, ["base"], setting) if f"{ref}/{s}/base" in cells]

    def equal(s: int) -> bool:
        return all(
            cells[f"{setting}/{s}/{m}"]["test"] == cells[f"{ref}/{s}/{m}"]["test"]
            for m in ("base", "aligned")
        )

    same = [s for s in both if equal(s)]
    return (
        f"Its base and aligned models' test metrics equal `{ref}`'s in {len(same)} of "
        f"{len(both)} seeds measured in both."
    )


def causal_section(r: dict[str, Any], cells: dict[str, Any], setting: str) -> list[str]:
    """Block (b) (setting ``causal``), (b2) (``causal_news``), (b3) (``causal_news_wide``) or (b4)
    (``causal_news_wider``): the protocol, the positive control, the means and paired differences
    of ``run_causal_lm``'s methods, the selections per seed (a selection on the last epoch of its
    grid is flagged)."""
    raw = r.get("cells", {})
    cs = seeds_with(cells, ["base"], setting)
    cp = r.get("causal_protocol", CAUSAL)
    model = (
        "`run_causal_lm` (`CausalLMConfig` defaults: a 2-layer GPT-2 layout decoder, hidden 64, "
        "trained from random init on the official flat prompt with the completion-only letter "
        "loss; real DPO on all weights; TS, CFT, long SFT and RCFT with LoRA r 8)"
    )
    if setting == "causal":
        n_id = r["n"]["obqa"]["id_test"]
        head = (
            f"**(b) Setting `causal`** — {model}, per seed {cp['questions']} OpenBookQA "
            "train-pool questions split 40/15/30/15 % into base / DPO / calibration-train / "
            "validation; the same in-domain and OOD tests as (a) (OOD words outside the decoder's "
            f"word vocabulary read as unknown). Seeds: {len(cs)}."
        )
    elif setting == "causal_news":
        n_id = NEWS["id_test"]
        head = (
            f"**(b2) Setting `causal_news`** — the pipeline of (b) on a task a decoder trained "
            "from scratch can learn (added after (b)'s positive control failed, fixed before its "
            "first run): AG News topic classification (the shared data's 7,600-row original test "
            f'split) asked as a 4-option question (title and description, then "{NEWS["prompt"]}"; '
            "options World / Sports / Business / Sci/Tech in that order, so the letter names the "
            f"topic). In-domain test: {NEWS['id_test']:,} rows drawn once; the other 5,600 rows "
            "split per seed 40/15/30/15 % into base / DPO / calibration-train / validation; "
            f"out-of-domain test: the {PROTOCOL['ood_test']:,} MMLU questions of (a) (never trained "
            f"on; their words are mostly outside the decoder's vocabulary). {model}. Seeds: "
            f"{len(cs)}; command `python benchmarks/comparison.py --settings causal_news --resume`."
        )
    else:
        n_id, w = NEWS["id_test"], CAUSAL_GRID[setting]
        label, why = {
            "causal_news_wide": ("(b3)", "(b2) on extended epoch grids, because (b2)'s selections "
                                 "sat on the edge"),
            "causal_news_wider": ("(b4)", "(b3) with longer CFT / long SFT / RCFT grids, because "
                                  "(b3)'s CFT selected its last epoch in 2 of 5 seeds"),
        }[setting]  # fmt: skip
        head = (
            f"**{label} Setting `{setting}`** — {why}: base SFT {w['base_epochs']} epochs, CFT "
            f"{w['cft_epochs']}, long SFT and RCFT {w['long_epochs']}; the same data, splits, "
            f"seeds and test questions. Seeds: {len(cs)}; command `python benchmarks/comparison.py "
            f"--settings {setting} --resume`."
        )
        if setting == "causal_news_wider":
            head += " " + same_models(cells, "causal_news_wide", setting)
    default = C.CausalLMConfig()
    grid = {"base_epochs": default.base_epochs, "cft_epochs": default.cft_epochs,
            **CAUSAL_GRID.get(setting, {})}  # fmt: skip
    lines = [head, ""]
    diag = []
    for s in cs:
        sel = raw[f"{setting}/{s}/all"]["selected"]
        t = sel["temperature"]
        edge = " (edge of the search range e^±3)" if abs(math.log(t)) > 2.99 else ""
        diag.append(
            f"seed {s}: base epoch {sel['base_epoch']}/{grid['base_epochs']}"
            + (" (edge)" if sel["base_epoch"] == grid["base_epochs"] else "")
            + f"; T = {t:.2f}{edge}; CFT epoch {sel['cft_epoch']}/{grid['cft_epochs']}"
            + (" (edge)" if sel["cft_epoch"] in (0, grid["cft_epochs"]) else "")
        )
    stages = ("uniform", "base", "aligned", "ts", "cft", "long_sft", "rcft")
    if setting not in r.get("uniform", {}):  # JSON written before the causal uniform row
        stages = stages[1:]
    margin = r["protocol"]["ni_margin"]
    lines += [control_line(cells, setting, n_id), ""]
    lines += means_table(cells, setting, stages)
    lines += diff_table(cells, setting, ("ts", "cft", "long_sft", "rcft"), margin)
    ctl = control(cells, setting, n_id)
    text = reading(cells, setting) if ctl and ctl["passed"] else ""  # none when the control failed
    if text:
        lines += ["", text]
    if diag:
        lines += ["", "Selections per seed: " + " · ".join(diag) + "."]
    return lines


def mmlu_started(r: dict[str, Any], cells: dict[str, Any]) -> bool:
    """Whether MMLU-internal has a base cell: its block is rendered, and it is not listed as missing."""
    return "mmlu" in r.get("n", {}) and bool(seeds_with(cells, ["base"], "mmlu"))


def not_yet_measured(r: dict[str, Any], cells: dict[str, Any]) -> list[str]:
    """What the README's last line lists as left to measure (empty once the protocol is complete;
    extra stages such as ``rcft_heldout`` are not part of it)."""
    mmlu = mmlu_started(r, cells)
    left = {
        "obqa": sorted(set(range(5)) - set(seeds_with(cells, list(STAGES)))),
        **{c: sorted(set(range(5)) - set(seeds_with(cells, ["base"], c))) for c in CAUSAL_SETTINGS},
    }
    if mmlu and control(cells, "mmlu", r["n"]["mmlu"]["id_test"])["passed"]:
        left["mmlu"] = sorted(set(range(5)) - set(seeds_with(cells, list(STAGES), "mmlu")))
    missing = [f"`{k}` seeds {v} (of 5)" for k, v in left.items() if v]
    if not mmlu:
        missing.append(
            "setting `mmlu` (train on some MMLU subjects, in-domain test >= 2,000 questions of "
            "those subjects, out-of-domain = held-out subjects)"
        )
    total = 5 * len(FULL_ORDER)
    measured = full_done(cells, "obqa_full")  # extra stages (rcft_heldout) are not among the 40
    if measured < total:
        sittings = r.get("full_cost", {}).get("obqa_full", {}).get("sittings_left")
        missing.append(
            f"`obqa_full`, every stage fine-tuning all six MiniLM layers: {total - measured} of "
            f"{total} cells"
            + (f" (projected {sittings} CPU sittings, block (e))" if sittings is not None else "")
        )
    for st, what in (
        ("cft_wide", "`obqa` CFT on the 8-epoch grid (stage `cft_wide`)"),
        ("base_wide", "`obqa` base SFT on the 8-epoch grid (stage `base_wide`)"),
    ):
        if len(seeds_with(cells, [st])) < 5:
            missing.append(f"{what} for 5 seeds")
    wide = seeds_with(cells, list(WIDE_STAGES), "obqa_wide")
    if len(wide) < 5:
        gone = sorted(set(range(5)) - set(wide))
        missing.append(f"`obqa_wide` (the comparison on the 8-epoch grids) seeds {gone} (of 5)")
    if not wide_extra_done(cells):
        missing.append("label smoothing and RCFT on the 8-epoch grids (`obqa_wide`)")
    return missing


def render(r: dict[str, Any]) -> str:
    raw = r.get("cells", {})
    cells = flat_cells(raw, r.get("uniform"))
    p = r["protocol"]
    done = seeds_with(cells, ["base"])
    lines = [
        "**(a) Setting `obqa`** — all-MiniLM-L6-v2 as "
        "`BertForMultipleChoice`; embeddings + layers 1–5 frozen and cached once "
        "(`TopLayerScorer`), layer 6 + pooler + classifier trained in every stage (the CPU budget); "
        f"in-domain test {r['n']['obqa']['id_test']:,} OpenBookQA questions (official test + dev + 1,000 "
        f"held-out train), out-of-domain test {r['n']['obqa']['ood_test']:,} MMLU questions over all 57 "
        f"subjects (never trained on); per seed {p['base_questions']} base / {p['val']} validation / "
        f"{r['n']['obqa']['pool'] - p['base_questions'] - p['val']} calibration-train questions from the "
        f"rest of OpenBookQA train. Base SFT {p['base']['epochs']} epochs (lr {p['base']['lr']}, "
        f"epoch by validation accuracy) → real DPO ({p['dpo']['steps']} steps of "
        f"{p['dpo']['batch_size']} questions, beta {p['dpo']['beta']}, lr {p['dpo']['lr']}, gold "
        f"over every wrong option, frozen base as reference) = *aligned*; then from the aligned "
        f"model: TS (fit on validation); CFT ({p['cft']['epochs']} epochs, lr {p['cft']['lr']}, "
        f"epoch by the paper's rule: lowest validation ECE within {p['cft']['acc_tol']} of the best "
        f"validation accuracy); LS (the CFT run with smoothing {p['label_smoothing']}); long SFT "
        f"({p['long']['epochs']} epochs, last kept); RCFT (long SFT + EM-ECE, lambda {p['lam']}, "
        f"E-step every epoch, last kept). conf-ECE with {p['n_bins']} equal-width bins. "
        f"Seeds with a base model: {len(done)}; command `{r['commands']['obqa']}`.",
        "",
    ]
    lines += minilm_body(r, cells, "obqa")
    for setting in CAUSAL_SETTINGS:  # (b) always, (b2)-(b4) once they have a seed
        if setting == "causal" or seeds_with(cells, ["base"], setting):
            lines += ["", *causal_section(r, cells, setting)]
    mmlu = mmlu_started(r, cells)
    if mmlu:
        lines += ["", *mmlu_section(r, cells)]
    if seeds_with(cells, ["base"], "obqa_wide"):
        lines += ["", *wide_section(r, cells)]
    if any(k.startswith("obqa_full/") for k in cells):
        lines += ["", *full_section(r, cells)]
    missing = not_yet_measured(r, cells)
    if missing:
        lines += [
            "",
            "**Not yet measured:** " + "; ".join(missing) + ". Continue with "
            "`python benchmarks/comparison.py --seeds 0 1 2 3 4 --resume` (finished cells are "
            "skipped; the cached states are rebuilt once if `runs/comparison` is gone).",
        ]
    else:
        lines += [
            "",
            "Nothing left to measure: every setting whose positive control passed holds every "
            "stage for 5 seeds (extra diagnosis stages report their own seeds).",
        ]
    return "\n".join(lines)


def check_device(p: argparse.ArgumentParser, text: str) -> None:
    """Reject a ``--device`` torch cannot parse or that this machine does not have."""
    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError):
        p.error(f"--device: {text!r} is not a torch device (accepted: cpu, cuda, cuda:N, mps, ...)")
    if dev.type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {text}: torch sees no CUDA device here (torch {torch.__version__})")
    if dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():
        p.error(f"--device {text}: only {torch.cuda.device_count()} CUDA device(s) visible")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        p.error(f"--device {text}: the MPS backend is not available here")
    if dev.type not in ("cpu", "cuda", "mps"):
        p.error(f"--device {text}: only cpu, cuda and mps devices are supported")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4],
                   help="seeds; each gives its own base / validation / calibration-train split "
                        "and training seeds")  # fmt: skip
    p.add_argument("--work", type=Path, default=PKG / "runs" / "comparison",
                   help="cached states and per-seed weights")  # fmt: skip
    p.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS),
                   help="benchmark settings, run in this order: obqa (OpenBookQA in domain, MMLU "
                        "out of domain), causal (a small decoder, same tests), mmlu (MMLU's largest "
                        "subjects in domain, the other subjects out of domain), obqa_wide (obqa "
                        "with base SFT and CFT on the extended epoch grids, GRID), obqa_full "
                        "(obqa_wide training every weight), causal_news (the decoder of causal on "
                        "AG News topics as questions, MMLU out of domain), causal_news_wide "
                        f"(causal_news on extended epoch grids: base {NEWS_WIDE['base_epochs']}, CFT "
                        f"{NEWS_WIDE['cft_epochs']}, long SFT / RCFT {NEWS_WIDE['long_epochs']}), "
                        "causal_news_wider (causal_news_wide with CFT / long SFT / RCFT on "
                        f"{NEWS_WIDER['cft_epochs']} epochs)")  # fmt: skip
    p.add_argument("--stages", nargs="+", choices=(*STAGES, *GRID, *EXTRA), default=None,
                   help="stages of the MiniLM settings to run (default: every stage of the "
                        "protocol); base_wide / cft_wide are base / CFT on the extended epoch grids "
                        "(GRID), rcft_heldout is RCFT with its E-step on the validation questions "
                        "(EXTRA, a diagnostic deviation); these run only when named")  # fmt: skip
    p.add_argument("--control-only", action="store_true",
                   help="run only the uniform and base cells (the positive control) of the "
                        "MiniLM settings")  # fmt: skip
    p.add_argument("--resume", action="store_true", help="keep finished cells of the JSON")
    p.add_argument("--cache-only", action="store_true",
                   help="only build the cached states (and score the causal settings' uniform "
                        "row); records no command")  # fmt: skip
    p.add_argument("--stop-at", type=float, default=None,
                   help="unix time: start no cell after it, nor a cell of a full-model setting "
                        "whose projected cost (full_cost) would end after it")  # fmt: skip
    p.add_argument("--render-only", action="store_true", help="re-render the README from the JSON")
    p.add_argument("--device", default="cpu",
                   help="torch device every model and batch is moved to (cpu, cuda, cuda:1, mps, "
                        "...; default cpu); the cached states of the top-layer settings are still "
                        "computed on the CPU")  # fmt: skip
    args = p.parse_args()
    check_device(p, args.device)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    if not args.render_only:
        require_openbookqa(args.data)
        run(args)
    write_readme(render(load_results()), "comparison")
    print("README comparison block rendered", file=sys.stderr)


if __name__ == "__main__":
    main()
