"""Grade one submission, start to finish, in a worker process.

:func:`grade_submission` never raises: whatever the submission does, it returns
a :class:`~autograder.results.StudentResult` with a status. Its files go to
``RESULTS_DIR`` in an order that makes interruption safe: the old record is
removed first, the autograded notebook and the feedback are written next, and
the new record (``records/<id>.json``) last, atomically. A record on disk
therefore always describes files that exist.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .assignment import LAB_QUESTIONS, Assignment, SourceSpec, load_checks, load_source
from .cells import grade_id
from .execute import Execution, execute_notebook
from .feedback import write_feedback
from lessons.l14_04.lab import check_lab, reference_lab
from .layout import autograded_path, feedback_path, record_path
from .restore import MAX_NOTEBOOK_BYTES, Refused, read_handed_in, read_submission, restore_cells
from .results import (GRADED, GRADER_ERROR, INVALID, MISSING, NOT_RUN, PASSED, SEVERITY, QuestionResult,
                      StudentResult, write_atomic, write_json)
from .sandbox import Limits, Sandbox, probe, scratch_dir

log = logging.getLogger(__name__)
EXECUTION_STATUS = {"completed": GRADED, "grader_error": GRADER_ERROR, **{s: s for s in SEVERITY}}
#: The largest lab file read (the released lab is ~3 KB).
MAX_LAB_BYTES = 1_000_000
#: Seconds the feedback page may take to render (nbconvert on a pathological notebook).
RENDER_TIMEOUT_S = 60


@dataclass(frozen=True)
class Settings:
    """How submissions are run. Part of every result's fingerprint."""

    cell_timeout: float = 60
    """Seconds one cell may run (the reference notebook's slowest cell takes under 2 s)."""
    notebook_timeout: float = 300
    """Seconds the whole notebook may run."""
    limits: Limits = field(default_factory=Limits)
    """OS-enforced limits: memory, processes, file size, CPU."""
    max_output_bytes: int = 1 * 2**20
    """Text and images the notebook may print in total; the rest is dropped with a note."""
    lab_timeout: float = 60
    """Seconds the lab script may run."""
    max_restarts: int = 3
    """Fresh kernels a notebook may get after a cell killed or hung its kernel (each replays the cells before)."""


@dataclass(frozen=True)
class Job:
    """One submission to grade (picklable: it crosses to a worker process)."""

    student_id: str
    folder: str
    """SUBMITTED_DIR/<student_id>/<assignment>/"""
    results_dir: str
    assignment: Assignment
    settings: Settings
    lab_baseline: dict
    fingerprint: str


def read_files(folder: Path, assignment: Assignment) -> dict[str, bytes | Refused | None]:
    """The handed-in notebook and lab by name: their bytes, None when absent, or why they were refused."""
    out: dict[str, bytes | Refused | None] = {}
    for name, cap in ((assignment.notebook_name, MAX_NOTEBOOK_BYTES), (assignment.lab_name, MAX_LAB_BYTES)):
        try:
            out[name] = read_handed_in(folder, name, cap)
        except Refused as e:
            out[name] = e
    return out


def submission_sha(folder: Path, assignment: Assignment, files: dict | None = None) -> str:
    """Hash of the handed-in files alone (what they hold, or why they were refused)."""
    h = hashlib.sha256()
    for name, data in sorted((files or read_files(Path(folder), assignment)).items()):
        h.update(name.encode() + b"\0")
        if isinstance(data, Refused):
            h.update(b"<refused: " + str(data).encode() + b">")
        elif data is None:
            h.update(b"<absent>")
        else:
            h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def blank_result(job: Job, spec: SourceSpec, status: str, message: str) -> StudentResult:
    questions = {t.grade_id: QuestionResult(0.0, t.points, NOT_RUN, f"not graded: {message}") for t in spec.tests}
    questions.update({g: QuestionResult(0.0, p, NOT_RUN, f"not graded: {message}") for g, p in LAB_QUESTIONS.items()})
    return StudentResult(student_id=job.student_id, status=status, score=0.0, max_score=spec.max_score,
                         manual_max_score=spec.manual_max_score, needs_manual_grading=False,
                         questions=questions, message=message, fingerprint=job.fingerprint)


def new_sandbox(settings: Settings):
    def make(root: Path) -> Sandbox:
        return Sandbox(root, settings.limits, probe())
    return make


def _grade(job: Job, files: dict[str, bytes | Refused | None]) -> tuple[StudentResult, nbformat.NotebookNode | None]:
    a, settings = job.assignment, job.settings
    spec = load_source(a)
    checks = load_checks(a.checks)
    folder = Path(job.folder)
    notebook = files[a.notebook_name]
    if isinstance(notebook, Refused):
        return blank_result(job, spec, INVALID, str(notebook)), None
    if notebook is None:
        if not folder.is_dir():
            return blank_result(job, spec, MISSING, f"no folder {job.student_id}/{a.name}/ was handed in"), None
        others = sum(1 for p in folder.glob("*.ipynb"))
        extra = f" (the folder holds {others} other .ipynb file{'s' * (others != 1)}; keep the released name)" \
            if others else ""
        return blank_result(job, spec, MISSING, f"{a.notebook_name} is not in the submission{extra}"), None
    try:
        submitted = read_submission(notebook)
    except Refused as e:
        return blank_result(job, spec, INVALID, f"{a.notebook_name} cannot be read: {e}"), None

    nb, notes = restore_cells(submitted, spec)
    make_sandbox = new_sandbox(settings)
    lab = files[a.lab_name]
    released_lab = Path(a.lab).read_text(encoding="utf-8")   # the batch's snapshot of the instructor's lab
    with make_sandbox(scratch_dir()) as sandbox:
        # The scratch copy holds only what the release holds: nothing else of the submission.
        nbformat.write(nb, sandbox.work / a.notebook_name)
        # The notebook reads the lab's output, so it runs beside the released lab with the one
        # intended edit (8 -> 16): a wrong edit then costs only the lab points, which
        # check_lab() below awards from the learner's own file.
        reference = reference_lab(released_lab)
        if reference is not None:
            (sandbox.work / a.lab_name).write_text(reference, encoding="utf-8")
        elif isinstance(lab, bytes):
            (sandbox.work / a.lab_name).write_bytes(lab)
        execution = execute_notebook(nb, sandbox, cell_timeout=settings.cell_timeout,
                                     notebook_timeout=settings.notebook_timeout,
                                     max_output_bytes=settings.max_output_bytes, max_restarts=settings.max_restarts)
        log.debug("%s executed: %s in %.2f s", job.student_id, execution.status, execution.seconds)

    from .scoring import score_tests  # after execution: keeps the import cost off the critical path
    questions = score_tests(execution, spec, checks)
    _explain_events(questions, execution, spec)
    if isinstance(lab, Refused):
        questions.update({gid: QuestionResult(0.0, pts, NOT_RUN, f"the lab file cannot be read: {lab}")
                          for gid, pts in LAB_QUESTIONS.items()})
    else:
        questions.update(check_lab(lab, released_lab, a.lab_name, job.lab_baseline, make_sandbox))
    log.debug("%s lab checked", job.student_id)
    status = EXECUTION_STATUS[execution.status]
    if status == GRADER_ERROR:
        return blank_result(job, spec, GRADER_ERROR, execution.message), None
    result = StudentResult(
        student_id=job.student_id, status=status,
        score=float(sum(q.score for q in questions.values())), max_score=spec.max_score,
        manual_max_score=spec.manual_max_score, needs_manual_grading=bool(spec.manual),
        questions=questions, message=execution.message, fingerprint=job.fingerprint, notes=notes)
    return result, _with_lab_cells(execution.nb, questions)


def _explain_events(questions: dict[str, QuestionResult], execution: Execution, spec: SourceSpec) -> None:
    """Say in each failed question's message which cell before its test (since the previous test)
    timed out, died or hit a limit, and why: the event most likely cost it."""
    tests = {t.grade_id for t in spec.tests}
    positions = [(i, gid) for i, c in enumerate(execution.nb.cells) if (gid := grade_id(c)) in tests]
    blamed: dict[str, list[str]] = {}
    for event in execution.events:
        owner = next((gid for i, gid in positions if i >= event.index), None)
        if owner is not None:
            blamed.setdefault(owner, []).append(event.message)
    for gid, messages in blamed.items():
        q = questions.get(gid)
        if q is None or q.status == PASSED:
            continue
        new = [m for m in messages if m not in q.message]
        if new:
            shown = "; ".join(new[:3]) + (f"; and {len(new) - 3} more" if len(new) > 3 else "")
            q.message = f"{q.message} (because {shown})"


def _with_lab_cells(nb: nbformat.NotebookNode, questions: dict[str, QuestionResult]) -> nbformat.NotebookNode:
    """Append the lab sub-checks as locked grade cells, so the gradebook and formgrader show them."""
    for gid, points in LAB_QUESTIONS.items():
        q = questions[gid]
        cell = nbformat.v4.new_code_cell(f"# Lab-edit check {gid} (run by the grader, outside this notebook)")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": gid,
                                     "points": points, "schema_version": 3}
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                               text=f"{q.status}: {q.score:g} / {q.max_score:g}  {q.message}\n")]
        cell["id"] = f"cell-{gid}"
        nb.cells.append(cell)
    return nb


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise TimeoutError in this (the main) thread after ``seconds``; no limit in other threads."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise TimeoutError(f"took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _write_files(job: Job, result: StudentResult, executed: nbformat.NotebookNode | None,
                 nb_out: Path) -> None:
    results_dir, a = Path(job.results_dir), job.assignment
    if executed is not None:
        write_atomic(nb_out, nbformat.writes(executed))
    try:
        with _time_limit(RENDER_TIMEOUT_S):
            write_feedback(results_dir, result, executed, a.name, a.notebook_name)
    except Exception as e:  # noqa: BLE001 - a page that cannot be rendered: the summary alone, and say so
        log.debug("%s: feedback fell back to the summary: %s", job.student_id, e)
        result.notes.append(f"the feedback page shows the scores only: the notebook could not be rendered ({e})")
        write_feedback(results_dir, result, None, a.name, a.notebook_name)


def grade_submission(job: Job, files: dict[str, bytes | Refused | None] | None = None) -> StudentResult:
    """Grade one submission and write its files; returns the result (never raises).

    ``files``: the hand-in as :func:`read_files` read it on another machine (a Dask task and a
    Gradescope run carry it: autograder.handin); None reads ``job.folder`` here.
    """
    start = time.monotonic()
    results_dir = Path(job.results_dir)
    record = record_path(results_dir, job.student_id)
    nb_out = autograded_path(results_dir, job.student_id, job.assignment)
    fb_out = feedback_path(results_dir, job.student_id, job.assignment.name, job.assignment.notebook_name)
    # Stale files go first, the record before the rest: a crash from here on leaves no record.
    for stale in (record, nb_out, fb_out):
        try:
            stale.unlink()
        except FileNotFoundError:
            pass
    log.debug("grading %s", job.student_id)
    if files is None:
        files = read_files(Path(job.folder), job.assignment)  # once: what is graded is what is hashed
    try:
        result, executed = _grade(job, files)
    except Exception as e:  # noqa: BLE001 - a bug or a broken machine, never the learner's fault
        result, executed = _failed(job, f"the grader failed: {_one_line(e)}"), None
    result.seconds = round(time.monotonic() - start, 3)
    result.submission_sha = submission_sha(Path(job.folder), job.assignment, files)
    try:
        _write_files(job, result, executed, nb_out)
    except Exception as e:  # noqa: BLE001
        # No half result: the scores and the files must agree, so the student is the grader's to rerun.
        nb_out.unlink(missing_ok=True)
        result = _failed(job, f"could not write the results: {_one_line(e)}", seconds=result.seconds,
                         sha=result.submission_sha)
        try:
            write_feedback(results_dir, result, None, job.assignment.name, job.assignment.notebook_name)
        except Exception:  # noqa: BLE001
            fb_out.unlink(missing_ok=True)
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
