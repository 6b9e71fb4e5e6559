"""A deterministic, step-driven admission simulator over a request trace.

One **step** is one decode iteration of the whole batch. Within step ``t``,
in this order:

1. **Arrivals.** Requests with ``arrival_step == t`` join the back of the
   queue, in trace order. One that can never fit (see
   :func:`course_lib.serving.admission.never_fits_reason`) is rejected at once.
2. **Decode.** Every request admitted before ``t`` generates one token and
   its KV grows by one token. Under ``paged`` a token that starts a new
   block claims one; if too few blocks are free, the youngest running
   request (the most recently admitted) is preempted, again and again until
   the rest fit: its blocks are freed and it goes back to the *head* of the
   queue, keeping the tokens it generated. A preempted request does not grow
   this step.
3. **Admission.** Unless step 2 preempted anything, the head of the queue
   starts while the policy allows it (:func:`course_lib.serving.admission.can_admit`);
   the first one that does not fit stops admission for this step: first
   come, first served, with head-of-line blocking. An admitted request is
   prefilled now: its prompt (plus, after a preemption, the tokens it had
   generated: recompute) enters the KV cache. It generates nothing this step.
4. **Service policy.** New arrivals still waiting beyond ``max_queue_len``
   are rejected; a never-admitted request still queued ``max_wait_steps``
   after it arrived is rejected. Preempted requests are exempt: they were
   already accepted.
5. **Record** the step: blocks in use, KV bytes, tokens held, running
   (``active``) and waiting (``queued``) requests.
6. **Finish.** A request that generated its last token this step finishes;
   its blocks are freed at the end of the step, for admissions at ``t + 1``.

So a request admitted at step ``a`` that is never preempted finishes at
``a + output_tokens``: prefill at ``a``, one token at each of ``a + 1 ...
a + output_tokens``. At step ``a + k`` it holds ``prompt + k`` tokens.

How the code follows these rules: :class:`_Simulation` holds the state between
steps (the cache's block counts, the running set, the queue, the per-step
series) and has one method per phase: :meth:`~_Simulation.arrive`,
:meth:`~_Simulation.decode`, :meth:`~_Simulation.admit`,
:meth:`~_Simulation.apply_service_policy`, :meth:`~_Simulation.record` and
:meth:`~_Simulation.finish`. Most steps have no event at all (no arrival, no
finish, nothing to admit, reject or preempt): only phases 2 and 5 have work,
and it is the same every step, so :meth:`~_Simulation.quiet_steps` does those
two for a whole stretch of such steps at once, as running sums. Block claims
are counted by the step at which each request's next block falls due (``t
mod block_size``), never by looping over running requests: the work in
Python grows with the events, and the steps between them only extend the
per-step series.

The ``vllm-v1`` policy (vLLM V1's scheduler, read from vLLM 0.32.0) runs its own step instead:
a token budget per step, chunked prefill, a waiting request admitted only if its whole prompt
fits, recompute preemption of the newest running request; one step is one engine step and a
prefill's last chunk samples the first output token (see :class:`_V1Simulation`). On the issue's
case, 12 requests of 600 + 400 tokens on 48 blocks of 128 tokens with 4,096 tokens a step,
vLLM's own counter says 4 preemptions:

>>> from course_lib.runtimes.vllm.scheduler import vllm_v1_config
>>> v1 = vllm_v1_config(kv_cache_memory_bytes=12 * 2**20, kv_bytes_per_token=2048, platform="cpu",
...                     entrypoint="llm", max_model_len=1024)
>>> s = simulate([Request(f"r{i}", 0, 600, 400, 400) for i in range(12)], v1).summary
>>> s.preemptions, s.max_running, s.steps
(4, 9, 800)

 requests of
608 + 512 = 1,120 tokens = 70 blocks, all arriving at step 0): ten take 700
blocks at step 0, the eleventh needs 70 but 15 are free, so it is *queued*.
The ten finish at step 0 + 512 = 512; at step 513 the eleventh starts, and
finishes at 513 + 512 = 1025.

>>> from course_lib.serving.admission import AdmissionConfig
>>> from course_lib.serving.trace import Request
>>> cfg = AdmissionConfig(kv_budget_bytes=6 * 10**9, kv_bytes_per_token=524_288)
>>> trace = [Request(f"r{i}", 0, 608, 512, 512) for i in range(11)]
>>> res = simulate(trace, cfg)
>>> last = res.requests[-1]
>>> last.status, last.admitted_step, last.finished_step, last.queued_steps
('finished', 513, 1025, 513)
>>> res.summary.max_active, res.summary.peak_kv_bytes          # 10 x 70 blocks x 8 MiB
(10, 5872025600)
"""

from __future__ import annotations

import gc
import heapq
import math
from bisect import bisect_right
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from itertools import accumulate, cycle, islice
from typing import Any, Iterable, Iterator, Sequence

from ..serving.admission import (PAGED, VLLM_V1, AdmissionConfig, admission_blocks, admit_reason,
                        blocked_reason, can_admit, cdiv,
                        lifetime_blocks, never_fits_reason,
                        queue_full_reason, usable_blocks, wait_expired_reason)
from ..errors import CourseInputError
from ..serving.trace import Request, check_unique_ids

FINISHED, REJECTED = "finished", "rejected"
#: Why a request was rejected (counted in the summary's ``rejected_*`` fields).
NEVER_FITS, QUEUE_FULL, WAITED_TOO_LONG = "never_fits", "queue_full", "wait"
#: The per-step series keep one value per step, so arrivals must start within this many steps.
MAX_ARRIVAL_STEP = 10_000_000


@dataclass(frozen=True)
class RequestRecord:
    """How one request went.

    id: the request's id from the trace.
    status: "finished" or "rejected".
    reason: in words, why it was admitted, queued, preempted or rejected.
    arrival_step: when it arrived.
    admitted_step: the step of its first admission (None if rejected).
    finished_step: the step it generated its last token (None if rejected).
    queued_steps: steps between arrival and first admission (or rejection).
    preemptions: how many times it was preempted by recompute (paged only).
    """

    id: str | int
    status: str
    reason: str
    arrival_step: int
    admitted_step: int | None
    finished_step: int | None
    queued_steps: int
    preemptions: int

    def to_dict(self) -> dict[str, Any]:
        """The fields, in order, as a plain dict (the JSON's keys; all values are already plain)."""
        return {"id": self.id, "status": self.status, "reason": self.reason, "arrival_step": self.arrival_step,
                "admitted_step": self.admitted_step, "finished_step": self.finished_step,
                "queued_steps": self.queued_steps, "preemptions": self.preemptions}


@dataclass(frozen=True)
class Summary:
    """Figures of a whole run. Shares are fractions in [0, 1]; delays are in steps.

    policy: "reserve-max" or "paged".
    requests / completed / rejected: counts; rejected_never_fits,
        rejected_queue_full, rejected_wait split the rejections by reason.
    preemptions: preemptions by recompute, all requests together.
    recompute_tokens: prompt + generated tokens prefilled again after preemptions.
    steps: how many steps were simulated, a count (the per-step series
        themselves are :attr:`SimulationResult.series`; every one holds this
        many values). The JSON keeps both names: ``summary.steps`` is this
        count, the top-level ``steps`` holds the series.
    peak_kv_bytes: the most KV memory allocated (reserved or claimed) at any step.
    peak_token_bytes: the most KV memory holding actual tokens at any step.
    kv_budget_bytes: the safe KV budget (device - fixed pools); peak_kv_bytes never exceeds it.
    kv_capacity_bytes: num_blocks x block_bytes, the whole-block part of the budget.
    num_blocks, block_size_tokens, kv_bytes_per_token: the cache's shape.
    max_active / mean_active: running requests, at most and on average over steps.
    max_running: max_active under vLLM's name: the most requests in its ``Scheduler.running``
        after a step's scheduling (what ``simulate --runtime vllm`` is checked on).
    max_queued: the longest the queue got.
    kv_utilization: share of allocated KV holding tokens, over the run:
        sum over steps of token bytes / sum over steps of allocated bytes.
    internal_fragmentation: share of allocated KV that is the empty tail of
        blocks already holding tokens (at most block_size_tokens - 1 slots each).
    reserved_unused: share of allocated KV in blocks not yet holding any token:
        reserve-max's reservation for tokens not generated yet, or never (0 for paged).
        kv_utilization + internal_fragmentation + reserved_unused = 1.
    p50_queue_steps / p99_queue_steps / mean_queue_steps: queueing delay of
        finished requests, arrival to first admission (nearest-rank percentiles).
    """

    policy: str
    requests: int
    completed: int
    rejected: int
    rejected_never_fits: int
    rejected_queue_full: int
    rejected_wait: int
    preemptions: int
    recompute_tokens: int
    steps: int
    peak_kv_bytes: int
    peak_token_bytes: int
    kv_budget_bytes: int
    kv_capacity_bytes: int
    num_blocks: int
    block_size_tokens: int
    kv_bytes_per_token: int
    max_active: int
    max_running: int
    mean_active: float
    max_queued: int
    kv_utilization: float | None
    internal_fragmentation: float | None
    reserved_unused: float | None
    p50_queue_steps: int | None
    p99_queue_steps: int | None
    mean_queue_steps: float | None

    def to_dict(self) -> dict[str, Any]:
        """The fields, in order, as a plain dict (the JSON's keys)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class SimulationResult:
    """A run: the config, one record per request (trace order), the per-step series, the summary.

    The series are columns indexed by step: ``blocks_used[t]`` blocks
    allocated, ``token_counts[t]`` tokens held in them, ``active[t]`` running
    and ``queued[t]`` waiting requests at step ``t``. Each holds
    ``summary.steps`` values.
    """

    config: AdmissionConfig
    requests: tuple[RequestRecord, ...]
    blocks_used: tuple[int, ...]
    token_counts: tuple[int, ...]
    active: tuple[int, ...]
    queued: tuple[int, ...]
    summary: Summary

    @property
    def series(self) -> dict[str, list[int]]:
        """The per-step series as columns, the JSON's top-level ``steps``.

        Bytes are ints: ``kv_bytes`` = blocks_used x block_bytes, ``token_bytes``
        = token_counts x kv_bytes_per_token.
        """
        bb, bt = self.config.block_bytes, self.config.kv_bytes_per_token
        return {"kv_bytes": [b * bb for b in self.blocks_used],
                "token_bytes": [n * bt for n in self.token_counts],
                "blocks_used": list(self.blocks_used),
                "active": list(self.active),
                "queued": list(self.queued)}

    @property
    def steps(self) -> dict[str, list[int]]:
        """The same columns as :attr:`series`, under the JSON's name for them (not a count: see ``summary.steps``)."""
        return self.series

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: top-level keys ``requests``, ``steps`` (the series) and ``summary`` (config inside it)."""
        summary = self.summary.to_dict()
        summary["config"] = self.config.to_dict()
        return {"requests": [r.to_dict() for r in self.requests], "steps": self.series, "summary": summary}


def percentile_nearest_rank(values: Sequence[int], pct: float) -> int | None:
    """The nearest-rank percentile: sorted ``v[ceil(pct / 100 x n) - 1]``; None for no values.

    >>> percentile_nearest_rank([5, 1, 3, 2, 4], 50), percentile_nearest_rank(range(1, 101), 99)
    (3, 99)
    """
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def simulate(requests: Iterable[Request], config: AdmissionConfig, *,
             max_steps: int | None = None) -> SimulationResult:
    """Run ``requests`` through an admission controller with ``config``; see the module docstring.

    ``max_steps``: refuse (CourseInputError) a run that would record more steps than this, before
    the steps are built; the CLI passes :data:`course_lib.bounds.MAX_SIMULATED_STEPS`. None: no bound.

    Deterministic: the same trace and config give the same result. Requests
    are taken in (arrival_step, trace order). The work grows with the events
    (arrivals, admissions, finishes, preemptions), not with the requests
    running; the steps between events only extend the per-step series, in
    bulk (see :meth:`_Simulation.run`).
    """
    with _cyclic_gc_paused():
        if config.policy == VLLM_V1:
            return _V1Simulation(requests, config, max_steps).run()
        return _Simulation(requests, config, max_steps).run()


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause CPython's cycle collector: a run allocates a few objects per request and frees none until it ends.

    Those allocations set off collections that rescan every live object (the
    trace, the records) again and again: about a fifth of a 100,000-request
    run. The simulator makes no reference cycles, so the collector has nothing
    to find in it; reference counting still frees everything as usual.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# ------------------------------------------------------------------ the simulator's state and phases

@dataclass(eq=False, slots=True)
class _Sequence:
    """One request on its way through the simulator: its trace figures and what has happened to it so far.

    Internal and mutable; compared by identity, so it can key the running set.
    Steps are -1 until they happen.
    """

    id: str | int
    trace_index: int                # its position in the caller's trace; records come back in that order
    arrival_step: int
    prompt_tokens: int
    max_new_tokens: int
    output_tokens: int
    generated_tokens: int = 0       # generated before the current admission (> 0 only after a preemption)
    admitted_step: int = -1         # step of the current admission
    first_admitted_step: int = -1
    due_step: int = -1              # step at which the current admission generates its last token
    end_step: int = -1              # step it finished or was rejected
    status: str | None = None       # FINISHED or REJECTED once it is done
    rejection: str = ""             # NEVER_FITS, QUEUE_FULL or WAITED_TOO_LONG
    reason: str = ""                # the rejection in words, or how it was admitted on arrival
    queued_reason: str | None = None  # why it first had to wait, if it did
    preemptions: int = 0
    last_preempted_step: int = -1
    claim_phase: int = 0            # while running, it claims a block at the steps t with t % block_size == claim_phase
    reserved_blocks: int = 0        # reserve-max: blocks reserved at admission, freed when it finishes
    # vllm-v1 only (vLLM's Request fields): prompt + generated tokens, tokens whose KV is computed, blocks held,
    # full blocks cached when last preempted, and its freed blocks in the free queue (prefix caching)
    num_tokens: int = 0
    computed_tokens: int = 0
    held_blocks: int = 0
    cached_blocks: int = 0
    free_segment: list | None = None
    length_capped: bool = False


@dataclass(slots=True)
class _Series:
    """The per-step columns, one value per step: blocks allocated, blocks holding a token, tokens, running, waiting."""

    blocks_used: list[int] = field(default_factory=list)
    blocks_touched: list[int] = field(default_factory=list)
    tokens_held: list[int] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)

    def extend(self, steps: int, blocks_used: Iterable[int], blocks_touched: Iterable[int],
               tokens_held: Iterable[int], active: int, queued: int) -> None:
        """``steps`` steps' values; running and waiting counts stay the same across them."""
        self.blocks_used += blocks_used
        self.blocks_touched += blocks_touched
        self.tokens_held += tokens_held
        self.active += [active] * steps
        self.queued += [queued] * steps


def _in_arrival_order(trace: list[Request]) -> list[_Sequence]:
    """The trace as sequences sorted by (arrival_step, trace order), each knowing its place in the trace."""
    arrival_steps = [r.arrival_step for r in trace]
    order = sorted(range(len(trace)), key=arrival_steps.__getitem__)     # a stable sort: ties keep trace order
    sequences = []
    for k in order:
        r = trace[k]
        sequences.append(_Sequence(r.id, k, r.arrival_step, r.prompt_tokens, r.max_new_tokens, r.output_tokens))
    return sequences


class _Simulation:
    """The state of one run between steps, and the six phases of a step as methods.

    The cache: ``free_blocks + blocks_used == num_blocks``; ``blocks_touched``
    of the used blocks hold at least one token (the rest are reserve-max's
    reservation), and ``tokens_held`` tokens sit in them.

    The requests: ``pending`` in (arrival_step, trace order), the next to
    arrive at ``pending[next_arrival]``; ``running`` in admission order (a
    dict used as an ordered set: the last key is the youngest); the queue is
    ``resumed`` (preempted, at its head) then ``waiting`` (never admitted,
    in arrival order).

    Block claims without a loop over running requests: a running request
    holding ``h`` tokens needs a new block for token ``h + 1`` when ``h`` is a
    multiple of the block size, which falls on the steps ``t`` with ``t %
    block_size == claim_phase``. ``claims_by_phase[c]`` counts the running
    requests of each phase ``c``, so step ``t`` claims
    ``claims_by_phase[t % block_size]`` blocks.
    """

    def __init__(self, requests: Iterable[Request], config: AdmissionConfig, max_steps: int | None = None) -> None:
        trace = list(requests)
        check_unique_ids(trace)
        self.pending = _in_arrival_order(trace)
        self.max_steps = max_steps
        if max_steps is not None and self.pending and self.pending[-1].arrival_step >= max_steps:
            last = self.pending[-1]
            raise CourseInputError(f"arrival_step={last.arrival_step:,} (request {last.id!r}) is at or past step "
                                   f"{max_steps:,}, the most steps a simulation runs here; shift the arrivals "
                                   f"closer to step 0")
        if self.pending and self.pending[-1].arrival_step > MAX_ARRIVAL_STEP:
            last = self.pending[-1]
            raise CourseInputError(f"arrival_step={last.arrival_step:,} (request {last.id!r}) is beyond step "
                                   f"{MAX_ARRIVAL_STEP:,}; the per-step series hold one value per step, so shift "
                                   f"the arrivals closer to step 0")
        self.config = config
        # the config's figures, read once (the phases read them at every event)
        self.block_size = config.block_size_tokens
        self.paged = config.policy == PAGED
        self.num_blocks = config.num_blocks
        self.usable_blocks = usable_blocks(config)
        self.watermark_blocks = config.watermark_blocks
        self.max_num_seqs = config.max_num_seqs
        self.max_queue_len = config.max_queue_len
        self.max_wait_steps = config.max_wait_steps
        # the requests
        self.next_arrival = 0           # index into pending
        self.next_arrival_step = self.pending[0].arrival_step if self.pending else None
        self.running: dict[_Sequence, None] = {}
        self.resumed: deque[_Sequence] = deque()
        self.waiting: deque[_Sequence] = deque()
        self.retry_admission = True     # something happened that may let the head of the queue start
        self.finish_at: dict[int, list[_Sequence]] = {}   # step -> requests due then (stale after a preemption)
        self.finish_steps: list[int] = []                  # finish_at's keys, as a heap
        # the cache
        self.free_blocks = config.num_blocks
        self.blocks_used = 0
        self.blocks_touched = 0
        self.tokens_held = 0
        self.claims_by_phase = [0] * self.block_size
        # the totals
        self.preemptions = 0
        self.recompute_tokens = 0
        self.series = _Series()

    def run(self) -> SimulationResult:
        """Step until every request has finished or been rejected; the result.

        Most steps have no event: only phases 2 and 5 have work there, the same
        work every step, so :meth:`quiet_steps` does a whole stretch of them
        at once. At the other steps the six phases run in order; a phase with
        nothing to do is skipped.
        """
        t = 0
        while not self.drained:
            event_step = self.next_event_step(t)
            if self.max_steps is not None and event_step >= self.max_steps:   # checked before a stretch is built
                raise CourseInputError(_too_many_steps(self.max_steps, self.requests_left))
            if event_step > t:
                t = self.quiet_steps(t, event_step)
            if self.next_arrival_step == t:
                self.arrive(t)
            preempted = self.decode(t) if self.running else False
            if self.retry_admission and not preempted:
                self.admit(t)
            if self.waiting:
                self.apply_service_policy(t)
            self.record()
            if self.finish_steps and self.finish_steps[0] == t:
                self.finish(t)
            t += 1
        return self.result()

    # -------------------------------------------------- when something happens

    @property
    def requests_left(self) -> int:
        """Requests yet to arrive, running or waiting."""
        return len(self.pending) - self.next_arrival + len(self.running) + len(self.resumed) + len(self.waiting)

    @property
    def drained(self) -> bool:
        """Every request has arrived and none runs or waits: the run is over."""
        return self.next_arrival_step is None and not self.running and not self.resumed and not self.waiting

    def next_event_step(self, t: int) -> int:
        """The first step from ``t`` on at which a phase other than decode and record may have work.

        That is ``t`` itself when admission should be retried and someone
        waits; otherwise the earliest of the next arrival, the next step a
        request is due to finish, and the step the head of ``waiting`` runs
        out of ``max_wait_steps``. (A preemption is found by :meth:`quiet_steps`.)
        """
        if self.retry_admission and (self.resumed or self.waiting):
            return t
        step = self.finish_steps[0] if self.finish_steps else math.inf
        if self.next_arrival_step is not None and self.next_arrival_step < step:
            step = self.next_arrival_step
        if self.max_wait_steps is not None and self.waiting:
            step = min(step, self.waiting[0].arrival_step + self.max_wait_steps)
        assert step != math.inf, "requests wait but nothing can ever happen to them"
        return step  # type: ignore[return-value]

    def quiet_steps(self, t: int, until: int) -> int:
        """Phases 2 and 5 (decode, record) for the steps ``t .. until - 1``, where nothing else happens.

        Every running request grows by one token each step, and the block
        claims repeat with period block_size (``claims_by_phase``), so the
        series over the stretch are running sums, built at once. Under paged,
        the stretch stops early at a step whose claims would not fit (phase 2
        must preempt there). Returns the step to run in full next.
        """
        gap = until - t
        running = len(self.running)
        if running == 0:
            self.series.extend(gap, [self.blocks_used] * gap, [self.blocks_touched] * gap, [self.tokens_held] * gap,
                               0, len(self.resumed) + len(self.waiting))
            return until
        size = self.block_size
        phase = t % size
        # each running request claims at most once per block_size steps: if even that fits, no step can run out
        if self.paged and running * -(-gap // size) > self.free_blocks:
            gap = min(gap, self._steps_before_out_of_blocks(phase))
            if gap == 0:
                return t
        by_phase = self.claims_by_phase
        claims = (by_phase[phase:phase + gap] if phase + gap <= size             # the claims at t, t + 1, ...
                  else islice(cycle(by_phase[phase:] + by_phase[:phase]), gap))
        touched = list(accumulate(claims, initial=self.blocks_touched))
        del touched[0]
        claimed = touched[-1] - self.blocks_touched
        tokens = range(self.tokens_held + running, self.tokens_held + running * gap + 1, running)
        if self.paged:          # paged claims exactly the blocks that hold tokens
            used = touched
            self.blocks_used += claimed
            self.free_blocks -= claimed
        else:                   # reserve-max claimed everything at admission
            used = [self.blocks_used] * gap
        self.blocks_touched += claimed
        self.tokens_held += running * gap
        self.series.extend(gap, used, touched, tokens, running, len(self.resumed) + len(self.waiting))
        return t + gap

    def _steps_before_out_of_blocks(self, phase: int) -> int:
        """How many steps from one at ``phase`` paged can claim blocks before a step's claims exceed the free blocks.

        The claims of the next block_size steps add up to the running count
        ``R`` (each request claims once per block_size steps); let ``prefix[j]``
        be the claims of the first ``j + 1`` of them. After ``m`` whole
        periods and ``j + 1`` more steps the claims add up to ``m x R +
        prefix[j]``, so the first step at which they exceed ``free`` lies after
        ``m = free // R`` whole periods, at the first ``j`` with ``prefix[j] >
        free % R``. By hand: 11 requests that claim at the same step of every
        16, with 297 blocks free: 297 // 11 = 27 periods, 297 % 11 = 0, j = 0,
        so 27 x 16 = 432 steps fit and the next one must preempt.
        """
        prefix = list(accumulate(self.claims_by_phase[phase:] + self.claims_by_phase[:phase]))
        periods, rest = divmod(self.free_blocks, prefix[-1])
        return periods * self.block_size + bisect_right(prefix, rest)

    # -------------------------------------------------- the six phases of a step

    def arrive(self, t: int) -> None:
        """Phase 1: this step's arrivals join the back of the queue in trace order, or are rejected if they never fit."""
        pending = self.pending
        while self.next_arrival < len(pending) and pending[self.next_arrival].arrival_step == t:
            seq = pending[self.next_arrival]
            self.next_arrival += 1
            if lifetime_blocks(self.config, seq.prompt_tokens, seq.max_new_tokens) > self.usable_blocks:
                self._reject(seq, t, NEVER_FITS,
                             never_fits_reason(self.config, seq.prompt_tokens, seq.max_new_tokens) or "")
            else:
                self.waiting.append(seq)
                self.retry_admission = True
        self.next_arrival_step = pending[self.next_arrival].arrival_step if self.next_arrival < len(pending) else None

    def decode(self, t: int) -> bool:
        """Phase 2: every running request grows by one token; paged claims the blocks that fall due.

        If too few blocks are free for this step's claims, the youngest running
        request is preempted, again and again until the rest fit. Returns
        whether anything was preempted (then phase 3 admits nothing this step).
        """
        if not self.running:
            return False
        phase = t % self.block_size
        preempted = False
        if self.paged and self.claims_by_phase[phase] > self.free_blocks:
            while self.claims_by_phase[phase] > self.free_blocks:
                self._preempt_youngest(t)
            preempted = True
            self.retry_admission = True
        claimed = self.claims_by_phase[phase]
        self.tokens_held += len(self.running)
        self.blocks_touched += claimed
        if self.paged:
            self.blocks_used += claimed
            self.free_blocks -= claimed
        return preempted

    def admit(self, t: int) -> None:
        """Phase 3: start the head of the queue while the policy allows it (FCFS, head-of-line blocking).

        The first request that cannot start stops admission for this step; the
        first time a never-admitted request is stopped, its reason is kept.
        """
        self.retry_admission = False
        config = self.config
        running, resumed, waiting = self.running, self.resumed, self.waiting
        while resumed or waiting:
            seq = resumed[0] if resumed else waiting[0]
            start_tokens = seq.prompt_tokens + seq.generated_tokens
            need = admission_blocks(config, seq.prompt_tokens, seq.max_new_tokens, seq.generated_tokens)
            if not can_admit(config, need, self.free_blocks, len(running)):
                if seq.queued_reason is None and seq.first_admitted_step < 0:
                    seq.queued_reason = f"queued at step {t}: " + blocked_reason(
                        config, seq.prompt_tokens, seq.max_new_tokens, need, self.free_blocks, len(running),
                        seq.generated_tokens).removeprefix("queue: ")
                return
            if resumed:
                resumed.popleft()
                self.recompute_tokens += start_tokens
            else:
                waiting.popleft()
            if seq.first_admitted_step < 0:
                seq.first_admitted_step = t
                if seq.queued_reason is None:
                    seq.reason = admit_reason(config, seq.prompt_tokens, seq.max_new_tokens, need,
                                              self.free_blocks).replace("admit:", "admitted on arrival:", 1)
            self._start(seq, t, start_tokens, need)

    def apply_service_policy(self, t: int) -> None:
        """Phase 4: reject this step's arrivals beyond ``max_queue_len``, then requests that waited ``max_wait_steps``.

        This step's arrivals that still wait sit at the tail of ``waiting``;
        those kept get their reason (how many waited ahead). Preempted
        requests are exempt: they sit in ``resumed``.
        """
        config, waiting = self.config, self.waiting
        if waiting and waiting[-1].arrival_step == t:
            queue_len = len(self.resumed) + len(waiting)
            if self.max_queue_len is not None:
                while queue_len > self.max_queue_len and waiting and waiting[-1].arrival_step == t:
                    queue_len -= 1
                    self._reject(waiting.pop(), t, QUEUE_FULL, queue_full_reason(config, queue_len))
            first_new = len(waiting)
            while first_new and waiting[first_new - 1].arrival_step == t:
                first_new -= 1
            for ahead in range(len(self.resumed) + first_new, queue_len):
                seq = waiting[ahead - len(self.resumed)]
                if seq.queued_reason is None:
                    seq.queued_reason = (f"queued at step {t}: {ahead} request(s) waited ahead of it "
                                         f"and admission is first come, first served")
        if self.max_wait_steps is not None:
            while waiting and t - waiting[0].arrival_step >= self.max_wait_steps:
                seq = waiting.popleft()
                self._reject(seq, t, WAITED_TOO_LONG,
                             wait_expired_reason(config, t - seq.arrival_step) + f"; {seq.queued_reason}")
                self.retry_admission = True

    def record(self) -> None:
        """Phase 5: append this step's blocks, tokens, running and waiting counts to the series."""
        series = self.series
        series.blocks_used.append(self.blocks_used)
        series.blocks_touched.append(self.blocks_touched)
        series.tokens_held.append(self.tokens_held)
        series.active.append(len(self.running))
        series.queued.append(len(self.resumed) + len(self.waiting))

    def finish(self, t: int) -> None:
        """Phase 6: requests that generated their last token this step leave; their blocks are free from ``t + 1``."""
        due = self.finish_at.pop(t, None)
        if due is None:
            return
        assert self.finish_steps[0] == t, "finish steps out of order"
        heapq.heappop(self.finish_steps)
        for seq in due:
            if seq not in self.running or seq.due_step != t:
                continue            # a stale entry: it was preempted and re-admitted since
            del self.running[seq]
            self.claims_by_phase[seq.claim_phase] -= 1
            total_tokens = seq.prompt_tokens + seq.output_tokens
            held_blocks = cdiv(total_tokens, self.block_size)
            self.tokens_held -= total_tokens
            self.blocks_touched -= held_blocks
            released = held_blocks if self.paged else seq.reserved_blocks
            self.blocks_used -= released
            self.free_blocks += released
            seq.status, seq.end_step = FINISHED, t
        self.retry_admission = True
        assert (0 <= self.blocks_used <= self.num_blocks
                and self.free_blocks == self.num_blocks - self.blocks_used), "block accounting broke"

    # -------------------------------------------------- helpers of the phases

    def _start(self, seq: _Sequence, t: int, start_tokens: int, need: int) -> None:
        """Admit ``seq`` at step ``t``: claim ``need`` blocks, prefill ``start_tokens``, schedule its finish."""
        self.running[seq] = None
        seq.admitted_step = t
        self.free_blocks -= need
        self.blocks_used += need
        self.blocks_touched += cdiv(start_tokens, self.block_size)
        self.tokens_held += start_tokens
        if not self.paged:
            seq.reserved_blocks = need
        # at step t + k it holds start_tokens + k; token start_tokens + k opens a block when start_tokens + k - 1
        # is a multiple of block_size, i.e. at the steps congruent to t + 1 - start_tokens
        seq.claim_phase = (t + 1 - start_tokens) % self.block_size
        self.claims_by_phase[seq.claim_phase] += 1
        seq.due_step = t + seq.output_tokens - seq.generated_tokens
        if seq.due_step in self.finish_at:
            self.finish_at[seq.due_step].append(seq)
        else:
            self.finish_at[seq.due_step] = [seq]
            heapq.heappush(self.finish_steps, seq.due_step)

    def _preempt_youngest(self, t: int) -> None:
        """Preempt by recompute: free the youngest running request's blocks; it goes back to the head of the queue."""
        seq = next(reversed(self.running))
        generated = seq.generated_tokens + (t - 1 - seq.admitted_step)     # it has not grown at step t yet
        held_tokens = seq.prompt_tokens + generated
        held_blocks = cdiv(held_tokens, self.block_size)
        self.tokens_held -= held_tokens
        self.blocks_touched -= held_blocks
        self.blocks_used -= held_blocks
        self.free_blocks += held_blocks
        self.claims_by_phase[seq.claim_phase] -= 1
        del self.running[seq]
        seq.generated_tokens = generated
        seq.preemptions += 1
        seq.last_preempted_step = t
        self.preemptions += 1
        self.resumed.appendleft(seq)

    def _reject(self, seq: _Sequence, t: int, rejection: str, reason: str) -> None:
        seq.status, seq.end_step, seq.rejection, seq.reason = REJECTED, t, rejection, reason

    # -------------------------------------------------- the result

    def result(self) -> SimulationResult:
        """The records (back in trace order), the series and the summary of a drained run."""
        records: list[RequestRecord | None] = [None] * len(self.pending)
        for seq in self.pending:
            records[seq.trace_index] = _record(seq)
        series = self.series
        return SimulationResult(self.config, tuple(records), tuple(series.blocks_used),  # type: ignore[arg-type]
                                tuple(series.tokens_held), tuple(series.active), tuple(series.queued),
                                self._summary())

    def _summary(self) -> Summary:
        config, block_size = self.config, self.block_size
        series = self.series
        blocks, touched, tokens = series.blocks_used, series.blocks_touched, series.tokens_held
        sum_blocks, sum_touched, sum_tokens = sum(blocks), sum(touched), sum(tokens)
        delays = [seq.first_admitted_step - seq.arrival_step for seq in self.pending if seq.status == FINISHED]
        rejections = [seq.rejection for seq in self.pending if seq.status == REJECTED]
        steps = len(blocks)
        slots = sum_blocks * block_size
        return Summary(
            policy=config.policy, requests=len(self.pending), completed=len(delays),
            rejected=len(self.pending) - len(delays), rejected_never_fits=rejections.count(NEVER_FITS),
            rejected_queue_full=rejections.count(QUEUE_FULL), rejected_wait=rejections.count(WAITED_TOO_LONG),
            preemptions=self.preemptions, recompute_tokens=self.recompute_tokens,
            steps=steps, peak_kv_bytes=max(blocks, default=0) * config.block_bytes,
            peak_token_bytes=max(tokens, default=0) * config.kv_bytes_per_token,
            kv_budget_bytes=config.kv_budget_bytes, kv_capacity_bytes=config.kv_capacity_bytes,
            num_blocks=config.num_blocks, block_size_tokens=block_size, kv_bytes_per_token=config.kv_bytes_per_token,
            max_active=max(series.active, default=0), max_running=max(series.active, default=0),
            mean_active=sum(series.active) / steps if steps else 0.0,
            max_queued=max(series.queued, default=0),
            kv_utilization=sum_tokens / slots if slots else None,
            internal_fragmentation=(sum_touched * block_size - sum_tokens) / slots if slots else None,
            reserved_unused=(sum_blocks - sum_touched) / sum_blocks if sum_blocks else None,
            p50_queue_steps=percentile_nearest_rank(delays, 50), p99_queue_steps=percentile_nearest_rank(delays, 99),
            mean_queue_steps=sum(delays) / len(delays) if delays else None,
        )


# ------------------------------------------------------------------ vLLM V1's scheduler (policy "vllm-v1")

class _V1Simulation(_Simulation):
    """vLLM V1's scheduler: one simulator step is one engine step, ``Scheduler.schedule()`` then the model's output.

    Read from vLLM 0.32.0's ``vllm/v1/core/sched/scheduler.py`` (``schedule``, ``_preempt_request``,
    ``update_from_output``), ``vllm/v1/core/kv_cache_manager.py`` (``allocate_slots``,
    ``get_computed_blocks``) and ``vllm/v1/core/block_pool.py`` (the free block queue), with the
    defaults of a sync engine (the CPU platform turns async scheduling off), FCFS, no speculative
    decoding, no KV connector, no LoRA, no encoder. Within step ``t``:

    1. **Arrivals** join the back of the waiting queue. A prompt of ``max_model_len`` tokens or
       more is rejected (vLLM's input processor refuses it).
    2. **Running requests first**, in the order they were admitted, while the step's token budget
       (``max_num_batched_tokens``) lasts: each gets ``num_tokens - num_computed_tokens`` tokens
       (1 for a decode, the rest of its prompt for a chunked prefill), cut to the budget left. If
       the blocks for them are not free, the newest running request is preempted by recompute
       (its blocks freed, ``num_computed_tokens = 0``, back to the head of the queue), again until
       they fit; a request that preempts itself ends this pass.
    3. **Waiting requests**, only if nothing was preempted this step: while budget is left and
       fewer than ``max_num_seqs`` run, the head starts if its whole sequence fits the free blocks
       (``scheduler_reserve_full_isl``, default on); it computes what the budget allows (chunked
       prefill). The first that does not fit stops the pass. With prefix caching, a preempted
       request first takes back those of its full blocks still cached in the free queue (they
       count against the free blocks all the same: a hit saves compute, never blocks).
    4. **Service policy** (the course's ``max_queue_len``/``max_wait_steps``; vLLM has none).
    5. **Record**, after the step's tokens are computed.
    6. **Output**: a request whose tokens are all computed samples one (a prefill's last chunk
       samples the first output token); one that reaches ``output_tokens`` or ``max_model_len``
       finishes and frees its blocks for step ``t + 1``.

    The block pool keeps one block back (its null block), so ``num_blocks - 1`` are usable. The
    free queue is least recently freed first; a request's blocks are freed last block first, so
    allocations evict a preempted request's tail before its prefix (``free_blocks``,
    ``get_new_blocks``). It is held as segments ``[owner, count]``: ``owner`` is the preempted
    request whose leading blocks these are, or None for blocks nobody will hit.
    """

    def __init__(self, requests: Iterable[Request], config: AdmissionConfig, max_steps: int | None = None) -> None:
        super().__init__(requests, config, max_steps)
        self.usable_blocks = config.num_blocks - 1              # block_pool.py: the null block is never handed out
        self.free_blocks = self.usable_blocks
        self.budget = config.max_num_batched_tokens
        self.max_model_len = (config.max_model_len if config.max_model_len is not None
                              else self.usable_blocks * self.block_size)
        self.caching = config.enable_prefix_caching
        self.free_queue: deque[list] = deque([[None, self.usable_blocks]])
        self.fast = True                # decode_stretch; False steps through every step (the tests compare the two)
        self.admission_held = False
        self.preempted_now = False
        for seq in self.pending:
            seq.num_tokens = seq.prompt_tokens

    def run(self) -> SimulationResult:
        t = 0
        while not self.drained:
            if not self.running and not self.resumed and not self.waiting:   # idle until the next arrival
                assert self.next_arrival_step is not None
                if self.next_arrival_step > t:
                    t = self.quiet_steps(t, self.next_arrival_step)
            if self.max_steps is not None and t >= self.max_steps:
                raise CourseInputError(_too_many_steps(self.max_steps, self.requests_left))
            if self.next_arrival_step == t:
                self.arrive(t)
            scheduled = self.schedule(t)
            head = (self.resumed or self.waiting or (None,))[0]
            if self.waiting:
                self.apply_service_policy(t)
                if head is not (self.resumed or self.waiting or (None,))[0]:
                    self.admission_held = False         # a new head: the next step must try it
            for seq, n in scheduled:                            # the forward pass computes the scheduled tokens
                seq.computed_tokens += n
                self.tokens_held += n
            # every allocated block holds a computed token now; free blocks that still cache a preempted
            # request's prefix count as free, as in vLLM
            self.blocks_touched = self.blocks_used = self.usable_blocks - self.free_blocks
            self.record()
            finished = self.output(t, scheduled)
            t += 1
            if self.fast and not finished and not self.preempted_now and (
                    self.admission_held or not (self.resumed or self.waiting)):
                t = self.decode_stretch(t)
        return self.result()

    def decode_stretch(self, t: int) -> int:
        """Steps ``t, t + 1, ...`` in which every running request only decodes, at once; the next step to run in full.

        After a step in which nothing finished, nothing was preempted and the waiting head (if any)
        was held back by blocks or ``max_num_seqs``, the next steps change nothing but one token per
        running request, as long as no request arrives, finishes or opens a block that is not free
        (and no one waits past ``max_wait_steps``): the free blocks only shrink, so the head stays
        held. Each running request opens a block every block_size steps, at the steps where its
        computed tokens are a multiple of block_size; those claims are counted per phase, so the
        stretch costs one pass over the running requests plus its length.
        """
        size = self.block_size
        limit = self.next_arrival_step - t if self.next_arrival_step is not None else math.inf
        if self.max_wait_steps is not None and self.waiting:
            limit = min(limit, self.waiting[0].arrival_step + self.max_wait_steps - t)
        if self.max_steps is not None:
            limit = min(limit, self.max_steps - t)
        firsts = []
        for seq in self.running:
            if seq.computed_tokens != seq.num_tokens - 1:      # a prefill chunk is still to come
                return t
            limit = min(limit, seq.output_tokens - seq.generated_tokens - 1,
                        self.max_model_len - seq.num_tokens - 1)     # the finishing step runs in full
            firsts.append(-seq.computed_tokens % size)         # quiet step j claims when (computed + j) % size == 0
        if limit <= 0 or not firsts:
            return t
        by_phase = [0] * size
        for first in firsts:
            by_phase[first] += 1

        def claims(m: int) -> int:           # blocks claimed over the first m steps of the stretch
            whole, part = divmod(m, size)
            return whole * len(firsts) + sum(by_phase[:part])

        steps = int(limit)
        if claims(steps) > self.free_blocks:                     # the last m whose claims all fit
            lo, hi = 0, steps
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if claims(mid) <= self.free_blocks:
                    lo = mid
                else:
                    hi = mid - 1
            steps = lo
        if steps <= 0:
            return t
        running = len(self.running)
        per_step = islice(cycle(by_phase), steps)
        used = list(accumulate(per_step, initial=self.blocks_used))
        del used[0]
        tokens = range(self.tokens_held + running, self.tokens_held + running * steps + 1, running)
        self.series.extend(steps, used, used, tokens, running, len(self.resumed) + len(self.waiting))
        claimed = used[-1] - self.blocks_used
        self._take(claimed)
        self.blocks_used = self.blocks_touched = used[-1]
        self.tokens_held += running * steps
        for seq in self.running:
            seq.computed_tokens += steps
            seq.num_tokens += steps
            seq.generated_tokens += steps
            seq.held_blocks = cdiv(seq.computed_tokens, size)
        return t + steps

    # -------------------------------------------------- phases

    def arrive(self, t: int) -> None:
        """Phase 1: arrivals join the back of the waiting queue; a prompt of max_model_len tokens or more is refused."""
        pending = self.pending
        while self.next_arrival < len(pending) and pending[self.next_arrival].arrival_step == t:
            seq = pending[self.next_arrival]
            self.next_arrival += 1
            if seq.prompt_tokens >= self.max_model_len:
                self._reject(seq, t, NEVER_FITS,
                             f"never fits: prompt {seq.prompt_tokens:,} tokens plus at least one output token is "
                             f"longer than max_model_len {self.max_model_len:,} (vLLM's input processor refuses it)")
            else:
                self.waiting.append(seq)
        self.next_arrival_step = pending[self.next_arrival].arrival_step if self.next_arrival < len(pending) else None

    def schedule(self, t: int) -> list[tuple[_Sequence, int]]:
        """Phases 2 and 3, ``Scheduler.schedule()``: the requests computed this step and their token counts."""
        size, mml = self.block_size, self.max_model_len
        order = list(self.running)
        budget = self.budget
        scheduled: list[tuple[_Sequence, int]] = []
        preempted = False
        i = 0
        while i < len(order) and budget > 0:
            seq = order[i]
            n = min(seq.num_tokens - seq.computed_tokens, budget, mml - seq.computed_tokens - 1)
            if n <= 0:
                i += 1
                continue
            need = cdiv(seq.computed_tokens + n, size) - seq.held_blocks
            fits = True
            while need > self.free_blocks:                      # allocate_slots failed: preempt the newest
                victim = order.pop()
                self._preempt(victim, t)
                preempted = True
                if victim is seq:
                    fits = False
                    break
            if not fits:
                break
            self._take(need)
            seq.held_blocks += need
            scheduled.append((seq, n))
            budget -= n
            i += 1
        self.admission_held = False     # the waiting loop stopped on blocks or max_num_seqs (or nobody waits)
        self.preempted_now = preempted
        if not preempted:
            budget = self._admit_waiting(t, order, budget, scheduled)
        elif self.resumed or self.waiting:
            head = (self.resumed or self.waiting)[0]
            self._note_queued(head, t, "a running request was preempted this step, and vLLM starts no waiting "
                                       "request in such a step")
        if budget == 0 and (self.resumed or self.waiting):
            self._note_queued((self.resumed or self.waiting)[0], t,
                              f"the step's token budget (max_num_batched_tokens {self.budget:,}) was spent")
        self.running = dict.fromkeys(order)
        return scheduled

    def _admit_waiting(self, t: int, order: list[_Sequence], budget: int,
                       scheduled: list[tuple[_Sequence, int]]) -> int:
        size, mml = self.block_size, self.max_model_len
        while budget > 0 and (self.resumed or self.waiting):
            queue = self.resumed if self.resumed else self.waiting
            seq = queue[0]
            if len(order) >= self.max_num_seqs:
                self._note_queued(seq, t, f"{len(order)} requests are running, the max_num_seqs limit")
                self.admission_held = True
                break
            hits = self._hits(seq)
            full = cdiv(min(seq.num_tokens, mml), size)
            if full > self.free_blocks:                         # allocate_slots(full_sequence_must_fit=True)
                if not order and self.free_blocks == self.usable_blocks:
                    queue.popleft()
                    self._reject(seq, t, NEVER_FITS,
                                 f"never fits: its {seq.num_tokens:,} tokens need {full:,} blocks but the cache "
                                 f"has {self.usable_blocks:,} (vLLM would wait for it forever)")
                    continue
                self._note_queued(seq, t, f"its {seq.num_tokens:,} tokens need {full:,} free blocks, "
                                          f"{self.free_blocks:,} of {self.usable_blocks:,} are free")
                self.admission_held = True
                break
            queue.popleft()
            free_before = self.free_blocks
            computed = hits * size
            n = min(seq.num_tokens - computed, budget)
            if seq.generated_tokens or seq.preemptions:
                self.recompute_tokens += seq.num_tokens - computed
            if hits:
                segment = seq.free_segment
                assert segment is not None and segment[0] is seq
                segment[1] -= hits
                self.free_blocks -= hits
            if seq.free_segment is not None:
                seq.free_segment[0] = None
                seq.free_segment = None
            need = cdiv(computed + n, size)
            self._take(need - hits)
            seq.held_blocks = need
            seq.computed_tokens = computed
            self.tokens_held += computed
            if seq.first_admitted_step < 0:
                seq.first_admitted_step = t
                if seq.queued_reason is None:
                    seq.reason = (f"admitted on arrival: vllm-v1 found the {full:,} blocks of its prompt free "
                                  f"({free_before:,} of {self.usable_blocks:,} were)")
            seq.admitted_step = t
            order.append(seq)
            scheduled.append((seq, n))
            budget -= n
        return budget

    def output(self, t: int, scheduled: list[tuple[_Sequence, int]]) -> bool:
        """Phase 6, ``update_from_output``: sample a token where all are computed; finish and free the done ones.

        Returns whether any request finished.
        """
        finished = False
        for seq, _ in scheduled:
            if seq.computed_tokens < seq.num_tokens:            # a prefill chunk: nothing sampled
                continue
            seq.num_tokens += 1
            seq.generated_tokens += 1
            capped = seq.num_tokens >= self.max_model_len
            if seq.generated_tokens >= seq.output_tokens or capped:
                seq.length_capped = capped and seq.generated_tokens < seq.output_tokens
                if seq.length_capped:
                    seq.output_tokens = seq.generated_tokens
                del self.running[seq]
                self.tokens_held -= seq.computed_tokens
                self._give_back(seq.held_blocks, None)
                seq.held_blocks = 0
                seq.status, seq.end_step = FINISHED, t
                finished = True
        return finished

    # -------------------------------------------------- the block pool

    def _take(self, count: int) -> None:
        """Pop ``count`` blocks off the free queue's head (``BlockPool.get_new_blocks``), evicting what they cached."""
        self.free_blocks -= count
        queue = self.free_queue
        while count:
            segment = queue[0]
            take = min(count, segment[1])
            segment[1] -= take
            count -= take
            if segment[1] == 0:
                queue.popleft()
                if segment[0] is not None:
                    segment[0].free_segment = None
                    segment[0] = None

    def _give_back(self, count: int, owner: _Sequence | None) -> None:
        """Append freed blocks to the tail of the free queue (``BlockPool.free_blocks``)."""
        self.free_blocks += count
        if owner is None and self.free_queue and self.free_queue[-1][0] is None:
            self.free_queue[-1][1] += count
        elif count:
            segment: list = [owner, count]
            self.free_queue.append(segment)
            if owner is not None:
                owner.free_segment = segment

    def _hits(self, seq: _Sequence) -> int:
        """Blocks of ``seq``'s prefix still cached (``get_computed_blocks``: full blocks, under num_tokens tokens)."""
        segment = seq.free_segment
        if not self.caching or segment is None or segment[0] is not seq:
            return 0
        return min(segment[1], seq.cached_blocks, (seq.num_tokens - 1) // self.block_size)

    def _preempt(self, seq: _Sequence, t: int) -> None:
        """``_preempt_request``: free its blocks, forget its computed tokens, put it at the head of the queue."""
        del self.running[seq]
        self.tokens_held -= seq.computed_tokens
        seq.cached_blocks = seq.computed_tokens // self.block_size
        held, seq.held_blocks = seq.held_blocks, 0
        seq.computed_tokens = 0
        self._give_back(held, seq if self.caching else None)
        seq.preemptions += 1
        seq.last_preempted_step = t
        self.preemptions += 1
        self.resumed.appendleft(seq)

    def _note_queued(self, seq: _Sequence, t: int, why: str) -> None:
        if seq.queued_reason is None and seq.first_admitted_step < 0:
            seq.queued_reason = f"queued at step {t}: {why}"


def _record(seq: _Sequence) -> RequestRecord:
    """A done request's record, its reason in words: how it was admitted or queued, preempted, finished."""
    if seq.status == FINISHED:
        text = seq.queued_reason or seq.reason
        if seq.queued_reason:
            text += (f"; admitted at step {seq.first_admitted_step} after "
                     f"{seq.first_admitted_step - seq.arrival_step} steps")
        if seq.preemptions:
            text += (f"; preempted {seq.preemptions} time(s) when the cache ran out of blocks (last at step "
                     f"{seq.last_preempted_step}), recomputed and re-admitted")
        text += f"; finished at step {seq.end_step} after {seq.output_tokens} tokens"
        if seq.length_capped:
            text += " (cut there: it reached max_model_len)"
        return RequestRecord(seq.id, FINISHED, text, seq.arrival_step, seq.first_admitted_step, seq.end_step,
                             seq.first_admitted_step - seq.arrival_step, seq.preemptions)
    assert seq.status == REJECTED, "a request neither finished nor was rejected"
    return RequestRecord(seq.id, REJECTED, seq.reason, seq.arrival_step, None, None,
                         seq.end_step - seq.arrival_step, seq.preemptions)


def _too_many_steps(max_steps: int, left: int) -> str:
    return (f"the simulation reached step {max_steps:,}, the most steps it runs here, with {left:,} request(s) "
            f"still running, waiting or yet to arrive; shorten the trace (fewer requests, shorter outputs) or "
            f"free KV memory so more of them run at once")
