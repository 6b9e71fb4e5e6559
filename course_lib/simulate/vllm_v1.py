"""vLLM V1's scheduler as a policy of the simulator (``vllm-v1``), on the engine's state and records.

It lives beside the engine, not in :mod:`course_lib.runtimes.vllm`: it extends :class:`.engine._Simulation`
and :func:`course_lib.simulate.simulate` dispatches to it by policy, so in ``runtimes/vllm/`` it would import
the simulate folder while the simulate folder imports it back (a circle between the two folders). What it
reads from a vLLM launch (block size, token budget, ``max_num_seqs``) is built in
:mod:`course_lib.runtimes.vllm.scheduler`.
"""

from __future__ import annotations

import math
from collections import deque
from itertools import accumulate, cycle, islice
from typing import Iterable

from ..serving.admission import AdmissionConfig, cdiv
from ..errors import CourseInputError
from ..serving.trace import Request
from .engine import _Sequence, _Simulation, _too_many_steps
from .result import FINISHED, NEVER_FITS, SimulationResult


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
