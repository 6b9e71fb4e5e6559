"""Loading time, measured: how long until a fresh process can serve.

A replacement replica is not ready when its process starts. In a fresh
process we save the small model with safetensors, then time each phase of the
readiness timeline (the phase names of the course's loading model):

==============  ===============================================================
phase           what we time
==============  ===============================================================
device_init     the first CUDA call: driver + context creation (none on a CPU)
read_weights    ``safetensors.torch.load_file``: file -> host memory
host_to_device  ``.to(device)``: host memory -> GPU (nothing to copy on a CPU)
compile         graph compilation (0 here: the model runs eagerly)
warm_up         the first forward (prefill + one decode step): kernels, caches
==============  ===============================================================

:meth:`LoadTimeline.as_readiness_timeline` turns the measured phases into
:class:`course_lib.serving.loading.ReadinessTimeline`, the loading model's type, so
a measurement and a prediction can be drawn and compared the same way.

The file is flushed and dropped from the OS page cache before the read where
the OS allows (``posix_fadvise``), so the read comes from the disk; a replica
restarting on a warm machine would read from RAM instead.

Worked example (made-up seconds): the replica is ready after the sum.

>>> t = LoadTimeline("demo", "cpu", 1_000_000_000, (Phase("device_init", 0.0), Phase("read_weights", 0.5),
...                  Phase("host_to_device", 0.0), Phase("compile", 0.0), Phase("warm_up", 0.25)))
>>> t.total_seconds, t.read_gb_per_s
(0.75, 2.0)
>>> [(p.name, p.start_s, p.end_s) for p in t.as_readiness_timeline().phases][1:]
[('read weights', 0.0, 0.5), ('host->device copy', 0.5, 0.5), ('compile / graph capture', 0.5, 0.5), ('warm-up', 0.5, 0.75)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import check_count
from ..model.models import ModelSpec
from ..units import GB

PHASES = ("device_init", "read_weights", "host_to_device", "compile", "warm_up")
#: The same phases as course_lib.serving.loading names them.
LOADING_NAMES = {"device_init": "device init", "read_weights": "read weights", "host_to_device": "host->device copy",
                 "compile": "compile / graph capture", "warm_up": "warm-up"}


@dataclass(frozen=True)
class Phase:
    """One step towards readiness: its name (from PHASES), seconds, and what happened."""

    name: str
    seconds: float
    note: str = ""


@dataclass(frozen=True)
class LoadTimeline:
    """Measured readiness timeline of one model on one device.

    file_bytes: size of the safetensors file read.
    phases: in PHASES order. steady_forward_seconds: the same forward run a
    second time, to show what the warm-up cost on top.
    """

    model: str
    device: str
    file_bytes: int
    phases: tuple[Phase, ...]
    steady_forward_seconds: float = 0.0
    page_cache_dropped: bool = False

    @property
    def total_seconds(self) -> float:
        return round(sum(p.seconds for p in self.phases), 6)

    @property
    def read_gb_per_s(self) -> float:
        """File bytes / read seconds, in GB/s (10^9 bytes per second)."""
        read = self.phase("read_weights").seconds
        return round(self.file_bytes / GB / read, 3) if read > 0 else float("inf")

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)

    def as_readiness_timeline(self):
        """The measured phases as :class:`course_lib.serving.loading.ReadinessTimeline`, one after another from t = 0."""
        from ..serving.loading import Phase as LoadingPhase, ReadinessTimeline

        t, phases = 0.0, []
        for p in self.phases:
            phases.append(LoadingPhase(LOADING_NAMES[p.name], round(t, 6), round(t + p.seconds, 6), f"measured: {p.note}"))
            t += p.seconds
        read = self.phase("read_weights").seconds
        return ReadinessTimeline(
            weights_bytes=self.file_bytes, storage="measured (this machine)",
            storage_bytes_per_s=int(self.file_bytes / read) if read > 0 else 0,
            link="measured" if self.device.startswith("cuda") else "none (CPU)", efficiency=1.0,
            phases=tuple(phases))

    def table(self) -> str:
        lines = [f"readiness timeline: {self.model} on {self.device}, {self.file_bytes / GB:.3f} GB safetensors file",
                 f"{'phase':<15} {'seconds':>9}  note"]
        for p in self.phases:
            lines.append(f"{p.name:<15} {p.seconds:>9.3f}  {p.note}")
        lines.append(f"{'ready after':<15} {self.total_seconds:>9.3f}  (a second forward takes "
                     f"{self.steady_forward_seconds:.3f} s)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "device": self.device, "file_bytes": self.file_bytes,
                "phases": {p.name: {"seconds": p.seconds, "note": p.note} for p in self.phases},
                "total_seconds": self.total_seconds, "read_gb_per_s": self.read_gb_per_s,
                "steady_forward_seconds": self.steady_forward_seconds,
                "page_cache_dropped": self.page_cache_dropped}


def measure_load_time(model: ModelSpec | str, device: str = "auto", *, dtype: str | None = None,
                      threads: int | None = None, progress: bool = True, tmp_dir: str | None = None) -> LoadTimeline:
    """Save ``model`` (random weights) to a safetensors file and time its readiness, in a fresh process.

    Needs disk space for one copy of the weights in ``tmp_dir`` (the system temp folder by default).
    """
    from .run import _checked_dtype, default_dtype, resolve_spec, run_worker
    from .device import resolve_device, threads_default
    from .tiny_model import architecture

    spec = resolve_spec(model)
    arch = architecture(spec)
    dev = resolve_device(device)
    dtype = _checked_dtype(dtype or default_dtype(dev))
    threads = check_count("threads", threads, 1) if threads is not None else threads_default()
    request = {"task": "load", "arch": arch.to_dict(), "device": dev, "dtype": dtype, "threads": threads,
               "tmp_dir": tmp_dir}
    _, out = run_worker(request, steps=("device_init", "save", "read_weights", "host_to_device", "warm_up"),
                        desc=f"load time {spec.name} on {dev}", progress=progress)
    cuda = dev == "cuda"
    dropped = bool(out.get("page_cache_dropped"))
    phases = (
        Phase("device_init", out["device_init_seconds"],
              "first CUDA call: driver + context" if cuda else "none: no accelerator to initialise"),
        Phase("read_weights", out["read_weights_seconds"],
              "safetensors load_file -> host memory" + (" (page cache dropped first: a disk read)" if dropped
                                                        else " (file may be in the page cache)")),
        Phase("host_to_device", out["host_to_device_seconds"],
              "host -> GPU copy" if cuda else "none: on the CPU the weights already live in host memory"),
        Phase("compile", out["compile_seconds"], "none: eager mode, nothing compiled"),
        Phase("warm_up", out["warm_up_seconds"], "first forward: 16-token prefill + 1 decode step"),
    )
    return LoadTimeline(spec.name, dev, int(out["file_bytes"]), phases,
                        steady_forward_seconds=out["steady_forward_seconds"], page_cache_dropped=dropped)
