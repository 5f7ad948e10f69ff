"""GLUE TSV loading (any task folder in the original GLUE format), a seeded synthetic sentiment task
that needs composition (negation, "but"), tokenisation and batching."""

from __future__ import annotations

import csv
import math
import random
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "GLUE_TASKS",
    "GlueSplit",
    "detect_task",
    "encode",
    "iterate_batches",
    "load_glue",
    "make_synthetic",
    "word_tokenizer",
    "write_synthetic_glue",
]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    text: tuple[str | int, ...]  # column names, or 0-based positions for header-less files
    label: str | int
    labels: tuple[str, ...] | None  # accepted label strings (index = class id); None = regression
    header: bool = True
    skip_malformed: bool = False


GLUE_TASKS: dict[str, TaskSpec] = {
    "SST-2": TaskSpec("SST-2", ("sentence",), "label", ("0", "1")),
    "CoLA": TaskSpec("CoLA", (3,), 1, ("0", "1"), header=False),
    "MRPC": TaskSpec("MRPC", ("#1 String", "#2 String"), "Quality", ("0", "1")),
    "STS-B": TaskSpec("STS-B", ("sentence1", "sentence2"), "score", None),
    "QQP": TaskSpec("QQP", ("question1", "question2"), "is_duplicate", ("0", "1"), True, True),
    "MNLI": TaskSpec(
        "MNLI", ("sentence1", "sentence2"), "gold_label", ("contradiction", "entailment", "neutral")
    ),
    "QNLI": TaskSpec("QNLI", ("question", "sentence"), "label", ("entailment", "not_entailment")),
    "RTE": TaskSpec("RTE", ("sentence1", "sentence2"), "label", ("entailment", "not_entailment")),
    "WNLI": TaskSpec("WNLI", ("sentence1", "sentence2"), "label", ("0", "1")),
}
_KEYS = {re.sub(r"[^a-z0-9]", "", k.lower()): k for k in GLUE_TASKS}


def detect_task(name: str | Path) -> str:
    """The GLUE task of a folder name or task name (``SST-2``, ``sst2``, ``STS-B``, ``stsb``...)."""
    key = re.sub(r"[^a-z0-9]", "", Path(str(name)).name.lower())
    if key not in _KEYS:
        raise ValueError(
            f"unknown GLUE task {Path(str(name)).name!r}; supported: {', '.join(GLUE_TASKS)}"
        )
    return _KEYS[key]


@dataclass
class GlueSplit:
    """One split of a GLUE task: texts (pairs when ``text_b`` is set), labels (None for test files)."""

    task: str
    split: str
    text_a: list[str]
    text_b: list[str] | None
    labels: list[int] | list[float] | None
    num_labels: int
    path: Path

    def __len__(self) -> int:
        return len(self.text_a)

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    def subset(self, indices: Sequence[int]) -> GlueSplit:
        pick = list(indices)
        return GlueSplit(
            self.task,
            self.split,
            [self.text_a[i] for i in pick],
            None if self.text_b is None else [self.text_b[i] for i in pick],
            None if self.labels is None else [self.labels[i] for i in pick],  # type: ignore[misc]
            self.num_labels,
            self.path,
        )


def _split_file(folder: Path, task: str, split: str) -> Path:
    name = split
    if task == "MNLI" and split == "dev":
        name = "dev_matched"
    if task == "MNLI" and split == "test":
        name = "test_matched"
    return folder / f"{name}.tsv"


def load_glue(folder: str | Path, split: str = "train", task: str | None = None) -> GlueSplit:
    """Read ``<folder>/<split>.tsv`` in the original GLUE format (quoting disabled).

    ``task`` defaults to the folder name (case- and punctuation-insensitive). MNLI's ``dev`` is
    ``dev_matched``; ``dev_mismatched`` is its own split. ``test`` files have no labels.
    Raises ``ValueError`` naming the file, row and column for a missing file, a missing column, an
    empty file, a short row, an empty text or an unparseable / non-finite label.
    """
    folder = Path(folder)
    name = detect_task(task or folder.name)
    spec = GLUE_TASKS[name]
    path = _split_file(folder, name, split)
    if not path.is_file():
        raise ValueError(f"{name}: no {split} file, expected {path}")
    with path.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"{path}: the file is empty")
    first = [c.strip() for c in rows[0]]
    is_test = first[:1] == ["index"] and (
        isinstance(spec.label, int) or str(spec.label) not in first
    )
    header = spec.header or is_test
    columns = first if header else []
    body = rows[1:] if header else rows
    start = 2 if header else 1
    if not body:
        raise ValueError(f"{path}: no data rows (only a header)")

    def column(key: str | int) -> int:
        if isinstance(key, int):
            return key
        if key not in columns:
            raise ValueError(f"{path}: missing column {key!r}; header found: {columns}")
        return columns.index(key)

    if is_test and isinstance(spec.text[0], int):  # CoLA's test file: header "index sentence"
        text_cols = [column("sentence")]
    else:
        text_cols = [column(k) for k in spec.text]
    label_col = None if is_test else column(spec.label)
    need = max([*text_cols, label_col if label_col is not None else 0]) + 1
    text_a: list[str] = []
    text_b: list[str] = []
    labels: list[Any] = []
    skipped = 0
    for offset, row in enumerate(body):
        line = start + offset
        if len(row) < need:
            if spec.skip_malformed:
                skipped += 1
                continue
            raise ValueError(f"{path}: row {line} has {len(row)} columns, expected at least {need}")
        texts = [row[c].strip() for c in text_cols]
        if any(not t for t in texts):
            if spec.skip_malformed:
                skipped += 1
                continue
            bad = text_cols[[not t for t in texts].index(True)]
            raise ValueError(f"{path}: row {line}, column {bad}: empty text")
        if label_col is not None:
            raw = row[label_col].strip()
            labels.append(_parse_label(raw, spec, path, line, label_col))
        text_a.append(texts[0])
        if len(texts) > 1:
            text_b.append(texts[1])
    if skipped:
        warnings.warn(f"{path}: skipped {skipped} malformed rows", stacklevel=2)
    if not text_a:
        raise ValueError(f"{path}: no usable rows")
    return GlueSplit(
        name,
        split,
        text_a,
        text_b if len(text_cols) > 1 else None,
        None if label_col is None else labels,
        1 if spec.labels is None else len(spec.labels),
        path,
    )


def _parse_label(raw: str, spec: TaskSpec, path: Path, line: int, col: int) -> int | float:
    where = f"{path}: row {line}, column {col}"
    if spec.labels is None:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{where}: label {raw!r} is not a number") from None
        if not math.isfinite(value):
            raise ValueError(f"{where}: label {raw!r} is not finite")
        return value
    if raw not in spec.labels:
        raise ValueError(f"{where}: label {raw!r} is not one of {', '.join(spec.labels)}")
    return spec.labels.index(raw)


# ------------------------------------------------------------------------------ synthetic task

POSITIVE = (
    "good great excellent wonderful superb lovely delightful brilliant charming pleasant "
    "amazing fantastic marvelous splendid enjoyable beautiful fine terrific outstanding "
    "impressive admirable joyful nice solid"
).split()
NEGATIVE = (
    "bad awful terrible horrible poor dreadful boring dull mediocre unpleasant lousy "
    "disappointing weak painful ugly tedious annoying clumsy bland messy shoddy grim sloppy "
    "stale"
).split()
NOUNS = (
    "movie film plot story acting script cast ending soundtrack dialogue pacing camera "
    "director scene music hero villain effects sequel book show episode song album meal "
    "service hotel room trip game actor"
).split()
INTENSIFIERS = "very really quite truly rather so extremely pretty".split()
NEGATORS = "not never hardly barely".split()
FILLERS = (
    "overall honestly frankly basically actually anyway still also though indeed clearly "
    "apparently mostly literally simply generally personally admittedly"
).split()
FILLERS = [*FILLERS, "i think", "to be fair"]


def _clause(rng: random.Random, label: int, negated: bool) -> list[str]:
    pol = label if not negated else 1 - label
    adj = rng.choice(POSITIVE if pol == 1 else NEGATIVE)
    words = ["the", rng.choice(NOUNS), "was"]
    if negated:
        words.append(rng.choice(NEGATORS))
    if rng.random() < 0.5:
        words.append(rng.choice(INTENSIFIERS))
    words.append(adj)
    return words


def _with_fillers(rng: random.Random, parts: list[list[str]]) -> list[str]:
    words: list[str] = []
    for i, part in enumerate(parts):
        if rng.random() < 0.5:
            for _ in range(rng.randint(1, 3 if i == 0 else 1)):
                words += rng.choice(FILLERS).split()
        words += part
    return words


def make_synthetic(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """``n`` balanced sentences of a seeded sentiment task where order and negation matter.

    Templates: T1 ``the <noun> was [<intens>] <adj>`` (40 %), T2 with a negator (25 %, label flipped),
    T3 ``<clause A> but <clause B>`` with opposite labels (35 %, label of B); 0-3 fillers at clause
    boundaries with probability 0.5. Bag-of-words models fail on T2/T3.
    """
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    rng = random.Random(seed)
    out: list[tuple[str, int]] = []
    counts = [0, 0]
    while len(out) < n:
        label = rng.randint(0, 1)
        if counts[label] >= (n + 1 - label) // 2:
            continue  # exact balance by rejection
        u = rng.random()
        if u < 0.40:
            parts = [_clause(rng, label, False)]
        elif u < 0.65:
            parts = [_clause(rng, label, True)]
        else:
            first = _clause(rng, 1 - label, rng.random() < 0.3)
            second = _clause(rng, label, rng.random() < 0.3)
            parts = [first, ["but", *second]]
        words = _with_fillers(rng, parts)
        if not 4 <= len(words) <= 24:
            continue
        counts[label] += 1
        out.append((" ".join(words), label))
    return out


def write_synthetic_glue(
    folder: str | Path, sizes: tuple[int, int, int] = (4000, 800, 800), seed: int = 0
) -> Path:
    """Write the synthetic task as a GLUE SST-2 folder (``train.tsv``, ``dev.tsv``, ``test.tsv`` with
    labels), seeds ``seed``, ``seed+1``, ``seed+2``. Returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for i, (split, n) in enumerate(zip(("train", "dev", "test"), sizes)):
        rows = make_synthetic(n, seed + i)
        with (folder / f"{split}.tsv").open("w", encoding="utf-8") as fh:
            fh.write("sentence\tlabel\n")
            fh.writelines(f"{s}\t{y}\n" for s, y in rows)
    return folder


def synthetic_vocab() -> list[str]:
    words = sorted(
        {
            *POSITIVE,
            *NEGATIVE,
            *NOUNS,
            *INTENSIFIERS,
            *NEGATORS,
            *(w for f in FILLERS for w in f.split()),
            "the",
            "was",
            "but",
        }
    )
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]


def word_tokenizer(folder: str | Path, vocab: Sequence[str] | None = None) -> Any:
    """A deterministic word-level tokenizer (a BERT WordPiece tokenizer over whole words) saved in
    ``folder``; the default vocabulary is the synthetic task's lexicon."""
    from transformers import BertTokenizerFast  # type: ignore[attr-defined]

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    words = list(vocab or synthetic_vocab())
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(words)}, do_lower_case=True)
    tok.save_pretrained(str(folder))
    return tok


# --------------------------------------------------------------------------------- encoding


def hold_out(n: int, val_size: int, seed: int) -> tuple[list[int], list[int]]:
    """(validation, training) indices of ``n`` training examples: a seeded permutation whose first
    ``min(val_size, max(1, n // 5))`` examples are held out for validation (``run_distill``'s split,
    so a benchmark can rebuild the validation split of a finished run)."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    val_n = min(val_size, max(1, n // 5))
    return order[:val_n], order[val_n:]


def encode(tokenizer: Any, split: GlueSplit, max_len: int = 64) -> dict[str, Tensor]:
    """Tokenise a split into padded tensors ``input_ids``, ``attention_mask``, ``token_type_ids`` and
    ``labels`` (when the split has labels)."""
    enc = tokenizer(
        split.text_a,
        split.text_b,
        truncation=True,
        max_length=max_len,
        padding="max_length",
        return_tensors="pt",
    )
    out = {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "token_type_ids": enc.get("token_type_ids", torch.zeros_like(enc["input_ids"])),
    }
    if split.labels is not None:
        dtype = torch.float32 if split.is_regression else torch.long
        out["labels"] = torch.tensor(split.labels, dtype=dtype)
    return out


def iterate_batches(
    data: dict[str, Tensor],
    batch_size: int,
    *,
    shuffle: bool = False,
    generator: torch.Generator | None = None,
    bucket: int = 0,
) -> Iterator[dict[str, Tensor]]:
    """Batches trimmed to their longest sequence (dynamic padding).

    ``bucket > 0`` (with ``shuffle``) sorts windows of ``bucket`` batches by length before batching
    and shuffles the batches, so little compute goes into padding.
    """
    n = data["input_ids"].shape[0]
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if shuffle and bucket > 0:
        lengths = data["attention_mask"].sum(dim=1)
        window = batch_size * bucket
        batches = []
        for start in range(0, n, window):
            chunk = order[start : start + window]
            chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
            batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
        perm = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in perm]
    for idx in batches:
        batch = {k: v[idx] for k, v in data.items()}
        length = int(batch["attention_mask"].sum(dim=1).max())
        for key in ("input_ids", "attention_mask", "token_type_ids"):
            batch[key] = batch[key][:, :length]
        yield batch
