"""Analytic checks, reductions, invariants, determinism and divergence handling of the shared core."""

import math

import pytest
import torch
import torch.nn.functional as F
from fedgmt import FedConfig, run_reference
from fedgmt import algorithms as core
from fedgmt.guard import DivergenceMonitor, UnstableDualError, check_stability, momentum_sum
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

SMALL = dict(num_rounds=3, num_clients=8, fraction_train=0.5, local_epochs=1, min_partition_size=10)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(2, 7), st.floats(0.5, 5.0), st.floats(0.1, 3.0))
def test_kl_gradient_closed_form(b, c, tau, gamma):
    g = torch.Generator().manual_seed(b * 100 + c)
    z = torch.randn(b, c, generator=g, dtype=torch.float64, requires_grad=True)
    s = torch.randn(b, c, generator=g, dtype=torch.float64)
    (gamma * core.trajectory_kl(z, s, tau)).backward()
    expected = gamma * tau * (F.softmax(z / tau, 1) - F.softmax(s / tau, 1)) / b
    torch.testing.assert_close(z.grad, expected.detach())
    assert float(core.trajectory_kl(s, s, tau)) == pytest.approx(0.0, abs=1e-12)


class Quad(nn.Module):
    """Client objective f_i = 1/2 a_i ||w - c_i||^2; data row = [a_i, c_i]."""

    def __init__(self, p):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(p, dtype=torch.float64))

    def forward(self, x):
        return torch.cat([x, self.w.expand(x.shape[0], -1)], 1)


def quad_loss(z, y):
    p = (z.shape[1] - 1) // 2
    a, c, w = z[:, 0], z[:, 1 : 1 + p], z[:, 1 + p :]
    return (0.5 * a * ((w - c) ** 2).sum(1)).mean()


def run_quadratic(method, rounds, lr=0.2, k=3, beta=1.0, a=(1.0, 2.0, 3.0, 4.0)):
    torch.manual_seed(0)
    p = 3
    cs = torch.randn(len(a), p, dtype=torch.float64)
    cfg = FedConfig(method=method, num_clients=len(a), fraction_train=1.0, lr=lr, lr_decay=1.0,
                    momentum=0.0, weight_decay=0.0, batch_size=1, local_epochs=k, gamma=0.0,
                    beta=beta, min_partition_size=1)  # fmt: skip
    model = Quad(p)
    state = core.init_server_state(method, cfg, model.state_dict(), ["w"])
    cstates = [{} for _ in a]
    data = [(torch.cat([torch.tensor([ai], dtype=torch.float64), cs[i]])[None], torch.zeros(1))
            for i, ai in enumerate(a)]  # fmt: skip
    for t in range(1, rounds + 1):
        payload = core.server_payload(method, state)
        replies = [
            core.client_update(method, model, data[i], payload, cstates[i], cfg,
                               core.client_generator(0, t, i), partition_id=i, criterion=quad_loss)
            for i in range(len(a))
        ]  # fmt: skip
        core.server_aggregate(method, state, replies, cfg)
    return state, cstates, cs, torch.tensor(a, dtype=torch.float64), cfg


@pytest.mark.parametrize("method", ["fedgmt", "feddyn", "scaffold"])
def test_quadratic_clients_reach_global_optimum(method):
    state, _, cs, a, _ = run_quadratic(method, rounds=120)
    target = (a[:, None] * cs).sum(0) / a.sum()
    torch.testing.assert_close(state.w["w"], target, atol=1e-6, rtol=0)


def test_quadratic_fedavg_biased_fixed_point():
    lr, k = 0.2, 3
    state, _, cs, a, _ = run_quadratic("fedavg", rounds=60, lr=lr, k=k)
    q = (1 - lr * a) ** k
    target = ((1 - q)[:, None] * cs).sum(0) / (1 - q).sum()
    torch.testing.assert_close(state.w["w"], target, atol=1e-6, rtol=0)
    assert not torch.allclose(target, (a[:, None] * cs).sum(0) / a.sum(), atol=1e-3)


def test_dual_gradient_one_step():
    """mu = lambda = 0: one step with h differs from one without by exactly -eta h / beta."""
    torch.manual_seed(1)
    model = nn.Linear(4, 3)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    cfg = FedConfig(method="fedgmt", gamma=0.0, beta=4.0, lr=0.5, momentum=0.0, weight_decay=0.0,
                    batch_size=8, local_epochs=1)  # fmt: skip
    payload = core.Payload(
        arrays={k: v.clone() for k, v in model.state_dict().items()}, lr=0.5, round=1
    )
    h = {k: torch.randn_like(v) for k, v in model.named_parameters()}
    out_h = core.client_update("fedgmt", model, (x, y), payload, {"h": h}, cfg, torch.Generator())
    out_0 = core.client_update("fedgmt", model, (x, y), payload, {}, cfg, torch.Generator())
    for k in h:
        torch.testing.assert_close(out_h.arrays[k] - out_0.arrays[k], -0.5 * h[k] / 4.0)
    # equals autograd of (1/beta) <w, h>
    w = dict(model.named_parameters())
    lin = sum((w[k] * h[k]).sum() for k in h) / 4.0
    grads = torch.autograd.grad(lin, list(w.values()))
    for gk, k in zip(grads, w):
        torch.testing.assert_close(gk, h[k] / 4.0)


class Flat(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3, dtype=torch.float64))

    def forward(self, x):
        return self.w.expand(x.shape[0], -1)


@pytest.mark.parametrize("mu", [0.0, 0.9])
def test_stability_law(mu):
    """Zero-gradient loss: h shrinks by exactly 1 - eta S(K, mu) / beta per participation."""
    lr, beta, k = 0.05, 10.0, 12
    cfg = FedConfig(method="fedgmt", gamma=0.0, beta=beta, lr=lr, momentum=mu, weight_decay=0.0,
                    batch_size=1, local_epochs=k)  # fmt: skip
    model = Flat()
    h0 = {"w": torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)}
    st_ = {"h": dict(h0)}
    payload = core.Payload(arrays=model.state_dict(), lr=lr, round=1)
    data = (torch.zeros(1, 1), torch.zeros(1))
    core.client_update("fedgmt", model, data, payload, st_, cfg, torch.Generator(),
                       criterion=lambda z, y: 0.0 * z.sum())  # fmt: skip
    kappa = lr * momentum_sum(k, mu) / beta
    torch.testing.assert_close(st_["h"]["w"], (1 - kappa) * h0["w"])


def test_guard_refuses_kappa_ge_2_and_feddyn_not_guarded():
    cfg = FedConfig(
        method="fedgmt", lr=0.05, momentum=0.9, beta=10.0, batch_size=1, local_epochs=60
    )
    with pytest.raises(UnstableDualError, match=r"kappa=.* >= 2; lower lr, raise beta"):
        check_stability([1, 1], cfg)
    assert check_stability([1, 1], cfg.replace(allow_unstable=True)).verdict == "unstable"
    assert check_stability([1, 1], cfg.replace(method="feddyn")).verdict == "not-applicable"


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_ema_closed_form(alpha):
    cfg = FedConfig(
        method="fedgmt", beta=math.inf, ema_alpha=alpha, num_clients=1, fraction_train=1.0
    )
    w1 = {"w": torch.zeros(2, dtype=torch.float64)}
    state = core.init_server_state("fedgmt", cfg, w1, ["w"])
    ws = [w1["w"]]
    for _t in range(1, 5):
        w_new = torch.randn(2, dtype=torch.float64)
        core.server_aggregate("fedgmt", state, [core.ClientReply(0, 1, {"w": w_new})], cfg)
        ws.append(w_new)
    tt = len(ws)
    expected = alpha ** (tt - 1) * ws[0] + sum(
        (1 - alpha) * alpha ** (tt - s) * ws[s - 1] for s in range(2, tt + 1)
    )
    torch.testing.assert_close(state.ema["w"], expected)


def _final(cfg):
    return run_reference(cfg)


def test_reductions_bitwise():
    base = FedConfig(method="fedavg", **SMALL)
    avg = _final(base)
    gmt = _final(base.replace(method="fedgmt", gamma=0.0, beta=math.inf))
    sam = _final(base.replace(method="fedsam", rho=0.0))
    for k in avg.final_arrays:
        assert torch.equal(avg.final_arrays[k], gmt.final_arrays[k])
        assert torch.equal(avg.final_arrays[k], sam.final_arrays[k])
    assert avg.accuracy == gmt.accuracy
    one = base.replace(num_rounds=1)
    a1, s1 = _final(one), _final(one.replace(method="scaffold"))
    for k in a1.final_arrays:
        torch.testing.assert_close(a1.final_arrays[k], s1.final_arrays[k], atol=1e-6, rtol=0)
    sp, dyn = (
        _final(base.replace(method="fedspeed", rho=0.0)),
        _final(base.replace(method="feddyn")),
    )
    for k in sp.final_arrays:
        torch.testing.assert_close(sp.final_arrays[k], dyn.final_arrays[k])


def test_dual_invariants():
    cfg = FedConfig(method="fedgmt", **SMALL)
    seen = set()

    def check(t, state, clients):
        for pid, cs in clients.items():
            if cs:
                seen.add(pid)
            else:
                assert "h" not in cs  # unsampled clients have h = 0
        for k in state.names:
            total = sum(cs["h"][k] for cs in clients.values() if "h" in cs)
            torch.testing.assert_close(state.H[k], total, atol=1e-6, rtol=0)

    run_reference(cfg, evaluate_fn=check)
    assert seen


def test_active_equals_all_under_full_participation():
    cfg = FedConfig(method="fedgmt", num_rounds=2, num_clients=4, fraction_train=1.0,
                    local_epochs=1, min_partition_size=10)  # fmt: skip
    a = _final(cfg)
    b = _final(cfg.replace(dual_average="active"))
    for k in a.final_arrays:
        torch.testing.assert_close(a.final_arrays[k], b.final_arrays[k], atol=1e-6, rtol=0)


def test_determinism_and_checkpoint_roundtrip():
    cfg = FedConfig(method="fedgmt", **SMALL)
    a, b = _final(cfg), _final(cfg)
    assert a.accuracy == b.accuracy and a.sampled == b.sampled
    state = core.init_server_state("scaffold", cfg, {"w": torch.ones(2)}, ["w"])
    again = core.ServerState.from_state_dict(state.state_dict())
    assert torch.equal(again.w["w"], state.w["w"]) and again.round == state.round


def test_sampling_is_seeded_and_without_replacement():
    s = core.sample_clients(3, 7, 100, 10)
    assert s == core.sample_clients(3, 7, 100, 10) and len(set(s)) == 10
    assert s != core.sample_clients(3, 8, 100, 10)


def test_divergence_nan_is_reported():
    cfg = FedConfig(method="fedavg", lr=100.0, momentum=0.0, **{**SMALL, "num_rounds": 4})
    h = run_reference(cfg)
    assert h.diverged and "lr=" in h.divergence_reason
    with pytest.raises(core.DivergenceError):
        run_reference(cfg.replace(on_divergence="raise"))


def test_divergence_monitor_flags_non_finite_and_exploding_numbers():
    w1 = {"w": torch.ones(4), "steps": torch.tensor(3)}  # integer buffers are ignored
    mon = DivergenceMonitor(10, w1, initial_loss=2.0)
    assert mon.loss_ref == pytest.approx(math.log(10))  # at least log C
    assert mon.check(w1, test_loss=5.0, train_loss=0.3) is None
    assert mon.check({"w": 30 * torch.ones(4)}, test_loss=200.0) is None  # bad, not diverged
    assert "test loss" in mon.check(w1, test_loss=1e3)
    assert "non-finite train loss" in mon.check(w1, train_loss=float("nan"))
    assert "parameter norm" in mon.check({"w": 1e4 * torch.ones(4)})
    assert "non-finite global model (parameter w)" in mon.check(
        {"w": torch.tensor([1.0, math.inf])}
    )


def test_exploding_but_finite_run_is_diverged_at_round_1():
    """lr 100 keeps every number finite for a few rounds (test loss ~600, then ~1e17); before, only
    non-finite values or an accuracy collapse counted, so this run reported "diverged": false."""
    cfg = FedConfig(method="fedgmt", lr=100.0, allow_unstable=True, **{**SMALL, "num_rounds": 3})
    h = run_reference(cfg)
    assert h.diverged and h.diverged_at_round == 1 and h.rounds == [1]
    assert all(math.isfinite(v) for v in h.loss)
    with pytest.warns(UserWarning, match="training continues"):
        w = run_reference(cfg.replace(on_divergence="warn"))
    assert w.diverged and w.diverged_at_round == 1 and w.rounds == [1, 2, 3]
    with pytest.raises(core.DivergenceError, match="round 1: test loss"):
        run_reference(cfg.replace(on_divergence="raise"))


def test_healthy_run_is_not_diverged():
    h = run_reference(FedConfig(method="fedgmt", **SMALL))
    assert not h.diverged and h.diverged_at_round is None


def test_hypothesis_profile_keeps_no_database():
    from hypothesis import settings as current

    assert current().database is None and current().deadline is None


def test_fedgmt_beats_fedavg_direction_small():
    """Direction only (scaled down): one seed, 20 rounds on digits Dir(0.1)."""
    cfg = FedConfig(num_rounds=20, local_epochs=3)
    gmt = run_reference(cfg.replace(method="fedgmt")).last_k_accuracy(10)
    avg = run_reference(cfg.replace(method="fedavg")).last_k_accuracy(10)
    assert gmt > avg


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"dirichlet_alpha": 0.0}, "dirichlet_alpha"),
        ({"fraction_train": 1.5}, "fraction_train"),
        ({"fraction_train": 0.0}, "fraction_train"),
        ({"method": "fedfoo"}, "method"),
        ({"gamma": -1.0}, "gamma"),
        ({"tau": 0.0}, "tau"),
        ({"ema_alpha": 1.5}, "ema_alpha"),
        ({"beta": 0.0}, "beta"),
        ({"lr": -0.1}, "lr"),
        ({"method": "fedsam", "dp": True}, "SAM-based"),
    ],
)
def test_bad_config(kw, match):
    with pytest.raises(ValueError, match=match):
        FedConfig(**kw)


def test_more_clients_than_samples():
    with pytest.raises(ValueError, match="cannot give each of 2000 clients"):
        run_reference(FedConfig(num_clients=2000, min_partition_size=1))


def test_run_config_roundtrip():
    cfg = FedConfig(method="fedgmt-kl", beta=math.inf, data_dir=None, dp=True)
    assert FedConfig.from_run_config(cfg.to_run_config()) == cfg
