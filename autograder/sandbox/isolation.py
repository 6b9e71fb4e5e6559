"""What isolation this machine gives learner code, as named modes, and the minimum below which nobody is graded.

The minimum ("no isolation, no grading"): learner code runs in its own mount, pid and network
namespaces (bubblewrap), as a uid other than root that can run the kernel's Python (a fresh
throwaway uid for each submission), under a memory and pids cap (a cgroup). Below it
:func:`autograder.sandbox.probe.require_minimum` refuses to grade, in one line that says what is
missing and how to get it, unless the instructor asks for ``--insecure``. What may differ from one
machine to the next above the minimum is said by the modes: the cgroup version the kernel
offers, whether the disk cap is a tmpfs or a watchdog, whether kernels are forked from the fork
server or started fresh (the same isolation either way).

>>> full = Isolation(bubblewrap=True, cgroup=CgroupVersion.V2, drop_uid=True, network=Network.BUBBLEWRAP)
>>> full.missing()
()
>>> weak = Isolation(bubblewrap=False, cgroup=None, drop_uid=True, network=Network.UNSHARE)
>>> [m.split(":")[0] for m in weak.missing()]
['namespaces', 'a memory and pids cap']
>>> weak.summary().endswith("BELOW THE MINIMUM (--insecure)")
True
>>> Network.NONE == "none", f"{DiskCap.TMPFS}"
(True, 'tmpfs')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

#: ``COURSE_GRADE_KERNELS=exec`` starts every kernel as a fresh Python under bubblewrap even where the
#: fork server works (to compare the two, or to rule the server out); the default is ``auto``.
KERNELS_ENV = "COURSE_GRADE_KERNELS"


class Mode(str, Enum):
    """A mode is its value wherever it is printed or compared (``CgroupVersion.V1 == "v1"``)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class CgroupVersion(Mode):
    """Which cgroup hierarchy caps a submission's memory and processes."""

    V1 = "v1"
    """Two hierarchies, ``memory/`` and ``pids/``."""
    V2 = "v2"
    """The unified hierarchy."""


class Network(Mode):
    """How learner code is kept off the network."""

    BUBBLEWRAP = "bubblewrap"
    """bubblewrap's empty network namespace (the minimum)."""
    UNSHARE = "unshare"
    """An empty network namespace of the launcher's own (``--insecure`` only: no bubblewrap)."""
    NONE = "none"
    """None: the network is reachable (``--insecure`` only)."""


class DiskCap(Mode):
    """How the notebook's writes are capped."""

    TMPFS = "tmpfs"
    """A size-capped tmpfs over the scratch folder: writes past the cap fail with ENOSPC."""
    WATCHDOG = "watchdog"
    """The folder's size is checked while cells run and the kernel stopped past the cap (a fast
    writer can overshoot by what it writes in ~0.25 s): where no tmpfs can be mounted."""


class KernelStart(Mode):
    """How a kernel is started; the isolation is the same either way."""

    FORK = "fork"
    """Forked from the batch's kernel fork server (ipykernel, numpy, matplotlib and the course
    library imported once; ``_zygote.py``) into namespaces, a file system, cgroups, uid and rlimits
    of its own, the very ones bubblewrap and the launcher set up."""
    EXEC = "exec"
    """A fresh Python started through bubblewrap and the launcher."""


#: What each missing piece of the minimum is, and how to get it (one phrase each).
HOW = {
    "namespaces": "namespaces: bubblewrap cannot give learner code its own mount, pid and network namespaces here; "
                  "install it (apt-get install bubblewrap) and allow namespaces (in Docker: --privileged, or "
                  "--cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined)",
    "uid": "a throwaway uid: learner code would run as the grader's own user; run course-grade as root (it hands "
           "each kernel to a fresh unprivileged uid) with a Python every user can read and run (not one under "
           "/root: e.g. /usr/bin/python3, or uv with UV_PYTHON_INSTALL_DIR=/opt/uv-python)",
    "cgroup": "a memory and pids cap: no cgroup with the memory and pids controllers can be made here; run as root "
              "where /sys/fs/cgroup is writable (in Docker: --privileged, or --cgroupns=private with a writable "
              "cgroup mount)",
}


@dataclass(frozen=True)
class Isolation:
    """Which isolation tools work on this machine (found by :func:`autograder.sandbox.probe.probe`)."""

    bubblewrap: bool
    """bwrap runs: private mount/pid/ipc/net namespaces with only system, Python and course code visible."""
    cgroup: CgroupVersion | None
    """The hierarchy in which memory+pids cgroups can be created; None when none can."""
    drop_uid: bool
    """Learner code runs as a fresh unprivileged uid (needs root to switch, and a Python that uid can run)."""
    network: Network
    """How learner code is kept off the network."""
    disk: DiskCap = DiskCap.WATCHDOG
    """How the notebook's writes are capped."""
    warnings: tuple[str, ...] = field(default=())
    """What is missing here and what is used instead, to show the instructor."""
    kernels: KernelStart = KernelStart.EXEC
    """How kernels start (the same isolation either way)."""

    def missing(self) -> tuple[str, ...]:
        """The pieces of the minimum this machine lacks, each with how to get it; () when it has them all."""
        lacks = []
        if not self.bubblewrap:
            lacks.append(HOW["namespaces"])
        if not self.drop_uid:
            lacks.append(HOW["uid"])
        if self.cgroup is None:
            lacks.append(HOW["cgroup"])
        return tuple(lacks)

    def summary(self) -> str:
        parts = [
            "bubblewrap namespaces" if self.bubblewrap else "no bubblewrap",
            f"cgroup {self.cgroup} memory+pids" if self.cgroup else "rlimits only (no cgroup)",
            "throwaway uid" if self.drop_uid else "same uid as the grader",
            {Network.BUBBLEWRAP: "no network", Network.UNSHARE: "no network (unshare)",
             Network.NONE: "NETWORK REACHABLE"}[Network(self.network)],
            "disk capped (tmpfs)" if self.disk == DiskCap.TMPFS else "disk watched (no tmpfs cap)",
        ]
        if self.kernels == KernelStart.FORK:
            parts.append("kernels forked from a pre-imported server into the same isolation")
        if self.missing():
            parts.append("BELOW THE MINIMUM (--insecure)")
        return ", ".join(parts)
