"""Sphinx configuration of the yao_actors documentation (Markdown pages through MyST, the API from docstrings)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

project = "yao_actors"
author = "yao_actors contributors"
copyright = "yao_actors contributors"

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}

html_theme = "alabaster"
html_title = "yao_actors"
html_static_path: list[str] = []

# Strict: every reference written in a page must resolve (the test builds with -W -n). The build is offline (no
# intersphinx), so references from docstrings and signatures (the standard library's and other packages' types, the
# package's internal modules) are shown as plain text by _lenient_in_docstrings below.
nitpicky = True


def _lenient_in_docstrings(app: object, env: object, node: Any, contnode: Any) -> Any:
    """Python references inside docstrings and signatures may name the package's internals: shown as plain text.

    The pages themselves stay strict: a reference written in a page that names nothing fails the build.
    """
    source = node.source or ""
    if node.get("refdomain") == "py" and (not source.endswith((".md", ".rst")) or "docstring of" in source):
        return contnode
    return None


def setup(app: Any) -> None:
    app.connect("missing-reference", _lenient_in_docstrings)
