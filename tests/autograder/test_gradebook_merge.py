"""Merging into one gradebook kept open for a whole batch (the writer thread's way) leaves exactly the
database that merges each opening their own leave, also when an instructor writes to it meanwhile
(formgrader giving a manual score) and a resubmission must clear that score."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from nbgrader.api import Gradebook

from autograder.publish import course
from autograder.source.assignment import load_source
from lessons.l14_04.examples import this_assignment
from lessons.l14_04.lab import QUESTIONS as LAB_QUESTIONS
from autograder.batch.autograde import _ensure_course
from autograder.publish.gradebook import merge, open_gradebook
from autograder.publish.layout import db_url
from autograder.contract.results import QuestionResult, StudentResult


def _rows(db: Path) -> dict[str, list[str]]:
    with sqlite3.connect(db) as c:
        tables = [t for (t,) in c.execute("select name from sqlite_master where type='table'")]
        return {t: sorted(re.sub(r"[0-9a-f]{32}", "ID", repr(r)) for r in c.execute(f"select * from {t}"))
                for t in tables}


def _result(sid: str, sha: str, spec, failed: str = "") -> StudentResult:
    points = {c.grade_id: c.points for c in spec.tests} | LAB_QUESTIONS
    questions = {gid: QuestionResult(0.0 if gid == failed else p, p, "failed" if gid == failed else "passed", "")
                 for gid, p in points.items()}
    return StudentResult(student_id=sid, status="graded", score=sum(q.score for q in questions.values()),
                         max_score=sum(points.values()), manual_max_score=sum(c.points for c in spec.manual),
                         needs_manual_grading=True, questions=questions, submission_sha=sha)


def _give_manual_score(results_dir: Path, sid: str, grade_id: str, score: float) -> None:
    """What formgrader does: its own connection, its own commit."""
    a = this_assignment()
    with Gradebook(db_url(results_dir)) as gb:
        gb.find_grade(grade_id, Path(a.notebook_name).stem, a.name, sid).manual_score = score
        gb.db.commit()


def test_one_open_gradebook_for_many_merges_is_the_same_as_one_per_merge(tmp_path, monkeypatch):
    monkeypatch.setenv(course.TEMPLATE_ENV, str(tmp_path / "cache"))
    a = this_assignment()
    spec = load_source(a)
    manual = spec.manual[0].grade_id
    first = spec.tests[0].grade_id
    steps = [{"ann": _result("ann", "sha-1", spec)},
             {"bob": _result("bob", "sha-1", spec, failed=first), "cat": _result("cat", "sha-1", spec)},
             "manual",                                            # formgrader scores ann's written answer
             {"bob": _result("bob", "sha-1", spec)},              # regraded, same hand-in: the scores stay
             {"ann": _result("ann", "sha-2", spec, failed=first)}]  # ann handed in again: it is cleared
    dbs = {}
    for how in ("kept open", "one each"):
        results_dir = tmp_path / how.replace(" ", "-")
        _ensure_course(results_dir, a)
        gradebook = open_gradebook(results_dir) if how == "kept open" else None
        manual_seen = []
        for step in steps:
            if step == "manual":
                _give_manual_score(results_dir, "ann", manual, 2.0)
                _give_manual_score(results_dir, "bob", first, 0.5)   # and overrides one of bob's autograded scores
            else:
                merge(results_dir, a, spec, step, gradebook=gradebook)
            with Gradebook(db_url(results_dir)) as gb:
                manual_seen.append(gb.find_grade(manual, Path(a.notebook_name).stem, a.name, "ann").manual_score)
        if gradebook is not None:
            gradebook.close()
        assert manual_seen == [None, None, 2.0, 2.0, None], how
        with Gradebook(db_url(results_dir)) as gb:
            scores = {s.student.id: s.score for s in gb.assignment_submissions(a.name)}
        full = sum(c.points for c in spec.tests) + sum(LAB_QUESTIONS.values())
        assert scores == {"ann": full - spec.tests[0].points, "bob": full - spec.tests[0].points + 0.5, "cat": full}, how
        dbs[how] = _rows(results_dir / "gradebook.db")
    assert dbs["kept open"] == dbs["one each"]
