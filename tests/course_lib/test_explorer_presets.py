"""The explorer with every preset: dropdowns list them all (sorted), and each one budgets without error."""

from __future__ import annotations

import pytest

from course_lib import GPU_BYTES, model_names
from course_lib.explorer import explorer_budget, gpu_options, model_options


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
    from course_lib.explorer import budget_explorer
    box = budget_explorer(model="qwen3-next-80b-a3b", gpu="b200", dtype="bf16")
    dropdowns = [c for c in box.children if hasattr(c, "options")]
    assert len(dropdowns[0].options) == len(model_names())
