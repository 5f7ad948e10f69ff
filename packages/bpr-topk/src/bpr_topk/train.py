"""Full-batch training (App. A.1), model selection (App. C.2) and evaluation (Table C.2 metrics)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor
from tqdm.auto import tqdm

from .data import Split
from .losses import DAMLLoss
from .metrics import bpr, nanmean
from .models import ForecastModel
from .ranking import ratio_rating

Selection = Literal["paper", "code", "tradeoff", "last"]
Rule = Literal["ratio", "mean"]
Monitor = Literal["bpr", "nll"]


@dataclass
class FitResult:
    """Outcome of :func:`fit`.

    Attributes:
        best_state: ``state_dict`` of the selected checkpoint (already loaded into the model).
        best_epoch: epoch of that checkpoint (0 = initialisation).
        history: one dict per validation (epoch, train loss/NLL/BPR, valid NLL/BPR).
        stopped_epoch: the epoch at which early stopping ended training (None: full budget).
        selection: the rule that chose the checkpoint (``paper``, ``code``, ``tradeoff``,
            ``last``, or ``early_stopping:bpr`` / ``early_stopping:nll``).
        budget: the epochs the run was allowed in the end (``epochs``, or more when
            ``max_epochs`` extended it because the chosen checkpoint was the budget's last).
        at_budget_end: the final budget ran out before convergence: the chosen checkpoint is
            its last validation, or (early stopping) patience had not run out.
        states: the ``state_dict`` of every validated checkpoint (in ``history`` order).
    """

    best_state: dict[str, Tensor]
    best_epoch: int
    history: list[dict[str, float]] = field(default_factory=list)
    stopped_epoch: int | None = None
    selection: str = "paper"
    budget: int = 0
    at_budget_end: bool = False
    states: list[dict[str, Tensor]] = field(default_factory=list, repr=False)

    def select(
        self,
        objective: str,
        selection: Selection = "paper",
        reference_bpr: float | None = None,
        lam: float = 30.0,
        nll_weight: float = 1.0,
        reference_nll: float | None = None,
        nll_tolerance: float = 0.01,
    ) -> tuple[int, dict[str, Tensor]]:
        """Another rule's checkpoint of the same run (:func:`select_checkpoint`): its epoch and
        ``state_dict`` (needs ``states``, which :func:`fit` keeps)."""
        if not self.states:
            raise ValueError("this FitResult keeps no checkpoints (states is empty)")
        i = select_checkpoint(
            self.history,
            objective,
            selection,
            reference_bpr,
            lam,
            nll_weight,
            reference_nll,
            nll_tolerance,
        )
        return int(self.history[i]["epoch"]), self.states[i]


@torch.no_grad()
def evaluate_model(
    model: ForecastModel,
    split: Split,
    k: int,
    rule: Rule = "ratio",
    trials: int = 10,
    num_samples: int = 1000,
    denominator_offset: float = 1.0,
) -> dict[str, float]:
    """BPR@K (ratio or mean ranking), NLL per site-time and MAE/RMSE of the forecast mean.

    With ``rule="ratio"`` each of ``trials`` repeats draws a fresh ``num_samples``-sample ratio
    rating (the paper uses 1000 × 1000); BPR mean/std/5 %/95 % over trials are reported.
    """
    if rule not in ("ratio", "mean"):
        raise ValueError(f"rule must be 'ratio' or 'mean'; got {rule!r}")
    y = split.y
    mean = model.mean(split.X, split.time)
    per_trial = []
    if rule == "mean":
        per_trial.append(nanmean(bpr(y, mean, k)))
    else:
        for _ in range(trials):
            samples = model.sample(num_samples, split.X, split.time)
            per_trial.append(nanmean(bpr(y, ratio_rating(samples, denominator_offset), k)))
    values = torch.tensor(per_trial, dtype=torch.float64)
    log_prob = model.log_prob(y, split.X, split.time)
    err = mean - y.to(mean.dtype)
    return {
        "bpr": float(values.mean()),
        "bpr_std": float(values.std()) if len(per_trial) > 1 else 0.0,
        "bpr_q05": float(values.quantile(0.05)),
        "bpr_q95": float(values.quantile(0.95)),
        "nll": float(-log_prob.mean()),
        "nll_sum": float(-log_prob.sum()),
        "mae": float(err.abs().mean()),
        "rmse": float(err.pow(2).mean().sqrt()),
    }


def select_checkpoint(
    history: list[dict[str, float]],
    objective: str,
    selection: Selection = "paper",
    reference_bpr: float | None = None,
    lam: float = 30.0,
    nll_weight: float = 1.0,
    reference_nll: float | None = None,
    nll_tolerance: float = 0.01,
) -> int:
    """Index into ``history`` of the checkpoint to keep (App. C.2).

    ``paper``: NLL objective → best valid NLL; BPR objective → best valid BPR; DAML → best valid
    NLL among checkpoints with valid BPR ≥ ``reference_bpr`` (the ML model's), else max BPR
    (without a reference: best NLL among the max-BPR ties). A DAML run warm-started from the ML
    model starts *at* the reference with the best NLL, so this rule returns epoch 0 unless a
    later checkpoint has a better NLL too. ``code``: minimise ``nll·nll_weight − bpr·lam`` (the
    official code's score; λ counts as 0 for the NLL objective, which has no BPR term).
    ``tradeoff`` (ours): the best valid BPR among checkpoints whose valid NLL is at most
    ``(1 + nll_tolerance)·reference_nll`` (the ML model's valid NLL; default the best valid NLL
    of the run), ties to the lower NLL — a moved checkpoint is chosen when it gains BPR for at
    most 1 % of NLL; for the NLL objective it is the best valid NLL. ``last``: the final checkpoint.
    """
    if not history:
        raise ValueError("history is empty")
    if selection == "last":
        return len(history) - 1
    nll = [h["valid_nll"] if not math.isnan(h["valid_nll"]) else math.inf for h in history]
    bp = [h["valid_bpr"] if not math.isnan(h["valid_bpr"]) else -1.0 for h in history]
    idx = range(len(history))
    if selection == "code":
        # the official score nll·nll_weight − bpr·bpr_weight with the run's own weights: an
        # NLL-only run has no BPR term (bpr_weight 0), so it keeps its best valid NLL
        weight = 0.0 if objective == "nll" else lam
        return min(idx, key=lambda i: nll[i] * nll_weight - bp[i] * weight)
    if selection == "tradeoff":
        if not nll_tolerance >= 0:
            raise ValueError(f"nll_tolerance must be >= 0; got {nll_tolerance}")
        if objective == "nll":
            return min(idx, key=lambda i: nll[i])
        ref = reference_nll if reference_nll is not None else min(nll)
        bound = ref + nll_tolerance * abs(ref)
        ok = [i for i in idx if nll[i] <= bound]
        if not ok:
            return min(idx, key=lambda i: nll[i])
        return max(ok, key=lambda i: (bp[i], -nll[i]))
    if selection != "paper":
        raise ValueError(
            f"selection must be 'paper', 'code', 'tradeoff' or 'last'; got {selection!r}"
        )
    if objective == "nll":
        return min(idx, key=lambda i: nll[i])
    if objective in ("bpr", "spo+", "pg"):  # decision-only objectives: best valid BPR
        return max(idx, key=lambda i: (bp[i], -nll[i]))
    if reference_bpr is not None:
        ok = [i for i in idx if bp[i] >= reference_bpr]
        if ok:
            return min(ok, key=lambda i: nll[i])
    return max(idx, key=lambda i: (bp[i], -nll[i]))


def fit(
    model: ForecastModel,
    train: Split,
    valid: Split,
    loss_fn: DAMLLoss,
    epochs: int = 1000,
    lr: float = 1e-2,
    val_freq: int = 10,
    selection: Selection = "paper",
    reference_bpr: float | None = None,
    val_samples: int = 500,
    progress: bool = True,
    early_stopping: Monitor | None = None,
    patience: int = 5,
    min_delta: float = 0.0,
    max_epochs: int | None = None,
    nll_tolerance: float = 0.01,
) -> FitResult:
    """Train ``model`` full batch with Adam on ``loss_fn`` and keep the selected checkpoint.

    Validation (every ``val_freq`` epochs and at epoch 0) records valid NLL per site-time and
    the valid BPR@K of the ratio rating (``val_samples`` samples). The model is left holding the
    selected checkpoint.

    Early stopping (``early_stopping="bpr"`` or ``"nll"``): training ends once ``patience``
    validations in a row have not improved the best valid BPR (higher) or valid NLL (lower) by
    more than ``min_delta``, and the checkpoint with the best monitored value is restored (this
    replaces ``selection``). ``epochs`` is then an upper bound.

    ``max_epochs``: when the chosen checkpoint is the last validation of the budget, or early
    stopping has not seen ``patience`` validations without improvement when the budget runs
    out, the run has not converged: the budget doubles, up to ``max_epochs``,
    and training continues from where it was (same optimiser state). ``nll_tolerance``: the
    slack of ``selection="tradeoff"`` (reference: the run's best valid NLL). ``FitResult.budget`` is the
    final budget and ``FitResult.at_budget_end`` says whether the choice still sits on its end.
    """
    if epochs < 0 or val_freq < 1:
        raise ValueError(f"epochs must be >= 0 and val_freq >= 1; got {epochs}, {val_freq}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0; got {lr}")
    if early_stopping not in (None, "bpr", "nll"):
        raise ValueError(f"early_stopping must be None, 'bpr' or 'nll'; got {early_stopping!r}")
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
        raise ValueError(f"patience must be an integer >= 1; got {patience!r}")
    if not min_delta >= 0:
        raise ValueError(f"min_delta must be >= 0; got {min_delta}")
    if max_epochs is not None and max_epochs < epochs:
        raise ValueError(f"max_epochs must be >= epochs={epochs}; got {max_epochs}")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history: list[dict[str, float]] = []
    states: list[dict[str, Tensor]] = []
    last: dict[str, float] = {"loss": math.nan, "train_nll": math.nan, "train_bpr": math.nan}

    def validate(epoch: int) -> None:
        metrics = evaluate_model(
            model, valid, loss_fn.k, "ratio", 1, val_samples, loss_fn.denominator_offset
        )
        history.append(
            {
                "epoch": float(epoch),
                **last,
                "valid_nll": metrics["nll"],
                "valid_bpr": metrics["bpr"],
            }
        )
        states.append(copy.deepcopy(model.state_dict()))

    validate(0)
    best_value, since, stopped = monitored(history[0], early_stopping), 0, None
    budget, epoch = epochs, 0
    bar = tqdm(total=epochs, disable=not progress, desc=f"train[{loss_fn.objective}]")
    while True:
        while epoch < budget and stopped is None:
            epoch += 1
            opt.zero_grad(set_to_none=True)
            out = loss_fn(model, train.y, train.X, train.time)
            out.loss.backward()
            opt.step()
            bar.update(1)
            last = {
                "loss": float(out.loss.detach()),
                "train_nll": float(out.nll),
                "train_bpr": nanmean(out.bpr),
            }
            if epoch % val_freq == 0 or epoch == budget:
                validate(epoch)
                bar.set_postfix(valid_bpr=f"{history[-1]['valid_bpr']:.3f}")
                if early_stopping is not None:
                    value = monitored(history[-1], early_stopping)
                    if value > best_value + min_delta:
                        best_value, since = value, 0
                    else:
                        since += 1
                    if since >= patience and epoch < budget:
                        stopped = epoch
        best, rule = _choose(
            history, loss_fn, early_stopping, selection, reference_bpr, nll_tolerance
        )
        # not converged: the budget ran out while the chosen checkpoint was its last validation,
        # or (early stopping) before `patience` validations without improvement
        at_end = (
            stopped is None
            and budget > 0
            and (best == len(history) - 1 or (early_stopping is not None and since < patience))
        )
        if not (at_end and max_epochs is not None and budget < max_epochs):
            break
        # the chosen checkpoint is the budget's last: not converged, so train on
        budget = min(2 * budget, max_epochs)
        bar.total = budget
        bar.refresh()
    bar.close()
    model.load_state_dict(states[best])
    return FitResult(
        states[best],
        int(history[best]["epoch"]),
        history,
        stopped,
        rule,
        budget=budget,
        at_budget_end=at_end,
        states=states,
    )


def _choose(
    history: list[dict[str, float]],
    loss_fn: DAMLLoss,
    early_stopping: Monitor | None,
    selection: Selection,
    reference_bpr: float | None,
    nll_tolerance: float,
) -> tuple[int, str]:
    if early_stopping is not None:
        scores = [monitored(h, early_stopping) for h in history]
        return scores.index(max(scores)), f"early_stopping:{early_stopping}"
    best = select_checkpoint(
        history,
        loss_fn.objective,
        selection,
        reference_bpr,
        loss_fn.lam,
        loss_fn.nll_weight,
        nll_tolerance=nll_tolerance,
    )
    return best, selection


def monitored(entry: dict[str, float], monitor: Monitor | None) -> float:
    """Early-stopping score of one validation (higher is better): valid BPR, or minus valid NLL;
    NaN counts as the worst value."""
    value = entry["valid_nll"] * -1.0 if monitor == "nll" else entry["valid_bpr"]
    return -math.inf if math.isnan(value) else float(value)


def evaluate_scores(y: Tensor, scores: Tensor, k: int) -> dict[str, float]:
    """BPR@K of fixed scores (expected ties) and MAE/RMSE with the scores as point forecast."""
    err = scores.to(torch.float32) - y.to(torch.float32)
    return {
        "bpr": nanmean(bpr(y, scores, k)),
        "mae": float(err.abs().mean()),
        "rmse": float(err.pow(2).mean().sqrt()),
    }


def history_average(y_history: Tensor, start: int, num_steps: int, window: int) -> Tensor:
    """Historical-average forecast: mean of the previous ``window`` observed steps (fewer at the
    start; 0 with no history) for steps ``start .. start+num_steps-1`` of ``y_history`` ``[T, S]``."""
    if window < 1:
        raise ValueError(f"window must be >= 1; got {window}")
    rows = []
    for t in range(start, start + num_steps):
        past = y_history[max(0, t - window) : t]
        rows.append(past.mean(0) if len(past) else torch.zeros(y_history.shape[-1]))
    return torch.stack(rows)


def baseline_scores(
    y_history: Tensor, start: int, num_steps: int, window: int = 5
) -> dict[str, Tensor]:
    """Scores of the non-learned baselines of Table C.2: ``avg`` (last ``window`` steps), ``last``
    (previous step) and ``zero`` (chance decision: all tie)."""
    return {
        f"avg{window}": history_average(y_history, start, num_steps, window),
        "last": history_average(y_history, start, num_steps, 1),
        "zero": torch.zeros(num_steps, y_history.shape[-1]),
    }


def model_summary(model: ForecastModel) -> dict[str, Any]:
    """Name, config and parameter count of a model (for results.json)."""
    return {
        "class": type(model).__name__,
        "config": model.config(),
        "num_parameters": sum(p.numel() for p in model.parameters()),
    }
