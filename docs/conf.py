"""Sphinx configuration: numpydoc API reference, a sphinx-gallery of examples, Markdown pages, equations rendered
by a MathJax shipped with the site (``_ext/offline_math.py``: no network needed to read them)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))  # offline_math: MathJax shipped with the site
os.environ.setdefault("MPLBACKEND", "Agg")

import relaxep

project = "relaxep"
author = "the relaxep developers"
copyright = "2026, the relaxep developers"
release = relaxep.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "offline_math",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = [
    "_build",
    "**sg_execution_times.rst",  # (left by an older build's sphinx-gallery: see write_computation_times below)
    "**/README.md",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.json",
]
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # the committed reports start their sections at level 2

autosummary_generate = True
templates_path = ["_templates"]
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": "/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    # (its execution-time pages load jQuery and DataTables from a CDN: nothing in the site may need a network)
    "write_computation_times": False,
}

html_theme = "pydata_sphinx_theme"
html_title = f"relaxep {release}"
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2}
