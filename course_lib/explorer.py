"""The budget explorer: a stacked bar of the five pools, the safe line and a verdict.

:func:`budget_figure` draws one budget with matplotlib (works anywhere, also
headless); :func:`budget_explorer` wraps it in ipywidgets controls for
JupyterLab. Both import matplotlib / ipywidgets only when called.

>>> from course_lib.explorer import explorer_budget
>>> est = explorer_budget(model="llama-2-7b", dtype="fp16", gpu="rtx-4090", context_tokens=1024,
...                       active_sequences=8, reserve_percent=10)
>>> est.budget.fits, est.budget.max_active_sequences
(True, 16)
"""

from __future__ import annotations

from .budget import Budget, Estimate, estimate
from .model_configs import MODEL_CONFIGS
from .presets import GPU_BYTES, get_model, model_names
from .units import GB, GiB

POOL_COLOURS = {
    "weights": "#4c72b0", "workspace": "#8c8c8c", "reserve": "#dddddd",
    "kv_cache": "#dd8452", "request_state": "#c44e52",
}
DTYPES = ["fp32", "bf16", "fp16", "fp8", "int8", "int4-g128", "int4"]
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
    """The estimate behind one explorer setting (reserve as a % of the device)."""
    return estimate(get_model(model), gpu=gpu, dtype=dtype, kv_dtype=kv_dtype or dtype,
                    context_tokens=context_tokens, active_sequences=active_sequences,
                    reserve=f"{reserve_percent}%")


def budget_figure(budget: Budget, title: str = "Serving-memory budget", ax=None):
    """Draw ``budget`` as one stacked bar in GB, with the device and safe lines. Returns the Figure."""
    import matplotlib.pyplot as plt

    own_figure = ax is None
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 4.4), layout="constrained")
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
    ax.set_title(f"{title}\n{headline(budget)}", fontsize=10, color="#1b5e20" if budget.fits else "#b71c1c")
    if own_figure:
        fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.3, 1.0), fontsize=8, frameon=False)
    return fig


def headline(budget: Budget) -> str:
    """FITS with what is to spare, or DOES NOT FIT with by how much (never a "negative headroom").

    >>> from course_lib.budget import plan_budget
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
                    context_tokens: int = 4096, active_sequences: int = 8, reserve_percent: float = 10.0):
    """Interactive controls over :func:`explorer_budget`, drawing :func:`budget_figure`.

    Returns the ipywidgets container (display it, or let the cell show it).
    """
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    style = {"description_width": "170px"}
    layout = w.Layout(width="520px")
    controls = {
        "model": w.Dropdown(options=model_options(), value=model, description="model preset", style=style, layout=layout),
        "dtype": w.Dropdown(options=DTYPES, value=dtype, description="weights & KV dtype", style=style, layout=layout),
        "gpu": w.Dropdown(options=gpu_options(), value=gpu, description="GPU (reported memory)", style=style, layout=layout),
        "context_tokens": w.SelectionSlider(options=[(f"{t:,}", t) for t in CONTEXT_TOKENS],
                                            value=context_tokens if context_tokens in CONTEXT_TOKENS else 4096,
                                            description="context (tokens)", style=style, layout=layout),
        "active_sequences": w.IntSlider(value=active_sequences, min=1, max=128, step=1,
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
            fig = budget_figure(est.budget, title=f"{values['model']} ({values['dtype']}) on {values['gpu']}, "
                                                  f"{values['context_tokens']} tokens per sequence")
            display(fig)
            plt.close(fig)

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    box = w.VBox([*controls.values(), verdict, out])
    box.add_class("course-budget-explorer")
    return box
