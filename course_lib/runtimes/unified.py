"""Unified memory (GB10 / DGX Spark, AMD's Strix Halo): how each runtime counts a pool it shares with the host.

On such a device CUDA (or HIP) reports a total that is the system's memory, and the operating system,
other processes and the **page cache** (the checkpoint the server has just read sits there) hold part of
it. ``cudaMemGetInfo``'s *free* on an integrated GPU leaves out memory the kernel could reclaim (NVIDIA,
CUDA for Tegra application note, "Estimating Total Allocatable Device Memory on an Integrated GPU Device"),
so a runtime that sizes from *free* memory sees the page cache as used. The runtimes differ:

- **TensorRT-LLM** (PyTorch backend, 1.x; ``tensorrt_llm/_torch/pyexecutor/_util.py``
  ``KvCacheCreator``): after its dummy run it measures ``extra_cost = (total - free) - torch's own``
  and logs it as "Memory used outside torch (e.g., NCCL and CUDA graphs)"; the KV cache is
  ``fraction x (total - (torch peak + extra_cost) + the estimation pass's KV)``. On a unified device the
  host's share, page cache included, is in ``extra_cost``: it comes straight off the KV cache.
  Worked on the published DGX Spark launch (gpt-oss-120b, TensorRT-LLM 1.1.0rc3): total 119.70 GiB,
  peak 113.65 GiB (63.52 + 0.85 inside torch, 49.28 outside), 0.56 GiB of estimation KV, fraction 0.9:
  0.9 x (119.70 - 113.65 + 0.56) = 5.95 GiB, the logged "Allocated 5.95 GiB".
- **vLLM** (0.33, ``vllm/utils/mem_utils.py`` ``MemorySnapshot.measure``): on an integrated GPU
  (``torch.cuda.get_device_properties().is_integrated``, ``platforms/cuda.py is_integrated_gpu``) the free
  memory is ``psutil.virtual_memory().available``, which counts the page cache as free. The KV cache is
  still ``total x gpu_memory_utilization`` less what the engine itself consumed (the host's share is not
  taken off it); the host matters only at start: ``request_memory`` (``v1/worker/utils.py``) refuses when
  the free memory is below ``total x gpu_memory_utilization``.
- **SGLang** sizes from the memory free when the weights start loading ("avail mem="): the host's share
  comes off that.

The host's share is a knob (``--host-used``); a unified preset carries a documented default
(:attr:`course_lib.gpus.GPU.host_used_bytes`), 0 on a card with its own memory.

>>> from course_lib.units import GiB
>>> round(trtllm_kv_cache_bytes(total_bytes=round(119.70 * GiB), peak_bytes=round(113.65 * GiB),
...                             estimation_kv_bytes=round(0.56 * GiB), fraction=0.9) / GiB, 2)
5.95
>>> vllm_start_refusal(total_bytes=round(119.70 * GiB), utilization=0.9, host_used_bytes=8 * GiB) is None
True
"""

from __future__ import annotations

from ..errors import CourseInputError
from ..units import GiB


def device(gpu: object):
    """The :class:`course_lib.gpus.GPU` preset ``gpu`` names, or None (a size, or no preset)."""
    from ..gpus import GPUS

    return GPUS.get(str(gpu).strip().lower()) if isinstance(gpu, str) else None


def host_used(gpu: object, given: int | None) -> tuple[int, str]:
    """The host's share of the pool (bytes) and why: ``given``, else a unified preset's default, else 0.

    >>> host_used("gb10", None)[0] == 4 * 2**30, host_used("h100-80gb", None), host_used("rtx-4090", 2**30)[0]
    (True, (0, ''), 1073741824)
    """
    if given is not None:
        if given < 0:
            raise CourseInputError(f"--host-used={given} is negative; give the host's share, e.g. 8GiB, or 0")
        return given, f"{given / GiB:.2f} GiB held by the host (given)"
    preset = device(gpu)
    if preset is None or not preset.unified:
        return 0, ""
    return preset.host_used_bytes, (f"{preset.host_used_bytes / GiB:.2f} GiB held by the host on this unified-"
                                    f"memory device ({preset.host_source}; --host-used to change)")


def trtllm_kv_cache_bytes(*, total_bytes: int, peak_bytes: int, estimation_kv_bytes: int, fraction: float) -> int:
    """TensorRT-LLM 1.x's KV cache: ``fraction x (total - peak + estimation KV)`` (``_cal_max_memory``)."""
    return int((total_bytes - peak_bytes + estimation_kv_bytes) * fraction)


def vllm_start_refusal(*, total_bytes: int, utilization: float, host_used_bytes: int) -> str | None:
    """vLLM 0.33's start-up check on a shared pool, in its own words, or None when it starts.

    ``request_memory`` asks for ``ceil(total x utilization)`` and refuses when the free memory (on an
    integrated GPU psutil's *available*, the page cache counted free) is less.

    >>> print(vllm_start_refusal(total_bytes=round(119.70 * 2**30), utilization=0.9, host_used_bytes=20 * 2**30))
    Free memory on device (99.7/119.7 GiB) on startup is less than desired GPU memory utilization (0.9, 107.73 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.
    """
    import math

    requested = math.ceil(total_bytes * utilization)
    free = total_bytes - host_used_bytes
    if free >= requested:
        return None
    return (f"Free memory on device ({round(free / GiB, 2)}/{round(total_bytes / GiB, 2)} GiB) on startup is less "
            f"than desired GPU memory utilization ({utilization}, {round(requested / GiB, 2)} GiB). Decrease GPU "
            f"memory utilization or reduce GPU memory used by other processes.")
