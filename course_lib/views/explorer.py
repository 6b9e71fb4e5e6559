"""The budget explorer: a stacked bar of the five pools, the safe line, headroom against load, and a verdict.

:func:`budget_figure` draws one budget with matplotlib (works anywhere, also
headless): the pools as a stacked bar and, beside it, the headroom as the
number of active sequences grows, with the point where the verdict flips
marked. :func:`budget_explorer` wraps it in ipywidgets controls for
JupyterLab. Both import matplotlib / ipywidgets only when called.

The weight format and the KV-cache dtype are two controls, as they are two
flags in every runtime (vLLM ``--quantization``/``--dtype`` against
``--kv-cache-dtype``): int4 weights leave the KV cache in the compute dtype
unless the KV control says otherwise ("auto" = the compute dtype, vLLM's
default).

>>> from course_lib.views.explorer import explorer_budget
>>> est = explorer_budget(model="llama-2-7b", dtype="fp16", gpu="rtx-4090", context_tokens=1024,
...                       active_sequences=8, reserve_percent=10)
>>> est.budget.fits, est.budget.max_active_sequences
(True, 16)
"""

from __future__ import annotations

from ..serving.budget import Budget, Estimate, estimate
from ..grading import skipped_while_grading
from ..model.model_configs import MODEL_CONFIGS
from ..model.presets import GPU_BYTES, get_model, model_names
from ..units import GB, GiB

POOL_COLOURS = {
    "weights": "#4c72b0", "workspace": "#8c8c8c", "reserve": "#dddddd",
    "kv_cache": "#dd8452", "request_state": "#c44e52",
}
#: Weight formats (``--dtype``): quantized ones quantize the linear layers only (see quantization.format_for_dtype).
DTYPES = ["fp32", "bf16", "fp16", "fp8", "int8", "int4-g128", "int4"]
#: KV-cache dtypes (vLLM's ``--kv-cache-dtype``): "auto" is the compute dtype. (Not None: a Dropdown shows
#: a None value as no selection at all.)
KV_DTYPES = [("auto (compute dtype)", "auto"), ("fp16", "fp16"), ("bf16", "bf16"), ("fp8", "fp8"), ("fp32", "fp32")]
#: The largest count the active-sequences slider and the headroom plot reach.
MAX_ACTIVE_SEQUENCES = 128
#: The context slider's stops: powers of two, so 1,024 or 2,048 tokens are one step each, not a drag in 128s.
CONTEXT_TOKENS = [2**k for k in range(7, 18)]       # 128 ... 131,072


def model_options() -> list[tuple[str, str]]:
    """(label, preset) pairs for the model dropdown: sorted by name, each labelled with its family.

    >>> ("llama-3.1-8b  [llama]", "llama-3.1-8b") in model_options()
    True
    """
    def family(name: str) -> str:
        cfg = MODEL_CONFIGS.get(name, {})
        return str(cfg.get("model_type", "?"))
    return [(f"{name}  [{family(name)}]", name) for name in model_names()]


def gpu_options() -> list[tuple[str, str]]:
    """(label, preset) pairs for the GPU dropdown, smallest device first, with the GiB CUDA reports (what runtimes plan with).

    >>> gpu_options()[0]
    ('t4 (14.7 GiB)', 't4')
    """
    return [(f"{name} ({GPU_BYTES[name] / GiB:.1f} GiB)", name) for name in sorted(GPU_BYTES, key=GPU_BYTES.get)]


def explorer_budget(*, model: str, dtype: str, gpu: str, context_tokens: int, active_sequences: int,
                    reserve_percent: float, kv_dtype: str | None = None) -> Estimate:
    """The estimate behind one explorer setting (reserve as a % of the device).

    ``dtype`` is the weight format; ``kv_dtype`` None or "auto" means the compute dtype, so int4 weights
    keep a 16-bit KV cache:

    >>> int4 = explorer_budget(model="llama-3-8b", dtype="int4", gpu="rtx-4090", context_tokens=8192,
    ...                        active_sequences=1, reserve_percent=8)
    >>> int4.kv_cache_bytes_per_token        # 2 x 32 layers x 8 KV heads x 128 x 2 B (fp16)
    131072
    >>> explorer_budget(model="llama-3-8b", dtype="int4", gpu="rtx-4090", context_tokens=8192,
    ...                 active_sequences=1, reserve_percent=8, kv_dtype="fp8").kv_cache_bytes_per_token
    65536
    """
    return estimate(get_model(model), gpu=gpu, dtype=dtype, kv_dtype=None if kv_dtype in (None, "auto") else kv_dtype,
                    context_tokens=context_tokens, active_sequences=active_sequences,
                    reserve=f"{reserve_percent}%")


def budget_figure(budget: Budget, title: str = "Serving-memory budget", ax=None, *, headroom_ax=None,
                  max_sequences: int | None = None):
    """Draw ``budget`` as one stacked bar in GB, with the device and safe lines, and beside it the
    headroom against the number of active sequences. Returns the Figure.

    With ``ax`` given only the bar is drawn there (and the headroom panel in ``headroom_ax`` if given).
    """
    import matplotlib.pyplot as plt

    own_figure = ax is None
    if ax is None:
        # A fixed layout, not "constrained": the layout solver took most of a 0.6 s redraw.
        fig, (ax, headroom_ax) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [1, 1.35]})
        fig.subplots_adjust(left=0.06, right=0.985, top=0.86, bottom=0.25, wspace=0.32)
    else:
        fig = ax.figure
    bottom = 0.0
    for pool in budget.pools:
        if pool.name == "reserve":
            continue
        height = pool.bytes / GB
        ax.bar(0, height, bottom=bottom, width=0.5, color=POOL_COLOURS.get(pool.name, "#999999"),
               edgecolor="white", label=f"{pool.name} ({pool.kind}): {height:.3f} GB / {pool.bytes / GiB:.3f} GiB")
        bottom += height
    # The reserve is pinned to the top of the device: the slice we never fill.
    # Anything stacked into it has crossed the safe line.
    reserve = budget.parts["reserve"]
    ax.bar(0, reserve / GB, bottom=(budget.device_bytes - reserve) / GB, width=0.62, color="none",
           edgecolor="#555555", hatch="//", lw=1,
           label=f"reserve (fixed, kept empty): {reserve / GB:.3f} GB / {reserve / GiB:.3f} GiB")
    device_gb = budget.device_bytes / GB
    safe_gb = (budget.device_bytes - budget.parts["reserve"]) / GB
    ax.axhline(device_gb, color="black", lw=1.5, label=f"device: {device_gb:.2f} GB = {budget.device_bytes / GiB:.2f} GiB")
    ax.axhline(safe_gb, color="#2a9d3f", lw=1.5, ls="--",
               label=f"safe line (device − reserve): {safe_gb:.2f} GB")
    ax.set_xlim(-0.6, 0.6)
    ax.set_xticks([0])
    ax.set_xticklabels([f"{budget.active_sequences} active sequences"])
    ax.set_ylabel("memory (GB = 10^9 bytes)")
    top = max(device_gb, bottom) * 1.08
    ax.set_ylim(0, top)
    secondary = ax.secondary_yaxis("right", functions=(lambda g: g * GB / GiB, lambda g: g * GiB / GB))
    secondary.set_ylabel("memory (GiB = 2^30 bytes)")
    ax.set_title(headline(budget), fontsize=10, color="#1b5e20" if budget.fits else "#b71c1c")
    if headroom_ax is not None:
        headroom_figure(budget, headroom_ax, max_sequences=max_sequences)
    if own_figure:
        fig.suptitle(title, fontsize=11)
        fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8, frameon=False)
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.3, 1.0), fontsize=8, frameon=False)
    return fig


def headroom_curve(budget: Budget, max_sequences: int | None = None) -> tuple[list[int], list[int]]:
    """Active-sequence counts from 0 and the headroom in bytes at each: the fixed pools stay, every
    sequence takes its KV cache and request state, so the line falls by ``per_sequence_bytes`` a step
    and crosses zero just after ``max_active_sequences``. The counts run to ``max_sequences`` or to half
    again past the flip (or the setting now, whichever is further); past 400 points they thin out but
    always keep 0, the last that fits, the first that does not and the setting now.

    >>> from course_lib.serving.budget import plan_budget
    >>> b = plan_budget(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB",
    ...                 reserve_bytes="2GB", per_sequence_kv_bytes="1.5GB", active_sequences=5)
    >>> counts, room = headroom_curve(b)
    >>> counts
    [0, 1, 2, 3, 4, 5, 6, 7, 8]
    >>> [r / 1e9 for r in room][:7]      # 6 GB for requests, 1.5 GB each: flips between 4 and 5
    [6.0, 4.5, 3.0, 1.5, 0.0, -1.5, -3.0]
    """
    limit, now = budget.max_active_sequences, budget.active_sequences
    last = max(max_sequences or 0, now, -(-3 * (limit + 1) // 2), 8)
    step = max(1, last // 400)
    counts = sorted({*range(0, last + 1, step), last, now, *(n for n in (limit, limit + 1) if n <= last)})
    return counts, [budget.request_budget_bytes - n * budget.per_sequence_bytes for n in counts]


def headroom_figure(budget: Budget, ax, max_sequences: int | None = None) -> None:
    """Headroom (GB) against active sequences on ``ax``: the line, zero, where it flips, and the setting now."""
    counts, room = headroom_curve(budget, max_sequences)
    gb = [r / GB for r in room]
    ax.plot(counts, gb, color="#dd8452", lw=2, label="headroom (GB)")
    ax.fill_between(counts, gb, 0, where=[g >= 0 for g in gb], color="#2a9d3f", alpha=0.12, interpolate=True)
    ax.fill_between(counts, gb, 0, where=[g < 0 for g in gb], color="#b71c1c", alpha=0.12, interpolate=True)
    ax.axhline(0, color="black", lw=1)
    limit = budget.max_active_sequences
    if 0 <= limit <= counts[-1]:
        ax.axvline(limit + 0.5, color="#b71c1c", ls=":", lw=1.5)
        ax.annotate(f"flips: {limit} fit, {limit + 1} do not", xy=(limit + 0.5, 0), xytext=(6, 12),
                    textcoords="offset points", fontsize=9, color="#b71c1c")
    now = budget.active_sequences
    if now in counts:
        ax.plot([now], [gb[counts.index(now)]], "o", color="#1b5e20" if budget.fits else "#b71c1c", ms=8,
                label=f"now: {now} active sequences")
    ax.set_xlabel("active sequences (count)")
    ax.set_ylabel("headroom below the safe line (GB)")
    ax.set_xlim(0, counts[-1])
    per_seq = budget.per_sequence_bytes
    ax.set_title(f"each sequence takes {per_seq / GB:.3f} GB ({per_seq / GiB:.3f} GiB)", fontsize=10)
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    ax.grid(alpha=0.3)


def figure_png(fig) -> bytes:
    """The figure as PNG bytes, drawn once, and closed.

    The inline backend's ``display(fig)`` saves with ``bbox_inches="tight"``, which draws the figure
    twice (measured 1.7x slower); the explorer's layout is fixed, so one draw is enough.
    """
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def headline(budget: Budget) -> str:
    """FITS with what is to spare, or DOES NOT FIT with by how much (never a "negative headroom").

    >>> from course_lib.serving.budget import plan_budget
    >>> headline(plan_budget(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB",
    ...                      reserve_bytes="2GB", per_sequence_kv_bytes="1.5GB", active_sequences=5))
    'DOES NOT FIT: over by 1.50 GB; at most 4 sequences fit'
    """
    if budget.fits:
        return (f"FITS: {budget.headroom_bytes / GB:.2f} GB to spare; at most {budget.max_active_sequences} "
                f"sequences fit")
    return f"DOES NOT FIT: over by {-budget.headroom_bytes / GB:.2f} GB; at most {budget.max_active_sequences} sequences fit"


def verdict_html(est: Estimate) -> str:
    """The explorer's verdict line as HTML (the browser tests read its text)."""
    b = est.budget
    colour = "#1b5e20" if b.fits else "#b71c1c"
    word = "fits" if b.fits else "does not fit"
    spare = (f"{b.headroom_bytes / GB:.2f} GB ({b.headroom_bytes / GiB:.2f} GiB) to spare" if b.fits else
             f"over by {-b.headroom_bytes / GB:.2f} GB ({-b.headroom_bytes / GiB:.2f} GiB)")
    return (f"<b style='color:{colour}' class='course-verdict'>Verdict: {word}</b> &mdash; "
            f"{b.active_sequences} active sequences, {spare}; at most <b>{b.max_active_sequences}</b> sequences "
            f"fit ({est.kv_cache_bytes_per_token:,} KV bytes per token)")


def budget_explorer(model: str = "llama-2-7b", dtype: str = "fp16", gpu: str = "rtx-4090",
                    context_tokens: int = 4096, active_sequences: int = 8, reserve_percent: float = 10.0,
                    kv_dtype: str = "auto"):
    """Interactive controls over :func:`explorer_budget`, drawing :func:`budget_figure`.

    Returns the ipywidgets container (display it, or let the cell show it); None while a grader runs
    the notebook (:mod:`course_lib.grading`: no grader can show a widget).
    """
    if skipped_while_grading("the budget explorer"):
        return None
    import ipywidgets as w
    from IPython.display import Image, display

    style = {"description_width": "170px"}
    layout = w.Layout(width="520px")
    controls = {
        "model": w.Dropdown(options=model_options(), value=model, description="model preset", style=style, layout=layout),
        "dtype": w.Dropdown(options=DTYPES, value=dtype, description="weight format", style=style, layout=layout),
        "kv_dtype": w.Dropdown(options=KV_DTYPES, value=kv_dtype, description="KV cache dtype", style=style,
                               layout=layout),
        "gpu": w.Dropdown(options=gpu_options(), value=gpu, description="GPU (CUDA total)", style=style, layout=layout),
        "context_tokens": w.SelectionSlider(options=[(f"{t:,}", t) for t in CONTEXT_TOKENS],
                                            value=context_tokens if context_tokens in CONTEXT_TOKENS else 4096,
                                            description="context (tokens)", style=style, layout=layout),
        "active_sequences": w.IntSlider(value=active_sequences, min=1, max=MAX_ACTIVE_SEQUENCES, step=1,
                                        description="active sequences (count)", style=style, layout=layout),
        "reserve_percent": w.FloatSlider(value=reserve_percent, min=0, max=50, step=1,
                                         description="reserve (% of device)", style=style, layout=layout),
    }
    verdict = w.HTML(layout=w.Layout(width="95%"))
    verdict.add_class("course-verdict-box")
    out = w.Output()

    def redraw(_change=None) -> None:
        values = {name: c.value for name, c in controls.items()}
        est = explorer_budget(**values)
        verdict.value = verdict_html(est)
        with out:
            out.clear_output(wait=True)
            kv = f"auto = {est.kv_dtype}" if values["kv_dtype"] == "auto" else values["kv_dtype"]
            fig = budget_figure(est.budget, title=f"{values['model']} (weights {values['dtype']}, KV {kv}) on "
                                                  f"{values['gpu']}, {values['context_tokens']:,} tokens per sequence")
            display(Image(data=figure_png(fig)))

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    box = w.VBox([*controls.values(), verdict, out])
    box.add_class("course-budget-explorer")
    return box
