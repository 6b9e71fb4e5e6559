"""A vLLM launch resolved: every default concrete and why it was taken, the release's rules, the platform.

:func:`course_lib.runtimes.vllm.estimate.resolve_launch` builds the one :class:`ResolvedLaunch` of a launch; the profile
estimate (:mod:`.estimate`), the given pool (:mod:`.given_kv`), and through them the scheduler policy's defaults,
the explorer and ``from-log`` read it, so nothing else resolves a default or parses a release. It lives apart
from :mod:`.estimate` so that the given pool can read it without importing the profile path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...dtypes import get_dtype
from ...model.spec import ModelSpec
from .platforms import Platform
from ..versions import Version
from .kv_groups import kv_layout
from .kv_dsv4 import packs_groups, vllm_layout
from .releases import VllmRules


@dataclass(frozen=True)
class ResolvedLaunch:
    """One vLLM launch with every default concrete: what the profile, the given pool, the scheduler policy, the
    explorer and ``from-log`` read (:func:`.estimate.resolve_launch` builds it; nothing else resolves a default).

    launch: the :class:`VllmLaunch` with no None left (version a :class:`Version`, platform its name).
    rules: the release's rules. platform: vLLM's platform. gpu / total_bytes: the device and its CUDA total
    (0 on the CPU). weights_format / kv_dtype: the served formats. runner: "V0", "V1" or "V2" (the model runner).
    max_in_flight_tokens: what a sliding window holds beyond itself. defaults: knob -> (value, why it was taken),
    for every knob the user left to vLLM (or vLLM overrode). state_bytes: one linear-attention layer's state.
    """

    spec: ModelSpec
    launch: Any                 # the VllmLaunch (runtimes/vllm/estimate.py), every knob concrete
    rules: VllmRules
    platform: Platform
    gpu: str | int
    total_bytes: int
    weights_format: Any
    kv_dtype: str
    runner: str
    max_in_flight_tokens: int
    defaults: Mapping[str, tuple[Any, str]]
    state_bytes: int = 0        # one linear-attention layer's state on one GPU (0: none, or left out by the release)
    state_request_pages: int = 2    # the state pages a request holds ('align'; 3 with a prefill checkpoint page)

    @property
    def version(self) -> Version:
        return self.launch.version      # type: ignore[return-value]

    @property
    def why(self) -> dict[str, str]:
        """knob -> why its default was taken (the estimate's ``defaults``)."""
        return {k: why for k, (_, why) in self.defaults.items()}

    def to_dict(self) -> dict[str, Any]:
        """The launch as ``--json`` prints it (both paths start from this; each adds its pool's figures)."""
        launch = self.launch
        return {
            "runtime": "vllm", "vllm_version": str(self.version), "engine": launch.engine,
            "entrypoint": launch.entrypoint, "gpu": str(self.gpu), "gpu_total_bytes": self.total_bytes,
            "platform": self.platform.name, "gpu_memory_utilization": launch.gpu_memory_utilization,
            "max_model_len": launch.max_model_len, "max_num_seqs": launch.max_num_seqs,
            "max_num_batched_tokens": launch.max_num_batched_tokens,
            "enable_chunked_prefill": launch.enable_chunked_prefill, "kv_cache_dtype": launch.kv_cache_dtype,
            "kv_dtype": self.kv_dtype, "weights_format": self.weights_format.name,
            "enforce_eager": launch.enforce_eager, "tensor_parallel": launch.tensor_parallel,
            "pipeline_parallel": launch.pipeline_parallel, "block_size": launch.block_size, "sampler": launch.sampler,
            "interconnect": launch.interconnect, "cpu_offload_gb": launch.cpu_offload_gb,
            "skip_mm_profiling": launch.skip_mm_profiling, "model_runner": self.runner,
            "max_in_flight_tokens": self.max_in_flight_tokens,
            "limit_mm_per_prompt": dict(launch.limit_mm_per_prompt) if launch.limit_mm_per_prompt else None,
            "mm_max_pixels": launch.mm_max_pixels, "kv_cache_memory_bytes": launch.kv_cache_memory_bytes,
        }

    def kv_layout(self, layers=None):
        """The launch's KV layout (:mod:`.kv_groups`; DeepSeek-V4's, :func:`.kv_dsv4.vllm_layout`) over ``layers``
        (default: every layer)."""
        launch = self.launch
        if packs_groups(self.spec):
            return vllm_layout(self.spec, max_model_len=launch.max_model_len,
                               max_in_flight_tokens=self.max_in_flight_tokens, tokens_rule=self.rules.tokens_rule,
                               null_block=self.rules.refusal_null_block, gib_format=self.rules.refusal_gib,
                               block_size=launch.block_size)
        return kv_layout(self.spec, kv_bytes=get_dtype(self.kv_dtype).bytes_per_value, block_size=launch.block_size,
                         max_model_len=launch.max_model_len, max_in_flight_tokens=self.max_in_flight_tokens,
                         engine=launch.engine, tensor_parallel=launch.tensor_parallel, layers=layers,
                         hybrid_allocator=self.rules.hybrid_allocator, tokens_rule=self.rules.tokens_rule,
                         null_block=self.rules.refusal_null_block, gib_format=self.rules.refusal_gib,
                         kernel_block_multiple=self.platform.kernel_block_multiple,
                         state_layers=len(self.spec.states) if self.state_bytes and launch.pipeline_parallel == 1
                         else 0, state_request_pages=self.state_request_pages)
