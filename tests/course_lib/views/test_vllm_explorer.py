"""The launch explorer: vLLM's knobs to a KV pool and a count of users served, checked by hand."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from course_lib.units import GiB
from course_lib.views.vllm_explorer import launch_figure, plan_launch

# Llama-3.1-8B: 2 (K and V) x 32 layers x 8 KV heads x 128 dims = 65,536 values per token.
VALUES_PER_TOKEN = 2 * 32 * 8 * 128


def test_one_request_at_8k_is_one_gib_in_bf16_and_half_in_fp8():
    bf16 = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192)
    fp8 = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, kv_cache_dtype="fp8")
    assert bf16.estimate.kv_cache_bytes_per_token == VALUES_PER_TOKEN * 2
    assert fp8.estimate.kv_cache_bytes_per_token == VALUES_PER_TOKEN
    # same budget, same weights: twice the concurrency (to the block)
    assert fp8.estimate.max_concurrency == pytest.approx(2 * bf16.estimate.max_concurrency, rel=0.01)


def test_concurrency_is_the_smaller_of_the_pool_and_the_slots():
    roomy = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, weights="int4", max_num_seqs=4)
    assert roomy.estimate.max_concurrency > 10
    assert roomy.concurrent_requests == 4 and not roomy.serves(5) and roomy.serves(4)


def test_a_request_longer_than_the_pool_is_refused_with_vllms_advice():
    # 131,072 tokens x 131,072 B = 16 GiB for one request; the pool after 15 GiB of bf16 weights is a few GiB.
    plan = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=131072)
    assert not plan.starts and plan.concurrent_requests == 0 and not plan.serves(1)
    # vLLM 0.33 prints format_gib (round(x, 2)): "16.0 GiB" (kv_cache_planning.py _check_enough_kv_cache_memory)
    assert "16.0 GiB KV cache is needed" in plan.refusal and "max_model_len" in plan.refusal
    assert plan.verdict(1).startswith("vLLM does not start: vLLM would refuse")
    # Review 3's M4: the length named is vLLM's own binary search (_estimate_max_model_len_from_groups) over the pool
    # less its null block: 5.29 GiB is 2,709 blocks of 16 tokens (2 MiB each); one held back leaves
    # 2,708 x 16 = 43,328 tokens (the reviewer's figure), not the halving 32,768
    n = plan.estimate.num_gpu_blocks
    assert f"the estimated maximum model length is {(n - 1) * 16}." in plan.refusal
    assert "estimated maximum model length is 43328." in plan.refusal


def test_bad_input_is_a_refusal_not_a_traceback():
    plan = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, tensor_parallel=3)
    assert not plan.starts and plan.refusal
    assert plan.verdict().startswith("vLLM does not start:")


def test_the_budget_is_the_cuda_total_times_utilization():
    plan = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, gpu_memory_utilization=0.8)
    budget = plan.estimate.terms[0]
    assert budget.name == "budget" and abs(budget.bytes - 23.65 * GiB * 0.8) < 0.01 * GiB


def test_figure_draws_both_panels_and_a_refusal():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    plan = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, kv_cache_dtype="fp8", max_num_seqs=16)
    fig = launch_figure(plan, users=10)
    assert fig.axes[1].get_xlabel() == "requests of 8,192 tokens running at once (count)"
    bad = launch_figure(plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, tensor_parallel=3))
    assert "does not start" in bad.axes[0].texts[0].get_text()


def test_the_legend_prints_the_utilization_as_typed():
    """0.92 from a float slider is 0.9199999999999999; the figure says 0.92 (and the budget it gives)."""
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    fig = launch_figure(plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192,
                                    gpu_memory_utilization=0.9199999999999999), users=12)
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    labels += [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    budget = next(label for label in labels if label.startswith("budget:"))
    assert "x 0.92 = " in budget and "0.9199" not in budget, budget


def test_widget_redraws_when_a_knob_moves():
    pytest.importorskip("ipywidgets")
    from course_lib.views.vllm_explorer import launch_explorer
    box = launch_explorer()
    verdict = next(c for c in box.children if "course-launch-verdict" in c._dom_classes)
    assert "the pool holds 5.29x requests of 8,192 tokens" in verdict.value, verdict.value
    kv = next(c for c in box.children if getattr(c, "description", "") == "--kv-cache-dtype")
    seqs = next(c for c in box.children if getattr(c, "description", "") == "--max-num-seqs (slots)")
    kv.value, seqs.value = "fp8", 16
    # 12.56x: the figure the learner judges against 12 / 0.9 = 13.33x (the grader's rule, not the widget's)
    assert "12 users at 8,192 tokens each: the pool holds 12.56x" in verdict.value, verdict.value
    util = next(c for c in box.children if getattr(c, "description", "") == "--gpu-memory-utilization (share)")
    util.value = 0.95     # 14.02x: more than 12 / 0.9 = 13.33x
    held = float(re.search(r"the pool holds ([\d.]+)x", verdict.value).group(1))
    assert held > 12 / 0.9 and "served" not in verdict.value, verdict.value
    length = next(c for c in box.children if getattr(c, "description", "") == "--max-model-len (tokens)")
    length.value = 4096   # more requests fit, but none of the users' 8k ones
    assert "12 users at 8,192 tokens each: max_model_len 4,096 is below" in verdict.value, verdict.value


def test_every_dropdown_shows_a_selection():
    """A Dropdown whose value is None shows an empty box (seen in the browser screenshot of the explorer)."""
    pytest.importorskip("ipywidgets")
    from course_lib.views.explorer import budget_explorer
    from course_lib.views.vllm_explorer import launch_explorer
    for box in (budget_explorer(), launch_explorer()):
        for control in box.children:
            if hasattr(control, "options"):
                assert control.value is not None and control.label, (control.description, control.value)


def test_while_grading_the_explorers_draw_nothing_and_say_so(monkeypatch, capsys):
    """nbgrader (and course-grade) set NBGRADER_EXECUTION: no grader can show a widget, so none is built."""
    from course_lib.views.explorer import budget_explorer
    from course_lib.views.vllm_explorer import launch_explorer

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert budget_explorer() is None and launch_explorer() is None
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"(the {name} explorer is skipped while grading: NBGRADER_EXECUTION is set; nothing graded "
                     "depends on it)" for name in ("budget", "launch")]
    monkeypatch.setenv("NBGRADER_EXECUTION", "")
    assert budget_explorer() is not None, "an empty value is not a grader"


def test_the_learners_library_gives_figures_for_the_users_never_a_verdict():
    """Issue 41, item 3: whether a launch serves R7's 12 users (the estimate against 12 / 0.9 = 13.33x) is the
    grader's rule (lessons/l14_04/checks.py), not the learner's library's. The explorer gives the figures the
    learner judges by: the concurrency at the users' context (the estimate's for max_model_len, scaled), the
    slots, and whether max_model_len reaches the context; the same words for a launch the grader counts as
    served, one it answers "measure it" and one it does not serve."""
    base = dict(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, kv_cache_dtype="fp8")
    launches = {"measure it (12.56x)": plan_launch(**base, max_num_seqs=16),
                "served (14.02x)": plan_launch(**base, max_num_seqs=16, gpu_memory_utilization=0.95),
                "not served (defaults)": plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192),
                "not served (8 slots)": plan_launch(**base, max_num_seqs=8, gpu_memory_utilization=0.95)}
    for name, plan in launches.items():
        figures = plan.at(12, 8192)
        assert figures.fits_context and figures.concurrency == plan.estimate.max_concurrency, name
        assert figures.slots == plan.estimate.launch["max_num_seqs"], name
        for line in (figures.line, plan.verdict(12, 8192)):
            assert "served" not in line.lower() and "measure" not in line and "margin" not in line, (name, line)
            assert f"{figures.concurrency:.2f}x" in line, (name, line)
    # a longer max_model_len: the pool's concurrency for 8k requests is scaled from the one for 16k requests
    long = plan_launch(**dict(base, max_model_len=16384), max_num_seqs=16)
    assert long.at(12, 8192).concurrency == pytest.approx(2 * long.estimate.max_concurrency)
    # a launch whose requests are cut below the users' context: a stated fact, not a verdict
    short = plan_launch(**dict(base, max_model_len=4096), max_num_seqs=16)
    cut = short.at(12, 8192)
    assert not cut.fits_context and cut.concurrency == 0.0
    assert "max_model_len 4,096 is below the 8,192 tokens each user needs" in cut.line
    refused = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, tensor_parallel=3)
    assert not refused.at(12, 8192).fits_context and "does not start" in refused.at(12, 8192).line


def test_enforce_eager_and_batched_tokens_are_levers():
    """No CUDA graphs, and a smaller profile forward, each leave the pool more room (vLLM's rule, same launch)."""
    base = dict(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, kv_cache_dtype="fp8", max_num_seqs=16)
    plain = plan_launch(**base).estimate.max_concurrency
    assert plan_launch(**base, enforce_eager=True).estimate.max_concurrency > plain
    assert plan_launch(**base, max_num_batched_tokens=1024).estimate.max_concurrency > plain


def test_headless_execution_never_routes_the_figure_through_an_output_hook(tmp_path, monkeypatch):
    """Issue 41: the launch explorer hung 2 of 10 headless ``jupyter nbconvert --execute`` runs for the whole
    timeout. The cause: ``with out: display(...)`` makes the kernel's display message an Output widget's,
    and nbclient, mimicking the widget (``OutputWidget.output`` -> ``sync_state``), sends it back on the shell
    channel while it still waits there for the cell's reply, a race (jupyter/nbclient#312). A client with no
    widget support got the figure as a stray PNG in the cell instead. Deterministic check of the cause: the
    explorers, run by nbclient in a real kernel, never make nbclient register an output hook, put no PNG in
    the cell's outputs, and still leave the figure in the saved widget state."""
    pytest.importorskip("ipywidgets")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")

    hooks = []

    class Client(nbclient.NotebookClient):
        def register_output_hook(self, msg_id, hook):
            hooks.append(msg_id)
            super().register_output_hook(msg_id, hook)

    explorers = sys.modules[plan_launch.__module__]       # wherever the two explorers' modules live
    source = (f"from {explorers.figure_png.__module__} import budget_explorer\n"
              f"from {plan_launch.__module__} import launch_explorer\n"
              "display(budget_explorer())\nlaunch_explorer()")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    repo = str(Path(__file__).resolve().parents[3])          # the kernel imports this checkout's course_lib
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    Client(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert hooks == [], "a display captured by an Output widget: nbclient answers it on the shell channel"
    outputs = nb.cells[0].outputs
    assert [o for o in outputs if "image/png" in o.get("data", {})] == [], "a stray PNG beside the widget"
    assert sum("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs) == 2
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    figures = [m for m in state.values() if m["model_name"] == "OutputModel"
               and any("image/png" in o.get("data", {}) for o in m["state"].get("outputs", []))]
    assert len(figures) == 2, "each explorer's figure is in its Output widget's saved state"
