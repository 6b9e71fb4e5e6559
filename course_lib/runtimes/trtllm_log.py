"""TensorRT-LLM's part of the start-up log reader: its memory lines and its launch.

Called by :func:`course_lib.runtimes.log.read_startup_log`, on lines :mod:`course_lib.runtimes.log_lines` cleaned.
"""

from __future__ import annotations

import re
from typing import Any

from .log_lines import LOGGED_KEYS, _arg, _bounded_count, _first, _gib, _int, _number, _share

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
