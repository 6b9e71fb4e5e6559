"""Trusted scoring (lessons/l14_04/checks.py): right answers pass, each common mistake fails with its hint.

The learner functions here are written by hand in the test, as a learner would, so each check is
exercised through its real collect() -> to_plain -> score() path, outside any kernel.
"""

from __future__ import annotations

import math

import pytest

from lessons.l14_04.checks import CHECKS, score_answer
from autograder.answers import to_plain
from lessons.l14_04.collect import collect

GB, GiB = 10**9, 2**30


def run(grade_id: str, ns: dict):
    values = {k: to_plain(v) for k, v in collect(grade_id, ns).items()}
    return score_answer(grade_id, values)


# ------------------------------------------------------------ reference namespaces

def kv_ok(config, b):
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    return 2 * config["num_hidden_layers"] * kv * config.get("head_dim", config["hidden_size"] // heads) * b


REFERENCE = {
    "test_request_budget": dict(request_budget_gb=lambda d, w, ws, r: d - w - ws - r,
                                requests_that_fit=lambda b, p: 0 if b <= 0 else int(b // p),
                                left_gb=6, fit_count=4, fifth_crosses=True),
    "test_weight_bytes": dict(weight_bytes=lambda n, dt: n * {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "int4": 4}[dt] // 8,
                              llama3_weights_gb=16.060522496, llama3_weights_gib=16_060_522_496 / GiB),
    "test_kv_per_token": dict(kv_bytes_per_token=kv_ok),
    "test_kv_cache_total": dict(kv_bytes_per_token=kv_ok, kv_cache_bytes=lambda c, b, t, s: kv_ok(c, b) * t * s,
                                lab_kv_gb=4.294967296),
    "test_gqa_dtype": dict(mha_over_gqa_ratio=4.0, llama3_fp8_kv_bytes_per_token=65536),
    "test_safe_requests": dict(safe_requests=lambda f, r, p: max(0, (f - r) // p)),
    "test_admission_rule": dict(admission_decision=lambda req, used, budget: "reject" if req > budget
                                else ("admit" if used + req <= budget else "queue")),
    "test_offload_step": dict(offload_seconds_per_step=10 / 31.5),
    "test_replica_ready": dict(replica_ready_seconds=7 + 0.56 + 4 + 20 + 8),
    "test_ready_at_start": dict(ready_at_process_start=False),
    # Worked by hand in the notebook's Task 6: 30,745,088 params x 4 B, and 8,192 B/token x 1,024 x 4
    "test_predict_measure": dict(predicted_weights_bytes=30_745_088 * 4, predicted_kv_cache_bytes=8192 * 1024 * 4,
                                 kv_cache_bytes=lambda c, b, t, s: kv_ok(c, b) * t * s),
    "test_measured_gap": dict(largest_gap_pool="workspace", gap_reason="b"),
    "test_plannable": dict(plannable_bytes=lambda total, free, alloc, res, safety: max(0, free - safety)),
    "test_pool_kinds": dict(pool_kinds={"weights": "fixed", "workspace": "fixed", "reserve": "fixed",
                                        "kv_cache": "grows", "request_state": "grows"},
                            vllm_default_reserve_gb=24 * 0.1),
    "test_predict": dict(predict_answer="a"),
    "test_quick_check": dict(quick_check_1="c", quick_check_2="c", quick_check_3="a"),
    "test_lab_record": dict(lab_parts_gb_at_8={"weights": 14.0, "workspace": 2.0, "reserve": 2.0, "kv_cache": 4.295},
                            lab_headroom_gb_at_8=1.705, lab_prediction="kv_cache"),
    "test_lab_after_edit": dict(lab_parts_gb_at_16={"weights": 14.0, "workspace": 2.0, "reserve": 2.0, "kv_cache": 8.59},
                                lab_fits_at_16=False),
}


def explain_budget(**change):
    # Llama-3-8B bf16 on an A100-80GB (79.25 GiB as CUDA reports it), 4096 tokens x 4 sequences, worked by hand:
    # weights 8,030,261,248 x 2 = 16,060,522,496 B; KV 131,072 x 4096 x 4 = 2,147,483,648 B
    device = round(79.25 * 2**30)
    pools = {"weights": {"bytes": 16_060_522_496, "kind": "fixed"},
             "workspace": {"bytes": 2 * GB, "kind": "fixed"},
             "reserve": {"bytes": 8 * GB, "kind": "fixed"},
             "kv_cache": {"bytes": 2_147_483_648, "kind": "grows"}}
    budget = {"model": "llama-3-8b", "gpu": "a100-80gb", "dtype": "bf16", "context_tokens": 4096,
              "active_sequences": 4, "pools": pools,
              "headroom_bytes": device - sum(p["bytes"] for p in pools.values())}
    budget.update(change)
    return {"my_budget": budget}


REFERENCE["test_explain_budget"] = explain_budget()


def test_every_check_has_a_reference():
    assert set(REFERENCE) == set(CHECKS)


@pytest.mark.parametrize("grade_id", sorted(REFERENCE))
def test_reference_passes(grade_id):
    result = run(grade_id, REFERENCE[grade_id])
    assert result.passed, result.message


@pytest.mark.parametrize("grade_id", sorted(REFERENCE))
def test_blank_fails_with_a_message(grade_id):
    result = run(grade_id, {})
    assert not result.passed and "not defined" in result.message


def with_(grade_id, **change):
    ns = dict(REFERENCE[grade_id])
    ns.update(change)
    return run(grade_id, ns)


# ------------------------------------------------------------ the common mistakes

def test_budget_of_weights_only():
    r = with_("test_request_budget", request_budget_gb=lambda d, w, ws, r: d - w)
    assert not r.passed and "weights only" in r.message


def test_hard_coded_budget_fails_on_hidden_inputs():
    r = with_("test_request_budget", request_budget_gb=lambda d, w, ws, r: 6)
    assert not r.passed


def test_bits_instead_of_bytes_in_weights():
    r = with_("test_weight_bytes", weight_bytes=lambda n, dt: n * {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "int4": 4}[dt])
    assert not r.passed and "bits or bytes" in r.message


def test_gb_and_gib_swapped():
    ns = REFERENCE["test_weight_bytes"]
    r = with_("test_weight_bytes", llama3_weights_gb=ns["llama3_weights_gib"], llama3_weights_gib=ns["llama3_weights_gb"])
    assert not r.passed and "swapped" in r.message


def test_gib_reported_as_gb():
    r = with_("test_weight_bytes", llama3_weights_gb=16_060_522_496 / GiB)
    assert not r.passed and "10^9" in r.message


def test_forgot_keys_and_values():
    r = with_("test_kv_per_token", kv_bytes_per_token=lambda c, b: kv_ok(c, b) // 2)
    assert not r.passed and "besides its key" in r.message


def test_attention_heads_instead_of_kv_heads():
    def wrong(c, b):
        heads = c["num_attention_heads"]
        return 2 * c["num_hidden_layers"] * heads * c.get("head_dim", c["hidden_size"] // heads) * b
    r = with_("test_kv_per_token", kv_bytes_per_token=wrong)
    assert not r.passed and "num_key_value_heads" in r.message


def test_bits_instead_of_bytes_in_kv():
    r = with_("test_kv_per_token", kv_bytes_per_token=lambda c, b: kv_ok(c, b) * 8)
    assert not r.passed and "bits or bytes" in r.message


def test_kv_total_ignores_sequences():
    r = with_("test_kv_cache_total", kv_cache_bytes=lambda c, b, t, s: kv_ok(c, b) * t)
    assert not r.passed and "active_sequences" in r.message


def test_lab_kv_in_gib():
    r = with_("test_kv_cache_total", lab_kv_gb=4.0)
    assert not r.passed and "GiB" in r.message


def test_free_memory_treated_as_capacity():
    r = with_("test_safe_requests", safe_requests=lambda f, r, p: f // p)
    assert not r.passed and "free memory as capacity" in r.message


def test_admission_that_never_rejects():
    r = with_("test_admission_rule", admission_decision=lambda req, used, b: "admit" if used + req <= b else "queue")
    assert not r.passed and "never" in r.message


def test_admission_off_by_one_at_the_budget():
    r = with_("test_admission_rule", admission_decision=lambda req, used, b: "reject" if req > b
              else ("admit" if used + req < b else "queue"))
    assert not r.passed and "exactly on the safe budget" in r.message


def test_loading_counts_only_the_copies():
    r = with_("test_replica_ready", replica_ready_seconds=7.56)
    assert not r.passed and "not all of it" in r.message


def test_kv_cache_classified_as_fixed():
    kinds = dict(REFERENCE["test_pool_kinds"]["pool_kinds"], kv_cache="fixed")
    r = with_("test_pool_kinds", pool_kinds=kinds)
    assert not r.passed and "classified wrongly" in r.message


def test_lab_not_edited():
    r = with_("test_lab_after_edit", lab_parts_gb_at_16=REFERENCE["test_lab_record"]["lab_parts_gb_at_8"])
    assert not r.passed and "edit active_sequences" in r.message


def test_explain_budget_of_weights_only():
    budget = explain_budget()["my_budget"]
    del budget["pools"]["kv_cache"]
    r = run("test_explain_budget", {"my_budget": budget})
    assert not r.passed and "kv_cache" in r.message


def test_explain_budget_with_kv_cache_marked_fixed():
    budget = explain_budget()["my_budget"]
    budget["pools"]["kv_cache"]["kind"] = "fixed"
    r = run("test_explain_budget", {"my_budget": budget})
    assert not r.passed and "grow" in r.message


def test_explain_budget_with_wrong_headroom():
    r = run("test_explain_budget", explain_budget(headroom_bytes=0))
    assert not r.passed and "headroom" in r.message


# ------------------------------------------------------------ values that pretend

class AlwaysEqual(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class Sneaky(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def test_always_equal_string_earns_nothing():
    r = with_("test_predict", predict_answer=AlwaysEqual("b"))
    assert not r.passed and "plain" in r.message


def test_always_equal_int_earns_nothing():
    # The right count (4), as an int subclass that equals anything: refused as not plain.
    assert with_("test_request_budget", fit_count=4).passed
    r = with_("test_request_budget", fit_count=Sneaky(4))
    assert not r.passed and "plain" in r.message, r.message


def test_patched_isclose_in_the_kernel_earns_nothing():
    # A learner patches math.isclose (and numpy's) in their kernel, then the hidden part runs
    # there, as in the sandbox (no autograder importable): what it records is scored here.
    import json
    import subprocess
    import sys

    from autograder.hidden import hidden_source
    from lessons.l14_04 import collect as collect_module

    def recorded(answer: float) -> dict:
        child = (
            "import json, math, sys\n"
            "sys.modules['autograder'] = sys.modules['lessons'] = None  # the sandbox: no grader importable\n"
            "math.isclose = lambda *a, **k: True\n"
            f"ns = {{'offload_seconds_per_step': {answer!r}}}\n"
            f"exec({hidden_source('test_offload_step', collect_module)!r}, ns)\n"
            "print(json.dumps(ns['_course_values']))\n")
        proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    wrong = recorded(99.0)
    assert wrong == {"offload_s": 99.0}
    assert not score_answer("test_offload_step", wrong).passed
    assert score_answer("test_offload_step", recorded(10 / 31.5)).passed  # 10 GB over PCIe Gen4's 31.5 GB/s


def test_multiple_choice_is_strict_about_type():
    assert not with_("test_quick_check", quick_check_1=["c"]).passed
    assert not with_("test_quick_check", quick_check_1=3).passed
    assert with_("test_quick_check", quick_check_1=" C ").passed   # a typed letter, case-insensitive


def test_non_finite_numbers_are_not_answers():
    assert not with_("test_offload_step", offload_seconds_per_step=math.nan).passed


# ------------------------------------------------------------ the lesson-depth questions (hand-worked)

def test_kv_total_consistent_with_a_wrong_per_token_keeps_its_points():
    half = lambda c, b: kv_ok(c, b) // 2
    r = with_("test_kv_cache_total", kv_bytes_per_token=half, kv_cache_bytes=lambda c, b, t, s: half(c, b) * t * s,
              lab_kv_gb=4.294967296 / 2)
    assert r.passed and "consistent with your kv_bytes_per_token" in r.message


def test_kv_total_still_fails_its_own_mistake_on_a_wrong_per_token():
    half = lambda c, b: kv_ok(c, b) // 2
    r = with_("test_kv_cache_total", kv_bytes_per_token=half, kv_cache_bytes=lambda c, b, t, s: half(c, b) * t)
    assert not r.passed and "active_sequences" in r.message


def test_inverted_ratio_is_named():
    r = with_("test_gqa_dtype", mha_over_gqa_ratio=0.25)
    assert not r.passed and "inverted" in r.message


@pytest.mark.parametrize("weights, phrase", [
    (30_745_088, "parameter count"),                       # params, not bytes
    (30_745_088 * 2, "fp32, 4 bytes"),                     # fp16
    (30_745_088 * 4 - 8000 * 512 * 4, "not tied"),         # head counted as tied
    (30_745_088 * 4 - (8 * 2 * 512 + 512) * 4, "norms"),   # norms left out
    (30_745_088 * 4 + 8 * 2 * (512 * 512 - 512 * 128) * 4, "KV heads x head_dim"),
])
def test_predicted_weights_slips_are_named(weights, phrase):
    r = with_("test_predict_measure", predicted_weights_bytes=weights)
    assert not r.passed and phrase in r.message


@pytest.mark.parametrize("kv, phrase", [(8192 * 1024 * 2, "key and a value"), (8192 * 1024 * 16, "8 attention heads"),
                                        (8192 * 1024, "4 sequences"), (8192, "per token")])
def test_predicted_kv_slips_are_named(kv, phrase):
    r = with_("test_predict_measure", predicted_kv_cache_bytes=kv, kv_cache_bytes=None)
    assert not r.passed and phrase in r.message


def test_measured_gap_wants_the_workspace_and_the_allocator():
    assert not with_("test_measured_gap", largest_gap_pool="weights").passed
    r = with_("test_measured_gap", gap_reason="a")
    assert not r.passed and "gap_reason" in r.message


@pytest.mark.parametrize("fn, phrase", [
    (lambda t, f, a, r, s: f, "safety reserve"),
    (lambda t, f, a, r, s: max(0, f + r - a - s), "cached"),
    (lambda t, f, a, r, s: max(0, t - a - s), "total - allocated"),
    (lambda t, f, a, r, s: max(0, t - r - s), "total - reserved"),
    (lambda t, f, a, r, s: f - s, "never a negative"),
])
def test_plannable_slips_are_named(fn, phrase):
    r = with_("test_plannable", plannable_bytes=fn)
    assert not r.passed and phrase in r.message


def test_a_missing_copy_is_not_read_as_a_gib_slip():
    # found doing the notebook by hand: 39.00 s (no copy) is 0.04 s from the GiB slip's 39.04 s
    r = with_("test_replica_ready", replica_ready_seconds=14 / 2 + 4 + 20 + 8)
    assert not r.passed and "copy to the GPU" in r.message and "GiB" not in r.message


def test_gib_for_gb_in_the_timeline_is_named():
    r = with_("test_replica_ready", replica_ready_seconds=14 * GiB / GB / 2 + 14 * GiB / GB / 25 + 32)
    assert not r.passed and "GiB" in r.message
    r = with_("test_offload_step", offload_seconds_per_step=10 * GiB / 31.5e9)
    assert not r.passed and "GiB" in r.message


def test_ready_at_process_start_messages():
    r = with_("test_ready_at_start", ready_at_process_start=True)
    assert not r.passed and "bool" not in r.message and "can it serve yet" in r.message
    r = with_("test_ready_at_start", ready_at_process_start="no")
    assert not r.passed and "bool" in r.message
