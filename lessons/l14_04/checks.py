"""Trusted scoring for every autograded answer of the L14.4 notebook: the grader's side only.

The hidden part of each test cell (:mod:`lessons.l14_04.collect`, copied into the notebook
by :mod:`autograder.hidden`) runs the learner's code on hidden inputs and records plain
values. ``CHECKS[grade_id].score(values)`` decides pass/fail on those values alone, in
the GRADER's process, and writes a message that points at what to look at without
giving the answer away. This module holds the expected answers; it is never readable
from a learner's kernel (the sandbox does not mount it, the learner's install does not
contain it). For stock ``nbgrader autograde`` the same check is copied into the hidden
test too (its stock-nbgrader part), which course-grade removes before a kernel runs it.

Expected values are worked here from the lesson and from published configs,
independently of the learner's code (and written out by hand in comments).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from autograder.answers import ERROR, NOT_PLAIN

from .collect import (ADMIT_CASES, BUDGET_CASES, FIT_CASES, KV_CONFIGS, KV_TOTAL_CASES, PLANNABLE_CASES, SAFE_CASES,
                      SEQUENCE, WEIGHT_CASES)

GB, GiB = 10**9, 2**30


@dataclass(frozen=True)
class Result:
    """passed: full points or none. message: what to look at (empty when passed)."""

    passed: bool
    message: str = ""


@dataclass(frozen=True)
class Check:
    grade_id: str
    score: Callable[[dict], Result]


# ------------------------------------------------------------------ helpers

def _problem(value: Any, name: str) -> str | None:
    """A message if ``value`` is an error marker or not a plain value."""
    if isinstance(value, dict) and ERROR in value:
        return value[ERROR]
    if isinstance(value, dict) and NOT_PLAIN in value:
        return f"{name} must be a plain Python value (int, float, str, bool, list, dict), not {value[NOT_PLAIN]}"
    return None


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def _close(v: Any, expected: float, rel: float = 1e-9, abs_: float = 1e-9) -> bool:
    return _is_number(v) and math.isfinite(v) and math.isclose(v, expected, rel_tol=rel, abs_tol=abs_)


def _whole(v: Any) -> bool:
    return type(v) is int or (type(v) is float and v.is_integer())


def _first_problem(values: dict) -> str | None:
    for name, value in values.items():
        message = _problem(value, name)
        if message:
            return message
        if isinstance(value, list):
            for item in value:
                message = _problem(item, name)
                if message:
                    return message
    return None


def _letter(v: Any, expected: str, name: str) -> Result:
    if type(v) is not str:
        return Result(False, f"{name} must be a plain string such as \"a\", \"b\" or \"c\"")
    if v.strip().lower() not in {"a", "b", "c"}:
        return Result(False, f"{name} must be one of \"a\", \"b\" or \"c\" (got {v!r})")
    if v.strip().lower() != expected:
        return Result(False, f"{name}: not that option; reread the matching paragraph of the lesson")
    return Result(True)


# ------------------------------------------------------- 1. the 24 GB budget

# BUDGET_CASES (device, weights, workspace, reserve) in GB -> left; FIT_CASES (budget, per request) -> fit:
# 24-14-2-2 = 6 -> 6/1.5 = 4 ; 80-40-4-8 = 28 -> 28/3 = 9.33 -> 9 ;
# 16-13-1-1 = 1 -> 1/0.5 = 2 ; 40-30-4-4 = 2 -> 2/2.5 = 0.8 -> 0 ; 10-11-0-0 = -1 -> 0
LEFT_EXPECTED = [6, 28, 1, 2, -1]
FIT_EXPECTED = [4, 9, 2, 0, 0]


def _score_request_budget(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    for (d, w, ws, r), got, left in zip(BUDGET_CASES, v["left"], LEFT_EXPECTED):
        if _close(got, left):
            continue
        if _close(got, d - w):
            return Result(False, "request_budget_gb: a budget of weights only. What else must come out of the device "
                                 "before requests get any memory?")
        if _close(got, d - w - ws) or _close(got, d - w - r):
            return Result(False, "request_budget_gb: one fixed pool is missing. Count every pool the lesson's "
                                 "24 GB example subtracts.")
        return Result(False, f"request_budget_gb{(d, w, ws, r)} is off; subtract the fixed pools from the device")
    for (left, per), got, fit in zip(FIT_CASES, v["fit"], FIT_EXPECTED):
        if not _whole(got):
            return Result(False, "requests_that_fit must return a whole number of requests (a part of a request "
                                 "cannot run)")
        if int(got) != fit:
            hint = " A negative budget fits no request." if left < 0 else " Round down: the next request would cross."
            return Result(False, f"requests_that_fit({left}, {per}) is off.{hint}")
    if not _close(v["left_gb"], 6):
        return Result(False, "left_gb should come from request_budget_gb on the lesson's 24 GB example")
    if not _whole(v["fit_count"]) or int(v["fit_count"]) != 4:
        return Result(False, "fit_count should come from requests_that_fit on the lesson's example")
    if type(v["fifth_crosses"]) is not bool or v["fifth_crosses"] is not True:
        return Result(False, "fifth_crosses must be a bool: does one more request than fit_count cross the budget?")
    return Result(True)


# --------------------------------------------------------- 2. weight bytes

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1, "int4": 0.5}


def _score_weight_bytes(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    for (params, dt), got in zip(WEIGHT_CASES, v["bytes"]):
        expected = int(params * DTYPE_BYTES[dt])  # e.g. 8,030,261,248 x 2 = 16,060,522,496
        if _close(got, expected, rel=1e-12):
            continue
        if _close(got, expected * 8, rel=1e-12):
            return Result(False, f"weight_bytes(..., {dt!r}) is 8x too large: bits or bytes per value?")
        return Result(False, f"weight_bytes(..., {dt!r}) is off; it is parameters x bytes per stored value")
    if not _whole(v["bytes"][0]):
        return Result(False, "weight_bytes must return a whole number of bytes")
    expected_gb = 8_030_261_248 * 2 / GB     # 16.06 GB
    expected_gib = 8_030_261_248 * 2 / GiB   # 14.96 GiB
    if _close(v["gb"], expected_gib, rel=1e-3) and _close(v["gib"], expected_gb, rel=1e-3):
        return Result(False, "llama3_weights_gb and llama3_weights_gib are swapped: which unit is 10^9 and which 2^30?")
    if not _close(v["gb"], expected_gb, rel=1e-3):
        return Result(False, "llama3_weights_gb: GB means 10^9 bytes")
    if not _close(v["gib"], expected_gib, rel=1e-3):
        return Result(False, "llama3_weights_gib: GiB means 2^30 bytes")
    return Result(True)


# ------------------------------------------------------ 3. KV bytes per token

KV_EXPECTED = {  # fp16 bytes per token of each KV_CONFIGS shape, worked by hand
    "llama-3-8b": 2 * 32 * 8 * 128 * 2,        # 131,072
    "llama-2-7b": 2 * 32 * 32 * 128 * 2,       # 524,288 (no num_key_value_heads: MHA)
    "qwen2-7b": 2 * 28 * 4 * 128 * 2,          # 57,344
    "gemma-2-9b": 2 * 42 * 8 * 256 * 2,        # 344,064 (head_dim 256 given, not 3584 / 16 = 224)
    "falcon-like-mqa": 2 * 32 * 1 * 64 * 2,    # 8,192
}


def _score_kv_per_token(v: dict) -> Result:
    fp16 = v.get("fp16")
    if not isinstance(fp16, dict):
        return Result(False, _problem(fp16, "kv_bytes_per_token") or "kv_bytes_per_token did not run")
    for name, cfg in KV_CONFIGS.items():
        expected = KV_EXPECTED[name]
        got = fp16.get(name)
        problem = _problem(got, "kv_bytes_per_token")
        if problem:
            return Result(False, problem)
        if _close(got, expected, rel=1e-12):
            continue
        heads = cfg["num_attention_heads"]
        kv = cfg.get("num_key_value_heads", heads)
        if _close(got, expected / 2, rel=1e-12):
            return Result(False, "kv_bytes_per_token is half of what the cache holds: what does each token store "
                                 "in every layer, besides its key?")
        if kv != heads and _close(got, expected * heads / kv, rel=1e-12):
            return Result(False, "kv_bytes_per_token counts too many heads: with grouped-query attention, which "
                                 "heads are cached? Look at num_key_value_heads")
        if _close(got, expected * 8, rel=1e-12):
            return Result(False, "kv_bytes_per_token is 8x too large: bits or bytes per value?")
        if "head_dim" in cfg and _close(got, expected * (cfg["hidden_size"] // heads) / cfg["head_dim"], rel=1e-12):
            return Result(False, "kv_bytes_per_token: when a config states head_dim, use it instead of "
                                 "hidden_size / num_attention_heads")
        if "num_key_value_heads" not in cfg:
            return Result(False, "kv_bytes_per_token fails on a config without num_key_value_heads: what does "
                                 "that mean for the number of KV heads?")
        return Result(False, f"kv_bytes_per_token is off for a {name} config; it is "
                             "2 x layers x KV heads x head_dim x bytes")
    if not _close(v.get("fp32"), 2 * 32 * 8 * 128 * 4, rel=1e-12):
        return Result(False, "kv_bytes_per_token must use its bytes_per_value argument")
    return Result(True)


# -------------------------------------------------------- 4. KV cache total

CARRIED = ("consistent with your kv_bytes_per_token, which Task 3 finds off: fix that one first "
           "(this question keeps its points)")


def _score_kv_total(v: dict) -> Result:
    problem = _first_problem({"bytes": v.get("bytes"), "lab_kv_gb": v.get("lab_kv_gb")})
    if problem:
        return Result(False, problem)
    own = v.get("own_per_token") if isinstance(v.get("own_per_token"), list) else []
    carried = False
    for i, ((name, b, t, s), got) in enumerate(zip(KV_TOTAL_CASES, v["bytes"])):
        per_token = KV_EXPECTED[name] // 2 * b
        if _close(got, per_token * t * s, rel=1e-12):
            continue
        # Error carried forward: right for the learner's own kv_bytes_per_token (Task 3 takes that loss).
        mine = own[i] if i < len(own) and type(own[i]) is int and own[i] > 0 else None
        if mine is not None and mine != per_token and _close(got, mine * t * s, rel=1e-12):
            carried = True
            continue
        base = mine or per_token
        if _close(got, base * t, rel=1e-12) and s != 1:
            return Result(False, "kv_cache_bytes does not grow with active_sequences: every active sequence "
                                 "keeps its own cache")
        if _close(got, base * s, rel=1e-12) and t != 1:
            return Result(False, "kv_cache_bytes does not grow with context_tokens: every cached token costs "
                                 "kv_bytes_per_token")
        return Result(False, f"kv_cache_bytes is off for a {name} config at {t} tokens x {s} sequences: it is "
                             f"kv_bytes_per_token(config, bytes_per_value) x tokens x sequences")
    # Llama-2-7B, 1024 tokens, 8 sequences: 524,288 x 1024 x 8 = 4,294,967,296 B = 4.295 GB
    lab, right = v["lab_kv_gb"], 4_294_967_296 / GB
    own_lab = v["bytes"][0] / GB if _is_number(v["bytes"][0]) else None   # KV_TOTAL_CASES[0] is the lab's setting
    if not _close(lab, right, rel=1e-3) and not (carried and _close(lab, own_lab, rel=1e-3)):
        if any(_close(lab, x * GB / GiB, rel=1e-3) for x in (right, own_lab) if x is not None):
            return Result(False, "lab_kv_gb: that is the figure in GiB (2^30 bytes); the lab reports GB (10^9 bytes)")
        return Result(False, "lab_kv_gb should be kv_cache_bytes for the lab's settings (Llama-2-7B, fp16, "
                             "1,024 tokens, 8 sequences), divided by GB")
    return Result(True, CARRIED if carried else "")


# -------------------------------------------------------- 5. GQA and dtype

def _score_gqa_dtype(v: dict) -> Result:
    problem = _first_problem({"ratio": v.get("ratio"), "fp8": v.get("fp8")})
    if problem:
        return Result(False, problem)
    # Llama-2-7B 524,288 / Llama-3-8B 131,072 = 4 (32 KV heads vs 8)
    if not _close(v["ratio"], 4.0, rel=1e-9):
        if _close(v["ratio"], 1.0):
            return Result(False, "mha_over_gqa_ratio: the two models have the same attention heads, but do they "
                                 "cache the same number of KV heads?")
        if _close(v["ratio"], 0.25):
            return Result(False, "mha_over_gqa_ratio is inverted: divide Llama-2-7B's (multi-head) KV bytes per "
                                 "token by Llama-3-8B's (GQA)")
        return Result(False, "mha_over_gqa_ratio: divide Llama-2-7B's KV bytes per token by Llama-3-8B's; what "
                             "differs between them is the number of KV heads")
    right, own = 2 * 32 * 8 * 128 * 1, v.get("own_fp8")     # 65,536
    carried = type(own) is int and own != right and _close(v["fp8"], own, rel=1e-12)
    if not _close(v["fp8"], right, rel=1e-12) and not carried:
        if _close(v["fp8"], right * 8, rel=1e-12):
            return Result(False, "llama3_fp8_kv_bytes_per_token: fp8 means 8 bits; how many bytes is that?")
        if _close(v["fp8"], right * 2, rel=1e-12):
            return Result(False, "llama3_fp8_kv_bytes_per_token: that is the fp16 figure; fp8 stores 1 byte per value")
        return Result(False, "llama3_fp8_kv_bytes_per_token: same formula as Task 3, one byte per value")
    return Result(True, CARRIED if carried else "")


# ---------------------------------------------------- 6-7. predict, then measure

# The notebook's small llama (hidden 512, intermediate 1408, 8 layers, 8 heads, 2 KV heads of 64, vocab 8000,
# untied), fp32, 4 sequences x 1,024 tokens, worked by hand:
#   per layer: q, o 512x512 = 262,144 each; k, v 512x128 = 65,536 each; MLP 3 x 512 x 1408 = 2,162,688;
#              2 norms x 512 = 1,024  ->  2,819,072;  x 8 layers = 22,552,576
#   embedding 8000 x 512 = 4,096,000; untied head 4,096,000; final norm 512  ->  30,745,088 params x 4 B
PREDICT_WEIGHTS = 122_980_352
#   KV: 2 (K and V) x 8 layers x 2 KV heads x 64 x 4 B = 8,192 B per token; x 1,024 tokens x 4 sequences
PREDICT_KV = 33_554_432
PREDICT_PARAMS = 30_745_088


def _score_predict_measure(v: dict) -> Result:
    problem = _first_problem({"weights": v.get("weights"), "kv_cache": v.get("kv_cache")})
    if problem:
        return Result(False, problem)
    w, kv, own = v["weights"], v["kv_cache"], v.get("own_kv_cache")
    for name, got in (("predicted_weights_bytes", w), ("predicted_kv_cache_bytes", kv)):
        if type(got) is not int:
            return Result(False, f"{name} must be an int of bytes (a prediction you can check to the byte)")
    if w != PREDICT_WEIGHTS:
        head = 8000 * 512 * 4
        if w == PREDICT_PARAMS:
            return Result(False, "predicted_weights_bytes is the parameter count: how many bytes is each value?")
        if w * 2 == PREDICT_WEIGHTS:
            return Result(False, "predicted_weights_bytes: the setting is fp32, 4 bytes per value")
        if w == PREDICT_WEIGHTS * 8:
            return Result(False, "predicted_weights_bytes is 8x too large: bits or bytes per value?")
        if w == PREDICT_WEIGHTS - head:
            return Result(False, "predicted_weights_bytes: the output head is not tied to the embeddings here "
                                 "(tie_word_embeddings is false): count its vocab x hidden values too")
        if w == PREDICT_WEIGHTS - (8 * 2 * 512 + 512) * 4:
            return Result(False, "predicted_weights_bytes: count the norms too (two per layer and a final one, "
                                 "hidden_size values each): exact means exact")
        if w == PREDICT_WEIGHTS + 8 * 2 * (512 * 512 - 512 * 128) * 4:
            return Result(False, "predicted_weights_bytes: k_proj and v_proj map hidden_size to KV heads x head_dim "
                                 "(2 x 64 here), not to hidden_size")
        return Result(False, "predicted_weights_bytes is off: count each matrix of the config (embedding, "
                             "q/k/v/o, the three MLP matrices, the norms, the head) x 4 bytes")
    carried = type(own) is int and own != PREDICT_KV and kv == own   # the learner's own kv_cache_bytes (Task 4)
    if kv != PREDICT_KV and not carried:
        if kv * 2 == PREDICT_KV:
            return Result(False, "predicted_kv_cache_bytes is half of it: every layer caches a key and a value, "
                                 "4 bytes each (fp32)")
        if kv == PREDICT_KV * 4:
            return Result(False, "predicted_kv_cache_bytes counts the 8 attention heads: only the 2 KV heads are "
                                 "cached")
        if kv * 4 == PREDICT_KV:
            return Result(False, "predicted_kv_cache_bytes: every one of the 4 sequences keeps its own cache")
        if kv == 8192 or kv == 8192 * 4:
            return Result(False, "predicted_kv_cache_bytes: that is per token; multiply by tokens and sequences")
        if kv == PREDICT_KV * 8:
            return Result(False, "predicted_kv_cache_bytes is 8x too large: bits or bytes per value?")
        return Result(False, "predicted_kv_cache_bytes is off: 2 x layers x KV heads x head_dim x bytes, "
                             "x tokens x sequences")
    return Result(True, "the KV cache is " + CARRIED if carried else "")


def _score_measured_gap(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    pool, reason = v["pool"], v["reason"]
    if type(pool) is not str or pool not in ("weights", "kv_cache", "workspace"):
        return Result(False, "largest_gap_pool must be one of \"weights\", \"kv_cache\" or \"workspace\"")
    if pool != "workspace":
        return Result(False, "largest_gap_pool: that pool follows from the config exactly (a count x bytes); "
                             "which pool has no exact formula?")
    return _letter(reason, "b", "gap_reason")


# ---------------------------------------------------- 6. free is not capacity

# SAFE_CASES (free, reserve, per_request) -> requests:
# (8-2)/1.5 = 4 ; (20-4)/3 = 5.33 -> 5 ; (3-2)/0.4 = 2.5 -> 2 ; (1-2) -> 0
SAFE_EXPECTED = [4, 5, 2, 0]


def _score_safe_requests(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    for (free, reserve, per), expected, got in zip(SAFE_CASES, SAFE_EXPECTED, v["n"]):
        if not _whole(got):
            return Result(False, "safe_requests must return a whole number of requests")
        if int(got) == expected:
            continue
        if int(got) == free // per:
            return Result(False, "safe_requests treats free memory as capacity: which memory must stay unfilled "
                                 "even when the device reports it free?")
        if expected == 0:
            return Result(False, "safe_requests: when the reserve is larger than what is free, how many can start?")
        return Result(False, f"safe_requests({free}, {reserve}, {per}) is off")
    return Result(True)


# (total, free, allocated, reserved, safety reserve) -> plannable = max(0, free - safety reserve):
# 18 - 8 = 10 GB ; 9 - 2 = 7 GB ; 3 - 4 < 0 -> 0 ; 100 - 14 = 86 GB
PLANNABLE_EXPECTED = [10 * GB, 7 * GB, 0, 86 * GB]


def _score_plannable(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    for (total, free, allocated, reserved, safety), expected, got in zip(PLANNABLE_CASES, PLANNABLE_EXPECTED,
                                                                          v["bytes"]):
        if not _whole(got):
            return Result(False, "plannable_bytes must return a whole number of bytes")
        if int(got) == expected:
            continue
        if int(got) < 0:
            return Result(False, "plannable_bytes: when the free memory is below the safety reserve, nothing "
                                 "may be planned (0), never a negative amount")
        if int(got) == free:
            return Result(False, "plannable_bytes: the safety reserve must stay unfilled, even when it is free")
        if int(got) in (free + reserved - allocated - safety, max(0, free + reserved - allocated - safety)):
            return Result(False, "plannable_bytes counts the pieces torch has cached (reserved - allocated): they "
                                 "may be split into blocks too small for one large allocation; plan only with "
                                 "what the device reports free")
        if int(got) in (total - allocated - safety, max(0, total - allocated - safety)):
            return Result(False, "plannable_bytes: total - allocated counts torch's cached pieces and memory "
                                 "outside torch (the CUDA context, other processes); start from what is free")
        if int(got) in (total - reserved - safety, max(0, total - reserved - safety)):
            return Result(False, "plannable_bytes: total - reserved counts memory outside torch (the CUDA "
                                 "context, other processes); start from what the device reports free")
        return Result(False, "plannable_bytes is off: which of these bytes are guaranteed for a new allocation?")
    return Result(True)


# ------------------------------------------------------- 7. admission rule

# ADMIT_CASES (request, in_use, safe_budget) -> decision
ADMIT_EXPECTED = [
    "admit",     # 1 GB into an empty 6 GB budget
    "admit",     # 5 + 1 = 6 GB lands exactly on the budget: still safe
    "queue",     # 5 + 2 = 7 GB crosses now, fits once something finishes
    "reject",    # 7 GB can never fit a 6 GB budget
    "reject",
    "admit",     # an empty request
]
# SEQUENCE: ten 550 MB requests in a 6 GB budget: 10 x 0.55 = 5.5 GB fits, the 11th would be 6.05 GB.
SEQUENCE_EXPECTED = ["admit"] * 10 + ["queue"]


def _score_admission(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    for (request, in_use, budget), expected, got in zip(ADMIT_CASES, ADMIT_EXPECTED, v["singles"]):
        if type(got) is not str or got not in {"admit", "queue", "reject"}:
            return Result(False, "admission_decision must return exactly one of the strings "
                                 "\"admit\", \"queue\" or \"reject\"")
        if got == expected:
            continue
        if expected == "admit" and in_use + request == budget:
            return Result(False, "admission_decision: a request that lands exactly on the safe budget is still "
                                 "inside it")
        if expected == "reject":
            return Result(False, "admission_decision: a request larger than the whole safe budget can never "
                                 "start; should it wait forever?")
        if expected == "queue":
            return Result(False, "admission_decision: this request fits the budget once running work finishes; "
                                 "is crashing or refusing it the safe choice?")
        return Result(False, f"admission_decision({request}, {in_use}, {budget}) is off")
    if len(SEQUENCE) != len(SEQUENCE_EXPECTED) or v["sequence"] != SEQUENCE_EXPECTED:
        return Result(False, "admission_decision: ten equal requests fill the budget; the eleventh should wait")
    return Result(True)


# --------------------------------------------------- 8. loading, offloading


def _score_offload_step(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    got, right = v["offload_s"], 10 / 31.5     # 10 GB / 31.5 GB/s = 0.3175 s per decode step
    if _close(got, right, rel=0.01):
        return Result(True)
    if not _is_number(got):
        return Result(False, "offload_seconds_per_step must be a number of seconds")
    if _close(got, right * 8, rel=0.01) or _close(got, right / 8, rel=0.01):
        return Result(False, "offload_seconds_per_step: both figures are in bytes (GB and GB/s): no factor 8")
    if _close(got, right * GiB / GB, rel=0.005) or _close(got, right * GB / GiB, rel=0.005):
        return Result(False, "offload_seconds_per_step: GB and GB/s here are both 10^9 bytes; a GiB (2^30) "
                             "slipped into one of them")
    if _close(got, 10 / 63, rel=0.01):
        return Result(False, "offload_seconds_per_step: 63 GB/s is PCIe Gen5; the question is about Gen4")
    if _close(got, 31.5 / 10, rel=0.01):
        return Result(False, "offload_seconds_per_step: time = bytes moved / bandwidth, not bandwidth / bytes")
    return Result(False, "offload_seconds_per_step: time = bytes moved / bandwidth")


def _score_replica_ready(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    # 14 GB / 2 GB/s = 7 s read + 14 GB / 25 GB/s = 0.56 s copy + 4 s init + 20 s capture + 8 s warm-up = 39.56 s
    got = v["ready_s"]
    if _close(got, 39.56, rel=0.002):
        return Result(True)
    if not _is_number(got):
        return Result(False, "replica_ready_seconds must be a number of seconds")
    # Slips are matched to 1e-4: each is exact arithmetic, and two of them are only 0.04 s apart
    # (no copy: 39.00 s; the 14 GB read as GiB: 39.04 s).
    if _close(got, 7.56, rel=1e-4):
        return Result(False, "replica_ready_seconds: moving the bytes is not all of it; what else happens before "
                             "the first request is served?")
    if _close(got, 32, rel=1e-4):
        return Result(False, "replica_ready_seconds: the weights still have to be read and copied to the GPU")
    if _close(got, 39.0, rel=1e-4):
        return Result(False, "replica_ready_seconds: the copy to the GPU (14 GB at 25 GB/s) takes time too")
    if _close(got, 32.56, rel=1e-4):
        return Result(False, "replica_ready_seconds: reading the weights from the disk (14 GB at 2 GB/s) takes time too")
    in_gib = 14 * GB / GiB                       # 13.04: the 14 GB read as GiB
    if any(_close(got, t, rel=1e-4) for t in (in_gib / 2 + in_gib / 25 + 32, 14 * GiB / GB / 2 + 14 * GiB / GB / 25 + 32)):
        return Result(False, "replica_ready_seconds: the weights are 14 GB (10^9 bytes) and the rates GB/s: a GiB "
                             "(2^30 bytes) slipped in")
    return Result(False, "replica_ready_seconds: add every phase of the readiness timeline")


def _score_ready_at_start(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    got = v["at_start"]
    if type(got) is not bool:
        return Result(False, f"ready_at_process_start must be True or False (a bool), not a {type(got).__name__}")
    if got:
        return Result(False, "ready_at_process_start: a process that has just started is still reading weights, "
                             "initialising the device and warming up; can it serve yet?")
    return Result(True)


# -------------------------------------------------------- 9. the pools

POOL_KINDS = {"weights": "fixed", "workspace": "fixed", "reserve": "fixed", "kv_cache": "grows",
              "request_state": "grows"}


def _score_pool_kinds(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    kinds = v["kinds"]
    if type(kinds) is not dict:
        return Result(False, "pool_kinds must be a dict from pool name to \"fixed\" or \"grows\"")
    missing = sorted(set(POOL_KINDS) - set(kinds))
    if missing:
        return Result(False, f"pool_kinds lacks {len(missing)} pool(s); the lesson names five")
    for name, kind in kinds.items():
        if type(kind) is not str or kind not in {"fixed", "grows"}:
            return Result(False, f"pool_kinds[{name!r}] must be \"fixed\" or \"grows\"")
    wrong = [name for name, kind in POOL_KINDS.items() if kinds[name] != kind]
    if wrong:
        return Result(False, f"pool_kinds: {len(wrong)} pool(s) classified wrongly; which ones change when one "
                             "more request starts?")
    # gpu_memory_utilization = 0.9 leaves 10% of 24 GB = 2.4 GB unfilled
    if not _close(v["reserve_gb"], 2.4, rel=1e-6):
        return Result(False, "vllm_default_reserve_gb: what share of the device does gpu_memory_utilization=0.9 "
                             "leave unfilled?")
    return Result(True)


# -------------------------------------------------- 10-12. questions, lab


def _score_predict(v: dict) -> Result:
    return Result(False, _problem(v["answer"], "predict_answer")) if _problem(v["answer"], "predict_answer") \
        else _letter(v["answer"], "a", "predict_answer")


def _score_quick_check(v: dict) -> Result:
    for i, expected in ((1, "c"), (2, "c"), (3, "a")):
        value = v.get(f"q{i}")
        problem = _problem(value, f"quick_check_{i}")
        if problem:
            return Result(False, problem)
        result = _letter(value, expected, f"quick_check_{i}")
        if not result.passed:
            return result
    return Result(True)


LAB_PARTS_8 = {"weights": 14.0, "workspace": 2.0, "reserve": 2.0, "kv_cache": 4.295}   # 8 x 0.537 GB
LAB_PARTS_16 = {"weights": 14.0, "workspace": 2.0, "reserve": 2.0, "kv_cache": 8.59}   # 16 x 0.537 GB


def _parts_match(got: Any, expected: dict) -> bool:
    return (type(got) is dict and set(got) == set(expected)
            and all(_close(got[k], expected[k], rel=2e-3) for k in expected))


def _score_lab_record(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    if not _parts_match(v["parts"], LAB_PARTS_8):
        return Result(False, "lab_parts_gb_at_8 should be the parts_gb dict the unchanged lab prints")
    if not _close(v["headroom"], 1.705, rel=2e-3):
        return Result(False, "lab_headroom_gb_at_8 should be the headroom_gb the unchanged lab prints")
    if type(v["prediction"]) is not str or v["prediction"] not in LAB_PARTS_8:
        return Result(False, "lab_prediction must be one of the part names: \"weights\", \"workspace\", "
                             "\"reserve\", \"kv_cache\"")
    if v["prediction"] != "kv_cache":
        return Result(False, "lab_prediction: that part is fixed; which one grows with active sequences?")
    return Result(True)


def _score_lab_after_edit(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    if _parts_match(v["parts"], LAB_PARTS_8):
        return Result(False, "lab_parts_gb_at_16 still shows 8 sequences: edit active_sequences in the lab file "
                             "and rerun it")
    if not _parts_match(v["parts"], LAB_PARTS_16):
        return Result(False, "lab_parts_gb_at_16 should be what the lab prints after changing only "
                             "active_sequences to 16")
    if v["fits"] is not False:
        return Result(False, "lab_fits_at_16 must be a bool: does the lab say the workload fits?")
    return Result(True)


# ----------------------------------------------------- 14. explain it back

REQUIRED_POOLS = {"weights": "fixed", "workspace": "fixed", "reserve": "fixed", "kv_cache": "grows"}


def _score_explain_budget(v: dict) -> Result:
    budget = v["budget"]
    problem = _problem(budget, "my_budget")
    if problem:
        return Result(False, problem)
    if type(budget) is not dict:
        return Result(False, "my_budget must be a dict (see the template in the cell)")
    for key in ("model", "dtype", "gpu", "context_tokens", "active_sequences", "pools", "headroom_bytes"):
        if key not in budget:
            return Result(False, f"my_budget lacks the key {key!r}")
    pools = budget["pools"]
    if type(pools) is not dict:
        return Result(False, "my_budget['pools'] must be a dict of pools")
    for name, kind in REQUIRED_POOLS.items():
        pool = pools.get(name)
        if type(pool) is not dict or "bytes" not in pool or "kind" not in pool:
            return Result(False, f"my_budget['pools'] needs a {name!r} pool with 'bytes' and 'kind'")
        if type(pool["bytes"]) is not int or pool["bytes"] < 0:
            return Result(False, f"my_budget['pools'][{name!r}]['bytes'] must be a non-negative int of bytes")
        if pool["kind"] != kind:
            return Result(False, f"my_budget: is the {name!r} pool fixed, or does it grow with active requests?")
    for name, pool in pools.items():
        if type(pool) is not dict or type(pool.get("bytes")) is not int or pool.get("kind") not in {"fixed", "grows"}:
            return Result(False, f"my_budget['pools'][{name!r}] needs an int 'bytes' and a kind of fixed/grows")
    # arithmetic, checked against the library (trusted, in the grader process)
    try:
        from course_lib import get_model, gpu_bytes, kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, weight_bytes
        spec = get_model(budget["model"])
        device = gpu_bytes(budget["gpu"])
        weights = weight_bytes(spec, budget["dtype"])
        kv_dtype = budget.get("kv_dtype", budget["dtype"])
        tokens, seqs = budget["context_tokens"], budget["active_sequences"]
        if type(tokens) is not int or type(seqs) is not int or tokens < 1 or seqs < 1:
            return Result(False, "my_budget: context_tokens and active_sequences must be ints >= 1")
        kv_capped = kv_cache_bytes_per_sequence(spec, tokens, kv_dtype) * seqs
        kv_plain = kv_cache_bytes_per_token(spec, kv_dtype) * tokens * seqs
    except ValueError as exc:
        return Result(False, f"my_budget: {exc}")
    if not math.isclose(pools["weights"]["bytes"], weights, rel_tol=0.02):
        return Result(False, "my_budget: the weights pool does not match parameters x bytes for that model and dtype")
    if not any(math.isclose(pools["kv_cache"]["bytes"], kv, rel_tol=0.01) for kv in (kv_capped, kv_plain)):
        return Result(False, "my_budget: the kv_cache pool does not match KV bytes per token x tokens x sequences")
    if pools["workspace"]["bytes"] == 0 or pools["reserve"]["bytes"] == 0:
        return Result(False, "my_budget: a real budget keeps some workspace and some reserve")
    total = sum(p["bytes"] for p in pools.values())
    if budget["headroom_bytes"] != device - total:
        return Result(False, "my_budget['headroom_bytes'] should be the device's bytes minus every pool")
    return Result(True)


# ------------------------------------------------------------------ registry

CHECKS: dict[str, Check] = {c.grade_id: c for c in (
    Check("test_request_budget", _score_request_budget),
    Check("test_weight_bytes", _score_weight_bytes),
    Check("test_kv_per_token", _score_kv_per_token),
    Check("test_kv_cache_total", _score_kv_total),
    Check("test_gqa_dtype", _score_gqa_dtype),
    Check("test_predict_measure", _score_predict_measure),
    Check("test_measured_gap", _score_measured_gap),
    Check("test_safe_requests", _score_safe_requests),
    Check("test_plannable", _score_plannable),
    Check("test_admission_rule", _score_admission),
    Check("test_offload_step", _score_offload_step),
    Check("test_replica_ready", _score_replica_ready),
    Check("test_ready_at_start", _score_ready_at_start),
    Check("test_pool_kinds", _score_pool_kinds),
    Check("test_predict", _score_predict),
    Check("test_lab_record", _score_lab_record),
    Check("test_lab_after_edit", _score_lab_after_edit),
    Check("test_quick_check", _score_quick_check),
    Check("test_explain_budget", _score_explain_budget),
)}


def score_answer(grade_id: str, values: Any) -> Result:
    """Score plain recorded values, as the grader does (:func:`autograder.answers.check_answer`)."""
    from autograder.answers import check_answer

    passed, message = check_answer(CHECKS, grade_id, values)
    return Result(passed, message)
