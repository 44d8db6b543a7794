"""Sphinx configuration of pymc_dp's documentation site.

Build it (the README's command): ``bash scripts/bootstrap.sh docs && .venv/bin/python -m sphinx
-T -W --keep-going -b html docs docs/_build/html``. Every page written as a MyST-NB notebook
(``file_format: mystnb`` in its front matter) is executed on every build, so a page cannot
show output that the code no longer produces; an error in a cell fails the build.
"""

import inspect
import os
import tempfile

import pymc_dp

project = "pymc_dp"
author = "pymc_dp developers"
copyright = "2026, pymc_dp developers"
release = version = getattr(pymc_dp, "__version__", "0.1.0")

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]

# MyST: $…$ math as in docs/algorithms.md, ::: fences, anchors for links to sections.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# Execution: every build runs every notebook page from scratch ("force"), one at a time,
# and a cell that raises fails the build.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 300
nb_merge_streams = True

# The pages' private steps keep their budget ledgers in a directory of this build, not in
# the user's default ledger directory (the kernels inherit the environment).
os.environ.setdefault("PYMC_DP_LEDGER_DIR", tempfile.mkdtemp(prefix="pymc_dp_docs_ledgers-"))

# API reference: numpydoc docstrings, one generated page per public name.
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = "pymc_dp"
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 4,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path: list[str] = []


def _init_signature(app, what, name, obj, options, signature, return_annotation):
    """The signature of a step's ``__init__`` instead of PyMC's ``__new__(*args, **kwargs)``."""
    if what == "class" and signature == "(*args, **kwargs)":
        sig = inspect.signature(obj.__init__)
        params = list(sig.parameters.values())[1:]  # without self
        return str(sig.replace(parameters=params, return_annotation=sig.empty)), return_annotation
    return None


def setup(app):
    # before numpydoc's handler of the same event, which returns the signature it is given
    app.connect("autodoc-process-signature", _init_signature, priority=400)
