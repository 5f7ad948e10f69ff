"""``distill`` under torchrun: two gloo processes on CPU train one stage with DDP and end with
identical weights and buffers (BSPN statistics, quantiser steps)."""

import pytest
import torch

from .conftest import tiny_batch, tiny_bert_config


def _data(n, seed):
    ids, mask = tiny_batch(seed, batch=n, length=8)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
            "labels": (ids[:, 1] % 2).long()}  # fmt: skip


def test_shard_splits_rows_once_quantisers_are_initialised():
    from sorbet_snn import convert_teacher
    from sorbet_snn.distill import _shard
    from transformers import BertForSequenceClassification

    student, _ = convert_teacher(BertForSequenceClassification(tiny_bert_config()), "S1")
    batch = _data(5, 0)
    assert _shard(batch, 1, 2, student) is batch  # steps not initialised: all ranks see it all
    for name, buf in student.named_buffers():
        if name.endswith("initialized"):
            buf.fill_(True)
    part = _shard(batch, 1, 2, student)
    assert torch.equal(part["input_ids"], batch["input_ids"][1::2])  # rows 1, 3
    one = {k: v[:1] for k, v in batch.items()}
    assert _shard(one, 1, 2, student) is one  # fewer rows than ranks: the whole batch


def _worker(rank: int, world: int, folder: str) -> None:
    import torch.distributed as dist
    from sorbet_snn import convert_teacher
    from sorbet_snn.distill import StageSettings, _world, train_stage
    from transformers import BertForSequenceClassification

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank,
                            world_size=world)  # fmt: skip
    assert _world() == (rank, world)
    torch.manual_seed(0)
    teacher, _ = convert_teacher(BertForSequenceClassification(tiny_bert_config()), "fp")
    student, _ = convert_teacher(teacher.eval(), "S3", bspn_warmup=2)
    settings = StageSettings(epochs=2, batch_size=8, eval_every=3, lr=1e-3)
    info = train_stage(student, teacher, _data(32, 0), _data(8, 1), "SST-2", settings, quiet=True)
    torch.save({"state": student.state_dict(), "best_step": info["best_step"]},
               f"{folder}/rank{rank}.pt")  # fmt: skip
    dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_ranks_end_with_identical_weights(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(2, str(tmp_path)), nprocs=2, join=True)
    a = torch.load(tmp_path / "rank0.pt")
    b = torch.load(tmp_path / "rank1.pt")
    assert a["best_step"] == b["best_step"]
    assert a["state"].keys() == b["state"].keys()
    for name, tensor in a["state"].items():
        assert torch.equal(tensor, b["state"][name]), name
    # it trained: the binary student moved away from its teacher's classifier
    torch.manual_seed(0)
    from transformers import BertForSequenceClassification

    teacher = BertForSequenceClassification(tiny_bert_config())
    assert not torch.equal(
        a["state"]["classifier.weight"], teacher.state_dict()["classifier.weight"]
    )
