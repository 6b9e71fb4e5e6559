"""Every numeric input has a physically sensible bound, and they all live here.

A bound is not a guess at what is typical: it is a value no real device, model,
trace or link comes near, chosen so that the work it allows stays small (a
trace of 10^5 requests, a simulation of 10^6 steps, a rollout of 10^5 replicas)
and so that every figure derived from it stays a finite float. A refusal names
the value, the bound and the flag or key (see :func:`check_int` and
:func:`check_number`); the CLI passes the flag as the user typed it.

>>> check_int("--active-sequences", 8, 0, MAX_SEQUENCES)
8
>>> check_int("--tensor-parallel", 1_000_000, 1, MAX_TENSOR_PARALLEL)
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: --tensor-parallel=1000000 is above the bound 4,096 (the most GPUs one model is split over here); use a whole number from 1 to 4,096
>>> check_number("--efficiency", float("nan"), MIN_SHARE, 1.0)
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: --efficiency=nan is not a finite number; use a number from 0.001 to 1
>>> parse_int_text("--requests", "9" * 5000, 1, MAX_TRACE_REQUESTS)
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: --requests=<a 5000-digit number> is above the bound 100,000 (10^5 requests per trace); use a whole number from 1 to 100,000
"""

from __future__ import annotations

import math
import re

from .errors import CourseInputError


class Bound(int):
    """An int bound that carries, for refusals, the short reason it is safe.

    >>> MAX_TENSOR_PARALLEL + 0, MAX_TENSOR_PARALLEL.why
    (4096, 'the most GPUs one model is split over here')
    """

    why: str

    def __new__(cls, value: int, why: str) -> "Bound":
        bound = super().__new__(cls, value)
        bound.why = why
        return bound

# ---- sizes --------------------------------------------------------------------------------
#: 1 PB. The largest single accelerator today holds under 300 GB; no host or device in a
#: serving budget comes near 10^15 bytes, and every size below it is an exact float.
MAX_DEVICE_BYTES = Bound(10**15, "1 PB; no device comes near it")

# ---- models -------------------------------------------------------------------------------
#: 10^13 parameters: 20x the largest published dense or MoE checkpoints (~2 x 10^12).
MAX_PARAMS = Bound(10**13, "10^13 parameters, 20x the largest published checkpoints")
#: 10^6 layers: real models have under 200; per-layer tables stay a few MB.
MAX_LAYERS = Bound(10**6, "10^6 layers; real models have under 200")
#: Any one width (hidden size, heads, head_dim, vocabulary, intermediate size, experts):
#: real configs stay under 10^6 (vocabularies ~262k are the largest).
MAX_DIMENSION = Bound(10**7, "real widths stay under 10^6")
#: KV bytes one token adds over all layers: 10^9 B (1 GB). The widest real caches are a few MB
#: per token (an MHA 70B model in fp32: 2 x 80 x 64 x 128 x 4 B = 5.2 MB), and a 2^16-token
#: block of 1 GB tokens (6.6 x 10^13 B) is still an exact integer below 1 PB.
MAX_KV_BYTES_PER_TOKEN = Bound(10**9, "1 GB per token, 200x any real model")
#: A config.json is a few kB (the largest, with label maps, ~1 MB); 10 MB is read at once, safely.
MAX_CONFIG_FILE_BYTES = Bound(10**7, "10 MB; a config.json is a few kB")

# ---- requests -----------------------------------------------------------------------------
#: 10^8 tokens per sequence (prompt + new tokens): 100x the longest context windows served today.
MAX_CONTEXT_TOKENS = Bound(10**8, "10^8 tokens, 100x today's longest contexts")
#: Active sequences on one device or simulation: 10^7 (vLLM's default batch cap is 256).
MAX_SEQUENCES = Bound(10**7, "10^7 sequences; vLLM's default cap is 256")
#: Requests in one trace: 10^5, three hours of a busy endpoint at 10 requests/s, what the 10^6
#: steps of one simulation hold at the lesson's 0.1 requests per step (the benchmark's trace is
#: 10^5 too). Measured on 2 cores, the worst case (10^5 requests at once, simulate --json --compare)
#: takes ~10 s and 0.2 GB; 10^6 took ~50 s and 1 GB, 10^7 would take ~10 minutes and ~10 GB.
MAX_TRACE_REQUESTS = Bound(10**5, "10^5 requests per trace")
#: A trace file: 10^5 requests at up to 200 bytes a line (the example traces use ~90).
MAX_TRACE_FILE_BYTES = Bound(2 * 10**7, "20 MB, 10^5 requests of 200 bytes")
#: Tokens per KV block: vLLM uses 16; 2^16 is far beyond any paged runtime (the simulator keeps
#: one counter per token position in a block).
MAX_BLOCK_SIZE_TOKENS = Bound(2**16, "tokens per KV block; vLLM uses 16")
#: Decode steps one simulation may run: 10^6, about 3 hours of serving at 10 ms a step. The
#: simulator keeps five per-step series; at the bound they take ~0.2 GB and their JSON ~60 MB
#: (~1.5 s to write). Arrivals and --max-wait-steps must fall inside it too.
MAX_SIMULATED_STEPS = Bound(10**6, "10^6 decode steps per simulation")
#: Mean requests per step of a synthetic trace: from one per 10^6 steps (a whole simulation)
#: to 10^6 per step (a whole trace at once); 1 / rate and every arrival stay finite.
MIN_ARRIVAL_RATE = 1e-6
MAX_ARRIVAL_RATE = 1e6
#: Random seeds are 64-bit (as in numpy and torch).
MAX_SEED = Bound(2**64 - 1, "seeds are 64-bit")

# ---- parallelism and fleets ---------------------------------------------------------------
#: GPUs one model is split over: the largest NVLink domains hold 72-576 GPUs.
MAX_TENSOR_PARALLEL = Bound(4096, "the most GPUs one model is split over here")
#: Replicas in one rollout plan: the largest fleets run thousands of replicas of one model;
#: a plan of 10^5 is 10^5 waves at most, a few MB of step function.
MAX_REPLICAS = Bound(10**5, "10^5 replicas per rollout")
#: CPU threads for torch when measuring: the largest hosts have a few hundred cores.
MAX_THREADS = Bound(1024, "CPU threads on the largest hosts")

# ---- time and rates -----------------------------------------------------------------------
#: Seconds for any one phase or drain: 10^7 s is about 116 days.
MAX_SECONDS = Bound(10**7, "10^7 s, about 116 days")
#: Bytes per second of any link or disk: 10^15 B/s is 1,000x NVLink.
MAX_BYTES_PER_S = Bound(10**15, "10^15 B/s, 1,000x NVLink")
#: Slowest link or disk we model: 1 kB/s (a slower one makes every figure a day or more).
MIN_BYTES_PER_S = 10**3
#: FLOP/s of one device: 10^18 is 400x today's largest; 10^6 is slower than a 1980s PC.
MAX_FLOPS = Bound(10**18, "10^18 FLOP/s, 400x today's largest device")
MIN_FLOPS = 10**6
#: Shares of a theoretical rate (link efficiency, MFU): at least 0.1%. Below it a figure is
#: nonsense, and a share of 1e-320 makes every time infinite.
MIN_SHARE = 0.001



def _fmt(value: int | float) -> str:
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:g}"


def _num(number: float) -> str:
    """A float as ``:g`` writes it ("0", "1e+308"), or exactly when that would change it ("1e-320", not "9.99989e-321")."""
    short, exact = f"{number:g}", repr(number)
    return short if float(short) == number and len(short) <= len(exact) else exact


def _digits(value: int) -> str:
    """A huge int shown by its length (str() of more than 4,300 digits raises)."""
    return f"<a {value.bit_length() * 30103 // 100000 + 1}-digit number>"


def check_int(name: str, value: object, lo: int, hi: int, why: str | None = None) -> int:
    """``value`` as an int in ``[lo, hi]``, else one line naming it, the bound and what is valid.

    Bools and non-integral floats are refused; an integral float (``8.0``) is accepted.

    >>> check_int("arrival_step", 3.0, 0, MAX_SIMULATED_STEPS)
    3
    >>> check_int("--seed", -1, 0, MAX_SEED)
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: --seed=-1 is below the bound 0; use a whole number from 0 to 18,446,744,073,709,551,615
    """
    if type(value) is int and lo <= value <= hi:     # the common case, without building the refusal's text
        return value
    valid = f"use a whole number from {_fmt(lo)} to {_fmt(hi)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CourseInputError(f"{name}={value!r} is not a whole number; {valid}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise CourseInputError(f"{name}={value!r} is not a whole number; {valid}")
        value = int(value)
    if value < lo:
        shown = f"{value}" if value > -10**30 else f"-{_digits(-value)}"
        raise CourseInputError(f"{name}={shown} is below the bound {_fmt(lo)}; {valid}")
    if value > hi:
        reason = why or getattr(hi, "why", None)
        shown = f"{value}" if value < 10**30 else _digits(value)
        raise CourseInputError(f"{name}={shown} is above the bound {_fmt(hi)}"
                               f"{f' ({reason})' if reason else ''}; {valid}")
    return int(value)


def check_number(name: str, value: object, lo: float, hi: float, *, lo_open: bool = False,
                 hi_open: bool = False) -> float:
    """``value`` as a finite float in ``[lo, hi]`` (open at either end on request), else one line.

    >>> check_number("--watermark", 0.01, 0.0, 1.0, hi_open=True)
    0.01
    >>> check_number("--watermark", 1, 0.0, 1.0, hi_open=True)
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: --watermark=1 is above the bound 1; use a number at least 0 and below 1
    """
    if not (lo_open or hi_open):
        valid = f"use a number from {_fmt(lo)} to {_fmt(hi)}"
    else:
        valid = (f"use a number {'above' if lo_open else 'at least'} {_fmt(lo)} and "
                 f"{'below' if hi_open else 'at most'} {_fmt(hi)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CourseInputError(f"{name}={value!r} is not a number; {valid}")
    try:
        number = float(value)
    except OverflowError:
        raise CourseInputError(f"{name}={_digits(abs(int(value)))} is above the bound {_fmt(hi)}; {valid}") from None
    if not math.isfinite(number):
        raise CourseInputError(f"{name}={number!r} is not a finite number; {valid}")
    if number < lo or (lo_open and number == lo):
        raise CourseInputError(f"{name}={_num(number)} is below the bound {_fmt(lo)}; {valid}")
    if number > hi or (hi_open and number == hi):
        raise CourseInputError(f"{name}={_num(number)} is above the bound {_fmt(hi)}; {valid}")
    return number


_INT_TEXT = re.compile(r"^\s*([+-]?)0*([0-9]+)\s*$")


def parse_int_text(name: str, text: str, lo: int, hi: int, why: str | None = None) -> int:
    """A whole number typed as text, bounded before it is converted.

    ``int()`` refuses strings of more than 4,300 digits with a ValueError, so a
    long run of digits is refused by its length first: no bound here has 30 digits.

    >>> parse_int_text("--replicas", " 4 ", 1, MAX_REPLICAS)
    4
    >>> parse_int_text("--replicas", "2.5", 1, MAX_REPLICAS)
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: --replicas='2.5' is not a whole number; use a whole number from 1 to 100,000
    """
    match = _INT_TEXT.match(text) if isinstance(text, str) else None
    if not match:
        shown = text if not isinstance(text, str) or len(text) <= 60 else text[:60] + "..."
        raise CourseInputError(f"{name}={shown!r} is not a whole number; use a whole number from {_fmt(lo)} to {_fmt(hi)}")
    sign, digits = match.groups()
    if len(digits) > 30:
        if sign == "-":
            raise CourseInputError(f"{name}=-<a {len(digits)}-digit number> is below the bound {_fmt(lo)}; "
                                   f"use a whole number from {_fmt(lo)} to {_fmt(hi)}")
        reason = why or getattr(hi, "why", None)
        raise CourseInputError(f"{name}=<a {len(digits)}-digit number> is above the bound {_fmt(hi)}"
                               f"{f' ({reason})' if reason else ''}; use a whole number from {_fmt(lo)} to {_fmt(hi)}")
    return check_int(name, int(sign + digits), lo, hi, why)


def parse_number_text(name: str, text: str, lo: float, hi: float, *, lo_open: bool = False,
                      hi_open: bool = False) -> float:
    """A number typed as text ("0.8", "1e-3"), finite and within its bound.

    >>> parse_number_text("--efficiency", "1e-320", MIN_SHARE, 1.0)
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: --efficiency=1e-320 is below the bound 0.001; use a number from 0.001 to 1
    """
    try:
        number = float(text)
    except (TypeError, ValueError):
        shown = text if not isinstance(text, str) or len(text) <= 60 else text[:60] + "..."
        raise CourseInputError(f"{name}={shown!r} is not a number; use a number from {_fmt(lo)} to {_fmt(hi)}") from None
    return check_number(name, number, lo, hi, lo_open=lo_open, hi_open=hi_open)
