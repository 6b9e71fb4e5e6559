"""``course-grade export``: grades.json, grades.csv, Gradescope results JSON and the feedback pages, from an
autograde run.

Run it again after grading the written answer in formgrader: the manual points
and every comment entered there come from the gradebook into every output (grades.json's
``manual_score``, ``total_score``, ``comments`` and ``needs_manual_grading``; grades.csv's
``comments`` column; in the Gradescope JSON, the written answer's comment in its test and the
others in the output; on the learner's page, the written answer's points and comment below it).
A question of several parts lists each failed part (grades.json's ``parts``, grades.csv's
``to_look_at``, the Gradescope test's output, a list on the page). A failed submission shows its
status in every export, so it never reads as a plain 0.

Gradescope format (https://gradescope-autograders.readthedocs.io/en/latest/specs/, from
gradescope/autograder_samples docs/specs.md)::

    {"score": 31.0, "output": "...", "tests": [{"name": "test_kv_per_token", "score": 3.0,
     "max_score": 3.0, "status": "passed", "output": "correct", "visibility": "visible"}, ...,
     {"name": "written answer (3 points, graded by hand)", "output": "pending: ...", "tags": ["pending"]}],
     "extra_data": {"status": "graded", ...}}

The spec knows two test statuses, ``passed`` and ``failed`` ("You can omit score information to add
test cases that serve as informational checks"), and a top-level ``score`` "overrides total of
tests". So a written answer not graded yet is such an informational test: no score, no maximum,
no status, tagged ``pending`` (on Gradescope its points come from a manually graded question of
the outline, not from the autograder). Once graded in formgrader it is a test with its score and
maximum. The top-level score is always the sum of the tests' scores.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..source.assignment import load_source
from ..errors import AutograderError
from .gradebook import HandComments, grades_json, hand_grades
from .layout import GRADES_CSV, GRADES_JSON, assignment_from_results, gradescope_path, load_records
from ..contract.results import GRADED, StudentResult, write_atomic, write_json

CSV_FIELDS = ["student_id", "status", "score", "max_score", "manual_score", "manual_max_score",
              "needs_manual_grading", "total_score", "total_max_score", "message", "comments", "to_look_at"]
"""``to_look_at``: each question that lost points and why, one line per failed part (:func:`question_lines`)."""
#: The hand-graded answer's test in the Gradescope JSON while nobody has graded it.
PENDING = "pending"
#: What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection"): one of ``= + - @`` (or a
#: tab or CR) at its start, after leading spaces or quotes, or after a separator that some spreadsheet
#: splits on when it imports (``;`` in many locales, ``,``, tab, ``|``, a line break).
FORMULA = re.compile(r"""(?:^|[;,\t|\r\n])[\s"']*[=+\-@]|^[\t\r]""")
#: Where a guard quote goes: the start of the field and after every separator, before the spaces or
#: quotes that lead to a formula's first character.
_FORMULA_STARTS = re.compile(r"""(^|[;,\t|\r\n])(?=[\s"']*[=+\-@])|^(?=[\t\r])""")
#: Characters that make a field quoted in grades.csv: a separator of any common locale, a quote, a line break.
QUOTED = frozenset(',;\t|\r\n"')


def csv_safe(value):
    """A CSV field that no spreadsheet runs: wherever a formula could start (:data:`FORMULA`), at the start
    or after a separator a spreadsheet may split on, a single quote goes in front of it, as OWASP's
    CSV-injection guidance says (the quote shows; the formula never runs). Read with ``;`` as its
    separator, ``x;=1+2;y`` gives the cells ``x``, ``'=1+2`` and ``y``: none a formula.

    >>> csv_safe("=1+2"), csv_safe(" =2+3"), csv_safe("x;=1+2;@SUM(1+1);y"), csv_safe(-1.0)
    ("'=1+2", "' =2+3", "x;'=1+2;'@SUM(1+1);y", -1.0)
    >>> csv_safe("jean-luc+tag@uni.edu"), csv_safe("3 - 1 = 2")
    ('jean-luc+tag@uni.edu', '3 - 1 = 2')
    """
    if isinstance(value, str) and FORMULA.search(value):
        return _FORMULA_STARTS.sub(lambda m: (m.group(1) or "") + "'", value)
    return value


def csv_field(value) -> str:
    """One field of grades.csv as written: :func:`csv_safe`, then quoted (quotes doubled) when it holds a
    separator of any common locale (:data:`QUOTED`) or starts or ends with a space, so a spreadsheet that
    splits on ``;``, a tab or ``|`` keeps it whole as well as one that splits on ``,``.

    >>> csv_field("alice"), csv_field(2.5), csv_field(None), csv_field("a;b"), csv_field('a "b" c')
    ('alice', '2.5', '', '"a;b"', '"a ""b"" c"')
    """
    text = "" if value is None else str(csv_safe(value))
    if QUOTED.intersection(text) or text[:1].isspace() or text[-1:].isspace():
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_row(values) -> str:
    """One line of grades.csv (:func:`csv_field` each, comma-separated)."""
    return ",".join(csv_field(v) for v in values) + "\n"


@dataclass
class ExportResult:
    """What ``export`` wrote."""

    csv: str
    """RESULTS_DIR/grades.csv: one row per student, one column per question."""
    gradescope: list[str]
    """RESULTS_DIR/gradescope/<student>.json, one per student."""
    failed: list[str] = field(default_factory=list)
    """Students whose Gradescope file could not be written, with why (the others were)."""
    feedback: list[str] = field(default_factory=list)
    """The feedback pages rewritten (RESULTS_DIR/feedback/<student>/<assignment>/<notebook>.html)."""
    feedback_failed: list[str] = field(default_factory=list)
    """Students whose feedback page could not be rendered whole (it shows their scores only)."""


def gradescope_json(r: StudentResult, manual_score: float | None, comments: HandComments | None = None) -> dict:
    """One student's Gradescope results: every autograded question, the written answer (pending until
    graded by hand), the comments from formgrader; the top-level score is the tests' total.

    >>> from autograder.contract.results import QuestionResult
    >>> r = StudentResult("amy", "graded", 3.0, 5.0, 3.0, True, {
    ...     "test_a": QuestionResult(3.0, 3.0, "passed", "correct"), "test_b": QuestionResult(0.0, 2.0, "failed", "no")})
    >>> data = gradescope_json(r, None)
    >>> data["score"], [t.get("score") for t in data["tests"]], data["tests"][-1]["tags"]
    (3.0, [3.0, 0.0, None], ['pending'])
    >>> graded = gradescope_json(r, 2.0, HandComments("good, but name the pool"))
    >>> graded["score"], graded["tests"][-1]["score"], graded["tests"][-1]["max_score"]
    (5.0, 2.0, 3.0)
    >>> graded["tests"][-1]["output"]
    'graded by hand: 2 of 3\\n\\ncomment: good, but name the pool'
    """
    comments = comments or HandComments()
    tests = [{"name": q.label or gid, "score": q.score, "max_score": q.max_score,
              "status": "passed" if q.status == "passed" else "failed",
              "output": _test_output(q),
              "visibility": "visible"} for gid, q in r.questions.items()]
    if r.manual_max_score:
        written = {"name": f"written answer ({r.manual_max_score:g} points, graded by hand)", "visibility": "visible"}
        if manual_score is None:
            written.update(output=f"{PENDING}: graded by hand; its {r.manual_max_score:g} points are not in this "
                                  f"score yet", tags=[PENDING])
        else:
            written.update(score=manual_score, max_score=r.manual_max_score,
                           output=f"graded by hand: {manual_score:g} of {r.manual_max_score:g}")
        if comments.written:
            written["output"] += f"\n\ncomment: {comments.written}"
        tests.append(written)
    headline = f"status: {r.status}" + (f": {r.message}" if r.message else "")
    if comments.cells:
        headline += "\n\nComments from your grader:\n" + "\n".join(f"  {c}: {text}" for c, text in comments.cells.items())
    return {"score": sum(t["score"] for t in tests if "score" in t), "output": headline, "tests": tests,
            "extra_data": {"status": r.status, "autograded_score": r.score, "autograded_max_score": r.max_score,
                           "manual_score": manual_score, "manual_max_score": r.manual_max_score,
                           "needs_manual_grading": r.needs_manual_grading and manual_score is None,
                           "comments": comments.as_dict()}}


def question_lines(r: StudentResult) -> list[str]:
    """Every question that lost points, with what to look at: one line per failed part.

    >>> from autograder.contract.results import QuestionResult
    >>> question_lines(StudentResult("amy", "graded", 1.0, 5.0, 0.0, False, {
    ...     "test_a": QuestionResult(1.0, 1.0, "passed", "correct"),
    ...     "test_b": QuestionResult(1.0, 3.0, "failed", "partial credit, 1 of 3: x; y", ["x", "y"]),
    ...     "test_c": QuestionResult(0.0, 1.0, "failed", "z")}))
    ['test_b: x', 'test_b: y', 'test_c: z']
    """
    out = []
    for gid, q in r.questions.items():
        if q.status != "passed":
            out += [f"{q.label or gid}: {part}" for part in (q.parts or [q.message])]
    return out


def _test_output(q) -> str:
    """A test's output on Gradescope: its message, then each failed part on a line of its own."""
    text = q.message if q.status != "not_run" else f"(not run) {q.message}"
    if len(q.parts) > 1:
        text += "\n\nWhat to look at, part by part:\n" + "\n".join(f"- {part}" for part in q.parts)
    return text


def csv_text(results: dict[str, StudentResult], manual: dict[str, float | None],
             comments: dict[str, HandComments] | None = None) -> str:
    question_ids: list[str] = []
    labels: dict[str, str] = {}
    for r in results.values():
        for gid, q in r.questions.items():
            if gid not in question_ids:
                question_ids.append(gid)
            labels[gid] = labels.get(gid) or q.label
    fields = CSV_FIELDS + question_ids
    # a column per test, headed by its label (its key where that would repeat a fixed column's name)
    lines = [csv_row(CSV_FIELDS + [gid if labels.get(gid) in (None, "", *CSV_FIELDS) else labels[gid]
                                   for gid in question_ids])]
    for sid, r in sorted(results.items()):
        m = manual.get(sid)
        row = {"student_id": sid, "status": r.status, "score": r.score, "max_score": r.max_score,
               "manual_score": "" if m is None else m, "manual_max_score": r.manual_max_score,
               "needs_manual_grading": r.needs_manual_grading and m is None,
               "total_score": r.score + (m or 0.0), "total_max_score": r.max_score + r.manual_max_score,
               "message": r.message if r.status != GRADED else "",
               "comments": "\n".join((comments or {}).get(sid, HandComments()).lines()),
               "to_look_at": "\n".join(question_lines(r))}
        row.update({gid: q.score for gid, q in r.questions.items()})
        # Every field a learner can reach (the id is a folder name, the message may quote the notebook).
        lines.append(csv_row(row.get(f, "") for f in fields))
    return "".join(lines)


def write_exports(results_dir: Path, results: dict[str, StudentResult], manual: dict[str, float | None],
                  comments: dict[str, HandComments] | None = None) -> ExportResult:
    results_dir = Path(results_dir)
    comments = comments or {}
    write_atomic(results_dir / GRADES_CSV, csv_text(results, manual, comments))
    files, failed = [], []
    for sid, r in sorted(results.items()):
        path = gradescope_path(results_dir, sid)
        try:
            write_json(path, gradescope_json(r, manual.get(sid), comments.get(sid)))
        except Exception as e:  # noqa: BLE001 - one odd record never stops the class's export
            failed.append(f"{sid}: {type(e).__name__}: {e}"[:300])
            continue
        files.append(str(path))
    return ExportResult(csv=str(results_dir / GRADES_CSV), gradescope=files, failed=failed)


def main(results_dir: str | Path = "results", feedback: bool = True) -> ExportResult:
    """Rewrite grades.json, grades.csv, the Gradescope JSONs and (``feedback``) the feedback pages from
    grades.json's students and the gradebook: what was graded by hand in formgrader reaches all of them.

    The assignment is the one the last autograde run into ``results_dir`` graded (its batch.json).
    """
    results_dir = Path(results_dir)
    assignment = assignment_from_results(results_dir)
    try:
        listed = json.loads((results_dir / GRADES_JSON).read_text())["students"]
    except (OSError, ValueError, KeyError):
        raise AutograderError(f"{results_dir}/grades.json is missing or unreadable; run "
                              f"`course-grade autograde` first") from None
    records = {sid: r for sid, r in load_records(results_dir).items() if sid in listed}
    spec = load_source(assignment)
    hand = hand_grades(results_dir, assignment, spec)
    write_json(results_dir / GRADES_JSON, grades_json(assignment.name, records, hand))
    result = write_exports(results_dir, records, {sid: h.score for sid, h in hand.items()},
                           {sid: h.comments for sid, h in hand.items()})
    if feedback:   # the learners' pages show the hand-graded answers too
        from .feedback import main as write_pages

        pages = write_pages(results_dir, students=sorted(records), hand=hand)
        result.feedback, result.feedback_failed = pages.files, pages.failed
    return result
