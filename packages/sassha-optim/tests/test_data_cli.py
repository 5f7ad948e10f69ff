"""Data loaders (IDX/NPZ/CSV, synthetic, digits) and the CLI end to end."""

import gzip
import json
import struct

import numpy as np
import pytest
import torch
from sassha_optim.cli import main
from sassha_optim.data import load_folder, make_synthetic, read_idx


def write_idx(path, array, magic):
    header = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)


def fake_mnist(folder, n_train=60, n_test=20, gz=True):
    rng = np.random.default_rng(0)
    ext = ".gz" if gz else ""
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        write_idx(
            folder / f"{prefix}-images-idx3-ubyte{ext}", rng.integers(0, 256, (n, 4, 4)), 0x803
        )
        write_idx(folder / f"{prefix}-labels-idx1-ubyte{ext}", np.arange(n) % 3, 0x801)
    return folder


def test_idx_loader_and_subsampling(tmp_path):
    split = load_folder(fake_mnist(tmp_path / "raw").parent, max_train=30)
    assert split.x_train.shape == (30, 16) and split.x_test.shape == (20, 16)
    assert torch.bincount(split.y_train).tolist() == [10, 10, 10]
    assert abs(float(split.x_train.mean())) < 1e-5


def test_idx_errors(tmp_path):
    bad = tmp_path / "bad-idx"
    bad.write_bytes(struct.pack(">I", 0x999) + b"\0" * 8)
    with pytest.raises(ValueError, match="wrong IDX magic"):
        read_idx(bad)
    trunc = tmp_path / "trunc"
    trunc.write_bytes(struct.pack(">II", 0x801, 10) + b"\0" * 3)
    with pytest.raises(ValueError, match="truncated"):
        read_idx(trunc)
    folder = fake_mnist(tmp_path / "m", gz=False)
    write_idx(folder / "t10k-labels-idx1-ubyte", np.zeros(5), 0x801)
    with pytest.raises(ValueError, match="labels for"):
        load_folder(folder)


def test_npz_and_csv_loaders(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "d.npz",
        x_train=rng.random((12, 3)),
        y_train=np.arange(12) % 2,
        x_test=rng.random((4, 3)),
        y_test=np.arange(4) % 2,
    )
    assert load_folder(tmp_path).x_train.shape == (12, 3)
    csv = tmp_path / "c"
    csv.mkdir()
    for name, n in (("train.csv", 10), ("test.csv", 4)):
        rows = ["label,a,b"] + [f"{i % 2},{i},{2 * i}" for i in range(n)]
        (csv / name).write_text("\n".join(rows))
    assert load_folder(csv).x_test.shape == (4, 2)
    (csv / "train.csv").write_text("label,a\n-1,3\n1,2")
    with pytest.raises(ValueError, match="non-negative"):
        load_folder(csv)


def test_synthetic_is_deterministic():
    a, b = (
        make_synthetic(seed=0, n_train=50, n_test=20),
        make_synthetic(seed=0, n_train=50, n_test=20),
    )
    assert torch.equal(a.x_train, b.x_train) and a.n_classes == 10


def test_real_mnist_smoke(mnist_dir, tmp_path):
    """Spec §8: 5,000/1,000 subsample, 2 epochs: training loss decreases, no NaNs."""
    code = main(
        [
            "train",
            "--data",
            str(mnist_dir),
            "--max-train",
            "5000",
            "--max-test",
            "1000",
            "--epochs",
            "2",
            "--batch-size",
            "128",
            "--out",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert code == 0
    result = json.loads((tmp_path / "results.json").read_text())
    ckpt = str(tmp_path / "checkpoint.pt")
    assert main(["evaluate", "--checkpoint", ckpt, "--out", str(tmp_path / "e"), "--quiet"]) == 0
    evaluated = json.loads((tmp_path / "e" / "results.json").read_text())["metrics"]["test"]
    assert evaluated["accuracy"] == pytest.approx(result["metrics"]["test_accuracy"])
    history = result["metrics"]["history"]
    assert history[1]["batch_loss"] < history[0]["batch_loss"]
    assert result["metrics"]["test_accuracy"] > 80


def test_cli_demo_train_evaluate_end_to_end(tmp_path):
    out = tmp_path / "demo"
    assert (
        main(
            [
                "demo",
                "--seeds",
                "1",
                "--data",
                "synthetic",
                "--epochs",
                "3",
                "--out",
                str(out),
                "--quiet",
                "--no-sharpness",
                "--hidden",
                "32",
            ]
        )
        == 0
    )
    result = json.loads((out / "results.json").read_text())
    assert set(result["summary"]) == {"sassha", "adamw", "sam"}
    assert result["summary"]["sassha"]["hvp_calls"] > 0
    assert result["versions"]["torch"] == torch.__version__
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"epochs": 2, "lazy_hessian": 3, "hidden": [16]}))
    folder = fake_mnist(tmp_path / "mn")
    assert (
        main(
            [
                "train",
                "--data",
                str(folder),
                "--config",
                str(config),
                "--out",
                str(tmp_path / "t"),
                "--quiet",
            ]
        )
        == 0
    )
    trained = json.loads((tmp_path / "t" / "results.json").read_text())
    assert trained["config"]["lazy_hessian"] == 3 and trained["metrics"]["steps"] == 2
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(tmp_path / "t" / "checkpoint.pt"),
                "--sharpness",
                "--out",
                str(tmp_path / "e"),
                "--quiet",
            ]
        )
        == 0
    )
    evaluated = json.loads((tmp_path / "e" / "results.json").read_text())
    assert evaluated["metrics"]["test"]["accuracy"] == pytest.approx(
        trained["metrics"]["test_accuracy"]
    )


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["demo", "--epochs", "0"], "--epochs"),
        (["demo", "--optimizers", "adam"], "adam"),
        (["train", "--data", "/no/such/folder"], "/no/such/folder"),
        (["train", "--data", "synthetic", "--lr", "-1"], "--lr"),
        (["train", "--data", "synthetic", "--optimizer", "sgd", "--rho", "0.1"], "rho"),
        (["demo", "--config", "/no/such.json"], "--config"),
        (["evaluate", "--checkpoint", "/no/ckpt.pt"], "--checkpoint"),
    ],
)
def test_cli_bad_input_one_line_exit_2(argv, needle, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_cli_config_unknown_key(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"nonsense": 1}))
    assert main(["demo", "--config", str(config), "--out", str(tmp_path)]) == 2
    assert "nonsense" in capsys.readouterr().err
