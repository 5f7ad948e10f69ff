import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(1)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# No example database in the tree, and no deadlines: torch's first calls are slow and timing varies on
# shared machines.
settings.register_profile("sorbet_snn", database=None, deadline=None, max_examples=40)
settings.load_profile("sorbet_snn")


def data_root() -> Path:
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture
def glue_root() -> Path:
    path = data_root() / "glue"
    if not (path / "SST-2" / "train.tsv").is_file():
        pytest.skip(f"GLUE data not found at {path}")
    return path


def tiny_bert_config(**kw):
    from transformers import BertConfig

    base = dict(
        vocab_size=60,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=40,
        num_labels=2,
    )
    base.update(kw)
    return BertConfig(**base)


def save_word_teacher(folder, num_labels: int = 2, max_len: int = 64):
    """A word-level tokenizer (the synthetic vocabulary) and a one-layer 32-wide BERT classifier
    (``num_labels`` = 1: a regression head) saved in ``folder``, seeded; returns ``folder``."""
    from sorbet_snn.data import word_tokenizer
    from transformers import BertForSequenceClassification

    tok = word_tokenizer(folder)
    torch.manual_seed(0)
    cfg = tiny_bert_config(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=64,
                           max_position_embeddings=max_len, num_labels=num_labels)  # fmt: skip
    BertForSequenceClassification(cfg).save_pretrained(str(folder))
    return folder


def tiny_batch(seed: int = 0, batch: int = 4, length: int = 9, vocab: int = 60):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, length), generator=g)
    mask = torch.ones_like(ids)
    mask[1, length - 3 :] = 0
    mask[2, length - 5 :] = 0
    ids = ids * mask
    return ids, mask


@pytest.fixture(scope="session")
def trained_s3():
    """A tiny S3 student with initialised quantiser steps and warmed-up BSPN (no real training)."""
    from sorbet_snn import convert_teacher
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    teacher = BertForSequenceClassification(tiny_bert_config()).eval()
    student, _ = convert_teacher(teacher, "S3", bspn_warmup=1)
    student.train()
    ids, mask = tiny_batch()
    with torch.no_grad():
        for _ in range(3):
            student(ids, mask)
    return student.eval(), teacher


@pytest.fixture(scope="session")
def tiny_snn_report(trained_s3):
    from sorbet_snn import to_snn
    from sorbet_snn.energy import EnergyConstants, energy_report

    student, _ = trained_s3
    ids, mask = tiny_batch(1)
    batches = [{"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}]
    snn = to_snn(student)
    base = energy_report(snn, batches, EnergyConstants())
    doubled = energy_report(snn, batches, EnergyConstants().scaled(2.0))
    return base, doubled


DATA_FIXTURES = {"glue_root"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take the shared data folder through a fixture carry the ``dataset`` marker."""
    for item in items:
        if DATA_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.dataset)
