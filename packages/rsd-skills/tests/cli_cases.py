"""Bad-data cases for the repository's CLI conformance check (``tools/conformance.py``).

``nan_data(tmp)`` returns, for every subcommand with a data flag, the arguments (without ``--out``)
that point the flag at data holding a NaN, and the flag the one-line error must name.
"""

from __future__ import annotations

from pathlib import Path


def nan_maze(tmp: Path) -> Path:
    """A maze map file (0/1 rows) with a NaN cell."""
    path = tmp / "nan-maze.txt"
    path.write_text("11111\n10001\n10nan1\n10001\n11111\n")
    return path


def nan_checkpoint(tmp: Path) -> Path:
    """A checkpoint as 'rsd-skills train' writes it (tiny, untrained) whose φ weights hold a NaN."""
    import torch
    from rsd_skills import Config, SkillTrainer

    trainer = SkillTrainer(
        "metra", "point", Config(hidden=8, min_buffer=10, replay_size=10), seed=0
    )
    with torch.no_grad():
        next(trainer.method.phi.parameters()).view(-1)[0] = float("nan")
    return trainer.save(tmp / "nan-checkpoint.pt")


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    maze = nan_maze(tmp)
    return {
        "train": (["--maze", str(maze), "--epochs", "1"], "--maze"),
        "demo": (["--maze", str(maze), "--quick"], "--maze"),
        "evaluate": (["--checkpoint", str(nan_checkpoint(tmp))], "--checkpoint"),
    }
