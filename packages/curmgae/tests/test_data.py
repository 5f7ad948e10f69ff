import json
import re
import shutil

import numpy as np
import pytest
import torch
from curmgae import load_dataset, load_planetoid, make_curriculum_sbm, prepare_graph, split_edges
from curmgae.data import PLANETOID_RAW, cache_dir
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


def test_missing_planetoid_files_named(tmp_path, planetoid):
    with pytest.raises(FileNotFoundError, match=r"expected ind\.cora\.x, ind\.cora\.tx"):
        load_planetoid(tmp_path, "Cora")  # nothing there: the expected names are listed
    planetoid(tmp_path / "Cora")
    (tmp_path / "Cora" / "raw" / "ind.cora.graph").unlink()
    with pytest.raises(FileNotFoundError) as info:
        load_planetoid(tmp_path, "Cora")
    msg = str(info.value)
    assert "lacks ind.cora.graph" in msg and "7 of 8" in msg
    assert "ind.cora.allx" not in msg  # only the missing file is named
    with pytest.raises(ValueError, match="not accepted"):
        load_dataset("mnist", tmp_path)


def test_planetoid_format_reader(tmp_path, planetoid):
    planetoid(tmp_path / "Cora")
    d = load_planetoid(tmp_path, "Cora")
    assert d.num_nodes == 520 and d.x.shape == (520, 4)
    assert d.edge_index.size(1) == 2 * 520  # the ring, both directions
    assert int(d.train_mask.sum()) == 10 and int(d.test_mask.sum()) == 10


def test_cache_is_keyed_by_raw_content_not_name(tmp_path, planetoid):
    """Two roots holding different Cora files (same names and sizes) give their own graphs."""
    a = planetoid(tmp_path / "a" / "Cora", seed=0)
    b = planetoid(tmp_path / "b" / "Cora", seed=1)
    for f in ("ind.cora.x", "ind.cora.allx", "ind.cora.tx"):
        assert (a / "raw" / f).stat().st_size == (b / "raw" / f).stat().st_size
    da = load_planetoid(tmp_path / "a", "Cora")
    db = load_planetoid(tmp_path / "b", "Cora")
    assert not torch.equal(da.x, db.x)
    assert torch.equal(load_planetoid(tmp_path / "a", "Cora").x, da.x)  # served from the cache
    stamps = sorted((cache_dir() / "processed").glob("Cora-*/cache.json"))
    assert len(stamps) == 2
    ident = json.loads(stamps[0].read_text())
    assert set(ident["files"]) == {f"ind.cora.{s}" for s in PLANETOID_RAW}
    assert ident["reader"].endswith("read_planetoid_data") and "torch_geometric" in ident
    # changing the files in place invalidates their cache entry
    planetoid(tmp_path / "a" / "Cora", seed=2)
    assert not torch.equal(load_planetoid(tmp_path / "a", "Cora").x, da.x)


def test_force_reload_and_corrupt_cache(tmp_path, planetoid, monkeypatch):
    import torch_geometric.io.planetoid as pyg_planetoid

    planetoid(tmp_path / "Cora")
    calls = []
    real = pyg_planetoid.read_planetoid_data

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(pyg_planetoid, "read_planetoid_data", counting)
    first = load_planetoid(tmp_path, "Cora")
    load_planetoid(tmp_path, "Cora")
    assert len(calls) == 1  # cached
    load_planetoid(tmp_path, "Cora", force_reload=True)
    assert len(calls) == 2
    (payload,) = (cache_dir() / "processed").glob("Cora-*/data.pt")
    payload.write_bytes(payload.read_bytes()[:100])  # a cache cut short is rebuilt, not trusted
    assert torch.equal(load_planetoid(tmp_path, "Cora").x, first.x) and len(calls) == 3


@pytest.mark.parametrize("victim", ["ind.cora.graph", "ind.cora.allx"])
@pytest.mark.parametrize("damage", ["truncate", "empty"])
def test_truncated_or_empty_raw_file_is_named(tmp_path, planetoid, victim, damage):
    planetoid(tmp_path / "Cora")
    path = tmp_path / "Cora" / "raw" / victim
    path.write_bytes(path.read_bytes()[: 40 if damage == "truncate" else 0])
    with pytest.raises(ValueError, match=re.escape(str(path))):
        load_planetoid(tmp_path, "Cora")


def test_planetoid_nan_features_rejected(tmp_path, planetoid):
    planetoid(tmp_path / "Cora", nan=True)
    with pytest.raises(ValueError, match=r"Planetoid Cora in .*non-finite.*row 3, column 2"):
        load_planetoid(tmp_path, "Cora")


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


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_npz_bad_input_is_named(tmp_path):
    x = np.random.default_rng(0).random((4, 3))
    ei = np.array([[0, 1, 2], [1, 2, 3]])
    p = _npz(tmp_path / "no-ei.npz", x=x)
    with pytest.raises(ValueError, match=r"no-ei\.npz: missing field 'edge_index'.*found: x"):
        load_dataset(p)
    bad = x.copy()
    bad[1, 2] = np.inf
    with pytest.raises(
        ValueError, match=r"nan\.npz: node features x .*1 non-finite.*row 1, column 2"
    ):
        load_dataset(_npz(tmp_path / "nan.npz", x=bad, edge_index=ei))
    with pytest.raises(ValueError, match="edge_index must hold integers"):
        load_dataset(_npz(tmp_path / "frac.npz", x=x, edge_index=ei + 0.5))
    with pytest.raises(ValueError, match=r"edge_index must have shape \[2, E\]"):
        load_dataset(_npz(tmp_path / "shape.npz", x=x, edge_index=ei.T))
    with pytest.raises(ValueError, match=r"y must have shape \[N\] = \[4\]"):
        load_dataset(_npz(tmp_path / "y.npz", x=x, edge_index=ei, y=np.arange(3)))
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.npz is empty"):
        load_dataset(empty)
    cut = tmp_path / "cut.npz"
    cut.write_bytes((tmp_path / "y.npz").read_bytes()[:200])
    with pytest.raises(ValueError, match=r"cut\.npz"):
        load_dataset(cut)


def test_prepare_graph_rejects_non_finite_features():
    x = torch.randn(3, 2)
    x[2, 0] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite.*row 2, column 0"):
        prepare_graph(Data(x=x, edge_index=torch.tensor([[0, 1], [1, 0]])))


def test_split_refuses_graphs_too_small_for_its_ratios():
    path = Data(x=torch.randn(6, 2), edge_index=torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]))
    with pytest.warns(UserWarning, match="symmetrising"):
        with pytest.raises(ValueError, match=r"5 undirected edge\(s\).*at least 20 needed"):
            split_edges(path)
    assert split_edges(path, val=0.0, test=0.2).test_pos.size(1) == 1
