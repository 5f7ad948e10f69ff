"""Bad-data cases for the repository's CLI conformance check (``tools/conformance.py``).

``nan_data(tmp)`` writes a six-CSV folder whose ``train_x.csv`` holds a NaN feature cell and returns,
per subcommand with a data flag, the argv (without ``--out``) and the flag the error must name.
"""

from __future__ import annotations

from pathlib import Path

from bpr_topk import make_hotspots, write_topk_folder


def nan_folder(tmp: Path) -> Path:
    """A valid hotspots folder (16 sites) with one feature cell of train_x.csv set to ``nan``."""
    folder = tmp / "nan-topk"
    write_topk_folder(make_hotspots(16, seed=0), folder)
    path = folder / "train_x.csv"
    lines = path.read_text().splitlines()
    cells = lines[3].split(",")
    cells[-1] = "nan"
    lines[3] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    return folder


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    folder = nan_folder(tmp)
    # rank needs a --checkpoint that exists; the data is loaded (and rejected) before it is read
    checkpoint = tmp / "unused-model.pt"
    checkpoint.write_bytes(b"")
    return {
        "train": (["--data", str(folder), "--K", "2", "--epochs", "1"], "--data"),
        "rank": (["--data", str(folder), "--K", "2", "--checkpoint", str(checkpoint)], "--data"),
        "evaluate": (["--data", str(folder), "--K", "2"], "--data"),
        "baseline": (["--data", str(folder), "--K", "2"], "--data"),
    }
