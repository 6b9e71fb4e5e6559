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

from .assignment import Assignment
from .errors import AutograderError

COURSE_ID = "l14"


def nbgrader_env() -> dict[str, str]:
    """nbgrader shells out to ``alembic`` when it creates a gradebook: put our venv's bin first."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def write_config(root: Path, assignment: Assignment) -> None:
    (root / "nbgrader_config.py").write_text(
        "# Written by course-grade: this folder is an nbgrader course root.\n"
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(root.resolve())!r}\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.CourseDirectory.db_url = {('sqlite:///' + str((root / 'gradebook.db').resolve()))!r}\n"
        # the lab file is the learner's to edit; never overwrite it from the source
        f"c.Autograde.exclude_overwriting = {{{assignment.name!r}: [{assignment.lab_name!r}]}}\n"
    )


def build_course(root: Path, assignment: Assignment) -> Path:
    """Copy the instructor files into ``root/source/<assignment>/`` and run ``nbgrader generate_assignment``.

    Returns ``root/release/<assignment>/``. Raises AutograderError with nbgrader's own message if it fails.
    """
    root = Path(root)
    src = root / "source" / assignment.name
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    for path in (assignment.notebook, assignment.lab):
        if not Path(path).is_file():
            raise AutograderError(f"instructor file {path} does not exist")
    shutil.copyfile(assignment.notebook, src / assignment.notebook_name)
    shutil.copyfile(assignment.lab, src / assignment.lab_name)
    write_config(root, assignment)
    cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", assignment.name, "--force"]
    proc = subprocess.run(cmd, cwd=root, env=nbgrader_env(), capture_output=True, text=True)
    release = root / "release" / assignment.name
    if proc.returncode != 0 or not (release / assignment.notebook_name).is_file():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise AutograderError(f"nbgrader generate_assignment failed in {root}:\n{tail}")
    return release


def build_gradebook(root: Path, assignment: Assignment) -> None:
    """Make ``root`` a course root for grading, in-process (about 1 s instead of generate_assignment's 7).

    nbgrader's own preprocessors, in generate_assignment's order up to SaveCells, record the
    assignment's grade, solution and source cells in ``root/gradebook.db``; the instructor
    files are copied to ``root/source/<assignment>/`` as nbgrader expects.
    """
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import (CheckCellMetadata, ClearOutput, ClearSolutions, ComputeChecksums,
                                        LockCells, SaveCells)

    root = Path(root)
    src = root / "source" / assignment.name
    src.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(assignment.notebook, src / assignment.notebook_name)
    shutil.copyfile(assignment.lab, src / assignment.lab_name)
    write_config(root, assignment)
    db_url = "sqlite:///" + str((root / "gradebook.db").resolve())
    import nbgrader.api

    old_path, old_version = os.environ.get("PATH", ""), nbgrader.api.get_alembic_version
    os.environ["PATH"] = nbgrader_env()["PATH"]  # a new gradebook runs `alembic heads`...
    head = alembic_head()
    if head:  # ...unless we can read the head revision from nbgrader's migrations (saves ~1.5 s)
        nbgrader.api.get_alembic_version = lambda: head
    try:
        with Gradebook(db_url) as gb:
            gb.update_or_create_assignment(assignment.name)
        nb = nbformat.read(src / assignment.notebook_name, as_version=4)
        resources = {"nbgrader": {"notebook": Path(assignment.notebook_name).stem, "assignment": assignment.name,
                                  "student": ".", "db_url": db_url}}
        for step in (LockCells(), ClearSolutions(), ClearOutput(), CheckCellMetadata(), ComputeChecksums(),
                     SaveCells()):
            nb, resources = step.preprocess(nb, resources)
    except RuntimeError as e:  # SaveCells refuses to change cells once there are submissions
        raise AutograderError(f"cannot update the gradebook in {root}: {e}; grade into a new RESULTS_DIR") from None
    finally:
        os.environ["PATH"] = old_path
        nbgrader.api.get_alembic_version = old_version


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
