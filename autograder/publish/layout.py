"""The results folder, owned in one place: its paths, its records, its batch metadata, its gradebook URL.

``RESULTS_DIR`` (``course-grade autograde ... --out RESULTS_DIR``) holds::

    batch.json                              the last batch: assignment, instructor files, settings, isolation
    grades.json, grades.csv                 the class (exact shape: autograder.contract.results)
    records/<id>.json                       one student's result (the resume state; written last)
    submitted/<id>/<assignment>/            the hand-in as the grader read it (formgrader counts these)
    autograded/<id>/<assignment>/<nb>       each executed notebook (for formgrader)
    feedback/<id>/<assignment>/<stem>.html  the learner's feedback page, one per notebook
    {autograded,feedback}/<id>/<assignment>/{timestamp,submission_secret}.txt
                                            as nbgrader's exchange handed them in (for release_feedback)
    gradescope/<id>.json                    Gradescope results, one per student
    gradebook.db                            nbgrader's gradebook (RESULTS_DIR is an nbgrader course root)
    .snapshot/                              the instructor files this batch graded against
    .hand-ins/<id>/                         the hand-ins' bytes as read, while a batch runs (its own)

Every verb (autograde, feedback, export) reads and writes these through the
functions here, so none of them imports another verb.

>>> record_path("results", "alice").as_posix()
'results/records/alice.json'
>>> feedback_path("results", "alice", "ps1", "problem1.ipynb").as_posix()
'results/feedback/alice/ps1/problem1.html'
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..source.assignment import Assignment
from ..errors import AutograderError
from ..contract.results import StudentResult, write_atomic, write_json

BATCH = "batch.json"
GRADES_JSON = "grades.json"
GRADES_CSV = "grades.csv"


def record_path(results_dir: str | Path, student_id: str) -> Path:
    return Path(results_dir) / "records" / f"{student_id}.json"


def autograded_path(results_dir: str | Path, student_id: str, assignment: Assignment,
                    notebook_name: str | None = None) -> Path:
    """The executed copy of one notebook (default: the first) of a student's hand-in."""
    return Path(results_dir) / "autograded" / student_id / assignment.name / (notebook_name or assignment.notebook_name)


def submitted_path(results_dir: str | Path, student_id: str, assignment: Assignment) -> Path:
    """The folder nbgrader's formgrader looks in: it counts a student as having handed in (its
    ``get_submitted_students``) only where ``submitted/<id>/<assignment>/`` is a folder."""
    return Path(results_dir) / "submitted" / student_id / assignment.name


def write_submitted(results_dir: str | Path, student_id: str, assignment: Assignment,
                    files: dict[str, object]) -> Path:
    """``submitted/<id>/<assignment>/`` with the files the grader read (bytes); a file it refused or
    did not find is not there. No ``timestamp.txt``: formgrader compares it with the gradebook's
    (none), and a folder with one would read as "not autograded yet". Returns the folder."""
    folder = submitted_path(results_dir, student_id, assignment)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        target = folder / name
        if not isinstance(data, bytes):
            target.unlink(missing_ok=True)
        elif not target.is_file() or target.read_bytes() != data:
            write_atomic(target, data)
    return folder


#: What ``nbgrader submit`` puts beside the notebooks and ``nbgrader collect`` keeps: the submission's
#: time and its secret. ``nbgrader release_feedback`` reads both from ``feedback/<id>/<assignment>/``
#: (nbgrader/exchange/default/release_feedback.py, 0.9.6), where ``nbgrader generate_feedback`` copies
#: every file of ``autograded/<id>/<assignment>/``; without them it cannot name the page it releases.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")
#: Either file is one short line (a timestamp, a hex secret); anything larger is not nbgrader's.
EXCHANGE_FILE_MAX_BYTES = 256


def write_exchange_files(results_dir: str | Path, student_id: str, assignment: Assignment, hand_in: Path) -> list[str]:
    """Copy the hand-in's :data:`EXCHANGE_FILES` into its ``autograded/`` and ``feedback/`` folders, as stock
    ``nbgrader autograde`` and ``generate_feedback`` carry them, so that ``nbgrader release_feedback``
    releases the feedback of a class collected through nbgrader's exchange. A file that is absent, a link,
    not a regular file, too large or not one line of printable ASCII is left out (the learner wrote it).
    Returns the names copied.

    >>> import tempfile
    >>> from autograder.source.assignment import Assignment
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "in").mkdir()
    >>> _ = (root / "in" / "timestamp.txt").write_text("2026-12-05 18:00:00.000000 UTC")
    >>> write_exchange_files(root / "out", "amy", Assignment("ps1", (Path("problem1.ipynb"),)), root / "in")
    ['timestamp.txt']
    >>> (root / "out" / "feedback" / "amy" / "ps1" / "timestamp.txt").read_text()
    '2026-12-05 18:00:00.000000 UTC'
    """
    import os
    import stat

    copied = []
    for name in EXCHANGE_FILES:
        try:
            fd = os.open(Path(hand_in) / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            data = os.read(fd, EXCHANGE_FILE_MAX_BYTES + 1) if stat.S_ISREG(st.st_mode) else b""
        finally:
            os.close(fd)
        text = data.decode("ascii", "replace").strip()
        if not data or len(data) > EXCHANGE_FILE_MAX_BYTES or not text.isprintable():
            continue
        for folder in (Path(results_dir) / "autograded" / student_id / assignment.name,
                       Path(results_dir) / "feedback" / student_id / assignment.name):
            write_atomic(folder / name, data)
        copied.append(name)
    return copied


def feedback_path(results_dir: str | Path, student_id: str, assignment_name: str, notebook_name: str) -> Path:
    return Path(results_dir) / "feedback" / student_id / assignment_name / f"{Path(notebook_name).stem}.html"


def gradescope_path(results_dir: str | Path, student_id: str) -> Path:
    return Path(results_dir) / "gradescope" / f"{student_id}.json"


def db_url(results_dir: str | Path) -> str:
    """nbgrader's gradebook URL for this results folder (an absolute sqlite path)."""
    return "sqlite:///" + str((Path(results_dir) / "gradebook.db").resolve())


def load_records(results_dir: str | Path) -> dict[str, StudentResult]:
    """Every student's record; unreadable ones (another grader version, a torn file) are left out."""
    out = {}
    for path in sorted((Path(results_dir) / "records").glob("*.json")):
        try:
            out[path.stem] = StudentResult.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            continue  # a record from another version, or unreadable: regraded
    return out


def write_batch(results_dir: str | Path, data: dict[str, Any]) -> None:
    write_json(Path(results_dir) / BATCH, data)


def read_batch(results_dir: str | Path) -> dict[str, Any]:
    """batch.json of the last autograde run into this folder."""
    try:
        meta = json.loads((Path(results_dir) / BATCH).read_text())
        if not isinstance(meta, dict):
            raise ValueError
        return meta
    except (OSError, ValueError):
        raise AutograderError(f"{results_dir} holds no autograde run (batch.json missing); "
                              f"run `course-grade autograde` first") from None


def batch_assignment(assignment: Assignment) -> dict[str, Any]:
    """What batch.json records of the assignment a batch graded (its snapshot of the instructor files)."""
    return {"assignment": assignment.name, "notebook_name": assignment.notebook_name,
            "notebook": str(assignment.notebooks[0]), "notebooks": [str(p) for p in assignment.notebooks],
            "files": [str(p) for p in assignment.files], "lesson": assignment.lesson,
            "root": None if assignment.root is None else str(assignment.root)}


def assignment_from_results(results_dir: str | Path) -> Assignment:
    """The assignment (its snapshot of the instructor files) that the last autograde run used."""
    meta = read_batch(results_dir)
    try:
        return Assignment(name=meta["assignment"], notebooks=tuple(Path(p) for p in meta["notebooks"]),
                          files=tuple(Path(p) for p in meta["files"]), lesson=meta["lesson"],
                          root=None if meta["root"] is None else Path(meta["root"]))
    except (KeyError, TypeError):
        raise AutograderError(f"{results_dir}/{BATCH} is from another grader version; run "
                              f"`course-grade autograde` again") from None


def student_files(results_dir: str | Path, student_id: str, assignment: Assignment) -> list[Path]:
    """Every per-student file of the results folder, the record first."""
    return [record_path(results_dir, student_id), gradescope_path(results_dir, student_id),
            *(feedback_path(results_dir, student_id, assignment.name, name) for name in assignment.notebook_names),
            *(autograded_path(results_dir, student_id, assignment, name) for name in assignment.notebook_names)]


def remove_student_files(results_dir: str | Path, student_id: str, assignment: Assignment) -> None:
    """Drop a student's files (someone who no longer handed in: their old files would be stale)."""
    for path in student_files(results_dir, student_id, assignment):
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    remove_submitted(results_dir, student_id, assignment)


def remove_submitted(results_dir: str | Path, student_id: str, assignment: Assignment) -> None:
    """No ``submitted/<id>/`` (a student formgrader must not list)."""
    shutil.rmtree(submitted_path(results_dir, student_id, assignment).parent, ignore_errors=True)
