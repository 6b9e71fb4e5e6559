"""L14.4's kernel side: what each hidden test collects in the learner's kernel, and nothing else.

This module is never imported in a learner's kernel. Its source is copied into the
hidden part of each test cell by :mod:`autograder.source.hidden` (the way nbgrader delivers
hidden tests), so the grader's own files never need to be readable from the sandbox.
It therefore holds only:

- the hidden INPUTS each question is tried on (no expected answers: those live in
  :mod:`lessons.l14_04.checks`, in the grader's process only, and in the stock-nbgrader
  part of the hidden tests, which course-grade removes before a learner's kernel runs);
- one ``collect_<grade_id>(ns)`` per test, which calls the learner's functions on those
  inputs and reads their variables, returning plain values (through
  :mod:`autograder.contract.answers`' ``call``, ``var`` and ``to_plain``).

Where a later answer calls an earlier one (the lesson's kv_cache_bytes calls kv_bytes_per_token, Task 4
may call both), the collector also records what the learner's own earlier function gives on the same
inputs, so the check can carry the earlier answer forward: one misconception costs one question.
It records that function on at least two different inputs, so the check can tell a function that
does not depend on its inputs (one that returns 7 whatever it is given), which carries nothing.

Everything here uses the standard library and :mod:`autograder.contract.answers` only, and every name a
collector uses is defined in one of the two (``autograder.source.hidden`` copies the closure it needs).

>>> collect_predict({"predict_answer": "a", "pool_kinds": {"weights": "fixed"}})   # no record here: never revealed
{'answer': 'a', 'kinds': {'weights': 'fixed'}, 'record': 'not revealed', 'changed_after_reveal': False}
"""

from __future__ import annotations

import hashlib
import json

from autograder.contract.answers import call, var

GB = 10**9
GiB = 2**30


# ------------------------------------------------------------------ predictions committed at their first reveal

#: The record the reveal cells write beside the notebooks at a prediction's first reveal
#: (course_lib.lessons.l14_04.predictions; the grader runs the notebooks beside the handed-in copy).
PREDICTION_RECORD = "l14-04-predictions.json"


def committed(ns, key, names):
    """A prediction's values as graded, and how: as committed at its first reveal where the record holds it
    ("committed"), else as the notebook's variables ("not revealed"); "edited" when the record's entry does
    not match its SHA-256 (its values are then not used). Also whether the variables now differ."""
    now = {name: var(ns, name) for name in names}
    try:
        with open(PREDICTION_RECORD, encoding="utf-8") as f:
            entry = json.load(f).get(key)
    except (OSError, ValueError, AttributeError):
        entry = None
    if not isinstance(entry, dict) or not isinstance(entry.get("values"), dict):
        return now, "not revealed", False
    values = entry["values"]
    text = json.dumps({"key": key, "values": values}, sort_keys=True, separators=(",", ":"))
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != entry.get("sha256"):
        return {name: None for name in names}, "edited", False
    graded = {name: values.get(name) for name in names}
    return graded, "committed", graded != now


# ------------------------------------------------------------------ predict first

def collect_predict(ns):
    values, how, changed = committed(ns, "predict", ("predict_answer", "pool_kinds"))
    return {"answer": values["predict_answer"], "kinds": values["pool_kinds"], "record": how,
            "changed_after_reveal": changed}


# ------------------------------------------------------------------ 1. the 24 GB budget

# (device, weights, workspace, reserve) in GB, and (budget, per request) in GB for requests_that_fit
BUDGET_CASES = [(24, 14, 2, 2), (80, 40, 4, 8), (16, 13, 1, 1), (40, 30, 4, 4), (10, 11, 0, 0)]
FIT_CASES = [(6, 1.5), (28, 3), (1, 0.5), (2, 2.5), (-1, 1)]


def collect_request_budget(ns):
    return {
        "left": [call(ns, "request_budget_gb", *case) for case in BUDGET_CASES],
        "fit": [call(ns, "requests_that_fit", *case) for case in FIT_CASES],
        "left_gb": var(ns, "left_gb"),
        "fit_count": var(ns, "fit_count"),
        "fifth_crosses": var(ns, "fifth_crosses"),
    }


# ------------------------------------------------------------------ 2. weight bytes

# Published parameter counts: Llama-3-8B 8,030,261,248; GPT-2 124,439,808; Llama-2-7B 6,738,415,616
WEIGHT_CASES = [(8_030_261_248, "fp16"), (8_030_261_248, "int4"), (124_439_808, "fp32"),
                (6_738_415_616, "bf16"), (6_738_415_616, "int8")]


def collect_weight_bytes(ns):
    return {
        "bytes": [call(ns, "weight_bytes", p, dt) for p, dt in WEIGHT_CASES],
        "gb": var(ns, "llama3_weights_gb"),
        "gib": var(ns, "llama3_weights_gib"),
    }


# ------------------------------------------------------------------ 3-5. KV cache

# The shape keys of published config.json files (and one multi-query shape).
KV_CONFIGS = {
    "llama-3-8b": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8},
    "llama-2-7b": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32},
    "qwen2-7b": {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4},
    "gemma-2-9b": {"hidden_size": 3584, "num_hidden_layers": 42, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 256},
    "falcon-like-mqa": {"hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
                        "num_key_value_heads": 1},
    "gpt2": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12},
}
# (config name, bytes per value, context tokens, active sequences)
KV_TOTAL_CASES = [("llama-2-7b", 2, 1024, 8), ("llama-3-8b", 2, 4096, 16), ("qwen2-7b", 1, 32768, 3),
                  ("llama-3-8b", 2, 1, 1)]


def collect_kv_per_token(ns):
    return {
        "fp16": {name: call(ns, "kv_bytes_per_token", dict(cfg), 2) for name, cfg in KV_CONFIGS.items()},
        "fp32": call(ns, "kv_bytes_per_token", dict(KV_CONFIGS["llama-2-7b"]), 4),
    }


def collect_kv_cache_total(ns):
    # The learner's own kv_bytes_per_token on the same shapes: Task 4 is scored against it too
    # ("error carried forward"), so a slip in Task 3 costs Task 3 only.
    return {
        "bytes": [call(ns, "kv_cache_bytes", dict(KV_CONFIGS[name]), b, t, s) for name, b, t, s in KV_TOTAL_CASES],
        "own_per_token": [call(ns, "kv_bytes_per_token", dict(KV_CONFIGS[name]), b) for name, b, t, s in KV_TOTAL_CASES],
        "lab_kv_gb": var(ns, "lab_kv_gb"),
    }


def collect_kv_cache(ns):
    # Task 3 of the lesson: both functions in one question (per token, then a workload's total)
    return {**collect_kv_per_token(ns), **collect_kv_cache_total(ns)}


def collect_gqa_dtype(ns):
    return {"ratio": var(ns, "mha_over_gqa_ratio"), "fp8": var(ns, "llama3_fp8_kv_bytes_per_token"),
            "own_mha": call(ns, "kv_bytes_per_token", dict(KV_CONFIGS["llama-2-7b"]), 2),
            "own_gqa": call(ns, "kv_bytes_per_token", dict(KV_CONFIGS["llama-3-8b"]), 2),
            "own_fp8": call(ns, "kv_bytes_per_token", dict(KV_CONFIGS["llama-3-8b"]), 1)}


# ------------------------------------------------------------------ 6-7. predict, then measure

# The notebook's small llama, as the notebook shows it, and its setting (fp32: 4 B; 4 sequences x 1,024 tokens)
TINY_LLAMA = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 8,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 8000, "tie_word_embeddings": False}


def collect_predict_measure(ns):
    values, how, changed = committed(ns, "predict_measure", ("predicted_weights_bytes", "predicted_kv_cache_bytes"))
    return {"weights": values["predicted_weights_bytes"], "kv_cache": values["predicted_kv_cache_bytes"],
            "record": how, "changed_after_reveal": changed,
            "own_kv_cache": call(ns, "kv_cache_bytes", dict(TINY_LLAMA), 4, 1024, 4),
            "own_per_token": call(ns, "kv_bytes_per_token", dict(TINY_LLAMA), 4),
            # the same functions on other inputs: does either depend on what it is given?
            "own_kv_cache_other": call(ns, "kv_cache_bytes", dict(TINY_LLAMA), 2, 1536, 3),
            "own_per_token_other": call(ns, "kv_bytes_per_token", dict(TINY_LLAMA), 2)}


def collect_measured_gap(ns):
    return {"pool": var(ns, "largest_gap_pool"), "reason": var(ns, "gap_reason")}


# ------------------------------------------------------------------ 8-9. free is not capacity

# (free bytes, workspace bytes, reserve bytes, bytes per request): free measured after loading, before the
# first forward, so the workspace is still to be taken from it.
SAFE_CASES = [(8 * GB, 0, 2 * GB, 1_500_000_000), (20 * GB, 0, 4 * GB, 3 * GB), (1 * GB, 0, 2 * GB, 500_000_000),
              (8 * GB, 1 * GB, 2 * GB, 1_500_000_000), (20 * GB, 3 * GB, 4 * GB, 3 * GB),
              (3 * GB, 1 * GB, 1 * GB, 400_000_000)]


def collect_safe_requests(ns):
    return {"n": [call(ns, "safe_requests", *case) for case in SAFE_CASES]}


# (free, allocated, reserved, inactive_split, safety reserve) of a device, in bytes
PLANNABLE_CASES = [(18 * GB, 50 * GB, 50 * GB, 0, 8 * GB), (3 * GB, 30 * GB, 30 * GB, 0, 4 * GB),
                   (18 * GB, 50 * GB, 59 * GB, 3 * GB, 8 * GB), (9 * GB, 11 * GB, 14 * GB, 3 * GB, 2 * GB),
                   (100 * GB, 20 * GB, 30 * GB, 1 * GB, 14 * GB), (1 * GB, 30 * GB, 36 * GB, 2 * GB, 6 * GB)]


def collect_plannable(ns):
    return {"bytes": [call(ns, "plannable_bytes", *case) for case in PLANNABLE_CASES]}


# ------------------------------------------------------------------ 10. admission rule

# (request bytes, bytes in use, safe budget bytes)
ADMIT_CASES = [(1 * GB, 0, 6 * GB), (1 * GB, 5 * GB, 6 * GB), (0, 6 * GB, 6 * GB), (2 * GB, 5 * GB, 6 * GB),
               (6 * GB, 1, 6 * GB), (7 * GB, 0, 6 * GB), (7 * GB, 3 * GB, 6 * GB)]
# Eleven 550 MB requests against a 6 GB budget, each admitted one adding to what is in use.
SEQUENCE = [550_000_000] * 11
SEQUENCE_BUDGET = 6 * GB


def collect_admission_rule(ns):
    singles = [call(ns, "admission_decision", *case) for case in ADMIT_CASES]
    sequence, in_use = [], 0
    for request in SEQUENCE:
        decision = call(ns, "admission_decision", request, in_use, SEQUENCE_BUDGET)
        sequence.append(decision)
        if decision == "admit":
            in_use += request
    return {"singles": singles, "sequence": sequence}


def collect_policy_predict(ns):
    values, how, changed = committed(ns, "policy_predict", ("chat_unused_share", "chat_more_running"))
    return {"unused": values["chat_unused_share"], "more": values["chat_more_running"], "record": how,
            "changed_after_reveal": changed}


# ------------------------------------------------------------------ 11. loading, offloading

def collect_offload_step(ns):
    return {"offload_s": var(ns, "offload_seconds_per_step")}


def collect_replica_ready(ns):
    return {"ready_s": var(ns, "replica_ready_seconds")}


def collect_unready(ns):
    return {"unready_s": var(ns, "replica_unready_seconds"), "own_ready_s": var(ns, "replica_ready_seconds")}


# ------------------------------------------------------------------ 13-15. read the real log

# Start-up figures of other published vLLM logs (GiB as printed): total, utilization, weights, activation peak,
# non-torch, CUDA graphs counted in the budget (from v0.21; 0 before)
LOG_KV_CASES = [(79.19, 0.95, 14.99, 1.89, 0.25, 0.0), (79.19, 0.95, 50.72, 3.66, 0.26, 0.0),
                (39.56, 0.79, 6.25, 1.49, 0.09, 0.0), (191.98, 0.92, 8.58, 3.54, 0.13, 3.66),
                (14.74, 0.59, 5.6, 0.74, 0.03, 0.0)]
# (KV cache bytes, KV bytes per token, tokens per block) and (blocks, tokens per block, max_model_len)
BLOCK_CASES = [(round(61.66 * 2**30), 524_288, 16), (round(58.11 * 2**30), 65_536, 16),
               (round(2.39 * 2**30), 131_072, 16), (round(23.46 * 2**30), 114_688, 32)]
CONCURRENCY_CASES = [(7891, 16, 8192), (1224, 16, 1024), (13724, 16, 2048), (645227, 16, 131072)]
# Llama-3.1-8B's shape, for the MI300X log's tensor-parallel question
LLAMA31_8B = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8}


def collect_log_kv(ns):
    return {"kv": [call(ns, "kv_from_log", *case) for case in LOG_KV_CASES],
            "rest": var(ns, "a100_activation_and_non_torch_gib")}


def collect_log_blocks(ns):
    return {"blocks": [call(ns, "gpu_blocks", *case) for case in BLOCK_CASES],
            "concurrency": [call(ns, "max_concurrency", *case) for case in CONCURRENCY_CASES],
            "per_gpu": var(ns, "mi300x_kv_bytes_per_token_per_gpu"),
            "own_full": call(ns, "kv_bytes_per_token", dict(LLAMA31_8B), 2),
            "own_full_other": call(ns, "kv_bytes_per_token", dict(LLAMA31_8B), 1)}


def collect_log_predict(ns):
    values, how, changed = committed(ns, "log_predict", ("a100_predictions",))
    return {"predictions": values["a100_predictions"], "record": how, "changed_after_reveal": changed}


# ------------------------------------------------------------------ 16. the decision

def collect_decision(ns):
    return {"decision": var(ns, "decision"), "reason": var(ns, "decision_reason")}


# ------------------------------------------------------------------ 19-20. questions, explain it back

def collect_quick_check(ns):
    return {"q1": var(ns, "quick_check_1"), "q2": var(ns, "quick_check_2"), "q3": var(ns, "quick_check_3")}


def collect_explain_budget(ns):
    return {"budget": var(ns, "my_budget")}


#: grade_id of each test cell -> the name of its collector in this module.
COLLECTORS = {
    "test_predict": "collect_predict",
    "test_request_budget": "collect_request_budget",
    "test_weight_bytes": "collect_weight_bytes",
    "test_kv_cache": "collect_kv_cache",
    "test_gqa_dtype": "collect_gqa_dtype",
    "test_predict_measure": "collect_predict_measure",
    "test_measured_gap": "collect_measured_gap",
    "test_safe_requests": "collect_safe_requests",
    "test_plannable": "collect_plannable",
    "test_admission_rule": "collect_admission_rule",
    "test_policy_predict": "collect_policy_predict",
    "test_offload_step": "collect_offload_step",
    "test_replica_ready": "collect_replica_ready",
    "test_unready": "collect_unready",
    "test_log_kv": "collect_log_kv",
    "test_log_blocks": "collect_log_blocks",
    "test_log_predict": "collect_log_predict",
    "test_decision": "collect_decision",
    "test_quick_check": "collect_quick_check",
    "test_explain_budget": "collect_explain_budget",
}


def collect(grade_id, ns):
    """Run ``grade_id``'s collector on the namespace ``ns`` (what the hidden test does, outside a kernel)."""
    return globals()[COLLECTORS[grade_id]](ns)
