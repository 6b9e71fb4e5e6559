"""Merge a batch's results into nbgrader's gradebook, from one process, idempotently.

Only the parent process writes ``gradebook.db`` (workers write per-student
records), so there are no write races. Every merge sets every autograded grade
of every student in the batch explicitly, so merging twice gives the same
database, and nothing from an earlier run survives:

- a student whose new submission is missing, corrupt, or failed in the grader
  loses their gradebook submission (no stale scores);
- when the handed-in files changed since the last merge, manual scores and
  overrides given in formgrader are cleared too (they graded other text).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..source.assignment import ANSWER, Assignment, AssignmentSpec
from ..contract.cells import grade_id as cell_grade_id
from .layout import GRADES_JSON, db_url
from ..contract.results import GRADER_ERROR, INVALID, MISSING, StudentResult, write_json

STATE = ".gradebook-state.json"
#: Statuses that leave no submission in the gradebook (and so none in formgrader).
NOT_IN_GRADEBOOK = (MISSING, INVALID, GRADER_ERROR)


def add_side_cells(results_dir: Path, assignment: Assignment, spec: AssignmentSpec) -> None:
    """The lesson's side-check questions are grade cells of the first notebook as far as the gradebook is concerned."""
    from nbgrader.api import Gradebook

    notebook = Path(assignment.notebook_name).stem
    with Gradebook(db_url(results_dir)) as gb:
        for gid, points in spec.side.items():
            gb.update_or_create_grade_cell(gid, notebook, assignment.name, max_score=points, cell_type="code")


def open_gradebook(results_dir: Path):
    """nbgrader's Gradebook on ``results_dir``'s database (a context manager). One kept open across
    many :func:`merge` calls saves each the ~10 ms of CPU of opening it (engine, session, schema
    check); each commit expires what the session read, so what formgrader writes meanwhile is seen."""
    from nbgrader.api import Gradebook

    return Gradebook(db_url(results_dir))


def merge(results_dir: Path, assignment: Assignment, spec: AssignmentSpec,
          results: dict[str, StudentResult], remove: list[str] = (), gradebook=None) -> None:
    """Write ``results`` into the gradebook; drop the submissions of students in ``remove``. With
    ``gradebook`` (from :func:`open_gradebook`), in that open one; else in one opened for this call."""
    from contextlib import nullcontext

    from nbgrader.api import Grade, MissingEntry

    results_dir = Path(results_dir)
    state_path = results_dir / STATE
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        state = {}
    # per notebook (nbgrader names it by its stem): each grade cell's question key, and the hand-graded ones
    keys = {Path(nb.name).stem: {c.grade_id: c.key for c in (*nb.tests, *nb.manual)} for nb in spec.notebooks}
    answers = {Path(nb.name).stem: {c.grade_id: c.key for c in nb.manual if c.kind == ANSWER} for nb in spec.notebooks}
    manual_ids = {Path(nb.name).stem: {c.grade_id for c in nb.manual} for nb in spec.notebooks}
    opened = nullcontext(gradebook) if gradebook is not None else open_gradebook(results_dir)
    with warnings.catch_warnings(), opened as gb:
        # nbgrader's add_submission trips SQLAlchemy 2 autoflush warnings; they are harmless
        warnings.simplefilter("ignore")
        db = gb.db
        for sid in remove:
            _remove(gb, assignment.name, sid, MissingEntry)
            state.pop(sid, None)
        for sid, r in sorted(results.items()):
            gb.update_or_create_student(sid)
            if r.status in NOT_IN_GRADEBOOK:
                _remove(gb, assignment.name, sid, MissingEntry)
                state.pop(sid, None)
                continue
            changed = state.get(sid) not in (None, r.submission_sha)
            submission = gb.update_or_create_submission(assignment.name, sid)
            unanswered = set(r.unanswered)
            for sub_nb in submission.notebooks:
                if sub_nb.name in keys:
                    _merge_notebook(db, Grade, sub_nb, r, changed, keys[sub_nb.name], answers[sub_nb.name],
                                    manual_ids[sub_nb.name], unanswered)
            db.commit()
            state[sid] = r.submission_sha
    write_json(state_path, state)


def _merge_notebook(db, grade_class, sub_nb, r: StudentResult, changed: bool, keys: dict[str, str],
                    answers: dict[str, str], manual_ids: set[str], unanswered: set[str]) -> None:
    """Set every grade of one submitted notebook, as nbgrader's SaveAutoGrades would: tests (and side
    checks) their autograded score; an answer handed back as released 0, "No response.", nothing to
    grade; every other answer and task is a person's to grade."""
    by_name = {g.name: g for g in sub_nb.grades}
    for cell in sub_nb.notebook.grade_cells:  # side-check cells added after the submission existed
        if cell.name not in by_name:
            grade = grade_class(cell_id=cell.id, notebook=sub_nb)
            db.add(grade)
            by_name[cell.name] = grade
    for name, grade in by_name.items():
        if changed:
            grade.manual_score = None
            grade.extra_credit = None
        if name in manual_ids:
            blank = answers.get(name) in unanswered
            grade.auto_score = 0.0 if blank else None
            grade.needs_manual_grade = not blank or grade.manual_score is not None
            continue
        q = r.questions.get(keys.get(name, name))
        grade.auto_score = q.score if q is not None else 0.0
        grade.needs_manual_grade = grade.manual_score is not None
    for comment in sub_nb.comments:
        if changed:
            comment.manual_comment = None
        comment.auto_comment = "No response." if answers.get(comment.name) in unanswered else None


def _remove(gb, assignment: str, sid: str, missing_entry) -> None:
    try:
        gb.remove_submission(assignment, sid)
    except missing_entry:
        pass


def manual_scores(results_dir: Path, assignment: Assignment, spec: AssignmentSpec) -> dict[str, float | None]:
    """Hand-graded points per student, over every notebook (None where something is still to be graded;
    an answer handed back as released counts its 0, as nbgrader does)."""
    from nbgrader.api import Gradebook, MissingEntry

    if not (Path(results_dir) / "gradebook.db").is_file():
        return {}
    manual_ids = {Path(nb.name).stem: {c.grade_id for c in nb.manual} for nb in spec.notebooks}
    out: dict[str, float | None] = {}
    with Gradebook(db_url(results_dir)) as gb:
        try:
            submissions = gb.assignment_submissions(assignment.name)
        except MissingEntry:
            return
        for sub in submissions:
            scores = [_hand_score(g) for sub_nb in sub.notebooks for g in sub_nb.grades
                      if g.name in manual_ids.get(sub_nb.name, ())]
            out[sub.student.id] = None if any(s is None for s in scores) else float(sum(scores))
    return out


def _hand_score(grade) -> float | None:
    """A hand-graded cell's points: a person's, or nbgrader's 0 for no response; None while still to grade."""
    if grade.manual_score is not None:
        return float(grade.manual_score)
    if not grade.needs_manual_grade and grade.auto_score is not None:
        return float(grade.auto_score)
    return None


def _submitted_notebooks(results_dir: Path, assignment: Assignment):
    """(student id, a submitted notebook's gradebook row) for every notebook of every submission in the
    gradebook, read inside one open gradebook (nothing when there is none yet)."""
    from nbgrader.api import Gradebook, MissingEntry

    if not (Path(results_dir) / "gradebook.db").is_file():
        return
    with Gradebook(db_url(results_dir)) as gb:
        try:
            submissions = gb.assignment_submissions(assignment.name)
        except MissingEntry:
            return
        for sub in submissions:
            for sub_nb in sub.notebooks:
                yield sub.student.id, sub_nb


@dataclass(frozen=True)
class HandComments:
    """What an instructor wrote in formgrader's comment boxes for one student."""

    written: str = ""
    """On the hand-graded answers (several such cells: joined by a blank line)."""
    cells: dict[str, str] = field(default_factory=dict)
    """On any other solution cell, by its grade_id."""

    def lines(self) -> list[str]:
        """``written answer: ...`` first, then ``<cell>: ...`` in cell order.

        >>> HandComments("clear and right", {"answer_kv": "check the units"}).lines()
        ['written answer: clear and right', 'answer_kv: check the units']
        """
        return ([f"written answer: {self.written}"] if self.written else []) + \
            [f"{cell}: {text}" for cell, text in self.cells.items()]

    def as_dict(self) -> dict[str, str]:
        """``{"written answer": ..., <cell>: ...}``, as grades.json and Gradescope's extra_data carry them.

        >>> HandComments("clear", {"answer_kv": "units"}).as_dict()
        {'written answer': 'clear', 'answer_kv': 'units'}
        """
        return {**({"written answer": self.written} if self.written else {}), **self.cells}


def manual_comments(results_dir: Path, assignment: Assignment, spec: AssignmentSpec) -> dict[str, HandComments]:
    """The comments entered in formgrader, per student who has any (empty boxes are left out).

    formgrader keeps one comment box per solution cell of each submitted notebook (nbgrader's
    ``Comment.manual_comment``); a hand-graded answer's box is under that answer's grade_id.
    """
    manual_ids = [c.grade_id for c in spec.manual]
    order = {cell_grade_id(cell): i for nb in spec.notebooks for i, cell in enumerate(nb.nb.cells)}
    texts_by: dict[str, dict[str, str]] = {}
    for sid, sub_nb in _submitted_notebooks(results_dir, assignment):
        texts = {c.name: c.manual_comment.strip() for c in sub_nb.comments
                 if c.manual_comment and c.manual_comment.strip()}
        texts_by.setdefault(sid, {}).update(texts)
    out: dict[str, HandComments] = {}
    for sid, texts in texts_by.items():
        if texts:
            cells = sorted((n for n in texts if n not in manual_ids), key=lambda n: order.get(n, len(order)))
            out[sid] = HandComments(written="\n\n".join(texts[n] for n in manual_ids if n in texts),
                                    cells={n: texts[n] for n in cells})
    return out


@dataclass(frozen=True)
class HandGrade:
    """What a person gave one student in formgrader: the points of each hand-graded answer or task and
    every comment, read from the gradebook."""

    score: float | None
    """The hand-graded points together; None while one of them is still to be graded."""
    cells: dict[str, float | None] = field(default_factory=dict)
    """Each hand-graded cell's points by its key (:attr:`~autograder.source.assignment.GradedCell.key`): None while
    still to grade; an answer handed back as released has nbgrader's 0."""
    comments: HandComments = field(default_factory=HandComments)
    """The comments, as :func:`manual_comments` reads them."""
    cell_comments: dict[str, str] = field(default_factory=dict)
    """Each hand-graded cell's own comment by its key (empty boxes left out)."""

    @property
    def graded(self) -> bool:
        """True once every hand-graded cell has its points.

        >>> HandGrade(2.0, {"explain": 2.0}).graded, HandGrade(None, {"explain": None}).graded
        (True, False)
        """
        return self.score is not None


def hand_grades(results_dir: Path, assignment: Assignment, spec: AssignmentSpec) -> dict[str, HandGrade]:
    """Every student's :class:`HandGrade`, from the gradebook (nothing before the first merge).

    ``score`` agrees with :func:`manual_scores` and ``comments`` with :func:`manual_comments`: this
    adds each hand-graded cell's own points and comment, for the feedback page and grades.json.
    """
    scores = manual_scores(results_dir, assignment, spec) or {}
    comments = manual_comments(results_dir, assignment, spec)
    keys = {(Path(nb.name).stem, c.grade_id): c.key for nb in spec.notebooks for c in nb.manual}
    cells: dict[str, dict[str, float | None]] = {}
    texts: dict[str, dict[str, str]] = {}
    for sid, sub_nb in _submitted_notebooks(results_dir, assignment):
        for g in sub_nb.grades:
            key = keys.get((sub_nb.name, g.name))
            if key is not None:
                cells.setdefault(sid, {})[key] = _hand_score(g)
        for c in sub_nb.comments:
            key = keys.get((sub_nb.name, c.name))
            if key is not None and c.manual_comment and c.manual_comment.strip():
                texts.setdefault(sid, {})[key] = c.manual_comment.strip()
    return {sid: HandGrade(scores.get(sid), cells.get(sid, {}), comments.get(sid, HandComments()), texts.get(sid, {}))
            for sid in set(scores) | set(cells)}


def grades_json(assignment: str, results: dict[str, StudentResult],
                hand: dict[str, HandGrade] | None = None) -> dict:
    """grades.json's content (its shape: :mod:`autograder.contract.results`): each student's autograded result with
    what formgrader holds for them (points given by hand, comments).

    >>> from autograder.contract.results import QuestionResult
    >>> r = StudentResult("amy", "graded", 3.0, 5.0, 3.0, True, {"test_a": QuestionResult(3.0, 5.0, "failed", "a; b",
    ...                   ["a", "b"])})
    >>> e = grades_json("ps1", {"amy": r}, {"amy": HandGrade(2.0, {"explain": 2.0}, HandComments("good"))})["students"]["amy"]
    >>> e["score"], e["manual_score"], e["total_score"], e["needs_manual_grading"], e["comments"], e["questions"]["test_a"]["parts"]
    (3.0, 2.0, 5.0, False, {'written answer': 'good'}, ['a', 'b'])
    >>> grades_json("ps1", {"amy": r})["students"]["amy"]["needs_manual_grading"]
    True
    """
    hand = hand or {}
    students = {}
    for sid, r in sorted(results.items()):
        h = hand.get(sid)
        students[sid] = r.grades_entry(h.score if h else None, h.comments.as_dict() if h else None)
    return {"assignment": assignment, "students": students}


def update_grades_json(results_dir: Path, assignment: Assignment, records: dict[str, StudentResult],
                       hand: dict[str, HandGrade]) -> None:
    """Rewrite grades.json for the students it lists, with what formgrader holds for them (nothing when
    there is no grades.json: no autograde run has finished)."""
    path = Path(results_dir) / GRADES_JSON
    try:
        listed = json.loads(path.read_text())["students"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    write_json(path, grades_json(assignment.name, {sid: r for sid, r in records.items() if sid in listed}, hand))
