"""Bad-input cases for tools/conformance.py: data holding NaN in this package's formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# The graph readers build torch_geometric's Data: import it with this module (the conformance check
# loads it before the bad-input cases), so those cases time the check itself, not torch's first import
# (the CLI imports nothing heavy before a command runs).
import torch_geometric.data  # noqa: F401


def _nan_graph(tmp: Path) -> Path:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 3))
    x[4, 1] = np.nan
    edge_index = np.array([[i for i in range(19)], [i + 1 for i in range(19)]])
    y = np.arange(20) % 2
    path = tmp / "nan_graph.npz"
    np.savez(path, x=x, edge_index=edge_index, y=y)
    return path


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    graph = _nan_graph(tmp)
    checkpoint = tmp / "model.pt"
    checkpoint.write_bytes(b"not read: --data fails first")
    return {
        "train": (["--dataset", "file", "--data", str(graph), "--shift", "covariate"], "--data"),
        "split": (["--dataset", "file", "--data", str(graph), "--shift", "covariate"], "--data"),
        "evaluate": (
            ["--dataset", "file", "--data", str(graph), "--checkpoint", str(checkpoint)],
            "--data",
        ),
        "demo": "demo runs on the embedded synthetic graph only (no data flag)",
    }
