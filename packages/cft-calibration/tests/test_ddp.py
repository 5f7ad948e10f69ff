"""Data-parallel fine-tuning (torchrun / Accelerate DDP): two gloo processes on CPU must end with
identical weights, equal to one process trained on the combined batches."""

import os
import tempfile
from pathlib import Path

import cft_calibration as C
import pytest
import torch

FT = dict(
    model="tiny-clm", data="synthetic-category", max_questions=60, epochs=2, batch_size=5,
    lr=1e-3, method="rcft", sft_loss="full_vocab", threads=1,
)  # fmt: skip


def _feature_run():
    task = C.synthetic_feature_mcqa({"train": 37, "val": 20}, seed=3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        scorer = C.FeatureScorer(16, hidden=8, dropout=0.0)
    # batch 5 over 37 items: shards of 3 and 2, a last batch of 2 (one question per rank)
    cfg = C.TrainConfig(epochs=3, lr=1e-2, batch_size=5, select="ece_within_acc", seed=4)
    C.train(scorer, task.splits["train"], cfg, C.EMECERegularizer(lam=1.0), task.splits["val"])
    return scorer.state_dict()


def _worker(rank, world, init_file, out_dir):
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        features = _feature_run()
        res = C.run_finetune(C.FinetuneConfig(**FT))
        torch.save(
            {"features": features, "lm": res.scorer.state_dict(), "history": res.history},
            Path(out_dir) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_ranks_match_each_other_and_one_process_on_the_combined_batch():
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init")
        mp.spawn(_worker, args=(2, init, tmp), nprocs=2, join=True)
        r0, r1 = (torch.load(Path(tmp) / f"rank{r}.pt") for r in (0, 1))
    single_features = _feature_run()
    single = C.run_finetune(C.FinetuneConfig(**FT))
    for key in ("features", "lm"):
        assert r0[key].keys() == r1[key].keys()
        for name in r0[key]:
            assert torch.equal(r0[key][name], r1[key][name]), (key, name)  # ranks agree exactly
    for name, value in single_features.items():
        if name == "net.3.bias":
            # shared by every option, so softmax-invariant: its true gradient is 0 and Adam turns
            # rounding noise into steps of size lr, different in every summation order
            continue
        torch.testing.assert_close(r0["features"][name], value, rtol=1e-5, atol=1e-6)
    for name, value in single.scorer.state_dict().items():
        torch.testing.assert_close(r0["lm"][name], value, rtol=1e-4, atol=1e-5)
    # the logged losses are the global batch's, as one process logs them
    for a, b in zip(r0["history"], single.history):
        if "loss" in a:
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)
    assert not torch.equal(r0["lm"][name], torch.zeros_like(value))


def test_train_is_single_process_without_a_process_group():
    from cft_calibration.train import distributed

    assert distributed() is None
