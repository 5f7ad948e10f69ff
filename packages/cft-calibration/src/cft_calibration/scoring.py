"""Scorers: map a batch of multiple-choice items to option logits z_i in R^K (the paper's Sec. 3 setting).

Three scorers share one interface (``batch(data, idx, with_answer)`` then ``forward(batch)`` returning
a :class:`ScoreOutput`), so temperature scaling, CFT, RCFT and the DPO simulation apply unchanged:

* :class:`LetterScorer` — any HF causal LM: the prompt ends right before the answer letter and z_ik is
  the next-token logit of the k-th option letter (restricted softmax over the letters, as in the
  official code). The answer position is read from the attention mask, so left and right padding give
  the same result.
* :class:`MCScorer` — any HF ``AutoModelForMultipleChoice`` (inputs [B, K, T] -> logits [B, K]).
* :class:`FeatureScorer` — a small head over cached option features (e.g. frozen MiniLM embeddings of
  each (question, option) pair): s_ik = w2^T GELU(W1 e_ik + b1) + b2, shared over options.

Absent options (items with fewer than K options) get logit -inf and ``mask`` False.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from .data import LETTERS, MCItem
from .synthetic import FeatureSplit

__all__ = [
    "SYSTEM_PROMPT",
    "FeatureScorer",
    "LetterScorer",
    "MCScorer",
    "ScoreOutput",
    "completion_loss",
    "completion_only_labels",
    "format_question",
    "predict",
]

SYSTEM_PROMPT = (
    "You are an AI assistant that answers multiple choice questions. You must only respond with a "
    "single letter corresponding to your choice without any explanation or additional text."
)


@dataclass
class ScoreOutput:
    """``logits`` [B, K] (absent options -inf), ``mask`` [B, K], ``option_logprobs`` [B, K] (the
    log-probability of each option as a response: full-vocabulary log-softmax of the letter token for
    causal LMs, log-softmax over the options otherwise), ``lm_loss`` (completion-only next-token CE over
    the full vocabulary; causal LMs with ``with_answer=True`` only), ``labels`` [B]."""

    logits: Tensor
    mask: Tensor
    option_logprobs: Tensor
    labels: Tensor
    lm_loss: Tensor | None = None


def _masked(logits: Tensor, mask: Tensor) -> Tensor:
    return logits.masked_fill(~mask, float("-inf"))


class _ScorerBase(nn.Module):
    """Shared helpers: sizes and labels of a data source."""

    def n_items(self, data: Any) -> int:
        return len(data)

    def labels_of(self, data: Any) -> Tensor:
        if isinstance(data, FeatureSplit):
            return data.labels
        return torch.tensor([it.answer for it in data], dtype=torch.long)

    def batch(self, data: Any, idx: Sequence[int], with_answer: bool = False) -> Any:
        raise NotImplementedError

    def forward(self, batch: Any) -> ScoreOutput:  # pragma: no cover - abstract
        raise NotImplementedError


# --------------------------------------------------------------------------------- feature head


class FeatureScorer(_ScorerBase):
    """Option head over cached features [B, K, D]: Linear(D, hidden) -> GELU -> Dropout -> Linear(hidden, 1).

    ``hidden=0`` gives a linear scorer s_ik = w^T e_ik + b (exact model class of the synthetic task).
    """

    def __init__(self, in_dim: int, hidden: int = 256, dropout: float = 0.1) -> None:
        super().__init__()
        if in_dim < 1 or hidden < 0 or not 0 <= dropout < 1:
            raise ValueError(
                f"FeatureScorer needs in_dim >= 1, hidden >= 0, 0 <= dropout < 1; got {in_dim}, {hidden}, {dropout}"
            )
        self.in_dim, self.hidden, self.dropout = in_dim, hidden, dropout
        if hidden == 0:
            self.net: nn.Module = nn.Linear(in_dim, 1)
        else:
            self.net = nn.Sequential(
                nn.Linear(in_dim, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, 1)
            )

    def batch(self, data: FeatureSplit, idx: Sequence[int], with_answer: bool = False) -> Any:
        i = torch.as_tensor(list(idx), dtype=torch.long)
        dev = next(self.parameters()).device
        return data.features[i].to(dev), data.mask[i].to(dev), data.labels[i].to(dev)

    def forward(self, batch: Any) -> ScoreOutput:
        x, mask, y = batch
        if x.ndim != 3 or x.shape[-1] != self.in_dim:
            raise ValueError(f"features must be [B, K, {self.in_dim}], got {tuple(x.shape)}")
        logits = _masked(self.net(x).squeeze(-1), mask)
        return ScoreOutput(logits, mask, torch.log_softmax(logits, -1), y)


# ----------------------------------------------------------------------------- causal-LM letters


def format_question(item: MCItem, letters: str = LETTERS) -> str:
    """The official user text: ``Question: {q}\\n\\nOptions:\\nA. {o1}\\n...\\n\\nAnswer with only a single letter:``."""
    opts = "\n".join(f"{letters[j]}. {c}" for j, c in enumerate(item.choices))
    return f"Question: {item.question}\n\nOptions:\n{opts}\n\nAnswer with only a single letter:"


def completion_only_labels(
    input_ids: Tensor, attention_mask: Tensor, prompt_lengths: Tensor
) -> Tensor:
    """LM labels that keep only completion tokens: prompt and padding positions become -100.

    ``prompt_lengths`` [B] counts the real (non-pad) prompt tokens of each row; works for left and
    right padding (positions are counted among the real tokens).
    """
    real_rank = attention_mask.long().cumsum(1) - 1  # 0-based index among real tokens
    keep = attention_mask.bool() & (real_rank >= prompt_lengths[:, None])
    return input_ids.masked_fill(~keep, -100)


def completion_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Next-token cross-entropy over the full vocabulary on the positions with a label (!= -100)."""
    shift_logits = logits[:, :-1].reshape(-1, logits.shape[-1]).float()
    shift_labels = labels[:, 1:].reshape(-1)
    if not (shift_labels != -100).any():
        raise ValueError("completion_loss: no completion token in the batch")
    return nn.functional.cross_entropy(shift_logits, shift_labels, ignore_index=-100)


class LetterScorer(_ScorerBase):
    """Option-letter scorer for any HF causal LM.

    Parameters
    ----------
    model, tokenizer : a causal LM and its tokenizer (any padding side).
    template : ``"flat"`` (default; ``### Question: {user text}\\n ### Answer:`` with the letter
        appended without a space, as the official training string) or ``"chat"`` (the tokenizer's chat
        template with the official system prompt, generation prompt added).
    k : the number of option letters to resolve (default 4: A-D); items may have up to ``k`` options.
    sft_target : ``"answer"`` (default; the completion is the letter) or ``"answer+context"`` (letter,
        newline, then ``item.explanation`` when the item has one).
    padding_side : ``"left"``/``"right"``; default: the tokenizer's.
    max_length : prompts longer than this many tokens are cut from the left (keeping the answer cue).
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        template: str = "flat",
        k: int = 4,
        sft_target: str = "answer",
        padding_side: str | None = None,
        max_length: int | None = None,
    ) -> None:
        super().__init__()
        if template not in ("flat", "chat"):
            raise ValueError(f"template must be 'flat' or 'chat', got {template!r}")
        if sft_target not in ("answer", "answer+context"):
            raise ValueError(f"sft_target must be 'answer' or 'answer+context', got {sft_target!r}")
        if not 2 <= k <= len(LETTERS):
            raise ValueError(f"k must lie in [2, {len(LETTERS)}], got {k}")
        self.model = model
        self.tokenizer = tokenizer
        self.template = template
        self.k = k
        self.sft_target = sft_target
        self.padding_side = padding_side or getattr(tokenizer, "padding_side", "right") or "right"
        if self.padding_side not in ("left", "right"):
            raise ValueError(f"padding_side must be 'left' or 'right', got {self.padding_side!r}")
        self.max_length = max_length
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id
        if pad is None:
            raise ValueError("the tokenizer has neither a pad token nor an EOS token to pad with")
        self.pad_id = int(pad)
        self.letter_ids = self.resolve_letters()

    def prompt(self, item: MCItem) -> str:
        user = format_question(item)
        if self.template == "flat":
            return f"### Question: {user}\n ### Answer:"
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]
        return str(
            self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        )

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    def resolve_letters(self) -> list[int]:
        """Token id of each letter: tokenise prompt and prompt + letter, take the first new token.

        Raises ``ValueError`` naming the letter and the token pieces when a letter is not exactly one
        new token after the answer cue, or when two letters share a token.
        """
        probe = MCItem("probe", "probe", ["x"] * self.k, 0)
        prompt = self.prompt(probe)
        base = self._ids(prompt)
        ids = []
        for letter in LETTERS[: self.k]:
            full = self._ids(prompt + letter)
            new = full[len(base) :]
            pieces = self.tokenizer.convert_ids_to_tokens(full[max(0, len(base) - 1) :])
            if full[: len(base)] != base:
                raise ValueError(
                    f"letter {letter!r} merges with the end of the prompt (tokens {pieces}); use a "
                    "tokenizer or template where each option letter is a token of its own"
                )
            if len(new) != 1:
                raise ValueError(
                    f"letter {letter!r} is {len(new)} tokens after the prompt (pieces {pieces}), "
                    "expected exactly 1"
                )
            unk = getattr(self.tokenizer, "unk_token_id", None)
            if unk is not None and new[0] == unk:
                raise ValueError(
                    f"letter {letter!r} is not in the tokenizer's vocabulary (it maps to the unknown "
                    f"token; pieces {pieces})"
                )
            ids.append(new[0])
        if len(set(ids)) != len(ids):
            raise ValueError(
                f"the letters {LETTERS[: self.k]} do not map to distinct tokens: {ids}"
            )
        return ids

    def _completion(self, item: MCItem) -> str:
        letter = LETTERS[item.answer]
        if self.sft_target == "answer+context" and item.explanation:
            return f"{letter}\n{item.explanation}"
        return letter

    def batch(self, data: Sequence[MCItem], idx: Sequence[int], with_answer: bool = False) -> Any:
        items = [data[i] for i in idx]
        for it in items:
            if it.k > self.k:
                raise ValueError(
                    f"item {it.id} has {it.k} options; this scorer resolves {self.k} letters"
                )
        rows, plens = [], []
        for it in items:
            p_text = self.prompt(it)
            p_ids = self._ids(p_text)
            if self.max_length is not None and len(p_ids) > self.max_length:
                p_ids = p_ids[-self.max_length :]
            ids = list(p_ids)
            if with_answer:
                full = self._ids(p_text + self._completion(it))
                base = self._ids(p_text)
                comp = (
                    full[len(base) :]
                    if full[: len(base)] == base
                    else list(
                        self.tokenizer(self._completion(it), add_special_tokens=False)["input_ids"]
                    )
                )
                ids += comp
            rows.append(ids)
            plens.append(len(p_ids))
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros(len(rows), width, dtype=torch.long)
        for r, ids in enumerate(rows):
            if self.padding_side == "right":
                input_ids[r, : len(ids)] = torch.tensor(ids)
                attn[r, : len(ids)] = 1
            else:
                input_ids[r, width - len(ids) :] = torch.tensor(ids)
                attn[r, width - len(ids) :] = 1
        mask = torch.zeros(len(items), self.k, dtype=torch.bool)
        for r, it in enumerate(items):
            mask[r, : it.k] = True
        labels = torch.tensor([it.answer for it in items], dtype=torch.long)
        dev = next(self.model.parameters()).device
        return {
            "input_ids": input_ids.to(dev),
            "attention_mask": attn.to(dev),
            "prompt_lengths": torch.tensor(plens, dtype=torch.long, device=dev),
            "mask": mask.to(dev),
            "labels": labels.to(dev),
            "with_answer": with_answer,
        }

    def forward(self, batch: Any) -> ScoreOutput:
        ids, attn, plen = batch["input_ids"], batch["attention_mask"], batch["prompt_lengths"]
        position_ids = (attn.cumsum(1) - 1).clamp_min(0)
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=position_ids)
        logits_all = out.logits
        # answer position: the last real prompt token (left or right padding alike)
        real_rank = attn.cumsum(1) - 1
        is_pos = attn.bool() & (real_rank == (plen - 1)[:, None])
        pos = is_pos.float().argmax(1)
        row = logits_all[torch.arange(ids.shape[0], device=ids.device), pos].float()
        letter_ids = torch.tensor(self.letter_ids, device=row.device)
        mask = batch["mask"]
        logits = _masked(row[:, letter_ids], mask)
        option_logprobs = torch.log_softmax(row, -1)[:, letter_ids].masked_fill(
            ~mask, float("-inf")
        )
        lm_loss = None
        if batch.get("with_answer"):
            lm_labels = completion_only_labels(ids, attn, plen)
            lm_loss = completion_loss(logits_all, lm_labels)
        return ScoreOutput(logits, mask, option_logprobs, batch["labels"], lm_loss)


# ------------------------------------------------------------------------- multiple-choice head


def encode_pairs(tokenizer: Any, firsts: list[str], seconds: list[str], max_length: int) -> Any:
    """Tokenise (question, option) pairs, truncating the question first (``only_first``); a batch
    where an option alone exceeds ``max_length`` falls back to ``longest_first``."""
    kwargs: dict[str, Any] = {"max_length": max_length, "padding": True, "return_tensors": "pt"}
    try:
        return tokenizer(firsts, seconds, truncation="only_first", **kwargs)
    except Exception:  # tokenizers raises a bare Exception ("Sequence to truncate too short")
        return tokenizer(firsts, seconds, truncation="longest_first", **kwargs)


class MCScorer(_ScorerBase):
    """Scorer for any HF ``AutoModelForMultipleChoice``: (question, option) pairs, ``truncation="only_first"``."""

    def __init__(self, model: nn.Module, tokenizer: Any, max_length: int = 128) -> None:
        super().__init__()
        if max_length < 8:
            raise ValueError(f"max_length must be >= 8, got {max_length}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length

    def batch(self, data: Sequence[MCItem], idx: Sequence[int], with_answer: bool = False) -> Any:
        items = [data[i] for i in idx]
        k = max(it.k for it in items)
        firsts, seconds = [], []
        mask = torch.zeros(len(items), k, dtype=torch.bool)
        for r, it in enumerate(items):
            for j in range(k):
                firsts.append(it.question)
                seconds.append(it.choices[j] if j < it.k else "")
            mask[r, : it.k] = True
        enc = encode_pairs(self.tokenizer, firsts, seconds, self.max_length)
        dev = next(self.model.parameters()).device
        inputs = {key: v.view(len(items), k, -1).to(dev) for key, v in enc.items()}
        labels = torch.tensor([it.answer for it in items], dtype=torch.long, device=dev)
        return {"inputs": inputs, "mask": mask.to(dev), "labels": labels}

    def forward(self, batch: Any) -> ScoreOutput:
        logits = self.model(**batch["inputs"]).logits.float()
        logits = _masked(logits, batch["mask"])
        return ScoreOutput(logits, batch["mask"], torch.log_softmax(logits, -1), batch["labels"])


# ----------------------------------------------------------------------------------- inference


@torch.no_grad()
def predict(
    scorer: _ScorerBase, data: Any, batch_size: int = 64, progress: Any = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Option logits [N, K], mask [N, K] and labels [N] of every item (eval mode, no gradient)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    was_training = scorer.training
    scorer.eval()
    n = scorer.n_items(data)
    outs, masks, labels = [], [], []
    try:
        for start in range(0, n, batch_size):
            idx = list(range(start, min(n, start + batch_size)))
            out = scorer(scorer.batch(data, idx))
            outs.append(out.logits.float().cpu())
            masks.append(out.mask.cpu())
            labels.append(out.labels.cpu())
            if progress is not None:
                progress.update(len(idx))
    finally:
        scorer.train(was_training)
    k = max(o.shape[1] for o in outs)
    logits = torch.cat(
        [nn.functional.pad(o, (0, k - o.shape[1]), value=float("-inf")) for o in outs]
    )
    mask = torch.cat([nn.functional.pad(m, (0, k - m.shape[1]), value=False) for m in masks])
    return logits, mask, torch.cat(labels)
