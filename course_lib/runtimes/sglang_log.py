"""SGLang's part of the start-up log reader: its memory lines and its launch.

Called by :func:`course_lib.runtimes.log.read_startup_log`, on lines :mod:`course_lib.runtimes.log_lines` cleaned.
"""

from __future__ import annotations

import re
from typing import Any

from .log_lines import LOGGED_KEYS, MINUS_ONE_MEANS_OFF, _arg, _bounded_count, _first, _flag, _gib, _int, _number

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
    # speculative decoding (ServerArgs: speculative_algorithm='EAGLE', ...; or the --speculative-* flags)
    algorithm = _arg(text, "speculative_algorithm")
    if algorithm not in (None, "None"):
        launch["speculative_algorithm"], ev["speculative_algorithm"] = algorithm, f"speculative_algorithm={algorithm}"
        path = _arg(text, "speculative_draft_model_path")
        if path not in (None, "None"):
            launch["speculative_draft_model_path"] = path
        for key in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
            value = _number(_arg(text, key))
            if value is not None:
                launch[key] = _bounded_count(key, value)
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
    # The target's pool. From 0.5.20 a pool sized after the graph capture logs its final shape on its own line
    # (sglang/srt/model_executor/model_runner_components/kv_pool_runtime.py: "Post-capture KV sizing: KV cache
    # allocated. dtype: %s, #tokens: %d, KV size: %.2f GB", its pre-capture line reading "VA upper bound"): it
    # wins. Otherwise the first "KV Cache is allocated" line is the target's (a speculative draft logs its own
    # pool after it), in any of the forms of sglang/srt/mem_cache/memory_pool.py: 0.5.5-0.5.10 "#tokens: N, K
    # size: X GB, V size: Y GB" or, for one-buffer pools such as MLA's, "#tokens: N, KV size: X GB"; from 0.5.20
    # the same with "dtype: D, " before "#tokens". (The GB there is bytes / 2^30: memory_pool.py's GB = 1 << 30.)
    m = (_first(lines, r"Post-capture KV sizing: KV cache allocated\. dtype: [^,]+, #tokens: ([0-9,]+), "
                       r"()()KV size: ([0-9.]+) GB")
         or _first(lines, r"KV Cache is allocated\. (?:dtype: [^,]+, )?#tokens: ([0-9,]+), "
                          r"(?:K size: ([0-9.]+) GB, V size: ([0-9.]+) GB|KV size: ([0-9.]+) GB)"))
    if m:
        logged["kv_cache_tokens"] = _int(m.group(1))
        logged["kv_cache_bytes"] = (_gib(m.group(4)) if m.group(4) is not None
                                    else _gib(m.group(2)) + _gib(m.group(3)))
        ev["kv_cache_bytes"] = ev["kv_cache_tokens"] = m.group(0)[:160]
    m = _first(lines, r"max_total_num_tokens=([0-9,]+)")
    if m and logged["kv_cache_tokens"] is None:
        logged["kv_cache_tokens"], ev["kv_cache_tokens"] = _int(m.group(1)), m.group(0)
    logged["num_gpu_blocks"] = logged["kv_cache_tokens"]
    if logged["kv_cache_tokens"] and launch.get("context_length"):
        logged["max_concurrency"] = round(logged["kv_cache_tokens"] / launch["context_length"], 2)
    return launch, logged, ev


