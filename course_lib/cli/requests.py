"""CLI verbs for the request-dependent side: simulate, trace, offload, rollout.

``course_lib.cli.main`` calls :func:`register`. Each verb is a thin layer over
library functions and returns 0; bad input raises
:class:`~course_lib.errors.CourseInputError`, which the CLI prints as one line
(exit 2).

Embedded defaults are the lesson's device (:mod:`course_lib.serving.scenario`): 24 GB,
14 GB of weights (Llama-2-7B in fp16, rounded up), 2 GB workspace, 2 GB reserve,
and Llama-2-7B's 524,288 KV bytes per token, so ``course-memory simulate --trace
examples/traces/ten_eleven.jsonl`` replays "ten fit, the eleventh is queued".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..serving.admission import (DEFAULT_BLOCK_SIZE_TOKENS, DEFAULT_MAX_NUM_SEQS, DEFAULT_WATERMARK, POLICIES, VLLM_V1,
                         kv_config_for)
from ..bounds import (MAX_BLOCK_SIZE_TOKENS, MAX_CONTEXT_TOKENS, MAX_DEVICE_BYTES, MAX_KV_BYTES_PER_TOKEN,
                      MAX_REPLICAS, MAX_SECONDS, MAX_SEED, MAX_SEQUENCES, MAX_SIMULATED_STEPS, MAX_TRACE_REQUESTS,
                      MAX_ARRIVAL_RATE, MIN_ARRIVAL_RATE, MIN_SHARE)
from ..serving.budget import Budget, plan_budget
from ..errors import CourseInputError
from ..serving.loading import (DEFAULT_COMPILE_S, DEFAULT_DEVICE_INIT_S, DEFAULT_STORAGE, DEFAULT_WARMUP_S,
                       STORAGE_BYTES_PER_S, readiness_timeline, rollout_plan, storage_rate)
from ..model.models import active_params, kv_cache_bytes_per_token, weight_bytes
from ..views.plots import check_plot_path, plot_rollout, plot_simulation
from ..serving.offload import (DEFAULT_EFFICIENCY, DEFAULT_FLOPS, DEFAULT_HBM, DEFAULT_LINK, DEFAULT_MFU, GPU_FLOPS,
                       HBM_BYTES_PER_S, LINKS, _flops, get_link, offload_weights, swap_vs_recompute)
from ..output import check_output_file
from ..model.presets import DEFAULT_MODEL, get_model
from ..views.report import comparison_table, offload_report, rollout_report, simulation_report
from ..serving.scenario import (LESSON_GPU, LESSON_KV_BYTES_PER_TOKEN, LESSON_KV_SOURCE, LESSON_RESERVE, LESSON_WEIGHTS,
                        LESSON_WORKSPACE)
from ..runtimes.vllm.estimate import VllmLaunch, resolve_launch
from ..runtimes.vllm.scheduler import (CPU, ENTRYPOINTS, SCHEDULER_RELEASES, scheduler_release, vllm_v1_config,
                                       vllm_v1_config_for)
from ..simulate import simulate
from ..serving.trace import read_trace, synthetic_trace, to_json_line, write_trace
from .args import (add_model_args, device_size, dtype_name, model_from_args, number, print_json, renamed, reserve,
                   size, whole)


def _spec_or_none(args: argparse.Namespace):
    if getattr(args, "model", None) is not None or getattr(args, "config", None) is not None:
        dtype_name("--dtype", args.dtype)
        dtype_name("--kv-dtype", getattr(args, "kv_dtype", None))
        return model_from_args(args)
    return None


def _plot_path(args: argparse.Namespace) -> Path | None:
    """--plot, checked before any work (suffix, folder, writable)."""
    return check_plot_path(args.plot, name="--plot") if getattr(args, "plot", None) is not None else None


def _link(flag: str, value: str) -> None:
    """Refuse a bad --link by its flag: a preset, or at least 1 kB/s (course_lib.bounds.MIN_BYTES_PER_S)."""
    try:
        get_link(value)
    except CourseInputError as exc:
        raise renamed(exc, "link", flag) from None


# ------------------------------------------------------------------ simulate

def _kv_per_token(args: argparse.Namespace) -> tuple[Any, int, str]:
    """(the model or None, KV bytes per token, where they came from): --model/--config, --kv-bytes-per-token, or
    the lesson's model; refuses both a model and a per-token size."""
    spec = _spec_or_none(args)
    if spec is not None and args.kv_bytes_per_token is not None:
        raise CourseInputError("--kv-bytes-per-token and --model/--config both set the KV size; give one of them")
    if spec is not None:
        return spec, kv_cache_bytes_per_token(spec, args.kv_dtype or args.dtype), \
            f"{spec.name} ({args.kv_dtype or args.dtype})"
    if args.kv_bytes_per_token is not None:
        return None, args.kv_bytes_per_token, "--kv-bytes-per-token"
    return None, LESSON_KV_BYTES_PER_TOKEN, LESSON_KV_SOURCE


def pools_from_args(args: argparse.Namespace) -> tuple[Budget, int, str]:
    """The fixed pools (resolved once), the KV bytes per token and where they came from.

    From --gpu/--weights/--workspace/--reserve and --model/--config/--kv-bytes-per-token.
    """
    device = device_size("--gpu", args.gpu)
    if args.weights is not None:
        size("--weights", args.weights)
    size("--workspace", args.workspace)
    reserve("--reserve", args.reserve)
    spec, kv, source = _kv_per_token(args)
    if spec is None:
        weights = args.weights if args.weights is not None else LESSON_WEIGHTS
    else:
        weights = args.weights if args.weights is not None else weight_bytes(spec, args.dtype)
    budget = plan_budget(device_bytes=device, weights_bytes=weights, workspace_bytes=args.workspace,
                         reserve_bytes=args.reserve, per_sequence_kv_bytes=0)
    return budget, kv, source


def _rules(args: argparse.Namespace, policy: str) -> dict[str, Any]:
    return {"policy": policy,
            "block_size_tokens": DEFAULT_BLOCK_SIZE_TOKENS if args.block_size is None else args.block_size,
            "watermark": DEFAULT_WATERMARK if args.watermark is None else args.watermark,
            "max_num_seqs": DEFAULT_MAX_NUM_SEQS if args.max_num_seqs is None else args.max_num_seqs,
            "max_queue_len": args.max_queue_len, "max_wait_steps": args.max_wait_steps}


#: Flags of --runtime vllm alone, and of the --policy runs alone.
_VLLM_ONLY = ("vllm_version", "kv_cache_memory_bytes", "max_num_batched_tokens", "max_model_len")
_POLICY_ONLY = (("policy", "--policy"), ("compare", "--compare"), ("watermark", "--watermark"),
                ("weights", "--weights"))


def vllm_config_from_args(args: argparse.Namespace) -> tuple[Any, str, str]:
    """``simulate --runtime vllm``: the vllm-v1 AdmissionConfig, where the KV bytes came from, the launch in words."""
    for name, flag in _POLICY_ONLY:
        if getattr(args, name):
            raise CourseInputError(f"{flag} is for the reserve-max/paged runs; --runtime vllm schedules as vLLM V1 "
                                   f"does (no watermark, its own KV cache): drop {flag} or --runtime")
    version = scheduler_release(args.vllm_version)
    if args.kv_cache_memory_bytes is None:
        raise CourseInputError("--runtime vllm needs --kv-cache-memory-bytes (vLLM's own flag, e.g. 12MiB): the KV "
                               "cache the scheduler hands out; `course-memory estimate --runtime vllm` tells what a "
                               "launch gets")
    kv_bytes = size("--kv-cache-memory-bytes", args.kv_cache_memory_bytes)
    gpu = str(args.gpu).strip().lower()
    if gpu == CPU:
        platform, device, device_name = CPU, 0, ""
    else:
        platform, device, device_name = "cuda", device_size("--gpu", args.gpu), gpu
    spec, kv, source = _kv_per_token(args)
    if spec is not None:    # the one resolved launch, as estimate and from-log read it
        resolved = resolve_launch(spec, CPU if platform == CPU else args.gpu, VllmLaunch(
            version=args.vllm_version, entrypoint=args.entrypoint, max_model_len=args.max_model_len,
            max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
            block_size=args.block_size, kv_cache_memory_bytes=kv_bytes))
        version = scheduler_release(resolved.version)    # the platform's release when none is given (CPU: 0.32.0)
        cfg = vllm_v1_config_for(resolved, kv_bytes_per_token=kv, enable_prefix_caching=args.enable_prefix_caching)
    else:                   # KV bytes per token alone: no model, so no launch to resolve; the release's defaults
        cfg = vllm_v1_config(kv_cache_memory_bytes=kv_bytes, kv_bytes_per_token=kv, platform=platform,
                             device_bytes=device, device_name=device_name, entrypoint=args.entrypoint,
                             block_size=args.block_size, max_num_seqs=args.max_num_seqs,
                             max_num_batched_tokens=args.max_num_batched_tokens, max_model_len=args.max_model_len,
                             enable_prefix_caching=args.enable_prefix_caching, version=version)
    where = "CPU" if platform == CPU else f"GPU {args.gpu}"
    launch = (f"vLLM {version} V1 scheduler on {where} ({'LLM()' if args.entrypoint == 'llm' else 'vllm serve'} "
              f"defaults): kv_cache_memory_bytes {kv_bytes:,} = {cfg.num_blocks:,} blocks of {cfg.block_size_tokens} "
              f"tokens ({cfg.num_blocks - 1:,} usable, one is vLLM's null block); max_num_batched_tokens "
              f"{cfg.max_num_batched_tokens:,}, max_num_seqs {cfg.max_num_seqs:,}, max_model_len "
              f"{cfg.max_model_len if cfg.max_model_len is not None else 'what the cache holds'}, prefix caching "
              f"{'on' if cfg.enable_prefix_caching else 'off'}")
    if platform != CPU:     # vllm/config/vllm.py (0.32.0) turns async scheduling on where it is not refused
        launch += ("; scheduled synchronously, as with --no-async-scheduling (on a GPU vLLM schedules one step "
                   "ahead by default, which this policy does not model)")
    return cfg, source, launch


def _cmd_simulate(args: argparse.Namespace) -> int:
    plot = _plot_path(args)
    requests = read_trace(args.trace, name="--trace")
    if args.runtime == "vllm":
        return _simulate_vllm(args, requests, plot)
    for name in _VLLM_ONLY:
        if getattr(args, name) is not None:
            flag = "--" + name.replace("_", "-")
            raise CourseInputError(f"{flag} is vLLM's; add --runtime vllm to schedule as vLLM V1 does")
    if args.policy is None:
        args.policy = "reserve-max"
    budget, kv, source = pools_from_args(args)
    policies = list(POLICIES) if args.compare else [args.policy]
    configs = [(p, kv_config_for(budget, kv, **_rules(args, p))) for p in policies]
    # At most MAX_SIMULATED_STEPS steps (course_lib.bounds): the per-step series stay ~0.2 GB.
    results = [(p, simulate(requests, cfg, max_steps=MAX_SIMULATED_STEPS)) for p, cfg in configs]
    if args.json:
        if args.compare:
            print_json({"runs": {p: res.to_dict() for p, res in results}})
        else:
            print_json(results[0][1].to_dict())
    else:
        for i, (_, res) in enumerate(results):
            if i:
                print()
            print(simulation_report(res, budget, source))
        if args.compare:
            print()
            print(comparison_table(results))
    if plot:
        plot_simulation(results, plot, title=f"KV cache over decode steps: {Path(args.trace).name}")
        print(f"plot: {plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _simulate_vllm(args: argparse.Namespace, requests: list, plot: Path | None) -> int:
    cfg, source, launch = vllm_config_from_args(args)
    res = simulate(requests, cfg, max_steps=MAX_SIMULATED_STEPS)
    if args.json:
        print_json(res.to_dict())
    else:
        print(launch)
        print(simulation_report(res, None, source))
    if plot:
        plot_simulation([(VLLM_V1, res)], plot, title=f"KV cache over engine steps: {Path(args.trace).name}")
        print(f"plot: {plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


# ------------------------------------------------------------------ trace

def _cmd_trace(args: argparse.Namespace) -> int:
    if args.prompt_min > args.prompt_max:
        raise CourseInputError(f"--prompt-min={args.prompt_min} exceeds --prompt-max={args.prompt_max}; "
                               f"use a minimum no larger than the maximum")
    if args.prompt_max + args.max_new_tokens > MAX_CONTEXT_TOKENS:
        raise CourseInputError(f"--prompt-max={args.prompt_max:,} + --max-new-tokens={args.max_new_tokens:,} is "
                               f"above the bound {MAX_CONTEXT_TOKENS:,} tokens per request "
                               f"({MAX_CONTEXT_TOKENS.why}); use shorter requests")
    out = check_output_file("--out", args.out) if args.out is not None else None
    reqs = synthetic_trace(args.requests, args.seed, arrival_rate=args.arrival_rate,
                           prompt_tokens=(args.prompt_min, args.prompt_max), max_new_tokens=args.max_new_tokens,
                           mean_output_tokens=args.mean_output_tokens)
    if out is not None:
        path = write_trace(reqs, out, name="--out")
        mean_out = sum(r.output_tokens for r in reqs) / len(reqs)
        print(f"wrote {len(reqs):,} requests to {path}: arrivals at steps {reqs[0].arrival_step}.."
              f"{reqs[-1].arrival_step}, prompts {args.prompt_min}..{args.prompt_max} tokens, max_new_tokens "
              f"{args.max_new_tokens}, mean real output {mean_out:.1f} tokens")
    else:
        for r in reqs:
            sys.stdout.write(to_json_line(r) + "\n")
    return 0


# ------------------------------------------------------------------ offload

def _cmd_offload(args: argparse.Namespace) -> int:
    size("--bytes", args.bytes)
    _link("--link", args.link)
    try:
        _flops(args.flops)
    except CourseInputError as exc:
        raise renamed(exc, "flops", "--flops") from None
    dtype_name("--dtype", args.dtype)
    dtype_name("--kv-dtype", args.kv_dtype)
    spec = _spec_or_none(args) or get_model(DEFAULT_MODEL)
    kv = kv_cache_bytes_per_token(spec, args.kv_dtype or args.dtype)
    if args.tokens * kv > MAX_DEVICE_BYTES:
        raise CourseInputError(f"--tokens={args.tokens:,} x {kv:,} B/token ({spec.name}) = {args.tokens * kv:,} B of KV "
                               f"is above the bound of 1 PB ({MAX_DEVICE_BYTES.why}); use fewer --tokens")
    weights = offload_weights(args.bytes, link=args.link, efficiency=args.efficiency, hbm=args.hbm,
                              kv_bytes_per_token=kv)
    swap = swap_vs_recompute(args.tokens, kv, active_params(spec), link=args.link, efficiency=args.efficiency,
                             flops=args.flops, mfu=args.mfu)
    if args.json:
        print_json({"model": spec.name, "weights_offload": weights.to_dict(), "swap_vs_recompute": swap.to_dict()})
    else:
        print(offload_report(weights, swap, spec.name))
    return 0


# ------------------------------------------------------------------ rollout

def _cmd_rollout(args: argparse.Namespace) -> int:
    plot = _plot_path(args)
    if args.weights is not None:
        size("--weights", args.weights)
    _link("--link", args.link)
    try:
        storage_rate(args.storage)
    except CourseInputError as exc:
        raise renamed(exc, "storage", "--storage") from None
    dtype_name("--dtype", args.dtype)
    spec = _spec_or_none(args)
    if args.weights is not None and spec is not None:
        raise CourseInputError("--weights and --model/--config both set the weights; give one of them")
    weights = args.weights if args.weights is not None else weight_bytes(spec or get_model(DEFAULT_MODEL), args.dtype)
    timeline = readiness_timeline(weights, storage=args.storage, link=args.link, efficiency=args.efficiency,
                                  device_init_s=args.device_init, compile_s=args.compile, warmup_s=args.warmup,
                                  overlap_copy=args.overlap_copy)
    if args.max_unavailable > args.replicas:
        raise CourseInputError(f"--max-unavailable={args.max_unavailable} exceeds --replicas={args.replicas}; "
                               f"use 1..{args.replicas}")
    plan = rollout_plan(args.replicas, timeline.ready_s, max_unavailable=args.max_unavailable, drain_s=args.drain)
    if args.json:
        print_json({"timeline": timeline.to_dict(), "rollout": plan.to_dict()})
    else:
        print(rollout_report(timeline, plan))
    if plot:
        plot_rollout(plan, timeline, plot)
        print(f"plot: {plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


# ------------------------------------------------------------------ registration

def register(sub: argparse._SubParsersAction) -> None:
    """Add simulate, trace, offload and rollout to ``course-memory``."""

    p = sub.add_parser("simulate", help="replay a request trace through admission control, step by step")
    p.add_argument("--trace", required=True, metavar="PATH", help="JSONL trace (see `course-memory trace`)")
    add_model_args(p, required=False)
    p.add_argument("--kv-bytes-per-token", type=whole("--kv-bytes-per-token", 1, MAX_KV_BYTES_PER_TOKEN), metavar="N",
                   help=f"KV bytes per token instead of a model (default {LESSON_KV_BYTES_PER_TOKEN:,}, Llama-2-7B fp16)")
    p.add_argument("--dtype", default="fp16", help="weights dtype when --model/--config sets the weights (default fp16)")
    p.add_argument("--kv-dtype", default=None, help="KV-cache dtype (default: same as --dtype)")
    p.add_argument("--gpu", default=LESSON_GPU, help=f"device size or preset (default {LESSON_GPU})")
    p.add_argument("--weights", default=None,
                   help=f"weights size (default: from --model/--config, else {LESSON_WEIGHTS})")
    p.add_argument("--workspace", default=LESSON_WORKSPACE, help=f"runtime workspace (default {LESSON_WORKSPACE})")
    p.add_argument("--reserve", default=LESSON_RESERVE,
                   help=f"safety reserve: a size or a share such as 10%% (default {LESSON_RESERVE})")
    p.add_argument("--policy", choices=POLICIES, default=None, help="admission policy (default reserve-max)")
    p.add_argument("--compare", action="store_true", help="run both policies on the trace and compare them")
    p.add_argument("--block-size", type=whole("--block-size", 1, MAX_BLOCK_SIZE_TOKENS), default=None,
                   help=f"tokens per KV block (default {DEFAULT_BLOCK_SIZE_TOKENS}, as vLLM; --runtime vllm: 128 on "
                        f"--gpu cpu, 16 on a GPU)")
    p.add_argument("--watermark", type=number("--watermark", 0, 1, hi_open=True), default=None,
                   help=f"paged: share of blocks kept free when admitting (default {DEFAULT_WATERMARK}, as vLLM)")
    p.add_argument("--max-num-seqs", type=whole("--max-num-seqs", 1, MAX_SEQUENCES), default=None,
                   help=f"most requests running at once (default {DEFAULT_MAX_NUM_SEQS}, as vLLM; --runtime vllm: "
                        f"vLLM's default for the platform and --entrypoint)")
    p.add_argument("--max-queue-len", type=whole("--max-queue-len", 0, MAX_TRACE_REQUESTS), default=None, help="reject arrivals beyond this many waiting")
    p.add_argument("--max-wait-steps", type=whole("--max-wait-steps", 0, MAX_SIMULATED_STEPS), default=None, help="reject requests still waiting after N steps")
    p.add_argument("--json", action="store_true", help="print JSON: requests, steps and summary")
    p.add_argument("--plot", metavar="PATH", help="write a PNG: KV memory over steps and queue length")
    g = p.add_argument_group("vLLM's V1 scheduler (--runtime vllm: the vllm-v1 policy, on vLLM's own KV cache)")
    g.add_argument("--runtime", choices=("vllm",), default=None,
                   help="schedule as vLLM V1 does (token budget, chunked prefill, recompute preemption of the "
                        "newest running request) instead of --policy; --gpu is then cpu or a GPU preset, "
                        "--weights/--workspace/--reserve do not apply")
    g.add_argument("--vllm-version", default=None,
                   help=f"the release whose scheduler applies (modelled: "
                        f"{', '.join(str(v) for v in SCHEDULER_RELEASES)}; default the newest)")
    g.add_argument("--kv-cache-memory-bytes", default=None, metavar="SIZE",
                   help="vLLM's --kv-cache-memory-bytes: the KV cache's size (bytes or e.g. 12MiB); required")
    g.add_argument("--max-num-batched-tokens", type=whole("--max-num-batched-tokens", 1, MAX_CONTEXT_TOKENS),
                   default=None, help="tokens one step may compute (default: vLLM's for the platform and --entrypoint)")
    g.add_argument("--max-model-len", type=whole("--max-model-len", 2, MAX_CONTEXT_TOKENS), default=None,
                   help="longest request, prompt + output (default: the model's max_position_embeddings, else what "
                        "the cache holds)")
    g.add_argument("--entrypoint", choices=ENTRYPOINTS, default="serve",
                   help="whose defaults: `vllm serve` (default) or LLM()")
    g.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True,
                   help="a preempted request finds its still-cached blocks (vLLM's default: on)")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser("trace", help="write a synthetic request trace (JSONL)")
    p.add_argument("--requests", type=whole("--requests", 1, MAX_TRACE_REQUESTS), required=True, metavar="N", help="number of requests")
    p.add_argument("--seed", type=whole("--seed", 0, MAX_SEED), default=0, help="random seed (default 0); same seed, same trace")
    p.add_argument("--arrival-rate", type=number("--arrival-rate", MIN_ARRIVAL_RATE, MAX_ARRIVAL_RATE), default=0.5, help="mean requests per step (default 0.5)")
    p.add_argument("--prompt-min", type=whole("--prompt-min", 1, MAX_CONTEXT_TOKENS), default=64, help="shortest prompt, tokens (default 64)")
    p.add_argument("--prompt-max", type=whole("--prompt-max", 1, MAX_CONTEXT_TOKENS), default=1024, help="longest prompt, tokens (default 1024)")
    p.add_argument("--max-new-tokens", type=whole("--max-new-tokens", 1, MAX_CONTEXT_TOKENS), default=512, help="max_new_tokens of every request (default 512)")
    p.add_argument("--mean-output-tokens", type=number("--mean-output-tokens", 0, MAX_CONTEXT_TOKENS, lo_open=True),
                   default=128.0,
                   help="mean real output length, tokens (default 128; exponential, capped at max_new_tokens)")
    p.add_argument("--out", metavar="PATH", help="write here instead of stdout")
    p.set_defaults(func=_cmd_trace)

    p = sub.add_parser("offload", help="what offloading weights or swapping KV costs in transfer time")
    add_model_args(p, required=False)
    p.add_argument("--dtype", default="fp16", help="weights dtype (default fp16)")
    p.add_argument("--kv-dtype", default=None, help="KV-cache dtype (default: same as --dtype)")
    p.add_argument("--bytes", default="10GB", help="weights offloaded and streamed every step (default 10GB)")
    p.add_argument("--link", default=DEFAULT_LINK, help=f"{', '.join(LINKS)}, or GB/s such as 25GB (default {DEFAULT_LINK})")
    p.add_argument("--efficiency", type=number("--efficiency", MIN_SHARE, 1), default=DEFAULT_EFFICIENCY,
                   help=f"share of the theoretical rate reached (default {DEFAULT_EFFICIENCY}, an assumption)")
    p.add_argument("--hbm", default=DEFAULT_HBM, choices=sorted(HBM_BYTES_PER_S),
                   help=f"device memory to compare with (default {DEFAULT_HBM})")
    p.add_argument("--tokens", type=whole("--tokens", 1, MAX_CONTEXT_TOKENS), default=2048, help="tokens of the preempted sequence (default 2048)")
    p.add_argument("--flops", default=DEFAULT_FLOPS,
                   help=f"GPU peak FLOP/s for recompute: {', '.join(GPU_FLOPS)} or a number (default {DEFAULT_FLOPS})")
    p.add_argument("--mfu", type=number("--mfu", MIN_SHARE, 1), default=DEFAULT_MFU,
                   help=f"share of peak FLOP/s a prefill reaches (default {DEFAULT_MFU}, an assumption)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_offload)

    p = sub.add_parser("rollout", help="readiness timeline of a replica and a one-at-a-time rollout")
    add_model_args(p, required=False)
    p.add_argument("--dtype", default="fp16", help="weights dtype (default fp16)")
    p.add_argument("--weights", default=None, help=f"weights size (default: from the model, {DEFAULT_MODEL})")
    p.add_argument("--replicas", type=whole("--replicas", 1, MAX_REPLICAS), default=4, help="replicas to replace (default 4)")
    p.add_argument("--max-unavailable", type=whole("--max-unavailable", 1, MAX_REPLICAS), default=1, help="replicas replaced at a time (default 1)")
    p.add_argument("--drain", type=number("--drain", 0, MAX_SECONDS), default=10.0, help="seconds an old replica drains (default 10)")
    p.add_argument("--storage", default=DEFAULT_STORAGE,
                   help=f"{', '.join(STORAGE_BYTES_PER_S)}, or GB/s such as 2GB (default {DEFAULT_STORAGE})")
    p.add_argument("--link", default=DEFAULT_LINK, help=f"host->device link (default {DEFAULT_LINK})")
    p.add_argument("--efficiency", type=number("--efficiency", MIN_SHARE, 1), default=DEFAULT_EFFICIENCY,
                   help="share of the link rate reached")
    p.add_argument("--device-init", type=number("--device-init", 0, MAX_SECONDS), default=DEFAULT_DEVICE_INIT_S,
                   help=f"seconds of CUDA/runtime init (default {DEFAULT_DEVICE_INIT_S}, assumed)")
    p.add_argument("--compile", type=number("--compile", 0, MAX_SECONDS), default=DEFAULT_COMPILE_S,
                   help=f"seconds of compile / graph capture (default {DEFAULT_COMPILE_S}, assumed; 0 for eager)")
    p.add_argument("--warmup", type=number("--warmup", 0, MAX_SECONDS), default=DEFAULT_WARMUP_S,
                   help=f"seconds of warm-up (default {DEFAULT_WARMUP_S}, assumed)")
    p.add_argument("--overlap-copy", action="store_true", help="copy to the device while reading")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="PATH", help="write a PNG: readiness phases and capacity over time")
    p.set_defaults(func=_cmd_rollout)
