"""SGLang's own sizing rule: a static pool of ``mem_fraction_static`` of the memory free at start.

SGLang (``python/sglang/srt/model_executor/model_runner.py``, ``profile_max_num_token``) reads
the memory free after distributed init (``Load weight begin. avail mem=X GB``), loads the
weights, and gives the KV pool what is left of the static share::

    rest = avail_after_weights - avail_at_start x (1 - mem_fraction_static)
    max_total_num_tokens = int(rest x 2^30 // cell_size)       # cell_size: one token's K and V, all layers

The ``1 - mem_fraction_static`` share is what activations, the sampler and CUDA graphs use at
run time: unlike vLLM, nothing is profiled. SGLang's "GB" are GiB (it divides by ``1 << 30``).

``mem_fraction_static``'s default (``python/sglang/srt/server_args.py``): before v0.5.3 it was
0.88 / 0.87 / 0.85 / 0.81 / 0.79 for TP 1 / 2 / 4-7 / 8-15 / 16+; from v0.5.3 (PR #10975,
"General heuristics for --mem-fraction-static") it is ``(gpu_mem - reserved) / gpu_mem`` with
``reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs + 1024 x TP x
PP / 8`` MiB (at least 10 GiB on GPUs above 60 GiB), the batch sizes bucketed by GPU memory.

Worked example, the visible L4 log (QwQ-32B, TP 4, ``mem_fraction_static=0.85``): 21.63 GiB
free at start, 15.54 GiB of weights, so 21.63 - 15.54 - 21.63 x 0.15 = 2.85 GiB for 65,536 B a
token: 46,5xx tokens (logged: 46,611; K and V 1.42 GB each).

>>> from course_lib.model.models import from_hf_config
>>> est = estimate_sglang(from_hf_config({"model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 27648,
...     "num_hidden_layers": 64, "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 152064,
...     "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}), gpu="l4",
...     launch=SglangLaunch(tensor_parallel=4, mem_fraction_static=0.85, version="0.4.3"))
>>> round(est.runtime_kv_cache_bytes / 2**30, 1), est.kv_cache_tokens // 1000
(2.8, 46)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from ..dtypes import get_dtype
from ..errors import CourseInputError
from ..model.models import kv_cache_bytes_per_token, weights_format
from ..model.presets import gpu_bytes
from ..model.spec import ModelSpec
from ..units import GiB, MiB
from .profile import cuda_graph_bytes, offloaded_bytes, rotary_cache_bytes, stage_weight_bytes, stages
from .releases import Change, History, TypedRules
from .result import RuntimeEstimate, Term
from .sglang_spec import SPEC_MAX_RUNNING_REQUESTS, SglangSpeculative, joint_cell_bytes, sglang_drafter, spec_capture_sizes
from .versions import Version

#: SGLang's release history as data (see :mod:`.releases`): what changed in which release, citing its file.
#: Rules: mem_fraction ("by-tp" or "reserved"), small_gpu (chunked_prefill_size and cuda_graph_max_bs at TP < 4 /
#: TP >= 4 on GPUs of 20-35 GiB), prefill_graphs (piecewise / prefill CUDA graphs on by default on CUDA, whose
#: non-torch memory the reserve counts).
class MemFraction(str, Enum):
    """How ``mem_fraction_static``'s default is chosen."""
    BY_TP = "by-tp"            # by tensor-parallel size
    RESERVED = "reserved"      # the reserved-memory heuristic (PR #10975)

    def __str__(self) -> str:
        return self.value


class SpecPool(str, Enum):
    """How the speculative draft's weights and KV pool meet the target's budget (see :mod:`.sglang_spec`)."""
    UNREAD = "unread"          # releases before 0.5.5: not read, speculative decoding refused
    HEADROOM = "headroom"      # 0.5.5: target profiled alone, its pool + reqs x (steps x topk + draft tokens) + 100
    SHARED = "shared"          # 0.5.10: target profiled alone; the draft pool takes as many tokens, from the reserve
    JOINT = "joint"            # 0.5.20: draft weights loaded before the profile; one cell holds target + draft KV

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SglangRules(TypedRules):
    """One SGLang release's rules (see :data:`HISTORY`), typed."""

    mem_fraction: MemFraction
    small_gpu: tuple[int, int, int]
    prefill_graphs: bool
    vlm_fraction: bool         # a multimodal model's share cut by its vision tower's size (0.5.20)
    mm_reserve_mib: int        # MiB kept out of the KV budget for the embedding cache (0.5.20)
    spec_pool: SpecPool        # speculative decoding's pool rule (0.5.5, 0.5.10, 0.5.20)
    spec_reserve_mib: tuple[int, int]   # MiB the default reserve adds for (EAGLE family, STANDALONE) drafts
    spec_prefill_graphs_off: bool       # speculative decoding turns prefill (piecewise) graphs off
    spec_auto_default: tuple[int, int, int]  # auto (steps, topk, draft tokens) of an architecture not listed


Rules = SglangRules

HISTORY = History("sglang", (
    Change("0.3.0", {"mem_fraction": "by-tp", "small_gpu": (2048, 24, 80), "prefill_graphs": False,
                     "vlm_fraction": False, "mm_reserve_mib": 0, "spec_pool": "unread", "spec_reserve_mib": (0, 0),
                     "spec_prefill_graphs_off": False, "spec_auto_default": (5, 4, 8)},
           "python/sglang/srt/server_args.py (0.3.0)", checked_by="visible L4 log (0.4.3)"),
    # Speculative decoding, read in the 0.5.5, 0.5.10, 0.5.20 and 0.5.23 wheels only: 0.5.6-0.5.9 take 0.5.5's rule
    # here and 0.5.11-0.5.19 0.5.10's (not read). No published log with a speculative launch checks them.
    Change("0.5.5", {"spec_pool": "headroom", "spec_reserve_mib": (2048, 6144)},
           "python/sglang/srt/server_args.py _handle_gpu_memory_settings ('eagle draft models and cuda graphs': "
           "reserved_mem += 2 * 1024, STANDALONE 6 * 1024) and model_executor/model_runner.py init_memory_pool "
           "(draft_runner_cache_size = max_total_num_tokens + max_num_reqs x (steps x topk + num_draft_tokens) "
           "+ 100), 0.5.5"),
    Change("0.5.10", {"spec_pool": "shared", "spec_reserve_mib": (4096, 6144), "spec_prefill_graphs_off": True,
                      "spec_auto_default": (3, 1, 4)},
           "python/sglang/srt/server_args.py (0.5.10: reserved_mem += 4 * 1024; '2. Speculative decoding' disables "
           "piecewise CUDA graphs; auto params (3, 1, 4)) and model_executor/model_runner_kv_cache_mixin.py "
           "init_memory_pool (the draft takes the target's memory_pool_config: same #tokens, no headroom)"),
    Change("0.5.20", {"spec_pool": "joint", "spec_reserve_mib": (0, 0), "spec_prefill_graphs_off": False},
           "python/sglang/srt/managers/scheduler.py init_model_worker (draft worker built before init_memory_pools), "
           "model_executor/pool_configurator.py DefaultPoolConfigurator (cell += int(cell x "
           "eagle_draft_num_layers / num_layers)) and arg_groups/memory_hook.py (no speculative reserve), 0.5.20 "
           "and 0.5.23: 'If using speculative decoding, draft weights are now counted'"),
    Change("0.5.3", {"mem_fraction": "reserved"},
           "python/sglang/srt/server_args.py (0.5.3, PR #10975: 'General heuristics for --mem-fraction-static')",
           checked_by="development set 0.5.8.post1 MI35x logs"),
    Change("0.5.10", {"prefill_graphs": True},
           "python/sglang/srt/server_args.py (0.5.10): disable_piecewise_cuda_graph = False by default (off on "
           "ROCm, with PP > 1, multimodal models, CPU offload); the reserve adds len(piecewise_cuda_graph_tokens) x "
           "8 MiB (MLA: 1.5 GiB), tokens up to chunked_prefill_size"),
    Change("0.5.20", {"small_gpu": (4096, 48, 160)},
           "python/sglang/srt/arg_groups/memory_hook.py (0.5.20): 'A10, 4090, 5090 (chunked_prefill_size 4k, "
           "max_bs 48 if tp < 4 else 160)'"),
    # Read in the 0.5.20 and 0.5.23 wheels (identical on this path; releases before 0.5.20 not read for it): a
    # multimodal model's default share is cut by the vision tower's size, and the KV budget keeps 100 MiB
    # (SGLANG_VLM_CACHE_SIZE_MB) for the embedding cache. 0.5.23 otherwise sizes the pool as 0.5.20 does:
    # post-capture KV sizing exists but is opt-in (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=False by default,
    # environ.py), and only the DP-attention reserve changed (attn_dp_size; DP attention is not modelled).
    Change("0.5.20", {"vlm_fraction": True, "mm_reserve_mib": 100},
           "python/sglang/srt/arg_groups/memory_hook.py adjust_mem_fraction_for_vlm and "
           "mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb (0.5.20, 0.5.23)"),
), known=("0.3", "0.4", *(f"0.5.{p}" for p in range(24))), rules_type=SglangRules)
KNOWN_VERSIONS = HISTORY.known
LATEST = HISTORY.latest
#: PR #10975 replaced the TP-keyed mem_fraction_static with the reserved-memory heuristic (SGLang v0.5.3): the
#: first release whose ``mem_fraction`` rule is "reserved" in :data:`HISTORY` (read from the table, not restated).
RESERVED_HEURISTIC_SINCE = next(c.version for c in HISTORY.changes if c.sets.get("mem_fraction") == "reserved")

#: Memory in use before the weights load, per GPU: the CUDA context (fitted on the visible L4 log: 22.03 GiB
#: total, 21.63 free at "Load weight begin", of which 0.13 GB is "Init torch distributed ends. mem usage=0.13 GB").
CONTEXT_BYTES = round(0.27 * GiB)
#: What torch.distributed's init takes under TP (that log's own figure).
DISTRIBUTED_INIT_BYTES = round(0.13 * GiB)
#: What the load takes beyond the parameters and the rotary cache (SGLang measures the load as free memory before
#: minus after, so lazily loaded CUDA modules and cuBLAS workspaces count): fitted on the same log, whose
#: "mem usage=15.54 GB" is 0.22 GiB above QwQ-32B's 15.26 GiB per GPU and its 0.06 GiB rotary cache.
LOAD_OVERHEAD_BYTES = round(0.22 * GiB)
#: CUDA-graph pool per captured batch size and layer: fitted on that log's "Capture cuda graph end ... mem
#: usage=0.93 GB" (13 sizes up to cuda_graph_max_bs 80, 64 layers).
CUDA_GRAPH_MIB_PER_GRAPH_LAYER = 1.1


@dataclass(frozen=True)
class SglangLaunch:
    """The knobs of one ``python -m sglang.launch_server``, named as SGLang names them; None takes the default.

    version: the SGLang release. mem_fraction_static: the static share (weights + KV pool) of the free memory.
    chunked_prefill_size / cuda_graph_max_bs: enter the v0.5.3+ default of mem_fraction_static.
    kv_cache_dtype: "auto" or fp8_e4m3 / fp8_e5m2. dtype: the weights. context_length: max tokens of a request.
    tensor_parallel / pipeline_parallel: GPUs per replica. disable_cuda_graph: no graphs.
    cpu_offload_gb: GiB of decoder-layer weights kept in CPU memory, per GPU (see profile.offloaded_bytes).
    free_at_start_bytes: the memory free when the weights start loading, when known (a log's
    "Load weight begin. avail mem=X GB"); otherwise the CUDA total minus the context.
    """

    version: str | Version | None = None
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str | None = None
    context_length: int | None = None
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    disable_cuda_graph: bool = False
    free_at_start_bytes: int | None = None
    cpu_offload_gb: float = 0.0
    speculative: SglangSpeculative | None = None     # --speculative-algorithm and its knobs (see .sglang_spec)


def _batch_defaults(gpu_mib: float, tp: int, rules: Rules | None = None) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) by GPU memory, as server_args.py buckets them (v0.5.3+)."""
    if gpu_mib < 20 * 1024:
        return 2048, 8
    if gpu_mib < 35 * 1024:
        chunk, small, large = rules.small_gpu if rules is not None else (2048, 24, 80)
        return chunk, small if tp < 4 else large
    if gpu_mib < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if gpu_mib < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def default_mem_fraction_static(version: Version, gpu_total_bytes: int, tp: int, pp: int,
                                chunked_prefill_size: int, cuda_graph_max_bs: int,
                                prefill_graph_mib: float = 0.0, spec_reserve_mib: float = 0.0) -> float:
    """SGLang's default ``mem_fraction_static`` for a release, a GPU and a parallel layout.

    ``prefill_graph_mib``: what the prefill (piecewise) CUDA graphs add to the reserve (0.5.10 on; see
    :func:`prefill_graph_reserve_mib`). ``spec_reserve_mib``: what a speculative draft adds (0.5.5-0.5.19), after
    the 10 GiB floor, as server_args.py adds it.

    >>> default_mem_fraction_static(Version(0, 4, 3), 22 * 2**30, 4, 1, 2048, 80)
    0.85
    >>> default_mem_fraction_static(Version(0, 5, 5), round(79.18 * 2**30), 1, 1, 8192, 256)   # H100: 13,440 MiB kept
    0.834
    """
    if HISTORY.at(version).mem_fraction is MemFraction.BY_TP:      # the release table's row, not a comparison
        return 0.79 if tp >= 16 else 0.81 if tp >= 8 else 0.85 if tp >= 4 else 0.87 if tp >= 2 else 0.88
    gpu_mib = gpu_total_bytes / MiB
    reserved = (512 + max(chunked_prefill_size, 2048) * 1.5 + cuda_graph_max_bs * 2 + tp * pp / 8 * 1024
                + prefill_graph_mib)
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    reserved += spec_reserve_mib
    return round((gpu_mib - reserved) / gpu_mib, 3)


def vlm_fraction_factor(vision_config) -> float:
    """What SGLang multiplies a multimodal model's default ``mem_fraction_static`` by (``adjust_mem_fraction_for_vlm``,
    memory_hook.py, 0.5.20 and 0.5.23): 0.95, times 1 - 0.1 x (the tower's layers x hidden^2 over ViT-L/14's
    24 x 1024^2, minus 1), clamped to [0.8, 1.05]. The tower's size is read as SGLang reads it,
    ``num_hidden_layers`` (default 24) and ``hidden_size`` (default 1024).

    >>> vlm_fraction_factor({"num_hidden_layers": 24, "hidden_size": 1024})       # ViT-L/14 itself: 0.95
    0.95
    >>> round(vlm_fraction_factor({"depth": 27, "hidden_size": 1152}), 4)          # a key SGLang does not read: 24
    0.9248
    """
    layers = vision_config.get("num_hidden_layers", 24)
    hidden = vision_config.get("hidden_size", 1024)
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def _capture_sizes(max_bs: int) -> int:
    """SGLang's cuda_graph_bs: [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + ..., up to max_bs."""
    sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1, 32))
    return sum(1 for s in sizes if s <= max_bs)


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many token counts SGLang captures prefill (piecewise) graphs for, up to ``max_tokens``.

    ``_generate_piecewise_cuda_graph_tokens`` (server_args.py, 0.5.10; ``generate_prefill_cuda_graph_batch_sizes``
    later): range(4, 33, 4) + range(48, 257, 16) + range(288, 513, 32) + range(576, 1025, 64) +
    range(1280, 4097, 256) + range(4608, max + 1, 512).

    >>> prefill_graph_sizes(8192), prefill_graph_sizes(2048)
    (58, 42)
    """
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return sum(1 for s in sizes if s <= max_tokens)


def prefill_graph_reserve_mib(rules: Rules, spec: ModelSpec, gpu: str | int, chunk: int, pp: int,
                              cpu_offload_gb: float) -> tuple[float, str]:
    """What the default prefill graphs add to the reserve (MiB), and why: 8 MiB a captured size, 1.5 GiB under MLA.

    Off before 0.5.10, and where server_args.py turns them off: ROCm (``is_hip()``; ASSUMED still off after
    0.5.18's ``default_prefill_backend``, not traced further), pipeline parallelism, multimodal models, CPU offload.
    """
    if not rules.prefill_graphs:
        return 0.0, ""
    rocm = isinstance(gpu, str) and gpu.strip().lower().startswith("mi")
    if rocm or pp > 1 or spec.vision_config or cpu_offload_gb > 0:
        return 0.0, "prefill graphs off (ROCm, PP, multimodal or CPU offload)"
    if spec.attention == "mla":
        return 1.5 * 1024, "prefill graphs under MLA: 1.5 GiB"
    n = prefill_graph_sizes(chunk)
    return n * 8.0, f"{n} prefill graph sizes x 8 MiB"


def estimate_sglang(spec: ModelSpec, *, gpu: str | int, launch: SglangLaunch | None = None) -> RuntimeEstimate:
    """What SGLang will allocate for ``spec`` on ``gpu`` under ``launch``, per GPU."""
    launch = launch or SglangLaunch()
    why: dict[str, str] = {}
    version = HISTORY.check(launch.version, "--sglang-version")
    rules = HISTORY.at(version)
    if launch.version is None:
        why["version"] = f"{LATEST}: the newest release modelled here"
    total = gpu_bytes(gpu)
    tp, pp = launch.tensor_parallel, launch.pipeline_parallel
    sd = launch.speculative
    if sd is not None and rules.spec_pool is SpecPool.UNREAD:
        raise CourseInputError(f"SGLang {version}'s speculative decoding is not modelled (read from 0.5.5 on); use "
                               f"--sglang-version 0.5.5 or later, or leave out --speculative-algorithm")
    if sd is not None and pp > 1:
        raise CourseInputError("--speculative-algorithm with --pipeline-parallel > 1 is not modelled (SGLang 0.5.5 "
                               "asserts 'PP is not compatible with MTP models'); use --pipeline-parallel 1")
    if total <= 0:
        raise CourseInputError(f"gpu={gpu!r} is 0 bytes; give the device's memory, e.g. 24GB or a preset")
    if pp > max(1, spec.num_layers):
        raise CourseInputError(f"--pipeline-parallel={pp} is more stages than {spec.name} has layers "
                               f"({spec.num_layers}); use at most {spec.num_layers}")
    chunk, max_bs = _batch_defaults(total / MiB, tp, rules)
    if launch.chunked_prefill_size is not None:
        chunk = launch.chunked_prefill_size
    else:
        why["chunked_prefill_size"] = f"{chunk}: the default for a GPU of {total / GiB:.0f} GiB"
    if launch.cuda_graph_max_bs is not None:
        max_bs = launch.cuda_graph_max_bs
    else:
        why["cuda_graph_max_bs"] = f"{max_bs}: the default for a GPU of {total / GiB:.0f} GiB at TP {tp}"
    used = ["small_gpu"] if 20 * 1024 <= total / MiB < 35 * 1024 else []
    mfs = launch.mem_fraction_static
    if mfs is None:
        used.append("mem_fraction")
        prefill_mib, prefill_why = prefill_graph_reserve_mib(rules, spec, gpu, chunk, pp, launch.cpu_offload_gb)
        if sd is not None and rules.spec_prefill_graphs_off and prefill_mib:
            prefill_mib, prefill_why = 0.0, ""
            why["prefill_graphs"] = "off: speculative decoding disables piecewise CUDA graphs (server_args.py)"
            used.append("spec_prefill_graphs_off")
        spec_mib = 0
        if sd is not None and sd.loads_model:
            spec_mib = rules.spec_reserve_mib[1 if sd.algorithm == "STANDALONE" else 0]
            used += ["spec_reserve_mib"] if spec_mib else []
        mfs = default_mem_fraction_static(version, total, tp, pp, chunk, max_bs, prefill_mib, spec_mib)
        used += ["prefill_graphs"] if prefill_mib else []
        why["mem_fraction_static"] = (f"{mfs}: the default of {version} "
                                      + ("(by TP size)" if rules.mem_fraction == "by-tp"
                                         else "((gpu_mem - reserved) / gpu_mem"
                                         + (f"; reserved includes {prefill_why})" if prefill_mib else ")"))
                                      + (f", + {spec_mib} MiB for the {sd.algorithm} draft" if spec_mib else ""))
        if rules.vlm_fraction and spec.vision_config:
            used.append("vlm_fraction")
            factor = vlm_fraction_factor(spec.vision_config)
            mfs = mfs * factor
            why["mem_fraction_static"] += f", x {factor:.4f} for the vision tower = {mfs:.4f}"
    context_length = launch.context_length or spec.max_position_embeddings or 4096
    fmt = weights_format(spec, launch.dtype)
    kv_name = fmt.compute_dtype if launch.kv_cache_dtype in ("auto", None) else get_dtype(
        launch.kv_cache_dtype.replace("_", "-")).name
    stage = stages(spec, tp, pp)[0]
    at_start = launch.free_at_start_bytes or total - CONTEXT_BYTES - (DISTRIBUTED_INIT_BYTES if tp * pp > 1 else 0)
    offloaded = offloaded_bytes(spec, fmt, stage, launch.cpu_offload_gb)
    weights = stage_weight_bytes(spec, fmt, stage) - offloaded + rotary_cache_bytes(spec) + LOAD_OVERHEAD_BYTES
    reserve = math.ceil(at_start * (1 - mfs))
    mm_reserve = rules.mm_reserve_mib * MiB if spec.vision_config else 0
    if mm_reserve:
        used.append("mm_reserve_mib")
    cell = kv_cache_bytes_per_token(spec, get_dtype(kv_name), tp)
    if pp > 1:
        cell = math.ceil(cell * stage.layer_share)
    if cell <= 0:
        raise CourseInputError(f"{spec.name} caches no KV per token (no attention layer): SGLang's token pool is not "
                               f"modelled for it; use --runtime vllm")
    d = None if sd is None else sglang_drafter(spec, sd, fmt=fmt, kv_dtype=get_dtype(kv_name), tp=tp,
                                               other_default=rules.spec_auto_default)
    joint = d is not None and d.kv_layers > 0 and rules.spec_pool is SpecPool.JOINT
    draft_at_profile = d.constructed_bytes if joint else 0
    pool_cell = joint_cell_bytes(cell, spec.num_layers, d.kv_layers) if joint else cell
    available = at_start - weights - draft_at_profile - reserve - mm_reserve
    if available <= 0:
        raise CourseInputError(f"SGLang would refuse this launch: the weights ({(weights + draft_at_profile) / GiB:.2f}"
                               f" GiB{' with the draft' if draft_at_profile else ''}) leave no "
                               f"room for the KV pool in mem_fraction_static={mfs} of {at_start / GiB:.2f} GiB; "
                               f"increase --mem-fraction-static or --tp")
    tokens = available // pool_cell
    spec_terms: tuple[Term, ...] = ()
    spec_notes: tuple[str, ...] = ()
    spec_launch: dict = {}
    if d is not None:
        used.append("spec_pool")
        reqs = SPEC_MAX_RUNNING_REQUESTS
        spec_launch = {"speculative_algorithm": d.algorithm, "speculative_draft_model_path": sd.draft_model_path,
                       "speculative_num_steps": d.steps, "speculative_eagle_topk": d.topk,
                       "speculative_num_draft_tokens": d.draft_tokens, "max_running_requests": reqs}
        why["max_running_requests"] = f"{reqs}: speculative decoding's default (server_args.py)"
        if sd.num_steps is None and sd.loads_model:
            why["speculative_num_steps"] = (f"({d.steps}, {d.topk}, {d.draft_tokens}) for (steps, topk, draft "
                                            f"tokens): auto_choose_speculative_params")
        headroom = 0
        if d.kv_layers and rules.spec_pool is SpecPool.HEADROOM:
            # model_runner.py (0.5.5): the target's pool grows past its profile, into the reserve
            headroom = reqs * d.steps * d.topk + reqs * d.draft_tokens + 100
            tokens += headroom
        draft_kv = tokens * (pool_cell - cell if joint else d.draft_cell_bytes)
        if d.kv_layers:
            in_reserve = d.kept_bytes + draft_kv + headroom * cell if not joint else 0
            spec_terms = (
                Term("draft_weights", d.constructed_bytes if joint else d.kept_bytes,
                     d.note + ("; loaded before the profile, so counted in the static share (0.5.20+)" if joint else
                               "; loaded after the target's pool, in the reserved share"), -1 if joint else 0),
                Term("draft_kv", draft_kv, f"the draft's own pool: {tokens:,} tokens x "
                     f"{pool_cell - cell if joint else d.draft_cell_bytes:,} B ({d.kv_layers} layer(s))"
                     + (", sized with the target's in one cell (pool_configurator.py)" if joint else
                        ", allocated after the target's, in the reserved share"), -1 if joint else 0),
            )
            if headroom:
                spec_terms += (Term("spec_headroom", headroom * cell, f"{headroom:,} tokens the target's pool adds for "
                                    f"draft and verify tokens ({reqs} reqs x ({d.steps} x {d.topk} + "
                                    f"{d.draft_tokens}) + 100), in the reserved share", 0),)
            if not joint and in_reserve > reserve:
                spec_notes += (f"the draft's weights and KV pool ({in_reserve / GiB:.2f} GiB) exceed the reserved "
                               f"share ({reserve / GiB:.2f} GiB) they load into: SGLang would likely run out of memory "
                               f"at start; lower --mem-fraction-static",)
        else:
            spec_notes += (d.note,)
    graphs = 0 if launch.disable_cuda_graph else (
        len(spec_capture_sizes(max_bs, SPEC_MAX_RUNNING_REQUESTS)) if sd is not None else _capture_sizes(max_bs))
    graph = cuda_graph_bytes(graphs, stage.layers, CUDA_GRAPH_MIB_PER_GRAPH_LAYER)
    terms = (
        Term("free_at_start", at_start, f"CUDA total {total / GiB:.2f} GiB - CUDA context"
             + (" - torch.distributed init" if tp * pp > 1 else "") + " (fitted)", +1),
        Term("weights", weights, f"{fmt.describe()}, + rotary cache + load overhead (fitted)"
             + (f"; {offloaded / GiB:.2f} GiB of layers offloaded to the CPU (--cpu-offload-gb)" if offloaded else "")),
        Term("reserved", reserve, f"(1 - mem_fraction_static {mfs:.4g}) x free_at_start: activations, sampler, CUDA graphs"),
        *((Term("mm_reserve", mm_reserve, f"{rules.mm_reserve_mib} MiB of the KV budget kept for the multimodal "
                                          f"embedding cache (SGLANG_VLM_CACHE_SIZE_MB)"),) if mm_reserve else ()),
        Term("activation_peak", 0, "not profiled by SGLang: it lives in the reserved share", 0),
        Term("non_torch", 0, "counted in free_at_start (context) and the load", 0),
        *spec_terms,
        Term("cuda_graph", graph, f"{graphs} batch sizes up to {max_bs}, captured after the pool (in the reserved share)"
             + ("; the draft's graphs are not counted" if d is not None and d.kv_layers else ""), 0),
    )
    return RuntimeEstimate(
        runtime="sglang", version=str(version),
        launch={"runtime": "sglang", "sglang_version": str(version), "gpu": str(gpu), "gpu_total_bytes": total,
                "mem_fraction_static": mfs, "chunked_prefill_size": chunk, "cuda_graph_max_bs": max_bs,
                "context_length": context_length, "kv_cache_dtype": launch.kv_cache_dtype, "kv_dtype": kv_name,
                "weights_format": fmt.name, "tensor_parallel": tp, "pipeline_parallel": pp,
                "cpu_offload_gb": launch.cpu_offload_gb, **spec_launch},
        defaults=why, terms=terms, runtime_kv_cache_bytes=tokens * cell, num_gpu_blocks=tokens,
        kv_cache_tokens=tokens, max_concurrency=tokens / context_length, kv_cache_bytes_per_token=cell, block_size=1,
        fitted=("CUDA context", "load overhead", "CUDA-graph MiB per graph and layer"),
        notes=("SGLang pages tokens one by one (page size 1): blocks are tokens",) + spec_notes,
        unchecked_rules=tuple(rules.unchecked(tuple(used))) if used else ())
