"""SGLang's multimodal rules, read in the 0.5.20 and 0.5.23 wheels (python/sglang/srt/arg_groups/memory_hook.py
``adjust_mem_fraction_for_vlm``; mem_cache/kv_cache_configurator.py ``mm_runtime_reservation_gb``), worked by hand.

Qwen2.5-VL-7B's tower has ``depth`` 32 and ``hidden_size`` 1280; SGLang reads ``num_hidden_layers`` (absent:
24) and ``hidden_size``: ratio 24 x 1280^2 / (24 x 1024^2) = 1.5625, factor 0.95 x (1 - 0.1 x 0.5625) = 0.8965625.
No published log checks these rules, so the estimate lists them as unchecked.
"""

from course_lib.model.presets import get_model
from course_lib.runtimes.sglang import SglangLaunch, estimate_sglang

MiB = 2**20


def test_a_multimodal_models_default_share_and_kv_budget_follow_0_5_23():
    spec = get_model("qwen2.5-vl-7b")
    old = estimate_sglang(spec, gpu="h100-80gb", launch=SglangLaunch(version="0.5.19"))
    new = estimate_sglang(spec, gpu="h100-80gb", launch=SglangLaunch(version="0.5.23"))
    base = old.launch["mem_fraction_static"]
    assert abs(new.launch["mem_fraction_static"] - base * 0.8965625) < 1e-9
    at_start = next(t.bytes for t in new.terms if t.name == "free_at_start")
    reserve_new = next(t.bytes for t in new.terms if t.name == "reserved")
    reserve_old = next(t.bytes for t in old.terms if t.name == "reserved")
    assert reserve_new - reserve_old in range(int(at_start * base * (1 - 0.8965625)) - 2,
                                              int(at_start * base * (1 - 0.8965625)) + 3)
    assert next(t.bytes for t in new.terms if t.name == "mm_reserve") == 100 * MiB
    assert any(r.startswith("vlm_fraction (0.5.20") for r in new.unchecked_rules), new.unchecked_rules
    assert any(r.startswith("mm_reserve_mib (0.5.20") for r in new.unchecked_rules), new.unchecked_rules


def test_a_text_model_is_sized_as_before():
    spec = get_model("qwen3-8b")
    old = estimate_sglang(spec, gpu="h100-80gb", launch=SglangLaunch(version="0.5.19"))
    new = estimate_sglang(spec, gpu="h100-80gb", launch=SglangLaunch(version="0.5.23"))
    assert new.kv_cache_tokens == old.kv_cache_tokens
    assert not any("vlm_fraction" in r for r in new.unchecked_rules)
