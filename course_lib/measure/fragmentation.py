"""Free memory is not guaranteed capacity, shown with real allocations on this machine.

In a fresh process (so the notebook's own memory does not blur the figures):

- **CPU** (glibc malloc): allocate many medium blocks (64 KiB: below glibc's mmap threshold,
  so they come from the heap), free every other one, then ask for one large block. Half the
  blocks are free inside the process, yet its resident memory (RSS) does not drop: the freed
  holes sit between live blocks, the allocator keeps them, and none of them is big enough for
  the large request, which takes new memory although the free bytes exceed it.
- **GPU** (torch's caching allocator): allocate blocks of mixed sizes, free the large ones;
  torch's *reserved* stays high while *allocated* drops, and the device's free memory
  (``cudaMemGetInfo``) does not come back until ``empty_cache()``; a request larger than any
  cached piece grows the reservation although reserved - allocated exceeds it.

Each step is one :class:`Step` of plain integers; :meth:`FragmentationResult.describe` prints them.

>>> r = FragmentationResult("cpu", (Step("start", 100, 0, 0), Step("after freeing half", 180, 60, 0)))
>>> r.step("after freeing half").free_inside_bytes
60
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from ..errors import CourseInputError
from ..units import MB, MiB
from .device import resolve_device
from .run import worker_env

BLOCK_BYTES = 64 * 1024          # below glibc's default 128 KiB mmap threshold: heap memory
BLOCKS = 2048                    # 128 MiB in all
LARGE_BYTES = 32 * MiB           # far larger than any freed hole


@dataclass(frozen=True)
class Step:
    """One moment of the demonstration.

    used_bytes: CPU resident memory (RSS) of the process, or GPU bytes torch has reserved.
    free_inside_bytes: bytes the program freed but the process (allocator) still holds.
    device_free_bytes: GPU only: what ``cudaMemGetInfo`` reports free (0 on the CPU).
    allocated_bytes: GPU only: bytes in live tensors.
    """

    name: str
    used_bytes: int
    free_inside_bytes: int
    device_free_bytes: int
    allocated_bytes: int = 0


@dataclass(frozen=True)
class FragmentationResult:
    device: str
    steps: tuple[Step, ...]

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise CourseInputError(f"step={name!r} is not in this run; use one of {[s.name for s in self.steps]}")

    def describe(self) -> str:
        if self.device == "cpu":
            head = f"{'step':<44} {'RSS (MB)':>10} {'freed, still held (MB)':>24}"
            rows = [f"{s.name:<44} {s.used_bytes / MB:>10.1f} {s.free_inside_bytes / MB:>24.1f}" for s in self.steps]
        else:
            head = (f"{'step':<44} {'allocated (MB)':>15} {'reserved (MB)':>14} {'cached free (MB)':>17} "
                    f"{'device free (MB)':>17}")
            rows = [f"{s.name:<44} {s.allocated_bytes / MB:>15.1f} {s.used_bytes / MB:>14.1f} "
                    f"{s.free_inside_bytes / MB:>17.1f} {s.device_free_bytes / MB:>17.1f}" for s in self.steps]
        return "\n".join([head, "-" * len(head), *rows])


def held_after_free(device: str = "auto", timeout_s: float = 120) -> FragmentationResult:
    """Run the demonstration on ``device`` ("auto", "cpu", "cuda") in a fresh process."""
    dev = resolve_device(device)
    env = worker_env(threads=1, malloc="default")     # glibc's malloc as it is: that is the point
    proc = subprocess.run([sys.executable, "-m", "course_lib.measure.fragmentation", dev], capture_output=True,
                          text=True, env=env, timeout=timeout_s)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise CourseInputError(f"the fragmentation demonstration failed on {dev}: {last}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return FragmentationResult(data["device"], tuple(Step(**s) for s in data["steps"]))


# ---------------------------------------------------------------- the measuring process

def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu() -> dict[str, Any]:
    steps = [Step("start", _rss(), 0, 0)]
    blocks = [bytearray(BLOCK_BYTES) for _ in range(BLOCKS)]     # bytearray() touches every byte
    steps.append(Step(f"{BLOCKS} blocks of {BLOCK_BYTES // 1024} KiB allocated", _rss(), 0, 0))
    freed = 0
    for i in range(0, BLOCKS, 2):                                # every other block: holes between live ones
        blocks[i] = None
        freed += BLOCK_BYTES
    steps.append(Step("every other block freed", _rss(), freed, 0))
    large = bytearray(LARGE_BYTES)                               # bigger than any hole: new memory
    steps.append(Step(f"one {LARGE_BYTES // MiB} MiB request", _rss(), freed, 0))
    del large
    blocks = None
    steps.append(Step("everything freed", _rss(), 0, 0))
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)                  # ask glibc to hand memory back
        steps.append(Step("after malloc_trim(0)", _rss(), 0, 0))
    except (OSError, AttributeError):
        pass
    return {"device": "cpu", "steps": [s.__dict__ for s in steps]}


def _cuda() -> dict[str, Any]:
    import torch  # the GPU half needs it

    def snap(name: str) -> Step:
        free, _ = torch.cuda.mem_get_info()
        reserved, allocated = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
        return Step(name, reserved, reserved - allocated, free, allocated)

    torch.cuda.init()
    steps = [snap("start")]
    big, small = [], []
    for _ in range(64):   # interleaved: 20 MiB and 2 MiB blocks
        big.append(torch.empty(20 * MiB, dtype=torch.uint8, device="cuda"))
        small.append(torch.empty(2 * MiB, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    steps.append(snap("64 x (20 MiB + 2 MiB) allocated"))
    big.clear()
    torch.cuda.synchronize()
    steps.append(snap("the 20 MiB blocks freed"))
    large = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")   # larger than any cached piece
    torch.cuda.synchronize()
    steps.append(snap("one 256 MiB request"))
    del large
    small.clear()
    torch.cuda.empty_cache()
    steps.append(snap("everything freed + empty_cache()"))
    return {"device": "cuda", "steps": [s.__dict__ for s in steps]}


if __name__ == "__main__":  # pragma: no cover - run by held_after_free in a fresh process
    print(json.dumps(_cuda() if sys.argv[1:] == ["cuda"] else _cpu()))
