"""Hybrid models' recurrent pages in vLLM's launch, against figures worked by hand from vLLM's source (issue 42, item 2).

The sources (vLLM 0.29.0-0.33.0, cited in course_lib/runtimes/vllm/mamba_pages.py): the SSM state's dtype per family
(``model_executor/models/config.py``: Qwen3.5's ``mamba_ssm_dtype``, Nemotron-H's float32; ``mamba_utils.py``
``kda_state_dtype``: KDA's float32), ``_align_hybrid_block_size`` (``platforms/interface.py``: the MLA floor of
128 tokens; 0.33's lcm with FlashInfer GDN's 64-token prefill checkpoint), and ``MambaSpec.max_memory_usage_bytes``
(``kv_cache_interface.py``: 2 pages a request in 'align', + 1 checkpoint page for Mamba-2 from 0.32 and for
FlashInfer's GDN in 0.33). vLLM 0.32's CPU build checks the Mamba-2 and short-conv pages to the token
(test_vllm_windows_oracle.py); it cannot start a Qwen3.5 (its qwen3_5.py imports torchvision, absent there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.model.models import from_hf_config
from course_lib.runtimes import VllmLaunch, estimate_vllm

HUB = Path(__file__).resolve().parents[3] / "files" / "hub"


def _published(name: str, **shrink) -> dict:
    cfg = json.loads((HUB / f"{name}.config.json").read_text())
    cfg.update(shrink)
    return cfg


@pytest.fixture(scope="module")
def qwen35():
    # Qwen3.5-27B's published text config: 16 full-attention layers (4 KV heads of 256), 48 GDN layers
    # (16 k-heads, 48 v-heads of 128, kernel 4), "mamba_ssm_dtype": "float32"
    return from_hf_config(_published("Qwen3.5-27B-text"), name="qwen3.5-27b")


@pytest.fixture(scope="module")
def nemotron():
    # Nemotron-Nano-9B-v2's published dims, its pattern's first 15 layers: 8 Mamba-2, 6 MLP, 1 attention (8 KV heads
    # of 128); no mamba_ssm_cache_dtype in the config
    cfg = _published("Nemotron-Nano-9B-v2")
    return from_hf_config(dict(cfg, num_hidden_layers=15, hybrid_override_pattern=cfg["hybrid_override_pattern"][:15]),
                          name="nemotron-nano-9b-v2")


def _est(spec, gpu, version, **knobs):
    return estimate_vllm(spec, gpu=gpu, launch=VllmLaunch(version=version, max_model_len=8192, **knobs))


def test_qwen35_block_holds_its_fp32_state_on_an_a100(qwen35):
    """State 30,720 x 2 + 786,432 x 4 = 3,207,168 B (fp32 SSM from the config); an attention token 2 x 4 x 256 x 2 =
    4,096 B; Triton's GDN prefill on an A100: 16 x cdiv(3,207,168, 16 x 4,096) = 16 x 49 = 784 (bf16 gave 400)."""
    est = _est(qwen35, "a100-80gb", "0.33.0")
    assert est.block_size == 784
    assert "float32" in est.defaults["block_size"]
    # 1 attention group and 3 GDN groups of 16 layers: cdiv(8,192, 784) = 11 + 3 x 2 pages
    assert est.launch["blocks_per_request"] == 11 + 3 * 2
    assert est.launch["bytes_per_block"] == 16 * 784 * 4096


def test_qwen35_on_an_h100_follows_flashinfers_checkpoint_in_033_only(qwen35):
    """0.33 on SM90: FlashInfer's GDN prefill, so the block aligns to lcm(16, 64) = 64: 64 x cdiv(3,207,168,
    64 x 4,096) = 64 x 13 = 832, and each GDN layer holds a checkpoint page (3 a request); 0.32 has neither."""
    new, old = _est(qwen35, "h100-80gb", "0.33.0"), _est(qwen35, "h100-80gb", "0.32.0")
    assert (new.block_size, new.launch["blocks_per_request"]) == (832, 10 + 3 * 3)       # cdiv(8,192, 832) = 10
    assert (old.block_size, old.launch["blocks_per_request"]) == (784, 11 + 3 * 2)


def test_the_pool_given_reads_the_same_hybrid_layout(qwen35):
    profile = _est(qwen35, "h100-80gb", "0.33.0")
    given = _est(qwen35, "h100-80gb", "0.33.0", kv_cache_memory_bytes=profile.runtime_kv_cache_bytes)
    assert (given.block_size, given.num_gpu_blocks, given.kv_cache_tokens) == \
        (profile.block_size, profile.num_gpu_blocks, profile.kv_cache_tokens)
    assert any("3 pages a request" in n for n in given.notes)


def test_nemotron_h_state_is_fp32_and_keeps_a_checkpoint_page_from_032(nemotron):
    """Mamba-2 state: conv (10,240 + 2 x 8 x 128) x 3 = 36,864 values in bf16, temporal 128 x 80 x 128 = 1,310,720
    in fp32 (NemotronHForCausalLMConfig's default): 5,316,608 B; an attention token 8 x 128 x 2 x 2 = 4,096 B:
    16 x cdiv(5,316,608, 65,536) = 16 x 82 = 1,312 (bf16 gave 672). 9 groups of 1 layer: cdiv(8,192, 1,312) = 7
    attention blocks + 8 x 3 state pages in 0.32 (mamba_mixer2.py's checkpoint page), 8 x 2 in 0.31."""
    new, old = _est(nemotron, "h100-80gb", "0.32.0"), _est(nemotron, "h100-80gb", "0.31.0")
    assert new.block_size == old.block_size == 1312
    assert new.launch["kv_cache_groups"] == 9
    assert new.launch["blocks_per_request"] == 7 + 8 * 3
    assert old.launch["blocks_per_request"] == 7 + 8 * 2
    assert new.launch["bytes_per_block"] == 1312 * 4096


def test_an_mla_hybrid_aligns_to_128_tokens_with_kdas_fp32_state():
    """Kimi-Linear (3 KDA layers of 32 heads of 128, then MLA, 576 values a token in bf16 = 1,152 B): KDA's state
    36,864 x 2 + 524,288 x 4 = 2,170,880 B; the MLA floor: 128 x cdiv(2,170,880, 128 x 1,152) = 128 x 15 = 1,920
    (the old rule: bf16 and no floor, 976)."""
    cfg = _published("Kimi-Linear-48B-A3B")
    spec = from_hf_config(dict(cfg, num_hidden_layers=4, num_experts=8, linear_attn_config=dict(
        cfg["linear_attn_config"], kda_layers=[1, 2, 3], full_attn_layers=[4])), name="kimi-linear")
    est = _est(spec, "h100-80gb", "0.33.0")
    assert est.block_size == 1920
    assert "128 tokens for an MLA hybrid" in est.defaults["block_size"]
