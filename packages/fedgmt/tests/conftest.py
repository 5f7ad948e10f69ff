import os
import warnings
from pathlib import Path

import pytest
import torch

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
warnings.filterwarnings("ignore", message=".*Full backward hook.*")


def data_root() -> Path:
    return Path(
        os.environ.get(
            "ICML25_DATA", Path(__file__).resolve().parents[3].parent / "shared" / "data"
        )
    )


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield
