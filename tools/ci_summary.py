"""Sum what the per-change tier wrote and print it.

``python tools/ci_summary.py DIR [NAME ...]`` reads the JUnit XML files in ``DIR`` (the ``tests`` cells'
pytest and conformance reports, the tools' tests), prints a line per report and then
``N passed, N failed, N skipped``. Exits 1 when an expected report (``NAME.xml``) is missing or any test
failed or errored.

``python tools/ci_summary.py --order PACKAGE ...`` prints the packages one a line, the costliest
first (``COST``), for ``.ci/run`` to hand to its parallel cells.

``python tools/ci_summary.py --timings DIR`` prints the stage times that the ``tests`` cells wrote to
``DIR/<package>.json`` (build, tests, typecheck, conformance): one line per stage summed over packages,
then one line per package.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

STAGES = ("build", "tests", "typecheck", "conformance")
# Rough cost of each package's tests cell (seconds, quiet 2-core machine), so that .ci/run starts the
# longest cells first; a package missing here (a new one) goes first.
COST = {
    "fedgmt": 200,
    "sassha-optim": 170,
    "cft-calibration": 150,
    "parq-optim": 140,
    "rsd-skills": 120,
    "sorbet-snn": 110,
    "safer-dtr": 100,
    "phynfp": 100,
    "curmgae": 90,
    "tar-gnn": 80,
    "bpr-topk": 80,
}


def counts(report: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) of one pytest JUnit XML file; errors count as failures."""
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = 0
    for suite in suites:
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def stage_times(folder: Path) -> dict[str, dict[str, float]]:
    """{package: {stage: seconds}} from the ``tests`` cells' timing files."""
    return {p.stem: json.loads(p.read_text("utf-8")) for p in sorted(folder.glob("*.json"))}


def print_timings(folder: Path) -> None:
    times = stage_times(folder)
    for stage in STAGES:
        total = sum(t.get(stage, 0.0) for t in times.values())
        print(f"== {stage}: {total:.0f} s (sum over {len(times)} packages)")
    for package, t in times.items():
        cells = ", ".join(f"{s} {t[s]:.0f}" for s in STAGES if s in t)
        print(f"   {package}: {cells} s")


def order(packages: list[str]) -> list[str]:
    """``packages`` by decreasing expected cost; unknown ones first."""
    return sorted(packages, key=lambda p: (-COST.get(p, float("inf")), p))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--order"]:
        print("\n".join(order(argv[1:])))
        return 0
    if argv[:1] == ["--timings"]:
        print_timings(Path(argv[1]))
        return 0
    folder = Path(argv[0])
    expected = argv[1:]
    reports = sorted(folder.glob("*.xml"))
    missing = [p for p in expected if not (folder / f"{p}.xml").is_file()]
    passed = failed = skipped = 0
    for report in reports:
        p, f, s = counts(report)
        print(f"{report.stem}: {p} passed, {f} failed, {s} skipped")
        passed, failed, skipped = passed + p, failed + f, skipped + s
    for name in missing:
        print(f"{name}: no test report (the session failed before pytest finished)")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or missing or not reports else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
