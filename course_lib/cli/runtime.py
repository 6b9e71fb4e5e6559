"""``course-memory estimate --runtime vllm|sglang|trtllm`` and ``course-memory from-log``.

The runtime's knobs are flags named as the runtime names them (vLLM's
``--gpu-memory-utilization``, SGLang's ``--mem-fraction-static``, TensorRT-LLM's
``--kv-cache-free-gpu-mem-fraction``); a flag of another runtime is refused with one line.
Unset knobs take the release's own defaults, and the output says which were taken and why.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..bounds import MAX_BLOCK_SIZE_TOKENS, MAX_CONTEXT_TOKENS, MAX_SEQUENCES, MIN_SHARE

#: The most --cpu-offload-gb takes: 1 PiB of host memory is far past any machine (bounds.py keeps sizes under 1 PB).
MAX_OFFLOAD_GIB = 2.0**20
from ..errors import CourseInputError
from ..runtimes.log import MAX_LOG_BYTES, read_startup_log
from ..model.models import ModelSpec
from ..views.report import from_log_table, runtime_table
from ..runtimes import SglangLaunch, TrtllmLaunch, VllmLaunch, estimate_sglang, estimate_trtllm, estimate_vllm
from ..runtimes.from_log import compare
from ..runtimes.vllm.spec import parse_speculative_config
from ..runtimes.trtllm_spec import parse_trtllm_speculative
from ..runtimes.sglang_spec import ALGORITHMS as SGLANG_SPEC_ALGORITHMS, parse_sglang_speculative
from ..runtimes.unified import host_used, vllm_start_refusal
from ..runtimes.vllm.kv_dsv4 import refusal as dsv4_refusal
from ..model.presets import gpu_bytes
from ..units import GiB
from .args import add_model_args, dtype_name, model_from_args, number, print_json, renamed, size, whole

#: Each runtime's own flags: (dest, runtime). A flag given with another --runtime is refused.
RUNTIME_FLAGS = {
    "gpu_memory_utilization": "vllm", "max_num_seqs": "vllm", "max_num_batched_tokens": "vllm",
    "enforce_eager": "vllm", "skip_mm_profiling": "vllm", "limit_mm_per_prompt": "vllm",
    "mm_processor_kwargs": "vllm", "block_size": "vllm", "vllm_version": "vllm", "entrypoint": "vllm", "sampler": "vllm",
    "mem_fraction_static": "sglang", "sglang_version": "sglang", "chunked_prefill_size": "sglang",
    "cuda_graph_max_bs": "sglang", "speculative_algorithm": "sglang", "speculative_draft_model_path": "sglang",
    "speculative_num_steps": "sglang", "speculative_eagle_topk": "sglang", "speculative_num_draft_tokens": "sglang",
    "kv_cache_free_gpu_mem_fraction": "trtllm", "trtllm_version": "trtllm", "max_batch_size": "trtllm",
    "max_num_tokens": "trtllm", "cpu_offload_gb": ("vllm", "sglang"), "kv_cache_memory_bytes": "vllm",
    "speculative_config": ("vllm", "trtllm"),
    "host_used": ("vllm", "sglang", "trtllm"),
}
_SHARE = {"vllm": "--gpu-memory-utilization", "sglang": "--mem-fraction-static",
          "trtllm": "--kv-cache-free-gpu-mem-fraction"}


def add_runtime_args(p: argparse.ArgumentParser) -> None:
    """The runtime flags of ``estimate`` (each is checked against --runtime in :func:`estimate_runtime`)."""
    g = p.add_argument_group("runtime-faithful estimate (--runtime)")
    g.add_argument("--runtime", choices=("vllm", "sglang", "trtllm"),
                   help="follow this runtime's own sizing rule instead of the lesson's simple model")
    g.add_argument("--pipeline-parallel", type=whole("--pipeline-parallel", 1, 256), default=1,
                   help="pipeline stages (default 1)")
    g.add_argument("--gpu-memory-utilization", type=number("--gpu-memory-utilization", MIN_SHARE, 1.0),
                   help="vLLM: share of the GPU's total memory (default: the release's, 0.9 or 0.92)")
    g.add_argument("--max-num-seqs", type=whole("--max-num-seqs", 1, MAX_SEQUENCES),
                   help="vLLM: most sequences per step (default: the release's, by GPU)")
    g.add_argument("--max-num-batched-tokens", type=whole("--max-num-batched-tokens", 1, MAX_CONTEXT_TOKENS),
                   help="vLLM: tokens per step, what the profile runs (default: the release's, by GPU)")
    g.add_argument("--enforce-eager", action="store_true", help="vLLM: no CUDA graphs")
    g.add_argument("--skip-mm-profiling", action="store_true",
                   help="vLLM V1: leave the vision tower out of the start-up profile (multimodal models)")
    g.add_argument("--limit-mm-per-prompt", metavar="JSON", type=mm_limits,
                   help='vLLM: items per prompt by modality, as vLLM\'s own flag, e.g. \'{"image": 4, "video": 0}\' '
                        "(a modality at 0 leaves the profile; default 999 each)")
    g.add_argument("--mm-processor-kwargs", metavar="JSON", type=mm_processor_kwargs,
                   help='vLLM: the processor\'s largest image, as vLLM\'s own flag: \'{"max_pixels": 1003520}\'')
    g.add_argument("--block-size", type=whole("--block-size", 1, MAX_BLOCK_SIZE_TOKENS),
                   help="vLLM: tokens per KV block (default 16)")
    g.add_argument("--kv-cache-memory-bytes", metavar="SIZE",
                   help="vLLM: the KV pool's size, as vLLM's own flag (any size: 12MiB, 1.5GB, 12582912); no "
                        "profile. With --gpu cpu: vLLM 0.32's CPU platform")
    g.add_argument("--speculative-config", metavar="JSON",
                   help='vLLM: speculative decoding, as vLLM\'s own flag, e.g. \'{"method": "mtp", '
                        '"num_speculative_tokens": 2}\' (ngram, suffix, mtp, eagle, eagle3, dflash, draft_model). '
                        'TensorRT-LLM: its speculative_config mapping as JSON, e.g. \'{"decoding_type": "Eagle3", '
                        '"max_draft_len": 3, "speculative_model_dir": DRAFT}\' (Eagle3, Eagle, MTP, NGram, DraftTarget)')
    g.add_argument("--vllm-version", help="vLLM release whose defaults apply, e.g. 0.10.1 (default: the newest modelled)")
    g.add_argument("--entrypoint", choices=("serve", "llm"), help="vLLM: `vllm serve` (default) or LLM() defaults")
    g.add_argument("--sampler", choices=("auto", "native", "flashinfer"),
                   help="vLLM: the profile's sampling path (default: the release's)")
    g.add_argument("--mem-fraction-static", type=number("--mem-fraction-static", MIN_SHARE, 1.0),
                   help="SGLang: share of the free memory for weights + KV pool (default: the release's)")
    g.add_argument("--sglang-version", help="SGLang release whose defaults apply, e.g. 0.4.3")
    g.add_argument("--chunked-prefill-size", type=whole("--chunked-prefill-size", 1, MAX_CONTEXT_TOKENS),
                   help="SGLang: prefill chunk (default: by GPU memory)")
    g.add_argument("--cuda-graph-max-bs", type=whole("--cuda-graph-max-bs", 1, MAX_SEQUENCES),
                   help="SGLang: largest captured batch (default: by GPU memory)")
    g.add_argument("--speculative-algorithm", metavar="NAME", type=str.upper, choices=SGLANG_SPEC_ALGORITHMS,
                   help="SGLang: speculative decoding, as SGLang's own flag (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM)")
    g.add_argument("--speculative-draft-model-path", metavar="MODEL",
                   help="SGLang: the draft checkpoint (a folder with a config.json, a Hub id or a preset); not needed "
                        "for NEXTN on a model with MTP layers")
    g.add_argument("--speculative-num-steps", type=whole("--speculative-num-steps", 1, 64),
                   help="SGLang: draft steps (default: SGLang's choice by architecture)")
    g.add_argument("--speculative-eagle-topk", type=whole("--speculative-eagle-topk", 1, 64),
                   help="SGLang: branches per draft step (default: SGLang's choice)")
    g.add_argument("--speculative-num-draft-tokens", type=whole("--speculative-num-draft-tokens", 1, 1024),
                   help="SGLang: tokens verified per step (default: SGLang's choice; steps + 1 when topk is 1)")
    g.add_argument("--kv-cache-free-gpu-mem-fraction", type=number("--kv-cache-free-gpu-mem-fraction", MIN_SHARE, 1.0),
                   help="TensorRT-LLM: share of the free memory for the KV cache (default 0.9)")
    g.add_argument("--trtllm-version", help="TensorRT-LLM release, e.g. 0.19.0")
    g.add_argument("--max-batch-size", type=whole("--max-batch-size", 1, MAX_SEQUENCES),
                   help="TensorRT-LLM: the engine's max batch size (default 2048)")
    g.add_argument("--max-num-tokens", type=whole("--max-num-tokens", 1, MAX_CONTEXT_TOKENS),
                   help="TensorRT-LLM: the engine's max tokens per step (default 8192)")
    g.add_argument("--cpu-offload-gb", type=number("--cpu-offload-gb", 0.0, MAX_OFFLOAD_GIB),
                   help="vLLM / SGLang: GiB (despite the name) of decoder-layer weights kept in CPU memory, per GPU")
    g.add_argument("--host-used", metavar="SIZE",
                   help="unified memory (gb10, strix-halo): what the OS, other processes and the page cache hold of "
                        "the shared pool (default: the preset's, 4 GiB on gb10; 0 on a card with its own memory). "
                        "TensorRT-LLM takes it off the free memory; vLLM 0.33 refuses to start when it leaves less "
                        "than total x utilization (vLLM counts the page cache as free: leave it out for vLLM); "
                        "SGLang starts from what it leaves")


MM_MODALITIES = ("image", "video", "audio")


def _json_object(flag: str, text: str, example: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{flag} {text!r:.80} is not a JSON object; use e.g. '{example}'")
    return value


def mm_limits(text: str) -> dict[str, int]:
    """``--limit-mm-per-prompt``: {"image": N, "video": M}, whole numbers from 0."""
    value = _json_object("--limit-mm-per-prompt", text, '{"image": 4, "video": 0}')
    for key, n in value.items():
        if key not in MM_MODALITIES:
            raise argparse.ArgumentTypeError(f"--limit-mm-per-prompt names {key!r:.40}; use "
                                             f"{', '.join(MM_MODALITIES)}")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 1_000_000:
            raise argparse.ArgumentTypeError(f"--limit-mm-per-prompt {key}={n!r:.40} is not a whole number from 0 "
                                             "to 1,000,000 (vLLM's count form; {\"count\": N} is not read here)")
    return value


def mm_processor_kwargs(text: str) -> dict[str, int]:
    """``--mm-processor-kwargs``: only ``max_pixels`` is read (the largest image, in pixels)."""
    value = _json_object("--mm-processor-kwargs", text, '{"max_pixels": 1003520}')
    for key, n in value.items():
        if key != "max_pixels":
            raise argparse.ArgumentTypeError(f"--mm-processor-kwargs {key!r:.40} is not modelled; only max_pixels "
                                             "(the largest image in pixels) is read")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10**9:
            raise argparse.ArgumentTypeError(f"--mm-processor-kwargs max_pixels={n!r:.40} is not a whole number of "
                                             "pixels from 1 to 1,000,000,000")
    return value


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest, None)
    return value not in (None, False)


def check_runtime_flags(args: argparse.Namespace) -> None:
    """Refuse a runtime's flag given without --runtime, or with another runtime's."""
    for dest, owner in RUNTIME_FLAGS.items():
        if not _given(args, dest):
            continue
        flag = "--" + dest.replace("_", "-")
        owners = owner if isinstance(owner, tuple) else (owner,)
        names = " or ".join(owners)
        if args.runtime is None:
            raise CourseInputError(f"{flag} is a knob of {names}'s sizing rule; add --runtime {owners[0]}")
        if args.runtime not in owners:
            raise CourseInputError(f"{flag} is {names}'s knob, not {args.runtime}'s; with --runtime {args.runtime} use "
                                   f"{_SHARE[args.runtime]} for its memory share")
    if args.runtime is None and args.pipeline_parallel != 1:
        raise CourseInputError("--pipeline-parallel needs a runtime's rule; add --runtime vllm (or sglang, trtllm)")


def _kv_flag(args: argparse.Namespace) -> str:
    return args.kv_dtype or "auto"


def estimate_runtime(args: argparse.Namespace, spec: ModelSpec) -> dict[str, Any]:
    """Run the runtime's estimate for the parsed flags; returns its JSON-ready dict (and prints text unless --json)."""
    tp, pp = args.tensor_parallel, args.pipeline_parallel
    if (unmodelled := dsv4_refusal(spec, args.runtime)) is not None:
        raise CourseInputError(unmodelled)
    ctx = args.context_tokens
    host_given = None if args.host_used is None else size("--host-used", args.host_used)
    host, host_note = host_used(args.gpu, host_given)
    if args.runtime == "vllm":
        kv_given = None if args.kv_cache_memory_bytes is None else size("--kv-cache-memory-bytes",
                                                                         args.kv_cache_memory_bytes)
        est = estimate_vllm(spec, gpu=args.gpu, launch=VllmLaunch(
            version=args.vllm_version, entrypoint=args.entrypoint or "serve",
            gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=ctx, max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens, kv_cache_dtype=_kv_flag(args), dtype=args.dtype,
            enforce_eager=args.enforce_eager, tensor_parallel=tp, pipeline_parallel=pp, block_size=args.block_size,
            sampler=args.sampler or "auto", cpu_offload_gb=args.cpu_offload_gb or 0.0,
            skip_mm_profiling=args.skip_mm_profiling, kv_cache_memory_bytes=kv_given,
            speculative_config=parse_speculative_config(args.speculative_config),
            limit_mm_per_prompt=args.limit_mm_per_prompt,
            mm_max_pixels=(args.mm_processor_kwargs or {}).get("max_pixels")))
        if host:       # vLLM 0.33's start-up check on a shared pool (course_lib.runtimes.unified)
            refused = vllm_start_refusal(total_bytes=est.launch["gpu_total_bytes"], host_used_bytes=host,
                                         utilization=est.launch["gpu_memory_utilization"])
            if refused:
                raise CourseInputError(f"vLLM would refuse to start ({host_note}): {refused}")
            est = replace(est, notes=est.notes + (f"{host_note}: vLLM 0.33 sizes from total x utilization on a "
                                                  f"shared pool too; the host's share only has to fit beside it",))
    elif args.runtime == "sglang":
        at_start = None
        if host:       # SGLang starts from the memory free when the weights load: the host's share is not
            from ..runtimes.sglang import CONTEXT_BYTES as SGLANG_CONTEXT
            at_start = gpu_bytes(args.gpu) - SGLANG_CONTEXT - host
            if at_start <= 0:
                raise CourseInputError(f"--host-used leaves nothing of {args.gpu}'s memory ({host_note}); give less")
        est = estimate_sglang(spec, gpu=args.gpu, launch=SglangLaunch(
            version=args.sglang_version, mem_fraction_static=args.mem_fraction_static,
            chunked_prefill_size=args.chunked_prefill_size, cuda_graph_max_bs=args.cuda_graph_max_bs,
            kv_cache_dtype=_kv_flag(args), dtype=args.dtype, context_length=ctx, tensor_parallel=tp,
            pipeline_parallel=pp, cpu_offload_gb=args.cpu_offload_gb or 0.0, free_at_start_bytes=at_start,
            speculative=parse_sglang_speculative(args.speculative_algorithm, args.speculative_draft_model_path,
                                                 args.speculative_num_steps, args.speculative_eagle_topk,
                                                 args.speculative_num_draft_tokens)))
        if host:
            est = replace(est, notes=est.notes + (f"{host_note}: taken off the memory free at start "
                                                  f"({at_start / GiB:.2f} GiB)",))
    else:
        est = estimate_trtllm(spec, gpu=args.gpu, launch=TrtllmLaunch(
            version=args.trtllm_version, kv_cache_free_gpu_mem_fraction=args.kv_cache_free_gpu_mem_fraction,
            max_batch_size=args.max_batch_size, max_num_tokens=args.max_num_tokens, max_seq_len=ctx, dtype=args.dtype,
            kv_cache_dtype=_kv_flag(args), tensor_parallel=tp, pipeline_parallel=pp, host_used_bytes=host_given,
            speculative=parse_trtllm_speculative(args.speculative_config)))
    data = {"estimate_model": f"{est.runtime} {est.version}'s own sizing rule", "model": spec.name,
            "model_type": spec.model_type, "params_total": spec.params_total}
    if spec.resolved_by:
        data.update(architectures=list(spec.architectures), resolved_by=spec.resolved_by)
    data.update(est.to_dict())
    share = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static",
             "trtllm": "kv_cache_free_gpu_mem_fraction"}[est.runtime]
    data["share"] = est.launch[share]
    if args.json:
        print_json(data)
    else:
        print(runtime_table(spec, est))
    return data


# ----------------------------------------------------------------------------- from-log

def read_log_file(flag: str, path: str) -> str:
    """A log file's text: a regular file of at most MAX_LOG_BYTES, or '-' for standard input."""
    if path == "-":
        text = sys.stdin.read(MAX_LOG_BYTES + 1)
    else:
        p = Path(path)
        try:
            if not p.is_file():
                raise CourseInputError(f"{flag}={path!r} is not a file; give a text file holding a start-up log, or -")
            with p.open("rb") as fh:
                raw = fh.read(MAX_LOG_BYTES + 1)
        except OSError as exc:
            raise CourseInputError(f"{flag}={path!r} cannot be read ({exc.strerror or exc}); give a start-up log "
                                   f"file") from None
        text = raw.decode("utf-8", errors="replace")
    if len(text) > MAX_LOG_BYTES:
        raise CourseInputError(f"{flag}={path!r} is larger than {MAX_LOG_BYTES:,} bytes; give the start-up lines only")
    return text


def cmd_from_log(args: argparse.Namespace) -> int:
    dtype_name("--dtype", args.dtype)
    text = read_log_file("FILE", args.file)
    try:
        log = read_startup_log(text, runtime=args.runtime, boot=args.boot)
    except CourseInputError as exc:    # the reader names boot=...; the user typed --boot
        raise renamed(exc, "boot", "--boot") from None
    spec = model_from_args(args) if (args.model or args.config) else _cached_hub_spec(log.model)
    result = compare(log, gpu=args.gpu, spec=spec, dtype=args.dtype, tensor_parallel=args.tensor_parallel)
    boots = {"boot": log.boot, "boots": log.boots}
    if args.json:
        print_json({k: result[k] for k in ("runtime", "model", "launch", "logged", "predicted")
                    if k in result} | {k: result[k] for k in ("difference", "evidence", "preset") if k in result}
                   | boots)
    else:
        if log.boots > 1:
            which = "the last" if log.boot == log.boots else f"boot {log.boot}"
            print(f"{log.boots} boots in this file; reading {which} (use --boot N)")
        print(from_log_table(result))
    return 0


def _cached_hub_spec(model: str | None):
    """The log's model when it is a Hub id with no preset that the Hub cache already holds (read offline:
    a log is never a reason to go online; ``--model ORG/NAME`` fetches it)."""
    from ..model.hub import hub_spec, is_hub_id
    from ..runtimes.from_log import preset_for

    if not model or not is_hub_id(model) or model.startswith(("/", ".", "~")) or preset_for(model) is not None:
        return None
    try:
        return hub_spec(model, cache_only=True)
    except CourseInputError:
        return None


def register(sub: Any) -> None:
    p = sub.add_parser("from-log", help="read a vLLM / SGLang / TensorRT-LLM start-up log back into its memory pools, "
                                        "beside our prediction for the same launch")
    p.add_argument("file", metavar="FILE", help="the log as pasted (a text file, or - for standard input)")
    p.add_argument("--runtime", choices=("vllm", "sglang", "trtllm"), help="force the runtime (default: recognised)")
    p.add_argument("--gpu", help="GPU preset or size, when the log prints no total (e.g. h100-80gb)")
    add_model_args(p, required=False)
    p.add_argument("--dtype", default=None, metavar="DTYPE",
                   help="the weight format served, when the log does not name it (e.g. int8 for an 8-bit engine)")
    p.add_argument("--tensor-parallel", type=whole("--tensor-parallel", 1, 256), default=None, metavar="N",
                   help="GPUs per replica, when the log does not print it (a TensorRT-LLM engine's ranks never do)")
    p.add_argument("--boot", type=whole("--boot", 1, 10**6), default=None, metavar="N",
                   help="which launch of a file holding several (a refusal, then a relaunch) to read, from 1 "
                        "(default: the last)")
    p.add_argument("--json", action="store_true", help="print JSON (integers of bytes, null where the log is silent)")
    p.set_defaults(func=cmd_from_log)
