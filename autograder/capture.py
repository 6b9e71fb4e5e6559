"""Answers leave the learner's kernel as plain JSON values, and nothing else.

Inside the kernel, a test cell calls :func:`record` with the values it wants
graded. They are converted with :func:`to_plain`, which accepts only the exact
built-in types (``type(x) is int``, never a subclass), so an object whose
``__eq__`` always returns True cannot pass through. The values are displayed
as one output of MIME type :data:`ANSWER_MIME`; the trusted grader reads them
back from the executed notebook and scores them in its own process
(:mod:`autograder.checks`), where the learner's code cannot reach.

>>> to_plain({"kv": 131072, "fits": False, "parts": [14.0, 2.0]})
{'kv': 131072, 'fits': False, 'parts': [14.0, 2.0]}
>>> class Sneaky(int):
...     def __eq__(self, other): return True
>>> to_plain(Sneaky(3))
{'__not_plain__': 'Sneaky'}
"""

from __future__ import annotations

import math
from typing import Any

ANSWER_MIME = "application/vnd.course-answer+json"
NOT_PLAIN = "__not_plain__"

_MAX_ITEMS = 10_000


def to_plain(value: Any, _depth: int = 0) -> Any:
    """Convert to JSON-plain data; anything that is not exactly a built-in becomes a marker.

    numpy scalars and small arrays are converted through ``.item()`` / ``.tolist()``
    (their types are checked exactly too); everything else is refused.
    """
    if _depth > 20:
        return {NOT_PLAIN: "too deep"}
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if math.isfinite(value) else {NOT_PLAIN: f"float {value!r}"}
    if t in (list, tuple):
        if len(value) > _MAX_ITEMS:
            return {NOT_PLAIN: "too long"}
        return [to_plain(v, _depth + 1) for v in value]
    if t is dict:
        if len(value) > _MAX_ITEMS:
            return {NOT_PLAIN: "too long"}
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                return {NOT_PLAIN: f"dict key of type {type(k).__name__}"}
            out[k] = to_plain(v, _depth + 1)
        return out
    module = getattr(t, "__module__", "")
    if module == "numpy" and t.__name__ in {
            "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64", "bool_", "bool", "str_"}:
        return to_plain(value.item(), _depth + 1)
    if module == "numpy" and t.__name__ == "ndarray" and value.size <= _MAX_ITEMS:
        return to_plain(value.tolist(), _depth + 1)
    return {NOT_PLAIN: t.__name__}


def record(grade_id: str, **values: Any) -> dict[str, Any]:
    """Display ``values`` (made plain) for the trusted grader, tagged with ``grade_id``."""
    plain = {name: to_plain(v) for name, v in values.items()}
    payload = {"grade_id": str(grade_id), "values": plain}
    try:
        from IPython.display import display
        display({ANSWER_MIME: payload, "text/plain": f"[answer recorded for {grade_id}]"}, raw=True)
    except ImportError:  # plain Python: nothing to display to
        pass
    return plain
