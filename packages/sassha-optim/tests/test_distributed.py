"""Two gloo processes on CPU following the README's DDP recipe: both forward passes inside
``ddp_model.no_sync()``, the optimizer all-reduces ``g̃`` and the signed ``Ĥ``."""

import os
import socket
import time
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from sassha_optim import Sassha
from torch.nn.parallel import DistributedDataParallel

pytestmark = pytest.mark.distributed

WORLD = 2
TIMEOUT_S = 180
SCENARIOS = {
    "rho0": {"rho": 0.0},
    "rho_sync": {"rho": 0.2, "sync_perturbation_grad": True},
    "rho_local": {"rho": 0.2},
}


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)
    ).double()


def make_data():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(16, 5, generator=gen, dtype=torch.float64), torch.randint(
        0, 3, (16,), generator=gen
    )


def run(kwargs, x, y, ddp=False, steps=5):
    model = make_model()
    net = DistributedDataParallel(model) if ddp else model
    opt = Sassha(model.parameters(), lr=0.05, lazy_hessian=2, n_samples=1, **kwargs)
    for _ in range(steps):
        with net.no_sync() if ddp else nullcontext():  # forward and backward inside no_sync

            def closure():
                loss = torch.nn.functional.cross_entropy(net(x), y)
                loss.backward(create_graph=opt.create_graph)
                return loss

            opt.step(closure)
    return [p.detach().clone() for p in model.parameters()], opt.hvp_calls


def worker(rank, port, outdir):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    x, y = make_data()
    shard = slice(rank * 8, (rank + 1) * 8)
    results = {name: run(kw, x[shard], y[shard], ddp=True) for name, kw in SCENARIOS.items()}
    torch.save(results, Path(outdir) / f"rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available")
def test_two_process_gloo_matches_single_process(tmp_path):
    ctx = mp.start_processes(worker, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=False,
                             start_method="spawn")  # fmt: skip
    deadline = time.monotonic() + TIMEOUT_S
    while not ctx.join(timeout=5):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.terminate()
            pytest.fail(f"distributed workers did not finish within {TIMEOUT_S} s")
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    x, y = make_data()
    for name in ("rho0", "rho_sync"):  # the same parameters as one process on the whole batch
        single, hvps = run(SCENARIOS[name], x, y)
        for r in ranks:
            params, rank_hvps = r[name]
            assert rank_hvps == hvps == 4  # refreshes at steps 1, 2 (warm-up of k = 2), 3 and 5
            for a, b in zip(params, single):
                torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)
    for a, b in zip(ranks[0]["rho_local"][0], ranks[1]["rho_local"][0]):  # per-worker ε, same w
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    single, _ = run(SCENARIOS["rho_local"], x, y)
    assert any(not torch.allclose(a, b) for a, b in zip(ranks[0]["rho_local"][0], single))
