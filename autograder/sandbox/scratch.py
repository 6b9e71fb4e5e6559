"""Scratch folders: each named after the grader process that made it, capped by a tmpfs, and swept
when that process was killed (SIGKILL leaves folders, mounts and cgroups behind)."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import stat
import tempfile
from pathlib import Path

from .cgroup import cgroup_parents

_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
#: The tmpfs's source name in /proc/self/mountinfo: how the sweep tells the grader's mounts apart.
MOUNT_SOURCE = "course-grade"
#: The names scratch_dir() gives: cg-[KIND-]PID-<mkdtemp's 8 characters>, KIND one of those below:
#: a side check's program (autograder.run.sidecheck), the probe, the fork server, and a Dask worker's
#: tasks and copy of the instructor files (autograder.batch.distributed).
KINDS = ("side", "probe", "zygote", "task", "instructor")
_SCRATCH = re.compile(r"cg-(?:(?:" + "|".join(KINDS) + r")-)?(\d+)-[a-z0-9_]{8}")


def scratch_dir(kind: str = "") -> Path:
    """A private scratch folder named after this process (``cg-[kind-]PID-...``), so that the
    leftovers of a killed grader can be found and swept (:func:`sweep_leftovers`).

    >>> folder = scratch_dir("probe")
    >>> bool(_SCRATCH.fullmatch(folder.name)), oct(folder.stat().st_mode & 0o777)
    (True, '0o700')
    >>> folder.rmdir()
    """
    if kind and kind not in KINDS:
        raise ValueError(f"scratch kind {kind!r} is not one the sweep knows: {KINDS}")
    return Path(tempfile.mkdtemp(prefix=f"cg-{kind + '-' if kind else ''}{os.getpid()}-"))


def remove_tree(path: Path) -> None:
    """Remove ``path`` and all under it, as ``rm -rf`` does, whatever learner code left there; never raises.

    :func:`shutil.rmtree` recurses once per level (Python 3.11: a 1,500-deep chain of folders left in
    the working folder ended in RecursionError in the grader), and a path longer than ``PATH_MAX``
    cannot be named at all. Here one loop goes down by descriptor (``O_NOFOLLOW``: a link is removed,
    never followed), holding one open folder and the names of those above it, and back up through
    ``..``, which must be the very folder it came down from (a folder moved meanwhile stops the removal
    there: it never goes on in another); a folder that cannot be read (mode 000) is given its owner's
    rights first. Fifos, sockets and device nodes are unlinked unopened. What cannot be removed is left,
    as ``ignore_errors`` does.

    >>> top = Path(tempfile.mkdtemp()); chain = top
    >>> for _ in range(1500):
    ...     chain = chain / "d"; os.mkdir(chain)
    >>> os.mkfifo(chain / "fifo"); os.chmod(top / "d", 0)
    >>> remove_tree(top); top.exists()
    False
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return
    except OSError:
        try:
            os.unlink(path)   # a link or a file, not a folder
        except OSError:
            pass
        return
    above: list[tuple[str, set[str], tuple[int, int]]] = []   # per folder above: the name below it, its `stuck`, its id
    stuck: set[str] = set()                  # what could not be removed in the folder open now
    try:
        while True:
            down = None
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if entry.name in stuck:
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            down = entry.name
                            break
                        try:
                            os.unlink(entry.name, dir_fd=fd)
                        except FileNotFoundError:
                            pass
                        except OSError:
                            stuck.add(entry.name)
            except OSError:
                pass
            if down is not None:
                try:
                    child = _open_dir(down, fd, flags)
                except OSError:
                    stuck.add(down)
                    continue
                here = os.fstat(fd)
                os.close(fd)
                above.append((down, stuck, (here.st_dev, here.st_ino)))
                fd, stuck = child, set()
                continue
            if not above:
                break
            name, stuck, came_from = above.pop()
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = parent
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != came_from:
                return   # moved while we were below: not a folder of this tree any more
            try:
                os.rmdir(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError:
                stuck.add(name)
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass


def tree_usage(path: Path, max_files: int) -> tuple[int, int]:
    """(bytes, entries) under ``path``: the blocks of every entry, found as :func:`remove_tree` goes (by
    descriptor, links never followed, back up only into the folder it came from), so a file below a path
    longer than ``PATH_MAX`` is counted too (``os.scandir(path)`` cannot open one: 48 MiB written there
    passed a 32 MiB disk watchdog unseen). Stops counting entries past ``max_files``.

    >>> top = Path(tempfile.mkdtemp()); here = os.getcwd(); os.chdir(top)
    >>> for _ in range(20):   # 20 x 256 characters: no path names what is below
    ...     os.mkdir("L" * 255); os.chdir("L" * 255)
    >>> _ = Path("f").write_bytes(b"x" * 2**20); os.chdir(here)
    >>> used, entries = tree_usage(top, 1000); used >= 2**20, entries
    (True, 21)
    >>> remove_tree(top); top.exists()
    False
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return 0, 0
    used = entries = 0
    above: list[tuple[list[str], tuple[int, int]]] = []   # per folder above: its folders still to visit, its id
    todo: list[str] | None = None                            # the open folder's, once read
    try:
        while True:
            if todo is None:
                todo = []
                try:
                    with os.scandir(fd) as listing:
                        for entry in listing:
                            entries += 1
                            if entries > max_files:
                                return used, entries
                            try:
                                st = entry.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            used += st.st_blocks * 512
                            if stat.S_ISDIR(st.st_mode):
                                todo.append(entry.name)
                except OSError:
                    pass
            if todo:
                try:
                    child = os.open(todo.pop(), flags, dir_fd=fd)
                except OSError:
                    continue
                here = os.fstat(fd)
                os.close(fd)
                above.append((todo, (here.st_dev, here.st_ino)))
                fd, todo = child, None
                continue
            if not above:
                return used, entries
            todo, came_from = above.pop()
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = parent
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != came_from:
                return used, entries   # moved while we were below: what was counted stands
    finally:
        os.close(fd)


def _open_dir(name: str, dir_fd: int, flags: int) -> int:
    """Open folder ``name`` in ``dir_fd``; one its mode keeps us out of (000) is given u+rwx first."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except PermissionError:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:   # that very folder (never a link swapped in): by its descriptor
            if not stat.S_ISDIR(os.fstat(handle).st_mode):
                raise
            os.chmod(f"/proc/self/fd/{handle}", 0o700)
            return os.open(f"/proc/self/fd/{handle}", flags & ~os.O_NOFOLLOW)
        finally:
            os.close(handle)


def mount_tmpfs(target: Path, size_bytes: int, max_files: int) -> None:
    """Mount a tmpfs of at most ``size_bytes`` and ``max_files`` inodes over ``target`` (needs root)."""
    options = f"size={size_bytes},nr_inodes={max_files},mode=0711".encode()
    if ctypes.CDLL(None, use_errno=True).mount(MOUNT_SOURCE.encode(), os.fsencode(target), b"tmpfs",
                                               _MS_NOSUID | _MS_NODEV, options) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot mount a tmpfs on {target}: {os.strerror(err)}")


def unmount(target: Path) -> None:
    """Detach the mount at ``target``; its memory is freed when the last open file on it closes."""
    ctypes.CDLL(None, use_errno=True).umount2(os.fsencode(target), _MNT_DETACH)


def grader_mounts() -> list[Path]:
    """Mount points of the grader's size-capped tmpfs folders (anyone's), from /proc/self/mountinfo."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 2 and tail[0] == "tmpfs" and tail[1] == MOUNT_SOURCE:
            out.append(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])))
    return out


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True
    except PermissionError:
        return False


def sweep_leftovers() -> None:
    """Scratch folders, tmpfs mounts and cgroups of grader processes that were killed (SIGKILL
    leaves them behind); those of live graders are left alone."""
    scratch = Path(tempfile.gettempdir())
    for mount in grader_mounts():
        m = _SCRATCH.fullmatch(mount.name)
        if mount.parent == scratch and m and _dead(int(m.group(1))):
            unmount(mount)
    for d in scratch.glob("cg-*-*"):
        m = _SCRATCH.fullmatch(d.name)
        if m and _dead(int(m.group(1))):
            remove_tree(d)
    for root in (d for parent in cgroup_parents() for d in parent.glob("course-grade-*")):
        m = re.match(r"course-grade-(\d+)-", root.name)
        if m and _dead(int(m.group(1))) and root.is_dir():
            try:
                for pid in (root / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
                root.rmdir()
            except OSError:
                pass

