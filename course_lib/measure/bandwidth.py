"""Host <-> device bandwidth: what offloading and loading pay per byte.

Offloading weights or KV cache to host memory frees GPU memory, but every
byte moved back crosses PCIe (or NVLink-C2C). Copies from *pinned* (page-locked)
host memory go by DMA directly; copies from ordinary *pageable* memory are
staged through a pinned bounce buffer by the driver, and are usually slower.

On a CPU-only machine there is no device memory: weights and cache already
live in host RAM, so there is no host <-> device copy to measure.

Worked example: moving a 14 GB model at 25 GB/s (pinned, PCIe 4.0 x16) takes
14 / 25 = 0.56 s; at 10 GB/s (pageable) 1.4 s.

>>> r = BandwidthResult(applies=True, device="cuda:0", size_bytes=10**9, h2d_pinned_gb_s=25.0)
>>> r.seconds_for(14 * 10**9, "h2d_pinned")
0.56
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..errors import CourseInputError, check_count
from ..units import GB, MiB

CPU_REASON = ("does not apply on the CPU: there is no separate device memory, so weights and KV cache already "
              "live in host RAM and nothing crosses a host<->device link")
DIRECTIONS = ("h2d_pageable", "h2d_pinned", "d2h_pageable", "d2h_pinned")


@dataclass(frozen=True)
class BandwidthResult:
    """Copy bandwidth in GB/s (10^9 bytes per second), best of a few repeats.

    applies: False on a CPU-only run (``reason`` says why).
    h2d_*: host -> device; d2h_*: device -> host; pinned or pageable host memory.
    """

    applies: bool
    device: str
    size_bytes: int = 0
    h2d_pageable_gb_s: float | None = None
    h2d_pinned_gb_s: float | None = None
    d2h_pageable_gb_s: float | None = None
    d2h_pinned_gb_s: float | None = None
    reason: str = ""

    def seconds_for(self, num_bytes: int, direction: str = "h2d_pinned") -> float:
        """Seconds to move ``num_bytes`` at the measured rate of ``direction``."""
        if direction not in DIRECTIONS:
            raise CourseInputError(f"direction={direction!r} is not one of {', '.join(DIRECTIONS)}")
        rate = getattr(self, f"{direction}_gb_s")
        if not self.applies or not rate:
            raise CourseInputError(f"no {direction} bandwidth on {self.device}: {self.reason or 'not measured'}")
        return round(num_bytes / GB / rate, 6)

    def describe(self) -> str:
        if not self.applies:
            return f"host<->device bandwidth on {self.device}: {self.reason}"
        return (f"host<->device bandwidth on {self.device} ({self.size_bytes // MiB} MiB copies, GB/s = 10^9 B/s):\n"
                f"  host->device  pinned {self.h2d_pinned_gb_s:7.2f} GB/s   pageable {self.h2d_pageable_gb_s:7.2f} GB/s\n"
                f"  device->host  pinned {self.d2h_pinned_gb_s:7.2f} GB/s   pageable {self.d2h_pageable_gb_s:7.2f} GB/s")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_bandwidth(device: str = "auto", size_bytes: int = 256 * MiB, repeats: int = 5) -> BandwidthResult:
    """Time copies of ``size_bytes`` between host and GPU, pinned and pageable (in this process).

    >>> measure_bandwidth("cpu").applies
    False
    """
    from .device import resolve_device

    size = check_count("size_bytes", size_bytes, 1)
    repeats = check_count("repeats", repeats, 1)
    if resolve_device(device) != "cuda":
        return BandwidthResult(applies=False, device="cpu", reason=CPU_REASON)
    import torch

    gpu = torch.empty(size, dtype=torch.uint8, device="cuda")
    pageable = torch.ones(size, dtype=torch.uint8)            # touched, so its pages exist
    pinned = torch.ones(size, dtype=torch.uint8).pin_memory()
    rates: dict[str, float] = {}
    for name, dst, src in (("h2d_pageable", gpu, pageable), ("h2d_pinned", gpu, pinned),
                           ("d2h_pageable", pageable, gpu), ("d2h_pinned", pinned, gpu)):
        dst.copy_(src, non_blocking=name.endswith("pinned"))   # warm-up copy
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src, non_blocking=name.endswith("pinned"))
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1000.0)
        rates[name] = round(size / GB / best, 3)
    index = torch.cuda.current_device()
    del gpu, pageable, pinned
    torch.cuda.empty_cache()
    return BandwidthResult(applies=True, device=f"cuda:{index}", size_bytes=size,
                           **{f"{k}_gb_s": v for k, v in rates.items()})
