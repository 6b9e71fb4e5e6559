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
    """The cell's points when they are a number, 0 or more, else None.

    0 is nbgrader's own value for a cell whose points were left empty (its v1 metadata upgrade,
    nbgrader/nbgraderformat/v1.py in 0.9.6, writes 0.0), and stock nbgrader grades such a test: 0 of 0.

    >>> points({"metadata": {"nbgrader": {"points": 0}}}), points({"metadata": {"nbgrader": {"points": -1}}})
    (0.0, None)
    """
    value = nbgrader_meta(cell).get("points")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return None
    return float(value)


#: What nbgrader's ClearSolutions puts in place of a solution, by kernel language (its defaults).
CODE_STUBS = {"python": "# YOUR CODE HERE\nraise NotImplementedError()", "R": "# YOUR CODE HERE\nfail()",
              "matlab": "% YOUR CODE HERE\nerror('No Answer Given!')",
              "octave": "% YOUR CODE HERE\nerror('No Answer Given!')",
              "sas": "/* YOUR CODE HERE */\n %notImplemented;", "java": "// YOUR CODE HERE"}
TEXT_STUB = "YOUR ANSWER HERE"


def released_source(cell: Mapping[str, Any], language: str = "python") -> str:
    """A solution cell's text as ``nbgrader generate_assignment`` releases it (nbgrader's ClearSolutions,
    with its default stubs): each ``BEGIN SOLUTION`` ... ``END SOLUTION`` region becomes the stub,
    indented like its first line; a solution cell without a region becomes the stub whole.
    ``tests/autograder/test_cells.py`` holds it to nbgrader's own preprocessor.

    >>> released_source({"cell_type": "code", "source": "def f():\\n    ### BEGIN SOLUTION\\n    return 1\\n    ### END SOLUTION"})
    'def f():\\n    # YOUR CODE HERE\\n    raise NotImplementedError()'
    >>> released_source({"cell_type": "markdown", "source": "My answer."})
    'YOUR ANSWER HERE'
    """
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else str(source)
    code = cell.get("cell_type") == "code"
    stub = (CODE_STUBS.get(language, CODE_STUBS["python"]) if code else TEXT_STUB).split("\n")
    out, inside, replaced = [], False, False
    for line in source.split("\n"):
        if "BEGIN SOLUTION" in line:
            if inside:
                raise ValueError("nested BEGIN SOLUTION regions")
            inside = replaced = True
            indent = line[:len(line) - len(line.lstrip())]
            out += [indent + s for s in stub]
        elif "END SOLUTION" in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("a BEGIN SOLUTION region without its END SOLUTION")
    return "\n".join(out) if replaced else "\n".join(stub)


def released_test_source(cell: Mapping[str, Any]) -> str:
    """A locked cell's text as ``nbgrader generate_assignment`` releases it (nbgrader's ClearHiddenTests):
    every line from one holding ``BEGIN HIDDEN TESTS`` to the next holding ``END HIDDEN TESTS`` is left
    out, both included. An honest hand-in's test cells are this text, not the instructor's.
    ``tests/autograder/test_cells.py`` holds it to nbgrader's own preprocessor.

    >>> released_test_source({"source": "assert f(1) == 2\\n### BEGIN HIDDEN TESTS\\nassert f(5) == 10\\n### END HIDDEN TESTS"})
    'assert f(1) == 2'
    """
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else str(source)
    out, inside = [], False
    for line in source.split("\n"):
        if "BEGIN HIDDEN TESTS" in line:
            inside = True
        elif "END HIDDEN TESTS" in line:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)
