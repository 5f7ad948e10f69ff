import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from curmgae import make_curriculum_sbm, split_edges
from hypothesis import settings

torch.set_num_threads(1)

# No example database in the tree (a stale one would replay old failures), no deadlines for torch code.
settings.register_profile("curmgae", database=None, deadline=None, print_blob=True)
settings.load_profile("curmgae")


@pytest.fixture(scope="session")
def data_root() -> Path:
    """Shared real data (``$ICML25_DATA`` or ``<repo>/../shared/data``)."""
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own processed-data cache (never the user's ~/.cache)."""
    monkeypatch.setenv("CURMGAE_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def tiny_graph():
    """300 nodes, 1,500 undirected edges with planted difficulty."""
    return make_curriculum_sbm(n_classes=3, n_per_class=100, n_edges=1500, seed=1)


@pytest.fixture(scope="session")
def tiny_split(tiny_graph):
    return split_edges(tiny_graph, seed=0)


def write_planetoid(folder: Path, name: str = "cora", seed: int = 0, nan: bool = False) -> Path:
    """A small graph in the Planetoid raw format (520 nodes, 4 features, 2 classes, a ring) under
    ``folder/raw``: pickled scipy CSR features, one-hot label arrays, an adjacency dict, test.index."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, n_train, n_test, f = 520, 10, 10, 4
    feats = rng.random((n, f))
    if nan:
        feats[3, 2] = np.nan
    labels = np.eye(2)[rng.integers(0, 2, n)]
    raw = folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    parts = {
        "x": sp.csr_matrix(feats[:n_train]),
        "allx": sp.csr_matrix(feats[: n - n_test]),
        "tx": sp.csr_matrix(feats[n - n_test :]),
        "y": labels[:n_train],
        "ally": labels[: n - n_test],
        "ty": labels[n - n_test :],
        "graph": {i: [(i + 1) % n, (i - 1) % n] for i in range(n)},
    }
    for key, value in parts.items():
        with open(raw / f"ind.{name}.{key}", "wb") as fh:
            pickle.dump(value, fh)
    (raw / f"ind.{name}.test.index").write_text(
        "\n".join(str(i) for i in range(n - n_test, n)) + "\n"
    )
    return folder


@pytest.fixture
def planetoid():
    return write_planetoid


DATA_FIXTURES = {"data_root"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take the shared data folder through a fixture carry the ``dataset`` marker."""
    for item in items:
        if DATA_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.dataset)
