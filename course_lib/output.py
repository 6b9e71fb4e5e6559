"""Output paths, checked before any work starts.

A verb that writes a file (a trace, a plot) or a folder (the demo's results)
checks its path first, so a typo fails in a second with one line instead of
after the whole report, or a 37-second measurement, has run:

- the path is not empty and names a file, not a folder (or, for a folder, not a file);
- it is a regular file, not a device, pipe or socket (``/dev/full``);
- its folder exists (or, with ``make_parents``, can be created);
- it can really be created or opened for writing here (``/proc/...``, a read-only
  disk, a name too long): tried with a probe that leaves nothing behind;
- its suffix is one of ``suffixes``, when given (plots: .png, .svg, .pdf).

>>> import tempfile, os
>>> folder = tempfile.mkdtemp()
>>> check_output_file("--out", os.path.join(folder, "trace.jsonl")).name
'trace.jsonl'
>>> check_output_file("--out", folder)                     # doctest: +ELLIPSIS
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: --out='...' is a folder; give a file path inside it, such as '.../out.jsonl'
>>> check_output_file("--plot", os.path.join(folder, "x.bmp"), suffixes=(".png", ".svg", ".pdf"))   # doctest: +ELLIPSIS
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: --plot='.../x.bmp' has no image suffix; end it in .png, .svg, .pdf
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Sequence

from .errors import CourseInputError


def _text(name: str, path: str | os.PathLike, what: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise CourseInputError(f"{name}={path!r} is not a path; give {what}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise CourseInputError(f"{name}={text!r} is empty; give {what}")
    if "\x00" in text:
        raise CourseInputError(f"{name}={text!r} holds a NUL character; give {what}")
    return text


def _nearest_existing(name: str, text: str, path: Path) -> Path:
    """The nearest folder of ``path`` (itself included) that exists; every missing name must fit the file system."""
    missing = []
    for folder in (path, *path.parents):
        try:
            os.stat(folder)
        except FileNotFoundError:
            missing.append(folder.name)
            continue
        except OSError as exc:            # a name too long, a path through a file, a loop...
            if isinstance(exc, NotADirectoryError) or exc.errno == errno.ENOTDIR:
                missing.append(folder.name)
                continue
            raise CourseInputError(f"{name}={text!r} cannot be written ({exc.strerror or exc}); "
                                   f"choose a shorter path in a folder you can write") from None
        limit = _name_max(folder)
        for part in missing:
            if len(os.fsencode(part)) > limit:
                raise CourseInputError(f"{name}={text!r} cannot be written (the name {part[:40]!r}... is longer "
                                       f"than {limit} bytes); choose a shorter path")
        return folder
    return Path(".")  # pragma: no cover - "/" always exists


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):   # pragma: no cover - every Linux file system answers
        return 255


def _probe_folder(name: str, text: str, folder: Path) -> None:
    """Create and remove a temporary file in ``folder``: the one sure test that it can be written."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise CourseInputError(f"{name}={text!r} cannot be written here ({exc.strerror or exc}); "
                               f"choose a path in a folder you can write") from None


def check_output_file(name: str, path: str | os.PathLike, *, suffixes: Sequence[str] = (),
                      make_parents: bool = False, kind: str = "image") -> Path:
    """``path`` as a :class:`~pathlib.Path` a verb may write once its work is done, or one line saying why not.

    ``suffixes``: the accepted endings (case-insensitive), e.g. (".png", ".svg", ".pdf").
    ``make_parents``: the verb creates missing folders, so only the nearest existing one must be writable.
    Nothing is left behind: an existing file is opened for appending and closed unchanged,
    a new name is created and removed at once.
    """
    example = f"out{suffixes[0] if suffixes else '.jsonl'}"
    text = _text(name, path, f"a file path such as {example!r}")
    p = Path(text)
    if suffixes and p.suffix.lower() not in tuple(s.lower() for s in suffixes):
        raise CourseInputError(f"{name}={text!r} has no {kind} suffix; end it in {', '.join(suffixes)}")
    try:
        mode = os.stat(p).st_mode if os.path.lexists(p) else None
    except OSError as exc:                  # a dangling link, a loop, a path through a file...
        raise CourseInputError(f"{name}={text!r} cannot be written ({exc.strerror or exc}); "
                               f"give a file path such as {example!r}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise CourseInputError(f"{name}={text!r} is a folder; give a file path inside it, such as "
                               f"{str(p / example)!r}")
    if mode is not None and not stat.S_ISREG(mode):
        raise CourseInputError(f"{name}={text!r} is not a regular file (a device, pipe or socket); "
                               f"give a file path such as {example!r}")
    folder = p.parent
    if mode is None:
        if make_parents:
            folder = _nearest_existing(name, text, p)
        if not folder.is_dir():
            raise CourseInputError(f"{name}={text!r}: folder {str(folder)!r} does not exist; create it first"
                                   if not os.path.lexists(folder) else
                                   f"{name}={text!r}: {str(folder)!r} is a file, not a folder; give a path in a folder")
    try:
        if mode is not None:
            with open(p, "ab"):
                pass
        elif folder == p.parent:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            os.unlink(p)
        else:
            _probe_folder(name, text, folder)
    except OSError as exc:
        raise CourseInputError(f"{name}={text!r} cannot be written ({exc.strerror or exc}); "
                               f"choose a path in a folder you can write") from None
    return p


def check_output_dir(name: str, path: str | os.PathLike) -> Path:
    """``path`` as a folder a verb may create (with its parents) and write into, or one line saying why not.

    >>> import tempfile, os
    >>> check_output_dir("--out", os.path.join(tempfile.mkdtemp(), "new", "results")).name
    'results'
    """
    text = _text(name, path, "a folder such as 'out'")
    p = Path(text)
    if os.path.lexists(p) and not p.is_dir():
        raise CourseInputError(f"{name}={text!r} is a file, not a folder; give a folder for the plots and results, "
                               f"such as 'out'")
    folder = _nearest_existing(name, text, p)
    if not folder.is_dir():
        raise CourseInputError(f"{name}={text!r}: {str(folder)!r} is a file, not a folder; give a folder such as 'out'")
    _probe_folder(name, text, folder)
    return p


def write_failed(name: str, path: str | os.PathLike, exc: OSError) -> CourseInputError:
    """The one line for a write that failed after the checks (a disk that filled up meanwhile)."""
    return CourseInputError(f"{name}={os.fspath(path)!r}: writing failed ({exc.strerror or exc}); "
                            f"free space or choose another path")
