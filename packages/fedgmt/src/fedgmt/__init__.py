"""FedGMT: sharpness-aware federated learning via the global model trajectory (ICML 2025).

``import fedgmt`` does not import flwr or ray; the Flower apps live in ``fedgmt.client_app``,
``fedgmt.server_app`` and ``fedgmt.strategy``.
"""

from importlib.metadata import version

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
from .config import METHODS, FedConfig
from .dataset import FederatedData, load_federated_data, partition
from .guard import DivergenceError, UnstableDualError, check_stability
from .methods import REGISTRY, Method, get_method
from .metrics import History, evaluate
from .reference import run_reference
from .run import run

__version__ = version("fedgmt")

__all__ = [
    "METHODS",
    "REGISTRY",
    "ClientFailure",
    "ClientReply",
    "DivergenceError",
    "FedConfig",
    "FederatedData",
    "History",
    "Method",
    "Payload",
    "ServerState",
    "UnstableDualError",
    "__version__",
    "check_stability",
    "client_update",
    "evaluate",
    "get_method",
    "init_server_state",
    "load_federated_data",
    "partition",
    "run",
    "run_reference",
    "sample_clients",
    "server_aggregate",
    "server_payload",
    "trajectory_kl",
]
