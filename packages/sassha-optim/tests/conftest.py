import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

# No example database in the tree (a stored failing example would replay in every later run), and
# no deadlines: torch's first calls are slow and timing varies on shared machines.
settings.register_profile("sassha", database=None, deadline=None)
settings.load_profile("sassha")


def data_root() -> Path:
    return Path(
        os.environ.get(
            "ICML25_DATA", Path(__file__).resolve().parents[3].parent / "shared" / "data"
        )
    )


@pytest.fixture
def mnist_dir() -> Path:
    path = Path(os.environ.get("SASSHA_OPTIM_DATA_DIR", data_root() / "mnist" / "raw"))
    if not path.exists():
        pytest.skip(f"MNIST IDX files not found at {path}")
    return path


@pytest.fixture(autouse=True)
def _seed_and_threads():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    yield


DATA_FIXTURES = {"mnist_dir"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take the shared data folder through a fixture carry the ``dataset`` marker."""
    for item in items:
        if DATA_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.dataset)
