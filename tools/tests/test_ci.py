"""What CI runs is what we say: the root README, ``.ci/run``, the noxfile's tiers and the GitHub workflows
name the same sessions, and every nox session a workflow job calls exists."""

from __future__ import annotations

import json
import re
import runpy
import shlex
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
nox_registry = pytest.importorskip("nox.registry")

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONS = ROOT / ".github" / "actions"


@pytest.fixture(scope="module")
def sessions() -> dict[str, list[str]]:
    """{session name: tags} as the noxfile registers them."""
    runpy.run_path(str(ROOT / "noxfile.py"))
    return {name: list(getattr(f, "tags", []) or []) for name, f in nox_registry.get().items()}


def tier(sessions: dict[str, list[str]], tag: str) -> set[str]:
    return {name for name, tags in sessions.items() if tag in tags}


def yaml_files() -> list[Path]:
    return sorted([*WORKFLOWS.glob("*.yml"), *ACTIONS.glob("*/action.yml")])


def runs(path: Path) -> list[str]:
    """The ``run:`` scripts of every step of a workflow or composite action (YAML-folded)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    jobs = [doc["runs"]] if "runs" in doc else list(doc["jobs"].values())
    return [step["run"] for job in jobs for step in job.get("steps", []) if "run" in step]


def nox_calls(script: str) -> set[str]:
    """Session names in the ``nox ... -s a "b(package='x')" [-- args]`` commands of a shell script."""
    found: set[str] = set()
    for line in script.replace("\\\n", " ").splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = re.search(r"\bnox\b.*?\s-s\s+(.*)", line)
        if not match:
            continue
        for token in shlex.split(match.group(1).split(" -- ")[0]):
            if token[:1] in "><|;&" or token[:2] == "2>" or token.endswith(";"):
                break  # the shell's, not nox's
            name = re.fullmatch(r"([a-z_]+)(?:\(package=.*\))?", token)
            if name:
                found.add(name.group(1))
    return found


def workflow_calls(path: Path) -> set[str]:
    return set().union(*(nox_calls(r) for r in runs(path)))


def ci_run_steps() -> set[str]:
    """Sessions .ci/run runs: its ``step NAME -s NAME`` lines, the ``job`` function's tests cell and the
    repository sessions it puts in the same pool (``repo_jobs``)."""
    pool = re.search(r'^repo_jobs="([\w ]+)"$', CI_RUN, flags=re.M)
    steps = set(re.findall(r"^step \w+ -s (\w+)", CI_RUN, flags=re.M)) | nox_calls(CI_RUN)
    return steps | set(pool.group(1).split() if pool else ())


def test_ci_run_calls_the_readme_test_command() -> None:
    assert "nox -s tests" in README
    # .ci/run runs `nox -s tests` cell by cell (two at a time): "tests(package='<p>')" for every package
    # tools/changed_packages.py selects, which is every package unless CI_BASE narrows it.
    assert "nox -s \"tests(package='$1')\"" in CI_RUN
    assert re.search(r"^packages=\$\(python3 tools/changed_packages.py", CI_RUN, flags=re.M)
    assert "xargs -P" in CI_RUN and "bash -c 'job" in CI_RUN


def test_ci_run_is_the_per_change_tier(sessions: dict[str, list[str]]) -> None:
    assert ci_run_steps() == tier(sessions, "change")


def test_the_readme_names_every_session_of_both_tiers(sessions: dict[str, list[str]]) -> None:
    table = README[README.index("| session |") :]
    for name in sessions:
        assert f"`{name}`" in table, f"README's sessions table lacks {name}"


def test_workflows_and_actions_are_valid_yaml_with_jobs_or_steps() -> None:
    assert yaml_files()
    for path in yaml_files():
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert isinstance(doc, dict), path
        if path.name == "action.yml":
            assert doc["runs"]["using"] == "composite" and doc["runs"]["steps"], path
            continue
        assert doc.get("jobs"), f"{path.name} has no jobs"
        # PyYAML reads the key `on` as True.
        assert "on" in doc or True in doc, f"{path.name} has no trigger"
        for name, job in doc["jobs"].items():
            assert "runs-on" in job or "uses" in job, f"{path.name}: job {name} runs nowhere"
            for step in job.get("steps", []):
                assert "uses" in step or "run" in step, f"{path.name}: {name} has an empty step"


def test_every_nox_session_a_job_calls_exists(sessions: dict[str, list[str]]) -> None:
    called: dict[str, set[str]] = {}
    for path in yaml_files():
        for session in workflow_calls(path):
            called.setdefault(session, set()).add(path.name)
    assert called, "no nox call found in the workflows"
    unknown = {s: sorted(files) for s, files in called.items() if s not in sessions}
    assert not unknown, f"workflows call sessions the noxfile lacks: {unknown}"


def test_ci_workflow_runs_the_per_change_tier(sessions: dict[str, list[str]]) -> None:
    ci = workflow_calls(WORKFLOWS / "ci.yml")
    assert ci == tier(sessions, "change")


def test_nightly_workflow_runs_the_nightly_tier_and_the_python_matrix(
    sessions: dict[str, list[str]],
) -> None:
    assert tier(sessions, "nightly") <= workflow_calls(WORKFLOWS / "nightly.yml")
    doc = yaml.safe_load((WORKFLOWS / "nightly.yml").read_text(encoding="utf-8"))
    assert "schedule" in doc[True]
    pythons = doc["jobs"]["matrix"]["strategy"]["matrix"]["python"]
    assert pythons == ["3.10", "3.11", "3.12", "3.13"]


def test_the_slow_marker_is_what_the_tiers_split_on() -> None:
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert 'UNIT = "not slow"' in noxfile
    assert re.search(r'_pytest\(session, package, "slow"', noxfile)
    assert re.search(r'_pytest\(session, package, "reference"', noxfile)


def test_release_publishes_from_release_please_outputs_after_the_gate() -> None:
    doc = yaml.safe_load((WORKFLOWS / "release-please.yml").read_text(encoding="utf-8"))
    jobs = doc["jobs"]
    outputs = jobs["release-please"]["outputs"]
    assert {"releases_created", "paths_released"} <= set(outputs)
    assert jobs["gate"]["needs"] == "release-please"
    assert "releases_created" in jobs["gate"]["if"]
    gate_steps = [s.get("uses", "") for s in jobs["gate"]["steps"]]
    assert "./.github/actions/release-gate" in gate_steps
    publish = jobs["publish"]
    assert set(publish["needs"]) == {"release-please", "gate"}
    assert publish["permissions"] == {"id-token": "write"}  # trusted publishing, no token
    assert any("pypi-publish" in s.get("uses", "") for s in publish["steps"])
    # No workflow waits for a tag push (release-please's tags trigger nothing).
    for path in WORKFLOWS.glob("*.yml"):
        on = yaml.safe_load(path.read_text(encoding="utf-8"))[True]
        assert not (isinstance(on, dict) and "tags" in (on.get("push") or {})), path.name
    gate = yaml.safe_load((ACTIONS / "release-gate" / "action.yml").read_text(encoding="utf-8"))
    runs = " ".join(s.get("run", "") for s in gate["runs"]["steps"])
    assert "release_check" in runs and "release_build" in runs and "tests(package=" in runs


def test_release_please_config_matches_the_manifest() -> None:
    config = json.loads((ROOT / "release-please-config.json").read_text(encoding="utf-8"))
    manifest = json.loads((ROOT / ".release-please-manifest.json").read_text(encoding="utf-8"))
    assert set(config["packages"]) == set(manifest)
    assert config["tag-separator"] == "-" and config["include-component-in-tag"]


def test_every_job_caches_its_installs() -> None:
    """Each job that runs nox sets up uv through the shared setup action, whose cache is on."""
    setup = yaml.safe_load((ACTIONS / "setup" / "action.yml").read_text(encoding="utf-8"))
    uv = [s for s in setup["runs"]["steps"] if "setup-uv" in s.get("uses", "")]
    assert uv and uv[0]["with"]["enable-cache"] is True
    for path in WORKFLOWS.glob("*.yml"):
        for name, job in yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"].items():
            steps = job.get("steps", [])
            if any("nox" in s.get("run", "") for s in steps):
                uses = [s.get("uses", "") for s in steps]
                assert "./.github/actions/setup" in uses, f"{path.name}: {name} does not cache"


def test_nox_calls_reads_package_cells_and_continuations() -> None:
    folded = "nox --force-python 3.10 -s \"tests(package='a')\" \"slow(package='a')\"\n"
    script = folded + "mkdir x\nnox -s lint tools\nnox -s release_check -- tag-v1\necho -s no\n"
    script += "# a comment on `nox -s docs`\nif nox -s \"tests(package='$1')\" >log 2>&1; then\n"
    assert nox_calls(script) == {"tests", "slow", "lint", "tools", "release_check"}


@pytest.mark.parametrize("workflow", ["ci.yml", "nightly.yml"])
def test_the_wheel_is_built_once_per_run(workflow: str) -> None:
    """One job builds every wheel; each job that installs a package takes them (ICML25_WHEEL_DIR)."""
    doc = yaml.safe_load((WORKFLOWS / workflow).read_text(encoding="utf-8"))
    assert "wheels" in workflow_calls(WORKFLOWS / workflow)
    installs = {"tests", "slow", "reference", "demo", "together", "docs"}  # each takes a wheel
    for name, job in doc["jobs"].items():
        called = set().union(*(nox_calls(s.get("run", "")) for s in job.get("steps", [])))
        if called & installs:
            assert "wheels" in job["needs"], f"{workflow}: {name} builds its own wheel"
            assert "ICML25_WHEEL_DIR" in job.get("env", {}), f"{workflow}: {name}"
