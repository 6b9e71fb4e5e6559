"""A hand-in as the grader read it here, carried to another machine (a Dask worker, a Gradescope run)
and graded there exactly as it would have been here.

The grader reads ``<student>/<assignment>/`` by its own rules (:func:`autograder.run.grade.read_files`:
no links, regular files with one link and their folder's owner, size caps), so a :class:`HandIn`
carries what those rules gave -- each file's bytes, or why it was refused, or that it is absent --
and the two things about the folder that the grader still looks at: whether it is a folder, and how
many other notebooks it holds (named in the "missing" message). On the other machine
:meth:`HandIn.lay_out` recreates that folder (empty) for them, and the files go to
``grade_submission(job, files=hand_in.files)`` as read here.

>>> import tempfile
>>> from autograder.source.assignment import Assignment
>>> root = Path(tempfile.mkdtemp())
>>> (root / "amy" / "ps1").mkdir(parents=True)
>>> _ = (root / "amy" / "ps1" / "problem1.ipynb").write_text("{}")
>>> hand_in = HandIn.read(root / "amy" / "ps1", Assignment("ps1", (Path("problem1.ipynb"), Path("problem2.ipynb"))))
>>> hand_in.files["problem1.ipynb"], hand_in.files["problem2.ipynb"], hand_in.is_folder
(b'{}', None, True)
>>> hand_in.lay_out(root / "elsewhere", "amy", "ps1").is_dir()
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..source.assignment import Assignment
from .grade import read_files
from ..source.restore import Refused

#: Other notebooks in a hand-in counted, at most (the message says how many there are).
MAX_OTHER_NOTEBOOKS = 100


@dataclass(frozen=True)
class HandIn:
    """One submission as :func:`autograder.run.grade.read_files` read it, and what its folder was."""

    files: dict[str, bytes | Refused | None] = field(default_factory=dict)
    """The notebooks and the side checks' files by name: their bytes, why they were refused, or None when absent."""
    is_folder: bool = False
    """``<student>/<assignment>`` is a folder (following links, as the grader's check does)."""
    other_notebooks: int = 0
    """``*.ipynb`` files in it besides the assignment's, when one of the assignment's is not there."""

    @classmethod
    def read(cls, folder: Path, assignment: Assignment) -> HandIn:
        folder = Path(folder)
        files = read_files(folder, assignment)
        others = 0
        if any(files.get(name) is None for name in assignment.notebook_names) and folder.is_dir():
            others = min(MAX_OTHER_NOTEBOOKS, sum(1 for p in folder.glob("*.ipynb")
                                                  if p.name not in assignment.notebook_names))
        return cls(files=files, is_folder=folder.is_dir(), other_notebooks=others)

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
