"""What an nbgrader cell is, in one place (nbgrader keeps these in ``nbgrader/utils.py``).

Every predicate reads the cell defensively: a submitted notebook may carry any JSON
in ``metadata.nbgrader`` (``null``, a list, a string, a number, a dict whose
``grade_id`` is a list...). Anything that is not the shape nbgrader writes counts
as no nbgrader metadata at all, so no predicate can raise on a learner's file.

>>> cell = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "t1",
...         "solution": False, "locked": True, "points": 2}}}
>>> grade_id(cell), is_test(cell), is_manual(cell), is_locked(cell)
('t1', True, False, True)
>>> grade_id({"metadata": {"nbgrader": ["not", "a", "dict"]}}) is None
True
"""

from __future__ import annotations

from typing import Any, Mapping


def nbgrader_meta(cell: Mapping[str, Any]) -> dict:
    """The cell's ``metadata.nbgrader`` when it is a dict, else ``{}``."""
    metadata = cell.get("metadata") if isinstance(cell, Mapping) else None
    meta = metadata.get("nbgrader") if isinstance(metadata, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def has_nbgrader(cell: Mapping[str, Any]) -> bool:
    """True when the cell's metadata has an ``nbgrader`` key at all (whatever its value)."""
    metadata = cell.get("metadata") if isinstance(cell, Mapping) else None
    return isinstance(metadata, Mapping) and "nbgrader" in metadata


def grade_id(cell: Mapping[str, Any]) -> str | None:
    """The cell's grade_id when it is a non-empty string, else None."""
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) and gid else None


def _flag(cell: Mapping[str, Any], key: str) -> bool:
    return nbgrader_meta(cell).get(key) is True


def is_grade(cell: Mapping[str, Any]) -> bool:
    """Carries points (an autograded test or a hand-graded answer)."""
    return _flag(cell, "grade")


def is_solution(cell: Mapping[str, Any]) -> bool:
    """The learner writes it (an answer cell)."""
    return _flag(cell, "solution")


def is_locked(cell: Mapping[str, Any]) -> bool:
    """Read-only: restored from the instructor source (tests are locked too)."""
    return _flag(cell, "locked")


def is_task(cell: Mapping[str, Any]) -> bool:
    """A task: a locked markdown cell a person grades as a whole (nbgrader's ``task`` flag)."""
    return _flag(cell, "task")


def is_test(cell: Mapping[str, Any]) -> bool:
    """An autograded test: a grade cell that is not an answer, and code."""
    return is_grade(cell) and not is_solution(cell) and cell.get("cell_type") == "code"


def is_manual(cell: Mapping[str, Any]) -> bool:
    """An answer graded by hand: a grade cell that is also a solution cell."""
    return is_grade(cell) and is_solution(cell)


def points(cell: Mapping[str, Any]) -> float | None:
    """The cell's points when they are a positive number, else None."""
    value = nbgrader_meta(cell).get("points")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return float(value)
