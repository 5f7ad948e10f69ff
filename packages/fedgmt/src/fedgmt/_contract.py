"""The icml25-methods command-line contract: one implementation, vendored into every package.

Do not edit a package's copy (``src/<import_name>/_contract.py``). The original is
``tools/templates/_contract.py`` in the icml25-methods repository; ``python tools/sync_meta.py`` copies it
into every package and ``tools/check_structure.py`` fails on a stale copy. It needs only the standard
library; torch, PyYAML and tqdm are imported when a flag needs them.

What a package's ``cli.py`` gets from it::

    cli = CLI("my-dist", description="...")
    p = cli.command("train", train, help="...", writes=("results.json", "model.pt"))
    p.add_argument("--epochs", type=flag_type(int, low=1), default=10, help="training epochs (default: 10)")
    p.add_argument("--data", type=flag_type(str, path="dir"), help="data folder")

    def train(args) -> Report:
        with blame("--data"):
            data = load(args.data)          # ValueError/OSError become one line naming --data
        ...
        return Report({"accuracy": acc}, table=table(rows, header))

    def main(argv=None) -> int:
        return build_cli().main(argv)

The contract, checked for every package by ``nox -s conformance``:

* every subcommand has ``--seed``, ``--device``, ``--out``, ``--config``, ``--quiet``, ``--overwrite`` and a
  help text for every flag;
* bad input (unknown flag, a value outside what a flag accepts, a missing or malformed ``--config``, a data
  path that does not exist or holds NaN, an unwritable ``--out``) gives one line on stderr that names the
  argument and what it accepts, exit code 2, before any work;
* a subcommand writes its results to its own file in ``--out`` (``results.json`` for the main job,
  ``<subcommand>.json`` for the others) with ``command``, ``config``, ``versions``, ``seed``,
  ``wall_time_s`` and ``machine``, and no path of the machine that ran it; it refuses to replace a
  non-empty result or checkpoint without ``--overwrite``;
* internal errors are not disguised as usage errors: they end with a traceback and exit code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import math
import os
import pickle
import platform
import re
import shlex
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

CONTRACT_VERSION = 1
COMMON_FLAGS = ("--seed", "--device", "--out", "--config", "--quiet", "--overwrite")
RESERVED_KEYS = ("command", "subcommand", "config", "versions", "seed", "wall_time_s", "machine")
_NUMBER = re.compile(r"^-(\d|\.\d|inf|nan)", re.I)


class UsageError(Exception):
    """Bad input from the user: printed as one line on stderr, exit code 2.

    ``argument`` is the flag to blame (``"--data"``), or None when no single flag is at fault.
    """

    def __init__(self, argument: str | None, message: str) -> None:
        self.argument = argument
        self.message = " ".join(str(message).split())
        super().__init__(f"argument {argument}: {self.message}" if argument else self.message)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and exit code 2 (raised as :class:`UsageError`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # --lr must not silently match --lr-decay
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(None, f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------------------------- values


class Check:
    """An argparse ``type=`` that validates a value and says what it accepts.

    ``kind`` and ``invalid`` are read by the conformance check: it feeds every ``invalid`` example to the
    flag and expects a one-line error naming it. Kinds: ``count``, ``rate``, ``number``, ``list``,
    ``data`` (an input path), ``out`` (an output folder), ``device``.
    """

    def __init__(
        self,
        parse: Callable[[str], Any],
        accepts: str,
        kind: str,
        invalid: Sequence[str] = (),
        name: str = "value",
    ) -> None:
        self.parse = parse
        self.accepts = accepts
        self.kind = kind
        self.invalid = tuple(invalid)
        self.__name__ = name  # argparse names the type in some messages

    def __call__(self, text: str) -> Any:
        try:
            value = self.parse(str(text))
        except (ValueError, TypeError, OverflowError) as exc:
            detail = f" ({exc})" if isinstance(exc, Invalid) else ""
            raise argparse.ArgumentTypeError(
                f"expected {self.accepts}, got {text!r}{detail}"
            ) from exc
        return value

    def __repr__(self) -> str:
        return f"Check({self.accepts!r})"


class Invalid(ValueError):
    """Raised by a value parser with the reason shown to the user (``does not exist``)."""


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        value = float(text)  # 5.0 from a JSON config is 5; 1.5 is not an integer
        if not value.is_integer():
            raise
        return int(value)


def out_dir() -> Check:
    """An output folder that exists or can be created and written (checked before any work)."""

    def parse(text: str) -> Path:
        path = Path(text).expanduser()
        if path.exists() and not path.is_dir():
            raise Invalid("exists and is not a folder")
        probe = path
        while not probe.exists():
            probe = probe.parent
        if not probe.is_dir():
            raise Invalid(f"cannot create a folder below the file {probe}")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise Invalid(f"{probe} is not writable")
        return path

    return Check(parse, "a folder that can be created and written", "out", (), "folder")


def device(types: Sequence[str] = ("cpu", "cuda", "mps")) -> Check:
    """A torch device string that is available here (``cpu``, ``cuda``, ``cuda:1``, ``mps``).

    ``types`` limits the device types a command supports (``("cpu",)`` for CPU-only code)."""
    supported = tuple(types)

    def parse(text: str) -> str:
        import torch

        try:
            dev = torch.device(text)
        except RuntimeError as exc:
            raise Invalid("not a device name") from exc
        if dev.type not in supported:
            raise Invalid(f"this command supports {', '.join(supported)} only")
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise Invalid("CUDA is not available on this machine")
        if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
            raise Invalid(f"this machine has {torch.cuda.device_count()} CUDA device(s)")
        if dev.type == "mps" and not torch.backends.mps.is_available():
            raise Invalid("MPS is not available on this machine")
        return text

    names = {"cpu": "cpu", "cuda": "cuda, cuda:N", "mps": "mps"}
    accepts = ", ".join(names.get(t, t) for t in supported)
    return Check(parse, accepts, "device", ["not-a-device"], "device")


# ------------------------------------------------------------------------------------------- configs
#
# A package's job is a library call on a config dataclass (``run(cfg) -> Result``); the CLI's flags are
# generated from that dataclass. Each field says its default, its one-line doc and what it accepts:
#
#     @dataclass
#     class TrainConfig:
#         epochs: int = param(5, "training epochs", low=1, high=100_000)
#         lr: float = param(0.15, "peak learning rate", low=0, low_open=True, high=10)
#         hidden: tuple[int, ...] = param((128, 128), "hidden widths of the MLP", low=1)
#         max_train: int | None = param(None, "stratified training subsample", low=1, none="all")
#         bias_correction: str = param("refresh", "bias correction of D", choices=BIAS)
#
#         def __post_init__(self) -> None:
#             check_config(self)      # ValueError naming the field, the value and what it accepts
#
#     p = cli.command("train", cmd_train, help="...", config=TrainConfig)   # --epochs, --lr, ...
#     def cmd_train(args) -> Report:
#         result = train(config_from(args, TrainConfig))                    # usage errors name the flag


@dataclass(frozen=True)
class Param:
    """What a config field accepts (kept in the field's metadata by :func:`param`)."""

    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[Any, ...] = ()
    none: str = "none"  # the word that stands for None on the command line ("all", "auto")
    path: str = ""  # "file", "dir" or "any": an input path that must exist
    names: tuple[str, ...] = ()  # words accepted instead of a path ("digits", "auto")
    flag: bool = True  # False: a library-only field, no command-line flag


class ConfigError(ValueError):
    """A config field holds a value it does not accept; ``field`` names it."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(message)


REQUIRED: Any = object()  # param(REQUIRED, ...): a field without a default, a required flag


def param(default: Any, doc: str, **accepts: Any) -> Any:
    """A config dataclass field: its default (:data:`REQUIRED` for none: the field comes first in the
    dataclass and its flag is required), a one-line ``doc`` (the flag's help) and what it accepts
    (``low``/``high``, ``low_open``/``high_open`` to exclude a bound, ``choices``, ``none`` = the word for
    None on the command line, ``path`` = ``file``/``dir``/``any`` with ``names`` = words accepted instead
    of a path, ``flag=False`` for no flag)."""
    tuples = ("choices", "names")
    fixed: dict[str, Any] = {k: tuple(v) if k in tuples else v for k, v in accepts.items()}
    spec = Param(doc, **fixed)
    if default is REQUIRED:
        return field(metadata={"icml25": spec})
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata={"icml25": spec})
    return field(default=default, metadata={"icml25": spec})


def _params(cls: type) -> list[tuple[str, Any, bool, Param, Any]]:
    """``(name, base type, None allowed, Param, default)`` of each :func:`param` field of ``cls``."""
    import dataclasses
    import types
    import typing

    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("icml25")
        if spec is None:
            continue
        hint, nullable = hints[f.name], False
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            hint, nullable = args[0], len(args) < len(typing.get_args(hint))
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        default = REQUIRED if default is dataclasses.MISSING else default
        out.append((f.name, hint, nullable, spec, default))
    return out


def _accepts(base: Any, spec: Param, nullable: bool) -> str:
    item = (getattr(base, "__args__", None) or (str,))[0] if _is_list(base) else base
    if spec.choices:
        text = "one of " + ", ".join(map(str, spec.choices))
    elif spec.path:
        text = {"file": "an existing file", "dir": "an existing folder"}.get(spec.path, "a path")
        text += f" or one of {', '.join(spec.names)}" if spec.names else ""
    elif item is bool:
        text = "true or false"
    else:
        text = {int: "an integer", float: "a finite number"}.get(item, "a string")
        bounds = []
        if spec.low is not None:
            bounds.append(f"{'>' if spec.low_open else '>='} {_number(spec.low, item)}")
        if spec.high is not None:
            bounds.append(f"{'<' if spec.high_open else '<='} {_number(spec.high, item)}")
        text += (" " + " and ".join(bounds)) if bounds else ""
    if _is_list(base):
        text = "comma-separated: each " + text
    return text + (f", or {spec.none}" if nullable else "")


def _number(value: float, item: Any, exact: bool = False) -> str:
    """A bound as shown in help (``1e+06``) or, ``exact``, as text that parses back to the same value
    (an out-of-range example 1e6 + 1 must not print as ``1e+06``, the bound itself)."""
    return str(int(value)) if item is int else repr(float(value)) if exact else f"{value:g}"


def _is_list(base: Any) -> bool:
    """``list[X]`` or ``tuple[X, ...]`` (a tuple default keeps the dataclass free of mutable defaults)."""
    return base in (list, tuple) or getattr(base, "__origin__", None) in (list, tuple)


def _accept(name: str, value: Any, base: Any, nullable: bool, spec: Param) -> Any:
    """``value`` as the field's type, or :class:`ConfigError` saying what the field accepts."""
    if value is None and nullable:
        return None
    problem = ConfigError(name, f"{name}={value!r}: expected {_accepts(base, spec, nullable)}")
    if _is_list(base):
        if not isinstance(value, (list, tuple)) or not value:
            raise problem
        item = (getattr(base, "__args__", None) or (str,))[0]
        items = [_accept(name, v, item, False, spec) for v in value]
        return tuple(items) if getattr(base, "__origin__", base) is tuple else items
    if spec.path and value in spec.names:
        return value
    if spec.path:
        path = Path(value).expanduser() if isinstance(value, (str, os.PathLike)) else None
        kind = {"file": Path.is_file, "dir": Path.is_dir}.get(spec.path, Path.exists)
        if path is None or not kind(path):
            raise problem
        return path
    if base is bool:
        if not isinstance(value, bool):
            raise problem
        return value
    if base in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise problem
        if base is int and not float(value).is_integer():
            raise problem
        value = int(value) if base is int else float(value)
        low_bad = spec.low is not None and (
            value < spec.low or (spec.low_open and value == spec.low)
        )
        high_bad = spec.high is not None and (
            value > spec.high or (spec.high_open and value == spec.high)
        )
        if not math.isfinite(value) or low_bad or high_bad:
            raise problem
    if spec.choices and value not in spec.choices:
        raise problem
    return value


def check_config(cfg: Any) -> None:
    """Check every :func:`param` field of a config dataclass instance (call it in ``__post_init__``):
    :class:`ConfigError` names the first field whose value it does not accept."""
    for name, base, nullable, spec, _ in _params(type(cfg)):
        object.__setattr__(cfg, name, _accept(name, getattr(cfg, name), base, nullable, spec))


def _flag_check(name: str, base: Any, nullable: bool, spec: Param) -> Check:
    """The argparse ``type=`` of a field's flag: text → value → :func:`_accept`."""
    item = (getattr(base, "__args__", None) or (str,))[0] if _is_list(base) else base

    def one(text: str) -> Any:
        return _int(text) if item is int else float(text) if item is float else text

    def parse(text: str) -> Any:
        if nullable and text == spec.none:
            return None
        value = [one(t) for t in text.split(",") if t.strip()] if _is_list(base) else one(text)
        try:
            return _accept(name, value, base, nullable, spec)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    invalid = ["x"] if item in (int, float) else []
    invalid += ["no-such-choice"] if spec.choices else []
    if item in (int, float) and not spec.choices:
        step = 1 if item is int else 1.0
        if spec.low is not None:
            invalid.append(_number(spec.low if spec.low_open else spec.low - step, item, True))
        if spec.high is not None:
            invalid.append(_number(spec.high if spec.high_open else spec.high + step, item, True))
        invalid += ["1.5"] if item is int else ["nan", "inf"]
    low_ok = spec.low is not None and spec.low >= 0
    if spec.choices or spec.path or _is_list(base):
        kind = "choice" if spec.choices else "data" if spec.path else "list"
    elif item in (int, float):
        kind = ("count" if item is int else "rate") if low_ok else "number"
    else:
        kind = "text"
    return Check(parse, _accepts(base, spec, nullable), kind, invalid, name=item.__name__)


def flag_type(base: Any, *, nullable: bool = False, **accepts: Any) -> Check:
    """The argparse ``type=`` of a hand-written flag, described as a :func:`param` field is:
    ``flag_type(int, low=1)``, ``flag_type(list[int], low=0)``, ``flag_type(str, path="dir")``,
    ``flag_type(list[str], choices=NAMES)``; ``nullable=True`` takes the ``none`` word for None."""
    fixed: dict[str, Any] = {
        k: tuple(v) if k in ("choices", "names") else v for k, v in accepts.items()
    }
    return _flag_check("value", base, nullable, Param("", **fixed))


def _shown(value: Any, spec: Param) -> str:
    if value is None:
        return spec.none
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def add_config_flags(parser: argparse.ArgumentParser, cls: type, skip: Sequence[str] = ()) -> None:
    """One flag per :func:`param` field of ``cls`` (``--batch-size`` for ``batch_size``): type, default,
    help and bounds all from the field; booleans get ``--x/--no-x``. ``skip`` names fields left out
    (``seed`` and ``device`` come from the common flags)."""
    group = parser.add_argument_group(f"{cls.__name__} (a Python call takes the same fields)")
    for name, base, nullable, spec, default in _params(cls):
        if not spec.flag or name in skip or name in ("seed", "device"):
            continue
        flag, shown = "--" + name.replace("_", "-"), _shown(default, spec)
        if base is bool:
            group.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=f"{spec.doc} (default: {'on' if default else 'off'})",
            )
            continue
        check = _flag_check(name, base, nullable, spec)
        required = default is REQUIRED
        group.add_argument(
            flag,
            type=check,
            default=None if required else default,
            required=required,
            metavar=name.upper(),
            help=f"{spec.doc}: {check.accepts} ({'required' if required else f'default: {shown}'})",
        )


def config_from(args: argparse.Namespace, cls: type, **overrides: Any) -> Any:
    """``cls`` built from the parsed flags (plus ``--seed``/``--device`` when it has those fields), with
    ``overrides``; a value it refuses becomes a :class:`UsageError` naming the flag."""
    values = {n: getattr(args, n) for n, *_ in _params(cls) if hasattr(args, n)}
    try:
        return cls(**{**values, **overrides})
    except ConfigError as exc:
        raise UsageError("--" + exc.field.replace("_", "-"), str(exc)) from exc


# ------------------------------------------------------------------------------------------ commands


@dataclass
class Report:
    """What a subcommand handler returns.

    ``results`` goes into the results JSON beside the contract's fields; ``table`` is printed on stdout
    (unless ``--quiet``); ``files`` are other files the command wrote (listed on stdout); ``status`` is
    the exit code (0 for success; e.g. 3 for a run that finished but diverged).
    """

    results: dict[str, Any]
    table: str = ""
    files: list[Path] = field(default_factory=list)
    status: int = 0


Handler = Callable[[argparse.Namespace], Report]


@dataclass
class Command:
    name: str
    handler: Handler
    parser: Parser
    writes: tuple[str, ...] | Callable[[argparse.Namespace], Sequence[str]]

    def files(self, args: argparse.Namespace) -> tuple[str, ...]:
        """The files this run writes in ``--out``, its results JSON first."""
        names = tuple(self.writes(args) if callable(self.writes) else self.writes)
        if not names or not names[0].endswith(".json"):
            raise ValueError(
                f"command {self.name!r}: writes must start with its results .json file"
            )
        return names


class CLI:
    """The command line of one package: subcommands with the common flags, config files, results."""

    def __init__(
        self,
        dist: str,
        *,
        description: str,
        version: str | None = None,
        track: Sequence[str] = (),
    ) -> None:
        """``track``: further distributions whose versions every results file records."""
        self.dist = dist
        self.track = tuple(track)
        self.prog = dist
        self.version = version or _dist_version(dist)
        self.parser = Parser(prog=self.prog, description=description)
        self.parser.add_argument(
            "--version", action="version", version=f"{self.prog} {self.version}"
        )
        self._sub = self.parser.add_subparsers(
            dest="command", required=True, metavar="COMMAND", parser_class=Parser
        )
        self.commands: dict[str, Command] = {}

    def command(
        self,
        name: str,
        handler: Handler,
        *,
        help: str,
        description: str | None = None,
        writes: Sequence[str] | Callable[[argparse.Namespace], Sequence[str]] | None = None,
        out_default: str | None = None,
        seed_default: int = 0,
        device_default: str = "cpu",
        devices: Sequence[str] = ("cpu", "cuda", "mps"),
        config: type | None = None,
    ) -> Parser:
        """Add a subcommand with the common flags; returns its parser for the command's own flags.

        ``writes`` names the files the command writes in ``--out``, its results JSON first (default:
        ``results.json`` for ``demo``/``train``/``run``, else ``<name>.json``), or is a function of the
        parsed arguments returning them (``lambda a: (f"evaluate-{a.task}.json",)``). None of them is
        replaced without ``--overwrite``. ``devices`` lists the device types the command supports
        (``("cpu",)`` refuses ``--device cuda`` with one clear line instead of failing mid-run).
        ``config``: a config dataclass whose :func:`param` fields become the command's own flags
        (:func:`add_config_flags`; the handler builds it back with :func:`config_from`).
        """
        if writes is None:
            writes = ("results.json",) if name in ("demo", "train", "run") else (f"{name}.json",)
        if not callable(writes):
            writes = tuple(writes)
            if not writes or not writes[0].endswith(".json"):
                raise ValueError(f"command {name!r}: writes must start with its results .json file")
        shown = ", ".join(writes) if not callable(writes) else "its results"
        parser = self._sub.add_parser(
            name,
            help=help,
            description=description or help,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        common = parser.add_argument_group("common options")
        common.add_argument(
            "--seed",
            type=flag_type(int, low=0, high=2**32 - 1),  # numpy's seeds; torch's fit too
            default=seed_default,
            help=f"random seed (default: {seed_default})",
        )
        check = device(devices)
        common.add_argument(
            "--device",
            type=check,
            default=device_default,
            help=f"torch device: {check.accepts} (default: {device_default})",
        )
        out_default = out_default or f"{self.prog}-out"
        common.add_argument(
            "--out",
            type=out_dir(),
            default=Path(out_default),
            help=f"output folder for {shown} (default: {out_default})",
        )
        common.add_argument(
            "--config",
            default=None,
            metavar="FILE",
            help="JSON or YAML file of flag values (keys are flag names, e.g. 'epochs' or "
            "'batch_size'); flags given on the command line win",
        )
        common.add_argument("--quiet", action="store_true", help="no progress bars and no table")
        common.add_argument(
            "--overwrite",
            action="store_true",
            help=f"replace existing files in --out ({shown}); without it an existing result is kept "
            "and the command stops",
        )
        if config is not None:
            add_config_flags(parser, config)
        parser.set_defaults(_handler=handler)
        self.commands[name] = Command(name, handler, parser, writes)
        return parser

    # ------------------------------------------------------------------------------------- parsing

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """Parse ``argv``: unknown flags and ``--config`` first, then argparse with the file's values."""
        argv = list(argv)
        if not argv or argv[0] not in self.commands:
            return self.parser.parse_args(argv)  # --help, --version, or argparse's choice error
        name, rest = argv[0], argv[1:]
        sub = self.commands[name].parser
        if "-h" in rest or "--help" in rest:
            return self.parser.parse_args([name, "--help"])
        _reject_unknown(sub, rest, f"{self.prog} {name}")
        config = _find_config(rest)
        tokens = _config_tokens(sub, config) if config is not None else []
        try:
            return self.parser.parse_args([name, *tokens, *rest])
        except UsageError as exc:
            flag = _leading_flag(exc.message)
            given = {t.split("=", 1)[0] for t in rest}
            if config is not None and flag and flag in tokens and flag not in given:
                text, _, hint = exc.message.rpartition(" (see '")
                note = f"set in --config {config}" + (f"; see '{hint}" if text else ")")
                raise UsageError(None, f"{text or exc.message} ({note}") from None
            raise

    # ------------------------------------------------------------------------------------- running

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Run the command line: parse, check outputs, run the handler, write results. Returns the exit code."""
        argv = list(sys.argv[1:] if argv is None else argv)
        created: list[Path] = []  # the --out folder this run made: a failed run removes it
        try:
            args = self.parse(argv)
            command = self.commands[args.command]
            created += _first_missing(Path(args.out))
            results_path = self._prepare_out(args, command)
            start = time.perf_counter()
            report = command.handler(args)
            wall = time.perf_counter() - start
        except UsageError as exc:
            _discard(created)
            print(f"{self.prog}: error: {exc}", file=sys.stderr)
            return 2
        except ConfigError as exc:  # the library refused a config field: name its flag
            _discard(created)
            flag = "--" + exc.field.replace("_", "-")
            print(f"{self.prog}: error: {UsageError(flag, str(exc))}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # what an interrupted run wrote (checkpoints) is kept, to resume
            kept = [folder for folder in created if any(p.is_file() for p in folder.rglob("*"))]
            _discard([folder for folder in created if folder not in kept])
            where = f"; partial output kept in {args.out}" if kept else ""
            print(f"{self.prog}: interrupted{where}", file=sys.stderr)
            return 130
        except BaseException:
            _discard(created)
            raise
        clash = [k for k in report.results if k in RESERVED_KEYS]
        if clash:
            raise RuntimeError(f"{command.name}: results use reserved keys {clash}")
        payload = {
            "command": portable_command(self.prog, argv),
            "subcommand": command.name,
            "config": portable(_config_of(args)),
            "versions": {**versions(self.dist, *self.track), self.dist: self.version},
            "seed": getattr(args, "seed", None),
            "wall_time_s": round(wall, 3),
            "machine": machine(),
            **portable(report.results),
        }
        write_json(results_path, payload)
        if not getattr(args, "quiet", False):
            if report.table:
                print(report.table)
            for path in [results_path, *report.files]:
                print(f"wrote {path}")
        return report.status

    def _prepare_out(self, args: argparse.Namespace, command: Command) -> Path:
        out = Path(args.out)
        names = command.files(args)
        for name in names:
            fresh_output(out / name, getattr(args, "overwrite", False))
        try:
            out.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check-"):
                pass
        except OSError as exc:
            raise UsageError("--out", f"cannot write to {out}: {exc.strerror or exc}") from exc
        return out / names[0]

    def describe(self) -> list[dict[str, Any]]:
        """Every subcommand with its files and flags (what the conformance check drives)."""
        described = []
        for name, command in self.commands.items():
            options = []
            for action in command.parser._actions:
                if not action.option_strings or isinstance(action, argparse._HelpAction):
                    continue
                check = action.type if isinstance(action.type, Check) else None
                options.append(
                    {
                        "flags": list(action.option_strings),
                        "dest": action.dest,
                        "help": action.help or "",
                        "required": bool(action.required),
                        "takes_value": action.nargs != 0,
                        "kind": check.kind if check else None,
                        "raw_type": getattr(action.type, "__name__", None) if not check else None,
                        "invalid": list(check.invalid) if check else [],
                        "value": check.__name__ if check else None,
                        "choices": [str(c) for c in action.choices] if action.choices else [],
                    }
                )
            defaults = argparse.Namespace(
                **{a.dest: a.default for a in command.parser._actions if a.dest != "help"}
            )
            described.append(
                {"name": name, "writes": list(command.files(defaults)), "options": options}
            )
        return described


def _first_missing(path: Path) -> list[Path]:
    """The outermost folder of ``path`` that does not exist yet (what creating it would make), or []."""
    top, probe = None, path.absolute()
    while not probe.exists() and probe != probe.parent:
        top, probe = probe, probe.parent
    return [top] if top is not None else []


def _discard(created: list[Path]) -> None:
    for folder in created:
        shutil.rmtree(folder, ignore_errors=True)


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _leading_flag(message: str) -> str | None:
    match = re.match(r"argument ([-\w]+)", message)
    return match.group(1).split("/")[0] if match else None


def _option_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return dict(parser._option_string_actions)


def _reject_unknown(parser: argparse.ArgumentParser, tokens: Sequence[str], prog: str) -> None:
    """Name an unknown flag before argparse complains about missing required ones instead."""
    actions = _option_actions(parser)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            return
        if not token.startswith("-") or token == "-" or _NUMBER.match(token):
            continue
        flag, has_inline, _ = token.partition("=")
        action = actions.get(flag)
        if action is None:
            raise UsageError(
                None, f"unrecognized argument {flag}; '{prog} --help' lists the accepted flags"
            )
        if has_inline or action.nargs == 0:
            continue
        if action.nargs in (None, 1, "?"):
            if i < len(tokens) and (not tokens[i].startswith("-") or _NUMBER.match(tokens[i])):
                i += 1
        else:  # "+", "*" or an int: consume values up to the next flag
            while i < len(tokens) and (not tokens[i].startswith("-") or _NUMBER.match(tokens[i])):
                i += 1


def _find_config(tokens: Sequence[str]) -> str | None:
    found = None
    for i, token in enumerate(tokens):
        if token == "--config":
            if i + 1 >= len(tokens):
                raise UsageError("--config", "expected a file name (a .json, .yaml or .yml file)")
            found = tokens[i + 1]
        elif token.startswith("--config="):
            found = token.split("=", 1)[1]
    return found


def _config_tokens(parser: argparse.ArgumentParser, name: str) -> list[str]:
    """The flags a config file stands for, as command-line tokens (so argparse validates them)."""
    accepted = 'a JSON or YAML file holding a mapping of flag names to values, e.g. {"epochs": 5}'
    path = Path(name).expanduser()
    if not path.is_file():
        raise UsageError("--config", f"{name} does not exist or is not a file; expected {accepted}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("--config", f"cannot read {name} ({exc}); expected {accepted}") from exc
    if not text.strip():
        raise UsageError("--config", f"{name} is empty; expected {accepted}")
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(
                "--config", f"{name} is not valid JSON ({exc.msg} at line {exc.lineno})"
            ) from exc
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise UsageError(
                "--config", "YAML configs need PyYAML (pip install pyyaml), or use a .json file"
            ) from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise UsageError("--config", f"{name} is not valid YAML ({problem}{where})") from exc
    else:
        raise UsageError(
            "--config", f"{name}: unknown format {suffix!r}; accepted: .json, .yaml, .yml"
        )
    if not isinstance(data, dict):
        raise UsageError(
            "--config", f"{name} holds a {type(data).__name__}, not a mapping; expected {accepted}"
        )
    actions = _option_actions(parser)
    settable = sorted(
        {a.dest for a in actions.values() if a.dest not in ("help", "config", "version")}
    )
    tokens: list[str] = []
    for key, value in data.items():
        flag = "--" + str(key).lstrip("-").replace("_", "-")
        action = actions.get(flag)
        if action is None or action.dest in ("help", "config", "version"):
            raise UsageError(
                "--config", f"unknown key {key!r} in {name}; accepted keys: {', '.join(settable)}"
            )
        tokens += _tokens_for(action, flag, key, value, name)
    return tokens


def _tokens_for(action: argparse.Action, flag: str, key: Any, value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if action.nargs == 0:  # store_true / store_false / BooleanOptionalAction / count...
        if not isinstance(value, bool):
            raise UsageError(
                "--config", f"key {key!r} in {name} must be true or false, got {value!r}"
            )
        if isinstance(action, argparse.BooleanOptionalAction):
            positive = next(s for s in action.option_strings if not s.startswith("--no-"))
            return [positive if value else "--no-" + positive[2:]]
        if isinstance(action, argparse._StoreFalseAction):
            return [flag] if not value else []
        return [flag] if value else []
    if isinstance(value, dict):
        raise UsageError(
            "--config", f"key {key!r} in {name} must be a value or a list, got a mapping"
        )
    if action.nargs in (None, "?", 1) and isinstance(value, list):
        return [flag, ",".join(_scalar(v) for v in value)]
    if isinstance(value, list):
        return [flag, *(_scalar(v) for v in value)]
    return [flag, _scalar(value)]


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_of(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in vars(args).items() if not k.startswith("_") and k != "command"}


# ------------------------------------------------------------------------------------------ results


def holds_data(path: Path) -> bool:
    """True for a non-empty file, or a folder with anything in it."""
    if path.is_file():
        return path.stat().st_size > 0
    if path.is_dir():
        return any(path.iterdir())
    return False


def fresh_output(path: Path, overwrite: bool, argument: str = "--overwrite") -> Path:
    """``path``, unless it already holds a result and ``overwrite`` is off (then a :class:`UsageError`).

    Call it, before any work, for every file a command writes outside ``--out``'s declared files
    (a checkpoint given by its own flag, say); ``argument`` is that flag."""
    path = Path(path)
    if not overwrite and holds_data(path):
        hint = "pass --overwrite to replace it" + (
            ", or choose another --out" if argument == "--overwrite" else f", or another {argument}"
        )
        raise UsageError(argument, f"{path} already exists; {hint}")
    return path


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as results may show it: relative to the working folder, or ``<...>/<name>`` when outside."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        rel = p.relative_to(Path.cwd())
    except ValueError:
        return f"<...>/{p.name}" if p.name else "<...>"
    return rel.as_posix() or "."


def _looks_absolute(text: str) -> bool:
    return len(text) > 1 and (text.startswith("/") or bool(re.match(r"^[A-Za-z]:[\\/]", text)))


def portable_command(prog: str, argv: Sequence[str]) -> str:
    """The command line as typed, with machine paths replaced by :func:`display_path`."""
    out = []
    for token in argv:
        if "=" in token and token.startswith("--"):
            flag, value = token.split("=", 1)
            out.append(f"{flag}={display_path(value)}" if _looks_absolute(value) else token)
        else:
            out.append(display_path(token) if _looks_absolute(token) else token)
    return shlex.join([prog, *out])


def portable(obj: Any) -> Any:
    """JSON-ready copy of ``obj``: paths shown portably, numpy/torch values as Python, non-finite floats
    as the strings ``"nan"``/``"inf"``/``"-inf"`` (valid JSON that does not pretend to be a number)."""
    if isinstance(obj, dict):
        return {str(k): portable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [portable(v) for v in obj]
    if isinstance(obj, os.PathLike):
        return display_path(obj)
    if isinstance(obj, str):
        return display_path(obj) if _looks_absolute(obj) else obj
    if isinstance(obj, bool) or obj is None or isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return (
            obj
            if math.isfinite(obj)
            else ("nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf"))
        )
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars, torch tensors
    if callable(tolist):
        return portable(tolist())
    item = getattr(obj, "item", None)
    if callable(item):
        return portable(item())
    return str(obj)


def write_json(path: Path, payload: Any) -> Path:
    """Write JSON atomically (a temporary file in the same folder, then a rename): no half-written files."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(portable(payload), indent=2, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make results.json unlike other outputs
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def versions(dist: str, *others: str) -> dict[str, str]:
    """Versions of Python, this package, torch, numpy and ``others`` (those installed)."""
    found = {"python": platform.python_version()}
    for name in (dist, "torch", "numpy", *others):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found


def machine() -> dict[str, Any]:
    """What ran it, without naming the machine: CPU count, OS, architecture, torch threads."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "system": platform.system(),
        "arch": platform.machine(),
    }
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = bool(torch.cuda.is_available())
    return info


# ------------------------------------------------------------------------------------------ helpers


@contextlib.contextmanager
def blame(argument: str, *extra: type[BaseException]) -> Iterator[None]:
    """Turn input errors raised inside the block (a bad file, a missing field) into a :class:`UsageError`
    naming ``argument``. Keep the block to the loading call: errors of the method itself must stay bugs."""
    errors: tuple[type[BaseException], ...] = (
        ValueError,
        OSError,
        EOFError,
        KeyError,
        UnicodeDecodeError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        *extra,
    )
    try:
        yield
    except UsageError:
        raise
    except errors as exc:
        raise UsageError(argument, _describe_error(exc)) from exc


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    if isinstance(exc, EOFError):
        return "the file is truncated or empty"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0] if len(text) < 400 else text[:400].splitlines()[0] + " ..."


def require(module: str, dist: str, extra: str, purpose: str) -> Any:
    """Import an optional dependency, or fail with one line naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(
            None, f"{purpose} needs the '{module}' module: pip install '{dist}[{extra}]'"
        ) from exc


def say(args: argparse.Namespace, text: str) -> None:
    """Print a line on stdout unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(text, flush=True)


class _NullBar:
    def __init__(self, total: int | None = None) -> None:
        self.total = total
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_description(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NullBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _LazyBar(_NullBar):
    """A bar that appears at its first update: an input error found before any progress prints only
    its one line."""

    def __init__(self, total: int | None, desc: str) -> None:
        super().__init__(total)
        self.desc: str = desc
        self.bar: Any = None

    def update(self, n: int = 1) -> None:
        if self.bar is None:
            self.bar = progress(self.total, self.desc)
        self.bar.update(n)

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.set_postfix(*args, **kwargs)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def progress(total: int | None, desc: str, quiet: bool = False, lazy: bool = False) -> Any:
    """A tqdm progress bar on stderr (a silent stand-in when ``quiet`` or tqdm is missing); ``lazy``:
    shown from its first update on (hand it to a library call that checks its input first)."""
    if quiet:
        return _NullBar(total)
    if lazy:
        return _LazyBar(total, desc)
    try:
        from tqdm import tqdm
    except ImportError:
        return _NullBar(total)
    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True, file=sys.stderr)


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (ddof=1); the std is None for fewer than two values."""
    vals = [float(v) for v in values]
    if not vals:
        return math.nan, None
    mean = sum(vals) / len(vals)
    if len(vals) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))


def fmt_mean_std(values: Sequence[float], digits: int = 2) -> str:
    """``"97.87 ± 0.32"`` over several values (sample std), just ``"97.87"`` for one."""
    mean, std = mean_std(values)
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain-text table with aligned columns."""
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
