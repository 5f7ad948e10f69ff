import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(1)

settings.register_profile("phynfp", database=None, deadline=None, max_examples=25)
settings.load_profile("phynfp")


def data_root() -> Path:
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture
def metr_la_dir() -> Path:
    path = data_root() / "traffic_la_bay" / "metr_la"
    if not (path / "adj_mx.pkl").is_file() or not (path / "los_speed.csv").is_file():
        pytest.skip(f"METR-LA data not found at {path}")
    return path


def chain(n: int = 3) -> torch.Tensor:
    """0 → 1 → ... → n−1."""
    return torch.stack([torch.arange(n - 1), torch.arange(1, n)])


def small_tree() -> tuple[torch.Tensor, int]:
    """A 7-node in-tree: 3→1, 4→1, 5→2, 6→2, 1→0, 2→0 (node 0 is the outlet)."""
    ei = torch.tensor([[3, 4, 5, 6, 1, 2], [1, 1, 2, 2, 0, 0]])
    return ei, 7


DATA_FIXTURES = {"metr_la_dir"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take the shared data folder through a fixture carry the ``dataset`` marker."""
    for item in items:
        if DATA_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.dataset)
