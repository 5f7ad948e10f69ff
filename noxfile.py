"""The shared matrix over every package of icml25-methods.

Packages are discovered by glob (``packages/*/pyproject.toml``) and every per-package session is
parametrized by package, so ``nox -s "tests(package='sassha-optim')"`` runs one cell and ``nox -s tests``
runs them all. Each cell is its own virtual environment, made by uv when it is installed (``pip install
'nox[uv]'``; plain virtualenv otherwise): uv hard-links every installed file from one cache, so eleven
packages' venvs share one copy of torch on disk instead of one copy each.

The CPU build of torch is installed first so that resolving a package's ``torch>=2.2`` never pulls a
multi-GB CUDA build:

* ``ICML25_TORCH`` — the requirement to install first (default ``torch==2.13.0``, which this project's
  machines hold in a local wheel folder, found through ``PIP_FIND_LINKS``);
* ``ICML25_TORCH_INDEX_URL`` — an index to take it from (e.g. ``https://download.pytorch.org/whl/cpu`` on
  GitHub runners); unset means the configured indexes.

Sessions (``nox -l`` lists every cell):

* per package: ``tests`` (built from the sdist, installed, and the sdist's own tests run against it),
  ``conformance`` (the CLI contract, ``tools/conformance.py``), ``lint``, ``typecheck``, ``build`` (sdist
  + wheel; the wheel installed as a pinned release into a fresh venv; ``--help``; version; py.typed),
  ``demo`` and ``bench``;
* for the repository: ``tools`` (the tooling's own tests and the structure check), ``together`` (every
  wheel in one venv: pip's resolver, ``pip check``, imports and each CLI), ``docs`` (Sphinx, -W) and
  ``docs_check`` (every page opened in headless Chromium: links, images, screenshots).
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile

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
SHARED_DATA = Path(os.environ.get("ICML25_DATA", ROOT.parent / "shared" / "data"))

nox.options.sessions = ["tools", "tests", "conformance", "lint", "build"]
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


def _install_package(
    session: nox.Session, package: str, *extras: str, source: Path | None = None
) -> None:
    """Install torch (CPU) first, then the package (not editable) with the given extras.

    The package itself is then reinstalled without its dependencies by ``session.run``, which ``nox -R``
    (no installs) does not skip: a reused venv always tests the current code, never a stale copy."""
    source = source or _pkg_dir(package)
    _install_torch(session)
    session.install(f"{source}{_extras(package, *extras)}")
    if session.venv_backend == "uv":
        session.run(
            "uv", "pip", "install", "-q", "--no-deps", "--reinstall-package", package, str(source)
        )
    else:
        session.run(
            "python", "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(source)
        )


def _build(session: nox.Session, package: str, *kinds: str) -> dict[str, Path]:
    """Build the package's sdist and/or wheel into a fresh folder; returns {kind: file}."""
    out = Path(session.create_tmp()) / f"dist-{package}"
    shutil.rmtree(out, ignore_errors=True)
    flags = [f"--{k}" for k in kinds]
    if shutil.which("uv", path=os.environ.get("PATH")) and session.venv_backend == "uv":
        session.run("uv", "build", *flags, "--out-dir", str(out), str(_pkg_dir(package)))
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


def _junit(name: str) -> list[str]:
    return [f"--junitxml={Path(JUNIT_DIR).resolve() / f'{name}.xml'}"] if JUNIT_DIR else []


parametrize_package = nox.parametrize("package", PACKAGES)


@nox.session
@parametrize_package
def tests(session: nox.Session, package: str) -> None:
    """Build the sdist, install it with its [test] extra, and run the sdist's own tests against it."""
    sdist = _build(session, package, "sdist")["sdist"]
    _install_package(session, package, "test", source=sdist)
    unpacked = Path(session.create_tmp()) / f"sdist-{package}"
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        kwargs = {"filter": "data"} if sys.version_info >= (3, 12) else {}
        tar.extractall(unpacked, **kwargs)
    (tree,) = unpacked.iterdir()
    if not (tree / "tests").is_dir():
        session.error(f"the sdist of {package} has no tests/ folder")
    # src/ is not importable from the tree root, so the tests import the installed copy.
    session.chdir(tree)
    args = ["pytest", "tests", "-q", "-rs", "-p", "no:cacheprovider"]
    session.run(*args, *_junit(package), *session.posargs, env=_env())


@nox.session
@parametrize_package
def conformance(session: nox.Session, package: str) -> None:
    """Drive the installed CLI through the repository's CLI contract (tools/conformance.py)."""
    _install_package(session, package, "cli")
    args = ["python", str(ROOT / "tools" / "conformance.py"), str(_pkg_dir(package))]
    if JUNIT_DIR:
        args += ["--junit", str(Path(JUNIT_DIR).resolve() / f"conformance-{package}.xml")]
    session.run(*args, *session.posargs, env=_env())


@nox.session
@parametrize_package
def lint(session: nox.Session, package: str) -> None:
    """ruff (lint + format check) and the repository's structure check."""
    session.install("ruff>=0.6", "tomli>=2; python_version < '3.11'")
    path = str(_pkg_dir(package))
    session.run("ruff", "check", path)
    session.run("ruff", "format", "--check", path)
    session.run("python", str(ROOT / "tools" / "check_structure.py"), path)


@nox.session
@parametrize_package
def typecheck(session: nox.Session, package: str) -> None:
    """mypy over the package's public API (its src tree)."""
    _install_package(session, package, "test")
    session.install("mypy>=1.8")
    src = _pkg_dir(package) / "src" / _import_name(package)
    session.run("mypy", "--ignore-missing-imports", "--no-namespace-packages", str(src))


@nox.session
@parametrize_package
def build(session: nox.Session, package: str) -> None:
    """Build sdist + wheel; install the wheel as a pinned release (pip, --find-links) into this fresh
    venv; check the version, py.typed and ``<cli> --help``."""
    built = _build(session, package, "sdist", "wheel")
    version = _project(package)["version"]
    wheel = built["wheel"]
    if f"-{version}-" not in wheel.name:
        session.error(f"{wheel.name} does not carry the pyproject version {version}")
    _install_torch(session)
    session.install("pip>=23")
    # As a user pinning one release from an index would: the name and version, found among the wheels.
    session.run(
        "python", "-m", "pip", "install", "-q", "--find-links", str(wheel.parent),
        f"{package}=={version}",
    )  # fmt: skip
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


@nox.session
def together(session: nox.Session) -> None:
    """Every package's wheel in one venv, as a project that pins several methods would install them:
    pip's resolver must find no conflict, ``pip check`` must pass, each package imports and each CLI runs."""
    wheels = [str(_build(session, p, "wheel")["wheel"]) for p in PACKAGES]
    _install_torch(session)
    session.install("pip>=23")
    session.run("python", "-m", "pip", "install", "-q", *wheels)
    session.run("python", "-m", "pip", "check")
    for package in PACKAGES:
        name = _import_name(package)
        session.run("python", "-c", f"import {name}; print({name!r}, {name}.__version__)")
        session.run(package, "--help", silent=True)


@nox.session
@parametrize_package
def demo(session: nox.Session, package: str) -> None:
    """Run the package's main job on its embedded default, offline, in quick mode."""
    _install_package(session, package, "cli")
    out = Path(session.create_tmp()) / f"demo-{package}"
    shutil.rmtree(out, ignore_errors=True)
    session.run(package, "demo", "--quick", "--out", str(out), *session.posargs, env=_env())


@nox.session
@parametrize_package
def bench(session: nox.Session, package: str) -> None:
    """Run the package's benchmarks (writes benchmarks/results/*.json and the README table)."""
    _install_package(session, package, "bench", "cli", "test")
    session.chdir(_pkg_dir(package))
    session.run("python", "benchmarks/run.py", *session.posargs, env=_env())


@nox.session
def tools(session: nox.Session) -> None:
    """The repository's own tooling: ruff on tools/ and this file, the tools' tests, the structure check."""
    _install_torch(session)  # the contract's --device check imports torch
    session.install(
        "ruff>=0.6",
        "pytest>=8",
        "pyyaml>=6",
        "numpy",  # torch warns on import without it, and the conformance tests count stderr lines
        "playwright>=1.40",
        "tomli>=2; python_version < '3.11'",
    )
    targets = [str(ROOT / "tools"), str(ROOT / "noxfile.py"), str(ROOT / "docs" / "conf.py")]
    session.run("ruff", "check", *targets)
    session.run("ruff", "format", "--check", *targets)
    args = ["pytest", str(ROOT / "tools" / "tests"), "-q", "-p", "no:cacheprovider"]
    session.run(*args, *_junit("tools"))
    session.run("python", str(ROOT / "tools" / "check_structure.py"))


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx + MyST site (one page per package from its README, plus API pages), -W."""
    _install_torch(session)
    session.install(
        "sphinx>=7", "myst-parser>=2", "furo>=2024.1", "numpy", "tqdm", "pyyaml", "transformers"
    )
    # The packages themselves without their heavy dependencies: conf.py mocks those for autodoc.
    session.install("--no-deps", *[str(_pkg_dir(p)) for p in PACKAGES])
    session.run("python", str(ROOT / "tools" / "gen_docs.py"))
    html = ROOT / "docs" / "_build" / "html"
    shutil.rmtree(html, ignore_errors=True)
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", str(ROOT / "docs"), str(html))


@nox.session
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


if __name__ == "__main__":
    sys.exit("run me with nox")
