import copy
import warnings

import pytest
import torch
from parq_optim import (
    LSBQuantizer,
    ProxHardQuant,
    ProxPARQ,
    QuantOptimizer,
    UnifQuantizer,
    build_quant_optimizer,
    nearest,
    quant_param_groups,
)
from torch import nn


def mlp(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 5)).to(dtype)


def batches(n, seed=1, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(16, 12, generator=g).to(dtype), torch.randint(0, 5, (16,), generator=g))
        for _ in range(n)
    ]


def run(model, opt, data, sched=None):
    for x, y in data:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if sched is not None:
            sched.step()


def sgd(model, bits=1, **kw):
    return torch.optim.SGD(
        quant_param_groups(model, bits, **kw), lr=0.05, momentum=0.9, weight_decay=1e-3
    )


def adamw(model, bits=1):
    return torch.optim.AdamW(quant_param_groups(model, bits), lr=1e-2, weight_decay=0.05)


def params_equal(m1, m2):
    for a, b in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_is_optimizer_and_delegates():
    m = mlp()
    base = sgd(m)
    opt = QuantOptimizer(base, UnifQuantizer(), ProxHardQuant())
    assert isinstance(opt, torch.optim.Optimizer)
    assert opt.param_groups is base.param_groups and opt.state is base.state
    assert opt.defaults is base.defaults
    assert "QuantOptimizer" in repr(opt) and "SGD" in repr(opt)


def test_no_quant_group_is_base_optimizer_bitwise():
    m1, m2 = mlp(), mlp()
    with pytest.warns(UserWarning, match="no parameter group"):
        opt = QuantOptimizer(
            torch.optim.SGD(m1.parameters(), lr=0.1, momentum=0.9), UnifQuantizer(), ProxHardQuant()
        )
    run(m1, opt, batches(5))
    run(m2, torch.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9), batches(5))
    params_equal(m1, m2)
    assert opt.num_steps == 5


def test_warmup_steps_equal_base_optimizer():
    m1, m2 = mlp(), mlp()
    opt = QuantOptimizer(sgd(m1), LSBQuantizer(), ProxHardQuant(), warmup_steps=4)
    run(m1, opt, batches(4))
    run(m2, sgd(m2), batches(4))
    params_equal(m1, m2)
    assert opt.num_steps == 4 and all("latent" not in s for s in opt.state.values())


@pytest.mark.parametrize("make_base", [sgd, adamw])
def test_parq_before_anneal_start_is_full_precision_training(make_base):
    m1, m2 = mlp(), mlp()
    opt = QuantOptimizer(make_base(m1), LSBQuantizer(), ProxPARQ(1000, 2000), quant_period=3)
    run(m1, opt, batches(12))
    run(m2, make_base(m2), batches(12))
    params_equal(m1, m2)
    assert opt.inv_slope == 1.0


def test_parq_with_ended_window_equals_hard_quant():
    m1, m2 = mlp(), mlp()
    o1 = QuantOptimizer(sgd(m1), LSBQuantizer(), ProxPARQ(-1, 0), quant_period=4)
    o2 = QuantOptimizer(sgd(m2), LSBQuantizer(), ProxHardQuant(), quant_period=4)
    run(m1, o1, batches(10))
    run(m2, o2, batches(10))
    params_equal(m1, m2)


def test_ste_levels_latent_and_prox_relation():
    m = mlp()
    opt = QuantOptimizer(sgd(m, bits=2), UnifQuantizer(), ProxHardQuant(), quant_period=3)
    for k, batch in enumerate(batches(9)):
        run(m, opt, [batch])
        for p in (m[0].weight, m[2].weight):
            st = opt.state[p]
            assert p.unique().numel() <= 4
            assert torch.equal(nearest(st["quants"], st["latent"]), p) or k % 3 == 0
            assert not torch.equal(st["latent"], p)
    assert opt.quantized_fraction() == 1.0


def test_quants_refresh_only_on_period_and_cumu_lr():
    m = mlp()
    base = sgd(m)
    opt = QuantOptimizer(base, LSBQuantizer(), ProxHardQuant(), warmup_steps=2, quant_period=3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    lrs, prev = [], None
    for t, batch in enumerate(batches(11)):
        lrs.append(base.param_groups[0]["lr"])
        run(m, opt, [batch], sched)
        if t < 2:
            continue
        Q = opt.state[m[0].weight]["quants"].clone()
        if prev is not None:
            assert torch.equal(Q, prev) == ((t - 2) % 3 != 0)
        prev = Q
    assert opt.param_groups[0]["cumu_lr"] == pytest.approx(sum(lrs[2:]))
    assert opt.num_steps == 11 and "num_steps" not in opt.param_groups[1]


def test_anneal_wd_and_inv_slope_logging():
    m = mlp()
    opt = QuantOptimizer(sgd(m), LSBQuantizer(), ProxPARQ(0, 20), anneal_wd_frac=0.5)
    run(m, opt, batches(5))
    r = opt.param_groups[0]["inv_slope"]
    assert r == pytest.approx(ProxPARQ(0, 20).inv_slope(4))
    assert opt.param_groups[0]["weight_decay"] == pytest.approx(r * 0.5 * 1e-3 + 0.5 * 1e-3)
    assert opt.param_groups[1]["weight_decay"] == 0.0


def test_per_channel_conv_and_blocks():
    conv = nn.Conv2d(3, 6, 3)
    opt = QuantOptimizer(
        torch.optim.SGD(quant_param_groups(conv, 2), lr=0.1),
        UnifQuantizer(),
        ProxHardQuant(),
        quant_per_channel=True,
    )
    conv(torch.randn(2, 3, 8, 8)).sum().backward()
    opt.step()
    assert opt.state[conv.weight]["quants"].shape == (6, 4)
    assert all(r.unique().numel() <= 4 for r in conv.weight.detach().flatten(1))

    lin = nn.Linear(16, 4)
    opt = QuantOptimizer(
        torch.optim.SGD(quant_param_groups(lin, 1, block_size=8), lr=0.1),
        UnifQuantizer(),
        ProxHardQuant(),
        quant_per_channel=True,
    )
    lin(torch.randn(3, 16)).sum().backward()
    opt.step()
    assert opt.state[lin.weight]["quants"].shape == (8, 2)
    assert all(b.unique().numel() <= 2 for b in lin.weight.detach().view(-1, 8))
    with pytest.warns(UserWarning, match="quant_per_channel"):
        QuantOptimizer(
            torch.optim.SGD(quant_param_groups(lin, 1, block_size=8), lr=0.1),
            UnifQuantizer(),
            ProxHardQuant(),
        )


def test_closure_sees_quantized_weights_and_returns_loss():
    m = mlp()
    opt = QuantOptimizer(sgd(m), UnifQuantizer(), ProxHardQuant(), quant_period=1)
    x, y = batches(1)[0]
    seen = []

    def closure():
        opt.zero_grad()
        seen.append(m[0].weight.detach().unique().numel())
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        return loss

    losses = [opt.step(closure) for _ in range(3)]
    assert seen[0] > 2 and seen[1:] == [2, 2]
    assert all(isinstance(v, torch.Tensor) for v in losses)


@pytest.mark.parametrize("make_base", [sgd, adamw])
def test_state_dict_lockstep_resume(make_base):
    m = mlp()
    opt = QuantOptimizer(make_base(m), LSBQuantizer(), ProxPARQ(0, 40), quant_period=4)
    data = batches(30)
    run(m, opt, data[:15])
    m2 = copy.deepcopy(m)
    sd = copy.deepcopy(opt.state_dict())
    opt2 = QuantOptimizer(make_base(m2), LSBQuantizer(), ProxPARQ(0, 40), quant_period=4)
    opt2.load_state_dict(sd)
    run(m, opt, data[15:])
    run(m2, opt2, data[15:])
    params_equal(m, m2)
    for p, p2 in zip(m.parameters(), m2.parameters()):
        for key in ("latent", "quants"):
            if key in opt.state[p]:
                assert torch.equal(opt.state[p][key], opt2.state[p2][key])
    g, g2 = opt.param_groups[0], opt2.param_groups[0]
    assert (g["num_steps"], g["cumu_lr"], g["inv_slope"]) == (
        g2["num_steps"],
        g2["cumu_lr"],
        g2["inv_slope"],
    )
    opt2.load_state_dict(sd, start_step=3)
    assert opt2.num_steps == 3


def test_adamw_empty_state_at_first_qat_step():
    m = mlp()
    opt = QuantOptimizer(adamw(m), LSBQuantizer(), ProxHardQuant())
    run(m, opt, batches(2))
    assert {"step", "exp_avg", "latent", "quants"} <= set(opt.state[m[0].weight])


def test_lr_scheduler_on_wrapper_or_base_no_warning():
    lrs = []
    for attach in ("wrapper", "base"):
        m = mlp()
        base = sgd(m)
        opt = QuantOptimizer(base, LSBQuantizer(), ProxHardQuant())
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(
                opt if attach == "wrapper" else base, T_max=6
            )
            seq = []
            for batch in batches(6):
                run(m, opt, [batch], sched)
                seq.append(base.param_groups[0]["lr"])
        lrs.append(seq)
    assert lrs[0] == lrs[1]


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_dtypes_run(dtype):
    m = mlp(dtype=dtype)
    opt = QuantOptimizer(sgd(m, bits=2), UnifQuantizer(), ProxHardQuant())
    run(m, opt, batches(3, dtype=dtype))
    assert opt.state[m[0].weight]["quants"].dtype == dtype
    assert m[0].weight.unique().numel() <= 4


def test_frozen_params_untouched():
    m = mlp()
    m[0].weight.requires_grad_(False)
    w0 = m[0].weight.clone()
    opt = QuantOptimizer(sgd(m), LSBQuantizer(), ProxHardQuant())
    run(m, opt, batches(3))
    assert torch.equal(m[0].weight, w0) and m[0].weight not in opt.state
    assert m[2].weight.unique().numel() <= 2


def test_group_quantizer_map_and_hard_quantize():
    m = mlp()
    groups = [
        {"params": [m[0].weight], "quant_bits": 1},
        {"params": [m[2].weight], "quant_bits": 2},
        {"params": [m[0].bias, m[2].bias]},
    ]
    opt = QuantOptimizer(
        torch.optim.SGD(groups, lr=0.05),
        LSBQuantizer(),
        ProxPARQ(0, 100),
        group_quantizer_map={1: UnifQuantizer()},
    )
    run(m, opt, batches(5))
    assert opt.quantized_fraction() < 1.0
    latent = opt.state[m[0].weight]["latent"].clone()
    opt.hard_quantize_()
    assert torch.equal(opt.state[m[0].weight]["latent"], latent)
    assert opt.quantized_fraction() == 1.0
    assert m[0].weight.unique().numel() <= 2 and m[2].weight.unique().numel() <= 4
    gaps = opt.state[m[2].weight]["quants"].diff()  # UnifQuantizer for quantized group 1
    torch.testing.assert_close(gaps, gaps[:1].expand(3))


def test_determinism_under_seed():
    outs = []
    for _ in range(2):
        m = mlp(seed=3)
        run(m, QuantOptimizer(sgd(m), LSBQuantizer(), ProxPARQ(0, 8)), batches(8, seed=4))
        outs.append([p.clone() for p in m.parameters()])
    for a, b in zip(*outs):
        assert torch.equal(a, b)


def test_quant_param_groups_shared_and_exclude():
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 4))
    m[2].weight = m[0].weight
    groups = quant_param_groups(m, 2)
    assert len(groups[0]["params"]) == 1 and groups[0]["quant_bits"] == 2
    assert groups[1]["weight_decay"] == 0.0 and len(groups[1]["params"]) == 4
    groups = quant_param_groups(m, 2, exclude=lambda name, mod: isinstance(mod, nn.Linear))
    assert len(groups) == 1 and "quant_bits" not in groups[0]


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"quant_period": 0}, ValueError, "quant_period must be an integer >= 1, got 0"),
        ({"warmup_steps": -1}, ValueError, "warmup_steps"),
        ({"anneal_wd_frac": 2.0}, ValueError, "anneal_wd_frac"),
    ],
)
def test_bad_optimizer_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        QuantOptimizer(sgd(mlp()), LSBQuantizer(), ProxHardQuant(), **kwargs)


def test_bad_groups_and_bases():
    m = mlp()
    with pytest.raises(ValueError, match="quant_bits must be an integer >= 0"):
        QuantOptimizer(
            torch.optim.SGD([{"params": [m[0].weight], "quant_bits": -1}], lr=0.1),
            LSBQuantizer(),
            ProxHardQuant(),
        )
    with pytest.raises(ValueError, match="b >= 1, got b=0"):
        QuantOptimizer(
            torch.optim.SGD([{"params": [m[0].weight], "quant_bits": 0}], lr=0.1),
            UnifQuantizer(),
            ProxHardQuant(),
        )
    with pytest.raises(ValueError, match="does not divide the last dim 12"):
        QuantOptimizer(
            torch.optim.SGD(
                [{"params": [m[0].weight], "quant_bits": 1, "quant_block_size": 5}], lr=0.1
            ),
            LSBQuantizer(),
            ProxHardQuant(),
            quant_per_channel=True,
        )
    conv = nn.Conv2d(2, 2, 3)
    with pytest.raises(ValueError, match="<= 2 dims"):
        QuantOptimizer(
            torch.optim.SGD(
                [{"params": [conv.weight], "quant_bits": 1, "quant_block_size": 3}], lr=0.1
            ),
            LSBQuantizer(),
            ProxHardQuant(),
            quant_per_channel=True,
        )
    with pytest.raises(TypeError, match="require a closure"):
        QuantOptimizer(torch.optim.LBFGS(m.parameters()), LSBQuantizer(), ProxHardQuant())
    with pytest.raises(ValueError, match="bits must be"):
        quant_param_groups(m, -2)
    with pytest.raises(ValueError, match="needs anneal_end"):
        build_quant_optimizer(sgd(m), "lsbq", "parq")
    opt = build_quant_optimizer(sgd(m), "lsbq", "parq", anneal_end=10)
    assert isinstance(opt.prox_map, ProxPARQ) and opt.prox_map.anneal_end == 10
