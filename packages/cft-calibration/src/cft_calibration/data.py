"""Multiple-choice question loaders (MMLU, OpenBookQA, ARC, MedMCQA, generic JSONL) with validation.

Every loader returns a list of :class:`MCItem` and raises ``ValueError`` naming the file, the line
(or row) and what was expected for malformed input: a missing column or field, an empty question,
an answer out of range or not an integer/letter (``nan`` included), fewer than 2 options, duplicate
or missing option labels, undecodable UTF-8, an empty file, mixed option counts when ``k_fixed`` is
requested. Duplicate option *texts* are legal (some MMLU items have them).
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FORMATS",
    "LETTERS",
    "MCItem",
    "detect_format",
    "load_arc",
    "load_jsonl",
    "load_mcqa",
    "load_medmcqa",
    "load_mmlu",
    "load_openbookqa",
    "split_items",
    "write_jsonl",
]

LETTERS = "ABCDEFGHIJ"
FORMATS = ("auto", "mmlu", "obqa", "arc", "medmcqa", "jsonl")
MMLU_HEADER = ["question", "choice0", "choice1", "choice2", "choice3", "answer"]
OBQA_HEADER = ["ID", "Question Stem", "Choices", "Complete Question", "Answer Key"]


@dataclass
class MCItem:
    """One multiple-choice question: ``answer`` is the 0-based index of the gold option."""

    id: str
    question: str
    choices: list[str]
    answer: int
    subject: str | None = None
    source: str = ""
    explanation: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.choices) < 2:
            raise ValueError(f"item {self.id}: needs at least 2 options, got {len(self.choices)}")
        if not 0 <= self.answer < len(self.choices):
            raise ValueError(
                f"item {self.id}: answer {self.answer} out of range 0..{len(self.choices) - 1}"
            )

    @property
    def k(self) -> int:
        return len(self.choices)


# ------------------------------------------------------------------------------------------ helpers


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not valid UTF-8 ({exc.reason})") from exc
    if not text.strip():
        raise ValueError(f"{path}: the file is empty")
    return text


def _answer_index(value: Any, k: int, where: str, labels: Sequence[str] | None = None) -> int:
    """A 0-based answer from an int, a digit string or an option label; errors name ``where``."""
    labels = list(labels) if labels is not None else list(LETTERS[:k])
    if isinstance(value, bool):
        raise ValueError(f"{where}: answer must be an option index or label, got {value!r}")
    if isinstance(value, int):
        idx = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError(f"{where}: answer {value!r} is not an integer option index")
        idx = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if text in labels:
            return labels.index(text)
        try:
            idx = int(text)
        except ValueError:
            raise ValueError(
                f"{where}: answer {value!r} is neither an option label ({', '.join(labels)}) "
                f"nor an integer index 0..{k - 1}"
            ) from None
    else:
        raise ValueError(f"{where}: answer must be an option index or label, got {value!r}")
    if not 0 <= idx < k:
        raise ValueError(f"{where}: answer {idx} out of range 0..{k - 1}")
    return idx


def _check_text(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: {what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{where}: {what} is empty")
    return value


def _finish(items: list[MCItem], path: Path, k_fixed: int | None) -> list[MCItem]:
    if not items:
        raise ValueError(f"{path}: no questions found")
    if k_fixed is not None:
        for it in items:
            if it.k != k_fixed:
                raise ValueError(
                    f"{path}: item {it.id} has {it.k} options, expected {k_fixed} (k_fixed)"
                )
    return items


def _jsonl_records(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    text = _read_text(path)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_constant=lambda c: float(c))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise ValueError(
                f"{path}:{number}: expected a JSON object, got {type(record).__name__}"
            )
        yield number, record


def _labelled_choices(choices: Any, where: str) -> tuple[list[str], list[str]]:
    """``[{"text", "label"}, ...]`` (ARC/OpenBookQA JSONL) or ``{"text": [...], "label": [...]}`` (HF)."""
    if isinstance(choices, dict):
        texts, labels = choices.get("text"), choices.get("label")
        if not isinstance(texts, list) or not isinstance(labels, list) or len(texts) != len(labels):
            raise ValueError(f"{where}: choices needs equal-length 'text' and 'label' lists")
        pairs = list(zip(labels, texts))
    elif isinstance(choices, list):
        pairs = []
        for c in choices:
            if not isinstance(c, dict) or "text" not in c or "label" not in c:
                raise ValueError(f"{where}: each choice needs 'text' and 'label'")
            pairs.append((c["label"], c["text"]))
    else:
        raise ValueError(f"{where}: missing or malformed 'choices'")
    labels = [str(lab).strip() for lab, _ in pairs]
    if any(not lab for lab in labels):
        raise ValueError(f"{where}: an option label is missing")
    if len(set(labels)) != len(labels):
        raise ValueError(f"{where}: duplicate option labels {labels}")
    texts = [_check_text(t, f"option {lab}", where) for lab, t in pairs]
    if len(texts) < 2:
        raise ValueError(f"{where}: needs at least 2 options, got {len(texts)}")
    return texts, labels


# --------------------------------------------------------------------------------------------- MMLU


def _subject_of(path: Path) -> str:
    stem = path.stem
    for suffix in ("_test", "_dev", "_val", "_train"):
        if stem.endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def _mmlu_csv(path: Path) -> list[MCItem]:
    text = _read_text(path)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        raise ValueError(f"{path}: the file is empty")
    header = [c.strip() for c in rows[0]]
    hf = header == MMLU_HEADER
    if not hf and len(header) == 6 and header[0].lower() == "question":
        raise ValueError(
            f"{path}: header {header} is not the HF layout {MMLU_HEADER} (or drop it for the "
            "original Hendrycks layout: question,A,B,C,D,answer-letter without a header)"
        )
    body = rows[1:] if hf else rows
    if hf and not body:
        raise ValueError(f"{path}: header only, no questions")
    subject = _subject_of(path)
    items = []
    # line numbers: csv rows can span several lines (quoted newlines), so count them
    line = 2 if hf else 1
    for r, row in enumerate(body):
        where = f"{path}:{line} (row {r + 1})"
        line += sum(cell.count("\n") for cell in row) + 1
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != 6:
            raise ValueError(
                f"{where}: expected 6 columns (question, 4 options, answer), got {len(row)}"
            )
        question = _check_text(row[0], "question", where)
        choices = [_check_text(c, f"option {LETTERS[j]}", where) for j, c in enumerate(row[1:5])]
        if hf:
            ans_text = row[5].strip()
            try:
                ans_val = float(ans_text)
            except ValueError:
                ans_val = math.nan
            if not math.isfinite(ans_val) or not ans_val.is_integer():
                raise ValueError(f"{where}: answer {ans_text!r} is not an integer 0..3")
            answer = _answer_index(ans_val, 4, where)
        else:
            if row[5].strip() not in LETTERS[:4]:
                raise ValueError(f"{where}: answer {row[5]!r} is not a letter A-D")
            answer = LETTERS.index(row[5].strip())
        items.append(
            MCItem(f"{subject}-{r}", question, choices, answer, subject=subject, source="mmlu")
        )
    return items


def _mmlu_json(path: Path) -> list[MCItem]:
    if path.suffix == ".jsonl":
        records = list(_jsonl_records(path))
    else:
        data = json.loads(_read_text(path), parse_constant=lambda c: float(c))
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of records")
        records = list(enumerate(data, 1))
    items = []
    for number, rec in records:
        where = f"{path}:{number}"
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: expected an object")
        for key in ("question", "choices", "answer"):
            if key not in rec:
                raise ValueError(f"{where}: missing field {key!r}")
        choices = rec["choices"]
        if not isinstance(choices, list) or len(choices) < 2:
            raise ValueError(f"{where}: 'choices' must be a list of at least 2 strings")
        choices = [_check_text(c, f"option {j}", where) for j, c in enumerate(choices)]
        subject = rec.get("subject") or _subject_of(path)
        items.append(
            MCItem(
                f"{subject}-{number}",
                _check_text(rec["question"], "question", where),
                choices,
                _answer_index(rec["answer"], len(choices), where),
                subject=subject,
                source="mmlu",
            )
        )
    return items


def _mmlu_parquet(path: Path) -> list[MCItem]:
    try:
        import pandas as pd
    except ImportError as exc:
        raise ValueError(
            f"{path}: reading Parquet needs pandas and pyarrow (pip install pandas pyarrow)"
        ) from exc
    frame = pd.read_parquet(path)
    items = []
    for number, rec in enumerate(frame.to_dict("records"), 1):
        rec["choices"] = list(rec.get("choices", []))
        where = f"{path}: row {number}"
        for key in ("question", "choices", "answer"):
            if key not in rec:
                raise ValueError(f"{where}: missing field {key!r}")
        subject = rec.get("subject") or _subject_of(path)
        choices = [_check_text(c, f"option {j}", where) for j, c in enumerate(rec["choices"])]
        items.append(
            MCItem(
                f"{subject}-{number}",
                _check_text(rec["question"], "question", where),
                choices,
                _answer_index(rec["answer"], len(choices), where),
                subject=subject,
                source="mmlu",
            )
        )
    return items


def load_mmlu(
    path: str | Path,
    split: str | None = "test",
    subjects: Sequence[str] | None = None,
    k_fixed: int | None = 4,
) -> list[MCItem]:
    """MMLU from a folder or one file; the layout is detected per file.

    Layouts: (a) HF field layout as CSV (header ``question,choice0..choice3,answer``, answer 0-based);
    (b) the original Hendrycks CSVs (no header; question, A, B, C, D, answer letter); (c) JSON/JSONL
    or Parquet of ``cais/mmlu`` (``question, subject, choices, answer``). A folder is searched for
    ``<subject>_<split>.csv`` files (also under ``<split>/``); ``split=None`` takes every file.
    ``subjects`` keeps only those subjects (names as in the file names).
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*") if p.suffix in (".csv", ".json", ".jsonl", ".parquet")
        )
        if split is not None:
            files = [p for p in files if p.stem.endswith(f"_{split}") or split in p.parent.name]
        if not files:
            raise ValueError(
                f"{path}: no MMLU files for split {split!r} (expected <subject>_{split}.csv)"
            )
    elif path.is_file():
        files = [path]
    else:
        raise ValueError(f"{path}: does not exist")
    wanted = set(subjects) if subjects is not None else None
    items: list[MCItem] = []
    for f in files:
        if wanted is not None and _subject_of(f) not in wanted and f.suffix == ".csv":
            continue
        if f.suffix == ".csv":
            got = _mmlu_csv(f)
        elif f.suffix == ".parquet":
            got = _mmlu_parquet(f)
        else:
            got = _mmlu_json(f)
        if wanted is not None:
            got = [it for it in got if it.subject in wanted]
        items += got
    if wanted is not None:
        missing = wanted - {it.subject for it in items}
        if missing:
            raise ValueError(f"{path}: no questions for subject(s) {sorted(missing)}")
    return _finish(items, path, k_fixed)


# --------------------------------------------------------------------------------------- OpenBookQA


def _split_obqa_choices(text: str, where: str) -> list[str]:
    """``(A) x (B) y (C) z (D) w`` -> 4 texts: first " (B) ", then " (C) " after it, " (D) " after that."""
    s = text.strip()
    if not s.startswith("(A) "):
        raise ValueError(f"{where}: Choices must start with '(A) ', got {text[:30]!r}")
    s = s[4:]
    out = []
    for marker in (" (B) ", " (C) ", " (D) "):
        cut = s.find(marker)
        if cut < 0:
            raise ValueError(f"{where}: Choices lacks the marker {marker.strip()!r}")
        out.append(s[:cut])
        s = s[cut + len(marker) :]
    out.append(s)
    return [_check_text(c, f"option {LETTERS[j]}", where) for j, c in enumerate(out)]


def _obqa_tsv(path: Path) -> list[MCItem]:
    text = _read_text(path)
    lines = text.splitlines()
    header = lines[0].split("\t")
    if [h.strip() for h in header] != OBQA_HEADER:
        raise ValueError(
            f"{path}:1: header {header} is not the OpenBookQA TSV header {OBQA_HEADER}"
        )
    items = []
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        cells = line.split("\t")
        if len(cells) != 5:
            raise ValueError(f"{where}: expected 5 tab-separated columns, got {len(cells)}")
        qid, stem, choices, _complete, key = cells
        choice_texts = _split_obqa_choices(choices, where)
        if key.strip() not in LETTERS[:4]:
            raise ValueError(f"{where}: Answer Key {key!r} is not a letter A-D")
        items.append(
            MCItem(
                _check_text(qid, "ID", where).strip(),
                _check_text(stem, "question stem", where),
                choice_texts,
                LETTERS.index(key.strip()),
                source="openbookqa",
            )
        )
    return items


def _arc_like_jsonl(path: Path, source: str) -> list[MCItem]:
    items = []
    for number, rec in _jsonl_records(path):
        where = f"{path}:{number}"
        if "question" not in rec:
            raise ValueError(f"{where}: missing field 'question'")
        q = rec["question"]
        if isinstance(q, dict):  # AI2 release layout
            stem = _check_text(q.get("stem"), "question stem", where)
            texts, labels = _labelled_choices(q.get("choices"), where)
        else:  # HF layout (ARC: question + choices; OpenBookQA: question_stem + choices)
            stem = _check_text(rec.get("question_stem", q), "question", where)
            texts, labels = _labelled_choices(rec.get("choices"), where)
        if "answerKey" not in rec:
            raise ValueError(f"{where}: missing field 'answerKey'")
        key = str(rec["answerKey"]).strip()
        if key not in labels:
            raise ValueError(f"{where}: answerKey {key!r} is not one of the labels {labels}")
        fact = rec.get("fact1")
        items.append(
            MCItem(
                str(rec.get("id", f"{path.stem}-{number}")),
                stem,
                texts,
                labels.index(key),
                source=source,
                explanation=fact if isinstance(fact, str) and fact.strip() else None,
                meta={"labels": labels},
            )
        )
    return items


def load_openbookqa(path: str | Path, split: str = "test", k_fixed: int | None = 4) -> list[MCItem]:
    """OpenBookQA: the official ``Data/Main/<split>.tsv`` (the shared copy) or ``<split>.jsonl``.

    ``path`` is a file or a folder holding ``<split>.tsv``/``<split>.jsonl`` (also under ``Main/``).
    ``fact1`` of the ``Data/Additional`` files becomes ``MCItem.explanation``.
    """
    path = Path(path)
    if path.is_dir():
        cands = [
            path / f"{split}.tsv",
            path / "Main" / f"{split}.tsv",
            path / f"{split}.jsonl",
            path / "Main" / f"{split}.jsonl",
            path / f"{split}_complete.jsonl",
        ]
        found = next((c for c in cands if c.is_file()), None)
        if found is None:
            raise ValueError(f"{path}: no {split}.tsv or {split}.jsonl (also looked in Main/)")
        path = found
    if path.suffix == ".tsv":
        items = _obqa_tsv(path)
    elif path.suffix == ".jsonl":
        items = _arc_like_jsonl(path, "openbookqa")
    else:
        raise ValueError(f"{path}: expected a .tsv or .jsonl OpenBookQA file")
    return _finish(items, path, k_fixed)


def load_arc(path: str | Path, split: str = "Test", k_fixed: int | None = None) -> list[MCItem]:
    """ARC (AI2 ``ARC-V1-Feb2018``): ``ARC-*-<split>.jsonl`` (labels A-E or 1-5; 3-5 options)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob(f"*-{split}.jsonl"))
        if not files:
            raise ValueError(f"{path}: no ARC-*-{split}.jsonl files")
    else:
        files = [path]
    items = []
    for f in files:
        items += _arc_like_jsonl(f, "arc")
    return _finish(items, path, k_fixed)


def load_medmcqa(
    path: str | Path, cop_base: int | str = "auto", k_fixed: int | None = 4
) -> list[MCItem]:
    """MedMCQA JSONL (``question, opa..opd, cop, exp, subject_name``).

    ``cop_base``: 0 or 1 for the index base of ``cop``, or ``"auto"`` (1-based if any value is 4,
    0-based if any is 0; otherwise the base cannot be told and an error asks for it).
    """
    path = Path(path)
    if cop_base not in (0, 1, "auto"):
        raise ValueError(f"cop_base must be 0, 1 or 'auto', got {cop_base!r}")
    records = list(_jsonl_records(path))
    if not records:
        raise ValueError(f"{path}: no questions found")
    cops = []
    for number, rec in records:
        for key in ("question", "opa", "opb", "opc", "opd", "cop"):
            if key not in rec:
                raise ValueError(f"{path}:{number}: missing field {key!r}")
        cop = rec["cop"]
        if (
            isinstance(cop, bool)
            or not isinstance(cop, (int, float))
            or not float(cop).is_integer()
        ):
            raise ValueError(f"{path}:{number}: cop {cop!r} is not an integer")
        cops.append(int(cop))
    if cop_base == "auto":
        if 4 in cops:
            base = 1
        elif 0 in cops:
            base = 0
        else:
            raise ValueError(
                f"{path}: cannot tell whether cop is 0- or 1-based (no 0 and no 4 among the values); "
                "pass cop_base=0 or cop_base=1"
            )
    else:
        base = int(cop_base)
    items = []
    for (number, rec), cop in zip(records, cops):
        where = f"{path}:{number}"
        choices = [_check_text(rec[k], f"option {k}", where) for k in ("opa", "opb", "opc", "opd")]
        idx = cop - base
        if not 0 <= idx < 4:
            raise ValueError(f"{where}: cop {cop} out of range for a {base}-based index")
        exp = rec.get("exp")
        items.append(
            MCItem(
                str(rec.get("id", f"medmcqa-{number}")),
                _check_text(rec["question"], "question", where),
                choices,
                idx,
                subject=rec.get("subject_name"),
                source="medmcqa",
                explanation=exp if isinstance(exp, str) and exp.strip() else None,
            )
        )
    return _finish(items, path, k_fixed)


def load_jsonl(path: str | Path, k_fixed: int | None = None) -> list[MCItem]:
    """Generic JSONL, one ``{"question": str, "choices": [str, ...], "answer": int (0-based) or letter}``
    per line (optional ``id``, ``subject``, ``explanation``)."""
    path = Path(path)
    items = []
    for number, rec in _jsonl_records(path):
        where = f"{path}:{number}"
        for key in ("question", "choices", "answer"):
            if key not in rec:
                raise ValueError(f"{where}: missing field {key!r}")
        choices = rec["choices"]
        if not isinstance(choices, list):
            raise ValueError(f"{where}: 'choices' must be a list of strings")
        if len(choices) < 2:
            raise ValueError(f"{where}: needs at least 2 choices, got {len(choices)}")
        choices = [_check_text(c, f"choice {j}", where) for j, c in enumerate(choices)]
        exp = rec.get("explanation")
        items.append(
            MCItem(
                str(rec.get("id", f"{path.stem}-{number}")),
                _check_text(rec["question"], "question", where),
                choices,
                _answer_index(rec["answer"], len(choices), where),
                subject=rec.get("subject"),
                source="jsonl",
                explanation=exp if isinstance(exp, str) and exp.strip() else None,
            )
        )
    return _finish(items, path, k_fixed)


def write_jsonl(items: Iterable[MCItem], path: str | Path) -> Path:
    """Write items in the generic JSONL layout (readable by :func:`load_jsonl`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for it in items:
            rec = {"id": it.id, "question": it.question, "choices": it.choices, "answer": it.answer}
            if it.subject:
                rec["subject"] = it.subject
            if it.explanation:
                rec["explanation"] = it.explanation
            fh.write(json.dumps(rec) + "\n")
    return path


# -------------------------------------------------------------------------------------- dispatcher


def detect_format(path: str | Path) -> str:
    """Guess the layout of ``path`` (a file or folder): mmlu, obqa, arc, medmcqa or jsonl."""
    path = Path(path)
    if path.is_dir():
        if (
            any(path.glob("*.tsv"))
            or any(path.glob("Main/*.tsv"))
            or any(path.glob("Main/*.jsonl"))
        ):
            return "obqa"
        if (
            any(path.rglob("*_test.csv"))
            or any(path.rglob("*_dev.csv"))
            or any(path.rglob("*.csv"))
        ):
            return "mmlu"
        if any(path.rglob("ARC-*.jsonl")):
            return "arc"
        raise ValueError(
            f"{path}: cannot tell the dataset layout (expected MMLU <subject>_<split>.csv files, "
            "OpenBookQA Main/<split>.tsv or ARC-*.jsonl); pass the format explicitly"
        )
    suffix = path.suffix.lower()
    if suffix == ".tsv":
        return "obqa"
    if suffix in (".csv", ".parquet"):
        return "mmlu"
    if suffix == ".json":
        return "mmlu"  # a JSON list of cais/mmlu records
    if suffix == ".jsonl":
        first = next((ln for ln in _read_text(path).splitlines() if ln.strip()), "")
        try:
            rec = json.loads(first)
        except json.JSONDecodeError:
            return "jsonl"
        if isinstance(rec, dict):
            if "opa" in rec and "cop" in rec:
                return "medmcqa"
            if "answerKey" in rec:
                return "arc"
        return "jsonl"
    raise ValueError(
        f"{path}: unknown file type {suffix!r} (expected .csv, .tsv, .jsonl, .json, .parquet)"
    )


def load_mcqa(
    path: str | Path, fmt: str = "auto", split: str = "test", **kwargs: Any
) -> list[MCItem]:
    """Load any supported layout (``fmt`` from :data:`FORMATS`; ``auto`` detects it)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: does not exist")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "mmlu":
        return load_mmlu(path, split=split if path.is_dir() else None, **kwargs)
    if fmt == "obqa":
        return load_openbookqa(path, split=split, **kwargs)
    if fmt == "arc":
        return load_arc(path, split=split.capitalize(), **kwargs)
    if fmt == "medmcqa":
        return load_medmcqa(path, **kwargs)
    return load_jsonl(path, **kwargs)


def split_items(
    items: Sequence[MCItem], fractions: Sequence[float], seed: int = 0, stratify: bool = True
) -> list[list[MCItem]]:
    """Shuffle (seeded) and cut ``items`` into parts of the given fractions, stratified by subject.

    Fractions must be positive and sum to at most 1 (the rest is dropped). Within each subject the
    cut points are rounded so that the parts' sizes differ from the exact fractions by < 1 item each.
    """
    if any(f <= 0 for f in fractions) or sum(fractions) > 1 + 1e-9:
        raise ValueError(f"fractions must be positive and sum to <= 1, got {list(fractions)}")
    rng = random.Random(seed)
    groups: dict[str | None, list[MCItem]] = {}
    for it in items:
        groups.setdefault(it.subject if stratify else None, []).append(it)
    parts: list[list[MCItem]] = [[] for _ in fractions]
    for key in sorted(groups, key=lambda s: "" if s is None else s):
        group = list(groups[key])
        rng.shuffle(group)
        n = len(group)
        cum = 0.0
        start = 0
        for j, f in enumerate(fractions):
            cum += f
            end = round(cum * n)
            parts[j] += group[start:end]
            start = end
    for part in parts:
        rng.shuffle(part)
    return parts
