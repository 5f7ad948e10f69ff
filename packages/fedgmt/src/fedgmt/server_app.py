"""Flower ServerApp: handshake, guard, then ``Strategy.start`` with the method's strategy.

``app`` reads its :class:`~fedgmt.config.FedConfig` from the run config (``flwr run``);
:func:`make_server_app` captures a config and a result sink (``fedgmt run --engine flower``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp

from .config import FedConfig
from .dataset import load_federated_data
from .guard import DivergenceError
from .metrics import evaluate
from .model import make_model
from .strategy import STRATEGIES, handshake

__all__ = ["app", "make_server_app", "run_server"]


def run_server(grid: Grid, cfg: FedConfig, server_eval: bool = True) -> Any:
    """Run ``cfg`` on ``grid``; return the strategy (its ``history`` holds the curves)."""
    t0 = time.perf_counter()
    data = load_federated_data(cfg)
    node_of, sizes = handshake(grid, cfg)
    from .guard import check_stability

    check_stability(sizes, cfg)
    strategy = STRATEGIES[cfg.method](cfg, data=data if server_eval else None, node_of=node_of)
    model = make_model(cfg, data.input_dim, data.num_classes, data.vocab_size)

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        if not server_eval:
            return None
        if server_round > 0 and strategy.history.accuracy:
            h = strategy.history
            return MetricRecord({"accuracy": h.accuracy[-1], "loss": h.loss[-1]})
        model.load_state_dict(arrays.to_torch_state_dict())
        acc, loss = evaluate(model, data.x_test, data.y_test)
        return MetricRecord({"accuracy": acc, "loss": loss})

    try:
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(model.state_dict()),
            num_rounds=cfg.num_rounds,
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
    return strategy


def make_server_app(cfg: FedConfig, sink: dict[str, Any] | None = None) -> ServerApp:
    """A ServerApp running the captured ``cfg``; puts the strategy's ``history`` and final
    arrays into ``sink`` (used by the in-process simulation)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        try:
            strategy = run_server(grid, cfg)
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
    """Default ServerApp for ``flwr run``: config from ``[tool.flwr.app.config]`` / --run-config;
    writes ``<out-dir>/results.json`` when ``out-dir`` is set."""
    run_config = dict(context.run_config)
    cfg = FedConfig.from_run_config(run_config)
    strategy = run_server(grid, cfg, server_eval=bool(run_config.get("server-eval", True)))
    out = str(run_config.get("out-dir", ""))
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        h = strategy.history
        (Path(out) / "results.json").write_text(
            json.dumps({"config": cfg.to_dict(), "history": h.to_dict()}, indent=1, default=str)
        )
