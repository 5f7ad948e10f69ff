"""The regression path (STS-B) end to end through the generic GLUE loader: S0-S4 on a synthetic
STS-B folder (the real STS-B is not in the shared data), Pearson/Spearman reported at every stage."""

import random

import pytest
from sorbet_snn import DistillConfig, run_distill

from .conftest import save_word_teacher

POSITIVE = ("amazing", "brilliant", "excellent", "fantastic", "great", "lovely")
NEGATIVE = ("awful", "bad", "boring", "dreadful", "horrible", "lousy")
NEUTRAL = ("film", "movie", "music", "ending", "cast", "hotel", "meal", "book")


def write_sts(folder, sizes=(600, 150), seed=0):
    """Sentence pairs scored 0..5 by the share of positive words in the first sentence, plus a
    little noise (a learnable target on the STS-B scale; the pair format exercises the two-sentence
    loader and the regression head)."""
    folder.mkdir(parents=True)
    rng = random.Random(seed)

    def sentence(k):
        words = [rng.choice(POSITIVE) for _ in range(k)] + [rng.choice(NEGATIVE)
                                                            for _ in range(4 - k)]  # fmt: skip
        words += [rng.choice(NEUTRAL) for _ in range(3)]
        rng.shuffle(words)
        return " ".join(words)

    for split, n in zip(("train", "dev"), sizes):
        with (folder / f"{split}.tsv").open("w", encoding="utf-8") as fh:
            fh.write("index\tsentence1\tsentence2\tscore\n")
            for i in range(n):
                k = rng.randint(0, 4)
                score = min(5.0, max(0.0, 1.25 * k + rng.uniform(-0.3, 0.3)))
                fh.write(f"{i}\t{sentence(k)}\t{sentence(rng.randint(0, 4))}\t{score:.2f}\n")
    return folder


@pytest.mark.filterwarnings("ignore")
def test_sts_b_distils_through_the_generic_loader(tmp_path):
    data = write_sts(tmp_path / "STS-B")
    save_word_teacher(tmp_path / "teacher", num_labels=1)
    run = DistillConfig(data=data, teacher=tmp_path / "teacher", finetune_teacher="always",
                        teacher_epochs=6, teacher_lr=1e-3, epochs=2, lr=1e-3, max_len=48,
                        val_size=100, eval_every=0)  # fmt: skip
    res = run_distill(run, tmp_path / "out")
    assert res.task == "STS-B"
    assert res.majority_baseline["main"] == 0.0  # a constant has no correlation
    assert res.teacher_gate["passed"]
    for stage in ("S0", "S1", "S2", "S3", "S4"):
        dev = res.stages[stage]["dev"]
        assert set(dev) >= {"pearson", "spearman", "main"}
        assert dev["main"] == pytest.approx((dev["pearson"] + dev["spearman"]) / 2)
    assert res.stages["S0"]["dev"]["pearson"] > 0.5  # the teacher learnt the target
    assert res.stages["S4"]["dev"] == res.stages["S3"]["dev"]  # the spiking export is exact
    assert res.energy is not None and res.energy["e_snn_pJ"] > 0
