"""Three lanes for ``make test`` (pytest-xdist, ``-n 2 --dist loadgroup``): the grader's, the lesson's, the library's.

The grader's tests (tests/autograder/) spend most of their time waiting: on kernels, nbgrader and wall-clock limits,
and several of them load the machine on purpose (CPU hogs, floods) and read what a busy machine does to a verdict.
The library's tests (tests/course_lib/ and the suite's own checks at the top of tests/) only compute. Under xdist
each lane is one work unit (:class:`LaneScheduling`): one worker runs the grader's tests in the order a single
process would, and the other runs the library's beside it at a low CPU priority (:func:`prefetch.lower_priority`:
nice 10 for its process and its session, :data:`LIBRARY_NICE`), so the library's lane takes mostly the CPU the
grader's lane leaves idle. Not the lowest (19): where the grader's lane fills both cores on purpose (the hostile class
and its CPU hogs, over a minute), a lane at 19 gets about 1.5% of a core and its subprocesses would run into their
time-outs; at 10 it gets about 10%, and the grader's tests about 90% of what they would have alone.

The library's lane ends first (about 340 s into a session whose grader's lane takes about 540 s), and its worker
then takes the lesson's lane (tests/lesson/: stock nbgrader's class, JupyterLab in Chromium), at the priority it was
started with where the machine lets a process raise its priority back (:func:`restore_priority`; root can), else at
10. These tests grade with stock nbgrader and drive a browser; none reads the grader's CPU clocks.

The lanes are xdist's own scope distribution with the scope read from the test's folder. (Not an ``xdist_group``
mark: xdist 3.8 groups by a suffix it writes into ``item._nodeid``, which pytest 9.2 no longer reads, so every test
became a group of its own and both workers ran the grader's tests side by side.)

Without xdist (a plain ``pytest``, ``make check``) nothing here does anything.
Timings: benchmarks/results/suite-time.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
GRADER, LESSON, LIBRARY = "grader", "lesson", "library"
#: The folders of the grader's and the lesson's lanes; every other test is the library's.
FOLDERS = {"autograder": GRADER, "lesson": LESSON}
#: The library lane's nice value (and its session's).
LIBRARY_NICE = 10
#: Modules that fill both cores on purpose (the hostile class, then its cases under eight CPU hogs): they go first in
#: their lane, beside the library's lane at nice 10, not later beside the lesson's at nice 0 (there, at 361-484 s of a
#: session, they took 123 s instead of 77).
FIRST = ("autograder/test_hardening.py",)
#: The lanes a worker runs once it has begun one (the library's worker takes the lesson's next): its background
#: runner starts on all of their jobs at once (tests/prefetch.py), so the lesson's are done before the lesson starts.
RUNS_NEXT = {LIBRARY: (LIBRARY, LESSON), GRADER: (GRADER,), LESSON: (LESSON,)}


def lane_of(relative: str) -> str:
    """The lane of a test by its path under tests/ (``autograder/test_x.py``, posix separators)."""
    return FOLDERS.get(relative.split("/", 1)[0], LIBRARY)


def lane(item) -> str:
    """The lane of a collected test: ``grader`` under tests/autograder/, ``lesson`` under tests/lesson/, else
    ``library``."""
    relative = _relative(item)
    return lane_of(relative) if relative else LIBRARY


def _relative(item) -> str:
    try:
        return Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return ""


@pytest.hookimpl(trylast=True)              # after tests/prefetch.py has put the modules with a job last
def pytest_collection_modifyitems(config, items) -> None:
    """:data:`FIRST` first (its order kept), in every run: the same order in one process as in the lanes."""
    items[:] = sorted(items, key=lambda item: _relative(item) not in FIRST)


@pytest.hookimpl(optionalhook=True)         # a hook of xdist's: a plain pytest runs without it
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``: the lanes as the work units (xdist hands the largest out first, one to each
    worker, and the next to the first worker left with two tests or fewer)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with the lanes as the scopes (a worker gets a lane whole, in order)."""

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return lane_of(path[len("tests/"):] if path.startswith("tests/") else path)

    return LaneScheduling(config, log)


_lowered = False


def restore_priority() -> bool:
    """Nice 0 again for this process and its session, where the machine allows it (raising a priority needs
    CAP_SYS_NICE: root has it); True when it did."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
        Path("/proc/self/autogroup").write_text("0")
    except OSError:
        return False
    return os.nice(0) == 0


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    """The worker that runs the library's lane lowers its priority before its first test, and raises it again, where
    it may, before a test of another lane."""
    global _lowered
    if not hasattr(item.config, "workerinput"):
        return
    if lane(item) == LIBRARY and not _lowered:
        from prefetch import lower_priority

        try:
            os.setsid()          # a session of its own, so that its priority is its own (sched(7), autogroups)
        except OSError:
            pass                 # already a session leader
        lower_priority(LIBRARY_NICE)
        _lowered = True
    elif lane(item) != LIBRARY and _lowered and os.nice(0) != 0:
        restore_priority()
