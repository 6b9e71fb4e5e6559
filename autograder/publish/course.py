"""An nbgrader course directory built from the instructor files, with nbgrader's own machinery.

``release`` builds one in a temporary folder and keeps ``release/<assignment>/``;
``autograde`` builds one in RESULTS_DIR, so that RESULTS_DIR is a course root
that ``nbgrader formgrader`` opens for the hand-graded part (``gradebook.db``,
``autograded/<student>/<assignment>/``, ``feedback/...``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..source.assignment import Assignment, load_lesson
from ..errors import AutograderError
from .layout import db_url


def nbgrader_env() -> dict[str, str]:
    """nbgrader shells out to ``alembic`` when it creates a gradebook: put our venv's bin first."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def write_config(root: Path, assignment: Assignment) -> None:
    """``root/nbgrader_config.py``: the course root, its gradebook, and (with a lesson) its course id and
    the files its side checks read, which stock nbgrader must not overwrite from the source."""
    lesson = load_lesson(assignment.lesson)
    learners = [check.file for check in lesson.side_checks]
    (root / "nbgrader_config.py").write_text(
        "# Written by course-grade: this folder is an nbgrader course root.\n"
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(root.resolve())!r}\n"
        + (f"c.CourseDirectory.course_id = {lesson.course_id!r}\n" if lesson.course_id else "")
        + f"c.CourseDirectory.db_url = {db_url(root)!r}\n"
        # the files the learner edits (a lab script) are theirs; never overwrite them from the source
        + (f"c.Autograde.exclude_overwriting = {{{assignment.name!r}: {learners!r}}}\n" if learners else "")
        # the course's header and footer notebooks, which generate_assignment adds to each notebook
        + "".join(f"c.IncludeHeaderFooter.{what} = {str(path)!r}\n"
                  for what, path in (("header", assignment.header), ("footer", assignment.footer)) if path)
    )


def build_course(root: Path, assignment: Assignment) -> Path:
    """Copy the instructor files into ``root/source/<assignment>/`` and run ``nbgrader generate_assignment``.

    Returns ``root/release/<assignment>/``. Raises AutograderError with nbgrader's own message if it fails.
    """
    root = Path(root)
    src = root / "source" / assignment.name
    if src.exists():
        shutil.rmtree(src)
    write_course_files(root, assignment)
    cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", assignment.name, "--force"]
    proc = subprocess.run(cmd, cwd=root, env=nbgrader_env(), capture_output=True, text=True)
    release = root / "release" / assignment.name
    if proc.returncode != 0 or not all((release / name).is_file() for name in assignment.notebook_names):
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise AutograderError(f"nbgrader generate_assignment failed in {root}:\n{tail}")
    return release


def build_gradebook(root: Path, assignment: Assignment) -> None:
    """Make ``root`` a course root for grading, in-process (about 1 s instead of generate_assignment's 7).

    nbgrader's own preprocessors, in generate_assignment's order up to SaveCells, record each
    notebook's grade, solution, task and source cells in ``root/gradebook.db``; the instructor
    files are copied to ``root/source/<assignment>/`` as nbgrader expects.
    """
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import (CheckCellMetadata, ClearOutput, ClearSolutions, ComputeChecksums,
                                        LockCells, SaveCells)

    root = Path(root)
    src = write_course_files(root, assignment)
    url = db_url(root)
    import nbgrader.api

    old_path, old_version = os.environ.get("PATH", ""), nbgrader.api.get_alembic_version
    os.environ["PATH"] = nbgrader_env()["PATH"]  # a new gradebook runs `alembic heads`...
    head = alembic_head()
    if head:  # ...unless we can read the head revision from nbgrader's migrations (saves ~1.5 s)
        nbgrader.api.get_alembic_version = lambda: head
    try:
        with Gradebook(url) as gb:
            gb.update_or_create_assignment(assignment.name)
        for name in assignment.notebook_names:
            nb = nbformat.read(src / name, as_version=4)
            resources = {"nbgrader": {"notebook": Path(name).stem, "assignment": assignment.name,
                                      "student": ".", "db_url": url}}
            for step in (LockCells(), ClearSolutions(), ClearOutput(), CheckCellMetadata(), ComputeChecksums(),
                         SaveCells()):
                nb, resources = step.preprocess(nb, resources)
    except RuntimeError as e:  # SaveCells refuses to change cells once there are submissions
        raise AutograderError(f"cannot update the gradebook in {root}: {e}; grade into a new RESULTS_DIR") from None
    finally:
        os.environ["PATH"] = old_path
        nbgrader.api.get_alembic_version = old_version


def write_course_files(root: Path, assignment: Assignment) -> Path:
    """The instructor files in ``root/source/<assignment>/`` and the course's nbgrader_config.py; returns the folder."""
    src = Path(root) / "source" / assignment.name
    for name, path in assignment.instructor_files().items():
        if not Path(path).is_file():
            raise AutograderError(f"instructor file {path} does not exist")
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, src / name)
    write_config(Path(root), assignment)
    return src


#: Built gradebooks, one per instructor source (see :func:`template_path`).
TEMPLATE_ENV = "COURSE_GRADE_CACHE"


def template_path(source_key: str, assignment: Assignment) -> Path | None:
    """Where the gradebook built for ``source_key`` (the instructor files' digest) and ``assignment``'s
    names is kept between batches, or None where no private cache folder can be made.

    A new RESULTS_DIR then starts from a copy of it (~5 ms) instead of running nbgrader's preprocessors
    (~0.3 s of CPU, 130 commits), as a stock nbgrader course keeps the gradebook that
    ``generate_assignment`` made. The key also covers what builds it: nbgrader's version and this
    module, gradebook.py and assignment.py, and the lesson's side-check questions (grade cells too),
    so a changed builder never reuses an old template.
    ``$COURSE_GRADE_CACHE`` (default ``~/.cache/course-grade``) names the folder; ``off`` turns it off.
    """
    import hashlib
    from importlib.metadata import version

    folder = os.environ.get(TEMPLATE_ENV) or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                                  / "course-grade")
    if folder == "off":
        return None
    package = Path(__file__).resolve().parents[1]
    # nbgrader's version from its metadata: importing the package costs ~0.4 s (its server extensions)
    lesson = load_lesson(assignment.lesson)
    h = hashlib.sha256(repr((source_key, version("nbgrader"), lesson.course_id, assignment.name,
                             assignment.notebook_names, assignment.file_names,
                             sorted(lesson.side_questions().items()))).encode())
    for name in ("publish/course.py", "publish/gradebook.py", "source/assignment.py"):
        h.update((package / name).read_bytes())
    templates = Path(folder) / "gradebooks"
    try:
        templates.mkdir(parents=True, exist_ok=True)
        os.chmod(templates, 0o700)   # it holds the instructor's source cells, as gradebook.db does
    except OSError:
        return None
    return templates / f"{h.hexdigest()}.db"


def copy_gradebook(source: Path, target: Path) -> None:
    """A consistent copy of the SQLite database ``source`` at ``target`` (written beside it, then renamed)."""
    import sqlite3
    import tempfile
    from urllib.request import pathname2url

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:   # the source read-only, by a quoted URI: its path may hold "#" or a space
        src = sqlite3.connect(f"file:{pathname2url(str(source))}?mode=ro", uri=True)
        try:
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def alembic_head() -> str | None:
    """The newest migration of nbgrader's gradebook schema: the revision no other revises."""
    import re

    import nbgrader

    versions = Path(nbgrader.__file__).parent / "alembic" / "versions"
    revisions, parents = set(), set()
    for path in versions.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        rev = re.search(r"^revision\s*=\s*['\"](\w+)['\"]", text, re.M)
        down = re.search(r"^down_revision\s*=\s*['\"](\w+)['\"]", text, re.M)
        if rev:
            revisions.add(rev.group(1))
        if down:
            parents.add(down.group(1))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None
