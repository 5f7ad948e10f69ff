import shutil

import numpy as np
import pytest
import torch
from curmgae import load_dataset, load_planetoid, make_curriculum_sbm, prepare_graph, split_edges
from torch_geometric.data import Data


def _keys(pairs, n):
    lo, hi = pairs.min(0).values, pairs.max(0).values
    return set((lo * n + hi).tolist())


def test_split_is_disjoint_and_leak_free(tiny_graph, tiny_split):
    s, n = tiny_split, tiny_graph.num_nodes
    full = _keys(tiny_graph.edge_index, n)
    tr, va, te = _keys(s.train_pos, n), _keys(s.val_pos, n), _keys(s.test_pos, n)
    assert not (tr & va) and not (tr & te) and not (va & te)
    assert tr | va | te == full
    assert len(te) == int(0.10 * len(full)) and len(va) == int(0.05 * len(full))
    vn, tn = _keys(s.val_neg, n), _keys(s.test_neg, n)
    assert len(vn) == s.val_neg.size(1) and len(tn) == s.test_neg.size(1)  # no (u,v)/(v,u) dups
    assert not (vn & full) and not (tn & full) and not (vn & tn)
    assert (s.val_neg[0] != s.val_neg[1]).all()
    assert not (_keys(s.edge_index, n) & (va | te))  # val/test never in message passing
    assert s.edge_index.size(1) == 2 * s.train_pos.size(1)


def test_split_seeded(tiny_graph):
    a, b = split_edges(tiny_graph, seed=3), split_edges(tiny_graph, seed=3)
    assert torch.equal(a.test_pos, b.test_pos) and torch.equal(a.test_neg, b.test_neg)
    assert not torch.equal(a.test_pos, split_edges(tiny_graph, seed=4).test_pos)


def test_synthetic_generator():
    d = make_curriculum_sbm(quick=True, seed=0)
    assert d.num_nodes == 1000 and d.edge_index.size(1) == 10000
    u, v = d.edge_index
    du = (d.y[u] - d.y[v]).abs()
    dist = torch.minimum(du, 10 - du)
    expect = torch.where(dist == 0, 0, torch.where(dist == 1, 1, 2))
    assert torch.equal(expect, d.edge_difficulty)
    assert 0.4 < float((d.edge_difficulty == 0).float().mean()) < 0.6  # homophily 0.5
    assert (u != v).all()
    assert int((d.train_mask | d.val_mask | d.test_mask).sum()) == 1000


def test_prepare_graph_checks():
    x = torch.randn(3, 2)
    with pytest.warns(UserWarning, match="symmetrising"):
        g = prepare_graph(Data(x=x, edge_index=torch.tensor([[0, 1], [1, 2]])))
    assert g.edge_index.size(1) == 4
    with pytest.raises(ValueError, match="at least one edge"):
        prepare_graph(Data(x=x, edge_index=torch.tensor([[0], [0]])))
    with pytest.raises(ValueError, match="dtype"):
        prepare_graph(Data(x=x, edge_index=torch.tensor([[0.0], [1.0]])))
    with pytest.raises(ValueError, match="shape"):
        prepare_graph(Data(x=x, edge_index=torch.tensor([0, 1])))
    # isolated nodes are fine
    g = prepare_graph(Data(x=torch.randn(10, 2), edge_index=torch.tensor([[0, 1], [1, 0]])))
    assert g.num_nodes == 10


def test_missing_planetoid_files_listed(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"ind\.cora\.x, ind\.cora\.tx"):
        load_planetoid(tmp_path, "Cora")
    with pytest.raises(ValueError, match="not accepted"):
        load_dataset("mnist", tmp_path)


def test_npz_loader(tmp_path):
    p = tmp_path / "g.npz"
    np.savez(
        p,
        x=np.random.default_rng(0).random((4, 3)),
        edge_index=np.array([[0, 1, 2], [1, 2, 3]]),
        y=np.arange(4),
    )
    with pytest.warns(UserWarning, match="symmetrising"):
        d = load_dataset(f"file:{p}")
    assert d.edge_index.size(1) == 6 and d.y.tolist() == [0, 1, 2, 3]


def test_cora_offline(tmp_path, monkeypatch, data_root):
    raw = data_root / "planetoid" / "Cora" / "raw"
    if not raw.is_dir():
        pytest.skip(f"Cora raw files not found at {raw}")
    monkeypatch.setenv("CURMGAE_CACHE", str(tmp_path / "cache"))
    ro = tmp_path / "ro" / "Cora"
    shutil.copytree(raw, ro / "raw")
    ro.chmod(0o555)  # read-only root: the loader must write elsewhere
    try:
        d = load_planetoid(tmp_path / "ro", "Cora")
    finally:
        ro.chmod(0o755)
    assert d.num_nodes == 2708 and d.edge_index.size(1) == 10556 and d.x.size(1) == 1433
    assert not (ro / "processed").exists()
