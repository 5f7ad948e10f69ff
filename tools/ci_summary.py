"""Sum the JUnit XML files that the ``tests`` sessions wrote and print one closing line.

``python tools/ci_summary.py DIR`` prints a line per package and then ``N passed, N failed, N skipped``.
Exits 1 when a package wrote no report or any test failed or errored.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


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


def main(argv: list[str]) -> int:
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
