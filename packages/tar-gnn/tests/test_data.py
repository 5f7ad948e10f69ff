import numpy as np
import pytest
import tar_gnn as T
import torch


def write_npz(path, **over):
    arrays = {
        "x": np.random.default_rng(0).standard_normal((10, 3)),
        "edge_index": np.array([[0, 1, 2], [1, 2, 3]]),
        "y": np.arange(10) % 2,
    }
    arrays.update(over)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    np.savez(path, **arrays)
    return path


def test_npz_round_trip(tmp_path):
    data = T.load_file(write_npz(tmp_path / "g.npz"))
    assert data.num_nodes == 10 and data.edge_index.dtype == torch.long


@pytest.mark.parametrize(
    "over, match",
    [
        ({"x": np.full((10, 3), np.nan)}, "NaN"),
        ({"y": np.arange(10) * 0.5}, "fractional"),
        ({"edge_index": np.array([[0], [42]])}, "outside"),
        ({"y": np.arange(9)}, "one label per node"),
        ({"y": None}, "missing array 'y'"),
        ({"x": np.zeros(10)}, "2-D"),
    ],
)
def test_npz_bad_input(tmp_path, over, match):
    with pytest.raises(ValueError, match=match):
        T.load_file(write_npz(tmp_path / "g.npz", **over))


def test_empty_and_unknown_files(tmp_path):
    (tmp_path / "e.npz").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        T.load_file(tmp_path / "e.npz")
    (tmp_path / "g.csv").write_text("1,2")
    with pytest.raises(ValueError, match="unknown format"):
        T.load_file(tmp_path / "g.csv")
    (tmp_path / "t.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match="npz"):
        T.load_file(tmp_path / "t.npz")


def test_good_processed_loader_on_a_tiny_collated_file(tmp_path):
    from torch_geometric.data import Data, InMemoryDataset

    n = 12
    mask = lambda idx: torch.tensor([i in idx for i in range(n)])  # noqa: E731
    g = Data(
        x=torch.randn(n, 4),
        edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]]),
        y=torch.arange(n) % 3,
        train_mask=mask(range(0, 6)),
        val_mask=mask(range(6, 8)),
        test_mask=mask(range(8, 10)),
        id_val_mask=mask([10]),
        id_test_mask=mask([11]),
        env_id=torch.arange(n) % 2,
        domain_id=torch.arange(n),
    )
    data, slices = InMemoryDataset.collate([g])
    folder = tmp_path / "GOODCora" / "degree" / "processed"
    folder.mkdir(parents=True)
    torch.save((data, slices), folder / "covariate.pt")
    with pytest.warns(UserWarning, match="trusted"):
        out = T.load_good_processed(tmp_path, "GOODCora", "degree", "covariate")
    assert out.ood_val_mask.tolist() == g.val_mask.tolist()
    assert out.ood_test_mask.tolist() == g.test_mask.tolist()
    assert not hasattr(out, "val_mask") or out.get("val_mask") is None
    assert out.env_id[~out.train_mask].eq(-1).all()
    with pytest.raises(ValueError, match="fetched by the user"):
        T.load_good_processed(tmp_path, "GOODCora", "word", "covariate")
    with pytest.raises(ValueError, match="unknown GOOD dataset"):
        T.load_good_processed(tmp_path, "GOODFoo", "degree", "covariate")


def test_planetoid_folder_errors(tmp_path):
    with pytest.raises(ValueError, match="no Planetoid files"):
        T.load_planetoid(tmp_path)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "ind.toy.x").write_bytes(b"")
    with pytest.raises(ValueError, match="missing Planetoid file"):
        T.load_planetoid(tmp_path)


@pytest.mark.parametrize("clustered", [True, False])
def test_csbm_shift_family_structure(clustered):
    data = T.make_csbm_shift(1000, 0, clustered=clustered, shift=0.9, minority=0.1)
    y, colour, mino = data.y, data.colour, data.minority
    pool = data.train_mask | data.id_val_mask | data.id_test_mask
    # colour = label on the majority, flipped on the minority and on about 90% of OOD nodes
    assert bool((colour[pool & ~mino] == y[pool & ~mino]).all())
    assert bool((colour[mino] != y[mino]).all())
    assert abs(float(mino[pool].double().mean()) - 0.1) < 0.01
    ood = data.ood_test_mask | data.ood_val_mask
    assert abs(float((colour[ood] != y[ood]).double().mean()) - 0.9) < 0.05
    # group labels for the oracle on training nodes only
    assert set(data.env_id[data.train_mask].tolist()) == {0, 1}
    assert bool((data.env_id[~pool] == -1).all())
    # clustered: minority nodes' edges mostly stay inside the minority; scattered: mostly not
    src, dst = data.edge_index
    from_min = mino[src]
    inside = float((mino[dst][from_min]).double().mean())
    assert inside > 0.5 if clustered else inside < 0.3
    # OOD nodes mostly see OOD neighbours (region assortativity)
    assert float(ood[dst][ood[src]].double().mean()) > 0.8
    with pytest.raises(ValueError, match="minority"):
        T.make_csbm_shift(1000, 0, minority=0.6)
