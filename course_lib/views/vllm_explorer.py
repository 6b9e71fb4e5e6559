"""The launch explorer: choose vLLM's knobs and see the KV pool vLLM would build, and how many requests it runs at once.

Where :mod:`course_lib.views.explorer` draws the lesson's simple budget, this one follows vLLM's own
sizing rule (:func:`course_lib.runtimes.estimate_vllm`): the budget is ``total x
gpu_memory_utilization``; the weights, the profile's activation peak, non-torch memory and
(from v0.21) the CUDA-graph estimate come off it; what is left is the KV pool, preallocated at
start-up. How many requests of ``max_model_len`` tokens run at once is then the smaller of the
pool's "maximum concurrency" (the start-up line ``Maximum concurrency for 8,192 tokens per
request: 6.00x``) and ``max_num_seqs`` (the scheduler's slot count).

:func:`plan_launch` is the arithmetic (no widgets, no plotting); :meth:`LaunchPlan.at` gives a launch's
figures for stated users at a stated context (the concurrency at that context, the slots), never a verdict:
whether that serves them is the learner's judgement in Task R7, and the grader's rule stays in the grader's
package (issue 41, item 3); :func:`launch_figure` draws one plan; :func:`launch_explorer` wraps them in
ipywidgets controls.

The figures are course_lib's estimate of vLLM's rule, within 10% of the logged KV cache on published
start-up logs.

Worked example: Mistral-7B in bf16 on an L4 (22.0 GiB CUDA total) with vLLM's defaults has room for
five 8k requests (its 4,096-token window saves nothing at 8k: vLLM 0.33 keeps the window plus two batches of
2,048 tokens in flight, 8,191 tokens); an fp8 KV cache doubles that, and 16 sequence slots instead of 256 shrink
the sampler's profile and the CUDA graphs:

>>> plan = plan_launch(model="mistral-7b", gpu="l4", max_model_len=8192)
>>> round(plan.estimate.max_concurrency, 2), plan.concurrent_requests
(5.54, 5)
>>> plan_launch(model="mistral-7b", gpu="l4", max_model_len=8192, kv_cache_dtype="fp8").concurrent_requests
11
>>> plan = plan_launch(model="mistral-7b", gpu="l4", max_model_len=8192, kv_cache_dtype="fp8", max_num_seqs=16)
>>> round(plan.estimate.max_concurrency, 2), plan.concurrent_requests, plan.serves(12)
(12.59, 12, True)

The figures for 12 users at 8,192 tokens each, and for a launch whose requests are cut below that context:

>>> plan.at(12, context_tokens=8192).line
'12 users at 8,192 tokens each: the pool holds 12.59x requests of 8,192 tokens; max_num_seqs gives 16 slots'
>>> plan_launch(model="mistral-7b", gpu="l4", max_model_len=4096).at(12, context_tokens=8192).line
'12 users at 8,192 tokens each: max_model_len 4,096 is below the 8,192 tokens each user needs'
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CourseInputError
from .explorer import figure_png, gpu_options, model_options
from ..grading import skipped_while_grading
from ..model.presets import get_model
from ..runtimes import RuntimeEstimate, VllmLaunch, estimate_vllm
from ..units import GiB

#: Weight formats offered: "checkpoint" is the checkpoint's own (the config's dtype or quantization). (Not None:
#: a Dropdown shows a None value as no selection at all.)
WEIGHT_FORMATS = [("checkpoint's own", "checkpoint"), ("fp8", "fp8"), ("int8", "int8"), ("int4 (AWQ g128)", "int4")]
#: vLLM's --kv-cache-dtype values.
KV_CACHE_DTYPES = [("auto (compute dtype)", "auto"), ("fp8", "fp8")]
#: The max_model_len slider's stops.
MAX_MODEL_LENS = [2**k for k in range(10, 18)]          # 1,024 ... 131,072
#: The max_num_seqs slider's stops (vLLM's defaults are 256 and 1,024).
MAX_NUM_SEQS = [1, 2, 4, 8, 10, 12, 16, 24, 32, 48, 64, 128, 256, 512, 1024]
#: The --max-num-batched-tokens choices (0: the release's default; a Dropdown shows None as no selection).
MAX_NUM_BATCHED_TOKENS = [("release default", 0)] + [(f"{n:,}", n) for n in (512, 1024, 2048, 4096, 8192, 16384)]

TERM_COLOURS = {"weights": "#4c72b0", "activation_peak": "#8c8c8c", "non_torch": "#b07aa1",
                "cuda_graph": "#9c755f", "kv_cache": "#dd8452"}


@dataclass(frozen=True)
class UsersAt:
    """What one launch offers ``users`` requests of ``context_tokens`` tokens each: figures, never a verdict.

    fits_context: max_model_len reaches the context. concurrency: how many such requests the pool holds
    at once (vLLM's "Maximum concurrency" for requests of that length; 0.0 when it does not start or the
    context does not fit). slots: ``max_num_seqs``. line: the same, in one line for people.
    Whether that serves the users, and with what margin, is the learner's judgement (Task R7), and the
    grader's: the rule it is graded by lives in the grader's package only (issue 41, item 3).
    """

    users: int
    context_tokens: int
    fits_context: bool
    concurrency: float
    slots: int
    line: str


@dataclass(frozen=True)
class LaunchPlan:
    """One launch: vLLM's estimate, or the reason it would not start.

    estimate: the runtime-faithful estimate (None when vLLM refuses the launch or the input is bad).
    refusal: vLLM's own refusal, or the input error, in one line ('' when it starts).
    concurrent_requests: requests of ``max_model_len`` tokens running at once: ``min(floor(max
    concurrency), max_num_seqs)``; 0 when it does not start.
    """

    estimate: RuntimeEstimate | None
    refusal: str = ""

    @property
    def starts(self) -> bool:
        return self.estimate is not None and not self.refusal

    @property
    def concurrent_requests(self) -> int:
        if not self.starts:
            return 0
        return min(int(self.estimate.max_concurrency), int(self.estimate.launch["max_num_seqs"]))

    def serves(self, users: int) -> bool:
        """True when ``users`` requests of ``max_model_len`` tokens can all be running at once."""
        return self.concurrent_requests >= users

    def verdict(self, users: int | None = None, context_tokens: int | None = None) -> str:
        """One line for people: starts or not, the pool, and (with ``users``) :meth:`at`'s figures for
        ``users`` requests of ``context_tokens`` tokens (default: max_model_len)."""
        if self.estimate is None or self.refusal:
            line = f"vLLM does not start: {self.refusal}"
            return line if users is None else f"{line}; {self.at(users, context_tokens).line}"
        e = self.estimate
        length = e.launch["max_model_len"]
        line = (f"vLLM starts: KV pool {e.runtime_kv_cache_bytes / GiB:.2f} GiB = {e.kv_cache_tokens:,} tokens; "
                f"maximum concurrency for {length:,} tokens per request: {e.max_concurrency:.2f}x; "
                f"max_num_seqs {e.launch['max_num_seqs']:,}: {self.concurrent_requests} such requests at once")
        if users is not None:
            line += "; " + self.at(users, context_tokens).line
        return line

    def at(self, users: int, context_tokens: int | None = None) -> UsersAt:
        """The launch's figures for ``users`` requests of ``context_tokens`` tokens (default: its max_model_len):
        whether max_model_len reaches the context, the requests of that length the pool holds at once, the
        slots. No verdict: judging them against the users is the task's.

        The concurrency is vLLM's "Maximum concurrency" (``get_max_concurrency_for_kv_cache_config`` in
        vllm/v1/core/kv_cache_utils.py, v0.10-v0.32; kv_cache_planning.py in v0.33) as
        :func:`course_lib.runtimes.estimate_vllm` estimates it for max_model_len, scaled to the context.
        """
        where = f"{users} users at {context_tokens:,} tokens each" if context_tokens else f"{users} users"
        if not self.starts:
            return UsersAt(users, context_tokens or 0, False, 0.0, 0, f"{where}: vLLM does not start this launch")
        e = self.estimate
        length = e.launch["max_model_len"]
        context = context_tokens or length
        where = f"{users} users at {context:,} tokens each"
        slots = int(e.launch["max_num_seqs"])
        if length < context:
            return UsersAt(users, context, False, 0.0, slots,
                           f"{where}: max_model_len {length:,} is below the {context:,} tokens each user needs")
        concurrency = e.max_concurrency * length / context
        return UsersAt(users, context, True, concurrency, slots,
                       f"{where}: the pool holds {concurrency:.2f}x requests of {context:,} tokens; "
                       f"max_num_seqs gives {slots:,} slots")


def plan_launch(*, model: str, gpu: str, max_model_len: int, weights: str | None = None,
                kv_cache_dtype: str = "auto", max_num_seqs: int | None = None,
                gpu_memory_utilization: float | None = None, tensor_parallel: int = 1,
                vllm_version: str | None = None, enforce_eager: bool = False,
                max_num_batched_tokens: int | None = None) -> LaunchPlan:
    """vLLM's sizing of one launch (None knobs take the release's defaults); never raises on a bad launch.

    ``weights`` is the weight format (None or "checkpoint": the checkpoint's own); the KV cache follows
    the compute dtype unless ``kv_cache_dtype="fp8"``. ``enforce_eager`` drops the CUDA graphs;
    ``max_num_batched_tokens`` sets the tokens the profile's forward pass runs over.
    """
    try:
        launch = VllmLaunch(version=vllm_version, dtype=None if weights in (None, "checkpoint") else weights, kv_cache_dtype=kv_cache_dtype,
                            max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                            gpu_memory_utilization=gpu_memory_utilization, tensor_parallel=tensor_parallel,
                            enforce_eager=bool(enforce_eager), max_num_batched_tokens=max_num_batched_tokens)
        est = estimate_vllm(get_model(model), gpu=gpu, launch=launch, refuse=False)
    except CourseInputError as exc:
        return LaunchPlan(None, str(exc))
    refusal = next((n for n in est.notes if n.startswith("vLLM would refuse")), "")
    return LaunchPlan(est, refusal)


def launch_figure(plan: LaunchPlan, users: int | None = None, title: str = "vLLM launch"):
    """The budget as vLLM spends it (one bar per GPU) and, beside it, KV needed by N requests of
    ``max_model_len`` tokens against the pool, with where it stops fitting. Returns the Figure."""
    import matplotlib.pyplot as plt

    fig, (bar, line) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [1, 1.35]})
    fig.subplots_adjust(left=0.06, right=0.985, top=0.86, bottom=0.25, wspace=0.32)
    fig.suptitle(title, fontsize=11)
    e = plan.estimate
    if e is None:
        for ax in (bar, line):
            ax.axis("off")
        bar.text(0, 0.5, "vLLM does not start:\n" + _wrap(plan.refusal), fontsize=10, color="#b71c1c",
                 va="center", transform=bar.transAxes)
        return fig
    total = e.launch["gpu_total_bytes"]
    bottom = 0.0
    for t in e.terms[1:]:
        if t.sign != -1 or t.bytes <= 0:
            continue
        bar.bar(0, t.bytes / GiB, bottom=bottom, width=0.5, color=TERM_COLOURS.get(t.name, "#999999"),
                edgecolor="white", label=f"{t.name}: {t.bytes / GiB:.2f} GiB")
        bottom += t.bytes / GiB
    kv = max(0, e.runtime_kv_cache_bytes) / GiB
    bar.bar(0, kv, bottom=bottom, width=0.5, color=TERM_COLOURS["kv_cache"], edgecolor="white",
            label=f"KV pool (preallocated): {kv:.2f} GiB")
    budget = e.terms[0].bytes / GiB
    bar.axhline(total / GiB, color="black", lw=1.5, label=f"device (CUDA total): {total / GiB:.2f} GiB")
    bar.axhline(budget, color="#2a9d3f", lw=1.5, ls="--",
                label=f"budget: total x {e.launch['gpu_memory_utilization']:.2f} = {budget:.2f} GiB")
    graphs = e.term("cuda_graph")
    if graphs and next(t for t in e.terms if t.name == "cuda_graph").sign == 0:
        bar.bar(0, graphs / GiB, bottom=budget, width=0.62, color="none", edgecolor="#9c755f", hatch="..",
                label=f"CUDA graphs, outside the budget: {graphs / GiB:.2f} GiB")
    bar.set_xlim(-0.6, 0.6)
    bar.set_xticks([0])
    bar.set_xticklabels([f"one GPU of {e.launch['tensor_parallel']}" if e.launch["tensor_parallel"] > 1 else "the GPU"])
    bar.set_ylabel("memory (GiB = 2^30 bytes)")
    bar.set_ylim(0, total / GiB * 1.08)
    bar.set_title(plan.verdict(users).split(";")[0] if plan.starts else "vLLM refuses to start",
                  fontsize=10, color="#1b5e20" if plan.starts else "#b71c1c")

    length = e.launch["max_model_len"]
    per_request = e.kv_cache_bytes_per_token * length / GiB
    slots = e.launch["max_num_seqs"]
    last = max(8, users or 0, -(-3 * (int(e.max_concurrency) + 1) // 2))
    last = min(last, max(slots, users or 0) + 8) if slots < last else last
    xs = list(range(0, last + 1))
    line.plot(xs, [n * per_request for n in xs], color="#dd8452", lw=2,
              label=f"KV needed: {per_request:.3f} GiB per {length:,}-token request")
    line.axhline(kv, color="black", lw=1.2, label=f"KV pool: {kv:.2f} GiB")
    line.axvline(e.max_concurrency, color="#b71c1c", ls=":", lw=1.5,
                 label=f"maximum concurrency {e.max_concurrency:.2f}x")
    if slots <= last:
        line.axvline(slots, color="#4c72b0", ls="--", lw=1.2, label=f"max_num_seqs = {slots}")
    if users:
        line.plot([users], [users * per_request], "o", ms=8, color="#333333", label=f"target: {users} users")
    line.set_xlim(0, last)
    line.set_ylim(0, max(kv, last * per_request) * 1.05 or 1)
    line.set_xlabel(f"requests of {length:,} tokens running at once (count)")
    line.set_ylabel("KV cache (GiB)")
    line.set_title(f"{plan.concurrent_requests} run at once (the smaller of the pool and max_num_seqs)", fontsize=10)
    line.legend(loc="upper left", fontsize=8, frameon=False)
    line.grid(alpha=0.3)
    fig.legend(*bar.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8, frameon=False)
    return fig


def _wrap(text: str, width: int = 70) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def launch_explorer(model: str = "llama-3.1-8b", gpu: str = "rtx-4090", max_model_len: int = 8192,
                    users: int = 12, weights: str = "checkpoint", kv_cache_dtype: str = "auto",
                    max_num_seqs: int = 256, gpu_memory_utilization: float = 0.92, tensor_parallel: int = 1,
                    context_tokens: int | None = None):
    """Interactive controls over :func:`plan_launch`, drawing :func:`launch_figure` (vLLM's newest defaults).

    ``users`` and ``context_tokens`` (default: the first ``max_model_len``) are the requirement the line
    under the controls gives the launch's figures for (:meth:`LaunchPlan.at`): the concurrency at that
    context and the slots, never a verdict (judging them is Task R7's).

    Returns the ipywidgets container (display it, or let the cell show it); None while a grader runs
    the notebook (:mod:`course_lib.grading`: no grader can show a widget).
    """
    if skipped_while_grading("the launch explorer"):
        return None
    import ipywidgets as w
    from .explorer import show_png

    style = {"description_width": "250px"}
    layout = w.Layout(width="600px")
    controls = {
        "model": w.Dropdown(options=model_options(), value=model, description="model preset", style=style,
                            layout=layout),
        "gpu": w.Dropdown(options=gpu_options(), value=gpu, description="GPU (CUDA total)", style=style, layout=layout),
        "weights": w.Dropdown(options=WEIGHT_FORMATS, value=weights, description="weight format", style=style,
                              layout=layout),
        "kv_cache_dtype": w.Dropdown(options=KV_CACHE_DTYPES, value=kv_cache_dtype, description="--kv-cache-dtype",
                                     style=style, layout=layout),
        "tensor_parallel": w.Dropdown(options=[1, 2, 4, 8], value=tensor_parallel,
                                      description="--tensor-parallel-size (GPUs)", style=style, layout=layout),
        "max_model_len": w.SelectionSlider(options=[(f"{n:,}", n) for n in MAX_MODEL_LENS], value=max_model_len,
                                           description="--max-model-len (tokens)", style=style, layout=layout),
        "max_num_seqs": w.SelectionSlider(options=[(f"{n:,}", n) for n in MAX_NUM_SEQS], value=max_num_seqs,
                                          description="--max-num-seqs (slots)", style=style, layout=layout),
        "gpu_memory_utilization": w.FloatSlider(value=gpu_memory_utilization, min=0.5, max=0.98, step=0.01,
                                                description="--gpu-memory-utilization (share)", style=style,
                                                layout=layout),
        "enforce_eager": w.Checkbox(value=False, description="--enforce-eager (no CUDA graphs)", style=style,
                                    layout=layout),
        "max_num_batched_tokens": w.Dropdown(options=MAX_NUM_BATCHED_TOKENS, value=0,
                                             description="--max-num-batched-tokens (profile)", style=style,
                                             layout=layout),
        "users": w.IntSlider(value=users, min=1, max=64, description="users to serve (count)", style=style,
                             layout=layout),
        "context_tokens": w.SelectionSlider(options=[(f"{n:,}", n) for n in MAX_MODEL_LENS],
                                            value=context_tokens or max_model_len,
                                            description="context each user needs (tokens)", style=style,
                                            layout=layout),
    }
    verdict = w.HTML(layout=w.Layout(width="95%"))
    verdict.add_class("course-launch-verdict")
    out = w.Output()

    def redraw(_change=None) -> None:
        values = {name: c.value for name, c in controls.items()}
        # the slider's float is 0.9199999999999999 for 0.92: the flag as a person types it
        values["gpu_memory_utilization"] = round(values["gpu_memory_utilization"], 2)
        values["max_num_batched_tokens"] = values["max_num_batched_tokens"] or None
        users_now, context_now = values.pop("users"), values.pop("context_tokens")
        plan = plan_launch(**values)
        colour = "#1b5e20" if plan.starts else "#b71c1c"
        verdict.value = f"<span style='color:{colour}'>{_html(plan.verdict(users_now, context_now))}</span>"
        fig = launch_figure(plan, users_now, title=f"{values['model']} on {values['gpu']} "
                            f"(TP {values['tensor_parallel']}), vLLM's newest defaults for the rest")
        show_png(out, figure_png(fig))

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    box = w.VBox([*controls.values(), verdict, out])
    box.add_class("course-launch-explorer")
    return box


def _html(text: str) -> str:
    import html

    return html.escape(text)
