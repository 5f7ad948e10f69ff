"""Print, as a JSON list, the packages a change touches (ci.yml's matrix; ``.ci/run`` with ``CI_BASE``).

``python tools/changed_packages.py BASE_REF`` compares ``BASE_REF...HEAD``; with no argument it prints
every package (what ``.ci/run`` checks by default, and the nightly tier). A change to any file outside
``packages/`` that the shared matrix depends on (noxfile, tools, CI, ruff config) selects every package; a
change to the docs or the root README alone selects none (their gates run anyway).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ("noxfile.py", "ruff.toml", "tools/", ".github/", ".ci/")


def all_packages(root: Path = ROOT) -> list[str]:
    return sorted(p.parent.name for p in root.glob("packages/*/pyproject.toml"))


def select(changed: list[str], packages: list[str]) -> list[str]:
    """Packages touched by ``changed`` (repo-relative paths); all of them if a shared file changed."""
    if any(path == s or path.startswith(s) for path in changed for s in SHARED if s):
        return packages
    touched = {p.split("/")[1] for p in changed if p.startswith("packages/") and p.count("/") >= 2}
    return [p for p in packages if p in touched]


def changed_files(base: str, root: Path = ROOT) -> list[str]:
    """Repo-relative paths that differ between ``base`` and HEAD (``git diff base...HEAD``)."""
    diff = subprocess.run(
        ["git", "diff", "--name-only", f"{base}...HEAD"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return diff.stdout.split()


def main(argv: list[str], root: Path = ROOT) -> int:
    packages = all_packages(root)
    if not argv:
        print(json.dumps(packages))
        return 0
    print(json.dumps(select(changed_files(argv[0], root), packages)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
