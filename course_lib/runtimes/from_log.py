"""Put a prediction beside a start-up log: the same launch, our terms against the runtime's.

:func:`launch_for` turns what a log shows (:class:`course_lib.runtimes.log.StartupLog`) into the
runtime's launch object, leaving what it does not show to the release's defaults;
:func:`compare` runs the estimate and lines both up term by term.

>>> from course_lib.runtimes.log import read_startup_log
>>> log = read_startup_log("INFO [gpu_worker.py:276] Available KV cache memory: 5.01 GiB\\n"
...     "(APIServer pid=1) INFO vLLM API server version 0.10.1.1\\n"
...     "(APIServer pid=1) INFO non-default args: {'model': 'Qwen/Qwen2-7B-Instruct', 'max_model_len': 16384, "
...     "'gpu_memory_utilization': 0.25}")
>>> preset_for(log.model)
'qwen2-7b'
>>> c = compare(log, gpu="a100-80gb")
>>> c["logged"]["kv_cache_bytes"] == round(5.01 * 2**30), abs(c["difference"]["kv_cache_bytes_relative"]) < 0.1
(True, True)
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ..errors import CourseInputError
from .log import StartupLog
from .log_lines import LOGGED_KEYS
from ..model.model_configs import MODEL_CONFIGS
from ..model.quantization import format_from_config
from ..model.presets import get_model
from ..model.spec import ModelSpec
from .result import RuntimeEstimate
from .sglang import SglangLaunch, estimate_sglang
from .trtllm import TrtllmLaunch, estimate_trtllm
from .vllm.estimate import VllmLaunch, estimate_vllm

_SUFFIXES = ("-instruct", "-chat", "-it", "-hf", "-base", "-preview", "-unsloth", "-bnb-4bit", "-fp8-dynamic",
             "-fp8-block", "-fp8", "-awq", "-gptq", "-int4", "-quantized.w4a16", "-w4a16", "-int8", "-w8a8")
#: Checkpoints that are another preset's architecture under another name (distillations, re-releases).
ALIASES = {
    "deepseek-r1": "deepseek-v3", "deepseek-r1-0528": "deepseek-v3",
    "deepseek-r1-distill-qwen-14b": "qwen2.5-14b", "deepseek-r1-distill-qwen-7b": "qwen2.5-7b",
    "llama-3.3-70b": "llama-3.1-70b", "meta-llama-3.1-8b": "llama-3.1-8b", "meta-llama-3-8b": "llama-3-8b",
    "mistral-7b-v0.3": "mistral-7b-v0.3", "mistral-7b-v0.1": "mistral-7b", "qwen1.5-7b": "qwen1.5-7b",
    "qwen2.5-coder-0.5b": "qwen2.5-0.5b", "llama-4-scout-17b-16e": "llama-4-scout", "mixtral-8x7b-v0.1": "mixtral-8x7b",
}


def preset_for(model: str | None) -> str | None:
    """The preset a log's model name (a hub id or a local path) is, or None.

    Quantized and instruction-tuned variants share their base model's preset (the weights' format comes
    from the log's ``quantization`` or the name, see :func:`quantization_hint`).

    >>> preset_for("/models/meta-llama/Llama-3.1-8B-Instruct"), preset_for("unsloth/Llama-3.2-3B-Instruct")
    ('llama-3.1-8b', 'llama-3.2-3b')
    >>> preset_for("RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic")
    'llama-3.1-70b'
    """
    if not model:
        return None
    name = str(model).rstrip("/").split("/")[-1].lower().replace("_", "-")
    for _ in range(6):
        for candidate in (name, name.replace("meta-llama-", "llama-")):
            if candidate in ALIASES:
                return ALIASES[candidate]
            if candidate in MODEL_CONFIGS:
                return candidate
        for suffix in _SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        else:
            break
    return None


def quantization_hint(log: StartupLog) -> dict | None:
    """The ``quantization_config`` a launch serves with, from the log's method and the checkpoint's name.

    vLLM prints the method (``quantization=gptq_marlin``, ``compressed-tensors``, ``bitsandbytes``, ``fp8``);
    the name says the bits where the method does not (``...-quantized.w4a16``, ``...-bnb-4bit``).
    None: the checkpoint's own config says it (or the weights are 16-bit).
    """
    method = str(log.launch.get("quantization") or log.launch.get("qformat") or "").lower()
    name = str(log.model or "").lower()
    if "bitsandbytes" in method or "bnb-4bit" in name:
        return {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True}
    if any(k in method for k in ("gptq", "awq")) or any(k in name for k in ("w4a16", "awq", "gptq", "int4")):
        return {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    if "fp8" in method or "fp8" in name:
        return {"quant_method": "fp8"}
    if method in ("int8", "int8_sq", "w8a8", "int8_wo") or any(k in name for k in ("w8a8", "int8")):
        return {"quant_method": "bitsandbytes", "load_in_8bit": True}
    return None


def _kv(value: Any) -> str:
    return "auto" if value in (None, "auto", "None") else str(value)


def served_spec(log: StartupLog, spec: ModelSpec) -> ModelSpec:
    """``spec`` in the weight format the launch serves (its config's, or the one the log names)."""
    if spec.quantization is not None and spec.quantization.quantized is not None:
        return spec
    hint = quantization_hint(log)
    if hint is None:
        return spec
    compute = spec.quantization.compute_dtype if spec.quantization is not None else "bf16"
    torch_dtype = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(compute, "bfloat16")
    return replace(spec, quantization=format_from_config({"torch_dtype": torch_dtype, "quantization_config": hint},
                                                         spec.model_type))


from .vllm.spec import parse_speculative_config  # noqa: E402


def launch_for(log: StartupLog, spec: ModelSpec, gpu: str | int) -> tuple[Any, dict[str, str]]:
    """The runtime's launch object for what ``log`` shows, and which facts came from the log."""
    L = log.launch
    from_log = {k: str(v) for k, v in L.items()}
    tp = int(L.get("tensor_parallel_size") or 1)
    pp = int(L.get("pipeline_parallel_size") or 1)
    if log.runtime == "vllm":
        version = L.get("vllm_version")
        from .versions import parse_version
        if version is None or parse_version(version) is None:
            version = L.get("vllm_version_inferred", version)
        engine = L.get("engine")
        return VllmLaunch(version=version, engine=engine, gpu_memory_utilization=L.get("gpu_memory_utilization"),
                          max_model_len=L.get("max_model_len"), max_num_seqs=L.get("max_num_seqs"),
                          max_num_batched_tokens=L.get("max_num_batched_tokens"),
                          enable_chunked_prefill=L.get("enable_chunked_prefill"),
                          kv_cache_dtype=_kv(L.get("kv_cache_dtype")), dtype=None,
                          enforce_eager=bool(L.get("enforce_eager", False)), tensor_parallel=tp, pipeline_parallel=pp,
                          block_size=L.get("block_size"), sampler=L.get("sampler", "auto"),
                          cpu_offload_gb=float(L.get("cpu_offload_gb") or 0.0), platform=L.get("platform"),
                          skip_mm_profiling=bool(L.get("skip_mm_profiling", False)),
                          limit_mm_per_prompt=L.get("limit_mm_per_prompt"), mm_max_pixels=L.get("mm_max_pixels"),
                          kv_cache_memory_bytes=L.get("kv_cache_memory_bytes"),
                          speculative_config=parse_speculative_config(L.get("speculative_config"), strict=False),
                          entrypoint="llm" if L.get("entrypoint") == "llm" else "serve"), from_log
    if log.runtime == "sglang":
        kv = _kv(L.get("kv_cache_dtype"))
        return SglangLaunch(version=L.get("sglang_version"), mem_fraction_static=L.get("mem_fraction_static"),
                            free_at_start_bytes=log.logged.get("free_at_start_bytes"),
                            chunked_prefill_size=L.get("chunked_prefill_size"),
                            cuda_graph_max_bs=L.get("cuda_graph_max_bs"), kv_cache_dtype=kv, dtype=None,
                            context_length=L.get("context_length"), tensor_parallel=tp, pipeline_parallel=pp,
                            disable_cuda_graph=bool(L.get("disable_cuda_graph", False)),
                            cpu_offload_gb=float(L.get("cpu_offload_gb") or 0.0),
                            speculative=_sglang_speculative(L, log.model)), from_log
    kv = _kv(L.get("kv_cache_dtype"))
    return TrtllmLaunch(version=L.get("trtllm_version"),
                        kv_cache_free_gpu_mem_fraction=L.get("kv_cache_free_gpu_mem_fraction"),
                        max_batch_size=L.get("max_batch_size"), max_num_tokens=L.get("max_num_tokens"),
                        max_seq_len=L.get("max_seq_len"), dtype=None, kv_cache_dtype=kv,
                        tokens_per_block=L.get("tokens_per_block"), tensor_parallel=tp,
                        pipeline_parallel=pp, host_used_bytes=_host_used(log, from_log)), from_log


def _sglang_speculative(L: dict[str, Any], model: str | None):
    """The log's SGLang speculative flags, leniently: an algorithm not modelled here is left out (the output's
    launch still shows it); a draft that does not resolve adds nothing (see ``SglangSpeculative.strict``)."""
    from .sglang_spec import ALGORITHMS, SglangSpeculative
    algorithm = str(L.get("speculative_algorithm") or "").upper()
    if algorithm not in ALGORITHMS:
        return None
    path = L.get("speculative_draft_model_path")
    if path is not None and path == model:
        path = None          # server_args.py points a DeepSeek-style MTP draft at the target's own checkpoint
    return SglangSpeculative(algorithm, path, L.get("speculative_num_steps"),
                             L.get("speculative_eagle_topk"), L.get("speculative_num_draft_tokens"), strict=False)


def _host_used(log: StartupLog, from_log: dict[str, str]) -> int | None:
    """On a unified-memory device (the log's total is a unified preset's), the host's share of the pool: the
    logged "Memory used outside torch" less the CUDA context, else the preset's default; None elsewhere."""
    from ..gpus import GPUS, unified_preset_for_total
    from .trtllm import CONTEXT_BYTES

    preset = unified_preset_for_total(log.launch.get("gpu_total_bytes"))
    if preset is None:
        return None
    outside = log.logged.get("outside_torch_bytes")
    if outside is None:
        return GPUS[preset].host_used_bytes
    from_log["host_used_bytes"] = f"{outside:,} B outside torch - {CONTEXT_BYTES:,} B CUDA context ({preset})"
    return max(0, outside - CONTEXT_BYTES)


def estimate_for(log: StartupLog, spec: ModelSpec, gpu: str | int, dtype: str | None = None,
                 tensor_parallel: int | None = None) -> RuntimeEstimate:
    """Our estimate for the launch ``log`` shows, on ``gpu`` (the log's own CUDA total when it printed one).

    ``dtype`` is the weight format as served when the log does not name it (``--dtype int8``);
    ``tensor_parallel`` the GPUs per replica when the log does not print it (a TensorRT-LLM engine's
    ranks each print their own lines and never the world size).
    """
    spec = served_spec(log, spec)
    launch, _ = launch_for(log, spec, gpu)
    if dtype is not None:
        launch = replace(launch, dtype=dtype)
    if tensor_parallel is not None and not log.launch.get("tensor_parallel_size"):
        launch = replace(launch, tensor_parallel=tensor_parallel)
    device = log.launch.get("gpu_total_bytes") or gpu
    if log.runtime == "vllm" and log.launch.get("platform") == "cpu":     # vLLM's CPU platform: no GPU at all
        return estimate_vllm(spec, gpu="cpu", launch=launch, refuse=False)
    if log.runtime in ("vllm", "trtllm") and isinstance(gpu, str):      # the card's kind, when the log gives its size
        from .vllm.estimate import NVSWITCH_GPUS
        name = gpu.strip().lower()
        launch = replace(launch, interconnect="nvswitch" if name in NVSWITCH_GPUS else "pcie")
        if log.runtime == "vllm":
            launch = replace(launch, platform="rocm" if name.startswith("mi") else launch.platform)
    if log.runtime == "vllm":        # a log of a refused start-up still shows what vLLM computed
        return estimate_vllm(spec, gpu=device, launch=launch, refuse=False)
    runner = {"sglang": estimate_sglang, "trtllm": estimate_trtllm}[log.runtime]
    return runner(spec, gpu=device, launch=launch)


#: Which term of our estimate each logged figure is compared with.
_PREDICTED = {"weights_bytes": "weights", "activation_bytes": "activation_peak", "non_torch_bytes": "non_torch",
              "cuda_graph_bytes": "cuda_graph"}


def predicted_figures(est: RuntimeEstimate) -> dict[str, Any]:
    """Our estimate in the logged figures' keys (ints of bytes)."""
    out: dict[str, Any] = {key: est.term(term) for key, term in _PREDICTED.items()}
    short = min(est.per_stage_kv_cache_bytes, default=0)
    out.update(kv_cache_bytes=short if short < 0 else est.runtime_kv_cache_bytes,   # signed, as vLLM logs a shortfall
               kv_cache_tokens=est.kv_cache_tokens,
               num_gpu_blocks=est.num_gpu_blocks, max_concurrency=round(est.max_concurrency, 2))
    if est.launch.get("estimated_max_model_len") is not None:    # what vLLM's refusal names
        out["estimated_max_model_len"] = est.launch["estimated_max_model_len"]
    enc = est.launch.get("encoder_profile")
    if enc and enc.get("modality"):                               # vLLM's "Encoder cache will be initialized" line
        out.update(encoder_budget_tokens=enc["budget_tokens"], encoder_items=enc["items_per_batch"][enc["modality"]],
                   encoder_modality=enc["modality"])
    return out


def compare(log: StartupLog, *, gpu: str | int | None = None, spec: ModelSpec | None = None,
            dtype: str | None = None, tensor_parallel: int | None = None) -> dict[str, Any]:
    """The five pools as the runtime saw them beside our prediction for the same launch, with the differences.

    ``spec`` defaults to the preset the log's model names; without one, ``predicted`` says why it is
    missing and ``logged`` is still filled. ``dtype``: the weight format served, when the log does not say.
    """
    out: dict[str, Any] = {"runtime": log.runtime, "model": log.model, "launch": dict(log.launch),
                           "logged": {k: log.logged.get(k) for k in LOGGED_KEYS} | {
                               k: v for k, v in log.logged.items() if k not in LOGGED_KEYS},
                           "evidence": dict(log.evidence)}
    if spec is None:
        preset = preset_for(log.model)
        if preset is None:
            out["predicted"] = {"missing": f"no preset for the model {log.model!r}; give --model PRESET or "
                                           f"--config PATH"}
            return out
        spec = get_model(preset)
        out["preset"] = preset
    device = log.launch.get("gpu_total_bytes") or gpu
    if log.runtime == "vllm" and log.launch.get("platform") == "cpu":
        device = gpu = "cpu"
    if device is None and log.runtime == "sglang" and log.logged.get("free_at_start_bytes"):
        from .sglang import CONTEXT_BYTES
        device = gpu = log.logged["free_at_start_bytes"] + CONTEXT_BYTES     # SGLang starts from the free memory
    if device is None:
        out["predicted"] = {"missing": "the log prints no GPU total; give --gpu (a preset such as h100-80gb, or a "
                                       "size)"}
        return out
    try:
        est = estimate_for(log, spec, gpu if gpu is not None else device, dtype, tensor_parallel)
    except CourseInputError as exc:
        out["predicted"] = {"missing": f"{exc}"}
        return out
    predicted = predicted_figures(est)
    refused = [n for n in est.notes if "would refuse" in n]
    if refused:
        predicted["refused"] = refused[0]
    out["predicted"] = predicted
    out["estimate"] = est.to_dict()
    diff: dict[str, Any] = {}
    for key, value in out["logged"].items():
        if value is None or predicted.get(key) is None:
            continue
        if isinstance(value, str):
            diff[key] = "same" if predicted[key] == value else f"{predicted[key]} (logged {value})"
            continue
        diff[key] = predicted[key] - value if isinstance(value, int) else round(predicted[key] - value, 2)
        if key in ("kv_cache_bytes", "kv_cache_tokens") and value:
            diff[f"{key}_relative"] = round((predicted[key] - value) / value, 4)
    out["difference"] = diff
    return out


def model_words(name: str | None) -> str:
    """A model name for a line of text (a path shortened to its last part)."""
    return re.sub(r"^.*/", "", name) if name else "(not named in the log)"
