"""What the machine in front of you says about memory, right now.

"Free memory is not guaranteed capacity": a snapshot shows why. On a GPU,
``total - free`` is more than what torch allocated: torch *reserves* blocks it
keeps for reuse (reserved - allocated is its cache; only the inactive split part of it is fragmented), and the CUDA
context and other libraries sit outside torch altogether:

    non_torch_bytes     = (total - free) - reserved      # CUDA context, cuBLAS, other processes
    cached_bytes        = reserved - allocated           # cached by torch, not in any tensor

On the CPU the same questions are answered by the operating system: the
process's resident set (RSS, pages it has actually touched), its peak (the
high-water mark, VmHWM on Linux) and the memory the system could still give
(MemAvailable, which counts reclaimable page cache as available).

Worked example (made-up GPU numbers, checkable by hand): a 24 GiB card
reporting 2 GiB free, with torch holding 20 GiB reserved and 19 GiB allocated:

>>> from course_lib.units import GiB
>>> s = CudaSnapshot(device="cuda:0", device_name="demo", total_bytes=24 * GiB, free_bytes=2 * GiB,
...                  allocated_bytes=19 * GiB, reserved_bytes=20 * GiB, peak_allocated_bytes=19 * GiB,
...                  peak_reserved_bytes=20 * GiB, inactive_split_bytes=0)
>>> s.non_torch_bytes // GiB      # (24 - 2) - 20: the CUDA context and friends
2
>>> s.cached_bytes // GiB  # 20 - 19: reserved by torch, in no tensor
1

Nothing here imports torch unless you ask about a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import sys
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import CourseInputError
from ..units import GB, GiB, MiB

DEVICES = ("auto", "cpu", "cuda")


# ----------------------------------------------------------------- the OS side

def _proc_status_bytes(key: str) -> int | None:
    """A ``kB`` line of /proc/self/status (Linux) as bytes, or None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def rss_bytes() -> int:
    """Resident set size of this process: pages it holds in RAM right now."""
    value = _proc_status_bytes("VmRSS")
    if value is not None:
        return value
    import psutil  # portable fallback (macOS, Windows)

    return int(psutil.Process().memory_info().rss)


def peak_rss_bytes() -> int:
    """The high-water mark of RSS since start, or since :func:`reset_peak_rss`.

    Linux reports it as VmHWM; elsewhere ``getrusage`` gives ``ru_maxrss``
    (KiB on Linux, bytes on macOS), which cannot be reset.
    """
    value = _proc_status_bytes("VmHWM")
    if value is not None:
        return value
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(maxrss if sys.platform == "darwin" else maxrss * 1024)


def reset_peak_rss() -> bool:
    """Reset the peak to the current RSS (Linux: write 5 to /proc/self/clear_refs).

    Returns False where the OS offers no reset; the peak then counts from the
    start of the process, so measure each phase in a fresh process.
    """
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def available_bytes() -> int:
    """Memory the system can still give a process (Linux MemAvailable)."""
    import psutil

    return int(psutil.virtual_memory().available)


# ------------------------------------------------------------------ snapshots

@dataclass(frozen=True)
class CpuSnapshot:
    """Host memory as the operating system reports it.

    rss_bytes: this process's resident set (touched pages) now.
    peak_rss_bytes: its high-water mark (since start or the last reset).
    available_bytes: what the system could still give (MemAvailable).
    total_bytes: physical RAM.
    """

    rss_bytes: int
    peak_rss_bytes: int
    available_bytes: int
    total_bytes: int
    device: str = "cpu"

    def describe(self) -> str:
        """A few lines a learner can read.

        >>> print(CpuSnapshot(rss_bytes=400 * MiB, peak_rss_bytes=1500 * MiB,
        ...                   available_bytes=20 * GiB, total_bytes=24 * GiB).describe())
        cpu: process RSS 419.4 MB (400.0 MiB), peak RSS 1,572.9 MB (1,500.0 MiB)
             system available 21.47 GB of 25.77 GB total (20.00 GiB of 24.00 GiB)
        """
        return (f"cpu: process RSS {_mb(self.rss_bytes)}, peak RSS {_mb(self.peak_rss_bytes)}\n"
                f"     system available {self.available_bytes / GB:.2f} GB of {self.total_bytes / GB:.2f} GB total "
                f"({self.available_bytes / GiB:.2f} GiB of {self.total_bytes / GiB:.2f} GiB)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CudaSnapshot:
    """GPU memory as the driver and torch's caching allocator report it.

    total_bytes / free_bytes: ``torch.cuda.mem_get_info`` (the driver's view,
        every process and context included).
    allocated_bytes: bytes in live torch tensors.
    reserved_bytes: bytes torch's caching allocator holds (allocated + cached).
    peak_allocated_bytes / peak_reserved_bytes: their maxima since the last reset.
    inactive_split_bytes: free blocks inside segments that still hold a live
        tensor (``memory_stats()["inactive_split_bytes.all.current"]``): the
        fragmented part of the cache, which torch cannot hand back.
    """

    device: str
    device_name: str
    total_bytes: int
    free_bytes: int
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    inactive_split_bytes: int

    @property
    def non_torch_bytes(self) -> int:
        """(total - free) - reserved: CUDA context, library workspaces, other processes."""
        return (self.total_bytes - self.free_bytes) - self.reserved_bytes

    @property
    def cached_bytes(self) -> int:
        """reserved - allocated: held by torch's cache but in no live tensor.

        Cached is not lost: torch hands whole free segments back (``empty_cache()``, or by itself when a
        ``cudaMalloc`` fails). Only :attr:`inactive_split_bytes`, free blocks inside segments that still
        hold a tensor, are fragmented.
        """
        return self.reserved_bytes - self.allocated_bytes

    def describe(self) -> str:
        return "\n".join([
            f"{self.device} ({self.device_name}): total {self.total_bytes / GB:.2f} GB, "
            f"free {self.free_bytes / GB:.2f} GB ({self.free_bytes / GiB:.2f} GiB)",
            f"  torch allocated {_mb(self.allocated_bytes)}, reserved {_mb(self.reserved_bytes)}, "
            f"peak allocated {_mb(self.peak_allocated_bytes)}, peak reserved {_mb(self.peak_reserved_bytes)}",
            f"  outside torch (CUDA context, libraries, other processes): {_mb(self.non_torch_bytes)}",
            f"  cached (reserved - allocated): {_mb(self.cached_bytes)}; of it fragmented (free blocks in segments "
            f"that hold a live tensor, inactive_split): {_mb(self.inactive_split_bytes)}",
        ])

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["non_torch_bytes"] = self.non_torch_bytes
        out["cached_bytes"] = self.cached_bytes
        return out


def _mb(num_bytes: int) -> str:
    return f"{num_bytes / 10**6:,.1f} MB ({num_bytes / MiB:,.1f} MiB)"


def torch_available() -> bool:
    """Whether torch can be imported here (without importing it)."""
    return importlib.util.find_spec("torch") is not None


#: What to run when a measurement needs torch and it is not installed (a GPU machine keeps its own).
TORCH_HINT = ("torch is not installed in this Python. The measurement needs it: on a CPU-only machine run "
              "`pip install torch --index-url https://download.pytorch.org/whl/cpu` in a terminal of this "
              "environment, then restart the kernel; on a GPU machine (Colab, a JupyterHub image) use its torch.")


#: The device nodes a GPU build of torch opens on Linux: NVIDIA's, AMD ROCm's, WSL2's GPU. With none of
#: them torch sees no GPU, so "auto" is "cpu" without importing torch (over a second of CPU, which a
#: refusal before any measuring should not cost).
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def _may_have_gpu() -> bool:
    """False only where torch certainly sees no GPU (Linux without a GPU device node)."""
    return not sys.platform.startswith("linux") or any(os.path.exists(node) for node in GPU_DEVICE_NODES)


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` becomes ``"cuda"`` when torch sees a GPU, else ``"cpu"``.

    >>> resolve_device("cpu")
    'cpu'
    >>> resolve_device("tpu")
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: device='tpu' is not a device; use auto, cpu or cuda
    """
    key = str(device).strip().lower()
    if key not in DEVICES:
        raise CourseInputError(f"device={device!r} is not a device; use auto, cpu or cuda")
    if key == "cpu":
        return "cpu"
    if key == "auto" and (not torch_available() or not _may_have_gpu()):
        return "cpu"
    import torch  # the GPU question needs it

    if torch.cuda.is_available():
        return "cuda"
    if key == "cuda":
        raise CourseInputError("device='cuda' but torch sees no CUDA GPU "
                               f"(torch {torch.__version__}); use --device cpu or auto")
    return "cpu"


def cpu_snapshot() -> CpuSnapshot:
    """The OS's view of this process and the system, now."""
    import psutil

    return CpuSnapshot(rss_bytes=rss_bytes(), peak_rss_bytes=peak_rss_bytes(),
                       available_bytes=available_bytes(), total_bytes=int(psutil.virtual_memory().total))


def cuda_snapshot(index: int | None = None) -> CudaSnapshot:
    """The driver's and torch's view of one GPU (the current one by default)."""
    import torch

    index = torch.cuda.current_device() if index is None else index
    free, total = torch.cuda.mem_get_info(index)
    stats = torch.cuda.memory_stats(index)
    return CudaSnapshot(
        device=f"cuda:{index}", device_name=torch.cuda.get_device_name(index),
        total_bytes=int(total), free_bytes=int(free),
        allocated_bytes=int(torch.cuda.memory_allocated(index)),
        reserved_bytes=int(torch.cuda.memory_reserved(index)),
        peak_allocated_bytes=int(torch.cuda.max_memory_allocated(index)),
        peak_reserved_bytes=int(torch.cuda.max_memory_reserved(index)),
        inactive_split_bytes=int(stats.get("inactive_split_bytes.all.current", 0)),
    )


def snapshot(device: str = "auto") -> CpuSnapshot | CudaSnapshot:
    """A snapshot of ``device`` ("auto", "cpu" or "cuda"); ``.describe()`` prints it.

    >>> snap = snapshot("cpu")
    >>> snap.rss_bytes > 0 and snap.peak_rss_bytes >= snap.rss_bytes
    True
    """
    if resolve_device(device) == "cuda":
        return cuda_snapshot()
    return cpu_snapshot()


def threads_default() -> int:
    """Threads for measurements: few, so runs are repeatable (at most 2)."""
    return max(1, min(2, os.cpu_count() or 1))


def snapshot_from_dict(data: dict[str, Any]) -> CpuSnapshot | CudaSnapshot:
    """Rebuild a snapshot from its ``to_dict()`` (e.g. one sent back by the measuring process).

    >>> snapshot_from_dict(CpuSnapshot(1, 2, 3, 4).to_dict()).peak_rss_bytes
    2
    """
    if str(data.get("device", "cpu")).startswith("cuda"):
        keys = CudaSnapshot.__dataclass_fields__
        return CudaSnapshot(**{k: v for k, v in data.items() if k in keys})
    keys = CpuSnapshot.__dataclass_fields__
    return CpuSnapshot(**{k: v for k, v in data.items() if k in keys})
