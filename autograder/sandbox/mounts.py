"""What learner code sees of the file system: one typed mount plan, made by bubblewrap or by the fork server.

:func:`mount_plan` says what a sandbox's file system holds, in the order it is made, as frozen
steps (:class:`Proc`, :class:`Dev`, :class:`Tmpfs`, :class:`Dir`, :class:`Bind`). bubblewrap is given
them as options (:func:`bwrap_command`); the kernel fork server (``_zygote.py``) gets them as data
(:meth:`Step.wire`) and makes them itself. Each bound path appears at its real path inside, so
paths in tracebacks and in the kernel's connection file mean the same thing on both sides.

Visible, read-only: the system (``/usr``, ``/etc``...), the Python installation and its
site-packages, and the course library (what learners install anyway). Never visible: the grader
and the lessons (trusted checks, expected answers): where a bound folder contains them (an
installed, not editable, package in site-packages) an empty tmpfs covers them.

>>> Bind("/srv/work", "/srv/work").bwrap({"--perms"})
['--bind', '/srv/work', '/srv/work']
>>> Tmpfs("/tmp", 2**20, 0o1777).bwrap({"--perms", "--size"})
['--perms', '1777', '--size', '1048576', '--tmpfs', '/tmp']
>>> Tmpfs("/tmp", 2**20, 0o1777).wire()
{'kind': 'tmpfs', 'path': '/tmp', 'size_bytes': 1048576, 'mode': 1023}
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from .limits import Limits

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).resolve().with_name("_launch.py")
#: Where the launcher appears inside bubblewrap. It runs there as root (to drop to the throwaway
#: uid), from a root-only folder, so learner code cannot read even this file of the grader.
INNER_LAUNCHER_DIR = "/run/course-grade"
INNER_LAUNCHER = f"{INNER_LAUNCHER_DIR}/launch.py"
#: The interpreter that runs it there: a link to the grader's Python in the same folder, so that
#: bubblewrap's command line (``/proc/1/cmdline`` inside) names no path of the host's.
INNER_PYTHON = f"{INNER_LAUNCHER_DIR}/python"
#: What learner code may import from the course: the library, which learners install anyway.
TRUSTED_DIRS = (REPO / "course_lib",)
#: The grader and the lessons beside it: never readable from the sandbox. Hidden tests carry their
#: collection code inline (autograder.source.hidden), so a kernel never needs a file of either.
GRADER_DIRS = (Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[2] / "lessons")


@dataclass(frozen=True)
class Step:
    """One step of a mount plan."""

    path: str
    """Where it appears inside the sandbox."""

    @property
    def kind(self) -> str:
        return type(self).__name__.lower()

    def wire(self) -> dict:
        """The step as the fork server reads it (JSON)."""
        return {"kind": self.kind, **asdict(self)}

    def bwrap(self, options: frozenset[str] | set[str]) -> list[str]:
        """bubblewrap's options for this step (``options``: those this bubblewrap knows)."""
        return [f"--{self.kind}", self.path]


@dataclass(frozen=True)
class Proc(Step):
    """A fresh /proc of the sandbox's pid namespace."""


@dataclass(frozen=True)
class Dev(Step):
    """A minimal /dev: null, zero, full, random, urandom, tty, a private devpts."""


@dataclass(frozen=True)
class Tmpfs(Step):
    """An empty tmpfs (a private /tmp, or a cover over the grader's files)."""

    size_bytes: int | None = None
    mode: int = 0o755

    def bwrap(self, options) -> list[str]:
        # --perms and --size came with bubblewrap 0.5 / 0.6; older ones get a plain tmpfs (the probe checks the rest)
        return ((["--perms", f"{self.mode:04o}"] if self.mode != 0o755 and "--perms" in options else [])
                + (["--size", str(self.size_bytes)] if self.size_bytes and "--size" in options else [])
                + ["--tmpfs", self.path])


@dataclass(frozen=True)
class Dir(Step):
    """A folder bubblewrap would otherwise create with mode 0700 (unusable by the throwaway uid)."""

    mode: int = 0o755

    def bwrap(self, options) -> list[str]:
        return (["--perms", f"{self.mode:04o}"] if "--perms" in options else []) + ["--dir", self.path]


@dataclass(frozen=True)
class Bind(Step):
    """``source`` bound at ``path``: recursive, nosuid and nodev, read-only unless ``writable``."""

    source: str = ""
    writable: bool = True

    def __init__(self, source: str, path: str, writable: bool = True):
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "writable", writable)

    def bwrap(self, options) -> list[str]:
        return ["--bind" if self.writable else "--ro-bind", self.source, self.path]


def mount_plan(limits: Limits, writable: tuple[Path, ...] = (), read_only: tuple[Path, ...] = (),
               launcher_dir: Path | None = None, tmp: Path | None = None, launcher: bool = True) -> tuple[Step, ...]:
    """A sandbox's file system: read-only system, Python and course code (and ``read_only``);
    ``writable`` dirs read-write; ``tmp`` (a folder of the capped scratch tmpfs) at /tmp, else a
    private tmpfs of ``limits.tmp_bytes``; a fresh /proc and /dev; the launcher's copy in
    ``launcher_dir`` at :data:`INNER_LAUNCHER_DIR` (bubblewrap only; ``launcher`` False: none)."""
    plan: list[Step] = [Proc("/proc"), Dev("/dev")]
    plan.append(Bind(str(tmp), "/tmp") if tmp is not None else Tmpfs("/tmp", limits.tmp_bytes, 0o1777))
    ro = {d for d in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc") if os.path.exists(d)}
    python_dirs = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    try:
        import site
        python_dirs.update(site.getsitepackages())
    except Exception:  # pragma: no cover - unusual site modules
        pass
    ro |= {p for d in python_dirs for p in (d, os.path.realpath(d)) if os.path.isdir(p)}
    ro |= {str(d) for d in TRUSTED_DIRS}
    binds = [(p, False) for p in _outermost(ro)] + [(str(p), False) for p in read_only]
    binds += [(str(p), True) for p in writable]
    bound = {p for p, _ in binds}
    parents = set()
    for p, _ in binds:
        parent = os.path.dirname(p)
        while parent not in ("/", "", "/tmp") and not any(_within(parent, b) for b in bound):
            parents.add(parent)
            parent = os.path.dirname(parent)
    plan += [Dir(d, 0o755) for d in sorted(parents, key=lambda x: x.count("/"))]
    plan += [Bind(p, p, writable) for p, writable in sorted(binds, key=lambda b: b[0].count("/"))]
    for secret in GRADER_DIRS:  # mounted after the binds, so it covers the grader wherever it is bound
        if any(_within(str(secret), p) for p, _ in binds):
            plan.append(Tmpfs(str(secret), None, 0o755))
    if launcher_dir is not None:   # a root-only folder holding a copy of the launcher (see Sandbox.__enter__)
        plan.append(Bind(str(launcher_dir), INNER_LAUNCHER_DIR, writable=False))
    elif launcher:                 # the probe: nothing of a learner runs there
        plan.append(Bind(str(LAUNCHER), INNER_LAUNCHER, writable=False))
    return tuple(plan)


def bwrap_command(plan: tuple[Step, ...]) -> list[str]:
    """bubblewrap's command line for ``plan``, with its namespaces, session and hostname."""
    options = _bwrap_options()
    args = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--clearenv"]
    for step in plan:
        args += step.bwrap(options)
    return args


@functools.lru_cache(maxsize=1)
def _bwrap_options() -> frozenset[str]:
    """The options this bubblewrap knows (from ``bwrap --help``)."""
    try:
        text = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True,
                              timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(word for word in text.split() if word.startswith("--"))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _outermost(paths: set[str]) -> list[str]:
    """Drop paths that lie inside another path of the set."""
    return sorted(p for p in paths if not any(q != p and _within(p, q) for q in paths))
