"""Equivalence with the maintained reference, torchao.prototype.parq (0.18): quantizers, prox maps
and the inverse-slope schedule, 30-step optimizer trajectories and checkpoints in both directions,
at ``rtol = atol = 0``. Random inputs never hit ties, so every quantizer and prox map is also fed
exact zeros, values on the rounding/decision thresholds and values equal to a level."""

import copy
import warnings

import parq_optim as P
import pytest
import torch
from torch import nn

pytestmark = pytest.mark.reference

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    T = pytest.importorskip("torchao.prototype.parq")
    from torchao.prototype.parq.optim.parq import normalized_mirror_sigmoid as ref_sigmoid


def exact(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def weight(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(16, 64, generator=g)


QUANT_CASES = (
    [("UnifQuantizer", b) for b in (1, 2, 3, 4)]
    + [("MaxUnifQuantizer", b) for b in (2, 3, 4)]
    + [("TernaryUnifQuantizer", 0)]
    + [("LSBQuantizer", b) for b in (0, 1, 2, 3, 4)]
)


@pytest.mark.parametrize(("name", "b"), QUANT_CASES)
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("dim", [None, -1])
def test_quantizers_match(name, b, center, dim):
    ours, ref = getattr(P, name)(center=center), getattr(T, name)(center=center)
    assert ours.get_quant_size(b) == ref.get_quant_size(b)
    p = weight(b)
    q1, Q1 = ours.quantize(p, b, dim=dim)
    q2, Q2 = ref.quantize(p, b, dim=dim)
    exact(q1, q2)
    exact(Q1, Q2)


def tie_tensor(rows=3, seed=0):
    """Rows of 64 values with |p| in {0 (22x), 1 (28x), 2 (6x), 3 (8x)}, half of each sign, row r
    scaled by 2**(r % 3): mean|p| is exactly a power of two, so greedy LSBQ residuals hit exact
    zeros (``bsign(0) = +1``), its 2-bit midpoints are exactly 0 and ±mean|p|, and simple ternary
    with multiplier 2 has its thresholds exactly on ±mean|p|."""
    mags = torch.tensor([0.0] * 22 + [1.0] * 28 + [2.0] * 6 + [3.0] * 8)
    signs = torch.tensor([1.0, -1.0]).repeat(32)
    g = torch.Generator().manual_seed(seed)
    return torch.stack(
        [(mags * signs)[torch.randperm(64, generator=g)] * 2.0 ** (r % 3) for r in range(rows)]
    )


def grid_tensor(name, b, rows=3):
    """Symmetric dyadic grids whose step ``s`` is exact for the uniform quantizers, with values on
    every rounding tie (``p / s - zero_point`` half-integer), on the levels and at 0."""
    if name == "UnifQuantizer":
        top = 2 ** (b - 1) - 0.5  # b >= 2: min(b mean|p|, max|p|) = max|p| = top, s = 1
    elif name == "MaxUnifQuantizer":
        top = 2 ** (b - 1) - 1.0
    else:  # TernaryUnifQuantizer: s = max|p| / 1.5 = 1
        top = 1.5
    k = round(top / 0.25)
    row = torch.arange(-k, k + 1, dtype=torch.float32) * 0.25
    return torch.stack([row * 2.0 ** (r % 3) for r in range(rows)])


def tie_input(name, b, dim):
    p = tie_tensor() if name == "LSBQuantizer" else grid_tensor(name, b)
    assert (p == 0).any()
    return p[0] if dim is None else p


@pytest.mark.parametrize(("name", "b"), QUANT_CASES)
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("dim", [None, -1])
def test_quantizers_match_on_zeros_and_ties(name, b, center, dim):
    p = tie_input(name, b, dim)
    ours, ref = getattr(P, name)(center=center), getattr(T, name)(center=center)
    q1, Q1 = ours.quantize(p, b, dim=dim)
    q2, Q2 = ref.quantize(p, b, dim=dim)
    exact(q1, q2)
    exact(Q1, Q2)


@pytest.mark.parametrize("dim", [None, -1])
def test_simple_ternary_matches_with_thresholds_on_inputs(dim):
    p = tie_input("LSBQuantizer", 0, dim)
    q1, Q1 = P.LSBQuantizer(ternary_multiplier=2.0).quantize(p, 0, dim=dim)
    q2, Q2 = T.LSBQuantizer(ternary_multiplier=2.0).quantize(p, 0, dim=dim)
    on_threshold = p.abs() == p.abs().mean(dim=-1, keepdim=dim is not None)
    assert on_threshold.any()  # ties at ±v/2 go to the lower level in both
    exact(q1, q2)
    exact(Q1, Q2)


def test_optimal_lsbq_two_bit_maps_exact_zeros_like_torchao():
    """An exact 0 lies on the midpoint of -L and +L: the reference (bsign(0) = +1) gives +L."""
    p = tie_tensor(rows=1)[0]
    q1, Q1 = P.LSBQuantizer(optimal=True).quantize(p, 2)
    q2, Q2 = T.LSBQuantizer(optimal=True).quantize(p, 2)
    # levels agree up to rounding (ours: float64 means; torchao: float32 v1 ± v2, see Deviations);
    # a zero sent to the other side would differ by 2L
    torch.testing.assert_close(Q1, Q2, rtol=1e-6, atol=0)
    torch.testing.assert_close(q1, q2, rtol=1e-6, atol=0)
    assert torch.all(q1[p == 0] == Q1[2]) and Q1[2] > 0


def test_optimal_lsbq_two_bit_per_tensor_matches_up_to_rounding():
    p = weight(7)
    q1, Q1 = P.LSBQuantizer(optimal=True).quantize(p, 2)
    q2, Q2 = T.LSBQuantizer(optimal=True).quantize(p, 2)
    torch.testing.assert_close(Q1, Q2, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(q1, q2, rtol=1e-6, atol=1e-6)


def test_per_row_optimal_lsbq_differs_from_torchao_and_is_never_worse():
    """Per row (dim=-1), torchao 0.18's "optimal" 2-bit LSBQ is not the least-squares optimum:
    on the issue's row it returns unsorted levels and maps 0.3 to 0.7. Ours is checked against an
    exhaustive search in test_quant.py; here only: never a larger error than torchao's."""
    row = torch.tensor([[0, 0.3, -0.7, 1.2, 0, -0.3, 0.7, -1.2]])
    q1, Q1 = P.LSBQuantizer(optimal=True).quantize(row, 2, dim=-1)
    q2, _ = T.LSBQuantizer(optimal=True).quantize(row.clone(), 2, dim=-1)
    err1, err2 = ((row - q1) ** 2).sum().item(), ((row - q2) ** 2).sum().item()
    assert err1 == pytest.approx(0.34, abs=1e-6)
    assert err1 <= err2
    assert torch.all(Q1[:, 1:] >= Q1[:, :-1])  # ours sorted
    g = torch.Generator().manual_seed(3)
    p = torch.randn(32, 24, generator=g)
    e1 = ((p - P.LSBQuantizer(optimal=True).quantize(p, 2, dim=-1)[0]) ** 2).sum(1)
    e2 = ((p - T.LSBQuantizer(optimal=True).quantize(p.clone(), 2, dim=-1)[0]) ** 2).sum(1)
    assert torch.all(e1 <= e2 + 1e-5)


@pytest.mark.parametrize("t", [0, 4, 5, 9, 13, 19, 20, 25])
@pytest.mark.parametrize("dim", [None, -1])
@pytest.mark.parametrize("with_q", [False, True])
def test_prox_maps_match(t, dim, with_q):
    p = weight(3)
    q, Q = P.LSBQuantizer().quantize(p, 2, dim=dim)
    q = q if with_q else None
    pairs = [
        (P.ProxHardQuant(), T.ProxHardQuant()),
        (P.ProxPARQ(5, 20, 7.0, 0.4), T.ProxPARQ(5, 20, 7.0, 0.4)),
        (P.ProxBinaryRelax(5, 20), T.ProxBinaryRelax(5, 20)),
    ]
    for ours, ref in pairs:
        a, b = p.clone(), p.clone()
        ra = ours.apply_(a, q, Q, step_count=t, dim=dim)
        rb = ref.apply_(b, q, Q, step_count=t, dim=dim)
        exact(a, b)
        assert ra == rb


@pytest.mark.parametrize("t", [0, 5, 9, 13, 20])
@pytest.mark.parametrize("dim", [None, -1])
@pytest.mark.parametrize("with_q", [False, True])
def test_prox_maps_match_on_levels_midpoints_and_zeros(t, dim, with_q):
    base = tie_tensor()  # greedy 2-bit LSBQ levels have their midpoints on 0 and ±mean|p|
    q, Q = P.LSBQuantizer().quantize(base if dim == -1 else base[0], 2, dim=dim)
    # the inputs: the tie tensor, every level, every midpoint, values outside the grid
    if dim is None:
        mids = (Q[:-1] + Q[1:]) / 2
        p = torch.cat([base[0], Q, mids, 2 * Q[[0, -1]]])
        q = torch.cat([q, Q, nearest_ref(Q, mids), Q[[0, -1]]]) if with_q else None
    else:
        mids = (Q[:, :-1] + Q[:, 1:]) / 2
        p = torch.cat([base, Q, mids, 2 * Q[:, [0, -1]]], dim=1)
        q = torch.cat([q, Q, nearest_ref(Q, mids), Q[:, [0, -1]]], dim=1) if with_q else None
    assert (p == 0).any()
    pairs = [
        (P.ProxHardQuant(), T.ProxHardQuant()),
        (P.ProxPARQ(5, 20, 7.0, 0.4), T.ProxPARQ(5, 20, 7.0, 0.4)),
        (P.ProxBinaryRelax(5, 20), T.ProxBinaryRelax(5, 20)),
    ]
    for ours, ref in pairs:
        a, b = p.clone(), p.clone()
        ra = ours.apply_(a, q, Q, step_count=t, dim=dim)
        rb = ref.apply_(b, q, Q, step_count=t, dim=dim)
        exact(a, b)
        assert ra == rb


def nearest_ref(Q, u):
    """torchao's own hard quantization of ``u`` (ties to the lower level)."""
    a = u.clone()
    T.ProxHardQuant().apply_(a, None, Q, 0, dim=None if Q.dim() == 1 else -1)
    return a


def test_schedule_matches():
    for t in range(0, 100, 3):
        for s, c in ((10, 0.5), (1.0, 0.3), (50, 0.7)):
            assert P.normalized_mirror_sigmoid(t, 0, 100, s, c) == ref_sigmoid(t, 0, 100, s, c)


def make_run(lib, base, prox, warmup, period, per_channel, block, shrink, wd_frac, qmap):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    groups = [
        {"params": [model[0].weight], "quant_bits": 2},
        {"params": [model[2].weight], "quant_bits": 1},
        {"params": [model[0].bias, model[2].bias], "weight_decay": 0.0},
    ]
    if block:
        groups[0]["quant_block_size"] = block
        groups[1]["quant_block_size"] = block
    if base == "sgd":
        opt = torch.optim.SGD(groups, lr=0.1, momentum=0.9, weight_decay=1e-3)
    else:
        opt = torch.optim.AdamW(groups, lr=1e-2, weight_decay=0.05)
    prox_map = {
        "hard": lib.ProxHardQuant(),
        "parq": lib.ProxPARQ(warmup, 25, 10),
        "binaryrelax": lib.ProxBinaryRelax(warmup, 25),
    }[prox]
    gqm = {1: lib.UnifQuantizer()} if qmap else None
    q = lib.QuantOptimizer(
        opt,
        lib.LSBQuantizer(),
        prox_map,
        warmup_steps=warmup,
        quant_period=period,
        quant_per_channel=per_channel,
        quant_shrink=shrink,
        anneal_wd_frac=wd_frac,
        group_quantizer_map=gqm,
    )
    return model, q


def train(model, opt, n, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def compare(m1, o1, m2, o2):
    for a, b in zip(m1.parameters(), m2.parameters()):
        exact(a, b)
        for key in ("latent", "quants"):
            assert (key in o1.state[a]) == (key in o2.state[b])
            if key in o1.state[a]:
                exact(o1.state[a][key], o2.state[b][key])
    assert o1.num_steps == o2.num_steps
    for g1, g2 in zip(o1.param_groups, o2.param_groups):
        for key in ("cumu_lr", "inv_slope", "weight_decay", "num_steps"):
            assert g1.get(key) == g2.get(key), key


TRAJECTORIES = [
    ("sgd", "hard", 0, 10, False, None, False, 0.0, False),
    ("sgd", "parq", 0, 10, False, None, False, 0.0, False),
    ("adamw", "parq", 3, 1, False, None, False, 0.0, False),
    ("adamw", "binaryrelax", 0, 10, True, None, False, 0.0, False),
    ("sgd", "parq", 3, 10, True, 8, False, 0.0, False),
    ("sgd", "parq", 0, 1, True, None, True, 0.5, False),
    ("adamw", "hard", 3, 10, False, None, False, 0.0, True),
    ("sgd", "binaryrelax", 0, 1, False, None, False, 0.5, True),
]


@pytest.mark.parametrize("case", TRAJECTORIES, ids=lambda c: "-".join(map(str, c)))
def test_trajectories_match(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # block size warning
        m1, o1 = make_run(P, *case)
        m2, o2 = make_run(T, *case)
    train(m1, o1, 30)
    train(m2, o2, 30)
    compare(m1, o1, m2, o2)


@pytest.mark.parametrize("direction", ["ours->torchao", "torchao->ours"])
def test_checkpoint_interop(direction):
    case = ("adamw", "parq", 0, 10, True, None, False, 0.0, False)
    src, dst = (P, T) if direction == "ours->torchao" else (T, P)
    m_src, o_src = make_run(src, *case)
    train(m_src, o_src, 12)
    m_dst, o_dst = make_run(dst, *case)
    m_dst.load_state_dict(m_src.state_dict())
    o_dst.load_state_dict(copy.deepcopy(o_src.state_dict()))
    train(m_src, o_src, 10, seed=5)
    train(m_dst, o_dst, 10, seed=5)
    compare(m_src, o_src, m_dst, o_dst)
