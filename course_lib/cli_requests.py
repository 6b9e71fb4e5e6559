"""CLI verbs for the request-dependent side: simulate, trace, offload, rollout.

``course_lib.cli`` imports this module and calls :func:`register`. Each verb
is a thin layer over library functions and returns 0; bad input raises
:class:`~course_lib.errors.CourseInputError`, which the CLI prints as one line
(exit 2).

Embedded defaults are the lesson's device: 24 GB, 14 GB of weights
(Llama-2-7B in fp16, rounded up), 2 GB workspace, 2 GB reserve, and
Llama-2-7B's 524,288 KV bytes per token, so ``course-memory simulate --trace
examples/traces/ten_eleven.jsonl`` replays "ten fit, the eleventh is queued".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .errors import CourseInputError, check_count

#: The lesson's device and pools (24 GB - 14 - 2 - 2 = 6 GB for the KV cache).
LESSON_GPU = "24GB"
LESSON_WEIGHTS = "14GB"
LESSON_WORKSPACE = "2GB"
LESSON_RESERVE = "2GB"
#: Llama-2-7B, fp16: 2 x 32 layers x 32 KV heads x 128 dims x 2 B.
LESSON_KV_BYTES_PER_TOKEN = 524_288
#: One request of 608 prompt + 512 new tokens = 1,120 tokens = 70 blocks = 0.587 GB:
#: 10 fit in the 715-block budget (700), an 11th (770) would cross it.
LESSON_PROMPT_TOKENS = 608
LESSON_MAX_NEW_TOKENS = 512


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


# ------------------------------------------------------------------ shared builders

def lesson_trace(count: int = 11):
    """The ten/eleven scenario: ``count`` identical requests (608 + 512 tokens) arriving at step 0."""
    from .trace import Request

    return [Request(f"r{i}", 0, LESSON_PROMPT_TOKENS, LESSON_MAX_NEW_TOKENS, LESSON_MAX_NEW_TOKENS)
            for i in range(check_count("count", count, 1))]


def comparison_trace():
    """A chat-like load on the lesson device: outputs (~128 tokens) far below max_new_tokens (1,024)."""
    from .trace import synthetic_trace

    return synthetic_trace(400, seed=3, arrival_rate=0.1, prompt_tokens=(64, 512), max_new_tokens=1024,
                           mean_output_tokens=128)


def lesson_config(policy: str = "reserve-max", **rules: Any):
    from .admission import kv_config

    return kv_config(device_bytes=LESSON_GPU, weights_bytes=LESSON_WEIGHTS, workspace_bytes=LESSON_WORKSPACE,
                     reserve_bytes=LESSON_RESERVE, kv_bytes_per_token=LESSON_KV_BYTES_PER_TOKEN, policy=policy,
                     **rules)


def _spec_or_none(args: argparse.Namespace):
    from .cli import model_from_args

    if getattr(args, "model", None) or getattr(args, "config", None):
        return model_from_args(args)
    return None


def _plot_path(args: argparse.Namespace) -> Path | None:
    from .plots import check_plot_path

    return check_plot_path(args.plot) if getattr(args, "plot", None) else None


# ------------------------------------------------------------------ simulate

def pools_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Device, fixed pools and KV bytes per token from --gpu/--weights/... and --model/--config/--kv-bytes-per-token."""
    from .models import kv_cache_bytes_per_token, weight_bytes
    from .presets import gpu_bytes
    from .units import parse_bytes

    spec = _spec_or_none(args)
    if spec is not None and args.kv_bytes_per_token is not None:
        raise CourseInputError("--kv-bytes-per-token and --model/--config both set the KV size; give one of them")
    if spec is None:
        kv = LESSON_KV_BYTES_PER_TOKEN if args.kv_bytes_per_token is None else check_count(
            "kv_bytes_per_token", args.kv_bytes_per_token, 1)
        source = ("--kv-bytes-per-token" if args.kv_bytes_per_token is not None
                  else "Llama-2-7B fp16 (the lesson's model)")
        weights = parse_bytes(args.weights if args.weights is not None else LESSON_WEIGHTS, name="weights")
    else:
        kv = kv_cache_bytes_per_token(spec, args.kv_dtype or args.dtype)
        source = f"{spec.name} ({args.kv_dtype or args.dtype})"
        weights = (parse_bytes(args.weights, name="weights") if args.weights is not None
                   else weight_bytes(spec, args.dtype))
    return {"device_bytes": gpu_bytes(args.gpu), "weights_bytes": weights, "workspace_bytes": args.workspace,
            "reserve_bytes": args.reserve, "kv_bytes_per_token": kv, "kv_source": source}


def _rules(args: argparse.Namespace, policy: str) -> dict[str, Any]:
    return {"policy": policy, "block_size_tokens": args.block_size, "watermark": args.watermark,
            "max_num_seqs": args.max_num_seqs, "max_queue_len": args.max_queue_len,
            "max_wait_steps": args.max_wait_steps}


def simulation_report(result, pools: dict[str, Any] | None = None, max_listed: int = 5) -> str:
    """A simulation as text: the budget, the summary, and the first requests that had to wait."""
    from .units import GB

    s, cfg = result.summary, result.config
    lines = [f"policy: {s.policy}"]
    if pools:
        from .budget import resolve_reserve
        from .units import parse_bytes

        lines.append(f"KV budget: {cfg.kv_budget_bytes / GB:.3f} GB = {pools['device_bytes'] / GB:.3f} GB device - "
                     f"{pools['weights_bytes'] / GB:.3f} GB weights - "
                     f"{parse_bytes(pools['workspace_bytes'], name='workspace') / GB:.3f} GB workspace - "
                     f"{resolve_reserve(pools['reserve_bytes'], pools['device_bytes']) / GB:.3f} GB reserve")
        lines.append(f"KV per token: {cfg.kv_bytes_per_token:,} B, {pools['kv_source']}")
    lines.append(f"blocks: {cfg.num_blocks:,} of {cfg.block_size_tokens} tokens x {cfg.kv_bytes_per_token:,} B = "
                 f"{cfg.block_bytes:,} B each ({cfg.kv_capacity_bytes / GB:.3f} GB in whole blocks)")
    lines.append(f"requests: {s.requests:,}: {s.completed:,} finished, {s.rejected:,} rejected "
                 f"({s.rejected_never_fits} never fit, {s.rejected_queue_full} queue full, {s.rejected_wait} waited "
                 f"too long); {s.steps:,} steps")
    crossed = "crossed!" if s.peak_kv_bytes > s.kv_budget_bytes else "never crossed"
    lines.append(f"peak KV allocated: {s.peak_kv_bytes / GB:.3f} GB of the {s.kv_budget_bytes / GB:.3f} GB budget "
                 f"({crossed}); peak KV holding tokens: {s.peak_token_bytes / GB:.3f} GB")
    lines.append(f"running: max {s.max_active}, mean {s.mean_active:.1f}; queued: max {s.max_queued}")
    if s.p50_queue_steps is not None:
        lines.append(f"queueing delay (steps): p50 {s.p50_queue_steps}, p99 {s.p99_queue_steps}, "
                     f"mean {s.mean_queue_steps:.1f}")
    if s.kv_utilization is not None:
        lines.append(f"allocated KV: {s.kv_utilization:.1%} held tokens, {s.internal_fragmentation:.1%} empty tails "
                     f"of blocks (internal fragmentation), {s.reserved_unused:.1%} reserved but not yet or never "
                     f"holding a token")
    lines.append(f"preemptions: {s.preemptions} ({s.recompute_tokens:,} tokens recomputed)")
    waited = [r for r in result.requests if r.queued_steps > 0 or r.status == "rejected"]
    if waited:
        lines.append(f"requests that waited or were rejected ({len(waited):,}; first {min(max_listed, len(waited))}):")
        for r in waited[:max_listed]:
            lines.append(f"  {r.id}: {r.status}; {r.reason}")
    return "\n".join(lines)


def comparison_table(results: list[tuple[str, Any]]) -> str:
    """Policies side by side on one trace."""
    from .units import GB

    rows = [("max running", lambda s: f"{s.max_active}"),
            ("mean running", lambda s: f"{s.mean_active:.1f}"),
            ("finished", lambda s: f"{s.completed:,}"),
            ("rejected", lambda s: f"{s.rejected:,}"),
            ("peak KV allocated (GB)", lambda s: f"{s.peak_kv_bytes / GB:.3f}"),
            ("KV budget (GB)", lambda s: f"{s.kv_budget_bytes / GB:.3f}"),
            ("allocated KV holding tokens", lambda s: "n/a" if s.kv_utilization is None else f"{s.kv_utilization:.1%}"),
            ("reserved, never/not yet used", lambda s: "n/a" if s.reserved_unused is None else f"{s.reserved_unused:.1%}"),
            ("internal fragmentation", lambda s: "n/a" if s.internal_fragmentation is None
             else f"{s.internal_fragmentation:.1%}"),
            ("p50 / p99 wait (steps)", lambda s: f"{s.p50_queue_steps} / {s.p99_queue_steps}"),
            ("preemptions", lambda s: f"{s.preemptions}"),
            ("steps to drain the trace", lambda s: f"{s.steps:,}")]
    width = max(len(name) for name, _ in rows)
    head = f"{'':<{width}}  " + "  ".join(f"{label:>14}" for label, _ in results)
    lines = [head, "-" * len(head)]
    for name, fmt in rows:
        lines.append(f"{name:<{width}}  " + "  ".join(f"{fmt(res.summary):>14}" for _, res in results))
    return "\n".join(lines)


def _cmd_simulate(args: argparse.Namespace) -> int:
    from .admission import POLICIES, kv_config
    from .plots import plot_simulation
    from .simulate import simulate
    from .trace import read_trace

    plot = _plot_path(args)
    requests = read_trace(args.trace)
    pools = pools_from_args(args)
    config_args = {k: v for k, v in pools.items() if k != "kv_source"}
    policies = list(POLICIES) if args.compare else [args.policy]
    results = [(p, simulate(requests, kv_config(**config_args, **_rules(args, p)))) for p in policies]
    if args.json:
        if args.compare:
            _print_json({"runs": {p: res.to_dict() for p, res in results}})
        else:
            _print_json(results[0][1].to_dict())
    else:
        for i, (_, res) in enumerate(results):
            if i:
                print()
            print(simulation_report(res, pools))
        if args.compare:
            print()
            print(comparison_table(results))
    if plot:
        plot_simulation(results, plot, title=f"KV cache over decode steps: {Path(args.trace).name}")
        print(f"plot: {plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


# ------------------------------------------------------------------ trace

def _cmd_trace(args: argparse.Namespace) -> int:
    from .trace import synthetic_trace, to_json_line, write_trace

    reqs = synthetic_trace(args.requests, args.seed, arrival_rate=args.arrival_rate,
                           prompt_tokens=(args.prompt_min, args.prompt_max), max_new_tokens=args.max_new_tokens,
                           mean_output_tokens=args.mean_output_tokens)
    if args.out:
        path = write_trace(reqs, args.out)
        mean_out = sum(r.output_tokens for r in reqs) / len(reqs)
        print(f"wrote {len(reqs):,} requests to {path}: arrivals at steps {reqs[0].arrival_step}.."
              f"{reqs[-1].arrival_step}, prompts {args.prompt_min}..{args.prompt_max} tokens, max_new_tokens "
              f"{args.max_new_tokens}, mean real output {mean_out:.1f} tokens")
    else:
        for r in reqs:
            sys.stdout.write(to_json_line(r) + "\n")
    return 0


# ------------------------------------------------------------------ offload

def offload_report(weights, swap, model_name: str) -> str:
    """The offload verb's text: per-step cost of streamed weights, then swap vs recompute."""
    from .offload import GPU_FLOPS
    from .units import GB

    eff = weights.efficiency
    lines = [
        f"link: {weights.link}, {weights.link_bytes_per_s / GB:g} GB/s per direction (theoretical) x "
        f"{eff:.0%} efficiency (assumed) = {weights.link_bytes_per_s * eff / GB:.2f} GB/s",
        f"offloaded weights streamed to the device at every decode step: {weights.offloaded_bytes / GB:.2f} GB",
        f"  adds {weights.added_step_s:.3f} s to EVERY decode step ({weights.offloaded_bytes / GB:.2f} GB / "
        f"{weights.link_bytes_per_s * eff / GB:.2f} GB/s; {weights.added_step_s_ideal:.3f} s even at 100%)",
        f"  the same bytes from {weights.hbm} device memory ({weights.hbm_bytes_per_s / GB:,.0f} GB/s) take "
        f"{weights.on_device_step_s * 1000:.2f} ms: the link is {weights.slowdown:.0f}x slower",
    ]
    if weights.kv_tokens_freed is not None:
        lines.append(f"  it frees {weights.offloaded_bytes / GB:.2f} GB = {weights.kv_tokens_freed:,} tokens of KV "
                     f"({model_name}, {weights.kv_bytes_per_token:,} B/token): capacity bought with transfer time")
    flops_name = next((k for k, v in GPU_FLOPS.items() if v == swap.flops_per_s), f"{swap.flops_per_s:.3g} FLOP/s")
    lines += [
        f"a preempted sequence of {swap.tokens:,} tokens ({model_name}): {swap.kv_bytes:,} B of KV "
        f"({swap.kv_bytes / GB:.3f} GB)",
        f"  swap out + in over {swap.link}: {swap.swap_out_s:.4f} + {swap.swap_in_s:.4f} = {swap.swap_s:.4f} s",
        f"  recompute (prefill again): {swap.recompute_flops:.3g} FLOP at {swap.mfu:.0%} (assumed) of "
        f"{flops_name} {swap.flops_per_s / 1e12:g} TFLOP/s = {swap.recompute_s:.4f} s",
        f"  cheaper: {swap.cheaper} ({swap.ratio:.1f}x); swapping also needs host memory for the KV",
    ]
    return "\n".join(lines)


def _cmd_offload(args: argparse.Namespace) -> int:
    from .models import kv_cache_bytes_per_token
    from .offload import offload_weights, swap_vs_recompute
    from .presets import DEFAULT_MODEL, get_model

    spec = _spec_or_none(args) or get_model(DEFAULT_MODEL)
    kv = kv_cache_bytes_per_token(spec, args.kv_dtype or args.dtype)
    weights = offload_weights(args.bytes, link=args.link, efficiency=args.efficiency, hbm=args.hbm,
                              kv_bytes_per_token=kv)
    swap = swap_vs_recompute(args.tokens, kv, spec.params_total, link=args.link, efficiency=args.efficiency,
                             flops=args.flops, mfu=args.mfu)
    if args.json:
        _print_json({"model": spec.name, "weights_offload": weights.to_dict(), "swap_vs_recompute": swap.to_dict()})
    else:
        print(offload_report(weights, swap, spec.name))
    return 0


# ------------------------------------------------------------------ rollout

def rollout_report(timeline, plan) -> str:
    """The rollout verb's text: one replica's phases, then the waves and capacity."""
    from .units import GB

    lines = [f"one replica: {timeline.weights_bytes / GB:.2f} GB of weights from {timeline.storage} "
             f"({timeline.storage_bytes_per_s / GB:g} GB/s), copied over {timeline.link}",
             f"  {'phase':<26} {'start s':>8} {'end s':>8} {'seconds':>8}  note"]
    for p in timeline.phases:
        lines.append(f"  {p.name:<26} {p.start_s:>8.2f} {p.end_s:>8.2f} {p.seconds:>8.2f}  {p.note}")
    lines.append(f"  ready {timeline.ready_s:.1f} s after its process starts; it serves nothing before that")
    lines.append(f"rollout: {plan.replicas} replicas, {plan.max_unavailable} at a time, drain {plan.drain_s:g} s")
    for i, (start, ready) in enumerate(zip(plan.process_starts_s, plan.ready_s), start=1):
        lines.append(f"  wave {i}: old out at {start - plan.drain_s:.1f} s, new process starts at {start:.1f} s, "
                     f"ready (counted) at {ready:.1f} s")
    naive_down = sum(b - a for a, b, c in zip(plan.naive_times_s, plan.naive_times_s[1:] + (plan.total_s,),
                                               plan.naive_capacity) if c < plan.replicas)
    lines.append(f"  total {plan.total_s:.1f} s; never fewer than {plan.min_capacity} of {plan.replicas} serving; "
                 f"{plan.replica_seconds_lost:.0f} replica-seconds of capacity lost")
    lines.append(f"  counting a replica at process start would show full capacity for all but "
                 f"{naive_down:.1f} s of it: wrong, the new process is still loading")
    return "\n".join(lines)


def _cmd_rollout(args: argparse.Namespace) -> int:
    from .loading import readiness_timeline, rollout_plan
    from .models import weight_bytes
    from .plots import plot_rollout
    from .presets import DEFAULT_MODEL, get_model

    plot = _plot_path(args)
    spec = _spec_or_none(args)
    if args.weights is not None and spec is not None:
        raise CourseInputError("--weights and --model/--config both set the weights; give one of them")
    weights = args.weights if args.weights is not None else weight_bytes(spec or get_model(DEFAULT_MODEL), args.dtype)
    timeline = readiness_timeline(weights, storage=args.storage, link=args.link, efficiency=args.efficiency,
                                  device_init_s=args.device_init, compile_s=args.compile, warmup_s=args.warmup,
                                  overlap_copy=args.overlap_copy)
    plan = rollout_plan(args.replicas, timeline.ready_s, max_unavailable=args.max_unavailable, drain_s=args.drain)
    if args.json:
        _print_json({"timeline": timeline.to_dict(), "rollout": plan.to_dict()})
    else:
        print(rollout_report(timeline, plan))
    if plot:
        plot_rollout(plan, timeline, plot)
        print(f"plot: {plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


# ------------------------------------------------------------------ registration

def register(sub: argparse._SubParsersAction) -> None:
    """Add simulate, trace, offload and rollout to ``course-memory``."""
    from .admission import DEFAULT_BLOCK_SIZE_TOKENS, DEFAULT_MAX_NUM_SEQS, DEFAULT_WATERMARK, POLICIES
    from .cli import add_model_args
    from .loading import DEFAULT_COMPILE_S, DEFAULT_DEVICE_INIT_S, DEFAULT_STORAGE, DEFAULT_WARMUP_S, STORAGE_BYTES_PER_S
    from .offload import (DEFAULT_EFFICIENCY, DEFAULT_FLOPS, DEFAULT_HBM, DEFAULT_LINK, DEFAULT_MFU, GPU_FLOPS,
                          HBM_BYTES_PER_S, LINKS)
    from .presets import DEFAULT_MODEL

    p = sub.add_parser("simulate", help="replay a request trace through admission control, step by step")
    p.add_argument("--trace", required=True, metavar="PATH", help="JSONL trace (see `course-memory trace`)")
    add_model_args(p, required=False)
    p.add_argument("--kv-bytes-per-token", type=int, metavar="N",
                   help=f"KV bytes per token instead of a model (default {LESSON_KV_BYTES_PER_TOKEN:,}, Llama-2-7B fp16)")
    p.add_argument("--dtype", default="fp16", help="weights dtype when --model/--config sets the weights (default fp16)")
    p.add_argument("--kv-dtype", default=None, help="KV-cache dtype (default: same as --dtype)")
    p.add_argument("--gpu", default=LESSON_GPU, help=f"device size or preset (default {LESSON_GPU})")
    p.add_argument("--weights", default=None,
                   help=f"weights size (default: from --model/--config, else {LESSON_WEIGHTS})")
    p.add_argument("--workspace", default=LESSON_WORKSPACE, help=f"runtime workspace (default {LESSON_WORKSPACE})")
    p.add_argument("--reserve", default=LESSON_RESERVE,
                   help=f"safety reserve: a size or a share such as 10%% (default {LESSON_RESERVE})")
    p.add_argument("--policy", choices=POLICIES, default="reserve-max", help="admission policy (default reserve-max)")
    p.add_argument("--compare", action="store_true", help="run both policies on the trace and compare them")
    p.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE_TOKENS,
                   help=f"tokens per KV block (default {DEFAULT_BLOCK_SIZE_TOKENS}, as vLLM)")
    p.add_argument("--watermark", type=_float, default=DEFAULT_WATERMARK,
                   help=f"paged: share of blocks kept free when admitting (default {DEFAULT_WATERMARK}, as vLLM)")
    p.add_argument("--max-num-seqs", type=int, default=DEFAULT_MAX_NUM_SEQS,
                   help=f"most requests running at once (default {DEFAULT_MAX_NUM_SEQS}, as vLLM)")
    p.add_argument("--max-queue-len", type=int, default=None, help="reject arrivals beyond this many waiting")
    p.add_argument("--max-wait-steps", type=int, default=None, help="reject requests still waiting after N steps")
    p.add_argument("--json", action="store_true", help="print JSON: requests, steps and summary")
    p.add_argument("--plot", metavar="PATH", help="write a PNG: KV memory over steps and queue length")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser("trace", help="write a synthetic request trace (JSONL)")
    p.add_argument("--requests", type=int, required=True, metavar="N", help="number of requests")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0); same seed, same trace")
    p.add_argument("--arrival-rate", type=_float, default=0.5, help="mean requests per step (default 0.5)")
    p.add_argument("--prompt-min", type=int, default=64, help="shortest prompt, tokens (default 64)")
    p.add_argument("--prompt-max", type=int, default=1024, help="longest prompt, tokens (default 1024)")
    p.add_argument("--max-new-tokens", type=int, default=512, help="max_new_tokens of every request (default 512)")
    p.add_argument("--mean-output-tokens", type=_float, default=128.0,
                   help="mean real output length, tokens (default 128; exponential, capped at max_new_tokens)")
    p.add_argument("--out", metavar="PATH", help="write here instead of stdout")
    p.set_defaults(func=_cmd_trace)

    p = sub.add_parser("offload", help="what offloading weights or swapping KV costs in transfer time")
    add_model_args(p, required=False)
    p.add_argument("--dtype", default="fp16", help="weights dtype (default fp16)")
    p.add_argument("--kv-dtype", default=None, help="KV-cache dtype (default: same as --dtype)")
    p.add_argument("--bytes", default="10GB", help="weights offloaded and streamed every step (default 10GB)")
    p.add_argument("--link", default=DEFAULT_LINK, help=f"{', '.join(LINKS)}, or GB/s such as 25GB (default {DEFAULT_LINK})")
    p.add_argument("--efficiency", type=_float, default=DEFAULT_EFFICIENCY,
                   help=f"share of the theoretical rate reached (default {DEFAULT_EFFICIENCY}, an assumption)")
    p.add_argument("--hbm", default=DEFAULT_HBM, choices=sorted(HBM_BYTES_PER_S),
                   help=f"device memory to compare with (default {DEFAULT_HBM})")
    p.add_argument("--tokens", type=int, default=2048, help="tokens of the preempted sequence (default 2048)")
    p.add_argument("--flops", default=DEFAULT_FLOPS,
                   help=f"GPU peak FLOP/s for recompute: {', '.join(GPU_FLOPS)} or a number (default {DEFAULT_FLOPS})")
    p.add_argument("--mfu", type=_float, default=DEFAULT_MFU,
                   help=f"share of peak FLOP/s a prefill reaches (default {DEFAULT_MFU}, an assumption)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_offload)

    p = sub.add_parser("rollout", help="readiness timeline of a replica and a one-at-a-time rollout")
    add_model_args(p, required=False)
    p.add_argument("--dtype", default="fp16", help="weights dtype (default fp16)")
    p.add_argument("--weights", default=None, help=f"weights size (default: from the model, {DEFAULT_MODEL})")
    p.add_argument("--replicas", type=int, default=4, help="replicas to replace (default 4)")
    p.add_argument("--max-unavailable", type=int, default=1, help="replicas replaced at a time (default 1)")
    p.add_argument("--drain", type=_float, default=10.0, help="seconds an old replica drains (default 10)")
    p.add_argument("--storage", default=DEFAULT_STORAGE,
                   help=f"{', '.join(STORAGE_BYTES_PER_S)}, or GB/s such as 2GB (default {DEFAULT_STORAGE})")
    p.add_argument("--link", default=DEFAULT_LINK, help=f"host->device link (default {DEFAULT_LINK})")
    p.add_argument("--efficiency", type=_float, default=DEFAULT_EFFICIENCY, help="share of the link rate reached")
    p.add_argument("--device-init", type=_float, default=DEFAULT_DEVICE_INIT_S,
                   help=f"seconds of CUDA/runtime init (default {DEFAULT_DEVICE_INIT_S}, assumed)")
    p.add_argument("--compile", type=_float, default=DEFAULT_COMPILE_S,
                   help=f"seconds of compile / graph capture (default {DEFAULT_COMPILE_S}, assumed; 0 for eager)")
    p.add_argument("--warmup", type=_float, default=DEFAULT_WARMUP_S,
                   help=f"seconds of warm-up (default {DEFAULT_WARMUP_S}, assumed)")
    p.add_argument("--overlap-copy", action="store_true", help="copy to the device while reading")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="PATH", help="write a PNG: readiness phases and capacity over time")
    p.set_defaults(func=_cmd_rollout)


# ------------------------------------------------------------------ make demo

def demo_section(out_dir: str | Path = "out") -> None:
    """The demo's admission section: ten fit and the eleventh waits; reserve-max vs paged; plots under out_dir."""
    from .demo import banner
    from .plots import plot_simulation
    from .simulate import simulate

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pools = {"device_bytes": 24 * 10**9, "weights_bytes": 14 * 10**9, "workspace_bytes": LESSON_WORKSPACE,
             "reserve_bytes": LESSON_RESERVE, "kv_source": "Llama-2-7B fp16"}

    banner("Admission control: 11 requests of 608 + 512 tokens on the lesson's 6 GB KV budget")
    trace = lesson_trace(11)
    runs = [(p, simulate(trace, lesson_config(p))) for p in ("reserve-max", "paged")]
    print(simulation_report(runs[0][1], pools, max_listed=1))
    print()
    print("paged on the same requests (claims blocks as tokens arrive, preempts the youngest when out of blocks):")
    print(comparison_table(runs))
    path = plot_simulation([("reserve-max: reserve prompt + max_new_tokens", runs[0][1]),
                            ("paged: 16-token blocks on demand", runs[1][1])], out / "admission.png",
                           title="Ten requests fit the safe KV budget; the eleventh is queued, not crashed")
    print(f"plot: {path}")

    banner("Reserve-max vs paged when real outputs (~128 tokens) are far below max_new_tokens (1,024)")
    trace = comparison_trace()
    runs = [(p, simulate(trace, lesson_config(p))) for p in ("reserve-max", "paged")]
    print(comparison_table(runs))
    rm = runs[0][1].summary
    print(f"reserve-max kept {rm.reserved_unused:.0%} of its allocated KV reserved for tokens not generated yet or "
          f"never; only {rm.kv_utilization:.0%} held tokens (the PagedAttention paper measured 20.4-38.2% for "
          f"earlier systems)")
    path = plot_simulation([("reserve-max", runs[0][1]), ("paged", runs[1][1])], out / "admission_compare.png",
                           title="400 chat-like requests: outputs ~128 tokens, max_new_tokens 1,024")
    print(f"plot: {path}")
