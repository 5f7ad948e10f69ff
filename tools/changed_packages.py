"""Print, as a JSON list, the packages a change touches (used by the GitHub workflow's matrix).

``python tools/changed_packages.py BASE_REF`` compares ``BASE_REF...HEAD``. A change to any file outside
``packages/`` that the shared matrix depends on (noxfile, tools, CI, ruff config) selects every package.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ("noxfile.py", "ruff.toml", "tools/", ".github/", ".ci/")


def all_packages() -> list[str]:
    return sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml"))


def select(changed: list[str], packages: list[str]) -> list[str]:
    """Packages touched by ``changed`` (repo-relative paths); all of them if a shared file changed."""
    if any(path == s or path.startswith(s) for path in changed for s in SHARED if s):
        return packages
    touched = {p.split("/")[1] for p in changed if p.startswith("packages/") and p.count("/") >= 2}
    return [p for p in packages if p in touched]


def main(argv: list[str]) -> int:
    packages = all_packages()
    if not argv:
        print(json.dumps(packages))
        return 0
    diff = subprocess.run(
        ["git", "diff", "--name-only", f"{argv[0]}...HEAD"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    print(json.dumps(select(diff.stdout.split(), packages)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
