"""``course-memory`` budget, estimate, presets and demo; the parser and the exit codes.

``estimate`` is the lesson's simple model; ``estimate --runtime vllm|sglang|trtllm`` follows that
runtime's own sizing rule (:mod:`course_lib.runtimes`), and ``from-log`` reads a runtime's start-up
log back into its pools (:mod:`course_lib.cli.runtime`).

Every verb is a thin layer over library functions. Bad input exits 2 with one
line on stderr naming the value and what is valid; never a traceback.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from typing import Sequence

from ..bounds import MAX_CONTEXT_TOKENS, MAX_SEQUENCES, MAX_TENSOR_PARALLEL
from ..serving.budget import DEFAULT_PREFILL_CHUNK_TOKENS, DEFAULT_RESERVE, estimate, plan_budget
from ..errors import CourseInputError
from ..model.models import kv_cache_bytes_per_token
from ..output import check_output_dir
from ..model.presets import DEFAULT_GPU, GPU_BYTES, GPUS, get_model, model_names
from ..views.report import budget_table, estimate_table
from ..units import GB, GiB
from . import measure as measure_verb
from . import requests as request_verbs
from . import runtime as runtime_verb
from .args import (PROG, Parser, add_model_args, device_size, dtype_name, model_from_args, one_line, print_json,
                   reserve, size, whole)


def _cmd_budget(args: argparse.Namespace) -> int:
    device = device_size("--gpu", args.gpu)
    for flag, value in (("--weights", args.weights), ("--workspace", args.workspace),
                        ("--per-sequence", args.per_sequence), ("--request-state", args.request_state)):
        size(flag, value)
    reserve("--reserve", args.reserve)
    budget = plan_budget(device_bytes=device, weights_bytes=args.weights,
                         workspace_bytes=args.workspace, reserve_bytes=args.reserve,
                         per_sequence_kv_bytes=args.per_sequence, per_sequence_state_bytes=args.request_state,
                         active_sequences=args.active_sequences)
    if args.json:
        print_json(budget.to_dict())
    else:
        print(budget_table(budget, title=f"Memory budget for {args.active_sequences} active sequences"))
    return 0


def _cmd_estimate(args: argparse.Namespace) -> int:
    if not (args.runtime == "vllm" and str(args.gpu).strip().lower() == "cpu"):   # vLLM's CPU platform
        device_size("--gpu", args.gpu)
    dtype_name("--dtype", args.dtype)
    if args.kv_dtype is not None and not (args.runtime and args.kv_dtype.strip().lower() == "auto"):
        dtype_name("--kv-dtype", args.kv_dtype)
    dtype_name("--state-dtype", args.state_dtype)
    if args.workspace is not None:
        size("--workspace", args.workspace)
    reserve("--reserve", args.reserve)
    runtime_verb.check_runtime_flags(args)
    spec = model_from_args(args)
    if args.runtime is not None:
        runtime_verb.estimate_runtime(args, spec)
        return 0
    est = estimate(spec, gpu=args.gpu, dtype=args.dtype, kv_dtype=args.kv_dtype,
                   context_tokens=args.context_tokens or 4096, active_sequences=args.active_sequences,
                   tensor_parallel=args.tensor_parallel, workspace=args.workspace, reserve=args.reserve,
                   prefill_chunk_tokens=args.prefill_chunk_tokens, state_dtype=args.state_dtype)
    if args.json:
        print_json(est.to_dict())
    else:
        print(estimate_table(est))
    return 0


def _cmd_presets(args: argparse.Namespace) -> int:
    models = []
    for name in model_names():
        spec = get_model(name)
        models.append({"name": name, "model_type": spec.model_type, "attention": spec.attention,
                       "params_total": spec.params_total,
                       "kv_cache_bytes_per_token_fp16": kv_cache_bytes_per_token(spec, "fp16")})
    gpus = []
    for n, b in GPU_BYTES.items():
        g = GPUS.get(n)
        gpus.append({"name": n, "device_bytes": b, "cuda_total_bytes": b,
                     "nvidia_smi_bytes": g.smi_bytes if g else b, "sold_as": g.sold if g else "the lesson's 24 GB",
                     "cuda_total_estimated": g.estimated if g else False,
                     "cuda_source": g.cuda_source if g else "the lesson's simplified device (24 x 10^9 bytes)",
                     "smi_source": g.smi_source if g else "",
                     "unified_memory": g.unified if g else False,
                     "host_used_bytes": g.host_used_bytes if g else 0})
    if args.json:
        print_json({"models": models, "gpus": gpus})
        return 0
    print(f"{'model':<22} {'type':<18} {'attn':<5} {'params':>18} {'KV B/token fp16':>16}")
    for m in models:
        print(f"{m['name']:<22} {m['model_type']:<18} {m['attention']:<5} {m['params_total']:>18,} "
              f"{m['kv_cache_bytes_per_token_fp16']:>16,}")
    print()
    print("GPUs: budgets and runtimes plan with the total CUDA reports, not nvidia-smi's (* = estimated)")
    print(f"{'gpu':<12} {'sold as':<10} {'CUDA GiB':>9} {'CUDA bytes':>17} {'smi GiB':>8}  source of the CUDA total")
    for g in gpus:
        mark = "*" if g["cuda_total_estimated"] else " "
        print(f"{g['name']:<12} {g['sold_as'][:10]:<10} {g['cuda_total_bytes'] / GiB:>8.2f}{mark} "
              f"{g['cuda_total_bytes']:>17,} {g['nvidia_smi_bytes'] / GiB:>8.2f}  {g['cuda_source']}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    out = check_output_dir("--out", args.out)
    from .demo import run_demo  # the demo's sections import the plotting and measuring modules
    return run_demo(out_dir=out)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description="Serving-memory budgets for LLMs, pool by pool (L14.4).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    p = sub.add_parser("budget", help="add the pools on a device (the lesson's 24 GB example)")
    p.add_argument("--gpu", default="24GB", help="device size or preset (default 24GB)")
    p.add_argument("--weights", default="14GB", help="weights size (default 14GB)")
    p.add_argument("--workspace", default="2GB", help="runtime workspace (default 2GB)")
    p.add_argument("--reserve", default="2GB", help="safety reserve: a size, or a share such as 10%% (default 2GB)")
    p.add_argument("--per-sequence", default="1.5GB", help="request-dependent bytes per active sequence (default 1.5GB)")
    p.add_argument("--request-state", default="0", help="extra per-sequence state besides the KV cache (default 0)")
    p.add_argument("--active-sequences", type=whole("--active-sequences", 0, MAX_SEQUENCES), default=4,
                   help="active sequences (default 4)")
    p.add_argument("--json", action="store_true", help="print JSON (integers of bytes)")
    p.set_defaults(func=_cmd_budget)

    p = sub.add_parser("estimate", help="budget a real model config on a GPU")
    add_model_args(p)
    p.add_argument("--dtype", default=None,
                   help="weights dtype (fp32, fp16, bf16, fp8, int8, int4, int4-g128); default: the config's "
                        "torch_dtype and quantization_config")
    p.add_argument("--kv-dtype", "--kv-cache-dtype", dest="kv_dtype", default=None,
                   help="KV-cache dtype (default: the compute dtype, as vLLM's kv_cache_dtype=auto; never the "
                        "weights' quantized dtype)")
    p.add_argument("--state-dtype", default="fp32",
                   help="recurrent-state dtype of a hybrid model's linear-attention layers (default fp32)")
    p.add_argument("--gpu", default=DEFAULT_GPU, help=f"device size or preset (default {DEFAULT_GPU})")
    p.add_argument("--workspace", default=None, help="override the workspace (default: activation peak + runtime overhead)")
    p.add_argument("--reserve", default=DEFAULT_RESERVE, help=f"a size or a share such as 10%% (default {DEFAULT_RESERVE.replace('%', '%%')})")
    p.add_argument("--context-tokens", "--max-model-len", dest="context_tokens",
                   type=whole("--context-tokens", 1, MAX_CONTEXT_TOKENS), default=None,
                   help="tokens per sequence, vLLM's --max-model-len (default 4096; with --runtime, the config's "
                        "max_position_embeddings)")
    p.add_argument("--active-sequences", type=whole("--active-sequences", 0, MAX_SEQUENCES), default=1,
                   help="active sequences (default 1)")
    p.add_argument("--tensor-parallel", type=whole("--tensor-parallel", 1, MAX_TENSOR_PARALLEL), default=1,
                   help="GPUs the model is split over (default 1)")
    p.add_argument("--prefill-chunk-tokens", type=whole("--prefill-chunk-tokens", 1, MAX_CONTEXT_TOKENS),
                   default=DEFAULT_PREFILL_CHUNK_TOKENS,
                   help=f"tokens per prefill chunk, for the activation peak (default {DEFAULT_PREFILL_CHUNK_TOKENS})")
    p.add_argument("--json", action="store_true", help="print JSON (integers of bytes)")
    runtime_verb.add_runtime_args(p)
    p.set_defaults(func=_cmd_estimate)

    p = sub.add_parser("presets", help="list preset models and GPUs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_presets)

    p = sub.add_parser("demo", help="the library's demo: the lab at 8 and 16 sequences, budgets, admission, a "
                                    "measurement (`make demo` adds the grader's part)")
    p.add_argument("--out", default="out", help="folder for plots and results (default ./out)")
    p.set_defaults(func=_cmd_demo)

    request_verbs.register(sub)     # simulate, trace, offload, rollout
    runtime_verb.register(sub)      # from-log
    measure_verb.register(sub)      # measure
    return parser


class _StdoutError(Exception):
    """A write to stdout failed (``> /dev/full``, a closed pipe); ``args[0]`` is the OSError."""


class _GuardedStdout:
    """sys.stdout whose write and flush errors are told apart from every other OSError of a verb."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise _StdoutError(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _StdoutError(exc) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _stdout_failed(exc: OSError, stream) -> int:
    """stdout cannot take the report: one line, and nothing left for the interpreter to fail flushing."""
    try:        # point fd 1 at /dev/null, so the flush at exit has nothing to fail on
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
    if isinstance(exc, BrokenPipeError):      # `course-memory ... | head`: the reader has what it wanted
        return 0
    sys.stderr.write(one_line(f"{PROG}: error: stdout cannot be written ({exc.strerror or exc}); "
                              f"send the output somewhere it fits, e.g. a file on a disk with space") + "\n")
    return 2


class _Discard(io.TextIOBase):
    """Where messages go when stderr is closed (``2>&-``): nowhere; the exit status still says it."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb; 0 done, 2 bad input (one line on stderr), 130 interrupted.

    A closed stdout (``course-memory ... >&-``: Python's ``sys.stdout`` is then ``None``) is refused
    before any work, in one line; a closed stderr leaves only the exit status to say what happened.

    >>> main(["budget", "--gpu", "24GB", "--weights", "14GB", "--workspace", "2GB", "--reserve", "2GB",
    ...       "--per-sequence", "1.5GB", "--active-sequences", "4", "--json"]) == 0   # doctest: +ELLIPSIS
    {...}
    True
    """
    errors = sys.stderr
    if errors is None:
        sys.stderr = _Discard()
    try:
        return _main(argv)
    finally:
        sys.stderr = errors


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    stream = sys.stdout
    if stream is None:        # fd 1 was closed when Python started: the report has nowhere to go
        sys.stderr.write(one_line(f"{PROG}: error: stdout is closed, so the report has nowhere to go; run it "
                                  f"with stdout open (e.g. > report.txt, or > /dev/null to discard it)") + "\n")
        return 2
    sys.stdout = _GuardedStdout(stream)
    try:
        rc = int(args.func(args) or 0)
        sys.stdout.flush()       # a write error shows here, while it can still be reported in one line
        return rc
    except CourseInputError as exc:
        sys.stderr.write(one_line(f"{PROG}: error: {exc}") + "\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except _StdoutError as exc:
        return _stdout_failed(exc.args[0], stream)
    except BrokenPipeError:
        return _stdout_failed(BrokenPipeError(), stream)
    finally:
        sys.stdout = stream


def run_main() -> None:  # pragma: no cover - console-script shim
    sys.exit(main())
