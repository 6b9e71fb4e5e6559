"""``course-memory measure``: predicted vs measured memory on the machine in front of you.

    course-memory measure --model course-tiny
    course-memory measure --config config.json --sequences 8 --context-tokens 1024 --json
    course-memory measure --model course-tiny --plot out/measure.png

A thin layer over :func:`course_lib.measure.report.measure`, which the notebook can call as well. It
prints each pool predicted vs measured with the % error, a snapshot of the
measuring process, the readiness timeline and host<->device bandwidth.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..bounds import MAX_CONTEXT_TOKENS, MAX_SEQUENCES, MAX_THREADS
from ..errors import CourseInputError
from ..measure.report import DEFAULT_CONTEXT_TOKENS, DEFAULT_SEQUENCES, measure
from ..measure.run import MALLOC_MODES
from ..measure.tiny_model import TORCH_DTYPES
from ..output import check_output_file, write_failed
from .args import add_model_args, dtype_name, model_from_args, print_json, whole


def _plot_suffixes() -> tuple[str, ...]:
    """The image formats matplotlib can write here (``--plot x.bmp`` is refused before measuring)."""
    from matplotlib.figure import Figure  # matplotlib, only when --plot is given

    return tuple(f".{ext}" for ext in sorted(Figure().canvas.get_supported_filetypes()))


def _check_args(args: argparse.Namespace) -> None:
    """Every check that needs no measurement, done before the minutes of real work start."""
    if args.plot is not None:
        check_output_file("--plot", args.plot, suffixes=_plot_suffixes(), make_parents=True)
    if args.context_tokens <= args.decode_tokens:
        raise CourseInputError(f"--context-tokens={args.context_tokens} leaves no prompt before "
                               f"--decode-tokens={args.decode_tokens}; use --context-tokens "
                               f"{args.decode_tokens + 1} or more, or fewer --decode-tokens")
    dtype_name("--dtype", args.dtype, tuple(TORCH_DTYPES))
    dtype_name("--kv-dtype", args.kv_dtype, tuple(TORCH_DTYPES))


def _cmd_measure(args: argparse.Namespace) -> int:
    _check_args(args)
    spec = model_from_args(args)
    report = measure(spec, sequences=args.sequences, context_tokens=args.context_tokens, device=args.device,
                     dtype=args.dtype, kv_dtype=args.kv_dtype, decode_tokens=args.decode_tokens,
                     prefill_chunk_tokens=args.prefill_chunk_tokens, threads=args.threads, malloc=args.malloc,
                     load_time=not args.no_load_time, progress=not args.quiet)
    if args.plot:
        from ..measure.plot import plot_pools  # matplotlib

        try:
            path = plot_pools(report.pools, args.plot)
        except OSError as exc:
            raise write_failed("--plot", args.plot, exc) from None
        print(f"plot written to {path}", file=sys.stderr)
    if args.json:
        print_json(report.to_dict())
    else:
        print(report.text())
    return 0


def register(subparsers: Any) -> None:
    """Add the ``measure`` verb to ``course-memory`` (called by course_lib.cli.main)."""
    p = subparsers.add_parser("measure", help="predicted vs measured memory on this machine (CPU or GPU)",
                              description="Build a small real model from the config, measure its weights, KV cache "
                                          "and prefill workspace in a fresh process, and compare each with "
                                          "course_lib's prediction.")
    add_model_args(p)
    p.add_argument("--sequences", type=whole("--sequences", 1, MAX_SEQUENCES), default=DEFAULT_SEQUENCES,
                   help=f"sequences in the KV cache (default {DEFAULT_SEQUENCES})")
    p.add_argument("--context-tokens", type=whole("--context-tokens", 1, MAX_CONTEXT_TOKENS),
                   default=DEFAULT_CONTEXT_TOKENS,
                   help=f"tokens per sequence: prompt + decode (default {DEFAULT_CONTEXT_TOKENS})")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="where to measure (default auto)")
    p.add_argument("--dtype", default=None, help="weights dtype: fp32, fp16 or bf16 (default fp32 on CPU, bf16 on GPU)")
    p.add_argument("--kv-dtype", default=None, help="KV-cache dtype (default: same as --dtype)")
    p.add_argument("--decode-tokens", type=whole("--decode-tokens", 0, MAX_CONTEXT_TOKENS), default=2, help="decode steps after prefill (default 2)")
    p.add_argument("--prefill-chunk-tokens", type=whole("--prefill-chunk-tokens", 1, MAX_CONTEXT_TOKENS), default=None,
                   help="positions per prefill step, per sequence (default: the whole prompt at once)")
    p.add_argument("--threads", type=whole("--threads", 1, MAX_THREADS), default=None, help="CPU threads for torch (default: at most 2, for repeatability)")
    p.add_argument("--malloc", default="mmap", choices=MALLOC_MODES,
                   help="CPU allocator: mmap = RSS follows live tensors (default); default = glibc as is, which keeps freed memory")
    p.add_argument("--no-load-time", action="store_true", help="skip the readiness timeline (saves a model file and reads it back)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print JSON (integers of bytes)")
    p.add_argument("--plot", metavar="PATH", default=None, help="write a PNG bar chart of predicted vs measured")
    p.set_defaults(func=_cmd_measure)
