"""Score an executed notebook's test cells, in the grader's process: by a trusted check, or as nbgrader does.

A test cell whose hidden part records an answer and whose lesson has a check for it
(:attr:`~autograder.source.assignment.GradedCell.checked`) is scored from that answer alone: the
:data:`~autograder.contract.answers.ANSWER_MIME` output of that very cell, plain JSON values, scored by the
trusted check. Errors, tracebacks and stderr decide nothing; they only explain a missing answer.

=========================================  =======================================
In the test cell's outputs                  Result
=========================================  =======================================
one answer (or identical repeats), passes   full points
one answer, some parts right                that share of the points (the check's ``fraction``)
one answer, fails the check                 0, the check's message
no answer                                   0, why (the error shown, or not run)
an answer tagged with another grade_id      0, "recorded for another test"
several different answers                   0, "conflicting answers"
=========================================  =======================================

Every other test cell is scored by nbgrader's own rule (``nbgrader.utils.determine_grade``): an
error or anything on stderr gives 0; else the first ``execute_result`` that reads as a number is
partial credit; else full points. What the grader knows beyond stock nbgrader also counts: a cell
that was not run, or that timed out, died or hit a limit, scores 0 with what happened.

>>> cell = {"outputs": [{"output_type": "execute_result", "data": {"text/plain": "0.5"}}]}
>>> nbgrader_rule(cell, 1.0)
(0.5, 'partial credit: 0.5 of 1')
>>> nbgrader_rule({"outputs": [{"output_type": "stream", "name": "stderr", "text": "careful\\n"}]}, 2.0)
(0.0, 'the test wrote to stderr: careful')
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..contract.answers import ANSWER_MIME, check_credit
from ..source.assignment import GradedCell, NotebookSpec
from ..contract.cells import grade_id
from .execute import Execution
from ..contract.jsonshape import shape
from ..contract.results import FAILED, NOT_RUN, PASSED, QuestionResult
from ..contract.text import one_line

#: The most characters of learner text (an exception's value, a line on stderr) a message quotes.
LEARNER_CHARS = 200
#: The deepest an answer payload given as JSON text may nest (a kernel message's own bound, execute.py).
MAX_ANSWER_DEPTH = 100


def answers_in(cell) -> list[Any]:
    """The answer payloads displayed by one cell, as plain JSON (a payload that is not, or nests deeper than
    :data:`MAX_ANSWER_DEPTH`, is one without a grade_id).

    >>> answers_in({"outputs": [{"output_type": "display_data", "data": {ANSWER_MIME: "[" * 30_000}}]})
    [{'grade_id': None, 'values': None}]
    """
    found = []
    for out in cell.get("outputs", []):
        if out.get("output_type") in ("display_data", "execute_result"):
            payload = (out.get("data") or {}).get(ANSWER_MIME)
            if payload is None:
                continue
            if isinstance(payload, str):
                try:   # the learner can display this type too: bounded before it is parsed (a RecursionError before)
                    shape(payload.encode("utf-8", "replace"), max_depth=MAX_ANSWER_DEPTH)
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
            return one_line((text.splitlines() or ["an error"])[0], LEARNER_CHARS)
    return None


def nbgrader_rule(cell, points: float) -> tuple[float, str]:
    """(score, message) by ``nbgrader.utils.determine_grade`` for a test cell's outputs, in their order:
    an error or a stderr stream gives 0, an ``execute_result`` gives its number as partial credit
    (full points when it is not a number or is negative, as nbgrader warns and does; above the
    points, which nbgrader refuses, 0 here), nothing of either gives full points."""
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "error":
            return 0.0, f"the test failed: {_error_line(cell)}"
        if kind == "stream" and out.get("name") == "stderr":
            text = _joined(out.get("text", "")).strip().splitlines()
            return 0.0, "the test wrote to stderr" + (f": {one_line(text[0], LEARNER_CHARS)}" if text else "")
        if kind == "execute_result":
            value = (out.get("data") or {}).get("text/plain")
            if isinstance(value, list):
                value = value[0] if len(value) == 1 else None
            try:
                grade = float(value)
            except (TypeError, ValueError):
                return points, "correct"
            if grade > points:
                return 0.0, f"the test gave {grade:g} points, more than its {points:g}"
            if grade < 0 or grade != grade:
                return points, "correct"
            return grade, ("correct" if grade == points else f"partial credit: {grade:g} of {points:g}")
    return points, "correct"


def _joined(text) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


def score_tests(execution: Execution, spec: NotebookSpec, checks: Mapping[str, Any]) -> dict[str, QuestionResult]:
    """A QuestionResult for every autograded test cell of one notebook, by its key, in source order."""
    positions = {}
    for i, cell in enumerate(execution.nb.cells):
        gid = grade_id(cell)
        if gid is not None and gid not in positions:
            positions[gid] = i
    broken = {event.index: event.message for event in execution.events}
    return {test.key: _score_one(execution, positions.get(test.grade_id), test, checks, broken) for test in spec.tests}


def _score_one(execution: Execution, index: int | None, test: GradedCell, checks: Mapping[str, Any],
               broken: dict[int, str]) -> QuestionResult:
    points = test.points

    def fail(message: str, status: str = FAILED) -> QuestionResult:
        return QuestionResult(score=0.0, max_score=points, status=status, message=message)

    if index is None:  # cannot happen after restore_cells, but never trust that silently
        return fail("the test cell is missing from the graded notebook", NOT_RUN)
    cell = execution.nb.cells[index]
    stopped = execution.stopped_at
    if not test.checked:
        if stopped is not None and stopped < index:
            return fail(f"not run: {execution.message}", NOT_RUN)
        if stopped is not None and stopped == index:
            return fail(f"stopped in this test: {execution.message}", NOT_RUN)
        if index in broken:   # it timed out, died or hit a limit: whatever it showed proves nothing
            return fail(f"the test did not finish: {broken[index]}")
        if cell.get("execution_count") is None:
            return fail("not run", NOT_RUN)
        score, message = nbgrader_rule(cell, points)
        return QuestionResult(score=score, max_score=points, status=PASSED if score == points else FAILED,
                              message=message)
    payloads = answers_in(cell)
    if not payloads:
        if stopped is not None and stopped < index:
            return fail(f"not run: {execution.message}", NOT_RUN)
        error = _error_line(cell)
        if stopped is not None and stopped == index:
            return fail(f"stopped in this test: {execution.message}" + (f" ({error})" if error else ""), NOT_RUN)
        if error:
            return fail(f"the test failed: {error}")
        return fail("no answer was recorded: the hidden part of this test did not run")
    others = sorted({str(p.get("grade_id")) for p in payloads if isinstance(p, dict)} - {test.grade_id})
    if others or not all(isinstance(p, dict) for p in payloads):
        return fail(f"an answer recorded for another test ({', '.join(others) or 'malformed'}) appeared in "
                    f"this test's output; it is not accepted")
    distinct = {json.dumps(p.get("values"), sort_keys=True) for p in payloads}
    if len(distinct) > 1:
        return fail(f"{len(distinct)} conflicting answers were recorded in this test; none is accepted")
    fraction, message = check_credit(checks, test.grade_id, payloads[0].get("values"))
    parts = part_messages(message)
    message = "; ".join(parts)
    if fraction == 1.0:
        return QuestionResult(score=points, max_score=points, status=PASSED, message=message or "correct")
    parts = parts if len(parts) > 1 else []
    if fraction > 0:     # sub-answers scored on their own: the check says which part is off
        earned = round(points * fraction, 4)
        return QuestionResult(score=earned, max_score=points, status=FAILED, parts=parts,
                              message=f"partial credit, {earned:g} of {points:g}: {message or 'a part is off'}")
    return QuestionResult(score=0.0, max_score=points, status=FAILED, parts=parts,
                          message=message or "the answer is not correct")


def part_messages(message: str) -> list[str]:
    """A check's message as its failed parts: one per line (a check of several parts writes each failed
    part's message on a line of its own), blank lines dropped, each one line of at most 400 characters.

    >>> part_messages("decision: max_model_len is short\\nreason: name the knob\\n")
    ['decision: max_model_len is short', 'reason: name the knob']
    >>> part_messages("")
    []
    """
    return [one_line(line, 400) for line in str(message).split("\n") if line.strip()]
