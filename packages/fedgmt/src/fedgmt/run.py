"""``fedgmt.run(cfg, engine=...)``: one entry point for both engines."""

from __future__ import annotations

from .config import FedConfig
from .metrics import History

__all__ = ["run"]


def run(cfg: FedConfig, engine: str = "reference", *, progress: bool = False) -> History:
    """Run ``cfg`` with ``engine`` = ``"reference"`` (in-process loop) or ``"flower"``
    (Flower's simulation engine, Ray backend)."""
    if engine == "reference":
        from .reference import run_reference

        return run_reference(cfg, progress=progress)
    if engine == "flower":
        from .simulation import run_flower_simulation

        return run_flower_simulation(cfg, progress=progress)
    raise ValueError(f"invalid engine={engine!r}: expected reference or flower")
