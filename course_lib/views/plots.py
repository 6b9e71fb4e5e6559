"""Plots for the request-dependent side: KV memory over steps, queue length, readiness and rollout.

matplotlib is imported inside each function, and figures are drawn on a
plain :class:`matplotlib.figure.Figure` (no pyplot), so no backend is chosen,
no window opens, no global figure state leaks, and a notebook's backend is
left alone. Every function writes one image and returns its path.

Sizes are plotted in decimal GB (10^9 bytes) unless ``unit="GiB"`` (2^30).

Margins are fixed, in inches (:func:`_margins`), not solved by matplotlib's constrained layout: the solver
measured every tick label of every axis twice per save and was a third of each figure's time (0.35 s against
0.22 s for the lesson's chat figure), paid by every learner and by every graded notebook.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, Union

from ..errors import CourseInputError
from ..output import check_output_file
from ..units import GB, GiB

if TYPE_CHECKING:  # pragma: no cover
    from ..serving.loading import ReadinessTimeline, RolloutPlan
    from ..simulate import SimulationResult

FORMATS = (".png", ".svg", ".pdf")
#: Long runs are drawn as the max over buckets of steps, so peaks stay visible.
MAX_POINTS = 8000
#: A rollout shades each wave's drain and loading (three artists a wave) for at most this many waves:
#: 10^4 shaded waves take matplotlib over a minute; the step function still shows every wave.
MAX_SHADED_WAVES = 100

_UNITS = {"GB": (GB, "GB (10^9 bytes)"), "GiB": (GiB, "GiB (2^30 bytes)")}


def _margins(fig, *, left: float, right: float, top: float, bottom: float, hspace: float = 0.0,
             wspace: float = 0.0, rows: int = 1, cols: int = 1) -> None:
    """Place the subplot grid with margins and gaps given in inches (``subplots_adjust`` wants fractions)."""
    width, height = fig.get_size_inches()
    cell_w = (width - left - right - wspace * (cols - 1)) / cols
    cell_h = (height - top - bottom - hspace * (rows - 1)) / rows
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height,
                        wspace=wspace / cell_w if cols > 1 else 0.2, hspace=hspace / cell_h if rows > 1 else 0.2)


def check_plot_path(path: str | Path, *, name: str = "plot") -> Path:
    """The output path, checked before any work: an image suffix, a writable file in an existing folder.

    ``name`` is what a refusal calls it (the CLI passes ``--plot``); see :func:`course_lib.output.check_output_file`.
    """
    return check_output_file(name, path, suffixes=FORMATS)


def _unit(unit: str) -> tuple[int, str]:
    if unit not in _UNITS:
        raise CourseInputError(f"unit={unit!r} is not a plot unit; use GB or GiB")
    return _UNITS[unit]


def bucket_max(values: Sequence[int], max_points: int = MAX_POINTS) -> tuple[list[int], list[int], int]:
    """(first step of each bucket, max over the bucket, bucket size): a long series cut to <= max_points.

    >>> bucket_max([1, 5, 2, 2, 9], max_points=3)
    ([0, 2, 4], [5, 2, 9], 2)
    """
    n = len(values)
    size = max(1, math.ceil(n / max_points))
    if size == 1:
        return list(range(n)), list(values), 1
    xs = list(range(0, n, size))
    return xs, [max(values[i:i + size]) for i in xs], size


def _runs(runs: Union["SimulationResult", Sequence[tuple[str, "SimulationResult"]]]) -> list[tuple[str, "SimulationResult"]]:
    if hasattr(runs, "summary"):
        return [(runs.summary.policy, runs)]  # type: ignore[union-attr]
    out = list(runs)  # type: ignore[arg-type]
    if not out:
        raise CourseInputError("runs is empty; give a SimulationResult or (label, SimulationResult) pairs")
    return out


def plot_simulation(runs: Union["SimulationResult", Sequence[tuple[str, "SimulationResult"]]], path: str | Path, *,
                    title: str | None = None, unit: str = "GB") -> Path:
    """KV memory over steps against the safe budget (top) and running / queued requests (bottom).

    ``runs`` is one result, or (label, result) pairs drawn side by side with
    shared axes, e.g. reserve-max next to paged on the same trace.
    """
    from matplotlib.figure import Figure

    out = check_plot_path(path)
    scale, unit_label = _unit(unit)
    pairs = _runs(runs)
    fig = Figure(figsize=(max(9.0, 6.2 * len(pairs) + 0.6), 7.8))
    axes = fig.subplots(2, len(pairs), sharex=True, sharey="row", squeeze=False,
                        gridspec_kw={"height_ratios": [3, 2]})
    # below: the x label and the legend (one row for side-by-side runs, three for one run's five entries)
    _margins(fig, left=0.75, right=0.15, top=0.95, bottom=0.95 if len(pairs) > 1 else 1.35, hspace=0.35,
             wspace=0.15, rows=2, cols=len(pairs))
    note = ""
    most_steps = max(len(res.blocks_used) for _, res in pairs)
    most_requests = max(max(max(res.active, default=0), max(res.queued, default=0)) for _, res in pairs)
    for col, (label, res) in enumerate(pairs):
        s, cfg = res.summary, res.config
        top, bottom = axes[0][col], axes[1][col]
        xs, blocks, size = bucket_max(res.blocks_used)
        _, held, _ = bucket_max(res.token_counts)
        _, active, _ = bucket_max(res.active)
        _, queued, _ = bucket_max(res.queued)
        if size > 1:
            note = f"; long runs drawn as the max over each {size} steps"
        kv = [b * cfg.block_bytes / scale for b in blocks]
        tok = [h * cfg.kv_bytes_per_token / scale for h in held]
        budget = cfg.kv_budget_bytes / scale
        top.fill_between(xs, tok, step="post", color="tab:blue", alpha=0.35, linewidth=0,
                         label="KV holding tokens")
        top.step(xs, kv, where="post", color="tab:blue", linewidth=1.4,
                 label="KV allocated (reserved or claimed)")
        top.axhline(budget, color="tab:red", linestyle="--", linewidth=1.6,
                    label=f"safe KV budget = device - weights - workspace - reserve ({budget:.3f} {unit})")
        top.set_ylim(0, budget * 1.15)
        util = "n/a" if s.kv_utilization is None else f"{s.kv_utilization:.0%}"
        top.set_title(f"{label}\npeak {s.peak_kv_bytes / scale:.3f} of {budget:.3f} {unit}; "
                      f"{util} of allocated KV holds tokens", fontsize=10)
        bottom.step(xs, active, where="post", color="tab:green", linewidth=1.4, label="running (active)")
        bottom.step(xs, queued, where="post", color="tab:orange", linewidth=1.4, label="queued (waiting)")
        bottom.set_title(f"max {s.max_active} running; {s.completed} finished, {s.rejected} rejected, "
                         f"{s.preemptions} preemption(s); p99 wait {s.p99_queue_steps} steps", fontsize=9)
        bottom.set_xlabel("decode step")
        bottom.set_ylim(0, most_requests * 1.15 + 1)
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
            ax.set_xlim(0, max(1, most_steps))
        if col == 0:
            top.set_ylabel(f"KV cache, {unit_label}")
            bottom.set_ylabel("requests")
    handles = [h for ax in (axes[0][0], axes[1][0]) for h in ax.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=2 if len(pairs) == 1 else len(handles),
               fontsize=9, frameon=False)
    fig.suptitle((title or "KV cache memory under admission control") + note, fontsize=12)
    fig.savefig(out, dpi=110)
    return out


def plot_rollout(plan: "RolloutPlan", timeline: "ReadinessTimeline", path: str | Path, *,
                 title: str | None = None) -> Path:
    """One replica's readiness phases (top) and serving capacity during the rollout (bottom)."""
    from matplotlib.figure import Figure

    out = check_plot_path(path)
    fig = Figure(figsize=(10, 7.2))
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [2, 3]})
    # left: the phase names ("compile / graph capture" at 10 pt); between the panels: an x label and a title
    _margins(fig, left=1.8, right=0.1, top=0.62, bottom=0.5, hspace=0.75, rows=2)
    colors = ["tab:gray", "tab:blue", "tab:purple", "tab:orange", "tab:olive"]
    names = [p.name for p in timeline.phases]
    for row, phase in enumerate(timeline.phases):
        top.barh(row, phase.seconds, left=phase.start_s, color=colors[row % len(colors)], height=0.6)
        top.text(phase.end_s + timeline.ready_s * 0.01, row, f"{phase.seconds:.1f} s  {phase.note}",
                 va="center", fontsize=8)
    top.axvline(timeline.ready_s, color="tab:green", linewidth=1.6, label=f"ready at {timeline.ready_s:.1f} s")
    top.axvline(0, color="black", linewidth=1.0, linestyle=":", label="process starts (t = 0)")
    top.set_yticks(range(len(names)), names)
    top.invert_yaxis()
    top.set_xlim(0, timeline.ready_s * 1.75)
    top.set_xlabel("seconds since the replica's process started")
    top.set_title(f"One replica becomes ready: {timeline.weights_bytes / GB:.2f} GB of weights from "
                  f"{timeline.storage}, copied over {timeline.link}", fontsize=10)
    top.legend(loc="upper right", fontsize=8)
    top.grid(True, axis="x", alpha=0.3)

    times = list(plan.times_s)
    caps = list(plan.capacity)
    end = plan.total_s * 1.08 if plan.total_s else 1.0
    bottom.step(times + [end], caps + [caps[-1]], where="post", color="tab:blue", linewidth=2,
                label="replicas serving (counted only once ready)")
    naive_t = list(plan.naive_times_s)
    naive_c = list(plan.naive_capacity)
    bottom.step(naive_t + [end], [c + 0.04 for c in naive_c] + [naive_c[-1] + 0.04], where="post",
                color="tab:red", linewidth=1.2, linestyle="--",
                label="wrong: counting a replica at process start")
    bottom.axhline(plan.replicas, color="tab:gray", linestyle=":", linewidth=1,
                   label=f"all {plan.replicas} replicas")
    waves = list(zip(plan.process_starts_s, plan.ready_s))
    for i, (start, ready) in enumerate(waves[:MAX_SHADED_WAVES]):
        if plan.drain_s:
            bottom.axvspan(start - plan.drain_s, start, color="tab:gray", alpha=0.15,
                           label="old replica draining" if i == 0 else None)
        bottom.axvline(start, color="black", linestyle=":", linewidth=0.8,
                       label="new process starts (not yet serving)" if i == 0 else None)
        bottom.axvspan(start, ready, color="tab:orange", alpha=0.12,
                       label="loading and warming up" if i == 0 else None)
    bottom.set_ylim(0, plan.replicas + 1)
    bottom.set_xlim(0, end)
    bottom.set_xlabel("seconds since the rollout started")
    bottom.set_ylabel("replicas serving (ready)")
    shaded = f"; the first {MAX_SHADED_WAVES} of {len(waves):,} waves shaded" if len(waves) > MAX_SHADED_WAVES else ""
    bottom.set_title(f"Rolling {plan.replicas} replicas, {plan.max_unavailable} at a time: "
                     f"{plan.total_s:.0f} s, never fewer than {plan.min_capacity} serving, "
                     f"{plan.replica_seconds_lost:.0f} replica-seconds of capacity lost{shaded}", fontsize=10)
    bottom.legend(loc="lower right", fontsize=8)
    bottom.grid(True, alpha=0.3)
    fig.suptitle(title or "Loading, warm-up and rollout: a replica counts only once it is ready", fontsize=12)
    fig.savefig(out, dpi=110)
    return out
