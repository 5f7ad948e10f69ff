import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from sorbet_snn import BSPN, LSQQuantizer, binarize, npot, pot, ptsoftmax


def is_pot_or_zero(x: torch.Tensor) -> bool:
    mag = x.abs()
    nz = mag[mag > 0]
    return bool(torch.equal(torch.exp2(torch.round(torch.log2(nz))), nz))


# ------------------------------------------------------------------------------ PoT / NPoT


def test_pot_log_domain_and_zero():
    x = torch.tensor([0.0, 3.0, -3.0, 5.0, 0.3, 1.0])
    assert pot(x).tolist() == [0.0, 4.0, -4.0, 4.0, 0.25, 1.0]


def test_npot_linear_domain_ties_up():
    x = torch.tensor([3.0, 2.9, 3.1, 6.0, 5.9, 1.0, 0.75, 0.0])
    assert npot(x).tolist() == [4.0, 2.0, 4.0, 8.0, 4.0, 1.0, 1.0, 0.0]


# ------------------------------------------------------------------------------ PTsoftmax


@given(st.integers(0, 10_000), st.integers(1, 12), st.floats(0.1, 20.0))
def test_ptsoftmax_outputs_are_powers_of_two_and_rows_normalise(seed, length, spread):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(3, length, generator=g) * spread
    p = ptsoftmax(s)
    assert is_pot_or_zero(p)
    z = torch.exp2(torch.ceil(s) - torch.ceil(s).amax(-1, keepdim=True)).sum(-1, keepdim=True)
    assert torch.allclose(p.amax(-1, keepdim=True), 1 / npot(z))
    sums = p.sum(-1)
    assert bool((sums >= 0.75).all()) and bool((sums < 1.5).all())


def test_ptsoftmax_tie_goes_up_and_masked_exact_zero():
    s = torch.tensor([[0.0, 0.0, -0.5, 3.0]])
    mask = torch.tensor([[0.0, 0.0, 0.0, -10000.0]])
    p = ptsoftmax(s, mask)  # a = [1, 1, 1, 0]: Z = 3 -> NPoT(Z) = 4
    assert p.tolist() == [[0.25, 0.25, 0.25, 0.0]]


def test_ptsoftmax_exact_partition_equals_base2_softmax():
    s = torch.randn(4, 7, dtype=torch.float64) * 3
    p = ptsoftmax(s, ceil=False, partition="exact")
    assert torch.allclose(p, torch.softmax(s * math.log(2), -1), atol=1e-6)


def test_ptsoftmax_ste_forward_is_exact():
    s = (torch.randn(3, 5) * 3).requires_grad_()
    assert torch.equal(ptsoftmax(s), ptsoftmax(s.detach()))
    assert is_pot_or_zero(ptsoftmax(s).detach())


def test_ptsoftmax_gradients_ste_nonzero_official_zero():
    s = (torch.randn(2, 6) * 2).requires_grad_()
    w = torch.randn(2, 6)
    (ptsoftmax(s) * w).sum().backward()
    assert s.grad is not None and s.grad.abs().sum() > 0
    s2 = s.detach().clone().requires_grad_()
    (ptsoftmax(s2, grad="official") * w).sum().backward()
    assert s2.grad is None or torch.equal(s2.grad, torch.zeros_like(s2))


# ------------------------------------------------------------------------------ BSPN


def test_bspn_group_scaling_mean_interval_and_all_ones():
    norm = BSPN(8, 2)
    x = torch.randn(5, 8) * 7
    xt = norm.group_scale(x).reshape(5, 2, 4)
    mu = x.reshape(5, 2, 4).abs().mean(-1)
    m = xt.abs().mean(-1)
    assert bool((m >= 0.5 - norm.eps / mu - 1e-7).all()) and bool((m <= 1.0).all())
    ones = norm.group_scale(torch.ones(1, 8))
    assert torch.allclose(ones.abs().reshape(2, 4).mean(-1), torch.tensor([0.5, 0.5]))


def test_bspn_eval_outputs_are_signed_powers_of_two():
    norm = BSPN(8, 2).eval()
    with torch.no_grad():
        norm.weight.uniform_(-2, 2)
        norm.bias.uniform_(-1, 1)
        norm.running_phi.uniform_(0.5, 2)
    assert is_pot_or_zero(norm(torch.randn(3, 5, 8)))


def test_bspn_eval_formula_without_output_rounding():
    norm = BSPN(8, 2, output_pot=False).eval()
    with torch.no_grad():
        norm.weight.uniform_(0.2, 2)
        norm.bias.uniform_(-1, 1)
        norm.running_phi.uniform_(0.5, 2)
    x = torch.randn(4, 8)
    k = pot(norm.weight / torch.sqrt(norm.running_phi + norm.eps))
    assert torch.allclose(norm(x), k * norm.group_scale(x) + norm.bias)


def test_bspn_running_phi_follows_the_official_order():
    norm = BSPN(4, 1, warmup=2, group_scaling=False, output_pot=False, pot_scale=False)
    phi = torch.ones(4)
    for it in (1, 2, 3):
        x = torch.randn(6, 4)
        norm(x)
        psi = (x * x).mean(0)
        if it < 2:
            phi = phi * (it - 1) / it + psi / it
        phi = 0.9 * phi + 0.1 * psi
        assert torch.allclose(norm.running_phi, phi)
    assert int(norm.iters) == 3


def test_bspn_padding_does_not_change_statistics():
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    a, b = BSPN(8, 2), BSPN(8, 2)
    y = x.clone()
    y[0, 3:] = 100.0
    out_a, out_b = a(x, mask), b(y, mask)
    assert torch.equal(a.running_phi, b.running_phi)
    assert torch.equal(out_a[mask.bool()], out_b[mask.bool()])


def test_bspn_ste_gradients_and_official_zero():
    x = torch.randn(3, 4, 8, requires_grad=True)
    norm = BSPN(8, 2)
    (norm(x) * torch.randn(3, 4, 8)).sum().backward()
    assert x.grad.abs().sum() > 0 and norm.weight.grad.abs().sum() > 0
    x2 = x.detach().clone().requires_grad_()
    off = BSPN(8, 2, output_pot_ste=False)
    out = off(x2)
    assert not out.requires_grad  # the rounding cuts every gradient, as in the official code
    assert x2.grad is None and off.weight.grad is None


def test_bspn_warns_once_on_tiny_batches():
    norm = BSPN(8, 2)
    with pytest.warns(UserWarning, match="only 6 tokens"):
        norm(torch.randn(2, 3, 8))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        norm(torch.randn(2, 3, 8))


def test_bspn_rejects_indivisible_groups():
    with pytest.raises(ValueError, match=r"10 is not divisible by groups 3"):
        BSPN(10, 3)


def powernorm_reference(x, weight, bias, phi, it, warmup, eps=1e-5):
    psi = (x * x).mean(0)
    var = psi if it <= warmup else phi
    return weight * x / torch.sqrt(var + eps) + bias


def test_bspn_degenerate_equals_powernorm():
    norm = BSPN(6, 1, warmup=1, group_scaling=False, output_pot=False, pot_scale=False)
    norm.backward_mode = "autograd"
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2)
        norm.bias.uniform_(-1, 1)
    phi = norm.running_phi.clone()
    for it in (1, 2, 3):
        x = torch.randn(10, 6, dtype=torch.float32)
        ref = powernorm_reference(x, norm.weight, norm.bias, phi, it, 1)
        assert torch.allclose(norm(x), ref, atol=1e-6)
        phi = 0.9 * phi + 0.1 * (x * x).mean(0)


def test_bspn_eval_fusion_equals_train_mode_after_warmup():
    norm = BSPN(8, 2, warmup=1, pot_scale=False, output_pot=False)
    norm(torch.randn(4, 8))  # warm-up step
    frozen = BSPN(8, 2, warmup=1, pot_scale=False, output_pot=False)
    frozen.load_state_dict(norm.state_dict())
    x = torch.randn(4, 8)
    train_out = norm(x)  # it = 2 > W: uses phi from before this step
    assert torch.allclose(frozen.eval()(x), train_out, atol=1e-6)


def test_bspn_powernorm_backward_matches_formula():
    norm = BSPN(4, 1, warmup=10, group_scaling=False, output_pot=False, pot_scale=False)
    x = torch.randn(6, 4, requires_grad=True)
    gy = torch.randn(6, 4)
    y = norm(x)
    y.backward(gy)
    psi = (x.detach() ** 2).mean(0)
    z = x.detach() / torch.sqrt(psi + 1e-5)
    g = gy * norm.weight.detach()
    assert torch.allclose(x.grad, g / torch.sqrt(psi + 1e-5), atol=1e-6)  # e = 0 before
    assert torch.allclose(norm.grad_e, (g * z).mean(0), atol=1e-6)
    assert torch.allclose(norm.weight.grad, (gy * z).sum(0), atol=1e-5)


# ------------------------------------------------------------------------------ BWN


def test_bwn_two_values_mean_abs_and_identity_gradient():
    w = torch.randn(5, 7, requires_grad=True)
    wb = binarize(w)
    m = w.detach().abs().mean()
    assert set(wb.detach().unique().tolist()) == {-m.item(), m.item()} or torch.allclose(
        wb.detach().abs(), m.expand_as(wb)
    )
    assert len(wb.detach().unique()) == 2
    g = torch.randn(5, 7)
    wb.backward(g)
    assert torch.equal(w.grad, g)


def test_bwn_zero_sign_rule():
    w = torch.tensor([[1.0, -1.0, 0.0, 0.0]])  # mean 0: two entries equal the mean
    assert (binarize(w) != 0).all()
    assert (binarize(w, zero_sign="zero") == 0).sum() == 2


def test_bwn_row_wise_scale():
    w = torch.tensor([[1.0, -3.0], [2.0, 2.0]])
    wb = binarize(w, row_wise=True)
    assert torch.allclose(wb.abs(), torch.tensor([[2.0, 2.0], [2.0, 2.0]]))


# ------------------------------------------------------------------------------ LSQ


def test_lsq_grid_and_pot_initial_step():
    q = LSQQuantizer(4, signed=True)
    x = torch.randn(100) * 3
    out = q(x)
    a = q.alpha.detach()
    assert is_pot_or_zero(a.reshape(1))
    levels = out / a
    assert torch.equal(levels, torch.round(levels))
    assert levels.min() >= -8 and levels.max() <= 7


def test_lsq_unsigned_grid_with_offset():
    q = LSQQuantizer(4, signed=False, unsigned_offset="batch_min_pot")
    x = torch.randn(50)
    out = q(x)
    m0 = pot(x.min())
    levels = (out - m0) / q.alpha.detach()
    assert torch.allclose(levels, torch.round(levels), atol=1e-5)
    assert levels.min() >= -1e-6 and levels.max() <= 15 + 1e-6


def test_lsq_alpha_gradient_matches_formula():
    q = LSQQuantizer(2, signed=True)  # Qn = -2, Qp = 1
    with torch.no_grad():
        q.alpha.fill_(0.5)
        q.initialized.fill_(True)
    x = torch.tensor([-2.0, -0.3, 0.2, 0.35, 1.4], requires_grad=True)
    g = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0])
    q(x).backward(g)
    r = x.detach() / 0.5
    terms = torch.where(
        r < -2, torch.tensor(-2.0), torch.where(r > 1, torch.tensor(1.0), torch.round(r) - r)
    )
    expected = (g * terms).sum() / math.sqrt(5 * 1)
    assert torch.allclose(q.alpha.grad, expected)
    inside = ((r >= -2) & (r <= 1)).float()
    assert torch.equal(x.grad, g * inside)
