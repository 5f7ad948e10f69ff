"""Conversions between torch tensors / client state and Flower records (flwr Message API)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, RecordDict

from .config import FedConfig

Params = dict[str, torch.Tensor]


def to_record(tensors: dict[str, torch.Tensor]) -> ArrayRecord:
    """float32 tensors round-trip losslessly."""
    return ArrayRecord(OrderedDict((k, v.detach().cpu()) for k, v in tensors.items()))


def from_record(record: ArrayRecord) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in record.to_torch_state_dict().items()}


def config_record(cfg: FedConfig, **extra: Any) -> ConfigRecord:
    """The whole run configuration travels with each message, so ClientApps need no run_config."""
    return ConfigRecord({**cfg.to_run_config(), **extra})


def config_from_record(record: ConfigRecord) -> FedConfig:
    return FedConfig.from_run_config(dict(record))


_ARRAY_KEYS = ("h", "c_i", "ema")
STATE_PREFIX = "client-state."
"""Prefix of the client-state records a message carries with ``dual_store='server'``."""


def carries_client_state(content: RecordDict) -> bool:
    """True when a train message or reply carries the client's state (``dual_store='server'``)."""
    return STATE_PREFIX + "fedgmt-meta" in content.config_records


def load_client_state(state: RecordDict, prefix: str = "") -> dict[str, Any]:
    """``context.state`` (or a message's ``client-state.*`` records with ``prefix``) -> the plain
    dict :func:`fedgmt.algorithms.client_update` uses."""
    out: dict[str, Any] = {}
    for key in _ARRAY_KEYS:
        if prefix + key in state.array_records:
            out[key] = from_record(state.array_records[prefix + key])
    if prefix + "fedgmt-meta" in state.config_records:
        meta: dict[str, Any] = dict(state.config_records[prefix + "fedgmt-meta"])
        out["participations"] = int(meta["participations"])
    if prefix + "dp" in state.config_records:
        rec: dict[str, Any] = dict(state.config_records[prefix + "dp"])
        out["dp"] = {
            "noise": list(rec["noise"]),
            "rate": list(rec["rate"]),
            "steps": list(rec["steps"]),
            "mechanism": str(rec["mechanism"]),
        }
    return out


def save_client_state(state: RecordDict, client_state: dict[str, Any], prefix: str = "") -> None:
    """Write the client dict into ``context.state`` (persists per node across a run), or into a
    message with ``prefix`` (``dual_store='server'``)."""
    for key in _ARRAY_KEYS:
        if key in client_state:
            state[prefix + key] = to_record(client_state[key])
    state[prefix + "fedgmt-meta"] = ConfigRecord(
        {"participations": int(client_state.get("participations", 0))}
    )
    if "dp" in client_state:
        state[prefix + "dp"] = ConfigRecord(dict(client_state["dp"]))
