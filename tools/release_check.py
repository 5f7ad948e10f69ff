"""Do a release's names agree? Tag, pyproject version, newest CHANGELOG heading, release-please manifest.

``python tools/release_check.py [<dist>-v<version>]`` prints every disagreement and exits 1 if there is
one (``nox -s release_check`` runs it, then builds and ``twine check``s every package). With a tag, the
tag must name a package of ``packages/`` at its pyproject version.
"""

from __future__ import annotations

import json
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def version(pkg: Path) -> str:
    return tomllib.loads((pkg / "pyproject.toml").read_text("utf-8"))["project"]["version"]


def changelog_version(pkg: Path) -> str | None:
    """The newest ``## <version>`` (or ``## [<version>]``) heading of the package's CHANGELOG."""
    found = re.findall(r"^## \[?(\d+\.\d+\.\d+)", (pkg / "CHANGELOG.md").read_text("utf-8"), re.M)
    return found[0] if found else None


def split_tag(tag: str) -> tuple[str, str]:
    """``fedgmt-v0.3.0`` -> ``("fedgmt", "0.3.0")``; ValueError when it is not ``<dist>-v<version>``."""
    match = re.fullmatch(r"([a-z0-9][a-z0-9-]*)-v(\d+\.\d+\.\d+(?:[-.\w]*)?)", tag)
    if not match:
        raise ValueError(f"tag {tag!r} is not <dist>-v<version>")
    return match.group(1), match.group(2)


def problems(root: Path = ROOT, tag: str = "") -> list[str]:
    packages = {p.parent.name: p.parent for p in sorted(root.glob("packages/*/pyproject.toml"))}
    manifest = json.loads((root / ".release-please-manifest.json").read_text("utf-8"))
    out = []
    if tag:
        try:
            dist, tagged = split_tag(tag)
        except ValueError as err:
            return [str(err)]
        if dist not in packages:
            out.append(f"tag {tag}: no package {dist!r} (packages: {', '.join(packages)})")
        elif version(packages[dist]) != tagged:
            out.append(f"tag {tag}: {dist}'s pyproject says {version(packages[dist])}")
    for dist, pkg in packages.items():
        v = version(pkg)
        if manifest.get(f"packages/{dist}") != v:
            out.append(
                f"{dist}: release-please manifest {manifest.get(f'packages/{dist}')}, pyproject {v}"
            )
        if changelog_version(pkg) != v:
            out.append(f"{dist}: newest CHANGELOG heading {changelog_version(pkg)}, pyproject {v}")
    extra = sorted(set(manifest) - {f"packages/{d}" for d in packages})
    out += [f"release-please manifest lists {p}, which has no package" for p in extra]
    return out


def main(argv: list[str]) -> int:
    found = problems(ROOT, argv[0] if argv else "")
    for problem in found:
        print(problem)
    if not found:
        print("release names agree: tag, versions, CHANGELOG headings, release-please manifest")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
