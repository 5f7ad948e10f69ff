"""Open every page of the built docs site in headless Chromium and check what a reader would see.

Usage: ``python tools/check_site.py docs/_build/html [--screenshots DIR] [--chromium PATH]``
(``nox -s docs_check`` runs it after ``nox -s docs``). Needs the ``playwright`` Python package (its
driver only: no browser download) and a Chromium binary (Debian's ``chromium``, ``/usr/bin/chromium``).

The site is served on localhost; for every HTML page (Sphinx's search/genindex included) it fails on:

* an image that does not load (``naturalWidth == 0``);
* an internal link to a page that does not exist, or to an ``#anchor`` that is not on that page;
* horizontal overflow: a page wider than the window, a code block that scrolls sideways (code blocks
  wrap), or an element that reaches past the right edge of the article column into the table of
  contents (wide tables scroll inside their own box and are allowed to);
* a formula that is not typeset (MathJax missing, or a TeX error in it);
* a JavaScript error on the page.

External links are listed, not fetched (this machine is offline). A screenshot of each page's first
screen (1366x900) goes to ``--screenshots``; the summary counts pages, images, links and code blocks
checked. Exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTH, HEIGHT = 1366, 900
INSPECT = """() => ({
  images: Array.from(document.images).map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0]),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
  pageWidth: document.documentElement.scrollWidth,
  wideCode: Array.from(document.querySelectorAll('pre'))
    .filter(p => p.scrollWidth > p.clientWidth + 1)
    .map(p => p.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 60)),
  code: document.querySelectorAll('pre').length,
  spill: (() => {
    const article = document.querySelector('article');
    if (!article) return [];
    // the column is furo's .content box (the article plus its padding, where heading anchors sit)
    const column = article.closest('.content') || article;
    const edge = column.getBoundingClientRect().right + 1;
    const out = [];
    for (const e of article.querySelectorAll('*')) {
      if (e.closest('.table-wrapper, pre, mjx-container, .MathJax')) continue;
      const box = e.getBoundingClientRect();
      if (box.width > 0 && box.right > edge) {
        out.push(`<${e.tagName.toLowerCase()}> ${Math.round(box.right - edge)} px past the column: `
          + (e.textContent || '').trim().slice(0, 60));
      }
    }
    return out.slice(0, 5);
  })(),
})"""


# Waits for MathJax's first typesetting pass (the site ships MathJax, sphinx-mathjax-offline), then lists
# every formula that did not become math: MathJax absent, or a TeX error (an <mjx-merror>).
MATH = """async () => {
  const formulas = Array.from(document.querySelectorAll('span.math, div.math'));
  if (!formulas.length) return [];
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) {
    return ['MathJax did not load: ' + formulas.length + ' formulas shown as TeX source'];
  }
  await MathJax.startup.promise;
  return formulas
    .filter(f => !f.querySelector('mjx-container') || f.querySelector('mjx-merror'))
    .map(f => 'formula not typeset: ' + f.textContent.trim().slice(0, 80));
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def pages(root: Path) -> list[str]:
    skip = ("_static", "_sources", "_images", "_modules")
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.html")
        if not any(part in skip for part in p.relative_to(root).parts)
    )


def exists(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site (docs/_build/html)")
    parser.add_argument(
        "--screenshots", type=Path, default=None, help="folder for page screenshots"
    )
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"check_site: no index.html in {args.site}", file=sys.stderr)
        return 2
    if not Path(args.chromium).is_file():
        print(
            f"check_site: no Chromium at {args.chromium} (apt-get install chromium)",
            file=sys.stderr,
        )
        return 2
    from playwright.sync_api import sync_playwright

    server, base = serve(args.site)
    problems: list[str] = []
    external: set[str] = set()
    stats = {"pages": 0, "images": 0, "links": 0, "code": 0, "wide_code": 0}
    ids_of: dict[str, set[str]] = {}
    anchors: list[tuple[str, str, str]] = []  # (page, target page, anchor)
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=FLAGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        for name in pages(args.site):
            errors.clear()
            page.goto(base + name, wait_until="load")
            problems += [f"{name}: {p}" for p in page.evaluate(MATH)]
            info = page.evaluate(INSPECT)
            stats["pages"] += 1
            stats["code"] += info["code"]
            stats["wide_code"] += len(info["wideCode"])
            problems += [
                f"{name}: code block scrolls sideways (its longest line: {line!r})"
                for line in info["wideCode"]
            ]
            problems += [f"{name}: overflow: {spill}" for spill in info["spill"]]
            ids_of[name] = set(info["ids"])
            for src, ok in info["images"]:
                stats["images"] += 1
                if not ok:
                    problems.append(f"{name}: image does not load: {src}")
            for href in info["links"]:
                stats["links"] += 1
                if not href.startswith(base):
                    if not href.startswith(("mailto:", "javascript:")):
                        external.add(href)
                    continue
                target, _, anchor = href[len(base) :].partition("#")
                target = urllib.parse.unquote(target.split("?")[0]) or "index.html"
                if target.endswith("/"):
                    target += "index.html"
                if not (args.site / target).is_file():
                    problems.append(f"{name}: broken link to {target}")
                elif anchor and target.endswith(".html"):
                    anchors.append((name, target, urllib.parse.unquote(anchor)))
            if info["pageWidth"] > WIDTH + 1:
                problems.append(
                    f"{name}: page is {info['pageWidth']} px wide in a {WIDTH} px window"
                )
            problems += [f"{name}: JavaScript error: {e}" for e in errors]
            if args.screenshots:
                shot = args.screenshots / (re.sub(r"[^\w.-]+", "_", name[:-5]) + ".png")
                page.screenshot(path=str(shot))
        browser.close()
    for name, target, anchor in anchors:
        if target not in ids_of:
            if not exists(base + target):
                problems.append(f"{name}: broken link to {target}")
        elif anchor not in ids_of[target]:
            problems.append(f"{name}: link to {target}#{anchor}, no such anchor there")
    server.shutdown()
    for problem in problems:
        print(f"FAIL {problem}")
    print(
        f"check_site: {stats['pages']} pages, {stats['images']} images, {stats['links']} links "
        f"({len(external)} external, not fetched), {stats['code']} code blocks "
        f"({stats['wide_code']} scroll sideways), {len(problems)} problems"
        + (f"; screenshots in {args.screenshots}" if args.screenshots else "")
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
