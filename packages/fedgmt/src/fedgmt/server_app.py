"""Flower ServerApp: handshake, guard, then ``Strategy.start`` with the method's strategy.

``app`` reads its :class:`~fedgmt.config.FedConfig` from the run config (``flwr run``; a
``preset`` key layers ``conf/<preset>.toml`` under the explicit values); :func:`make_server_app`
captures a config and a result sink (``fedgmt run --engine flower``).

With ``out-dir`` set, the ServerApp writes ``<out-dir>/checkpoint.pt`` and a line per round in
``<out-dir>/rounds.jsonl`` (replies, failures, accuracy) after every completed round, and
``<out-dir>/results.json`` at the end; ``resume=true`` continues from the checkpoint (needs
``dual-store='server'``: with the duals in SuperNode memory a new run starts without them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp

from .config import FedConfig, config_from_flower_run_config
from .dataset import load_federated_data
from .guard import DivergenceError, check_stability
from .metrics import evaluate
from .model import make_model
from .strategy import AlgorithmStrategy, handshake

__all__ = ["app", "make_server_app", "run_server"]


def _load_resume(cfg: FedConfig, checkpoint: str | os.PathLike[str] | None) -> Any:
    from .checkpoint import load_checkpoint

    if checkpoint is None or not Path(checkpoint).is_file():
        return None
    if cfg.dual_store != "server":
        raise ValueError(
            "resuming a Flower run needs dual_store='server': with dual_store='client' the "
            "clients' duals live in SuperNode memory (context.state), which a new run does not "
            "see"
        )
    ckpt = load_checkpoint(checkpoint)
    ckpt.check_compatible(cfg)
    return ckpt


def run_server(
    grid: Grid,
    cfg: FedConfig,
    server_eval: bool = True,
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
    run_log: str | os.PathLike[str] | None = None,
) -> AlgorithmStrategy:
    """Run ``cfg`` on ``grid``; return the strategy (its ``history`` holds the curves).

    ``checkpoint``: file written after every round; ``resume``: continue from it if it exists.
    """
    t0 = time.perf_counter()
    data = load_federated_data(cfg)
    ckpt = _load_resume(cfg, checkpoint) if resume else None
    node_of, sizes = handshake(grid, cfg)
    check_stability(sizes, cfg)
    strategy = AlgorithmStrategy(
        cfg,
        data=data if server_eval else None,
        node_of=node_of,
        resume=ckpt,
        checkpoint=checkpoint,
        run_log=run_log,
    )
    model = make_model(cfg, data.input_dim, data.num_classes, data.vocab_size)
    initial = ArrayRecord(ckpt.state.w if ckpt is not None else model.state_dict())
    remaining = cfg.num_rounds - (ckpt.rounds_done if ckpt is not None else 0)

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        if not server_eval:
            return None
        if server_round > 0 and strategy.history.accuracy:
            h = strategy.history
            return MetricRecord({"accuracy": h.accuracy[-1], "loss": h.loss[-1]})
        model.load_state_dict(arrays.to_torch_state_dict())
        acc, loss = evaluate(model, data.x_test, data.y_test)
        return MetricRecord({"accuracy": acc, "loss": loss})

    runner: Any = strategy
    if cfg.central_dp != "none":  # FedConfig refuses it for methods it would not protect
        from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping

        runner = DifferentialPrivacyServerSideFixedClipping(
            strategy,
            noise_multiplier=cfg.dp_noise,
            clipping_norm=cfg.dp_clip,
            num_sampled_clients=cfg.num_sampled,
        )
    try:
        if remaining > 0 and not strategy.history.diverged:
            runner.start(
                grid=grid,
                initial_arrays=initial,
                num_rounds=remaining,
                timeout=cfg.round_timeout,
                train_config=ConfigRecord(),
                evaluate_fn=evaluate_fn,
            )
    except DivergenceError as err:
        if cfg.on_divergence == "raise":
            raise
        h = strategy.history
        if not h.diverged:  # non-finite numbers found in the clients or in server_aggregate
            h.diverged = True
            h.diverged_at_round = len(h.rounds) + 1
            h.divergence_reason = str(err)
    strategy.history.cost["wall_time_s"] = time.perf_counter() - t0
    if strategy.state is None:  # nothing ran (resumed a finished run)
        strategy.state = ckpt.state if ckpt is not None else None
    return strategy


def make_server_app(
    cfg: FedConfig,
    sink: dict[str, Any] | None = None,
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> ServerApp:
    """A ServerApp running the captured ``cfg``; puts the strategy's ``history`` and final
    arrays into ``sink`` (used by the in-process simulation)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        try:
            strategy = run_server(grid, cfg, checkpoint=checkpoint, resume=resume)
        except BaseException as err:  # reported to the caller of run_simulation
            if sink is not None:
                sink["error"] = err
            raise
        if sink is not None:
            sink["history"] = strategy.history
            sink["final_arrays"] = strategy.state.w if strategy.state else None

    return app


app = ServerApp()


@app.main()
def _main(grid: Grid, context: Context) -> None:
    """Default ServerApp for ``flwr run``: config from ``[tool.flwr.app.config]`` / --run-config
    (``preset`` selects ``conf/<preset>.toml``); with ``out-dir`` it checkpoints every round,
    logs rounds to ``rounds.jsonl`` and writes ``results.json``."""
    run_config = dict(context.run_config)
    cfg = config_from_flower_run_config(run_config)
    out = str(run_config.get("out-dir", "") or "")
    checkpoint = Path(out) / "checkpoint.pt" if out else None
    strategy = run_server(
        grid,
        cfg,
        server_eval=bool(run_config.get("server-eval", True)),
        checkpoint=checkpoint,
        resume=bool(run_config.get("resume", False)),
        run_log=Path(out) / "rounds.jsonl" if out else None,
    )
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        h = strategy.history
        (Path(out) / "results.json").write_text(
            json.dumps({"config": cfg.to_dict(), "history": h.to_dict()}, indent=1, default=str)
        )
        if strategy.state is not None:
            from .checkpoint import save_model

            save_model(Path(out) / "model.pt", cfg, strategy.state.w)
