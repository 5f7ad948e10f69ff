"""Data loaders (IDX/NPZ/CSV, synthetic, digits), standardisation and the CLI end to end."""

import gzip
import json
import statistics
import struct

import numpy as np
import pytest
import torch
from cli_cases import nan_data, nan_folder, tiny_checkpoint
from sassha_optim import experiments
from sassha_optim.cli import main
from sassha_optim.data import STD_FLOOR, _standardize, load_folder, make_synthetic, read_idx


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


def csv_folder(tmp_path, train, test, name="c"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "train.csv").write_text(train)
    (folder / "test.csv").write_text(test)
    return folder


GOOD_TRAIN = "label,a,b\n" + "\n".join(f"{i % 2},{i},{2 * i}" for i in range(10)) + "\n"
GOOD_TEST = "label,a,b\n0,1,2\n1,3,7\n"


# ----------------------------------------------------------------------------------- loaders


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
    (folder / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(ValueError, match="missing t10k-labels-idx1-ubyte"):
        load_folder(folder)
    gz = fake_mnist(tmp_path / "g")
    (gz / "train-images-idx3-ubyte.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a readable gzip file"):
        load_folder(gz)


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
    folder = csv_folder(tmp_path, GOOD_TRAIN, GOOD_TEST)
    split = load_folder(folder)
    assert split.x_test.shape == (2, 2) and split.y_test.tolist() == [0, 1]
    headerless = csv_folder(tmp_path, "0,1,2\n1,3,4\n0,5,7\n", "1,2,3\n", name="h")
    assert load_folder(headerless).x_train.shape == (3, 2)


@pytest.mark.parametrize(
    "train,test,needles",
    [
        # train/test column mismatch (was a raw RuntimeError from broadcasting)
        (GOOD_TRAIN, "label,a\n0,1\n", ["test.csv", "1 feature(s)", "train.csv", "2 feature(s)"]),
        # empty CSV (was numpy's "zero-size array" message)
        ("", GOOD_TEST, ["train.csv", "empty file"]),
        ("label,a,b\n", GOOD_TEST, ["train.csv", "no data rows"]),
        # NaN / inf cells, with line and column
        (GOOD_TRAIN.replace("3,6", "nan,6"), GOOD_TEST, ["train.csv", "line 5", "'a'", "nan"]),
        (GOOD_TRAIN, "label,a,b\n0,1,inf\n", ["test.csv", "line 2", "'b'", "inf"]),
        # non-numeric cell, ragged row
        (GOOD_TRAIN.replace("3,6", "x,6"), GOOD_TEST, ["train.csv", "line 5", "'a'", "'x'"]),
        (GOOD_TRAIN.replace("3,6", "3"), GOOD_TEST, ["train.csv", "line 5", "2 columns"]),
        # wrong label values
        (GOOD_TRAIN.replace("1,3,6", "1.5,3,6"), GOOD_TEST, ["line 5", "'label'", "1.5"]),
        (GOOD_TRAIN.replace("1,3,6", "-1,3,6"), GOOD_TEST, ["line 5", "'label'", "negative"]),
        (GOOD_TRAIN, "label,a,b\n0,1,2\n7,1,2\n", ["test.csv", "label 7", "up to 1"]),
    ],
)
def test_csv_bad_input_names_file_row_column(tmp_path, train, test, needles):
    with pytest.raises(ValueError) as info:
        load_folder(csv_folder(tmp_path, train, test))
    message = str(info.value)
    assert all(n in message for n in needles), message
    assert "zero-size" not in message


def test_npz_nan_and_bad_labels_are_located(tmp_path):
    x = np.ones((4, 3))
    x[2, 1] = np.nan
    np.savez(tmp_path / "d.npz", x_train=x, y_train=[0, 1, 0, 1], x_test=x[:1] * 0, y_test=[0])
    with pytest.raises(ValueError, match=r"d\.npz: x_train\[2\] \(feature 1\): nan"):
        load_folder(tmp_path)
    np.savez(tmp_path / "d.npz", x_train=np.ones((2, 3)), y_train=[0, 0.5], x_test=x, y_test=[0])
    with pytest.raises(ValueError, match=r"y_train\[1\]: label 0.5 is not an integer"):
        load_folder(tmp_path)
    (tmp_path / "d.npz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not an NPZ file"):
        load_folder(tmp_path)


def test_synthetic_is_deterministic():
    a, b = (
        make_synthetic(seed=0, n_train=50, n_test=20),
        make_synthetic(seed=0, n_train=50, n_test=20),
    )
    assert torch.equal(a.x_train, b.x_train) and a.n_classes == 10


# ----------------------------------------------------------------------------- standardisation


def test_feature_constant_in_train_stays_bounded_in_test():
    gen = torch.Generator().manual_seed(0)
    x_train = torch.rand(200, 5, generator=gen)
    x_train[:, 2] = 0.0  # a pixel that is always 0 in the training images
    x_test = torch.rand(50, 5, generator=gen)
    x_test[0, 2] = 1.0  # ... and bright in one test image
    xtr, xte = _standardize(x_train, x_test)
    floor = STD_FLOOR * float(x_train.std(correction=0))
    assert float(xte[0, 2]) == pytest.approx(1.0 / floor, rel=1e-5)
    assert float(xte.abs().max()) <= 1.0 / floor + 1e-4  # entries lie in [0, 1]
    assert float(xte.abs().max()) < 100  # was 1e6 with std + 1e-6
    # features with a real spread are standardised as usual (the floor is not active)
    torch.testing.assert_close(xtr[:, 0].std(correction=0), torch.tensor(1.0))


def test_constant_csv_feature_stays_bounded_through_the_loader(tmp_path):
    train = "label,a,b\n" + "\n".join(f"{i % 2},{i / 10},0" for i in range(10)) + "\n"
    split = load_folder(csv_folder(tmp_path, train, "label,a,b\n0,0.5,1\n"))
    assert torch.isfinite(split.x_test).all() and float(split.x_test.abs().max()) < 100


def test_all_constant_training_features_are_refused(tmp_path):
    train = "label,a,b\n0,1,1\n1,1,1\n"
    with pytest.raises(ValueError, match="every training feature is constant"):
        load_folder(csv_folder(tmp_path, train, GOOD_TEST))


def test_real_mnist_test_split_is_bounded(mnist_dir):
    split = load_folder(mnist_dir, max_train=5000, max_test=2000)
    assert float(split.x_test.abs().max()) < 50  # was 1e6 before the std floor


def test_real_mnist_smoke(mnist_dir, tmp_path):
    """5,000/1,000 subsample, 2 epochs: the batch loss decreases, no NaNs, test loss stays near
    the training loss (it was 40x the training loss before the std floor)."""
    argv = ["--max-train", "5000", "--max-test", "1000", "--epochs", "2", "--batch-size", "128"]
    assert main(["train", "--data", str(mnist_dir), *argv, "--out", str(tmp_path), "--quiet"]) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    ckpt = str(tmp_path / "checkpoint.pt")
    assert main(["evaluate", "--checkpoint", ckpt, "--out", str(tmp_path), "--quiet"]) == 0
    evaluated = json.loads((tmp_path / "evaluate.json").read_text())["metrics"]["test"]
    metrics = result["metrics"]
    assert evaluated["accuracy"] == pytest.approx(metrics["test_accuracy"])
    history = metrics["history"]
    assert history[1]["batch_loss"] < history[0]["batch_loss"]
    assert metrics["test_accuracy"] > 80 and metrics["test_loss"] < 1.0


# ------------------------------------------------------------------------------------------- CLI


def run_demo(tmp_path, capsys, *extra, out="demo"):
    argv = ["demo", "--data", "synthetic", "--epochs", "1", "--hidden", "16", "--no-sharpness"]
    code = main([*argv, "--optimizers", "sassha,adamw", *extra, "--out", str(tmp_path / out)])
    captured = capsys.readouterr()
    return code, captured.out, tmp_path / out / "results.json"


def test_demo_single_seed_prints_no_plus_minus(tmp_path, capsys):
    code, out, results = run_demo(tmp_path, capsys, "--seeds", "1")
    assert code == 0
    assert "±" not in out and "1 seed" in out
    summary = json.loads(results.read_text())["summary"]
    assert summary["sassha"]["test_accuracy_std"] is None


def test_demo_plus_minus_is_sample_std_over_n_seeds(tmp_path, capsys):
    code, out, results = run_demo(tmp_path, capsys, "--seeds", "2")
    assert code == 0 and "±" in out and "2 seeds" in out
    payload = json.loads(results.read_text())
    accs = [r["test_accuracy"] for r in payload["runs"]["sassha"]]
    assert payload["n_seeds"] == 2
    std = payload["summary"]["sassha"]["test_accuracy_std"]
    assert std == pytest.approx(statistics.stdev(accs))  # ddof=1


@pytest.mark.slow
def test_demo_says_which_data_it_ran_on(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(experiments, "_have_sklearn", lambda: False)
    argv = ["demo", "--epochs", "1", "--seeds", "1", "--hidden", "8", "--no-sharpness"]
    assert main([*argv, "--optimizers", "sgd", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "data: synthetic (scikit-learn not installed" in out
    payload = json.loads((tmp_path / "a" / "results.json").read_text())
    assert payload["data"] == "synthetic" and "scikit-learn not installed" in payload["data_note"]
    pytest.importorskip("sklearn")
    monkeypatch.setattr(experiments, "_have_sklearn", lambda: True)
    assert main([*argv, "--optimizers", "sgd", "--out", str(tmp_path / "b")]) == 0
    assert "data: digits" in capsys.readouterr().out


def test_cli_demo_train_evaluate_end_to_end(tmp_path, capsys):
    code, _, results = run_demo(tmp_path, capsys, "--seeds", "1")
    assert code == 0
    result = json.loads(results.read_text())
    assert set(result["summary"]) == {"sassha", "adamw"}
    assert result["summary"]["sassha"]["hvp_calls"] > 0
    assert result["versions"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert result["versions"]["sassha-optim"]
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"epochs": 2, "lazy_hessian": 3, "hidden": [16]}))
    folder = fake_mnist(tmp_path / "mn")
    out = tmp_path / "t"
    argv = ["train", "--data", str(folder), "--config", str(config), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    trained = json.loads((out / "results.json").read_text())
    assert trained["config"]["lazy_hessian"] == 3 and trained["metrics"]["steps"] == 2
    before = (out / "results.json").read_bytes()
    ckpt = str(out / "checkpoint.pt")
    argv = ["evaluate", "--checkpoint", ckpt, "--sharpness", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    # evaluate writes its own file and keeps the training run's results.json
    assert (out / "results.json").read_bytes() == before
    evaluated = json.loads((out / "evaluate.json").read_text())
    assert evaluated["subcommand"] == "evaluate"
    assert evaluated["metrics"]["test"]["accuracy"] == pytest.approx(
        trained["metrics"]["test_accuracy"]
    )
    text = (out / "evaluate.json").read_text() + (out / "results.json").read_text()
    assert str(tmp_path) not in text  # no machine paths in results


def test_train_never_replaces_a_checkpoint_without_overwrite(tmp_path, capsys):
    out = tmp_path / "t"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(b"a good checkpoint")
    argv = ["train", "--data", "synthetic", "--epochs", "1", "--hidden", "8", "--out", str(out)]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--overwrite" in err and "checkpoint.pt" in err
    assert (out / "checkpoint.pt").read_bytes() == b"a good checkpoint"
    assert not (out / "results.json").exists()
    assert main([*argv, "--quiet", "--overwrite"]) == 0
    assert (out / "checkpoint.pt").read_bytes() != b"a good checkpoint"


def test_evaluate_twice_needs_overwrite(tmp_path, capsys):
    train = ["train", "--data", "synthetic", "--epochs", "1", "--hidden", "8", "--quiet"]
    assert main([*train, "--out", str(tmp_path / "t")]) == 0
    ckpt = tmp_path / "t" / "checkpoint.pt"
    argv = ["evaluate", "--checkpoint", str(ckpt), "--out", str(tmp_path / "e"), "--quiet"]
    assert main(argv) == 0
    assert main(argv) == 2 and "--overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["demo", "--epochs", "0"], "--epochs"),
        (["demo", "--hidden", "0"], "--hidden"),  # was accepted (rc 0)
        (["train", "--data", "synthetic", "--hidden", "128,0"], "--hidden"),
        (["demo", "--optimizers", "adam"], "--optimizers"),
        (["train", "--data", "/no/such/folder"], "--data"),
        (["train", "--data", "synthetic", "--lr", "-1"], "--lr"),
        (["train", "--data", "synthetic", "--lr", "0"], "--lr"),
        (["train", "--data", "synthetic", "--optimizer", "sgd", "--rho", "0.1"], "--rho"),
        (["train", "--data", "synthetic", "--optimizer", "adamw", "--lazy-hessian", "2"], "lazy"),
        (["train", "--epochs", "1"], "--data"),  # --data is required
        (["demo", "--config", "/no/such.json"], "--config"),
        (["evaluate", "--checkpoint", "/no/ckpt.pt"], "--checkpoint"),
    ],
)
def test_cli_bad_input_one_line_exit_2(argv, needle, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


@pytest.mark.parametrize("command", ["demo", "train", "evaluate"])
def test_nan_data_is_one_line_naming_data(command, tmp_path, capsys):
    argv, flag = nan_data(tmp_path)[command]
    assert main([command, *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err and "nan" in err and "train.csv" in err


@pytest.mark.parametrize(
    "train,test,needle",
    [
        (GOOD_TRAIN, "label,a\n0,1\n", "feature(s)"),
        ("", GOOD_TEST, "empty file"),
        (GOOD_TRAIN.replace("1,3,6", "-1,3,6"), GOOD_TEST, "negative"),
    ],
)
def test_bad_csv_is_one_line_naming_data(train, test, needle, tmp_path, capsys):
    folder = csv_folder(tmp_path, train, test)
    assert main(["train", "--data", str(folder), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--data" in err and needle in err


def test_evaluate_bad_checkpoint_and_mismatched_data(tmp_path, capsys):
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    out = str(tmp_path / "o")
    assert main(["evaluate", "--checkpoint", str(empty), "--out", out]) == 2
    assert "--checkpoint" in capsys.readouterr().err
    torch.save({"weights": 1}, tmp_path / "other.pt")
    assert main(["evaluate", "--checkpoint", str(tmp_path / "other.pt"), "--out", out]) == 2
    assert "not a checkpoint written by" in capsys.readouterr().err
    ckpt = tiny_checkpoint(tmp_path)  # 3 features; synthetic data has 64
    assert main(["evaluate", "--checkpoint", str(ckpt), "--data", "synthetic", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "--data" in err and "64 features" in err


def test_nan_folder_holds_a_nan(tmp_path):
    assert "nan" in (nan_folder(tmp_path) / "train.csv").read_text()


def test_cli_config_unknown_key(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"nonsense": 1}))
    assert main(["demo", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    assert "nonsense" in capsys.readouterr().err
