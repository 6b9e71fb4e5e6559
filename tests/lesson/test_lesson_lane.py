"""The lesson's lane (tests/lanes.py): under ``make test`` it runs in the worker of its unit (with three workers, after
the grader's lane; with two, after the library's), in a session of its own."""

from __future__ import annotations

import lanes


def test_the_lesson_runs_only_beside_its_units_lanes(request):
    lanes.check_this_worker(request.config, lanes.LESSON)
