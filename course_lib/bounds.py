"""Every numeric input has a physically sensible bound, and they all live here.

A bound is not a guess at what is typical: it is a value no real device, model,
trace or link comes near, chosen so that the work it allows stays small (a
per-layer table of 10^6 layers, a trace of 10^7 requests) and so that every
figure derived from it stays a finite float. A refusal names the value, the
bound and the flag or key (see :func:`check_int` and :func:`check_number`).

>>> check_int("--active-sequences", 8, 0, MAX_SEQUENCES)
8
>>> check_int("--tensor-parallel", 1_000_000, 1, MAX_TENSOR_PARALLEL)
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: --tensor-parallel=1000000 is above the bound 4,096 (the most GPUs one model is split over here); use a whole number from 1 to 4,096
>>> check_number("--efficiency", float("nan"), 0.001, 1.0)
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: --efficiency=nan is not a finite number; use a number from 0.001 to 1
"""

from __future__ import annotations

import math

from .errors import CourseInputError

# ---- sizes --------------------------------------------------------------------------------
#: 1 PB. The largest single accelerator today holds under 300 GB; no host or device in a
#: serving budget comes near 10^15 bytes, and every size below it is an exact float.
MAX_DEVICE_BYTES = 10**15

# ---- models -------------------------------------------------------------------------------
#: 10^13 parameters: 20x the largest published dense or MoE checkpoints (~2 x 10^12).
MAX_PARAMS = 10**13
#: 10^6 layers: real models have under 200; per-layer tables stay a few MB.
MAX_LAYERS = 10**6
#: Any one width (hidden size, heads, head_dim, vocabulary, intermediate size, experts):
#: real configs stay under 10^6 (vocabularies ~262k are the largest).
MAX_DIMENSION = 10**7

# ---- requests -----------------------------------------------------------------------------
#: 10^8 tokens per sequence: 100x the longest context windows served today.
MAX_CONTEXT_TOKENS = 10**8
#: Active sequences on one device or simulation.
MAX_SEQUENCES = 10**7
#: Requests in one trace: a simulation of 10^7 requests runs in minutes, not hours.
MAX_TRACE_REQUESTS = 10**7
#: Tokens per KV block: vLLM uses 16; 2^16 is far beyond any paged runtime.
MAX_BLOCK_SIZE_TOKENS = 2**16

# ---- parallelism and fleets ---------------------------------------------------------------
#: GPUs one model is split over.
MAX_TENSOR_PARALLEL = 4096
#: Replicas in one rollout plan.
MAX_REPLICAS = 10**5

# ---- time and rates -----------------------------------------------------------------------
#: Seconds for any one phase or drain: 10^7 s is about 116 days.
MAX_SECONDS = 10**7
#: Bytes per second of any link or disk: 10^15 B/s is 1,000x NVLink.
MAX_BYTES_PER_S = 10**15
#: Slowest link or disk we model: 1 kB/s (a slower one makes every figure a day or more).
MIN_BYTES_PER_S = 10**3
#: FLOP/s of one device: 10^18 is 400x today's largest.
MAX_FLOPS = 10**18
MIN_FLOPS = 10**6

_WHY = {
    MAX_DEVICE_BYTES: "1 PB; no device comes near it",
    MAX_PARAMS: "10^13 parameters, 20x the largest published checkpoints",
    MAX_LAYERS: "10^6 layers; real models have under 200",
    MAX_CONTEXT_TOKENS: "10^8 tokens, 100x today's longest contexts",
    MAX_TRACE_REQUESTS: "10^7 requests per trace",
    MAX_TENSOR_PARALLEL: "the most GPUs one model is split over here",
}


def _fmt(value: int | float) -> str:
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:g}"


def check_int(name: str, value: object, lo: int, hi: int, why: str | None = None) -> int:
    """``value`` as an int in ``[lo, hi]``, else one line naming it, the bound and what is valid.

    Bools and non-integral floats are refused; an integral float (``8.0``) is accepted.
    """
    valid = f"use a whole number from {_fmt(lo)} to {_fmt(hi)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CourseInputError(f"{name}={value!r} is not a whole number; {valid}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise CourseInputError(f"{name}={value!r} is not a whole number; {valid}")
        value = int(value)
    if value < lo:
        raise CourseInputError(f"{name}={value} is below the bound {_fmt(lo)}; {valid}")
    if value > hi:
        reason = why or _WHY.get(hi)
        shown = f"{value}" if value < 10**18 else f"<a {len(str(value)) if value < 10**4000 else 'huge'}-digit number>"
        raise CourseInputError(f"{name}={shown} is above the bound {_fmt(hi)}"
                               f"{f' ({reason})' if reason else ''}; {valid}")
    return int(value)


def check_number(name: str, value: object, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """``value`` as a finite float in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``), else one line."""
    valid = (f"use a number above {_fmt(lo)} and at most {_fmt(hi)}" if lo_open
             else f"use a number from {_fmt(lo)} to {_fmt(hi)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CourseInputError(f"{name}={value!r} is not a number; {valid}")
    try:
        number = float(value)
    except OverflowError:
        raise CourseInputError(f"{name}=<a {len(str(value))}-digit number> is above the bound {_fmt(hi)}; {valid}") from None
    if not math.isfinite(number):
        raise CourseInputError(f"{name}={number!r} is not a finite number; {valid}")
    if number < lo or (lo_open and number == lo):
        raise CourseInputError(f"{name}={number:g} is below the bound {_fmt(lo)}; {valid}")
    if number > hi:
        raise CourseInputError(f"{name}={number:g} is above the bound {_fmt(hi)}; {valid}")
    return number
