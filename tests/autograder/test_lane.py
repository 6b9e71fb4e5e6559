"""The grader's lane (tests/lanes.py): under ``make test`` its worker keeps the priority it was started with, and no
library test runs in it (one that did would have lowered it: the failure seen when xdist's own groups broke and both
workers took tests of both lanes), so the grader's tests see the machine they would see alone."""

from __future__ import annotations

import os

import lanes


def test_the_graders_worker_is_not_lowered():
    assert not lanes._lowered
    assert os.nice(0) < lanes.LIBRARY_NICE
