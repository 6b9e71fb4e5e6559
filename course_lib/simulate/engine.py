"""The step-driven simulator of the lesson's block policies (reserve-max and paged): its state and phases.

The rules of a step are in :mod:`course_lib.simulate`; :class:`_Simulation` holds the state between steps and
has one method per phase. vLLM V1's scheduler (:mod:`.vllm_v1`) reuses its state and records.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from itertools import accumulate, cycle, islice
from typing import Iterable

from ..serving.admission import (PAGED, AdmissionConfig, admission_blocks, admit_reason,
                                 blocked_reason, can_admit, cdiv,
                                 lifetime_blocks, never_fits_reason,
                                 queue_full_reason, usable_blocks, wait_expired_reason)
from ..errors import CourseInputError
from ..serving.trace import Request, check_unique_ids
from .result import (FINISHED, NEVER_FITS, QUEUE_FULL, REJECTED, WAITED_TOO_LONG, RequestRecord, SimulationResult,
                     Summary, percentile_nearest_rank)

#: The per-step series keep one value per step, so arrivals must start within this many steps.
MAX_ARRIVAL_STEP = 10_000_000


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
