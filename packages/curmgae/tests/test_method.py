import math

import pytest
import torch
from curmgae import CurMGAE, CurMGAEConfig, GAEBaseline

SMALL = dict(hidden=16, decode_channels=32, epochs=6, eval_every=3, batch_size=512)


class RecordingEncoder(torch.nn.Module):
    """Wraps an encoder and records every edge_index it is given."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.seen = inner, []
        self.hidden, self.num_layers = inner.hidden, inner.num_layers

    def forward(self, x, edge_index):
        if self.training:
            self.seen.append(edge_index.clone())
        return self.inner(x, edge_index)


class RecordingDecoder(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner, self.seen = inner, []

    def forward(self, hs, pairs):
        if self.training:
            self.seen.append(pairs.clone())
        return self.inner(hs, pairs)


def _keys(pairs, n):
    return set((pairs.min(0).values * n + pairs.max(0).values).tolist())


@pytest.mark.parametrize("masking", ["curriculum", "random", "path"])
def test_masks_never_leak_test_edges(tiny_split, masking):
    s, n = tiny_split, tiny_split.num_nodes
    cfg = CurMGAEConfig(masking=masking, negatives="exclude_edges", **{**SMALL, "epochs": 3})
    base = CurMGAE.from_config(s.num_features, cfg)
    enc, dec = RecordingEncoder(base.encoder), RecordingDecoder(base.decoder)
    model = CurMGAE(enc, dec, cfg)
    model.fit(s, seed=0)
    held_out = _keys(s.test_pos, n) | _keys(s.val_pos, n)
    train = _keys(s.train_pos, n)
    for ei in enc.seen:  # the visible graph only holds training edges
        assert not (_keys(ei, n) & held_out) and _keys(ei, n) <= train
    pos_batches = dec.seen[0::2]  # _loss scores positives first, then negatives
    neg_batches = dec.seen[1::2]
    for p in pos_batches:
        assert _keys(p, n) <= train
    for q in neg_batches:  # exclude_edges negatives come from the training graph only
        assert not (_keys(q, n) & train)
    # masked edges never appear in either direction of the encoder's graph
    masked = _keys(pos_batches[0], n)
    assert not (masked & _keys(enc.seen[0], n))


def test_determinism_and_state_dict(tiny_split):
    def run():
        m = CurMGAE.from_config(tiny_split.num_features, CurMGAEConfig(**SMALL))
        h = m.fit(tiny_split, seed=7)
        return m, h

    (m1, h1), (m2, h2) = run(), run()
    assert h1.losses == h2.losses
    assert [e["n_masked"] for e in h1.trace] == [e["n_masked"] for e in h2.trace]
    assert torch.equal(m1.scheduler.S, m2.scheduler.S)
    assert torch.equal(m1.embed(tiny_split)[1], m2.embed(tiny_split)[1])
    m3 = CurMGAE.from_config(tiny_split.num_features, CurMGAEConfig(**SMALL))
    m3.load_state_dict(m1.state_dict())
    assert torch.equal(m3.embed(tiny_split)[1], m1.embed(tiny_split)[1])


@pytest.mark.parametrize("loss", ["sampled_softmax", "full_softmax"])
def test_softmax_losses_start_at_chance_and_decrease(tiny_split, loss):
    """An untrained decoder scores all candidates alike, so the first epoch's loss is the chance level
    log(k + 1) (k = 4 sampled negatives) or log(N) (Eq. 3 over all N nodes); training lowers it."""
    cfg = CurMGAEConfig(loss=loss, num_negatives=4, **{**SMALL, "epochs": 8})
    h = CurMGAE.from_config(tiny_split.num_features, cfg).fit(tiny_split, seed=0)
    chance = math.log(5) if loss == "sampled_softmax" else math.log(tiny_split.num_nodes)
    assert h.losses[0] == pytest.approx(chance, rel=0.02)
    assert min(h.losses[1:]) < h.losses[0]


def test_gae_baseline_learns_and_is_deterministic(tiny_split):
    m = GAEBaseline(
        tiny_split.num_features, CurMGAEConfig(decoder="inner_product", masking="none", **SMALL)
    )
    h1 = m.fit(tiny_split, epochs=10, seed=1)
    assert m.link_prediction(tiny_split)["auc"] > 0.5
    assert m.fit(tiny_split, epochs=10, seed=1).losses == h1.losses  # deterministic under seed


def test_curriculum_orders_edges_as_planted():
    """Quick synthetic graph: easy (intra-class) edges have lower residuals than hard ones, and the
    difficulty-chosen set over-represents easy edges (the paper's Figure 2 effect; robust asserts)."""
    from curmgae import make_curriculum_sbm, split_edges

    s = split_edges(make_curriculum_sbm(quick=True, seed=0), seed=0)
    cfg = CurMGAEConfig(hidden=32, decode_channels=64, epochs=20, batch_size=4096, eval_every=20)
    m = CurMGAE.from_config(s.num_features, cfg)
    h = m.fit(s, seed=0)
    last = h.trace[-1]
    assert last["residual_easy"] < last["residual_hard"]
    base_easy = float((s.train_difficulty == 0).float().mean())
    after10 = next(e for e in h.trace if e["epoch"] > 10)
    assert after10["share_easy"] > base_easy


def test_path_and_random_masks(tiny_split):
    from curmgae import path_mask, random_mask
    from curmgae.masking import edge_units

    units = edge_units(tiny_split.edge_index)
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    a = path_mask(units, tiny_split.num_nodes, "undirected", 0.5, 3, g1)
    b = path_mask(units, tiny_split.num_nodes, "undirected", 0.5, 3, g2)
    assert torch.equal(a, b) and 0 < int(a.sum()) < units.size(1)
    r = random_mask(units.size(1), 0.7, torch.Generator().manual_seed(0))
    assert int(r.sum()) == int(0.7 * units.size(1))


# ------------------------------------------------------------------ replaceable parts of fit (0.3.0)
def test_fit_leaves_the_global_rng_alone_and_is_reproducible(tiny_split):
    """fit(seed) draws from the model's generator (masks, negatives, batches, dropout) and initialises
    the weights in a fork of the global RNG: the caller's global state is unchanged, and two fits with
    one seed give identical losses whatever the global state was."""
    torch.manual_seed(123)
    before = torch.get_rng_state()
    m = CurMGAE.from_config(tiny_split.num_features, CurMGAEConfig(**SMALL))
    after_init = (
        torch.get_rng_state()
    )  # building the modules draws from the global RNG, as in torch
    h1 = m.fit(tiny_split, seed=5)
    assert torch.equal(torch.get_rng_state(), after_init)
    torch.manual_seed(999)  # another global state: same fit
    h2 = m.fit(tiny_split, seed=5)
    assert h1.losses == h2.losses
    assert not torch.equal(before, torch.get_rng_state())  # (the manual_seed above did change it)


def test_all_state_is_created_in_init(tiny_split):
    m = CurMGAE.from_config(tiny_split.num_features, CurMGAEConfig(**SMALL))
    names = set(vars(m))
    m.fit(tiny_split, seed=0)
    assert set(vars(m)) == names
    assert m.last_residuals is not None and m.last_residuals.shape == (m.scheduler.M,)


def test_injected_optimizer_is_used(tiny_split):
    """A factory or an instance replaces Adam: with SGD at lr 0 the weights stay at their seeded
    initialisation, so fit changes nothing."""
    cfg = CurMGAEConfig(**SMALL)
    m = CurMGAE.from_config(
        tiny_split.num_features, cfg, optimizer=lambda p: torch.optim.SGD(p, lr=0.0)
    )
    assert isinstance(m.optimizer, torch.optim.SGD)
    m.reset_parameters(seed=3)
    w0 = {k: v.clone() for k, v in m.state_dict().items()}
    m.fit(tiny_split, seed=3)
    assert all(torch.equal(w0[k], v) for k, v in m.state_dict().items())
    enc_dec = CurMGAE.from_config(tiny_split.num_features, cfg)
    sgd = torch.optim.SGD(enc_dec.parameters(), lr=0.05)
    m2 = CurMGAE(enc_dec.encoder, enc_dec.decoder, cfg, optimizer=sgd)
    assert m2.optimizer is sgd
    h = m2.fit(tiny_split, seed=0)
    assert len(sgd.state) > 0 or len(h.losses) == cfg.epochs  # SGD without momentum keeps no state


def test_reset_parameters_is_seeded_and_clears_the_optimizer(tiny_split):
    m = CurMGAE.from_config(tiny_split.num_features, CurMGAEConfig(**SMALL))
    m.fit(tiny_split, seed=0)
    assert len(m.optimizer.state) > 0  # Adam's moments
    trained = {k: v.clone() for k, v in m.state_dict().items()}
    m.reset_parameters(seed=11)
    assert len(m.optimizer.state) == 0
    first = {k: v.clone() for k, v in m.state_dict().items()}
    assert any(not torch.equal(trained[k], first[k]) for k in first)
    m.reset_parameters(seed=11)
    assert all(torch.equal(first[k], v) for k, v in m.state_dict().items())


def test_a_custom_masker_replaces_the_curriculum(tiny_split):
    """Any EdgeMasker works: here a fixed half of the units, never the other half. The encoder never
    sees a masked unit; the decoder's positives are exactly the masked units."""
    from curmgae.masking import EdgeMasker

    class EvenUnits(EdgeMasker):
        def __call__(self, ctx):
            mask = torch.zeros(ctx.units.size(1), dtype=torch.bool)
            mask[0::2] = True
            return mask

    cfg = CurMGAEConfig(**{**SMALL, "epochs": 2})
    base = CurMGAE.from_config(tiny_split.num_features, cfg)
    enc, dec = RecordingEncoder(base.encoder), RecordingDecoder(base.decoder)
    m = CurMGAE(enc, dec, cfg, masker=EvenUnits())
    assert m.scheduler is None
    h = m.fit(tiny_split, seed=0)
    assert h.trace == []
    n = tiny_split.num_nodes
    from curmgae.masking import edge_units

    units = edge_units(tiny_split.edge_index)
    masked, kept = _keys(units[:, 0::2], n), _keys(units[:, 1::2], n)
    for ei in enc.seen:
        assert _keys(ei, n) == kept
    assert set().union(*(_keys(p, n) for p in dec.seen[0::2])) == masked


def test_masker_from_config_names_each_strategy():
    from curmgae.masking import CurriculumMask, NoMask, PathMask, RandomMask, masker_from_config

    kinds = {"curriculum": CurriculumMask, "random": RandomMask, "path": PathMask, "none": NoMask}
    for name, cls in kinds.items():
        assert type(masker_from_config(CurMGAEConfig(masking=name))) is cls
    assert "ratio=0.6" in repr(masker_from_config(CurMGAEConfig(masking="random", mask_ratio=0.6)))


def test_patience_stops_after_that_many_checks_without_gain(tiny_split):
    class Flat(CurMGAE):
        def validate(self, graph):
            return 0.5  # never improves after the first check

    base = {**SMALL, "epochs": 40, "eval_every": 2, "patience": 3}
    cfg = CurMGAEConfig(**base, select_after_curriculum=False)
    h = Flat(*CurMGAE.from_config(tiny_split.num_features, cfg).children(), cfg).fit(tiny_split)
    assert h.best_epoch == 2 and h.stopped_epoch == 2 + 3 * 2
    assert len(h.losses) == h.stopped_epoch
    # default: checks count only once the curriculum has finished (epoch floor(2/3 * 40) = 26)
    cfg_w = CurMGAEConfig(**base)
    h_w = Flat(*CurMGAE.from_config(tiny_split.num_features, cfg_w).children(), cfg_w).fit(
        tiny_split
    )
    assert h_w.selection_start == 26
    assert h_w.best_epoch == 26 and h_w.stopped_epoch == 26 + 3 * 2
    cfg2 = CurMGAEConfig(**{**SMALL, "epochs": 9, "eval_every": 2, "patience": None})
    h2 = Flat(*CurMGAE.from_config(tiny_split.num_features, cfg2).children(), cfg2).fit(tiny_split)
    assert h2.stopped_epoch == 9


def test_scheduler_from_config_equals_keyword_construction():
    from curmgae import SelfPacedEdgeScheduler

    cfg = CurMGAEConfig(
        lambda_pace="quantile", pacing="root", split_ratio=0.3, mask_ratio=0.6, epochs=12
    )
    a = SelfPacedEdgeScheduler.from_config(cfg, num_edges=300, seed=4)
    b = SelfPacedEdgeScheduler(
        300,
        lambda_pace="quantile",
        pacing="root",
        split_ratio=0.3,
        mask_ratio=0.6,
        total_epochs=12,
        seed=4,
    )
    c = SelfPacedEdgeScheduler.from_config(cfg)  # sized later
    c.reset(300, seed=4)
    g = torch.Generator().manual_seed(0)
    for e in range(1, 13):
        R = torch.rand(300, generator=g)
        ma, mb, mc = a.step(R, e), b.step(R, e), c.step(R, e)
        assert torch.equal(ma, mb) and torch.equal(ma, mc)


def test_curriculum_masks_planted_easy_edges_first_and_hard_ones_later():
    """On the synthetic graph with planted easy (same class), medium (adjacent classes) and hard
    (distant classes) edges, the quantile pace with every masked edge chosen by difficulty masks the
    easy edges first: the epoch at which an edge is first masked is earlier for easy edges than for
    medium ones, and for medium than for hard ones; at every S-step the masked set holds more easy
    and fewer hard edges than the graph does."""
    from curmgae import make_curriculum_sbm, split_edges
    from curmgae.masking import CurriculumMask

    class Recording(CurriculumMask):
        def __call__(self, ctx):
            mask = super().__call__(ctx)
            if mask is not None:
                self.masks.append((ctx.epoch, mask.clone()))
            return mask

    s = split_edges(make_curriculum_sbm(quick=True, seed=0), seed=0)
    T = 24
    cfg = CurMGAEConfig(
        hidden=32,
        decode_channels=64,
        epochs=T,
        batch_size=1024,
        eval_every=T,
        lambda_pace="quantile",
        pace_end=1.0,
        ramp_frac=1.0,
        split_ratio=1.0,
        min_mask_ratio=0.0,
    )
    masker = Recording.from_config(cfg)
    masker.masks = []
    m = CurMGAE.from_config(s.num_features, cfg, masker=masker)
    h = m.fit(s, seed=0)
    first = torch.full((s.train_difficulty.numel(),), float(T + 1))
    for epoch, mask in reversed(masker.masks):
        first[mask] = float(epoch)
    d = s.train_difficulty
    easy, medium, hard = (float(first[d == k].mean()) for k in range(3))
    assert easy < medium < hard and hard - easy > 3, (easy, medium, hard)
    base_easy, base_hard = float((d == 0).float().mean()), float((d == 2).float().mean())
    for entry in h.trace:  # split_ratio 1: the difficulty-chosen part is the whole masked set
        assert entry["share_easy"] > base_easy and entry["share_hard"] < base_hard, entry


@pytest.mark.parametrize("planted", [True, False])
def test_diagnostic_plot_is_a_png(tiny_split, tmp_path, planted):
    """plot_curriculum writes the 2x3 diagnostic figure (masked fraction, lambda, residual quantiles,
    difficulty of the masked edges, shares, curriculum size) for traces with or without planted
    labels; the trace carries what the panels need."""
    pytest.importorskip("matplotlib")
    from curmgae.pipeline import plot_curriculum

    cfg = CurMGAEConfig(lambda_pace="quantile", pacing="root", **{**SMALL, "epochs": 4})
    m = CurMGAE.from_config(tiny_split.num_features, cfg)
    data = tiny_split.clone()
    if not planted:
        for key in ("train_difficulty", "edge_difficulty"):
            if key in data:
                del data[key]
    h = m.fit(data, seed=0)
    for key in ("masked_fraction", "lambda", "rho", "residual_q10", "residual_q90", "K_t", "cap"):
        assert key in h.trace[0]
    assert ("mean_difficulty_masked" in h.trace[0]) == planted
    out = tmp_path / "curriculum.png"
    assert plot_curriculum(h.trace, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
