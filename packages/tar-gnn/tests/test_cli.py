import json
import shutil

import numpy as np
import pytest
from tar_gnn.cli import main


def run(argv, capsys=None):
    return main(argv)


def test_train_evaluate_split_on_csbm(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "train",
        "--n-nodes",
        "200",
        "--epochs",
        "3",
        "--hidden",
        "8",
        "--layers",
        "2",
        "--baselines",
        "erm,kldro",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    assert set(res["methods"]) == {"tar", "erm", "kldro"}
    assert res["methods"]["tar"]["options"]["transport_graph"] == "induced"
    assert (out / "model.pt").is_file()
    assert main(argv) == 2  # refuses to overwrite
    assert (
        main(
            [
                "evaluate",
                "--n-nodes",
                "200",
                "--checkpoint",
                str(out / "model.pt"),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    ev = json.loads((out / "evaluate.json").read_text())
    assert 0 <= ev["metrics"]["ood_test_acc"] <= 1
    assert main(["split", "--n-nodes", "200", "--out", str(out), "--quiet"]) == 0
    assert (out / "split.npz").is_file()


def test_split_and_train_on_a_planetoid_folder(tmp_path, cora_dir):
    folder = tmp_path / "MyCora"
    shutil.copytree(cora_dir / "raw", folder / "raw")
    out = tmp_path / "s"
    assert (
        main(
            [
                "split",
                "--dataset",
                "planetoid",
                "--data",
                str(folder),
                "--shift",
                "covariate",
                "--domain",
                "word",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    info = json.loads((out / "split.json").read_text())
    assert info["sizes"]["id_val_mask"] == 270 and info["split"]["domain"] == "word"
    out2 = tmp_path / "t"
    assert (
        main(
            [
                "train",
                "--dataset",
                "cora",
                "--data",
                str(folder),
                "--split",
                str(out / "split.npz"),
                "--epochs",
                "2",
                "--hidden",
                "8",
                "--baselines",
                "none",
                "--out",
                str(out2),
                "--quiet",
            ]
        )
        == 0
    )


def test_user_column_domain_file(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((60, 3))
    ei = np.stack([np.arange(59), np.arange(1, 60)])
    np.savez(tmp_path / "g.npz", x=x, edge_index=ei, y=np.arange(60) % 3)
    np.savetxt(tmp_path / "col.txt", np.arange(60) % 7)
    out = tmp_path / "o"
    assert (
        main(
            [
                "split",
                "--dataset",
                "file",
                "--data",
                str(tmp_path / "g.npz"),
                "--shift",
                "covariate",
                "--domain-file",
                str(tmp_path / "col.txt"),
                "--num-envs",
                "2",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    np.savetxt(tmp_path / "short.txt", np.arange(5))
    rc = main(
        [
            "split",
            "--dataset",
            "file",
            "--data",
            str(tmp_path / "g.npz"),
            "--shift",
            "covariate",
            "--domain-file",
            str(tmp_path / "short.txt"),
            "--out",
            str(tmp_path / "o2"),
        ]
    )
    assert rc == 2


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["train", "--domain", "colour"], "--domain"),
        (["train", "--transport-graph", "ring"], "--transport-graph"),
        (["train", "--beta", "-1"], "--beta"),
        (["train", "--epochs", "1e11"], "--epochs"),
        (["train", "--beta", "1e300"], "--beta"),
        (["train", "--lr", "1e30"], "--lr"),
        (["split", "--n-nodes", "1e12"], "--n-nodes"),
        (["train", "--seeds", "0"], "--seeds"),
        (
            [
                "train",
                "--n-nodes",
                "200",
                "--epochs",
                "2",
                "--hidden",
                "8",
                "--on-exceed",
                "raise",
                "--step-size",
                "1000",
            ],
            "--step-size",
        ),
    ],
)
def test_bad_input_names_the_flag(tmp_path, capsys, argv, flag):
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]


def test_named_dataset_needs_data_or_icml25_data(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ICML25_DATA", raising=False)
    out = tmp_path / "x"
    assert main(["train", "--dataset", "cora", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--data" in err[0] and "ICML25_DATA" in err[0]
    assert not out.exists()  # the failed run leaves no folder behind


def test_named_dataset_resolves_under_icml25_data(tmp_path, cora_dir, monkeypatch):
    monkeypatch.setenv("ICML25_DATA", str(cora_dir.parents[1]))
    out = tmp_path / "s"
    assert main(["split", "--dataset", "cora", "--out", str(out), "--quiet"]) == 0
    info = json.loads((out / "split.json").read_text())
    assert info["num_nodes"] == 2708 and info["split"]["source"] == "built"


def test_env_method_without_environments_is_a_usage_error(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "g.npz",
        x=rng.standard_normal((60, 3)),
        edge_index=np.stack([np.arange(59), np.arange(1, 60)]),
        y=np.arange(60) % 3,
    )
    np.savez(
        tmp_path / "m.npz",
        x=rng.standard_normal((60, 3)),
        edge_index=np.stack([np.arange(59), np.arange(1, 60)]),
        y=np.arange(60) % 3,
        train_mask=np.arange(60) < 30,
        ood_val_mask=(np.arange(60) >= 30) & (np.arange(60) < 45),
        ood_test_mask=np.arange(60) >= 45,
    )
    rc = main(
        [
            "train",
            "--dataset",
            "file",
            "--data",
            str(tmp_path / "m.npz"),
            "--shift",
            "given",
            "--method",
            "irm",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2 and "--method" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_quick_shows_the_mechanism(tmp_path):
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out), "--quiet"]) == 0
    res = json.loads((out / "results.json").read_text())
    mech = res["mechanism"]
    assert mech["T_in=20"]["flagged_mass"] > mech["T_in=0"]["flagged_mass"]
    assert res["methods"]["tar"]["mean_std"]["ood_test_acc"]["std"] is not None
