"""Tiny randomly initialised HF models built offline from a config (tests, smoke runs, the CLI's
``--model tiny-clm``): a word-level tokenizer over the data's vocabulary, a 2-layer Llama (or GPT-2)
causal LM and a 2-layer BERT multiple-choice model. No weights are downloaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .data import LETTERS

__all__ = ["tiny_causal_lm", "tiny_mc_model", "word_tokenizer"]

SPECIALS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "[CLS]", "[SEP]"]
_WORD = re.compile(r"\w+|[^\w\s]")


def word_tokenizer(texts: Iterable[str], max_vocab: int = 4000, pair_template: bool = False) -> Any:
    """A word-level ``PreTrainedTokenizerFast`` over ``texts`` (whitespace + punctuation split) with
    PAD/UNK/BOS/EOS/CLS/SEP and the letters A-J as tokens of their own. ``pair_template`` adds BERT's
    ``[CLS] a [SEP] b [SEP]`` post-processing (for multiple-choice models)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    counts: dict[str, int] = {}
    for text in texts:
        for w in _WORD.findall(text):
            counts[w] = counts.get(w, 0) + 1
    fixed = [*SPECIALS, *LETTERS, "###", "Question", "Answer", "Options", ":", "."]
    vocab = list(dict.fromkeys(fixed))
    for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= max_vocab:
            break
        if w not in vocab:
            vocab.append(w)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if pair_template:
        cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )


def tiny_causal_lm(
    texts: Iterable[str],
    arch: str = "llama",
    layers: int = 2,
    hidden: int = 64,
    heads: int = 4,
    intermediate: int = 128,
    max_positions: int = 512,
    seed: int = 0,
) -> tuple[Any, Any]:
    """(model, tokenizer): a randomly initialised ``LlamaForCausalLM`` or ``GPT2LMHeadModel``."""
    import torch
    import transformers

    tok = word_tokenizer(texts)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if arch == "llama":
            cfg = transformers.LlamaConfig(
                vocab_size=len(tok),
                hidden_size=hidden,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                num_key_value_heads=heads,
                intermediate_size=intermediate,
                max_position_embeddings=max_positions,
                pad_token_id=tok.pad_token_id,
                bos_token_id=tok.bos_token_id,
                eos_token_id=tok.eos_token_id,
                tie_word_embeddings=False,
            )
            model: Any = transformers.LlamaForCausalLM(cfg)
        elif arch == "gpt2":
            cfg2 = transformers.GPT2Config(
                vocab_size=len(tok),
                n_embd=hidden,
                n_layer=layers,
                n_head=heads,
                n_inner=intermediate,
                n_positions=max_positions,
                pad_token_id=tok.pad_token_id,
                bos_token_id=tok.bos_token_id,
                eos_token_id=tok.eos_token_id,
            )
            model = transformers.GPT2LMHeadModel(cfg2)
        else:
            raise ValueError(f"arch must be 'llama' or 'gpt2', got {arch!r}")
    model.eval()
    return model, tok


def tiny_mc_model(
    texts: Iterable[str], layers: int = 2, hidden: int = 64, heads: int = 4, seed: int = 0
) -> tuple[Any, Any]:
    """(model, tokenizer): a randomly initialised ``BertForMultipleChoice`` with a word tokenizer."""
    import torch
    import transformers

    tok = word_tokenizer(texts, pair_template=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cfg = transformers.BertConfig(
            vocab_size=len(tok),
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=2 * hidden,
            max_position_embeddings=256,
            pad_token_id=tok.pad_token_id,
        )
        model = transformers.BertForMultipleChoice(cfg)
    model.eval()
    return model, tok
