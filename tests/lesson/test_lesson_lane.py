"""The lesson's lane (tests/lanes.py): under ``make test`` the worker that ran the library's lane at nice 10 takes it
next, at nice 0 again where the machine lets a process raise its priority (root may), as a single process runs it."""

from __future__ import annotations

import os

import lanes


def test_the_lesson_runs_at_the_priority_it_would_have_alone():
    if not lanes._lowered:
        assert os.nice(0) == 0                # the grader's worker, or no xdist: never lowered
    elif os.geteuid() == 0:
        assert os.nice(0) == 0                # raised back (root may)
        if os.path.exists("/proc/self/autogroup"):
            with open("/proc/self/autogroup") as fh:
                assert fh.read().split()[-1] == "0"
    else:
        assert os.nice(0) == lanes.LIBRARY_NICE
