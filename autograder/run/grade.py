"""Grade one submission, start to finish, in a worker process.

:func:`grade_submission` never raises: whatever the submission does, it returns
a :class:`~autograder.contract.results.StudentResult` with a status. Its files go to
``RESULTS_DIR`` in an order that makes interruption safe: the old record is
removed first, the autograded notebooks and the feedback are written next, and
the new record (``records/<id>.json``) last, atomically. A record on disk
therefore always describes files that exist.

One submission is one sandbox: every notebook of the assignment runs there, one after the other,
each in a fresh kernel, beside the assignment's other files (as the release has them, or as the
lesson's side checks say); then the tests are scored, and the side checks score the files they read.
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path

import nbformat

from . import sidecheck
from ..source.assignment import ANSWER, TASK, AssignmentSpec, load_lesson, load_source
from ..contract.cells import grade_id
from ..errors import AutograderError
from .execute import Clock, Execution, execute_notebook
from ..publish.feedback import Redactor, assignment_titles, write_feedback, write_feedback_within
from ..publish.inert import instructor_copy
from ..source.kernels import grading_kernels
from ..publish.layout import autograded_path, feedback_path, record_path
from ..source.restore import Refused, read_submission_limited, restore_cells
from ..contract.results import (GRADED, GRADER_ERROR, INVALID, MISSING, NOT_RUN, PASSED, SEVERITY, QuestionResult,
                                StudentResult, write_atomic, write_json)
from ..sandbox import Sandbox, probe, require_minimum, scratch_dir
from ..sandbox.python_env import course_python
from ..contract.text import one_line
from .job import Job

log = logging.getLogger(__name__)
EXECUTION_STATUS = {"completed": GRADED, "grader_error": GRADER_ERROR, **{s: s for s in SEVERITY}}
def blank_result(job: Job, spec: AssignmentSpec, status: str, message: str) -> StudentResult:
    try:
        titles = load_lesson(job.assignment.lesson).side_titles() if spec.side else {}
    except Exception:  # noqa: BLE001 - a result is written whatever failed
        titles = {}
    questions = {t.key: QuestionResult(0.0, t.points, NOT_RUN, f"not graded: {message}", label=t.label)
                 for t in spec.tests}
    questions.update({g: QuestionResult(0.0, p, NOT_RUN, f"not graded: {message}", label=titles.get(g, g))
                      for g, p in spec.side.items()})
    return StudentResult(student_id=job.student_id, status=status, score=0.0, max_score=spec.max_score,
                         manual_max_score=spec.manual_max_score, needs_manual_grading=False,
                         questions=questions, message=message, fingerprint=job.fingerprint)


def _read_notebooks(job: Job, spec: AssignmentSpec, files: dict) -> tuple[dict, dict[str, tuple[str, str]]]:
    """The notebooks that can be graded (parsed), and for each of the others its status and why."""
    a, folder = job.assignment, Path(job.folder)
    readable, problems = {}, {}
    for nb in spec.notebooks:
        data = files.get(nb.name)
        if isinstance(data, Refused):
            problems[nb.name] = (INVALID, str(data))
        elif data is None:
            if not folder.is_dir():
                problems[nb.name] = (MISSING, f"no folder {job.student_id}/{a.name}/ was handed in")
                continue
            others = sum(1 for p in folder.glob("*.ipynb") if p.name not in a.notebook_names)
            extra = f" (the folder holds {others} other .ipynb file{'s' * (others != 1)}; keep the released name)" \
                if others else ""
            problems[nb.name] = (MISSING, f"{nb.name} is not in the submission{extra}")
        else:
            try:
                readable[nb.name] = read_submission_limited(data)
            except Refused as e:
                problems[nb.name] = (INVALID, f"{nb.name} cannot be read: {e}")
    return readable, problems


def _grade(job: Job, files: dict[str, bytes | Refused | None]) -> tuple[StudentResult, dict[str, nbformat.NotebookNode]]:
    a, settings = job.assignment, job.settings
    spec, lesson = load_source(a), load_lesson(a.lesson)
    isolation = probe()
    try:
        require_minimum(isolation, settings.insecure)
    except AutograderError as e:
        return blank_result(job, spec, GRADER_ERROR, str(e)), {}
    readable, problems = _read_notebooks(job, spec, files)
    if not readable:
        status, message = next(iter(problems.values()))
        return blank_result(job, spec, status, message), {}

    notes: list[str] = []
    executions: dict[str, Execution] = {}
    python = course_python(settings.python) if settings.python else None
    with Sandbox(scratch_dir(), settings.limits, isolation, preload=lesson.preload, python=python) as sandbox:
        # The scratch copy holds only what the release holds: nothing else of the submission.
        for name, content in sidecheck.beside(a, lesson, files).items():
            target = sandbox.work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        restored = {}
        for nb_spec in spec.notebooks:
            if nb_spec.name in readable:
                restored[nb_spec.name], restored_notes = restore_cells(readable[nb_spec.name], nb_spec)
                notes += [f"{nb_spec.name}: {n}" for n in restored_notes] if len(spec.notebooks) > 1 else restored_notes
                # On disk each notebook is as handed in, as stock nbgrader's kernel sees the submitted folder:
                # the restored copy (hidden tests in) exists only in the grader, never where a cell can read it.
                (sandbox.work / nb_spec.name).write_bytes(files[nb_spec.name])
        kernels = grading_kernels({nb_spec.name: nb_spec.nb.metadata for nb_spec in spec.notebooks})
        clock = Clock(notebooks=len(restored))   # one wall-clock backstop and one idle allowance for the hand-in
        for name, nb in restored.items():
            executions[name] = execute_notebook(nb, sandbox, kernel_argv=kernels[name].argv,
                                                cell_timeout=settings.cell_timeout,
                                                notebook_timeout=settings.notebook_timeout,
                                                max_output_bytes=settings.max_output_bytes,
                                                max_restarts=settings.max_restarts, wall_factor=settings.wall_factor,
                                                idle_factor=settings.idle_factor, clock=clock)
            log.debug("%s %s executed: %s in %.2f s", job.student_id, name, executions[name].status,
                      executions[name].seconds)

    from .scoring import score_tests  # after execution: keeps the import cost off the critical path
    questions: dict[str, QuestionResult] = {}
    for nb_spec in spec.notebooks:
        execution = executions.get(nb_spec.name)
        if execution is None:
            why = problems[nb_spec.name][1]
            questions.update({t.key: QuestionResult(0.0, t.points, NOT_RUN, f"not graded: {why}") for t in nb_spec.tests})
            continue
        scored = score_tests(execution, nb_spec, lesson.checks)
        _explain_events(scored, execution, nb_spec)
        questions.update(scored)
    released = {check.file: sidecheck.released(a, check.file) for check in lesson.side_checks}
    # the batch's fork server (the same preload); the rest of the hand-in's wall clock, not one of its own
    run = sidecheck.runner(settings, isolation, lesson.preload, clock=clock)
    questions.update(sidecheck.score(lesson, files, released, job.prepared, run))
    log.debug("%s side checks done", job.student_id)
    bound = _bounder(executions.values())
    labels = {**{t.key: t.label for t in spec.tests}, **lesson.side_titles()}
    for key, q in questions.items():
        q.message = bound(q.message)
        q.label = labels.get(key, key)

    statuses = [EXECUTION_STATUS[e.status] for e in executions.values()]
    if GRADER_ERROR in statuses:
        failed = next(e for e in executions.values() if e.status == "grader_error")
        return blank_result(job, spec, GRADER_ERROR, failed.message), {}
    status = max((s for s in statuses if s != GRADED), key=SEVERITY.index, default=GRADED)
    messages = [(name, e.message) for name, e in executions.items() if e.message]
    messages += [(name, why) for name, (_, why) in problems.items()]
    message = bound("; ".join(m if len(spec.notebooks) == 1 else f"{name}: {m}" for name, m in messages))
    unanswered = _unanswered(spec, executions)
    result = StudentResult(
        student_id=job.student_id, status=status,
        score=float(sum(q.score for q in questions.values())), max_score=spec.max_score,
        manual_max_score=spec.manual_max_score,
        needs_manual_grading=any(m.kind == TASK or m.key not in unanswered for m in spec.manual),
        questions=questions, message=message, fingerprint=job.fingerprint, notes=notes, unanswered=unanswered)
    executed = {name: e.nb for name, e in executions.items()}
    first = spec.notebooks[0].name
    if first in executed:   # the side checks, as grade cells of the first notebook (for the gradebook)
        executed[first].cells.extend(sidecheck.side_cells(lesson, questions))
    return result, executed


#: The most characters a question's or a submission's message keeps (the learner's own text in it is
#: cut shorter where it is quoted: autograder.run.scoring).
MESSAGE_CHARS = 1000


def _bounder(executions):
    """What every message of a result passes through before it is stored: the Redactor of each executed
    notebook (no line quoting a hidden test, as on the feedback page), then one line of at most
    :data:`MESSAGE_CHARS` characters without terminal escapes or control characters
    (:func:`autograder.contract.text.one_line`). Escaping for HTML and CSV is where the text is written."""
    redactors = [Redactor(e.nb) for e in executions]

    def bound(text: str) -> str:
        for redactor in redactors:
            text = redactor.text(text)
        return one_line(text, MESSAGE_CHARS)
    return bound


def _unanswered(spec: AssignmentSpec, executions: dict[str, Execution]) -> list[str]:
    """The hand-graded answers handed back as released (nbgrader: "No response", 0 points, nothing to grade);
    a notebook that was not handed in answers nothing."""
    out = []
    for nb_spec in spec.notebooks:
        execution = executions.get(nb_spec.name)
        texts = {grade_id(c): c.get("source", "") for c in execution.nb.cells} if execution is not None else {}
        out += [m.key for m in nb_spec.manual if m.kind == ANSWER and texts.get(m.grade_id, m.released) == m.released]
    return out


def _explain_events(questions: dict[str, QuestionResult], execution: Execution, spec) -> None:
    """Say in each failed question's message which cell before its test (since the previous test)
    timed out, died or hit a limit, and why: the event most likely cost it."""
    keys = {t.grade_id: t.key for t in spec.tests}
    positions = [(i, keys[gid]) for i, c in enumerate(execution.nb.cells) if (gid := grade_id(c)) in keys]
    blamed: dict[str, list[str]] = {}
    for event in execution.events:
        owner = next((key for i, key in positions if i >= event.index), None)
        if owner is not None:
            blamed.setdefault(owner, []).append(event.message)
    for key, messages in blamed.items():
        q = questions.get(key)
        if q is None or q.status == PASSED:
            continue
        new = [m for m in messages if m not in q.message]
        if new:
            shown = "; ".join(new[:3]) + (f"; and {len(new) - 3} more" if len(new) > 3 else "")
            q.message = f"{q.message} (because {shown})"


def _write_files(job: Job, result: StudentResult, executed: dict[str, nbformat.NotebookNode]) -> None:
    results_dir, a = Path(job.results_dir), job.assignment
    titles = load_lesson(a.lesson).side_titles()
    for name, nb in executed.items():
        write_atomic(autograded_path(results_dir, job.student_id, a, name), nbformat.writes(instructor_copy(nb)))
    question_titles = assignment_titles(executed.values())
    for name in a.notebook_names:
        why = write_feedback_within(results_dir, result, executed.get(name), a.name, name, titles,
                                    other_titles=question_titles)
        if why is not None:
            log.debug("%s: feedback fell back to the summary: %s", job.student_id, why)
            result.notes.append(f"the feedback page shows the scores only: {name} could not be rendered ({why})")


def _outputs(job: Job) -> list[Path]:
    """This student's files besides the record: every notebook's autograded copy and feedback page."""
    results_dir, a = Path(job.results_dir), job.assignment
    return [p for name in a.notebook_names for p in (autograded_path(results_dir, job.student_id, a, name),
                                                      feedback_path(results_dir, job.student_id, a.name, name))]


def grade_submission(job: Job) -> StudentResult:
    """Grade one submission and write its files; returns the result (never raises).

    The hand-in is ``job.hand_in``, as the batch read and hashed it (once: what is graded is what
    was hashed and what ``submitted/`` gets); nothing of ``job.folder`` is read again here, only the
    batch's staged copy of those bytes (:meth:`~autograder.run.handin.HandIn.contents`).
    """
    start = time.monotonic()
    results_dir = Path(job.results_dir)
    record = record_path(results_dir, job.student_id)
    # Stale files go first, the record before the rest: a crash from here on leaves no record.
    for stale in (record, *_outputs(job)):
        stale.unlink(missing_ok=True)
    log.debug("grading %s", job.student_id)
    try:
        files = job.hand_in.contents()
        result, executed = _grade(job, files)
    except Exception as e:  # noqa: BLE001 - a bug or a broken machine, never the learner's fault
        result, executed = _failed(job, f"the grader failed: {_one_line(e)}"), {}
    result.seconds = round(time.monotonic() - start, 3)
    result.submission_sha = job.hand_in.sha
    try:
        _write_files(job, result, executed)
    except Exception as e:  # noqa: BLE001
        # No half result: the scores and the files must agree, so the student is the grader's to rerun.
        for path in _outputs(job):
            path.unlink(missing_ok=True)
        result = _failed(job, f"could not write the results: {_one_line(e)}", seconds=result.seconds,
                         sha=result.submission_sha)
        try:
            for name in job.assignment.notebook_names:
                write_feedback(results_dir, result, None, job.assignment.name, name)
        except Exception:  # noqa: BLE001
            for path in _outputs(job):
                path.unlink(missing_ok=True)
    write_json(record, result.to_json())
    log.debug("graded %s: %s %.1f in %.2f s", job.student_id, result.status, result.score, time.monotonic() - start)
    return result


def crashed(job: Job, message: str) -> StudentResult:
    """A grader_error result for a submission whose grading never finished (its worker died, its
    task was lost), with its record written so that a rerun grades it again."""
    result = _failed(job, message)
    write_json(record_path(Path(job.results_dir), job.student_id), result.to_json())
    return result


def _failed(job: Job, message: str, seconds: float = 0.0, sha: str = "") -> StudentResult:
    result = blank_result(job, load_source(job.assignment), GRADER_ERROR, message)
    result.seconds, result.submission_sha = seconds, sha
    return result


def _one_line(e: BaseException) -> str:
    return traceback.format_exception_only(type(e), e)[-1].strip()[:300]

