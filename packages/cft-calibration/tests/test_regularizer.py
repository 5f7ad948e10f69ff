import math

import cft_calibration as C
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st


def random_probs(n, k, seed, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(n, k, generator=g, dtype=torch.float64) * scale, -1)


@given(st.integers(0, 10_000), st.integers(2, 6), st.floats(0.0, 0.999))
def test_targets_are_positive_sum_to_one_minus_acc_keep_order_and_bounds(seed, k, acc):
    p = random_probs(64, k, seed)
    ps = torch.sort(p, 1, descending=True).values[:, 1:]
    acc_t = torch.full((64,), acc, dtype=torch.float64)
    t = C.nonmax_targets(ps, acc_t)
    assert bool((t > 0).all())
    assert torch.allclose(t.sum(1), 1 - acc_t, atol=1e-6)
    assert bool((t[:, :-1] >= t[:, 1:] - 1e-12).all())  # order of non-max options kept
    rest = 1 - acc
    th = torch.tanh(math.log(3) / (ps[:, :1].clamp_min(1e-12) * rest) * ps)
    a = rest / (th.sum(1) + k - 1)
    assert bool((t >= a[:, None] - 1e-12).all()) and bool((t <= 2 * a[:, None] + 1e-12).all())


def test_targets_are_zero_when_the_bin_is_always_right():
    ps = torch.sort(random_probs(8, 4, 0), 1, descending=True).values[:, 1:]
    assert torch.equal(
        C.nonmax_targets(ps, torch.ones(8, dtype=torch.float64)),
        torch.zeros(8, 3, dtype=torch.float64),
    )


def test_targets_stay_finite_when_the_second_probability_underflows():
    ps = torch.tensor([[0.0, 0.0, 0.0]], dtype=torch.float32)
    t = C.nonmax_targets(ps, torch.tensor([0.5]))
    assert torch.isfinite(t).all() and float(t.sum()) == pytest.approx(0.5, abs=1e-6)


def test_e_step_on_a_constructed_case():
    # 4 items in bin [0.9, 1] (3 right), 2 in [0.5, 0.6) (1 right), nothing elsewhere
    p = torch.tensor([[0.95, 0.05, 0, 0]] * 4 + [[0.55, 0.45, 0, 0]] * 2, dtype=torch.float64)
    y = torch.tensor([0, 0, 0, 1, 0, 1])
    reg = C.EMECERegularizer().e_step(p, y)
    assert reg.bin_acc is not None and reg.bin_count is not None
    assert float(reg.bin_acc[9]) == pytest.approx(0.75)
    assert float(reg.bin_acc[5]) == pytest.approx(0.5)
    assert reg.bin_count.tolist() == [0, 0, 0, 0, 0, 2, 0, 0, 0, 4]
    assert math.isnan(float(reg.bin_acc[0]))
    assert reg.global_acc == pytest.approx(4 / 6)


def test_rcft_targets_sum_to_one_minus_bin_accuracy_per_bin():
    g = torch.Generator().manual_seed(5)
    p = random_probs(500, 4, 5, scale=3.0)
    y = torch.randint(0, 4, (500,), generator=g)
    reg = C.EMECERegularizer().e_step(p, y)
    sorted_p = torch.sort(p, 1, descending=True).values
    b = C.bin_indices(sorted_p[:, 0])
    acc = reg.bin_acc[b]
    t = C.nonmax_targets(sorted_p[:, 1:], acc)
    for m in b.unique():
        sel = b == m
        assert torch.allclose(t[sel].sum(1), 1 - reg.bin_acc[m].expand(int(sel.sum())), atol=1e-6)


def test_regulariser_is_zero_when_confidence_equals_bin_accuracy_and_non_max_equal_targets():
    # equal non-max probabilities are their own targets: t = (1 - acc) / (K - 1) each
    acc = 0.6
    p = torch.tensor([[acc, 0.4 / 3, 0.4 / 3, 0.4 / 3]] * 10, dtype=torch.float64)
    y = torch.tensor([0] * 6 + [1] * 4)  # accuracy 0.6 in the bin of c = 0.6
    reg = C.EMECERegularizer().e_step(p, y)
    assert float(reg.bin_acc[6]) == pytest.approx(acc)
    err, _, _ = reg.per_sample(p)
    assert float(err.abs().max()) < 1e-20
    assert float(reg(p)) < 1e-20


def test_mass_weighting_is_the_per_sample_mean_and_official_the_per_bin_formula():
    p = random_probs(200, 4, 6, scale=2.5).requires_grad_(True)
    y = torch.randint(0, 4, (200,), generator=torch.Generator().manual_seed(6))
    mass = C.EMECERegularizer(weighting="mass").e_step(p, y)
    err, b, _ = mass.per_sample(p)
    assert float(mass(p).detach()) == pytest.approx(float(err.detach().mean()), abs=1e-12)
    off = C.EMECERegularizer(weighting="official").e_step(p, y)
    manual = sum(float(err.detach()[b == m].sum()) / float(off.bin_count[m]) for m in b.unique())
    assert float(off(p).detach()) == pytest.approx(manual, abs=1e-10)


def test_finite_loss_and_gradient_when_a_batch_hits_a_bin_empty_at_the_e_step():
    train = torch.tensor([[0.95, 0.05, 0, 0]] * 5, dtype=torch.float64)
    reg = C.EMECERegularizer().e_step(train, torch.zeros(5, dtype=torch.long))
    z = torch.tensor([[0.2, 0.1, 0.0, -0.1]], dtype=torch.float64, requires_grad=True)
    loss = reg(torch.softmax(z, -1))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(z.grad).all()
    skip = C.EMECERegularizer(empty_bin="skip").e_step(train, torch.zeros(5, dtype=torch.long))
    assert float(skip(torch.softmax(z, -1)).detach()) == 0.0


def test_skip_top_bin_changes_the_loss_only_for_confident_samples():
    p = random_probs(300, 4, 7, scale=3.0)
    y = torch.randint(0, 4, (300,), generator=torch.Generator().manual_seed(7))
    full = C.EMECERegularizer().e_step(p, y)
    skip = C.EMECERegularizer(skip_top_bin=True).e_step(p, y)
    e_full, _, _ = full.per_sample(p)
    _, _, used = skip.per_sample(p)
    top = p.max(1).values >= 0.9
    assert torch.equal(~used, top)
    assert float(skip(p)) == pytest.approx(float((e_full * (~top)).sum() / 300), abs=1e-12)


def test_detached_targets_give_no_gradient_through_the_targets():
    z = torch.randn(50, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(8)) * 2
    y = torch.randint(0, 4, (50,), generator=torch.Generator().manual_seed(8))
    grads = {}
    for detach in (True, False):
        zz = z.clone().requires_grad_(True)
        reg = C.EMECERegularizer(detach_targets=detach).e_step(torch.softmax(z, -1), y)
        reg(torch.softmax(zz, -1)).backward()
        grads[detach] = zz.grad
    # detached: the gradient equals the one computed with the targets as constants
    zz = z.clone().requires_grad_(True)
    p = torch.softmax(zz, -1)
    reg = C.EMECERegularizer().e_step(torch.softmax(z, -1), y)
    sp = torch.sort(p, 1, descending=True).values
    acc = reg.bin_acc[C.bin_indices(sp[:, 0].detach())]
    t = C.nonmax_targets(sp[:, 1:].detach(), acc)
    (((sp[:, 0] - acc) ** 2 + ((sp[:, 1:] - t) ** 2).sum(1)).mean()).backward()
    assert torch.allclose(grads[True], zz.grad, atol=1e-12)
    assert not torch.allclose(grads[True], grads[False], atol=1e-9)


def test_bad_configuration_and_m_step_before_e_step():
    with pytest.raises(ValueError, match="weighting"):
        C.EMECERegularizer(weighting="bins")
    with pytest.raises(ValueError, match="lam"):
        C.EMECERegularizer(lam=float("nan"))
    with pytest.raises(RuntimeError, match="e_step"):
        C.EMECERegularizer()(torch.ones(2, 4) / 4)
