"""Loading and saving HF models as scorers (causal LM -> :class:`LetterScorer`, multiple-choice model ->
:class:`MCScorer`), offline only (``HF_HUB_OFFLINE=1``; a local folder, never a hub id)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .data import MCItem
from .scoring import LetterScorer, MCScorer

__all__ = ["MODEL_TYPES", "detect_model_type", "load_scorer", "save_scorer"]

MODEL_TYPES = ("auto", "causal-lm", "multiple-choice")


def _quiet_transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    return transformers


def detect_model_type(path: str | Path) -> str:
    """``causal-lm`` or ``multiple-choice`` from ``config.json``'s ``architectures``."""
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise ValueError(f"{path}: no config.json (expected a folder written by save_pretrained)")
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cfg_file}: not valid JSON ({exc.msg})") from exc
    archs = cfg.get("architectures") or []
    if any("MultipleChoice" in a for a in archs):
        return "multiple-choice"
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return "causal-lm"
    raise ValueError(
        f"{cfg_file}: architectures {archs} name neither a causal LM nor a multiple-choice model; "
        "pass --model-type causal-lm or multiple-choice"
    )


def load_scorer(
    spec: str | Path,
    model_type: str = "auto",
    items: Sequence[MCItem] = (),
    template: str = "flat",
    k: int = 4,
    max_length: int = 256,
    device: str = "cpu",
    seed: int = 0,
) -> tuple[Any, dict[str, Any]]:
    """A scorer for ``spec``: a local HF folder, ``"tiny-clm"`` (a random 2-layer Llama over the
    items' vocabulary, for smoke runs) or ``"minilm"`` (all-MiniLM-L6-v2 as ``BertForMultipleChoice``
    with a new classifier head; needs ``cft-calibration[demo]``)."""
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    transformers = _quiet_transformers()
    if str(spec) == "tiny-clm":
        from .tiny import tiny_causal_lm

        texts = [it.question + " " + " ".join(it.choices) for it in items]
        model, tok = tiny_causal_lm(texts, seed=seed)
        scorer: Any = LetterScorer(
            model.to(device), tok, template="flat", k=k, max_length=max_length
        )
        return scorer, {
            "model": "tiny-clm (random 2-layer Llama, word tokenizer)",
            "type": "causal-lm",
        }
    if str(spec) == "minilm":
        from .features import minilm_path

        path = minilm_path()
        mtype = "multiple-choice"
    else:
        path = Path(spec)
        mtype = detect_model_type(path) if model_type == "auto" else model_type
    tok = transformers.AutoTokenizer.from_pretrained(path)
    if mtype == "causal-lm":
        model = transformers.AutoModelForCausalLM.from_pretrained(path)
        if tok.pad_token_id is None and tok.eos_token_id is not None:
            tok.pad_token = tok.eos_token
        scorer = LetterScorer(model.to(device), tok, template=template, k=k, max_length=max_length)
    else:
        model = transformers.AutoModelForMultipleChoice.from_pretrained(path)
        scorer = MCScorer(model.to(device), tok, max_length=min(max_length, 512))
    name = "all-MiniLM-L6-v2 (BertForMultipleChoice)" if str(spec) == "minilm" else Path(path).name
    return scorer, {"model": name, "type": mtype}


def save_scorer(scorer: Any, path: str | Path) -> Path:
    """``save_pretrained`` of the scorer's model (LoRA adapters merged first) and tokenizer."""
    path = Path(path)
    model = scorer.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
        scorer.model = model
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    scorer.tokenizer.save_pretrained(path)
    return path
