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

from dataclasses import dataclass, field
from typing import Any

from ..errors import CourseInputError
from .log_lines import MAX_LOG_BYTES, MINUS_ONE_MEANS_OFF, _share, clean_log, detect_runtime, split_boots
from .sglang_log import _read_sglang
from .trtllm_log import _read_trtllm
from .vllm.log import _read_vllm

#: Bytes of one unit in the last printed digit of a two-decimal GiB figure.
PRINTED_PRECISION = "figures printed with 2 decimals of GiB are exact to +-0.005 GiB (5.4 MB)"


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
