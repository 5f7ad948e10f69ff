import os
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

# No example database (a stored failing example would replay in every later run) and no
# deadlines (torch's first calls are slow). Hypothesis still caches constants in its storage
# folder (./.hypothesis by default, read lazily): keep that out of the tree too, unless the
# caller chose a folder (nox sets HYPOTHESIS_STORAGE_DIRECTORY).
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY", str(Path(tempfile.gettempdir()) / "parq-optim-hypothesis")
)
settings.register_profile(
    "parq-optim",
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("parq-optim")


@pytest.fixture(autouse=True)
def _seed_and_threads():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
