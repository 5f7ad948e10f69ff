"""``fedgmt.run(cfg, engine=...)``: one entry point for both engines."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch: only when a run starts
    from .config import FedConfig
    from .metrics import History

__all__ = ["run"]


def run(
    cfg: FedConfig,
    engine: str = "reference",
    *,
    progress: bool = False,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> History:
    """Run ``cfg`` with ``engine`` = ``"reference"`` (in-process loop) or ``"flower"``
    (Flower's simulation engine, Ray backend).

    ``checkpoint``: a file written after every completed round; ``resume=True`` continues from it
    when it exists (same result as the uninterrupted run; on Flower it needs
    ``dual_store='server'``)."""
    if engine == "reference":
        from .reference import run_reference

        return run_reference(cfg, progress=progress, checkpoint=checkpoint, resume=resume)
    if engine == "flower":
        from .simulation import run_flower_simulation

        return run_flower_simulation(cfg, progress=progress, checkpoint=checkpoint, resume=resume)
    raise ValueError(f"invalid engine={engine!r}: expected reference or flower")
