"""Every text report: budgets, estimates, simulations, offloading and rollouts.

What the CLI, the notebook, the lab and ``make demo`` print comes from here, so
each figure is worded (and unit-labelled) the same way wherever a learner meets it.
"""

from __future__ import annotations

from ..serving.budget import Budget, Estimate
from ..serving.loading import ReadinessTimeline, RolloutPlan
from ..model.models import checkpoint_words
from ..serving.offload import GPU_FLOPS, SwapVsRecompute, WeightOffload
from ..simulate import SimulationResult
from ..units import GB, GiB


def banner(title: str) -> None:
    """A section heading for long text output (``make demo``, ``course-memory demo``)."""
    print()
    print("=" * 78)
    print(title)
    print("=" * 78, flush=True)


def budget_table(budget: Budget, title: str | None = None) -> str:
    """A budget as an aligned table, every size in bytes, GB (10^9) and GiB (2^30).

    >>> from course_lib.serving.budget import plan_budget
    >>> b = plan_budget(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB",
    ...                 reserve_bytes="2GB", per_sequence_kv_bytes="1.5GB", active_sequences=4)
    >>> print(budget_table(b).splitlines()[-1])
    verdict: fits: 4 active sequences leave 0.00 GB headroom (at most 4 fit)
    """
    rows = [(p.name, p.kind, p.bytes, p.note) for p in budget.pools]
    lines = []
    if title:
        lines.append(title)
    header = f"{'pool':<14} {'kind':<18} {'bytes':>16} {'GB':>9} {'GiB':>9}  note"
    lines.append(header)
    lines.append("-" * len(header))
    for name, kind, size, note in rows:
        lines.append(f"{name:<14} {kind:<18} {size:>16,} {size / GB:>9.3f} {size / GiB:>9.3f}  {note}")
    lines.append("-" * len(header))
    for label, size in (("used", budget.used_bytes), ("device", budget.device_bytes),
                        ("headroom", budget.headroom_bytes)):
        lines.append(f"{label:<14} {'':<18} {size:>16,} {size / GB:>9.3f} {size / GiB:>9.3f}")
    lines.append(f"per sequence: {budget.per_sequence_bytes:,} B ({budget.per_sequence_bytes / GB:.3f} GB); "
                 f"left for requests after fixed pools: {budget.request_budget_bytes / GB:.3f} GB")
    lines.append(f"max_active_sequences: {budget.max_active_sequences} "
                 f"(sequence {budget.first_crossing_sequences} crosses the safe budget)")
    lines.append(f"verdict: {budget.verdict()}")
    return "\n".join(lines)


def estimate_table(est: Estimate) -> str:
    """An :class:`Estimate` as a header of model facts plus its budget table.

    The header says what the weights count (text decoder, vision tower), which
    weights dtype was used and why, and where the bytes come from (the formula
    or a checkpoint's safetensors).
    """
    spec = est.spec
    per_gpu = " per GPU" if est.tensor_parallel > 1 else ""
    head = [
        f"estimate: {est.to_dict()['estimate_model']}",
        f"model: {spec.name} ({spec.model_type}, {spec.attention.upper()}, {spec.num_layers} layers, "
        f"{spec.num_attention_heads} heads / {spec.num_kv_heads} KV heads, head_dim {spec.head_dim})",
        f"params_total: {spec.params_total:,}" + (f"; buffers_total: {spec.buffers_total:,} (loaded, not parameters)"
                                                  if spec.buffers_total else ""),
        f"weights dtype: {est.weights_reason or est.dtype}",
        f"KV-cache dtype: {est.kv_dtype}; tensor parallel: {est.tensor_parallel}",
        f"kv_cache_bytes_per_token{per_gpu}: {est.kv_cache_bytes_per_token:,} B; context: {est.context_tokens} tokens",
    ]
    if spec.resolved_by:
        head.append(f"formula chosen by {spec.resolved_by}")
    if spec.counted:
        head.append("weights count: " + "; ".join(spec.counted))
    if est.weights_source == "checkpoint":
        formula = (f"the formula gives {est.weights_formula_bytes:,}{per_gpu}" if "given" not in spec.params
                   else "no formula for this family")
        head.append(f"weights bytes: {checkpoint_words(spec)}; {formula}")
    if spec.states:
        kind = "compressor states" if len(spec.layers) > spec.num_layers else "linear-attention layers"  # DeepSeek-V4
        head.append(f"recurrent state{per_gpu}: {est.recurrent_state_bytes_per_sequence:,} B per sequence "
                    f"({len(spec.states)} {kind}), the same at any length")
    if est.replicated:
        head.append("replicated on every GPU: " + ", ".join(f"{k} {v:,} params" for k, v in est.replicated.items()))
    for note in spec.notes:
        head.append(f"note: {note}")
    return "\n".join(head) + "\n\n" + budget_table(est.budget, title=f"budget{per_gpu}:")


def simulation_report(result: SimulationResult, budget: Budget | None = None, kv_source: str = "",
                      max_listed: int = 5) -> str:
    """A simulation as text: the budget it ran on, the summary, and the first requests that had to wait.

    ``budget`` is the resolved fixed pools the KV budget came from (see
    :func:`course_lib.serving.admission.kv_config_for`); ``kv_source`` says where the KV bytes per token came from.
    """
    s, cfg = result.summary, result.config
    lines = [f"policy: {s.policy}"]
    if budget is not None:
        p = budget.parts
        lines.append(f"KV budget: {cfg.kv_budget_bytes / GB:.3f} GB = {budget.device_bytes / GB:.3f} GB device - "
                     f"{p['weights'] / GB:.3f} GB weights - {p['workspace'] / GB:.3f} GB workspace - "
                     f"{p['reserve'] / GB:.3f} GB reserve")
        lines.append(f"KV per token: {cfg.kv_bytes_per_token:,} B" + (f", {kv_source}" if kv_source else ""))
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


def comparison_table(results: list[tuple[str, SimulationResult]]) -> str:
    """Policies side by side on one trace."""
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


def offload_report(weights: WeightOffload, swap: SwapVsRecompute, model_name: str) -> str:
    """The offload verb's text: per-step cost of streamed weights, then swap vs recompute."""
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
        "  (this linear model gives the same ratio at any length; vLLM's V1 engine always recomputes a preempted "
        "request: swap was a V0 mode)",
    ]
    return "\n".join(lines)


def rollout_report(timeline: ReadinessTimeline, plan: RolloutPlan) -> str:
    """The rollout verb's text: one replica's phases, then the waves and capacity."""
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


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GiB:.2f}"


def runtime_table(spec, est) -> str:
    """A runtime's estimate as text: the launch, the arithmetic term by term, the pool and what was defaulted.

    Every size in GiB, since runtimes print GiB (vLLM's "Available KV cache memory: 5.01 GiB").
    """
    launch = est.launch
    lines = [f"estimate: {est.runtime} {est.version}'s own sizing rule (not the lesson's simple model)",
             f"model: {spec.name} ({spec.model_type}); weights {launch.get('weights_format')}, KV cache "
             f"{launch.get('kv_dtype')}; TP {launch.get('tensor_parallel')} x PP {launch.get('pipeline_parallel')}",
             *([f"formula chosen by {spec.resolved_by}"] if getattr(spec, "resolved_by", "") else []),
             f"{'term':<18} {'GiB':>9} {'bytes':>18}  note"]
    for t in est.terms:
        sign = {1: "+", -1: "-", 0: " "}[t.sign]
        lines.append(f"{sign} {t.name:<16} {t.bytes / GiB:>9.2f} {t.bytes:>18,}  {t.note}")
    lines.append(f"= kv_cache         {est.runtime_kv_cache_bytes / GiB:>9.2f} {est.runtime_kv_cache_bytes:>18,}  "
                 f"per GPU ({est.kv_cache_bytes_per_token:,} B per token)")
    length = launch.get("max_model_len") or launch.get("context_length") or launch.get("max_seq_len")
    lines.append(f"blocks: {est.num_gpu_blocks:,} of {est.block_size} tokens; KV cache size: {est.kv_cache_tokens:,} "
                 f"tokens; maximum concurrency for {length:,} tokens per request: {est.max_concurrency:.2f}x")
    if len(est.per_stage_kv_cache_bytes) > 1:
        lines.append("per stage: " + ", ".join(f"{b / GiB:.2f} GiB" for b in est.per_stage_kv_cache_bytes))
    for key, why in est.defaults.items():
        lines.append(f"default: {key} = {why}")
    if est.fitted:
        lines.append("fitted on published logs: " + ", ".join(est.fitted))
    for note in est.notes:
        lines.append(f"note: {note}")
    for rule in est.unchecked_rules:
        lines.append(f"not checked by a log: {rule} (read from the release's source only)")
    return "\n".join(lines)


def from_log_table(result: dict) -> str:
    """A start-up log's pools as the runtime saw them, beside our prediction for the same launch."""
    logged, predicted = result["logged"], result.get("predicted", {})
    launch = result["launch"]
    lines = [f"runtime: {result['runtime']}; model: {result.get('model') or '(not named in the log)'}"
             + (f" (preset {result['preset']})" if result.get("preset") else "")]
    lines.append("launch from the log: " + (", ".join(f"{k}={v}" for k, v in launch.items()) or "(nothing)"))
    missing = predicted.get("missing") if isinstance(predicted, dict) else None
    rows = (("weights", "weights_bytes"), ("workspace: activation peak", "activation_bytes"),
            ("workspace: non-torch", "non_torch_bytes"), ("workspace: CUDA graphs", "cuda_graph_bytes"),
            ("kv_cache", "kv_cache_bytes"))
    lines.append(f"{'pool':<28} {'logged GiB':>11} {'predicted':>10} {'difference':>11}")
    for label, key in rows:
        lv, pv = logged.get(key), None if missing else predicted.get(key)
        diff = "-" if lv is None or pv is None else f"{(pv - lv) / GiB:+.2f}"
        lines.append(f"{label:<28} {_gib(lv):>11} {_gib(pv):>10} {diff:>11}")
    for label, key in (("KV cache tokens", "kv_cache_tokens"), ("blocks", "num_gpu_blocks"),
                       ("maximum concurrency", "max_concurrency")):
        lv, pv = logged.get(key), None if missing else predicted.get(key)
        fmt = (lambda v: "-" if v is None else f"{v:,.2f}x") if key == "max_concurrency" else \
            (lambda v: "-" if v is None else f"{v:,}")
        lines.append(f"{label:<28} {fmt(lv):>11} {fmt(pv):>10}")
    if logged.get("encoder_budget_tokens") is not None or predicted.get("encoder_budget_tokens") is not None:
        def _line(side: dict) -> str:
            if side.get("encoder_budget_tokens") is None:
                return "-"
            return f"{side['encoder_budget_tokens']:,} / {side.get('encoder_items')} {side.get('encoder_modality')}"
        lines.append(f"vision encoder profile (budget tokens / items): logged {_line(logged)}; predicted "
                     f"{'-' if missing else _line(predicted)}")
    est = result.get("estimate")
    if est:
        share = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static",
                 "trtllm": "kv_cache_free_gpu_mem_fraction"}[result["runtime"]]
        total = est["launch"].get("gpu_total_bytes")
        if est["launch"].get(share) is not None:        # none when the pool's size was given (vLLM on the CPU)
            lines.append(f"reserve (what the share leaves unplanned): {share} = {est['launch'].get(share)} of "
                         f"{_gib(total)} GiB")
        rel = result.get("difference", {}).get("kv_cache_bytes_relative")
        if rel is not None:
            lines.append(f"KV cache: predicted {rel:+.1%} against the log")
        for key, why in est["defaults"].items():
            lines.append(f"default (not in the log): {key} = {why}")
        lines.extend(n for n in est.get("notes", ()) if n.startswith("speculative decoding:"))
    if missing:
        lines.append(f"predicted: missing: {missing}")
    lines.append("note: logged figures are as printed (2 decimals of GiB: +-0.005 GiB)")
    return "\n".join(lines)
