"""``course-grade release``: the student version, as learners receive it.

``nbgrader generate_assignment`` (run for real, in a throwaway course folder)
clears solutions, hidden tests and outputs and locks the test cells; we then
check that nothing of a solution or a hidden test survived before writing
``OUT/<assignment>/`` with the student notebooks and the other files beside them, and, in
``OUT/``, the learner's install (:mod:`autograder.learner.learner_env`: a wheel of the course library
and a ``requirements.txt``, nothing of the grader).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..source.assignment import Assignment, default_assignment, load_source
from ..publish.course import build_course
from ..errors import AutograderError
from ..source.hidden import RECORDER, STOCK_BEGIN, STOCK_END
from .learner_env import write_learner_install

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", RECORDER, STOCK_BEGIN,
           STOCK_END)
_REGION = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)(.*?)### END \1", re.S)


@dataclass
class ReleaseResult:
    """What ``release`` wrote."""

    folder: str
    """OUT/<assignment>/, ready to hand out."""
    files: list[str]
    """Its files, relative to the folder."""
    seconds: float
    learner_install: list[str] = ()
    """OUT/requirements.txt and the wheel it names: ``pip install -r requirements.txt`` in OUT/."""


def secret_lines(assignment: Assignment) -> list[str]:
    """Lines of solutions and hidden tests that must not appear in the release (of any notebook).

    Lines that also occur outside those regions (a function signature, say) are not secrets.
    """
    secret, public = set(), set()
    for path in assignment.notebooks:   # as the instructor wrote them: the stock-nbgrader checks included
        secret_and_public(nbformat.read(path, as_version=4), secret, public)
    return sorted(secret - public)


def secret_and_public(nb, secret: set[str], public: set[str]) -> None:
    """Add a notebook's solution and hidden-test lines to ``secret``, its other lines to ``public``."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        text = cell.source
        regions = [m.group(2) for m in _REGION.finditer(text)]
        if meta.get("solution") and cell.cell_type == "markdown" and not regions:
            regions = [text]  # nbgrader replaces a whole markdown answer
        outside = _REGION.sub("", text) if regions != [text] else ""
        public.update(line.strip() for line in outside.splitlines())
        for region in regions:
            secret.update(line.strip() for line in region.splitlines() if len(line.strip()) >= 16)


def check_release(folder: Path, assignment: Assignment) -> None:
    """Raise AutograderError if a student notebook leaks a solution or a hidden test, or a file is not
    released as the instructor wrote it."""
    secrets = secret_lines(assignment)
    for path in assignment.notebooks:
        text = (folder / path.name).read_text(encoding="utf-8")
        leaks = [m for m in MARKERS if m in text]
        cells_text = "\n".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                               for c in json.loads(text)["cells"])
        leaks += [line for line in secrets if line in cells_text]
        if leaks:
            raise AutograderError(f"the release of {assignment.name} leaks {len(leaks)} solution/hidden-test "
                                  f"line(s), e.g. {leaks[0]!r}; fix the markers in {path}")
    for path in assignment.files:
        name = assignment.file_name(path)
        if (folder / name).read_bytes() != Path(path).read_bytes():
            raise AutograderError(f"the released {name} differs from the instructor's file {path}")


def main(out: str | Path = "release", assignment: Assignment | None = None) -> ReleaseResult:
    """Build ``OUT/<assignment>/`` with nbgrader and check it hides every solution and hidden test.
    ``assignment``: the installed lesson's by default (:func:`autograder.source.assignment.default_assignment`)."""
    start = time.monotonic()
    assignment = assignment or default_assignment()
    load_source(assignment)  # fail early, with a clear message, on a broken source
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        released = build_course(Path(tmp), assignment)
        check_release(released, assignment)
        out.mkdir(parents=True, exist_ok=True)
        target = out / assignment.name
        staging = out / f".{assignment.name}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        # what a learner hands in is this folder: nothing of Jupyter's (checkpoints) or Python's (caches) in it
        shutil.copytree(released, staging, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    install = write_learner_install(out)
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    return ReleaseResult(folder=str(target), files=files, seconds=round(time.monotonic() - start, 2),
                         learner_install=[str(p) for p in install])
