"""The kernel side of an answer: plain values out of the learner's kernel, for the trusted grader.

A lesson's hidden tests (see :mod:`autograder.source.hidden`) call the learner's functions on hidden
inputs and read their variables through :func:`call` and :func:`var`, then :func:`record` the
values, made plain by :func:`to_plain`, as one output of MIME type :data:`ANSWER_MIME`. The
grader scores that output in its own process (:mod:`autograder.run.scoring`). This module is never
imported in a learner's kernel: its source is copied into the hidden tests, so it uses the
standard library only, and every name it uses is defined here.

>>> to_plain({"kv": 131072, "fits": False, "parts": [14.0, 2.0]})
{'kv': 131072, 'fits': False, 'parts': [14.0, 2.0]}
>>> class Sneaky(int):
...     def __eq__(self, other): return True
>>> to_plain(Sneaky(3))
{'__not_plain__': 'Sneaky'}
>>> call({"f": lambda x: 1 / x}, "f", 0)
{'__error__': 'f(0,) raised ZeroDivisionError: division by zero'}
"""

from __future__ import annotations

import json
import math

ANSWER_MIME = "application/vnd.course-answer+json"
NOT_PLAIN = "__not_plain__"
ERROR = "__error__"
MAX_ITEMS = 10_000


def to_plain(value, depth=0):
    """Convert to JSON-plain data; anything that is not exactly a built-in becomes a marker.

    Only the exact built-in types pass (``type(x) is int``, never a subclass), so an object
    whose ``__eq__`` always returns True cannot reach the grader. numpy scalars and small
    arrays are converted through ``.item()`` / ``.tolist()`` (their types checked exactly too).
    """
    if depth > 20:
        return {NOT_PLAIN: "too deep"}
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if math.isfinite(value) else {NOT_PLAIN: "float " + repr(value)}
    if t in (list, tuple):
        if len(value) > MAX_ITEMS:
            return {NOT_PLAIN: "too long"}
        return [to_plain(v, depth + 1) for v in value]
    if t is dict:
        if len(value) > MAX_ITEMS:
            return {NOT_PLAIN: "too long"}
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                return {NOT_PLAIN: "dict key of type " + type(k).__name__}
            out[k] = to_plain(v, depth + 1)
        return out
    module = getattr(t, "__module__", "")
    if module == "numpy" and t.__name__ in {
            "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64", "bool_", "bool", "str_"}:
        return to_plain(value.item(), depth + 1)
    if module == "numpy" and t.__name__ == "ndarray" and value.size <= MAX_ITEMS:
        return to_plain(value.tolist(), depth + 1)
    return {NOT_PLAIN: t.__name__}


def record(grade_id, values):
    """Display ``values`` (made plain) for the trusted grader, tagged with ``grade_id``; return them."""
    plain = {str(name): to_plain(v) for name, v in values.items()}
    payload = {"grade_id": str(grade_id), "values": plain}
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python: nothing to display to
        return plain
    if get_ipython() is None:
        return plain
    display({ANSWER_MIME: payload, "text/plain": "[answer recorded for " + str(grade_id) + "]"}, raw=True)
    return plain


def call(ns, name, *args):
    """Call the learner's function ``name``; an error becomes a marker the grader explains, not a crash."""
    fn = ns.get(name)
    if not callable(fn):
        return {ERROR: name + " is not defined (run its cell first)"}
    try:
        return to_plain(fn(*args))
    except Exception as exc:  # noqa: BLE001 - learner code may raise anything
        return {ERROR: (name + repr(args) + " raised " + type(exc).__name__ + ": " + str(exc))[:300]}


def var(ns, name):
    """The learner's variable ``name``, made plain (a marker when it is not defined)."""
    if name not in ns:
        return {ERROR: name + " is not defined (run its cell first)"}
    return to_plain(ns[name])


def check_credit(checks, grade_id, values):
    """(fraction of the points, message) from the trusted check ``checks[grade_id]``: the one score
    dispatch, run by the grader in its own process and copied into the stock-nbgrader part of a hidden test.

    ``checks`` maps grade_ids to objects whose ``score(values)`` returns something with ``passed`` and
    ``message``, and optionally ``fraction`` (0 to 1: the share of the points its sub-answers earned;
    absent, a pass is 1 and a fail 0). Unknown ids and malformed values score nothing, and no value can
    crash the caller.

    >>> class Parts:
    ...     def score(self, values):
    ...         right = sum(values[k] == 1 for k in ("x", "y"))
    ...         return type("R", (), {"passed": right == 2, "message": "y is off" if right == 1 else "",
    ...                               "fraction": right / 2})()
    >>> check_credit({"t": Parts()}, "t", {"x": 1, "y": 1}), check_credit({"t": Parts()}, "t", {"x": 1, "y": 2})
    ((1.0, ''), (0.5, 'y is off'))
    >>> check_credit({"t": Parts()}, "u", {"x": 1})
    (0.0, "no check is defined for 'u'")
    """
    check = checks.get(grade_id)
    if check is None:
        return 0.0, "no check is defined for " + repr(grade_id)
    if not isinstance(values, dict):
        return 0.0, "the recorded answer is not a dict of values"
    try:
        # Re-read as plain JSON: drops any container subclass (e.g. nbformat's NotebookNode)
        result = check.score(json.loads(json.dumps(values, allow_nan=False)))
        passed, message = result.passed, result.message
        fraction = getattr(result, "fraction", None)
    except Exception as exc:  # noqa: BLE001 - odd values must never crash the grader
        return 0.0, "the recorded answer could not be checked (" + type(exc).__name__ + ")"
    if passed is True:
        return 1.0, str(message or "")
    if type(fraction) not in (int, float) or not 0 <= fraction < 1 or fraction != fraction:
        fraction = 0.0
    return float(fraction), str(message or "")

