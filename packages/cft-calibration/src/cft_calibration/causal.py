"""The causal-LM path end to end on CPU, the paper's setting in miniature:

a small decoder built from a config (GPT-2 or Llama layout, word tokenizer, no download) is trained
from scratch on QA-formatted multiple-choice questions with the official flat prompt and the
completion-only letter loss (the *base* model) -> made overconfident by real DPO (gold letter over
the wrong letters, the frozen base model as reference) -> from that aligned model: temperature
scaling (fit on validation), CFT, long SFT and RCFT, each with LoRA adapters (peft) -> metrics on
the test split.

Data: OpenBookQA Main (official train cut into base / align / CFT-train / validation, official test
as test) when ``data`` names it or ``"auto"`` finds it under ``$ICML25_DATA``; otherwise the embedded
synthetic-category task. One call: ``run_causal_lm(CausalLMConfig(...))``.
"""

from __future__ import annotations

import copy
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._contract import ConfigError, check_config, param
from .config import DPOConfig, TrainConfig
from .data import MCItem

__all__ = ["CAUSAL_METHODS", "CausalLMConfig", "CausalLMResult", "causal_lm_data", "run_causal_lm"]

CAUSAL_METHODS = ("base", "aligned", "ts", "cft", "long_sft", "rcft")
_FRACTIONS = {"base": 0.4, "align": 0.15, "train": 0.3, "val": 0.15}
_MAX = 10**9


@dataclass
class CausalLMConfig:
    """Budgets of the causal-LM pipeline (defaults: a few CPU minutes on OpenBookQA)."""

    data: str | Path = param(
        "auto", "auto (OpenBookQA under $ICML25_DATA, else synthetic-category), synthetic-category, "
        "openbookqa or an OpenBookQA folder", path="any",
        names=("auto", "synthetic-category", "openbookqa"),
    )  # fmt: skip
    max_questions: int | None = param(
        2000, "questions sampled from the training pool before the split", low=20, high=_MAX,
        none="all",
    )  # fmt: skip
    max_test: int | None = param(500, "test questions", low=1, high=_MAX, none="all")
    arch: str = param("gpt2", "decoder layout", choices=("gpt2", "llama"))
    layers: int = param(2, "transformer blocks", low=1, high=64)
    hidden: int = param(64, "hidden width", low=8, high=8192)
    heads: int = param(4, "attention heads", low=1, high=128)
    max_length: int = param(192, "maximum prompt tokens (cut from the left)", low=16, high=4096)
    batch_size: int = param(16, "questions per minibatch", low=1, high=_MAX)
    base_epochs: int = param(
        10, "base SFT epochs (all weights, from random init)", low=1, high=10_000
    )
    base_lr: float = param(3e-3, "base SFT learning rate", low=0, low_open=True, high=1)
    dpo_steps: int = param(150, "DPO steps (all weights)", low=0, high=1_000_000)
    dpo_lr: float = param(1e-3, "DPO learning rate", low=0, low_open=True, high=1)
    beta: float = param(0.1, "DPO beta", low=0, low_open=True, high=1000)
    cft_epochs: int = param(3, "CFT epochs (best validation epoch kept)", low=1, high=10_000)
    long_epochs: int = param(6, "long-SFT and RCFT epochs", low=1, high=10_000)
    lr: float = param(3e-3, "LoRA fine-tuning learning rate", low=0, low_open=True, high=1)
    lora_r: int = param(8, "LoRA rank", low=1, high=4096)
    lora_alpha: int = param(16, "LoRA alpha", low=1, high=65536)
    lam: float = param(1.0, "RCFT regulariser weight lambda", low=0, high=1e4)
    n_bins: int = param(10, "ECE bins M", low=2, high=1000)
    seed: int = param(0, "random seed", low=0, high=2**32 - 1)
    threads: int | None = param(None, "torch CPU threads", low=1, high=1024, none="auto")
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class CausalLMResult:
    """Metrics of every stage on the test split, the selections, the DPO trace and timings."""

    data: dict[str, Any]
    config: dict[str, Any]
    methods: dict[str, dict[str, float]]
    selected: dict[str, Any] = field(default_factory=dict)
    dpo: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    scorers: dict[str, Any] = field(default_factory=dict)  # name -> fitted scorer (not serialised)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "scorers"}


def causal_lm_data(cfg: CausalLMConfig) -> tuple[dict[str, list[MCItem]], dict[str, Any]]:
    """The pipeline's splits (base, align, train, val, test) and a description of the data."""
    value = cfg.data
    folder: Path | None = None
    if value in ("auto", "openbookqa"):
        root = os.environ.get("ICML25_DATA")
        cand = Path(root).expanduser() / "openbookqa" / "Main" if root else None
        if cand is not None and (cand / "train.tsv").is_file():
            folder = cand
        elif value == "openbookqa":
            raise ConfigError(
                "data", f"openbookqa: no train.tsv under $ICML25_DATA/openbookqa/Main ({root})"
            )
    elif value != "synthetic-category":
        folder = Path(value)
    if folder is not None:
        from .data import load_openbookqa

        try:
            pool = load_openbookqa(folder, split="train")
            test = load_openbookqa(folder, split="test")
        except (OSError, ValueError) as exc:
            raise ConfigError("data", f"{value}: {exc}") from exc
        name = "openbookqa"
    else:
        from .synthetic import synthetic_category_mcqa

        sets = synthetic_category_mcqa(seed=cfg.seed)
        pool, test, name = sets["train"] + sets["val"], sets["test"], "synthetic-category"
    rng = random.Random(cfg.seed)
    if cfg.max_questions is not None and len(pool) > cfg.max_questions:
        pool = rng.sample(pool, cfg.max_questions)
    if cfg.max_test is not None and len(test) > cfg.max_test:
        test = rng.sample(test, cfg.max_test)
    from .data import split_items

    parts = split_items(pool, list(_FRACTIONS.values()), seed=cfg.seed)
    splits = dict(zip(_FRACTIONS, parts))
    splits["test"] = list(test)
    about = {"name": name, "sizes": {k: len(v) for k, v in splits.items()}}
    return splits, about


def run_causal_lm(
    cfg: CausalLMConfig | None = None,
    progress: Callable[[int, str], Any] | None = None,
    splits: dict[str, list[MCItem]] | None = None,
) -> CausalLMResult:
    """Base SFT of a small decoder -> real DPO -> TS / CFT / long SFT / RCFT with LoRA; test metrics.
    A seed gives the same run (the caller's global RNG is left untouched).

    ``splits`` overrides the data (keys base, align, train, val, test; lists of :class:`MCItem`).
    """
    cfg = cfg or CausalLMConfig()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    about: dict[str, Any]
    if splits is None:
        splits, about = causal_lm_data(cfg)
    else:
        about = {"name": "given", "sizes": {k: len(v) for k, v in splits.items()}}
    missing = [k for k in ("base", "align", "train", "val", "test") if not splits.get(k)]
    if missing:
        raise ConfigError("data", f"splits {missing} are missing or empty")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from .dpo import dpo_align
    from .metrics import evaluate_probs
    from .regularizer import EMECERegularizer
    from .scoring import LetterScorer, format_question, predict
    from .temperature import TemperatureScaler
    from .tiny import tiny_causal_lm
    from .train import apply_lora, train

    k = max(it.k for part in splits.values() for it in part)
    texts = [format_question(it) for part in splits.values() for it in part]
    model, tok = tiny_causal_lm(
        texts, arch=cfg.arch, layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads,
        intermediate=4 * cfg.hidden, max_positions=cfg.max_length + 8, seed=cfg.seed,
    )  # fmt: skip
    base = LetterScorer(model.to(cfg.device), tok, template="flat", k=max(k, 2),
                        max_length=cfg.max_length)  # fmt: skip
    res = CausalLMResult(data=about, config=asdict(cfg), methods={})
    test = splits["test"]

    def record(name: str, scorer: Any, transform: Any = None) -> None:
        z, m, y = predict(scorer, test, 64)
        p = transform(z) if transform is not None else torch.softmax(z, -1)
        res.methods[name] = evaluate_probs(p, y, mask=m, n_bins=cfg.n_bins)
        res.scorers[name] = scorer

    def tcfg(epochs: int, lr: float, select: str, offset: int) -> TrainConfig:
        return TrainConfig(
            epochs=epochs, lr=lr, batch_size=cfg.batch_size, sft_loss="full_vocab", select=select,
            eval_batch_size=64, n_bins=cfg.n_bins, seed=cfg.seed * 1000 + offset,
        )  # fmt: skip

    t0 = time.perf_counter()
    fit = train(base, splits["base"], tcfg(cfg.base_epochs, cfg.base_lr, "acc", 1), None,
                splits["val"], progress)  # fmt: skip
    res.selected["base_epoch"] = fit.selected_epoch
    res.seconds["base"] = time.perf_counter() - t0
    record("base", base)

    aligned = copy.deepcopy(base)
    t0 = time.perf_counter()
    dcfg = DPOConfig(
        steps=cfg.dpo_steps, lr=cfg.dpo_lr, beta=cfg.beta, batch_size=cfg.batch_size,
        seed=cfg.seed * 1000 + 2,
    )  # fmt: skip
    trace = dpo_align(aligned, splits["align"], dcfg, None, progress)
    res.seconds["dpo"] = time.perf_counter() - t0
    res.dpo = {"steps": trace.steps, "first": trace.history[:1], "last": trace.history[-1:]}
    record("aligned", aligned)

    zv, mv, yv = predict(aligned, splits["val"], 64)
    ts = TemperatureScaler().fit(zv, yv, mv)
    res.selected["temperature"] = ts.temperature_
    record("ts", aligned, ts.transform)

    jobs = [
        ("cft", tcfg(cfg.cft_epochs, cfg.lr, "ece_within_acc", 10), None),
        ("long_sft", tcfg(cfg.long_epochs, cfg.lr, "last", 11), None),
        ("rcft", tcfg(cfg.long_epochs, cfg.lr, "last", 12), EMECERegularizer(cfg.n_bins, cfg.lam)),
    ]
    for name, train_cfg, reg in jobs:
        scorer = copy.deepcopy(aligned)
        with torch.random.fork_rng(devices=[]):  # LoRA's initialisation draws from the global RNG
            torch.manual_seed(train_cfg.seed)
            scorer.model = apply_lora(scorer.model, r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=0.0)
        t0 = time.perf_counter()
        fit = train(scorer, splits["train"], train_cfg, reg, splits["val"], progress)
        res.seconds[name] = time.perf_counter() - t0
        res.selected[f"{name}_epoch"] = fit.selected_epoch
        record(name, scorer)
    return res
