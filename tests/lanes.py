"""Two lanes for ``make test`` (pytest-xdist, ``-n 2 --dist loadgroup``): the grader's and the library's.

The grader's tests (tests/autograder/, tests/lesson/) spend most of their time waiting: on kernels, browsers,
nbgrader and wall-clock limits, and several of them load the machine on purpose (CPU hogs, floods) and read what a
busy machine does to a verdict. The library's tests (tests/course_lib/ and the suite's own checks at the top of
tests/) only compute. Under xdist each lane is one work unit (:class:`LaneScheduling`), so one worker runs the
grader's tests in the order a single process would, and the other runs the library's beside it at a low CPU priority
(:func:`prefetch.lower_priority`: nice 10 for its process and its session, :data:`LIBRARY_NICE`), so the library's
lane takes mostly the CPU the grader's lane leaves idle. Not the lowest (19): where the grader's lane fills both cores
on purpose (the hostile class and its CPU hogs, over a minute), a lane at 19 gets about 1.5% of a core and its
subprocesses would run into their time-outs; at 10 it gets about 10%, and the grader's tests about 90% of what they
would have alone.

The lanes are xdist's own ``loadgroup`` distribution with the group read from the test's folder. (Not an
``xdist_group`` mark: xdist 3.8 groups by a suffix it writes into ``item._nodeid``, which pytest 9.2 no longer reads,
so every test became a group of its own and both workers ran the grader's tests side by side.)

Without xdist (a plain ``pytest``, ``make check``) nothing here does anything.
Timings: benchmarks/results/suite-time.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: The folders whose tests are the grader's lane; every other test is the library's.
GRADER_FOLDERS = ("autograder", "lesson")
GRADER, LIBRARY = "grader", "library"
#: The library lane's nice value (and its session's).
LIBRARY_NICE = 10


def lane_of(relative: str) -> str:
    """The lane of a test by its path under tests/ (``autograder/test_x.py``, posix separators)."""
    return GRADER if relative.split("/", 1)[0] in GRADER_FOLDERS else LIBRARY


def lane(item) -> str:
    """The lane of a collected test: ``grader`` under tests/autograder/ or tests/lesson/, else ``library``."""
    try:
        return lane_of(Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix())
    except ValueError:
        return LIBRARY


@pytest.hookimpl(optionalhook=True)         # a hook of xdist's: a plain pytest runs without it
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``: the two lanes as the two work units."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with two scopes, the lanes (each worker gets one, whole, in order)."""

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return lane_of(path[len("tests/"):] if path.startswith("tests/") else path)

    return LaneScheduling(config, log)


_lowered = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    """The worker that runs the library's lane lowers its priority before its first test."""
    global _lowered
    if _lowered or not hasattr(item.config, "workerinput") or lane(item) != LIBRARY:
        return
    from prefetch import lower_priority

    try:
        os.setsid()              # a session of its own, so that its priority is its own (sched(7), autogroups)
    except OSError:
        pass                     # already a session leader
    lower_priority(LIBRARY_NICE)
    _lowered = True
