"""Bad-data cases for the CLI contract check (tools/conformance.py): data holding NaN, per subcommand."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np


def write_metr_la(folder: Path, *, nan: bool = False, sensors: int = 4, steps: int = 300) -> Path:
    """A tiny METR-LA-format folder (DCRNN adj_mx.pkl + a speed CSV); ``nan`` puts one NaN cell in it."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = [str(1000 + i) for i in range(sensors)]
    adj = np.eye(sensors, dtype=np.float32)
    for i in range(sensors - 1):
        adj[i, i + 1] = 0.8  # a directed chain 0 → 1 → 2 → 3
    adj[sensors - 1, 0] = 0.3
    with open(folder / "adj_mx.pkl", "wb") as fh:
        pickle.dump([ids, {s: i for i, s in enumerate(ids)}, adj], fh, protocol=2)
    rng = np.random.default_rng(0)
    speed = 60 + 5 * rng.standard_normal((steps, sensors))
    rows = [",".join(ids)] + [",".join(f"{v:.3f}" for v in row) for row in speed]
    if nan:
        cells = rows[7].split(",")
        cells[2] = "nan"
        rows[7] = ",".join(cells)
    (folder / "los_speed.csv").write_text("\n".join(rows) + "\n")
    return folder


def write_checkpoint(path: Path) -> Path:
    """A valid (untrained) PhyNFP checkpoint for the METR-LA format (W = 12, 3 variables, 2 edge features)."""
    import torch
    from phynfp.cli import CHECKPOINT_FORMAT
    from phynfp.models import build_model

    build = {
        "window": 12,
        "num_features": 3,
        "edge_dim": 2,
        "hidden_channels": 8,
        "num_layers": 2,
        "target_index": 0,
        "phynfp_options": {},
        "headwater_reverse_edges": False,
    }
    model = build_model(
        "phynfp",
        **{k: build[k] for k in ("window", "num_features", "edge_dim", "target_index")},
        hidden_channels=8,
        num_layers=2,
    )
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "model": "phynfp",
            "state_dict": model.state_dict(),
            "build": build,
            "dataset": "river-synth",
            "data_options": {},
        },
        path,
    )
    return path


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    folder = write_metr_la(tmp / "metr-nan", nan=True)
    checkpoint = write_checkpoint(tmp / "model.pt")
    return {
        "train": (["--dataset", f"metr-la:{folder}"], "--dataset"),
        "evaluate": (
            ["--dataset", f"metr-la:{folder}", "--checkpoint", str(checkpoint)],
            "--dataset",
        ),
        "demo": "demo runs on the embedded river-synth data only (no data-path flag)",
    }
