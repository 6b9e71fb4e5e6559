"""Two lanes for ``make test`` (pytest-xdist, ``-n 2 --dist loadgroup``): the grader's and the library's.

The grader's tests (tests/autograder/, tests/lesson/) spend most of their time waiting: on kernels, browsers,
nbgrader and wall-clock limits, and several of them load the machine on purpose (CPU hogs, floods) and read what a
busy machine does to a verdict. The library's tests (tests/course_lib/ and the suite's own checks at the top of
tests/) only compute. Under xdist each lane is one work unit (an ``xdist_group``), so one worker runs the grader's
tests in the order a single process would, and the other runs the library's beside it at a low CPU priority
(:func:`prefetch.lower_priority`: nice 10 for its process and its session, :data:`LIBRARY_NICE`), so the library's
lane takes mostly the CPU the grader's lane leaves idle. Not the lowest (19): where the grader's lane fills both cores
on purpose (the hostile class and its CPU hogs, over a minute), a lane at 19 gets about 1.5% of a core and its
subprocesses would run into their time-outs; at 10 it gets about 10%, and the grader's tests about 90% of what they
would have alone.

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


def lane(item) -> str:
    """The lane of a collected test: ``grader`` under tests/autograder/ or tests/lesson/, else ``library``."""
    try:
        parts = Path(str(item.fspath)).resolve().relative_to(TESTS).parts
    except ValueError:
        return LIBRARY
    return GRADER if parts and parts[0] in GRADER_FOLDERS else LIBRARY


def distributed(config) -> bool:
    """True where this run is split over xdist workers (in the controller and in each worker)."""
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    if distributed(config):
        for item in items:
            item.add_marker(pytest.mark.xdist_group(lane(item)))


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
