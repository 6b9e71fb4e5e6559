"""GPU presets: the memory a runtime can plan with, beside the memory the card is sold with.

A card has three sizes, and serving runtimes use the smallest:

* the size it is **sold** as ("24 GB", where the vendor's "GB" means GiB);
* the total ``nvidia-smi`` (or ``rocm-smi``) shows: an RTX 4090 shows 24,564 MiB = 23.99 GiB;
* the total **CUDA reports** to a process, ``torch.cuda.mem_get_info()[1]``, which is what
  vLLM multiplies by ``gpu_memory_utilization`` (``vllm/v1/worker/gpu_worker.py``:
  ``requested_memory = init_snapshot.total_memory * gpu_memory_utilization``), what
  TensorRT-LLM prints as ``total:`` and what PyTorch's out-of-memory message calls "total
  capacity". On an RTX 4090 it is 23.65 GiB: 0.34 GiB less than nvidia-smi, more than the
  lesson's whole 0.38 GiB of headroom in its library-budget cell.

Budgets and runtimes here use the CUDA total (:data:`GPU_BYTES`); ``course-memory presets``
shows both. Each CUDA figure names the public log it was read from, as printed (two decimals
of GiB, so it is exact to about 5 MiB). Where no public figure was found the CUDA total is
*estimated* as nvidia-smi's total minus 0.46 GiB, the median gap of the cited cards, and the
preset says so (``cuda_source`` starts with "estimated").

Unified-memory devices (:attr:`GPU.unified`: NVIDIA's GB10 in the DGX Spark, AMD's Strix Halo APU)
have no memory of their own: CUDA / HIP report a share of the system's, and the operating system,
other processes and the page cache live in the same pool. How each runtime counts them is in
:mod:`course_lib.runtimes.unified`; :attr:`GPU.host_used_bytes` is the share the host is taken to hold
when the user does not say (``--host-used``).

>>> GPUS["rtx-4090"].smi_bytes / 2**30, round(GPUS["rtx-4090"].cuda_bytes / 2**30, 2)
(23.98828125, 23.65)
>>> GPU_BYTES["rtx-4090"] == GPUS["rtx-4090"].cuda_bytes
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .units import GiB, MiB

#: The median of (nvidia-smi total - CUDA total) over the cards with a cited CUDA figure, in GiB.
ESTIMATED_GAP_GIB = 0.46


@dataclass(frozen=True)
class GPU:
    """One card's memory, three ways.

    name: the preset name. sold: what it is sold as, in words.
    smi_mib: the total nvidia-smi / rocm-smi shows, in MiB; smi_source: where that figure is from.
    cuda_gib: the total CUDA reports (``torch.cuda.mem_get_info``), in GiB as printed;
    cuda_source: the public log it is from, or "estimated: ..." when none was found.
    unified: the device shares the system's memory with the host (no memory of its own).
    host_gib / host_source: on a unified device, what the host holds of the pool by default, and why.
    """

    name: str
    sold: str
    smi_mib: int
    smi_source: str
    cuda_gib: float | None
    cuda_source: str
    unified: bool = False
    host_gib: float = 0.0
    host_source: str = ""

    @property
    def host_used_bytes(self) -> int:
        """Bytes of the pool the host holds by default (0 on a card with its own memory)."""
        return round(self.host_gib * GiB)

    @property
    def smi_bytes(self) -> int:
        return self.smi_mib * MiB

    @property
    def cuda_bytes(self) -> int:
        """The CUDA-visible total in bytes (estimated from nvidia-smi's when no figure was published)."""
        if self.cuda_gib is None:
            return round(self.smi_bytes - ESTIMATED_GAP_GIB * GiB)
        return round(self.cuda_gib * GiB)

    @property
    def estimated(self) -> bool:
        return self.cuda_gib is None


_REF = "shared/reference/README.md (nvidia-smi MiB of common cards)"
_LOGS = "shared/reference/runtime-logs"
#: The host's share of a DGX Spark's pool when the user does not say: ASSUMED 4 GiB, what an idle Ubuntu
#: desktop (DGX OS 7 is Ubuntu 24.04) shows as ``used`` in ``free -g``; not measured on a GB10, and not fitted
#: on any log. It leaves out the page cache, which TensorRT-LLM also counts as used there (see
#: course_lib.runtimes.unified): give ``--host-used`` when the checkpoint was just read.
GB10_HOST_GIB = 4.0

GPU_LIST: tuple[GPU, ...] = (
    GPU("t4", "16 GB", 15_360, _REF, 14.74,
        f"vLLM 0.8.2 start-up log, 'total_gpu_memory (14.74GiB)' ({_LOGS}/logs/vllm-llama32-3b-t4-v0.txt)"),
    GPU("l4", "24 GB", 23_034, _REF, 22.03,
        "PyTorch OOM message on an L4, 'a total capacity of 22.03 GiB' (ArcInstitute/evo2 issue #190)"),
    GPU("a10g", "24 GB", 23_028, "nvidia-smi '23028MiB' in public A10G logs", None,
        f"estimated: nvidia-smi total - {ESTIMATED_GAP_GIB} GiB"),
    GPU("a10", "24 GB", 23_028, "nvidia-smi '23028MiB' in public A10 logs (the A10G's too)", None,
        f"estimated: nvidia-smi total - {ESTIMATED_GAP_GIB} GiB"),
    GPU("rtx-3090", "24 GB", 24_576, "nvidia-smi '24576MiB' in public RTX 3090 logs", 23.58,
        "vLLM 0.6.4 start-up log, 'total_gpu_memory=23.58GiB' (vllm-project/vllm issue #10517; "
        "benchmarks/runtime_logs/dev/logs/vllm-llama31-8b-rtx3090-v0-20k.txt)"),
    GPU("rtx-4090", "24 GB", 24_564, _REF, 23.65,
        "PyTorch OOM message, 'a total capacity of 23.65 GiB' (pytorch/pytorch issue #16417, kerrj/lerf issue #73; "
        "23.64-23.68 GiB in other reports)"),
    GPU("rtx-5090", "32 GB", 32_607, "nvidia-smi '32607MiB' in public RTX 5090 logs", 31.84,
        f"TensorRT-LLM 0.19 start-up log, 'total: 31.84 GiB' ({_LOGS}/logs/trtllm-llama31-8b-fp8-rtx5090.txt)"),
    GPU("a100-40gb", "40 GB", 40_960, _REF, 39.50,
        "PyTorch OOM message on an A100 40GB, 'a total capacity of 39.50 GiB' (TianheWu/CoSeR issue #10)"),
    GPU("l40s", "48 GB", 46_068, "nvidia-smi '46068MiB' in public L40S logs", None,
        f"estimated: nvidia-smi total - {ESTIMATED_GAP_GIB} GiB"),
    GPU("a100-80gb", "80 GB", 81_920, _REF, 79.25,
        "PyTorch OOM messages on A100 80GB, 'a total capacity of 79.25 GiB' (levihsu/OOTDiffusion issue #235, "
        "HiDream-ai/VAREdit issue #6)"),
    GPU("h100-80gb", "80 GB", 81_559, _REF, 79.18,
        "vLLM DEBUG logs summarised by llm-d, 'H100 GPU (79.18 GiB)' (llm-d/llm-d-benchmark, "
        "config_explorer/empirical-vllm-memory-results.md); other H100s print 79.11-79.22 GiB"),
    GPU("h20", "96 GB", 97_871, "nvidia-smi '97871MiB' in public H20 logs", None,
        f"estimated: nvidia-smi total - {ESTIMATED_GAP_GIB} GiB"),
    GPU("gh200", "96 GB HBM3 (GH200 480GB)", 97_871, "nvidia-smi '97871MiB' in public GH200 logs", None,
        f"estimated: nvidia-smi total - {ESTIMATED_GAP_GIB} GiB"),
    GPU("h200", "141 GB", 143_771, "nvidia-smi '143771MiB' (this workplace's H200 machine, device/KINDS.md)", None,
        f"estimated: nvidia-smi total - {ESTIMATED_GAP_GIB} GiB"),
    GPU("b200", "180 GB", 183_359, "nvidia-smi '183359MiB' in public B200 logs", None,
        f"estimated: nvidia-smi total - {ESTIMATED_GAP_GIB} GiB"),
    GPU("mi300x", "192 GB", 196_288, "rocm-smi 'VRAM Total Memory (B): 205822885888'", 191.98,
        f"vLLM 0.6.4 ROCm start-up log, 'total_gpu_memory=191.98GiB' ({_LOGS}/logs/vllm-llama31-8b-tp8-mi300x-v0.txt)"),
    # Unified memory: no nvidia-smi / rocm-smi total of its own; the CUDA / HIP total stands in for it.
    GPU("gb10", "128 GB unified (DGX Spark)", 122_573,
        "nvidia-smi prints no memory total on GB10 (unified memory: NVML_ERROR_NOT_SUPPORTED, NVIDIA developer "
        "forum thread 358869); the CUDA total stands in", 119.70,
        "TensorRT-LLM 1.1.0rc3 start-up log on a DGX Spark, 'device total memory 119.70 GiB' (jeansblog/trt_llm "
        "README; benchmarks/runtime_logs/heldout_d/logs/trtllm-gptoss120b-dgxspark-pytorch-v110rc3.txt)",
        unified=True, host_gib=GB10_HOST_GIB,
        host_source=f"ASSUMED {GB10_HOST_GIB:g} GiB: an idle Ubuntu desktop's 'used' (DGX OS 7), page cache left out"),
    GPU("strix-halo", "128 GB unified (Ryzen AI Max+ 395, Radeon 8060S, gfx1151), 96 GiB GTT", 98_304,
        "mem_info_gtt_total 103,079,215,104 B = 96.00 GiB with ttm.pages_limit=25165824 (noamsto/nix-amd-ai "
        "issue #42; the BIOS carve-out at its 512 MB minimum)", 96.00,
        "HIP's total on that setting, llama.cpp's 'Total VRAM: 98304 MiB' (noamsto/nix-amd-ai issue #42); another "
        "ttm.pages_limit or carve-out gives another total: use --gpu SIZE",
        unified=True, host_gib=0.0,
        host_source="0: the OS lives in the 32 GiB outside the GTT ceiling"),
)
GPUS: dict[str, GPU] = {g.name: g for g in GPU_LIST}

#: The lesson's simplified device: exactly 24 GB = 24 x 10^9 bytes (a teaching figure, not a card).
LESSON_GPU = "lesson-24gb"

#: What budgets and runtimes plan with: the CUDA-visible total of each preset, in bytes.
GPU_BYTES: dict[str, int] = {g.name: g.cuda_bytes for g in GPU_LIST}
GPU_BYTES[LESSON_GPU] = 24 * 10**9


#: Words in GPU names that say nothing about which card it is.
_NOISE = re.compile(r"\(.*?\)|\bnvidia\b|\bgeforce\b|\btesla\b|\bquadro\b|\bamd\b|\binstinct\b|\bhbm3e?\b|"
                    r"-?\bsxm[0-9]?\b|-?\bpcie\b|\bgpu\b|\bx[0-9]+\b")
#: (pattern over the cleaned, lower-case name, preset), first match wins.
_NAME_RULES: tuple[tuple[str, str], ...] = (
    (r"\bgh200\b", "gh200"), (r"\bh200\b", "h200"), (r"\bb200\b", "b200"), (r"\bh100\b", "h100-80gb"),
    (r"\ba100\b.*\b40 ?gb\b|\ba100-40gb\b", "a100-40gb"), (r"\ba100\b", "a100-80gb"),
    (r"\bh20\b(?!.*\b141 ?gb\b)", "h20"), (r"\bl40s\b", "l40s"), (r"\bl4\b", "l4"), (r"\ba10g\b", "a10g"),
    (r"\ba10\b", "a10"), (r"\bt4\b", "t4"), (r"\b(rtx )?3090\b", "rtx-3090"), (r"\b(rtx )?4090\b", "rtx-4090"),
    (r"\b(rtx )?5090\b", "rtx-5090"), (r"\bmi300x\b", "mi300x"), (r"\bgb10\b|\bdgx ?spark\b", "gb10"),
    (r"\bgfx1151\b|\bstrix ?halo\b|\b8060s\b", "strix-halo"),
)


def unified_preset_for_total(total_bytes: int | None) -> str | None:
    """The unified-memory preset whose CUDA total a log printed (to its two decimals of GiB), or None.

    >>> unified_preset_for_total(round(119.70 * 2**30)), unified_preset_for_total(round(79.18 * 2**30))
    ('gb10', None)
    """
    if not total_bytes:
        return None
    return next((g.name for g in GPU_LIST if g.unified and abs(g.cuda_bytes - total_bytes) < 0.006 * GiB), None)


def gpu_preset_for(name: str | None) -> str | None:
    """The preset for a GPU as people and tools name it, or None when none is ours.

    >>> [gpu_preset_for(n) for n in ("NVIDIA A100-SXM4-40GB", "H100 80GB HBM3", "NVIDIA GeForce RTX 4090",
    ...                              "A10 24GB", "Tesla T4 (Colab)", "H20 141GB", "Quadro RTX A4000 16GB")]
    ['a100-40gb', 'h100-80gb', 'rtx-4090', 'a10', 't4', None, None]
    """
    if not name:
        return None
    text = " ".join(_NOISE.sub(" ", name.lower()).split())
    if text in GPUS:
        return text
    return next((preset for pattern, preset in _NAME_RULES if re.search(pattern, text)), None)
