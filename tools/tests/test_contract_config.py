"""Config dataclasses on the contract: ``param`` fields, ``check_config``, and the flags generated from them
(``tools/templates/_contract.py``, the original of every package's vendored copy)."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "_contract.py"
_spec = importlib.util.spec_from_file_location("icml25_contract_template", TEMPLATE)
assert _spec and _spec.loader
contract = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = contract
_spec.loader.exec_module(contract)
param, check_config, ConfigError = contract.param, contract.check_config, contract.ConfigError


@dataclass
class TrainConfig:
    epochs: int = param(5, "training epochs", low=1, high=100_000)
    lr: float = param(0.15, "peak learning rate", low=0, low_open=True, high=10)
    hidden: tuple[int, ...] = param((128, 128), "hidden widths of the MLP", low=1)
    names: list[str] = param(["a"], "names", choices=("a", "b"))  # noqa: RUF009 (a list default)
    max_train: int | None = param(None, "stratified training subsample", low=1, none="all")
    bias_correction: str = param("refresh", "bias correction of D", choices=("refresh", "none"))
    sharpness: bool = param(True, "also compute the top Hessian eigenvalue")
    seed: int = param(0, "random seed", low=0)
    internal: float = param(1.0, "not a flag", flag=False)

    def __post_init__(self) -> None:
        check_config(self)


def test_defaults_pass_and_each_field_is_checked() -> None:
    cfg = TrainConfig()
    assert (cfg.epochs, cfg.hidden, cfg.max_train) == (5, (128, 128), None)
    assert TrainConfig().names is not cfg.names  # a fresh list per instance
    assert TrainConfig(hidden=[4, 5]).hidden == (4, 5)  # the field's type: a tuple
    assert TrainConfig(epochs=5.0).epochs == 5 and isinstance(TrainConfig(epochs=5.0).epochs, int)
    assert TrainConfig(lr=1).lr == 1.0 and isinstance(TrainConfig(lr=1).lr, float)
    bad = [
        ({"epochs": 0}, "epochs=0: expected an integer >= 1 and <= 100000"),
        ({"epochs": 1e11}, "epochs=1"),
        ({"epochs": 2.5}, "epochs=2.5"),
        ({"epochs": True}, "epochs=True"),
        ({"lr": 0.0}, "lr=0.0: expected a finite number > 0 and <= 10"),
        ({"lr": 1e30}, "lr=1e+30"),
        ({"lr": float("nan")}, "lr=nan"),
        ({"lr": "0.1"}, "lr='0.1'"),
        ({"hidden": [64, 0]}, "hidden=0"),
        ({"hidden": []}, "hidden=[]"),
        ({"names": ["c"]}, "names='c': expected one of a, b"),
        ({"max_train": 0}, "max_train=0: expected an integer >= 1, or all"),
        ({"bias_correction": "step"}, "expected one of refresh, none"),
        ({"sharpness": 1}, "sharpness=1: expected true or false"),
    ]
    for kwargs, message in bad:
        with pytest.raises(ConfigError, match=None) as info:
            TrainConfig(**kwargs)
        assert message in str(info.value), (kwargs, str(info.value))
        assert info.value.field == next(iter(kwargs))


def cli_with_train(tmp_path: Path):
    seen = {}

    def cmd_train(args):
        seen["cfg"] = contract.config_from(args, TrainConfig)
        return contract.Report({"epochs": seen["cfg"].epochs})

    cli = contract.CLI("fake-cli", description="fake", version="0.0.1")
    cli.command("train", cmd_train, help="train", config=TrainConfig)
    return cli, seen


def test_flags_are_generated_from_the_fields(tmp_path: Path, capsys) -> None:
    cli, seen = cli_with_train(tmp_path)
    argv = ["train", "--out", str(tmp_path / "o"), "--seed", "3", "--epochs", "7", "--lr", "0.5"]
    argv += ["--hidden", "64,32", "--max-train", "100", "--no-sharpness", "--quiet"]
    assert cli.main(argv) == 0
    cfg = seen["cfg"]
    assert (cfg.epochs, cfg.lr, cfg.hidden, cfg.max_train, cfg.sharpness, cfg.seed) == (
        7,
        0.5,
        (64, 32),
        100,
        False,
        3,
    )
    assert cfg.internal == 1.0
    assert json.loads((tmp_path / "o" / "results.json").read_text())["epochs"] == 7
    (tmp_path / "c.json").write_text(json.dumps({"max_train": "all", "hidden": [8], "lr": 2}))
    argv = ["train", "--out", str(tmp_path / "p"), "--config", str(tmp_path / "c.json"), "--quiet"]
    assert cli.main(argv) == 0
    assert (seen["cfg"].max_train, seen["cfg"].hidden, seen["cfg"].lr) == (None, (8,), 2.0)


def test_help_shows_doc_accepted_values_and_default(capsys) -> None:
    cli, _ = cli_with_train(Path("."))
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--epochs EPOCHS training epochs: an integer >= 1 and <= 100000 (default: 5)" in text
    assert "an integer >= 1, or all (default: all)" in text
    assert (
        "--sharpness, --no-sharpness also compute the top Hessian eigenvalue (default: on)" in text
    )
    assert "--internal" not in text
    assert text.count("--seed") == 2  # the usage line and the common flag: no generated duplicate


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--lr", "1e30", "argument --lr: expected a finite number > 0 and <= 10, got '1e30'"),
        ("--epochs", "100000000000", "argument --epochs: expected an integer >= 1"),
        ("--max-train", "0", "argument --max-train: expected an integer >= 1, or all"),
        ("--bias-correction", "step", "expected one of refresh, none"),
        ("--hidden", "64,x", "argument --hidden"),
    ],
)
def test_a_refused_value_names_the_flag_and_the_range(tmp_path, capsys, flag, value, message):
    cli, seen = cli_with_train(tmp_path)
    assert cli.main(["train", "--out", str(tmp_path / "o"), flag, value]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert "cfg" not in seen and not (tmp_path / "o").exists()


def test_every_invalid_example_is_refused(tmp_path, capsys) -> None:
    """What the conformance check feeds each numeric flag (its ``invalid`` examples) is refused."""
    cli, _ = cli_with_train(tmp_path)
    options = cli.describe()[0]["options"]
    generated = [o for o in options if o["dest"] in ("epochs", "lr", "max_train", "hidden")]
    assert all(o["invalid"] for o in generated)
    for option in generated:
        for bad in option["invalid"]:
            assert cli.main(["train", "--out", str(tmp_path / "o"), option["flags"][0], bad]) == 2
    assert "argument" in capsys.readouterr().err


@dataclass
class DataConfig:
    data: str = param("auto", "a data folder, or a built-in set", path="dir", names=("auto", "toy"))
    name: str = param("run", "a label")

    def __post_init__(self) -> None:
        check_config(self)


def test_a_path_field_takes_an_existing_folder_or_one_of_its_names(tmp_path: Path) -> None:
    assert DataConfig().data == "auto" and DataConfig(data="toy").data == "toy"
    assert DataConfig(data=str(tmp_path)).data == tmp_path
    with pytest.raises(ConfigError, match="expected an existing folder or one of auto, toy"):
        DataConfig(data=str(tmp_path / "absent"))
    cli = contract.CLI("fake-cli", description="fake", version="0.0.1")
    cli.command("run", lambda a: contract.Report({}), help="run", config=DataConfig)
    kinds = {o["dest"]: o["kind"] for o in cli.describe()[0]["options"]}
    assert (kinds["data"], kinds["name"]) == ("data", "text")


@dataclass
class NeedsData:
    data: str = param(contract.REQUIRED, "the data folder", path="dir")
    epochs: int = param(1, "epochs", low=1, high=10)

    def __post_init__(self) -> None:
        check_config(self)


def test_a_required_field_has_no_default_and_a_required_flag(tmp_path: Path, capsys) -> None:
    with pytest.raises(TypeError):
        NeedsData()
    assert NeedsData(data=str(tmp_path)).data == tmp_path

    def refuse(args):
        raise ConfigError("epochs", "epochs=3 is too many for this data")

    cli = contract.CLI("fake-cli", description="fake", version="0.0.1")
    cli.command("run", refuse, help="run", config=NeedsData)
    assert cli.main(["run", "--out", str(tmp_path / "o")]) == 2
    assert "--data" in capsys.readouterr().err
    # a ConfigError from the library call is a usage error naming the flag, exit 2
    assert cli.main(["run", "--out", str(tmp_path / "o"), "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "fake-cli: error: argument --epochs: epochs=3 is too many for this data"


def test_a_failed_run_removes_the_out_folder_it_made(tmp_path: Path, capsys) -> None:
    def boom(args):
        (Path(args.out) / "partial.pt").write_bytes(b"x")
        raise ConfigError("epochs", "no")

    cli = contract.CLI("fake-cli", description="fake", version="0.0.1")
    cli.command("run", boom, help="run")
    assert cli.main(["run", "--out", str(tmp_path / "new" / "deep")]) == 2
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "mine.txt").write_text("x")
    assert cli.main(["run", "--out", str(tmp_path / "kept")]) == 2
    assert (tmp_path / "kept" / "mine.txt").is_file()  # a folder that was there stays

    def crash(args):
        raise RuntimeError("a bug")

    cli.command("crash", crash, help="crash")
    with pytest.raises(RuntimeError):
        cli.main(["crash", "--out", str(tmp_path / "c")])
    assert not (tmp_path / "c").exists()


def test_an_interrupted_run_keeps_what_it_wrote_to_resume_from(tmp_path: Path, capsys) -> None:
    def interrupted(args):
        if args.seed == 1:
            (Path(args.out) / "checkpoint.pt").write_bytes(b"x")
        raise KeyboardInterrupt

    cli = contract.CLI("fake-cli", description="fake", version="0.0.1")
    cli.command("run", interrupted, help="run")
    assert cli.main(["run", "--out", str(tmp_path / "a"), "--seed", "1"]) == 130
    assert (tmp_path / "a" / "checkpoint.pt").is_file()
    assert "partial output kept in" in capsys.readouterr().err
    assert cli.main(["run", "--out", str(tmp_path / "b" / "c"), "--seed", "2"]) == 130
    assert not (tmp_path / "b").exists()  # nothing written: the folder it made is removed


def test_results_json_has_the_usual_file_permissions(tmp_path: Path) -> None:
    import os

    path = contract.write_json(tmp_path / "results.json", {"a": 1})
    (tmp_path / "other.txt").write_text("x")
    assert path.stat().st_mode & 0o777 == (tmp_path / "other.txt").stat().st_mode & 0o777
    assert os.access(path, os.R_OK)
