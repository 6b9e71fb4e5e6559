"""vLLM's platforms (CUDA, ROCm, CPU) as far as they change what the KV cache holds.

vLLM picks a ``Platform`` class at import (``vllm/platforms/__init__.py``) and lets it rewrite the
config (``check_and_update_config``). What differs for the KV pool, read in vLLM 0.32.0:

* **block size.** CUDA and ROCm default to 16 tokens (``CacheConfig.DEFAULT_BLOCK_SIZE``). The CPU
  platform (``vllm/platforms/cpu.py``) sets 128 when the user gave none, forces 16 for MLA models on the
  reference CPU MLA kernel (no AMX; "CPU MLA backend requires block_size=16") and 256 for DeepSeek-V4; its
  attention backend (``vllm/v1/attention/backends/cpu_attn.py``) computes in kernel blocks of a multiple of
  32 tokens (``get_supported_kernel_block_sizes() == [MultipleOf(32)]``; CUDA's FlashAttention and Triton
  backends, and ROCm's, multiples of 16), and a sliding-window layer takes its block from that unit.
* **where the pool's size comes from.** On a GPU the profile's budget (``gpu_worker.py``,
  ``determine_available_memory``) unless ``--kv-cache-memory-bytes`` is given. On the CPU
  (``vllm/v1/worker/cpu_worker.py``) ``--kv-cache-memory-bytes`` when given ("Explicitly set (x/y) GiB for
  KV cache"); the legacy ``VLLM_CPU_KVCACHE_SPACE`` (GiB) sets it when exported (in 0.32 it has no
  default: older CPU releases took 4 GiB when it was unset); otherwise the node's total memory x ``gpu_memory_utilization`` (0.92)
  minus the process's resident memory after a warm-up ("Auto set").
* **in-flight tokens.** A sliding-window layer keeps its window plus every token scheduled but not yet
  settled (``VllmConfig.max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens``). CUDA
  schedules asynchronously by default (2 batches in flight); the CPU platform turns async scheduling off
  (1 batch).
* **batch defaults** (``EngineArgs.get_batch_defaults``): on the CPU 4,096 tokens and 256 sequences for
  ``LLM()``, 2,048 and 128 for ``vllm serve`` (times the world size).
* **MLA** on the CPU without AMX: chunked prefill and prefix caching off, ``max_num_batched_tokens =
  max(max_model_len, 2048)``.
* **the log line** says ``CPU KV cache size`` instead of ``GPU KV cache size``
  (``kv_cache_utils._kv_cache_device_name``: "GPU" for CUDA and ROCm, else the device type upper-cased).

>>> p = get_platform("cpu")
>>> p.default_block_size, p.device_label, p.max_concurrent_batches
(128, 'CPU', 1)
>>> get_platform("h100-80gb").name
'cuda'
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import CourseInputError


@dataclass(frozen=True)
class Platform:
    """What one of vLLM's platforms changes in the KV pool (see the module's text for the sources).

    name: "cuda", "rocm" or "cpu". device_label: the first word of the "... KV cache size" line.
    default_block_size: tokens per block when none is given. kernel_block_multiple: the attention
    kernel's block unit (CPU: 32), or None. mla_block_size: the block size forced on MLA models, or None.
    max_concurrent_batches: batches in flight (2 with async scheduling). batch_defaults:
    {entrypoint: (max_num_batched_tokens, max_num_seqs)} when the platform sets its own.
    mla_chunked_prefill: False where MLA turns chunked prefill off.
    """

    name: str
    device_label: str
    default_block_size: int
    kernel_block_multiple: int | None = None
    mla_block_size: int | None = None
    max_concurrent_batches: int = 2
    batch_defaults: tuple[tuple[str, int, int], ...] = ()
    mla_chunked_prefill: bool = True
    #: the recurrent (SSM) state's dtype when not the model's: the CPU resets it to float32 (0.32
    #: ``platforms/cpu.py:300-321``, on a CPU with AVX-512 BF16 as the oracle's; the model dtype otherwise)
    ssm_state_dtype: str | None = None

    def block_size(self, given: int | None, *, mla: bool) -> tuple[int, str]:
        """The block size vLLM uses, and why (``given`` is the user's ``--block-size``)."""
        if mla and self.mla_block_size is not None:
            why = (f"{self.mla_block_size}: the {self.name} MLA kernel requires it"
                   + (f" (vLLM overrides --block-size {given})" if given and given != self.mla_block_size else ""))
            return self.mla_block_size, why
        if given:
            return given, f"{given}: given"
        return self.default_block_size, f"{self.default_block_size}: the {self.name} platform's default"

    def batch_default(self, entrypoint: str) -> tuple[int, int] | None:
        """(max_num_batched_tokens, max_num_seqs) this platform sets for ``entrypoint``, or None."""
        for name, tokens, seqs in self.batch_defaults:
            if name == entrypoint:
                return tokens, seqs
        return None


CUDA = Platform("cuda", "GPU", 16, kernel_block_multiple=16)     # FlashAttention / Triton: MultipleOf(16)
ROCM = Platform("rocm", "GPU", 16, kernel_block_multiple=16)     # rocm_attn: any multiple of 16 (Triton path)
CPU = Platform("cpu", "CPU", 128, kernel_block_multiple=32, mla_block_size=16, max_concurrent_batches=1,
               batch_defaults=(("llm", 4096, 256), ("serve", 2048, 128)), mla_chunked_prefill=False,
               ssm_state_dtype="float32")
PLATFORMS = {"cuda": CUDA, "rocm": ROCM, "cpu": CPU}


def get_platform(device: str | int | None, platform: str | None = None) -> Platform:
    """The platform of a ``--gpu`` value: "cpu" is vLLM's CPU platform, an MI-series preset ROCm, else CUDA.

    >>> get_platform("mi300x").name, get_platform("cpu").name, get_platform(24 * 10**9).name
    ('rocm', 'cpu', 'cuda')
    """
    if platform is not None:
        key = str(platform).strip().lower()
        if key not in PLATFORMS:
            raise CourseInputError(f"platform={platform!r} is not one of vLLM's here; use cuda, rocm or cpu")
        return PLATFORMS[key]
    name = str(device).strip().lower() if device is not None else ""
    if name == "cpu":
        return CPU
    if name.startswith("mi"):
        return ROCM
    return CUDA
