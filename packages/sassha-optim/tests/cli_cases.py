"""Bad-data cases for the repository's CLI conformance check (``tools/conformance.py``).

``nan_data(tmp)`` returns, for every subcommand with a data flag, the arguments (without ``--out``)
that point the flag at data holding a NaN, and the flag the one-line error must name.
"""

from __future__ import annotations

from pathlib import Path


def nan_folder(tmp: Path) -> Path:
    """A CSV train/test folder (label column + 3 features) whose training split holds a NaN."""
    folder = tmp / "nan-csv"
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["label,a,b,c"] + [f"{i % 2},{i},{i + 1},{2 * i}" for i in range(8)]
    rows[3] = "0,0.5,nan,1"
    (folder / "train.csv").write_text("\n".join(rows) + "\n")
    (folder / "test.csv").write_text("label,a,b,c\n0,1,2,3\n1,4,5,6\n")
    return folder


def tiny_checkpoint(tmp: Path) -> Path:
    """A checkpoint as 'sassha-optim train' writes it, for a 3-feature, 2-class MLP (no training)."""
    import torch
    from sassha_optim.training import MLP

    path = tmp / "checkpoint.pt"
    model = MLP(3, 2, (4,))
    torch.save(
        {
            "format": "sassha-optim checkpoint 1",
            "model": model.state_dict(),
            "hidden": [4],
            "n_features": 3,
            "n_classes": 2,
            "data": "synthetic",
            "seed": 0,
            "max_train": None,
            "max_test": None,
        },
        path,
    )
    return path


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    folder = nan_folder(tmp)
    return {
        "demo": (["--data", str(folder), "--quick"], "--data"),
        "train": (["--data", str(folder), "--epochs", "1"], "--data"),
        "evaluate": (["--checkpoint", str(tiny_checkpoint(tmp)), "--data", str(folder)], "--data"),
    }
