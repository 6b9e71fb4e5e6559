"""The grader's lane (tests/lanes.py): under ``make test`` its worker runs no test of another unit (one that did was
the failure seen when xdist's own groups broke and every worker took tests of every lane)."""

from __future__ import annotations

import lanes


def test_the_graders_worker_runs_only_its_units_lanes(request):
    lanes.check_this_worker(request.config, lanes.GRADER)
