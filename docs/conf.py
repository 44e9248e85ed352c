"""Sphinx configuration (install with ``pip install ".[docs]"``, build with ``sphinx-build docs docs/_build``)."""

project = "skdp"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc", "sphinx.ext.mathjax"]
autosummary_generate = True
numpydoc_show_class_members = False
html_theme = "alabaster"
exclude_patterns = ["_build"]


import re

_SKLEARN_REF = re.compile(r":ref:`([^`<]*?)\s*<[^`>]+>`|:ref:`([^`]+)`")


def _plain_sklearn_references(app, what, name, obj, options, lines):
    """Methods inherited from scikit-learn (``score``) cite labels of its own documentation: keep the text."""
    if not getattr(obj, "__module__", "").startswith("sklearn"):
        return
    for i, line in enumerate(lines):
        lines[i] = _SKLEARN_REF.sub(lambda m: m.group(1) or m.group(2), line)


def setup(app):
    app.connect("autodoc-process-docstring", _plain_sklearn_references)
