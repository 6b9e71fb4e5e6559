"""A hand-in as the grader reads it, to be laid out again on another machine (a Dask worker, a
Gradescope container) where the grader then reads it by its own rules.

The grader reads ``<student>/<assignment>/`` strictly (regular files only; a link, a folder that is
a link, a missing folder each get a status of their own), so a :class:`HandIn` keeps exactly what
those rules look at: what each path *is*, and the bytes of the regular files, nothing else.

>>> import tempfile
>>> from autograder.assignment import Assignment
>>> root = Path(tempfile.mkdtemp())
>>> (root / "amy" / "l14-04-model-memory").mkdir(parents=True)
>>> _ = (root / "amy" / "l14-04-model-memory" / "l14-04-model-memory.ipynb").write_text("{}")
>>> hand_in = HandIn.read(root / "amy" / "l14-04-model-memory", Assignment())
>>> hand_in.folder, hand_in.files
('dir', {'l14-04-model-memory.ipynb': ('file', b'{}')})
>>> again = hand_in.lay_out(root / "elsewhere", "amy", "l14-04-model-memory")
>>> (again / "l14-04-model-memory.ipynb").read_bytes()
b'{}'
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .assignment import Assignment

#: The largest hand-in file carried; a larger one travels as its size and is laid out as a sparse file
#: of that size (the grader refuses it by size, or reads zeros: either way it is no notebook).
MAX_FILE_BYTES = 64 * 2**20
#: Names of other notebooks in a hand-in carried for the grader's message, at most.
MAX_OTHER_NAMES = 100


@dataclass(frozen=True)
class HandIn:
    """One submission's files as the client found them, to be laid out again on a worker.

    The grader reads ``<student>/<assignment>/`` by its own rules (regular files only; a link, a
    folder that is a link, a missing folder each have their own status), so the hand-in keeps
    exactly what those rules look at: what each path *is*, and the bytes of regular files.
    """

    student: str
    """What ``SUBMITTED_DIR/<student>`` is: "dir" or "link"."""
    folder: str
    """What ``<student>/<assignment>`` is: "dir", "link", "file" or "missing"."""
    files: dict[str, tuple[str, bytes | int]] = field(default_factory=dict)
    """The notebook and the lab by name: ("file", bytes), ("large", size), ("link", 0), ("special", 0)."""
    others: tuple[str, ...] = ()
    """Other ``*.ipynb`` names in the folder (the grader names them when the notebook is missing)."""

    @classmethod
    def read(cls, folder: Path, assignment: Assignment) -> HandIn:
        folder = Path(folder)
        if folder.parent.is_symlink():
            return cls("link", "missing")
        kind = _kind(folder)
        if kind != "dir":
            return cls("dir", kind)
        files: dict[str, tuple[str, bytes | int]] = {}
        for name in (assignment.notebook_name, assignment.lab_name):
            path = folder / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                files[name] = ("link", 0)
            elif not stat.S_ISREG(st.st_mode):
                files[name] = ("special", 0)
            elif st.st_size > MAX_FILE_BYTES:
                files[name] = ("large", st.st_size)
            else:
                try:
                    files[name] = ("file", path.read_bytes())
                except OSError:
                    files[name] = ("special", 0)
        others = sorted(p.name for p in folder.glob("*.ipynb") if p.name not in files)[:MAX_OTHER_NAMES]
        return cls("dir", "dir", files, tuple(others))

    def lay_out(self, root: Path, student_id: str, assignment_name: str) -> Path:
        """Recreate ``<student>/<assignment>/`` under ``root`` (a private folder); returns its path."""
        student, elsewhere = root / student_id, root / ".elsewhere"
        elsewhere.mkdir(parents=True, exist_ok=True)
        folder = student / assignment_name
        if self.student == "link":
            student.symlink_to(elsewhere)
            return folder
        student.mkdir(parents=True)
        if self.folder == "link":
            folder.symlink_to(elsewhere)
        elif self.folder == "file":
            folder.write_bytes(b"")
        elif self.folder == "dir":
            folder.mkdir()
            for name, (kind, data) in self.files.items():
                path = folder / name
                if kind == "file":
                    path.write_bytes(data)
                elif kind == "large":
                    with open(path, "wb") as f:
                        f.truncate(int(data))
                elif kind == "link":
                    path.symlink_to(elsewhere / name)
                else:
                    os.mkfifo(path)
            for name in self.others:
                (folder / name).write_bytes(b"")
        return folder


def _kind(path: Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "file"


def _kind(path: Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "file"
