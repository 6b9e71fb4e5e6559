"""CPU seconds of a process and every descendant, sandboxed kernels included: a cgroup of its own.

``getrusage(RUSAGE_CHILDREN)`` (what ``time`` and most harnesses report) counts only children that
were waited for: a sandboxed kernel is SIGKILLed with its pid namespace and reaped by someone else,
so its CPU would be missed. A cpuacct cgroup (v1) or a cpu cgroup (v2) counts every process that
starts inside it, however it ends. The grader moves its kernels into memory and pids cgroups only,
so on v1 they stay in the meter's cpuacct group; on v2 a kernel leaves it (one hierarchy), so there
the meter falls back to rusage and says so.

    meter = CpuMeter.create("bench")        # None where no cgroup can be made (not root, no cpuacct)
    meter.run([...])                        # a command inside it: (returncode, wall s, cpu s)
    meter.join(); meter.cpu_s()             # or: this process itself, from now on
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

_V1 = Path("/sys/fs/cgroup/cpuacct")


def _own_v1_path() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return path
    return "/"


class CpuMeter:
    """A cpuacct cgroup (cgroup v1) that counts the CPU of everything started inside it."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, name: str) -> CpuMeter | None:
        if os.geteuid() != 0 or not (_V1 / "cpuacct.usage").exists():
            return None
        path = _V1 / _own_v1_path().lstrip("/") / f"meter-{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
        try:
            path.mkdir()
        except OSError:
            return None
        return cls(path)

    def cpu_s(self) -> float:
        """CPU seconds (user + system) of every process that ran in the group so far."""
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def join(self, pid: int = 0) -> None:
        (self.path / "cgroup.procs").write_text(str(pid or os.getpid()))

    def run(self, argv: list[str], **kw) -> tuple[int, float, float, subprocess.CompletedProcess]:
        """Run ``argv`` inside the group: (returncode, wall seconds, CPU seconds, the completed process)."""
        before = self.cpu_s()
        start = time.monotonic()
        proc = subprocess.run(argv, preexec_fn=lambda: self.join(), **kw)
        return proc.returncode, time.monotonic() - start, self.cpu_s() - before, proc

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def run_measured(argv: list[str], meter: CpuMeter | None, **kw):
    """(returncode, wall s, CPU s, process): in ``meter`` when there is one, else from rusage
    (which misses the CPU of killed, unreaped descendants: an undercount for sandboxed kernels)."""
    if meter is not None:
        return meter.run(argv, **kw)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(argv, **kw)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, time.monotonic() - start, cpu, proc
