"""``measure()``: pools, then load time, then bandwidth, each in its own fresh process, as one report.

What ``course-memory measure`` prints and ``--json`` writes; the notebook can call it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model.models import ModelSpec
from .bandwidth import BandwidthResult, measure_bandwidth
from .device import snapshot_from_dict
from .loadtime import LoadTimeline, measure_load_time
from .run import MeasureResult, measure_pools

DEFAULT_SEQUENCES = 4          # with 2048 tokens: >= 200 MB in every pool of course-tiny (fp32)
DEFAULT_CONTEXT_TOKENS = 2048


@dataclass(frozen=True)
class MeasureReport:
    """Everything ``course-memory measure`` reports.

    pools: predicted vs measured (weights, KV cache, workspace).
    load_time: the readiness timeline (None when skipped).
    bandwidth: host<->device copies (``applies`` is False on a CPU).
    """

    pools: MeasureResult
    load_time: LoadTimeline | None
    bandwidth: BandwidthResult

    def to_dict(self) -> dict[str, Any]:
        """``{"device", "pools": {"weights": {"predicted_bytes", "measured_bytes", ...}, ...}, ...}``."""
        out = self.pools.to_dict()
        out["load_time"] = self.load_time.to_dict() if self.load_time else None
        out["bandwidth"] = self.bandwidth.to_dict()
        return out

    def text(self) -> str:
        parts = [self.pools.table(), "",
                 "the measuring process at its end:", snapshot_from_dict(self.pools.snapshot).describe()]
        if self.load_time:
            parts += ["", self.load_time.table()]
        parts += ["", self.bandwidth.describe()]
        return "\n".join(parts)


def measure(model: ModelSpec | str, *, sequences: int = DEFAULT_SEQUENCES,
            context_tokens: int = DEFAULT_CONTEXT_TOKENS, device: str = "auto", dtype: str | None = None,
            kv_dtype: str | None = None, decode_tokens: int = 2, prefill_chunk_tokens: int | None = None,
            threads: int | None = None, malloc: str = "mmap", load_time: bool = True,
            progress: bool = True) -> MeasureReport:
    """Pools, then load time, then bandwidth; each measurement in its own fresh process."""
    pools = measure_pools(model, sequences, context_tokens, device, dtype=dtype, kv_dtype=kv_dtype,
                          decode_tokens=decode_tokens, prefill_chunk_tokens=prefill_chunk_tokens,
                          threads=threads, malloc=malloc, progress=progress)
    device_kind = "cuda" if pools.device.startswith("cuda") else "cpu"
    timeline = (measure_load_time(model, device_kind, dtype=pools.settings["dtype"], threads=threads,
                                  progress=progress) if load_time else None)
    return MeasureReport(pools, timeline, measure_bandwidth(device_kind))
