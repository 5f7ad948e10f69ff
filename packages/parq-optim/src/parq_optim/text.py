"""Character-level text data for the language-model QAT protocol (tiny Shakespeare or any UTF-8
text file): a vocabulary of the file's characters, contiguous train / validation / test splits,
random training windows, deterministic evaluation windows and the unigram baseline."""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

__all__ = ["CharCorpus", "load_text", "make_corpus", "random_windows", "unigram_loss"]

MIN_SPLIT_CHARS = 64
"""Fewest characters a split may hold (the validation and test splits are the smallest)."""


@dataclass
class CharCorpus:
    """A text file as character ids: ``vocab[i]`` is the character of id ``i``; ``train``, ``val``
    and ``test`` are contiguous pieces of the file (int64 ids), in this order."""

    vocab: str
    train: Tensor
    val: Tensor
    test: Tensor
    name: str = ""

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def split(self, name: str) -> Tensor:
        if name not in ("train", "val", "test"):
            raise ValueError(f"split must be train, val or test, got {name!r}")
        return getattr(self, name)  # type: ignore[no-any-return]

    def decode(self, ids: Tensor) -> str:
        return "".join(self.vocab[i] for i in ids.tolist())


def make_corpus(
    text: str, *, val_frac: float = 0.05, test_frac: float = 0.05, name: str = ""
) -> CharCorpus:
    """Split ``text`` into train (first ``1 - val_frac - test_frac``), validation and test (last
    ``test_frac``) by position; the vocabulary is every character of ``text``, sorted."""
    if not (0 < val_frac < 1 and 0 < test_frac < 1 and val_frac + test_frac < 1):
        raise ValueError(
            f"val_frac and test_frac must be in (0, 1) with a sum below 1, got {val_frac}, "
            f"{test_frac}"
        )
    n = len(text)
    n_val, n_test = int(n * val_frac), int(n * test_frac)
    n_train = n - n_val - n_test
    label = f"{name}: " if name else ""
    if min(n_val, n_test) < MIN_SPLIT_CHARS:
        need = math.ceil(MIN_SPLIT_CHARS / min(val_frac, test_frac))
        raise ValueError(
            f"{label}{n} characters are too few: the validation and test splits need at least "
            f"{MIN_SPLIT_CHARS} each (at least {need} characters in all)"
        )
    vocab = "".join(sorted(set(text)))
    index = {c: i for i, c in enumerate(vocab)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.int64)
    return CharCorpus(
        vocab,
        ids[:n_train],
        ids[n_train : n_train + n_val],
        ids[n_train + n_val :],
        name=name,
    )


def load_text(
    path: str | os.PathLike,
    *,
    val_frac: float = 0.05,
    test_frac: float = 0.05,
    max_chars: int | None = None,
) -> CharCorpus:
    """Read a UTF-8 text file (e.g. tiny Shakespeare's ``input.txt``) as a :class:`CharCorpus`.

    ``max_chars`` keeps the first that many characters (before splitting). Raises ``ValueError``
    naming the file when it is not a readable UTF-8 text file (a folder, binary data, NUL bytes)
    or is too short for the splits."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path.name}: not a file (the char-level model reads one text file)")
    raw = path.read_bytes()
    if not raw:
        raise ValueError(f"{path.name}: the file is empty")
    if b"\x00" in raw:
        raise ValueError(f"{path.name}: holds NUL bytes: a binary file, not text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path.name}: not UTF-8 text (byte {e.start}: {raw[e.start : e.start + 1]!r})"
        ) from e
    if max_chars is not None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be >= 1, got {max_chars}")
        text = text[:max_chars]
    return make_corpus(text, val_frac=val_frac, test_frac=test_frac, name=path.name)


def random_windows(
    ids: Tensor, context: int, batch_size: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``batch_size`` random windows: inputs ``(B, context)`` and next-character targets."""
    if len(ids) <= context:
        raise ValueError(f"a split of {len(ids)} characters is too short for context {context}")
    start = torch.randint(0, len(ids) - context, (batch_size,), generator=generator)
    offsets = torch.arange(context + 1)
    windows = ids[start[:, None] + offsets]
    return windows[:, :-1], windows[:, 1:]


def eval_windows(
    ids: Tensor, context: int, max_windows: int | None = None
) -> tuple[Tensor, Tensor]:
    """Non-overlapping windows covering ``ids`` from the start (deterministic), at most
    ``max_windows`` of them evenly spread over the split."""
    n = (len(ids) - 1) // context
    if n < 1:
        raise ValueError(f"a split of {len(ids)} characters is too short for context {context}")
    starts = torch.arange(n) * context
    if max_windows is not None and n > max_windows:
        starts = starts[torch.linspace(0, n - 1, max_windows).round().long()]
    offsets = torch.arange(context + 1)
    windows = ids[starts[:, None] + offsets]
    return windows[:, :-1], windows[:, 1:]


def unigram_loss(corpus: CharCorpus, split: str = "val") -> float:
    """The trivial baseline: cross-entropy (nats per character) of ``split`` under the train
    split's character frequencies (add-one smoothing over the vocabulary)."""
    counts = Counter(corpus.train.tolist())
    total = len(corpus.train) + corpus.vocab_size
    logp = {i: math.log((counts.get(i, 0) + 1) / total) for i in range(corpus.vocab_size)}
    ids = corpus.split(split).tolist()
    return -sum(logp[i] for i in ids) / len(ids)
