"""Helpers shared by the benchmark scripts of this folder (run them from the package folder)."""

from __future__ import annotations

import os
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent
README = PKG / "README.md"


def data_root() -> Path:
    """The shared data folder: ``$ICML25_DATA``, else ``../shared/data`` beside the repository."""
    default = PKG.parents[1].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


def write_readme(block: str, name: str) -> None:
    """Replace the README's ``<!-- name:start -->`` ... ``<!-- name:end -->`` block with ``block``
    (which carries the markers itself)."""
    text = README.read_text(encoding="utf-8")
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise SystemExit(f"README.md has no {name} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    README.write_text(head + block + tail, encoding="utf-8")
