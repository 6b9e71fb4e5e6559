"""course_lib.measure.loadtime and .bandwidth: the result types, by hand (the real runs are in test_measure_cli)."""

from __future__ import annotations

import pytest

from course_lib.errors import CourseInputError
from course_lib.serving.loading import ReadinessTimeline
from course_lib.measure.bandwidth import CPU_REASON, BandwidthResult, measure_bandwidth
from course_lib.measure.loadtime import PHASES, LoadTimeline, Phase


def timeline() -> LoadTimeline:
    # 2 s device init, 4 GB read in 2 s (2 GB/s), 0.5 s copy, no compile, 1.5 s warm-up: ready at 6 s.
    seconds = {"device_init": 2.0, "read_weights": 2.0, "host_to_device": 0.5, "compile": 0.0, "warm_up": 1.5}
    return LoadTimeline("hand", "cuda:0", 4 * 10**9, tuple(Phase(n, seconds[n]) for n in PHASES),
                        steady_forward_seconds=0.1)


def test_timeline_sums_and_rates_by_hand():
    t = timeline()
    assert t.total_seconds == 6.0
    assert t.read_gb_per_s == 2.0
    assert "ready after" in t.table() and "warm_up" in t.table()
    assert list(t.to_dict()["phases"]) == list(PHASES)


def test_measured_timeline_speaks_the_loading_models_type():
    tl = timeline().as_readiness_timeline()
    assert isinstance(tl, ReadinessTimeline)
    assert [p.name for p in tl.phases] == ["device init", "read weights", "host->device copy",
                                           "compile / graph capture", "warm-up"]
    assert [(p.start_s, p.end_s) for p in tl.phases] == [(0.0, 2.0), (2.0, 4.0), (4.0, 4.5), (4.5, 4.5), (4.5, 6.0)]
    assert tl.ready_s == 6.0 and tl.storage_bytes_per_s == 2 * 10**9


def test_bandwidth_on_cpu_says_plainly_it_does_not_apply():
    r = measure_bandwidth("cpu")
    assert r.applies is False and r.reason == CPU_REASON
    assert "does not apply" in r.describe()
    with pytest.raises(CourseInputError, match="does not apply"):
        r.seconds_for(10**9)


def test_bandwidth_seconds_by_hand():
    r = BandwidthResult(applies=True, device="cuda:0", size_bytes=2**30, h2d_pageable_gb_s=10.0,
                        h2d_pinned_gb_s=25.0, d2h_pageable_gb_s=8.0, d2h_pinned_gb_s=20.0)
    assert r.seconds_for(14 * 10**9) == 0.56            # 14 GB / 25 GB/s
    assert r.seconds_for(14 * 10**9, "h2d_pageable") == 1.4
    with pytest.raises(CourseInputError, match="h2d_pinned"):
        r.seconds_for(1, "sideways")
    assert "pinned" in r.describe() and "pageable" in r.describe()
