import json

import pytest
from bpr_topk.cli import main


def test_train_rank_evaluate_end_to_end(tmp_path):
    base = ["--quiet", "--dataset", "synthetic7", "--eval-trials", "2", "--eval-samples", "50"]
    rc = main(
        ["train", *base, "--objective", "nll", "--epochs", "5", "--out", str(tmp_path / "nll")]
    )
    assert rc == 0
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"epochs": 3, "M": 5, "J": 5, "objective": "daml"}))
    init = ["--init", str(tmp_path / "nll" / "model.pt")]
    rc = main(["train", *base, *init, "--config", str(cfg), "--out", str(tmp_path / "daml")])
    assert rc == 0
    res = json.loads((tmp_path / "daml" / "results.json").read_text())
    assert res["config"]["epochs"] == 3 and res["metrics"][0]["method"].startswith("DAML")
    rc = main(
        [
            "rank",
            "--quiet",
            "--checkpoint",
            str(tmp_path / "daml" / "model.pt"),
            "--samples",
            "50",
            "--out",
            str(tmp_path / "rank"),
        ]
    )
    assert rc == 0 and (tmp_path / "rank" / "ranking.csv").is_file()
    rc = main(
        [
            "evaluate",
            *base,
            "--checkpoints",
            str(tmp_path / "nll" / "model.pt"),
            str(tmp_path / "daml" / "model.pt"),
            "--out",
            str(tmp_path / "ev"),
        ]
    )
    assert rc == 0 and (tmp_path / "ev" / "pareto.png").is_file()


def test_toy_command(tmp_path, capsys):
    assert main(["toy", "--out", str(tmp_path)]) == 0
    table = json.loads((tmp_path / "results.json").read_text())["table"]
    assert [round(r["ratio"], 3) for r in table] == [0.543, 0.630, 0.817]


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["train", "--K", "0"], "--K"),
        (["train", "--eps", "1.5"], "--eps"),
        (["train", "--K", "9"], "--K: 9 exceeds"),
        (["train", "--data", "/nonexistent/folder"], "--data"),
        (["train", "--objective", "mse"], "--objective"),
    ],
)
def test_bad_input_exit_code_2(argv, match, capsys, tmp_path):
    with (
        pytest.raises(SystemExit)
        if argv[1] in ("--objective", "--eps") or argv[2] == "0"
        else _null()
    ):
        rc = main([*argv, "--quiet", "--out", str(tmp_path)])
        assert rc == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
