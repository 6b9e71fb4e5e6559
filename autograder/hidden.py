"""The hidden part of each test cell, written from :mod:`autograder.collect`'s source.

nbgrader delivers hidden tests inside the test cell (between ``### BEGIN HIDDEN TESTS``
and ``### END HIDDEN TESTS``): the release strips them, the grader restores them from
the instructor source. So the collection code travels there as text, and the sandboxed
kernel never needs to read a file of the grader. For one grade_id, :func:`hidden_source`
copies the collector and the closure of names it uses (helpers, input cases) into one
function, so nothing but ``_course_values`` lands in the learner's namespace, then:

- records the collected values (an :data:`~autograder.collect.ANSWER_MIME` output),
  which the trusted grader scores in its own process;
- where the grader itself is importable (the instructor's environment under stock
  ``nbgrader validate``/``autograde``), also scores them in the kernel and asserts, so
  stock nbgrader grades the same notebook. A learner's kernel has no grader: there,
  and in the sandbox, the import fails and only the record remains.

>>> src = hidden_source("test_predict")
>>> "def collect_predict(ns):" in src and "def collect_lab_record" not in src
True
>>> ns = {"predict_answer": "a"}
>>> exec(src, ns)             # outside a kernel: record() displays nothing and returns the values
>>> ns["_course_values"]
{'answer': 'a'}
"""

from __future__ import annotations

import ast
import textwrap
from functools import lru_cache
from pathlib import Path

from lessons.l14_04 import collect

COLLECT_PY = Path(collect.__file__)


@lru_cache(maxsize=4)
def _definitions(path: str) -> tuple[dict[str, ast.stmt], tuple[str, ...], str]:
    """Top-level names of collect.py -> their statement, in file order, and the source text."""
    text = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(text)
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defs[node.targets[0].id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defs[node.target.id] = node
        elif isinstance(node, ast.Import):
            for alias in node.names:
                defs[alias.asname or alias.name] = node
    return defs, tuple(defs), text


def _closure(name: str, defs: dict[str, ast.stmt]) -> set[str]:
    """``name`` and every top-level name of collect.py it uses, transitively."""
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in defs:
            continue
        seen.add(current)
        todo.extend(n.id for n in ast.walk(defs[current]) if isinstance(n, ast.Name) and n.id in defs)
    return seen


def hidden_source(grade_id: str) -> str:
    """The code between the hidden-test markers of ``grade_id``'s test cell (no markers)."""
    collector = collect.COLLECTORS[grade_id]
    return _wrap(grade_id, (collector,), f"{collector}(ns)")


def _wrap(grade_id: str, roots: tuple[str, ...], values_expression: str,
          checks_module: str = "lessons.l14_04.checks") -> str:
    defs, order, text = _definitions(str(COLLECT_PY))
    needed = set().union(*(_closure(root, defs) for root in (*roots, "record")))
    lines = text.splitlines()
    pieces = []
    for name in order:
        if name in needed:
            node = defs[name]
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            block = "\n".join(lines[start - 1:node.end_lineno])
            if block not in pieces:
                pieces.append(block)
    body = "\n\n".join(pieces) + f"\n\nreturn record({grade_id!r}, {values_expression})"
    recording = (
        "# Collected for the trusted grader: plain values only. The inputs are hidden; the expected\n"
        "# answers exist only in the grader's process (autograder/collect.py, autograder/checks.py).\n"
        "def _course_hidden(ns):\n"
        + textwrap.indent(body, "    ") + "\n\n\n"
        "_course_values = _course_hidden(globals())\n"
        "del _course_hidden"
    )
    return recording + (
        "\ntry:  # the instructor's own environment: score here too, so stock nbgrader grades this notebook\n"
        f"    from {checks_module} import score_answer as _course_score\n"
        "except ImportError:  # a learner's kernel, or the grader's sandbox: scored outside the kernel\n"
        "    _course_score = None\n"
        "if _course_score is not None:\n"
        f"    _course_result = _course_score({grade_id!r}, _course_values)\n"
        "    assert _course_result.passed, _course_result.message"
    )


def hidden_block(grade_id: str) -> str:
    """The hidden part with its nbgrader markers, as it sits at the end of the test cell."""
    return f"### BEGIN HIDDEN TESTS\n{hidden_source(grade_id)}\n### END HIDDEN TESTS"
