"""A pasted start-up log as lines: cleaned, cut into launches, its runtime recognised, its numbers read.

What the readers of every runtime share (:mod:`.vllm.log`, :mod:`.sglang_log`, :mod:`.trtllm_log`); the
reader itself is :func:`course_lib.runtimes.log.read_startup_log`.

>>> clean_log('\x1b[32mINFO\x1b[0m # GPU blocks: 3637')
['INFO # GPU blocks: 3637']
"""

from __future__ import annotations

import json
import math
import re

from ..bounds import MAX_DEVICE_BYTES
from ..errors import CourseInputError
from ..units import GiB


#: The most of a log read (bytes); a start-up log is a few hundred kB at most.
MAX_LOG_BYTES = 8_000_000
#: No count a start-up log prints (tokens, blocks, lengths, batch sizes) comes near 10^12.
MAX_LOG_COUNT = 10**12
#: Counts for which a runtime prints -1 to mean "off": SGLang's ``chunked_prefill_size=-1`` disables chunked
#: prefill (server_args.py). Every other count of at least 1 is checked as such.
MINUS_ONE_MEANS_OFF = frozenset({"chunked_prefill_size"})

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\\u001b\[[0-9;?]*[a-zA-Z]|\\x1b\[[0-9;?]*[a-zA-Z]")
_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
#: A line that starts a new log record (so a line that does not continues the one before it).
_RECORD_START = re.compile(
    r"^\s*(?:\(\w[\w ]*(?:pid|rank)[=\w ]*\)|\x1b|INFO|WARNING|DEBUG|ERROR|\[\d{4}-\d\d-\d\d|\[TensorRT-LLM\]|"
    r"\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\]|"      # TensorRT-LLM's Python logger: [12/07/2025-00:20:27] [TRT-LLM]
    r"vLLM STDOUT|Unsloth|\$ |#|[-*|>]|\w[\w.-]*:|\d{4}-\d\d-\d\d|[A-Z][a-z]+ )")

#: The figures a log can give, as ints of bytes (tokens, blocks and concurrency as counts).
LOGGED_KEYS = ("weights_bytes", "activation_bytes", "non_torch_bytes", "cuda_graph_bytes", "kv_cache_bytes",
               "kv_cache_tokens", "num_gpu_blocks", "max_concurrency")


def clean_log(text: str) -> list[str]:
    """The log's records as plain lines: notebook JSON strings decoded, colour codes removed, wrapped lines joined."""
    lines: list[str] = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw
        stripped = raw.strip()
        if stripped.startswith('"') and (stripped.endswith('",') or stripped.endswith('"')):
            body = stripped[:-1] if stripped.endswith(",") else stripped
            try:
                decoded = json.loads(body)
                if isinstance(decoded, str):
                    line = decoded.rstrip("\n")
            except ValueError:
                pass
        line = _ANSI.sub("", line).replace("\x1b", "")
        if lines and line and not _RECORD_START.match(line) and not lines[-1].endswith((".", ":")) \
                and len(lines[-1]) >= 60:
            lines[-1] += line          # a wrapped line: it continues the record before it
        else:
            lines.append(line)
    return lines


#: The line that opens one launch, most telling first: the first of these a file holds cuts it into boots
#: (vLLM's API server prints its version and its non-default args once per launch, vllm/entrypoints/utils.py;
#: an offline ``LLM(...)`` its args in api_utils.py; every engine core "Initializing a V1 LLM engine";
#: SGLang its ``server_args=ServerArgs(...)``). TensorRT-LLM's ranks each print their version: not cut.
_BOOT_STARTS = (re.compile(r"vLLM API server version"), re.compile(r"non-default args: \{"),
                re.compile(r"Initializing a V1 LLM engine|Initializing an LLM engine"),
                re.compile(r"server_args=ServerArgs\("))
#: Lines just before a launch's first record that belong to it: the command that started it, a banner.
_BOOT_PREAMBLE = re.compile(r"^\s*$|^\s*(?:\$ |vllm serve\b|python3? -m |docker run\b|=== )")
#: What makes a piece of the file a boot: a runtime sizing its KV cache, or refusing to start.
_BOOT_BODY = re.compile(r"Available KV cache memory|GPU KV cache size|# GPU blocks|# cuda blocks|# CUDA blocks|"
                        r"reserved for KV Cache|kv_cache_size=|CPU KV cache size|GiB for KV cache on node|"
                        r"memory for KV Cache|kv cache memory in use|KV Cache is allocated|KV cache allocated|max_total_num_tokens|"
                        r"paged KV cache|KV cache primary pool|Error\b|Traceback")


def split_boots(lines: list[str]) -> list[list[str]]:
    """A cleaned log cut into its launches: a refused start, then the relaunch, each its own list of lines.

    Each launch starts at the line that opens one (:data:`_BOOT_STARTS`, with the command just before it);
    a piece with no KV-cache sizing and no error is part of the launch after it (or, last, before it).

    >>> log = ["$ vllm serve m", "INFO vLLM API server version 0.11.0", "INFO Available KV cache memory: -1.5 GiB",
    ...        "ERROR ValueError: ... the estimated maximum model length is 9000", "",
    ...        "$ vllm serve m --max-model-len 8192", "INFO vLLM API server version 0.11.0",
    ...        "INFO Available KV cache memory: 2.5 GiB"]
    >>> [len(b) for b in split_boots(log)]
    [4, 4]
    """
    starts: list[int] = []
    for pattern in _BOOT_STARTS:
        starts = [i for i, line in enumerate(lines) if pattern.search(line)]
        if starts:
            break
    cuts = []
    for i in starts[1:]:
        while i > 0 and _BOOT_PREAMBLE.search(lines[i - 1]) and (not cuts or i - 1 > cuts[-1]):
            i -= 1
        cuts.append(i)
    pieces = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)])]
    boots: list[list[str]] = []
    carry: list[str] = []
    for piece in pieces:
        carry += piece
        if any(_BOOT_BODY.search(line) for line in piece):
            boots.append(carry)
            carry = []
    if carry:
        if boots:
            boots[-1] += carry
        else:
            boots.append(carry)
    return boots


def _gib(text: str) -> int:
    """A printed GiB figure in bytes; one no device can hold is refused (a garbled or doctored line)."""
    digits = text.replace(",", "")
    try:
        value = float(digits) if len(digits) < 40 else math.inf
    except ValueError:
        raise CourseInputError(f"the log's figure {text[:24]!r} GiB is not a number; give the log as the runtime "
                               f"printed it") from None
    if not math.isfinite(value) or value * GiB > MAX_DEVICE_BYTES:
        raise CourseInputError(f"the log's figure {text[:24]!r} GiB is more than any device holds (1 PB); "
                               f"give the log as the runtime printed it")
    return round(value * GiB)


def _int(text: str) -> int:
    """A printed count (tokens, blocks, a length), bounded like every count here."""
    digits = text.replace(",", "")
    if not digits.isdigit():
        raise CourseInputError(f"the log's count {text[:24]!r} is not a whole number; give the log as the runtime "
                               f"printed it")
    if len(digits) > 15 or int(digits) > MAX_LOG_COUNT:
        raise CourseInputError(f"the log's count {text[:24]!r} is above {MAX_LOG_COUNT:,} (no runtime prints one "
                               f"that large); give the log as the runtime printed it")
    return int(digits)


def detect_runtime(lines: list[str]) -> str | None:
    """Which runtime printed ``lines``: the one with the most of its own start-up phrases."""
    text = "\n".join(lines)
    scores = {
        "vllm": sum(p in text for p in ("vLLM", "vllm", "Available KV cache memory", "GPU KV cache size",
                                        "# GPU blocks", "# cuda blocks", "# CUDA blocks", "Memory profiling results",
                                        "the current vLLM instance", "KV cache memory", "CPU KV cache size",
                                        "for KV cache on node")),
        "sglang": sum(p in text for p in ("sglang", "SGLang", "KV Cache is allocated", "Post-capture KV sizing",
                                          "max_total_num_tokens",
                                          "Load weight end", "mem_fraction_static")) * 2,
        "trtllm": sum(p in text for p in ("TensorRT-LLM", "trtllm", "paged kv cache", "paged KV cache",
                                          "KV cache primary pool")) * 2,
    }
    key_phrases = {
        "vllm": ("Available KV cache memory", "GPU KV cache size", "# GPU blocks", "# cuda blocks", "# CUDA blocks",
                 "reserved for KV Cache", "kv_cache_size=", "CPU KV cache size", "GiB for KV cache on node",
                 "the estimated maximum model length is", "memory for KV Cache as specified by kv_cache_memory_bytes",
                 "Current kv cache memory in use is"),
        "sglang": ("KV Cache is allocated", "Post-capture KV sizing: KV cache allocated", "max_total_num_tokens"),
        "trtllm": ("for max tokens in paged KV cache", "Number of blocks in KV cache primary pool",
                   "Memory usage when calculating max tokens", "tokens in paged KV cache"),
    }
    first = {r: min(i for p in phrases for i in [text.find(p)] if i >= 0)
             for r, phrases in key_phrases.items() if any(p in text for p in phrases)}
    if not first:
        return None
    # a thread that quotes two runtimes is about the one whose KV-cache line comes first
    return min(first, key=lambda r: (first[r], -scores[r]))


def _first(lines: list[str], pattern: str, prefer_driver: bool = True) -> re.Match | None:
    """The match of ``pattern`` on the driver's / rank 0's line when there are several ranks, else the first."""
    rx = re.compile(pattern)
    matches = [(line, m) for line in lines for m in [rx.search(line)] if m]
    if not matches:
        return None
    if prefer_driver:
        for line, m in matches:
            if re.search(r"rank=0\b|\bTP0\b|Worker_TP0|rank 0\b", line):
                return m
        for line, m in matches:
            if not re.search(r"VllmWorkerProcess|VllmWorker rank|Worker_TP[1-9]|\bTP[1-9]\d*\]|rank=[1-9]", line):
                return m
    return matches[0][1]


def _arg(text: str, *names: str) -> str | None:
    """A launch knob from a command line, a Namespace/ServerArgs dump or a 'non-default args' dict."""
    for name in names:
        dash = name.replace("_", "-")
        for pattern in (rf"--{dash}[= ]+([^\s\\'\",)]+)", rf"--{name}[= ]+([^\s\\'\",)]+)",
                        rf"'{name}': '?([^',}}]+)'?", rf"\b{name}=([^,\s)]+)"):
            m = re.search(pattern, text)
            if m:
                return m.group(1).strip().strip("'\"")
    return None


def _number(value: str | None) -> float | None:
    """A launch knob's number, or None when it is not one (finite, and not absurd)."""
    if value is None or value in ("None", "null", "auto") or len(value) > 40:
        return None
    try:
        number = float(value.replace(",", ""))
    except ValueError:
        return None
    if not math.isfinite(number) or abs(number) > MAX_LOG_COUNT:
        raise CourseInputError(f"the log's launch value {value[:24]!r} is not a number a launch takes")
    return number


def _share(key: str, text: str, percent: bool = False) -> float:
    """A memory share the log names (0 < share <= 1), refused in one line otherwise."""
    value = _number(text)
    if value is not None and percent:
        value /= 100
    if value is None or not 0 < value <= 1:
        raise CourseInputError(f"the log's {key}={text[:24]!r} is not a share of memory; a launch takes 0 < share <= 1")
    return value


def _bounded_count(key: str, value: float) -> int:
    """A count knob (TP size, batch size) as an int >= 1, refused in one line otherwise."""
    if value != int(value) or value < 1:
        raise CourseInputError(f"the log's {key}={value:g} is not a whole number of at least 1")
    return int(value)


def _flag(text: str, name: str) -> bool | None:
    value = _arg(text, name)
    if value is not None:
        return value.lower() in ("true", "1", "enable", "enabled")
    if re.search(rf"--{name.replace('_', '-')}(?![\w-])(?!\s*[= ]\s*(?:false|0))", text):
        return True
    return None
