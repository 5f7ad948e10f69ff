import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)


def data_root() -> Path:
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture
def cook_dir() -> Path:
    path = data_root() / "bpr" / "cook_county"
    if not (path / "train_x.csv").is_file():
        pytest.skip(f"Cook County data not found at {path}")
    return path
