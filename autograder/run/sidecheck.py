"""The engine's side of a lesson's side checks (:class:`autograder.contract.lesson.SideCheck`).

Once per batch, :func:`prepare` gives each side check the released file and a :func:`runner`
(its programs run alone in fresh sandboxes under the batch's limits); for each hand-in,
:func:`beside` says what the notebooks run beside and :func:`score` asks each side check for its
questions; :func:`side_cells` shows them as locked grade cells of the autograded notebook, so the
gradebook and formgrader list them with the notebook's own.

>>> from autograder.contract.lesson import PLAIN
>>> score(PLAIN, {}, {}, {}, None)
{}
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import nbformat

from ..source.assignment import Assignment, load_lesson
from ..contract.lesson import Lesson, RunResult, Runner
from ..source.restore import Refused
from ..contract.results import NOT_RUN, QuestionResult
from ..sandbox import Isolation, Sandbox, scratch_dir
from ..contract.settings import Settings


def runner(settings: Settings, isolation: Isolation, preload: tuple[str, ...] = (), clock=None) -> Runner:
    """``run(file_name, text)``: the Python program ``text`` as ``file_name``, alone in a fresh sandbox,
    forked from the batch's kernel fork server (``preload``: the lesson's, so it is the batch's one server).

    ``clock``: the hand-in's (:class:`autograder.run.cell_budget.Clock`): a program then gets no more wall-clock
    time than is left of the hand-in's backstop (``wall_factor`` times the notebook time limit, shared
    with its notebooks), so that a sleeping lab does not add its own on top; None (a batch's
    preparation): its own bound only."""
    def run(file_name: str, text: str) -> RunResult:
        if "/" in file_name or file_name in ("", ".", ".."):
            raise ValueError(f"a side check's program needs a plain file name, not {file_name!r}")
        wall_s = settings.side_check_timeout * min(settings.wall_factor, 1 + settings.idle_factor)
        if clock is not None:
            left = settings.notebook_timeout * settings.wall_factor - (time.monotonic() - clock.wall0)
            wall_s = max(0.1, min(wall_s, left))
        with Sandbox(scratch_dir("side"), settings.limits, isolation, preload=preload) as box:   # removes its folder
            path = box.work / file_name
            path.write_text(text, encoding="utf-8")
            rc, out, err = box.run([sys.executable, "-P", "-s", str(path)], cwd=box.work,
                                   timeout=settings.side_check_timeout, wall_s=wall_s)
        return RunResult(rc, out, err)
    return run


def released(assignment: Assignment, file_name: str) -> bytes:
    """A side check's file as released (the batch's snapshot of the instructor's)."""
    return Path(assignment.instructor_files()[file_name]).read_bytes()


def prepare(assignment: Assignment, run: Runner) -> dict[str, Any]:
    """Each side check's once-per-batch preparation, by its name."""
    return {check.name: check.prepare(released(assignment, check.file), run)
            for check in load_lesson(assignment.lesson).side_checks}


def beside(assignment: Assignment, lesson: Lesson, files: dict[str, bytes | Refused | None]) -> dict[str, bytes]:
    """The assignment's files as the notebooks run beside them: each as released, except where a side
    check says otherwise (by what the learner handed in, or with a reference edit)."""
    out = {name: Path(path).read_bytes() for name, path in assignment.instructor_files().items()
           if name not in assignment.notebook_names}
    for check in lesson.side_checks:
        handed_in = files.get(check.file)
        content = check.beside(out[check.file], handed_in if isinstance(handed_in, bytes) else None)
        if content is None:
            out.pop(check.file, None)
        else:
            out[check.file] = content
    return out


def score(lesson: Lesson, files: dict[str, bytes | Refused | None], released_files: dict[str, bytes],
          prepared: dict[str, Any], run: Runner | None) -> dict[str, QuestionResult]:
    """Every side check's questions for one hand-in (``files``: what the grader read of it)."""
    questions: dict[str, QuestionResult] = {}
    for check in lesson.side_checks:
        expected = {gid: float(points) for gid, points in check.questions().items()}
        data = files.get(check.file)
        if isinstance(data, Refused):
            got = {gid: QuestionResult(0.0, pts, NOT_RUN, f"the file {check.file} cannot be read: {data}")
                   for gid, pts in expected.items()}
        else:
            got = check.score(data, released_files[check.file], prepared.get(check.name), run)
        for gid, pts in expected.items():   # exactly its questions, with the points it declared
            q = got.get(gid) or QuestionResult(0.0, pts, NOT_RUN, f"the side check {check.name!r} gave no result")
            questions[gid] = QuestionResult(min(max(float(q.score), 0.0), pts), pts, q.status, q.message, list(q.parts))
    return questions


def side_cells(lesson: Lesson, questions: dict[str, QuestionResult]) -> list[nbformat.NotebookNode]:
    """The side checks' questions as locked grade cells with their verdicts, to append to the autograded notebook."""
    cells = []
    for gid, points in lesson.side_questions().items():
        q = questions[gid]
        cell = nbformat.v4.new_code_cell(f"# Side check {gid} (run by the grader, outside this notebook)")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": gid,
                                     "points": points, "schema_version": 3}
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                               text=f"{q.status}: {q.score:g} / {q.max_score:g}  {q.message}\n")]
        cell["id"] = f"cell-{gid}"
        cells.append(cell)
    return cells
