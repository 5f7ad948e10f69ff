import os
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(1)

# No example database in the tree (a stored failing example would replay in every later run), and
# no deadlines: torch's first calls are slow and timing varies on shared machines. Hypothesis still
# caches constants in its storage folder (./.hypothesis by default, read lazily): keep that out of
# the tree too, unless the caller chose a folder (nox sets HYPOTHESIS_STORAGE_DIRECTORY).
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY", str(Path(tempfile.gettempdir()) / "bpr-topk-hypothesis")
)
settings.register_profile("bpr_topk", database=None, deadline=None)
settings.load_profile("bpr_topk")


def data_root() -> Path:
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture
def cook_dir() -> Path:
    path = data_root() / "bpr" / "cook_county"
    if not (path / "train_x.csv").is_file():
        pytest.skip(f"Cook County data not found at {path}")
    return path


def pytest_configure(config: pytest.Config) -> None:
    # registered here: this package's pyproject.toml has no [tool.pytest.ini_options]
    config.addinivalue_line("markers", "slow: takes more than ~10 s (CI's quick tier skips it)")
    config.addinivalue_line("markers", "dataset: reads /work/shared/data (skips when absent)")
