"""Reference engine: an in-process sequential loop over the shared core.

Per-client dicts mimic Flower's ``context.state``. Used by tests, benchmarks and
``--engine reference``; the Flower engine calls the same three core functions.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Collection
from typing import Any

import torch
from torch import Tensor, nn

from . import algorithms as core
from .config import FedConfig
from .dataset import FederatedData, load_federated_data
from .guard import CollapseDetector, DivergenceError, DivergenceMonitor, check_stability
from .methods import get_method
from .metrics import History, evaluate
from .model import make_model

__all__ = ["cost_counters", "mark_divergence", "record_round", "run_reference", "should_stop"]


def cost_counters(method: str, model: nn.Module) -> dict[str, Any]:
    """Passes per local step and bytes per round (4P x models moved)."""
    num_params = sum(p.numel() for p in model.parameters())
    algo = get_method(method)
    fwd, bwd = algo.passes
    down, up = algo.models_moved
    return {
        "forward_per_step": fwd,
        "backward_per_step": bwd,
        "num_params": num_params,
        "bytes_down_per_client": 4 * num_params * down,
        "bytes_up_per_client": 4 * num_params * up,
    }


def record_round(
    hist: History,
    cfg: FedConfig,
    t: int,
    model: nn.Module,
    state: core.ServerState,
    data: FederatedData,
    agg_metrics: dict[str, float],
    replies_metrics: list[dict[str, float]],
    detector: CollapseDetector,
    round_time: float,
    monitor: DivergenceMonitor | None = None,
    *,
    check_train_loss: bool = True,
) -> None:
    """Evaluate ``w_{t+1}`` on the test set, append round ``t`` to ``hist`` and apply the
    divergence policy (:func:`mark_divergence`) when ``monitor`` or the collapse ``detector``
    flags the round."""
    model.load_state_dict(state.w)
    acc, loss = evaluate(model, data.x_test, data.y_test)
    hist.rounds.append(t)
    hist.accuracy.append(acc)
    hist.loss.append(loss)
    if data.x_val is not None and data.y_val is not None:
        hist.val_accuracy.append(evaluate(model, data.x_val, data.y_val)[0])
    if state.ema is not None:
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(state.ema[k])
        hist.ema_accuracy.append(evaluate(model, data.x_test, data.y_test)[0])
    train_loss = agg_metrics.get("train-loss", 0.0)
    hist.client_time.append(agg_metrics.get("client-time", 0.0))
    hist.train_loss.append(train_loss)
    hist.round_time.append(round_time)
    eps = {int(m["partition-id"]): m["dp-epsilon"] for m in replies_metrics if "dp-epsilon" in m}
    if eps:
        hist.dp_epsilon_max.append(max(eps.values()))
        hist.dp_epsilon_mean.append(sum(eps.values()) / len(eps))
        hist.dp_epsilon_client.append(eps)
    reason = None
    if monitor is not None:
        replied = agg_metrics.get("num-clients", 1.0) > 0
        reason = monitor.check(
            state.params(),
            test_loss=loss,
            train_loss=train_loss if check_train_loss and replied else None,
        )
    if reason is None and not math.isfinite(loss):
        reason = f"non-finite test loss ({loss})"
    if detector.update(acc) and reason is None:
        reason = f"accuracy collapsed to {acc:.3f} (chance level) for {detector.patience} rounds"
    if reason is not None:
        mark_divergence(hist, cfg, t, reason)


def mark_divergence(hist: History, cfg: FedConfig, t: int, reason: str) -> None:
    """Apply ``cfg.on_divergence`` to a diverged round ``t``.

    ``raise`` raises :class:`DivergenceError`; ``stop`` and ``warn`` record ``hist.diverged``,
    the first diverged round and the reason (``warn`` also warns once). Whether to stop is the
    caller's decision (:func:`should_stop`).
    """
    text = f"round {t}: {reason}"
    if "lr=" not in reason:
        text += f"; lr={cfg.lr:g} beta={cfg.beta:g}: lower lr or raise beta"
    if cfg.on_divergence == "raise":
        raise DivergenceError(text)
    if hist.diverged:
        return
    hist.diverged = True
    hist.diverged_at_round = t
    hist.divergence_reason = text
    if cfg.on_divergence == "warn":
        warnings.warn(f"fedgmt: {text}; training continues (--on-divergence warn)", stacklevel=3)


def should_stop(hist: History, cfg: FedConfig) -> bool:
    """True when the run diverged and the policy is ``stop``."""
    return hist.diverged and cfg.on_divergence == "stop"


def run_reference(
    cfg: FedConfig,
    *,
    data: FederatedData | None = None,
    model_fn: Callable[[], nn.Module] | None = None,
    criterion: Callable[[Tensor, Tensor], Tensor] | None = None,
    progress: bool = False,
    evaluate_fn: Callable[..., None] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
    absent: Collection[tuple[int, int]] = (),
) -> History:
    """Run ``cfg`` with the sequential reference loop and return its :class:`History`.

    ``checkpoint``: file written after every completed round (:mod:`fedgmt.checkpoint`); with
    ``resume=True`` and an existing file the run continues from it (its configuration must equal
    ``cfg`` except ``num_rounds`` and the divergence/reporting options) and ends with the same
    history and model as the uninterrupted run. Clients that fail mid-round (``cfg.fail_fraction``,
    :class:`~fedgmt.algorithms.ClientFailure`) are left out of that round's aggregate, keep their
    state, and are recorded in ``History.failures``; so are the ``(round, partition_id)`` pairs in
    ``absent`` (clients that never replied, e.g. a SuperNode that was killed).
    """
    torch.set_num_threads(cfg.client_threads)
    data = data or load_federated_data(cfg)
    check_stability(data.partition.sizes, cfg)
    make = model_fn or (lambda: make_model(cfg, data.input_dim, data.num_classes, data.vocab_size))
    model = make()
    method = get_method(cfg.method)
    state = core.init_server_state(method, cfg, model.state_dict(), core.param_names(model))
    client_states: dict[int, dict[str, Any]] = {i: {} for i in range(cfg.num_clients)}
    hist = History(method=cfg.method, cost=cost_counters(cfg.method, model))
    detector = CollapseDetector(data.num_classes)
    initial_loss = evaluate(model, data.x_test, data.y_test)[1]
    monitor = DivergenceMonitor(data.num_classes, state.params(), initial_loss)
    first = 1
    if resume and checkpoint is not None and os.path.exists(checkpoint):
        from .checkpoint import load_checkpoint

        ckpt = load_checkpoint(checkpoint)
        ckpt.check_compatible(cfg)
        state = ckpt.state
        if cfg.dual_store == "client":
            if ckpt.client_states is None:
                raise ValueError("cannot resume: the checkpoint holds no client states")
            client_states = ckpt.client_states
        hist = ckpt.history
        for acc in hist.accuracy:
            detector.update(acc)
        if ckpt.rng_state is not None:
            torch.random.set_rng_state(ckpt.rng_state)
        first = state.round
        if should_stop(hist, cfg):
            first = cfg.num_rounds + 1
    if cfg.dual_store == "server":
        client_states = state.client_store  # the server keeps every client's state
        for i in range(cfg.num_clients):
            client_states.setdefault(i, {})
    rounds: Any = range(first, cfg.num_rounds + 1)
    if progress:
        from tqdm import tqdm

        rounds = tqdm(rounds, desc=cfg.method, leave=False)
    for t in rounds:
        t_round = time.perf_counter()
        sampled = core.sample_clients(cfg.seed, t, cfg.num_clients, cfg.num_sampled)
        hist.sampled.append(sampled)
        payload = core.server_payload(method, state)
        replies = []
        try:
            for pid in sampled:
                if (t, pid) in absent:
                    hist.failures.append({"round": t, "partition_id": pid, "reason": "absent"})
                    continue
                try:
                    reply = core.client_update(
                        method,
                        model,
                        data.client(pid),
                        payload,
                        client_states[pid],
                        cfg,
                        core.client_generator(cfg.seed, t, pid),
                        partition_id=pid,
                        criterion=criterion,
                    )
                except core.ClientFailure as err:
                    hist.failures.append({"round": t, "partition_id": pid, "reason": str(err)})
                    continue
                replies.append(reply)
            agg = core.server_aggregate(method, state, replies, cfg)
        except DivergenceError as err:
            # non-finite numbers: nothing sensible to continue from, whatever the policy
            if cfg.on_divergence == "raise":
                raise
            mark_divergence(hist, cfg, t, str(err))
            break
        record_round(
            hist, cfg, t, model, state, data, agg, [r.metrics for r in replies], detector,
            time.perf_counter() - t_round, monitor, check_train_loss=criterion is None,
        )  # fmt: skip
        if checkpoint is not None:
            from .checkpoint import save_checkpoint

            stored = None if cfg.dual_store == "server" else client_states
            save_checkpoint(checkpoint, cfg, state, stored, hist, "reference")
        if evaluate_fn is not None:
            evaluate_fn(t, state, client_states)
        if should_stop(hist, cfg):
            break
    hist.final_arrays = {k: v.clone() for k, v in state.w.items()}
    return hist
