import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(1)

# No example database in the tree (a stored failing example would replay in every later run), and
# no deadlines: torch's first calls are slow and timing varies on shared machines.
settings.register_profile("cft_calibration", database=None, deadline=None, max_examples=40)
settings.load_profile("cft_calibration")


def data_root() -> Path:
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture
def obqa_dir() -> Path:
    path = data_root() / "openbookqa" / "Main"
    if not (path / "train.tsv").is_file():
        pytest.skip(f"OpenBookQA TSVs not found at {path}")
    return path


@pytest.fixture
def mmlu_dir() -> Path:
    path = data_root() / "mmlu"
    if not (path / "test").is_dir():
        pytest.skip(f"MMLU CSVs not found at {path}")
    return path


DATA_FIXTURES = {"obqa_dir", "mmlu_dir"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take the shared data folder through a fixture carry the ``dataset`` marker."""
    for item in items:
        if DATA_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.dataset)
