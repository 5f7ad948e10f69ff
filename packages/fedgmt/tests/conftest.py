import os
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
warnings.filterwarnings("ignore", message=".*Full backward hook.*")

# No example database in the tree (a stored failing example would replay in every later run) and no
# deadlines for torch code, whose first call is slow.
settings.register_profile(
    "fedgmt", database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("fedgmt")


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
