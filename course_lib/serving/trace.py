"""Request traces: what arrives at a server, when, and how long it really runs.

A trace is a list of :class:`Request`, stored as JSONL (one JSON object per
line) with exactly these fields::

    {"id": "r0", "arrival_step": 0, "prompt_tokens": 608, "max_new_tokens": 512, "output_tokens": 512}

``max_new_tokens`` is what the client asked for (the most the request may
generate); ``output_tokens`` is what it really generated before stopping
(end-of-sequence), so ``1 <= output_tokens <= max_new_tokens``. A scheduler
knows ``max_new_tokens`` at admission but not ``output_tokens``: that gap is
why reserving for the maximum wastes memory.

Synthetic traces are deterministic for a given seed on every Python version:
they use only :meth:`random.Random.random`, whose sequence Python guarantees.

>>> reqs = synthetic_trace(3, seed=0)
>>> [r.arrival_step for r in reqs] == sorted(r.arrival_step for r in reqs)
True
>>> all(1 <= r.output_tokens <= r.max_new_tokens for r in reqs)
True
>>> to_json_line(Request("r0", 0, 608, 512, 512))
'{"id": "r0", "arrival_step": 0, "prompt_tokens": 608, "max_new_tokens": 512, "output_tokens": 512}'
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..bounds import (MAX_ARRIVAL_RATE, MAX_CONTEXT_TOKENS, MAX_SEED, MAX_SIMULATED_STEPS, MAX_TRACE_FILE_BYTES,
                     MAX_TRACE_REQUESTS, MIN_ARRIVAL_RATE, check_int, check_number)
from ..errors import CourseInputError
from ..output import check_output_file, write_failed

FIELDS = ("id", "arrival_step", "prompt_tokens", "max_new_tokens", "output_tokens")


@dataclass(frozen=True)
class Request:
    """One request of a trace.

    id: a unique name (string or integer), echoed in every result.
    arrival_step: the decode step at which it reaches the server (>= 0).
    prompt_tokens: tokens of the prompt, prefilled at admission (>= 1).
    max_new_tokens: the most tokens it may generate, known at admission (>= 1).
    output_tokens: the tokens it really generates (1..max_new_tokens), unknown
        to the scheduler until the request stops.
    """

    id: str | int
    arrival_step: int
    prompt_tokens: int
    max_new_tokens: int
    output_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


def make_request(data: Any, where: str = "request") -> Request:
    """Validate one trace record (a dict) and return a :class:`Request`.

    >>> make_request({"id": 7, "arrival_step": 3, "prompt_tokens": 10, "max_new_tokens": 5, "output_tokens": 5})
    Request(id=7, arrival_step=3, prompt_tokens=10, max_new_tokens=5, output_tokens=5)
    >>> make_request({"id": "a", "arrival_step": 0, "prompt_tokens": 10, "max_new_tokens": 5, "output_tokens": 9})
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: request: output_tokens=9 > max_new_tokens=5; output_tokens is the real length and cannot exceed max_new_tokens
    """
    if not isinstance(data, dict):
        raise CourseInputError(f"{where}: a {type(data).__name__}, not a JSON object; "
                               f"give an object with fields {', '.join(FIELDS)}")
    missing = [name for name in FIELDS if name not in data]
    if missing:
        raise CourseInputError(f"{where}: missing {', '.join(missing)}; every request needs {', '.join(FIELDS)}")
    rid = data["id"]
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        raise CourseInputError(f"{where}: id={rid!r} is not a string or an integer")
    try:
        # Bounds (course_lib.bounds): arrivals inside the steps one simulation may run, and
        # prompt + max_new_tokens no longer than the longest context we model.
        arrival = check_int("arrival_step", data["arrival_step"], 0, MAX_SIMULATED_STEPS)
        prompt = check_int("prompt_tokens", data["prompt_tokens"], 1, MAX_CONTEXT_TOKENS)
        max_new = check_int("max_new_tokens", data["max_new_tokens"], 1, MAX_CONTEXT_TOKENS)
        output = check_int("output_tokens", data["output_tokens"], 1, MAX_CONTEXT_TOKENS)
    except CourseInputError as exc:
        raise CourseInputError(f"{where}: {exc}") from None
    if prompt + max_new > MAX_CONTEXT_TOKENS:
        raise CourseInputError(f"{where}: prompt_tokens={prompt:,} + max_new_tokens={max_new:,} = "
                               f"{prompt + max_new:,} tokens is above the bound {MAX_CONTEXT_TOKENS:,} "
                               f"({MAX_CONTEXT_TOKENS.why}); shorten the request")
    if output > max_new:
        raise CourseInputError(f"{where}: output_tokens={output} > max_new_tokens={max_new}; output_tokens is "
                               f"the real length and cannot exceed max_new_tokens")
    return Request(rid, arrival, prompt, max_new, output)


def check_unique_ids(requests: Iterable[Request]) -> None:
    """Refuse a trace in which two requests share an id (results are keyed by id)."""
    seen: set[Any] = set()
    for r in requests:
        if r.id in seen:
            raise CourseInputError(f"trace: id={r.id!r} appears twice; give every request a unique id")
        seen.add(r.id)


def to_json_line(request: Request) -> str:
    """One request as one line of JSONL (fields in the documented order)."""
    return json.dumps(request.to_dict())


def write_trace(requests: Iterable[Request], path: str | Path, *, name: str = "out") -> Path:
    """Write ``requests`` as JSONL to ``path`` (its folder must exist); return the path.

    The path is checked first (:func:`course_lib.output.check_output_file`); ``name`` is what a
    refusal calls it (the CLI passes ``--out``).
    """
    path = check_output_file(name, path)
    try:
        with path.open("w", encoding="utf-8") as fh:
            for r in requests:
                fh.write(to_json_line(r))
                fh.write("\n")
    except OSError as exc:
        raise write_failed(name, path, exc) from None
    return path


def parse_trace(lines: Iterable[str], source: str = "trace") -> list[Request]:
    """Parse JSONL lines (blank lines skipped) into requests, naming the bad line on error.

    At most :data:`~course_lib.bounds.MAX_TRACE_REQUESTS` requests; a number of more than
    4,300 digits or a line nested too deeply for the JSON reader is refused by its line.
    """
    out: list[Request] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CourseInputError(f"{source} line {number}: not JSON ({exc.msg}); "
                                   f"write one JSON object per line") from None
        except ValueError:      # int() refuses more than 4,300 digits
            raise CourseInputError(f"{source} line {number}: holds a number of more than 4,300 digits; "
                                   f"write one JSON object per line with whole numbers of tokens") from None
        except RecursionError:
            raise CourseInputError(f"{source} line {number}: nested too deeply to read; "
                                   f"write one flat JSON object per line") from None
        if len(out) == MAX_TRACE_REQUESTS:
            raise CourseInputError(f"{source}: more than {MAX_TRACE_REQUESTS:,} requests "
                                   f"({MAX_TRACE_REQUESTS.why}); split the trace")
        out.append(make_request(data, where=f"{source} line {number}"))
    check_unique_ids(out)
    return out


def read_trace(path: str | Path, *, name: str = "trace") -> list[Request]:
    """Read a JSONL trace file (see the module docstring for the format).

    ``name`` is what a refusal calls the path (the CLI passes ``--trace``). Files above
    :data:`~course_lib.bounds.MAX_TRACE_FILE_BYTES` are refused before they are read.
    """
    text = str(path)
    hint = "make one with `course-memory trace --requests 100 --out PATH`"
    if not text.strip() or "\x00" in text:
        raise CourseInputError(f"{name}={text!r} is not a file; give a JSONL trace ({hint})")
    path = Path(path)
    if not path.is_file():
        raise CourseInputError(f"{name}={text!r} is not a file; give a JSONL trace ({hint})")
    try:
        with path.open("rb") as fh:     # /proc files report size 0: read at most one byte past the bound
            raw = fh.read(MAX_TRACE_FILE_BYTES + 1)
    except OSError as exc:
        raise CourseInputError(f"{name}={text!r} cannot be read ({exc.strerror or exc}); give a JSONL trace") from None
    if len(raw) > MAX_TRACE_FILE_BYTES:
        raise CourseInputError(f"{name}={text!r} is larger than {MAX_TRACE_FILE_BYTES:,} bytes "
                               f"({MAX_TRACE_FILE_BYTES.why}); split the trace")
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CourseInputError(f"{name}={text!r} is not UTF-8 text; give a JSONL trace") from None
    # JSON Lines separates records by "\n" only (a "\r" before it is JSON whitespace); str.splitlines would
    # also split inside a string at U+2028, U+0085, \x1c... which JSON allows unescaped.
    requests = parse_trace(content.split("\n"), source=text)
    if not requests:
        raise CourseInputError(f"{name}={text!r} holds no requests; give at least one JSON line")
    return requests


# ------------------------------------------------------------------ synthetic traces

def _exponential(rng: random.Random, mean: float) -> float:
    """An exponential draw by inverse CDF, from ``rng.random()`` only (stable across versions)."""
    return -mean * math.log(1.0 - rng.random())


def synthetic_trace(num_requests: int, seed: int = 0, *, arrival_rate: float = 0.5,
                    prompt_tokens: tuple[int, int] = (64, 1024), max_new_tokens: int = 512,
                    mean_output_tokens: float = 128.0) -> list[Request]:
    """A deterministic synthetic trace.

    Arrivals are a Poisson process: gaps between requests are exponential with
    mean ``1 / arrival_rate`` steps, and ``arrival_step`` is the running time
    rounded down. Prompt lengths are uniform on ``prompt_tokens`` (inclusive).
    Every request asks for ``max_new_tokens``, but really generates an
    exponential number of tokens with mean ``mean_output_tokens``, rounded up
    and capped to ``1..max_new_tokens``: most outputs are much shorter than
    the maximum, as chat replies are.

    >>> [r.to_dict() for r in synthetic_trace(2, seed=1, max_new_tokens=100, mean_output_tokens=20)]   # doctest: +NORMALIZE_WHITESPACE
    [{'id': 'r0', 'arrival_step': 0, 'prompt_tokens': 193, 'max_new_tokens': 100, 'output_tokens': 38},
     {'id': 'r1', 'arrival_step': 2, 'prompt_tokens': 309, 'max_new_tokens': 100, 'output_tokens': 14}]
    """
    n = check_int("requests", num_requests, 1, MAX_TRACE_REQUESTS)
    seed = check_int("seed", seed, 0, MAX_SEED)
    lo, hi = (check_int("prompt_tokens_min", prompt_tokens[0], 1, MAX_CONTEXT_TOKENS),
              check_int("prompt_tokens_max", prompt_tokens[1], 1, MAX_CONTEXT_TOKENS))
    if lo > hi:
        raise CourseInputError(f"prompt_tokens=({lo}, {hi}): the minimum exceeds the maximum; give (min, max)")
    max_new = check_int("max_new_tokens", max_new_tokens, 1, MAX_CONTEXT_TOKENS)
    if hi + max_new > MAX_CONTEXT_TOKENS:
        raise CourseInputError(f"prompt_tokens_max={hi:,} + max_new_tokens={max_new:,} is above the bound "
                               f"{MAX_CONTEXT_TOKENS:,} ({MAX_CONTEXT_TOKENS.why}); shorten the requests")
    # 1 / arrival_rate and every arrival stay finite inside these bounds (course_lib.bounds).
    arrival_rate = check_number("arrival_rate", arrival_rate, MIN_ARRIVAL_RATE, MAX_ARRIVAL_RATE)
    mean_output_tokens = check_number("mean_output_tokens", mean_output_tokens, 0, MAX_CONTEXT_TOKENS, lo_open=True)
    rng = random.Random(seed)
    clock = 0.0
    out = []
    for i in range(n):
        if i:
            clock += _exponential(rng, 1.0 / arrival_rate)
        prompt = lo + min(hi - lo, int(rng.random() * (hi - lo + 1)))
        output = min(max_new, max(1, math.ceil(_exponential(rng, mean_output_tokens))))
        out.append(Request(f"r{i}", int(clock), prompt, max_new, output))
    return out
