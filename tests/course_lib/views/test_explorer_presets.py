"""The explorer with every preset: dropdowns list them all (sorted), and each one budgets without error."""

from __future__ import annotations

import pytest

from course_lib import GPU_BYTES, model_names
from course_lib.views.explorer import explorer_budget, gpu_options, model_options


def test_dropdown_values_are_every_preset_sorted():
    assert [value for _, value in model_options()] == sorted(model_names())
    gpus = [value for _, value in gpu_options()]
    assert sorted(gpus) == sorted(GPU_BYTES)
    assert [GPU_BYTES[g] for g in gpus] == sorted(GPU_BYTES.values()), "GPUs smallest first"


@pytest.mark.parametrize("model", model_names())
def test_every_preset_budgets_in_the_explorer(model):
    est = explorer_budget(model=model, dtype="bf16", gpu="b200", context_tokens=4096, active_sequences=2,
                          reserve_percent=10)
    assert est.budget.parts["weights"] > 0 and est.kv_cache_bytes_per_token > 0


def test_explorer_widget_builds_with_all_presets():
    pytest.importorskip("ipywidgets")
    from course_lib.views.explorer import budget_explorer
    box = budget_explorer(model="qwen3-next-80b-a3b", gpu="b200", dtype="bf16")
    dropdowns = [c for c in box.children if hasattr(c, "options")]
    assert len(dropdowns[0].options) == len(model_names())


def test_weight_format_and_kv_dtype_are_two_controls():
    """The issue's case: Llama-3-8B with int4 weights on an RTX 4090 at 8k. One dtype for both pools made
    the KV cache int4 too and "fitted" 68 sequences; vLLM (kv_cache_dtype auto) fits about 15-17. By hand:
    2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token (bf16, the config's dtype), 8,192
    tokens = 1 GiB per sequence; 23.65 GiB less 8 % and ~6.4 GB of int4 weights and workspace leaves ~15."""
    int4 = explorer_budget(model="llama-3-8b", dtype="int4", gpu="rtx-4090", context_tokens=8192,
                           active_sequences=1, reserve_percent=8)
    assert int4.kv_cache_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert 13 <= int4.budget.max_active_sequences <= 17, int4.budget.max_active_sequences
    fp8_kv = explorer_budget(model="llama-3-8b", dtype="int4", gpu="rtx-4090", context_tokens=8192,
                             active_sequences=1, reserve_percent=8, kv_dtype="fp8")
    assert fp8_kv.kv_cache_bytes_per_token == 2 * 32 * 8 * 128 * 1
    assert fp8_kv.budget.parts["weights"] == int4.budget.parts["weights"], "the KV dtype moved the weights"
    bf16 = explorer_budget(model="llama-3-8b", dtype="bf16", gpu="rtx-4090", context_tokens=8192,
                           active_sequences=1, reserve_percent=8)
    assert bf16.kv_cache_bytes_per_token == int4.kv_cache_bytes_per_token, "the weight format moved the KV cache"


def test_headroom_curve_flips_where_the_budget_says():
    from course_lib.serving.budget import plan_budget
    from course_lib.views.explorer import headroom_curve
    # 80 GB device, 10 GB reserve, 30 GB weights, 5 GB workspace: 35 GB for requests, 3 GB each -> 11 fit.
    b = plan_budget(device_bytes="80GB", weights_bytes="30GB", workspace_bytes="5GB", reserve_bytes="10GB",
                    per_sequence_kv_bytes="3GB", active_sequences=2)
    counts, room = headroom_curve(b)
    last_fit = max(n for n, r in zip(counts, room) if r >= 0)
    assert last_fit == 11 == b.max_active_sequences
    assert counts[-1] >= 17, "the curve should run well past the flip"
    big = plan_budget(device_bytes="80GB", weights_bytes="1GB", reserve_bytes="0GB", per_sequence_kv_bytes="1MB",
                      active_sequences=3)
    counts, room = headroom_curve(big)
    assert len(counts) < 420 and {0, 3, big.max_active_sequences, big.max_active_sequences + 1} <= set(counts)


def test_budget_figure_has_the_headroom_panel():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from course_lib.views.explorer import budget_figure, figure_png
    est = explorer_budget(model="llama-2-7b", dtype="fp16", gpu="rtx-4090", context_tokens=4096,
                          active_sequences=6, reserve_percent=10)
    fig = budget_figure(est.budget, title="t")
    bar, headroom = fig.axes[:2]
    assert headroom.get_xlabel() == "active sequences (count)"
    flips = [t.get_text() for t in headroom.texts]
    assert flips == [f"flips: {est.budget.max_active_sequences} fit, {est.budget.max_active_sequences + 1} do not"]
    assert figure_png(fig)[:8] == b"\x89PNG\r\n\x1a\n"
