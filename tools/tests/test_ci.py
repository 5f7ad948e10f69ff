"""The root README, .ci/run and the GitHub workflows name the same gates (what CI runs is what we say)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
WORKFLOW = (ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
GATES = (
    "tools",
    "tests",
    "conformance",
    "lint",
    "typecheck",
    "build",
    "together",
    "docs",
    "docs_check",
)


def test_ci_run_calls_the_readme_test_command() -> None:
    assert "nox -s tests" in README
    assert re.search(r"^step tests -s tests$", CI_RUN, flags=re.M)


def workflow_sessions() -> set[str]:
    """nox sessions the workflow runs: ``-s a b`` and ``"name(package='...')"`` arguments."""
    found = set(re.findall(r"\"(\w+)\(package=", WORKFLOW))
    for match in re.finditer(r"-s ((?:\w+ ?)+)", WORKFLOW):
        found.update(match.group(1).split())
    return found


def test_every_gate_is_in_readme_ci_run_and_workflow() -> None:
    sessions_table = README[README.index("| session |") :]
    in_workflow = workflow_sessions()
    for gate in GATES:
        assert f"`{gate}`" in sessions_table, f"README's sessions table lacks {gate}"
        assert re.search(rf"^step {gate} -s {gate}$", CI_RUN, flags=re.M), f".ci/run lacks {gate}"
        assert gate in in_workflow, f"ci.yml does not run {gate} (runs {sorted(in_workflow)})"


def test_release_please_workflow_matches_its_config() -> None:
    workflow = (ROOT / ".github" / "workflows" / "release-please.yml").read_text(encoding="utf-8")
    config = json.loads((ROOT / "release-please-config.json").read_text(encoding="utf-8"))
    manifest = json.loads((ROOT / ".release-please-manifest.json").read_text(encoding="utf-8"))
    assert "config-file: release-please-config.json" in workflow
    assert "manifest-file: .release-please-manifest.json" in workflow
    assert set(config["packages"]) == set(manifest)
    assert config["tag-separator"] == "-" and config["include-component-in-tag"]
    release = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    assert '"*-v*"' in release  # the tags release-please makes: <dist>-v<version>
