"""Windowed models against vLLM 0.32's CPU build: the recorded answers of benchmarks/bench_vllm_windows_oracle.py.

Tiny models of our own with a Mistral-style window in every layer, Gemma-2's 1:1 alternation, Gemma-3's 5 sliding
to 1 full and gpt-oss's alternating 128-token window, and a Qwen3-Next of 3 Gated DeltaNet layers to 1 full (the
state pages, padded to the attention page, 2 a request, and the attention block grown to hold a state), a Nemotron-H
of 2 Mamba-2 layers to 1 attention layer (its fp32 SSM state, 3 pages a request: 0.32's prefill checkpoint page)
an LFM2 of 2 short-convolution layers to 2 attention layers, and a DeepSeek-V4 (a sliding, a CSA, an HCA and a CSA
layer: five kinds of page, packed into groups; runtimes/vllm/kv_dsv4.py), started by vLLM itself with few tokens in flight (256-1,024
batched tokens) so that the window binds; at several lengths, pools and block sizes, refusals included. Ours is
replayed here against what vLLM logged (benchmarks/vllm_oracle/windows.json): the same tokens and concurrency, or
the same estimated maximum model length in the refusal. Before the one KV layout, the block-16 cases (a window
layer takes the CPU kernel's 32-token block) came out a block short.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.errors import CourseInputError
from course_lib.model.models import from_hf_config
from course_lib.runtimes import VllmLaunch, estimate_vllm

ROOT = Path(__file__).resolve().parents[4]
RESULTS = ROOT / "benchmarks" / "vllm_oracle" / "windows.json"


def _rows() -> list[dict]:
    return json.loads(RESULTS.read_text())["cases"] if RESULTS.exists() else []


def _ours(row: dict):
    spec = from_hf_config(str(ROOT / "benchmarks" / "vllm_oracle" / "configs" / row["id"] / "config.json"))
    return estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(
        entrypoint="llm", kv_cache_memory_bytes=row["kv_cache_memory_bytes"], max_model_len=row["max_model_len"],
        block_size=row.get("block_size"), max_num_batched_tokens=row["engine_args"]["max_num_batched_tokens"]))


@pytest.mark.parametrize("row", [r for r in _rows() if "tokens" in r["vllm"]], ids=lambda r: r["id"])
def test_windowed_tokens_and_concurrency_equal_what_vllm_logged(row):
    est = _ours(row)
    assert (est.kv_cache_tokens, f"{est.max_concurrency:.2f}") == (row["vllm"]["tokens"], row["vllm"]["concurrency"])


@pytest.mark.parametrize("row", [r for r in _rows() if "estimated_max_model_len" in r["vllm"]], ids=lambda r: r["id"])
def test_a_refused_windowed_launch_names_vllms_length(row):
    with pytest.raises(CourseInputError) as exc:
        _ours(row)
    assert f"the estimated maximum model length is {row['vllm']['estimated_max_model_len']}." in str(exc.value)


def test_the_recorded_windows_cover_the_four_layouts_and_refusals():
    rows = _rows()
    started = {r["arch"] for r in rows if "tokens" in r["vllm"]}
    refused = {r["arch"] for r in rows if "estimated_max_model_len" in r["vllm"]}
    assert {"mistral", "gemma2", "gemma3", "gpt_oss", "qwen3_next", "nemotron_h", "lfm2", "deepseek_v4"} <= started
    assert {"gemma2", "gemma3", "gpt_oss", "nemotron_h", "lfm2", "deepseek_v4"} <= refused, refused
    assert {r["block_size"] for r in rows} >= {None, 16, 32, 64}
    assert all(r["agree"] is not False for r in rows), [r["id"] for r in rows if r["agree"] is False]
