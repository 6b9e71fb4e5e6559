"""A hand-in as the grader read it here, carried to another machine (a Dask worker, a Gradescope run)
and graded there exactly as it would have been here.

The grader reads ``<student>/<assignment>/`` by its own rules (:func:`read_files`:
no links, regular files with one link and their folder's owner, size caps), so a :class:`HandIn`
carries what those rules gave -- each file's bytes, or why it was refused, or that it is absent --
their hash (:func:`submission_sha`), and the two things about the folder that the grader still looks
at: whether it is a folder, and how many other notebooks it holds (named in the "missing" message).
On the other machine :meth:`HandIn.lay_out` recreates that folder (empty) for them, and the job
(:class:`autograder.run.job.Job`) carries the files as read here.

A hand-in is read once and hashed once, by the batch (``autograde``'s collect_hand_ins step): the
same bytes decide whether the old record is kept, are graded, and are copied to ``submitted/``.
The batch does not keep those bytes in memory (a class of 2,000 notebooks near
:data:`~autograder.source.restore.MAX_NOTEBOOK_BYTES` would be tens of GB): ``HandIn.read(..., stage=...)``
writes each file, as it is read, into a folder of the grader's own (``RESULTS_DIR/.hand-ins/<student>/``,
0700, rebuilt each batch) and keeps a :class:`Staged` (where, how many bytes, their sha256) in its place.
Whoever needs the bytes -- the worker that grades, the Dask task as it is sent, ``submitted/`` --
reads that copy, one hand-in at a time (:meth:`HandIn.contents`, :meth:`HandIn.loaded`); the learner's
folder is not read again. Without ``stage`` (Gradescope grades one hand-in) the bytes stay in the HandIn.

>>> import tempfile
>>> from autograder.source.assignment import Assignment
>>> root = Path(tempfile.mkdtemp())
>>> (root / "amy" / "ps1").mkdir(parents=True)
>>> _ = (root / "amy" / "ps1" / "problem1.ipynb").write_text("{}")
>>> hand_in = HandIn.read(root / "amy" / "ps1", Assignment("ps1", (Path("problem1.ipynb"), Path("problem2.ipynb"))))
>>> hand_in.files["problem1.ipynb"], hand_in.files["problem2.ipynb"], hand_in.is_folder
(b'{}', None, True)
>>> hand_in.sha == submission_sha(hand_in.files), len(hand_in.sha)
(True, 64)
>>> hand_in.lay_out(root / "elsewhere", "amy", "ps1").is_dir()
True
>>> staged = HandIn.read(root / "amy" / "ps1", Assignment("ps1", (Path("problem1.ipynb"), Path("problem2.ipynb"))),
...                      stage=root / "stage-amy")
>>> staged.files["problem1.ipynb"].size_bytes, staged.contents()["problem1.ipynb"], staged.sha == hand_in.sha
(2, b'{}', True)
>>> staged.loaded() == hand_in
True
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..source.assignment import Assignment, load_lesson
from ..source.restore import MAX_NOTEBOOK_BYTES, Refused, read_handed_in, refuse_other_coding

#: Other notebooks in a hand-in counted, at most (the message says how many there are).
MAX_OTHER_NOTEBOOKS = 100
#: The largest file a side check reads from a hand-in (a lab script is a few KB).
MAX_SIDE_FILE_BYTES = 1_000_000


def read_files(folder: Path, assignment: Assignment, one_at_a_time: bool = False):
    """The handed-in notebooks and side-check files by name: their bytes, None when absent, or why they were refused.
    ``one_at_a_time``: (name, that) pairs, each file read only when the one before has been taken."""
    pairs = _read_each(folder, assignment)
    return pairs if one_at_a_time else dict(pairs)


def _read_each(folder: Path, assignment: Assignment):
    caps = {name: MAX_NOTEBOOK_BYTES for name in assignment.notebook_names}
    caps.update({check.file: MAX_SIDE_FILE_BYTES for check in load_lesson(assignment.lesson).side_checks})
    for name, cap in caps.items():
        try:
            data = read_handed_in(folder, name, cap)
            if name.endswith(".py") and data is not None:
                refuse_other_coding(name, data)   # read as Python reads it, or refused
        except Refused as e:
            data = e
        yield name, data
        data = None   # the caller holds it now: one file's bytes at a time


@dataclass(frozen=True)
class Staged:
    """One handed-in file's bytes, as read once, written to the grader's own staging folder."""

    path: str
    """The grader's copy (``RESULTS_DIR/.hand-ins/<student>/<n>``), not the learner's file."""
    size_bytes: int
    sha256: str
    """Hex sha256 of the bytes (what :func:`submission_sha` takes for this file)."""

    @classmethod
    def write(cls, path: Path, data: bytes) -> Staged:
        """Write ``data`` to ``path`` (a new file, 0600, never through a link) and say where it is."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return cls(str(path), len(data), hashlib.sha256(data).hexdigest())

    def read(self) -> bytes:
        """The bytes staged (a copy of another length is the grader's error, never the learner's)."""
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read(self.size_bytes + 1)
        if len(data) != self.size_bytes:
            raise OSError(f"the grader's staged copy {self.path} is {len(data)} bytes, not the {self.size_bytes} read")
        return data


def submission_sha(files: dict[str, bytes | Staged | Refused | None]) -> str:
    """Hash of the handed-in files alone (what they hold, or why they were refused), as :func:`read_files` gave them
    (or as :meth:`HandIn.read` staged them: the same hash)."""
    h = hashlib.sha256()
    for name, data in sorted(files.items()):
        h.update(name.encode() + b"\0")
        if isinstance(data, Refused):
            h.update(b"<refused: " + str(data).encode() + b">")
        elif data is None:
            h.update(b"<absent>")
        elif isinstance(data, Staged):
            h.update(bytes.fromhex(data.sha256))
        else:
            h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


@dataclass(frozen=True)
class HandIn:
    """One submission as :func:`read_files` read it (once), its hash, and what its folder was."""

    files: dict[str, bytes | Staged | Refused | None] = field(default_factory=dict)
    """The notebooks and the side checks' files by name: their bytes (or where the batch staged them), why they
    were refused, or None when absent. :meth:`contents` gives the bytes either way."""
    is_folder: bool = False
    """``<student>/<assignment>`` is a folder (following links, as the grader's check does)."""
    other_notebooks: int = 0
    """``*.ipynb`` files in it besides the assignment's, when one of the assignment's is not there."""
    sha: str = ""
    """:func:`submission_sha` of :attr:`files` (the record's ``submission_sha``; the batch's reuse rule reads it)."""

    @classmethod
    def read(cls, folder: Path, assignment: Assignment, stage: Path | None = None) -> HandIn:
        """Read ``folder`` once. ``stage``: a folder of the grader's (created here, 0700; it must not exist) into
        which each file's bytes are written as they are read, the HandIn keeping a :class:`Staged` in their place
        (one hand-in's bytes in memory at a time); None: the bytes are kept in the HandIn."""
        folder = Path(folder)
        if stage is None:
            files: dict[str, bytes | Staged | Refused | None] = read_files(folder, assignment)
        else:
            os.mkdir(stage, 0o700)
            files = {}
            for i, (name, data) in enumerate(read_files(folder, assignment, one_at_a_time=True)):
                files[name] = Staged.write(Path(stage) / str(i), data) if isinstance(data, bytes) else data
                del data
        others = 0
        if any(files.get(name) is None for name in assignment.notebook_names) and folder.is_dir():
            others = min(MAX_OTHER_NOTEBOOKS, sum(1 for p in folder.glob("*.ipynb")
                                                  if p.name not in assignment.notebook_names))
        return cls(files=files, is_folder=folder.is_dir(), other_notebooks=others, sha=submission_sha(files))

    def contents(self) -> dict[str, bytes | Refused | None]:
        """:attr:`files` with the bytes (read back from the stage where the batch staged them)."""
        return {name: data.read() if isinstance(data, Staged) else data for name, data in self.files.items()}

    def loaded(self) -> HandIn:
        """This hand-in with its bytes in it (to send to another machine: a Dask task)."""
        return replace(self, files=self.contents())

    def lay_out(self, root: Path, student_id: str, assignment_name: str) -> Path:
        """``root/<student>/<assignment>``, a folder when the hand-in was one (with as many stand-ins for
        the other notebooks, empty), else absent; returns its path."""
        folder = Path(root) / student_id / assignment_name
        if self.is_folder:
            folder.mkdir(parents=True)
            for i in range(self.other_notebooks):
                (folder / f"other-{i}.ipynb").write_bytes(b"")
        else:
            folder.parent.mkdir(parents=True, exist_ok=True)
        return folder
