import os
from pathlib import Path

import pytest
import torch
from curmgae import make_curriculum_sbm, split_edges

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def data_root() -> Path:
    """Shared real data (``$ICML25_DATA`` or ``<repo>/../shared/data``)."""
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture(scope="session")
def tiny_graph():
    """300 nodes, 1,500 undirected edges with planted difficulty."""
    return make_curriculum_sbm(n_classes=3, n_per_class=100, n_edges=1500, seed=1)


@pytest.fixture(scope="session")
def tiny_split(tiny_graph):
    return split_edges(tiny_graph, seed=0)
