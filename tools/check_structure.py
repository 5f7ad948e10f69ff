"""Check that a package folder follows the repository's package contract (see CONVENTIONS / root README).

Usage: ``python tools/check_structure.py packages/<dist> [packages/<dist> ...]`` (no argument: all packages).
Exits 1 and lists every problem found; prints one ``ok`` line per clean package.
"""

from __future__ import annotations

import ast
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FRONT_MATTER_KEYS = ("title", "paper", "arxiv", "venue", "tags", "dataset")
README_SECTIONS = (
    "Install",
    "Quickstart",
    "CLI",
    "What is implemented",
    "Paper equations → code",
    "Deviations",
    "Datasets",
    "Results",
    "Citation",
)
RESULTS_MARKERS = ("<!-- results:start -->", "<!-- results:end -->")


def front_matter(text: str) -> dict[str, str] | None:
    """Top-level ``key: value`` pairs of a ``---``-fenced front matter block, or None if there is none."""
    match = re.match(r"\A---\n(.*?)\n---\n", text, flags=re.S)
    if match is None:
        return None
    pairs = (re.match(r"^([A-Za-z_][\w-]*):\s*(.*)$", line) for line in match.group(1).splitlines())
    return {m.group(1): m.group(2) for m in pairs if m}


def check_readme(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    problems = []
    meta = front_matter(text)
    if meta is None:
        return [f"{path}: no front matter (a '---' block at the top)"]
    problems += [f"{path}: front matter lacks '{k}'" for k in FRONT_MATTER_KEYS if k not in meta]
    headings = re.findall(r"^## (.+?)\s*$", text, flags=re.M)
    problems += [f"{path}: missing section '## {s}'" for s in README_SECTIONS if s not in headings]
    present = [s for s in headings if s in README_SECTIONS]
    if present != [s for s in README_SECTIONS if s in present]:
        problems.append(f"{path}: sections out of order: {present}")
    if not all(m in text for m in RESULTS_MARKERS):
        problems.append(f"{path}: results table markers {RESULTS_MARKERS} not found")
    if "```bibtex" not in text:
        problems.append(f"{path}: Citation section has no ```bibtex block")
    return problems


def check_pyproject(path: Path, data: dict, dist: str, import_name: str) -> list[str]:
    project = data.get("project", {})
    problems = []
    if data.get("build-system", {}).get("build-backend") != "hatchling.build":
        problems.append(f"{path}: build-backend must be hatchling.build")
    if project.get("name") != dist:
        problems.append(f"{path}: project.name {project.get('name')!r} != folder name {dist!r}")
    if "version" not in project or "version" in project.get("dynamic", []):
        problems.append(f"{path}: version must be static")
    if project.get("requires-python") != ">=3.10":
        problems.append(f"{path}: requires-python must be '>=3.10'")
    deps = project.get("dependencies", [])
    torch_deps = [d for d in deps if re.match(r"^torch\b(?![-_\w])", d)]
    if not torch_deps:
        problems.append(f"{path}: dependencies must include a torch lower bound (torch>=2.2)")
    problems += [
        f"{path}: torch pinned or capped: {d!r}" for d in torch_deps if "==" in d or "<" in d
    ]
    problems += [f"{path}: CUDA variant requested: {d!r}" for d in deps if "+cu" in d]
    script = project.get("scripts", {}).get(dist)
    if script != f"{import_name}.cli:main":
        problems.append(f"{path}: [project.scripts] {dist} must be '{import_name}.cli:main'")
    extras = project.get("optional-dependencies", {})
    problems += [f"{path}: no [{e}] extra" for e in ("test", "cli") if e not in extras]
    return problems


def check_package(pkg: Path) -> list[str]:
    dist = pkg.name
    import_name = dist.replace("-", "_")
    src = pkg / "src" / import_name
    required = [
        pkg / "pyproject.toml",
        pkg / "README.md",
        pkg / "CHANGELOG.md",
        src / "__init__.py",
        src / "py.typed",
        src / "cli.py",
        pkg / "tests",
        pkg / "benchmarks",
        pkg / "benchmarks" / "run.py",
    ]
    problems = [f"{p}: missing" for p in required if not p.exists()]
    if problems:
        return problems
    pyproject = pkg / "pyproject.toml"
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    problems += check_pyproject(pyproject, data, dist, import_name)
    problems += check_readme(pkg / "README.md")
    init = (src / "__init__.py").read_text(encoding="utf-8")
    if "__all__" not in init or f'version("{dist}")' not in init:
        problems.append(f"{src / '__init__.py'}: needs __all__ and __version__ = version({dist!r})")
    version = data.get("project", {}).get("version")
    entries = re.findall(r"^## \[?(\d+\.\d+\.\d+)", (pkg / "CHANGELOG.md").read_text("utf-8"), re.M)
    if not entries or entries[0] != version:
        problems.append(
            f"{pkg / 'CHANGELOG.md'}: newest '## <version>' entry {entries[:1]} != {version!r}"
        )
    if not list((pkg / "tests").glob("test_*.py")):
        problems.append(f"{pkg / 'tests'}: no test_*.py files")
    marks_reference = any(
        "mark.reference" in f.read_text(encoding="utf-8") for f in (pkg / "tests").rglob("*.py")
    )
    if marks_reference and "reference" not in data["project"].get("optional-dependencies", {}):
        problems.append(
            f"{pyproject}: tests are marked reference but there is no [reference] extra with the "
            "libraries they compare against (nox -s reference installs it)"
        )
    problems += check_entry_points(pyproject, data, init)
    if "def build_cli(" not in (src / "cli.py").read_text(encoding="utf-8"):
        problems.append(f"{src / 'cli.py'}: must define build_cli() on the vendored _contract.CLI")
    problems += check_citations(pkg)
    return problems


def public_names(init: str) -> list[str]:
    """The names in ``__all__`` of an ``__init__.py`` (read statically: nothing is imported)."""
    for node in ast.parse(init).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
    return []


def check_entry_points(path: Path, data: dict, init: str) -> list[str]:
    """``[tool.icml25] api-entry-points``: the names a user starts from (the config, the run call, the
    optimizer or model classes), listed first on the package's API page; each must be in ``__all__``."""
    names = data.get("tool", {}).get("icml25", {}).get("api-entry-points")
    if not names or not isinstance(names, list):
        return [
            f"{path}: no [tool.icml25] api-entry-points (the config, run call and main classes "
            "that the API page lists first)"
        ]
    public = set(public_names(init))
    return [
        f"{path}: api-entry-points names {n!r}, which is not in __all__"
        for n in names
        if n not in public
    ]


SPEC_CITATION = re.compile(r"\bspec(?:'s)?\s*(?:§|section\s*\d)", re.I)
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".yaml", ".yml", ".cfg", ".rst"}


def check_citations(pkg: Path) -> list[str]:
    """Users do not have our specs: cite the paper (Eq. 4, Alg. 1, App. B.2), never "spec §"."""
    problems = []
    for path in sorted(pkg.rglob("*")):
        if path.suffix not in TEXT_SUFFIXES or not path.is_file() or ".nox" in path.parts:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SPEC_CITATION.search(line):
                problems.append(
                    f"{path}:{number}: cites the spec ({line.strip()[:60]!r}); cite the paper's "
                    "equation, algorithm or appendix instead"
                )
    return problems


def check_meta() -> list[str]:
    """The root package table and release-please files must list what packages/ holds."""
    sys.path.insert(0, str(ROOT / "tools"))
    from sync_meta import rendered

    try:
        files = rendered()
    except ValueError as err:  # a pyproject without the shared-markers block
        return [f"pyproject.toml: {err}"]
    stale = [p for p, text in files.items() if not p.is_file() or p.read_text("utf-8") != text]
    return [f"{p.relative_to(ROOT)} is stale: run python tools/sync_meta.py" for p in stale]


def main(argv: list[str]) -> int:
    packages = [Path(a).resolve() for a in argv] or sorted(
        p.parent for p in ROOT.glob("packages/*/pyproject.toml")
    )
    meta = check_meta()
    for problem in meta:
        print(problem)
    failed = bool(meta)
    for pkg in packages:
        problems = check_package(pkg)
        for problem in problems:
            print(problem)
        if not problems:
            print(f"ok: {pkg.name}")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
