"""Admission control: admit now, queue, or reject, and always say why.

The safe KV budget is what is left of the device after the fixed pools::

    kv_budget_bytes = device - weights - workspace - reserve

KV memory is handed out in blocks of ``block_size_tokens`` tokens (vLLM's
default is 16), so the budget holds ``num_blocks = kv_budget_bytes //
block_bytes`` blocks, where ``block_bytes = block_size_tokens x
kv_bytes_per_token``. Whole blocks only: the rounded-off tail is never used,
so KV memory can never cross the budget.

Two policies decide how a request's blocks are claimed:

``reserve-max``
    At admission, reserve blocks for ``prompt + max_new_tokens``: the most
    the request can ever hold, so nothing is ever evicted (the "guaranteed no
    evict" style of TGI and TensorRT-LLM). Admission is first come, first
    served (FCFS): only the head of the queue may start, so a big request at
    the head blocks the smaller ones behind it even when they would fit
    (head-of-line blocking). That is the price of FCFS's fairness.
``paged``
    vLLM style. At admission claim only the prompt's blocks; each further
    block is claimed when a generated token needs it. A new request starts
    only if, after its prompt blocks, ``watermark`` x num_blocks blocks
    (vLLM: 0.01) stay free, and fewer than ``max_num_seqs`` (vLLM: 256) are
    running. When a running request needs a block and none is free, the
    youngest running request is preempted by recompute: its blocks are freed
    and it goes back to the head of the queue (see :mod:`course_lib.simulate`).
``vllm-v1``
    vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``, vLLM 0.32.0): no
    watermark by default; each step hands out a token budget
    (``max_num_batched_tokens``) to running requests first, then to waiting
    ones, chunking long prefills; a waiting request starts only if its whole
    prompt fits the free blocks (``scheduler_reserve_full_isl``); a running
    request that cannot get a block preempts the newest running request by
    recompute. Its own step loop, :class:`course_lib.simulate.vllm_v1._V1Simulation`.

The lesson's budget, checked by hand: 24 GB - 14 GB - 2 GB - 2 GB = 6 GB.
Llama-2-7B in fp16 caches 2 x 32 layers x 32 heads x 128 dims x 2 B =
524,288 B per token, so a 16-token block is 8,388,608 B (8 MiB) and
6,000,000,000 // 8,388,608 = 715 blocks. A request of 608 prompt + 512 new
tokens = 1,120 tokens = 70 blocks: 10 x 70 = 700 fit, 11 x 70 = 770 do not.

>>> cfg = kv_config(device_bytes=24 * GB, weights_bytes=14 * GB, workspace_bytes=2 * GB,
...                 reserve_bytes=2 * GB, kv_bytes_per_token=524_288)
>>> cfg.kv_budget_bytes, cfg.block_bytes, cfg.num_blocks
(6000000000, 8388608, 715)
>>> admission_blocks(cfg, prompt_tokens=608, max_new_tokens=512)
70
>>> decide(cfg, prompt_tokens=608, max_new_tokens=512, free_blocks=715 - 10 * 70, running=10)
Decision(action='queue', reason='queue: reserve-max needs 70 free blocks (prompt 608 + max_new_tokens 512 = 1,120 tokens = 0.587 GB), only 15 of 715 are free (0.126 GB); it can start when running requests finish')
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..bounds import (MAX_BLOCK_SIZE_TOKENS, MAX_CONTEXT_TOKENS, MAX_DEVICE_BYTES, MAX_KV_BYTES_PER_TOKEN, MAX_SEQUENCES,
                     MAX_SIMULATED_STEPS, MAX_TRACE_REQUESTS, check_int)
from .budget import Budget, plan_budget
from ..errors import CourseInputError, check_count
from ..units import GB

RESERVE_MAX = "reserve-max"
PAGED = "paged"
#: The two policies of the lesson and of ``simulate --policy``/``--compare``.
POLICIES = (RESERVE_MAX, PAGED)
#: vLLM V1's scheduler (``simulate --runtime vllm``).
VLLM_V1 = "vllm-v1"
ALL_POLICIES = POLICIES + (VLLM_V1,)

ADMIT, QUEUE, REJECT = "admit", "queue", "reject"

#: vLLM's default KV block: 16 tokens per block.
DEFAULT_BLOCK_SIZE_TOKENS = 16
#: vLLM (v0 block manager) keeps 1% of blocks free before admitting new work.
DEFAULT_WATERMARK = 0.01
#: vLLM's default cap on sequences running in one batch.
DEFAULT_MAX_NUM_SEQS = 256
#: vLLM's default token budget per step (``SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS``, 0.32.0;
#: also what ``vllm serve`` takes on a GPU under 70 GiB): the vllm-v1 policy's default.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative ints: blocks needed for ``a`` tokens at ``b`` per block.

    >>> cdiv(1120, 16), cdiv(1121, 16), cdiv(0, 16)
    (70, 71, 0)
    """
    return -(-a // b)


@dataclass(frozen=True)
class AdmissionConfig:
    """The budget and the rules an admission controller applies.

    kv_budget_bytes: the safe KV budget, device - weights - workspace - reserve.
    kv_bytes_per_token: KV bytes one token adds, all layers (see
        :func:`course_lib.model.models.kv_cache_bytes_per_token`).
    policy: ``"reserve-max"`` or ``"paged"`` (see the module docstring).
    block_size_tokens: tokens per KV block (vLLM: 16).
    watermark: paged only; share of all blocks kept free when admitting (vLLM: 0.01). vllm-v1 keeps
        none (vLLM 0.32's ``SchedulerConfig.watermark`` default, 0.0), whatever this says.
    max_num_seqs: the most requests running at once (vLLM: 256).
    max_queue_len: service policy; the most requests waiting at once, None for
        no limit. A new arrival that would make the queue longer is rejected.
    max_wait_steps: service policy; a request still not admitted this many
        steps after arriving is rejected. None for no limit.
    max_num_batched_tokens: vllm-v1 only; tokens one step may compute (vLLM: 2048 to 16384 by device).
    max_model_len: vllm-v1 only; the longest a request may get (prompt + output); None: what the cache holds.
    enable_prefix_caching: vllm-v1 only; a preempted request finds its blocks that are still cached
        (vLLM's default: on), which saves compute, never blocks.
    kv_num_blocks: the runtime's own block count where it is not kv_budget_bytes // block_bytes
        (vLLM V1 counts pages per KV group: :func:`course_lib.runtimes.vllm.scheduler.v1_num_blocks`); None: that division.
    """

    kv_budget_bytes: int
    kv_bytes_per_token: int
    policy: str = RESERVE_MAX
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS
    watermark: float = DEFAULT_WATERMARK
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_queue_len: int | None = None
    max_wait_steps: int | None = None
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    max_model_len: int | None = None
    enable_prefix_caching: bool = True
    kv_num_blocks: int | None = None

    def __post_init__(self) -> None:
        # Bounds (course_lib.bounds): the simulator keeps one counter per token position in a
        # block, and every count below stays an exact integer.
        check_int("kv_budget_bytes", self.kv_budget_bytes, 0, MAX_DEVICE_BYTES)
        check_int("kv_bytes_per_token", self.kv_bytes_per_token, 1, MAX_KV_BYTES_PER_TOKEN)
        check_int("block_size_tokens", self.block_size_tokens, 1, MAX_BLOCK_SIZE_TOKENS)
        check_int("max_num_seqs", self.max_num_seqs, 1, MAX_SEQUENCES)
        if self.policy not in ALL_POLICIES:
            raise CourseInputError(f"policy={self.policy!r} is unknown; use one of {', '.join(ALL_POLICIES)}")
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1, MAX_CONTEXT_TOKENS)
        if self.max_model_len is not None:
            check_int("max_model_len", self.max_model_len, 1, MAX_CONTEXT_TOKENS)
        if self.kv_num_blocks is not None:
            check_int("kv_num_blocks", self.kv_num_blocks, 0, MAX_DEVICE_BYTES)
        if self.policy == VLLM_V1:
            object.__setattr__(self, "watermark", 0.0)
            if self.max_num_batched_tokens < self.max_num_seqs:     # vllm/config/scheduler.py, 0.32.0
                raise CourseInputError(f"max_num_batched_tokens={self.max_num_batched_tokens:,} is below "
                                       f"max_num_seqs={self.max_num_seqs:,}; vLLM refuses that launch, give a "
                                       f"budget of at least max_num_seqs tokens")
            mml = self.max_model_len
            if mml is not None and 0 < self.num_blocks < cdiv(mml, self.block_size_tokens):
                raise CourseInputError(
                    f"max_model_len={mml:,} needs {cdiv(mml, self.block_size_tokens):,} blocks of "
                    f"{self.block_size_tokens} tokens but the KV cache holds {self.num_blocks:,}; vLLM refuses to "
                    f"start (estimated maximum model length {self.num_blocks * self.block_size_tokens:,}): lower "
                    f"max_model_len or give the cache more memory")
        w = self.watermark
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w < 1:
            raise CourseInputError(f"watermark={w!r} is not a share in [0, 1); vLLM uses 0.01")
        if self.max_queue_len is not None:
            check_int("max_queue_len", self.max_queue_len, 0, MAX_TRACE_REQUESTS)
        if self.max_wait_steps is not None:
            check_int("max_wait_steps", self.max_wait_steps, 0, MAX_SIMULATED_STEPS)
        if self.num_blocks < 1:
            raise CourseInputError(
                f"kv_budget_bytes={self.kv_budget_bytes:,} holds no {self.block_size_tokens}-token block of "
                f"{self.block_bytes:,} B; free memory for the KV cache (lower weights, workspace or reserve, "
                f"or use a bigger GPU)")

    @cached_property   # the simulator asks on every admission
    def block_bytes(self) -> int:
        """Bytes of one block: block_size_tokens x kv_bytes_per_token."""
        return self.block_size_tokens * self.kv_bytes_per_token

    @cached_property   # the simulator asks on every admission
    def num_blocks(self) -> int:
        """Whole blocks in the budget: kv_budget_bytes // block_bytes (or the runtime's own ``kv_num_blocks``)."""
        if self.kv_num_blocks is not None:
            return self.kv_num_blocks
        return self.kv_budget_bytes // self.block_bytes

    @property
    def kv_capacity_bytes(self) -> int:
        """num_blocks x block_bytes: the most KV memory ever allocated (<= kv_budget_bytes)."""
        return self.num_blocks * self.block_bytes

    @cached_property   # the simulator asks on every admission
    def watermark_blocks(self) -> int:
        """Blocks kept free when admitting (paged): int(watermark x num_blocks), as vLLM rounds; 0 for reserve-max."""
        return int(self.watermark * self.num_blocks) if self.policy == PAGED else 0

    def to_dict(self) -> dict[str, object]:
        return {"policy": self.policy, "kv_budget_bytes": self.kv_budget_bytes,
                "kv_bytes_per_token": self.kv_bytes_per_token, "block_size_tokens": self.block_size_tokens,
                "block_bytes": self.block_bytes, "num_blocks": self.num_blocks,
                "kv_capacity_bytes": self.kv_capacity_bytes, "watermark": self.watermark,
                "watermark_blocks": self.watermark_blocks, "max_num_seqs": self.max_num_seqs,
                "max_queue_len": self.max_queue_len, "max_wait_steps": self.max_wait_steps,
                **({"max_num_batched_tokens": self.max_num_batched_tokens, "max_model_len": self.max_model_len,
                    "enable_prefix_caching": self.enable_prefix_caching} if self.policy == VLLM_V1 else {})}


def kv_config(*, device_bytes: int | str, weights_bytes: int | str, workspace_bytes: int | str = 0,
              reserve_bytes: int | str | float = 0, kv_bytes_per_token: int, **rules: object) -> AdmissionConfig:
    """An :class:`AdmissionConfig` whose budget is the device minus its fixed pools.

    Sizes may be ints of bytes or strings ("24GB"); ``reserve_bytes`` may be a
    share ("10%"). The subtraction is :func:`course_lib.serving.budget.plan_budget`'s.
    ``rules`` are the remaining AdmissionConfig fields (policy, block_size_tokens...).

    >>> kv_config(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB",
    ...           reserve_bytes="2GB", kv_bytes_per_token=524_288).kv_budget_bytes
    6000000000
    >>> kv_config(device_bytes="24GB", weights_bytes="23GB", workspace_bytes="2GB", kv_bytes_per_token=1)
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: the fixed pools (weights 23.00 GB + workspace 2.00 GB + reserve 0.00 GB = 25.00 GB) fill the 24.00 GB device, leaving no KV budget; lower --weights, --workspace or --reserve, or use a bigger --gpu
    """
    budget = plan_budget(device_bytes=device_bytes, weights_bytes=weights_bytes, workspace_bytes=workspace_bytes,
                         reserve_bytes=reserve_bytes, per_sequence_kv_bytes=0)
    return kv_config_for(budget, kv_bytes_per_token, **rules)


def kv_config_for(budget: Budget, kv_bytes_per_token: int, **rules: object) -> AdmissionConfig:
    """An :class:`AdmissionConfig` over a budget whose fixed pools are already resolved.

    The KV budget is ``budget.request_budget_bytes``: the device minus weights, workspace and reserve.
    """
    kv_budget = budget.request_budget_bytes
    if kv_budget <= 0:
        p = budget.parts
        raise CourseInputError(
            f"the fixed pools (weights {p['weights'] / GB:.2f} GB + workspace {p['workspace'] / GB:.2f} GB + "
            f"reserve {p['reserve'] / GB:.2f} GB = {budget.fixed_bytes / GB:.2f} GB) fill the "
            f"{budget.device_bytes / GB:.2f} GB device, leaving no KV budget; lower --weights, --workspace or "
            f"--reserve, or use a bigger --gpu")
    return AdmissionConfig(kv_budget_bytes=kv_budget, kv_bytes_per_token=check_count("kv_bytes_per_token",
                                                                                     kv_bytes_per_token, 1),
                           **rules)  # type: ignore[arg-type]


def admission_blocks(config: AdmissionConfig, prompt_tokens: int, max_new_tokens: int,
                     generated_tokens: int = 0) -> int:
    """Blocks a request claims when it is admitted.

    reserve-max: ``cdiv(prompt + max_new_tokens, block)``, its whole future.
    paged: ``cdiv(prompt + generated_tokens, block)``, only what prefill writes
    (``generated_tokens`` > 0 when a preempted request is recomputed).

    >>> cfg = AdmissionConfig(kv_budget_bytes=1_000_000, kv_bytes_per_token=100, policy="paged")
    >>> admission_blocks(cfg, 608, 512), admission_blocks(cfg, 608, 512, generated_tokens=432)
    (38, 65)
    """
    if config.policy == RESERVE_MAX:
        return cdiv(prompt_tokens + max_new_tokens, config.block_size_tokens)
    return cdiv(prompt_tokens + generated_tokens, config.block_size_tokens)


def lifetime_blocks(config: AdmissionConfig, prompt_tokens: int, max_new_tokens: int) -> int:
    """Blocks a request may hold at its largest: cdiv(prompt + max_new_tokens, block), either policy."""
    return cdiv(prompt_tokens + max_new_tokens, config.block_size_tokens)


def usable_blocks(config: AdmissionConfig) -> int:
    """Blocks one request could ever get on an empty cache: num_blocks - watermark_blocks."""
    return config.num_blocks - config.watermark_blocks


def never_fits_reason(config: AdmissionConfig, prompt_tokens: int, max_new_tokens: int) -> str | None:
    """Why a request can never run on this budget, or None if it can.

    A request whose prompt + max_new_tokens needs more blocks than an empty
    cache offers (minus the paged watermark) would never fit, however long it
    waited: reject it at once rather than let it block the queue.

    >>> cfg = AdmissionConfig(kv_budget_bytes=16 * 100 * 10, kv_bytes_per_token=100)   # 10 blocks of 16 tokens
    >>> never_fits_reason(cfg, 100, 60) is None       # 160 tokens = 10 blocks: fits exactly
    True
    >>> never_fits_reason(cfg, 100, 61)
    'never fits: prompt 100 + max_new_tokens 61 = 161 tokens need 11 blocks (17,600 B) but the whole KV budget holds 10 blocks (16,000 B); shorten the request or free KV memory'
    """
    need = lifetime_blocks(config, prompt_tokens, max_new_tokens)
    usable = usable_blocks(config)
    if need <= usable:
        return None
    held = (f"the whole KV budget holds {config.num_blocks:,} blocks ({_size(config.kv_capacity_bytes)})"
            if config.watermark_blocks == 0 else
            f"an empty cache offers {usable:,} blocks ({config.num_blocks:,} less the "
            f"{config.watermark_blocks:,}-block watermark)")
    return (f"never fits: prompt {prompt_tokens:,} + max_new_tokens {max_new_tokens:,} = "
            f"{prompt_tokens + max_new_tokens:,} tokens need {need:,} blocks ({_size(need * config.block_bytes)}) "
            f"but {held}; shorten the request or free KV memory")


def can_admit(config: AdmissionConfig, need_blocks: int, free_blocks: int, running: int) -> bool:
    """The admission test on plain ints (the simulator's fast path).

    Fewer than ``max_num_seqs`` running, and after claiming ``need_blocks`` at
    least the watermark stays free: ``free - need >= watermark_blocks``.

    >>> cfg = AdmissionConfig(kv_budget_bytes=8_388_608 * 715, kv_bytes_per_token=524_288, policy="paged")
    >>> cfg.watermark_blocks            # int(0.01 x 715)
    7
    >>> can_admit(cfg, 38, 45, 0), can_admit(cfg, 38, 44, 0)
    (True, False)
    """
    return running < config.max_num_seqs and free_blocks - need_blocks >= config.watermark_blocks


@dataclass(frozen=True)
class Decision:
    """What to do with a request now: action is "admit", "queue" or "reject"; reason says why."""

    action: str
    reason: str


def decide(config: AdmissionConfig, *, prompt_tokens: int, max_new_tokens: int, free_blocks: int,
           running: int, queued_ahead: int = 0, generated_tokens: int = 0) -> Decision:
    """Decide one request against the current state of the cache.

    free_blocks: blocks free now. running: requests running now.
    queued_ahead: requests waiting ahead of this one; under FCFS any wait
    ahead means this one waits too. generated_tokens: tokens a preempted
    request had generated (paged recompute).

    Order of checks: never fits -> reject; FCFS wait -> queue (or reject if
    the queue is full); max_num_seqs -> queue; blocks -> queue; else admit.

    >>> cfg = AdmissionConfig(kv_budget_bytes=16 * 100 * 10, kv_bytes_per_token=100)   # 10 blocks
    >>> decide(cfg, prompt_tokens=20, max_new_tokens=12, free_blocks=2, running=3).action   # 32 tokens = 2 blocks
    'admit'
    >>> decide(cfg, prompt_tokens=20, max_new_tokens=12, free_blocks=2, running=3, queued_ahead=1).reason
    'queue: 1 request(s) wait ahead of it and admission is first come, first served'
    """
    never = never_fits_reason(config, prompt_tokens, max_new_tokens)
    if never:
        return Decision(REJECT, never)
    cap = config.max_queue_len
    if queued_ahead:
        if cap is not None and queued_ahead >= cap:
            return Decision(REJECT, queue_full_reason(config, queued_ahead))
        return Decision(QUEUE, f"queue: {queued_ahead} request(s) wait ahead of it and admission is "
                               f"first come, first served")
    need = admission_blocks(config, prompt_tokens, max_new_tokens, generated_tokens)
    if can_admit(config, need, free_blocks, running):
        return Decision(ADMIT, admit_reason(config, prompt_tokens, max_new_tokens, need, free_blocks,
                                            generated_tokens))
    if cap is not None and cap == 0:
        return Decision(REJECT, queue_full_reason(config, 0))
    return Decision(QUEUE, blocked_reason(config, prompt_tokens, max_new_tokens, need, free_blocks, running,
                                          generated_tokens))


# ------------------------------------------------------------------ reasons, in words

def _size(num_bytes: int) -> str:
    if num_bytes >= 10**7:
        return f"{num_bytes / GB:.3f} GB"
    return f"{num_bytes:,} B"


def _what(config: AdmissionConfig, prompt_tokens: int, max_new_tokens: int, generated_tokens: int) -> str:
    if config.policy == RESERVE_MAX:
        return f"prompt {prompt_tokens:,} + max_new_tokens {max_new_tokens:,} = {prompt_tokens + max_new_tokens:,} tokens"
    if generated_tokens:
        return (f"recompute of prompt {prompt_tokens:,} + {generated_tokens:,} generated = "
                f"{prompt_tokens + generated_tokens:,} tokens")
    return f"prompt {prompt_tokens:,} tokens"


def admit_reason(config: AdmissionConfig, prompt_tokens: int, max_new_tokens: int, need_blocks: int,
                 free_blocks: int, generated_tokens: int = 0) -> str:
    """Why a request was admitted: its blocks, and the blocks that were free."""
    return (f"admit: {config.policy} claims {need_blocks:,} blocks for "
            f"{_what(config, prompt_tokens, max_new_tokens, generated_tokens)}; "
            f"{free_blocks:,} of {config.num_blocks:,} were free")


def blocked_reason(config: AdmissionConfig, prompt_tokens: int, max_new_tokens: int, need_blocks: int,
                   free_blocks: int, running: int, generated_tokens: int = 0) -> str:
    """Why the head of the queue cannot start now but can later."""
    if running >= config.max_num_seqs:
        return f"queue: {running} requests are running, the max_num_seqs limit; it can start when one finishes"
    wm = config.watermark_blocks
    keep = f" and keep the {wm:,}-block watermark free" if wm else ""
    return (f"queue: {config.policy} needs {need_blocks:,} free blocks "
            f"({_what(config, prompt_tokens, max_new_tokens, generated_tokens)} = "
            f"{_size(need_blocks * config.block_bytes)}){keep}, only {max(free_blocks, 0):,} of "
            f"{config.num_blocks:,} are free ({_size(max(free_blocks, 0) * config.block_bytes)}); "
            f"it can start when running requests finish")


def queue_full_reason(config: AdmissionConfig, queued: int) -> str:
    """Service-policy rejection: the queue already holds max_queue_len requests."""
    return (f"rejected by service policy: it cannot start now and {queued} request(s) already wait, "
            f"max_queue_len={config.max_queue_len}")


def wait_expired_reason(config: AdmissionConfig, waited_steps: int) -> str:
    """Service-policy rejection: still waiting after max_wait_steps."""
    return (f"rejected by service policy: still queued after {waited_steps} steps, "
            f"max_wait_steps={config.max_wait_steps}")

