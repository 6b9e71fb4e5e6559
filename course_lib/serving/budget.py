"""The serving-memory budget: add the pools before deciding what can start.

Five pools share one device:

==============  ===================  ==========================================
pool            kind                 what it holds
==============  ===================  ==========================================
weights         fixed                parameters x bytes per value
workspace       fixed                activation peak of a prefill chunk + runtime overhead
reserve         fixed                memory we choose never to fill (safety margin)
kv_cache        grows                keys/values of every active token
request_state   grows                per-sequence logits buffer, token ids, block table
recurrent       grows                hybrids only: linear-attention state, fixed per sequence
==============  ===================  ==========================================

A hybrid model (Qwen3-Next, Qwen3.5) adds a sixth pool: each active sequence
holds a linear-attention state of the same size at any length. It grows with
active sequences, not with tokens, so it is its own line.

The lesson's example, checked by hand: a 24 GB device, 14 GB weights, 2 GB
workspace and 2 GB reserve leave 24 - 14 - 2 - 2 = 6 GB for requests. At
1.5 GB per request 6 / 1.5 = 4 fit, and the 5th crosses the safe budget.

>>> b = plan_budget(device_bytes=24 * GB, weights_bytes=14 * GB, workspace_bytes=2 * GB,
...                 reserve_bytes=2 * GB, per_sequence_kv_bytes=1_500_000_000, active_sequences=5)
>>> b.request_budget_bytes
6000000000
>>> b.max_active_sequences, b.first_crossing_sequences, b.fits
(4, 5, False)
>>> b.headroom_bytes
-1500000000
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import DType, get_dtype
from ..errors import CourseInputError, check_count
from ..model.models import (ModelSpec, checkpoint_words, formula_weight_bytes, kv_cache_bytes_per_sequence,
                     kv_cache_bytes_per_token, params_per_gpu, replicated_params, state_bytes_per_sequence, weight_bytes,
                     weights_format)
from ..model.quantization import WeightFormat
from ..units import GB, MiB, parse_bytes

FIXED = "fixed"
#: A pool that grows with active requests (and with their length): the lesson's "request-dependent state".
GROWS = "grows"
#: The old name of GROWS (its value was "request-dependent" before the lesson and the library agreed on "grows").
REQUEST_DEPENDENT = GROWS
POOL_ORDER = ("weights", "workspace", "reserve", "kv_cache", "request_state")
#: The sixth pool, present only for hybrid (linear-attention) models.
RECURRENT_POOL = "recurrent"
#: The recurrent pool's note: what sets its size.
RECURRENT_NOTE = "grows with active sequences, not with tokens"


@dataclass(frozen=True)
class Pool:
    """One named slice of device memory.

    name: one of POOL_ORDER. bytes: its size (int). kind: FIXED or
    GROWS. note: where the figure comes from, in words.
    """

    name: str
    bytes: int
    kind: str
    note: str = ""


@dataclass(frozen=True)
class Budget:
    """A device's memory split into pools, and what that means for concurrency.

    device_bytes: what the device reports in total.
    pools: the five pools in POOL_ORDER at ``active_sequences``, then RECURRENT_POOL for a
        hybrid model (present only when it is not empty).
    used_bytes: sum of all pools (the reserve counts as used: it is budgeted, not free).
    headroom_bytes: device_bytes - used_bytes; negative means it does not fit.
    per_sequence_bytes: kv_cache + request_state of one active sequence.
    max_active_sequences: the most sequences whose pools fit.
    first_crossing_sequences: max_active_sequences + 1, the count that crosses.
    """

    device_bytes: int
    pools: tuple[Pool, ...]
    active_sequences: int
    per_sequence_kv_bytes: int
    per_sequence_state_bytes: int
    per_sequence_recurrent_bytes: int = 0

    @property
    def parts(self) -> dict[str, int]:
        return {p.name: p.bytes for p in self.pools}

    @property
    def fixed_bytes(self) -> int:
        return sum(p.bytes for p in self.pools if p.kind == FIXED)

    @property
    def request_budget_bytes(self) -> int:
        """Bytes left for request-dependent state: device minus the fixed pools (may be < 0)."""
        return self.device_bytes - self.fixed_bytes

    @property
    def used_bytes(self) -> int:
        return sum(p.bytes for p in self.pools)

    @property
    def headroom_bytes(self) -> int:
        return self.device_bytes - self.used_bytes

    @property
    def fits(self) -> bool:
        return self.headroom_bytes >= 0

    @property
    def per_sequence_bytes(self) -> int:
        return self.per_sequence_kv_bytes + self.per_sequence_state_bytes + self.per_sequence_recurrent_bytes

    @property
    def max_active_sequences(self) -> int:
        if self.request_budget_bytes < 0:
            return 0
        if self.per_sequence_bytes == 0:
            raise CourseInputError("per-sequence bytes are 0, so any number of sequences fits; give a per-sequence size > 0")
        return self.request_budget_bytes // self.per_sequence_bytes

    @property
    def first_crossing_sequences(self) -> int:
        return self.max_active_sequences + 1

    def verdict(self) -> str:
        """One line a learner can read: fits with X to spare, or over by Y."""
        if self.fits:
            return (f"fits: {self.active_sequences} active sequences leave {self.headroom_bytes / GB:.2f} GB "
                    f"headroom (at most {self.max_active_sequences} fit)")
        return (f"does not fit: {self.active_sequences} active sequences exceed the device by "
                f"{-self.headroom_bytes / GB:.2f} GB (at most {self.max_active_sequences} fit)")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values; every size is an int of bytes."""
        parts = self.parts
        return {
            "device_bytes": self.device_bytes,
            "weights_bytes": parts["weights"],
            "workspace_bytes": parts["workspace"],
            "reserve_bytes": parts["reserve"],
            "kv_cache_bytes": parts["kv_cache"],
            "request_state_bytes": parts["request_state"],
            "recurrent_bytes": parts.get(RECURRENT_POOL, 0),
            "per_sequence_bytes": self.per_sequence_bytes,
            "per_sequence_kv_bytes": self.per_sequence_kv_bytes,
            "per_sequence_state_bytes": self.per_sequence_state_bytes,
            "per_sequence_recurrent_bytes": self.per_sequence_recurrent_bytes,
            "fixed_bytes": self.fixed_bytes,
            "request_budget_bytes": self.request_budget_bytes,
            "used_bytes": self.used_bytes,
            "headroom_bytes": self.headroom_bytes,
            "active_sequences": self.active_sequences,
            "fits": self.fits,
            "max_active_sequences": self.max_active_sequences,
            "first_crossing_sequences": self.first_crossing_sequences,
            "pools": [{"name": p.name, "bytes": p.bytes, "kind": p.kind, "note": p.note} for p in self.pools],
            "verdict": self.verdict(),
        }


def resolve_reserve(reserve: int | str | float | None, device_bytes: int) -> int:
    """Reserve bytes from an absolute size ("2GB", 2_000_000_000) or a fraction.

    A fraction is written "10%", or given as a float in (0, 1): the share of the
    device never filled, like vLLM's ``gpu_memory_utilization = 1 - fraction``.

    >>> resolve_reserve("10%", 24 * GB)
    2400000000
    >>> resolve_reserve(0.1, 24 * GB)
    2400000000
    >>> resolve_reserve("2GB", 24 * GB)
    2000000000
    """
    if reserve is None:
        return 0
    fraction = None
    if isinstance(reserve, float) and not isinstance(reserve, bool) and 0 <= reserve < 1:
        fraction = reserve
    elif isinstance(reserve, str) and reserve.strip().endswith("%"):
        try:
            fraction = float(reserve.strip()[:-1]) / 100
        except ValueError:
            raise CourseInputError(f"reserve={reserve!r} is not a percentage; use e.g. 10% or a size such as 2GB") from None
        if not 0 <= fraction < 1:
            raise CourseInputError(f"reserve={reserve!r} is outside 0%..100%; use e.g. 10% or a size such as 2GB")
    if fraction is not None:
        return round(device_bytes * fraction)
    return parse_bytes(reserve, name="reserve")


def plan_budget(*, device_bytes: int | str, weights_bytes: int | str, workspace_bytes: int | str = 0,
                reserve_bytes: int | str | float = 0, per_sequence_kv_bytes: int | str,
                per_sequence_state_bytes: int | str = 0, active_sequences: int = 0,
                notes: dict[str, str] | None = None, per_sequence_recurrent_bytes: int | str = 0) -> Budget:
    """Build a :class:`Budget` from pool sizes (ints of bytes, or size strings).

    ``per_sequence_recurrent_bytes`` is a hybrid model's linear-attention state
    per sequence; when non-zero it becomes the recurrent pool.
    """
    device = parse_bytes(device_bytes, name="gpu")
    if device == 0:
        raise CourseInputError("gpu=0 bytes; give the device's memory, e.g. 24GB or a preset such as rtx-4090")
    weights = parse_bytes(weights_bytes, name="weights")
    workspace = parse_bytes(workspace_bytes, name="workspace")
    reserve = resolve_reserve(reserve_bytes, device)
    kv = parse_bytes(per_sequence_kv_bytes, name="per_sequence")
    state = parse_bytes(per_sequence_state_bytes, name="request_state")
    recurrent = parse_bytes(per_sequence_recurrent_bytes, name="recurrent")
    n = check_count("active_sequences", active_sequences, 0)
    notes = notes or {}
    pools = (
        Pool("weights", weights, FIXED, notes.get("weights", "")),
        Pool("workspace", workspace, FIXED, notes.get("workspace", "")),
        Pool("reserve", reserve, FIXED, notes.get("reserve", "")),
        Pool("kv_cache", n * kv, GROWS, notes.get("kv_cache", "")),
        Pool("request_state", n * state, GROWS, notes.get("request_state", "")),
    )
    if recurrent:
        pools += (Pool(RECURRENT_POOL, n * recurrent, GROWS,
                       notes.get(RECURRENT_POOL, RECURRENT_NOTE)),)
    return Budget(device, pools, n, kv, state, recurrent)


# ------------------------------------------------------------------ estimates

#: Default prefill chunk, in tokens (vLLM's chunked prefill processes a few thousand per step).
DEFAULT_PREFILL_CHUNK_TOKENS = 2048
#: Default runtime overhead: CUDA context, cuBLAS/NCCL workspaces, allocator slack
#: (typically 300-800 MiB; `course-memory measure` shows yours).
DEFAULT_RUNTIME_OVERHEAD_BYTES = 512 * MiB
#: Default reserve of the lesson's model: 10% of the device never filled (vLLM's gpu_memory_utilization was
#: 0.9 for most of its history; current releases default to 0.92: see course_lib.runtimes.vllm.estimate).
DEFAULT_RESERVE = "10%"
#: What ``estimate`` without a runtime is, in the words its output uses.
LESSON_MODEL_NOTE = ("the lesson's simple model: workspace = one prefill chunk's activation peak + a fixed "
                     "overhead, reserve = a share of the device; not a runtime's own sizing (see --runtime)")


def activation_peak_bytes(spec: ModelSpec, chunk_tokens: int, dtype: str | DType = "fp16",
                          tensor_parallel: int = 1) -> int:
    """Peak activation bytes of one decoder layer during a prefill chunk (fused attention).

    Alive together at the MLP, the widest point: the residual stream and its
    normed copy (2 x hidden) plus the gate, up and their product (3 x intermediate
    / N), per token. Attention's q/k/v/out (4 x hidden) are freed by then; with
    a fused (flash) kernel no tokens x tokens score matrix is kept. Logits are
    computed for the last token only, so they live in request_state instead.

    >>> from course_lib.model.presets import get_model
    >>> spec = get_model("llama-2-7b")
    >>> activation_peak_bytes(spec, 2048)     # 2048 x (2x4096 + 3x11008) x 2 B
    168820736
    """
    tokens = check_count("prefill_chunk_tokens", chunk_tokens, 1)
    tp = check_count("tensor_parallel", tensor_parallel, 1)
    width = max(2 * spec.hidden_size + 3 * math.ceil(spec.intermediate_size / tp),
                6 * spec.hidden_size)
    return get_dtype(dtype).bytes_for(tokens * width)


def request_state_bytes_per_sequence(vocab_size: int, context_tokens: int, block_size: int = 16) -> int:
    """Per-sequence bookkeeping outside the KV cache.

    A fp32 logits row for sampling (vocab x 4 B), the token ids (context x 8 B,
    int64) and the block table (ceil(context / block_size) x 4 B, int32).

    >>> request_state_bytes_per_sequence(32000, 1024)   # 128,000 + 8,192 + 256
    136448
    """
    vocab = check_count("vocab_size", vocab_size, 1)
    ctx = check_count("context_tokens", context_tokens, 0)
    block = check_count("block_size", block_size, 1)
    return vocab * 4 + ctx * 8 + math.ceil(ctx / block) * 4


@dataclass(frozen=True)
class Estimate:
    """A model on a device: its weights, KV cache per token, and the resulting budget.

    All byte figures are per GPU when tensor_parallel > 1.
    """

    spec: ModelSpec
    dtype: str
    kv_dtype: str
    tensor_parallel: int
    context_tokens: int
    kv_cache_bytes_per_token: int
    activation_peak_bytes: int
    runtime_overhead_bytes: int
    budget: Budget
    replicated: dict[str, int] = field(default_factory=dict)
    weights_reason: str = ""
    weights_source: str = "formula"
    weights_formula_bytes: int = 0
    recurrent_state_bytes_per_sequence: int = 0
    state_dtype: str = "fp32"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "estimate_model": LESSON_MODEL_NOTE,
            "model": self.spec.name,
            "model_type": self.spec.model_type,
            **({"architectures": list(self.spec.architectures), "resolved_by": self.spec.resolved_by}
               if self.spec.resolved_by else {}),
            "attention": self.spec.attention,
            "params_total": self.spec.params_total,
            "params_per_gpu": params_per_gpu(self.spec, self.tensor_parallel),
            "params_by_group": dict(self.spec.params),
            "buffers_total": self.spec.buffers_total,
            "dtype": self.dtype,
            "kv_dtype": self.kv_dtype,
            "tensor_parallel": self.tensor_parallel,
            "context_tokens": self.context_tokens,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "sliding_window_layers": self.spec.sliding_window_layers,
            "activation_peak_bytes": self.activation_peak_bytes,
            "runtime_overhead_bytes": self.runtime_overhead_bytes,
            "replicated_params_per_gpu": self.replicated,
            "dtype_reason": self.weights_reason,
            "weights_source": self.weights_source,
            "weights_formula_bytes": self.weights_formula_bytes,
            "counted": list(self.spec.counted),
            "not_loaded_params": dict(self.spec.not_loaded),
            "notes": list(self.spec.notes),
            "recurrent_state_layers": len(self.spec.states),
            "recurrent_state_bytes_per_sequence": self.recurrent_state_bytes_per_sequence,
            "state_dtype": self.state_dtype,
        }
        if self.spec.checkpoint is not None:   # the folder's bytes as stored; weights_bytes is them as served
            out["checkpoint_stored_bytes"] = self.spec.checkpoint.total_bytes
        out.update(self.budget.to_dict())
        return out


def estimate(spec: ModelSpec, *, gpu: int | str, dtype: str | None = None, kv_dtype: str | None = None,
             context_tokens: int = 4096, active_sequences: int = 1, tensor_parallel: int = 1,
             workspace: int | str | None = None, reserve: int | str | float | None = DEFAULT_RESERVE,
             prefill_chunk_tokens: int = DEFAULT_PREFILL_CHUNK_TOKENS,
             runtime_overhead: int | str = DEFAULT_RUNTIME_OVERHEAD_BYTES, block_size: int = 16,
             state_dtype: str = "fp32") -> Estimate:
    """Budget a model on a device, pool by pool, per GPU.

    This is the lesson's simple model (one prefill chunk's activation peak, a fixed
    overhead, a reserve share), not any runtime's own sizing rule: for what vLLM,
    SGLang or TensorRT-LLM will allocate, see :mod:`course_lib.runtimes`.

    ``gpu`` is a preset name (its CUDA-visible total) or a size. ``dtype`` None
    follows the checkpoint (its ``torch_dtype`` and ``quantization_config``; a model
    folder's exact safetensors bytes when read); a name is the weight format
    (:func:`~course_lib.model.quantization.format_for_dtype`: a quantized dtype quantizes
    the linear layers only). ``kv_dtype`` defaults to the compute dtype, never to a
    quantized weight dtype.
    ``workspace`` overrides the computed activation peak + runtime overhead.
    ``reserve`` is a size or a fraction. ``state_dtype`` is a hybrid model's
    recurrent-state dtype (its conv state uses the KV dtype).
    """
    from ..model.presets import gpu_bytes  # local: presets imports models, not budget

    device = gpu_bytes(gpu)
    tp = check_count("tensor_parallel", tensor_parallel, 1)
    ctx = check_count("context_tokens", context_tokens, 1)
    # Weights and KV cache apart: the weight format (the config's, or --dtype's) never sets the KV dtype,
    # which is the compute dtype unless kv_dtype says otherwise (vLLM's kv_cache_dtype="auto").
    fmt: WeightFormat = weights_format(spec, dtype)
    weights = weight_bytes(spec, None if dtype is None else fmt, tp)
    kdt = get_dtype(kv_dtype or fmt.compute_dtype)
    source = "checkpoint" if dtype is None and spec.checkpoint is not None else "formula"
    wdt = fmt.base if fmt.quantized is None else fmt.quantized
    formula = formula_weight_bytes(spec, tp) if source == "checkpoint" else weights
    per_token = kv_cache_bytes_per_token(spec, kdt, tp)
    per_seq_kv = kv_cache_bytes_per_sequence(spec, ctx, kdt, tp)
    sdt = get_dtype(state_dtype)
    conv_dtype = kdt if kdt.bits >= 16 and not kdt.group_size else get_dtype(fmt.compute_dtype)
    recurrent = state_bytes_per_sequence(spec, sdt, conv_dtype, tp)
    act_dtype = get_dtype(fmt.compute_dtype)
    peak = activation_peak_bytes(spec, prefill_chunk_tokens, act_dtype, tp)
    overhead = parse_bytes(runtime_overhead, name="runtime_overhead")
    if workspace is None:
        workspace_b, ws_note = peak + overhead, f"activation peak of a {prefill_chunk_tokens}-token prefill chunk + runtime overhead"
    else:
        workspace_b, ws_note = parse_bytes(workspace, name="workspace"), "given"
    state = request_state_bytes_per_sequence(spec.vocab_size, ctx, block_size)
    # DeepSeek-V4 keeps two caches in a compressed layer (its window, its compressed entries): count caches then
    caches = len(spec.layers) > spec.num_layers
    of = f"{len(spec.layers)} caches of {spec.num_layers} layers" if caches else f"{spec.num_layers} layers"
    windowed = f", {spec.sliding_window_layers} of {of} capped by a window" if spec.sliding_window_layers else ""
    if spec.states and not caches:
        windowed += f", {len(spec.layers)} of {spec.num_layers} layers cache K/V"
    stateful = "compressed-attention layers' compressor" if caches else "linear-attention layers"
    tp_note = f", TP={tp}" if tp > 1 else ""
    if source == "checkpoint":
        formula_words = (f"the formula gives {formula:,} B" if "given" not in spec.params
                         else "no formula for this family")
        weights_note = f"{checkpoint_words(spec)}{tp_note}; {formula_words}"
    elif fmt.quantized is not None:
        weights_note = f"{params_per_gpu(spec, tp):,} params: {fmt.describe()}{tp_note}"
    else:
        weights_note = f"{params_per_gpu(spec, tp):,} params x {fmt.base.bytes_per_value} B ({fmt.base.name}){tp_note}"
    budget = plan_budget(
        device_bytes=device, weights_bytes=weights, workspace_bytes=workspace_b,
        reserve_bytes=reserve if reserve is not None else 0, per_sequence_kv_bytes=per_seq_kv,
        per_sequence_state_bytes=state, active_sequences=active_sequences,
        per_sequence_recurrent_bytes=recurrent,
        notes={
            "weights": weights_note,
            "workspace": ws_note,
            "reserve": f"{reserve}" if reserve is not None else "none",
            "kv_cache": f"{per_token:,} B/token x {ctx} tokens x sequences ({kdt.name}{windowed})",
            "request_state": "fp32 logits row + token ids + block table, per sequence",
            RECURRENT_POOL: (f"{recurrent:,} B per sequence ({len(spec.states)} {stateful}, "
                                f"{sdt.name} recurrent + {conv_dtype.name} conv state): {RECURRENT_NOTE}"),
        },
    )
    return Estimate(spec, wdt.name, kdt.name, tp, ctx, per_token, peak, overhead, budget,
                    replicated_params(spec, tp) if tp > 1 else {}, fmt.describe(), source, formula,
                    recurrent, sdt.name)
