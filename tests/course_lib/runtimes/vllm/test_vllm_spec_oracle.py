"""Replays vLLM 0.32's CPU build on speculative decoding (benchmarks/vllm_oracle/speculative.json, recorded by
benchmarks/bench_vllm_spec_oracle.py): a tiny Llama with a 12 MiB KV pool, plain, with n-gram (no drafter: the same
tokens) with a 2-layer draft model (its layers join the KV cache: 4 + 2 layers share the pool) and with a one-layer EAGLE-3
head (4 + 1 layers). An EAGLE-3 method given a plain Llama folder is refused by vLLM's loader (recorded, not
replayed)."""

import json
from pathlib import Path

import pytest

from course_lib.model.models import from_hf_config
from course_lib.runtimes import VllmLaunch, estimate_vllm
from course_lib.runtimes.vllm.spec import parse_speculative_config

ORACLE = Path(__file__).resolve().parents[4] / "benchmarks" / "vllm_oracle"
RECORD = json.loads((ORACLE / "speculative.json").read_text())
STARTED = [row for row in RECORD["cases"] if row["vllm"]["started"]]


@pytest.mark.parametrize("row", STARTED, ids=[row["id"] for row in STARTED])
def test_tokens_match_vllm_cpu(row):
    sc = row["speculative_config"]
    if sc and "model" in sc:
        folder = "spec-eagle3-head" if sc["model"].rstrip("/").endswith("eagle3-head") else "spec-draft-llama-2-layers"
        sc = {**sc, "model": str(ORACLE / "configs" / folder)}
    spec = from_hf_config(str(ORACLE / "configs" / "spec-llama"), name="spec-llama")
    est = estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(
        version="0.32.0", entrypoint="llm", kv_cache_memory_bytes=row["kv_cache_memory_bytes"],
        max_model_len=row["max_model_len"], speculative_config=parse_speculative_config(sc)))
    assert est.kv_cache_tokens == row["vllm"]["tokens"], (
        f"{row['id']}: vLLM's CPU build logged {row['vllm']['tokens']:,} tokens, we give {est.kv_cache_tokens:,}; "
        "look at which drafter layers join the KV cache (course_lib/runtimes/vllm/spec.py)")


def test_the_record_holds_a_drafter_that_changes_the_pool():
    tokens = {row["id"]: row["vllm"]["tokens"] for row in STARTED}
    assert tokens["ngram-k3"] == tokens["none"] and tokens["draft-model-k3"] * 6 == tokens["none"] * 4
    assert tokens["eagle3-head-k3"] == 12_582_912 // (5 * 2 * 64 * 2 * 128) * 128   # 4 + 1 layers, 128-token blocks
