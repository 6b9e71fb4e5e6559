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
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..source.assignment import Assignment, load_lesson
from ..source.restore import MAX_NOTEBOOK_BYTES, Refused, read_handed_in, refuse_other_coding

#: Other notebooks in a hand-in counted, at most (the message says how many there are).
MAX_OTHER_NOTEBOOKS = 100
#: The largest file a side check reads from a hand-in (a lab script is a few KB).
MAX_SIDE_FILE_BYTES = 1_000_000


def read_files(folder: Path, assignment: Assignment) -> dict[str, bytes | Refused | None]:
    """The handed-in notebooks and side-check files by name: their bytes, None when absent, or why they were refused."""
    caps = {name: MAX_NOTEBOOK_BYTES for name in assignment.notebook_names}
    caps.update({check.file: MAX_SIDE_FILE_BYTES for check in load_lesson(assignment.lesson).side_checks})
    out: dict[str, bytes | Refused | None] = {}
    for name, cap in caps.items():
        try:
            out[name] = read_handed_in(folder, name, cap)
            if name.endswith(".py") and out[name] is not None:
                refuse_other_coding(name, out[name])   # read as Python reads it, or refused
        except Refused as e:
            out[name] = e
    return out


def submission_sha(files: dict[str, bytes | Refused | None]) -> str:
    """Hash of the handed-in files alone (what they hold, or why they were refused), as :func:`read_files` gave them."""
    h = hashlib.sha256()
    for name, data in sorted(files.items()):
        h.update(name.encode() + b"\0")
        if isinstance(data, Refused):
            h.update(b"<refused: " + str(data).encode() + b">")
        elif data is None:
            h.update(b"<absent>")
        else:
            h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


@dataclass(frozen=True)
class HandIn:
    """One submission as :func:`read_files` read it (once), its hash, and what its folder was."""

    files: dict[str, bytes | Refused | None] = field(default_factory=dict)
    """The notebooks and the side checks' files by name: their bytes, why they were refused, or None when absent."""
    is_folder: bool = False
    """``<student>/<assignment>`` is a folder (following links, as the grader's check does)."""
    other_notebooks: int = 0
    """``*.ipynb`` files in it besides the assignment's, when one of the assignment's is not there."""
    sha: str = ""
    """:func:`submission_sha` of :attr:`files` (the record's ``submission_sha``; the batch's reuse rule reads it)."""

    @classmethod
    def read(cls, folder: Path, assignment: Assignment) -> HandIn:
        folder = Path(folder)
        files = read_files(folder, assignment)
        others = 0
        if any(files.get(name) is None for name in assignment.notebook_names) and folder.is_dir():
            others = min(MAX_OTHER_NOTEBOOKS, sum(1 for p in folder.glob("*.ipynb")
                                                  if p.name not in assignment.notebook_names))
        return cls(files=files, is_folder=folder.is_dir(), other_notebooks=others, sha=submission_sha(files))

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
