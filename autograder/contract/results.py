"""Results as dataclasses, and their JSON: per question, per student, per batch.

``grades.json`` has exactly this shape (:meth:`BatchResult.grades_json`)::

    {"assignment": "ps1",
     "students": {"alice": {"status": "graded", "score": 2.5, "max_score": 3.0,
                            "manual_max_score": 10.0, "needs_manual_grading": false,
                            "manual_score": 8.0, "total_score": 10.5, "total_max_score": 13.0,
                            "comments": {"written answer": "clear, but name the pool"},
                            "questions": {"correct_squares": {"label": "Squares", "score": 1.0,
                                                              "max_score": 1.0, "status": "passed",
                                                              "message": "correct", "parts": []}}}}}

``score`` is the autograded points; ``manual_score`` the points given by hand in formgrader (null, and
``needs_manual_grading`` true, until every hand-graded cell has them: ``course-grade export`` or
``feedback`` after formgrader rewrites this file), ``total_score`` both. A question of several parts
lists each failed part's message in ``parts`` (its ``message`` names them all). ``label`` is the question's
name for people (unique in the assignment), the one the feedback page, grades.csv, Gradescope and the
terminal use.

Per-student records (``records/<id>.json``) carry a little more: the message, the
time taken, and the fingerprint that lets an interrupted batch resume.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Submission statuses. Only "graded" means every cell ran to its end, within every limit. The
# others that come from running the notebook name the worst thing a cell did (SEVERITY); each
# question is still scored on its own, since the grader interrupts a slow cell and replaces a dead
# kernel (autograder.run.execute), so such a status costs only the questions its cells broke.
GRADED = "graded"
TIMEOUT = "timeout"
"""A cell ran past the per-cell timeout (interrupted), or the notebook past its time limit (stopped)."""
DISK_LIMIT = "disk_limit"
"""A cell filled the notebook's disk space (Limits.disk_bytes / max_files)."""
PROCESS_LIMIT = "process_limit"
"""A cell tried to run more processes and threads than Limits.max_processes (a fork bomb)."""
MEMORY_LIMIT = "memory_limit"
"""A cell used more memory than Limits.memory_bytes (the kernel was killed, or got MemoryError)."""
KERNEL_DIED = "kernel_died"
"""The kernel died (os._exit, a crash) or a fresh one could not start after a failure."""
INVALID = "invalid_submission"
"""The notebook could not be read (not a notebook, too large, a link, malformed beyond repair)."""
MISSING = "missing_submission"
GRADER_ERROR = "grader_error"
"""The grader itself failed: never the learner's doing; rerun the batch."""
STATUSES = (GRADED, TIMEOUT, DISK_LIMIT, PROCESS_LIMIT, MEMORY_LIMIT, KERNEL_DIED, INVALID, MISSING, GRADER_ERROR)
#: Execution statuses from the least to the most severe: the notebook's status is the worst of its cells'.
SEVERITY = (TIMEOUT, DISK_LIMIT, PROCESS_LIMIT, MEMORY_LIMIT, KERNEL_DIED)
#: Statuses of a notebook that ran (its executed copy exists): scored question by question.
RAN = (GRADED,) + SEVERITY

# Question statuses.
PASSED, FAILED, NOT_RUN = "passed", "failed", "not_run"

RECORD_VERSION = 2


@dataclass
class QuestionResult:
    """One autograded question (a test cell or a side check's question)."""

    score: float
    """Points earned: all of max_score when passed, else 0."""
    max_score: float
    """Points available, from the instructor's source (never from the submission)."""
    status: str
    """"passed", "failed", or "not_run" (the notebook stopped before this test, or nothing to grade)."""
    message: str
    """What to look at; empty or "correct" when passed. A question of several parts names every failed
    part here, joined by "; " (each one also in :attr:`parts`)."""
    parts: list[str] = field(default_factory=list)
    """Each failed part's message, one per part, when the question has several (else empty): what the
    feedback page, grades.json, grades.csv and Gradescope list one by one."""
    label: str = ""
    """Its name for people, unique in the assignment (autograder.source.assignment.test_labels; a side check's
    title): the same on the feedback page, in grades.json and grades.csv, on Gradescope and in the
    terminal's table. "" in a record written before labels: its key stands in."""


@dataclass
class StudentResult:
    """Everything the grader decided about one submission."""

    student_id: str
    status: str
    """One of :data:`STATUSES`; a failure is never a plain 0."""
    score: float
    """Autograded points earned (notebook tests + side checks)."""
    max_score: float
    """Autograded points available."""
    manual_max_score: float
    """Points graded by hand (written answers and tasks), not included in score."""
    needs_manual_grading: bool
    """True when there is something for a person to grade (a task, or an answer that is not the released text)."""
    questions: dict[str, QuestionResult]
    """Per grade_id (``<notebook stem>/<grade_id>`` where two notebooks share one), in notebook order,
    then the lesson's side-check questions."""
    message: str = ""
    """What happened to the submission as a whole (empty when graded)."""
    seconds: float = 0.0
    """Wall-clock time spent grading it."""
    fingerprint: str = ""
    """Hash of the submission, the instructor files and the settings: equal means reusable."""
    submission_sha: str = ""
    """Hash of the handed-in files alone: when it changes, manual scores in the gradebook are stale."""
    notes: list[str] = field(default_factory=list)
    """What the grader restored or demoted (edited/deleted test cells), for the instructor."""
    worker: str = ""
    """The Dask worker that graded it (address and host); empty when this machine's workers did."""
    isolation: str = ""
    """The isolation it ran under on that worker (autograder.sandbox.Isolation.summary); empty here."""
    unanswered: list[str] = field(default_factory=list)
    """Hand-graded answers handed back as released: nbgrader's "No response" (0 points, nobody grades them)."""

    def grades_entry(self, manual_score: float | None = None, comments: dict[str, str] | None = None) -> dict[str, Any]:
        """This student's entry in grades.json, with the points and comments given by hand in formgrader
        (``manual_score``: None while something is still to grade)."""
        return {
            "status": self.status,
            "score": self.score,
            "max_score": self.max_score,
            "manual_max_score": self.manual_max_score,
            "needs_manual_grading": self.needs_manual_grading and manual_score is None,
            "manual_score": manual_score,
            "total_score": self.score + (manual_score or 0.0),
            "total_max_score": self.max_score + self.manual_max_score,
            "comments": dict(comments or {}),
            "questions": {gid: {"label": q.label or gid, "score": q.score, "max_score": q.max_score,
                                "status": q.status, "message": q.message, "parts": list(q.parts)}
                          for gid, q in self.questions.items()},
        }

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["record_version"] = RECORD_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StudentResult:
        data = dict(data)
        if data.pop("record_version", None) != RECORD_VERSION:
            raise ValueError("record from another grader version")
        data["questions"] = {k: QuestionResult(**v) for k, v in data["questions"].items()}
        return cls(**data)


@dataclass
class BatchResult:
    """One ``autograde`` run over a class."""

    assignment: str
    students: dict[str, StudentResult]
    """By student id, sorted."""
    results_dir: str = ""
    isolation: str = ""
    """What isolation was in force (see autograder.sandbox.Isolation.summary)."""
    warnings: list[str] = field(default_factory=list)
    """Isolation tools missing on this machine, and what was used instead."""
    reused: list[str] = field(default_factory=list)
    """Students whose unchanged result was kept from an earlier (interrupted) run."""
    seconds: float = 0.0
    limits: str = ""
    """What each submission could use (autograder.sandbox.Limits.summary), sizes in both units."""

    def grades_json(self) -> dict[str, Any]:
        return {"assignment": self.assignment,
                "students": {sid: r.grades_entry() for sid, r in sorted(self.students.items())}}

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.students.values():
            out[r.status] = out.get(r.status, 0) + 1
        return out


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a file so that readers see the old or the new content, never a half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")
