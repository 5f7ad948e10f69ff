"""Training: CFT (SFT with checkpoint selection), RCFT (SFT + EM-ECE regulariser, the paper's Alg. 1),
label smoothing / long SFT baselines, and the DPO alignment simulation that makes a model overconfident.

All loops work on any scorer of :mod:`cft_calibration.scoring` and use a private random generator for
shuffling plus ``torch.random.fork_rng`` for dropout, so a seed gives the same run without touching the
caller's global RNG state.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from .config import AlignConfig, TrainConfig
from .metrics import accuracy, conf_ece, evaluate_probs, nll
from .regularizer import EMECERegularizer
from .scoring import predict

__all__ = [
    "AlignConfig",
    "TrainConfig",
    "TrainResult",
    "apply_lora",
    "distributed",
    "dpo_option_loss",
    "e_step",
    "evaluate_scorer",
    "official_regularizer",
    "option_ce",
    "simulate_alignment",
    "train",
    "train_cft",
    "train_rcft",
]


@dataclass
class TrainResult:
    """Per-epoch history, the selected epoch (1-based; 0 = the starting weights) and the E-step tables."""

    history: list[dict[str, Any]] = field(default_factory=list)
    selected_epoch: int = 0
    e_steps: list[list[dict[str, float]]] = field(default_factory=list)


def option_ce(logits: Tensor, labels: Tensor, mask: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of the restricted softmax over the valid options, with label smoothing spread over
    the valid options only (absent options get no mass)."""
    logp = torch.log_softmax(logits, -1)
    nll = -logp.gather(1, labels[:, None]).squeeze(1)
    if label_smoothing == 0:
        return nll.mean()
    smooth = -(logp.masked_fill(~mask, 0.0).sum(1) / mask.sum(1))
    return ((1 - label_smoothing) * nll + label_smoothing * smooth).mean()


def _probs(logits: Tensor) -> Tensor:
    return torch.softmax(logits, -1)  # absent options: -inf -> probability 0


def evaluate_scorer(
    scorer: Any, data: Any, batch_size: int = 256, n_bins: int = 10, full: bool = True
) -> dict[str, float]:
    """Every metric of :func:`~cft_calibration.metrics.evaluate_probs` for a scorer on a data set
    (``full=False``: accuracy, conf-ECE and NLL only, for per-epoch validation)."""
    logits, mask, labels = predict(scorer, data, batch_size)
    probs = _probs(logits)
    if full:
        return evaluate_probs(probs, labels, mask=mask, n_bins=n_bins)
    return {
        "accuracy": accuracy(probs, labels, mask=mask),
        "conf_ece": conf_ece(probs, labels, n_bins, mask=mask),
        "nll": nll(probs, labels, mask=mask),
    }


def e_step(
    scorer: Any,
    data: Any,
    regularizer: EMECERegularizer,
    batch_size: int = 256,
    max_items: int | None = None,
    generator: torch.Generator | None = None,
) -> EMECERegularizer:
    """Run the E-step of ``regularizer`` with the scorer's current predictions on ``data`` (or a
    fixed-size random subsample of ``max_items``; the paper's protocol needs >= 2,000)."""
    n = scorer.n_items(data)
    if max_items is not None and max_items < n:
        idx = torch.randperm(n, generator=generator)[:max_items].tolist()
        data = data.subset(idx) if hasattr(data, "subset") else [data[i] for i in idx]
    logits, mask, labels = predict(scorer, data, batch_size)
    return regularizer.e_step(_probs(logits), labels, mask)


def _schedule(
    opt: torch.optim.Optimizer, total: int, warmup: float
) -> torch.optim.lr_scheduler.LambdaLR:
    warm = round(warmup * total)

    def factor(step: int) -> float:
        if warm > 0 and step < warm:
            return (step + 1) / warm
        progress = (step - warm) / max(1, total - warm)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def _select(history: list[dict[str, Any]], rule: str, acc_tol: float) -> int:
    rows = [h for h in history if "val" in h]
    if rule == "last" or not rows:
        return history[-1]["epoch"] if history else 0
    if rule == "acc":
        return max(rows, key=lambda h: (h["val"]["accuracy"], -h["epoch"]))["epoch"]
    best_acc = max(h["val"]["accuracy"] for h in rows)
    ok = [h for h in rows if h["val"]["accuracy"] >= best_acc - acc_tol]
    return min(ok, key=lambda h: (h["val"]["conf_ece"], h["epoch"]))["epoch"]


def train(
    scorer: Any,
    train_data: Any,
    cfg: TrainConfig,
    regularizer: EMECERegularizer | None = None,
    val_data: Any = None,
    progress: Callable[[int, str], Any] | None = None,
    params: list[nn.Parameter] | None = None,
    e_step_data: Any = None,
) -> TrainResult:
    """Fine-tune ``scorer`` in place: L = L_SFT + lambda R (or the official combination), AdamW, linear
    warmup then cosine decay, one forward per batch. Selects the epoch by ``cfg.select`` on
    ``val_data`` (validation only) and loads its weights at the end.

    ``progress(total_steps, desc)`` may return a tqdm-like bar; ``params`` restricts the trainable
    parameters (default: every parameter with ``requires_grad``). ``e_step_data``: the questions
    the regulariser's E-step scores (default ``train_data``, the paper's; a held-out split makes
    the per-bin accuracies those of unseen questions, a deviation).
    """
    n = scorer.n_items(train_data)
    if n == 0:
        raise ValueError("train_data is empty")
    params = params if params is not None else [p for p in scorer.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the scorer has no trainable parameters")
    if cfg.sft_loss == "full_vocab" and not hasattr(scorer, "letter_ids"):
        raise ValueError("sft_loss='full_vocab' needs a causal-LM LetterScorer; use 'options'")
    if e_step_data is not None and scorer.n_items(e_step_data) == 0:
        raise ValueError("e_step_data is empty; pass None to run the E-step on train_data")
    if cfg.select != "last" and val_data is None:
        raise ValueError(f"select={cfg.select!r} needs val_data")
    gen = torch.Generator().manual_seed(cfg.seed)
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = _schedule(opt, total, cfg.warmup)
    result = TrainResult()
    states: dict[int, dict[str, Tensor]] = {}
    dist = distributed()
    bar = progress(total, "train") if progress is not None else None

    def snapshot() -> dict[str, Tensor]:
        return {k: v.detach().clone() for k, v in scorer.state_dict().items()}

    if cfg.select != "last":
        start = {
            "epoch": 0,
            "val": evaluate_scorer(scorer, val_data, cfg.eval_batch_size, cfg.n_bins, full=False),
        }
        result.history.append(start)
        states[0] = snapshot()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        for epoch in range(1, cfg.epochs + 1):
            if regularizer is not None:
                first = epoch == 1
                again = (
                    cfg.e_step_every is not None
                    and epoch > 1
                    and (epoch - 1) % cfg.e_step_every == 0
                )
                if first or again:
                    e_step(
                        scorer,
                        train_data if e_step_data is None else e_step_data,
                        regularizer,
                        cfg.eval_batch_size,
                        cfg.e_step_max_items,
                        gen,
                    )
                    result.e_steps.append(regularizer.bin_table())
            scorer.train()
            order = torch.randperm(n, generator=gen).tolist()
            sums = {"loss": 0.0, "sft": 0.0, "reg": 0.0}
            for s in range(steps_per_epoch):
                idx = order[s * cfg.batch_size : (s + 1) * cfg.batch_size]
                opt.zero_grad(set_to_none=True)
                if dist is None:
                    loss, sft, reg = _batch_loss(scorer, train_data, idx, cfg, regularizer)
                    if not torch.isfinite(loss):
                        raise FloatingPointError(f"non-finite loss at epoch {epoch}, step {s + 1}")
                    loss.backward()
                else:
                    loss, sft, reg = _ddp_backward(
                        dist, scorer, train_data, idx, cfg, regularizer, params
                    )
                    if not torch.isfinite(loss):
                        raise FloatingPointError(f"non-finite loss at epoch {epoch}, step {s + 1}")
                if cfg.grad_clip is not None:
                    torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                opt.step()
                sched.step()
                sums["loss"] += float(loss.detach())
                sums["sft"] += float(sft.detach())
                sums["reg"] += float(reg.detach())
                if bar is not None:
                    bar.update(1)
            row: dict[str, Any] = {
                "epoch": epoch,
                **{k: v / steps_per_epoch for k, v in sums.items()},
            }
            if val_data is not None:
                row["val"] = evaluate_scorer(
                    scorer, val_data, cfg.eval_batch_size, cfg.n_bins, full=False
                )
                if cfg.select != "last":
                    states[epoch] = snapshot()
            result.history.append(row)
    if bar is not None:
        bar.close()
    result.selected_epoch = _select(result.history, cfg.select, cfg.acc_tol)
    if cfg.select != "last":
        scorer.load_state_dict(states[result.selected_epoch])
    if not all(bool(torch.isfinite(p).all()) for p in params):
        raise FloatingPointError(f"non-finite weights after epoch {result.selected_epoch}")
    scorer.eval()
    return result


def distributed() -> Any:
    """``torch.distributed`` when a process group of more than one process is initialised (a run under
    ``torchrun`` / Accelerate / ``torch.multiprocessing``), else ``None``."""
    import torch.distributed as td

    if td.is_available() and td.is_initialized() and td.get_world_size() > 1:
        return td
    return None


def _batch_loss(
    scorer: Any, data: Any, idx: list[int], cfg: TrainConfig, regularizer: EMECERegularizer | None
) -> tuple[Tensor, Tensor, Tensor]:
    """(total loss, SFT term, regulariser term) of one minibatch; every term is a mean over items."""
    with_answer = cfg.sft_loss == "full_vocab"
    out = scorer(scorer.batch(data, idx, with_answer=with_answer))
    if with_answer:
        assert out.lm_loss is not None
        sft = out.lm_loss
    else:
        sft = option_ce(out.logits, out.labels, out.mask, cfg.label_smoothing)
    reg = torch.zeros((), device=sft.device)
    if regularizer is not None:
        reg = regularizer(_probs(out.logits), out.mask)
    if cfg.official:
        loss = (1 - cfg.alpha) * sft + cfg.alpha * 1e-3 * reg
    else:
        lam = regularizer.lam if regularizer is not None else 0.0
        loss = sft + lam * reg
    return loss, sft, reg


def _ddp_backward(
    dist: Any,
    scorer: Any,
    data: Any,
    idx: list[int],
    cfg: TrainConfig,
    regularizer: EMECERegularizer | None,
    params: list[nn.Parameter],
) -> tuple[Tensor, Tensor, Tensor]:
    """Data-parallel backward of one global minibatch: rank r takes ``idx[r::world]``, its mean loss is
    weighted by its share n_r / n of the batch and the gradients are summed over ranks (one
    all-reduce), so every rank holds the gradient of the mean loss over the whole batch — what one
    process computes on it (exact for per-item-mean losses; the official per-bin-sum regulariser
    weighting is averaged per rank, as HF Trainer's DDP does). Returns the global loss terms."""
    rank, world = dist.get_rank(), dist.get_world_size()
    local = idx[rank::world]
    dev = params[0].device
    terms = torch.zeros(3, dtype=torch.float64, device=dev)
    if local:
        w = len(local) / len(idx)
        loss, sft, reg = _batch_loss(scorer, data, local, cfg, regularizer)
        (loss * w).backward()
        terms += torch.stack([loss.detach(), sft.detach(), reg.detach()]).double() * w
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    dist.all_reduce(terms)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).to(p.dtype).clone()
        offset += n
    return terms[0], terms[1], terms[2]


def train_cft(
    scorer: Any, train_data: Any, val_data: Any, cfg: TrainConfig | None = None, **kw: Any
) -> TrainResult:
    """CFT: supervised fine-tuning on in-domain MCQA (answer-only target), no calibration term; the
    epoch with the best validation conf-ECE among those within ``acc_tol`` of the best validation
    accuracy is kept (our stopping rule; the paper's is not stated)."""
    cfg = cfg or TrainConfig(epochs=3, select="ece_within_acc")
    return train(scorer, train_data, cfg, None, val_data, **kw)


def train_rcft(
    scorer: Any,
    train_data: Any,
    cfg: TrainConfig | None = None,
    regularizer: EMECERegularizer | None = None,
    val_data: Any = None,
    **kw: Any,
) -> TrainResult:
    """RCFT: L_SFT + lambda R with the EM-ECE regulariser, E-step every ``cfg.e_step_every`` epochs
    (on ``train_data``, or on ``e_step_data=`` passed through ``kw`` to :func:`train`)."""
    cfg = cfg or TrainConfig(epochs=10)
    return train(scorer, train_data, cfg, regularizer or EMECERegularizer(), val_data, **kw)


def official_regularizer(n_bins: int = 10) -> EMECERegularizer:
    """The official code's regulariser: per-bin 1/n_m weighting, targets not detached, top bin skipped
    (pair with ``TrainConfig(official=True, e_step_every=None)``)."""
    return EMECERegularizer(
        n_bins=n_bins, weighting="official", detach_targets=False, skip_top_bin=True
    )


# ------------------------------------------------------------------------------ DPO simulation


def dpo_option_loss(
    logp_w: Tensor, logp_l: Tensor, ref_w: Tensor, ref_l: Tensor, beta: float = 0.1
) -> Tensor:
    """-log sigmoid(beta [(l_theta(y_w) - l_ref(y_w)) - (l_theta(y_l) - l_ref(y_l))]), averaged."""
    margin = (logp_w - ref_w) - (logp_l - ref_l)
    return -nn.functional.logsigmoid(beta * margin).mean()


def simulate_alignment(
    scorer: Any,
    data: Any,
    cfg: AlignConfig | None = None,
    progress: Callable[[int, str], Any] | None = None,
) -> list[dict[str, float]]:
    """Make ``scorer`` overconfident in place by DPO on option preferences; the reference is the frozen
    starting model (its option log-probabilities on ``data`` are computed once)."""
    cfg = cfg or AlignConfig()
    n = scorer.n_items(data)
    gen = torch.Generator().manual_seed(cfg.seed)
    ref_lp = []
    was = scorer.training
    scorer.eval()
    with torch.no_grad():
        for start in range(0, n, 256):
            out = scorer(scorer.batch(data, list(range(start, min(n, start + 256)))))
            ref_lp.append(out.option_logprobs.float().cpu())
    scorer.train(was)
    k = max(r.shape[1] for r in ref_lp)
    ref = torch.cat(
        [nn.functional.pad(r, (0, k - r.shape[1]), value=float("-inf")) for r in ref_lp]
    )
    params = [p for p in scorer.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    history = []
    bar = progress(cfg.steps, "align (DPO)") if progress is not None else None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        scorer.train()
        for step in range(cfg.steps):
            idx = torch.randint(0, n, (min(cfg.batch_size, n),), generator=gen)
            out = scorer(scorer.batch(data, idx.tolist()))
            lp = out.option_logprobs
            mask = out.mask.cpu()
            b = lp.shape[0]
            with torch.no_grad():
                if cfg.pref == "self":
                    y_w = out.logits.detach().argmax(1).cpu()
                else:
                    gold = out.labels.cpu()
                    y_w = gold.clone()
                    flip = torch.rand(b, generator=gen) >= cfg.gold_prob
                    y_w[flip] = _random_other(gold[flip], mask[flip], gen)
                y_l = _random_other(y_w, mask, gen)
            dev = lp.device
            r = ref[idx]
            rows = torch.arange(b)
            loss = dpo_option_loss(
                lp[rows.to(dev), y_w.to(dev)],
                lp[rows.to(dev), y_l.to(dev)],
                r[rows, y_w].to(dev),
                r[rows, y_l].to(dev),
                cfg.beta,
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            history.append({"step": step + 1, "loss": float(loss.detach())})
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    scorer.eval()
    return history


def _random_other(chosen: Tensor, mask: Tensor, gen: torch.Generator) -> Tensor:
    """A uniformly random valid option different from ``chosen`` in each row."""
    weights = mask.float().clone()
    weights[torch.arange(chosen.shape[0]), chosen] = 0.0
    if (weights.sum(1) == 0).any():
        raise ValueError("an item has a single valid option; preference pairs need two")
    return torch.multinomial(weights, 1, generator=gen).squeeze(1)


# ---------------------------------------------------------------------------------------- LoRA


def apply_lora(
    model: nn.Module,
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.05,
    target_modules: str | list[str] = "all-linear",
    task_type: str | None = None,
) -> nn.Module:
    """Wrap an HF model with LoRA adapters (peft; ``pip install 'cft-calibration[lora]'``).

    The official code uses r = 128, alpha = 64, dropout 0.05 on all linear layers; the default here is
    smaller for CPU runs. Only the adapter parameters stay trainable (and, for multiple-choice models,
    the new classifier head, kept through peft's ``modules_to_save``).
    """
    try:
        import peft
    except ImportError as exc:
        raise ImportError("LoRA needs peft: pip install 'cft-calibration[lora]'") from exc
    kwargs: dict[str, Any] = {
        "r": r,
        "lora_alpha": alpha,
        "lora_dropout": dropout,
        "target_modules": target_modules,
    }
    if task_type is not None:
        kwargs["task_type"] = task_type
    heads = [n for n in ("classifier", "score") if isinstance(getattr(model, n, None), nn.Module)]
    if heads and not hasattr(model, "lm_head"):
        kwargs["modules_to_save"] = heads  # a new multiple-choice head must train too
    config = peft.LoraConfig(**kwargs)
    return peft.get_peft_model(model, config)


def config_dict(cfg: Any) -> dict[str, Any]:
    """A dataclass config as a plain dict (for results files)."""
    return asdict(cfg)


def clone_scorer(scorer: Any) -> Any:
    """A deep copy of a scorer (independent weights)."""
    return copy.deepcopy(scorer)
