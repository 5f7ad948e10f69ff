import itertools
import math

import numpy as np
import pytest
import tar_gnn as T
import torch
from tar_gnn.splits import MASKS


def graph(n=300, seed=0):
    from torch_geometric.data import Data

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, 4 * n), generator=g)
    ei = torch.cat([ei, ei.flip(0)], 1)
    x = (torch.rand(n, 20, generator=g) < 0.2).float()
    y = torch.randint(0, 4, (n,), generator=g)
    return Data(x=x, edge_index=ei, y=y)


def check_partition(split, n):
    total = torch.zeros(n, dtype=torch.long)
    for m in MASKS:
        total += split.masks[m].long()
    assert bool((total == 1).all())  # disjoint, and their union covers every node


@pytest.mark.parametrize("domain", ["degree", "word", "norm"])
def test_covariate_split_follows_the_domain_order(domain):
    data = graph()
    split = T.good_covariate_split(data, domain, seed=0)
    n = data.num_nodes
    check_partition(split, n)
    values = T.domain_values(data, domain)
    train_block = (
        split.masks["train_mask"] | split.masks["id_val_mask"] | split.masks["id_test_mask"]
    )
    # descending: every OOD-test value <= every OOD-val value <= every training value
    assert values[split.masks["ood_test_mask"]].max() <= values[split.masks["ood_val_mask"]].min()
    assert values[split.masks["ood_val_mask"]].max() <= values[train_block].min()
    # cuts fall on domain boundaries: no value is shared by two blocks
    sets = [
        set(values[m].tolist())
        for m in (train_block, split.masks["ood_val_mask"], split.masks["ood_test_mask"])
    ]
    assert not (sets[0] & sets[1]) and not (sets[1] & sets[2])
    assert int(split.masks["id_val_mask"].sum()) == math.floor(0.1 * n)
    assert int(split.masks["id_test_mask"].sum()) == math.floor(0.1 * n)
    # environments: contiguous ids, monotone in the domain
    env = split.env_id[train_block]
    ids = sorted(torch.unique(env).tolist())
    assert ids == list(range(len(ids)))
    means = [values[train_block][env == e].mean().item() for e in ids]
    assert all(a >= b for a, b in itertools.pairwise(means))
    assert bool((split.env_id[~train_block] == -1).all())


def test_ascending_order_flips_the_blocks():
    data = graph()
    split = T.good_covariate_split(data, "degree", order="ascending")
    v = T.domain_values(data, "degree")
    assert v[split.masks["ood_test_mask"]].min() >= v[split.masks["train_mask"]].max()


def test_splits_are_deterministic_under_a_seed():
    data = graph()
    for fn in (T.good_covariate_split, T.good_concept_split):
        a, b, c = fn(data, "degree", seed=4), fn(data, "degree", seed=4), fn(data, "degree", seed=5)
        assert all(torch.equal(a.masks[m], b.masks[m]) for m in MASKS)
        assert torch.equal(a.env_id, b.env_id)
        assert not all(torch.equal(a.masks[m], c.masks[m]) for m in MASKS)


def test_concept_split_partition_and_id_sizes():
    data = graph(600)
    split = T.good_concept_split(data, "degree", seed=0)
    check_partition(split, data.num_nodes)
    train_all = split.env_id >= 0
    n_id = math.floor(0.15 * int(train_all.sum()))
    assert int(split.masks["id_val_mask"].sum()) == n_id == int(split.masks["id_test_mask"].sum())
    assert sorted(torch.unique(split.env_id[train_all]).tolist()) == [0, 1, 2]


def _half_label_corr(data, split, mask):
    dom = split.domain_id.double()
    counts = torch.bincount(split.domain_id)
    before = torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.long), counts[:-1]]), 0)
    low_half = (before[split.domain_id] < data.num_nodes / 2).double()
    y = data.y.double()
    high_label = (y > y.mean()).double()
    a, b = low_half[mask], high_label[mask]
    del dom
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])


@pytest.mark.dataset
def test_concept_split_flips_the_correlation_on_cora(cora_dir):
    data = T.load_planetoid(cora_dir)
    for domain in ("degree", "word"):
        split = T.good_concept_split(data, domain, seed=0)
        train = split.masks["train_mask"]
        test = split.masks["ood_test_mask"]
        assert _half_label_corr(data, split, train) > 0.3
        assert _half_label_corr(data, split, test) < -0.3


@pytest.mark.dataset
def test_planetoid_cora_loads_and_splits(cora_dir):
    data = T.load_planetoid(cora_dir)
    assert data.num_nodes == 2708 and int(data.y.max()) == 6
    assert data.x.sum(1).max() > 1  # raw bag of words, not row-normalised
    split = T.good_covariate_split(data, "degree")
    check_partition(split, 2708)
    assert split.info["sizes"]["id_val_mask"] == 270


def test_csbm_concept_colour_agreement_matches_p_env():
    data = T.make_csbm_ood(4000, seed=1)
    p_env = (0.95, 0.9, 0.85, 0.8, 0.75, 0.3, 0.0)
    for e, p in enumerate(p_env):
        sel = data.domain_id == e
        agree = float((data.colour[sel] == data.y[sel]).double().mean())
        assert abs(agree - (p + (1 - p) / 4)) < 0.06
    assert bool((data.minority == (data.colour != data.y)).all())


def test_csbm_modes_have_masks():
    for shift in ("covariate", "degree"):
        data = T.make_csbm_ood(400, shift=shift)
        total = sum(getattr(data, m).long() for m in MASKS)
        assert bool((total == 1).all())


def test_long_tail_split():
    data = graph(800)
    split = T.long_tail_split(data, imbalance_ratio=10, per_class=20, seed=0)
    y = data.y[split.masks["train_mask"]]
    counts = sorted(torch.bincount(y).tolist())
    assert counts == [2, 2, 20, 20]


def test_split_errors():
    data = graph()
    with pytest.raises(ValueError, match="unknown domain"):
        T.domain_values(data, "colour")
    with pytest.raises(ValueError, match="sum to 1"):
        T.good_covariate_split(data, "degree", ratios=(0.5, 0.2, 0.2))
    with pytest.raises(ValueError, match="single distinct value"):
        T.good_covariate_split(data, torch.ones(data.num_nodes))
    with pytest.raises(ValueError, match="one per node"):
        T.good_covariate_split(data, torch.arange(5).double())
    with pytest.raises(ValueError, match="unknown shift"):
        T.make_split(data, "label")


def test_user_column_and_save_load(tmp_path):
    data = graph()
    column = torch.arange(data.num_nodes).double() % 17
    data.year = column
    a = T.good_covariate_split(data, "attr:year")
    b = T.good_covariate_split(data, column)
    assert all(torch.equal(a.masks[m], b.masks[m]) for m in MASKS)
    path = T.save_split(tmp_path / "s.npz", a)
    c = T.load_split(path, data.num_nodes)
    assert all(torch.equal(a.masks[m], c.masks[m]) for m in MASKS)
    with pytest.raises(ValueError, match="nodes"):
        T.load_split(path, 5)
    arrays = dict(np.load(path))
    arrays["train_mask"] = arrays["train_mask"].astype(float) * 0.5
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="booleans"):
        T.load_split(tmp_path / "bad.npz")


def hub_and_leaves(hubs=10, leaves_per_hub=8):
    """A graph where most nodes have degree 1 (leaves), like CiteSeer's long low-degree tail: GOOD's
    degree cut (descending) falls inside the run of degree-1 nodes."""
    from torch_geometric.data import Data

    pairs = [(h, h + 1) for h in range(hubs - 1)]  # hubs in a chain
    leaf = hubs
    for h in range(hubs):  # hub h gets leaves_per_hub + h leaves: distinct hub degrees
        for _ in range(leaves_per_hub + h):
            pairs.append((h, leaf))
            leaf += 1
    n = leaf
    ei = torch.tensor(pairs).t()
    ei = torch.cat([ei, ei.flip(0)], 1)
    g = torch.Generator().manual_seed(0)
    return Data(x=torch.rand(n, 5, generator=g), edge_index=ei, y=torch.randint(0, 3, (n,)))


def cycle_pairs_isolated():
    """55 nodes on a cycle (degree 2), 15 disjoint pairs (degree 1), 15 isolated nodes: GOOD's cuts
    at 60 and 80 both fall inside the run of degree-1 nodes (positions 55..84)."""
    from torch_geometric.data import Data

    pairs = [(i, (i + 1) % 55) for i in range(55)] + [(55 + 2 * k, 56 + 2 * k) for k in range(15)]
    ei = torch.tensor(pairs).t()
    ei = torch.cat([ei, ei.flip(0)], 1)
    n = 100
    return Data(x=torch.rand(n, 5), edge_index=ei, y=torch.randint(0, 3, (n,)), num_nodes=n)


@pytest.mark.parametrize("isolated", [0, 1])
def test_covariate_fallback_when_ties_swallow_the_cut(isolated):
    data = cycle_pairs_isolated() if isolated else hub_and_leaves()
    n = int(data.num_nodes)
    with pytest.raises(ValueError, match="fallback"):
        T.good_covariate_split(data, "degree", fallback="error")
    with pytest.warns(UserWarning, match="fallback"):
        split = T.good_covariate_split(data, "degree", seed=0)
    check_partition(split, n)
    assert all(v > 0 for v in split.sizes().values())
    deg = T.domain_values(data, "degree")
    tr = split.masks["train_mask"] | split.masks["id_val_mask"] | split.masks["id_test_mask"]
    val, test = split.masks["ood_val_mask"], split.masks["ood_test_mask"]
    # still a covariate shift by degree: train >= OOD-val >= OOD-test
    assert deg[tr].min() >= deg[val].max() and deg[val].min() >= deg[test].max()
    if isolated:  # three distinct values around the cut: cuts at value changes, none spans splits
        assert split.info["cut_rule"] == "nearest"
        assert deg[tr].min() > deg[val].max() and deg[val].min() > deg[test].max()
    else:  # hubs then degree-1 leaves only: the cuts must go inside the run of ties
        assert split.info["cut_rule"] == "within"
        assert split.sizes()["ood_test_mask"] == n - math.floor(0.8 * n)


def test_within_fallback_keeps_the_ratios():
    data = cycle_pairs_isolated()
    n = int(data.num_nodes)
    with pytest.warns(UserWarning):
        split = T.good_covariate_split(data, "degree", fallback="within", seed=1)
    assert split.info["cut_rule"] == "within"
    assert split.sizes()["ood_val_mask"] == math.floor(0.8 * n) - math.floor(0.6 * n)


def test_good_rule_unchanged_when_it_works():
    split = T.good_covariate_split(graph(), "degree", seed=0)
    assert split.info["cut_rule"] == "good"
