"""Render the docs' equations without a network: MathJax from a docs dependency, copied into the built site.

Sphinx's ``sphinx.ext.mathjax`` points every page at a content-delivery network by default, so where there is no
network each formula shows as raw TeX.  This extension takes MathJax 3 from the installed PyPI package
``sphinx-mathjax-offline`` (the docs extra; nothing is downloaded at build time and nothing is vendored here),
sets ``mathjax_path`` to the combined TeX-to-CommonHTML component ``mathjax/tex-chtml.js`` under ``_static``, and
after the build copies that component and the folders it loads from on demand (its fonts, the TeX extensions it
autoloads, the menu and the accessibility tools), not the other combined components, which no page loads.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

#: the files and folders of MathJax's tree that a page with ``tex-chtml.js`` may load
NEEDED = ("tex-chtml.js", "a11y", "adaptors", "input", "output", "sre", "ui")


def mathjax_source() -> Path:
    """The MathJax tree of the installed ``sphinx-mathjax-offline`` (a ``RuntimeError`` naming the extra if absent)."""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the docs render their equations offline with MathJax from the package sphinx-mathjax-offline: "
            'install the docs extra (pip install -e ".[docs]")'
        )
    return Path(spec.origin).parent / "static" / "mathjax"


def copy_mathjax(app: Any, exc: Exception | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    source, target = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    for name in NEEDED:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)


def setup(app: Any) -> dict[str, Any]:
    mathjax_source()  # (fail at the start of a build, not at its end)
    app.config.mathjax_path = "mathjax/tex-chtml.js"
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
