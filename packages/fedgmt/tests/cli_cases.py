"""Bad-data cases for the repository's CLI conformance check (``tools/conformance.py``).

``nan_data(tmp)`` gives, for every subcommand with a data-path flag, the arguments that point the
flag at data holding a NaN in the loader's own format, and the flag the error must name.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np


def _idx(path: Path, magic: int, dims: tuple[int, ...], payload: bytes) -> None:
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as fh:
        fh.write(header + payload)


def nan_mnist(folder: Path) -> Path:
    """An MNIST IDX folder whose float32 training images hold one NaN pixel."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 40), ("t10k", 10)):
        images = np.full((n, 28, 28), 128.0, dtype=">f4")
        if split == "train":
            images[3, 4, 5] = np.nan
        _idx(folder / f"{split}-images-idx3-ubyte.gz", 0x0D03, (n, 28, 28), images.tobytes())
        labels = (np.arange(n) % 10).astype(np.uint8)
        _idx(folder / f"{split}-labels-idx1-ubyte.gz", 0x0801, (n,), labels.tobytes())
    return folder


def nan_agnews(folder: Path) -> Path:
    """An AG News folder whose test.csv has NaN for a class label."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [f'"{1 + i % 4}","title {i}","description {i}"' for i in range(12)]
    rows[5] = '"nan","a title","a description"'
    (folder / "test.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def mnist_model(path: Path) -> Path:
    """A saved (untrained) global model of the MNIST 2NN, as ``fedgmt run`` writes them."""
    from fedgmt import FedConfig
    from fedgmt.checkpoint import save_model
    from fedgmt.model import make_model

    cfg = FedConfig(dataset="mnist", num_clients=2, min_partition_size=1)
    return save_model(path, cfg, make_model(cfg, 784, 10).state_dict())


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    mnist = str(nan_mnist(tmp / "mnist"))
    agnews = str(nan_agnews(tmp / "ag_news"))
    model = str(mnist_model(tmp / "model.pt"))
    return {
        "run": (["--dataset", "mnist", "--data-dir", mnist, "--engine", "reference"], "--data-dir"),
        "compare": (["--dataset", "agnews", "--data-dir", agnews], "--data-dir"),
        "partition": (["--dataset", "mnist", "--data-dir", mnist], "--data-dir"),
        "check": (["--dataset", "agnews", "--data-dir", agnews], "--data-dir"),
        "evaluate": (["--model", model, "--data-dir", mnist], "--data-dir"),
        "demo": "demo runs on the embedded scikit-learn digits data only (no data-path flag)",
    }
