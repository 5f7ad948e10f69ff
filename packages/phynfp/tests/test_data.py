"""Generators and loaders: river-synth (tree, water balance, direction), METR-LA, LamaH-CE, WNTR."""

import calendar
import pickle
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_cases import write_metr_la
from phynfp import (
    check_tree,
    chronological_split,
    is_dag,
    load_dcrnn,
    load_lamah,
    load_metr_la,
    make_river,
    simulate_river,
    write_lamah_folder,
)


@pytest.fixture(scope="module")
def river():
    return simulate_river(num_nodes=64, hours=8760, seed=0)


def test_river_is_a_rooted_in_tree(river):
    ei = torch.as_tensor(river.edge_index)
    assert ei.shape == (2, 63)
    assert check_tree(ei, 64) == 0
    assert is_dag(ei, 64)
    outdeg = np.bincount(river.edge_index[0], minlength=64)
    assert outdeg[0] == 0 and (outdeg[1:] == 1).all()


def test_river_discharge_positive_finite_and_deterministic(river):
    assert np.isfinite(river.discharge).all() and (river.discharge > 0).all()
    again = simulate_river(num_nodes=64, hours=8760, seed=0)
    assert np.array_equal(again.discharge, river.discharge)
    assert np.array_equal(again.edge_attr, river.edge_attr)
    assert not np.array_equal(
        simulate_river(num_nodes=64, hours=8760, seed=1).discharge, river.discharge
    )


@pytest.mark.parametrize("routing", ["muskingum", "lag"])
def test_river_conserves_mass_hour_by_hour(routing):
    sim = simulate_river(num_nodes=40, hours=2000, routing=routing, seed=3)
    change = np.diff(sim.storage)
    budget = sim.lateral[1:].sum(1) - sim.discharge[:-1, 0]  # lateral input − outlet outflow
    scale = np.abs(budget).max()
    np.testing.assert_allclose(change, budget, rtol=0, atol=1e-9 * scale)
    # each node is a linear reservoir: S_i(t) − S_i(t−1) = In_i(t) − Q_i(t−1), with In_i ≥ lateral
    node_in = np.diff(sim.node_storage, axis=0) + sim.discharge[:-1]
    assert (node_in >= sim.lateral[1:] - 1e-9 * scale).all()


def test_muskingum_coefficients_are_nonnegative(river):
    travel = river.extra["travel_time_h"]
    n = np.maximum(1, np.ceil(travel / 2.5))
    k = np.maximum(travel / n, 0.625)
    x = 0.2
    d = 2 * k * (1 - x) + 1
    for c in ((1 - 2 * k * x) / d, (1 + 2 * k * x) / d, (2 * k * (1 - x) - 1) / d):
        assert (c >= -1e-12).all()


def _ridge_mse(data, neighbours):
    g = data.groups[0]
    src, dst = g.edge_index.numpy()
    if neighbours == "out":
        src, dst = dst, src
    cnt = np.maximum(np.bincount(dst, minlength=g.num_nodes), 1)

    def feats(split):
        ((_, starts),) = data.splits[split]
        x, y = data.batch(0, starts)
        own = x[..., 0].numpy()
        if neighbours is None:
            f = own
        else:
            nb = np.zeros_like(own)
            np.add.at(nb, (slice(None), dst), own[:, src])
            f = np.concatenate([own, nb / cnt[None, :, None]], -1)
        return f.reshape(-1, f.shape[-1]), y.numpy().reshape(-1)

    a, b = feats("train")
    at, bt = feats("test")
    a = np.c_[a, np.ones(len(a))]
    w = np.linalg.solve(a.T @ a + 1e-2 * np.eye(a.shape[1]), a.T @ b)
    return float(np.mean((np.c_[at, np.ones(len(at))] @ w - bt) ** 2))


def test_river_carries_information_downstream_only():
    """Ridge on [own ‖ mean of upstream windows] beats own window; downstream windows add nothing."""
    data = make_river(64, 8760, train_stride=3)
    own, up, down = _ridge_mse(data, None), _ridge_mse(data, "in"), _ridge_mse(data, "out")
    assert up < 0.97 * own
    assert down >= 0.98 * own


def test_river_cache_round_trip(tmp_path):
    a = make_river(12, 600, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("river-*.npz"))) == 1
    b = make_river(12, 600, cache_dir=tmp_path)
    assert torch.equal(a.groups[0].series, b.groups[0].series)


def test_chronological_split_has_gaps_and_no_overlap():
    split = chronological_split(1000, 24, 6, strides=(1, 1, 1))
    gap = 24 + 6
    assert split["train"].max() + gap <= split["val"].min()
    assert split["val"].max() + gap <= split["test"].min()
    assert split["test"].max() + gap <= 1000


def test_reversed_dataset_flips_every_edge():
    data = make_river(12, 600)
    rev = data.reversed()
    assert torch.equal(rev.groups[0].edge_index, data.groups[0].edge_index.flip(0))
    assert torch.equal(rev.groups[0].edge_attr, data.groups[0].edge_attr)
    assert rev.reversed().groups[0].edge_index.equal(data.groups[0].edge_index)


def test_headwater_reverse_edges_make_cycles():
    data = make_river(12, 600).with_headwater_reverse_edges()
    g = data.groups[0]
    assert not is_dag(g.edge_index, g.num_nodes)
    assert g.edge_attr.size(0) == g.edge_index.size(1)


# ------------------------------------------------------------------------------------------ METR-LA


def test_dcrnn_loader_builds_directed_edges_row_to_column(tmp_path):
    folder = write_metr_la(tmp_path / "m")
    data = load_metr_la(folder)
    g = data.groups[0]
    pairs = set(map(tuple, g.edge_index.t().tolist()))
    assert pairs == {(0, 1), (1, 2), (2, 3), (3, 0)}  # W_ij > 0 → i → j; diagonal dropped
    assert data.edge_feature_names == ("weight", "pseudo_distance")
    assert data.num_features == 3


def test_dcrnn_loader_rejects_nan_with_row_and_column(tmp_path):
    folder = write_metr_la(tmp_path / "m", nan=True)
    with pytest.raises(ValueError, match=r"los_speed.csv: NaN or inf at row 8, column 3"):
        load_metr_la(folder)


def test_dcrnn_loader_rejects_header_mismatch_and_foreign_pickles(tmp_path):
    folder = write_metr_la(tmp_path / "m")
    text = (folder / "los_speed.csv").read_text().splitlines()
    text[0] = ",".join(reversed(text[0].split(",")))
    (folder / "los_speed.csv").write_text("\n".join(text))
    with pytest.raises(ValueError, match="header must list"):
        load_metr_la(folder)
    with open(folder / "adj_mx.pkl", "wb") as fh:
        pickle.dump([["a"], {"a": 0}, Path(".")], fh)
    with pytest.raises(pickle.UnpicklingError, match="refusing to load global"):
        load_dcrnn(folder / "adj_mx.pkl", folder / "los_speed.csv")
    with pytest.raises(FileNotFoundError, match=r"adj_mx\.pkl and los_speed\.csv"):
        load_metr_la(tmp_path)


@pytest.mark.dataset
def test_metr_la_shared_data(metr_la_dir):
    data = load_metr_la(metr_la_dir.parent)
    g = data.groups[0]
    assert g.num_nodes == 207 and g.series.shape == (2016, 207, 3)
    assert not is_dag(g.edge_index, 207)
    assert torch.isfinite(g.series).all()


# ------------------------------------------------------------------------------------------- LamaH

YEARS = [2014, 2015, 2016]


@pytest.fixture(scope="module")
def lamah_folder(tmp_path_factory):
    """A 6-gauge, 3-year LamaH-CE folder: 5 → 2 → 1 → 0(outlet 399), 3 → 1, 4 → 2; gauge 2 has one
    zero discharge (invalid: removed and its in-edges rewired to gauge 1)."""
    root = tmp_path_factory.mktemp("lamah")
    hours = sum(24 * (366 if calendar.isleap(y) else 365) for y in YEARS)
    sim = simulate_river(num_nodes=6, hours=hours, seed=5)
    ei = np.array([[1, 2, 3, 4, 5], [0, 1, 1, 2, 2]])
    attr = np.array(
        [[3.0, 10.0, 0.0], [4.0, 20.0, 0.0], [5.0, 30.0, 0.0], [6.0, 40.0, 0.0], [7.0, 50.0, 0.0]]
    )
    feats = sim.features.astype(np.float64)
    feats[100, 2, 0] = 0.0  # gauge of node 2: one zero discharge
    ids = write_lamah_folder(root, ei, attr, feats, YEARS, gauge_ids=[399, 11, 12, 13, 14, 15])
    return root, ids, feats


@pytest.mark.slow
def test_lamah_removes_invalid_gauge_and_rewires(lamah_folder):
    root, _, _ = lamah_folder
    data = load_lamah(root, window=24, lead=6)
    assert data.info["gauges"] == [11, 13, 14, 15, 399]
    assert data.info["removed"] == [12]
    g = data.groups[0]
    index = {gid: i for i, gid in enumerate(data.info["gauges"])}
    pairs = {tuple(p) for p in g.edge_index.t().tolist()}
    expected = {
        (index[11], index[399]),
        (index[13], index[11]),
        (index[14], index[11]),
        (index[15], index[11]),
    }
    assert pairs == expected
    raw = load_lamah(root, standardize_edges=False)
    e = raw.groups[0]
    k = next(
        i for i, p in enumerate(e.edge_index.t().tolist()) if tuple(p) == (index[14], index[11])
    )
    torch.testing.assert_close(e.edge_attr[k], torch.tensor([6.0 + 4.0, 40.0 + 20.0, 60.0 / 10.0]))


def test_lamah_window_counts_and_year_splits(lamah_folder):
    root, _, _ = lamah_folder
    w, lead, stride = 24, 6, 5
    data = load_lamah(root, window=w, lead=lead, stride=stride, eval_stride=stride)

    def count(year):
        days = 366 if calendar.isleap(year) else 365
        return (24 * days - (w + lead)) // stride + 1

    assert data.num_windows("train") == count(2014)
    assert data.num_windows("val") == count(2015)
    assert data.num_windows("test") == count(2016)


def test_lamah_statistics_use_years_up_to_2015(lamah_folder):
    root, ids, feats = lamah_folder
    data = load_lamah(root)
    col = ids.index(399)
    h = 24 * 365 * 2  # 2014 + 2015 (neither is a leap year)
    q = feats[:h, col, 0].astype(np.float32).astype(np.float64)
    node = data.info["gauges"].index(399)
    assert float(data.groups[0].mean[node]) == pytest.approx(q.mean(), rel=1e-4)
    assert float(data.groups[0].std[node]) == pytest.approx(q.std(), rel=1e-3)


def test_lamah_opens_no_network_connection(lamah_folder, monkeypatch):
    def guard(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", guard)
    monkeypatch.setattr(socket, "create_connection", guard)
    load_lamah(lamah_folder[0])


def test_lamah_cycle_in_next_down_is_rejected(tmp_path, lamah_folder):
    import shutil

    root = tmp_path / "cyc"
    shutil.copytree(lamah_folder[0], root)
    stream = root / "B_basins_intermediate_all/1_attributes/Stream_dist.csv"
    lines = stream.read_text().splitlines()
    lines = [ln.replace("13;11;", "13;14;") if ln.startswith("13;") else ln for ln in lines]
    lines = [ln.replace("14;12;", "14;13;") if ln.startswith("14;") else ln for ln in lines]
    stream.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"cycle .* must be a tree"):
        load_lamah(root)


def test_lamah_nan_and_missing_folder_are_reported(tmp_path, lamah_folder):
    import shutil

    with pytest.raises(FileNotFoundError, match="Zenodo record 5153305"):
        load_lamah(tmp_path)
    root = tmp_path / "nan"
    shutil.copytree(lamah_folder[0], root)
    path = root / "D_gauges/2_timeseries/hourly/ID_11.csv"
    lines = path.read_text().splitlines()
    cells = lines[5].split(";")
    cells[5] = "nan"
    lines[5] = ";".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"ID_11.csv: row 6, column 'qobs'"):
        load_lamah(root)


# -------------------------------------------------------------------------------------------- WNTR


@pytest.fixture(scope="module")
def net1(tmp_path_factory):
    pytest.importorskip("wntr")
    from phynfp import simulate_wntr

    cache = tmp_path_factory.mktemp("wntr-cache")
    return simulate_wntr("Net1", scenarios=3, hours=24, cache_dir=cache), cache


def test_wntr_net1_builds_eleven_nodes_without_nan(net1):
    sim, _ = net1
    assert sim.node_names.size == 11
    for series in (sim.quality, sim.demand, sim.pressure, sim.flow):
        assert np.isfinite(series).all()
    assert sim.quality.max() > 0  # the injected chemical reaches the network


def test_wntr_flows_conserve_mass_at_junctions(net1):
    from phynfp import junction_balance

    sim, _ = net1
    for s in range(sim.num_scenarios):
        residual = junction_balance(sim, s)
        # EPANET solves continuity to its hydraulic accuracy: residuals ≪ the typical flow.
        assert np.abs(residual).max() < 1e-5
        assert np.abs(sim.flow[s]).max() > 1e-2


def test_wntr_orientation_follows_mean_flow_and_cache_is_used(net1, tmp_path, monkeypatch):
    from phynfp import load_wntr
    from phynfp.wdn import scenario_graph

    sim, cache = net1
    monkeypatch.chdir(tmp_path)
    data = load_wntr("Net1", scenarios=3, hours=24, cache_dir=cache)
    assert list(tmp_path.iterdir()) == []  # nothing written to the working folder
    assert len(list(cache.glob("wntr-Net1-*.npz"))) == 1
    ei, _ = scenario_graph(sim, 0)
    mean = sim.flow[0].mean(0)
    for src, dst in ei.T:
        link = np.flatnonzero(
            ((sim.link_start == src) & (sim.link_end == dst))
            | ((sim.link_start == dst) & (sim.link_end == src))
        )[0]
        assert (mean[link] > 0) == (sim.link_start[link] == src)
    parts = data.info["split_scenarios"]
    assert set(parts["train"]).isdisjoint(parts["val"]) and set(parts["val"]).isdisjoint(
        parts["test"]
    )
    assert sorted(parts["train"] + parts["val"] + parts["test"]) == [0, 1, 2]
    assert all(torch.isfinite(g.series).all() for g in data.groups)


def test_wntr_rejects_unknown_network():
    pytest.importorskip("wntr")
    from phynfp import load_wntr

    with pytest.raises(ValueError, match="unknown water network"):
        load_wntr("NetX", scenarios=3)


def test_check_tree_rejects_cycles_and_branching():
    cyclic = torch.tensor([[0, 1, 2], [1, 2, 0]])
    with pytest.raises(ValueError, match=r"cycle, but a tree \(a DAG\) is required"):
        check_tree(cyclic, 3)
    split = torch.tensor([[0, 0], [1, 2]])
    with pytest.raises(ValueError, match="node 0 has 2 downstream edges"):
        check_tree(split, 3)
    forest = torch.tensor([[0, 2], [1, 3]])
    with pytest.raises(ValueError, match="one outlet"):
        check_tree(forest, 4)


def test_wntr_flow_signs_opposing_share_and_travel_hops(net1):
    from phynfp import load_wntr, longest_path
    from phynfp.wdn import scenario_flow_sign, scenario_graph, travel_hops

    sim, cache = net1
    data = load_wntr("Net1", scenarios=3, hours=24, cache_dir=cache)
    g = data.groups[0]
    scenario = int(g.name.rsplit("scenario", 1)[1])
    ei, _ = scenario_graph(sim, scenario)
    sign = scenario_flow_sign(sim, scenario)
    assert sign.shape == (sim.flow.shape[1], ei.shape[1])
    assert g.flow_sign is not None and torch.equal(g.flow_sign, torch.as_tensor(sign))
    # Every kept link's mean flow follows its edge, so at least one of its hours does too.
    assert ((sign > 0).mean(0) > 0).all()
    share = data.opposing_share()
    assert 0.0 <= share < 0.5
    per_group = [float((gr.flow_sign < 0).float().mean()) for gr in data.groups]
    assert share == pytest.approx(float(np.mean(per_group)))
    starts = data.splits["train"][0][1][:3]
    expected = g.flow_sign[torch.as_tensor(starts) + data.window - 1]
    assert torch.equal(data.edge_sign(0, starts), expected)
    assert torch.equal(data.reversed().groups[0].flow_sign, -g.flow_sign)
    hops = travel_hops(sim, scenario, 1e9)  # unlimited time: every upstream path counts
    assert hops.max() == longest_path(torch.as_tensor(ei), sim.node_names.size)
    assert (travel_hops(sim, scenario, 0.5) <= hops).all()
