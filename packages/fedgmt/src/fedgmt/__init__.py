"""FedGMT: sharpness-aware federated learning via the global model trajectory (ICML 2025).

The names below load on first use (PEP 562): ``import fedgmt``, ``fedgmt.config`` and
``fedgmt --help`` import neither torch nor flwr; the Flower apps live in ``fedgmt.client_app``,
``fedgmt.server_app`` and ``fedgmt.strategy``.

>>> from fedgmt import FedConfig, run_study
>>> study = run_study(FedConfig(num_rounds=3), methods=("fedavg", "fedgmt"))  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

__version__ = version("fedgmt")

# name -> submodule that defines it
_LAZY = {
    "FedConfig": "config",
    "DemoConfig": "config",
    "EvaluateConfig": "config",
    "ConfigError": "config",
    "METHODS": "config",
    "run_study": "experiments",
    "resume_study": "experiments",
    "run_demo": "experiments",
    "partition_stats": "experiments",
    "stability_check": "experiments",
    "evaluate_model": "experiments",
    "StudyResult": "experiments",
    "ClientFailure": "algorithms",
    "ClientReply": "algorithms",
    "Payload": "algorithms",
    "ServerState": "algorithms",
    "client_update": "algorithms",
    "init_server_state": "algorithms",
    "sample_clients": "algorithms",
    "server_aggregate": "algorithms",
    "server_payload": "algorithms",
    "trajectory_kl": "algorithms",
    "FederatedData": "dataset",
    "load_federated_data": "dataset",
    "partition": "dataset",
    "DivergenceError": "guard",
    "UnstableDualError": "guard",
    "check_stability": "guard",
    "REGISTRY": "methods",
    "Method": "methods",
    "get_method": "methods",
    "History": "metrics",
    "evaluate": "metrics",
    "run_reference": "reference",
}

__all__ = [
    "METHODS",
    "REGISTRY",
    "ClientFailure",
    "ClientReply",
    "ConfigError",
    "DemoConfig",
    "DivergenceError",
    "EvaluateConfig",
    "FedConfig",
    "FederatedData",
    "History",
    "Method",
    "Payload",
    "ServerState",
    "StudyResult",
    "UnstableDualError",
    "__version__",
    "check_stability",
    "client_update",
    "evaluate",
    "evaluate_model",
    "get_method",
    "init_server_state",
    "load_federated_data",
    "partition",
    "partition_stats",
    "resume_study",
    "run",
    "run_demo",
    "run_reference",
    "run_study",
    "sample_clients",
    "server_aggregate",
    "server_payload",
    "stability_check",
    "trajectory_kl",
]

# Eager (standard library only) so that the name is the function, not the submodule fedgmt.run.
from .run import run  # noqa: E402

if TYPE_CHECKING:
    from .algorithms import (
        ClientFailure,
        ClientReply,
        Payload,
        ServerState,
        client_update,
        init_server_state,
        sample_clients,
        server_aggregate,
        server_payload,
        trajectory_kl,
    )
    from .config import METHODS, ConfigError, DemoConfig, EvaluateConfig, FedConfig
    from .dataset import FederatedData, load_federated_data, partition
    from .experiments import (
        StudyResult,
        evaluate_model,
        partition_stats,
        resume_study,
        run_demo,
        run_study,
        stability_check,
    )
    from .guard import DivergenceError, UnstableDualError, check_stability
    from .methods import REGISTRY, Method, get_method
    from .metrics import History, evaluate
    from .reference import run_reference


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
