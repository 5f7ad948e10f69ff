import math

import pytest
import torch
from curmgae import (
    CrossCorrelationDecoder,
    CurMGAE,
    CurMGAEConfig,
    GNNEncoder,
    InnerProductDecoder,
    bce_loss,
    full_softmax_loss,
    hits_at_k,
    link_metrics,
    sampled_softmax_loss,
)
from curmgae.models import score_pairs
from torch_geometric.nn import GAE


def test_cross_features_order():
    """K=2, d=1: h_v=[a,b], h_u=[c,d] -> [ac, ad, bc, bd] (k outer, j inner)."""
    a, b, c, d = 2.0, 3.0, 5.0, 7.0
    hs = [torch.tensor([[a], [c]]), torch.tensor([[b], [d]])]
    dec = CrossCorrelationDecoder(hidden=1, num_layers=2, channels=4)
    feats = dec.features(hs, torch.tensor([[0], [1]]))
    assert feats.tolist() == [[a * c, a * d, b * c, b * d]]


def test_symmetric_score_invariant_under_swap():
    torch.manual_seed(0)
    hs = [torch.randn(5, 4), torch.randn(5, 4)]
    dec = CrossCorrelationDecoder(4, 2, 8).eval()
    p = torch.tensor([[0, 1, 2], [3, 4, 0]])
    assert not torch.allclose(dec(hs, p), dec(hs, p.flip(0)))  # asymmetric in general
    assert torch.allclose(score_pairs(dec, hs, p, True), score_pairs(dec, hs, p.flip(0), True))


def test_width_mismatch_rejected():
    with pytest.raises(ValueError, match="does not match"):
        CurMGAE(GNNEncoder(3, 8, 2), CrossCorrelationDecoder(8, 3))
    with pytest.raises(ValueError, match="num_layers"):
        GNNEncoder(3, 8, 0)


def test_encoder_keeps_every_layer():
    enc = GNNEncoder(3, 8, 3).eval()
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    hs = enc(torch.randn(3, 3), ei)
    assert len(hs) == 3 and all(h.shape == (3, 8) for h in hs) and all((h >= 0).all() for h in hs)


@pytest.mark.parametrize("conv", ["gcn", "sage", "gin"])
def test_encoders_pass_messages_along_edges_only(conv):
    """Changing node 1's features changes the output of its neighbour 0 but not of the isolated
    nodes 2 and 3; outputs are [N, hidden] and non-negative (ReLU on every layer)."""
    torch.manual_seed(0)
    m = CurMGAE.from_config(3, CurMGAEConfig(encoder=conv, hidden=8)).eval()
    ei = torch.tensor([[0, 1], [1, 0]])
    x = torch.randn(4, 3)
    x2 = x.clone()
    x2[1] += 5.0
    with torch.no_grad():
        h, h2 = m.encoder(x, ei)[-1], m.encoder(x2, ei)[-1]
    assert h.shape == (4, 8) and (h >= 0).all()
    assert not torch.allclose(h[0], h2[0])
    assert torch.equal(h[2:], h2[2:])


def test_softmax_losses_of_constant_scores_are_chance_level():
    """Equal logits: sampled softmax with k negatives gives log(k + 1), Eq. 3 over N nodes log(N)."""
    pos = torch.tensor([[0, 1, 2], [3, 4, 5]])

    def const(p):
        return torch.full((p.size(1),), 0.7)

    got = sampled_softmax_loss(const, pos, 10, 6, torch.Generator().manual_seed(0))
    assert float(got) == pytest.approx(math.log(7), abs=1e-6)
    assert float(full_softmax_loss(const, pos, 10)) == pytest.approx(math.log(10), abs=1e-6)


def test_bce_equals_pyg_gae_recon_loss():
    torch.manual_seed(0)
    z = torch.randn(10, 6)
    pos = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    neg = torch.tensor([[8, 9, 0], [1, 2, 3]])
    ip = InnerProductDecoder()
    ours = bce_loss(ip([z], pos), ip([z], neg))
    ref = GAE(torch.nn.Identity()).recon_loss(z, pos, neg)
    assert torch.allclose(ours, ref, atol=1e-6)


def test_full_softmax_hand_computed():
    z = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0], [-1.0, 0.0]])
    ip = InnerProductDecoder()
    pos = torch.tensor([[0, 2], [1, 1]])
    got = full_softmax_loss(lambda p: ip([z], p), pos, 4)
    S = z @ z.T
    want = -(S[0, 1] - torch.logsumexp(S[0], 0) + S[2, 1] - torch.logsumexp(S[2], 0)) / 2
    assert torch.allclose(got, want, atol=1e-6)
    with pytest.raises(ValueError, match="num_nodes=20001"):
        full_softmax_loss(lambda p: ip([z], p), pos, 20001)


def test_metrics():
    from sklearn.metrics import roc_auc_score

    pos, neg = torch.tensor([0.9, 0.8, 0.3]), torch.tensor([0.1, 0.4, 0.35, 0.95])
    assert link_metrics(pos, neg)["auc"] == pytest.approx(
        roc_auc_score([1] * 3 + [0] * 4, [*pos, *neg])
    )
    assert hits_at_k(pos, neg, 2) == pytest.approx(2 / 3)  # 2nd highest negative = 0.4


@pytest.mark.reference
def test_hits_matches_ogb():
    ogb = pytest.importorskip("ogb.linkproppred")
    pos, neg = torch.rand(50), torch.rand(200)
    ref = ogb.Evaluator(name="ogbl-collab").eval({"y_pred_pos": pos, "y_pred_neg": neg})
    assert hits_at_k(pos, neg, 50) == pytest.approx(ref["hits@50"])


def test_config_bad_values():
    with pytest.raises(ValueError, match="mask_ratio"):
        CurMGAEConfig(mask_ratio=0.0)
    with pytest.raises(ValueError, match="split_ratio"):
        CurMGAEConfig(split_ratio=1.5)
    with pytest.raises(ValueError, match="loss"):
        CurMGAEConfig(loss="mse")
    with pytest.raises(ValueError, match="num_layers"):
        CurMGAEConfig(num_layers=0)
    with pytest.raises(ValueError, match="unknown config keys"):
        CurMGAEConfig.from_dict({"foo": 1})
