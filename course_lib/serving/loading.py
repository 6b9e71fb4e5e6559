"""Loading and warm-up: how long until a new replica can serve, and a rollout that waits for it.

A replica is ready only after every phase below has run; its process
starting is the first moment, not the last:

===============  ==========================================================
phase            duration
===============  ==========================================================
device init      CUDA context and runtime start-up (an assumed constant)
read weights     weights_bytes / storage read rate (presets below)
host->device     weights_bytes / (link rate x efficiency), see :mod:`course_lib.serving.offload`
compile          torch.compile / CUDA-graph capture (an assumed constant; 0 in eager mode)
warm-up          first dummy batches, memory profiling (an assumed constant)
===============  ==========================================================

Storage presets are typical sequential-read rates, not measurements: a local
NVMe SSD is rated at 3-7 GB/s, a network block volume at 0.25-1 GB/s, and a
file already in the host's page cache reads at memory-copy speed. The fixed
phases' defaults are assumptions too; time your own and pass them in.

Worked by hand: 16 GB of weights from a 3 GB/s NVMe take 16 / 3 = 5.333 s,
the copy over PCIe Gen4 x16 at 80% takes 16 / 25.2 = 0.635 s; with 5 s of
device init, 30 s of compile and 10 s of warm-up the replica is ready at
5 + 5.333 + 0.635 + 30 + 10 = 50.968 s. From a 0.25 GB/s network disk the
read alone takes 64 s.

>>> tl = readiness_timeline(16 * GB)
>>> [(p.name, round(p.seconds, 3)) for p in tl.phases]
[('device init', 5.0), ('read weights', 5.333), ('host->device copy', 0.635), ('compile / graph capture', 30.0), ('warm-up', 10.0)]
>>> round(tl.ready_s, 3)
50.968
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..bounds import MAX_REPLICAS, MAX_SECONDS, check_int, check_number
from ..errors import CourseInputError, check_count
from .offload import DEFAULT_EFFICIENCY, DEFAULT_LINK, Link, get_link, transfer_seconds
from ..units import GB, parse_bytes, parse_rate

#: Typical sequential read rates, bytes/s (typical figures, not measured here).
STORAGE_BYTES_PER_S: dict[str, int] = {
    "nvme": 3 * GB,                # a local NVMe SSD, low end of the 3-7 GB/s rated range
    "nvme-gen4": 7 * GB,           # a fast PCIe 4.0 NVMe SSD's rated sequential read
    "network-disk": GB // 4,       # a standard cloud network block volume, ~250 MB/s
    "network-disk-fast": 1 * GB,   # a provisioned-throughput network volume, ~1 GB/s
    "page-cache": 10 * GB,         # weights already in host RAM from an earlier load: a memory copy
}
DEFAULT_STORAGE = "nvme"
#: Assumed fixed phases, seconds (typical orders of magnitude; measure yours).
DEFAULT_DEVICE_INIT_S = 5.0     # CUDA context, NCCL, runtime start-up: ~1-10 s
DEFAULT_COMPILE_S = 30.0        # torch.compile + CUDA-graph capture: tens of seconds (0 in eager mode)
DEFAULT_WARMUP_S = 10.0         # dummy batches and memory profiling before taking traffic


@dataclass(frozen=True)
class Phase:
    """One phase of start-up: name, start_s and end_s (seconds after process start), and a note."""

    name: str
    start_s: float
    end_s: float
    note: str = ""

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class ReadinessTimeline:
    """A replica's start-up: phases from process start (t = 0) to ready.

    weights_bytes: bytes read and copied. storage / link: where from and over what.
    ready_s: when the last phase ends; before that the replica serves nothing.
    """

    weights_bytes: int
    storage: str
    storage_bytes_per_s: int
    link: str
    efficiency: float
    phases: tuple[Phase, ...]

    @property
    def ready_s(self) -> float:
        return max(p.end_s for p in self.phases)

    def to_dict(self) -> dict[str, Any]:
        return {"weights_bytes": self.weights_bytes, "storage": self.storage,
                "storage_bytes_per_s": self.storage_bytes_per_s, "link": self.link, "efficiency": self.efficiency,
                "phases": [dict(asdict(p), seconds=p.seconds) for p in self.phases], "ready_s": self.ready_s}


def _seconds(name: str, value: float, most: float = MAX_SECONDS) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise CourseInputError(f"{name}={value!r} is not a duration; give seconds >= 0")
    return check_number(name, value, 0, most)


def storage_rate(storage: str | int) -> tuple[str, int]:
    """(name, bytes/s) for a storage preset or a rate such as "2GB" (per second).

    >>> storage_rate("network-disk")
    ('network-disk', 250000000)
    """
    if isinstance(storage, str) and storage.strip().lower() in STORAGE_BYTES_PER_S:
        key = storage.strip().lower()
        return key, STORAGE_BYTES_PER_S[key]
    rate = parse_rate(storage, name="storage", presets=STORAGE_BYTES_PER_S, kind="read rate", example="2GB")
    return f"{rate / GB:g} GB/s", rate


def readiness_timeline(weights_bytes: int | str, *, storage: str | int = DEFAULT_STORAGE,
                       link: str | Link | int = DEFAULT_LINK, efficiency: float = DEFAULT_EFFICIENCY,
                       device_init_s: float = DEFAULT_DEVICE_INIT_S, compile_s: float = DEFAULT_COMPILE_S,
                       warmup_s: float = DEFAULT_WARMUP_S, overlap_copy: bool = False) -> ReadinessTimeline:
    """The phases from process start to ready, one after another (see the module docstring).

    ``overlap_copy=True`` streams each tensor to the device while the next is
    read, so the copy runs alongside the read and the pair takes the longer
    of the two instead of their sum.

    >>> tl = readiness_timeline("16GB", storage="network-disk", compile_s=0, warmup_s=0)
    >>> round(tl.ready_s, 3)              # 5 + 16 / 0.25 + 16 / 25.2
    69.635
    >>> round(readiness_timeline("16GB", overlap_copy=True).ready_s, 3)   # the copy hides under the read
    50.333
    """
    size = parse_bytes(weights_bytes, name="weights")
    store, rate = storage_rate(storage)
    ln = get_link(link)
    init = _seconds("device_init_s", device_init_s)
    read = size / rate
    copy = transfer_seconds(size, ln, efficiency)
    t = init
    phases = [Phase("device init", 0.0, init, "CUDA context and runtime start-up (assumed)")]
    phases.append(Phase("read weights", t, t + read, f"{size / GB:.2f} GB at {rate / GB:g} GB/s ({store})"))
    copy_start = t if overlap_copy else t + read
    phases.append(Phase("host->device copy", copy_start, copy_start + copy,
                        f"{size / GB:.2f} GB over {ln.name} at {efficiency:.0%} of {ln.bytes_per_s / GB:g} GB/s"))
    t = max(t + read, copy_start + copy)
    for name, secs, note in (("compile / graph capture", _seconds("compile_s", compile_s),
                              "torch.compile / CUDA graphs (assumed)"),
                             ("warm-up", _seconds("warmup_s", warmup_s), "dummy batches, memory profiling (assumed)")):
        phases.append(Phase(name, t, t + secs, note))
        t += secs
    return ReadinessTimeline(size, store, rate, ln.name, efficiency, tuple(phases))


@dataclass(frozen=True)
class RolloutPlan:
    """Replacing ``replicas`` replicas, ``max_unavailable`` at a time.

    Each wave takes its old replicas out of service (they drain for
    ``drain_s``, taking no new work), then starts their replacements, which
    count only once ready, ``replica_ready_s`` after their process starts.
    The next wave begins when this one is ready.

    times_s / capacity: a step function; from ``times_s[i]`` on, ``capacity[i]``
        replicas serve. It starts at (0, replicas) and ends at (total_s, replicas).
    process_starts_s / ready_s: when each wave's new processes start and become ready.
    min_capacity: the fewest replicas serving at any time.
    naive_times_s / naive_capacity: the same rollout counted the wrong way, a
        replica serving from its process start: it hides almost all the loss.
    replica_seconds_lost: sum over waves of replicas out x time out (area under N minus capacity).
    """

    replicas: int
    max_unavailable: int
    replica_ready_s: float
    drain_s: float
    times_s: tuple[float, ...]
    capacity: tuple[int, ...]
    process_starts_s: tuple[float, ...]
    ready_s: tuple[float, ...]
    total_s: float
    min_capacity: int
    replica_seconds_lost: float
    naive_times_s: tuple[float, ...] = ()
    naive_capacity: tuple[int, ...] = ()

    def capacity_at(self, t_s: float) -> int:
        """Replicas serving at time ``t_s`` (the step function's value; ready counts from its instant)."""
        value = self.capacity[0]
        for when, cap in zip(self.times_s, self.capacity):
            if when <= t_s:
                value = cap
        return value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rollout_plan(replicas: int, replica_ready_s: float, *, max_unavailable: int = 1,
                 drain_s: float = 0.0) -> RolloutPlan:
    """Plan a rolling replacement; capacity counts a new replica only once it is ready.

    Worked by hand: 4 replicas, one at a time, 50 s to ready, 10 s drain. Each
    wave takes 10 + 50 = 60 s with 3 of 4 serving, so the rollout takes
    4 x 60 = 240 s and loses 4 x 60 = 240 replica-seconds of capacity.

    >>> plan = rollout_plan(4, 50.0, drain_s=10.0)
    >>> plan.total_s, plan.min_capacity, plan.replica_seconds_lost
    (240.0, 3, 240.0)
    >>> plan.process_starts_s[:2], plan.ready_s[:2]
    ((10.0, 70.0), (60.0, 120.0))
    >>> plan.capacity_at(239.9), plan.capacity_at(240.0)  # each ready replica is followed at once by the next wave
    (3, 4)
    >>> one = rollout_plan(1, 50.0, drain_s=10.0)       # its process starts at 10 s but it serves from 60 s
    >>> one.capacity_at(10.0), one.capacity_at(59.9), one.capacity_at(60.0)
    (0, 0, 1)
    """
    n = check_int("replicas", replicas, 1, MAX_REPLICAS)
    k = check_count("max_unavailable", max_unavailable, 1)
    ready = _seconds("replica_ready_s", replica_ready_s, float("inf"))   # derived: reading 1 PB at 1 kB/s is 10^12 s
    drain = _seconds("drain_s", drain_s)
    if k > n:
        raise CourseInputError(f"max_unavailable={k} exceeds replicas={n}; use 1..{n}")
    times, caps, starts, readies = [0.0], [n], [], []
    naive_t, naive_c = [0.0], [n]
    t, lost, left = 0.0, 0.0, n
    while left:
        out = min(k, left)
        start, done = t + drain, t + drain + ready
        times += [t, done]
        caps += [n - out, n]
        naive_t += [t, start]
        naive_c += [n - out, n]
        starts.append(start)
        readies.append(done)
        t = done
        lost += out * (drain + ready)
        left -= out
    times, caps = _merge(times, caps)
    naive_t, naive_c = _merge(naive_t, naive_c)
    return RolloutPlan(n, k, ready, drain, tuple(times), tuple(caps), tuple(starts), tuple(readies), t,
                       min(caps), lost, tuple(naive_t), tuple(naive_c))


def _merge(times: list[float], caps: list[int]) -> tuple[list[float], list[int]]:
    """Collapse change points at the same instant, keeping the last value (a wave ready as the next begins)."""
    out_t: list[float] = []
    out_c: list[int] = []
    for when, cap in zip(times, caps):
        if out_t and out_t[-1] == when:
            out_c[-1] = cap
        else:
            out_t.append(when)
            out_c.append(cap)
    return out_t, out_c
