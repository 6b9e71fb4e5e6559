"""Lanes for ``make test`` (pytest-xdist, ``-n 3 --dist loadgroup``): tests of one kind, run in order by one worker.

The suite has five kinds of test, each a lane (:func:`lane_of`, by the test's file):

- ``classes``: the grader's runs over a whole class (the hostile class, the batch runner, Dask, Gradescope, the
  example class, three public nbgrader courses): tests/autograder/ files in :data:`CLASSES`;
- ``grader``: the rest of tests/autograder/;
- ``lesson``: tests/lesson/ but the browser (stock nbgrader's class, the notebooks run headless);
- ``browser``: tests/lesson/test_browser.py (JupyterLab in Chromium);
- ``library``: everything else (tests/course_lib/ and the suite's own checks in tests/).

A worker runs one unit of the plan for its worker count (:data:`PLANS`), the unit's lanes one after the other, each in
the order a single process runs them. Three workers on two cores, because the grader's tests wait about half their
time (on kernels, nbgrader, wall-clock limits; a per-test CPU record: 284 s of CPU in 574 s of wall): with two
workers (the grader's tests in one, the library's and then the lesson's in the other) the suite took 553-558 s of
pytest; with three, 502-530 s (benchmarks/results/suite-time.md). Several of the grader's tests load the machine on
purpose (CPU hogs, floods) and check that a verdict does not change on a busy machine; the grader's limits are CPU
seconds, and the suite's own guards bound CPU time (conftest.guarded) or are hang guards (conftest.HANG_S).

Every worker runs in a session of its own (``os.setsid`` before its first test), so that where the kernel groups
processes by session (sched(7), "The autogroup feature": on here) each lane weighs as much as another, however many
processes it has, as the kernels the grader starts each do (jupyter_client starts a kernel in a new session).

The units are xdist's own scope distribution with the scope read from the test's file (not an ``xdist_group`` mark:
xdist 3.8 groups by a suffix it writes into ``item._nodeid``, which pytest 9.2 no longer reads, so every test became
a group of its own and both workers ran the grader's tests side by side). Without xdist (a plain ``pytest``) only the
order changes: :data:`FIRST` first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLASSES, GRADER, LESSON, BROWSER, LIBRARY = "classes", "grader", "lesson", "browser", "library"
LANES = (CLASSES, GRADER, LESSON, BROWSER, LIBRARY)
#: The grader's whole-class runs (tests/autograder/): one lane, beside the rest of the grader's tests. They share the
#: example class's session fixture (conftest.example_class_local), built once in their worker.
CLASSES_FILES = frozenset({"test_hardening.py", "test_autograde.py", "test_distributed.py", "test_examples.py",
                           "test_export.py", "test_gradescope.py", "test_real_courses.py"})
#: Each worker count's units: the lanes each worker runs, in order. Three workers at b963885 ended 512, 513 and 518 s
#: after their start (classes; grader + lesson; library + browser). Another count: each lane a unit of its own.
PLANS = {
    2: ((CLASSES, GRADER), (LIBRARY, LESSON, BROWSER)),
    3: ((CLASSES,), (GRADER, LESSON), (LIBRARY, BROWSER)),
}
#: Modules that fill both cores on purpose (the hostile class, then its cases under eight CPU hogs): first in their
#: lane, while the other lanes start on their lighter tests.
FIRST = ("autograder/test_hardening.py",)


def lane_of(relative: str) -> str:
    """The lane of a test by its path under tests/ (``autograder/test_x.py``, posix separators).

    >>> lane_of("autograder/test_hardening.py"), lane_of("lesson/test_browser.py"), lane_of("test_docs.py")
    ('classes', 'browser', 'library')
    """
    folder, _, rest = relative.partition("/")
    if folder == "autograder":
        return CLASSES if rest in CLASSES_FILES else GRADER
    if folder == "lesson":
        return BROWSER if rest == "test_browser.py" else LESSON
    return LIBRARY


def units(workers: int) -> tuple[tuple[str, ...], ...]:
    """The plan for ``workers`` workers: :data:`PLANS`, else each lane a unit of its own."""
    return PLANS.get(workers, tuple((name,) for name in LANES))


def unit_of(name: str, workers: int) -> tuple[str, ...]:
    """The unit (the lanes one worker runs, in order) that holds lane ``name``."""
    return next(unit for unit in units(workers) if name in unit)


def lane(item) -> str:
    """The lane of a collected test (:func:`lane_of` its file; ``library`` outside tests/)."""
    relative = _relative(item)
    return lane_of(relative) if relative else LIBRARY


def _relative(item) -> str:
    try:
        return Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return ""


def workers(config) -> int:
    """How many xdist workers run this session (0 without xdist), as a worker or the controller sees it."""
    if hasattr(config, "workerinput"):
        return int(config.workerinput["workercount"])
    return int(getattr(config.option, "numprocesses", 0) or 0) if config.pluginmanager.hasplugin("xdist") else 0


@pytest.hookimpl(trylast=True)              # after tests/prefetch.py has put the modules with a job last
def pytest_collection_modifyitems(config, items) -> None:
    """:data:`FIRST` first (its order kept), in every run; under xdist, the tests of each unit together, its lanes in
    order (xdist's scope queue keeps the order in which the scopes first appear)."""
    n = workers(config)
    if not n:
        items[:] = sorted(items, key=lambda item: _relative(item) not in FIRST)
        return
    plan = units(n)

    def key(item):
        name = lane(item)
        unit = unit_of(name, n)
        return plan.index(unit), unit.index(name), _relative(item) not in FIRST

    items[:] = sorted(items, key=key)


@pytest.hookimpl(optionalhook=True)         # a hook of xdist's: a plain pytest runs without it
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``: the plan's units as the work units, one to each worker, in order."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the units in the order they are collected: the plan's

    class LaneScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with the plan's units as the scopes (a worker gets a unit whole, in order)."""

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            name = lane_of(path[len("tests/"):] if path.startswith("tests/") else path)
            return "+".join(unit_of(name, self.numnodes))

    return LaneScheduling(config, log)


#: The lanes this worker has run tests of (under xdist).
seen: set[str] = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    """A worker takes a session of its own before its first test, and notes each test's lane."""
    if not hasattr(item.config, "workerinput"):
        return
    if not seen:
        try:
            os.setsid()          # a session of its own, so that the kernel weighs it as one lane (sched(7))
        except OSError:
            pass                 # already a session leader
    seen.add(lane(item))


def check_this_worker(config, mine: str) -> None:
    """Assert that this worker has run only lanes of ``mine``'s unit, in a session of its own (under xdist)."""
    if not hasattr(config, "workerinput"):
        return
    unit = unit_of(mine, workers(config))
    assert seen <= set(unit), f"this worker ran tests of {sorted(seen - set(unit))} beside {mine!r}'s unit {unit}"
    assert os.getsid(0) == os.getpid(), "the worker is not in a session of its own"
