"""DP with Opacus (spec test 13) and the CLI end to end (spec test 14)."""

import json

import pytest
import torch
from fedgmt import FedConfig, run_reference
from fedgmt import algorithms as core
from fedgmt.cli import main
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


def test_dp_epsilon_grows_and_history_roundtrip():
    cfg = FedConfig(method="fedgmt", num_clients=2, fraction_train=1.0, num_rounds=3,
                    local_epochs=1, dp=True, dp_delta=1e-3)  # fmt: skip
    h = run_reference(cfg)
    assert h.dp_epsilon_max == sorted(h.dp_epsilon_max) and h.dp_epsilon_max[0] > 0
    assert h.dp_epsilon_max[-1] > h.dp_epsilon_max[0]
    # epsilon from the restored history equals one accountant over all steps
    from opacus.accountants import RDPAccountant

    seen = {}
    run_reference(cfg, evaluate_fn=lambda t, s, clients: seen.update(clients))
    d = seen[0]["dp"]
    acc = RDPAccountant()
    for noise, rate, steps in zip(d["noise"], d["rate"], d["steps"]):
        for _ in range(steps):
            acc.step(noise_multiplier=noise, sample_rate=rate)
    assert acc.get_epsilon(1e-3) == pytest.approx(h.dp_epsilon_max[-1], rel=0.3)


def test_dp_rejects_batchnorm():
    from fedgmt.dp import make_private

    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    cfg = FedConfig(dp=True, dp_delta=1e-3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="not supported by Opacus"):
        make_private(model, opt, torch.randn(8, 4), torch.zeros(8, dtype=torch.long), cfg, {},
                     torch.Generator())  # fmt: skip


def test_cli_run_reference_writes_results(tmp_path, capsys):
    rc = main(["run", "--engine", "reference", "--strategy", "fedavg,fedgmt", "--rounds", "3",
               "--local-epochs", "1", "--out", str(tmp_path), "--quiet"])  # fmt: skip
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert set(res["summary"]) == {"fedavg", "fedgmt"} and res["versions"]["torch"]
    assert (tmp_path / "accuracy.png").exists()
    assert "fedgmt" in capsys.readouterr().out


def test_cli_config_file(tmp_path):
    (tmp_path / "c.yaml").write_text(
        "rounds: 2\nlocal-epochs: 1\nstrategy: fedavg\nengine: reference\n"
    )
    assert (
        main(["run", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path), "--quiet"]) == 0
    )
    assert json.loads((tmp_path / "results.json").read_text())["config"]["num_rounds"] == 2


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run", "--dirichlet", "0"], "--dirichlet"),
        (["run", "--fraction", "1.5"], "--fraction"),
        (["run", "--strategy", "fedfoo"], "--strategy=fedfoo"),
        (["run", "--num-clients", "5000", "--engine", "reference"], "cannot give each of 5000"),
        (["run", "--engine", "spark"], "--engine=spark"),
        (["run", "--device", "tpu"], "--device=tpu"),
        (["run", "--rounds", "x"], "--rounds"),
        (["run", "--strategy", "fedsam", "--dp"], "SAM-based"),
        (["run", "--lr", "0.05", "--engine", "reference"], "unstable dual"),
    ],
)
def test_cli_bad_input_exit_2(argv, needle, capsys, tmp_path):
    rc = main([*argv, "--out", str(tmp_path)]) if argv[-1] != "x" else None
    if rc is None:
        with pytest.raises(SystemExit) as e:
            main(argv)
        rc = e.value.code
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_cli_check_and_partition(capsys):
    assert main(["check", "--lr", "0.05", "--batch-size", "16"]) == 2
    assert "kappa" in capsys.readouterr().out
    assert (
        main(
            [
                "partition",
                "--num-clients",
                "100",
                "--dirichlet",
                "0.01",
                "--min-partition-size",
                "1",
            ]
        )
        == 0
    )
