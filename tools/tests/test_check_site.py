"""tools/check_site.py fails a site with a missing image, a broken link or a missing anchor."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))

import check_site  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None and not Path(CHROMIUM).is_file(),
    reason="Debian's chromium is not installed (apt-get install chromium)",
)
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def site(root: Path, page: str) -> Path:
    root.mkdir()
    (root / "plot.png").write_bytes(PNG)
    (root / "other.html").write_text('<html><body><h1 id="here">x</h1></body></html>')
    (root / "index.html").write_text(f"<html><body>{page}</body></html>")
    return root


def run(root: Path, tmp_path: Path, capsys) -> tuple[int, str]:
    pytest.importorskip("playwright")
    rc = check_site.main(
        [str(root), "--screenshots", str(tmp_path / "shots"), "--chromium", CHROMIUM]
    )
    return rc, capsys.readouterr().out


def test_clean_site_passes_and_saves_screenshots(tmp_path: Path, capsys) -> None:
    root = site(tmp_path / "ok", '<img src="plot.png"><a href="other.html#here">x</a>')
    rc, out = run(root, tmp_path, capsys)
    assert rc == 0, out
    assert (tmp_path / "shots" / "index.png").is_file()


def test_untypeset_math_fails(tmp_path: Path, capsys) -> None:
    """A page with formulas but no MathJax (the CDN unreachable, say) shows TeX source: that fails."""
    rc, out = run(site(tmp_path / "tex", r'<span class="math">\(x^2\)</span>'), tmp_path, capsys)
    assert rc == 1 and "MathJax did not load: 1 formulas" in out, out


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ('<img src="missing.png">', "image does not load"),
        ('<a href="nowhere.html">x</a>', "broken link to nowhere.html"),
        ('<a href="other.html#gone">x</a>', "no such anchor"),
        ('<div style="width: 3000px">wide</div>', "px wide"),
        (
            '<article><pre style="width: 200px; white-space: pre; overflow-x: auto">'
            + "x " * 200
            + "</pre></article>",
            "code block scrolls sideways",
        ),
        (
            '<div class="content" style="width: 400px"><article>'
            '<p style="width: 700px">spills into the table of contents</p></article></div>',
            "px past the column",
        ),
    ],
)
def test_each_problem_fails(tmp_path: Path, capsys, page: str, message: str) -> None:
    rc, out = run(site(tmp_path / "bad", page), tmp_path, capsys)
    assert rc == 1 and message in out, out
