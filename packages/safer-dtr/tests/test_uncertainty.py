import numpy as np
import pytest
import safer_dtr as S
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st


def test_kl_nonnegative_and_zero_for_shifted_logits():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(32, 25, generator=g), torch.randn(32, 25, generator=g)
    k = S.uncertainty_kl(a, b)
    assert k.shape == (32,) and (k >= 0).all() and (k > 0).all()
    shift = torch.randn(32, 1, generator=g) * 5
    torch.testing.assert_close(S.uncertainty_kl(a, a + shift), torch.zeros(32), atol=1e-5, rtol=0)


@given(st.integers(0, 10_000))
def test_kl_matches_float64_formula(seed):
    g = torch.Generator().manual_seed(seed)
    a, b = (
        torch.randn(4, 25, generator=g, dtype=torch.float64) * 3,
        torch.randn(4, 25, generator=g, dtype=torch.float64) * 3,
    )
    p, q = torch.softmax(a, -1), torch.softmax(b, -1)
    ref = (p * (p.log() - q.log())).sum(-1)
    torch.testing.assert_close(S.uncertainty_kl(a, b), ref, rtol=1e-10, atol=1e-12)


def test_kl_finite_for_huge_logits():
    a = torch.tensor([[1e4, 0.0, -1e4]])
    b = torch.tensor([[-1e4, 0.0, 1e4]])
    k = S.uncertainty_kl(a, b)
    assert torch.isfinite(k).all() and k.item() == pytest.approx(2e4, rel=1e-6)


def test_kl_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\[B, L\]"):
        S.uncertainty_kl(torch.zeros(3, 25), torch.zeros(3, 24))


def test_kappa_scaler_paper_and_official_precedence_bug():
    kappa = torch.tensor([0.2, 0.5, 1.2, 2.2])
    paper = S.KappaScaler("paper").fit(kappa)
    torch.testing.assert_close(paper(kappa), torch.tensor([0.0, 0.15, 0.5, 1.0]))
    official = S.KappaScaler("official").fit(kappa)
    # κ - κ_min / (κ_max - κ_min) = κ - 0.1, clamped to [0, 1]
    torch.testing.assert_close(official(kappa), torch.tensor([0.1, 0.4, 1.0, 1.0]))
    with pytest.raises(RuntimeError, match="not fitted"):
        S.KappaScaler()(kappa)
    with pytest.raises(ValueError, match="mode"):
        S.KappaScaler("other")


def test_risk_loss_equals_ce_without_weights_and_penalty():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 25, generator=g)
    y = torch.randint(0, 25, (8,), generator=g)
    kappa = torch.rand(8, generator=g)
    loss = S.risk_aware_loss(logits, y, kappa, torch.zeros(8), gamma=0.0)
    torch.testing.assert_close(loss, F.cross_entropy(logits, y))


def test_weight_path_is_detached_and_penalty_reaches_theta_not_phi():
    torch.manual_seed(0)
    net = S.SAFERNet(
        S.SAFERConfig(d_model=16, n_heads=2, n_layers=1, d_ff=16, note_dim=8, dropout=0.0)
    )
    refiner = S.RefineHead(net.config.h_dim)
    for p in refiner.parameters():
        p.requires_grad_(False)
    b, t = 6, 4
    logits, h = net(
        torch.randn(b, t, 45), torch.randn(b, t, 4), torch.randn(b, t, 8), torch.randn(b, 4)
    )
    kappa = S.uncertainty_kl(logits, refiner(h))
    scaler = S.KappaScaler().fit(kappa.detach() * torch.linspace(0.5, 2, b))
    kappa_hat = scaler(kappa)
    y = torch.randint(0, 25, (b,))
    # γ = 0: the loss is Σ w_i CE_i with w detached, so its gradient w.r.t. κ̂ is zero
    kh = kappa_hat.detach().requires_grad_(True)
    S.risk_aware_loss(logits, y, kappa, kh, gamma=0.0).backward(retain_graph=True)
    assert kh.grad is None or torch.all(kh.grad == 0)
    net.zero_grad()
    # only the penalty: gradient in θ, none in φ
    pen = S.risk_aware_loss(logits, y, kappa, kappa_hat, gamma=1.0) - S.risk_aware_loss(
        logits, y, kappa, kappa_hat, gamma=0.0
    )
    pen.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())
    assert all(p.grad is None for p in refiner.parameters())


def test_official_mode_is_weighted_ce_plus_constant():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(10, 25, generator=g, requires_grad=True)
    y = torch.randint(0, 25, (10,), generator=g)
    kappa_hat = torch.linspace(0, 1, 10)
    loss = S.risk_aware_loss(logits, y, torch.rand(10), kappa_hat, gamma=0.5, mode="official")
    w = (1 - kappa_hat + 1e-6).clamp(0, 1)
    w = torch.where(w > 0.6, torch.ones_like(w), w)
    ce = F.cross_entropy(logits, y, reduction="none")
    torch.testing.assert_close(loss, (w * ce).mean() + (0.5 * (1 - w)).mean())
    loss.backward()  # the γ term carries no gradient; the CE part does
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_risk_loss_rejects_bad_input():
    with pytest.raises(ValueError, match="mode"):
        S.risk_aware_loss(
            torch.zeros(2, 25),
            torch.zeros(2, dtype=torch.long),
            torch.zeros(2),
            torch.zeros(2),
            mode="x",
        )
    with pytest.raises(ValueError, match="gamma"):
        S.risk_aware_loss(
            torch.zeros(2, 25),
            torch.zeros(2, dtype=torch.long),
            torch.zeros(2),
            torch.zeros(2),
            gamma=-1,
        )
    with pytest.raises(ValueError, match=r"\[B\]"):
        S.risk_aware_loss(
            torch.zeros(2, 25), torch.zeros(3, dtype=torch.long), torch.zeros(2), torch.zeros(2)
        )
    assert np.isfinite(
        float(
            S.risk_aware_loss(
                torch.zeros(2, 25), torch.zeros(2, dtype=torch.long), torch.zeros(2), torch.zeros(2)
            )
        )
    )
