import itertools
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from parq_optim import (
    LSBQuantizer,
    MaxUnifQuantizer,
    TernaryUnifQuantizer,
    UnifQuantizer,
    nearest,
)
from parq_optim.quant import count_below

CASES = (
    [(UnifQuantizer(), b) for b in (1, 2, 3, 4)]
    + [(MaxUnifQuantizer(), b) for b in (2, 3, 4)]
    + [(TernaryUnifQuantizer(), 0)]
    + [(LSBQuantizer(), b) for b in (0, 1, 2, 3, 4)]
    + [(LSBQuantizer(optimal=True), b) for b in (0, 1, 2)]
)


def weight(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    w = torch.empty(32, 256, dtype=dtype)
    return torch.nn.init.xavier_uniform_(w, generator=g)


def greedy(quantizer, b):
    return (isinstance(quantizer, LSBQuantizer) and not quantizer.optimal and b >= 1) or (
        isinstance(quantizer, LSBQuantizer) and quantizer.optimal and b == 1
    )


def check_membership(q, Q, exact):
    snapped = nearest(Q, q, dim=None if Q.dim() == 1 else -1)
    if exact:
        assert torch.equal(snapped, q)
    else:  # greedy LSBQ: q = p - r carries last-bit variants of its level (rounding)
        assert (q - snapped).abs().max() <= 1e-6 * Q.abs().max()
    return snapped


@pytest.mark.parametrize(("quantizer", "b"), CASES, ids=lambda x: repr(x))
@pytest.mark.parametrize("dim", [None, -1])
def test_levels_count_membership_and_purity(quantizer, b, dim):
    p = weight()
    p0 = p.clone()
    q, Q = quantizer.quantize(p, b, dim=dim)
    assert torch.equal(p, p0)
    assert q.dtype == p.dtype and Q.dtype == p.dtype and q.shape == p.shape
    m = quantizer.get_quant_size(b)
    snapped = check_membership(q, Q, exact=not greedy(quantizer, b))
    if dim is None:
        assert Q.shape == (m,) and torch.all(Q[1:] > Q[:-1])
        assert snapped.unique().numel() == m
    else:
        assert Q.shape == (32, m) and torch.all(Q[:, 1:] > Q[:, :-1])
        assert all(r.unique().numel() == m for r in snapped)


@pytest.mark.parametrize(("quantizer", "b"), CASES[:6], ids=lambda x: repr(x))
def test_center_adds_the_mean_back(quantizer, b):
    p = weight() + 0.3
    qc, Qc = type(quantizer)(center=True).quantize(p, b)
    q0, Q0 = type(quantizer)().quantize(p - p.mean(), b)
    torch.testing.assert_close(Qc, Q0 + p.mean())
    torch.testing.assert_close(qc, q0 + p.mean())


def test_unif_one_bit_levels_are_pm_mean_abs():
    p = weight()
    _, Q = UnifQuantizer().quantize(p, 1)
    torch.testing.assert_close(Q, torch.stack([-p.abs().mean(), p.abs().mean()]))


def test_unif_levels_equally_spaced():
    p = weight()
    for b in (2, 3, 4):
        _, Q = UnifQuantizer().quantize(p, b)
        s = torch.minimum(b * p.abs().mean(), p.abs().max()) / (2 ** (b - 1) - 0.5)
        torch.testing.assert_close(Q[1:] - Q[:-1], s.expand(Q.numel() - 1))


def test_ternary_unif_threshold():
    p = weight()
    q, _ = TernaryUnifQuantizer().quantize(p, 0)
    thr = p.abs().max() / 3
    expect = torch.where(p.abs() > thr, p.sign() * 2 * thr, torch.zeros_like(p))
    torch.testing.assert_close(q, expect)


def test_lsbq_greedy_levels_are_signed_sums():
    p = weight()
    for b in (1, 2, 3):
        r, vs = p.clone(), []
        for _ in range(b):
            v = r.abs().mean()
            r = r - v * torch.where(r == 0, 1.0, r.sign())
            vs.append(v.item())
        sums = sorted(
            sum(s * v for s, v in zip(signs, vs)) for signs in itertools.product((-1, 1), repeat=b)
        )
        _, Q = LSBQuantizer().quantize(p, b)
        torch.testing.assert_close(Q, torch.tensor(sums), rtol=1e-6, atol=1e-7)


def brute_error(a, b):
    """Least squared error over all level sets of the optimal family (every split of sorted |p|)."""
    a = torch.sort(a.abs().double()).values
    n, best = a.numel(), float("inf")
    for i in range(0 if b == 0 else 1, n):
        U = a[i:].mean()
        Q = (
            torch.stack([-U, 0 * U, U])
            if b == 0
            else torch.stack([-U, -a[:i].mean(), a[:i].mean(), U])
        )
        Q = torch.sort(Q).values
        best = min(best, ((a - nearest(Q, a)) ** 2).sum().item())
    return best


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0, 2]), st.integers(5, 40))
def test_lsbq_optimal_matches_bruteforce_and_beats_heuristic(seed, b, n):
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(3, n, generator=g, dtype=torch.float64)
    q, _ = LSBQuantizer(optimal=True).quantize(p, b, dim=-1)
    qh, _ = LSBQuantizer().quantize(p, b, dim=-1)
    for i in range(3):
        err = ((p[i] - q[i]) ** 2).sum().item()
        assert err == pytest.approx(brute_error(p[i], b), rel=1e-9, abs=1e-12)
        assert err <= ((p[i] - qh[i]) ** 2).sum().item() + 1e-12
    qt, _ = LSBQuantizer(optimal=True).quantize(p[0], b)
    assert ((p[0] - qt) ** 2).sum().item() == pytest.approx(
        brute_error(p[0], b), rel=1e-9, abs=1e-12
    )


@pytest.mark.parametrize(
    ("quantizer", "b", "exc", "match"),
    [
        (UnifQuantizer(), 0, ValueError, "b >= 1, got b=0"),
        (MaxUnifQuantizer(), 1, ValueError, "b >= 2, got b=1"),
        (TernaryUnifQuantizer(), 2, ValueError, "b=2"),
        (UnifQuantizer(), -1, ValueError, "got -1"),
        (LSBQuantizer(), -3, ValueError, "got -3"),
        (LSBQuantizer(optimal=True), 3, NotImplementedError, "b=3"),
    ],
)
def test_bad_bits(quantizer, b, exc, match):
    with pytest.raises(exc, match=match):
        quantizer.quantize(weight(), b)


def test_bad_tensors():
    with pytest.raises(ValueError, match="complex"):
        UnifQuantizer().quantize(torch.randn(4, 4, dtype=torch.complex64), 2)
    with pytest.raises(ValueError, match="empty"):
        UnifQuantizer().quantize(torch.empty(0), 2)
    with pytest.raises(ValueError, match="2-D"):
        UnifQuantizer().quantize(torch.randn(2, 3, 4), 2, dim=-1)
    with pytest.raises(ValueError, match="scale_method"):
        UnifQuantizer(scale_method="median")


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10_000), st.booleans(), st.booleans())
def test_count_below_equals_bucketize(m, seed, per_row, right):
    g = torch.Generator().manual_seed(seed)
    B = torch.sort(torch.randn(3, m, generator=g), dim=-1).values
    u = torch.randn(3, 50, generator=g)
    u[0, :m] = B[0]  # exact ties with boundaries
    if per_row:
        expect = torch.stack([torch.bucketize(u[i], B[i], right=right) for i in range(3)])
        assert torch.equal(count_below(B, u, dim=-1, right=right), expect)
    else:
        assert torch.equal(count_below(B[0], u, right=right), torch.bucketize(u, B[0], right=right))


def test_nearest_tie_rules():
    Q = torch.tensor([-1.5, -0.5, 0.5, 1.5])
    u = torch.tensor([-1.0, 0.0, 1.0, 0.2])  # three midpoints and one plain value
    assert nearest(Q, u).tolist() == [-1.5, -0.5, 0.5, 0.5]
    assert nearest(Q, u, ties="up").tolist() == [-0.5, 0.5, 1.5, 0.5]
    with pytest.raises(ValueError, match="ties must be"):
        nearest(Q, u, ties="even")


@pytest.mark.parametrize("dim", [None, -1])
def test_optimal_lsbq_sends_exact_zeros_to_plus_L(dim):
    """0 is the midpoint of -L and +L; bsign(0) = +1 (greedy LSBQ, torchao) gives +L.
    Before the fix, ``nearest``'s ties-low rule gave -L."""
    p = weight()
    p[:, ::7] = 0.0
    q, Q = LSBQuantizer(optimal=True).quantize(p, 2, dim=dim)
    plus_L = Q[2].expand_as(p) if dim is None else Q[:, 2:3].expand_as(p)
    assert torch.all(q[p == 0] == plus_L[p == 0]) and torch.all(plus_L > 0)
    # greedy 1- and 2-bit LSBQ agree on the sign of an exact zero
    qg, _ = LSBQuantizer().quantize(p, 2, dim=dim)
    assert torch.all(qg[p == 0] > 0)


def test_hypothesis_profile_keeps_no_database_in_the_tree():
    assert settings.default.database is None and settings.default.deadline is None
    assert not (Path(__file__).resolve().parents[1] / ".hypothesis" / "examples").exists()


def exhaustive_error(row, b):
    """True brute force over every split of the row's entries into two groups (no sorting, no
    Lloyd condition): 2 bits = levels (-U, -L, L, U) with L, U the means of |p| over the groups;
    ternary = (-a, 0, a) with a the mean of |p| over the non-zero group, the other group at 0. For
    a fixed split these levels are optimal, so the minimum over all splits is the optimum."""
    a = [abs(float(x)) for x in row]
    best = float("inf")
    for mask in itertools.product((0, 1), repeat=len(a)):
        big = [x for x, m in zip(a, mask) if m]
        small = [x for x, m in zip(a, mask) if not m]
        if not big:
            continue
        U = sum(big) / len(big)
        err = sum((x - U) ** 2 for x in big)
        if b == 0:
            err += sum(x * x for x in small)
        elif small:
            L = sum(small) / len(small)
            err += sum((x - L) ** 2 for x in small)
        best = min(best, err)
    return best


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([0, 2]),
    st.lists(
        st.lists(
            st.one_of(
                st.floats(-4, 4, allow_nan=False, width=64),
                st.sampled_from([0.0, 0.5, -0.5, 1.0, -1.0]),  # zeros, ties and duplicates
            ),
            min_size=8,
            max_size=8,
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_per_row_optimal_lsbq_equals_exhaustive_search(b, rows):
    p = torch.tensor(rows, dtype=torch.float64)
    q, Q = LSBQuantizer(optimal=True).quantize(p, b, dim=-1)
    assert Q.shape == (len(rows), 3 if b == 0 else 4)
    assert torch.equal(nearest(Q, q, dim=-1), q)  # q lies on its row's levels
    for i, row in enumerate(rows):
        err = ((p[i] - q[i]) ** 2).sum().item()
        assert err == pytest.approx(exhaustive_error(row, b), rel=1e-9, abs=1e-12)


def test_per_row_optimal_lsbq_on_the_issue_row():
    # torchao 0.18 returns the unsorted levels (-0.7, 0.1, -0.1, 0.7) for this row and maps 0.3 to
    # 0.7 (squared error 0.84); the least-squares optimum is (-0.95, -0.15, 0.15, 0.95), error 0.34
    p = torch.tensor([[0, 0.3, -0.7, 1.2, 0, -0.3, 0.7, -1.2]], dtype=torch.float64)
    q, Q = LSBQuantizer(optimal=True).quantize(p, 2, dim=-1)
    torch.testing.assert_close(Q, torch.tensor([[-0.95, -0.15, 0.15, 0.95]], dtype=torch.float64))
    err = ((p - q) ** 2).sum().item()
    assert err == pytest.approx(0.34) == pytest.approx(exhaustive_error(p[0].tolist(), 2))
    assert q[0, 1].item() == pytest.approx(0.15)  # 0.3 goes to its nearest level, 0.15
