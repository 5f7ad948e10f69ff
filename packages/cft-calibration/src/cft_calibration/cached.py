"""A BERT-family multiple-choice model split in two: a frozen bottom whose hidden states are computed
once per data set and cached, and a trainable top (the last ``train_layers`` transformer layers,
the pooler and the classifier) that every training step runs.

This is the CPU setting of the issue-29 comparison (``benchmarks/comparison.py``): the base SFT,
the DPO alignment and every calibration method (CFT, RCFT, long SFT, label smoothing) train the same
top of the same encoder, while the frozen bottom is computed once for all seeds and methods. With
``train_layers`` equal to the model's depth the split is the whole model (nothing cached but the
embeddings' output). In eval mode the scores equal those of the unsplit ``AutoModelForMultipleChoice``
(up to the cache's dtype); a test checks it.

Supported: models laid out like ``BertForMultipleChoice`` (``base_model.embeddings``,
``base_model.encoder.layer``, ``base_model.pooler``, ``dropout``, ``classifier``): BERT, RoBERTa-free
BERT variants such as MiniLM.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import Tensor, nn

from .data import MCItem
from .scoring import ScoreOutput, _masked, _ScorerBase, encode_pairs

__all__ = ["HiddenSplit", "TopLayerScorer"]


@dataclass
class HiddenSplit:
    """Cached bottom-layer states of a multiple-choice data set: ``hidden`` [N, K, L, H] (the output
    of the frozen layers), ``attention`` [N, K, L] (token mask), ``mask`` [N, K] (valid options),
    ``labels`` [N]."""

    hidden: Tensor
    attention: Tensor
    mask: Tensor
    labels: Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def subset(self, idx: Sequence[int]) -> HiddenSplit:
        i = torch.as_tensor(list(idx), dtype=torch.long)
        return HiddenSplit(self.hidden[i], self.attention[i], self.mask[i], self.labels[i])

    @staticmethod
    def concat(parts: Sequence[HiddenSplit]) -> HiddenSplit:
        """One split from several with the same K (the token axis is padded to the longest)."""
        length = max(p.hidden.shape[2] for p in parts)

        def pad(t: Tensor, dim_from_end: int) -> Tensor:
            extra = length - t.shape[2]
            if extra == 0:
                return t
            spec = [0, 0] * dim_from_end
            spec[-1] = extra
            return nn.functional.pad(t, spec)

        return HiddenSplit(
            torch.cat([pad(p.hidden, 2) for p in parts]),
            torch.cat([pad(p.attention, 1) for p in parts]),
            torch.cat([p.mask for p in parts]),
            torch.cat([p.labels for p in parts]),
        )


def _additive(attention: Tensor, dtype: torch.dtype) -> Tensor:
    """[B, L] 0/1 token mask -> [B, 1, 1, L] additive attention mask (0 kept, dtype-min masked)."""
    return (1.0 - attention[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def _run_layers(layers: Any, h: Tensor, attention: Tensor) -> Tensor:
    ext = _additive(attention, h.dtype)
    for layer in layers:
        out = layer(h, attention_mask=ext)
        h = out[0] if isinstance(out, tuple) else out
    return h


def _last_layer_first_token(layer: Any, h: Tensor, attention: Tensor) -> Tensor:
    """A BERT layer's output at the first token only ([N, 1, D]): the pooler reads nothing else, so
    the last layer needs the query, attention output and feed-forward of that token alone (keys and
    values still cover every token). Same weights and dropouts as the layer's own forward."""
    sa = layer.attention.self
    n, length, _ = h.shape
    heads, size = sa.num_attention_heads, sa.attention_head_size
    first = h[:, :1]
    q = sa.query(first).view(n, 1, heads, size).transpose(1, 2)
    k = sa.key(h).view(n, length, heads, size).transpose(1, 2)
    v = sa.value(h).view(n, length, heads, size).transpose(1, 2)
    scores = (q @ k.transpose(-1, -2)) * getattr(sa, "scaling", size**-0.5)
    probs = sa.dropout(torch.softmax(scores + _additive(attention, h.dtype), -1))
    ctx = (probs @ v).transpose(1, 2).reshape(n, 1, heads * size)
    a = layer.attention.output(ctx, first)
    out: Tensor = layer.output(layer.intermediate(a), a)
    return out


class TopLayerScorer(_ScorerBase):
    """Scorer over :class:`HiddenSplit` data for a ``BertForMultipleChoice``-like ``model``: the last
    ``train_layers`` encoder layers, the pooler, dropout and classifier are trainable modules of the
    scorer; the embeddings and the lower layers are a frozen copy used only by :meth:`encode`.

    ``cache_dtype`` is the dtype the cached states are stored in (``torch.float16`` halves the memory;
    the top always computes in float32). The last layer is computed at the first token only (all
    the pooler reads), which makes a one-layer top several times cheaper than the layer's forward."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        train_layers: int = 2,
        max_length: int = 64,
        cache_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        base = getattr(model, "base_model", None)
        needed = ("embeddings", "encoder", "pooler")
        if base is None or not all(hasattr(base, a) for a in needed):
            raise ValueError("TopLayerScorer needs a BertForMultipleChoice-like model")
        if not (hasattr(model, "classifier") and hasattr(model, "dropout")):
            raise ValueError("TopLayerScorer needs a model with 'dropout' and 'classifier'")
        depth = len(base.encoder.layer)
        if not 1 <= train_layers <= depth:
            raise ValueError(f"train_layers must be in [1, {depth}], got {train_layers}")
        if max_length < 8:
            raise ValueError(f"max_length must be >= 8, got {max_length}")
        split = depth - train_layers
        self.train_layers, self.max_length, self.cache_dtype = train_layers, max_length, cache_dtype
        self.tokenizer = tokenizer
        self.top = nn.ModuleList(copy.deepcopy(base.encoder.layer[split:]))
        self.pooler = copy.deepcopy(base.pooler)
        self.dropout = copy.deepcopy(model.dropout)
        self.classifier = copy.deepcopy(model.classifier)
        # the frozen bottom lives outside the module tree: not trained, not in state_dict, not copied
        # by deepcopy-based references (DPO) beyond a shared pointer
        bottom = nn.ModuleDict(
            {
                "embeddings": copy.deepcopy(base.embeddings),
                "layers": nn.ModuleList(copy.deepcopy(base.encoder.layer[:split])),
            }
        ).eval()
        for p in bottom.parameters():
            p.requires_grad_(False)
        self._bottom = [bottom]

    def __deepcopy__(self, memo: dict[int, Any]) -> TopLayerScorer:
        bottom = self._bottom
        self._bottom = []
        try:
            cls = self.__class__
            new = cls.__new__(cls)
            memo[id(self)] = new
            for k, v in self.__dict__.items():
                setattr(new, k, copy.deepcopy(v, memo))
        finally:
            self._bottom = bottom
        new._bottom = bottom  # shared: frozen and never written
        return new

    @torch.no_grad()
    def encode(
        self, items: Sequence[MCItem], batch_size: int = 32, progress: Any = None
    ) -> HiddenSplit:
        """Run the frozen bottom once over ``items``: (question, option) pairs, ``only_first``
        truncation at ``max_length``; states stored in ``cache_dtype``, the token axis trimmed to
        the longest pair."""
        if not items:
            raise ValueError("encode: no items")
        bottom = self._bottom[0]
        k = max(it.k for it in items)
        # batches of similar length pad less: encode in order of text length, restore the order after
        order = sorted(
            range(len(items)),
            key=lambda i: len(items[i].question) + max(len(c) for c in items[i].choices),
        )
        hs, atts, masks = [], [], []
        for start in range(0, len(items), batch_size):
            chunk = [items[i] for i in order[start : start + batch_size]]
            firsts, seconds = [], []
            mask = torch.zeros(len(chunk), k, dtype=torch.bool)
            for r, it in enumerate(chunk):
                for j in range(k):
                    firsts.append(it.question)
                    seconds.append(it.choices[j] if j < it.k else "")
                mask[r, : it.k] = True
            enc = encode_pairs(self.tokenizer, firsts, seconds, self.max_length)
            kw = {"input_ids": enc["input_ids"]}
            if "token_type_ids" in enc:
                kw["token_type_ids"] = enc["token_type_ids"]
            h = bottom["embeddings"](**kw)
            h = _run_layers(bottom["layers"], h, enc["attention_mask"])
            length = h.shape[1]
            hs.append(h.to(self.cache_dtype).view(len(chunk), k, length, -1))
            atts.append(enc["attention_mask"].to(torch.bool).view(len(chunk), k, length))
            masks.append(mask)
            if progress is not None:
                progress.update(len(chunk))
        labels = torch.tensor([items[i].answer for i in order], dtype=torch.long)
        parts = [HiddenSplit(h, a, m, labels[:0]) for h, a, m in zip(hs, atts, masks, strict=True)]
        out = HiddenSplit.concat(parts)
        out.labels = labels
        back = torch.empty(len(order), dtype=torch.long)
        back[torch.as_tensor(order)] = torch.arange(len(order))
        return out.subset(back.tolist())

    def labels_of(self, data: Any) -> Tensor:
        return data.labels if isinstance(data, HiddenSplit) else super().labels_of(data)

    def batch(self, data: HiddenSplit, idx: Sequence[int], with_answer: bool = False) -> Any:
        i = torch.as_tensor(list(idx), dtype=torch.long)
        att = data.attention[i]
        length = max(1, int(att.sum(-1).max()))  # trim the padding every row of the batch shares
        dev = next(self.parameters()).device
        return (
            data.hidden[i, :, :length].to(dev, torch.float32),
            att[:, :, :length].to(dev),
            data.mask[i].to(dev),
            data.labels[i].to(dev),
        )

    def forward(self, batch: Any) -> ScoreOutput:
        h, att, mask, y = batch
        b, k, length, d = h.shape
        flat_att = att.reshape(b * k, length)
        h = _run_layers(self.top[:-1], h.reshape(b * k, length, d), flat_att)
        h = _last_layer_first_token(self.top[-1], h, flat_att)
        pooler, dropout, classifier = (
            cast(Any, self.pooler),
            cast(Any, self.dropout),
            cast(Any, self.classifier),
        )
        logits = classifier(dropout(pooler(h))).view(b, k).float()
        logits = _masked(logits, mask)
        return ScoreOutput(logits, mask, torch.log_softmax(logits, -1), y)
