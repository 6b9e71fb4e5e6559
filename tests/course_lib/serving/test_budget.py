"""course_lib.serving.budget: the lesson's worked example, and the invariants as hypothesis properties."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course_lib.serving.budget import (
    FIXED,
    POOL_ORDER,
    REQUEST_DEPENDENT,
    activation_peak_bytes,
    estimate,
    plan_budget,
    request_state_bytes_per_sequence,
    resolve_reserve,
)
from course_lib.errors import CourseInputError
from course_lib.model.presets import get_model
from course_lib.units import GB

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ the lesson


def lesson(active_sequences: int):
    """24 GB device, 14 GB weights, 2 GB workspace, 2 GB reserve, 1.5 GB per request."""
    return plan_budget(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB", reserve_bytes="2GB",
                       per_sequence_kv_bytes="1.5GB", active_sequences=active_sequences)


def test_lesson_leaves_six_gb_for_requests():
    b = lesson(0)
    # 24 - 14 - 2 - 2 = 6 GB for request-dependent state
    assert b.fixed_bytes == 18_000_000_000
    assert b.request_budget_bytes == 6_000_000_000


def test_lesson_four_fit_fifth_crosses():
    # 6 GB / 1.5 GB = 4 requests; the 5th would need 7.5 GB
    assert lesson(5).max_active_sequences == 4
    assert lesson(5).first_crossing_sequences == 5
    four, five = lesson(4), lesson(5)
    assert four.fits and four.headroom_bytes == 0          # exactly full: 18 + 4 x 1.5 = 24
    assert not five.fits and five.headroom_bytes == -1_500_000_000
    assert five.used_bytes == 25_500_000_000
    assert "does not fit" in five.verdict() and "does not fit" not in four.verdict()


def test_lesson_parts():
    assert lesson(5).parts == {"weights": 14 * GB, "workspace": 2 * GB, "reserve": 2 * GB,
                               "kv_cache": 7_500_000_000, "request_state": 0}


def test_pools_in_order_with_kinds():
    b = lesson(3)
    assert tuple(p.name for p in b.pools) == POOL_ORDER == ("weights", "workspace", "reserve", "kv_cache",
                                                            "request_state")
    kinds = {p.name: p.kind for p in b.pools}
    assert kinds == {"weights": FIXED, "workspace": FIXED, "reserve": FIXED,
                     "kv_cache": REQUEST_DEPENDENT, "request_state": REQUEST_DEPENDENT}


def test_to_dict_sizes_are_ints():
    d = lesson(5).to_dict()
    for key, value in d.items():
        if key.endswith("_bytes"):
            assert type(value) is int, f"{key} should be an int of bytes, got {value!r}"
    assert d["fits"] is False and d["max_active_sequences"] == 4


def test_request_state_counts_per_sequence():
    b = plan_budget(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB", reserve_bytes="2GB",
                    per_sequence_kv_bytes="1GB", per_sequence_state_bytes="0.5GB", active_sequences=3)
    assert b.parts["kv_cache"] == 3_000_000_000 and b.parts["request_state"] == 1_500_000_000
    assert b.per_sequence_bytes == 1_500_000_000
    assert b.max_active_sequences == 4          # same 1.5 GB per request as the lesson, split in two pools


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "kwargs, shown",
    [
        ({"active_sequences": -1}, "active_sequences=-1"),
        ({"device_bytes": 0}, "gpu=0"),
        ({"device_bytes": "24XB"}, "'24XB'"),
        ({"weights_bytes": -1}, "weights=-1"),
        ({"workspace_bytes": "lots"}, "'lots'"),
        ({"per_sequence_kv_bytes": float("nan")}, "nan"),
        ({"reserve_bytes": "150%"}, "'150%'"),
    ],
)
def test_plan_refusals_name_the_value(kwargs, shown):
    args = dict(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB", reserve_bytes="2GB",
                per_sequence_kv_bytes="1.5GB", active_sequences=1)
    args.update(kwargs)
    with pytest.raises(CourseInputError) as info:
        plan_budget(**args)
    assert shown in str(info.value)


def test_zero_per_sequence_has_no_max():
    b = plan_budget(device_bytes="24GB", weights_bytes="14GB", per_sequence_kv_bytes=0, active_sequences=3)
    assert b.fits
    with pytest.raises(CourseInputError, match="per-sequence"):
        b.max_active_sequences


def test_fixed_pools_over_the_device():
    b = plan_budget(device_bytes="24GB", weights_bytes="26GB", per_sequence_kv_bytes="1GB", active_sequences=0)
    assert not b.fits and b.headroom_bytes == -2 * GB
    assert b.max_active_sequences == 0


# ------------------------------------------------------------------ reserve as a fraction


def test_reserve_fraction_like_gpu_memory_utilization():
    # vLLM's gpu_memory_utilization = 0.9 leaves 10% of the device unfilled: 10% of 24 GB = 2.4 GB
    assert resolve_reserve("10%", 24 * GB) == 2_400_000_000
    assert resolve_reserve(0.1, 24 * GB) == 2_400_000_000
    assert resolve_reserve(" 10% ", 24 * GB) == 2_400_000_000
    b = plan_budget(device_bytes="24GB", weights_bytes="14GB", reserve_bytes="10%", per_sequence_kv_bytes="1GB")
    assert b.parts["reserve"] == 2_400_000_000
    assert b.device_bytes - b.parts["reserve"] == 21_600_000_000      # 0.9 x 24 GB usable


def test_reserve_absolute_and_none():
    assert resolve_reserve("2GB", 24 * GB) == 2_000_000_000
    assert resolve_reserve(2_000_000_000, 24 * GB) == 2_000_000_000
    assert resolve_reserve(None, 24 * GB) == 0
    assert resolve_reserve("0%", 24 * GB) == 0


@pytest.mark.parametrize("bad", ["100%", "150%", "-5%", "abc%", "nan%", "%"])
def test_reserve_fraction_refusals(bad):
    with pytest.raises(CourseInputError) as info:
        resolve_reserve(bad, 24 * GB)
    assert repr(bad) in str(info.value)


@PROPERTY
@given(percent=st.integers(min_value=0, max_value=99), hundredths=st.integers(min_value=1, max_value=10**10))
def test_reserve_percent_is_exact(percent, hundredths):
    device = hundredths * 100                # a multiple of 100, so p% of it is a whole number of bytes
    assert resolve_reserve(f"{percent}%", device) == hundredths * percent


# ------------------------------------------------------------------ invariants (hypothesis)

sizes = st.integers(min_value=0, max_value=10**12)
budgets = st.fixed_dictionaries({
    "device_bytes": st.integers(min_value=1, max_value=2 * 10**12),
    "weights_bytes": sizes,
    "workspace_bytes": sizes,
    "reserve_bytes": sizes,
    "per_sequence_kv_bytes": st.integers(min_value=1, max_value=10**11),
    "per_sequence_state_bytes": st.integers(min_value=0, max_value=10**9),
    "active_sequences": st.integers(min_value=0, max_value=500),
})


@PROPERTY
@given(budgets)
def test_used_is_the_sum_of_the_parts(kw):
    b = plan_budget(**kw)
    n = kw["active_sequences"]
    by_hand = (kw["weights_bytes"] + kw["workspace_bytes"] + kw["reserve_bytes"]
               + n * (kw["per_sequence_kv_bytes"] + kw["per_sequence_state_bytes"]))
    assert b.used_bytes == sum(b.parts.values()) == by_hand
    assert b.headroom_bytes == kw["device_bytes"] - by_hand


@PROPERTY
@given(budgets)
def test_fits_exactly_when_the_pools_worked_by_hand_fit_the_device(kw):
    b = plan_budget(**kw)
    n = kw["active_sequences"]
    by_hand = (kw["weights_bytes"] + kw["workspace_bytes"] + kw["reserve_bytes"]
               + n * (kw["per_sequence_kv_bytes"] + kw["per_sequence_state_bytes"]))
    assert b.fits == (by_hand <= kw["device_bytes"])


@PROPERTY
@given(budgets)
def test_max_active_sequences_is_the_largest_that_fits(kw):
    m = plan_budget(**kw).max_active_sequences
    assert plan_budget(**kw).first_crossing_sequences == m + 1
    fixed = kw["weights_bytes"] + kw["workspace_bytes"] + kw["reserve_bytes"]
    if fixed > kw["device_bytes"]:
        # Nothing fits, not even zero sequences.
        assert m == 0 and not plan_budget(**dict(kw, active_sequences=0)).fits
        return
    assert plan_budget(**dict(kw, active_sequences=m)).fits, f"{m} sequences should fit"
    assert not plan_budget(**dict(kw, active_sequences=m + 1)).fits, f"{m + 1} sequences should not fit"


@PROPERTY
@given(budgets, st.integers(min_value=1, max_value=50))
def test_more_sequences_never_help(kw, extra):
    fewer = plan_budget(**kw)
    more = plan_budget(**dict(kw, active_sequences=kw["active_sequences"] + extra))
    assert more.used_bytes > fewer.used_bytes
    assert more.headroom_bytes < fewer.headroom_bytes
    assert not (more.fits and not fewer.fits)
    for fixed in ("weights", "workspace", "reserve"):
        assert more.parts[fixed] == fewer.parts[fixed], f"{fixed} is fixed; it must not move with sequences"


# Real models through estimate(): monotonic in sequences and in context tokens.
ESTIMATE_MODELS = ["llama-2-7b", "llama-3-8b", "mistral-7b", "gemma-2-9b", "gpt2", "deepseek-v2-lite", "falcon-7b",
                   "qwen2-0.5b"]
SPECS = {name: get_model(name) for name in ESTIMATE_MODELS}


def _estimate(name, **kw):
    return estimate(SPECS[name], gpu="h100-80gb", workspace="2GB", reserve="10%", **kw)


@PROPERTY
@given(st.sampled_from(ESTIMATE_MODELS), st.integers(min_value=1, max_value=32_768),
       st.integers(min_value=0, max_value=100), st.integers(min_value=1, max_value=8),
       st.sampled_from([1, 2, 4, 8]))
def test_estimate_monotonic_in_sequences(name, context, n, extra, tp):
    fewer = _estimate(name, context_tokens=context, active_sequences=n, tensor_parallel=tp).budget
    more = _estimate(name, context_tokens=context, active_sequences=n + extra, tensor_parallel=tp).budget
    assert more.used_bytes - fewer.used_bytes == extra * fewer.per_sequence_bytes
    assert not (more.fits and not fewer.fits)
    assert more.max_active_sequences == fewer.max_active_sequences
    for fixed in ("weights", "workspace", "reserve"):
        assert more.parts[fixed] == fewer.parts[fixed]


@PROPERTY
@given(st.sampled_from(ESTIMATE_MODELS), st.integers(min_value=1, max_value=32_768),
       st.integers(min_value=1, max_value=16_384), st.integers(min_value=0, max_value=64))
def test_estimate_monotonic_in_context(name, context, extra, n):
    shorter = _estimate(name, context_tokens=context, active_sequences=n).budget
    longer = _estimate(name, context_tokens=context + extra, active_sequences=n).budget
    assert longer.per_sequence_kv_bytes >= shorter.per_sequence_kv_bytes
    assert longer.per_sequence_bytes > shorter.per_sequence_bytes      # token ids grow even past a window
    assert longer.used_bytes >= shorter.used_bytes
    assert longer.max_active_sequences <= shorter.max_active_sequences
    assert not (longer.fits and not shorter.fits)
    for fixed in ("weights", "workspace", "reserve"):
        assert longer.parts[fixed] == shorter.parts[fixed]


# ------------------------------------------------------------------ estimate, hand-worked


def test_estimate_llama_2_7b_like_the_lab():
    est = estimate(get_model("llama-2-7b"), gpu="lesson-24gb", context_tokens=1024, active_sequences=8,
                   workspace="2GB", reserve="2GB")
    b = est.budget
    assert b.device_bytes == 24_000_000_000
    assert b.parts["weights"] == 13_476_831_232                 # 6,738,415,616 x 2 B
    assert est.kv_cache_bytes_per_token == 524_288              # 2 x 32 x 32 x 128 x 2
    assert b.parts["kv_cache"] == 8 * 1024 * 524_288 == 4_294_967_296
    # fp32 logits row 32,000 x 4 + token ids 1,024 x 8 + block table 64 blocks x 4 = 136,448 B per sequence
    assert b.parts["request_state"] == 8 * 136_448
    assert b.parts["workspace"] == 2 * GB and b.parts["reserve"] == 2 * GB


def test_estimate_default_reserve_is_ten_percent():
    est = estimate(get_model("llama-2-7b"), gpu="a100-80gb")
    # 10% of what CUDA reports on an A100-80GB: 79.25 GiB (PyTorch's OOM messages), not nvidia-smi's 80 GiB
    assert est.budget.parts["reserve"] == round(round(79.25 * 2**30) / 10) == 8_509_403_955


def test_estimate_tensor_parallel_per_gpu():
    est = estimate(get_model("llama-3-8b"), gpu="h100-80gb", tensor_parallel=2, workspace="1GB", reserve="1GB",
                   context_tokens=4096, active_sequences=1)
    # (8,030,261,248 - 266,240 norms) / 2 + 266,240 = 4,015,263,744 params per GPU, x 2 B
    assert est.budget.parts["weights"] == 8_030_527_488
    # 4 of 8 KV heads per GPU: 2 x 32 x 4 x 128 x 2 = 65,536 B per token
    assert est.kv_cache_bytes_per_token == 65_536
    assert est.budget.parts["kv_cache"] == 4096 * 65_536
    assert est.to_dict()["replicated_params_per_gpu"] == {"norms": 266_240}


@pytest.mark.parametrize("kwargs, shown", [({"tensor_parallel": 0}, "tensor_parallel=0"),
                                           ({"context_tokens": -5}, "context_tokens=-5"),
                                           ({"context_tokens": 0}, "context_tokens=0"),
                                           ({"active_sequences": -1}, "active_sequences=-1"),
                                           ({"dtype": "fp12"}, "'fp12'"),
                                           ({"kv_dtype": "fp12"}, "'fp12'"),
                                           ({"gpu": "nosuchgpu"}, "'nosuchgpu'")])
def test_estimate_refusals(kwargs, shown):
    args = dict(gpu="rtx-4090")
    args.update(kwargs)
    with pytest.raises(CourseInputError) as info:
        estimate(get_model("llama-2-7b"), **args)
    assert shown in str(info.value)


def test_activation_peak_by_hand():
    # Llama-2-7B, 2,048-token chunk, fp16: 2048 x (2 x 4096 + 3 x 11008) x 2 B
    assert activation_peak_bytes(get_model("llama-2-7b"), 2048) == 2048 * (2 * 4096 + 3 * 11008) * 2 == 168_820_736


def test_request_state_by_hand():
    # 32,000 x 4 (fp32 logits) + 1,024 x 8 (int64 ids) + ceil(1024 / 16) x 4 (int32 block table)
    assert request_state_bytes_per_sequence(32_000, 1024) == 128_000 + 8_192 + 256
    # 1,025 tokens need a 65th block
    assert request_state_bytes_per_sequence(32_000, 1025) == 128_000 + 8_200 + 65 * 4
