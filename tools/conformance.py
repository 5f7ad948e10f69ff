"""Drive a package's command line through the repository's CLI contract (``tools/templates/_contract.py``).

Usage, inside a virtual environment where the package is installed (``nox -s conformance`` does this)::

    python tools/conformance.py packages/<dist> [--junit FILE] [--skip-demo] [--entry "CMD ..."]

The package declares its subcommands once, in ``<import_name>.cli.build_cli()`` (a ``_contract.CLI``);
every check below is derived from that declaration, so a new package is checked from its first commit:

* the declaration: a ``demo`` command with ``--quick`` writing ``results.json``, the common flags on
  every command, a help text for every flag, one results file name per command;
* the installed entry point: ``--help``, ``--version`` and an unknown flag through a real process (so
  import-time warnings on stderr count); every ``<cmd> --help`` lists each of its flags;
* for every command, bad input gives exit code 2, exactly one line on stderr that names the argument,
  no traceback and no files in ``--out``, in seconds: a missing / empty / malformed / non-mapping
  ``--config``, an unknown key or a bad value in it, an unknown flag, every invalid example that each
  flag's validator declares, a choice not offered, a data path that does not exist, an unwritable
  ``--out``, and data holding NaN (from the package's ``tests/cli_cases.py``);
* every numeric flag refuses an absurd value (``1e30``/``-1e30``, ``100000000000``/``-100000000000``)
  the same way: one line naming the flag and the accepted range, before any work;
* ``--help`` of the entry point and of every command answers within ``HELP_SECONDS`` (no heavy import
  before parsing);
* ``demo --quick --out DIR`` writes ``DIR/results.json`` with ``command``, ``config``, ``versions``,
  ``seed``, ``wall_time_s`` and ``machine``, valid JSON without a path of this machine, and a second run
  refuses to replace it without ``--overwrite`` (and leaves it untouched).

Bad-input cases call the package's ``cli.main(argv)`` in this process (milliseconds each); the entry point
and the demo run as real processes. Exits 1 if any check fails; ``--junit`` writes a JUnit XML report.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.util
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tools" / "templates" / "_contract.py"
COMMON_FLAGS = ("--seed", "--device", "--out", "--config", "--quiet", "--overwrite")
RESULT_FIELDS = {
    "command": str,
    "config": dict,
    "versions": dict,
    "seed": int,
    "wall_time_s": (int, float),
    "machine": dict,
}
QUICK_SECONDS = 20.0  # a bad-input case must fail this fast ("before any work"), imports done
PROCESS_SECONDS = (
    90.0  # the same through a new process, which first imports torch (slow on a busy machine)
)
INPROC_SECONDS = (
    60.0  # an in-process case still running after this started a run: stopped, and fails
)
DEMO_SECONDS = 600.0
HELP_SECONDS = 1.5  # `<dist> --help` and `<dist> <cmd> --help`, best of three processes


class ProbeStillRunning(BaseException):
    """Raised into an in-process case that outlives ``INPROC_SECONDS`` (it accepted a value and started)."""


def _stop_probe(signum: int, frame: Any) -> None:
    raise ProbeStillRunning


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Outcome:
    rc: int | str
    stdout: str
    stderr: str
    seconds: float
    error: str = ""


class Conformance:
    def __init__(self, pkg: Path, entry: list[str] | None, workdir: Path) -> None:
        self.pkg = pkg.resolve()
        self.dist = self.pkg.name
        self.import_name = self.dist.replace("-", "_")
        self.entry = entry or [self.dist]
        self.work = workdir
        self.checks: list[Check] = []
        self._n = 0

    # ----------------------------------------------------------------------------------- plumbing

    def record(self, name: str, ok: bool, detail: str = "", seconds: float = 0.0) -> bool:
        self.checks.append(Check(name, ok, detail, seconds))
        return ok

    def fresh(self, stem: str) -> Path:
        self._n += 1
        path = self.work / f"{self._n:03d}-{stem}"
        return path

    def inproc(self, argv: list[str]) -> Outcome:
        main = self.cli_module.main
        out, err = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        error = ""
        previous = signal.signal(signal.SIGALRM, _stop_probe)
        signal.setitimer(signal.ITIMER_REAL, INPROC_SECONDS)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc: int | str = main(argv)
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except ProbeStillRunning:
                rc = "timeout"
                error = (
                    f"still running after {INPROC_SECONDS:.0f} s (stopped): the value was accepted"
                )
            except BaseException:
                rc = "exception"
                error = traceback.format_exc()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
        return Outcome(rc, out.getvalue(), err.getvalue(), time.perf_counter() - start, error)

    def process(self, argv: list[str], timeout: float = 120.0) -> Outcome:
        start = time.perf_counter()
        env = {**os.environ, "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", "default")}
        try:
            proc = subprocess.run(
                [*self.entry, *argv],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=self.work,
                env=env,
            )
        except subprocess.TimeoutExpired as exc:
            return Outcome("timeout", str(exc.stdout or ""), str(exc.stderr or ""), timeout)
        return Outcome(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start)

    def expect_usage_error(
        self,
        name: str,
        outcome: Outcome,
        flag: str | None,
        out: Path | None = None,
        limit: float = QUICK_SECONDS,
    ) -> bool:
        lines = [line for line in outcome.stderr.splitlines() if line.strip()]
        problems = []
        if outcome.rc == "timeout":
            problems.append(outcome.error)
        elif outcome.error:
            problems.append("raised instead of exiting 2:\n" + outcome.error[-1500:])
        elif outcome.rc != 2:
            problems.append(f"exit code {outcome.rc}, expected 2")
        if "Traceback" in outcome.stderr:
            problems.append("traceback on stderr")
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr, expected exactly 1")
        elif flag and flag not in lines[0]:
            problems.append(f"the error line does not name {flag}")
        if outcome.seconds > limit:
            problems.append(f"took {outcome.seconds:.1f} s: the check must come before any work")
        if out is not None and out.exists():
            files = [p for p in out.rglob("*") if p.is_file()]
            if files:
                problems.append(f"wrote {len(files)} file(s) in --out before failing")
        detail = "; ".join(problems)
        if lines:
            detail = (detail + " | " if detail else "") + f"stderr: {lines[0][:300]}"
        if problems and len(lines) > 1:
            detail += " | " + " / ".join(lines[1:4])[:400]
        return self.record(name, not problems, detail, outcome.seconds)

    # ------------------------------------------------------------------------------------ checks

    def run(self, skip_demo: bool) -> bool:
        try:
            self.cli_module = importlib.import_module(f"{self.import_name}.cli")
            contract = importlib.import_module(f"{self.import_name}._contract")
            self.cli = self.cli_module.build_cli()
            self.commands = self.cli.describe()
        except Exception:
            self.record(
                "declaration: import cli.build_cli() and _contract",
                False,
                traceback.format_exc()[-1500:],
            )
            return False
        self.record(
            "declaration: build_cli() returns the vendored contract's CLI",
            isinstance(self.cli, contract.CLI),
            f"got {type(self.cli).__name__}",
        )
        vendored = Path(contract.__file__).read_bytes()
        self.record(
            "declaration: _contract.py equals tools/templates/_contract.py",
            not TEMPLATE.is_file() or vendored == TEMPLATE.read_bytes(),
            "run python tools/sync_meta.py and reinstall",
        )
        self.check_declaration()
        self.check_entry_point()
        cases = self.load_cases()
        for command in self.commands:
            self.check_command(command, cases)
        if not skip_demo:
            self.check_demo()
        return all(c.ok for c in self.checks)

    def check_declaration(self) -> None:
        names = [c["name"] for c in self.commands]
        demo = next((c for c in self.commands if c["name"] == "demo"), None)
        self.record("declaration: has a demo command", demo is not None, f"commands: {names}")
        if demo is not None:
            flags = {f for o in demo["options"] for f in o["flags"]}
            self.record("declaration: demo has --quick", "--quick" in flags)
            self.record(
                "declaration: demo writes results.json",
                demo["writes"][0] == "results.json",
                f"writes {demo['writes']}",
            )
        seen: dict[str, str] = {}
        for command in self.commands:
            name = command["name"]
            flags = {f for o in command["options"] for f in o["flags"]}
            missing = [f for f in COMMON_FLAGS if f not in flags]
            self.record(f"{name}: common flags", not missing, f"missing {missing}")
            raw = [
                o["flags"][0] for o in command["options"] if o.get("raw_type") in ("int", "float")
            ]
            self.record(
                f"{name}: numeric flags use a contract validator",
                not raw,
                f"plain type=int/float (no range check): {raw}; use a param field or "
                "flag_type(int, low=1) from _contract",
            )
            silent = [o["flags"][0] for o in command["options"] if not o["help"].strip()]
            self.record(f"{name}: every flag has a help text", not silent, f"no help: {silent}")
            results = command["writes"][0]
            if name != "demo":
                other = seen.get(results)
                self.record(
                    f"{name}: its own results file",
                    other is None,
                    f"{results} is also written by {other}",
                )
                seen[results] = name

    def check_help_time(self) -> None:
        helps = [["--help"], *([c["name"], "--help"] for c in self.commands)]
        for argv in helps:
            best = self.process(argv).seconds
            for _ in range(2):  # three tries: a busy machine may slow one start
                if best <= HELP_SECONDS:
                    break
                best = min(best, self.process(argv).seconds)
            self.record(
                f"entry point: {' '.join(argv)} within {HELP_SECONDS} s",
                best <= HELP_SECONDS,
                f"best of 3: {best:.2f} s (import torch and friends after parsing, not before)",
                best,
            )

    def check_entry_point(self) -> None:
        self.check_help_time()
        out = self.process(["--help"])
        self.record(
            "entry point: --help",
            out.rc == 0 and "usage" in out.stdout.lower(),
            f"rc {out.rc}; {out.stderr[-300:]}",
            out.seconds,
        )
        out = self.process(["--version"])
        self.record(
            "entry point: --version",
            out.rc == 0 and self.cli.version in out.stdout,
            f"rc {out.rc}; stdout {out.stdout.strip()[:100]!r}",
            out.seconds,
        )
        first = self.commands[0]["name"]
        target = self.fresh("proc-unknown")
        out = self.process([first, "--no-such-flag", "1", "--out", str(target)])
        self.expect_usage_error(
            f"entry point: {first} --no-such-flag (real process)",
            out,
            "--no-such-flag",
            target,
            limit=PROCESS_SECONDS,
        )
        for command in self.commands:  # in this process: the entry point's start is checked above
            out = self.inproc([command["name"], "--help"])
            helptext = out.stdout
            missing = [o["flags"][0] for o in command["options"] if o["flags"][0] not in helptext]
            self.record(
                f"{command['name']}: --help lists every flag",
                out.rc == 0 and not missing,
                f"rc {out.rc}; not in help: {missing}",
                out.seconds,
            )

    def load_cases(self) -> dict[str, Any]:
        path = self.pkg / "tests" / "cli_cases.py"
        if not path.is_file():
            return {}
        spec = importlib.util.spec_from_file_location(f"_cli_cases_{self.import_name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        folder = self.work / "nan-data"
        folder.mkdir(parents=True, exist_ok=True)
        cases: dict[str, Any] = module.nan_data(folder)
        return cases

    def check_command(self, command: dict[str, Any], cases: dict[str, Any]) -> None:
        name = command["name"]
        cfg = self.work / f"config-{name}"
        cfg.mkdir(exist_ok=True)

        def usage(label: str, argv: list[str], flag: str | None) -> None:
            out = self.fresh(f"{name}-out")
            outcome = self.inproc([name, *argv, "--out", str(out)])
            self.expect_usage_error(f"{name}: {label}", outcome, flag, out)

        configs = {
            "missing --config": (None, "--config"),
            "empty --config": ("empty.yaml", ""),
            "malformed YAML --config": ("bad.yaml", "epochs: [1, 2\nlr: {"),
            "malformed JSON --config": ("bad.json", '{"epochs": '),
            "non-mapping YAML --config (a list)": ("list.yaml", "- 1\n- 2\n"),
            "non-mapping JSON --config (a number)": ("number.json", "3"),
            "unknown key in --config": ("unknown.json", '{"no_such_option_xyz": 1}'),
            "unknown --config format": ("flags.txt", "epochs=1\n"),
        }
        for label, (filename, text) in configs.items():
            if filename is None:
                usage(label, ["--config", str(cfg / "absent.yaml")], "--config")
                continue
            (cfg / filename).write_text(text)
            usage(label, ["--config", str(cfg / filename)], "--config")

        options = [o for o in command["options"] if o["takes_value"]]
        valued = [o for o in options if o["invalid"] and o["kind"] not in ("out", "data")]
        valued.sort(key=lambda o: o["flags"][0] in COMMON_FLAGS)  # the command's own flags first
        if valued:
            option = valued[0]
            bad = option["invalid"][0]
            (cfg / "bad-value.json").write_text(json.dumps({option["dest"]: bad}))
            usage(
                f"bad value in --config ({option['dest']}: {bad!r})",
                ["--config", str(cfg / "bad-value.json")],
                option["flags"][0],
            )
        usage("unknown flag --no-such-flag", ["--no-such-flag", "1"], "--no-such-flag")
        for option in options:
            if option["kind"] not in ("count", "rate", "number"):
                continue
            flag = option["flags"][0]
            big = "100000000000" if option.get("value") == "int" else "1e30"
            for bad in (big, "-" + big):
                usage(f"{flag} {bad} (absurd)", [flag, bad], flag)
        raw = [o for o in options if o.get("raw_type") in ("int", "float")]
        for option in raw:  # plain type=int/float: no range at all
            usage(f"{option['flags'][0]} 1e30 (absurd)", [option["flags"][0], "1e30"], None)
        for option in options:
            flag = option["flags"][0]
            if flag == "--out":
                continue
            for bad in option["invalid"]:
                usage(f"{flag} {bad}", [flag, bad], flag)
            if option["choices"]:
                usage(f"{flag} no-such-choice", [flag, "no-such-choice"], flag)
            if option["kind"] == "data":
                usage(f"{flag} <missing path>", [flag, str(cfg / "does-not-exist")], flag)
        blocker = cfg / "a-file"
        blocker.write_text("x")
        outcome = self.inproc([name, "--out", str(blocker / "sub")])
        self.expect_usage_error(f"{name}: unwritable --out (below a file)", outcome, "--out")

        data_flags = [o["flags"][0] for o in options if o["kind"] == "data"]
        case = cases.get(name)
        if not data_flags and case is None:
            return
        if case is None:
            self.record(
                f"{name}: NaN-holding data case",
                False,
                f"{name} takes {data_flags} but tests/cli_cases.py:nan_data() has no entry for it "
                "(give (argv, flag), or a reason string to skip)",
            )
        elif isinstance(case, str):
            self.record(f"{name}: NaN-holding data (skipped: {case})", True)
        else:
            argv, flag = case
            usage(f"data holding NaN ({flag})", [str(a) for a in argv], flag)

    def check_demo(self) -> None:
        out = self.work / "demo"
        outcome = self.process(["demo", "--quick", "--out", str(out)], timeout=DEMO_SECONDS)
        ok = self.record(
            "demo --quick runs",
            outcome.rc == 0,
            f"rc {outcome.rc}; stderr tail: {outcome.stderr[-1500:]}",
            outcome.seconds,
        )
        results = out / "results.json"
        if not ok or not self.record("demo --quick writes results.json", results.is_file()):
            return
        text = results.read_text(encoding="utf-8")

        def refuse(value: str) -> Any:
            raise ValueError(f"non-standard JSON constant {value}")

        try:
            payload = json.loads(text, parse_constant=refuse)
        except ValueError as exc:
            self.record("results.json is valid JSON", False, str(exc))
            return
        self.record("results.json is valid JSON", isinstance(payload, dict))
        for key, kind in RESULT_FIELDS.items():
            value = payload.get(key) if isinstance(payload, dict) else None
            self.record(
                f"results.json has {key}",
                isinstance(value, kind) and not isinstance(value, bool),
                f"got {type(value).__name__}",
            )
        if isinstance(payload, dict) and isinstance(payload.get("versions"), dict):
            have = payload["versions"]
            lacking = [k for k in ("python", "torch", self.dist) if k not in have]
            self.record("results.json versions name python, torch, the package", not lacking)
        leaks = [
            str(p)
            for p in {self.work, out, Path.cwd(), Path.home(), Path(sys.prefix), ROOT}
            if len(str(p)) > 1 and str(p) in text
        ]
        self.record("results.json holds no machine paths", not leaks, f"found {leaks}")
        digest = hashlib.sha256(results.read_bytes()).hexdigest()
        # In this process: the refusal must come before any work, so no new interpreter is needed.
        again = self.inproc(["demo", "--quick", "--out", str(out)])
        self.expect_usage_error(
            "demo: second run without --overwrite", again, "--overwrite", limit=QUICK_SECONDS
        )
        self.record(
            "demo: the refused run left results.json untouched",
            hashlib.sha256(results.read_bytes()).hexdigest() == digest,
        )

    # ----------------------------------------------------------------------------------- report

    def report(self, junit: Path | None) -> None:
        failed = [c for c in self.checks if not c.ok]
        for check in self.checks:
            mark = "ok  " if check.ok else "FAIL"
            line = f"{mark} {check.name}"
            if check.seconds >= 1:
                line += f" ({check.seconds:.1f} s)"
            print(line)
            if not check.ok and check.detail:
                print("       " + check.detail.replace("\n", "\n       "))
        print(f"{self.dist}: {len(self.checks) - len(failed)} passed, {len(failed)} failed")
        if junit is not None:
            suite = ET.Element(
                "testsuite",
                name=f"conformance.{self.dist}",
                tests=str(len(self.checks)),
                failures=str(len(failed)),
                errors="0",
            )
            for check in self.checks:
                case = ET.SubElement(
                    suite,
                    "testcase",
                    classname=f"conformance.{self.dist}",
                    name=check.name,
                    time=f"{check.seconds:.3f}",
                )
                if not check.ok:
                    ET.SubElement(case, "failure", message=check.detail[:500])
            junit.parent.mkdir(parents=True, exist_ok=True)
            ET.ElementTree(suite).write(junit, encoding="utf-8", xml_declaration=True)


def main(argv: list[str] | None = None, runner: Callable[..., Conformance] = Conformance) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", type=Path, help="packages/<dist>")
    parser.add_argument("--junit", type=Path, default=None, help="write a JUnit XML report here")
    parser.add_argument("--skip-demo", action="store_true", help="skip the demo runs")
    parser.add_argument(
        "--entry", default=None, help="command that runs the CLI (default: the installed <dist>)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        entry = shlex.split(args.entry) if args.entry else None
        conf = runner(args.package, entry, Path(tmp))
        ok = conf.run(args.skip_demo)
        conf.report(args.junit)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
