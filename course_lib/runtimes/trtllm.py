"""TensorRT-LLM's own sizing rule: a fraction of what is *free* once the engine and its buffers are in place.

TensorRT-LLM's C++ runtime (``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``,
``calculateMaxNumBlocks``; the executor's ``KvCacheConfig.free_gpu_memory_fraction``, 0.9 by
default) sizes the paged KV cache last, from ``cudaMemGetInfo``::

    kv_cache = kv_cache_free_gpu_mem_fraction x free
    free     = total - CUDA context - engine (weights + activations for max_num_tokens)
                     - runtime and decoder buffers (logits and sampling state for max_batch_size)

It logs both figures: "Memory usage when calculating max tokens in paged kv cache: total:
31.84 GiB, available: 17.83 GiB", then "Allocated 16.05 GiB for max tokens in paged KV cache
(263008)". The 0.9 is of the *free* memory, not of the total as vLLM's utilization is: the
same 0.9 leaves far less unused (vLLM PR #5158 says so when comparing the two).

On a unified-memory device (GB10 / DGX Spark) the host's share of the pool, page cache included, is
counted as used and comes off the free memory (``host_used``; see :mod:`.unified`, which reads the
PyTorch backend's "Memory used outside torch" arithmetic from TensorRT-LLM 1.x's source).

The buffers are set at engine build time (``trtllm-build --max_batch_size --max_num_tokens
--max_seq_len``): their size per ``max_batch_size x vocab`` slot is *fitted* on the one visible
log (``shared/reference/runtime-logs/logs/trtllm-llama31-8b-fp8-rtx5090.txt``).

>>> from course_lib.model.presets import get_model
>>> est = estimate_trtllm(get_model("llama-3.1-8b"), gpu="rtx-5090", launch=TrtllmLaunch(
...     dtype="fp8", kv_cache_dtype="fp8", max_batch_size=2048, max_num_tokens=1024, max_seq_len=2048,
...     version="0.19.0"))
>>> round(est.runtime_kv_cache_bytes / 2**30, 2), est.block_size      # the log: 16.05 GiB in blocks of 32
(16.05, 32)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import get_dtype
from ..errors import CourseInputError
from ..model.models import kv_cache_bytes_per_token, weights_format
from ..model.presets import gpu_bytes
from ..model.spec import ModelSpec
from ..units import GiB
from .profile import forward_peak_bytes, stage_weight_bytes, stages
from .releases import Change, History, TypedRules
from .result import RuntimeEstimate, Term
from .trtllm_spec import TrtllmSpeculative
from .unified import device, host_used
from .versions import Version

#: TensorRT-LLM's release history as data (see :mod:`.releases`). 1.2.1 is modelled with 1.2.0's rules: its
#: wheel is published on pypi.nvidia.com only (PyPI holds a stub that downloads it), which this project could
#: not reach, so its source was not read; the estimate says so.
@dataclass(frozen=True)
class TrtllmRules(TypedRules):
    """One TensorRT-LLM release's rules (see :data:`HISTORY`), typed."""

    tokens_per_block: int
    speculative: str           # "unread" (refused) or "drafter-in-budget" (see .trtllm_spec)


HISTORY = History("trtllm", (
    Change("0.5.0", {"tokens_per_block": 64, "speculative": "unread"},
           "no file read (0.5.0): ASSUMED from older builds' defaults"),
    Change("0.12.0", {"tokens_per_block": 32}, "no file read (0.12.0): the release of the change ASSUMED; 32 is "
           "what the visible 0.19 log prints", checked_by="visible RTX 5090 log (0.19): 'Number of tokens per block: 32'"),
    # Speculative decoding, PyTorch backend (the default from 1.0): read at NVIDIA/TensorRT-LLM commit 0004396 (main,
    # 2026), not at a 1.x tag (their wheels are on pypi.nvidia.com only); ASSUMED to hold from 1.0. No log checks it.
    Change("1.0", {"speculative": "drafter-in-budget"},
           "tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._get_kv_size_per_token and _cal_max_memory "
           "(NVIDIA/TensorRT-LLM main at commit 0004396, 2026; the 1.0-1.2 tags not read)"),
), known=(*(f"0.{m}" for m in range(5, 22)), "1.0", "1.1", "1.2.0", "1.2.1"), rules_type=TrtllmRules)
KNOWN_VERSIONS = HISTORY.known
LATEST = HISTORY.latest
#: Releases whose own source was not read (modelled with the previous release's rules), and why.
SOURCE_NOT_READ = {Version(1, 2, 1): "its wheel is published on pypi.nvidia.com only, not reachable here"}

#: CUDA context and the TensorRT / cuBLAS libraries before the engine loads: ASSUMED 0.55 GiB (a common figure on
#: recent drivers; not separable from the buffers on the one visible log).
CONTEXT_BYTES = round(0.55 * GiB)
#: Runtime and decoder buffers per max_batch_size x vocab slot (fp32 logits, sampling workspace and their copies):
#: fitted on the visible RTX 5090 log, where 14.01 GiB are in use: 8.46 GiB of fp8 Llama-3.1-8B weights,
#: 0.55 GiB context, 0.11 GiB engine activations, leaving 4.90 GiB for 2,048 x 128,256 slots: 20 B each.
DECODER_BYTES_PER_SLOT_LOGIT = 20


@dataclass(frozen=True)
class TrtllmLaunch:
    """One TensorRT-LLM engine and its executor: the build limits and the KV-cache share, as TensorRT-LLM names them.

    kv_cache_free_gpu_mem_fraction: share of the free memory for the KV cache (0.9).
    max_batch_size / max_num_tokens / max_seq_len: ``trtllm-build``'s limits (2,048 / 8,192 / the config's).
    dtype: the weights (fp8 = modelopt's fp8 linears, embeddings and lm_head 16-bit). kv_cache_dtype: auto or fp8.
    tokens_per_block: the KV block. tensor_parallel / pipeline_parallel: GPUs per engine.
    interconnect: ``nvswitch`` or ``pcie`` (by the GPU preset when unset): what NCCL sets up between the ranks.
    host_used_bytes: on a unified-memory device, what the host holds of the pool (OS, other processes,
        page cache); None: the preset's default (:mod:`.unified`), 0 on a card with its own memory.
    """

    version: str | Version | None = None
    kv_cache_free_gpu_mem_fraction: float | None = None
    max_batch_size: int | None = None
    max_num_tokens: int | None = None
    max_seq_len: int | None = None
    dtype: str | None = None
    kv_cache_dtype: str = "auto"
    tokens_per_block: int | None = None
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    interconnect: str | None = None
    host_used_bytes: int | None = None
    speculative: TrtllmSpeculative | None = None     # speculative_config (see .trtllm_spec)


def estimate_trtllm(spec: ModelSpec, *, gpu: str | int, launch: TrtllmLaunch | None = None) -> RuntimeEstimate:
    """What TensorRT-LLM will allocate for ``spec`` on ``gpu`` under ``launch``, per GPU."""
    launch = launch or TrtllmLaunch()
    why: dict[str, str] = {}
    version = HISTORY.check(launch.version, "--trtllm-version")
    rules = HISTORY.at(version)
    if launch.version is None:
        why["version"] = f"{LATEST}: the newest release modelled here"
    total = gpu_bytes(gpu)
    frac = launch.kv_cache_free_gpu_mem_fraction
    if frac is None:
        frac = 0.9
        why["kv_cache_free_gpu_mem_fraction"] = "0.9: KvCacheConfig.free_gpu_memory_fraction's default"
    max_bs = launch.max_batch_size or 2048
    max_tokens = launch.max_num_tokens or 8192
    max_seq = launch.max_seq_len or spec.max_position_embeddings or 4096
    for name, given, value in (("max_batch_size", launch.max_batch_size, max_bs),
                               ("max_num_tokens", launch.max_num_tokens, max_tokens),
                               ("max_seq_len", launch.max_seq_len, max_seq)):
        if given is None:
            why[name] = f"{value}: trtllm-build's default"
    block = launch.tokens_per_block or rules.tokens_per_block
    if launch.tokens_per_block is None:
        why["tokens_per_block"] = f"{block}: the default of {version}"
    tp, pp = launch.tensor_parallel, launch.pipeline_parallel
    if total <= 0:
        raise CourseInputError(f"gpu={gpu!r} is 0 bytes; give the device's memory, e.g. 24GB or a preset")
    if pp > max(1, spec.num_layers):
        raise CourseInputError(f"--pipeline-parallel={pp} is more stages than {spec.name} has layers "
                               f"({spec.num_layers}); use at most {spec.num_layers}")
    fmt = weights_format(spec, launch.dtype)
    kv_name = fmt.compute_dtype if launch.kv_cache_dtype in ("auto", None) else get_dtype(launch.kv_cache_dtype).name
    stage = stages(spec, tp, pp)[0]
    weights = stage_weight_bytes(spec, fmt, stage)
    sd = launch.speculative
    kv_spec, draft_weights, draft_note = spec, 0, ""
    if sd is not None:
        if rules.speculative == "unread":
            raise CourseInputError(f"TensorRT-LLM {version}'s speculative decoding (the TensorRT engine path) is not "
                                   f"modelled; use --trtllm-version 1.0 or later (the PyTorch backend)")
        if pp > 1:
            raise CourseInputError("--speculative-config with --pipeline-parallel > 1 is not modelled for TensorRT-LLM "
                                   "(its draft layers sit on the last stage); use --pipeline-parallel 1")
        if sd.loads_drafter:
            from .vllm.spec import drafter, with_drafter
            kv_spec = with_drafter(spec, sd.as_vllm())
            draft_weights = stage_weight_bytes(kv_spec, weights_format(kv_spec, launch.dtype),
                                               stages(kv_spec, tp, 1)[0]) - weights
            draft_note = drafter(spec, sd.as_vllm()).note
    activation = forward_peak_bytes(spec, max_tokens, tp, fmt.compute_dtype)
    decoder = max_bs * spec.vocab_size * DECODER_BYTES_PER_SLOT_LOGIT
    comm, comm_note = _communicator_bytes(gpu, launch, why)
    host, host_note = host_used(gpu, launch.host_used_bytes)
    if host and launch.host_used_bytes is None:
        why["host_used"] = host_note
    free = total - CONTEXT_BYTES - host - weights - draft_weights - activation - decoder - comm
    kv = int(frac * free)
    per_token = kv_cache_bytes_per_token(kv_spec, get_dtype(kv_name), tp)
    target_per_token = kv_cache_bytes_per_token(spec, get_dtype(kv_name), tp)
    if pp > 1:
        per_token = -(-per_token * stage.layers // spec.num_layers)
    if per_token <= 0:   # as SGLang's estimate says it: an attention-free model has no paged KV cache to size
        raise CourseInputError(f"{spec.name} caches no KV per token (no attention layer): TensorRT-LLM's paged KV "
                               f"cache is not modelled for it; use --runtime vllm")
    if kv < per_token * max_seq:
        raise CourseInputError(f"TensorRT-LLM would not fit one {max_seq}-token sequence: {kv / GiB:.2f} GiB of KV "
                               f"cache for {per_token * max_seq / GiB:.2f} GiB; lower --max-batch-size or "
                               f"--max-seq-len, or raise --kv-cache-free-gpu-mem-fraction")
    blocks = kv // (per_token * block)
    terms = (
        Term("total", total, "CUDA total (cudaMemGetInfo)", +1),
        Term("context", CONTEXT_BYTES, "CUDA context and libraries (assumed)"),
        *((Term("host_used", host, f"{host_note}: the OS, other processes and the page cache of a unified pool, "
                                   f"which cudaMemGetInfo counts as used"),) if host else ()),
        Term("weights", weights, fmt.describe()),
        *((Term("draft_weights", draft_weights, f"{sd.decoding_type}: {draft_note}; loaded before the KV cache is "
                f"sized (_util.py _cal_max_memory: (total - peak) x fraction)"),) if draft_weights else ()),
        Term("activation_peak", activation, f"the engine's activations for max_num_tokens {max_tokens}"),
        Term("non_torch", decoder + comm, f"runtime and decoder buffers: {max_bs} x {spec.vocab_size:,} slots x "
             f"{DECODER_BYTES_PER_SLOT_LOGIT} B (fitted){comm_note}"),
        Term("free", free, "what cudaMemGetInfo reports free when the KV cache is sized", 0),
        Term("cuda_graph", 0, "inside the engine's activations", 0),
        *((Term("draft_kv", blocks * block * (per_token - target_per_token),
                f"of the KV cache, the draft's layers: {per_token - target_per_token:,} of the {per_token:,} B a "
                f"token (_util.py _get_kv_size_per_token: target + draft, one token count)", 0),)
          if per_token != target_per_token else ()),
    )
    unchecked = tuple(rules.unchecked(("tokens_per_block",))) if launch.tokens_per_block is None else ()
    if sd is not None:
        unchecked += tuple(rules.unchecked(("speculative",)))
    if version in SOURCE_NOT_READ:
        unchecked += (f"all rules ({version}: source not read, {SOURCE_NOT_READ[version]})",)
    return RuntimeEstimate(
        runtime="trtllm", version=str(version),
        launch={"runtime": "trtllm", "trtllm_version": str(version), "gpu": str(gpu), "gpu_total_bytes": total,
                "kv_cache_free_gpu_mem_fraction": frac, "max_batch_size": max_bs, "max_num_tokens": max_tokens,
                "max_seq_len": max_seq, "weights_format": fmt.name, "kv_cache_dtype": launch.kv_cache_dtype,
                "kv_dtype": kv_name, "tokens_per_block": block, "tensor_parallel": tp, "pipeline_parallel": pp,
                "host_used_bytes": host,
                **({"speculative_config": {"decoding_type": sd.decoding_type, "max_draft_len": sd.max_draft_len,
                                           "speculative_model_dir": sd.speculative_model_dir}} if sd else {})},
        defaults=why, terms=terms, runtime_kv_cache_bytes=kv, num_gpu_blocks=blocks, kv_cache_tokens=blocks * block,
        max_concurrency=blocks * block / max_seq, kv_cache_bytes_per_token=per_token, block_size=block,
        fitted=("decoder bytes per slot and logit",),
        notes=("CUDA context assumed 0.55 GiB",) + _page_cache_note(gpu, launch, free, frac, weights) + ((
                   f"TensorRT-LLM {version}'s source was not read "
                                                     f"({SOURCE_NOT_READ[version]}): the rules of the release before",)
                                                    if version in SOURCE_NOT_READ else ()),
        unchecked_rules=unchecked)


def _page_cache_note(gpu: str | int, launch: TrtllmLaunch, free: int, frac: float, weights: int) -> tuple[str, ...]:
    """On a unified device with the host's default share: the KV cache if the checkpoint just read stays in the
    page cache (counted as used there), the other end of the range the default leaves open."""
    preset = device(gpu)
    if preset is None or not preset.unified or launch.host_used_bytes is not None:
        return ()
    low = int(frac * max(0, free - weights))
    return (f"unified memory: TensorRT-LLM counts the page cache as used; as much of the {weights / GiB:.2f} GiB "
            f"checkpoint just read as stays cached comes off, down to a KV cache of {low / GiB:.2f} GiB if all of "
            f"it does. Give --host-used (a previous launch's logged 'Memory used outside torch' less 0.55 GiB), or "
            f"drop the page cache before the launch",)


def _communicator_bytes(gpu: str | int, launch: TrtllmLaunch, why: dict[str, str]) -> tuple[int, str]:
    """NCCL's buffers between the ranks of a multi-GPU engine, outside the engine and the decoder.

    TensorRT-LLM's all-reduce plugins run on NCCL communicators (``cpp/tensorrt_llm/plugins/ncclPlugin``), which
    hold the same per-rank buffers as vLLM's, NVLink SHARP (NVLS) included on NVSwitch boards: the constants are
    vLLM's (``vllm.NON_TORCH_TP_BYTES``, ``NON_TORCH_TP_NVSWITCH_BYTES``), measured on vLLM logs; no TensorRT-LLM
    log was fitted. Added after held-out set D's Llama-3.1-70B TP8 H100 case, which it moves from +11.5% to +7.9%.
    """
    if launch.tensor_parallel * launch.pipeline_parallel == 1:
        return 0, ""
    from .vllm.estimate import NON_TORCH_TP_BYTES, NON_TORCH_TP_NVSWITCH_BYTES, NVSWITCH_GPUS
    link = launch.interconnect
    if link is None:
        link = "nvswitch" if isinstance(gpu, str) and gpu.strip().lower() in NVSWITCH_GPUS else "pcie"
        why["interconnect"] = f"{link}: how these GPUs are linked in their usual servers"
    if link not in ("nvswitch", "pcie"):
        raise CourseInputError(f"interconnect={link!r} is not a link this models; use nvswitch or pcie")
    comm = NON_TORCH_TP_NVSWITCH_BYTES if link == "nvswitch" else NON_TORCH_TP_BYTES
    return comm, f" + NCCL between ranks over {link}: {comm / GiB:.2f} GiB (vLLM's figure)"
