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

from .assignment import LAB_QUESTIONS, Assignment, SourceSpec
from .cells import grade_id as cell_grade_id
from .layout import db_url
from .results import GRADER_ERROR, INVALID, MISSING, StudentResult, write_json

STATE = ".gradebook-state.json"
#: Statuses that leave no submission in the gradebook (and so none in formgrader).
NOT_IN_GRADEBOOK = (MISSING, INVALID, GRADER_ERROR)


def add_lab_cells(results_dir: Path, assignment: Assignment) -> None:
    """The lab sub-checks are grade cells of the notebook as far as the gradebook is concerned."""
    from nbgrader.api import Gradebook

    notebook = Path(assignment.notebook_name).stem
    with Gradebook(db_url(results_dir)) as gb:
        for gid, points in LAB_QUESTIONS.items():
            gb.update_or_create_grade_cell(gid, notebook, assignment.name, max_score=points, cell_type="code")


def open_gradebook(results_dir: Path):
    """nbgrader's Gradebook on ``results_dir``'s database (a context manager). One kept open across
    many :func:`merge` calls saves each the ~10 ms of CPU of opening it (engine, session, schema
    check); each commit expires what the session read, so what formgrader writes meanwhile is seen."""
    from nbgrader.api import Gradebook

    return Gradebook(db_url(results_dir))


def merge(results_dir: Path, assignment: Assignment, spec: SourceSpec,
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
    notebook = Path(assignment.notebook_name).stem
    manual_ids = {c.grade_id for c in spec.manual}
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
            sub_nb = next(n for n in submission.notebooks if n.name == notebook)
            by_name = {g.name: g for g in sub_nb.grades}
            for cell in sub_nb.notebook.grade_cells:  # lab cells added after the submission existed
                if cell.name not in by_name:
                    grade = Grade(cell_id=cell.id, notebook=sub_nb)
                    db.add(grade)
                    by_name[cell.name] = grade
            for name, grade in by_name.items():
                if changed:
                    grade.manual_score = None
                    grade.extra_credit = None
                if name in manual_ids:
                    grade.auto_score = None
                    grade.needs_manual_grade = True
                    continue
                q = r.questions.get(name)
                grade.auto_score = q.score if q is not None else 0.0
                grade.needs_manual_grade = grade.manual_score is not None
            if changed:
                for comment in sub_nb.comments:
                    comment.manual_comment = None
            db.commit()
            state[sid] = r.submission_sha
    write_json(state_path, state)


def _remove(gb, assignment: str, sid: str, missing_entry) -> None:
    try:
        gb.remove_submission(assignment, sid)
    except missing_entry:
        pass


def _submitted_notebooks(results_dir: Path, assignment: Assignment):
    """(student id, the submitted notebook's gradebook row) for every submission in the gradebook,
    read inside one open gradebook (nothing when there is none yet)."""
    from nbgrader.api import Gradebook, MissingEntry

    if not (Path(results_dir) / "gradebook.db").is_file():
        return
    notebook = Path(assignment.notebook_name).stem
    with Gradebook(db_url(results_dir)) as gb:
        try:
            submissions = gb.assignment_submissions(assignment.name)
        except MissingEntry:
            return
        for sub in submissions:
            for sub_nb in sub.notebooks:
                if sub_nb.name == notebook:
                    yield sub.student.id, sub_nb


def manual_scores(results_dir: Path, assignment: Assignment, spec: SourceSpec) -> dict[str, float | None]:
    """Hand-given points per student (None where nobody graded the written answer yet)."""
    manual_ids = {c.grade_id for c in spec.manual}
    out: dict[str, float | None] = {}
    for sid, sub_nb in _submitted_notebooks(results_dir, assignment):
        scores = [g.manual_score for g in sub_nb.grades if g.name in manual_ids]
        out[sid] = None if any(s is None for s in scores) else float(sum(scores))
    return out


@dataclass(frozen=True)
class HandComments:
    """What an instructor wrote in formgrader's comment boxes for one student."""

    written: str = ""
    """On the hand-graded answer (several such cells: joined by a blank line)."""
    cells: dict[str, str] = field(default_factory=dict)
    """On any other solution cell, by its grade_id."""

    def lines(self) -> list[str]:
        """``written answer: ...`` first, then ``<cell>: ...`` in cell order.

        >>> HandComments("clear and right", {"answer_kv": "check the units"}).lines()
        ['written answer: clear and right', 'answer_kv: check the units']
        """
        return ([f"written answer: {self.written}"] if self.written else []) + \
            [f"{cell}: {text}" for cell, text in self.cells.items()]


def manual_comments(results_dir: Path, assignment: Assignment, spec: SourceSpec) -> dict[str, HandComments]:
    """The comments entered in formgrader, per student who has any (empty boxes are left out).

    formgrader keeps one comment box per solution cell of each submitted notebook (nbgrader's
    ``Comment.manual_comment``); the hand-graded answer's box is under that answer's grade_id.
    """
    manual_ids = [c.grade_id for c in spec.manual]
    order = {cell_grade_id(cell): i for i, cell in enumerate(spec.nb.cells)}
    out: dict[str, HandComments] = {}
    for sid, sub_nb in _submitted_notebooks(results_dir, assignment):
        texts = {c.name: c.manual_comment.strip() for c in sub_nb.comments
                 if c.manual_comment and c.manual_comment.strip()}
        if texts:
            cells = sorted((n for n in texts if n not in manual_ids), key=lambda n: order.get(n, len(order)))
            out[sid] = HandComments(written="\n\n".join(texts[n] for n in manual_ids if n in texts),
                                    cells={n: texts[n] for n in cells})
    return out
