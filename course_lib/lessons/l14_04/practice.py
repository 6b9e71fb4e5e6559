"""What a wrong answer to one of the L14.4 notebook's tasks most likely got wrong, in words: the slips.

The notebook's visible checks (what *Validate* runs) and the grader's hidden checks name a slip
with the same functions, so a learner who validates reads the same message the grader would write.
No function here computes a graded expected value or scores a graded decision (issue 41): each
``*_slip`` is *given* the right value, and the visible checks carry their own inputs with their
right values worked by hand beside them; the formulas of the graded values, and the rule that scores
the launch decision, live in the grader's package (``lessons/l14_04/checks.py``) only. The visible
checks try the learner's code on inputs of their own, never the graded ones, with the same edge cases (a boundary that ``<`` or ``<=`` decides, a quotient that does not
come out whole, a block only partly filled); single-value answers and predictions are the
grader's alone (a visible check on them would let a learner try values until one passes), so
their visible part checks the form of the answer only, or its agreement with the learner's own
functions.

Each ``*_slip`` function takes one input, the learner's value and the right value, and returns a
message naming the slip, or None when the value is right. Each ``check_*`` function runs a task's
visible inputs: on the first slip it raises :class:`CheckFailed`, which a notebook shows as its
message alone (no traceback, no source of this module); when every visible case passes it prints
one line saying so.

>>> kv_per_token_slip({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}, 8, 16)
'kv_bytes_per_token is half of what the cache holds: what does each token store in every layer, besides its key?'
>>> def attention_heads(config, b):      # every attention head counted, as if no head were shared
...     return 2 * config["num_hidden_layers"] * config["hidden_size"] * b
>>> check_kv_per_token(attention_heads)
Traceback (most recent call last):
...
course_lib.lessons.l14_04.practice.CheckFailed: kv_bytes_per_token counts too many heads: with grouped-query attention, which heads are cached? Look at num_key_value_heads
>>> CheckFailed("a message")._render_traceback_()
['CheckFailed: a message']
"""

from __future__ import annotations

import math
import os
import textwrap
from typing import Any, Callable

GB, GiB = 10**9, 2**30


def close(value: Any, expected: float, rel: float = 1e-9, abs_: float = 1e-9) -> bool:
    """A finite int or float within ``rel`` of ``expected`` (never a bool, a string or a subclass)."""
    return type(value) in (int, float) and math.isfinite(value) and math.isclose(value, expected, rel_tol=rel,
                                                                                 abs_tol=abs_)


def whole(value: Any) -> bool:
    """An int, or a float with no fractional part."""
    return type(value) is int or (type(value) is float and math.isfinite(value) and value.is_integer())


class CheckFailed(AssertionError):
    """A visible check that fails: an AssertionError (so *Validate* and *Run All* see an error) that a
    notebook shows as its message alone. IPython asks an exception for ``_render_traceback_`` before it
    formats a traceback, so no frame and no source line of this module reaches the learner."""

    def _render_traceback_(self) -> list[str]:
        # wrapped, so that Validate's dialog (a <pre> per failed cell) shows the whole message without scrolling
        return textwrap.wrap(f"CheckFailed: {self}", 88, break_on_hyphens=False)


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
        raise CheckFailed(message) from None


def passed(names: str, what: str = "looks right on the visible cases; the grader tries others") -> None:
    """The one line a check prints when every visible case passes (nothing while a grader runs)."""
    if not grading():
        print(f"\u2713 {names}: {what}")


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


#: (device, weights, workspace, reserve) in GB -> what is left; (budget, per request) in GB -> requests that
#: fit: a quotient that is not whole, one that lands exactly on the budget, a negative budget.
VISIBLE_BUDGETS = (((30, 20, 1, 3), 6), ((12, 5, 1.5, 0.5), 5), ((8, 9, 1, 0), -2))
VISIBLE_FITS = (((7, 2), 3), ((4.5, 1.5), 3), ((0.5, 1), 0), ((-2, 1), 0))


def check_request_budget(request_budget_gb: Callable, requests_that_fit: Callable) -> None:
    """Inputs of the visible check's own (the grader tries others)."""
    for case, expected in VISIBLE_BUDGETS:
        _require(request_budget_slip(case, _call(request_budget_gb, *case), expected))
    for case, expected in VISIBLE_FITS:
        _require(fit_slip(case, _call(requests_that_fit, *case), expected))
    passed("request_budget_gb and requests_that_fit")


# ------------------------------------------------------------------ Task 2: weight bytes

def weight_bytes_slip(case: tuple, got: Any, expected: int) -> str | None:
    """case = (parameters, dtype); ``expected`` its bytes."""
    params, dt = case
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


#: (parameters, dtype) -> bytes, worked by hand from the lesson's table: every dtype, a small count each, in the
#: grader's order of dtypes (fp16 first), so that a slip is named on the same dtype by both.
VISIBLE_WEIGHTS = (((10, "fp16"), 20), ((1000, "int4"), 500), ((1000, "fp32"), 4000), ((6, "bf16"), 12),
                   ((7, "int8"), 7))


def check_weight_bytes(weight_bytes: Callable, llama3_weights_gb: Any, llama3_weights_gib: Any) -> None:
    """Small counts of every dtype; the GB and GiB figures against the learner's own ``weight_bytes``
    (their units, not their value: the value is the grader's)."""
    for case, expected in VISIBLE_WEIGHTS:
        _require(weight_bytes_slip(case, _call(weight_bytes, *case), expected))
    own = _call(weight_bytes, 8_030_261_248, "fp16")
    if type(own) in (int, float) and math.isfinite(own) and own > 0:
        _require(units_slip(llama3_weights_gb, llama3_weights_gib, own, "llama3_weights_gb", "llama3_weights_gib"))
    else:
        expect(False, "llama3_weights_gb: weight_bytes(8_030_261_248, \"fp16\") gives no positive number of bytes")
    passed("weight_bytes, llama3_weights_gb and llama3_weights_gib")


# ------------------------------------------------------------------ Task 3: KV bytes per token

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


#: The visible shapes, tiny ones of each kind the grader tries (multi-head, grouped-query, one KV head, a
#: stated head_dim), with their bytes per token worked by hand. Each known slip gives each shape its own
#: figure: the stated head_dim (24) is neither hidden / heads (16) nor twice it, so ignoring it reads as
#: ignoring head_dim, never as a missing factor 2 (issue 41).
VISIBLE_KV_CONFIGS = (
    # 2 x 1 layer x 2 KV heads (none stated: multi-head) x 8 / 2 = 4 dims x 1 B = 16
    ({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}, 1, 16),
    # 2 x 2 layers x 2 KV heads x 64 / 8 = 8 dims x 2 B = 128
    ({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2}, 2, 128),
    # 2 x 3 layers x 1 KV head x 48 / 6 = 8 dims x 2 B = 96
    ({"hidden_size": 48, "num_hidden_layers": 3, "num_attention_heads": 6, "num_key_value_heads": 1}, 2, 96),
    # 2 x 1 layer x 4 KV heads x head_dim 24 (stated; 64 / 4 = 16 is not it) x 4 B = 768
    ({"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
      "head_dim": 24}, 4, 768),
)


def check_kv_per_token(kv_bytes_per_token: Callable) -> None:
    for config, b, expected in VISIBLE_KV_CONFIGS:
        _require(kv_per_token_slip(config, _call(kv_bytes_per_token, dict(config), b), expected))
    passed("kv_bytes_per_token")


# ------------------------------------------------------------------ Task 4: the KV cache of many sequences

def kv_total_slip(case: tuple, got: Any, expected: int, per_token: int, name: str = "a") -> str | None:
    """case = (bytes per value, tokens, sequences); ``expected`` the cache's bytes, ``per_token`` the bytes
    per token it is held to (the right one, or the learner's own: then ``expected`` is worked from it)."""
    _, t, s = case
    if close(got, expected, rel=1e-12):
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


#: The lab's model and settings, as the lab file states them (Llama-2-7B's shape, fp16, 1,024 tokens, 8 sequences).
LAB_CONFIG = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32}
LAB_SETTING = (2, 1024, 8)


def check_kv_cache_total(kv_cache_bytes: Callable, kv_bytes_per_token: Callable, lab_kv_gb: Any) -> None:
    """A small grouped-query shape (held to the learner's own ``kv_bytes_per_token``); ``lab_kv_gb`` against
    the learner's own ``kv_cache_bytes`` on the lab's setting (its unit, not its value: that is the grader's)."""
    config = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2}
    # worked by hand: 2 x 4 layers x 2 KV heads x 256 / 8 = 32 dims = 512 B per token per byte of value
    right = {1: 512, 2: 1024}
    for b, t, s in ((2, 3, 1), (2, 1, 3), (2, 5, 7), (1, 4, 2)):
        own = _call(kv_bytes_per_token, dict(config), b)
        per_token = own if type(own) is int and own > 0 else right[b]
        _require(kv_total_slip((b, t, s), _call(kv_cache_bytes, dict(config), b, t, s), per_token * t * s,
                               per_token, "a small"))
    expect(type(lab_kv_gb) in (int, float), "lab_kv_gb should be a number of GB")
    own_lab = _call(kv_cache_bytes, dict(LAB_CONFIG), *LAB_SETTING)
    if type(own_lab) in (int, float) and own_lab > 0:
        _require(gb_figure_slip(lab_kv_gb, own_lab / GB, "lab_kv_gb",
                                "kv_cache_bytes for the lab's settings (Llama-2-7B, fp16, 1,024 tokens, 8 sequences)"))
    passed("kv_cache_bytes and lab_kv_gb")


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
    """Both answers against the learner's own ``kv_bytes_per_token`` on the task's two shapes (what they
    are made of, not their values: those are the grader's)."""
    gqa = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8}
    mha = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32}
    own_mha, own_gqa = _call(kv_bytes_per_token, dict(mha), 2), _call(kv_bytes_per_token, dict(gqa), 2)
    expect(type(mha_over_gqa_ratio) in (int, float), "mha_over_gqa_ratio should be a number")
    if type(own_mha) in (int, float) and type(own_gqa) in (int, float) and own_mha > 0 and own_gqa > 0:
        _require(gqa_ratio_slip(mha_over_gqa_ratio, own_mha / own_gqa))
    own_fp8 = _call(kv_bytes_per_token, dict(gqa), 1)
    expect(type(llama3_fp8_kv_bytes_per_token) is int, "llama3_fp8_kv_bytes_per_token should be an int of bytes")
    if type(own_fp8) in (int, float) and own_fp8 > 0:
        _require(fp8_slip(llama3_fp8_kv_bytes_per_token, own_fp8, "llama3_fp8_kv_bytes_per_token"))
    passed("mha_over_gqa_ratio and llama3_fp8_kv_bytes_per_token", "agree with your kv_bytes_per_token; the grader "
           "checks the figures")


# ------------------------------------------------------------------ Task 6: predict the small model

def predict_measure_slip(values: dict) -> str | None:
    """What keeps Task 4's prediction from being made (its form only; the figures are the grader's)."""
    for name in ("predicted_weights_bytes", "predicted_kv_cache_bytes"):
        value = values.get(name)
        if type(value) is not int:
            return f"{name} must be an int of bytes (a prediction you can check to the byte)"
        if value <= 0:
            return f"{name} must be a positive number of bytes"
    return None


def policy_predict_slip(values: dict) -> str | None:
    """What keeps R5's prediction from being made (its form only)."""
    share = values.get("chat_unused_share")
    if type(share) not in (int, float) or not 0 <= share <= 1:
        return "chat_unused_share must be a share between 0 and 1"
    if values.get("chat_more_running") not in ("paged", "reserve-max", "same"):
        return 'chat_more_running must be one of "paged", "reserve-max" or "same"'
    return None


#: R6's keys: three directions and one figure in GiB.
LOG_PREDICT_KEYS = ("max_num_seqs=64", "max_num_batched_tokens=8192", "kv_cache_dtype=fp8")


def log_predict_slip(values: dict) -> str | None:
    """What keeps R6's prediction from being made (its form only)."""
    got = values.get("a100_predictions")
    if type(got) is not dict:
        return "a100_predictions must be a dict (see the template)"
    for key in LOG_PREDICT_KEYS:
        if got.get(key) not in ("more", "less", "same"):
            return f'a100_predictions[{key!r}] must be "more", "less" or "same"'
    if type(got.get("kv_cache_gib_at_utilization_0.20")) not in (int, float):
        return "a100_predictions['kv_cache_gib_at_utilization_0.20'] must be a number of GiB"
    return None


def check_predict_measure(predicted_weights_bytes: Any, predicted_kv_cache_bytes: Any) -> None:
    """The visible part can only check the kind of answer (the right figures are the task)."""
    _require(predict_measure_slip({"predicted_weights_bytes": predicted_weights_bytes,
                                   "predicted_kv_cache_bytes": predicted_kv_cache_bytes}))
    if type(predicted_weights_bytes) is int and type(predicted_kv_cache_bytes) is int:
        expect(predicted_weights_bytes % 4 == 0,
               "predicted_weights_bytes: every fp32 parameter is 4 bytes, so the total is a multiple of 4")
        expect(predicted_kv_cache_bytes >= predicted_weights_bytes / 10,
               "predicted_kv_cache_bytes looks too small: 4 sequences x 1,024 tokens, every layer, keys and values")
    passed("predicted_weights_bytes and predicted_kv_cache_bytes", "the right kind of answer; predictions are the "
           "grader's to check")


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
    passed(name, "one of the letters; the grader checks which")


# ------------------------------------------------------------------ single values: their form only

SINGLE_VALUE = "the right kind of answer; the grader checks the figure"


def check_number(value: Any, name: str, *, whole: bool = False, low: float | None = None,
                 high: float | None = None, what: str = "") -> None:
    """The visible part of a single-figure answer: a finite number (an int when ``whole``) in
    ``[low, high]``, never its value (a check on the value would let a learner try figures until one
    passes). ``what`` names the unit in the message, e.g. "seconds"."""
    kind = "an int" if whole else "a number"
    unit = f" of {what}" if what else ""
    ok = type(value) is int if whole else type(value) in (int, float) and math.isfinite(value)
    expect(ok, f"{name} must be {kind}{unit}")
    if ok and low is not None:
        expect(value >= low, f"{name} must be at least {low}{unit and ' ' + what}")
    if ok and high is not None:
        expect(value <= high, f"{name} must be at most {high}{unit and ' ' + what}")
    passed(name, SINGLE_VALUE)


def check_choice(value: Any, name: str, options: tuple[str, ...]) -> None:
    """The visible part of an answer that is one of a few words (a pool, "more"/"less"/"same"): the form only."""
    expect(type(value) is str and value in options, f"{name} must be one of " + ", ".join(map(repr, options)))
    passed(name, "one of the choices; the grader checks which")


def check_mapping(value: Any, name: str, keys: tuple[str, ...], values: tuple | None = None,
                  numbers: bool = False) -> None:
    """The visible part of a dict answer: exactly ``keys``, each value one of ``values`` (or a number when
    ``numbers``); never which."""
    expect(type(value) is dict, f"{name} must be a dict (see the template)")
    if type(value) is dict:
        expect(set(value) == set(keys), f"{name} must have exactly the keys " + ", ".join(map(repr, keys)))
        for key in keys:
            got = value.get(key)
            if values is not None:
                expect(got in values, f"{name}[{key!r}] must be one of " + ", ".join(map(repr, values)))
            elif numbers:
                expect(type(got) in (int, float), f"{name}[{key!r}] must be a number")
    passed(name, "the right form; the grader checks the entries")


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
    if reserve and int(got) == max(0, (free - workspace) // per):
        return "safe_requests forgets the reserve: it must stay unfilled even while the device reports it free"
    if int(got) < 0:
        return "safe_requests: when the reserve is larger than what is free, how many can start? (never fewer than 0)"
    if int(got) == expected + 1:
        return "safe_requests counts one request too many: a request that does not fit whole cannot start (round down)"
    return f"safe_requests{case} is off"


#: (free, workspace, reserve, per request) in bytes -> requests: not whole, exactly whole, nothing left.
VISIBLE_SAFE = (((12 * GB, 0, 3 * GB, 2 * GB), 4), ((9 * GB, 1 * GB, 2 * GB, 2 * GB), 3),
                ((2 * GB, 1 * GB, 2 * GB, 1 * GB), 0), ((7 * GB, 2 * GB, 1 * GB, 1_500_000_000), 2))


def check_safe_requests(safe_requests: Callable) -> None:
    for case, expected in VISIBLE_SAFE:
        _require(safe_requests_slip(case, _call(safe_requests, *case), expected))
    passed("safe_requests")


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
    if got in (max(0, free + reserved - split - safety), max(0, free + reserved - safety)):
        return "plannable_bytes: allocated bytes are not releasable: they hold live tensors; only reserved - " \
               "allocated is torch's cache"
    if got == max(0, free + cached + split - safety) and split > 0:
        return "plannable_bytes adds the inactive split blocks instead of leaving them out: they stay inside " \
               "segments that hold a live tensor"
    return "plannable_bytes is off: what is free on the device, plus what torch would release, less the reserve"


#: (free, allocated, reserved, inactive split, safety reserve) in bytes -> plannable bytes: nothing cached,
#: some cached of which some split, every cached byte split, less than the reserve.
VISIBLE_PLANNABLE = (((12 * GB, 40 * GB, 40 * GB, 0, 5 * GB), 7 * GB),
                     ((10 * GB, 40 * GB, 46 * GB, 2 * GB, 5 * GB), 9 * GB),
                     ((5 * GB, 20 * GB, 24 * GB, 4 * GB, 3 * GB), 2 * GB),
                     ((2 * GB, 20 * GB, 23 * GB, 1 * GB, 6 * GB), 0))


def check_plannable(plannable_bytes: Callable) -> None:
    for case, expected in VISIBLE_PLANNABLE:
        _require(plannable_slip(case, _call(plannable_bytes, *case), expected))
    passed("plannable_bytes")


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


#: (request, in use, safe budget) -> decision: room to spare, landing exactly on the budget, crossing it now,
#: a request the size of the whole budget next to a little in use, one larger than the budget.
VISIBLE_ADMISSION = (((1, 0, 10), "admit"), ((3, 7, 10), "admit"), ((4, 8, 10), "queue"), ((10, 1, 10), "queue"),
                     ((11, 0, 10), "reject"))


def check_admission(admission_decision: Callable) -> None:
    for case, expected in VISIBLE_ADMISSION:
        _require(admission_slip(case, _call(admission_decision, *case), expected))
    passed("admission_decision")


# ------------------------------------------------------------------ Tasks 13-14: read the real log

def log_kv_slip(case: tuple, got: Any, expected: float) -> str | None:
    """case = (total, utilization, weights, activation peak, non-torch, CUDA graphs) in GiB; ``expected`` the
    KV cache vLLM's rule gives for it."""
    total, util, weights, act, nt, graphs = case
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
    """The T4 log's own terms (the task works them), and a launch of the visible check's own with a CUDA-graph
    term. (Only the function is checked here; the A100 figure is the grader's.)"""
    # by hand: 14.74 x 0.89 = 13.1186; - 6.02 - 0.90 - 0.05 = 6.1486 | 10 x 0.9 = 9; - 5 - 1 - 0.5 - 0.5 = 2
    _require(log_kv_slip((14.74, 0.89, 6.02, 0.90, 0.05, 0.0), _call(kv_from_log, 14.74, 0.89, 6.02, 0.90, 0.05),
                         6.1486))
    _require(log_kv_slip((10.0, 0.9, 5.0, 1.0, 0.5, 0.5), _call(kv_from_log, 10.0, 0.9, 5.0, 1.0, 0.5, 0.5), 2.0))
    passed("kv_from_log")


def blocks_slip(case: tuple, got: Any, expected: int) -> str | None:
    """case = (KV bytes, KV bytes per token, tokens per block); ``expected`` its whole blocks."""
    kv, per_token, block = case
    if not whole(got):
        return "gpu_blocks must return a whole number of blocks (a part of a block holds nothing)"
    if int(got) == expected:
        return None
    if int(got) == kv // per_token:
        return "gpu_blocks counts tokens: a block holds block_size tokens"
    if int(got) == expected + 1 and kv % (per_token * block):
        return "gpu_blocks rounds up: a block that does not fit whole is not there"
    return "gpu_blocks is off: KV bytes // (bytes per token x tokens per block)"


def concurrency_slip(case: tuple, got: Any, expected: float) -> str | None:
    """case = (blocks, tokens per block, max_model_len); ``expected`` the concurrency vLLM prints for it."""
    blocks, block, length = case
    if close(got, expected, rel=1e-6):
        return None
    if whole(got) and int(got) == int(expected) and expected != int(expected):
        return "max_concurrency: vLLM prints the ratio itself (e.g. 5.73x), not rounded down"
    if close(got, blocks / length, rel=1e-6):
        return "max_concurrency: each block holds block_size tokens"
    return "max_concurrency is off: tokens the pool holds / tokens of one max_model_len request"


def check_log_blocks(gpu_blocks: Callable, max_concurrency: Callable) -> None:
    """The T4 log's blocks (whole, and with a partly filled block more), a block of 32 tokens, and its maximum
    concurrency. (Only the functions are checked here; the per-GPU figure is the grader's.)"""
    kv = 3637 * 16 * 114_688
    # by hand: 3,637 whole blocks; 12 tokens more fill no block; one byte more than 100 blocks of 32 x 1,024 B
    for case, expected in (((kv, 114_688, 16), 3637), ((kv + 12 * 114_688, 114_688, 16), 3637),
                           ((100 * 32 * 1024 + 1, 1024, 32), 100)):
        _require(blocks_slip(case, _call(gpu_blocks, *case), expected))
    # by hand: 3,637 x 16 / 2,048 = 28.4140625; 100 x 32 / 1,024 = 3.125
    for case, expected in (((3637, 16, 2048), 28.4140625), ((100, 32, 1024), 3.125)):
        _require(concurrency_slip(case, _call(max_concurrency, *case), expected))
    passed("gpu_blocks and max_concurrency")


# ------------------------------------------------------------------ the decision: a launch for 12 users
# What the learner needs for Task R7: the task's stated launch and requirements, the form of a decision,
# and the estimate of one launch (the measurement the learner reasons from). Whether a launch serves the
# 12 users, and whether the reason names its lever, is the grader's (lessons/l14_04/checks.py, issue 41).

#: The decision task's stated launch and requirements: Llama-3.1-8B on one RTX 4090, 12 users at once with
#: 8,192 tokens of context each.
DECISION_MODEL, DECISION_GPU, USERS, MIN_LEN = "llama-3.1-8b", "rtx-4090", 12, 8192
#: The release the decision is estimated on (the course's pinned vLLM: the CPU build its oracle runs, 0.32).
DECISION_VLLM_VERSION = "0.32"
#: The keys every decision has, and the levers it may add.
DECISION_KEYS = ("weights", "kv_cache_dtype", "max_model_len", "max_num_seqs", "gpu_memory_utilization",
                 "tensor_parallel")
OPTIONAL_DECISION_KEYS = ("enforce_eager", "max_num_batched_tokens")


def decision_form_slip(decision: Any) -> str | None:
    """What keeps ``decision`` from being a launch at all (not a dict, a key missing or of the wrong kind).

    >>> decision_form_slip({"weights": "checkpoint", "kv_cache_dtype": "auto"})
    'decision lacks max_model_len, max_num_seqs, gpu_memory_utilization, tensor_parallel'
    """
    if type(decision) is not dict:
        return "decision must be a dict (see the template)"
    missing = [k for k in DECISION_KEYS if k not in decision]
    if missing:
        return f"decision lacks {', '.join(missing)}"
    unknown = [k for k in decision if k not in DECISION_KEYS + OPTIONAL_DECISION_KEYS]
    if unknown:
        return f"decision: unknown key(s) {', '.join(map(repr, unknown))}; the levers are " + \
            ", ".join(DECISION_KEYS + OPTIONAL_DECISION_KEYS)
    for key in ("max_model_len", "max_num_seqs", "tensor_parallel"):
        if type(decision[key]) is not int:
            return f"decision[{key!r}] must be an int"
    if type(decision["gpu_memory_utilization"]) not in (int, float):
        return "decision['gpu_memory_utilization'] must be a number (a share of the total, such as 0.92)"
    if type(decision.get("enforce_eager", False)) is not bool:
        return "decision['enforce_eager'] must be True or False"
    if type(decision.get("max_num_batched_tokens", 0)) is not int and decision.get("max_num_batched_tokens") is not None:
        return "decision['max_num_batched_tokens'] must be an int (or None for the release's default)"
    return None


def requirement_slip(decision: dict) -> str | None:
    """Which of the task's *stated* requirements for taking the users' requests a decision (its form already
    checked) misses: one card, 8k context. (Read off the task's text; no estimate is involved. Whether the
    launch starts and serves the 12 is the grader's, from the estimate.)

    >>> requirement_slip({"tensor_parallel": 1, "max_model_len": 4096, "max_num_seqs": 16})
    'decision: the users need 8k context: max_model_len of at least 8,192'
    """
    if decision["tensor_parallel"] != 1:
        return "decision: one card means tensor_parallel 1"
    if decision["max_model_len"] < MIN_LEN:
        return f"decision: the users need 8k context: max_model_len of at least {MIN_LEN:,}"
    return None


def slots_slip(decision: dict) -> str | None:
    """The stated requirement of a slot for each of the 12 users (``max_num_seqs``), form already checked.

    >>> slots_slip({"max_num_seqs": 8})
    'decision: max_num_seqs 8 gives the 12 users only 8 slots'
    """
    if decision["max_num_seqs"] < USERS:
        return f"decision: max_num_seqs {decision['max_num_seqs']:,} gives the {USERS} users only " \
               f"{decision['max_num_seqs']} slots"
    return None


def reason_form_slip(reason: Any) -> str | None:
    """What keeps ``reason`` from being one line of text (its content is the grader's)."""
    if type(reason) is not str or not reason.strip():
        return "decision_reason must be one line of text saying why your launch serves the users"
    if "\n" in reason.strip() or len(reason) > 300:
        return "decision_reason: one line (under 300 characters), please"
    return None


def show_launch(decision: Any) -> str:
    """The line the decision task's cell prints: the launch as course_lib's estimate of vLLM's rule sizes it
    (the KV pool, the maximum concurrency for its max_model_len, the slots), or why vLLM would not start it.
    It says nothing about the 12 users: comparing the concurrency with what they need is the task."""
    form = decision_form_slip(decision)
    if form:
        return form
    return launch_plan(decision).verdict()


def launch_plan(decision: dict):
    """course_lib's estimate of the decision's launch under the task's pinned model, card and vLLM release (a
    :class:`~course_lib.views.vllm_explorer.LaunchPlan`: what the cell prints; the form is checked by the caller)."""
    from course_lib.views.vllm_explorer import plan_launch

    return plan_launch(model=DECISION_MODEL, gpu=DECISION_GPU, vllm_version=DECISION_VLLM_VERSION,
                       weights=decision["weights"], kv_cache_dtype=decision["kv_cache_dtype"],
                       max_model_len=decision["max_model_len"], max_num_seqs=decision["max_num_seqs"],
                       tensor_parallel=decision["tensor_parallel"],
                       gpu_memory_utilization=decision["gpu_memory_utilization"],
                       enforce_eager=decision.get("enforce_eager", False),
                       max_num_batched_tokens=decision.get("max_num_batched_tokens"))


def check_decision(decision: Any, decision_reason: Any) -> None:
    """The visible check of the decision: its form, the task's stated requirements and a one-line reason.
    Whether it serves the 12 users is the grader's (the cell above prints the estimate to judge it by)."""
    form = decision_form_slip(decision)
    _require(form)
    if not form:
        _require(requirement_slip(decision))
        _require(slots_slip(decision))
    _require(reason_form_slip(decision_reason))
    passed("decision and decision_reason", "a launch of the right form that meets the stated requirements; "
           "whether it serves 12 users with the estimate's margin is the grader's")
