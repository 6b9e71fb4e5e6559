"""A bar chart of predicted vs measured bytes, per pool.

Uses ``matplotlib.figure.Figure`` directly (no pyplot, no global backend), so
it works the same from the CLI, a script or a notebook. One unit for the whole
figure, stated on every axis: GB (10^9 bytes) when a bar reaches 1 GB, MiB
(2^20 bytes) below that. Each pool has its own panel and scale, so a 20 MB
workspace stays readable next to 1 GB of weights.
"""

from __future__ import annotations

from pathlib import Path

from ..units import GB, MiB
from .run import MeasureResult

PREDICTED_COLOR = "#9ecae1"
MEASURED_COLOR = "#3182bd"


def axis_unit(max_bytes: int) -> tuple[int, str]:
    """(divisor, label) for an axis whose largest bar is ``max_bytes``.

    >>> axis_unit(2 * 10**9)[1]
    'GB (10^9 bytes)'
    >>> axis_unit(300 * 2**20)[1]
    'MiB (2^20 bytes)'
    """
    return (GB, "GB (10^9 bytes)") if max_bytes >= GB else (MiB, "MiB (2^20 bytes)")


def plot_pools(result: MeasureResult, path: str | Path, *, include_total: bool = True,
               predicted_label: str = "predicted (course_lib)") -> Path:
    """Write a PNG: one panel per pool (each with its own scale), predicted and measured bars, the % error.

    Returns the path written (its folder is created if needed).
    """
    from matplotlib.figure import Figure

    pools = list(result.pools) + ([result.total] if include_total else [])
    s = result.settings
    fig = Figure(figsize=(2.6 * len(pools) + 0.6, 4.6), dpi=120, layout="constrained")
    axes = fig.subplots(1, len(pools), squeeze=False)[0]
    # One unit for the whole figure, so panels compare at a glance; each panel keeps its own scale.
    scale, unit = axis_unit(max(max(p.predicted_bytes, p.measured_bytes) for p in pools))
    for ax, p in zip(axes, pools):
        values = (p.predicted_bytes / scale, p.measured_bytes / scale)
        bars = ax.bar([0, 1], values, 0.7, color=[PREDICTED_COLOR, MEASURED_COLOR],
                      edgecolor=["#4a6f8a", "#1f4e79"], label=[predicted_label, "measured (this machine)"])
        digits = 3 if scale == GB else 1
        for bar, value in zip(bars, values):
            ax.annotate(f"{value:,.{digits}f}", (bar.get_x() + bar.get_width() / 2, value), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=9)
        err = p.error_pct
        ax.set_title(f"{p.name.replace('_', ' ')}\nerror {'n/a' if err != err else f'{err:+.2f}%'}", fontsize=10)
        ax.set_xticks([0, 1], ["predicted", "measured"], fontsize=9)
        ax.set_ylim(0, max(values) * 1.18 or 1)
        ax.set_ylabel(unit, fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    where = result.device if result.device == "cpu" else f"{result.device} {result.device_name}"
    fig.suptitle(f"Predicted vs measured memory per pool: {result.model} on {where}\n"
                 f"{s['sequences']} sequences x {s['context_tokens']} tokens, weights {s['dtype']}, "
                 f"KV cache {s['kv_dtype']}; error = (predicted - measured) / measured", fontsize=11)
    fig.legend(handles=list(axes[0].patches), loc="outside lower center", ncols=2, frameon=False, fontsize=9)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out
