import pytest
import torch
from hypothesis import HealthCheck, settings

# No example database in the tree (a stored failing example would replay in every later run)
# and no deadlines: torch's first calls are slow.
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
