"""The shared matrix over every package of icml25-methods.

Packages are discovered by glob (``packages/*/pyproject.toml``) and every session is parametrized by
package, so ``nox -s "tests(package='sassha-optim')"`` runs one cell and ``nox -s tests`` runs them all.
Each cell is its own virtual environment. The CPU build of torch is installed first so that resolving a
package's ``torch>=2.2`` never pulls a multi-GB CUDA build:

* ``ICML25_TORCH`` — the requirement to install first (default ``torch==2.13.0``, which pip finds on this
  project's machines in a local wheel folder);
* ``ICML25_TORCH_INDEX_URL`` — an index to take it from (e.g. ``https://download.pytorch.org/whl/cpu`` on
  GitHub runners); unset means pip's configured indexes.

Sessions: ``tests``, ``lint``, ``typecheck``, ``build``, ``demo``, ``bench`` (per package), ``docs`` and
``tools`` (the repository's own tooling and its tests).
"""

from __future__ import annotations

import os
import sys

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

nox.options.sessions = ["tools", "tests", "lint", "build"]
nox.options.error_on_missing_interpreters = True


def _pkg_dir(package: str) -> Path:
    return ROOT / "packages" / package


def _import_name(package: str) -> str:
    return package.replace("-", "_")


def _project(package: str) -> dict:
    """The ``[project]`` table of the package's pyproject.toml."""
    with open(_pkg_dir(package) / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]


def _install_torch(session: nox.Session) -> None:
    args = [TORCH]
    if TORCH_INDEX_URL:
        args += ["--index-url", TORCH_INDEX_URL]
    session.install(*args)


def _install_package(session: nox.Session, package: str, *extras: str) -> None:
    """Install torch (CPU) first, then the package (not editable) with the extras it declares."""
    _install_torch(session)
    wanted = [e for e in extras if e in _project(package).get("optional-dependencies", {})]
    suffix = f"[{','.join(wanted)}]" if wanted else ""
    session.install(f"{_pkg_dir(package)}{suffix}")


parametrize_package = nox.parametrize("package", PACKAGES)


@nox.session
@parametrize_package
def tests(session: nox.Session, package: str) -> None:
    """Run one package's unit tests against its installed (non-editable) copy."""
    _install_package(session, package, "test")
    args = ["pytest", "tests", "-q", "-rs", "-p", "no:cacheprovider"]
    if JUNIT_DIR:
        args.append(f"--junitxml={Path(JUNIT_DIR).resolve() / f'{package}.xml'}")
    session.chdir(_pkg_dir(package))
    session.run(*args, *session.posargs)


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
    """Build the wheel, install it (not the source tree) with the CPU torch, check CLI and version."""
    session.install("build>=1.0")
    out = Path(session.create_tmp()) / f"dist-{package}"
    if out.exists():
        for old in out.iterdir():
            old.unlink()
    session.run("python", "-m", "build", "--wheel", "--outdir", str(out), str(_pkg_dir(package)))
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        session.error(f"expected one wheel in {out}, found {[w.name for w in wheels]}")
    _install_torch(session)
    session.install(str(wheels[0]))
    version = _project(package)["version"]
    name = _import_name(package)
    session.run(
        "python",
        "-c",
        f"import importlib.resources as r, {name}; "
        f"assert {name}.__version__ == {version!r}, {name}.__version__; "
        f"assert r.files({name!r}).joinpath('py.typed').is_file(), 'py.typed missing from wheel'; "
        f"print({name!r}, {name}.__version__)",
    )
    session.run(package, "--help", silent=True)


@nox.session
@parametrize_package
def demo(session: nox.Session, package: str) -> None:
    """Run the package's main job on its embedded default, offline, in quick mode."""
    _install_package(session, package, "cli")
    out = Path(session.create_tmp()) / f"demo-{package}"
    session.run(package, "demo", "--quick", "--out", str(out), *session.posargs)


@nox.session
@parametrize_package
def bench(session: nox.Session, package: str) -> None:
    """Run the package's benchmarks (writes benchmarks/results/*.json and the README table)."""
    _install_package(session, package, "bench", "cli", "test")
    session.chdir(_pkg_dir(package))
    session.run("python", "benchmarks/run.py", *session.posargs)


@nox.session
def tools(session: nox.Session) -> None:
    """The repository's own tooling: ruff on tools/ and this file, the tools' tests, the structure check."""
    session.install("ruff>=0.6", "pytest>=8", "tomli>=2; python_version < '3.11'")
    targets = [str(ROOT / "tools"), str(ROOT / "noxfile.py"), str(ROOT / "docs" / "conf.py")]
    session.run("ruff", "check", *targets)
    session.run("ruff", "format", "--check", *targets)
    args = ["pytest", str(ROOT / "tools" / "tests"), "-q", "-p", "no:cacheprovider"]
    if JUNIT_DIR:
        args.append(f"--junitxml={Path(JUNIT_DIR).resolve() / 'tools.xml'}")
    session.run(*args)
    session.run("python", str(ROOT / "tools" / "check_structure.py"))


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx + MyST site (one page per package from its README, plus API pages), -W."""
    _install_torch(session)
    session.install("sphinx>=7", "myst-parser>=2", "numpy", "tqdm", "pyyaml")
    # The packages themselves without their heavy dependencies: conf.py mocks those for autodoc.
    session.install("--no-deps", *[str(_pkg_dir(p)) for p in PACKAGES])
    session.run("python", str(ROOT / "tools" / "gen_docs.py"))
    session.run(
        "sphinx-build",
        "-W",
        "--keep-going",
        "-b",
        "html",
        str(ROOT / "docs"),
        str(ROOT / "docs" / "_build" / "html"),
    )


if __name__ == "__main__":
    sys.exit("run me with nox")
