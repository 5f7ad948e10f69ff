"""Tests of the dev-only repository tools (run by ``nox -s tools``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))

import changed_packages  # noqa: E402
import check_structure  # noqa: E402
import ci_summary  # noqa: E402
import gen_docs  # noqa: E402
import release_check  # noqa: E402
import sync_meta  # noqa: E402

PACKAGES = ["bpr-topk", "sassha-optim"]

README = """---
title: t
paper: p
arxiv: "1"
venue: ICML 2025
tags: [a]
dataset: [b]
---
# pkg

One paragraph.

## Install
## Quickstart
## CLI
## What is implemented
## Paper equations → code
## Deviations
## Datasets
## Results
<!-- results:start -->
<!-- results:end -->
## Citation
```bibtex
@inproceedings{x, title={t}}
```
"""

PYPROJECT = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"
[project]
name = "good-pkg"
version = "0.2.0"
requires-python = ">=3.10"
dependencies = ["torch>=2.2", "numpy"]
[project.optional-dependencies]
test = ["pytest"]
cli = []
[project.scripts]
good-pkg = "good_pkg.cli:main"
[tool.icml25]
api-entry-points = ["Config", "run"]
"""


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (["packages/bpr-topk/src/bpr_topk/core.py"], ["bpr-topk"]),
        (["packages/bpr-topk/README.md", "packages/sassha-optim/x.py"], PACKAGES),
        (["noxfile.py"], PACKAGES),
        (["tools/gen_docs.py"], PACKAGES),
        ([".github/workflows/ci.yml"], PACKAGES),
        (["docs/index.md"], []),
        (["README.md"], []),
        ([".ci/run"], PACKAGES),
        (["ruff.toml"], PACKAGES),
        (["packages/sassha-optim/benchmarks/results/x.json"], ["sassha-optim"]),
        (["packages/bpr-topk"], []),
        (["packages/removed-pkg/pyproject.toml"], []),
        ([], []),
    ],
)
def test_changed_packages_select(changed: list[str], expected: list[str]) -> None:
    assert changed_packages.select(changed, PACKAGES) == expected


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return done.stdout.decode().strip()


def test_changed_packages_main_against_a_git_base(tmp_path: Path, capsys) -> None:
    for name in ("aa", "bb"):
        (tmp_path / "packages" / name).mkdir(parents=True)
        (tmp_path / "packages" / name / "pyproject.toml").write_text("[project]\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    base = git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "packages" / "bb" / "x.py").write_text("x = 1\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "change bb")

    def selected(*argv: str) -> list[str]:
        assert changed_packages.main(list(argv), root=tmp_path) == 0
        return json.loads(capsys.readouterr().out)

    assert selected(base) == ["bb"]
    assert selected() == ["aa", "bb"]  # no base: every package (the .ci/run default)
    (tmp_path / "noxfile.py").write_text("")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "shared file")
    assert selected(base) == ["aa", "bb"]


def test_shared_markers_are_written_into_every_pyproject() -> None:
    block = sync_meta.markers_block()
    for marker in ("slow", "reference", "dataset"):
        assert f'"{marker}: ' in block
    pyproject = f"[tool.pytest.ini_options]\nmarkers = [\n{sync_meta.MARKERS_START}\n"
    pyproject += f'    "old: stale",\n{sync_meta.MARKERS_END}\n    "own: kept",\n]\n'
    rewritten = sync_meta.with_markers(pyproject)
    assert block in rewritten and '"own: kept"' in rewritten and "old: stale" not in rewritten
    with pytest.raises(ValueError, match="shared-markers block"):
        sync_meta.with_markers("[tool.pytest.ini_options]\nmarkers = []\n")
    for path in sorted(TOOLS.parent.glob("packages/*/pyproject.toml")):
        assert block in path.read_text(encoding="utf-8"), path


def test_ci_summary_orders_the_costliest_cells_first(capsys) -> None:
    assert ci_summary.order(["bpr-topk", "fedgmt", "new-pkg"]) == ["new-pkg", "fedgmt", "bpr-topk"]
    assert ci_summary.main(["--order", "bpr-topk", "fedgmt"]) == 0
    assert capsys.readouterr().out.split() == ["fedgmt", "bpr-topk"]


def test_ci_summary_prints_stage_times(tmp_path: Path, capsys) -> None:
    (tmp_path / "aa.json").write_text(json.dumps({"build": 3, "tests": 10, "conformance": 5}))
    (tmp_path / "bb.json").write_text(json.dumps({"build": 2, "tests": 20, "typecheck": 4}))
    assert ci_summary.main(["--timings", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        "== build: 5 s (sum over 2 packages)",
        "== tests: 30 s (sum over 2 packages)",
        "== typecheck: 4 s (sum over 2 packages)",
        "== conformance: 5 s (sum over 2 packages)",
    ]


def make_package(root: Path) -> Path:
    pkg = root / "good-pkg"
    src = pkg / "src" / "good_pkg"
    src.mkdir(parents=True)
    (pkg / "tests").mkdir()
    (pkg / "benchmarks").mkdir()
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "README.md").write_text(README)
    (pkg / "CHANGELOG.md").write_text("# Changelog\n\n## 0.2.0 (2026-12-02)\n\n- x\n\n## 0.1.0\n")
    (src / "__init__.py").write_text(
        '__all__ = ["Config", "run", "helper"]\n__version__ = version("good-pkg")\n'
    )
    (src / "py.typed").write_text("")
    (src / "cli.py").write_text("def build_cli(): ...\n\n\ndef main(): return 0\n")
    (pkg / "tests" / "test_x.py").write_text("def test(): pass\n")
    (pkg / "benchmarks" / "run.py").write_text("")
    return pkg


def test_check_structure_accepts_a_complete_package(tmp_path: Path) -> None:
    assert check_structure.check_package(make_package(tmp_path)) == []


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: (p / "CHANGELOG.md").unlink(), "CHANGELOG.md: missing"),
        (lambda p: (p / "src/good_pkg/py.typed").unlink(), "py.typed: missing"),
        (lambda p: shutil.rmtree(p / "benchmarks"), "benchmarks: missing"),
        (
            lambda p: (p / "README.md").write_text(README.replace("## Deviations\n", "")),
            "missing section '## Deviations'",
        ),
        (
            lambda p: (p / "README.md").write_text(README.replace("venue: ICML 2025\n", "")),
            "front matter lacks 'venue'",
        ),
        (
            lambda p: (p / "README.md").write_text(README.split("---\n", 2)[2]),
            "no front matter",
        ),
        (
            lambda p: (p / "README.md").write_text(README.replace("<!-- results:end -->", "")),
            "results table markers",
        ),
        (
            lambda p: (p / "pyproject.toml").write_text(PYPROJECT.replace(">=2.2", "==2.2")),
            "torch pinned",
        ),
        (
            lambda p: (p / "pyproject.toml").write_text(PYPROJECT.replace('"0.2.0"', '"0.3.0"')),
            "newest '## <version>' entry",
        ),
        (
            lambda p: (p / "pyproject.toml").write_text(PYPROJECT.replace("good_pkg.cli", "x.cli")),
            "[project.scripts]",
        ),
        (
            lambda p: (p / "pyproject.toml").write_text(PYPROJECT.replace('test = ["pytest"]', "")),
            "no [test] extra",
        ),
        (
            lambda p: (p / "pyproject.toml").write_text(PYPROJECT.replace("cli = []", "")),
            "no [cli] extra",
        ),
        (
            lambda p: (p / "src/good_pkg/cli.py").write_text("def main(): return 0\n"),
            "must define build_cli()",
        ),
        (
            lambda p: (p / "tests/test_ref.py").write_text("@pytest.mark.reference\ndef t(): 0\n"),
            "no [reference] extra",
        ),
        (
            lambda p: (p / "pyproject.toml").write_text(PYPROJECT.split("[tool.icml25]")[0]),
            "no [tool.icml25] api-entry-points",
        ),
        (
            lambda p: (p / "pyproject.toml").write_text(PYPROJECT.replace('"run"]', '"fit"]')),
            "'fit', which is not in __all__",
        ),
        (
            lambda p: (p / "src/good_pkg/core.py").write_text('"""Eq. 3 (spec §4.2)."""\n'),
            "cites the spec",
        ),
        (
            lambda p: (p / "README.md").write_text(README + "\nSee the spec's section 3.\n"),
            "cites the spec",
        ),
    ],
)
def test_check_structure_names_each_problem(tmp_path: Path, mutate, message: str) -> None:
    pkg = make_package(tmp_path)
    mutate(pkg)
    problems = check_structure.check_package(pkg)
    assert any(message in p for p in problems), problems


def test_ci_summary_sums_reports_and_flags_missing(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.xml").write_text(
        '<testsuites><testsuite tests="5" failures="0" errors="0" skipped="1"/></testsuites>'
    )
    (tmp_path / "b.xml").write_text('<testsuite tests="3" failures="1" errors="1" skipped="0"/>')
    assert ci_summary.counts(tmp_path / "b.xml") == (1, 2, 0)
    assert ci_summary.main([str(tmp_path), "a", "b"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "5 passed, 2 failed, 1 skipped"
    (tmp_path / "b.xml").unlink()
    assert ci_summary.main([str(tmp_path), "a"]) == 0
    assert ci_summary.main([str(tmp_path), "a", "b"]) == 1


def test_gen_docs_rewrites_relative_links(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "benchmarks" / "results").mkdir(parents=True)
    (pkg / "benchmarks" / "results" / "plot.png").write_bytes(b"png")
    assets = tmp_path / "docs" / "pkg_assets"
    text = "![acc](benchmarks/results/plot.png) [run](benchmarks/run.py) [web](https://x.org)"
    out = gen_docs.rewrite_links(text, pkg, assets)
    assert "![acc](pkg_assets/benchmarks/results/plot.png)" in out
    assert (assets / "benchmarks" / "results" / "plot.png").read_bytes() == b"png"
    assert f"[run]({gen_docs.REPO_URL}/blob/main/benchmarks/run.py)" in out
    assert "[web](https://x.org)" in out
    assert gen_docs.strip_front_matter(README).startswith("# pkg")


def test_gen_docs_appends_result_plots_the_readme_does_not_show(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "benchmarks" / "results").mkdir(parents=True)
    for name in ("shown.png", "hidden_curve.png"):
        (pkg / "benchmarks" / "results" / name).write_bytes(b"png")
    readme = "# pkg\n\n![shown](benchmarks/results/shown.png)\n"
    extra = gen_docs.result_plots(readme, pkg)
    assert "![hidden curve](benchmarks/results/hidden_curve.png)" in extra
    assert "shown.png" not in extra
    assert gen_docs.result_plots(readme + extra, pkg) == ""


def test_gen_docs_api_page_lists_the_entry_points_first(tmp_path: Path) -> None:
    page = gen_docs.api_page("good-pkg", ["Config", "run", "METHODS"])
    lines = page.splitlines()
    assert lines[:2] == ["good-pkg API", "============"]
    start = lines.index("Entry points")
    rest = lines.index("Everything else")
    assert (
        start < lines.index(".. autoclass:: Config") < lines.index(".. autofunction:: run") < rest
    )
    assert lines.index(".. autodata:: METHODS") < rest < lines.index(".. automodule:: good_pkg")
    assert "   :exclude-members: Config, run, METHODS" in lines
    bare = gen_docs.api_page("good-pkg", [])
    assert "Entry points" not in bare and ":exclude-members:" not in bare
    assert gen_docs.entry_points(make_package(tmp_path)) == ["Config", "run"]


def test_docs_index_links_every_paper_and_orders_the_sidebar_like_the_table() -> None:
    found = sync_meta.versions()
    table = sync_meta.docs_table(found)
    rows = [r for r in table.splitlines() if r.startswith("| [")]
    order = [r.split("](")[0][3:] for r in rows]
    assert order == [d for d, _ in sync_meta.FAMILY if d in found]
    for row in rows:
        paper, what = row.split(" | ")[1:3]
        assert paper.startswith("[") and ("arxiv.org/abs/" in paper or "openreview.net" in paper), (
            row
        )
        assert what and "ICML 2025" not in what, row
    toc = [line for line in table.splitlines() if line.startswith("packages/")]
    assert toc == [f"packages/{d}" for d in order]
    assert [line for line in table.splitlines() if line.startswith("api/")] == [
        f"api/{d}" for d in order
    ]


def test_what_it_does_drops_the_name_and_citation(monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "packages" / "x").mkdir(parents=True)
    monkeypatch.setattr(sync_meta, "ROOT", tmp_path)
    for description, expected in [
        ("Sassha (ICML 2025): sharpness-aware optimizer", "Sharpness-aware optimizer"),
        ("PARQ: piecewise-affine QAT", "Piecewise-affine QAT"),
        ("Top-K selection (Heuton et al., ICML 2025)", "Top-K selection"),
    ]:
        (tmp_path / "packages" / "x" / "pyproject.toml").write_text(
            f'[project]\ndescription = "{description}"\n'
        )
        assert sync_meta.what_it_does("x") == expected


def release_tree(root: Path, version: str = "0.2.0", heading: str = "0.2.0") -> Path:
    pkg = root / "packages" / "good-pkg"
    pkg.mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(f'[project]\nname = "good-pkg"\nversion = "{version}"\n')
    (pkg / "CHANGELOG.md").write_text(f"# Changelog\n\n## {heading} (2026-12-03)\n\n## 0.1.0\n")
    (root / ".release-please-manifest.json").write_text('{"packages/good-pkg": "0.2.0"}')
    return root


@pytest.mark.parametrize(
    ("version", "heading", "tag", "message"),
    [
        ("0.2.0", "0.2.0", "", None),
        ("0.2.0", "0.2.0", "good-pkg-v0.2.0", None),
        ("0.2.0", "0.2.0", "good-pkg-v0.3.0", "pyproject says 0.2.0"),
        ("0.2.0", "0.2.0", "other-v0.2.0", "no package 'other'"),
        ("0.2.0", "0.2.0", "good-pkg-0.2.0", "not <dist>-v<version>"),
        ("0.2.0", "0.1.9", "", "newest CHANGELOG heading 0.1.9"),
        ("0.3.0", "0.3.0", "", "manifest 0.2.0, pyproject 0.3.0"),
    ],
)
def test_release_check_names_each_disagreement(tmp_path, version, heading, tag, message) -> None:
    found = release_check.problems(release_tree(tmp_path, version, heading), tag)
    if message is None:
        assert found == []
    else:
        assert any(message in p for p in found), found


def test_release_check_agrees_on_this_repository() -> None:
    assert release_check.problems() == []
