import pytest
import torch
from hypothesis import settings

# No example database in the tree (a stored failing example would replay in every later run), and no
# deadlines: torch's first calls are slow and timing varies on shared machines.
settings.register_profile("rsd", database=None, deadline=None)
settings.load_profile("rsd")


@pytest.fixture(autouse=True)
def _seed_and_threads():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    yield
