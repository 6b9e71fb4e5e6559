"""Grade one submission, start to finish, in a worker process.

:func:`grade_submission` never raises: whatever the submission does, it returns
a :class:`~autograder.results.StudentResult` with a status. Its files go to
``RESULTS_DIR`` in an order that makes interruption safe: the old record is
removed first, the autograded notebook and the feedback are written next, and
the new record (``records/<id>.json``) last, atomically. A record on disk
therefore always describes files that exist.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .assignment import LAB_QUESTIONS, Assignment, SourceSpec, load_checks, load_source
from .execute import execute_notebook
from .feedback import write_feedback
from .lab import check_lab, reference_lab
from .layout import autograded_path, feedback_path, record_path
from .restore import read_submission, restore_cells
from .results import (GRADED, GRADER_ERROR, INVALID, KERNEL_DIED, MEMORY_LIMIT, MISSING, NOT_RUN, TIMEOUT,
                      QuestionResult, StudentResult, write_atomic, write_json)
from .sandbox import Limits, Sandbox, probe

log = logging.getLogger(__name__)
EXECUTION_STATUS = {"completed": GRADED, "timeout": TIMEOUT, "kernel_died": KERNEL_DIED,
                    "memory_limit": MEMORY_LIMIT, "grader_error": GRADER_ERROR}


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


def submission_files(folder: Path, assignment: Assignment) -> dict[str, Path]:
    """The handed-in files the grader reads (regular files only: links are not followed)."""
    out = {}
    for name in (assignment.notebook_name, assignment.lab_name):
        path = folder / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        out[name] = path if stat.S_ISREG(mode) else None
    return out


def submission_sha(folder: Path, assignment: Assignment) -> str:
    h = hashlib.sha256()
    for name, path in sorted(submission_files(folder, assignment).items()):
        h.update(name.encode() + b"\0")
        if path is None:
            h.update(b"<not a regular file>")
            continue
        try:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError as e:
            h.update(f"<unreadable {e}>".encode())
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


def scratch_dir() -> Path:
    """A private scratch folder, named after this process so leftovers of a killed run can be found."""
    return Path(tempfile.mkdtemp(prefix=f"cg-{os.getpid()}-"))


def _grade(job: Job) -> tuple[StudentResult, nbformat.NotebookNode | None]:
    a, settings = job.assignment, job.settings
    spec = load_source(a)
    checks = load_checks(a.checks)
    folder = Path(job.folder)
    if folder.is_symlink() or folder.parent.is_symlink():
        return blank_result(job, spec, INVALID, "the submission folder is a link; hand in real files"), None
    if not folder.is_dir():
        return blank_result(job, spec, MISSING, f"no folder {job.student_id}/{a.name}/ was handed in"), None
    files = submission_files(folder, a)
    nb_path = files.get(a.notebook_name, "absent")
    if nb_path == "absent":
        found = sorted(p.name for p in folder.glob("*.ipynb"))
        extra = f" (found: {', '.join(found)})" if found else ""
        return blank_result(job, spec, MISSING, f"{a.notebook_name} is not in the submission{extra}"), None
    if nb_path is None:
        return blank_result(job, spec, INVALID, f"{a.notebook_name} is not a regular file (a link?)"), None
    try:
        submitted = read_submission(nb_path)
    except (ValueError, OSError) as e:
        return blank_result(job, spec, INVALID, f"{a.notebook_name} cannot be read: {e}"), None

    nb, notes = restore_cells(submitted, spec)
    make_sandbox = new_sandbox(settings)
    lab_path = files.get(a.lab_name)
    with make_sandbox(scratch_dir()) as sandbox:
        # The scratch copy holds only what the release holds: nothing else of the submission.
        nbformat.write(nb, sandbox.work / a.notebook_name)
        # The notebook reads the lab's output, so it runs beside the released lab with the one
        # intended edit (8 -> 16): a wrong edit then costs only the lab points, which
        # check_lab() below awards from the learner's own file.
        reference = reference_lab(Path(a.lab).read_text(encoding="utf-8"))
        if reference is not None:
            (sandbox.work / a.lab_name).write_text(reference, encoding="utf-8")
        elif lab_path is not None:
            shutil.copyfile(lab_path, sandbox.work / a.lab_name)
        execution = execute_notebook(nb, sandbox, cell_timeout=settings.cell_timeout,
                                     notebook_timeout=settings.notebook_timeout,
                                     max_output_bytes=settings.max_output_bytes)
        log.debug("%s executed: %s in %.2f s", job.student_id, execution.status, execution.seconds)

    from .scoring import score_tests  # after execution: keeps the import cost off the critical path
    questions = score_tests(execution, spec, checks)
    released_lab = Path(a.lab).read_text(encoding="utf-8")
    questions.update(check_lab(lab_path, released_lab, a.lab_name, job.lab_baseline, make_sandbox))
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


def grade_submission(job: Job) -> StudentResult:
    """Grade one submission and write its files; returns the result (never raises)."""
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
    try:
        result, executed = _grade(job)
    except Exception as e:  # noqa: BLE001 - a bug or a broken machine, never the learner's fault
        spec = load_source(job.assignment)
        detail = traceback.format_exception_only(type(e), e)[-1].strip()
        result, executed = blank_result(job, spec, GRADER_ERROR, f"the grader failed: {detail}"), None
    result.seconds = round(time.monotonic() - start, 3)
    result.submission_sha = submission_sha(Path(job.folder), job.assignment) if Path(job.folder).is_dir() else ""
    try:
        if executed is not None:
            write_atomic(nb_out, nbformat.writes(executed))
        write_feedback(results_dir, result, executed, job.assignment.name, job.assignment.notebook_name)
    except Exception as e:  # noqa: BLE001
        result.status, result.message = GRADER_ERROR, f"could not write the results: {e}"
    write_json(record, result.to_json())
    log.debug("graded %s: %s %.1f in %.2f s", job.student_id, result.status, result.score, time.monotonic() - start)
    return result
