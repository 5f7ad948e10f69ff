"""The shared matrix over every package of icml25-methods, in two tiers.

Packages are discovered by glob (``packages/*/pyproject.toml``) and every per-package session is
parametrized by package, so ``nox -s "tests(package='sassha-optim')"`` runs one cell and ``nox -s tests``
runs them all. Each cell is its own virtual environment, made by uv when it is installed (``pip install
'nox[uv]'``; plain virtualenv otherwise): uv hard-links every installed file from one cache, so eleven
packages' venvs share one copy of torch on disk instead of one copy each.

**Per change** (tag ``change``; what ``.ci/run`` and ``ci.yml`` run):

* ``lint`` (repository): one ruff check + format check over the whole tree and the structure check of
  every package (``tools/check_structure.py``);
* ``tools`` (repository): the tooling's own tests;
* ``tests`` (per package, one venv): the package's wheel, built once (``.nox/_wheels``, keyed by a hash of
  what goes into it), installed as a pinned release with ``[test,cli]``; its installed version,
  ``py.typed`` and vendored contract checked (the *build* stage); the unit tests not marked ``slow``;
  mypy over the src tree (*typecheck*); the CLI contract (*conformance*, ``tools/conformance.py``:
  ``--help``, ``--version`` and an unknown flag through the entry point, ``demo --quick``). Each stage's time is written to ``.nox/_timings`` for ``.ci/run``;
* ``wheels`` (repository): every package's wheel built once (the cells below reuse them);
* ``together`` (repository): every package's wheel (the same files) in one venv: the resolver (uv per
  change, pip's nightly), ``pip check``, imports and each CLI;
* ``docs`` and ``docs_check`` (repository): the Sphinx site (-W), then every page in headless Chromium.

**Nightly and on main** (tag ``nightly``; ``nightly.yml``, or ``nox -t nightly`` here): ``slow`` (the tests
marked ``slow``), ``reference`` (the tests marked ``reference``, with the package's ``[reference]``
extra; a skipped reference test fails the session), ``demo``, ``release_check``, and, on GitHub, the
``tests`` and ``slow`` cells on Python 3.10-3.13.

On demand: ``typecheck``, ``conformance`` and ``build`` (one stage of ``tests`` in a venv of its own, for
local work), ``bench`` (benchmarks, never in CI), ``release_build`` (what the release workflow publishes).

The CPU build of torch is installed first so that resolving a package's ``torch>=2.2`` never pulls a
multi-GB CUDA build:

* ``ICML25_TORCH`` — the requirement to install first (default ``torch==2.13.0``, which this project's
  machines hold in a local wheel folder, found through ``PIP_FIND_LINKS``);
* ``ICML25_TORCH_INDEX_URL`` — an index to take it from (e.g. ``https://download.pytorch.org/whl/cpu`` on
  GitHub runners); unset means the configured indexes;
* ``ICML25_WHEEL_DIR`` — a folder of already built wheels (GitHub's build job hands them to the test
  matrix): a package's ``<name>-<version>-*.whl`` found there is used instead of building it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
PACKAGES = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml"))
TORCH = os.environ.get("ICML25_TORCH", "torch==2.13.0")
TORCH_INDEX_URL = os.environ.get("ICML25_TORCH_INDEX_URL", "")
JUNIT_DIR = os.environ.get("ICML25_JUNIT_DIR", "")
WHEEL_DIR = os.environ.get("ICML25_WHEEL_DIR", "")
SHARED_DATA = Path(os.environ.get("ICML25_DATA", ROOT.parent / "shared" / "data"))
WHEELS = ROOT / ".nox" / "_wheels"
TIMINGS = ROOT / ".nox" / "_timings"
# What a wheel is made of: everything in the package folder but these (tests and benchmarks ship in the
# sdist only, which release_check builds).
NOT_IN_WHEEL = {"tests", "benchmarks", "__pycache__", ".pytest_cache", ".mypy_cache", ".hypothesis"}
UNIT = "not slow"  # the per-change tier's pytest selection

nox.options.sessions = ["lint", "tools", "tests"]
nox.options.error_on_missing_interpreters = True
nox.options.default_venv_backend = "uv|virtualenv"

# uv does not read pip's configuration: hand it pip's local wheel folder (where torch's CPU wheel lies).
if os.environ.get("PIP_FIND_LINKS") and not os.environ.get("UV_FIND_LINKS"):
    os.environ["UV_FIND_LINKS"] = os.environ["PIP_FIND_LINKS"]


def _pkg_dir(package: str) -> Path:
    return ROOT / "packages" / package


def _import_name(package: str) -> str:
    return package.replace("-", "_")


def _project(package: str) -> dict:
    """The ``[project]`` table of the package's pyproject.toml."""
    with open(_pkg_dir(package) / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]


def _env() -> dict[str, str]:
    """Environment of test runs: the shared data folder when it exists, hypothesis kept out of the tree."""
    env = {"HYPOTHESIS_STORAGE_DIRECTORY": str(ROOT / ".nox" / "hypothesis")}
    if SHARED_DATA.is_dir():
        env["ICML25_DATA"] = str(SHARED_DATA.resolve())
    return env


def _uv(session: nox.Session) -> bool:
    return session.venv_backend == "uv" and bool(shutil.which("uv", path=os.environ.get("PATH")))


def _install_torch(session: nox.Session) -> None:
    args = [TORCH]
    if TORCH_INDEX_URL:
        args += ["--index-url", TORCH_INDEX_URL]
    session.install(*args)


def _extras(package: str, *extras: str) -> str:
    declared = _project(package).get("optional-dependencies", {})
    missing = [e for e in extras if e not in declared]
    if missing:
        raise RuntimeError(
            f"{package} declares no extra(s) {missing}; declared: {sorted(declared)}"
        )
    return f"[{','.join(extras)}]" if extras else ""


def _fingerprint(package: str) -> str:
    """A hash of every file that goes into the package's wheel (names and contents)."""
    pkg = _pkg_dir(package)
    digest = hashlib.sha256()
    for path in sorted(pkg.rglob("*")):
        rel = path.relative_to(pkg)
        if not path.is_file() or NOT_IN_WHEEL.intersection(rel.parts) or path.suffix == ".pyc":
            continue
        digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _build(session: nox.Session, package: str, out: Path, *kinds: str) -> dict[str, Path]:
    """Build the package's sdist and/or wheel into ``out`` (emptied first); returns {kind: file}."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    flags = [f"--{k}" for k in kinds]
    if _uv(session):
        session.run("uv", "build", "-q", *flags, "--out-dir", str(out), str(_pkg_dir(package)))
    else:
        session.install("build>=1.0")
        session.run("python", "-m", "build", *flags, "--outdir", str(out), str(_pkg_dir(package)))
    found = {}
    for kind, pattern in (("sdist", "*.tar.gz"), ("wheel", "*.whl")):
        files = sorted(out.glob(pattern))
        if kind in kinds and len(files) != 1:
            session.error(f"expected one {kind} in {out}, found {[f.name for f in files]}")
        if files:
            found[kind] = files[0]
    return found


def _wheel(session: nox.Session, package: str) -> Path:
    """The package's wheel, built at most once per content: reused from ``ICML25_WHEEL_DIR`` or from
    ``.nox/_wheels/<package>/<fingerprint>/`` when there, else built there."""
    version = _project(package)["version"]
    if WHEEL_DIR:
        given = sorted(Path(WHEEL_DIR).rglob(f"{_import_name(package)}-{version}-*.whl"))
        if len(given) == 1:
            session.log(f"using the wheel handed over in ICML25_WHEEL_DIR: {given[0].name}")
            return given[0]
    out = WHEELS / package / _fingerprint(package)
    cached = sorted(out.glob("*.whl"))
    if len(cached) == 1:
        session.log(f"reusing {cached[0].name} (built from the same files)")
        return cached[0]
    shutil.rmtree(WHEELS / package, ignore_errors=True)  # older builds of this package
    wheel = _build(session, package, out, "wheel")["wheel"]
    if f"-{version}-" not in wheel.name:
        session.error(f"{wheel.name} does not carry the pyproject version {version}")
    return wheel


def _install_release(session: nox.Session, package: str, *extras: str) -> None:
    """Install torch (CPU) first, then the package's wheel as a user pinning one release from an index
    would: ``<dist>[extras]==<version>``, found among the wheels (``--find-links``)."""
    wheel = _wheel(session, package)
    _install_torch(session)
    requirement = f"{package}{_extras(package, *extras)}=={_project(package)['version']}"
    if _uv(session):
        # --reinstall-package: a reused venv (nox -r) always gets this build, never a stale copy.
        session.run(
            "uv", "pip", "install", "-q", "--find-links", str(wheel.parent),
            "--reinstall-package", package, requirement,
        )  # fmt: skip
    else:
        session.install("pip>=23")
        pip = ["python", "-m", "pip", "install", "-q", "--find-links", str(wheel.parent)]
        session.run(*pip, requirement)
        session.run(*pip, "--force-reinstall", "--no-deps", requirement)


def _check_installed(session: nox.Session, package: str) -> None:
    """The installed release carries the pyproject version, py.typed and the vendored contract, and its
    CLI answers ``--help`` and ``--version``."""
    version = _project(package)["version"]
    name = _import_name(package)
    session.run(
        "python",
        "-c",
        f"import importlib.resources as r, {name}; "
        f"assert {name}.__version__ == {version!r}, {name}.__version__; "
        f"assert r.files({name!r}).joinpath('py.typed').is_file(), 'py.typed missing from wheel'; "
        f"assert r.files({name!r}).joinpath('_contract.py').is_file(), '_contract.py missing'; "
        f"print({name!r}, {name}.__version__)",
    )
    session.run(package, "--help", silent=True)
    session.run(package, "--version")


def _check_metadata(session: nox.Session, package: str) -> None:
    """The installed release's metadata carries the pyproject version, py.typed and the vendored
    contract (read from the distribution's records: no import of the package, hence of torch)."""
    version = _project(package)["version"]
    name = _import_name(package)
    session.run(
        "python",
        "-c",
        "import importlib.metadata as m; "
        f"files = {{str(f) for f in m.files({package!r}) or ()}}; "
        f"assert m.version({package!r}) == {version!r}, m.version({package!r}); "
        f"assert '{name}/py.typed' in files, 'py.typed missing from the wheel'; "
        f"assert '{name}/_contract.py' in files, '_contract.py missing from the wheel'; "
        f"print({package!r}, m.version({package!r}), 'py.typed and _contract.py installed')",
    )


def _junit(name: str) -> list[str]:
    return [f"--junitxml={Path(JUNIT_DIR).resolve() / f'{name}.xml'}"] if JUNIT_DIR else []


def _pytest(
    session: nox.Session, package: str, marks: str, report: str, *extra: str
) -> Path | None:
    """Run the package's tests (from its source tree, against the installed release) selected by the
    marker expression ``marks``. Returns the JUnit report when one was written. Exit code 5 (nothing
    selected) is accepted: not every package has slow or reference tests."""
    junit = _junit(report)
    if not junit and report.startswith("reference-"):  # the reference session reads its report
        junit = [f"--junitxml={Path(ROOT / session.create_tmp()).resolve() / 'reference.xml'}"]
    session.chdir(_pkg_dir(package))
    args = ["pytest", "tests", "-q", "-rs", "-p", "no:cacheprovider", "--strict-markers"]
    session.run(*args, "-m", marks, *junit, *extra, env=_env(), success_codes=[0, 5])
    session.chdir(ROOT)
    return Path(junit[0].split("=", 1)[1]) if junit else None


def _mypy(session: nox.Session, package: str) -> None:
    session.install("mypy>=1.8")
    src = _pkg_dir(package) / "src" / _import_name(package)
    cache = ROOT / ".nox" / "_mypy_cache" / package
    session.run(
        "mypy", "--ignore-missing-imports", "--no-namespace-packages", "--cache-dir", str(cache),
        str(src),
    )  # fmt: skip


def _conformance(session: nox.Session, package: str, *extra: str) -> None:
    args = ["python", str(ROOT / "tools" / "conformance.py"), str(_pkg_dir(package))]
    if JUNIT_DIR:
        args += ["--junit", str(Path(JUNIT_DIR).resolve() / f"conformance-{package}.xml")]
    session.run(*args, *extra, env=_env())


@contextlib.contextmanager
def _stage(session: nox.Session, package: str, stage: str) -> Iterator[None]:
    """Time one stage of a cell and add it to ``.nox/_timings/<package>.json`` (read by .ci/run)."""
    t0 = time.perf_counter()
    yield
    seconds = time.perf_counter() - t0
    TIMINGS.mkdir(parents=True, exist_ok=True)
    path = TIMINGS / f"{package}.json"
    times = json.loads(path.read_text()) if path.is_file() else {}
    times[stage] = round(seconds, 1)
    path.write_text(json.dumps(times, indent=1))
    session.log(f"{package}: {stage} {seconds:.0f} s")


parametrize_package = nox.parametrize("package", PACKAGES)


# --------------------------------------------------------------------------------- per change


@nox.session(tags=["change"])
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) over the whole tree, once; the structure check of every package."""
    session.install("ruff>=0.6", "tomli>=2; python_version < '3.11'")
    targets = [str(ROOT / "packages"), str(ROOT / "tools"), str(ROOT / "noxfile.py")]
    targets.append(str(ROOT / "docs" / "conf.py"))
    session.run("ruff", "check", *targets)
    session.run("ruff", "format", "--check", *targets)
    session.run("python", str(ROOT / "tools" / "check_structure.py"), *session.posargs)


@nox.session(tags=["change"])
def tools(session: nox.Session) -> None:
    """The repository's own tooling: its tests (conformance check, CI selection, tiers, workflows)."""
    _install_torch(session)  # the contract's --device check imports torch
    session.install(
        "pytest>=8",
        "pyyaml>=6",
        "nox>=2025.2.9",  # the workflow test lists this file's sessions
        "numpy",  # torch warns on import without it, and the conformance tests count stderr lines
        "playwright>=1.40",
        "tomli>=2; python_version < '3.11'",
    )
    args = ["pytest", str(ROOT / "tools" / "tests"), "-q", "-p", "no:cacheprovider"]
    session.run(*args, *_junit("tools"), *session.posargs)


@nox.session(tags=["change"])
@parametrize_package
def tests(session: nox.Session, package: str) -> None:
    """One package's per-change gate, in one venv: its wheel (built once) installed as a pinned release
    with [test,cli]; version, py.typed and contract in the installed files; the tests not marked slow;
    mypy; the CLI contract (which runs --help and --version through the entry point). Arguments after
    ``--`` go to pytest."""
    with _stage(session, package, "build"):
        _install_release(session, package, "test", "cli")
        _check_metadata(session, package)  # --help and --version: conformance's entry-point checks
    with _stage(session, package, "tests"):
        _pytest(session, package, UNIT, package, *session.posargs)
    with _stage(session, package, "typecheck"):
        _mypy(session, package)
    with _stage(session, package, "conformance"):
        _conformance(session, package)


@nox.session(tags=["change"])
def wheels(session: nox.Session) -> None:
    """Build every package's wheel once, into ``.nox/_wheels`` (the ``tests`` cells, ``together`` and
    ``docs`` then reuse them; a wheel is rebuilt only when what goes into it changed)."""
    for package in PACKAGES:
        _wheel(session, package)


@nox.session(tags=["change", "nightly"])
def together(session: nox.Session) -> None:
    """Every package's wheel (the ones ``tests`` built) in one venv, as a project that pins several
    methods would install them: the resolver must find no conflict, ``pip check`` must pass, each
    package imports and each CLI runs. uv resolves per change (fast, and it fails on any conflict);
    ``nox -s together -- pip`` (the nightly tier) resolves with pip's own resolver."""
    wheels = [str(_wheel(session, p)) for p in PACKAGES]
    _install_torch(session)
    session.install("pip>=23")
    if "pip" in session.posargs or not _uv(session):
        session.run("python", "-m", "pip", "install", "-q", *wheels)
    else:
        session.run("uv", "pip", "install", "-q", *wheels)
    session.run("python", "-m", "pip", "check")
    for package in PACKAGES:
        name = _import_name(package)
        session.run("python", "-c", f"import {name}; print({name!r}, {name}.__version__)")
        session.run(package, "--help", silent=True)


@nox.session(tags=["change"])
def docs(session: nox.Session) -> None:
    """Build the Sphinx + MyST site (one page per package from its README, plus API pages), -W."""
    _install_torch(session)
    session.install(
        "sphinx>=7", "myst-parser>=2", "furo>=2024.1", "numpy", "tqdm", "pyyaml", "transformers",
        "sphinx-mathjax-offline>=0.0.2",  # MathJax inside the site: equations render offline too
    )  # fmt: skip
    # The packages themselves without their heavy dependencies: conf.py mocks those for autodoc.
    session.install("--no-deps", *[str(_wheel(session, p)) for p in PACKAGES])
    session.run("python", str(ROOT / "tools" / "gen_docs.py"))
    html = ROOT / "docs" / "_build" / "html"
    shutil.rmtree(html, ignore_errors=True)
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", str(ROOT / "docs"), str(html))


@nox.session(tags=["change"])
def docs_check(session: nox.Session) -> None:
    """Open every page of the built site in headless Chromium: broken links or images fail; screenshots
    go to docs/_build/screenshots. Needs Debian's chromium (``apt-get install chromium``)."""
    html = ROOT / "docs" / "_build" / "html"
    if not (html / "index.html").is_file():
        session.error("build the site first: nox -s docs")
    session.install("playwright>=1.40")
    session.run(
        "python", str(ROOT / "tools" / "check_site.py"), str(html),
        "--screenshots", str(ROOT / "docs" / "_build" / "screenshots"),
    )  # fmt: skip


# ----------------------------------------------------------------------------- nightly / main


@nox.session(tags=["nightly"])
@parametrize_package
def slow(session: nox.Session, package: str) -> None:
    """The package's tests marked ``slow`` (end-to-end runs, demos through the CLI, deployments)."""
    _install_release(session, package, "test", "cli")
    _pytest(session, package, "slow", f"slow-{package}", *session.posargs)


def _skipped(report: Path) -> list[str]:
    """``file::test: reason`` of every skipped test case in a JUnit XML report."""
    out = []
    for case in ET.parse(report).getroot().iter("testcase"):
        skip = case.find("skipped")
        if skip is not None:
            where = f"{case.get('classname', '')}::{case.get('name', '')}"
            out.append(f"{where}: {skip.get('message', '')}")
    return out


@nox.session(tags=["nightly"])
@parametrize_package
def reference(session: nox.Session, package: str) -> None:
    """The tests marked ``reference`` (equivalence with an installed reference implementation), with
    the package's ``[reference]`` extra. A reference test that skips proves nothing: any skip fails."""
    declared = _project(package).get("optional-dependencies", {})
    extras = ("test", "cli", "reference") if "reference" in declared else ("test", "cli")
    _install_release(session, package, *extras)
    with open(_pkg_dir(package) / "pyproject.toml", "rb") as fh:
        no_deps = tomllib.load(fh).get("tool", {}).get("icml25", {}).get("reference-no-deps", [])
    if (
        no_deps
    ):  # [tool.icml25] reference-no-deps: a reference whose own dependencies would break torch
        session.install("--no-deps", *no_deps)
    report = _pytest(session, package, "reference", f"reference-{package}", *session.posargs)
    if report is None or not report.is_file():
        session.log(f"{package} has no tests marked reference")
        return
    skipped = _skipped(report)
    if skipped:
        session.error(f"{len(skipped)} reference test(s) skipped:\n  " + "\n  ".join(skipped))


@nox.session(tags=["nightly"])
@parametrize_package
def demo(session: nox.Session, package: str) -> None:
    """Run the package's main job on its embedded default, offline, in quick mode."""
    _install_release(session, package, "cli")
    out = Path(session.create_tmp()) / f"demo-{package}"
    shutil.rmtree(out, ignore_errors=True)
    session.run(package, "demo", "--quick", "--out", str(out), *session.posargs, env=_env())


@nox.session(tags=["nightly"])
def release_check(session: nox.Session) -> None:
    """What a release would publish, for every package: sdist + wheel built, ``twine check``, the sdist
    carries tests/, and version, newest CHANGELOG heading and release-please manifest agree. With
    ``-- <dist>-v<version>`` the tag must name a package and its version."""
    session.install("twine>=5", "tomli>=2; python_version < '3.11'")
    session.run("python", str(ROOT / "tools" / "release_check.py"), *session.posargs[:1])
    problems = []
    for package in PACKAGES:
        out = Path(session.create_tmp()) / f"release-{package}"
        built = _build(session, package, out, "sdist", "wheel")
        session.run("twine", "check", "--strict", str(built["sdist"]), str(built["wheel"]))
        with tarfile.open(built["sdist"]) as tar:
            if not any("/tests/test_" in name for name in tar.getnames()):
                problems.append(f"{package}: the sdist has no tests/")
        with zipfile.ZipFile(built["wheel"]) as whl:
            if f"{_import_name(package)}/py.typed" not in whl.namelist():
                problems.append(f"{package}: the wheel has no py.typed")
    if problems:
        session.error("release check failed:\n  " + "\n  ".join(problems))


# ---------------------------------------------------------------------------------- on demand


@nox.session
@parametrize_package
def release_build(session: nox.Session, package: str) -> None:
    """Build the sdist and wheel a release publishes into ``dist/<package>/`` (once; the release
    workflow tests this wheel and uploads these files)."""
    built = _build(session, package, ROOT / "dist" / package, "sdist", "wheel")
    version = _project(package)["version"]
    if f"-{version}-" not in built["wheel"].name:
        session.error(f"{built['wheel'].name} does not carry the pyproject version {version}")


@nox.session
@parametrize_package
def build(session: nox.Session, package: str) -> None:
    """The build stage of ``tests`` alone: the wheel installed as a pinned release into this venv;
    version, py.typed, ``--help`` and ``--version``."""
    _install_release(session, package)
    _check_installed(session, package)


@nox.session
@parametrize_package
def typecheck(session: nox.Session, package: str) -> None:
    """The typecheck stage of ``tests`` alone: mypy over the package's src tree."""
    _install_release(session, package, "test")
    _mypy(session, package)


@nox.session
@parametrize_package
def conformance(session: nox.Session, package: str) -> None:
    """The conformance stage of ``tests`` alone: the CLI contract (tools/conformance.py)."""
    _install_release(session, package, "cli")
    _conformance(session, package, *session.posargs)


@nox.session
@parametrize_package
def bench(session: nox.Session, package: str) -> None:
    """Run the package's benchmarks (writes benchmarks/results/*.json and the README table)."""
    _install_release(session, package, "bench", "cli", "test")
    session.chdir(_pkg_dir(package))
    session.run("python", "benchmarks/run.py", *session.posargs, env=_env())


if __name__ == "__main__":
    sys.exit("run me with nox")
