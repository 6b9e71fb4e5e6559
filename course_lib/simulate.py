"""A deterministic, step-driven admission simulator over a request trace.

One **step** is one decode iteration of the whole batch. Within step ``t``,
in this order:

1. **Arrivals.** Requests with ``arrival_step == t`` join the back of the
   queue, in trace order. One that can never fit (see
   :func:`course_lib.admission.never_fits_reason`) is rejected at once.
2. **Decode.** Every request admitted before ``t`` generates one token and
   its KV grows by one token. Under ``paged`` a token that starts a new
   block claims one; if too few blocks are free, the youngest running
   request (the most recently admitted) is preempted, again and again until
   the rest fit: its blocks are freed and it goes back to the *head* of the
   queue, keeping the tokens it generated. A preempted request does not grow
   this step.
3. **Admission.** Unless step 2 preempted anything, the head of the queue
   starts while the policy allows it (:func:`course_lib.admission.can_admit`);
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

The lesson's ten/eleven case, by hand (reserve-max, 715 blocks, requests of
608 + 512 = 1,120 tokens = 70 blocks, all arriving at step 0): ten take 700
blocks at step 0, the eleventh needs 70 but 15 are free, so it is *queued*.
The ten finish at step 0 + 512 = 512; at step 513 the eleventh starts, and
finishes at 513 + 512 = 1025.

>>> from course_lib.admission import AdmissionConfig
>>> from course_lib.trace import Request
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

import math
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

from .admission import (PAGED, AdmissionConfig, admit_reason, blocked_reason, cdiv, never_fits_reason,
                        queue_full_reason, usable_blocks, wait_expired_reason)
from .errors import CourseInputError
from .trace import Request, check_unique_ids

FINISHED, REJECTED = "finished", "rejected"
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
        return asdict(self)


@dataclass(frozen=True)
class Summary:
    """Figures of a whole run. Shares are fractions in [0, 1]; delays are in steps.

    policy: "reserve-max" or "paged".
    requests / completed / rejected: counts; rejected_never_fits,
        rejected_queue_full, rejected_wait split the rejections by reason.
    preemptions: preemptions by recompute, all requests together.
    recompute_tokens: prompt + generated tokens prefilled again after preemptions.
    steps: steps simulated (the length of every per-step series).
    peak_kv_bytes: the most KV memory allocated (reserved or claimed) at any step.
    peak_token_bytes: the most KV memory holding actual tokens at any step.
    kv_budget_bytes: the safe KV budget (device - fixed pools); peak_kv_bytes never exceeds it.
    kv_capacity_bytes: num_blocks x block_bytes, the whole-block part of the budget.
    num_blocks, block_size_tokens, kv_bytes_per_token: the cache's shape.
    max_active / mean_active: running requests, at most and on average over steps.
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
    mean_active: float
    max_queued: int
    kv_utilization: float | None
    internal_fragmentation: float | None
    reserved_unused: float | None
    p50_queue_steps: int | None
    p99_queue_steps: int | None
    mean_queue_steps: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SimulationResult:
    """A run: the config, one record per request (trace order), the per-step series, the summary.

    The series are columns indexed by step: ``blocks_used[t]`` blocks
    allocated, ``token_counts[t]`` tokens held in them, ``active[t]`` running
    and ``queued[t]`` waiting requests at step ``t``.
    """

    config: AdmissionConfig
    requests: tuple[RequestRecord, ...]
    blocks_used: tuple[int, ...]
    token_counts: tuple[int, ...]
    active: tuple[int, ...]
    queued: tuple[int, ...]
    summary: Summary

    @property
    def steps(self) -> dict[str, list[int]]:
        """The per-step series as columns; bytes are ints (blocks x block_bytes, tokens x bytes per token)."""
        bb, bt = self.config.block_bytes, self.config.kv_bytes_per_token
        return {"kv_bytes": [b * bb for b in self.blocks_used],
                "token_bytes": [n * bt for n in self.token_counts],
                "blocks_used": list(self.blocks_used),
                "active": list(self.active),
                "queued": list(self.queued)}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: top-level keys ``requests``, ``steps`` and ``summary`` (config inside summary)."""
        summary = self.summary.to_dict()
        summary["config"] = self.config.to_dict()
        return {"requests": [r.to_dict() for r in self.requests], "steps": self.steps, "summary": summary}


def percentile_nearest_rank(values: Sequence[int], pct: float) -> int | None:
    """The nearest-rank percentile: sorted ``v[ceil(pct / 100 x n) - 1]``; None for no values.

    >>> percentile_nearest_rank([5, 1, 3, 2, 4], 50), percentile_nearest_rank(range(1, 101), 99)
    (3, 99)
    """
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def simulate(requests: Iterable[Request], config: AdmissionConfig) -> SimulationResult:
    """Run ``requests`` through an admission controller with ``config``; see the module docstring.

    Deterministic: the same trace and config give the same result. Requests
    are taken in (arrival_step, trace order). Per-step work is O(1) apart
    from events (an arrival, an admission, a finish, a preemption): block
    claims are counted by the step at which each request's next block falls
    due (``t mod block_size``), never by looping over running requests.
    """
    trace = list(requests)
    check_unique_ids(trace)
    order = sorted(range(len(trace)), key=lambda k: (trace[k].arrival_step, k))
    reqs = [trace[k] for k in order]
    n = len(reqs)
    arr = [r.arrival_step for r in reqs]
    if n and arr[-1] > MAX_ARRIVAL_STEP:
        raise CourseInputError(f"arrival_step={arr[-1]:,} (request {reqs[-1].id!r}) is beyond step "
                               f"{MAX_ARRIVAL_STEP:,}; the per-step series hold one value per step, so shift "
                               f"the arrivals closer to step 0")
    P = [r.prompt_tokens for r in reqs]
    M = [r.max_new_tokens for r in reqs]
    O = [r.output_tokens for r in reqs]

    B = config.block_size_tokens
    paged = config.policy == PAGED
    wm = config.watermark_blocks
    max_seqs = config.max_num_seqs
    cap = config.max_queue_len
    max_wait = config.max_wait_steps
    usable = usable_blocks(config)

    gen = [0] * n           # tokens generated before the current admission (> 0 after a preemption)
    adm = [-1] * n          # step of the current admission
    first_adm = [-1] * n
    due = [-1] * n          # step at which the current admission will finish
    end = [-1] * n          # step it finished or was rejected
    status: list[str | None] = [None] * n
    why: list[str] = [""] * n            # rejection reason, or how it was first admitted
    queued_why: list[str | None] = [None] * n
    npre = [0] * n
    last_pre = [-1] * n
    phase = [0] * n         # a running request claims its next block at steps t with t % B == phase
    alloc = [0] * n         # reserve-max: blocks reserved at admission
    kind = [""] * n         # rejection kind

    running: dict[int, None] = {}       # insertion order = admission order; the last key is the youngest
    nphase = [0] * B                    # running requests per phase
    resumed: deque[int] = deque()       # preempted requests, at the head of the queue
    waiting: deque[int] = deque()       # never-admitted requests, in arrival order
    finish_at: dict[int, list[int]] = {}

    free = config.num_blocks
    blocks = touched = tokens = 0       # allocated blocks, blocks holding >= 1 token, tokens held
    s_blocks: list[int] = []
    s_tokens: list[int] = []
    s_active: list[int] = []
    s_queued: list[int] = []
    s_touched: list[int] = []
    preemptions = recompute_tokens = 0
    ptr = t = 0
    retry = True

    while True:
        if not running and not resumed and not waiting:
            if ptr == n:
                break
            gap = arr[ptr] - t
            if gap > 0:             # nothing runs, nothing waits: jump to the next arrival
                zeros = [0] * gap
                s_blocks += zeros
                s_tokens += zeros
                s_active += zeros
                s_queued += zeros
                s_touched += zeros
                t = arr[ptr]

        # 1. arrivals
        while ptr < n and arr[ptr] == t:
            i = ptr
            ptr += 1
            if cdiv(P[i] + M[i], B) > usable:
                status[i], end[i], kind[i] = REJECTED, t, "never_fits"
                why[i] = never_fits_reason(config, P[i], M[i]) or ""
            else:
                waiting.append(i)
                retry = True

        # 2. decode: every running request grows by one token
        preempted_now = False
        if running:
            c = t % B
            if paged and nphase[c] > free:
                while nphase[c] > free:
                    j = next(reversed(running))
                    g = gen[j] + (t - 1 - adm[j])
                    held = P[j] + g
                    held_blocks = cdiv(held, B)
                    tokens -= held
                    touched -= held_blocks
                    blocks -= held_blocks
                    free += held_blocks
                    nphase[phase[j]] -= 1
                    del running[j]
                    gen[j] = g
                    npre[j] += 1
                    last_pre[j] = t
                    preemptions += 1
                    resumed.appendleft(j)
                preempted_now = True
                retry = True
            d = nphase[c]
            tokens += len(running)
            touched += d
            if paged:
                blocks += d
                free -= d

        # 3. admission, FCFS from the head of the queue
        if retry and not preempted_now:
            retry = False
            while resumed or waiting:
                i = resumed[0] if resumed else waiting[0]
                start = P[i] + gen[i]
                need = cdiv(start, B) if paged else cdiv(P[i] + M[i], B)
                if len(running) >= max_seqs or free - need < wm:
                    if queued_why[i] is None and first_adm[i] < 0:
                        queued_why[i] = (f"queued at step {t}: " + blocked_reason(
                            config, P[i], M[i], need, free, len(running), gen[i]).removeprefix("queue: "))
                    break
                if resumed:
                    resumed.popleft()
                    recompute_tokens += start
                else:
                    waiting.popleft()
                if first_adm[i] < 0:
                    first_adm[i] = t
                    if queued_why[i] is None:
                        why[i] = admit_reason(config, P[i], M[i], need, free).replace("admit:", "admitted on arrival:", 1)
                running[i] = None
                adm[i] = t
                free -= need
                blocks += need
                touched += cdiv(start, B)
                tokens += start
                if not paged:
                    alloc[i] = need
                phase[i] = (t + 1 - start) % B
                nphase[phase[i]] += 1
                f = t + O[i] - gen[i]
                due[i] = f
                if f in finish_at:
                    finish_at[f].append(i)
                else:
                    finish_at[f] = [i]

        # 4. service policy: queue length, then wait (new arrivals still waiting sit at the tail)
        if waiting and arr[waiting[-1]] == t:
            queue_len = len(resumed) + len(waiting)
            if cap is not None:
                while queue_len > cap and waiting and arr[waiting[-1]] == t:
                    i = waiting.pop()
                    queue_len -= 1
                    status[i], end[i], kind[i] = REJECTED, t, "queue_full"
                    why[i] = queue_full_reason(config, queue_len)
            pos = len(waiting)
            while pos and arr[waiting[pos - 1]] == t:
                pos -= 1
            for ahead in range(len(resumed) + pos, queue_len):
                i = waiting[ahead - len(resumed)]
                if queued_why[i] is None:
                    queued_why[i] = (f"queued at step {t}: {ahead} request(s) waited ahead of it "
                                     f"and admission is first come, first served")
        if max_wait is not None:
            while waiting and t - arr[waiting[0]] >= max_wait:
                i = waiting.popleft()
                status[i], end[i], kind[i] = REJECTED, t, "wait"
                why[i] = wait_expired_reason(config, t - arr[i]) + f"; {queued_why[i]}"
                retry = True

        # 5. record
        s_blocks.append(blocks)
        s_tokens.append(tokens)
        s_touched.append(touched)
        s_active.append(len(running))
        s_queued.append(len(resumed) + len(waiting))

        # 6. finish: free at the end of the step
        done = finish_at.pop(t, None)
        if done:
            for i in done:
                if i not in running or due[i] != t:
                    continue            # a stale entry: it was preempted and re-admitted since
                del running[i]
                nphase[phase[i]] -= 1
                total = P[i] + O[i]
                held_blocks = cdiv(total, B)
                tokens -= total
                touched -= held_blocks
                released = held_blocks if paged else alloc[i]
                blocks -= released
                free += released
                status[i], end[i] = FINISHED, t
            retry = True
            assert 0 <= blocks <= config.num_blocks and free == config.num_blocks - blocks, "block accounting broke"
        t += 1
        if ptr == n and not running and not resumed and not waiting:
            break

    records = []
    for i in range(n):
        if status[i] == FINISHED:
            text = queued_why[i] or why[i]
            if queued_why[i]:
                text += f"; admitted at step {first_adm[i]} after {first_adm[i] - arr[i]} steps"
            if npre[i]:
                text += (f"; preempted {npre[i]} time(s) when the cache ran out of blocks (last at step "
                         f"{last_pre[i]}), recomputed and re-admitted")
            text += f"; finished at step {end[i]} after {O[i]} tokens"
            records.append(RequestRecord(reqs[i].id, FINISHED, text, arr[i], first_adm[i], end[i],
                                         first_adm[i] - arr[i], npre[i]))
        else:
            assert status[i] == REJECTED, "a request neither finished nor was rejected"
            records.append(RequestRecord(reqs[i].id, REJECTED, why[i], arr[i], None, None, end[i] - arr[i], npre[i]))
    by_trace = [None] * n
    for pos, k in enumerate(order):
        by_trace[k] = records[pos]  # type: ignore[call-overload]

    sum_blocks, sum_touched, sum_tokens = sum(s_blocks), sum(s_touched), sum(s_tokens)
    delays = [first_adm[i] - arr[i] for i in range(n) if status[i] == FINISHED]
    steps = len(s_blocks)
    slots = sum_blocks * B
    summary = Summary(
        policy=config.policy, requests=n, completed=len(delays), rejected=n - len(delays),
        rejected_never_fits=kind.count("never_fits"), rejected_queue_full=kind.count("queue_full"),
        rejected_wait=kind.count("wait"), preemptions=preemptions, recompute_tokens=recompute_tokens,
        steps=steps, peak_kv_bytes=max(s_blocks, default=0) * config.block_bytes,
        peak_token_bytes=max(s_tokens, default=0) * config.kv_bytes_per_token,
        kv_budget_bytes=config.kv_budget_bytes, kv_capacity_bytes=config.kv_capacity_bytes,
        num_blocks=config.num_blocks, block_size_tokens=B, kv_bytes_per_token=config.kv_bytes_per_token,
        max_active=max(s_active, default=0), mean_active=sum(s_active) / steps if steps else 0.0,
        max_queued=max(s_queued, default=0),
        kv_utilization=sum_tokens / slots if slots else None,
        internal_fragmentation=(sum_touched * B - sum_tokens) / slots if slots else None,
        reserved_unused=(sum_blocks - sum_touched) / sum_blocks if sum_blocks else None,
        p50_queue_steps=percentile_nearest_rank(delays, 50), p99_queue_steps=percentile_nearest_rank(delays, 99),
        mean_queue_steps=sum(delays) / len(delays) if delays else None,
    )
    return SimulationResult(config, tuple(by_trace), tuple(s_blocks), tuple(s_tokens), tuple(s_active),  # type: ignore[arg-type]
                            tuple(s_queued), summary)
