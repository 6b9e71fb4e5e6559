"""What a wrong answer to one of the L14.4 notebook's tasks most likely got wrong, in words: the slips.

The notebook's visible checks (what *Validate* runs) and the grader's hidden checks name a slip
with the same functions, so a learner who validates reads the same kind of message the grader
would write; the visible checks try the learner's code on the visible inputs only (their right
answers are worked out here, by hand, in comments), the hidden checks on inputs the learner
never sees (their answers live with the grader only).

Each ``*_slip`` function takes one input, the learner's value and the right value, and returns a
message naming the slip, or None when the value is right. Each ``check_*`` function runs a task's
visible inputs and raises :class:`AssertionError` with the first slip's message.

>>> kv_per_token_slip({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}, 8, 16)
'kv_bytes_per_token is half of what the cache holds: what does each token store in every layer, besides its key?'
>>> def attention_heads(config, b):      # every attention head counted, as if no head were shared
...     return 2 * config["num_hidden_layers"] * config["hidden_size"] * b
>>> check_kv_per_token(attention_heads)
Traceback (most recent call last):
...
AssertionError: kv_bytes_per_token counts too many heads: with grouped-query attention, which heads are cached? Look at num_key_value_heads
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

GB, GiB = 10**9, 2**30


def close(value: Any, expected: float, rel: float = 1e-9, abs_: float = 1e-9) -> bool:
    """A finite int or float within ``rel`` of ``expected`` (never a bool, a string or a subclass)."""
    return type(value) in (int, float) and math.isfinite(value) and math.isclose(value, expected, rel_tol=rel,
                                                                                 abs_tol=abs_)


def whole(value: Any) -> bool:
    """An int, or a float with no fractional part."""
    return type(value) is int or (type(value) is float and math.isfinite(value) and value.is_integer())


def _call(fn: Callable, *args) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - learner code may raise anything
        message = f"{getattr(fn, '__name__', 'the function')}{args} raised {type(exc).__name__}: {exc}"[:300]
        _require(message)
        return None


def grading() -> bool:
    """True while a grader (stock ``nbgrader autograde`` or course-grade) runs the notebook: then the hidden
    part of each test decides, and a visible check that fails must not stop the hidden part from recording
    (nbgrader sets NBGRADER_EXECUTION to "autograde"; *Validate* sets it to "validate" and sees every message)."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


def _require(message: str | None) -> None:
    if message and not grading():
        raise AssertionError(message)


def expect(condition: Any, message: str) -> None:
    """The visible checks' ``assert``: raises with ``message`` unless ``condition`` holds (or a grader runs)."""
    if not condition:
        _require(message)


# ------------------------------------------------------------------ Task 1: the request budget

def request_budget_slip(case: tuple, got: Any, expected: float) -> str | None:
    """case = (device, weights, workspace, reserve) in GB."""
    d, w, ws, r = case
    if close(got, expected):
        return None
    if close(got, d - w):
        return "request_budget_gb: a budget of weights only. What else must come out of the device before " \
               "requests get any memory?"
    if close(got, d - w - ws) or close(got, d - w - r):
        return "request_budget_gb: one fixed pool is missing. Count every pool the lesson's 24 GB example subtracts."
    return f"request_budget_gb{case} is off; subtract the fixed pools from the device"


def fit_slip(case: tuple, got: Any, expected: int) -> str | None:
    """case = (budget, per request) in GB."""
    left, per = case
    if not whole(got):
        return "requests_that_fit must return a whole number of requests (a part of a request cannot run)"
    if int(got) == expected:
        return None
    hint = " A negative budget fits no request." if left < 0 else " Round down: the next request would cross."
    return f"requests_that_fit({left}, {per}) is off.{hint}"


def check_request_budget(request_budget_gb: Callable, requests_that_fit: Callable) -> None:
    """The lesson's own example (24 - 14 - 2 - 2 = 6 GB; 6 / 1.5 = 4) and one more of each."""
    for case, expected in (((24, 14, 2, 2), 6), ((30, 20, 1, 3), 6)):
        _require(request_budget_slip(case, _call(request_budget_gb, *case), expected))
    for case, expected in (((6, 1.5), 4), ((3, 1), 3), ((-2, 1), 0)):
        _require(fit_slip(case, _call(requests_that_fit, *case), expected))


# ------------------------------------------------------------------ Task 2: weight bytes

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1, "int4": 0.5}


def weight_bytes_slip(case: tuple, got: Any) -> str | None:
    """case = (parameters, dtype)."""
    params, dt = case
    expected = int(params * DTYPE_BYTES[dt])
    if close(got, expected, rel=1e-12):
        return None if whole(got) else "weight_bytes must return a whole number of bytes"
    if close(got, expected * 8, rel=1e-12):
        return f"weight_bytes(..., {dt!r}) is 8x too large: bits or bytes per value?"
    return f"weight_bytes(..., {dt!r}) is off; it is parameters x bytes per stored value"


def units_slip(gb: Any, gib: Any, n_bytes: int, gb_name: str, gib_name: str) -> str | None:
    """The same bytes in GB (10^9) and GiB (2^30)."""
    right_gb, right_gib = n_bytes / GB, n_bytes / GiB
    if close(gb, right_gib, rel=1e-3) and close(gib, right_gb, rel=1e-3):
        return f"{gb_name} and {gib_name} are swapped: which unit is 10^9 bytes and which 2^30?"
    if not close(gb, right_gb, rel=1e-3):
        return f"{gb_name}: GB means 10^9 bytes"
    if not close(gib, right_gib, rel=1e-3):
        return f"{gib_name}: GiB means 2^30 bytes"
    return None


def check_weight_bytes(weight_bytes: Callable, llama3_weights_gb: Any, llama3_weights_gib: Any) -> None:
    """1,000 fp32 values are 4,000 bytes; 10 fp16 ones 20; Llama-3-8B's 8,030,261,248 fp16 parameters."""
    for case in ((1000, "fp32"), (10, "fp16"), (1000, "int4")):
        _require(weight_bytes_slip(case, _call(weight_bytes, *case)))
    _require(units_slip(llama3_weights_gb, llama3_weights_gib, 8_030_261_248 * 2, "llama3_weights_gb",
                        "llama3_weights_gib"))


# ------------------------------------------------------------------ Task 3: KV bytes per token

def kv_per_token_expected(config: dict, bytes_per_value: float) -> int:
    """2 x layers x KV heads x head_dim x bytes (the formula the lesson gives, worked the way it says)."""
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", config["hidden_size"] // heads)
    return int(2 * config["num_hidden_layers"] * kv * head_dim * bytes_per_value)


def kv_per_token_slip(config: dict, got: Any, expected: int) -> str | None:
    if close(got, expected, rel=1e-12):
        return None
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    if close(got, expected / 2, rel=1e-12):
        return "kv_bytes_per_token is half of what the cache holds: what does each token store in every layer, " \
               "besides its key?"
    if kv != heads and close(got, expected * heads / kv, rel=1e-12):
        return "kv_bytes_per_token counts too many heads: with grouped-query attention, which heads are cached? " \
               "Look at num_key_value_heads"
    if close(got, expected * 8, rel=1e-12):
        return "kv_bytes_per_token is 8x too large: bits or bytes per value?"
    if "head_dim" in config and close(got, expected * (config["hidden_size"] // heads) / config["head_dim"],
                                      rel=1e-12):
        return "kv_bytes_per_token: when a config states head_dim, use it instead of hidden_size / num_attention_heads"
    if "num_key_value_heads" not in config:
        return "kv_bytes_per_token is off for a config without num_key_value_heads: what does that mean for the " \
               "number of KV heads?"
    return "kv_bytes_per_token is off; it is 2 x layers x KV heads x head_dim x bytes"


#: The visible shapes: a tiny one, and GQA's and head_dim's kinds (right answers by hand beside each).
VISIBLE_KV_CONFIGS = (
    ({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}, 1),                         # 2x1x2x4x1 = 16
    ({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2}, 2),  # 2x2x2x8x2 = 128
    ({"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
      "head_dim": 32}, 4),                                                                           # 2x1x4x32x4 = 1,024
)


def check_kv_per_token(kv_bytes_per_token: Callable) -> None:
    for config, b in VISIBLE_KV_CONFIGS:
        _require(kv_per_token_slip(config, _call(kv_bytes_per_token, dict(config), b),
                                   kv_per_token_expected(config, b)))


# ------------------------------------------------------------------ Task 4: the KV cache of many sequences

def kv_total_slip(case: tuple, got: Any, per_token: int, name: str = "a") -> str | None:
    """case = (bytes per value, tokens, sequences); ``per_token`` the bytes per token to hold it to."""
    _, t, s = case
    if close(got, per_token * t * s, rel=1e-12):
        return None
    if close(got, per_token * t, rel=1e-12) and s != 1:
        return "kv_cache_bytes does not grow with active_sequences: every active sequence keeps its own cache"
    if close(got, per_token * s, rel=1e-12) and t != 1:
        return "kv_cache_bytes does not grow with context_tokens: every cached token costs kv_bytes_per_token"
    return (f"kv_cache_bytes is off for {name} config at {t} tokens x {s} sequences: it is "
            "kv_bytes_per_token(config, bytes_per_value) x tokens x sequences")


def gb_figure_slip(got: Any, right_gb: float, name: str, what: str) -> str | None:
    """A figure in GB (10^9 bytes)."""
    if close(got, right_gb, rel=1e-3):
        return None
    if close(got, right_gb * GB / GiB, rel=1e-3):
        return f"{name}: that is the figure in GiB (2^30 bytes); the lab reports GB (10^9 bytes)"
    return f"{name} should be {what}, divided by GB"


def check_kv_cache_total(kv_cache_bytes: Callable, kv_bytes_per_token: Callable, lab_kv_gb: Any) -> None:
    config = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8}
    own = _call(kv_bytes_per_token, dict(config), 2)
    per_token = own if type(own) is int and own > 0 else kv_per_token_expected(config, 2)
    for case in ((2, 2, 1), (2, 1, 3), (2, 4, 5)):
        _require(kv_total_slip(case, _call(kv_cache_bytes, dict(config), *case), per_token, "a Llama-3-8B"))
    expect(isinstance(lab_kv_gb, float), "lab_kv_gb should be a float number of GB")


# ------------------------------------------------------------------ Task 5: GQA and an fp8 cache

def gqa_ratio_slip(got: Any, expected: float) -> str | None:
    if close(got, expected, rel=1e-9):
        return None
    if close(got, 1.0):
        return "mha_over_gqa_ratio: the two models have the same attention heads, but do they cache the same " \
               "number of KV heads?"
    if close(got, 1 / expected):
        return "mha_over_gqa_ratio is inverted: divide Llama-2-7B's (multi-head) KV bytes per token by Llama-3-8B's (GQA)"
    return "mha_over_gqa_ratio: divide Llama-2-7B's KV bytes per token by Llama-3-8B's; what differs between them " \
           "is the number of KV heads"


def fp8_slip(got: Any, expected: int, name: str) -> str | None:
    if close(got, expected, rel=1e-12):
        return None
    if close(got, expected * 8, rel=1e-12):
        return f"{name}: fp8 means 8 bits; how many bytes is that?"
    if close(got, expected * 2, rel=1e-12):
        return f"{name}: that is the fp16 figure; fp8 stores 1 byte per value"
    return f"{name}: same formula as Task 3, one byte per value"


def check_gqa_dtype(mha_over_gqa_ratio: Any, llama3_fp8_kv_bytes_per_token: Any, kv_bytes_per_token: Callable) -> None:
    gqa = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8}
    mha = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32}
    if not close(mha_over_gqa_ratio, 4.0):       # 32 KV heads over 8: right, or carried from your Task 3
        own = _call(kv_bytes_per_token, dict(mha), 2), _call(kv_bytes_per_token, dict(gqa), 2)
        if not (type(own[0]) is int and type(own[1]) is int and own[1] and close(mha_over_gqa_ratio, own[0] / own[1])):
            _require(gqa_ratio_slip(mha_over_gqa_ratio, 4.0))
    own_fp8 = _call(kv_bytes_per_token, dict(gqa), 1)
    if not close(llama3_fp8_kv_bytes_per_token, own_fp8):
        _require(fp8_slip(llama3_fp8_kv_bytes_per_token, 65_536, "llama3_fp8_kv_bytes_per_token"))


# ------------------------------------------------------------------ Task 6: predict the small model

def check_predict_measure(predicted_weights_bytes: Any, predicted_kv_cache_bytes: Any) -> None:
    """The visible part can only check the kind of answer (the right figures are the task)."""
    for name, value in (("predicted_weights_bytes", predicted_weights_bytes),
                        ("predicted_kv_cache_bytes", predicted_kv_cache_bytes)):
        expect(type(value) is int, f"{name} must be an int of bytes (a prediction you can check to the byte)")
        expect(type(value) is not int or value > 0, f"{name} must be a positive number of bytes")
    if type(predicted_weights_bytes) is int and type(predicted_kv_cache_bytes) is int:
        expect(predicted_weights_bytes % 4 == 0,
               "predicted_weights_bytes: every fp32 parameter is 4 bytes, so the total is a multiple of 4")
        expect(predicted_kv_cache_bytes >= predicted_weights_bytes / 10,
               "predicted_kv_cache_bytes looks too small: 4 sequences x 1,024 tokens, every layer, keys and values")


# ------------------------------------------------------------------ letters: feedback per option

def letter_slip(value: Any, name: str, expected: str, why: dict[str, str], options: str = "abc") -> str | None:
    """None for the right letter; else what the chosen option gets wrong (``why[letter]``)."""
    if type(value) is not str:
        return f"{name} must be a plain string such as \"a\", \"b\" or \"c\""
    letter = value.strip().lower()
    if letter not in options:
        return f"{name} must be one of " + ", ".join(f'"{o}"' for o in options) + f" (got {value!r})"
    if letter == expected:
        return None
    return f"{name}: not {letter}. " + why.get(letter, "Reread the matching paragraph of the lesson.")


def check_letter(value: Any, name: str, options: str = "abc") -> None:
    """The visible part of a letter question: only the form (the letter is the question)."""
    expect(type(value) is str and value.strip().lower() in options,
           f"{name}: answer with one letter: " + ", ".join(f'"{o}"' for o in options))


# ------------------------------------------------------------------ Tasks 8-9: free is not capacity

def safe_requests_slip(case: tuple, got: Any, expected: int) -> str | None:
    """case = (free, workspace, reserve, per request)."""
    free, workspace, reserve, per = case
    if not whole(got):
        return "safe_requests must return a whole number of requests"
    if int(got) == expected:
        return None
    if int(got) == max(0, free // per):
        return "safe_requests treats free memory as capacity: which memory must stay unfilled even when the " \
               "device reports it free?"
    if workspace and int(got) == max(0, (free - reserve) // per):
        return "safe_requests forgets the workspace: the first forward pass takes it out of what is free now"
    if int(got) < 0:
        return "safe_requests: when the reserve is larger than what is free, how many can start? (never fewer than 0)"
    return f"safe_requests{case} is off"


def check_safe_requests(safe_requests: Callable) -> None:
    # (8 - 0 - 2) / 1.5 = 4 ; (10 - 2 - 2) / 2 = 3 ; (1 - 0 - 2) < 0 -> 0
    for case, expected in (((8 * GB, 0, 2 * GB, 1_500_000_000), 4), ((10 * GB, 2 * GB, 2 * GB, 2 * GB), 3),
                           ((1 * GB, 0, 2 * GB, GB), 0)):
        _require(safe_requests_slip(case, _call(safe_requests, *case), expected))


def plannable_slip(case: tuple, got: Any, expected: int) -> str | None:
    """case = (free, allocated, reserved, inactive_split, safety reserve)."""
    free, allocated, reserved, split, safety = case
    if not whole(got):
        return "plannable_bytes must return a whole number of bytes"
    got = int(got)
    if got == expected:
        return None
    if got < 0:
        return "plannable_bytes: when less is plannable than the safety reserve, nothing may be planned (0), " \
               "never a negative amount"
    cached = reserved - allocated
    if got == free or got == free + cached - split:
        return "plannable_bytes: the safety reserve must stay unfilled, even when it is free"
    if got == max(0, free - safety) and cached - split > 0:
        return "plannable_bytes leaves out torch's whole free segments: before an out-of-memory error the caching " \
               "allocator releases them to CUDA and retries, so they count as free"
    if got == max(0, free + cached - safety) and split > 0:
        return "plannable_bytes counts the inactive split blocks: they are free pieces inside segments that still " \
               "hold a live tensor, and no large allocation can use them"
    return "plannable_bytes is off: what is free on the device, plus what torch would release, less the reserve"


def check_plannable(plannable_bytes: Callable) -> None:
    # nothing cached: 18 - 8 = 10 GB; 9 GB cached of which 3 GB split: 18 + 6 - 8 = 16 GB; 1 - 6 < 0 -> 0
    for case, expected in (((18 * GB, 50 * GB, 50 * GB, 0, 8 * GB), 10 * GB),
                           ((18 * GB, 50 * GB, 59 * GB, 3 * GB, 8 * GB), 16 * GB),
                           ((1 * GB, 30 * GB, 30 * GB, 0, 6 * GB), 0)):
        _require(plannable_slip(case, _call(plannable_bytes, *case), expected))


# ------------------------------------------------------------------ Task 10: admission

def admission_slip(case: tuple, got: Any, expected: str) -> str | None:
    """case = (request, in use, safe budget)."""
    request, in_use, budget = case
    if type(got) is not str or got not in {"admit", "queue", "reject"}:
        return 'admission_decision must return exactly one of the strings "admit", "queue" or "reject"'
    if got == expected:
        return None
    if expected == "admit" and in_use + request == budget:
        return "admission_decision: a request that lands exactly on the safe budget is still inside it"
    if expected == "admit":
        return "admission_decision: this request fits next to what is running; why hold it back?"
    if expected == "reject":
        return "admission_decision: a request larger than the whole safe budget can never start; should it wait forever?"
    return "admission_decision: this request fits the budget once running work finishes; is refusing it the " \
           "safe choice, or admitting it now?"


def check_admission(admission_decision: Callable) -> None:
    for case, expected in (((1, 0, 10), "admit"), ((4, 8, 10), "queue"), ((11, 0, 10), "reject")):
        _require(admission_slip(case, _call(admission_decision, *case), expected))


# ------------------------------------------------------------------ Tasks 13-14: read the real log

def log_kv_expected(total: float, utilization: float, weights: float, activation: float, non_torch: float,
                    graphs: float = 0.0) -> float:
    """vLLM's rule, in GiB: total x gpu_memory_utilization - weights - activation peak - non-torch [- graphs]."""
    return total * utilization - weights - activation - non_torch - graphs


def log_kv_slip(case: tuple, got: Any) -> str | None:
    total, util, weights, act, nt, graphs = case
    expected = log_kv_expected(*case)
    if close(got, expected, rel=1e-6, abs_=1e-6):
        return None
    if close(got, total - weights - act - nt - graphs, rel=1e-6):
        return "kv_from_log uses the whole device: vLLM budgets total x gpu_memory_utilization, not the total"
    if close(got, total * util - weights, rel=1e-6):
        return "kv_from_log subtracts only the weights: the profile's activation peak and non-torch memory come " \
               "out of the budget too"
    if graphs and close(got, expected + graphs, rel=1e-6):
        return "kv_from_log: from v0.21 vLLM also takes its CUDA-graph estimate out of the budget"
    if close(got, total * (1 - util) - weights - act - nt - graphs, rel=1e-6):
        return "kv_from_log: gpu_memory_utilization is the share vLLM may use, not the share it leaves free"
    return "kv_from_log is off: total x gpu_memory_utilization - weights - activation peak - non-torch (- CUDA graphs)"


def check_log_kv(kv_from_log: Callable) -> None:
    """The T4 log's own terms: 14.74 x 0.89 - 6.02 - 0.90 - 0.05 (= 6.15 GiB; vLLM printed 6.22 from its
    unrounded utilization, 13.18 GiB of budget)."""
    _require(log_kv_slip((14.74, 0.89, 6.02, 0.90, 0.05, 0.0), _call(kv_from_log, 14.74, 0.89, 6.02, 0.90, 0.05)))
    _require(log_kv_slip((10.0, 0.9, 5.0, 1.0, 0.5, 0.5), _call(kv_from_log, 10.0, 0.9, 5.0, 1.0, 0.5, 0.5)))


def blocks_slip(case: tuple, got: Any) -> str | None:
    """case = (KV bytes, KV bytes per token, tokens per block)."""
    kv, per_token, block = case
    expected = kv // (per_token * block)
    if not whole(got):
        return "gpu_blocks must return a whole number of blocks (a part of a block holds nothing)"
    if int(got) == expected:
        return None
    if int(got) == kv // per_token:
        return "gpu_blocks counts tokens: a block holds block_size tokens"
    if int(got) == math.ceil(kv / (per_token * block)):
        return "gpu_blocks rounds up: a block that does not fit whole is not there"
    return "gpu_blocks is off: KV bytes // (bytes per token x tokens per block)"


def concurrency_slip(case: tuple, got: Any) -> str | None:
    """case = (blocks, tokens per block, max_model_len)."""
    blocks, block, length = case
    expected = blocks * block / length
    if close(got, expected, rel=1e-6):
        return None
    if whole(got) and int(got) == int(expected) and expected != int(expected):
        return "max_concurrency: vLLM prints the ratio itself (e.g. 5.73x), not rounded down"
    if close(got, blocks / length, rel=1e-6):
        return "max_concurrency: each block holds block_size tokens"
    return "max_concurrency is off: tokens the pool holds / tokens of one max_model_len request"


def check_log_blocks(gpu_blocks: Callable, max_concurrency: Callable) -> None:
    """The T4 log: 3,637 blocks of 16 tokens x 114,688 B (Llama-3.2-3B in fp16) = 6.22 GiB; 3637 x 16 / 2048."""
    kv = 3637 * 16 * 114_688
    _require(blocks_slip((kv, 114_688, 16), _call(gpu_blocks, kv, 114_688, 16)))
    _require(concurrency_slip((3637, 16, 2048), _call(max_concurrency, 3637, 16, 2048)))


# ------------------------------------------------------------------ Task 16: the decision

#: Words that name each lever a launch can pull, for the one-line reason.
LEVER_WORDS = {
    "weights": ("weight", "int4", "int8", "fp8", "quant", "awq", "gptq"),
    "kv_cache_dtype": ("kv", "cache", "fp8"),
    "max_num_seqs": ("seq", "slot", "sampler", "graph", "activation", "profile"),
    "gpu_memory_utilization": ("util", "share", "budget"),
    "max_model_len": ("len", "context"),
}


def levers(decision: dict) -> list[str]:
    """The levers a decision pulls, compared with vLLM's defaults for the lesson's launch."""
    pulled = []
    if decision.get("weights") not in (None, "checkpoint", "bf16", "fp16"):
        pulled.append("weights")
    if decision.get("kv_cache_dtype") not in (None, "auto"):
        pulled.append("kv_cache_dtype")
    if decision.get("max_num_seqs") not in (None, 256):
        pulled.append("max_num_seqs")
    if decision.get("gpu_memory_utilization") not in (None, 0.92):
        pulled.append("gpu_memory_utilization")
    return pulled


def reason_slip(reason: Any, decision: dict) -> str | None:
    if type(reason) is not str or not reason.strip():
        return "decision_reason must be one line of text saying why your launch serves the users"
    if "\n" in reason.strip() or len(reason) > 300:
        return "decision_reason: one line (under 300 characters), please"
    pulled = levers(decision) or ["max_model_len"]
    text = reason.lower()
    if not any(word in text for lever in pulled for word in LEVER_WORDS[lever]):
        return ("decision_reason: say what your change does to memory: which pool it shrinks or frees "
                f"(you changed {', '.join(pulled)})")
    return None
