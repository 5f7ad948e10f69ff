"""The language-model QAT protocol: a small character-level transformer
(:class:`~parq_optim.models.CharTransformer`) trained with AdamW, full precision or QAT through
:class:`~parq_optim.QuantOptimizer` (PARQ, STE or BinaryRelax as the prox map), on a
:class:`~parq_optim.text.CharCorpus`.

Quantized: every ``nn.Linear`` weight inside the transformer blocks (attention ``qkv``/``proj``,
MLP ``fc``/``out``); full precision: token and position embeddings, LayerNorms, biases and the
output head (the usual choice for LM QAT; they are a small share of the weights here).
Learning rate: linear warm-up over ``lr_warmup`` steps, then cosine to 0. The anneal window of PARQ
and BinaryRelax is ``[warmup_steps, anneal_end_frac * steps)`` optimizer steps."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from ._contract import ConfigError, check_config, param
from .config import MAX_BITS, OPTIMIZER_NAMES, QUANTIZER_NAMES
from .models import CharTransformer
from .optim import QuantOptimizer, make_prox, make_quantizer, quant_param_groups
from .text import CharCorpus, eval_windows, random_windows

__all__ = [
    "LM_METHODS",
    "LMConfig",
    "LMConfigError",
    "build_lm",
    "evaluate_lm",
    "lm_quant_groups",
    "load_lm_checkpoint",
    "save_lm_checkpoint",
    "storage_report",
    "train_lm",
]

LM_METHODS = ("fp", "parq", "ste", "binaryrelax")


class LMConfigError(ConfigError):
    """An :class:`LMConfig` value that cannot be used; ``field`` names it."""


_MAX = 10**9


@dataclass
class LMConfig:
    """Hyper-parameters of one character-LM run (defaults: the package's benchmark protocol).
    Building it checks nothing; :meth:`validate` checks every field (:class:`LMConfigError`)."""

    method: str = param("parq", "prox map: fp, parq, ste or binaryrelax", choices=LM_METHODS)
    bits: int = param(2, "bits per quantized weight, 0 = ternary", low=0, high=MAX_BITS)
    quantizer: str = param("lsbq", "level-set estimator", choices=QUANTIZER_NAMES)
    per_channel: bool = param(False, "one level set per output channel (row)")
    block_size: int | None = param(
        None, "one level set per block of this many weights per row", low=1, high=65536, none="off"
    )
    optimizer: str = param("adamw", "base optimizer", choices=OPTIMIZER_NAMES)
    d_model: int = param(64, "transformer width", low=1, high=65536)
    n_layers: int = param(2, "transformer blocks", low=1, high=1024)
    n_heads: int = param(4, "attention heads, a divisor of d_model", low=1, high=1024)
    context: int = param(64, "characters per training window", low=1, high=65536)
    batch_size: int = param(32, "windows per mini-batch", low=1, high=_MAX)
    steps: int = param(1000, "optimizer steps", low=1, high=10**7)
    lr: float = param(3e-3, "peak learning rate", low=0, low_open=True, high=1e6)
    lr_warmup: int = param(50, "linear learning-rate warm-up steps", low=0, high=_MAX)
    weight_decay: float = param(0.01, "weight decay of the quantized weights", low=0, high=100)
    grad_clip: float = param(1.0, "gradient-norm clip (0 = off)", low=0, high=1e6)
    warmup_steps: int = param(0, "full-precision steps before QAT starts", low=0, high=_MAX)
    quant_period: int = param(
        10, "recompute the level sets every this many QAT steps", low=1, high=_MAX
    )
    steepness: float = param(
        10.0, "steepness s of PARQ's inverse-slope schedule", low=0, low_open=True, high=1e6
    )
    anneal_end_frac: float = param(
        0.9, "the anneal window ends at this fraction of all steps", low=0, low_open=True, high=1
    )
    eval_every: int = param(100, "validation-subset loss every this many steps", low=1, high=_MAX)
    eval_windows: int = param(64, "windows of the validation subset", low=1, high=_MAX)
    seed: int = param(0, "random seed", low=0, high=2**31 - 1)
    device: str = param("cpu", "torch device", flag=False)

    def validate(self) -> None:
        """Raise :class:`LMConfigError` for the first field that cannot be used."""
        try:
            check_config(self)
        except ConfigError as e:
            raise LMConfigError(e.field, str(e)) from None
        if self.d_model % self.n_heads:
            raise LMConfigError(
                "n_heads",
                f"n_heads must be a divisor of d_model {self.d_model}, got {self.n_heads}",
            )
        if self.block_size is not None:
            if not self.per_channel:
                raise LMConfigError(
                    "block_size", "block_size must be used with per_channel=True (--per-channel)"
                )
            if self.d_model % self.block_size:
                raise LMConfigError(
                    "block_size",
                    f"block_size must be a divisor of d_model {self.d_model} (the input width of "
                    f"every quantized layer), got {self.block_size}",
                )
        if self.method != "fp":
            try:
                make_quantizer(self.quantizer).check_bits(self.bits)
            except (ValueError, NotImplementedError) as e:
                raise LMConfigError("bits", f"quantizer {self.quantizer!r}: {e}") from e

    def check_corpus(self, corpus: CharCorpus) -> None:
        """Raise :class:`LMConfigError` when a split is too short for the context."""
        for split in ("train", "val", "test"):
            n = len(corpus.split(split))
            if n <= self.context:
                raise LMConfigError(
                    "context",
                    f"the {split} split of {corpus.name or 'the text'} holds {n} characters, "
                    f"too few for context {self.context}",
                )


def lm_quant_groups(model: CharTransformer, bits: int | None) -> list[dict[str, Any]]:
    """Parameter groups: the block ``nn.Linear`` weights with ``quant_bits`` (none when ``bits``
    is None), everything else full precision without weight decay."""
    groups = quant_param_groups(model, 0 if bits is None else bits, exclude=_not_in_blocks)
    if bits is None:
        for g in groups:
            g.pop("quant_bits", None)
    return groups


def _not_in_blocks(name: str, module: nn.Module) -> bool:
    return not name.startswith("blocks.")


def build_lm(
    cfg: LMConfig, vocab_size: int
) -> tuple[CharTransformer, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """Model, optimizer (AdamW with betas (0.9, 0.95), or SGD with momentum 0.9;
    ``QuantOptimizer`` around it unless ``method == 'fp'``) and the warm-up + cosine LR
    schedule."""
    torch.manual_seed(cfg.seed)
    model = CharTransformer(vocab_size, cfg.context, cfg.d_model, cfg.n_layers, cfg.n_heads)
    model.to(cfg.device)
    groups = lm_quant_groups(model, None if cfg.method == "fp" else cfg.bits)
    if cfg.block_size is not None and cfg.method != "fp":
        groups[0]["quant_block_size"] = cfg.block_size
    base: torch.optim.Optimizer
    if cfg.optimizer == "adamw":
        base = torch.optim.AdamW(
            groups, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
        )
    else:
        base = torch.optim.SGD(groups, lr=cfg.lr, momentum=0.9, weight_decay=cfg.weight_decay)
    opt: torch.optim.Optimizer = base
    if cfg.method != "fp":
        end = max(cfg.warmup_steps + 1, int(cfg.anneal_end_frac * cfg.steps))
        opt = QuantOptimizer(
            base,
            make_quantizer(cfg.quantizer),
            make_prox(cfg.method, cfg.warmup_steps, end, cfg.steepness),
            warmup_steps=cfg.warmup_steps,
            quant_period=cfg.quant_period,
            quant_per_channel=cfg.per_channel,
        )

    def factor(step: int) -> float:
        if step < cfg.lr_warmup:
            return (step + 1) / cfg.lr_warmup
        frac = (step - cfg.lr_warmup) / max(1, cfg.steps - cfg.lr_warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    return model, opt, sched


@torch.no_grad()
def evaluate_lm(
    model: nn.Module,
    ids: torch.Tensor,
    context: int,
    max_windows: int | None = None,
    batch_size: int = 64,
) -> float:
    """Mean next-character cross-entropy (nats) over non-overlapping windows of ``ids``."""
    was_training = model.training
    model.eval()
    x, y = eval_windows(ids, context, max_windows)
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for k in range(0, len(x), batch_size):
        xb, yb = x[k : k + batch_size].to(device), y[k : k + batch_size].to(device)
        logits = model(xb)
        total += F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="sum").item()
        count += yb.numel()
    model.train(was_training)
    return total / count


def storage_report(model: nn.Module, opt: QuantOptimizer) -> dict[str, float]:
    """Bits of the exported model (as :func:`~parq_optim.save_quantized` writes it, without
    writing): per quantized weight ``ceil(log2 |Q|)`` code bits plus 32-bit level tables; every
    other parameter at 32 bits."""
    from .export import _bits_per_code

    entries = opt.export_quantized(model)
    code_bits = sum(
        e["codes"].numel() * _bits_per_code(e["levels"].size(-1)) for e in entries.values()
    )
    level_bits = 32 * sum(e["levels"].numel() for e in entries.values())
    n_quant = sum(e["codes"].numel() for e in entries.values())
    n_all = sum(p.numel() for p in model.parameters())
    return {
        "quantized_params": n_quant,
        "fp_params": n_all - n_quant,
        "bits_per_weight": (code_bits + level_bits) / n_quant,
        "bits_per_param_overall": (code_bits + level_bits + 32 * (n_all - n_quant)) / n_all,
    }


def train_lm(
    cfg: LMConfig,
    corpus: CharCorpus,
    quiet: bool = True,
    desc: str | None = None,
    progress: Callable[[int], object] | None = None,
) -> dict[str, Any]:
    """Train one character LM (``progress(1)`` after each optimizer step); returns the final
    validation and test loss (nats/char, on the weights as exported: hard-quantized when QAT),
    the loss curve, storage and step times.

    Raises :class:`LMConfigError` for a config that does not fit ``corpus`` and
    :class:`~parq_optim.train.Diverged` on a non-finite loss."""
    from .train import Diverged, finish_quantization

    cfg.validate()
    cfg.check_corpus(corpus)
    model, opt, sched = build_lm(cfg, corpus.vocab_size)
    g = torch.Generator().manual_seed(cfg.seed)
    history: list[dict[str, Any]] = []
    step_times: list[float] = []
    opt_times: list[float] = []
    running, seen = 0.0, 0
    t0 = time.perf_counter()
    bar = tqdm(range(cfg.steps), disable=quiet, desc=desc or f"charlm {cfg.method} b={cfg.bits}")
    for step in bar:
        x, y = random_windows(corpus.train, cfg.context, cfg.batch_size, g)
        x, y = x.to(cfg.device), y.to(cfg.device)
        ts = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        value = loss.item()
        if not math.isfinite(value):
            raise Diverged(
                f"training diverged: loss {value} at step {step + 1} (lr {cfg.lr:g})",
                0,
                step + 1,
                history,
            )
        loss.backward()
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        to = time.perf_counter()
        opt.step()
        te = time.perf_counter()
        sched.step()
        step_times.append(te - ts)
        opt_times.append(te - to)
        running += value
        seen += 1
        if progress is not None:
            progress(1)
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            val = evaluate_lm(model, corpus.val, cfg.context, cfg.eval_windows)
            history.append(
                {
                    "step": step + 1,
                    "train_loss": running / seen,
                    "val_loss_subset": val,
                    "inv_slope": getattr(opt, "inv_slope", None),
                }
            )
            bar.set_postfix(train=f"{running / seen:.3f}", val=f"{val:.3f}")
            running, seen = 0.0, 0
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {"config": asdict(cfg), "wall_time_s": wall}
    if isinstance(opt, QuantOptimizer):
        out["quantized_fraction_end"] = finish_quantization(opt)
        out["storage"] = storage_report(model, opt)
    out["val_loss"] = evaluate_lm(model, corpus.val, cfg.context)
    out["test_loss"] = evaluate_lm(model, corpus.test, cfg.context)
    if not (math.isfinite(out["val_loss"]) and math.isfinite(out["test_loss"])):
        raise Diverged("training diverged: non-finite evaluation loss", 0, cfg.steps, history)
    out["step_time_median_s"] = sorted(step_times)[len(step_times) // 2]
    out["opt_step_time_median_s"] = sorted(opt_times)[len(opt_times) // 2]
    out["history"] = history
    out["model"] = model
    out["optimizer"] = opt
    return out


# ---- checkpoints ------------------------------------------------------------------------------
LM_CHECKPOINT_FORMAT = "parq-optim-lm-checkpoint/1"


def save_lm_checkpoint(
    path: str | os.PathLike,
    cfg: LMConfig,
    corpus: CharCorpus,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
) -> Path:
    """Write config, vocabulary, model (``w``) and optimizer state (``u``, ``Q``) atomically;
    refuses non-finite tensors (``ValueError``)."""
    from .train import _atomic_save, check_finite_state

    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    check_finite_state(state)
    blob = {
        "format": LM_CHECKPOINT_FORMAT,
        "config": asdict(cfg),
        "data": {"name": corpus.name, "vocab": corpus.vocab},
        **state,
    }
    return _atomic_save(blob, Path(path))


def load_lm_checkpoint(
    path: str | os.PathLike,
) -> tuple[LMConfig, str, CharTransformer, torch.optim.Optimizer]:
    """Read a checkpoint of :func:`save_lm_checkpoint`: config, vocabulary, and the model and
    optimizer rebuilt on CPU with the saved state (``ValueError`` naming the file otherwise)."""
    from .train import nonfinite_tensor, restore_config

    path = Path(path)
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != LM_CHECKPOINT_FORMAT:
        raise ValueError(f"{path.name} is not a parq-optim char-LM checkpoint")
    cfg: LMConfig = restore_config(LMConfig, blob.get("config"), path.name, LMConfigError)
    where = nonfinite_tensor({"model": blob["model"], "optimizer": blob["optimizer"]})
    if where is not None:
        raise ValueError(f"{path.name}: {where} holds NaN or inf")
    vocab = blob.get("data", {}).get("vocab")
    if not isinstance(vocab, str) or not vocab:
        raise ValueError(f"{path.name}: the checkpoint holds no vocabulary")
    model, opt, _ = build_lm(cfg, len(vocab))
    model.load_state_dict(blob["model"])
    opt.load_state_dict(blob["optimizer"])
    return cfg, vocab, model, opt
