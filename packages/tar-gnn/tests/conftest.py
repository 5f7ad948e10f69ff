import os
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(1)
warnings.filterwarnings("ignore", message="Sparse invariant checks")
settings.register_profile("tar", database=None, deadline=None, max_examples=60)
settings.load_profile("tar")


def data_root() -> Path:
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture
def cora_dir() -> Path:
    path = data_root() / "planetoid" / "Cora"
    if not (path / "raw" / "ind.cora.x").is_file():
        pytest.skip(f"Planetoid Cora not found at {path}")
    return path


DATA_FIXTURES = {"cora_dir"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take the shared data folder through a fixture carry the ``dataset`` marker."""
    for item in items:
        if DATA_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.dataset)
