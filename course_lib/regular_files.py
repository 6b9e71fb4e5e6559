"""Read a file a learner names, and only if it is a regular file: never block on a FIFO, never follow a loop.

A model folder is untrusted input: ``model.safetensors`` may be a FIFO (opening
it for reading would wait forever for a writer), a directory, a socket, a
device, a symlink loop or a link to nothing. :func:`open_regular` says which,
in one line, before any byte is read: it looks at the entry (``lstat``, then
the link's target), opens it with ``O_NONBLOCK`` (so even a FIFO swapped in
after the look cannot block) and checks the open file again (``fstat``).
:func:`read_at_most` reads at most a bound, so a huge or endless file costs
only the bound.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> os.mkfifo(os.path.join(d, "model.safetensors"))
>>> open_regular(os.path.join(d, "model.safetensors"), "safetensors file")
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: safetensors file '.../model.safetensors' is a FIFO (named pipe), not a regular file; a model folder's files must be regular files
"""

from __future__ import annotations

import errno
import os
import stat

from .errors import CourseInputError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def _refuse(what: str, path: str, why: str) -> CourseInputError:
    return CourseInputError(f"{what} {path!r} {why}; a model folder's files must be regular files")


def open_regular(path: str | os.PathLike, what: str) -> int:
    """A read-only file descriptor of ``path``, which must be (or link to) a regular file; else one line."""
    path = os.fspath(path)
    try:
        entry = os.lstat(path)
    except FileNotFoundError:
        raise CourseInputError(f"{what} {path!r} does not exist") from None
    except OSError as exc:
        raise _refuse(what, path, f"cannot be looked at ({exc.strerror or exc})") from None
    if stat.S_ISLNK(entry.st_mode):
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(what, path, "is a symbolic link loop") from None
            if exc.errno == errno.ENOENT:
                raise _refuse(what, path, f"is a symbolic link to {os.readlink(path)!r:.200}, which does "
                                          f"not exist") from None
            raise _refuse(what, path, f"is a symbolic link that cannot be followed ({exc.strerror or exc})") from None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        try:
            kind = _kind(os.stat(path).st_mode)
        except OSError:
            kind = "not a regular file"
        if kind != "not a regular file" or exc.errno in (errno.ENXIO, errno.EISDIR):
            raise _refuse(what, path, f"is {kind}, not a regular file") from None
        raise _refuse(what, path, f"cannot be read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _refuse(what, path, f"is {_kind(mode)}, not a regular file")
    return fd


def read_at_most(fd: int, limit: int, what: str, path: str) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (fewer at end of file); a read error is one line."""
    chunks, left = [], limit
    try:
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise CourseInputError(f"{what} {path!r} cannot be read ({exc.strerror or exc})") from None
    return b"".join(chunks)


def read_regular(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (reads one past the bound to tell)."""
    fd = open_regular(path, what)
    try:
        data = read_at_most(fd, limit + 1, what, os.fspath(path))
    finally:
        os.close(fd)
    if len(data) > limit:
        raise CourseInputError(f"{what} {os.fspath(path)!r} is larger than {limit:,} bytes"
                               f"{f' ({limit.why})' if hasattr(limit, 'why') else ''}; it cannot be a real one")
    return data
