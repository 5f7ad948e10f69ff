"""Bad-data cases for the repository's CLI conformance check (``tools/conformance.py``).

``nan_data(tmp)`` gives, per subcommand with a data flag, the argv (without ``--out``) that points the
flag at data holding a NaN in curmgae's own formats, and the flag the one-line error must name.
"""

from __future__ import annotations

from pathlib import Path


def write_graph_npz(path: Path, nan: bool = False) -> Path:
    """A 40-node graph (a ring plus chords to the node two ahead: 80 edges) as a ``.npz`` holding
    x [40, 3], edge_index [2, 80] and y [40]; ``nan`` puts a NaN in x at row 2, column 1."""
    import numpy as np

    n = 40
    x = np.random.default_rng(0).random((n, 3))
    if nan:
        x[2, 1] = np.nan
    src = np.concatenate([np.arange(n), np.arange(n)])
    dst = np.concatenate([(np.arange(n) + 1) % n, (np.arange(n) + 2) % n])
    np.savez(path, x=x, edge_index=np.stack([src, dst]), y=np.arange(n) % 2)
    return path


def write_checkpoint(path: Path, dataset: Path, nan: bool = False) -> Path:
    """A small checkpoint in the format ``curmgae pretrain`` writes; ``nan`` puts a NaN in a weight."""
    import torch
    from curmgae import CurMGAE, CurMGAEConfig, save_checkpoint

    cfg = CurMGAEConfig(hidden=4, decode_channels=8, epochs=1)
    model = CurMGAE.from_config(3, cfg)
    if nan:
        with torch.no_grad():
            next(model.parameters()).view(-1)[0] = float("nan")
    return save_checkpoint(
        path,
        model,
        config=cfg,
        method="curmgae",
        dataset=str(dataset.resolve()),
        root=None,
        split_seed=0,
        quick=False,
        seed=0,
        in_channels=3,
    )


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    tmp.mkdir(parents=True, exist_ok=True)
    good = write_graph_npz(tmp / "graph.npz")
    bad = write_graph_npz(tmp / "nan-features.npz", nan=True)
    ckpt = write_checkpoint(tmp / "model.pt", good)
    return {
        "pretrain": (["--dataset", str(bad), "--epochs", "1"], "--dataset"),
        "evaluate": (["--checkpoint", str(ckpt), "--dataset", str(bad)], "--dataset"),
        "demo": "no data flag: demo runs on the embedded synthetic graph",
    }
