"""Free memory is not guaranteed capacity, shown with real allocations on this machine.

In a fresh process (so the notebook's own memory does not blur the figures):

- **CPU** (glibc malloc): allocate many medium blocks (64 KiB: below glibc's mmap threshold,
  so they come from the heap), free every other one, then ask for one large block. Half the
  blocks are free inside the process, yet its resident memory (RSS) does not drop: the freed
  holes sit between live blocks, the allocator keeps them, and none of them is big enough for
  the large request, which takes new memory although the free bytes exceed it.
- **GPU** (torch's caching allocator, whose rules are in PyTorch's ``CUDACachingAllocator.cpp`` and
  E. Yang's devlog "When does fragmentation occur in the CUDA caching allocator?"): a request
  first takes the *smallest cached free block that fits* and splits it (``get_free_block``,
  ``should_split``: splitting is unlimited by default, ``max_split_size`` unset), so large tensors
  fragment too; only a *new* segment is sized to the request (10 MiB or more) or to 2 / 20 MiB.
  *Cached* memory (reserved - allocated) is not lost: a segment with no live tensor goes back to
  CUDA on ``empty_cache()``, and the allocator releases such segments itself and retries when a
  ``cudaMalloc`` fails. Only free blocks inside segments that still hold a live tensor
  (``inactive_split``) are fragmented. :func:`_cuda` shows both, under a memory-fraction cap, with
  ``expandable_segments`` off or on (there, free pages between live blocks are unmapped on the same
  out-of-memory path, so ``inactive_split`` is not lost memory).

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
    inactive_split_bytes: GPU only: free blocks inside segments that still hold a live tensor
        (``memory_stats()["inactive_split_bytes.all.current"]``): the fragmented part of the cache.
    whole_free_segment_bytes: GPU only: cached segments with no live tensor (torch can release them).
    segments / note / total_bytes: GPU only: segments held, what the step shows, the device's total.
    """

    name: str
    used_bytes: int
    free_inside_bytes: int
    device_free_bytes: int
    allocated_bytes: int = 0
    inactive_split_bytes: int = 0
    whole_free_segment_bytes: int = 0
    segments: int = 0
    note: str = ""
    total_bytes: int = 0


@dataclass(frozen=True)
class FragmentationResult:
    """One run: the device, its steps, and (GPU) the allocator settings and where it was recorded."""

    device: str
    steps: tuple[Step, ...]
    alloc_conf: str = ""
    recorded: str = ""

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
            head = (f"{'step':<58} {'allocated':>10} {'reserved':>9} {'cached':>8} {'of it split':>11} "
                    f"{'device free':>12}  (MiB)")
            rows = [f"{s.name:<58} {s.allocated_bytes / MiB:>10.0f} {s.used_bytes / MiB:>9.0f} "
                    f"{s.free_inside_bytes / MiB:>8.0f} {s.inactive_split_bytes / MiB:>11.0f} "
                    f"{s.device_free_bytes / MiB:>12.0f}" + (f"  {s.note}" if s.note else "") for s in self.steps]
            if self.alloc_conf:
                head = f"PYTORCH_CUDA_ALLOC_CONF={self.alloc_conf}\n" + head
        lines = [head, "-" * len(head.splitlines()[-1]), *rows]
        if self.recorded:
            lines.insert(0, f"RECORDED, not measured here: {self.recorded}")
        return "\n".join(lines)


def held_after_free(device: str = "auto", timeout_s: float = 120, expandable_segments: bool = False
                    ) -> FragmentationResult:
    """Run the demonstration on ``device`` ("auto", "cpu", "cuda") in a fresh process.

    ``expandable_segments`` runs the GPU half with ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``
    (segments that grow and shrink by pages, so freed pages can be returned even between live blocks).
    """
    dev = resolve_device(device)
    env = worker_env(threads=1, malloc="default")     # glibc's malloc as it is: that is the point
    if dev != "cpu":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True" if expandable_segments else ""
    proc = subprocess.run([sys.executable, "-m", "course_lib.measure.fragmentation", dev], capture_output=True,
                          text=True, env=env, timeout=timeout_s)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise CourseInputError(f"the fragmentation demonstration failed on {dev}: {last}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return result_from_json(data)


def result_from_json(data: dict[str, Any], recorded: str = "") -> FragmentationResult:
    """A :class:`FragmentationResult` from the measuring process's JSON (or a recorded run's)."""
    steps = tuple(Step(**{k: v for k, v in st.items() if k in Step.__dataclass_fields__}) for st in data["steps"])
    return FragmentationResult(data["device"], steps, data.get("alloc_conf", ""), recorded)


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


def segment_summary(segments: list[dict[str, Any]]) -> dict[str, int]:
    """Totals of a ``torch.cuda.memory_snapshot()`` segment list: what is cached whole, and what is split.

    A segment whose blocks are all free can be handed back to CUDA (``empty_cache()``, or the
    allocator itself when a ``cudaMalloc`` fails: it frees such segments and retries). A free block in a
    segment that still holds a live tensor cannot: that is PyTorch's ``inactive_split`` memory, the
    part of the cache that is really fragmented.

    >>> segs = [{"total_size": 20 * MiB, "blocks": [{"size": 4 * MiB, "state": "inactive"},
    ...          {"size": 2 * MiB, "state": "active_allocated"}, {"size": 14 * MiB, "state": "inactive"}]},
    ...         {"total_size": 32 * MiB, "blocks": [{"size": 32 * MiB, "state": "inactive"}]}]
    >>> r = segment_summary(segs)
    >>> r["whole_free_bytes"] // MiB, r["split_free_bytes"] // MiB, r["segments"], r["split_segments"]
    (32, 18, 2, 1)
    """
    whole = split = live = 0
    split_segments = 0
    for seg in segments:
        blocks = seg.get("blocks", [])
        free = sum(b["size"] for b in blocks if b.get("state") == "inactive")
        used = sum(b["size"] for b in blocks if b.get("state") != "inactive")
        live += used
        if used == 0:
            whole += seg.get("total_size", free)
        else:
            split += free
            split_segments += 1 if free else 0
    return {"segments": len(segments), "whole_free_bytes": whole, "split_free_bytes": split, "live_bytes": live,
            "split_segments": split_segments}


def _cuda() -> dict[str, Any]:
    """Caching against fragmentation on a GPU, with torch's caching allocator (see the module docstring).

    1. 16 tensors of 32 MiB (each a new segment of its own), then freed: cached *whole* segments,
       free to torch, not to other processes; ``inactive_split`` stays ~0.
    2. 48 pairs of a 4 MiB and a 1.5 MiB tensor. They are *carved from the 32 MiB segments cached in
       step 1* (best fit, then split; no new 20 MiB segment is made): about 5.5 pairs a segment, so
       about 9 of the 16 segments are split and about 7 stay whole. Then the 4 MiB ones are freed:
       free blocks inside segments that still hold live tensors: ``inactive_split``.
    3. A memory-fraction cap a little above what torch holds, then one 256 MiB request: CUDA refuses
       the new segment, so the allocator releases the cached segments step 2 left whole and retries;
       it succeeds, and the split memory of step 2 is still held.
    (This is a reading of ``c10/cuda/CUDACachingAllocator.cpp``; no GPU run of it is recorded yet.)
    4. A request larger than what the cap leaves after everything releasable: out of memory, although
       the split free blocks would add up to more.
    """
    import torch  # the GPU half needs it

    def snap(name: str, note: str = "") -> dict[str, Any]:
        free, total = torch.cuda.mem_get_info()
        stats = torch.cuda.memory_stats()
        reserved, allocated = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
        summary = segment_summary(torch.cuda.memory_snapshot())
        return {"name": name, "used_bytes": reserved, "free_inside_bytes": reserved - allocated,
                "device_free_bytes": free, "allocated_bytes": allocated,
                "inactive_split_bytes": int(stats.get("inactive_split_bytes.all.current", 0)),
                "whole_free_segment_bytes": summary["whole_free_bytes"], "segments": summary["segments"],
                "note": note, "total_bytes": total}

    torch.cuda.init()
    torch.cuda.empty_cache()
    steps = [snap("start")]
    whole = [torch.empty(32 * MiB, dtype=torch.uint8, device="cuda") for _ in range(16)]
    torch.cuda.synchronize()
    steps.append(snap("16 x 32 MiB allocated (a segment each)"))
    whole.clear()
    torch.cuda.synchronize()
    steps.append(snap("the 16 x 32 MiB freed", "cached whole: torch can give these back"))
    big, small = [], []
    for _ in range(48):
        big.append(torch.empty(4 * MiB, dtype=torch.uint8, device="cuda"))
        small.append(torch.empty(3 * MiB // 2, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    steps.append(snap("48 x (4 MiB + 1.5 MiB) carved from step 1's cached segments"))
    big.clear()
    torch.cuda.synchronize()
    steps.append(snap("the 4 MiB ones freed", "split: free blocks between live tensors"))
    held = torch.cuda.memory_reserved()
    _, total = torch.cuda.mem_get_info()
    cap = held + 64 * MiB
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
    large = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    steps.append(snap("cap at reserved + 64 MiB, then one 256 MiB request",
                      "the allocator released the cached segments left whole and retried"))
    note = ""
    try:
        huge = torch.empty(cap - torch.cuda.memory_reserved() + 128 * MiB, dtype=torch.uint8, device="cuda")
        del huge
        note = "allocated (nothing was out of reach)"
    except torch.cuda.OutOfMemoryError:
        note = "out of memory: the split free blocks could not serve it"
    steps.append(snap("a request 128 MiB beyond the cap's room", note))
    del large
    small.clear()
    torch.cuda.set_per_process_memory_fraction(1.0)
    torch.cuda.empty_cache()
    steps.append(snap("everything freed + empty_cache()"))
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    return {"device": "cuda", "alloc_conf": conf, "torch": torch.__version__,
            "device_name": torch.cuda.get_device_name(), "steps": steps}


if __name__ == "__main__":  # pragma: no cover - run by held_after_free in a fresh process
    print(json.dumps(_cuda() if sys.argv[1:] == ["cuda"] else _cpu()))
