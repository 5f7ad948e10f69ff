"""DP-SGD with Opacus: the dual survives the noise, the accountant is cumulative per client."""

import math

import pytest
import torch
from fedgmt import FedConfig, run_reference
from fedgmt import algorithms as core
from fedgmt.dataset import load_federated_data
from torch import nn

pytest.importorskip("opacus")


def test_dp_dual_term_reaches_update():
    """sigma = 0, large C, one step: the update with h differs by exactly -eta h / beta."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    cfg = FedConfig(method="fedgmt", gamma=0.0, beta=4.0, lr=0.5, momentum=0.0, weight_decay=0.0,
                    batch_size=8, local_epochs=1, dp=True, dp_noise=0.0, dp_clip=1e6,
                    dp_delta=1e-3)  # fmt: skip
    w0 = {k: v.clone() for k, v in model.state_dict().items()}
    h = {k: torch.randn_like(v) for k, v in model.named_parameters()}
    outs = []
    for state in ({"h": h}, {}):
        pay = core.Payload(arrays=w0, lr=0.5, round=1)
        outs.append(core.client_update("fedgmt", model, (x, y), pay, state, cfg,
                                       torch.Generator().manual_seed(0)))  # fmt: skip
    for k in h:
        torch.testing.assert_close(outs[0].arrays[k] - outs[1].arrays[k], -0.5 * h[k] / 4.0,
                                   atol=1e-5, rtol=1e-4)  # fmt: skip


def test_dp_epsilon_per_client_equals_one_accountant_over_all_its_steps():
    """Each client's reported cumulative epsilon equals that of ONE fresh RDP accountant stepped
    through all of that client's DP-SGD steps (built from the config, not from the saved history),
    and the reported max is the max of those per-client values.

    Tolerance rel 1e-9: both sides run the same RDP arithmetic on the same (sigma, q, steps); only
    the order of the float additions differs (per-round history entries vs one entry)."""
    from opacus.accountants import RDPAccountant

    rounds = 3
    cfg = FedConfig(method="fedgmt", num_clients=2, fraction_train=1.0, num_rounds=rounds,
                    local_epochs=1, dp=True, dp_delta=1e-3)  # fmt: skip
    h = run_reference(cfg)
    assert h.dp_epsilon_max == sorted(h.dp_epsilon_max) and h.dp_epsilon_max[0] > 0
    assert h.dp_epsilon_max[-1] > h.dp_epsilon_max[0]
    reported = h.dp_epsilon_client[-1]  # every client takes part in every round (f = 1)
    assert sorted(reported) == [0, 1]
    for pid, n in enumerate(load_federated_data(cfg).partition.sizes):
        batches = math.ceil(n / cfg.batch_size)  # Opacus: q = 1 / len(loader), len(loader) steps
        acc = RDPAccountant()
        for _ in range(rounds * cfg.local_epochs * batches):
            acc.step(noise_multiplier=cfg.dp_noise, sample_rate=1.0 / batches)
        assert reported[pid] == pytest.approx(acc.get_epsilon(cfg.dp_delta), rel=1e-9)
    assert h.dp_epsilon_max[-1] == max(reported.values())


def test_dp_rejects_batchnorm():
    from fedgmt.dp import make_private

    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    cfg = FedConfig(dp=True, dp_delta=1e-3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="not supported by Opacus"):
        make_private(model, opt, torch.randn(8, 4), torch.zeros(8, dtype=torch.long), cfg, {},
                     torch.Generator())  # fmt: skip
