"""``course-memory measure``: predicted vs measured memory on the machine in front of you.

    course-memory measure --model course-tiny
    course-memory measure --config config.json --sequences 8 --context-tokens 1024 --json
    course-memory measure --model course-tiny --plot out/measure.png

A thin layer over :func:`measure`, which the notebook can call as well. It
prints each pool predicted vs measured with the % error, a snapshot of the
measuring process, the readiness timeline and host<->device bandwidth.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models import ModelSpec
from .bandwidth import BandwidthResult, measure_bandwidth
from .device import snapshot_from_dict
from .loadtime import LoadTimeline, measure_load_time
from .run import MALLOC_MODES, MeasureResult, measure_pools

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


def _cmd_measure(args: argparse.Namespace) -> int:
    from ..cli import model_from_args

    spec = model_from_args(args)
    report = measure(spec, sequences=args.sequences, context_tokens=args.context_tokens, device=args.device,
                     dtype=args.dtype, kv_dtype=args.kv_dtype, decode_tokens=args.decode_tokens,
                     prefill_chunk_tokens=args.prefill_chunk_tokens, threads=args.threads, malloc=args.malloc,
                     load_time=not args.no_load_time, progress=not args.quiet)
    if args.plot:
        from .plot import plot_pools

        path = plot_pools(report.pools, args.plot)
        print(f"plot written to {path}", file=sys.stderr)
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(report.text())
    return 0


def register(subparsers: Any) -> None:
    """Add the ``measure`` verb to ``course-memory`` (called by course_lib.cli)."""
    from ..cli import add_model_args

    p = subparsers.add_parser("measure", help="predicted vs measured memory on this machine (CPU or GPU)",
                              description="Build a small real model from the config, measure its weights, KV cache "
                                          "and prefill workspace in a fresh process, and compare each with "
                                          "course_lib's prediction.")
    add_model_args(p)
    p.add_argument("--sequences", type=int, default=DEFAULT_SEQUENCES,
                   help=f"sequences in the KV cache (default {DEFAULT_SEQUENCES})")
    p.add_argument("--context-tokens", type=int, default=DEFAULT_CONTEXT_TOKENS,
                   help=f"tokens per sequence: prompt + decode (default {DEFAULT_CONTEXT_TOKENS})")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="where to measure (default auto)")
    p.add_argument("--dtype", default=None, help="weights dtype: fp32, fp16 or bf16 (default fp32 on CPU, bf16 on GPU)")
    p.add_argument("--kv-dtype", default=None, help="KV-cache dtype (default: same as --dtype)")
    p.add_argument("--decode-tokens", type=int, default=2, help="decode steps after prefill (default 2)")
    p.add_argument("--prefill-chunk-tokens", type=int, default=None,
                   help="positions per prefill step, per sequence (default: the whole prompt at once)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: at most 2, for repeatability)")
    p.add_argument("--malloc", default="mmap", choices=MALLOC_MODES,
                   help="CPU allocator: mmap = RSS follows live tensors (default); default = glibc as is, which keeps freed memory")
    p.add_argument("--no-load-time", action="store_true", help="skip the readiness timeline (saves a model file and reads it back)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print JSON (integers of bytes)")
    p.add_argument("--plot", metavar="PATH", default=None, help="write a PNG bar chart of predicted vs measured")
    p.set_defaults(func=_cmd_measure)


# ---------------------------------------------------------------- make demo

def demo_section(out_dir: str | Path = "out") -> None:
    """``make demo``: a quick real measurement of course-tiny on the CPU (about 10-20 s on 2 cores)."""
    from ..demo import banner

    banner("Predicted vs measured on this machine: course-tiny (fp32) on the CPU, 2 sequences x 512 tokens")
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        print("skipped: torch is not installed (the measurement needs it)")
        return
    result = measure_pools("course-tiny", sequences=2, context_tokens=512, device="cpu", progress=True)
    print(result.table())
    print()
    print("the measuring process at its end:")
    print(snapshot_from_dict(result.snapshot).describe())
    print(measure_bandwidth("cpu").describe())
    from .plot import plot_pools

    path = plot_pools(result, Path(out_dir) / "measure_pools.png")
    print(f"plot: {path}")
    print("(small pools: a few MB of allocator and library overhead weigh more here than at the "
          "200 MB+ scale of `course-memory measure --model course-tiny`)")
