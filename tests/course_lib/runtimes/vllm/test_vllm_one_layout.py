"""The profile path and the given pool are one vLLM: the pool ``estimate --runtime vllm`` finds, fed back as vLLM's own
``--kv-cache-memory-bytes``, gives the same blocks, tokens, concurrency and refusal (issue 40, item 2).

vLLM sizes everything after the pool from the pool alone (``get_kv_cache_configs``: the profile only decides the
bytes), so the two must agree for every model, release, GPU and knob; before the one layout they did not for any
model with windowed layers (gpt-oss-20b on an H100 at 128k: 17.51x against 16.53x).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from course_lib.errors import CourseInputError
from course_lib.model.models import from_hf_config
from course_lib.model.presets import get_model
from course_lib.runtimes import VllmLaunch, estimate_vllm

MODELS = ("gpt-oss-20b", "gemma-3-27b", "gemma-2-9b", "mistral-7b", "llama-3.1-8b", "qwen2-7b", "gemma-3-4b",
          "llama-4-scout", "deepseek-v2-lite", "qwen3-next-80b-a3b", "qwen3.5-27b", "deepseek-v4-flash")
#: Releases with --kv-cache-memory-bytes (from 0.10.2), either side of each KV rule's row (token rule 0.11, in-flight
#: windows 0.26, null block and state pages 0.29, the V2 runner 0.22-0.29)
RELEASES = ("0.10.2", "0.11.0", "0.21.0", "0.25.0", "0.26.0", "0.28.0", "0.29.0", "0.32.0", "0.33.0")
GPUS = ("h100-80gb", "l4", "l40s", "rtx-4090", "a100-80gb", "b200", "mi300x")


def _figures(est):
    return est.num_gpu_blocks, est.kv_cache_tokens, round(est.max_concurrency, 9), est.launch["estimated_max_model_len"]


@functools.lru_cache(maxsize=None)
def _spec(model):
    """A preset, or a published config: Qwen3.5-27B (a hybrid whose fp32 SSM state and, on SM90 in 0.33, FlashInfer's
    checkpoint page shape the layout), DeepSeek-V4-Flash (its packed groups)."""
    hub = Path(__file__).resolve().parents[3] / "files" / "hub"
    if model == "qwen3.5-27b":
        return from_hf_config(json.loads((hub / "Qwen3.5-27B-text.config.json").read_text()), name=model)
    if model == "deepseek-v4-flash":      # its packed KV groups (runtimes/vllm/kv_dsv4.py)
        return from_hf_config(json.loads((hub / "DeepSeek-V4-Flash-Base.config.json").read_text()), name=model)
    return get_model(model)


def _both(model, gpu, version, **knobs):
    spec = _spec(model)
    launch = VllmLaunch(version=version, **knobs)
    try:
        profile = estimate_vllm(spec, gpu=gpu, launch=launch, refuse=False)
    except CourseInputError:
        return None      # refused before the KV cache (heads % TP and the like): nothing to compare
    pool = profile.runtime_kv_cache_bytes
    given = estimate_vllm(spec, gpu=gpu, launch=VllmLaunch(version=version, kv_cache_memory_bytes=pool, **knobs),
                          refuse=False)
    refused = [any("would refuse" in n for n in e.notes) for e in (profile, given)]
    return _figures(profile), _figures(given), refused


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS), version=st.sampled_from(RELEASES),
       max_model_len=st.sampled_from([None, 4096, 8192, 32768, 131072]), block_size=st.sampled_from([None, 16, 32]),
       kv_cache_dtype=st.sampled_from(["auto", "fp8"]), tensor_parallel=st.sampled_from([1, 2, 4]),
       entrypoint=st.sampled_from(["serve", "llm"]), max_num_batched_tokens=st.sampled_from([None, 1024, 8192]))
@example(model="qwen3-next-80b-a3b", gpu="h100-80gb", version="0.33.0", max_model_len=None, block_size=None,
         kv_cache_dtype="auto", tensor_parallel=4, entrypoint="serve", max_num_batched_tokens=None)
@example(model="qwen3.5-27b", gpu="h100-80gb", version="0.33.0", max_model_len=32768, block_size=None,
         kv_cache_dtype="auto", tensor_parallel=2, entrypoint="serve", max_num_batched_tokens=None)
@example(model="qwen3.5-27b", gpu="a100-80gb", version="0.32.0", max_model_len=None, block_size=16,
         kv_cache_dtype="fp8", tensor_parallel=1, entrypoint="llm", max_num_batched_tokens=None)
@example(model="deepseek-v4-flash", gpu="b200", version="0.32.0", max_model_len=32768, block_size=16,
         kv_cache_dtype="fp8", tensor_parallel=4, entrypoint="serve", max_num_batched_tokens=None)
@example(model="gpt-oss-20b", gpu="h100-80gb", version="0.33.0", max_model_len=131072, block_size=None,
         kv_cache_dtype="auto", tensor_parallel=1, entrypoint="serve", max_num_batched_tokens=None)
@example(model="gemma-3-4b", gpu="l4", version="0.28.0", max_model_len=131072, block_size=16,
         kv_cache_dtype="fp8", tensor_parallel=1, entrypoint="llm", max_num_batched_tokens=1024)
def test_the_profile_pool_fed_back_gives_the_same_pool(model, gpu, version, **knobs):
    got = _both(model, gpu, version, **knobs)
    if got is None:
        return
    profile, given, refused = got
    assert profile == given, (model, gpu, version, knobs)
    assert refused[0] == refused[1], (model, gpu, version, knobs)


@pytest.mark.parametrize("model, gpu, knobs, concurrency", [
    ("gpt-oss-20b", "h100-80gb", {"max_model_len": 131072}, "16.53"),
    ("gemma-3-27b", "h100-80gb", {"max_model_len": 32768}, "1.55"),
    ("gemma-2-9b", "l40s", {}, "8.22"),
    ("mistral-7b", "l4", {"kv_cache_dtype": "fp8"}, "11.08"),
    ("llama-4-scout", "h100-80gb", {"tensor_parallel": 4, "max_model_len": 131072}, "6.58"),
])
def test_the_five_window_launches_of_issue_40_agree(model, gpu, knobs, concurrency):
    # The launches the issue tried; the given pool's figure is the one vLLM 0.32/0.33 gives for that pool (two
    # batches in flight under CUDA's async scheduling: SlidingWindowSpec.max_admission_blocks_per_request)
    profile, given, refused = _both(model, gpu, None, **knobs)
    assert profile == given and refused == [False, False]
    est = estimate_vllm(_spec(model), gpu=gpu, launch=VllmLaunch(**knobs))
    assert f"{est.max_concurrency:.2f}" == concurrency


def test_a_model_without_attention_layers_has_an_empty_layout_not_a_crash():
    # a Mamba-only config: no attention layer, so no KV group (its states are modelled only beside attention pages)
    from course_lib.model.models import from_hf_config
    spec = from_hf_config({"model_type": "mamba", "hidden_size": 256, "num_hidden_layers": 2, "vocab_size": 512,
                           "state_size": 16, "expand": 2, "conv_kernel": 4, "max_position_embeddings": 4096})
    for launch in (VllmLaunch(), VllmLaunch(kv_cache_memory_bytes=2**30)):
        est = estimate_vllm(spec, gpu="h100-80gb", launch=launch)
        assert (est.kv_cache_tokens, est.max_concurrency) == (0, 0.0)


def test_the_pool_cannot_be_given_to_a_release_without_the_flag():
    # vllm/config/cache.py has kv_cache_memory_bytes from 0.10.2 (not in 0.10.1)
    from course_lib.errors import CourseInputError
    with pytest.raises(CourseInputError, match="not a setting of vLLM 0.10.1"):
        estimate_vllm(get_model("llama-3.1-8b"), gpu="l4", launch=VllmLaunch(version="0.10.1",
                                                                           kv_cache_memory_bytes=4 * 10**9))
    assert estimate_vllm(get_model("llama-3.1-8b"), gpu="l4", launch=VllmLaunch(
        version="0.10.2", kv_cache_memory_bytes=4 * 10**9, max_model_len=8192)).num_gpu_blocks > 0
