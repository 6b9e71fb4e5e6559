"""Where learner code runs: bubblewrap, cgroups, a throwaway uid and rlimits, strongest first.

Every submission gets a :class:`Sandbox`: a scratch directory of its own, a fresh
random uid (so files of other learners, the gradebook, the results and the
instructor sources, all owned by root and not world-writable, are out of reach,
and so ``RLIMIT_NPROC`` counts only this submission's processes), a memory and
process cgroup when the machine lets us create one, and, with bubblewrap, a
private mount, pid, ipc and network namespace in which only the system, the
Python installation, the course library and the scratch folder are visible.

:func:`probe` finds out once per process which of these tools work here and
says, in :attr:`Isolation.warnings`, what is missing and what is used instead.
:meth:`Sandbox.command` wraps any command line; the kernel for nbclient and the
lab run both go through it.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import itertools
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from course_lib.errors import CourseInputError
from course_lib.units import GiB, KiB, MiB, TiB, format_bytes, parse_bytes

from ..errors import AutograderError
from .forkserver import PRELOAD, ForkedProcess, ForkServer, ForkServerError

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).resolve().with_name("_launch.py")
#: Where the launcher appears inside bubblewrap. It runs there as root (to drop to the throwaway
#: uid), from a root-only folder, so learner code cannot read even this file of the grader.
INNER_LAUNCHER_DIR = "/run/course-grade"
INNER_LAUNCHER = f"{INNER_LAUNCHER_DIR}/launch.py"
# What learner code may import from the course: the library, which learners install anyway.
TRUSTED_DIRS = (REPO / "course_lib",)
#: The grader itself: never readable from the sandbox. Hidden tests carry their collection code
#: inline (autograder.hidden), so a kernel never needs a file of this package. Where a bound
#: folder contains it (an installed, not editable, package in site-packages), it is covered by
#: an empty tmpfs.
GRADER_DIRS = (Path(__file__).resolve().parents[1], REPO / "lessons")

#: The smallest memory cap a kernel can start under (ipykernel with numpy and matplotlib uses ~200 MB).
MIN_MEMORY_BYTES = 256 * MiB
#: The largest: a grading machine with more than 1 TiB for one notebook is not a grading machine.
MAX_MEMORY_BYTES = TiB
#: The smallest disk cap: a kernel writes ~1 MB (IPython's history, matplotlib's cache) before any cell.
MIN_DISK_BYTES = 16 * MiB
#: The largest: the scratch tmpfs lives in memory (and counts against the memory cap).
MAX_DISK_BYTES = 64 * GiB


def _size_option(flag: str, text: str | int, lo: int, hi: int, example: str) -> int:
    """Bytes from a size option, read with the course's one size grammar (GB = 10^9, GiB = 2^30)."""
    if isinstance(text, str) and re.fullmatch(r"\s*[-+]?(inf|infinity|nan)\s*[A-Za-z]*\s*", text, re.I):
        raise AutograderError(f"{flag}={text!r} is not a finite size; use a size from {_both(lo)} to {_both(hi)}, "
                              f"e.g. {example}")
    if isinstance(text, str) and re.fullmatch(r"\s*[\d.eE+]+\s*[KMGTkmgt]\s*", text):
        unit = text.strip()[-1].upper()
        raise AutograderError(f"{flag}={text!r}: the unit {unit!r} alone is ambiguous; write {unit}B (powers of "
                              f"1000) or {unit}iB (powers of 1024), e.g. {example}")
    try:
        value = parse_bytes(text, name=flag)
    except CourseInputError as e:
        raise AutograderError(str(e)) from None
    if not lo <= value <= hi:
        raise AutograderError(f"{flag}={text!r} is {format_bytes(value, 'auto')}; use a size from "
                              f"{_both(lo)} to {_both(hi)}, e.g. {example}")
    return value


def _both(n: int) -> str:
    """A size in decimal and binary units: ``268.44 MB (256 MiB)``, ``2.00 GB (1.86 GiB)``."""
    binary = f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"
    return f"{format_bytes(n, 'auto')} ({binary})"


def memory_limit_bytes(text: str | int) -> int:
    """Bytes from ``--memory-limit``, read with the course's one size grammar (GB = 10^9, GiB = 2^30).

    >>> memory_limit_bytes("2GB"), memory_limit_bytes("2GiB"), memory_limit_bytes("512MiB")
    (2000000000, 2147483648, 536870912)
    """
    return _size_option("--memory-limit", text, MIN_MEMORY_BYTES, MAX_MEMORY_BYTES, "2GB or 2GiB")


def disk_limit_bytes(text: str | int) -> int:
    """Bytes from ``--disk-limit``, as :func:`memory_limit_bytes` reads them.

    >>> disk_limit_bytes("512MiB"), disk_limit_bytes("1GB")
    (536870912, 1000000000)
    """
    return _size_option("--disk-limit", text, MIN_DISK_BYTES, MAX_DISK_BYTES, "512MiB or 1GB")


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Every field is enforced by the OS, not by Python."""

    memory_bytes: int = 2 * GiB
    """Memory cap: a cgroup limit (the kernel OOM-kills), else RLIMIT_AS. A kernel with torch uses ~0.5 GB."""
    max_processes: int = 256
    """Processes and threads together (pids cgroup and RLIMIT_NPROC); ipykernel runs ~10 threads."""
    max_file_bytes: int = 64 * MiB
    """RLIMIT_FSIZE: the largest file learner code may write."""
    disk_bytes: int = 512 * MiB
    """Everything the notebook may write, together: work/, $HOME, /tmp and the kernel's sockets and log.
    A size-capped tmpfs over the scratch folder (its pages count against the memory cap as well),
    else a watchdog on the folder's size (see :attr:`Isolation.disk`)."""
    max_files: int = 100_000
    """Files and folders the notebook may create (the tmpfs's inodes; the watchdog counts them too)."""
    max_open_files: int = 1024
    """RLIMIT_NOFILE."""
    cpu_seconds: int = 900
    """RLIMIT_CPU: a backstop behind the wall-clock timeouts."""
    tmp_bytes: int = 256 * MiB
    """Size of bubblewrap's private /tmp when the scratch folder cannot be capped (else /tmp lies in it)."""

    def memory_text(self) -> str:
        """The memory cap in both units, as messages print it: ``2.15 GB (2.00 GiB)``, ``536.87 MB (512 MiB)``."""
        return _both(self.memory_bytes)

    def disk_text(self) -> str:
        """The disk cap in both units, as messages print it: ``536.87 MB (512 MiB)``."""
        return _both(self.disk_bytes)

    def summary(self) -> str:
        """One line for the batch report: every limit, sizes in both units."""
        return (f"memory {self.memory_text()}, disk {self.disk_text()} and {self.max_files:,} files, "
                f"{self.max_processes} processes, {self.max_file_bytes // MiB} MiB per file")


@dataclass(frozen=True)
class Isolation:
    """Which isolation tools work on this machine (see :func:`probe`)."""

    bubblewrap: bool
    """bwrap runs: private mount/pid/ipc/net namespaces with only system, Python and course code visible."""
    cgroup: str | None
    """"v1" or "v2" when we can create memory+pids cgroups; None when we cannot."""
    drop_uid: bool
    """Learner code runs as a fresh unprivileged uid (needs root to switch)."""
    network: str
    """"bubblewrap", "unshare" (an empty network namespace) or "none" (network reachable!)."""
    disk: str = "watchdog"
    """"tmpfs": the grader mounts a size-capped tmpfs over each scratch folder (writes past the cap
    fail with ENOSPC); "watchdog": the folder's size is checked while cells run and the kernel is
    stopped when it passes the cap (a fast writer can overshoot by what it writes in ~0.25 s)."""
    warnings: tuple[str, ...] = field(default=())
    """What is missing here and what is used instead, to show the instructor."""
    kernels: str = "exec"
    """"fork": each kernel is forked from the batch's kernel fork server (ipykernel, numpy, matplotlib
    and the course library imported once; autograder/_zygote.py) into namespaces, a file system,
    cgroups, uid and rlimits of its own, the very ones bubblewrap and the launcher set up;
    "exec": each kernel is a fresh Python started through bubblewrap and the launcher."""

    def summary(self) -> str:
        parts = [
            "bubblewrap namespaces" if self.bubblewrap else "no bubblewrap",
            f"cgroup {self.cgroup} memory+pids" if self.cgroup else "rlimits only (no cgroup)",
            "throwaway uid" if self.drop_uid else "same uid as the grader",
            {"bubblewrap": "no network", "unshare": "no network (unshare)", "none": "NETWORK REACHABLE"}[self.network],
            "disk capped (tmpfs)" if self.disk == "tmpfs" else "disk watched (no tmpfs cap)",
        ]
        if self.kernels == "fork":
            parts.append("kernels forked from a pre-imported server into the same isolation")
        return ", ".join(parts)


# ---- cgroups -----------------------------------------------------------------------------

_CG = Path("/sys/fs/cgroup")


def _own_cgroup_paths() -> dict[str, str]:
    """{controller: path} of this process, from /proc/self/cgroup ("" is the v2 entry)."""
    paths = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    except OSError:
        pass
    return paths


class Cgroup:
    """A memory + pids cgroup for one submission, v1 (two hierarchies) or v2 (one)."""

    def __init__(self, version: str, name: str):
        self.version = version
        own = _own_cgroup_paths()
        if version == "v2":
            self.dirs = {"": _CG / own.get("", "/").lstrip("/") / name}
        else:
            self.dirs = {c: _CG / c / own.get(c, "/").lstrip("/") / name for c in ("memory", "pids")}

    def create(self, limits: Limits) -> None:
        for d in self.dirs.values():
            d.mkdir()
        if self.version == "v2":
            d = self.dirs[""]
            (d / "memory.max").write_text(str(limits.memory_bytes))
            if (d / "memory.swap.max").exists():
                (d / "memory.swap.max").write_text("0")
            (d / "pids.max").write_text(str(limits.max_processes))
        else:
            mem = self.dirs["memory"]
            (mem / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                try:
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))
                except OSError:
                    pass
            (self.dirs["pids"] / "pids.max").write_text(str(limits.max_processes))

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def counters(self) -> dict[str, int]:
        """Cumulative event counts: ``oom_kill`` (the OOM killer acted) and ``pids_max`` (a fork or a
        new thread failed at the process cap), and ``pids`` (how many processes there are now)."""
        out = {"oom_kill": 0, "pids_max": 0, "pids": 0}
        mem = self.dirs.get("memory", self.dirs.get(""))
        pids = self.dirs.get("pids", self.dirs.get(""))
        try:
            if self.version == "v2":
                text = (mem / "memory.events").read_text()
                out["oom_kill"] = max(_field(text, "oom_kill"), _field(text, "oom"))
            else:
                text = (mem / "memory.oom_control").read_text()
                out["oom_kill"] = _field(text, "oom_kill") if "oom_kill " in text else int(
                    (mem / "memory.failcnt").read_text())
        except (OSError, ValueError):
            pass
        try:
            out["pids_max"] = _field((pids / "pids.events").read_text(), "max")
            out["pids"] = int((pids / "pids.current").read_text())
        except (OSError, ValueError):
            pass
        return out

    def pids(self) -> list[int]:
        out = set()
        for f in self.procs_files:
            try:
                out.update(int(x) for x in Path(f).read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(out)

    def kill_all(self, wait_s: float = 5.0) -> None:
        deadline = time.monotonic() + wait_s
        for attempt in itertools.count():
            pids = self.pids()
            if not pids or time.monotonic() > deadline:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            _backoff(attempt)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs.values():
            deadline = time.monotonic() + 2.5
            for attempt in itertools.count():
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    _backoff(attempt)


def _backoff(attempt: int) -> None:
    """Wait before looking again whether killed processes are gone: 1 ms, 2, 4... up to 50 ms.
    A killed kernel is usually gone within a few milliseconds; a fixed 50 ms wait was idle CPU
    on every submission."""
    time.sleep(min(0.05, 0.001 * 2 ** attempt))


def cgroup_parents() -> list[Path]:
    """The folders where this process's sandboxes create their cgroups."""
    version = _cgroup_version()
    if version is None:
        return []
    return [d.parent for d in Cgroup(version, "x").dirs.values()]


def _field(text: str, key: str) -> int:
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    return 0


def _cgroup_version() -> str | None:
    """v2 if the unified hierarchy is mounted with memory and pids, v1 if both v1 hierarchies are."""
    if (_CG / "cgroup.controllers").exists():
        return "v2"
    if (_CG / "memory").is_dir() and (_CG / "pids").is_dir():
        return "v1"
    return None


# ---- the scratch folder: its name, its disk cap, the sweep of leftovers -------------------

_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
#: The tmpfs's source name in /proc/self/mountinfo: how the sweep tells the grader's mounts apart.
MOUNT_SOURCE = "course-grade"
#: The names scratch_dir() (and lab.py, forkserver.py) give: cg-[lab-|probe-|zygote-]PID-<mkdtemp's 8 characters>.
#: The kinds scratch_dir() is given: the lab runs, the probe, the fork server, and a Dask worker's
#: tasks and copy of the instructor files (distributed.py).
_SCRATCH = re.compile(r"cg-(?:lab-|probe-|zygote-|task-|instructor-)?(\d+)-[a-z0-9_]{8}")


def scratch_dir(kind: str = "") -> Path:
    """A private scratch folder named after this process (``cg-[kind-]PID-...``), so that the
    leftovers of a killed grader can be found and swept (:func:`sweep_leftovers`)."""
    return Path(tempfile.mkdtemp(prefix=f"cg-{kind + '-' if kind else ''}{os.getpid()}-"))


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
            shutil.rmtree(d, ignore_errors=True)
    for root in (d for parent in cgroup_parents() for d in parent.glob("course-grade-*")):
        m = re.match(r"course-grade-(\d+)-", root.name)
        if m and _dead(int(m.group(1))) and root.is_dir():
            try:
                for pid in (root / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
                root.rmdir()
            except OSError:
                pass


def _kill_uid(uid: int, wait_s: float = 5.0) -> None:
    """SIGKILL every process whose real uid is ``uid`` (the sandbox's throwaway uid), until none is left."""
    deadline = time.monotonic() + wait_s
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            line = next((x for x in status.splitlines() if x.startswith("Uid:")), "")
            if line.split()[1:2] == [str(uid)]:
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return
        _backoff(attempt)


# ---- probing -----------------------------------------------------------------------------

def mount_plan(limits: Limits, writable: tuple[Path, ...] = (), read_only: tuple[Path, ...] = (),
               launcher_dir: Path | None = None, tmp: Path | None = None, launcher: bool = True) -> list[tuple]:
    """What a sandbox's file system holds, in the order it is made: read-only system, Python and
    course code (and ``read_only``); ``writable`` dirs read-write; ``tmp`` (a folder of the capped
    scratch tmpfs) at /tmp, else a private tmpfs of ``limits.tmp_bytes``; a fresh /proc and /dev.

    Steps: ``("proc", path)``, ``("dev", path)``, ``("tmpfs", path, size_bytes | None, mode)``,
    ``("dir", path, mode)``, ``("bind" | "ro-bind", source, path)``. bubblewrap is given them as
    options (:func:`_bwrap_base`); the kernel fork server (``_zygote.py``) makes them itself.
    Each bound path appears at its real path inside, so paths in tracebacks and in the
    kernel's connection file mean the same thing on both sides.
    """
    plan: list[tuple] = [("proc", "/proc"), ("dev", "/dev")]
    plan.append(("bind", str(tmp), "/tmp") if tmp is not None else ("tmpfs", "/tmp", limits.tmp_bytes, 0o1777))
    ro = {d for d in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc") if os.path.exists(d)}
    python_dirs = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    try:
        import site
        python_dirs.update(site.getsitepackages())
    except Exception:  # pragma: no cover - unusual site modules
        pass
    ro |= {p for d in python_dirs for p in (d, os.path.realpath(d)) if os.path.isdir(p)}
    ro |= {str(d) for d in TRUSTED_DIRS}
    binds = [(p, "ro-bind") for p in _outermost(ro)] + [(str(p), "ro-bind") for p in read_only]
    binds += [(str(p), "bind") for p in writable]
    # Parents that bwrap would otherwise create with mode 0700 (unusable by the dropped uid).
    bound = {p for p, _ in binds}
    parents = set()
    for p, _ in binds:
        parent = os.path.dirname(p)
        while parent not in ("/", "", "/tmp") and not any(_within(parent, b) for b in bound):
            parents.add(parent)
            parent = os.path.dirname(parent)
    plan += [("dir", d, 0o755) for d in sorted(parents, key=lambda x: x.count("/"))]
    plan += [(how, p, p) for p, how in sorted(binds, key=lambda b: b[0].count("/"))]
    for secret in GRADER_DIRS:  # mounted after the binds, so it covers the grader wherever it is bound
        if any(_within(str(secret), p) for p, _ in binds):
            plan.append(("tmpfs", str(secret), None, 0o755))
    if launcher_dir is not None:   # a root-only folder holding a copy of the launcher (see Sandbox.__enter__)
        plan.append(("ro-bind", str(launcher_dir), INNER_LAUNCHER_DIR))
    elif launcher:                 # the probe: nothing of a learner runs there
        plan.append(("ro-bind", str(LAUNCHER), INNER_LAUNCHER))
    return plan


def _bwrap_base(limits: Limits, writable: tuple[Path, ...] = (), launcher_dir: Path | None = None,
                tmp: Path | None = None, read_only: tuple[Path, ...] = ()) -> list[str]:
    """bubblewrap's command line for :func:`mount_plan` (and its namespaces, session and hostname)."""
    has = _bwrap_options()
    args = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--clearenv"]
    for step in mount_plan(limits, writable, read_only, launcher_dir, tmp):
        kind, path = step[0], step[-1] if step[0] in ("bind", "ro-bind") else step[1]
        if kind in ("proc", "dev"):
            args += [f"--{kind}", path]
        elif kind == "tmpfs":
            # --perms and --size came with bubblewrap 0.5 / 0.6; older ones get a plain /tmp (probe() checks the rest)
            size, mode = step[2], step[3]
            args += (["--perms", f"{mode:04o}"] if mode != 0o755 and "--perms" in has else []) + (
                ["--size", str(size)] if size and "--size" in has else []) + ["--tmpfs", path]
        elif kind == "dir":
            args += (["--perms", f"{step[2]:04o}"] if "--perms" in has else []) + ["--dir", path]
        else:
            args += [f"--{kind}", step[1], path]
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


def _works(cmd: list[str], timeout: float = 20) -> tuple[bool, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()[-300:]


@functools.lru_cache(maxsize=1)
def probe() -> Isolation:
    """Try each isolation tool once (about 0.1 s) and report what works here."""
    warnings = []
    is_root = os.geteuid() == 0
    uid = 1_000_000 + secrets.randbelow(1_000_000_000)

    bubblewrap = False
    if shutil.which("bwrap") is None:
        warnings.append("bubblewrap (bwrap) is not installed: learner code can READ the whole file system "
                        "(other submissions, instructor sources). Install it with `apt-get install bubblewrap`.")
    else:
        cmd = _bwrap_base(Limits()) + ["--", sys.executable, "-I", INNER_LAUNCHER]
        cmd += (["--uid", str(uid)] if is_root else []) + ["--", sys.executable, "-I", "-c", "pass"]
        bubblewrap, why = _works(cmd)
        if not bubblewrap:
            warnings.append(f"bubblewrap is installed but cannot create namespaces here ({why}); "
                            "learner code can READ the whole file system. Falling back to uid + rlimits.")

    cgroup = None
    version = _cgroup_version()
    if version is not None and is_root:
        cg = Cgroup(version, f"course-grade-probe-{os.getpid()}")
        try:
            cg.create(Limits())
            cgroup = version
        except OSError as e:
            warnings.append(f"cannot create a cgroup ({e}); the memory cap is RLIMIT_AS (per process) "
                            "and the process cap is RLIMIT_NPROC.")
        finally:
            cg.remove()
    else:
        warnings.append("no writable cgroup hierarchy; the memory cap is RLIMIT_AS (per process) "
                        "and the process cap is RLIMIT_NPROC.")

    drop_uid = False
    if not is_root:
        warnings.append("the grader is not root, so learner code runs as the grader's own user: it can "
                        "write wherever the grader can, and RLIMIT_NPROC counts all of that user's processes.")
    elif bubblewrap:
        drop_uid = True
    else:
        drop_uid, why = _works([sys.executable, "-I", str(LAUNCHER), "--uid", str(uid), "--",
                                sys.executable, "-I", "-c", "import course_lib"], timeout=20)
        if not drop_uid:
            # e.g. Python under /root (mode 700) is not executable by another uid.
            warnings.append(f"an unprivileged uid cannot run this Python ({why}); learner code runs as root.")

    disk = "watchdog"
    if is_root:
        target = scratch_dir("probe")
        try:
            mount_tmpfs(target, MiB, 16)
            unmount(target)
            disk = "tmpfs"
        except OSError as e:
            warnings.append(f"{e}; the notebook's writes are capped by a watchdog on the scratch folder's "
                            f"size instead (checked 4 times a second: a fast writer can overshoot the cap).")
        finally:
            shutil.rmtree(target, ignore_errors=True)
    else:
        warnings.append("the grader is not root, so it cannot mount a size-capped tmpfs for each notebook; "
                        "a watchdog on the scratch folder's size caps its writes (a fast writer can overshoot).")

    if bubblewrap:
        network = "bubblewrap"
    else:
        ok, why = _works([sys.executable, "-I", str(LAUNCHER), "--unshare-net", "--", "/bin/true"])
        network = "unshare" if ok else "none"
        if not ok:
            warnings.append(f"cannot create a network namespace ({why}): learner code CAN reach the network.")
    iso = Isolation(bubblewrap=bubblewrap, cgroup=cgroup, drop_uid=drop_uid, network=network, disk=disk,
                    warnings=tuple(warnings))
    choice = os.environ.get(KERNELS_ENV, "auto")
    if bubblewrap and drop_uid and choice != "exec":
        ok, why = _fork_server_works(iso)
        if ok:
            return replace(iso, kernels="fork")
        iso = replace(iso, warnings=iso.warnings + (
            f"the kernel fork server cannot run here ({why}); each kernel starts a fresh Python under bubblewrap "
            f"instead (the same isolation, about a second more CPU per submission).",))
    return iso


#: ``COURSE_GRADE_KERNELS=exec`` starts every kernel as a fresh Python under bubblewrap even where the
#: fork server works (to compare the two, or to rule the server out); the default is ``auto``.
KERNELS_ENV = "COURSE_GRADE_KERNELS"
_PROBE_PROGRAM = ("import json, os, socket\n"
                  "print(json.dumps({'uid': os.getuid(), 'pid': os.getpid(), 'host': socket.gethostname()}))")


def _fork_server_works(iso: Isolation) -> tuple[bool, str]:
    """Start a fork server (nothing preloaded) and fork one sandboxed program from it: does it run as
    the throwaway uid, as pid 2 of its own pid namespace, with the sandbox's hostname?"""
    folder = scratch_dir("zygote")
    try:
        server = ForkServer(fork_server_env(folder, str(REPO)), preload=(), folder=folder)
    except ForkServerError as e:
        shutil.rmtree(folder, ignore_errors=True)
        return False, str(e)
    try:
        with Sandbox(scratch_dir("probe"), Limits(), iso) as box:
            out = box.log_dir / "probe.out"
            with open(out, "wb") as f:
                proc = ForkedProcess(*server.spawn(box.fork_request([sys.executable, "-I", "-c", _PROBE_PROGRAM],
                                                                    mode="exec"), [f.fileno()]))
            exited = proc.wait(20)
            proc.close()
            text = out.read_text(errors="replace").strip()
        try:
            report = json.loads(text.splitlines()[-1])
        except (ValueError, IndexError):
            return False, text[-300:] or ("no output" if exited else "no answer in 20 s")
        if report.get("pid") != 2 or report.get("uid") == 0 or report.get("host") != "sandbox":
            return False, f"the forked program was not isolated: {report}"
        return True, ""
    except (ForkServerError, OSError) as e:
        return False, str(e)
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


def fork_server_env(folder: Path, pythonpath: str) -> dict[str, str]:
    """The fork server's environment: a kernel's (its imports see what a kernel's would), with
    folders of its own in ``folder`` (root only) and matplotlib's font list seeded there."""
    mpl = folder / "matplotlib"
    _seed_matplotlib_cache(mpl)
    mpl.mkdir(exist_ok=True)
    env = kernel_env(home=folder, tmpdir=folder, ipython_dir=folder / "ipython", mpl_dir=mpl, pythonpath=pythonpath)
    # ipykernel sets this in every kernel; matplotlib reads it when it is imported
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    return env


def kernel_env(*, home: Path, tmpdir: Path | str, ipython_dir: Path, mpl_dir: Path, pythonpath: str) -> dict[str, str]:
    """The whole environment of a learner's kernel (nothing of the grader's passes): the venv's
    Python first, no user site, one thread per BLAS, and NBGRADER_EXECUTION as under
    `nbgrader autograde` (notebooks may skip demonstrations that earn no points)."""
    venv_bin = os.path.dirname(sys.executable)
    return {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmpdir),
            "PYTHONPATH": pythonpath, "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "IPYTHONDIR": str(ipython_dir), "MPLCONFIGDIR": str(mpl_dir),
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "LANG": "C.UTF-8",
            "NBGRADER_EXECUTION": "autograde"}


_servers: dict[str, ForkServer | None] = {}
_servers_lock = threading.Lock()


def fork_server(pythonpath: str) -> ForkServer | None:
    """The kernel fork server of this process (or of the process that forked this one) for kernels
    with this PYTHONPATH, started on first use; None when it cannot start (kernels are then exec'd)."""
    with _servers_lock:
        if pythonpath in _servers:
            server = _servers[pythonpath]
            if server is None or server.alive():
                return server
        folder = scratch_dir("zygote")
        try:
            server = ForkServer(fork_server_env(folder, pythonpath), preload=PRELOAD, folder=folder)
        except (ForkServerError, OSError) as e:
            shutil.rmtree(folder, ignore_errors=True)
            logging.getLogger(__name__).warning("%s; kernels start as fresh Pythons instead", e)
            server = None
        if not _servers:
            atexit.register(stop_fork_servers)
        _servers[pythonpath] = server
        return server


def fork_server_early(pythonpath: str) -> None:
    """Start the fork server's imports now, before :func:`probe` has said whether kernels will be
    forked (about 0.7 s of imports, which then overlap the probe and the lab baseline), where a
    fork server can run at all: as root, with bubblewrap installed, and not ruled out by
    ``COURSE_GRADE_KERNELS=exec``. Whoever calls it stops it again when the probe says "exec"."""
    if os.geteuid() == 0 and shutil.which("bwrap") is not None and os.environ.get(KERNELS_ENV, "auto") != "exec":
        fork_server(pythonpath)


def stop_fork_servers() -> None:
    """Stop the fork servers this process started (their kernels with them) and remove their folders."""
    with _servers_lock:
        for key, server in list(_servers.items()):
            if server is not None:
                server.close()
                if server.owner == os.getpid():
                    shutil.rmtree(server.folder, ignore_errors=True)
            del _servers[key]


# ---- the sandbox -------------------------------------------------------------------------

class Sandbox:
    """A scratch directory, a uid, a cgroup and a command wrapper for one submission.

    Layout under ``root``: ``work/`` (the learner's files; the cwd), ``home/`` ($HOME),
    ``run/`` (kernel connection file and sockets), ``log/`` (kernel stderr; not visible inside),
    ``tmp/`` (/tmp under bubblewrap), ``ipython/`` ($IPYTHONDIR: the grader's, read-only inside, so
    no learner file there, a startup file or a config, can run in a fresh kernel), ``mnt/`` (where
    the kernel fork server builds the sandbox's file system). Where the grader can mount, ``root``
    is a tmpfs of ``limits.disk_bytes``: everything the notebook writes, sockets and log included,
    shares that cap.
    """

    def __init__(self, root: Path, limits: Limits = Limits(), isolation: Isolation | None = None,
                 pythonpath: str | None = None):
        self.root = Path(root)
        self.limits = limits
        self.isolation = isolation or probe()
        self.pythonpath = pythonpath or str(REPO)
        self.work = self.root / "work"
        self.home = self.root / "home"
        self.run_dir = self.root / "run"
        self.log_dir = self.root / "log"
        self.launcher_dir = self.root / "launcher"
        self.tmp = self.root / "tmp"
        self.ipython_dir = self.root / "ipython"
        self.stage = self.root / "mnt"
        self.uid = 1_000_000 + secrets.randbelow(1_000_000_000) if self.isolation.drop_uid else None
        self.cgroup: Cgroup | None = None
        self.disk_capped = False
        """True when ``root`` is a size-capped tmpfs (else the watchdog applies: :meth:`disk_full`)."""

    def __enter__(self) -> Sandbox:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.isolation.disk == "tmpfs":
            try:
                mount_tmpfs(self.root, self.limits.disk_bytes, self.limits.max_files)
                self.disk_capped = True
            except OSError:  # probe() saw it work; if it fails now, the watchdog still applies
                pass
        for d in (self.work, self.home, self.run_dir, self.log_dir, self.launcher_dir, self.tmp, self.stage):
            d.mkdir(parents=True, exist_ok=True)
        _ipython_dir(self.ipython_dir)
        os.chmod(self.root, 0o711)
        shutil.copyfile(LAUNCHER, self.launcher_dir / "launch.py")
        os.chmod(self.launcher_dir, 0o700)  # root only: the learner's uid cannot list or read it
        os.chmod(self.log_dir, 0o700)
        os.chmod(self.tmp, 0o1777)
        _seed_matplotlib_cache(self.home / ".matplotlib")
        if self.isolation.cgroup:
            cg = Cgroup(self.isolation.cgroup, f"course-grade-{os.getpid()}-{secrets.token_hex(4)}")
            try:
                cg.create(self.limits)
                self.cgroup = cg
            except OSError:
                cg.remove()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.kill_all()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.disk_capped:
            unmount(self.root)
            self.disk_capped = False
        shutil.rmtree(self.root, ignore_errors=True)

    def kill_all(self) -> None:
        """Kill every process of this sandbox: the cgroup's, else those of its throwaway uid."""
        if self.cgroup is not None:
            self.cgroup.kill_all()
        elif self.uid is not None:
            _kill_uid(self.uid)

    def counters(self) -> dict[str, int]:
        """The cgroup's cumulative ``oom_kill`` and ``pids_max`` events and its ``pids`` (zeros without one)."""
        return self.cgroup.counters() if self.cgroup is not None else {"oom_kill": 0, "pids_max": 0, "pids": 0}

    def disk_used(self) -> tuple[int, int]:
        """(bytes, files) the notebook has written under ``root``: the tmpfs's own count when capped,
        else a walk that stops counting files past ``limits.max_files``."""
        if self.disk_capped:
            st = os.statvfs(self.root)
            return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree
        used, files, stack = 0, 0, [str(self.root)]
        while stack and files <= self.limits.max_files:
            try:
                with os.scandir(stack.pop()) as entries:
                    for entry in entries:
                        files += 1
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        used += st.st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
            except OSError:
                continue
        return used, files

    def disk_full(self) -> bool:
        """Has the notebook reached its disk cap (bytes or files), within a little slack?"""
        used, files = self.disk_used()
        return used >= self.limits.disk_bytes - 256 * KiB or files >= self.limits.max_files - 16

    def env(self) -> dict[str, str]:
        return kernel_env(home=self.home, tmpdir="/tmp" if self.isolation.bubblewrap else self.home,
                          ipython_dir=self.ipython_dir, mpl_dir=self.home / ".matplotlib", pythonpath=self.pythonpath)

    def command(self, argv: list[str], cwd: Path | None = None) -> list[str]:
        """``argv`` wrapped so that it runs inside this sandbox, in ``cwd`` (default: ``work/``)."""
        iso, lim = self.isolation, self.limits
        cwd = Path(cwd or self.work)
        launch = [sys.executable, "-I", str(LAUNCHER)]
        inner = [sys.executable, "-I", INNER_LAUNCHER] if iso.bubblewrap else list(launch)
        if not iso.bubblewrap and iso.network == "unshare":
            inner.append("--unshare-net")
        if self.uid is not None:
            for d in (self.work, self.home, self.run_dir):
                inner += ["--chown", str(d)]
            inner += ["--uid", str(self.uid)]
        for name, value in self.rlimits().items():
            inner += ["--rlimit", f"{name}={value}"]
        for key, value in self.env().items():
            inner += ["--env", f"{key}={value}"]
        # Inside bubblewrap our parent is its pid-1 (pid numbers differ): only set the signal (0).
        inner += ["--chdir", str(cwd), "--pdeathsig", "0" if iso.bubblewrap else str(os.getpid()), "--"] + list(argv)

        join = []
        if self.cgroup is not None:
            for procs in self.cgroup.procs_files:
                join += ["--cgroup-procs", procs]
        if not iso.bubblewrap:
            return launch + join + inner[3:] if join else inner
        bw = _bwrap_base(lim, writable=(self.work, self.home, self.run_dir), launcher_dir=self.launcher_dir,
                         tmp=self.tmp if self.disk_capped else None, read_only=(self.ipython_dir,))
        bw += ["--chdir", str(cwd), "--"]
        # bwrap's --die-with-parent ties the sandbox to bwrap, not bwrap to us: the outer
        # launcher sets PDEATHSIG (kept across exec) so that bwrap dies with the grader.
        outer = launch + join + ["--pdeathsig", str(os.getpid()), "--"]
        return outer + bw + inner

    def rlimits(self) -> dict[str, int]:
        """The rlimits learner code runs under (RLIMIT_AS only where no cgroup caps the memory)."""
        lim = self.limits
        out = {"NPROC": lim.max_processes, "FSIZE": lim.max_file_bytes, "NOFILE": lim.max_open_files,
               "CPU": lim.cpu_seconds, "CORE": 0}
        if self.cgroup is None:
            out["AS"] = lim.memory_bytes
        return out

    def fork_request(self, argv: list[str], cwd: Path | None = None, mode: str = "kernel",
                     fds: tuple[str, ...] = ("output",)) -> dict:
        """What the kernel fork server needs to fork a program into this sandbox (``_zygote.py``):
        every step that :meth:`command` gives bubblewrap and the launcher, as data. ``mode`` "kernel":
        ipykernel with the arguments ``argv``, in the forked process; "exec": the program ``argv``."""
        plan = mount_plan(self.limits, writable=(self.work, self.home, self.run_dir), read_only=(self.ipython_dir,),
                          tmp=self.tmp if self.disk_capped else None, launcher=False)
        return {"mode": mode, "argv": [str(a) for a in argv], "fds": list(fds), "plan": plan, "stage": str(self.stage),
                "cgroup_procs": self.cgroup.procs_files if self.cgroup is not None else [],
                "hostname": "sandbox", "loopback": True, "uid": self.uid,
                "chown": [str(d) for d in (self.work, self.home, self.run_dir)] if self.uid is not None else [],
                "rlimits": list(self.rlimits().items()), "env": self.env(), "cwd": str(cwd or self.work)}

    def run(self, argv: list[str], cwd: Path | None = None, timeout: float = 60,
            max_output_bytes: int = 64 * KiB) -> tuple[int | None, str, str]:
        """Run a command to completion in the sandbox: (returncode or None on timeout, stdout, stderr)."""
        out_path, err_path = self.log_dir / "run.out", self.log_dir / "run.err"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            rc = self._run_forked(argv, cwd, timeout, out, err)
            if rc == "no server":
                proc = subprocess.Popen(self.command(argv, cwd), stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=err, start_new_session=True)
                try:
                    rc = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    rc = None
                    _kill_group(proc)
        if self.cgroup is not None:
            self.cgroup.kill_all()
        return rc, _head(out_path, max_output_bytes), _head(err_path, max_output_bytes)

    def _run_forked(self, argv, cwd, timeout, out, err) -> int | None | str:
        """:meth:`run` through the fork server (the very sandbox, without starting bubblewrap and two
        launchers): the returncode, None on timeout, or "no server" where there is none or it is
        still importing (bubblewrap is quicker then)."""
        server = fork_server(self.pythonpath) if self.isolation.kernels == "fork" else None
        if server is None or not server.ready():
            return "no server"
        status_r, status_w = os.pipe()
        try:
            try:
                proc = ForkedProcess(*server.spawn(self.fork_request(argv, cwd, mode="exec",
                                                                     fds=("stdout", "stderr", "status")),
                                                   [out.fileno(), err.fileno(), status_w]))
            except ForkServerError as e:
                logging.getLogger(__name__).warning("%s; running it under bubblewrap instead", e)
                return "no server"
            finally:
                os.close(status_w)
            exited = proc.wait(timeout)
            proc.close()   # kills it if it is still running: its namespaces go with it
            if not exited:
                return None
            code = os.read(status_r, 64).strip()
            return int(code) if code.lstrip(b"-").isdigit() else -signal.SIGKILL   # killed before it could say
        finally:
            os.close(status_r)


def _ipython_dir(path: Path) -> None:
    """$IPYTHONDIR for the sandbox's kernels: the grader's, with the folders IPython wants, and
    nothing a learner could add (a startup file or a config that kills every fresh kernel)."""
    profile = path / "profile_default"
    for d in (profile / "startup", profile / "log", profile / "db", profile / "security", profile / "pid"):
        d.mkdir(parents=True, exist_ok=True)
    readme = profile / "startup" / "README"
    if not readme.exists():
        readme.write_text("This IPython profile belongs to the grader; learner files cannot be added here.\n")
    for d in (path, profile, profile / "startup", profile / "log", profile / "db"):
        os.chmod(d, 0o755)
    for d in (profile / "security", profile / "pid"):   # the modes IPython checks (it never writes there)
        os.chmod(d, 0o700)


def _seed_matplotlib_cache(target: Path) -> None:
    """Copy the grader's matplotlib font list into a fresh $HOME, sparing each kernel a font scan.

    The list names system fonts by path; /usr is the same inside the sandbox.
    """
    source = Path(os.environ.get("MPLCONFIGDIR") or Path.home() / ".cache" / "matplotlib")
    lists = sorted(source.glob("fontlist-v*.json")) if source.is_dir() else []
    if lists:
        target.mkdir(parents=True, exist_ok=True)
        for path in lists:
            shutil.copyfile(path, target / path.name)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.kill()
    proc.wait()


def _head(path: Path, limit: int) -> str:
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    text = data[:limit].decode("utf-8", "replace")
    return text + ("\n[output truncated]" if len(data) > limit else "")
