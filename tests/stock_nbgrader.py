"""Stock nbgrader's command line for the tests that run it, without 1.1 s of CPU spent on a parser it never uses.

``python -m nbgrader VERB`` imports nbformat, which imports jsonschema, which imports ``rfc3987_syntax`` when it
is installed (jupyter-events requires it), and that module builds a Lark Earley parser as it is imported: 1.1 of
the 1.9 s of CPU that ``import nbgrader.apps`` takes (measured on 2 cores, 2026-12-06). Its one use is
jsonschema's "iri" format check, which nbformat never asks for (it validates without a format checker, as
autograder/__init__.py says where course-grade keeps it out of its own processes). The command below is
nbgrader's own entry point (nbgrader 0.9.6, ``nbgrader/__main__.py``: ``from .apps.nbgraderapp import main;
main()``) with that module kept out, so every verb, option and file is stock nbgrader's.

>>> NBGRADER[1:3]
['-c', "import sys; sys.modules.setdefault('rfc3987_syntax', None); from nbgrader.apps.nbgraderapp import main; main()"]
"""

from __future__ import annotations

import sys

NBGRADER = [sys.executable, "-c",
            "import sys; sys.modules.setdefault('rfc3987_syntax', None); from nbgrader.apps.nbgraderapp import main; main()"]
"""``python -m nbgrader`` (append the verb and its arguments)."""
