"""QuantOptimizer with 2 gloo processes on CPU, under DistributedDataParallel and under FSDP2
(``fully_shard``: DTensor parameters with uneven and empty row shards), against one process on the
whole batch: trajectories (weights ``w`` and latents ``u`` after every step), final codes and level
sets, quantized fraction. One spawn runs every scenario of ``dist_cases.SCENARIOS``."""

import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import dist_cases  # noqa: E402

dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

# float32 runs: the sharded runs add the ranks' gradient (and |p|-statistics) partial sums in
# another order than one process does, so they agree to float tolerance, not bitwise
ATOL, RTOL = 2e-6, 1e-5


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("dist")
    mp.spawn(dist_cases.worker, args=(2, str(out / "store"), str(out)), nprocs=2, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.fixture(scope="module")
def single():
    torch.set_num_threads(1)
    return {name: dist_cases.run(spec) for name, spec in dist_cases.SCENARIOS.items()}


NAMES = list(dist_cases.SCENARIOS)


def close(a, b):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=RTOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_sharded_trajectory_equals_single_process_to_float_tolerance(sharded, single, name):
    got, ref = sharded[0][name], single[name]
    assert len(got["trajectory"]) == len(ref["trajectory"]) == dist_cases.STEPS
    for step, (a, b) in enumerate(zip(got["trajectory"], ref["trajectory"])):
        for key in ("w", "latent"):
            for x, y in zip(a[key], b[key]):
                try:
                    close(x, y)
                except AssertionError as e:
                    raise AssertionError(f"{name}: {key} differs after step {step + 1}") from e


@pytest.mark.parametrize("name", NAMES)
def test_sharded_final_codes_equal_and_levels_match_single_process(sharded, single, name):
    got, ref = sharded[0][name], single[name]
    assert got["export"].keys() == ref["export"].keys()
    for key in ref["export"]:
        assert torch.equal(got["export"][key]["codes"], ref["export"][key]["codes"]), key
        close(got["export"][key]["levels"], ref["export"][key]["levels"])
    assert got["quantized_fraction"] == ref["quantized_fraction"] == 1.0
    assert got["num_steps"] == ref["num_steps"] == dist_cases.STEPS
    assert got["cumu_lr"] == ref["cumu_lr"]


@pytest.mark.parametrize("name", NAMES)
def test_every_rank_holds_the_same_whole_result(sharded, name):
    a, b = sharded[0][name], sharded[1][name]
    for key in a["export"]:  # the gathered codes and level sets, bitwise equal on both ranks
        assert torch.equal(a["export"][key]["codes"], b["export"][key]["codes"])
        assert torch.equal(a["export"][key]["levels"], b["export"][key]["levels"])
    for x, y in zip(a["trajectory"][-1]["w"], b["trajectory"][-1]["w"]):
        assert torch.equal(x, y)


def test_column_sharded_dtensor_is_rejected_with_its_placements(sharded):
    message = sharded[0]["unsupported_layout"]
    assert "sharded on dim 0" in message and "Shard(dim=1)" in message, message


def test_fsdp2_parameters_are_row_sharded_dtensors(sharded):
    for name, result in sharded[0].items():
        if name == "unsupported_layout":
            continue
        kinds = set(result["placements"])
        if name.startswith("fsdp"):
            assert kinds == {"(Shard(dim=0),)"}, (name, kinds)
        else:
            assert kinds == {"plain"}, (name, kinds)
