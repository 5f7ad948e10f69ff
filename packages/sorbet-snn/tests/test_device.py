"""``--device``: checked before any work, honoured by distil/evaluate, refused by CPU-only commands."""

import pytest
import torch
from sorbet_snn import DistillConfig
from sorbet_snn.cli import main
from sorbet_snn.config import ConfigError
from sorbet_snn.data import write_synthetic_glue
from sorbet_snn.distill import model_device, predict, to_device
from sorbet_snn.experiments import resolve_device, run_distill

from .conftest import save_word_teacher

NO_CUDA = not torch.cuda.is_available()


def test_resolve_device_accepts_cpu_and_names_the_field_otherwise():
    assert resolve_device("cpu") == torch.device("cpu")
    for bad, words in (("bogus", "not a torch device"), ("mps", "accepted: cpu, cuda")):
        with pytest.raises(ConfigError) as err:
            resolve_device(bad)
        assert err.value.field == "device" and words in str(err.value)


@pytest.mark.skipif(not NO_CUDA, reason="needs a machine without CUDA")
def test_missing_cuda_fails_before_the_teacher_loads(tmp_path):
    data = write_synthetic_glue(tmp_path / "SST-2", (60, 20, 10), seed=0)
    cfg = DistillConfig(data=data, teacher=tmp_path, device="cuda")  # no teacher in tmp_path
    with pytest.raises(ConfigError) as err:
        run_distill(cfg, tmp_path / "out")
    assert err.value.field == "device" and "no CUDA device" in str(err.value)


def test_cpu_only_commands_refuse_cuda_with_one_line(tmp_path, capsys):
    for command in ("export", "energy", "demo"):
        rc = main([command, "--device", "cuda", "--out", str(tmp_path / command)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "--device" in err[0], (command, err)


def test_predict_returns_cpu_predictions_and_to_device_keeps_a_batch_in_place():
    model = torch.nn.Linear(3, 2)
    batch = {"x": torch.zeros(2, 3)}
    assert to_device(batch, torch.device("cpu")) is batch
    assert model_device(model) == torch.device("cpu")
    assert model_device(torch.nn.ReLU()) == torch.device("cpu")  # no parameters

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(1, 2)

        def forward(self, ids, mask, types):
            return type("Out", (), {"logits": self.lin(ids.float()[:, :1])})()

    data = {"input_ids": torch.arange(10).reshape(5, 2), "attention_mask": torch.ones(5, 2),
            "token_type_ids": torch.zeros(5, 2, dtype=torch.long)}  # fmt: skip
    pred = predict(Wrap(), data, batch_size=2)
    assert pred.device.type == "cpu" and pred.shape == (5,)


@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
def test_distill_on_cuda_matches_the_cpu_run(tmp_path):
    data = write_synthetic_glue(tmp_path / "SST-2", (400, 100, 20), seed=0)
    save_word_teacher(tmp_path / "teacher", max_len=32)
    res = {}
    for device in ("cpu", "cuda"):
        run = DistillConfig(data=data, teacher=tmp_path / "teacher", finetune_teacher="always",
                            teacher_epochs=2, teacher_lr=1e-3, epochs=1, lr=1e-3, max_len=24,
                            val_size=50, eval_every=0, device=device)  # fmt: skip
        res[device] = run_distill(run, tmp_path / device)
    for stage in ("S0", "S4"):
        cpu, gpu = (res[d].stages[stage]["dev"]["main"] for d in ("cpu", "cuda"))
        assert abs(cpu - gpu) <= 0.05, (stage, cpu, gpu)
    assert res["cuda"].energy["firing_rate"] == pytest.approx(
        res["cpu"].energy["firing_rate"], abs=0.02
    )
