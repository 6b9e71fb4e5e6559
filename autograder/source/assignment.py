r"""The assignment as the instructor wrote it: its notebooks, its files, its cells and points, and its lesson.

Everything that decides a grade comes from here, never from a submission: which cells are
autograded tests (and their points), which are graded by hand (answers and tasks), the exact
text of every locked cell (:mod:`autograder.source.restore` puts it back into a submitted notebook),
and what the lesson adds (:mod:`autograder.contract.lesson`: trusted checks, side checks).

An assignment is any nbgrader ``source/<assignment>/`` folder (:meth:`Assignment.from_source`:
its notebooks, every other file released beside them) or a lesson's (:func:`lesson_assignment`,
``course-grade``'s default: the lessons installed through the ``course_grade.lessons`` entry points).

>>> import json, tempfile
>>> folder = Path(tempfile.mkdtemp()) / "ps0"
>>> folder.mkdir()
>>> def cell(kind, source, **flags):
...     meta = {"grade": False, "solution": False, "locked": False, "schema_version": 3, **flags}
...     return {"id": flags["grade_id"], "cell_type": kind, "metadata": {"nbgrader": meta}, "source": source,
...             **({"outputs": [], "execution_count": None} if kind == "code" else {})}
>>> nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
...     cell("code", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", grade_id="f", solution=True),
...     cell("code", "assert f() == 1", grade_id="test_f", grade=True, points=2),
...     cell("markdown", "Explain f.", grade_id="why", grade=True, solution=True, points=1)]}
>>> _ = (folder / "problem.ipynb").write_text(json.dumps(nb))
>>> spec = load_source(Assignment.from_source(folder))
>>> [t.grade_id for t in spec.tests], spec.max_score, spec.manual_max_score, spec.manual[0].released
(['test_f'], 2.0, 1.0, 'YOUR ANSWER HERE')
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..contract.cells import grade_id as cell_grade_id
from ..contract.cells import is_grade, is_locked, is_solution, is_task, nbgrader_meta, released_source
from ..contract.cells import points as cell_points
from ..errors import AutograderError
from .hidden import records_answer, strip_stock_check
from ..contract.lesson import PLAIN, Lesson

if TYPE_CHECKING:   # nbformat is imported where a notebook is read: `make lab` imports this module before it exists
    import nbformat

#: The entry-point group through which an installed package offers its lessons (``name = "module"``).
ENTRY_POINTS = "course_grade.lessons"


@dataclass(frozen=True)
class Assignment:
    """Where an assignment's instructor files are, and which lesson (if any) grades beyond stock nbgrader."""

    name: str
    """Folder name in the release and in every submission (``<student>/<name>/``)."""
    notebooks: tuple[Path, ...]
    """The instructor notebooks: solutions and hidden tests included."""
    files: tuple[Path, ...] = ()
    """Every other file released beside them (learners may hand some back edited: a lesson's side checks)."""
    lesson: str | None = None
    """The lesson: a module name, or the path of a lesson file or package folder (it defines ``LESSON``);
    None: a plain nbgrader assignment."""
    root: Path | None = None
    """The folder the files lie in (they are released under their path relative to it); None: under
    their own file names."""
    header: Path | None = None
    """The course's header notebook (nbgrader's ``IncludeHeaderFooter.header``, from its nbgrader_config.py):
    ``release`` puts its cells first in every notebook, as ``nbgrader generate_assignment`` does."""
    footer: Path | None = None
    """The course's footer notebook (``IncludeHeaderFooter.footer``): its cells go last."""

    def __post_init__(self):
        object.__setattr__(self, "notebooks", tuple(Path(p) for p in self.notebooks))
        object.__setattr__(self, "files", tuple(Path(p) for p in self.files))
        if self.lesson is not None and is_lesson_path(self.lesson):   # the same lesson from any working folder
            object.__setattr__(self, "lesson", str(Path(self.lesson).resolve()))

    @property
    def notebook_names(self) -> tuple[str, ...]:
        """The notebooks' file names in the release and in submissions."""
        return tuple(p.name for p in self.notebooks)

    @property
    def notebook_name(self) -> str:
        """The first notebook's file name (the only one, for most assignments)."""
        return self.notebooks[0].name

    def file_name(self, path: Path) -> str:
        """Where ``path`` (one of :attr:`files`) is released, relative to the assignment's folder."""
        return Path(path).relative_to(self.root).as_posix() if self.root is not None else Path(path).name

    @property
    def file_names(self) -> tuple[str, ...]:
        return tuple(self.file_name(p) for p in self.files)

    def instructor_files(self) -> dict[str, Path]:
        """Every instructor file by its released name: the notebooks, then the other files."""
        return {**{p.name: p for p in self.notebooks}, **{self.file_name(p): p for p in self.files}}

    @classmethod
    def from_source(cls, folder: str | Path, lesson: str | None = None, header: Path | None = None,
                    footer: Path | None = None) -> Assignment:
        """An nbgrader ``source/<assignment>/`` folder: its ``*.ipynb`` notebooks and every other file in it."""
        folder = Path(folder).resolve()
        if not folder.is_dir():
            raise AutograderError(f"--source: {folder} is not a folder; give the course's source/ folder, which "
                                  f"holds one folder per assignment (source/<assignment>/*.ipynb)")
        notebooks = tuple(sorted(folder.glob("*.ipynb")))
        if not notebooks:
            raise AutograderError(f"the assignment folder {folder} holds no notebook (*.ipynb); give the course's "
                                  f"source/ folder and --assignment NAME")
        files = tuple(sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".ipynb"
                             and not any(part.startswith(".") for part in p.relative_to(folder).parts)
                             and ".ipynb_checkpoints" not in p.parts and "__pycache__" not in p.parts))
        return cls(name=folder.name, notebooks=notebooks, files=files, lesson=lesson, root=folder, header=header,
                   footer=footer)


# ---- lessons -----------------------------------------------------------------------------------

def installed_lessons() -> dict[str, str]:
    """The lessons installed packages offer (``course_grade.lessons`` entry points): name -> module.

    Run from a checkout that is not installed (``make lab`` runs this file with the machine's own
    Python, before any package exists), the checkout's ``pyproject.toml`` names them instead.
    """
    from importlib.metadata import entry_points

    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINTS)}
    if found:
        return found
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file() and (pyproject.parent / "lessons").is_dir():
        import tomllib

        table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("entry-points", {})
        return dict(table.get(ENTRY_POINTS, {}))
    return {}


def is_lesson_path(ref: str) -> bool:
    """A lesson given as a path (a ``.py`` file, or a package folder written with a ``/``), not a module name."""
    return ref.endswith(".py") or "/" in ref


def _lesson_module(ref: str):
    """The module a lesson reference names: an importable module, or a file or package folder loaded by path."""
    if is_lesson_path(ref):
        path = Path(ref).resolve()
        file = path / "__init__.py" if path.is_dir() else path
        if not file.is_file():
            raise AutograderError(f"--lesson {ref}: no such lesson file (a .py file or a package folder defining LESSON)")
        name = "_course_grade_lesson_" + hashlib.sha1(str(path).encode()).hexdigest()[:10]
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(
                name, file, submodule_search_locations=[str(path)] if path.is_dir() else None)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
        return sys.modules[name]
    try:
        return importlib.import_module(ref)
    except ImportError as e:
        raise AutograderError(f"cannot import the lesson {ref!r}: {e}") from None


@functools.lru_cache(maxsize=16)
def load_lesson(ref: str | None) -> Lesson:
    """The :class:`~autograder.contract.lesson.Lesson` a reference names (:data:`~autograder.contract.lesson.PLAIN` for None)."""
    if ref is None:
        return PLAIN
    lesson = getattr(_lesson_module(ref), "LESSON", None)
    if not isinstance(lesson, Lesson):
        raise AutograderError(f"the lesson {ref!r} defines no LESSON (an autograder.contract.lesson.Lesson)")
    return lesson


def lesson_folder(ref: str | None) -> Path | None:
    """The folder (or file) a lesson's code is in: what a batch's fingerprint hashes."""
    if ref is None:
        return None
    module = _lesson_module(ref)
    file = Path(module.__file__).resolve()
    return file.parent if file.name == "__init__.py" else file


def lesson_assignment(ref: str) -> Assignment:
    """The assignment a lesson describes, its instructor files where the lesson keeps them."""
    lesson = load_lesson(ref)
    return Assignment(name=lesson.name, notebooks=lesson.notebooks, files=lesson.files, lesson=ref)


def default_assignment(name: str | None = None, source: str | Path | None = None, lesson: str | None = None,
                       submitted: str | Path | None = None) -> Assignment:
    """The assignment a verb grades: ``--source DIR`` (the course's ``source/`` folder, or one assignment's
    folder in it) and ``--assignment NAME``, with ``--lesson`` if given; else the installed lesson of that
    name, or the only one, or the one the submissions' folders name."""
    if source is not None:
        source = Path(source)
        course_root = source if (source / "source").is_dir() else source.parent if source.name == "source" else None
        if (source / "source").is_dir():     # a course root: its source/ folder
            source = source / "source"
        header, footer = header_footer(course_root) if course_root is not None else (None, None)
        found = assignment_folders(source)
        if name is None and found:   # a course's source/: its own notebooks are headers and footers, not assignments
            beside = sorted(p.name for p in source.glob("*.ipynb"))
            name = _one(found, submitted, f"--source {source}",
                        f"; {', '.join(beside)} beside them {'is' if len(beside) == 1 else 'are'} nbgrader "
                        f"header/footer notebook{'s' * (len(beside) != 1)}, not assignments" if beside else "")
        folder = source if name is None or source.name == name and any(source.glob("*.ipynb")) else source / name
        return Assignment.from_source(folder, lesson=lesson, header=header, footer=footer)
    if lesson is not None:
        return lesson_assignment(lesson)
    lessons = installed_lessons()
    if name is None:
        name = _one(sorted(lessons), submitted, "the installed lessons")
    if name not in lessons:
        raise AutograderError(f"--assignment {name!r} is not an installed lesson ({', '.join(sorted(lessons)) or 'none'}); "
                              f"give --source DIR for an nbgrader assignment, or --lesson for a lesson of your own")
    return lesson_assignment(lessons[name])


def header_footer(root: Path) -> tuple[Path | None, Path | None]:
    """The header and footer notebooks a course's ``nbgrader_config.py`` names (``IncludeHeaderFooter``; paths
    relative to the course root, as nbgrader runs there), or None. The file is run as nbgrader runs it
    (traitlets' PyFileConfigLoader)."""
    if not (Path(root) / "nbgrader_config.py").is_file():
        return None, None
    from traitlets.config.loader import PyFileConfigLoader

    try:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    except Exception as e:  # noqa: BLE001 - the instructor's file: say what went wrong, in one line
        raise AutograderError(f"{root}/nbgrader_config.py cannot be read ({type(e).__name__}: {e}); fix it") from None
    section = config.get("IncludeHeaderFooter") or {}
    found = []
    for what in ("header", "footer"):
        value = section.get(what) if hasattr(section, "get") else None
        if not isinstance(value, str) or not value:
            found.append(None)
            continue
        path = (Path(root) / value).resolve()
        if not path.is_file():
            raise AutograderError(f"{root}/nbgrader_config.py names the {what} notebook {value!r} "
                                  f"(IncludeHeaderFooter.{what}), which is not there; fix the path")
        found.append(path)
    return found[0], found[1]


def assignment_folders(source: Path) -> list[str]:
    """The assignments of a course's ``source/`` folder: its folders that hold notebooks, as nbgrader's
    ``source/{assignment_id}/{notebook_id}.ipynb`` layout has them. A notebook in ``source/`` itself is no
    assignment: courses keep their header and footer there (nbgrader 0.9.6's ``IncludeHeaderFooter.header``,
    nbgrader/preprocessors/headerfooter.py, which only ``generate_assignment`` reads: it prepends the
    header's cells to each released notebook, and ``autograde`` grades those cells as any other)."""
    if not source.is_dir():
        return []
    return sorted(p.name for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")
                  and any(p.glob("*.ipynb")))


def _one(names: list[str], submitted: str | Path | None, where: str, aside: str = "") -> str:
    """The assignment meant when none is named: the only one there is, or the only one handed in."""
    if len(names) == 1:
        return names[0]
    if submitted is not None and Path(submitted).is_dir():
        handed = {p.name for student in Path(submitted).iterdir() if student.is_dir()
                  for p in student.iterdir() if p.is_dir() and p.name in names}
        if len(handed) == 1:
            return handed.pop()
    raise AutograderError(f"{where} hold{'s' * (len(names) == 1)} {len(names)} assignments "
                          f"({', '.join(names) or 'none'}){aside}; say which with --assignment NAME")


# ---- the parsed source ---------------------------------------------------------------------

TEST, ANSWER, TASK = "test", "answer", "task"


@dataclass(frozen=True)
class GradedCell:
    """A cell that carries points: an autograded test, or an answer or task graded by hand."""

    grade_id: str
    points: float
    index: int
    """Position in the instructor notebook."""
    manual: bool
    """True for what a person grades (nbgrader's grade + solution cells, and task cells)."""
    notebook: str = ""
    """The notebook's file name."""
    key: str = ""
    """Its name in the results: the grade_id, or ``<notebook stem>/<grade_id>`` where two notebooks share it."""
    kind: str = TEST
    """:data:`TEST`, :data:`ANSWER` (a hand-graded answer) or :data:`TASK` (a hand-graded task)."""
    checked: bool = False
    """A test scored by the lesson's trusted check from the answer its hidden part records."""
    released: str | None = None
    """An answer's text as released: handed back unchanged, it is nbgrader's "no response" (0 points)."""
    label: str = ""
    """A test's name for people, unique in the assignment (:func:`test_labels`); "" for other cells."""


@dataclass(frozen=True)
class NotebookSpec:
    """One parsed instructor notebook (checked tests without their stock-nbgrader part)."""

    name: str
    nb: nbformat.NotebookNode
    tests: tuple[GradedCell, ...]
    """Autograded test cells, in notebook order."""
    manual: tuple[GradedCell, ...]
    """Hand-graded answer and task cells."""
    locked_ids: tuple[str, ...]
    """grade_ids of cells restored from the source (tests, tasks and read-only cells), in order."""
    solution_ids: frozenset[str]
    """grade_ids of cells the learner writes (solution cells, graded or not)."""
    sha256: str = ""

    def cell(self, grade_id: str) -> nbformat.NotebookNode:
        for cell in self.nb.cells:
            if cell_grade_id(cell) == grade_id:
                return cell
        raise KeyError(grade_id)


@dataclass(frozen=True)
class AssignmentSpec:
    """The parsed assignment: its notebooks, and the lesson's side questions."""

    name: str
    notebooks: tuple[NotebookSpec, ...]
    side: dict[str, float] = field(default_factory=dict)
    """The lesson's side-check questions and their points, in order."""
    sha256: str = ""
    """Of every instructor file (notebooks and files), by name."""

    @property
    def tests(self) -> tuple[GradedCell, ...]:
        return tuple(t for nb in self.notebooks for t in nb.tests)

    @property
    def manual(self) -> tuple[GradedCell, ...]:
        return tuple(m for nb in self.notebooks for m in nb.manual)

    @property
    def notebook_points(self) -> float:
        return sum(c.points for c in self.tests)

    @property
    def max_score(self) -> float:
        """Autograded points: the notebooks' tests plus the side checks."""
        return self.notebook_points + sum(self.side.values())

    @property
    def manual_max_score(self) -> float:
        return sum(c.points for c in self.manual)

    def notebook(self, name: str) -> NotebookSpec:
        return next(nb for nb in self.notebooks if nb.name == name)


def _released_answers(nb: nbformat.NotebookNode, path: str) -> dict[str, str]:
    """Each solution cell's text as ``nbgrader generate_assignment`` releases it (cells.released_source:
    nbgrader's ClearSolutions, without importing nbgrader, ~0.4 s, on the batch's critical path)."""
    language = (nb.metadata.get("kernelspec") or {}).get("language", "python")
    out = {}
    for cell in nb.cells:
        gid = cell_grade_id(cell)
        if gid and is_solution(cell):
            try:
                out[gid] = released_source(cell, language)
            except ValueError as e:
                raise AutograderError(f"solution cell {gid!r} of {path}: {e}") from None
    return out


def _parse(path: str, raw: bytes, checks: frozenset[str], has_checks: bool, where: str) -> NotebookSpec:
    try:
        import nbformat

        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as e:  # noqa: BLE001
        raise AutograderError(f"the instructor notebook {path} cannot be read: {e}") from None
    name = Path(path).name
    tests, manual, locked, solutions, seen, unchecked = [], [], [], set(), set(), []
    answers = None
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
        grade, solution, locked_flag, task = is_grade(cell), is_solution(cell), is_locked(cell), is_task(cell)
        if grade or task:
            pts = cell_points(cell)
            if pts is None:
                raise AutograderError(f"{'grade' if grade else 'task'} cell {gid!r} in {path} needs points (a number, 0 or more), "
                                      f"has {meta.get('points')!r}")
            if grade and solution:
                if answers is None:
                    answers = _released_answers(nb, path)
                manual.append(GradedCell(gid, pts, i, manual=True, notebook=name, kind=ANSWER,
                                         released=answers.get(gid)))
            elif grade:
                if cell.cell_type != "code":
                    raise AutograderError(f"grade cell {gid!r} in {path} is {cell.cell_type}; tests must be code cells")
                checked = gid in checks and records_answer(cell.source)
                if has_checks and records_answer(cell.source) and gid not in checks:
                    unchecked.append(gid)
                if checked:   # course-grade scores its answer outside the kernel: the stock part never runs
                    cell.source = strip_stock_check(cell.source)
                tests.append(GradedCell(gid, pts, i, manual=False, notebook=name, kind=TEST, checked=checked))
            else:
                manual.append(GradedCell(gid, pts, i, manual=True, notebook=name, kind=TASK))
        if solution:
            solutions.add(gid)
        elif grade or locked_flag or task:
            locked.append(gid)
    if unchecked:
        raise AutograderError(f"no trusted check for test cell(s) {unchecked} of {path} in {where}; their hidden "
                              f"part records an answer: add a check to the lesson's checks")
    return NotebookSpec(name=name, nb=nb, tests=tuple(tests), manual=tuple(manual), locked_ids=tuple(locked),
                        solution_ids=frozenset(solutions), sha256=hashlib.sha256(raw).hexdigest())


@functools.lru_cache(maxsize=8)
def _load_cached(assignment: Assignment, stamps: tuple) -> AssignmentSpec:
    lesson = load_lesson(assignment.lesson)
    checks, where = frozenset(lesson.checks), f"the lesson {assignment.lesson}"
    notebooks = tuple(_parse(str(p), Path(p).read_bytes(), checks, bool(lesson.checks), where)
                      for p in assignment.notebooks)
    names = [nb.name for nb in notebooks]
    if len(set(names)) != len(names):
        raise AutograderError(f"two notebooks of {assignment.name} have the same name: {names}")
    counts: dict[str, int] = {}
    for nb in notebooks:
        for cell in (*nb.tests, *nb.manual):
            counts[cell.grade_id] = counts.get(cell.grade_id, 0) + 1

    def keyed(nb: NotebookSpec) -> NotebookSpec:
        def key(c: GradedCell) -> GradedCell:
            shared = counts[c.grade_id] > 1
            return replace(c, key=f"{Path(nb.name).stem}/{c.grade_id}" if shared else c.grade_id)
        return replace(nb, tests=tuple(map(key, nb.tests)), manual=tuple(map(key, nb.manual)))

    notebooks = tuple(keyed(nb) for nb in notebooks)
    labels = test_labels(notebooks)
    notebooks = tuple(replace(nb, tests=tuple(replace(t, label=labels[t.key]) for t in nb.tests)) for nb in notebooks)
    side = lesson.side_questions()
    taken = {c.key for nb in notebooks for c in (*nb.tests, *nb.manual)}
    for gid in side:
        if gid in taken:
            raise AutograderError(f"grade_id {gid!r} of {assignment.name} is one of the lesson's side-check questions; "
                                  f"rename the cell")
    for check in lesson.side_checks:
        if check.file not in assignment.file_names:
            raise AutograderError(f"the lesson's side check {check.name!r} reads {check.file}, which is not among "
                                  f"the assignment's files ({', '.join(assignment.file_names) or 'none'})")
    h = hashlib.sha256()
    for name, path in sorted(assignment.instructor_files().items()):
        h.update(name.encode() + b"\0" + hashlib.sha256(Path(path).read_bytes()).digest())
    return AssignmentSpec(name=assignment.name, notebooks=notebooks, side=side, sha256=h.hexdigest())


_TASK = re.compile(r"\*\*(Task \d+[^*.]*)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?(?:^[ \t]*### END HIDDEN TESTS[^\n]*$|\Z)", re.S | re.M)
#: The longest label, in characters.
LABEL_CHARS = 80


def _own_comment(source: str) -> str:
    """The first comment line of a test's visible part (never of its hidden tests), or ""."""
    for line in _HIDDEN.sub("", source).splitlines():
        text = line.strip()
        if text.startswith("#") and not text.startswith("###"):
            text = text.lstrip("#").strip()
            if text:
                return text
    return ""


def test_labels(notebooks) -> dict[str, str]:
    """Each test's label for people, by key, unique across the assignment's notebooks: the instructor's
    ``metadata.course.title``, else the heading (or "**Task N") above it, else its own first comment line,
    else its grade_id; a label several tests share gets their position, "Homework summary (test 2 of 6)".

    >>> import nbformat
    >>> v4 = nbformat.v4
    >>> nb = v4.new_notebook(cells=[v4.new_markdown_cell("## Homework summary"), v4.new_code_cell("assert a"),
    ...                             v4.new_code_cell("assert b"), v4.new_code_cell("# the mean is 2\\nassert c")])
    >>> tests = tuple(GradedCell(g, 1.0, i, manual=False, key=g) for g, i in (("t1", 1), ("t2", 2), ("t3", 3)))
    >>> test_labels([NotebookSpec("hw.ipynb", nb, tests, (), (), frozenset())])
    {'t1': 'Homework summary (test 1 of 3)', 't2': 'Homework summary (test 2 of 3)', 't3': 'Homework summary (test 3 of 3)'}
    >>> nb.cells[0].source = "Some text"
    >>> test_labels([NotebookSpec("hw.ipynb", nb, tests, (), (), frozenset())])["t3"]
    'the mean is 2'
    """
    from ..contract.text import one_line

    base: dict[str, str] = {}
    for nb in notebooks:
        at = {t.index: t for t in nb.tests}
        heading = ""
        for i, cell in enumerate(nb.nb.cells):
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            if cell.get("cell_type") == "markdown":
                found = _TASK.findall(source) or _HEADING.findall(source)
                heading = found[-1].strip() if found else heading
            test = at.get(i)
            if test is None:
                continue
            course = (cell.get("metadata") or {}).get("course")
            title = course.get("title") if isinstance(course, dict) else None
            label = title if isinstance(title, str) and title.strip() else (heading or _own_comment(source)
                                                                              or test.grade_id)
            base[test.key] = one_line(label, LABEL_CHARS)
    counts: dict[str, int] = {}
    for label in base.values():
        counts[label] = counts.get(label, 0) + 1
    seen: dict[str, int] = {}
    labels: dict[str, str] = {}
    for key, label in base.items():
        if counts[label] > 1:
            seen[label] = seen.get(label, 0) + 1
            label = f"{label} (test {seen[label]} of {counts[label]})"
        labels[key] = label
    taken = list(labels.values())
    return {key: label if taken.count(label) == 1 else f"{label} [{key}]" for key, label in labels.items()}


def load_source(assignment: Assignment) -> AssignmentSpec:
    """Parse the instructor notebooks (cached while the files are unchanged)."""
    stamps = []
    for path in (*assignment.notebooks, *assignment.files):
        path = Path(path)
        if not path.is_file():
            raise AutograderError(f"the instructor file {path} does not exist; pass the right path or check it out")
        stamps.append((str(path.resolve()), path.stat().st_mtime_ns))
    if not assignment.notebooks:
        raise AutograderError(f"the assignment {assignment.name!r} has no notebook")
    return _load_cached(assignment, tuple(stamps))
