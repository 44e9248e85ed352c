"""Sphinx configuration (install with ``pip install ".[docs]"``, build with ``sphinx-build docs docs/_build``)."""

project = "skdp"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc", "sphinx.ext.mathjax"]
autosummary_generate = True
numpydoc_show_class_members = False
html_theme = "alabaster"
exclude_patterns = ["_build"]
