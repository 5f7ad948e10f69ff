"""Generate the per-package pages of the docs site.

For each ``packages/<dist>/README.md``: ``docs/packages/<dist>.md`` (front matter dropped; relative images
copied next to the page, other relative links pointed at the repository) and ``docs/api/<dist>.rst``
(autodoc of the package's public API, i.e. its ``__all__``: first the entry points named in
``[tool.icml25] api-entry-points``, then everything else). Result plots in ``benchmarks/results/*.png``
that the README does not show are appended under "Result plots". Both folders are rebuilt from scratch.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REPO_URL = "https://github.com/icml25-methods/icml25-methods"
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def strip_front_matter(text: str) -> str:
    return re.sub(r"\A---\n.*?\n---\n", "", text, count=1, flags=re.S)


def rewrite_links(text: str, pkg: Path, assets: Path) -> str:
    """Copy relative images into ``assets``; point other relative links at the repository."""

    def fix(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        if re.match(r"^[a-z]+:|^#|^/", target):
            return match.group(0)
        source = (pkg / target).resolve()
        if bang and source.is_file():
            dest = assets / target
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
            return f"{bang}[{label}]({assets.name}/{target})"
        rel = source.relative_to(ROOT) if source.is_relative_to(ROOT) else Path(target)
        return f"{bang}[{label}]({REPO_URL}/blob/main/{rel.as_posix()})"

    return LINK.sub(fix, text)


def result_plots(readme: str, pkg: Path) -> str:
    """A "Result plots" section with every ``benchmarks/results/*.png`` the README does not show itself."""
    shown = {Path(m.group(3)).as_posix() for m in LINK.finditer(readme) if m.group(1)}
    plots = [
        p.relative_to(pkg).as_posix()
        for p in sorted((pkg / "benchmarks" / "results").glob("*.png"))
        if p.relative_to(pkg).as_posix() not in shown
    ]
    if not plots:
        return ""
    lines = [
        "",
        "## Result plots",
        "",
        "Figures written by the benchmark scripts (`benchmarks/`).",
        "",
    ]
    for plot in plots:
        label = Path(plot).stem.replace("_", " ")
        lines += [f"![{label}]({plot})", ""]
    return "\n".join(lines)


def entry_points(pkg: Path) -> list[str]:
    """``[tool.icml25] api-entry-points`` of the package (tools/check_structure.py requires it)."""
    data = tomllib.loads((pkg / "pyproject.toml").read_text(encoding="utf-8"))
    return list(data.get("tool", {}).get("icml25", {}).get("api-entry-points", []))


def _directive(name: str) -> str:
    """``CamelCase`` is a class, ``ALL_CAPS`` a constant, anything else a function."""
    if name.isupper():
        return "autodata"
    return "autoclass" if name[:1].isupper() else "autofunction"


def api_page(dist: str, entries: list[str]) -> str:
    """The entry points first (in the order given), then everything else the package exports."""
    name = dist.replace("-", "_")
    title = f"{dist} API"
    lines = [title, "=" * len(title), "", f".. currentmodule:: {name}", ""]
    if entries:
        lines += ["Entry points", "------------", ""]
        lines += [
            "Where to start: the configuration, the call that runs the method, its main classes.",
            "",
        ]
        for entry in entries:
            lines.append(f".. {_directive(entry)}:: {entry}")
            if _directive(entry) == "autoclass":
                lines += ["   :members:", "   :show-inheritance:"]
            lines.append("")
        lines += ["Everything else", "---------------", ""]
    lines += [
        f".. automodule:: {name}",
        "   :members:",
        "   :imported-members:",
        "   :show-inheritance:",
    ]
    if entries:
        lines.append(f"   :exclude-members: {', '.join(entries)}")
    return "\n".join(lines) + "\n"


def main() -> int:
    for sub in ("packages", "api"):
        shutil.rmtree(DOCS / sub, ignore_errors=True)
        (DOCS / sub).mkdir(parents=True)
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        pkg = pyproject.parent
        readme = strip_front_matter((pkg / "README.md").read_text(encoding="utf-8"))
        assets = DOCS / "packages" / f"{pkg.name}_assets"
        page = rewrite_links(readme + result_plots(readme, pkg), pkg, assets)
        (DOCS / "packages" / f"{pkg.name}.md").write_text(page, encoding="utf-8")
        api = api_page(pkg.name, entry_points(pkg))
        (DOCS / "api" / f"{pkg.name}.rst").write_text(api, encoding="utf-8")
        print(f"docs: {pkg.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
