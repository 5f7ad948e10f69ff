"""Direct preference optimisation (DPO; Rafailov et al., 2023) on multiple-choice option preferences:
the alignment step that makes a model overconfident before CFT/RCFT (the paper's models are
DPO-aligned).

For a question x with chosen option y_w (the gold one) and rejected option y_l (a wrong one), with
l(y) the model's log-probability of option y (for a causal LM the full-vocabulary log-probability of
the option letter after the answer cue; for a multiple-choice or feature scorer the log-softmax over
the options) and a frozen reference model ref:

    L_DPO = -log sigmoid(beta [(l_theta(y_w) - l_ref(y_w)) - (l_theta(y_l) - l_ref(y_l))])

averaged over the pairs of a minibatch (``rejected="all"``: every wrong valid option of each
question, K - 1 pairs; ``"random"``: one drawn uniformly). The loss has no lower bound on the
log-ratios, so training it long drives the chosen-vs-rejected margin up without limit: on data where
the gold answer is not always predictable this is overconfidence. Works on every scorer of
:mod:`cft_calibration.scoring` (LoRA-wrapped models included).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from .config import DPOConfig

__all__ = ["DPOConfig", "DPOResult", "dpo_align", "dpo_preference_loss", "preference_pairs"]


@dataclass
class DPOResult:
    """Per-step loss, mean margin beta * (chosen log-ratio - rejected log-ratio) and the share of pairs
    whose margin is positive ("reward accuracy")."""

    history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    pairs_per_step: float = 0.0


def preference_pairs(
    labels: Tensor, mask: Tensor, rejected: str = "all", generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """``(row, chosen, rejected)`` index tensors of the preference pairs of a batch: chosen = the gold
    option; rejected = every other valid option (``"all"``) or one uniformly random one (``"random"``)."""
    labels, mask = labels.cpu(), mask.cpu().bool()
    wrong = mask.clone()
    wrong[torch.arange(labels.shape[0]), labels] = False
    if not wrong.any(1).all():
        raise ValueError("a question has a single valid option; preference pairs need two")
    if rejected == "all":
        rows, rej = wrong.nonzero(as_tuple=True)
    elif rejected == "random":
        rows = torch.arange(labels.shape[0])
        rej = torch.multinomial(wrong.float(), 1, generator=generator).squeeze(1)
    else:
        raise ValueError(f"rejected must be 'all' or 'random', got {rejected!r}")
    return rows, labels[rows], rej


def dpo_preference_loss(
    logp: Tensor,
    ref_logp: Tensor,
    labels: Tensor,
    mask: Tensor,
    beta: float = 0.1,
    rejected: str = "all",
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """The DPO loss of one batch and the per-pair margins beta * [(l_theta(y_w) - l_ref(y_w)) -
    (l_theta(y_l) - l_ref(y_l))]. ``logp``/``ref_logp`` [B, K]: option log-probabilities of the policy
    and the reference; ``labels`` [B] the gold (chosen) options; ``mask`` [B, K] the valid options."""
    if logp.shape != ref_logp.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp, ref_logp and mask must share a shape, got {tuple(logp.shape)}, "
            f"{tuple(ref_logp.shape)}, {tuple(mask.shape)}"
        )
    rows, w, lo = preference_pairs(labels, mask, rejected, generator)
    dev = logp.device
    rows, w, lo = rows.to(dev), w.to(dev), lo.to(dev)
    ratio = logp - ref_logp.to(dev).detach()
    margin = beta * (ratio[rows, w] - ratio[rows, lo])
    return -nn.functional.logsigmoid(margin).mean(), margin.detach()


def _frozen_copy(scorer: Any) -> Any:
    ref = copy.deepcopy(scorer)
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref.eval()


def dpo_align(
    scorer: Any,
    data: Any,
    cfg: DPOConfig | None = None,
    reference: Any = None,
    progress: Callable[[int, str], Any] | None = None,
) -> DPOResult:
    """DPO of ``scorer`` in place on ``data`` (gold preferred over the wrong options), against
    ``reference`` (default: a frozen copy of ``scorer`` as it is now, run in eval mode). ``cfg.steps``
    minibatches of ``cfg.batch_size`` questions, drawn without replacement within each pass; AdamW at
    a constant ``cfg.lr``. The caller's global RNG is left untouched."""
    cfg = cfg or DPOConfig()
    n = scorer.n_items(data)
    if n == 0:
        raise ValueError("dpo_align: data is empty")
    params = [p for p in scorer.parameters() if p.requires_grad]
    if not params:
        raise ValueError("dpo_align: the scorer has no trainable parameters")
    ref = reference if reference is not None else _frozen_copy(scorer)
    ref.eval()
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    result = DPOResult()
    bar = progress(cfg.steps, "align (DPO)") if progress is not None else None
    dropouts = [m for m in scorer.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
    saved = [m.p for m in dropouts]
    if cfg.disable_dropout:
        for m in dropouts:
            m.p = 0.0
    try:
        _steps(scorer, ref, data, cfg, opt, params, gen, result, bar, n)
    finally:
        for m, p in zip(dropouts, saved):
            m.p = p
    if bar is not None:
        bar.close()
    scorer.eval()
    if not all(bool(torch.isfinite(p).all()) for p in params):
        raise FloatingPointError("non-finite weights after DPO")
    return result


def _steps(
    scorer: Any, ref: Any, data: Any, cfg: DPOConfig, opt: torch.optim.Optimizer,
    params: list[nn.Parameter], gen: torch.Generator, result: DPOResult, bar: Any, n: int,
) -> None:  # fmt: skip
    bs = min(cfg.batch_size, n)
    order: list[int] = []
    pairs = 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        scorer.train()
        for step in range(cfg.steps):
            if len(order) < bs:
                order += torch.randperm(n, generator=gen).tolist()
            idx, order = order[:bs], order[bs:]
            batch = scorer.batch(data, idx)
            with torch.no_grad():
                ref_out = ref(batch)
            out = scorer(batch)
            loss, margin = dpo_preference_loss(
                out.option_logprobs, ref_out.option_logprobs, out.labels, out.mask, cfg.beta,
                cfg.rejected, gen,
            )  # fmt: skip
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite DPO loss at step {step + 1}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip is not None:
                nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
            pairs += margin.numel()
            result.history.append(
                {
                    "step": step + 1,
                    "loss": float(loss.detach()),
                    "margin": float(margin.mean()),
                    "reward_accuracy": float((margin > 0).double().mean()),
                }
            )
            if bar is not None:
                bar.update(1)
    result.steps = cfg.steps
    result.pairs_per_step = pairs / max(1, cfg.steps)
