"""Equivalence with the maintained reference, torchao.prototype.parq (spec §8 items 15-18)."""

import copy
import warnings

import parq_optim as P
import pytest
import torch
from torch import nn

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


def test_optimal_lsbq_two_bit_per_tensor_matches_up_to_rounding():
    p = weight(7)
    q1, Q1 = P.LSBQuantizer(optimal=True).quantize(p, 2)
    q2, Q2 = T.LSBQuantizer(optimal=True).quantize(p, 2)
    torch.testing.assert_close(Q1, Q2, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(q1, q2, rtol=1e-6, atol=1e-6)


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
