"""The conformance check passes a CLI built on the contract and fails broken ones (``tools/conformance.py``).

Each test writes a tiny package (``fake-cli``) whose ``cli.py`` uses the vendored contract, then runs the
check against it, with ``python -m fake_cli.cli`` standing in for the installed entry point.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))

import conformance  # noqa: E402

GOOD_CLI = '''
"""fake-cli: a two-command CLI on the contract."""
import math
from pathlib import Path

from ._contract import CLI, Report, blame, flag_type, table


def load_csv(path: Path) -> list[list[float]]:
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines()):
        values = [float(v) for v in line.split(",")]
        if any(not math.isfinite(v) for v in values):
            raise ValueError(f"{path.name} holds NaN or inf in row {i + 1}")
        rows.append(values)
    if not rows:
        raise ValueError(f"{path.name} is empty")
    return rows


def train(args) -> Report:
    with blame("--data"):
        rows = load_csv(args.data)
    total = sum(map(sum, rows)) * args.lr * args.epochs
    return Report({"total": total, "model": args.model}, table=table([[total]], ["total"]))


def demo(args) -> Report:
    return Report({"quick": args.quick, "data": "embedded"})


def build_cli() -> CLI:
    cli = CLI("fake-cli", description="fake", version="0.0.1")
    p = cli.command("train", train, help="train on a CSV")
    p.add_argument("--data", type=flag_type(str, path="file"), required=True, help="CSV of numbers")
    p.add_argument("--epochs", type=flag_type(int, low=1, high=1000), default=2, help="epochs")
    p.add_argument("--lr", type=flag_type(float, low=0, low_open=True, high=10), default=0.1, help="learning rate")
    p.add_argument("--model", choices=["a", "b"], default="a", help="model")
    p = cli.command("demo", demo, help="embedded demo", writes=("results.json",))
    p.add_argument("--quick", action="store_true", help="quick")
    return cli


def main(argv=None) -> int:
    return build_cli().main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
'''

CASES = """
def nan_data(tmp):
    path = tmp / "nan.csv"
    path.write_text("1,2\\n3,nan\\n")
    return {"train": (["--data", str(path)], "--data")}
"""


def make_package(root: Path, cli_source: str, cases: str | None = CASES) -> Path:
    pkg = root / "packages" / "fake-cli"
    src = pkg / "src" / "fake_cli"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    shutil.copyfile(TOOLS / "templates" / "_contract.py", src / "_contract.py")
    (src / "cli.py").write_text(textwrap.dedent(cli_source))
    (pkg / "tests").mkdir()
    if cases is not None:
        (pkg / "tests" / "cli_cases.py").write_text(textwrap.dedent(cases))
    return pkg


@pytest.fixture
def run_check(tmp_path, monkeypatch):
    def run(cli_source: str, cases: str | None = CASES) -> conformance.Conformance:
        pkg = make_package(tmp_path, cli_source, cases)
        src = str(pkg / "src")
        monkeypatch.syspath_prepend(src)
        monkeypatch.setenv("PYTHONPATH", src)
        for name in [m for m in sys.modules if m.startswith("fake_cli")]:
            monkeypatch.delitem(sys.modules, name)
        work = tmp_path / "work"
        work.mkdir()
        check = conformance.Conformance(pkg, [sys.executable, "-m", "fake_cli.cli"], work)
        check.run(skip_demo=False)
        return check

    return run


def failures(check: conformance.Conformance) -> list[str]:
    return [c.name for c in check.checks if not c.ok]


def test_contract_cli_passes(run_check):
    check = run_check(GOOD_CLI)
    assert failures(check) == [], [(c.name, c.detail) for c in check.checks if not c.ok]
    names = [c.name for c in check.checks]
    assert "train: data holding NaN (--data)" in names
    assert "train: --lr 0.0" in names and "train: --epochs 0" in names
    assert (
        "train: --lr 1e30 (absurd)" in names and "train: --epochs -100000000000 (absurd)" in names
    )
    assert "entry point: --help within 1.5 s" in names
    assert "demo: second run without --overwrite" in names
    assert len(check.checks) > 40


def test_plain_float_flag_fails(run_check):
    broken = GOOD_CLI.replace(
        "type=flag_type(float, low=0, low_open=True, high=10), default=0.1",
        "type=float, default=0.1",
    )
    assert "train: numeric flags use a contract validator" in failures(run_check(broken))


def test_unbounded_number_fails_the_absurd_value_case(run_check):
    unbounded = GOOD_CLI.replace("flag_type(int, low=1, high=1000)", "flag_type(int, low=1)")
    assert "train: --epochs 100000000000 (absurd)" in failures(run_check(unbounded))


def test_an_accepted_value_that_starts_an_endless_run_is_stopped_and_fails(run_check, monkeypatch):
    """An in-process case must not hang the cell: it is stopped after INPROC_SECONDS and fails."""
    monkeypatch.setattr(conformance, "INPROC_SECONDS", 2.0)
    endless = GOOD_CLI.replace(
        '    return Report({"quick": args.quick, "data": "embedded"})',
        '    for _ in range(args.rounds):\n        pass\n    return Report({"quick": args.quick})',
    ).replace(
        '    p.add_argument("--quick", action="store_true", help="quick")',
        '    p.add_argument("--quick", action="store_true", help="quick")\n'
        '    p.add_argument("--rounds", type=flag_type(int, low=1), default=1, help="rounds")',
    )
    check = run_check(endless)
    stopped = [c for c in check.checks if "still running" in c.detail]
    assert [c.name for c in stopped] == ["demo: --rounds 100000000000 (absurd)"]
    assert not stopped[0].ok and stopped[0].seconds < 10


def test_ignoring_nan_fails(run_check):
    broken = GOOD_CLI.replace("if any(not math.isfinite(v) for v in values):", "if False:")
    assert "train: data holding NaN (--data)" in failures(run_check(broken))


def test_missing_nan_case_fails(run_check):
    assert "train: NaN-holding data case" in failures(run_check(GOOD_CLI, cases=None))


def test_traceback_on_bad_data_fails(run_check):
    broken = GOOD_CLI.replace('with blame("--data"):', "if True:")
    assert "train: data holding NaN (--data)" in failures(run_check(broken))


def test_machine_path_in_results_fails(run_check):
    broken = GOOD_CLI.replace(
        'Report({"quick": args.quick, "data": "embedded"})',
        'Report({"log": f"saved in {args.out.resolve()}/x"})',
    )
    assert "results.json holds no machine paths" in failures(run_check(broken))


def test_usage_dump_fails(run_check):
    """A parser that prints argparse's usage block (several lines) breaks the one-line rule."""
    broken = (
        GOOD_CLI.replace(
            "def main(argv=None) -> int:\n    return build_cli().main(argv)",
            "def main(argv=None) -> int:\n"
            "    import argparse, sys\n"
            "    cli = build_cli()\n"
            "    try:\n"
            "        return cli.main(argv)\n"
            "    except SystemExit:\n"
            "        raise\n",
        )
        .replace(
            '    p.add_argument("--quick"',
            '    p.error = lambda m: argparse.ArgumentParser.error(p, m)\n    p.add_argument("--quick"',
        )
        .replace("import math", "import argparse, math")
    )
    assert any(name.startswith("demo:") for name in failures(run_check(broken)))


def test_missing_common_flag_and_help_fail(run_check):
    broken = GOOD_CLI.replace('help="epochs"', 'help=""')
    assert "train: every flag has a help text" in failures(run_check(broken))
