"""Trusted scoring for every autograded answer of the L14.4 notebook: the grader's side only.

The hidden part of each test cell (:mod:`lessons.l14_04.collect`, copied into the notebook
by :mod:`autograder.source.hidden`) runs the learner's code on hidden inputs and records plain
values. ``CHECKS[grade_id].score(values)`` decides on those values alone, in the GRADER's
process, and writes a message that points at what to look at without giving the answer away.
This module holds the expected answers; it is never readable from a learner's kernel (the
sandbox does not mount it, the learner's install does not contain it). For stock ``nbgrader
autograde`` the same check is copied into the hidden test too (its stock-nbgrader part), which
course-grade removes before a kernel runs it.

Fair partial credit: a task with several sub-answers scores each on its own
(:func:`_parts`: a :class:`Result` with ``fraction``, the share of the points earned), and where a
later answer calls an earlier one (the lesson's Task 3: kv_cache_bytes calls kv_bytes_per_token, Task 4 may
use both; the runtime lab's R8c uses R8b's figure), an answer consistent with the learner's own earlier answer is
accepted ("carried forward"), so one misconception costs one question, but only from an earlier
function that depends on its inputs (:func:`_depends`): one that returns the same value whatever it is
given carries nothing (an all-7 hand-in scores 0). The slips are named by
:mod:`course_lib.lessons.l14_04.practice`, the same functions the notebook's visible checks (Validate) use.

Expected values are worked here from the lesson and from published configs and logs,
independently of the learner's code (and written out by hand in comments).
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass
from typing import Any, Callable

from course_lib.lessons.l14_04.practice import (MIN_LEN, USERS,
                                 admission_slip, blocks_slip, close, concurrency_slip, decision_form_slip,
                                 fit_slip, fp8_slip, headroom_slip,
                                 gb_figure_slip, gqa_ratio_slip, kv_per_token_slip, kv_total_slip, letter_slip,
                                 log_kv_slip, plannable_slip, reason_form_slip, request_budget_slip,
                                 requirement_slip, safe_requests_slips, slots_slip, unready_slip, units_slip, weight_bytes_slip,
                                 whole)

from autograder.contract.answers import ERROR, NOT_PLAIN

from .collect import (ADMIT_CASES, BLOCK_CASES, BUDGET_CASES, CONCURRENCY_CASES, FIT_CASES, KV_CONFIGS,
                      KV_TOTAL_CASES, LOG_KV_CASES, PLANNABLE_CASES, SAFE_CASES, SEQUENCE, WEIGHT_CASES)

GB, GiB = 10**9, 2**30


@dataclass(frozen=True)
class Result:
    """passed: full points. fraction: the share of the points earned when not passed (None: 0).
    message: what to look at (empty when passed, or a note such as an error carried forward)."""

    passed: bool
    message: str = ""
    fraction: float | None = None


@dataclass(frozen=True)
class Check:
    grade_id: str
    score: Callable[[dict], Result]


# ------------------------------------------------------------------ helpers

#: Every name of the notebook a hidden test calls or reads (collect.py's ``call``/``var`` names, which
#: test_checks holds this to): the only names of the learner's side a message may quote.
NOTEBOOK_NAMES = frozenset({
    "a100_activation_and_non_torch_gib", "a100_predictions", "admission_decision", "chat_more_running",
    "chat_unused_share", "decision", "decision_reason", "fifth_crosses", "fit_count", "gap_reason",
    "gpu_blocks", "kv_bytes_per_token", "kv_cache_bytes", "kv_from_log", "lab_kv_gb", "largest_gap_pool", "left_gb", "llama3_fp8_kv_bytes_per_token",
    "llama3_weights_gb", "llama3_weights_gib", "max_concurrency", "mha_over_gqa_ratio",
    "mi300x_kv_bytes_per_token_per_gpu", "my_budget", "offload_seconds_per_step", "plannable_bytes",
    "pool_kinds", "predict_answer", "predicted_kv_cache_bytes",
    "predicted_weights_bytes", "quick_check_1", "quick_check_2", "quick_check_3", "replica_ready_seconds",
    "replica_unready_seconds", "request_budget_gb", "requests_that_fit", "safe_requests",
    "weight_bytes"})
#: The text autograder.contract.answers writes for a name that is not there.
NOT_DEFINED = " is not defined (run its cell first)"


def _error_message(text: Any, name: str) -> str:
    """The grader's own words for an error marker recorded in the learner's kernel.

    The marker is text the learner's code can write (a function may return ``{"__error__": ...}``, an
    exception's message is the learner's): it is never shown as it is. Only its shape is read: a name
    the notebook defines (:data:`NOTEBOOK_NAMES`) that is not defined, or that raised a built-in exception.

    >>> _error_message("weight_bytes(1, 'fp16') raised ZeroDivisionError: division by zero", "bytes")
    'weight_bytes raised ZeroDivisionError on a hidden input: try it on inputs of your own'
    >>> _error_message("kv_cache_bytes is not defined (run its cell first)", "bytes")
    'kv_cache_bytes is not defined (run its cell first)'
    >>> _error_message("Full marks: see www.example.com", "left_gb")
    'left_gb could not be checked: its value was an error marker'
    """
    text = text if type(text) is str else ""
    for known in NOTEBOOK_NAMES:
        if text == known + NOT_DEFINED:
            return known + NOT_DEFINED
        if text.startswith(known + "(") and ") raised " in text:
            ename = text.split(") raised ", 1)[1].split(":", 1)[0]
            kind = getattr(builtins, ename, None)
            if isinstance(kind, type) and issubclass(kind, BaseException):
                return f"{known} raised {ename} on a hidden input: try it on inputs of your own"
            return f"{known} raised an error on a hidden input: try it on inputs of your own"
    return f"{name} could not be checked: its value was an error marker"


def _problem(value: Any, name: str) -> str | None:
    """A message if ``value`` is an error marker or not a plain value (in the grader's words: :func:`_error_message`)."""
    if isinstance(value, dict) and ERROR in value:
        return _error_message(value[ERROR], name)
    if isinstance(value, dict) and NOT_PLAIN in value:
        # (the marker's own text, a type's name, is the learner's to choose: not quoted)
        return f"{name} must be a plain Python value (int, float, str, bool, list, dict)"
    return None


def _first_problem(values: Any, name: str = "value") -> str | None:
    """The first error marker or non-plain value anywhere in ``values`` (a dict or a list of them)."""
    message = _problem(values, name)
    if message:
        return message
    if isinstance(values, dict):
        for key, value in values.items():
            message = _first_problem(value, key)
            if message:
                return message
    elif isinstance(values, list):
        for value in values:
            message = _first_problem(value, name)
            if message:
                return message
    return None


class Follows(str):
    """A part's message when it fails only because an earlier part of the same question failed: listed
    with the others, so the learner sees it, but never charged (one slip costs once).

    >>> _parts((1, "the launch does not start"), (1, Follows("so it serves nobody: fixed with the launch")))
    Result(passed=False, message='the launch does not start\\nso it serves nobody: fixed with the launch', fraction=0.5)
    """


def _parts(*parts: tuple[float, str | None], note: str = "") -> Result:
    """Sub-answers scored on their own: (weight, message or None when right) each. The message lists
    every failed part, one per line, in order (the grader shows each); a :class:`Follows` part is
    listed but keeps its points.

    >>> _parts((1, None), (1, "b is off"))
    Result(passed=False, message='b is off', fraction=0.5)
    >>> _parts((1, "a is off"), (1, None), (2, "c is off"))
    Result(passed=False, message='a is off\\nc is off', fraction=0.25)
    >>> _parts((1, "a is off"), (1, "a is off"), (1, None))
    Result(passed=False, message='a is off (2 parts)', fraction=0.3333333333333333)
    >>> _parts((1, None), (2, None), note="carried")
    Result(passed=True, message='carried', fraction=None)
    """
    total = sum(w for w, _ in parts)
    wrong = [m for _, m in parts if m]
    if not wrong:
        return Result(True, note)
    earned = sum(w for w, m in parts if not m or isinstance(m, Follows))
    # one slip that several parts share is said once, with how many parts it costs
    listed = [m if wrong.count(m) == 1 else f"{m} ({wrong.count(m)} parts)" for i, m in enumerate(wrong)
              if wrong.index(m) == i]
    return Result(False, "\n".join(listed), earned / total if total else 0.0)


def _first(*messages: str | None) -> str | None:
    return next((m for m in messages if m), None)


def carried_note(earlier: str) -> str:
    """The note on an answer scored against the learner's own (wrong) earlier answer.

    >>> carried_note("kv_bytes_per_token")
    'consistent with your kv_bytes_per_token, which its own task finds off: fix that one first (this question keeps its points)'
    """
    return (f"consistent with your {earlier}, which its own task finds off: fix that one first "
            "(this question keeps its points)")


def _own_int(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None


def _depends(*values: Any) -> bool:
    """True when the learner's function gave at least two different numbers on the different inputs the
    hidden test tried it on. A function that returns the same value whatever it is given (``return 7``)
    does not compute anything an answer could be consistent with: nothing is carried forward from it.

    >>> _depends(131_072, 524_288, 65_536), _depends(7, 7, 7), _depends(7, {"__error__": "x"}), _depends(1.5, 2)
    (True, False, False, True)
    """
    return len({v for v in values if type(v) in (int, float)}) > 1


# ------------------------------------------------------- predictions, as committed at their first reveal

def _as_committed(v: dict, score: Callable[[dict], Result], name: str) -> Result:
    """A prediction scored as the learner committed it at its first reveal (collect.committed: the record the
    reveal cell wrote), and said so where the notebook's value changed after the reveal. A record edited by
    hand (its checksum does not match) grades nothing: the prediction's first form is lost."""
    how = v.get("record")
    if how == "edited":
        return Result(False, f"{name}: the record of your prediction (l14-04-predictions.json) was changed by hand "
                             "after the reveal, so there is no committed prediction to grade")
    result = score(v)
    if how == "committed" and v.get("changed_after_reveal"):
        note = (f"{name}: graded as you committed it before its reveal; the value you set after the reveal is "
                "not graded")
        return Result(result.passed, "\n".join(m for m in (result.message, note) if m), result.fraction)
    return result


# ------------------------------------------------------- predict first (the lesson's question)

PREDICT_WHY = {
    "b": "The file on disk does not grow while the server runs: the weights were loaded once and fit.",
    "c": "A schema is a few kilobytes of text; it does not grow with requests.",
}


#: The framing question, asked with the Predict: which of the four pools are fixed, which grow with active requests.
#: (The per-request state of a runtime such as vLLM is reserved per slot, so the lesson asks about the four
#: pools of its budget only; expert review 2, A11.)
POOL_KINDS = {"weights": "fixed", "workspace": "fixed", "reserve": "fixed", "kv_cache": "grows"}


def _pool_kinds_slip(kinds: Any) -> str | None:
    if type(kinds) is not dict:
        return 'pool_kinds must be a dict from pool name to "fixed" or "grows"'
    if set(POOL_KINDS) - set(kinds):
        return f"pool_kinds lacks {len(set(POOL_KINDS) - set(kinds))} pool(s); the lesson names four"
    if any(type(kinds[k]) is not str or kinds[k] not in {"fixed", "grows"} for k in POOL_KINDS):
        return 'each kind in pool_kinds must be "fixed" or "grows"'
    wrong = [name for name, kind in POOL_KINDS.items() if kinds[name] != kind]
    if wrong:
        return (f"pool_kinds: {len(wrong)} pool(s) classified wrongly; which ones change when one more request "
                "starts?")
    return None


def _score_predict(v: dict) -> Result:
    return _as_committed(v, _score_predict_values, "predict_answer and pool_kinds")


def _score_predict_values(v: dict) -> Result:
    letter = _problem(v["answer"], "predict_answer") or letter_slip(v["answer"], "predict_answer", "a", PREDICT_WHY)
    kinds = _problem(v.get("kinds"), "pool_kinds") or _pool_kinds_slip(v.get("kinds"))
    return _parts((1, letter), (1, kinds))


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
    functions = _first(*(request_budget_slip(c, g, e) for c, g, e in zip(BUDGET_CASES, v["left"], LEFT_EXPECTED)),
                       *(fit_slip(c, g, e) for c, g, e in zip(FIT_CASES, v["fit"], FIT_EXPECTED)))
    # the example, carried forward from the learner's own request_budget_gb (their left for 24-14-2-2)
    own_left = v["left"][0] if type(v["left"][0]) in (int, float) and _depends(*v["left"]) else 6
    example = None
    if not (close(v["left_gb"], 6) or close(v["left_gb"], own_left)):
        example = "left_gb should come from request_budget_gb on the lesson's 24 GB example"
    elif not whole(v["fit_count"]) or int(v["fit_count"]) != max(0, math.floor(v["left_gb"] / 1.5 + 1e-9)):
        example = "fit_count should come from requests_that_fit(left_gb, 1.5) on the lesson's example"
    elif v["fifth_crosses"] is not True:
        example = "fifth_crosses must be a bool: does one more request than fit_count cross the budget?"
    return _parts((1, functions), (1, example))


# --------------------------------------------------------- 2. weight bytes

# WEIGHT_CASES' bytes, worked by hand: 8,030,261,248 x 2 ; x 0.5 ; 124,439,808 x 4 ; 6,738,415,616 x 2 ; x 1
WEIGHT_EXPECTED = [16_060_522_496, 4_015_130_624, 497_759_232, 13_476_831_232, 6_738_415_616]


def _score_weight_bytes(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    function = _first(*(weight_bytes_slip(c, g, e) for c, g, e in zip(WEIGHT_CASES, v["bytes"], WEIGHT_EXPECTED)))
    own = v["bytes"][0] if type(v["bytes"][0]) in (int, float) and v["bytes"][0] > 0 and _depends(*v["bytes"]) \
        else None
    units = units_slip(v["gb"], v["gib"], 8_030_261_248 * 2, "llama3_weights_gb", "llama3_weights_gib")
    if units and own is not None and own != 8_030_261_248 * 2 and \
            units_slip(v["gb"], v["gib"], own, "llama3_weights_gb", "llama3_weights_gib") is None:
        units = None                        # carried forward from the learner's own weight_bytes
    return _parts((1, function), (1, units), note=carried_note("weight_bytes") if function and not units else "")


# ------------------------------------------------------ 3. KV bytes per token

KV_EXPECTED = {  # fp16 bytes per token of each KV_CONFIGS shape, worked by hand
    "llama-3-8b": 2 * 32 * 8 * 128 * 2,        # 131,072
    "llama-2-7b": 2 * 32 * 32 * 128 * 2,       # 524,288 (no num_key_value_heads: MHA)
    "qwen2-7b": 2 * 28 * 4 * 128 * 2,          # 57,344
    "gemma-2-9b": 2 * 42 * 8 * 256 * 2,        # 344,064 (head_dim 256 given, not 3584 / 16 = 224)
    "falcon-like-mqa": 2 * 32 * 1 * 64 * 2,    # 8,192
    "gpt2": 2 * 12 * 12 * 64 * 2,              # 36,864 (MHA)
}
#: The three kinds of shape, one point each: plain multi-head (and bytes_per_value used), GQA/MQA, head_dim stated
KV_GROUPS = (("llama-2-7b", "gpt2"), ("llama-3-8b", "qwen2-7b", "falcon-like-mqa"), ("gemma-2-9b",))


def _score_kv_per_token(v: dict) -> Result:
    fp16 = v.get("fp16")
    if not isinstance(fp16, dict):
        return Result(False, _problem(fp16, "kv_bytes_per_token") or "kv_bytes_per_token did not run")
    parts = []
    for group in KV_GROUPS:
        message = None
        for name in group:
            got = fp16.get(name)
            message = _problem(got, "kv_bytes_per_token") or kv_per_token_slip(KV_CONFIGS[name], got, KV_EXPECTED[name])
            if message:
                break
        if group[0] == "llama-2-7b" and not message and not close(v.get("fp32"), 2 * 32 * 32 * 128 * 4, rel=1e-12):
            message = _problem(v.get("fp32"), "kv_bytes_per_token") or \
                "kv_bytes_per_token must use its bytes_per_value argument"
        parts.append((1, message))
    return _parts(*parts)


# -------------------------------------------------------- 4. KV cache total

def _score_kv_total(v: dict) -> Result:
    problem = _first_problem({"bytes": v.get("bytes"), "lab_kv_gb": v.get("lab_kv_gb")})
    if problem:
        return Result(False, problem)
    own = v.get("own_per_token") if isinstance(v.get("own_per_token"), list) and _depends(*v["own_per_token"]) else []
    carried, function = False, None
    for i, ((name, b, t, s), got) in enumerate(zip(KV_TOTAL_CASES, v["bytes"])):
        right = KV_EXPECTED[name] // 2 * b
        if kv_total_slip((b, t, s), got, right * t * s, right) is None:
            continue
        mine = _own_int(own[i]) if i < len(own) else None          # carried from Task 3
        if mine is not None and mine != right and kv_total_slip((b, t, s), got, mine * t * s, mine) is None:
            carried = True
            continue
        held = mine or right
        function = kv_total_slip((b, t, s), got, held * t * s, held, f"a {name}")
        break
    # Llama-2-7B, 1024 tokens, 8 sequences: 524,288 x 1024 x 8 = 4,294,967,296 B = 4.295 GB
    own_lab = v["bytes"][0] / GB if type(v["bytes"][0]) in (int, float) and _depends(*v["bytes"]) else None  # the lab's
    lab = gb_figure_slip(v["lab_kv_gb"], 4_294_967_296 / GB, "lab_kv_gb",
                         "kv_cache_bytes for the lab's settings (Llama-2-7B, fp16, 1,024 tokens, 8 sequences)")
    if lab and own_lab is not None and gb_figure_slip(v["lab_kv_gb"], own_lab, "lab_kv_gb", "") is None:
        lab, carried = None, True
    return _parts((1, function), (1, lab), note=carried_note("kv_bytes_per_token") if carried else "")


def _weighted(*results: tuple[float, Result]) -> Result:
    """Two questions scored as one: (points, Result) each; messages of the parts that are off, joined.

    >>> _weighted((3, Result(True)), (2, Result(False, "b is off", 0.5)))
    Result(passed=False, message='b is off', fraction=0.8)
    """
    total = sum(w for w, _ in results)
    earned = sum(w * (1.0 if r.passed else (r.fraction or 0.0)) for w, r in results)
    message = "; ".join(r.message for _, r in results if r.message)
    if all(r.passed for _, r in results):
        return Result(True, message)
    return Result(False, message, earned / total if total else 0.0)


def _score_kv_cache(v: dict) -> Result:
    """The lesson's Task 3: kv_bytes_per_token (3 points) and kv_cache_bytes with lab_kv_gb (2 points)."""
    total = _score_kv_total(v)
    if total.message == carried_note("kv_bytes_per_token"):       # the same question: say it plainly
        total = Result(total.passed, "kv_cache_bytes and lab_kv_gb are consistent with your kv_bytes_per_token and "
                                     "keep their points", total.fraction)
    return _weighted((3, _score_kv_per_token(v)), (2, total))


# -------------------------------------------------------- 5. GQA and dtype

def _score_gqa_dtype(v: dict) -> Result:
    problem = _first_problem({"ratio": v.get("ratio"), "fp8": v.get("fp8")})
    if problem:
        return Result(False, problem)
    # Llama-2-7B 524,288 / Llama-3-8B 131,072 = 4 (32 KV heads vs 8)
    ratio = gqa_ratio_slip(v["ratio"], 4.0)
    carried = False
    depends = _depends(v.get("own_mha"), v.get("own_gqa"), v.get("own_fp8"))
    mha, gqa = (_own_int(v.get("own_mha")), _own_int(v.get("own_gqa"))) if depends else (None, None)
    if ratio and mha and gqa and mha / gqa != 4.0 and close(v["ratio"], mha / gqa):
        ratio, carried = None, True
    fp8 = fp8_slip(v["fp8"], 2 * 32 * 8 * 128 * 1, "llama3_fp8_kv_bytes_per_token")    # 65,536
    own = _own_int(v.get("own_fp8")) if depends else None
    if fp8 and own and own != 65_536 and close(v["fp8"], own):
        fp8, carried = None, True
    return _parts((1, ratio), (1, fp8), note=carried_note("kv_bytes_per_token") if carried else "")


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


def _weights_prediction_slip(w: Any) -> str | None:
    if type(w) is not int:
        return "predicted_weights_bytes must be an int of bytes (a prediction you can check to the byte)"
    if w == PREDICT_WEIGHTS:
        return None
    head = 8000 * 512 * 4
    if w == PREDICT_PARAMS:
        return "predicted_weights_bytes is the parameter count: how many bytes is each value?"
    if w * 2 == PREDICT_WEIGHTS:
        return "predicted_weights_bytes: the setting is fp32, 4 bytes per value"
    if w == PREDICT_WEIGHTS * 8:
        return "predicted_weights_bytes is 8x too large: bits or bytes per value?"
    if w == PREDICT_WEIGHTS - head:
        return ("predicted_weights_bytes: the output head is not tied to the embeddings here "
                "(tie_word_embeddings is false): count its vocab x hidden values too")
    if w == PREDICT_WEIGHTS - (8 * 2 * 512 + 512) * 4:
        return ("predicted_weights_bytes: count the norms too (two per layer and a final one, hidden_size values "
                "each): exact means exact")
    if w == PREDICT_WEIGHTS + 8 * 2 * (512 * 512 - 512 * 128) * 4:
        return ("predicted_weights_bytes: k_proj and v_proj map hidden_size to KV heads x head_dim (2 x 64 here), "
                "not to hidden_size")
    return ("predicted_weights_bytes is off: count each matrix of the config (embedding, q/k/v/o, the three MLP "
            "matrices, the norms, the head) x 4 bytes")


def _kv_prediction_slip(kv: Any) -> str | None:
    if type(kv) is not int:
        return "predicted_kv_cache_bytes must be an int of bytes"
    if kv == PREDICT_KV:
        return None
    if kv * 2 == PREDICT_KV:
        return "predicted_kv_cache_bytes is half of it: every layer caches a key and a value, 4 bytes each (fp32)"
    if kv == PREDICT_KV * 4:
        return "predicted_kv_cache_bytes counts the 8 attention heads: only the 2 KV heads are cached"
    if kv * 4 == PREDICT_KV:
        return "predicted_kv_cache_bytes: every one of the 4 sequences keeps its own cache"
    if kv in (8192, 8192 * 4):
        return "predicted_kv_cache_bytes: that is per token; multiply by tokens and sequences"
    if kv == PREDICT_KV * 8:
        return "predicted_kv_cache_bytes is 8x too large: bits or bytes per value?"
    return "predicted_kv_cache_bytes is off: 2 x layers x KV heads x head_dim x bytes, x tokens x sequences"


def _score_predict_measure(v: dict) -> Result:
    return _as_committed(v, _score_predict_measure_values, "predicted_weights_bytes and predicted_kv_cache_bytes")


def _score_predict_measure_values(v: dict) -> Result:
    problem = _first_problem({"weights": v.get("weights"), "kv_cache": v.get("kv_cache")})
    if problem:
        return Result(False, problem)
    kv = _kv_prediction_slip(v["kv_cache"])
    carried = False
    # carried forward: the learner's own kv_cache_bytes (Task 4) or kv_bytes_per_token (Task 3) on this model
    own_total = _own_int(v.get("own_kv_cache")) if _depends(v.get("own_kv_cache"), v.get("own_kv_cache_other")) else None
    own_token = _own_int(v.get("own_per_token")) if _depends(v.get("own_per_token"), v.get("own_per_token_other")) \
        else None
    if kv and type(v["kv_cache"]) is int and v["kv_cache"] in {x for x in (own_total, own_token and own_token * 4096)
                                                              if x and x != PREDICT_KV}:
        kv, carried = None, True
    return _parts((1, _weights_prediction_slip(v["weights"])), (1, kv),
                  note="the KV cache is " + carried_note("kv_bytes_per_token") if carried else "")


GAP_WHY = {
    "a": "course_lib's weights column matches the measurement to the byte: the count is exact.",
    "c": "The KV cache was measured for the same 4 sequences the formula counts, and they agree.",
}


def _score_measured_gap(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    pool = v["pool"]
    if type(pool) is not str or pool not in ("weights", "kv_cache", "workspace"):
        pool_msg = 'largest_gap_pool must be one of "weights", "kv_cache" or "workspace"'
    elif pool != "workspace":
        pool_msg = ("largest_gap_pool: that pool follows from the config exactly (a count x bytes), as course_lib's "
                    "column shows; which pool has no exact formula?")
    else:
        pool_msg = None
    return _parts((1, pool_msg), (1, letter_slip(v["reason"], "gap_reason", "b", GAP_WHY)))


# ---------------------------------------------------- 8-9. free is not capacity

# SAFE_CASES (free, workspace, reserve, per_request) -> requests, worked by hand:
# (8-0-2)/1.5 = 4 ; (20-0-4)/3 = 5.33 -> 5 ; (1-0-2) < 0 -> 0 ;
# (8-1-2)/1.5 = 3.33 -> 3 ; (20-3-4)/3 = 4.33 -> 4 ; (3-1-1)/0.4 = 2.5 -> 2
SAFE_EXPECTED = [4, 5, 0, 3, 4, 2]


def _score_safe_requests(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    slips = safe_requests_slips(SAFE_CASES, v["n"], SAFE_EXPECTED)   # one slip, one message, on both parts
    no_workspace = _first(*(m for c, m in zip(SAFE_CASES, slips) if c[1] == 0))
    workspace = _first(*(m for c, m in zip(SAFE_CASES, slips) if c[1] != 0))
    return _parts((1, no_workspace), (1, workspace))


# PLANNABLE_CASES (free, allocated, reserved, inactive_split, safety) -> free + (reserved - allocated - split) -
# safety, never below 0: the caching allocator releases whole free segments and retries before an OOM
# (c10/cuda/CUDACachingAllocator.cpp, release_cached_blocks), split blocks inside live segments stay:
# 18+0-8 = 10 ; 3+0-4 < 0 -> 0 ; 18+(9-3)-8 = 16 ; 9+(3-3)-2 = 7 ; 100+(10-1)-14 = 95 ; 1+(6-2)-6 < 0 -> 0  (GB)
PLANNABLE_EXPECTED = [10 * GB, 0, 16 * GB, 7 * GB, 95 * GB, 0]


def _score_plannable(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    slips = [plannable_slip(c, g, e) for c, g, e in zip(PLANNABLE_CASES, v["bytes"], PLANNABLE_EXPECTED)]
    nothing_cached = _first(*(m for c, m in zip(PLANNABLE_CASES, slips) if c[1] == c[2]))
    cached = _first(*(m for c, m in zip(PLANNABLE_CASES, slips) if c[1] != c[2]))
    return _parts((1, nothing_cached), (1, cached))


# ------------------------------------------------------- 10. admission rule

# ADMIT_CASES (request, in_use, safe_budget) -> decision
ADMIT_EXPECTED = [
    "admit",     # 1 GB into an empty 6 GB budget
    "admit",     # 5 + 1 = 6 GB lands exactly on the budget: still safe
    "admit",     # an empty request
    "queue",     # 5 + 2 = 7 GB crosses now, fits once something finishes
    "queue",     # 6 GB fits an empty budget, not next to 1 byte in use
    "reject",    # 7 GB can never fit a 6 GB budget
    "reject",
]
# SEQUENCE: ten 550 MB requests in a 6 GB budget: 10 x 0.55 = 5.5 GB fits, the 11th would be 6.05 GB.
SEQUENCE_EXPECTED = ["admit"] * 10 + ["queue"]


def _score_admission(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    by_kind: dict[str, str | None] = {"admit": None, "queue": None, "reject": None}
    for case, expected, got in zip(ADMIT_CASES, ADMIT_EXPECTED, v["singles"]):
        by_kind[expected] = by_kind[expected] or admission_slip(case, got, expected)
    if len(v["sequence"]) != len(SEQUENCE) or v["sequence"] != SEQUENCE_EXPECTED:
        by_kind["queue"] = by_kind["queue"] or ("admission_decision: ten equal requests fill the budget; the eleventh "
                                                "should wait")
    return _parts(*((1, by_kind[k]) for k in ("admit", "queue", "reject")))


# Chat-like trace (course_lib.serving.scenario.comparison_trace: 400 requests, prompts 64-512, max_new_tokens 1,024,
# ~128-token answers) on the lesson's 6 GB KV budget: under reserve-max 66.8% of the allocated KV is reserved but
# never (or not yet) holding a token; paged runs at most 25 at once against reserve-max's 9
# (course_lib.simulate; tests/lesson/test_notebook.py recomputes both). By reasoning: each request reserves
# prompt + 1,024 but fills prompt + ~128, about (1,024 - 128) / (288 + 1,024) = 68% unused.
CHAT_UNUSED_SHARE = 0.668
CHAT_MORE = "paged"


def _score_policy_predict(v: dict) -> Result:
    return _as_committed(v, _score_policy_predict_values, "chat_unused_share and chat_more_running")


def _score_policy_predict_values(v: dict) -> Result:
    problem = _first_problem({"unused": v.get("unused"), "more": v.get("more")})
    if problem:
        return Result(False, problem)
    unused = v["unused"]
    if type(unused) not in (int, float) or not 0 <= unused <= 1:
        share = "chat_unused_share must be a share between 0 and 1 (0.5 is half)"
    elif abs(unused - CHAT_UNUSED_SHARE) <= 0.10:
        share = None
    elif unused > 1 - 1e-9 or unused < 0.1:
        share = ("chat_unused_share: a reserve-max request fills its prompt and its answer; what share of prompt + "
                 "max_new_tokens is that, for a ~128-token answer?")
    else:
        share = ("chat_unused_share is off by more than 10 percentage points: compare what a request reserves (prompt + "
                 "max_new_tokens) with what it fills (prompt + its answer)")
    more = v["more"]
    if more not in ("paged", "reserve-max", "same"):
        more_msg = 'chat_more_running must be "paged", "reserve-max" or "same"'
    else:
        more_msg = None if more == CHAT_MORE else (
            "chat_more_running: which policy keeps memory free for the tokens that never come?")
    return _parts((1, share), (1, more_msg))


# --------------------------------------------------- 11. loading, offloading

def _score_offload_step(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    got, right = v["offload_s"], 10 / 31.5     # 10 GB / 31.5 GB/s = 0.3175 s per decode step
    if close(got, right, rel=0.01):
        return Result(True)
    if type(got) not in (int, float):
        return Result(False, "offload_seconds_per_step must be a number of seconds")
    if close(got, right * 8, rel=0.01) or close(got, right / 8, rel=0.01):
        return Result(False, "offload_seconds_per_step: both figures are in bytes (GB and GB/s): no factor 8")
    if close(got, right * GiB / GB, rel=0.005) or close(got, right * GB / GiB, rel=0.005):
        return Result(False, "offload_seconds_per_step: GB and GB/s here are both 10^9 bytes; a GiB (2^30) "
                             "slipped into one of them")
    if close(got, 10 / 63, rel=0.01):
        return Result(False, "offload_seconds_per_step: 63 GB/s is PCIe Gen5; the question is about Gen4")
    if close(got, 31.5 / 10, rel=0.01):
        return Result(False, "offload_seconds_per_step: time = bytes moved / bandwidth, not bandwidth / bytes")
    return Result(False, "offload_seconds_per_step: time = bytes moved / bandwidth")


READY_S = 14 / 2 + 14 / 25 + 4 + 20 + 8      # 7 s read + 0.56 s copy + 4 init + 20 capture + 8 warm-up = 39.56 s


def _ready_slip(got: Any) -> str | None:
    if close(got, READY_S, rel=0.002):
        return None
    if type(got) not in (int, float):
        return "replica_ready_seconds must be a number of seconds"
    # Slips are matched to 1e-4: each is exact arithmetic, and two of them are only 0.04 s apart
    # (no copy: 39.00 s; the 14 GB read as GiB: 39.04 s).
    if close(got, 7.56, rel=1e-4):
        return ("replica_ready_seconds: moving the bytes is not all of it; what else happens before the first "
                "request is served?")
    if close(got, 32, rel=1e-4):
        return "replica_ready_seconds: the weights still have to be read and copied to the GPU"
    if close(got, 39.0, rel=1e-4):
        return "replica_ready_seconds: the copy to the GPU (14 GB at 25 GB/s) takes time too"
    if close(got, 32.56, rel=1e-4):
        return "replica_ready_seconds: reading the weights from the disk (14 GB at 2 GB/s) takes time too"
    in_gib = 14 * GB / GiB
    if any(close(got, t, rel=1e-4) for t in (in_gib / 2 + in_gib / 25 + 32, 14 * GiB / GB / 2 + 14 * GiB / GB / 25 + 32)):
        return ("replica_ready_seconds: the weights are 14 GB (10^9 bytes) and the rates GB/s: a GiB (2^30 bytes) "
                "slipped in")
    return "replica_ready_seconds: add every phase of the readiness timeline"


def _score_replica_ready(v: dict) -> Result:
    problem = _first_problem(v)
    if problem:
        return Result(False, problem)
    message = _ready_slip(v["ready_s"])
    return Result(message is None, message or "")


def _score_unready(v: dict) -> Result:
    problem = _first_problem({"unready_s": v.get("unready_s")})
    if problem:
        return Result(False, problem)
    got, own = v["unready_s"], v.get("own_ready_s")
    # traffic from 5 s after the process starts; ready at 39.56 s: 34.56 s of requests that cannot be served
    if close(got, READY_S - 5, rel=1e-3):
        return Result(True)
    if type(own) in (int, float) and not close(own, READY_S, rel=0.002) and close(got, own - 5, rel=1e-3):
        return Result(True, carried_note("replica_ready_seconds"))
    if type(got) not in (int, float):
        return Result(False, "replica_unready_seconds must be a number of seconds")
    slip = unready_slip(got, own) or unready_slip(got, READY_S)     # the visible check's words
    if slip:
        return Result(False, slip)
    return Result(False, "replica_unready_seconds: from when traffic arrives to when the replica is ready")


# -------------------------------------------------- 13-15. read the real log

def _log_kv_rule(total: float, utilization: float, weights: float, activation: float, non_torch: float,
                 graphs: float = 0.0) -> float:
    """vLLM's rule, in GiB: total x gpu_memory_utilization - weights - activation peak - non-torch [- graphs]
    (v0.10-v0.33 ``gpu_worker.py`` ``determine_available_memory``). Grader only: the expected value of R3."""
    return total * utilization - weights - activation - non_torch - graphs


def _score_log_kv(v: dict) -> Result:
    problem = _first_problem({"kv": v.get("kv")})
    function = problem or _first(*(log_kv_slip(c, g, _log_kv_rule(*c)) for c, g in zip(LOG_KV_CASES, v["kv"])))
    # the A100 log: 79.25 x 0.25 - 14.2488 (weights) - 5.01 (KV) = 0.5537 GiB of activation peak and non-torch
    rest = v.get("rest")
    rest_msg = _problem(rest, "a100_activation_and_non_torch_gib")
    if rest_msg is None and not close(rest, 79.25 * 0.25 - 14.2488 - 5.01, abs_=0.011):
        if close(rest, 79.25 - 14.2488 - 5.01, abs_=0.011):
            rest_msg = "a100_activation_and_non_torch_gib: vLLM's budget is 0.25 of the total, not the total"
        elif close(rest, 79.25 * 0.25 - 14.2488, abs_=0.011):
            rest_msg = "a100_activation_and_non_torch_gib: the KV cache (5.01 GiB) came out of the budget too"
        else:
            rest_msg = ("a100_activation_and_non_torch_gib: solve vLLM's rule for the terms the log does not print "
                        "(budget - weights - KV cache)")
    return _parts((1, function), (1, rest_msg))


def _score_log_blocks(v: dict) -> Result:
    problem = _first_problem({"blocks": v.get("blocks"), "concurrency": v.get("concurrency")})
    # whole blocks: KV bytes // (bytes per token x block); V0's concurrency: blocks x block / max_model_len
    functions = problem or _first(*(blocks_slip(c, g, c[0] // (c[1] * c[2])) for c, g in zip(BLOCK_CASES, v["blocks"])),
                                  *(concurrency_slip(c, g, c[0] * c[1] / c[2])
                                    for c, g in zip(CONCURRENCY_CASES, v["concurrency"])))
    # Llama-3.1-8B at TP 8: 8 KV heads / 8 GPUs = 1 head per GPU: 2 x 32 x 1 x 128 x 2 B = 16,384 B per token
    per_gpu = v.get("per_gpu")
    own = _own_int(v.get("own_full")) if _depends(v.get("own_full"), v.get("own_full_other")) else None
    per_msg = _problem(per_gpu, "mi300x_kv_bytes_per_token_per_gpu")
    carried = False
    if per_msg is None and not close(per_gpu, 16_384):
        if own and own != 131_072 and close(per_gpu, own / 8):
            carried = True
        elif close(per_gpu, 131_072):
            per_msg = ("mi300x_kv_bytes_per_token_per_gpu: that is the whole model's; tensor parallelism splits the KV "
                       "heads over the 8 GPUs")
        elif close(per_gpu, 131_072 / 32):
            per_msg = "mi300x_kv_bytes_per_token_per_gpu: the KV heads are split over the GPUs, the layers are not"
        else:
            per_msg = "mi300x_kv_bytes_per_token_per_gpu: Task 3's figure for Llama-3.1-8B, shared by 8 GPUs"
    return _parts((1, functions), (1, per_msg), note=carried_note("kv_bytes_per_token") if carried else "")


# The A100 log's launch (vLLM 0.10.1.1, Qwen2-7B, utilization 0.25, max_model_len 16,384) changed one knob at a
# time, as course_lib's estimate of vLLM's rule gives it (course-memory estimate --runtime vllm; within 10% on
# published logs; tests/lesson/test_notebook.py recomputes each):
# max_num_seqs 256 -> 64: the sampler's profile shrinks, the KV pool grows (4.92 -> 5.18 GiB): "more";
# max_num_batched_tokens 2,048 -> 8,192: the forward's profile grows (0.52 -> 1.03 GiB), the pool shrinks: "less";
# kv_cache_dtype fp8: on an A100 (SM 8.0) 0.10.x's V1 has no fp8 cache for its default FlashAttention backend
#   (vllm/platforms/cuda.py is_kv_cache_dtype_supported: FA3 on SM 9.x only), so _is_v1_supported_oracle falls back
#   to V0 (vllm/engine/arg_utils.py). V0 at 16k context does not chunk prefills: it profiles max(16,384, 2,048) =
#   16,384 tokens, not 2,048, and the activation peak grows (0.52 -> 2.06 GiB): the pool shrinks (4.92 -> 3.38 GiB,
#   126,464 tokens, not 2 x 93,872): "less" (expert review 2, A5);
# gpu_memory_utilization 0.25 -> 0.20: 0.05 x 79.25 = 3.96 GiB less budget: 5.01 - 3.96 = 1.05 GiB.
LOG_PREDICTIONS = {"max_num_seqs=64": "more", "max_num_batched_tokens=8192": "less", "kv_cache_dtype=fp8": "less"}
KV_AT_020 = 5.01 - 0.05 * 79.25


def _score_log_predict(v: dict) -> Result:
    return _as_committed(v, _score_log_predict_values, "a100_predictions")


def _score_log_predict_values(v: dict) -> Result:
    got = v.get("predictions")
    problem = _problem(got, "a100_predictions")
    if problem or type(got) is not dict:
        return Result(False, problem or "a100_predictions must be a dict (see the template)")
    parts = []
    for key, expected in LOG_PREDICTIONS.items():
        value = got.get(key)
        if value not in ("more", "less", "same"):
            parts.append((1, f'a100_predictions[{key!r}] must be "more", "less" or "same"'))
        elif value != expected and key == "kv_cache_dtype=fp8":
            parts.append((1, "a100_predictions['kv_cache_dtype=fp8']: the question is the pool's GiB, not its tokens; "
                             "which engine runs this launch on an A100, and how many tokens does its profile run?"))
        elif value != expected:
            parts.append((1, f"a100_predictions[{key!r}]: what does that knob change in the profile run, and what "
                             "does the profile take from the budget?"))
        else:
            parts.append((1, None))
    gib = got.get("kv_cache_gib_at_utilization_0.20")
    parts.append((1, None if close(gib, KV_AT_020, abs_=0.05) else
                  "a100_predictions['kv_cache_gib_at_utilization_0.20']: only the budget changes; by how many GiB?"))
    return _parts(*parts)


# ---------------------------------------------------------- 16. the decision

#: Words that name each lever a launch can pull, for the one-line reason.
LEVER_WORDS = {
    "weights": ("weight", "int4", "int8", "fp8", "quant", "awq", "gptq"),
    "kv_cache_dtype": ("kv", "cache", "fp8"),
    "max_num_seqs": ("seq", "slot", "sampler", "graph", "activation", "profile"),
    "gpu_memory_utilization": ("util", "share", "budget"),
    "max_model_len": ("len", "context"),
    "enforce_eager": ("eager", "graph"),
    "max_num_batched_tokens": ("batch", "token", "activation", "profile", "forward"),
}
#: course_lib's estimate of vLLM's KV pool is within 10% of the logged one on published start-up logs: a launch
#: serves the users only with that margin to spare (12 / 0.9 = 13.33x); within it the answer is "measure it".
DECISION_MARGIN = 0.10


def _levers(decision: dict) -> list[str]:
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
    if decision.get("enforce_eager"):
        pulled.append("enforce_eager")
    if decision.get("max_num_batched_tokens") is not None:
        pulled.append("max_num_batched_tokens")
    return pulled


def _reason_slip(reason: Any, decision: dict) -> str | None:
    form = reason_form_slip(reason)
    if form:
        return form
    pulled = _levers(decision) or ["max_model_len"]
    text = reason.lower()
    if not any(word in text for lever in pulled for word in LEVER_WORDS[lever]):
        return ("decision_reason: say what your change does to memory: which pool it shrinks or frees "
                f"(you changed {', '.join(pulled)})")
    return None


def _decision_estimate(decision: dict):
    """course_lib's estimate of vLLM 0.32's sizing of the decision's launch (a LaunchPlan; form checked): the
    one the learner's cell prints (practice.launch_plan), which says nothing of the users."""
    from course_lib.lessons.l14_04.practice import launch_plan

    return launch_plan(decision)


def _decision_parts(decision: dict) -> tuple[str | None, str | None]:
    """(what keeps the launch from taking the users' 8k requests, what keeps it from serving 12 of them), each
    None when that part holds; the form already checked. The rule, worked here from the estimate's own figures
    (the learner's cell prints the same figures, never this verdict):

    - takes the requests: one card and max_model_len >= 8,192 (the stated requirements, in the words of the
      visible check), and vLLM starts it (no refusal);
    - serves 12: a slot for each (max_num_seqs >= 12), and the maximum concurrency for 8,192-token requests
      (the estimate's, for its max_model_len, x max_model_len / 8,192) clears 12 with the estimate's 10% margin
      to spare: >= 13.33x. Within 10% of 12 the answer is "measure it", which the task counts as not serving.
    """
    stated = requirement_slip(decision)
    plan = None if decision["tensor_parallel"] != 1 else _decision_estimate(decision)
    if stated is None and not plan.starts:
        stated = f"decision: vLLM does not start: {plan.refusal}"[:300]
    if stated:
        # what follows for the users, in words that agree with the start-up line the learner's cell printed
        if plan is not None and plan.starts and decision["max_model_len"] < MIN_LEN:
            then = (f"decision: vLLM starts it, but requests of {MIN_LEN:,} tokens do not fit a max_model_len of "
                    f"{decision['max_model_len']:,}, so none of the users is served")
        elif decision["tensor_parallel"] != 1:
            then = "decision: it does not run on the one card, so it serves nobody"
        else:
            then = "decision: it does not start, so it serves nobody"
        return stated, then
    slots = slots_slip(decision)
    if slots:
        return None, slots
    e = plan.estimate
    concurrency = e.max_concurrency * e.launch["max_model_len"] / MIN_LEN
    estimate = (f"course_lib's estimate of vLLM's rule (within {DECISION_MARGIN:.0%} on published logs) gives "
                f"{concurrency:.2f}x for {MIN_LEN:,}-token requests")
    if concurrency * (1 - DECISION_MARGIN) >= USERS:
        return None, None
    if concurrency * (1 + DECISION_MARGIN) >= USERS:
        return None, (f"decision: {estimate}, within {DECISION_MARGIN:.0%} of {USERS}: too close to promise; start "
                      "it and read vLLM's 'Maximum concurrency' line, or leave more headroom")[:400]
    return None, (f"decision: vLLM would run {min(int(concurrency), decision['max_num_seqs'])} requests of "
                  f"{MIN_LEN:,} tokens at once, not {USERS} ({estimate})")[:400]


def _score_decision(v: dict) -> Result:
    """Three parts: the launch takes 8k requests (it starts, one card, max_model_len >= 8,192), it serves 12 of
    them at once with the estimate's 10% margin to spare (course_lib's estimate of vLLM's rule for the pinned
    release, within 10% on published logs; a launch within the margin is answered "measure it"), and the reason.
    The rule is :func:`_decision_parts`, here in the grader's package only (issue 41)."""
    decision, reason = v.get("decision"), v.get("reason")
    problem = _problem(decision, "decision")
    if problem:
        return Result(False, problem)
    form = decision_form_slip(decision)
    if form:
        return Result(False, form)
    starts, serves = _decision_parts(decision)
    if starts:   # what follows for the users is listed, not charged again (one slip costs once)
        serves = Follows(f"{serves} (this part is not charged again: fix the launch first)")
    return _parts((1, starts), (1, serves), (1, _reason_slip(reason, decision)))


# ------------------------------------------------------------ 19. Quick Check

QUICK_CHECK = {
    1: ("b", {"a": "safetensors files are not compressed: loaded weights take what the file holds (cast to the "
                   "served dtype at most).",
              "c": "vLLM's dtype='auto' serves the checkpoint's own 16-bit dtype; and a cast would not explain "
                   "memory that grows while serving."}),
    2: ("b", {"a": "Letting the operating system recover the GPU means the shared model process crashes first: an "
                   "out-of-memory error takes every running request with it. Admission decides before that.",
              "c": "vLLM preallocates its KV pool at start: nvidia-smi shows it used by design, free or not."}),
    3: ("a", {"b": "Prefetching can hide some transfer time, never all of it when every step needs the bytes.",
              "c": "Offloading moves bytes to host memory; it helps when the device, not the host, is short."}),
}


def _score_quick_check(v: dict) -> Result:
    parts = []
    for i, (expected, why) in QUICK_CHECK.items():
        value = v.get(f"q{i}")
        parts.append((1, _problem(value, f"quick_check_{i}") or letter_slip(value, f"quick_check_{i}", expected, why)))
    return _parts(*parts)


# ----------------------------------------------------- 20. explain it back

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
    shape = None
    for name, kind in REQUIRED_POOLS.items():
        pool = pools.get(name)
        if type(pool) is not dict or "bytes" not in pool or "kind" not in pool:
            return Result(False, f"my_budget['pools'] needs a {name!r} pool with 'bytes' and 'kind'")
        if type(pool["bytes"]) is not int or pool["bytes"] < 0:
            return Result(False, f"my_budget['pools'][{name!r}]['bytes'] must be an int >= 0")
        if pool["kind"] != kind:
            shape = shape or f"my_budget['pools'][{name!r}]: is it fixed, or does it grow with active requests?"
    for name, pool in pools.items():
        if type(pool) is not dict or type(pool.get("bytes")) is not int or pool.get("kind") not in {"fixed", "grows"}:
            return Result(False, f"my_budget['pools'][{name!r}] needs an int 'bytes' and a kind of fixed/grows")
    if pools["workspace"]["bytes"] == 0 or pools["reserve"]["bytes"] == 0:
        shape = shape or "my_budget: a real budget keeps some workspace and some reserve"
    # arithmetic, checked against the library (trusted, in the grader process)
    try:
        from course_lib import get_model, gpu_bytes, kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, weight_bytes
        spec = get_model(budget["model"])
        device = gpu_bytes(budget["gpu"])
        weights = weight_bytes(spec, budget["dtype"])
        # the KV dtype: the one given, else the weights' dtype or (for quantized weights) the compute dtype
        compute = spec.quantization.compute_dtype if spec.quantization is not None else budget["dtype"]
        kv_dtypes = {d for d in (budget.get("kv_dtype"), budget["dtype"], compute) if d} \
            if "kv_dtype" not in budget else {budget["kv_dtype"]}
        tokens, seqs = budget["context_tokens"], budget["active_sequences"]
        if type(tokens) is not int or type(seqs) is not int or tokens < 1 or seqs < 1:
            return Result(False, "my_budget: context_tokens and active_sequences must be ints >= 1")
        kv_options = {kv_cache_bytes_per_sequence(spec, tokens, dt) * seqs for dt in kv_dtypes} | \
                     {kv_cache_bytes_per_token(spec, dt) * tokens * seqs for dt in kv_dtypes}
    except (ValueError, TypeError, AttributeError) as exc:       # CourseInputError is a ValueError
        return Result(False, f"my_budget: {exc}"[:300])
    arithmetic = None
    if not math.isclose(pools["weights"]["bytes"], weights, rel_tol=0.02):
        arithmetic = "my_budget: the weights pool does not match parameters x bytes for that model and dtype"
    elif not any(math.isclose(pools["kv_cache"]["bytes"], kv, rel_tol=0.01) for kv in kv_options):
        arithmetic = "my_budget: the kv_cache pool does not match KV bytes per token x tokens x sequences"
    total = sum(p["bytes"] for p in pools.values())
    headroom = headroom_slip(budget, device)     # the visible check's words (practice.headroom_slip)
    return _parts((1, shape), (1, arithmetic), (1, headroom))


# ------------------------------------------------------------------ registry

CHECKS: dict[str, Check] = {c.grade_id: c for c in (
    Check("test_predict", _score_predict),
    Check("test_request_budget", _score_request_budget),
    Check("test_weight_bytes", _score_weight_bytes),
    Check("test_kv_cache", _score_kv_cache),
    Check("test_gqa_dtype", _score_gqa_dtype),
    Check("test_predict_measure", _score_predict_measure),
    Check("test_measured_gap", _score_measured_gap),
    Check("test_safe_requests", _score_safe_requests),
    Check("test_plannable", _score_plannable),
    Check("test_admission_rule", _score_admission),
    Check("test_policy_predict", _score_policy_predict),
    Check("test_offload_step", _score_offload_step),
    Check("test_replica_ready", _score_replica_ready),
    Check("test_unready", _score_unready),
    Check("test_log_kv", _score_log_kv),
    Check("test_log_blocks", _score_log_blocks),
    Check("test_log_predict", _score_log_predict),
    Check("test_decision", _score_decision),
    Check("test_quick_check", _score_quick_check),
    Check("test_explain_budget", _score_explain_budget),
)}


def score_answer(grade_id: str, values: Any) -> Result:
    """Score plain recorded values, as the grader does (:func:`autograder.contract.answers.check_credit`)."""
    from autograder.contract.answers import check_credit

    fraction, message = check_credit(CHECKS, grade_id, values)
    return Result(fraction == 1.0, message, None if fraction in (0.0, 1.0) else fraction)
