"""Predictions that count: a prediction is committed at the first reveal, and graded as it stood then.

A reveal cell (the commit after the lesson's first Predict, the measurement after Task 4, the chat
simulation after R5, the knob table after R6) calls :func:`commit` before it shows anything. ``commit`` refuses to reveal until the prediction is
made (the right form: the visible check's rule), and at the first reveal writes the prediction to
:data:`RECORD_NAME` beside the notebook, with a SHA-256 digest of it. Later reveals show the committed
prediction again (and say when the notebook's value has changed since). The grader reads that record
(handed in with the notebooks) and grades the prediction *as committed*; a prediction never revealed is
graded as it stands. The record is a plain file in the learner's folder: the digest catches a hand edit
that forgets it, not a learner set on forging one; it keeps an honest learner's prediction honest.

>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> commit("demo", {"x": 3}, lambda v: None, folder=folder)
{'x': 3}
>>> commit("demo", {"x": 4}, lambda v: None, folder=folder)       # doctest: +NORMALIZE_WHITESPACE
prediction 'demo' was committed at its first reveal as {'x': 3}; your notebook now says {'x': 4}:
the grader grades {'x': 3}
{'x': 3}
>>> read_record(folder)["demo"]["values"]
{'x': 3}
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from ...grading import grading

#: The record, beside the notebooks in the assignment's folder (released empty; hand it in with them).
RECORD_NAME = "l14-04-predictions.json"
#: What marks an assignment's folder: the lab file released beside the notebooks. The instructor's notebooks in
#: the repository (notebooks/level-14/, the lab under labs/) record nothing: a run there is not a learner's.
ASSIGNMENT_MARK = "l14-04-model-memory.py"


def assignment_folder() -> Path | None:
    """The folder the notebook runs in when it is an assignment's folder (the lab file beside it), else None."""
    here = Path.cwd()
    return here if (here / ASSIGNMENT_MARK).is_file() else None


def digest(key: str, values: dict) -> str:
    """The SHA-256 of a prediction as committed (its key and its values, canonical JSON).

    >>> digest("demo", {"x": 3})[:12]
    'fe2a35710341'
    """
    text = json.dumps({"key": key, "values": values}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_record(folder: str | Path | None = None) -> dict:
    """The record's entries by key ({} when there is none or it does not parse)."""
    path = Path(folder or Path.cwd()) / RECORD_NAME
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


class _NotSet:
    """What a prediction's name reads as before the cell that sets it has run."""

    def __repr__(self) -> str:
        return "<not set>"


#: A name of a prediction not set yet (see :func:`prediction`).
NOT_SET = _NotSet()
#: How a reveal cell refuses, in one line, before its prediction is made.
REFUSAL = "make your prediction in the cell above first: {problem} (this cell shows its answer, so it waits)"


def prediction(namespace: dict, *names: str) -> dict:
    """A prediction's values by name, read from the notebook's ``globals()``: a name not set yet reads
    :data:`NOT_SET`, so the reveal cell refuses in one line instead of a ``NameError``.

    >>> prediction({"x": 3}, "x", "y")
    {'x': 3, 'y': <not set>}
    """
    return {name: namespace.get(name, NOT_SET) for name in names}


def commit(key: str, values: dict, slip: Callable[[dict], str | None], folder: str | Path | None = None) -> dict:
    """The prediction ``values`` (names -> plain values) committed under ``key``, before a reveal.

    ``slip(values)``: why the prediction is not made yet (its visible check's message), or None. Not made (a
    name :data:`NOT_SET`, or a slip): the reveal is refused in one line (:data:`REFUSAL`,
    :class:`~course_lib.lessons.l14_04.practice.PredictFirst`).
    Made, and not yet committed: written to the record now. Committed before: the committed values, which
    the reveal shows (and the grader grades). While a grader runs nothing is refused or written. ``folder``:
    where the record lies (default: :func:`assignment_folder`; outside an assignment's folder nothing is
    recorded).
    """
    from .practice import PredictFirst

    if grading():
        return values
    missing = [name for name, value in values.items() if value is NOT_SET]
    problem = (f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set yet" if missing
               else slip(values))
    if problem:
        raise PredictFirst(REFUSAL.format(problem=problem))
    folder = Path(folder) if folder is not None else assignment_folder()
    if folder is None:
        return values
    record = read_record(folder)
    entry = record.get(key)
    if isinstance(entry, dict) and isinstance(entry.get("values"), dict):
        committed = entry["values"]
        if committed != json.loads(json.dumps(values)):
            print(f"prediction {key!r} was committed at its first reveal as {committed}; your notebook now says "
                  f"{values}:\nthe grader grades {committed}")
        return committed
    record[key] = {"values": values, "sha256": digest(key, values)}
    try:
        (folder / RECORD_NAME).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:            # a read-only folder: say so, reveal anyway (nothing can be recorded)
        print(f"(your prediction could not be recorded in {folder / RECORD_NAME}: {exc.strerror}; the grader "
              "will grade it as it stands)")
    return values


def plain(value: Any) -> Any:
    """A prediction's value as the record keeps it (JSON's plain types; anything else as its repr)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)

