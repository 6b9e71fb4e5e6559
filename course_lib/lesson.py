"""Notebook cells that show the library at work: one call each, a report and a figure.

Each function prints its numbers, saves its figure under ``figures/`` and
displays it inline when run in a notebook (IPython present), so the exercise
notebook stays short and the same code is tested outside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FIGURES = Path("figures")


def _show_image(path: Path) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is not None:
        display(Image(filename=str(path)))


def show_simulation(out_dir: str | Path = FIGURES) -> dict[str, Any]:
    """Ten requests fit the lesson's 6 GB KV budget and the eleventh is queued; reserve-max vs paged.

    Returns ``{"reserve-max": SimulationResult, "paged": SimulationResult}``.
    """
    from .cli_requests import comparison_table, lesson_config, lesson_trace, simulation_report
    from .plots import plot_simulation
    from .simulate import simulate

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trace = lesson_trace(11)
    runs = {policy: simulate(trace, lesson_config(policy)) for policy in ("reserve-max", "paged")}
    pools = {"device_bytes": 24 * 10**9, "weights_bytes": 14 * 10**9, "workspace_bytes": "2GB",
             "reserve_bytes": "2GB", "kv_source": "Llama-2-7B fp16"}
    print(simulation_report(runs["reserve-max"], pools, max_listed=1))
    print()
    print(comparison_table(list(runs.items())))
    path = plot_simulation([("reserve-max: reserve prompt + max_new_tokens", runs["reserve-max"]),
                            ("paged: 16-token blocks on demand", runs["paged"])], out / "admission.png",
                           title="Ten requests fit the safe KV budget; the eleventh is queued, not crashed")
    _show_image(path)
    return runs


def show_loading_and_offload(out_dir: str | Path = FIGURES) -> dict[str, Any]:
    """Offloading 10 GB over PCIe Gen4, and a 4-replica rollout of Llama-2-7B from a network disk."""
    from .loading import readiness_timeline, rollout_plan
    from .models import kv_cache_bytes_per_token, weight_bytes
    from .offload import offload_weights
    from .plots import plot_rollout
    from .presets import get_model

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = get_model("llama-2-7b")
    off = offload_weights("10GB", link="pcie-gen4-x16", kv_bytes_per_token=kv_cache_bytes_per_token(spec, "fp16"))
    print(f"Offloading 10 GB of weights over {off.link}: +{off.added_step_s_ideal:.3f} s per decode step at "
          f"100% of the link, +{off.added_step_s:.3f} s at {off.efficiency:.0%}; from device memory ({off.hbm}) the "
          f"same bytes take {off.on_device_step_s * 1000:.1f} ms ({off.slowdown:.0f}x slower). The 10 GB freed "
          f"would hold {off.kv_tokens_freed:,} tokens of Llama-2-7B KV cache instead.")
    timeline = readiness_timeline(weight_bytes(spec, "fp16"), storage="network-disk")
    print()
    print(f"A new Llama-2-7B replica (fp16, {weight_bytes(spec, 'fp16') / 1e9:.2f} GB) is ready "
          f"{timeline.ready_s:.1f} s after its process starts:")
    for phase in timeline.phases:
        print(f"  {phase.start_s:7.1f} -> {phase.end_s:7.1f} s  {phase.name:<24} {phase.note}")
    plan = rollout_plan(4, timeline.ready_s, drain_s=10.0)
    print(f"\nRolling 4 replicas one at a time takes {plan.total_s:.0f} s; at least {plan.min_capacity} of 4 "
          f"serve throughout, and {plan.replica_seconds_lost:.0f} replica-seconds of capacity are lost.")
    path = plot_rollout(plan, timeline, out / "rollout.png")
    _show_image(path)
    return {"offload": off, "timeline": timeline, "rollout": plan}
