import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_and_threads():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
