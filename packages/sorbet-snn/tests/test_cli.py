import json

import pytest
import torch
from sorbet_snn.cli import build_cli, main
from sorbet_snn.data import word_tokenizer, write_synthetic_glue
from transformers import BertConfig, BertForSequenceClassification


@pytest.fixture(scope="module")
def distilled(tmp_path_factory):
    """A tiny word-level teacher, distilled S0-S4 on a small synthetic SST-2 folder."""
    root = tmp_path_factory.mktemp("cli")
    data = write_synthetic_glue(root / "SST-2", (900, 300, 50), seed=0)
    teacher_dir = root / "teacher"
    tok = word_tokenizer(teacher_dir)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=64, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
                     num_labels=2)  # fmt: skip
    BertForSequenceClassification(cfg).save_pretrained(str(teacher_dir))
    out = root / "run"
    argv = ["distill", "--data", str(data), "--teacher", str(teacher_dir), "--finetune-teacher",
            "always", "--teacher-epochs", "12", "--teacher-lr", "1e-3", "--epochs", "2",
            "--lr", "1e-3", "--max-len", "32", "--val-size", "100", "--eval-every", "0",
            "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    return root, data, out, argv


@pytest.mark.slow
def test_distill_learns_and_spiking_export_agrees(distilled):
    _, _, out, _ = distilled
    res = json.loads((out / "results.json").read_text())
    stages = res["stages"]
    assert stages["S0"]["dev"]["main"] > res["majority_baseline"]["main"] + 0.1
    assert stages["S4"]["agreement_with_S3"] == 1.0
    assert stages["S4"]["dev"] == stages["S3"]["dev"]
    assert res["energy"]["e_snn_pJ"] > 0 and 0 < res["energy"]["firing_rate"] < 1
    assert (out / "snn" / "spiking.json").is_file()
    text = (out / "results.json").read_text()
    assert str(out) not in text


def test_rerun_needs_overwrite_and_resumes(distilled, capsys):
    _, _, _, argv = distilled
    assert main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_export_evaluate_energy(distilled, tmp_path):
    _, data, out, _ = distilled
    assert main(["export", "--model", str(out / "stages" / "S3"), "--out", str(tmp_path / "e"),
                 "--quiet"]) == 0  # fmt: skip
    exported = tmp_path / "e" / "snn"
    meta = json.loads((exported / "spiking.json").read_text())
    assert meta["time_steps"] == 16 and meta["theta_num"] / meta["theta_den"] == 15.199905
    assert main(["evaluate", "--model", str(exported), "--data", str(data), "--out",
                 str(tmp_path / "v"), "--quiet"]) == 0  # fmt: skip
    ev = json.loads((tmp_path / "v" / "evaluate.json").read_text())
    res = json.loads((out / "results.json").read_text())
    assert ev["forward"] == "spiking"
    assert ev["metrics"]["accuracy"] == res["stages"]["S4"]["dev"]["accuracy"]
    energies = {}
    for enc in ("offset", "bipolar"):
        argv = ["energy", "--model", str(exported), "--data", str(data), "--signed-encoding", enc,
                "--max-examples", "100", "--out", str(tmp_path / enc), "--quiet"]  # fmt: skip
        assert main(argv) == 0
        energies[enc] = json.loads((tmp_path / enc / "energy.json").read_text())
    assert energies["bipolar"]["firing_rate"] < energies["offset"]["firing_rate"]
    assert energies["bipolar"]["e_snn_pJ"] < energies["offset"]["e_snn_pJ"]
    assert energies["bipolar"]["e_ann_pJ"] == energies["offset"]["e_ann_pJ"]


def test_bad_model_folder_is_one_line_naming_the_flag(tmp_path, capsys):
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "dev.tsv").write_text("sentence\tlabel\nok\t1\n")
    (tmp_path / "m").mkdir()
    rc = main(["evaluate", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "SST-2"),
               "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--model" in err[0]


def test_bits_beyond_official_threshold_rejected(tmp_path, capsys):
    (tmp_path / "SST-2").mkdir()
    rc = main(["distill", "--data", str(tmp_path / "SST-2"), "--bits", "5", "--out",
               str(tmp_path / "o")])  # fmt: skip
    assert rc == 2 and "--theta-mode exact" in capsys.readouterr().err


def test_every_command_is_declared_once():
    names = [c["name"] for c in build_cli().describe()]
    assert names == ["distill", "evaluate", "export", "energy", "demo"]


def test_max_minutes_stops_with_one_line_and_overwrite_continues(distilled, tmp_path, capsys):
    _, data, _, argv = distilled
    teacher = argv[argv.index("--teacher") + 1]
    base = ["distill", "--data", str(data), "--teacher", teacher, "--stages", "S0",
            "--finetune-teacher", "always", "--teacher-epochs", "1", "--teacher-lr", "1e-3",
            "--max-len", "32", "--val-size", "100", "--eval-every", "0", "--out",
            str(tmp_path / "run"), "--quiet"]  # fmt: skip
    capsys.readouterr()
    assert main([*base, "--max-minutes", "1e-6"]) == 75
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["sorbet-snn: stopped at step 1 of 25 of stage S0; rerun the same command to "
                   "continue with --overwrite"]  # fmt: skip
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["stopped"]["step"] == 1 and (tmp_path / "run" / "stages" / "S0.partial").is_file()
    assert main([*base, "--overwrite"]) == 0
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["stages"]["S0"]["steps"] == 25 and "stopped" not in res
    assert not (tmp_path / "run" / "stages" / "S0.partial").exists()
