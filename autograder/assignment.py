"""The assignment as the instructor wrote it: cells, points and the trusted checks.

Everything that decides a grade comes from here, never from a submission: which
cells are autograded tests (and their points), which are graded by hand, and
the exact text of every locked cell (:mod:`autograder.restore` puts it back into
a submitted notebook).

>>> spec = load_source(Assignment())
>>> len(spec.tests), spec.notebook_points, spec.max_score, spec.manual_max_score
(19, 37.0, 40.0, 3.0)
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from .cells import grade_id as cell_grade_id
from .cells import is_grade, is_locked, is_solution, nbgrader_meta
from .cells import points as cell_points
from .errors import AutograderError

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "l14-04-model-memory"
SOURCE_NOTEBOOK = REPO / "notebooks" / "level-14" / f"{ASSIGNMENT}.ipynb"
SOURCE_LAB = REPO / "labs" / "notebooks" / "level-14" / f"{ASSIGNMENT}.py"

# The lab-edit check: three autograded sub-questions of one point each (see autograder.lab).
LAB_QUESTIONS = {
    "lab_edit_only_active_sequences": 1.0,
    "lab_reports_not_fit": 1.0,
    "lab_only_kv_doubled": 1.0,
}


@dataclass(frozen=True)
class Assignment:
    """Where an assignment's instructor files are. The defaults are the L14.4 assignment."""

    name: str = ASSIGNMENT
    """Folder name in the release and in every submission (``<student>/<name>/``)."""
    notebook: Path = SOURCE_NOTEBOOK
    """The instructor notebook: solutions and hidden tests included."""
    lab: Path = SOURCE_LAB
    """The lab script as released; learners hand it back edited."""
    checks: str = "lessons.l14_04.checks"
    """Module name (or path of a .py file) holding ``CHECKS``, the trusted scoring per grade_id."""

    @property
    def notebook_name(self) -> str:
        """The notebook's file name in the release and in submissions."""
        return f"{self.name}.ipynb"

    @property
    def lab_name(self) -> str:
        """The lab's file name: beside the notebook in the release and in submissions."""
        return self.lab.name


@dataclass(frozen=True)
class GradedCell:
    """A cell that carries points: an autograded test or a hand-graded answer."""

    grade_id: str
    points: float
    index: int
    """Position in the instructor notebook."""
    manual: bool
    """True for answers graded by hand (nbgrader grade + solution cells)."""


@dataclass(frozen=True)
class SourceSpec:
    """The parsed instructor notebook."""

    nb: nbformat.NotebookNode
    tests: tuple[GradedCell, ...]
    """Autograded test cells, in notebook order."""
    manual: tuple[GradedCell, ...]
    """Hand-graded answer cells."""
    locked_ids: tuple[str, ...]
    """grade_ids of cells restored from the source (tests and read-only cells), in order."""
    solution_ids: frozenset[str]
    """grade_ids of cells the learner writes (solution cells, graded or not)."""
    sha256: str = field(default="")

    @property
    def notebook_points(self) -> float:
        return sum(c.points for c in self.tests)

    @property
    def max_score(self) -> float:
        """Autograded points: the notebook's tests plus the lab-edit check."""
        return self.notebook_points + sum(LAB_QUESTIONS.values())

    @property
    def manual_max_score(self) -> float:
        return sum(c.points for c in self.manual)

    def cell(self, grade_id: str) -> nbformat.NotebookNode:
        for cell in self.nb.cells:
            if cell_grade_id(cell) == grade_id:
                return cell
        raise KeyError(grade_id)


@functools.lru_cache(maxsize=8)
def _load_source_cached(path: str, mtime_ns: int) -> SourceSpec:
    raw = Path(path).read_bytes()
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as e:
        raise AutograderError(f"the instructor notebook {path} cannot be read: {e}") from None
    tests, manual, locked, solutions, seen = [], [], [], set(), set()
    for i, cell in enumerate(nb.cells):
        meta = nbgrader_meta(cell)
        gid = cell_grade_id(cell)
        if not meta:
            continue
        if gid is None:
            raise AutograderError(f"cell {i + 1} of {path} has nbgrader metadata but no grade_id")
        if gid in seen:
            raise AutograderError(f"grade_id {gid!r} appears twice in {path}; grade_ids must be unique")
        seen.add(gid)
        # The same reading of the flags as every submission's cells get (cells.py): True, not truthy.
        grade, solution, locked_flag = is_grade(cell), is_solution(cell), is_locked(cell)
        if grade:
            pts = cell_points(cell)
            if pts is None:
                raise AutograderError(f"grade cell {gid!r} in {path} needs positive points, has {meta.get('points')!r}")
            graded = GradedCell(gid, pts, i, manual=solution)
            (manual if solution else tests).append(graded)
            if cell.cell_type != "code" and not solution:
                raise AutograderError(f"grade cell {gid!r} in {path} is {cell.cell_type}; tests must be code cells")
        if solution:
            solutions.add(gid)
        elif grade or locked_flag:
            locked.append(gid)
    for gid in LAB_QUESTIONS:
        if gid in seen:
            raise AutograderError(f"grade_id {gid!r} in {path} is reserved for the lab-edit check")
    return SourceSpec(nb=nb, tests=tuple(tests), manual=tuple(manual), locked_ids=tuple(locked),
                      solution_ids=frozenset(solutions), sha256=hashlib.sha256(raw).hexdigest())


def load_source(assignment: Assignment) -> SourceSpec:
    """Parse the instructor notebook (cached while the file is unchanged)."""
    path = Path(assignment.notebook)
    if not path.is_file():
        raise AutograderError(f"the instructor notebook {path} does not exist; pass the right path "
                              f"(Assignment(notebook=...)) or check out the notebook")
    return _load_source_cached(str(path.resolve()), path.stat().st_mtime_ns)


# ---- checks ------------------------------------------------------------------------------

def load_checks(spec: str) -> Any:
    """The module holding ``CHECKS``: by module name, or from a .py file path (tests use a stand-in)."""
    if spec.endswith(".py"):
        path = Path(spec).resolve()
        name = "_course_grade_checks_" + hashlib.sha1(str(path).encode()).hexdigest()[:10]
        if name in sys.modules:
            return sys.modules[name]
        loader_spec = importlib.util.spec_from_file_location(name, path)
        if loader_spec is None or not path.is_file():
            raise AutograderError(f"checks file {path} does not exist")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(spec)
    except ImportError as e:
        raise AutograderError(f"cannot import the checks module {spec!r}: {e}") from None


def checks_source_sha(spec: str) -> str:
    module = load_checks(spec)
    try:
        return hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()
    except (OSError, TypeError):
        return ""


def validate_checks(spec: SourceSpec, checks_module: Any, where: str) -> None:
    """Every autograded test cell must have a trusted check (else the grader cannot run)."""
    checks = getattr(checks_module, "CHECKS", None)
    if not isinstance(checks, dict):
        raise AutograderError(f"{where} has no CHECKS dict")
    missing = [c.grade_id for c in spec.tests if c.grade_id not in checks]
    if missing:
        raise AutograderError(f"no trusted check for test cell(s) {missing} in {where}; add them to CHECKS")


def score_answer(checks_module: Any, grade_id: str, values: Any) -> tuple[bool, str]:
    """(passed, message) from the trusted check ``CHECKS[grade_id]``: the one score dispatch.

    Runs in the grader's process on plain JSON values. Unknown ids and malformed values
    score nothing, and no value can crash the grader.
    """
    check = getattr(checks_module, "CHECKS", {}).get(grade_id)
    if check is None:
        return False, f"no check is defined for {grade_id!r}"
    if not isinstance(values, dict):
        return False, "the recorded answer is not a dict of values"
    try:
        # Re-read as plain JSON: drops any container subclass (e.g. nbformat's NotebookNode)
        result = check.score(json.loads(json.dumps(values, allow_nan=False)))
        passed, message = result.passed, result.message
    except Exception as e:  # noqa: BLE001 - odd values must never crash the grader
        return False, f"the recorded answer could not be checked ({type(e).__name__})"
    return passed is True, str(message or "")
