import pytest
import safer_dtr as S
import torch
from safer_dtr.models import CrossAttentionBlock, SelfAttentionBlock, causal_mask

B, T, D = 5, 7, 12


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, T, 45, generator=g),
        torch.randn(B, T, 4, generator=g),
        torch.randn(B, T, D, generator=g),
        torch.randn(B, 4, generator=g),
    )


def _net(**kw):
    torch.manual_seed(0)
    cfg = S.SAFERConfig(d_model=16, n_heads=4, n_layers=2, d_ff=16, note_dim=D, **kw)
    return S.SAFERNet(cfg).eval()


@pytest.mark.parametrize("fusion", ["code", "concat"])
@pytest.mark.parametrize("use_notes", [True, False])
def test_shapes(fusion, use_notes):
    net = _net(fusion=fusion, use_notes=use_notes)
    logits, h = net(*_inputs())
    assert logits.shape == (B, 25)
    assert h.shape == (B, net.config.h_dim)
    assert net.config.h_dim == (16 if fusion == "code" else 16 * (3 if use_notes else 2))
    head = S.RefineHead(net.config.h_dim)
    assert head(h).shape == (B, 25)


def test_causal_mask():
    m = causal_mask(3)
    assert m.tolist() == [[False, True, True], [False, False, True], [False, False, False]]


@pytest.mark.parametrize("residual", [True, False])
def test_self_attention_block_is_causal(residual):
    torch.manual_seed(0)
    block = SelfAttentionBlock(16, 4, 32, 0.0, residual).eval()
    x = torch.randn(2, T, 16)
    y = block(x)
    for t in range(1, T):
        x2 = x.clone()
        x2[:, t:] += torch.randn_like(x2[:, t:])
        y2 = block(x2)
        torch.testing.assert_close(y2[:, :t], y[:, :t], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(y2[:, t], y[:, t])


def test_encoder_is_causal_with_causal_cross_attention_and_not_without():
    x = _inputs()
    for causal in (True, False):
        net = _net(cross_causal=causal)
        tab, notes = net.encode(*x)
        changed = [a.clone() for a in x[:3]]
        for a in changed:
            a[:, -1] += 1.0  # change only the last step of every stream
        tab2, notes2 = net.encode(*changed, x[3])
        same = torch.allclose(tab2[:, :-1], tab[:, :-1], atol=1e-5) and torch.allclose(
            notes2[:, :-1], notes[:, :-1], atol=1e-5
        )
        assert same is causal


def test_cross_attention_block_shape():
    block = CrossAttentionBlock(16, 4, 16, 0.0)
    assert block(torch.randn(2, 3, 16), torch.randn(2, 5, 16)).shape == (2, 3, 16)


def test_official_tabular_stream_ignores_prev_meds_and_merged_does_not():
    x = _inputs()
    meds2 = x[1] + 3.0
    official = _net(tabular_stream="official")
    torch.testing.assert_close(official(x[0], meds2, x[2], x[3])[0], official(*x)[0])
    merged = _net()
    assert not torch.allclose(merged(x[0], meds2, x[2], x[3])[0], merged(*x)[0])


def test_zeroing_notes_changes_safer_not_safer_n():
    x = _inputs()
    zeros = torch.zeros_like(x[2])
    full = _net()
    assert not torch.allclose(full(x[0], x[1], zeros, x[3])[0], full(*x)[0])
    no_notes = _net(use_notes=False)
    torch.testing.assert_close(no_notes(x[0], x[1], zeros, x[3])[0], no_notes(*x)[0])


def test_no_attn_residual_and_official_init_run():
    for kw in ({"attn_residual": False}, {"init": "official"}):
        logits, _ = _net(**kw)(*_inputs())
        assert torch.isfinite(logits).all()


def test_state_dict_round_trip_and_determinism():
    a, b = _net(), _net()
    x = _inputs()
    torch.testing.assert_close(a(*x)[0], b(*x)[0], rtol=0, atol=0)  # same seed, same network
    torch.manual_seed(123)
    c = S.SAFERNet(a.config).eval()
    assert not torch.allclose(c(*x)[0], a(*x)[0])
    c.load_state_dict(a.state_dict())
    torch.testing.assert_close(c(*x)[0], a(*x)[0], rtol=0, atol=0)
    cfg = S.SAFERConfig.from_dict(a.config.to_dict())
    assert cfg == a.config


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"d_model": 30, "n_heads": 4}, "divisible"),
        ({"dropout": 1.0}, "dropout"),
        ({"tabular_stream": "x"}, "tabular_stream"),
        ({"fusion": "x"}, "fusion"),
        ({"init": "x"}, "init"),
        ({"d_model": 0}, "d_model"),
    ],
)
def test_config_validation(kw, match):
    with pytest.raises(ValueError, match=match):
        S.SAFERConfig(**kw)
    with pytest.raises(ValueError, match="unknown"):
        S.SAFERConfig.from_dict({"widht": 3})


def test_forward_rejects_bad_shapes():
    net = _net()
    v, m, n, d = _inputs()
    with pytest.raises(ValueError, match="vitals"):
        net(v[..., :40], m, n, d)
    with pytest.raises(ValueError, match="note_dim"):
        net(v, m, torch.zeros(B, T, D + 1), d)
    with pytest.raises(ValueError, match="prev_meds"):
        net(v, m[:, :3], n, d)
    with pytest.raises(ValueError, match="demo"):
        net(v, m, n, d[:, :2])


def test_baselines_and_outcome_model_shapes():
    v, m, n, d = _inputs()
    for cell in ("lstm", "gru"):
        logits, _ = S.RNNBaseline(note_dim=D, hidden=8, cell=cell)(v, m, n, d)
        assert logits.shape == (B, 25)
    logits, _ = S.LogisticBaseline(T, note_dim=D)(v, m, n, d)
    assert logits.shape == (B, 25)
    mort = S.MortalityModel(note_dim=D, hidden=8)
    a = torch.randint(0, 25, (B,))
    out = mort(v, m, n, d, a)
    assert out.shape == (B,)
    torch.testing.assert_close(mort(v, m, n, d, torch.nn.functional.one_hot(a, 25).float()), out)
    with pytest.raises(ValueError, match="cell"):
        S.RNNBaseline(cell="rnn")
