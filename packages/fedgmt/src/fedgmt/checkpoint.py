"""Checkpoints of a run after its last completed round, and resuming from them.

A checkpoint holds everything the next round depends on: the configuration, the server state
(global model ``w``, EMA ``e``, dual sum ``H``, SCAFFOLD's ``c``, per-client duals kept by the
server, learning rate, round, participation tallies), the client states (duals ``h_i``, control
variates ``c_i``, client EMAs and DP accountant histories) unless the clients keep them themselves
(Flower with ``dual_store='client'``), the history so far and torch's global RNG state. Sampling,
local shuffling, failures and DP noise are keyed on ``(seed, round, client)``, so a resumed run
repeats the uninterrupted one exactly.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .algorithms import ServerState
from .config import FedConfig
from .metrics import History

__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "load_checkpoint",
    "load_model",
    "save_checkpoint",
    "save_model",
]

CHECKPOINT_VERSION = 1

RUN_ONLY_FIELDS = ("num_rounds", "on_divergence", "allow_unstable", "last_k", "round_timeout")
"""Fields a resumed run may change (everything else must equal the checkpoint's)."""


@dataclass
class Checkpoint:
    """A run after round ``rounds_done``."""

    cfg: FedConfig
    state: ServerState
    client_states: dict[int, dict[str, Any]] | None
    history: History
    engine: str
    rng_state: torch.Tensor | None = None

    @property
    def rounds_done(self) -> int:
        return self.state.round - 1

    def check_compatible(self, cfg: FedConfig) -> None:
        """Raise ``ValueError`` naming the first field (outside :data:`RUN_ONLY_FIELDS`) in which
        ``cfg`` differs from the checkpoint's configuration."""
        for f in dataclasses.fields(FedConfig):
            if f.name in RUN_ONLY_FIELDS:
                continue
            a, b = getattr(cfg, f.name), getattr(self.cfg, f.name)
            if a != b:
                raise ValueError(
                    f"cannot resume: {f.name}={a!r} differs from the checkpoint's {b!r}"
                )
        if cfg.num_rounds < self.rounds_done:
            raise ValueError(
                f"cannot resume: num_rounds={cfg.num_rounds} is below the {self.rounds_done} "
                "rounds the checkpoint has completed"
            )


def save_checkpoint(
    path: str | os.PathLike[str],
    cfg: FedConfig,
    state: ServerState,
    client_states: dict[int, dict[str, Any]] | None,
    history: History,
    engine: str,
) -> Path:
    """Write the checkpoint atomically (a temporary file renamed over ``path``)."""
    payload = {
        "version": CHECKPOINT_VERSION,
        "engine": engine,
        "fed_config": cfg.to_dict(),
        "server_state": state.state_dict(),
        "client_states": client_states,
        "history": history.to_dict(),
        "torch_rng": torch.random.get_rng_state(),
    }
    return _atomic_save(payload, Path(path))


def _atomic_save(payload: dict[str, Any], path: Path) -> Path:
    """``torch.save`` to a temporary file in ``path``'s folder, then renamed over ``path`` (an
    interrupted write never leaves a truncated file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ckpt-", suffix=".pt")
    os.close(fd)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors and plain containers only:
    ``torch.load(weights_only=True)``). Raises ``ValueError`` for a file that is not one."""
    path = Path(path)
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"{path.name} is not a fedgmt checkpoint ({exc})") from exc
    if not isinstance(raw, dict) or raw.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"{path.name} is not a fedgmt checkpoint of version {CHECKPOINT_VERSION}")
    return Checkpoint(
        cfg=FedConfig(**raw["fed_config"]),
        state=ServerState.from_state_dict(raw["server_state"]),
        client_states=raw["client_states"],
        history=History.from_dict(raw["history"]),
        engine=str(raw["engine"]),
        rng_state=raw.get("torch_rng"),
    )


MODEL_KIND = "fedgmt-global-model"


def save_model(
    path: str | os.PathLike[str], cfg: FedConfig, state_dict: dict[str, torch.Tensor]
) -> Path:
    """Save a global model with the configuration that rebuilds its architecture and data
    (``fedgmt evaluate`` reads it), atomically."""
    payload = {
        "version": CHECKPOINT_VERSION,
        "kind": MODEL_KIND,
        "fed_config": cfg.to_dict(),
        "state_dict": {k: v.detach().cpu().clone() for k, v in state_dict.items()},
    }
    return _atomic_save(payload, Path(path))


def load_model(path: str | os.PathLike[str]) -> tuple[FedConfig, dict[str, torch.Tensor]]:
    """``(config, state_dict)`` of a saved global model, or of a checkpoint's global model.
    Raises ``ValueError`` for any other file."""
    path = Path(path)
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"{path.name} is not a fedgmt model or checkpoint ({exc})") from exc
    if isinstance(raw, dict) and raw.get("kind") == MODEL_KIND:
        return FedConfig(**raw["fed_config"]), dict(raw["state_dict"])
    if isinstance(raw, dict) and raw.get("version") == CHECKPOINT_VERSION and "server_state" in raw:
        return FedConfig(**raw["fed_config"]), dict(raw["server_state"]["w"])
    raise ValueError(f"{path.name} is not a fedgmt model or checkpoint")
