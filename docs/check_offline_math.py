"""Check a built site renders its equations without a network: ``python docs/check_offline_math.py [HTML_DIR]``.

Over every page of the built HTML (default ``docs/_build/html``):

1. no ``<script src>`` or stylesheet ``<link href>`` names an ``http(s)://`` or protocol-relative address, and
   every relative one exists in the built tree;
2. every page with an equation (Sphinx's ``math`` spans and divs) loads MathJax from a local file that exists, and
   no paragraph of it holds TeX left outside a math element (a ``$...$`` or ``\\(...\\)`` that became text);
3. where a headless Chromium is installed, three pages with equations (``user_guide/model_assessment.html``, the
   API page and the gallery page with the most) are opened with no network (a proxy that refuses), and their
   equations must have become MathJax's ``mjx-container`` elements with no ``\\(`` left in the rendered text.

Exits 1 with each failure named, 0 with a summary.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

MATH_CLASS = re.compile(r"\bmath\b")
RAW_TEX = re.compile(r"(?<![\\$])\$[^$\s][^$]*\$|\\\(.+?\\\)|\\\[.+?\\\]")


class Page(HTMLParser):
    """The scripts, stylesheets, math elements and the text outside math, code and scripts of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.math = 0
        self.text: list[str] = []
        self._skip: list[str] = []  # the open elements whose text is not prose (math, code, script, style)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"] or "")
        if tag == "link" and "stylesheet" in (a.get("rel") or "") and a.get("href"):
            self.styles.append(a["href"] or "")
        is_math = tag in ("span", "div") and MATH_CLASS.search(a.get("class") or "")
        self.math += bool(is_math)
        if self._skip or is_math or tag in ("script", "style", "code", "pre", "kbd", "samp", "textarea"):
            self._skip.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skip and self._skip[-1] == tag:
            self._skip.pop()

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def _local(src: str) -> str:
    return src.split("?", 1)[0].split("#", 1)[0]


def check_pages(root: Path) -> tuple[list[str], dict[Path, int]]:
    failures, with_math = [], {}
    for path in sorted(root.rglob("*.html")):
        if "_static" in path.relative_to(root).parts:  # (a theme's templates, copied as they are: not pages)
            continue
        page = Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        where = path.relative_to(root)
        for src in page.scripts + page.styles:
            if src.startswith(("http://", "https://", "//")):
                failures.append(f"{where}: loads {src} from the network")
            elif not (path.parent / _local(src)).resolve().is_file():
                failures.append(f"{where}: loads {src}, which is not in the built site")
        if page.math:
            with_math[path] = page.math
            if not any(_local(s).endswith("mathjax/tex-chtml.js") for s in page.scripts):
                failures.append(f"{where}: {page.math} equations and no local MathJax")
            for hit in RAW_TEX.findall(" ".join(page.text))[:3]:
                failures.append(f"{where}: TeX left as text: {hit[:60]!r}")
    return failures, with_math


def browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    return None


def rendered_pages(root: Path, with_math: dict[Path, int]) -> list[Path]:
    """The pages opened in the browser: the model-assessment guide, and the API page and the gallery page with the
    most equations (each where there is one)."""
    pages = (
        [root / "user_guide" / "model_assessment.html"]
        if root / "user_guide" / "model_assessment.html" in with_math
        else []
    )
    for part in ("generated", "auto_examples"):
        inside = [p for p in with_math if part in p.relative_to(root).parts]
        if inside:
            pages.append(max(inside, key=with_math.get))
    return pages or [max(with_math, key=with_math.get)]


def check_rendered(root: Path, with_math: dict[Path, int], chrome: str) -> list[str]:
    """Open pages in headless Chromium with no network (a proxy that refuses) and count MathJax's equations."""
    failures = []
    for page in rendered_pages(root, with_math):
        command = [chrome, "--headless", "--disable-gpu", "--no-sandbox", "--proxy-server=127.0.0.1:9",
                   "--virtual-time-budget=20000", "--dump-dom", page.as_uri()]  # fmt: skip
        dom = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
        rendered = dom.count("<mjx-container")
        body = re.sub(r"<mjx-assistive-mml.*?</mjx-assistive-mml>", "", dom, flags=re.S)
        text = re.sub(r"<(script|style|code|pre)\b.*?</\1>", "", body, flags=re.S)
        where = page.relative_to(root)
        if rendered < with_math[page]:
            failures.append(f"{where}: {rendered} equations rendered of {with_math[page]}")
        if "\\(" in re.sub(r"<[^>]+>", "", text):
            failures.append(f"{where}: raw TeX (\\() left after MathJax ran")
        print(f"{where}: {rendered} equations rendered by MathJax offline ({with_math[page]} in the page)")
    return failures


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/_build/html").resolve()
    if not (root / "index.html").is_file():
        print(f"{root}: no built site (build the docs first)")
        return 1
    failures, with_math = check_pages(root)
    chrome = browser()
    if chrome and with_math:
        failures += check_rendered(root, with_math, chrome)
    else:
        print("no headless Chromium here: the built HTML was parsed instead of rendered")
    for failure in failures:
        print(failure)
    size = sum(f.stat().st_size for f in (root / "_static" / "mathjax").rglob("*") if f.is_file())
    print(f"{len(with_math)} pages with equations ({sum(with_math.values())} in all); MathJax in the site: "
          f"{size / 2**20:.1f} MiB; {len(failures)} failures")  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
