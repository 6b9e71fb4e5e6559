"""Readiness timeline and rollout plan against hand-worked timings."""

from __future__ import annotations

import pytest

from course_lib.errors import CourseInputError
from course_lib.serving.loading import readiness_timeline, rollout_plan

GB = 10**9


def test_readiness_timeline_by_hand():
    # 16 GB from a 3 GB/s NVMe: 5.333 s; over PCIe Gen4 x16 at 80% (25.2 GB/s): 0.635 s.
    # device init 5 s, compile 30 s, warm-up 10 s: ready at 5 + 5.333 + 0.635 + 30 + 10 = 50.968 s.
    tl = readiness_timeline(16 * GB, storage="nvme", link="pcie-gen4-x16", efficiency=0.8,
                            device_init_s=5, compile_s=30, warmup_s=10)
    names = [p.name for p in tl.phases]
    assert names == ["device init", "read weights", "host->device copy", "compile / graph capture", "warm-up"]
    secs = [p.seconds for p in tl.phases]
    assert secs == pytest.approx([5.0, 16 / 3, 16 / 25.2, 30.0, 10.0])
    assert tl.ready_s == pytest.approx(5 + 16 / 3 + 16 / 25.2 + 30 + 10)
    # phases follow one another with no gaps
    for before, after in zip(tl.phases, tl.phases[1:]):
        assert after.start_s == pytest.approx(before.end_s)


def test_network_disk_dominates_and_overlap_hides_the_copy():
    # a 0.25 GB/s network volume: 16 GB take 64 s to read, more than everything else together
    slow = readiness_timeline("16GB", storage="network-disk")
    assert slow.phases[1].seconds == pytest.approx(64.0)
    assert slow.ready_s == pytest.approx(5 + 64 + 16 / 25.2 + 30 + 10)
    # overlapping the copy with the read: the pair takes max(5.333, 0.635) s, not the sum
    fast = readiness_timeline("16GB", overlap_copy=True)
    assert fast.ready_s == pytest.approx(5 + 16 / 3 + 30 + 10)
    # page cache at 10 GB/s: 1.6 s of read
    assert readiness_timeline("16GB", storage="page-cache").phases[1].seconds == pytest.approx(1.6)


def test_rollout_counts_a_replica_only_once_ready():
    # 4 replicas, 1 at a time, 50 s to ready, 10 s drain: 4 waves of 60 s = 240 s, 3 of 4 serving throughout.
    plan = rollout_plan(4, 50.0, max_unavailable=1, drain_s=10.0)
    assert plan.total_s == pytest.approx(240.0)
    assert plan.process_starts_s == pytest.approx((10.0, 70.0, 130.0, 190.0))
    assert plan.ready_s == pytest.approx((60.0, 120.0, 180.0, 240.0))
    assert plan.min_capacity == 3
    assert plan.replica_seconds_lost == pytest.approx(4 * 60.0)
    assert [plan.capacity_at(t) for t in (0, 10, 59.9, 130, 239.9, 240)] == [3, 3, 3, 3, 3, 4]
    # counting at process start would (wrongly) show all 4 serving from 10 s to 60 s
    naive = dict(zip(plan.naive_times_s, plan.naive_capacity))
    assert naive[10.0] == 4


def test_one_replica_is_down_until_ready():
    plan = rollout_plan(1, 50.0, drain_s=0.0)
    assert [plan.capacity_at(t) for t in (0, 49.9, 50)] == [0, 0, 1]


def test_two_at_a_time():
    # 5 replicas, 2 at a time: waves of 2, 2, 1 -> 3 waves x 30 s = 90 s, capacity never below 3
    plan = rollout_plan(5, 30.0, max_unavailable=2)
    assert plan.total_s == pytest.approx(90.0) and plan.min_capacity == 3
    assert plan.replica_seconds_lost == pytest.approx((2 + 2 + 1) * 30.0)


@pytest.mark.parametrize("call, words", [
    (lambda: readiness_timeline("16GB", storage="tape"), "storage='tape'"),
    (lambda: readiness_timeline("16GB", compile_s=-1), "compile_s=-1"),
    (lambda: readiness_timeline("lots"), "weights='lots'"),
    (lambda: rollout_plan(0, 10), "replicas=0"),
    (lambda: rollout_plan(2, 10, max_unavailable=3), "max_unavailable=3 exceeds replicas=2"),
    (lambda: rollout_plan(2, float("nan")), "replica_ready_s=nan"),
])
def test_bad_input_names_the_value(call, words):
    with pytest.raises(CourseInputError, match=words):
        call()
