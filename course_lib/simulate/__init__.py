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

How the code follows these rules (:mod:`.engine`; the records and summary are :mod:`.result`): :class:`_Simulation` holds the state between
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
prefill's last chunk samples the first output token (see :class:`_V1Simulation`, :mod:`.vllm_v1`). On the issue's
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
from contextlib import contextmanager
from typing import Iterable, Iterator

from ..serving.admission import VLLM_V1, AdmissionConfig
from ..serving.trace import Request
from .engine import MAX_ARRIVAL_STEP, _Simulation
from .result import (FINISHED, NEVER_FITS, QUEUE_FULL, REJECTED, WAITED_TOO_LONG, RequestRecord, SimulationResult,
                     Summary, percentile_nearest_rank)
from .vllm_v1 import _V1Simulation

__all__ = ["FINISHED", "MAX_ARRIVAL_STEP", "NEVER_FITS", "QUEUE_FULL", "REJECTED", "RequestRecord", "SimulationResult",
           "Summary", "WAITED_TOO_LONG", "percentile_nearest_rank", "simulate"]

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

