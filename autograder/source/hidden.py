r"""The hidden part of each test cell, written from a lesson's own source, and the part course-grade removes.

nbgrader delivers hidden tests inside the test cell (between ``### BEGIN HIDDEN TESTS`` and
``### END HIDDEN TESTS``): the release strips them, the grader restores them from the instructor
source. A lesson's collection code travels there as text, so a sandboxed kernel never needs to
read a file of the grader. For one grade_id, :func:`hidden_block` copies the lesson's collector
(``COLLECTORS[grade_id]`` of its collect module) and the closure of names it uses (helpers, input
cases, :mod:`autograder.contract.answers`) into one function, so that nothing but ``_course_values`` lands
in the learner's namespace, and then, between :data:`STOCK_BEGIN` and :data:`STOCK_END`, the
lesson's trusted check (``CHECKS[grade_id]`` of its checks module) with the closure it uses,
expected values included, and an ``assert``:

- course-grade records the collected values (an :data:`~autograder.contract.answers.ANSWER_MIME`
  output) and scores them in its own process; it removes the stock part from the cell
  (:func:`strip_stock_check`) before a learner's kernel sees the cell;
- stock ``nbgrader autograde`` runs the whole hidden test: the check asserts in the kernel, so
  a wrong answer fails there, with the check's message, wherever the grader is not importable.

>>> import importlib.util, pathlib, tempfile
>>> lesson = pathlib.Path(tempfile.mkdtemp())
>>> _ = (lesson / "collect.py").write_text(
...     "CASES = [1, 2]\nCOLLECTORS = {'test_double': 'collect_double'}\n"
...     "def collect_double(ns):\n    return {'got': [ns['double'](x) for x in CASES]}\n")
>>> _ = (lesson / "checks.py").write_text(
...     "class Result:\n    def __init__(self, passed, message=''):\n        self.passed, self.message = passed, message\n"
...     "def score_double(v):\n    return Result(v['got'] == [2, 4], 'double the number')\n"
...     "class Check:\n    score = staticmethod(score_double)\nCHECKS = {'test_double': Check()}\n")
>>> def load(name):
...     spec = importlib.util.spec_from_file_location(name, lesson / f"{name}.py")
...     module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); return module
>>> block = hidden_block("test_double", load("collect"), load("checks"))
>>> exec(block, {"double": lambda x: 2 * x})     # outside a kernel record() displays nothing; the check passes
>>> exec(block, {"double": lambda x: x + 1})     # a wrong answer: the stock check asserts
Traceback (most recent call last):
...
AssertionError: double the number
>>> ns = {"double": lambda x: x + 1}
>>> exec(strip_stock_check(block), ns)           # what course-grade runs: the values only
>>> ns["_course_values"], "_course_fraction" in ns, "score_double" in strip_stock_check(block)
({'got': [2, 3]}, False, False)
"""

from __future__ import annotations

import ast
import re
import textwrap
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from ..contract import answers

#: The stock-nbgrader part of a hidden test: the trusted check with its expected values.
STOCK_BEGIN = "### BEGIN STOCK NBGRADER CHECK"
STOCK_END = "### END STOCK NBGRADER CHECK"
_STOCK = re.compile(rf"^[ \t]*{STOCK_BEGIN}[^\n]*\n.*?^[ \t]*{STOCK_END}[ \t]*(?:\n|\Z)", re.S | re.M)
#: The function a hidden test records its answer from: a test cell whose source holds it records one.
RECORDER = "_course_hidden"
#: Modules whose imports are resolved by copying their definitions, not by importing them.
_OWN = ("autograder", "lessons")


def strip_stock_check(source: str) -> str:
    """``source`` without its stock-nbgrader part (what course-grade runs in a learner's kernel).

    >>> strip_stock_check(f"a = 1\\n{STOCK_BEGIN}\\nassert a == 2\\n{STOCK_END}\\nb = 2")
    'a = 1\\nb = 2'
    """
    return _STOCK.sub("", source)


def records_answer(source: str) -> bool:
    """Does a test cell's source record an answer for the trusted grader (a hidden block of this module)?"""
    return f"def {RECORDER}(" in source


@lru_cache(maxsize=16)
def _definitions(path: str) -> tuple[tuple[str, ast.stmt, str], ...]:
    """(name, statement, source text) of each top-level definition of a file, in file order.

    Imports of the standard library count as definitions of the names they bind; imports from this
    project's own packages (relative, ``autograder``, ``lessons``) do not: those names are found
    among the other files' definitions."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    out = []

    def add(name: str, node: ast.stmt) -> None:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        skip = _docstring_lines(node, lines)
        out.append((name, node, "\n".join(line for number, line in enumerate(lines[start - 1:node.end_lineno], start)
                                          if number not in skip)))

    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            add(node.name, node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            add(node.targets[0].id, node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            for bound in [t.id for t in node.targets[0].elts if isinstance(t, ast.Name)]:   # GB, GiB = ...
                add(bound, node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            add(node.target.id, node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.asname or alias.name.split(".")[0], node)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module != "__future__" \
                and (node.module or "").split(".")[0] not in _OWN:
            for alias in node.names:
                add(alias.asname or alias.name, node)
    return tuple(out)


def _docstring_lines(node: ast.stmt, lines: list[str]) -> set[int]:
    """The line numbers of the docstrings in a definition (its own and its nested ones'), where each
    stands on lines of its own: a kernel need not compile them, and the hidden tests are shorter."""
    out: set[int] = set()
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or len(body) < 2:
            continue
        doc = body[0]
        if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
            first, last = lines[doc.lineno - 1], lines[doc.end_lineno - 1]
            if first[:doc.col_offset].strip() == "" and last[doc.end_col_offset:].strip() == "":
                out.update(range(doc.lineno, doc.end_lineno + 1))
    return out


def _closure(roots: tuple[str, ...], files: tuple[str, ...]) -> str:
    """The source of ``roots`` and of every top-level name they use, transitively, from ``files``
    in file order, ready to paste into a function body. A name defined in several files is the
    earliest file's (files come in the order they import each other: what is used comes first)."""
    defs: dict[str, tuple[int, ast.stmt, str]] = {}
    for position, path in enumerate(files):
        for name, node, text in _definitions(path):
            defs.setdefault(name, (position, node, text))
    seen, todo = set(), list(roots)
    while todo:
        current = todo.pop()
        if current in seen or current not in defs:
            continue
        seen.add(current)
        todo.extend(n.id for n in ast.walk(defs[current][1]) if isinstance(n, ast.Name) and n.id in defs)
    missing = [root for root in roots if root not in defs]
    if missing:
        raise KeyError(f"{missing} not defined in {files}")
    pieces = sorted({(defs[name][0], defs[name][1].lineno, defs[name][2]) for name in seen})
    return "\n\n".join(text for _, _, text in pieces)


def hidden_source(grade_id: str, collect: ModuleType) -> str:
    """The recording part of ``grade_id``'s hidden test: the collector, its closure, ``record``."""
    collector = collect.COLLECTORS[grade_id]
    body = _closure((collector, "record"), (answers.__file__, collect.__file__))
    body += f"\n\nreturn record({grade_id!r}, {collector}(ns))"
    return ("# Collected for the trusted grader: plain values only. The inputs are hidden; course-grade\n"
            "# scores the values outside the kernel.\n"
            f"def {RECORDER}(ns):\n" + textwrap.indent(body, "    ") + "\n\n\n"
            f"_course_values = {RECORDER}(globals())\n"
            f"del {RECORDER}")


def stock_check_source(grade_id: str, collect: ModuleType, checks: ModuleType, points: float | None = None) -> str:
    """The stock-nbgrader part: ``grade_id``'s trusted check run on the recorded values, then assert.

    With ``points`` (the cell's), a check that gives a share of the points (``fraction``) is partial
    credit the way nbgrader reads it (``nbgrader.utils.determine_grade``: the first error or
    ``execute_result`` of the cell decides): the points earned go out through the display hook, as an
    ``execute_result``, wherever the hidden part sits in the cell, and its message is printed (stdout;
    stderr would be 0). Nothing earned asserts; all of it shows nothing.
    """
    scorer = checks.CHECKS[grade_id].score.__name__
    body = _closure((scorer, "check_credit"), (answers.__file__, collect.__file__, checks.__file__))
    body += ("\n\nimport types\n"
             f"return check_credit({{{grade_id!r}: types.SimpleNamespace(score={scorer})}}, {grade_id!r}, values)")
    tail = ("assert _course_fraction > 0, _course_message\n"
            "if _course_fraction < 1:\n"
            "    print('partial credit: ' + _course_message)\n"
            "    import sys as _course_sys\n"
            f"    _course_sys.displayhook(_course_fraction * {points!r})\n"
            if points is not None else "assert _course_fraction == 1, _course_message\n")
    return (f"{STOCK_BEGIN}\n"
            "# For stock `nbgrader autograde` only: the trusted check, expected values included, asserted\n"
            "# here in the kernel. course-grade removes this part before a learner's kernel sees the cell.\n"
            "def _course_stock_check(values):\n" + textwrap.indent(body, "    ") + "\n\n\n"
            "_course_fraction, _course_message = _course_stock_check(_course_values)\n"
            "del _course_stock_check\n" + tail + f"{STOCK_END}")


def hidden_block(grade_id: str, collect: ModuleType, checks: ModuleType, points: float | None = None) -> str:
    """The hidden part with its nbgrader markers, as it sits at the end of ``grade_id``'s test cell
    (``points``: the cell's, so that stock nbgrader gives partial credit as course-grade does)."""
    return (f"### BEGIN HIDDEN TESTS\n{hidden_source(grade_id, collect)}\n"
            f"{stock_check_source(grade_id, collect, checks, points)}\n### END HIDDEN TESTS")
