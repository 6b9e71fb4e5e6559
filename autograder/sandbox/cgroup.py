"""A memory + pids cgroup for one submission, in the v1 or v2 hierarchy (whichever the kernel offers).

The cgroup is the minimum's memory and process cap: the kernel's OOM killer ends a notebook over
its memory, a fork past ``pids.max`` fails, and :meth:`Cgroup.kill_all` ends every process of a
submission, however it was started. It is also the submission's CPU clock (:meth:`Cgroup.cpu_seconds`:
v2's ``cpu.stat`` ``usage_usec``, which every v2 cgroup has; in v1 a ``cpuacct`` cgroup beside the
other two, where that hierarchy is mounted): the CPU time of every process of the submission, which
a busy machine does not change, unlike the wall clock.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

from .isolation import CgroupVersion
from .limits import Limits

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

    def __init__(self, version: CgroupVersion, name: str):
        self.version = CgroupVersion(version)
        own = _own_cgroup_paths()
        if version == "v2":
            self.dirs = {"": _CG / own.get("", "/").lstrip("/") / name}
        else:
            optional = ("cpuacct",) if (_CG / "cpuacct" / "cpuacct.usage").exists() else ()
            self.dirs = {c: _CG / c / own.get(c, "/").lstrip("/") / name for c in ("memory", "pids", *optional)}

    def create(self, limits: Limits) -> None:
        for controller, d in list(self.dirs.items()):
            try:
                d.mkdir()
            except OSError:
                if controller != "cpuacct":
                    raise
                del self.dirs[controller]   # the CPU clock falls back (Sandbox.cpu_seconds); the caps stand
        if self.version == CgroupVersion.V2:
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
            if self.version == CgroupVersion.V2:
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

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) of every process that ran in this cgroup so far; None without a CPU clock.

        >>> Cgroup("v1", "never-created").cpu_seconds() is None
        True
        """
        try:
            if self.version == CgroupVersion.V2:
                return _field((self.dirs[""] / "cpu.stat").read_text(), "usage_usec") / 1e6
            if "cpuacct" in self.dirs:
                return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            pass
        return None

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
            backoff(attempt)

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
                    backoff(attempt)


def backoff(attempt: int) -> None:
    """Wait before looking again whether killed processes are gone: 1 ms, 2, 4... up to 50 ms.
    A killed kernel is usually gone within a few milliseconds; a fixed 50 ms wait was idle CPU
    on every submission."""
    time.sleep(min(0.05, 0.001 * 2 ** attempt))


def cgroup_parents() -> list[Path]:
    """The folders where this process's sandboxes create their cgroups."""
    version = cgroup_version()
    if version is None:
        return []
    return [d.parent for d in Cgroup(version, "x").dirs.values()]


def _field(text: str, key: str) -> int:
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    return 0


def cgroup_version() -> CgroupVersion | None:
    """v2 if the unified hierarchy is mounted with memory and pids, v1 if both v1 hierarchies are."""
    if (_CG / "cgroup.controllers").exists():
        return CgroupVersion.V2
    if (_CG / "memory").is_dir() and (_CG / "pids").is_dir():
        return CgroupVersion.V1
    return None
