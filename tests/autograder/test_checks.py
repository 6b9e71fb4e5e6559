"""Trusted scoring (lessons/l14_04/checks.py): right answers pass, each common mistake fails with its hint,
sub-answers earn their own share, and an earlier slip carried into a later answer costs only its own task.

The learner functions here are written by hand in the test, as a learner would, so each check is
exercised through its real collect() -> to_plain -> score() path, outside any kernel. Expected figures
that come from a model run (the chat trace's unused share, the A100 log's four changes, the decision) are
recomputed here with the library, independently of the constants in checks.py.
"""

from __future__ import annotations

import math
import re

import pytest

from autograder.contract.answers import to_plain
from lessons.l14_04 import checks
from lessons.l14_04.checks import CHECKS, score_answer
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


def half(config, b):                     # forgot V (or K)
    return kv_ok(config, b) // 2


def total_with(per_token):
    return lambda c, b, t, s: per_token(c, b) * t * s


def weights_ok(n, dt):
    return n * {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "int4": 4}[dt] // 8


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


REFERENCE = {
    "test_predict": dict(predict_answer="a", pool_kinds={"weights": "fixed", "workspace": "fixed", "reserve": "fixed",
                                                         "kv_cache": "grows"}),
    "test_request_budget": dict(request_budget_gb=lambda d, w, ws, r: d - w - ws - r,
                                requests_that_fit=lambda b, p: 0 if b <= 0 else int(b // p),
                                left_gb=6, fit_count=4, fifth_crosses=True),
    "test_weight_bytes": dict(weight_bytes=weights_ok, llama3_weights_gb=16.060522496,
                              llama3_weights_gib=16_060_522_496 / GiB),
    "test_kv_cache": dict(kv_bytes_per_token=kv_ok, kv_cache_bytes=total_with(kv_ok), lab_kv_gb=4.294967296),
    "test_gqa_dtype": dict(mha_over_gqa_ratio=4.0, llama3_fp8_kv_bytes_per_token=65536, kv_bytes_per_token=kv_ok),
    # Worked by hand in the notebook's Task 6: 30,745,088 params x 4 B, and 8,192 B/token x 1,024 x 4
    "test_predict_measure": dict(predicted_weights_bytes=30_745_088 * 4, predicted_kv_cache_bytes=8192 * 1024 * 4,
                                 kv_cache_bytes=total_with(kv_ok), kv_bytes_per_token=kv_ok),
    "test_measured_gap": dict(largest_gap_pool="workspace", gap_reason="b"),
    "test_safe_requests": dict(safe_requests=lambda f, w, r, p: max(0, (f - w - r) // p)),
    "test_plannable": dict(plannable_bytes=lambda f, a, res, split, s: max(0, f + res - a - split - s)),
    "test_admission_rule": dict(admission_decision=lambda req, used, budget: "reject" if req > budget
                                else ("admit" if used + req <= budget else "queue")),
    "test_policy_predict": dict(chat_unused_share=(1024 - 128) / (288 + 1024), chat_more_running="paged"),
    "test_offload_step": dict(offload_seconds_per_step=10 / 31.5),
    "test_replica_ready": dict(replica_ready_seconds=7 + 0.56 + 4 + 20 + 8),
    "test_unready": dict(replica_unready_seconds=7 + 0.56 + 4 + 20 + 8 - 5, replica_ready_seconds=39.56),
    "test_log_kv": dict(kv_from_log=lambda t, u, w, a, n, g=0.0: t * u - w - a - n - g,
                        a100_activation_and_non_torch_gib=79.25 * 0.25 - 14.2488 - 5.01),
    "test_log_blocks": dict(gpu_blocks=lambda kv, per, block: kv // (per * block),
                            max_concurrency=lambda n, block, length: n * block / length,
                            mi300x_kv_bytes_per_token_per_gpu=16_384, kv_bytes_per_token=kv_ok),
    "test_log_predict": dict(a100_predictions={"max_num_seqs=64": "more", "max_num_batched_tokens=8192": "less",
                                               "kv_cache_dtype=fp8": "less",
                                               "kv_cache_gib_at_utilization_0.20": 1.0475}),
    "test_decision": dict(decision={"weights": "fp8", "kv_cache_dtype": "fp8", "max_model_len": 8192,
                                    "max_num_seqs": 16, "gpu_memory_utilization": 0.92, "tensor_parallel": 1},
                          decision_reason="fp8 weights and an fp8 KV cache halve both, so the pool holds 25 requests"),
    "test_quick_check": dict(quick_check_1="b", quick_check_2="b", quick_check_3="a"),
    "test_explain_budget": explain_budget(),
}


def with_(grade_id, **change):
    ns = dict(REFERENCE[grade_id])
    ns.update(change)
    return run(grade_id, ns)


def test_every_check_has_a_reference():
    assert set(REFERENCE) == set(CHECKS)


@pytest.mark.parametrize("grade_id", sorted(REFERENCE))
def test_reference_passes(grade_id):
    result = run(grade_id, REFERENCE[grade_id])
    assert result.passed, result.message


@pytest.mark.parametrize("grade_id", sorted(REFERENCE))
def test_blank_fails_with_a_message(grade_id):
    result = run(grade_id, {})
    assert not result.passed and "not defined" in result.message and not result.fraction


# ------------------------------------------------------------ the common mistakes

def test_budget_of_weights_only_loses_the_function_part_only():
    # the example computed with the learner's own function (10 GB left, 6 fit, the 7th crosses) is carried
    r = with_("test_request_budget", request_budget_gb=lambda d, w, ws, r: d - w, left_gb=10, fit_count=6)
    assert not r.passed and "weights only" in r.message and r.fraction == 0.5


def test_hard_coded_budget_fails_on_hidden_inputs():
    assert not with_("test_request_budget", request_budget_gb=lambda d, w, ws, r: 6).passed


def test_bits_instead_of_bytes_in_weights_carries_into_the_units():
    bits = lambda n, dt: weights_ok(n, dt) * 8
    r = with_("test_weight_bytes", weight_bytes=bits, llama3_weights_gb=bits(8_030_261_248, "fp16") / GB,
              llama3_weights_gib=bits(8_030_261_248, "fp16") / GiB)
    assert not r.passed and "bits or bytes" in r.message and r.fraction == 0.5


def test_gb_and_gib_swapped():
    ns = REFERENCE["test_weight_bytes"]
    r = with_("test_weight_bytes", llama3_weights_gb=ns["llama3_weights_gib"], llama3_weights_gib=ns["llama3_weights_gb"])
    assert not r.passed and "swapped" in r.message and r.fraction == 0.5


def test_forgot_keys_and_values_fails_every_shape():
    r = with_("test_kv_cache", kv_bytes_per_token=half)      # kv_cache_bytes right: its 2 of 5 points stay
    assert not r.passed and "besides its key" in r.message and r.fraction == pytest.approx(2 / 5)


def test_attention_heads_instead_of_kv_heads_keeps_the_multi_head_third():
    def wrong(c, b):
        heads = c["num_attention_heads"]
        return 2 * c["num_hidden_layers"] * heads * c.get("head_dim", c["hidden_size"] // heads) * b
    r = with_("test_kv_cache", kv_bytes_per_token=wrong)
    assert not r.passed and "num_key_value_heads" in r.message and r.fraction == pytest.approx((1 + 2) / 5)


def test_head_dim_ignored_loses_its_third():
    def wrong(c, b):
        heads = c["num_attention_heads"]
        return 2 * c["num_hidden_layers"] * c.get("num_key_value_heads", heads) * (c["hidden_size"] // heads) * b
    r = with_("test_kv_cache", kv_bytes_per_token=wrong)
    assert "head_dim" in r.message and r.fraction == pytest.approx((2 + 2) / 5)


def test_kv_total_ignores_sequences():
    r = with_("test_kv_cache", kv_cache_bytes=lambda c, b, t, s: kv_ok(c, b) * t)
    assert not r.passed and "active_sequences" in r.message and r.fraction == pytest.approx((3 + 1) / 5)


def test_lab_kv_in_gib():
    r = with_("test_kv_cache", lab_kv_gb=4.294967296 * GB / GiB)
    assert not r.passed and "GiB" in r.message and r.fraction == pytest.approx((3 + 1) / 5)


def test_free_memory_treated_as_capacity():
    r = with_("test_safe_requests", safe_requests=lambda f, w, r, p: f // p)
    assert not r.passed and "free memory as capacity" in r.message and not r.fraction


@pytest.mark.parametrize("fn, words", [
    (lambda f, w, r, p: max(0, (f - w) // p), "forgets the reserve"),
    (lambda f, w, r, p: max(0, (f - r) // p), "forgets the workspace"),
    (lambda f, w, r, p: max(0, f // p), "keeps neither the workspace"),
])
def test_each_safe_requests_slip_has_its_own_message(fn, words, monkeypatch):
    """Issue 41: a forgotten reserve, a forgotten workspace and both forgotten all read "treats free memory as
    capacity" on Validate (a case with no workspace cannot tell the reserve from both). Each now has its own
    message, the same on Validate and in the feedback, on every part it costs."""
    from course_lib.lessons.l14_04 import practice
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    r = with_("test_safe_requests", safe_requests=fn)
    assert not r.passed and words in r.message, r.message
    others = [m for m in practice.SAFE_REQUESTS_SLIPS.values() if words not in m]
    assert not any(m in r.message for m in others), r.message
    with pytest.raises(practice.CheckFailed, match=words):
        practice.check_safe_requests(fn)


def test_workspace_forgotten_loses_half():
    r = with_("test_safe_requests", safe_requests=lambda f, w, r, p: max(0, (f - r) // p))
    assert not r.passed and "workspace" in r.message and r.fraction == 0.5


@pytest.mark.parametrize("fn, phrase, fraction", [
    (lambda f, a, res, split, s: max(0, f - s), "whole free segments", 0.5),     # the old lesson's rule
    (lambda f, a, res, split, s: max(0, f + res - a - s), "inactive split", 0.5),
    (lambda f, a, res, split, s: f + res - a - split, "safety reserve", 0.0),
    (lambda f, a, res, split, s: f + res - a - split - s, "never a negative", 0.0),
])
def test_plannable_slips_are_named(fn, phrase, fraction):
    r = with_("test_plannable", plannable_bytes=fn)
    assert not r.passed and phrase in r.message and (r.fraction or 0.0) == fraction, r


def test_admission_that_never_rejects_loses_the_reject_third():
    r = with_("test_admission_rule", admission_decision=lambda req, used, b: "admit" if used + req <= b else "queue")
    assert not r.passed and "never" in r.message and r.fraction == pytest.approx(2 / 3)


def test_admission_off_by_one_at_the_budget():
    r = with_("test_admission_rule", admission_decision=lambda req, used, b: "reject" if req > b
              else ("admit" if used + req < b else "queue"))
    assert not r.passed and "exactly on the safe budget" in r.message


def test_the_chat_prediction_by_hand_is_within_the_margin_of_the_simulation():
    """The constant in checks.py against a fresh simulation (course_lib.simulate), and the hand reasoning."""
    from course_lib.serving.scenario import comparison_trace, lesson_config
    from course_lib.simulate import simulate

    trace = comparison_trace()
    runs = {p: simulate(trace, lesson_config(p)) for p in ("reserve-max", "vllm-v1")}
    unused = runs["reserve-max"].summary.reserved_unused_fraction if hasattr(runs["reserve-max"].summary,
                                                                            "reserved_unused_fraction") else None
    if unused is None:        # the table's row, as printed
        from course_lib.views.report import comparison_table
        row = next(line for line in comparison_table(list(runs.items())).splitlines() if line.startswith("reserved"))
        unused = float(row.split()[-2].rstrip("%")) / 100
    assert unused == pytest.approx(checks.CHAT_UNUSED_SHARE, abs=0.002)
    assert runs["vllm-v1"].summary.max_active > runs["reserve-max"].summary.max_active
    assert abs((1024 - 128) / (288 + 1024) - unused) <= 0.10, "the notebook's hand reasoning lands within the margin"


def test_chat_prediction_off_by_more_than_ten_points():
    r = with_("test_policy_predict", chat_unused_share=0.3)
    assert not r.passed and "10 percentage points" in r.message and r.fraction == 0.5


def test_the_four_log_predictions_agree_with_vllm_s_rule():
    """checks.LOG_PREDICTIONS and the figures, recomputed with the runtime estimate of the A100 log's launch."""
    from course_lib.lessons.l14_04.demos import show_log_changes

    rows = dict(show_log_changes())
    base = rows["as logged"].runtime_kv_cache_bytes
    assert (rows["max_num_seqs=64"].runtime_kv_cache_bytes > base) == (checks.LOG_PREDICTIONS["max_num_seqs=64"] == "more")
    assert (rows["max_num_batched_tokens=8192"].runtime_kv_cache_bytes < base) == \
        (checks.LOG_PREDICTIONS["max_num_batched_tokens=8192"] == "less")
    # fp8 on an A100 in 0.10.x runs on V0 (expert review 2, A5): its profile takes max(16,384, 2,048) tokens, so the
    # activation peak grows and the pool shrinks; the expert's own run of course_lib's V0 estimate: 126,464 tokens
    fp8 = rows["kv_cache_dtype=fp8 (on V0)"]
    assert fp8.term("activation_peak") > rows["as logged"].term("activation_peak")
    assert (fp8.runtime_kv_cache_bytes < base) == (checks.LOG_PREDICTIONS["kv_cache_dtype=fp8"] == "less")
    assert fp8.kv_cache_tokens == 126_464 and fp8.kv_cache_tokens < 2 * 93_872
    drop = (base - rows["gpu_memory_utilization=0.20"].runtime_kv_cache_bytes) / GiB
    assert drop == pytest.approx(0.05 * 79.25, abs=0.01) and 5.01 - drop == pytest.approx(checks.KV_AT_020, abs=0.01)


def test_half_of_the_log_predictions():
    preds = dict(REFERENCE["test_log_predict"]["a100_predictions"], **{"max_num_seqs=64": "less",
                                                                     "kv_cache_dtype=fp8": "same"})
    r = with_("test_log_predict", a100_predictions=preds)
    assert not r.passed and r.fraction == 0.5


def test_the_defaults_do_not_serve_twelve_but_start():
    defaults = {"weights": "checkpoint", "kv_cache_dtype": "auto", "max_model_len": 8192, "max_num_seqs": 256,
                "gpu_memory_utilization": 0.92, "tensor_parallel": 1}
    r = with_("test_decision", decision=defaults, decision_reason="the defaults")
    assert not r.passed and "not 12" in r.message and r.fraction == pytest.approx(1 / 3)


def test_a_decision_that_cannot_start_or_lacks_context():
    short = dict(REFERENCE["test_decision"]["decision"], max_model_len=4096)
    r = with_("test_decision", decision=short)
    # one slip, one point: "it serves nobody" follows from "it does not start" and is listed, not charged
    # (issue 33: it cost 2 of 3 and its message was shown nowhere)
    assert not r.passed and "8,192" in r.message and r.fraction == pytest.approx(2 / 3)
    assert "none of the users is served" in r.message.split("\n")[1] and "not charged" in r.message
    huge = dict(REFERENCE["test_decision"]["decision"], max_model_len=131072, kv_cache_dtype="auto",
                max_num_seqs=256)
    r = with_("test_decision", decision=huge, decision_reason="longer context")
    assert not r.passed and "does not start" in r.message


def test_a_reason_that_names_no_lever_loses_its_third():
    r = with_("test_decision", decision_reason="because it works")
    assert not r.passed and "which pool it shrinks" in r.message and r.fraction == pytest.approx(2 / 3)


def test_int4_weights_also_serve_twelve():
    """Another right launch: int4 (AWQ) weights leave room for 14 bf16 requests of 8k (the explorer's figure)."""
    decision = dict(REFERENCE["test_decision"]["decision"], weights="int4", kv_cache_dtype="auto", max_num_seqs=256)
    assert with_("test_decision", decision=decision, decision_reason="int4 weights free 10 GB for the KV cache").passed


def test_kv_cache_classified_as_fixed():
    kinds = dict(REFERENCE["test_predict"]["pool_kinds"], kv_cache="fixed")
    r = with_("test_predict", pool_kinds=kinds)
    assert not r.passed and "classified wrongly" in r.message and r.fraction == 0.5


def test_the_predict_letter_and_the_pool_kinds_score_apart():
    r = with_("test_predict", predict_answer="b")
    assert not r.passed and "does not grow" in r.message and r.fraction == 0.5
    r = with_("test_predict", pool_kinds={"weights": "fixed"})
    assert not r.passed and "lacks 3 pool(s)" in r.message and r.fraction == 0.5


def test_fp8_on_the_a100_keeping_the_pool_names_the_engine():
    """The V1 -> V0 fallback (expert review 2, A5): "same" (twice the tokens in the same GiB) loses that part."""
    preds = dict(REFERENCE["test_log_predict"]["a100_predictions"], **{"kv_cache_dtype=fp8": "same"})
    r = with_("test_log_predict", a100_predictions=preds)
    assert not r.passed and "which engine runs this launch" in r.message and r.fraction == 0.75


def test_explain_budget_parts():
    budget = explain_budget()["my_budget"]
    del budget["pools"]["kv_cache"]
    r = run("test_explain_budget", {"my_budget": budget})
    assert not r.passed and "kv_cache" in r.message
    budget = explain_budget()["my_budget"]
    budget["pools"]["kv_cache"]["kind"] = "fixed"
    r = run("test_explain_budget", {"my_budget": budget})
    assert not r.passed and "grow" in r.message and r.fraction == pytest.approx(2 / 3)
    r = run("test_explain_budget", explain_budget(headroom_bytes=0))
    assert not r.passed and "headroom" in r.message and r.fraction == pytest.approx(2 / 3)


# ------------------------------------------------------------ carried forward: one slip, one question

def test_task4_consistent_with_a_wrong_task3_keeps_its_points():
    r = with_("test_kv_cache", kv_bytes_per_token=half, kv_cache_bytes=total_with(half), lab_kv_gb=4.294967296 / 2)
    assert not r.passed and r.fraction == pytest.approx(2 / 5) and "consistent with your kv_bytes_per_token" in r.message


def test_task4_still_fails_its_own_mistake_on_a_wrong_task3():
    r = with_("test_kv_cache", kv_bytes_per_token=half, kv_cache_bytes=lambda c, b, t, s: half(c, b) * t)
    assert not r.passed and "active_sequences" in r.message


def test_task5_ratio_from_a_wrong_task3_is_carried():
    def heads(c, b):
        h = c["num_attention_heads"]
        return 2 * c["num_hidden_layers"] * h * (c["hidden_size"] // h) * b
    r = with_("test_gqa_dtype", kv_bytes_per_token=heads, mha_over_gqa_ratio=1.0,
              llama3_fp8_kv_bytes_per_token=heads({"hidden_size": 4096, "num_hidden_layers": 32,
                                                   "num_attention_heads": 32}, 1))
    assert r.passed and "consistent" in r.message


def test_task6_kv_from_a_wrong_task4_is_carried():
    wrong_total = lambda c, b, t, s: kv_ok(c, b) * t            # forgot the sequences in Task 4
    r = with_("test_predict_measure", kv_cache_bytes=wrong_total, predicted_kv_cache_bytes=8192 * 1024)
    assert r.passed and "consistent" in r.message


def test_task12c_carries_task12b():
    r = with_("test_unready", replica_ready_seconds=7.56, replica_unready_seconds=2.56)
    assert r.passed and "consistent" in r.message


def test_task15_per_gpu_figure_carries_task3():
    r = with_("test_log_blocks", kv_bytes_per_token=half, mi300x_kv_bytes_per_token_per_gpu=8192)
    assert r.passed


def test_inverted_ratio_is_named():
    r = with_("test_gqa_dtype", mha_over_gqa_ratio=0.25)
    assert not r.passed and "inverted" in r.message and r.fraction == 0.5


# ------------------------------------------------------------ Task 14/15 on other logs

def test_kv_from_log_slips():
    r = with_("test_log_kv", kv_from_log=lambda t, u, w, a, n, g=0.0: t - w - a - n - g)
    assert "whole device" in r.message and r.fraction == 0.5
    r = with_("test_log_kv", kv_from_log=lambda t, u, w, a, n, g=0.0: t * u - w - a - n)     # graphs left in
    assert "v0.21" in r.message
    r = with_("test_log_kv", a100_activation_and_non_torch_gib=79.25 * 0.25 - 14.2488)
    assert "KV cache" in r.message and r.fraction == 0.5


def test_blocks_counted_as_tokens():
    r = with_("test_log_blocks", gpu_blocks=lambda kv, per, block: kv // per)
    assert "block_size tokens" in r.message and r.fraction == 0.5


def test_the_hidden_logs_follow_the_rule_they_test():
    """The hidden cases are real start-up figures: vLLM's rule on their terms gives the KV cache they logged
    (Llama-3.1-8B fp8 KV on an H100, v0.19: 58.11 GiB; Gemma-2-27B: 20.59 GiB). The T4 bnb log prints its
    utilization rounded (0.59; Unsloth passes more digits, as in the lesson's T4 log), so there the rule on the
    printed terms lands 0.06 GiB under the printed 2.39."""
    from lessons.l14_04.checks import _log_kv_rule as log_kv_expected
    from lessons.l14_04.collect import LOG_KV_CASES
    for i, kv in {0: 58.11, 1: 20.59}.items():
        assert log_kv_expected(*LOG_KV_CASES[i]) == pytest.approx(kv, abs=0.02)
    assert log_kv_expected(*LOG_KV_CASES[4]) == pytest.approx(2.39, abs=0.1)


# ------------------------------------------------------------ per-option feedback

def test_every_wrong_letter_says_what_it_gets_wrong():
    for i, (right, why) in checks.QUICK_CHECK.items():
        for letter in "abc":
            if letter == right:
                continue
            r = with_("test_quick_check", **{f"quick_check_{i}": letter})
            assert why[letter] in r.message and r.fraction == pytest.approx(2 / 3)
    r = with_("test_predict", predict_answer="b")
    assert checks.PREDICT_WHY["b"] in r.message


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
    assert with_("test_request_budget", fit_count=4).passed
    r = with_("test_request_budget", fit_count=Sneaky(4))
    assert not r.passed and "plain" in r.message, r.message


def test_patched_isclose_in_the_kernel_earns_nothing():
    # A learner patches math.isclose (and numpy's) in their kernel, then the hidden part runs
    # there, as in the sandbox (no autograder importable): what it records is scored here.
    import json
    import subprocess
    import sys

    from autograder.source.hidden import hidden_source
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
    assert not with_("test_quick_check", quick_check_1=["b"]).passed
    assert not with_("test_quick_check", quick_check_1=3).passed
    assert with_("test_quick_check", quick_check_1=" B ").passed   # a typed letter, case-insensitive


def test_non_finite_numbers_are_not_answers():
    assert not with_("test_offload_step", offload_seconds_per_step=math.nan).passed


# ------------------------------------------------------------ the lesson-depth questions (hand-worked)

@pytest.mark.parametrize("weights, phrase", [
    (30_745_088, "parameter count"),                       # params, not bytes
    (30_745_088 * 2, "fp32, 4 bytes"),                     # fp16
    (30_745_088 * 4 - 8000 * 512 * 4, "not tied"),         # head counted as tied
    (30_745_088 * 4 - (8 * 2 * 512 + 512) * 4, "norms"),   # norms left out
    (30_745_088 * 4 + 8 * 2 * (512 * 512 - 512 * 128) * 4, "KV heads x head_dim"),
])
def test_predicted_weights_slips_are_named(weights, phrase):
    r = with_("test_predict_measure", predicted_weights_bytes=weights)
    assert not r.passed and phrase in r.message and r.fraction == 0.5


@pytest.mark.parametrize("kv, phrase", [(8192 * 1024 * 2, "key and a value"), (8192 * 1024 * 16, "8 attention heads"),
                                        (8192 * 1024, "4 sequences"), (8192, "per token")])
def test_predicted_kv_slips_are_named(kv, phrase):
    r = with_("test_predict_measure", predicted_kv_cache_bytes=kv, kv_cache_bytes=None, kv_bytes_per_token=None)
    assert not r.passed and phrase in r.message


def test_measured_gap_parts():
    r = with_("test_measured_gap", largest_gap_pool="weights")
    assert not r.passed and r.fraction == 0.5
    r = with_("test_measured_gap", gap_reason="a")
    assert not r.passed and "gap_reason: not a" in r.message and checks.GAP_WHY["a"] in r.message


def test_a_missing_copy_is_not_read_as_a_gib_slip():
    # found doing the notebook by hand: 39.00 s (no copy) is 0.04 s from the GiB slip's 39.04 s
    r = with_("test_replica_ready", replica_ready_seconds=14 / 2 + 4 + 20 + 8)
    assert not r.passed and "copy to the GPU" in r.message and "GiB" not in r.message


def test_gib_for_gb_in_the_timeline_is_named():
    r = with_("test_replica_ready", replica_ready_seconds=14 * GiB / GB / 2 + 14 * GiB / GB / 25 + 32)
    assert not r.passed and "GiB" in r.message
    r = with_("test_offload_step", offload_seconds_per_step=10 * GiB / 31.5e9)
    assert not r.passed and "GiB" in r.message


def test_unready_slips():
    r = with_("test_unready", replica_unready_seconds=39.56)
    assert not r.passed and "5 s after" in r.message
    r = with_("test_unready", replica_unready_seconds=0)
    assert not r.passed



def _constant_hand_in(value=7) -> dict:
    """Issue 34: every function of the notebook returns ``value`` whatever it is given, every answer is ``value``
    (the names are read from the collectors: whatever a hidden test calls or reads)."""
    import re
    from pathlib import Path

    from lessons.l14_04 import collect as collect_module
    source = Path(collect_module.__file__).read_text()
    ns = {name: value for name in re.findall(r'var\(ns, "(\w+)"', source)}
    ns.update({name: (lambda *args, **kwargs: value) for name in re.findall(r'call\(ns, "(\w+)"', source)})
    return ns


@pytest.mark.parametrize("value", [7, 0.875, 4096])
def test_functions_that_ignore_their_inputs_carry_nothing_forward(value):
    """The all-7 hand-in earned 2 of 50: llama3_fp8_kv_bytes_per_token = 7 was "consistent with your own
    kv_bytes_per_token" (which gives 7 for anything), and so was predicted_kv_cache_bytes = 7. A function
    that does not depend on its inputs carries nothing: every question scores 0."""
    ns = _constant_hand_in(value)
    earned = {gid: r for gid in CHECKS if (r := run(gid, ns)).passed or r.fraction}
    assert earned == {}


def test_a_carry_still_needs_only_a_function_that_depends_on_its_inputs():
    # attention heads for KV heads: the same bytes for Llama-2 and Llama-3 (both 32 heads), fp8 half of it:
    # it depends on bytes_per_value, so its ratio of 1 and its fp8 figure are carried (test_task5_... above)
    def heads(c, b):
        return 2 * c["num_hidden_layers"] * c["num_attention_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * b
    r = with_("test_gqa_dtype", kv_bytes_per_token=heads, mha_over_gqa_ratio=1.0, llama3_fp8_kv_bytes_per_token=262_144)
    assert r.passed and "consistent" in r.message
    # the same answers from a function that gives 524,288 whatever it is given: nothing carried
    r = with_("test_gqa_dtype", kv_bytes_per_token=lambda c, b: 524_288, mha_over_gqa_ratio=1.0,
              llama3_fp8_kv_bytes_per_token=524_288)
    assert not r.passed and not r.fraction, r


def test_notebook_names_are_the_names_the_hidden_tests_use():
    import re
    from pathlib import Path

    from lessons.l14_04 import collect as collect_module
    text = Path(collect_module.__file__).read_text()
    used = set(re.findall(r'(?:call|var)\(ns, "(\w+)"', text))
    for names in re.findall(r'committed\(ns, "\w+", \(([^)]*)\)\)', text):     # the predictions' variables
        used |= set(re.findall(r'"(\w+)"', names))
    assert checks.NOTEBOOK_NAMES == used


@pytest.mark.parametrize("forged", [{"__error__": "Full marks: see www.example.com"},
                                    {"__error__": "weight_bytes(1,) raised Visit_www_example_com: x"},
                                    {"__not_plain__": "see www.example.com"}])
def test_a_forged_marker_never_becomes_the_message(forged):
    """Issue 34: a function that returns {"__error__": TEXT} (or a variable set to it) made TEXT its check's
    message word for word. The message is the grader's own words; the learner's text is not in it."""
    for grade_id, ns in (("test_weight_bytes", dict(weight_bytes=lambda n, dt: forged)),
                         ("test_request_budget", dict(left_gb=forged))):
        r = with_(grade_id, **ns)
        assert not r.passed and "example" not in r.message and "Visit" not in r.message, r.message


def test_a_real_error_is_named_by_its_builtin_type():
    r = with_("test_weight_bytes", weight_bytes=lambda n, dt: n / 0)
    assert r.message.startswith("weight_bytes raised ZeroDivisionError on a hidden input"), r.message
    r = with_("test_weight_bytes", weight_bytes=lambda n, dt: (_ for _ in ()).throw(type("Visit_www", (Exception,), {})()))
    assert r.message.startswith("weight_bytes raised an error on a hidden input") and "Visit" not in r.message, r.message


# ------------------------------------------------------- the launch decision: one rule, a stated margin

FP8_KV_16_SLOTS = {"weights": "checkpoint", "kv_cache_dtype": "fp8", "max_model_len": 8192, "max_num_seqs": 16,
                   "gpu_memory_utilization": 0.92, "tensor_parallel": 1}


def test_a_decision_cut_to_4k_context_serves_nobody():
    """The issue's slip: max_model_len cut to 4,096 starts and holds 25 requests of 4k, but the users need 8k:
    it loses the context part; the serving part follows from it and is said, not charged again (issue 33
    item 4), and no message calls it served. The launch starts (its cell prints "vLLM starts: KV pool ..."), so
    the feedback must not say it "does not start" (issue 41)."""
    from course_lib.lessons.l14_04 import practice
    decision = dict(FP8_KV_16_SLOTS, max_model_len=4096)
    r = with_("test_decision", decision=decision, decision_reason="an fp8 KV cache halves every request's cache")
    assert not r.passed and r.fraction == pytest.approx(2 / 3), r
    assert "8k context" in r.message and "none of the users is served" in r.message and "served:" not in r.message
    assert practice.show_launch(decision).startswith("vLLM starts: KV pool")
    assert "does not start" not in r.message, r.message


def test_a_launch_within_the_estimates_margin_is_answered_measure_it():
    """12.56x for 12 users (course_lib's estimate, within 10% on published logs): not promised."""
    r = with_("test_decision", decision=FP8_KV_16_SLOTS, decision_reason="an fp8 KV cache halves every request's cache")
    assert not r.passed and r.fraction == pytest.approx(2 / 3)
    assert "within 10% on published logs" in r.message and "12.56x" in r.message


def test_enforce_eager_is_a_lever_the_grader_takes():
    """fp8 KV, 0.95 utilization and no CUDA graphs: 13.76x, past 12 / 0.9 = 13.33x; with the graphs, 12.00x
    (the expert's launch that passed "at exactly 12.00x"): measure it."""
    decision = dict(FP8_KV_16_SLOTS, max_num_seqs=256, gpu_memory_utilization=0.95, enforce_eager=True)
    reason = "fp8 KV halves each request and eager mode drops the CUDA graphs"
    assert with_("test_decision", decision=decision, decision_reason=reason).passed
    graphs = with_("test_decision", decision=dict(decision, enforce_eager=False), decision_reason=reason)
    assert not graphs.passed and "12.00x" in graphs.message


@pytest.mark.parametrize("change", [dict(max_model_len=4096), dict(), dict(kv_cache_dtype="auto"),
                                    dict(max_num_seqs=8, gpu_memory_utilization=0.95), dict(tensor_parallel=2),
                                    dict(weights="int4", kv_cache_dtype="auto", max_num_seqs=256)])
def test_the_visible_check_names_a_stated_requirement_as_the_grader_does(change, monkeypatch):
    """The visible check holds a launch to the task's stated requirements only (8k, one card, 12 slots); it
    fails only where the grader takes a point, with the grader's own words. Whether the launch serves the 12
    (the estimate against 13.33x) is the grader's alone (issue 41): the visible check passes such a launch."""
    from course_lib.lessons.l14_04 import practice
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    decision, reason = dict(FP8_KV_16_SLOTS, **change), "an fp8 KV cache and int4 weights shrink the pools"
    graded = with_("test_decision", decision=decision, decision_reason=reason)
    try:
        practice.check_decision(decision, reason)
        visible = None
    except practice.CheckFailed as exc:
        visible = str(exc)
    if visible:
        assert not graded.passed and visible in graded.message, (visible, graded.message)
    stated = decision["max_model_len"] < 8192 or decision["tensor_parallel"] != 1 or decision["max_num_seqs"] < 12
    assert (visible is not None) == stated, (visible, graded)


# ------------------------------------------------------- one message per slip (issue 41, item 4)

def _no_head_dim(config, b):             # a stated head_dim ignored: hidden / heads used instead
    heads = config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * config.get("num_key_value_heads", heads) * (config["hidden_size"] // heads) * b


def _all_heads(config, b):               # GQA ignored: every attention head cached
    return 2 * config["num_hidden_layers"] * config["num_attention_heads"] * config.get(
        "head_dim", config["hidden_size"] // config["num_attention_heads"]) * b


#: (the slip, the grade_id, the learner's namespace change, the visible check as its test cell calls it)
SLIPS = [
    ("forgot K and V", "test_kv_cache", dict(kv_bytes_per_token=half, kv_cache_bytes=total_with(half)),
     lambda p, ns: p.check_kv_per_token(ns["kv_bytes_per_token"])),
    ("a stated head_dim ignored", "test_kv_cache",
     dict(kv_bytes_per_token=_no_head_dim, kv_cache_bytes=total_with(_no_head_dim)),
     lambda p, ns: p.check_kv_per_token(ns["kv_bytes_per_token"])),
    ("GQA ignored", "test_kv_cache", dict(kv_bytes_per_token=_all_heads, kv_cache_bytes=total_with(_all_heads)),
     lambda p, ns: p.check_kv_per_token(ns["kv_bytes_per_token"])),
    ("bits for bytes", "test_weight_bytes", dict(weight_bytes=lambda n, dt: weights_ok(n, dt) * 8),
     lambda p, ns: p.check_weight_bytes(ns["weight_bytes"], ns["llama3_weights_gb"], ns["llama3_weights_gib"])),
    ("a budget of weights only", "test_request_budget", dict(request_budget_gb=lambda d, w, ws, r: d - w),
     lambda p, ns: p.check_request_budget(ns["request_budget_gb"], ns["requests_that_fit"])),
    ("free is capacity", "test_safe_requests", dict(safe_requests=lambda f, w, r, per: f // per),
     lambda p, ns: p.check_safe_requests(ns["safe_requests"])),
    ("reserve forgotten", "test_safe_requests", dict(safe_requests=lambda f, w, r, per: max(0, (f - w) // per)),
     lambda p, ns: p.check_safe_requests(ns["safe_requests"])),
    ("workspace forgotten", "test_safe_requests", dict(safe_requests=lambda f, w, r, per: max(0, (f - r) // per)),
     lambda p, ns: p.check_safe_requests(ns["safe_requests"])),
    ("split blocks planned with", "test_plannable",
     dict(plannable_bytes=lambda f, a, res, split, s: max(0, f + res - a - s)),
     lambda p, ns: p.check_plannable(ns["plannable_bytes"])),
    ("equality queued", "test_admission_rule",
     dict(admission_decision=lambda req, used, budget: "reject" if req > budget else
          ("admit" if used + req < budget else "queue")),
     lambda p, ns: p.check_admission(ns["admission_decision"])),
    ("the whole device", "test_log_kv", dict(kv_from_log=lambda t, u, w, a, n, g=0.0: t - w - a - n - g),
     lambda p, ns: p.check_log_kv(ns["kv_from_log"])),
    ("blocks rounded up", "test_log_blocks", dict(gpu_blocks=lambda kv, per, block: -(-kv // (per * block))),
     lambda p, ns: p.check_log_blocks(ns["gpu_blocks"], ns["max_concurrency"])),
    ("a 4k launch", "test_decision", dict(decision=dict(REFERENCE["test_decision"]["decision"], max_model_len=4096)),
     lambda p, ns: p.check_decision(ns["decision"], ns["decision_reason"])),
    ("8 slots for 12 users", "test_decision", dict(decision=dict(REFERENCE["test_decision"]["decision"], max_num_seqs=8)),
     lambda p, ns: p.check_decision(ns["decision"], ns["decision_reason"])),
]


@pytest.mark.parametrize("slip, grade_id, change, visible", SLIPS, ids=[s[0] for s in SLIPS])
def test_validate_and_the_feedback_name_a_slip_in_the_same_words(slip, grade_id, change, visible, monkeypatch):
    """Issue 41: a learner who ignored a stated head_dim read "half of what the cache holds" from Validate (its
    config had head_dim exactly twice hidden / heads) and the head_dim message from the grader. Each known slip
    now reads the same on both: the visible check's message is one of the feedback's lines."""
    from course_lib.lessons.l14_04 import practice
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    ns = dict(REFERENCE[grade_id], **change)
    with pytest.raises(practice.CheckFailed) as failed:
        visible(practice, ns)
    graded = run(grade_id, ns)
    assert not graded.passed
    # the message is a whole line (or clause) of the feedback, with the count of parts it costs at most
    pattern = r"(^|\n|; )" + re.escape(str(failed.value)) + r"( \(\d+ parts\))?($|\n|; )"
    assert re.search(pattern, graded.message), (str(failed.value), graded.message)


def test_each_visible_kv_shape_gives_each_slip_its_own_figure():
    """The visible configs: the slips (K/V forgotten, GQA ignored, bits for bytes, head_dim ignored) never give
    the same figure as each other or as the right answer on a shape where they apply."""
    from course_lib.lessons.l14_04.practice import VISIBLE_KV_CONFIGS
    for config, b, expected in VISIBLE_KV_CONFIGS:
        assert kv_ok(config, b) == expected, config                       # the hand-worked figure
        figures = {"right": expected, "half": half(config, b), "bits": expected * 8}
        if config.get("num_key_value_heads", config["num_attention_heads"]) != config["num_attention_heads"]:
            figures["heads"] = _all_heads(config, b)
        if "head_dim" in config:
            figures["head_dim"] = _no_head_dim(config, b)
        assert len(set(figures.values())) == len(figures), (config, figures)


def test_the_utilization_figure_is_graded_as_the_runtime_lab_says():
    """Issue 41: R6's 0.20-utilization figure: the task's arithmetic (5.01 - 0.05 x 79.25 = 1.0475 GiB, by hand)
    and the knob table's 0.96 (the estimate's own 4.92 baseline) disagreed, and the text did not say which is
    graded. The text says: the log's 5.01, within ±0.05 GiB; the grader does exactly that."""
    import nbformat
    from tests.lesson.test_notebook import RUNTIME
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): " ".join(c.source.split())
             for c in nbformat.read(RUNTIME, as_version=4).cells}
    assert "graded from the log's 5.01 within ±0.05 GiB" in cells["log_predict_intro"]
    assert "not the log's 5.01" in cells["log_changes_after"]
    base = REFERENCE["test_log_predict"]["a100_predictions"]
    for gib, passes in ((1.0475 + 0.045, True), (1.0475 - 0.045, True), (1.0475 + 0.055, False), (0.96, False)):
        r = with_("test_log_predict", a100_predictions=dict(base, **{"kv_cache_gib_at_utilization_0.20": gib}))
        assert r.passed is passes, (gib, r)
