"""Score the executed notebook from the answers its test cells recorded, in the grader's process.

For each autograded test cell (found by grade_id in the executed notebook), the
only thing that counts is the :data:`~autograder.collect.ANSWER_MIME` output of
that very cell: plain JSON values, scored by the trusted check. Errors,
tracebacks and stderr decide nothing; they only explain a missing answer.

=========================================  =======================================
In the test cell's outputs                  Result
=========================================  =======================================
one answer (or identical repeats), passes   full points
one answer, fails the check                 0, the check's message
no answer                                   0, why (the error shown, or not run)
an answer tagged with another grade_id      0, "recorded for another test"
several different answers                   0, "conflicting answers"
=========================================  =======================================
"""

from __future__ import annotations

import json
from typing import Any

from .assignment import SourceSpec, score_answer
from .cells import grade_id
from lessons.l14_04.collect import ANSWER_MIME
from .execute import Execution
from .results import FAILED, NOT_RUN, PASSED, QuestionResult


def answers_in(cell) -> list[Any]:
    """The answer payloads displayed by one cell, as plain JSON."""
    found = []
    for out in cell.get("outputs", []):
        if out.get("output_type") in ("display_data", "execute_result"):
            payload = (out.get("data") or {}).get(ANSWER_MIME)
            if payload is None:
                continue
            if isinstance(payload, str):
                try:
                    payload = json.loads(payload)
                except ValueError:
                    payload = {"grade_id": None, "values": None}
            found.append(json.loads(json.dumps(payload)))  # plain dicts, no NotebookNode
    return found


def _error_line(cell) -> str | None:
    """The error a cell stopped with, in one line: an assertion's own message, else "Name: value"."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            ename, evalue = str(out.get("ename", "Error")), str(out.get("evalue", "")).strip()
            text = evalue if ename == "AssertionError" and evalue else f"{ename}: {evalue}".strip().rstrip(":")
            return (text.splitlines() or ["an error"])[0][:300]
    return None


def score_tests(execution: Execution, spec: SourceSpec, checks_module: Any) -> dict[str, QuestionResult]:
    """A QuestionResult for every autograded test cell of the source, in source order."""
    positions = {}
    for i, cell in enumerate(execution.nb.cells):
        gid = grade_id(cell)
        if gid is not None and gid not in positions:
            positions[gid] = i
    results = {}
    for test in spec.tests:
        index = positions.get(test.grade_id)
        results[test.grade_id] = _score_one(execution, index, test.grade_id, test.points, checks_module)
    return results


def _score_one(execution: Execution, index: int | None, grade_id: str, points: float,
               checks_module: Any) -> QuestionResult:
    def fail(message: str, status: str = FAILED) -> QuestionResult:
        return QuestionResult(score=0.0, max_score=points, status=status, message=message)

    if index is None:  # cannot happen after restore_cells, but never trust that silently
        return fail("the test cell is missing from the graded notebook", NOT_RUN)
    cell = execution.nb.cells[index]
    payloads = answers_in(cell)
    if not payloads:
        stopped = execution.stopped_at
        if stopped is not None and stopped < index:
            return fail(f"not run: {execution.message}", NOT_RUN)
        error = _error_line(cell)
        if stopped is not None and stopped == index:
            return fail(f"stopped in this test: {execution.message}" + (f" ({error})" if error else ""), NOT_RUN)
        if error:
            return fail(f"the test failed: {error}")
        return fail("no answer was recorded: the hidden part of this test did not run")
    others = sorted({str(p.get("grade_id")) for p in payloads if isinstance(p, dict)} - {grade_id})
    if others or not all(isinstance(p, dict) for p in payloads):
        return fail(f"an answer recorded for another test ({', '.join(others) or 'malformed'}) appeared in "
                    f"this test's output; it is not accepted")
    distinct = {json.dumps(p.get("values"), sort_keys=True) for p in payloads}
    if len(distinct) > 1:
        return fail(f"{len(distinct)} conflicting answers were recorded in this test; none is accepted")
    passed, message = score_answer(checks_module, grade_id, payloads[0].get("values"))
    if passed:
        return QuestionResult(score=points, max_score=points, status=PASSED, message=message or "correct")
    return fail(message or "the answer is not correct")
