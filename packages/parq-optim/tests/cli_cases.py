"""Bad-data cases for the repository's CLI conformance check (``tools/conformance.py``).

``nan_data(tmp)`` gives, for every subcommand with a data-path flag, the argv (without ``--out``)
that points the flag at data holding a NaN in this package's own format, and the flag the error
must name. ``demo`` has no data path (``--data`` is a choice of embedded sets).
"""

from __future__ import annotations

from pathlib import Path


def nan_csv_folder(tmp: Path) -> Path:
    """``*train*.csv`` / ``*test*.csv`` with a NaN in one train cell."""
    folder = tmp / "parq-nan-csv"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy_train.csv").write_text("label,a,b\n0,1.0,2.0\n1,3.0,nan\n1,0.5,0.0\n")
    (folder / "toy_test.csv").write_text("label,a,b\n1,0.0,1.0\n0,2.0,1.0\n")
    return folder


def nan_checkpoint(tmp: Path) -> Path:
    """A checkpoint as written by ``parq-optim train`` whose first weight holds a NaN."""
    import torch
    from parq_optim.data import make_synthetic
    from parq_optim.train import TrainConfig, build, save_checkpoint

    cfg = TrainConfig(method="parq", bits=1, hidden=8, epochs=1)
    data = make_synthetic(seed=0, n_train=64, n_test=16)
    model, opt, _ = build(cfg, data, steps_per_epoch=1)
    path = save_checkpoint(tmp / "parq-good.pt", cfg, data, model, opt)
    blob = torch.load(path, map_location="cpu", weights_only=True)
    blob["model"]["0.weight"][0, 0] = float("nan")
    bad = tmp / "parq-nan-checkpoint.pt"
    torch.save(blob, bad)
    return bad


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    return {
        "train": (["--data", str(nan_csv_folder(tmp)), "--epochs", "1"], "--data"),
        "export": (["--checkpoint", str(nan_checkpoint(tmp))], "--checkpoint"),
        "demo": "no data path: --data chooses between the embedded synthetic set and digits",
    }
