"""What a simulation returns: one record per request, the per-step series and a summary.

>>> percentile_nearest_rank([5, 1, 3, 2, 4], 50)
3
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Sequence

from ..serving.admission import AdmissionConfig

FINISHED, REJECTED = "finished", "rejected"
#: Why a request was rejected (counted in the summary's ``rejected_*`` fields).
NEVER_FITS, QUEUE_FULL, WAITED_TOO_LONG = "never_fits", "queue_full", "wait"


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

