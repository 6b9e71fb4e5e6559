"""Learner processes a grader left behind, told apart from those of a grader still at work beside.

While one test checks that an interrupted or finished batch left no learner process, another grader
may be at work on the same machine (a second test process, as pytest-xdist would run, or another
suite): its kernels run as throwaway uids too. Each kernel lives in a cgroup the grader named after the process that made it
(``course-grade-<pid>-<8 chars>``, autograder/sandbox/box.py). A process is a leftover if that
process is gone or is this one (its batch is over when the check runs), or if it is in no cgroup of
ours at all. This checkout's sandboxes only: their program or PATH is this venv's.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import psutil

_MADE_BY = re.compile(r"course-grade-(\d+)-[a-z0-9_]{8}")


def _made_by(pid: int) -> int | None:
    try:
        match = _MADE_BY.search(Path(f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return None
    return int(match.group(1)) if match else None


def is_sandbox_process(info: dict) -> bool:
    """A learner process (a throwaway uid) of this checkout's sandboxes, from psutil's ``uids``,
    ``cmdline`` and ``environ``."""
    ours = str(Path(sys.executable).parent)
    return bool(info["uids"]) and info["uids"].real >= 1_000_000 and (
        (info["cmdline"] or [""])[0].startswith(ours) or (info["environ"] or {}).get("PATH", "").startswith(ours))


def leftover_sandbox_processes() -> list[int]:
    """Pids of this checkout's learner processes whose grader is gone (or is this process)."""
    found = []
    for p in psutil.process_iter(["pid", "uids", "cmdline", "environ"]):
        info = p.info
        if not is_sandbox_process(info):
            continue
        maker = _made_by(info["pid"])
        if maker is None or maker == os.getpid() or not psutil.pid_exists(maker):
            found.append(info["pid"])
    return found
