"""Regenerate the files that list every package: the root README's and the docs index's package tables, release-please's
config + manifest (one component per package, tags ``<dist>-v<version>``), and each package's vendored
copy of the CLI contract (``tools/templates/_contract.py`` → ``packages/<dist>/src/<import>/_contract.py``),
and the pytest markers every package registers (``MARKERS`` below, between the two marker comments of
each package's ``[tool.pytest.ini_options] markers``).

``python tools/sync_meta.py`` rewrites them; ``python tools/sync_meta.py --check`` exits 1 if any is stale
(the ``lint`` session runs the check through tools/check_structure.py).
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
CONTRACT = ROOT / "tools" / "templates" / "_contract.py"
START, END = "<!-- packages:start -->", "<!-- packages:end -->"

# The test markers, registered once here and written into every package's pyproject.toml. The tiers
# (noxfile.py) select on them: the per-change tier runs `-m "not slow"`, the nightly tier runs `slow` and
# `reference` (where a skip fails). A package may register markers of its own after these.
MARKERS = (
    "slow: longer than ~10 s; deselected per change, run nightly by `nox -s slow`",
    "reference: equivalence with a reference implementation from the [reference] extra; "
    "`nox -s reference` runs these and fails if any skips",
    "dataset: reads the shared data folder ($ICML25_DATA or ../shared/data); skips with a reason "
    "when it is absent",
)
MARKERS_START = "    # shared markers: written by tools/sync_meta.py (edit MARKERS there)"
MARKERS_END = "    # end of shared markers"

# The whole family (name, paper); a row is "planned" until packages/<dist>/ exists.
FAMILY = [
    ("sassha-optim", "SASSHA: sharpness-aware adaptive second-order optimizer"),
    ("parq-optim", "PARQ: piecewise-affine regularized quantization (QAT)"),
    ("fedgmt", "FedGMT: federated learning with global-model-trajectory sharpness (on Flower)"),
    ("bpr-topk", "Decision-aware training of forecasters for top-K site selection (BPR)"),
    ("phynfp", "PhyNFP: topology-aware, physics-guided flux prediction on directed graphs"),
    ("curmgae", "Cur-MGAE: masked graph autoencoder with a structure-aware curriculum"),
    ("tar-gnn", "TAR: topology-aware dynamic reweighting for graph distribution shift"),
    ("sorbet-snn", "Sorbet: neuromorphic-hardware-compatible spiking language model"),
    ("safer-dtr", "SAFER: calibrated risk-aware multimodal treatment recommendation"),
    ("cft-calibration", "Restoring calibration of aligned LLMs (CFT / EM-ECE regularized RCFT)"),
    ("rsd-skills", "RSD: regret-aware unsupervised skill discovery"),
]


def versions() -> dict[str, str]:
    out = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        out[pyproject.parent.name] = project["version"]
    return out


def package_table(found: dict[str, str]) -> str:
    rows = ["| package (PyPI) | paper | status | CLI |", "|---|---|---|---|"]
    for dist, paper in FAMILY:
        if dist in found:
            status = f"{found[dist]} — [README](packages/{dist}/README.md)"
            rows.append(f"| `{dist}` | {paper} | {status} | `{dist} --help` |")
        else:
            rows.append(f"| `{dist}` | {paper} | planned | — |")
    return "\n".join(rows)


def front_matter(dist: str) -> dict[str, str]:
    """Top-level ``key: value`` pairs of a package README's front matter (quotes stripped)."""
    path = ROOT / "packages" / dist / "README.md"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    match = re.match(r"\A---\n(.*?)\n---\n", text, flags=re.S)
    pairs = (
        re.match(r"^([A-Za-z_][\w-]*):\s*(.*)$", x)
        for x in (match.group(1) if match else "").split("\n")
    )
    return {m.group(1): m.group(2).strip().strip('"') for m in pairs if m}


def paper_link(dist: str, paper: str) -> str:
    """``paper`` linked to its arXiv abstract, or to its OpenReview forum when it has no arXiv id."""
    meta = front_matter(dist)
    arxiv = meta.get("arxiv", "")
    if re.fullmatch(r"[\d.v]+", arxiv):
        return f"[{paper}](https://arxiv.org/abs/{arxiv})"
    forum = re.search(r"OpenReview\s+([A-Za-z0-9_-]{8,})", " ".join(meta.values()))
    return f"[{paper}](https://openreview.net/forum?id={forum.group(1)})" if forum else paper


def what_it_does(dist: str) -> str:
    """One line from the package's ``description`` without the method's name and citation:
    "X (ICML 2025): does Y" and "X: does Y" become "Does Y"."""
    pyproject = ROOT / "packages" / dist / "pyproject.toml"
    text = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["description"]
    text = re.sub(r"^[^:(]*\(ICML 2025\):\s*", "", text)
    text = re.sub(r"\s*\([^()]*ICML 2025\)", "", text)
    # "PARQ: piecewise-affine ..." -> "piecewise-affine ..."
    text = re.sub(r"^[\w-]{1,12}:\s+", "", text)
    return text[:1].upper() + text[1:]


def docs_table(found: dict[str, str]) -> str:
    """The docs index's table (each package's page, paper link, what it does, version, CLI) and the
    sidebar's two toctrees, in the same (FAMILY) order."""
    rows = ["| package | paper | what it does | version | CLI |", "|---|---|---|---|---|"]
    for dist, paper in FAMILY:
        if dist not in found:
            rows.append(f"| `{dist}` | {paper} | | planned | — |")
            continue
        rows.append(
            f"| [{dist}](packages/{dist}.md) | {paper_link(dist, paper)} | {what_it_does(dist)} "
            f"| {found[dist]} | `{dist} --help` |"
        )
    present = [dist for dist, _ in FAMILY if dist in found]
    for caption, folder in (("Packages", "packages"), ("API", "api")):
        rows += ["", "```{toctree}", f":caption: {caption}", ":maxdepth: 1", ":hidden:", ""]
        rows += [f"{folder}/{dist}" for dist in present] + ["```"]
    return "\n".join(rows)


def _splice(text: str, table: str) -> str:
    block = f"{START}\n{table}\n{END}"
    return re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)


def rendered() -> dict[Path, str]:
    found = versions()
    readme_path = ROOT / "README.md"
    readme = _splice(readme_path.read_text(encoding="utf-8"), package_table(found))
    index_path = ROOT / "docs" / "index.md"
    index = _splice(index_path.read_text(encoding="utf-8"), docs_table(found))
    config = {
        "$schema": "https://raw.githubusercontent.com/googleapis/release-please/main/schemas/config.json",
        "release-type": "python",
        "include-component-in-tag": True,
        "tag-separator": "-",
        "separate-pull-requests": True,
        "packages": {
            f"packages/{d}": {"component": d, "package-name": d, "changelog-path": "CHANGELOG.md"}
            for d in found
        },
    }
    manifest = {f"packages/{d}": v for d, v in found.items()}
    files = {
        readme_path: readme,
        index_path: index,
        ROOT / "release-please-config.json": json.dumps(config, indent=2) + "\n",
        ROOT / ".release-please-manifest.json": json.dumps(manifest, indent=2) + "\n",
    }
    contract = CONTRACT.read_text(encoding="utf-8")
    for dist in found:
        files[ROOT / "packages" / dist / "src" / dist.replace("-", "_") / "_contract.py"] = contract
        pyproject = ROOT / "packages" / dist / "pyproject.toml"
        files[pyproject] = with_markers(pyproject.read_text(encoding="utf-8"))
    return files


def markers_block() -> str:
    lines = [MARKERS_START, *(f"    {json.dumps(m)}," for m in MARKERS), MARKERS_END]
    return "\n".join(lines)


def with_markers(pyproject: str) -> str:
    """``pyproject`` with its shared-markers block rewritten (ValueError when it has none)."""
    pattern = re.escape(MARKERS_START) + r".*?" + re.escape(MARKERS_END)
    if not re.search(pattern, pyproject, flags=re.S):
        raise ValueError(
            "no shared-markers block in [tool.pytest.ini_options] markers: add the lines\n"
            f"{MARKERS_START}\n{MARKERS_END}"
        )
    return re.sub(pattern, lambda _: markers_block(), pyproject, flags=re.S)


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def main(argv: list[str]) -> int:
    stale = [p for p, text in rendered().items() if _read(p) != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run python tools/sync_meta.py")
        return 1 if stale else 0
    for path, text in rendered().items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
