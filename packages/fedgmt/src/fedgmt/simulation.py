"""Flower simulation path (Ray backend): ``fedgmt run --engine flower``.

``flwr.simulation.run_simulation`` is deprecated in flwr >= 1.42 but still works (and passes an
empty run_config, which is fine here: the config is captured in the app factories). It is isolated
in :func:`run_flower_simulation` so that a later migration touches one function.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from .config import FedConfig
from .metrics import History

__all__ = ["run_flower_simulation"]


def _ray_temp_dir() -> None:
    """Keep Ray's temporary folder out of the active virtual environment.

    Ray takes ``$TMPDIR`` as its temporary folder, and its workers refuse one inside
    ``$VIRTUAL_ENV`` ("temp_dir must not be child directory of virtualenv root"): they die at start
    and the driver then waits for them forever. nox puts ``$TMPDIR`` inside each session's venv.
    In that case (and only when ``RAY_TMPDIR`` is not set) use ``/tmp``.
    """
    venv, tmp = os.environ.get("VIRTUAL_ENV"), os.environ.get("TMPDIR")
    if "RAY_TMPDIR" in os.environ or not venv or not tmp:
        return
    if Path(tmp).resolve().is_relative_to(Path(venv).resolve()) and os.path.isdir("/tmp"):
        os.environ["RAY_TMPDIR"] = "/tmp"


def run_flower_simulation(
    cfg: FedConfig,
    *,
    progress: bool = False,
    verbose: bool = False,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> History:
    """Run ``cfg`` on ``cfg.num_clients`` simulated SuperNodes; return the server's History.

    ``checkpoint``: written after every round; ``resume``: continue from it (needs
    ``dual_store='server'``)."""
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    _ray_temp_dir()
    from flwr.simulation import run_simulation

    from .client_app import make_client_app
    from .dataset import load_federated_data
    from .guard import check_stability
    from .server_app import make_server_app

    if not verbose:
        logging.getLogger("flwr").setLevel(logging.WARNING)
    check_stability(load_federated_data(cfg).partition.sizes, cfg)  # pre-flight, before Ray
    sink: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(
            server_app=make_server_app(cfg, sink, checkpoint=checkpoint, resume=resume),
            client_app=make_client_app(),
            num_supernodes=cfg.num_clients,
            backend_config={
                "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                "init_args": {"logging_level": "error", "log_to_driver": False},
            },
            verbose_logging=verbose,
        )
    if "error" in sink:
        raise sink["error"]
    if "history" not in sink:
        raise RuntimeError("Flower simulation ended without a result (see the log above)")
    hist: History = sink["history"]
    hist.final_arrays = sink.get("final_arrays")
    return hist
