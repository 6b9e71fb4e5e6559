"""What a lesson adds to an nbgrader assignment: the small interface the engine calls, and nothing else.

An nbgrader assignment (``source/<assignment>/`` with its notebooks and files) grades as stock
nbgrader grades it. A lesson is a Python package or file that defines ``LESSON``, a
:class:`Lesson`: where its instructor files are, and what the engine should do beyond stock
nbgrader:

``checks``
    Trusted checks, by grade_id (``CHECKS[grade_id].score(values)`` returns something with
    ``passed`` and ``message``): a test cell whose hidden part records an answer
    (:mod:`autograder.source.hidden`) is scored by its check, in the grader's process, from the plain
    values the cell recorded. Every other test cell is scored by nbgrader's own rule.
``side_checks``
    Autograded questions about a file the learner hands in beside the notebooks
    (:class:`SideCheck`: its questions and points, a once-per-batch preparation, what the
    notebooks run beside, and its scoring).
``preload``
    Modules the notebooks import, which the kernel fork server imports once per batch.

The engine names no lesson: ``course-grade`` finds the installed ones through the
``course_grade.lessons`` entry points (pyproject.toml), or takes one by ``--lesson``.

>>> lesson = Lesson(name="demo", notebooks=(Path("demo.ipynb"),))
>>> lesson.side_questions(), lesson.side_titles(), lesson.checks
({}, {}, {})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .results import QuestionResult


@dataclass(frozen=True)
class RunResult:
    """What a side check's program did in its sandbox."""

    returncode: int | None
    """Its exit status; None when it ran past its time and was killed."""
    stdout: str
    stderr: str


#: ``run(file_name, text)``: run the Python program ``text``, saved as ``file_name``, alone in a fresh
#: sandbox under the batch's limits (``python -P -s file_name``); what it did. The engine gives one to
#: :meth:`SideCheck.prepare` and :meth:`SideCheck.score`.
Runner = Callable[[str, str], RunResult]


class SideCheck:
    """Autograded questions about one file the learner hands in beside the notebooks (e.g. an edited script).

    A subclass is a frozen dataclass (it crosses to worker processes) that sets :attr:`name` and
    :attr:`file`, and implements :meth:`questions`, :meth:`prepare`, :meth:`beside` and :meth:`score`.
    """

    name: str = ""
    """Which side check (a key of the batch's preparations)."""
    file: str = ""
    """The file it reads from each hand-in, released beside the notebooks (learners edit it)."""

    def questions(self) -> Mapping[str, float]:
        """Its grade_ids and their points, in the order they are shown."""
        raise NotImplementedError

    def titles(self) -> Mapping[str, str]:
        """A title per grade_id for the feedback page (the grade_id itself where absent)."""
        return {}

    def prepare(self, released: bytes, run: Runner) -> Any:
        """Once per batch, from the released file: what :meth:`score` compares each hand-in with
        (plain values: it travels to worker processes and Dask workers)."""
        return None

    def beside(self, released: bytes, handed_in: bytes | None) -> bytes | None:
        """The file's content while the notebooks run (default: the released one); None: no such file."""
        return released

    def score(self, handed_in: bytes | None, released: bytes, prepared: Any, run: Runner) -> dict[str, QuestionResult]:
        """A QuestionResult per grade_id of :meth:`questions`, for one hand-in (its bytes, None when absent)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Lesson:
    """An assignment's instructor files and what the engine does for it beyond stock nbgrader."""

    name: str
    """The assignment's name: its folder in the release and in every submission (``<student>/<name>/``)."""
    notebooks: tuple[Path, ...]
    """The instructor notebooks (solutions and hidden tests included), released under their file names."""
    files: tuple[Path, ...] = ()
    """Other files released beside them, as they are (a lab script, data)."""
    checks: Mapping[str, Any] = field(default_factory=dict)
    """Trusted checks by grade_id (see the module)."""
    side_checks: tuple[SideCheck, ...] = ()
    preload: tuple[str, ...] = ()
    course_id: str = ""
    """nbgrader's course id for the course root the grader writes (empty: nbgrader's default)."""

    def side_questions(self) -> dict[str, float]:
        """Every side check's grade_ids and points, in order."""
        return {gid: float(points) for check in self.side_checks for gid, points in check.questions().items()}

    def side_titles(self) -> dict[str, str]:
        """Every side-check question's title (its grade_id where the side check gives none)."""
        return {gid: check.titles().get(gid, gid) for check in self.side_checks for gid in check.questions()}


#: The lesson of an assignment without one: stock nbgrader's grading, every hardening on.
PLAIN = Lesson(name="", notebooks=())
