"""DeepSeek-V4's KV groups as vLLM 0.32/0.33 size them, worked by hand from the source (issue 42, item 2).

Read in vLLM 0.33.0 (runtimes/vllm/kv_dsv4.py cites the lines): every layer registers a 64-token window page, a
CSA layer (m = 4) its compressed entries, the indexer's keys (both 256-token blocks), a 4-token compressor ring and an
indexer ring (window 8), an HCA layer (m = 128) its entries and an 8-token ring (window 128). The indexer runs only
the block-outermost layout, so the groups are ``_get_packed_kv_cache_groups``'. vLLM 0.32's CPU build checks the
same arithmetic to the token on a tiny DeepSeek-V4 (test_vllm_windows_oracle.py); this file works the published
DeepSeek-V4-Flash (2 sliding, 21 CSA, 20 HCA layers; fp8_ds_mla) by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.errors import CourseInputError
from course_lib.model.models import from_hf_config
from course_lib.runtimes import VllmLaunch, estimate_vllm

HUB = Path(__file__).resolve().parents[3] / "files" / "hub"
GiB = 2**30


@pytest.fixture(scope="module")
def flash():
    return from_hf_config(json.loads((HUB / "DeepSeek-V4-Flash-Base.config.json").read_text()), name="dsv4-flash")


def _launch(**knobs):
    return VllmLaunch(version="0.33.0", max_model_len=65536, max_num_batched_tokens=8192, tensor_parallel=8, **knobs)


def test_flash_groups_blocks_and_pages_by_hand(flash):
    """Pages (fp8_ds_mla, 576-B aligned): window 64 x 584 -> 37,440; CSA entries 64 x 584 -> 37,440; HCA 2 x 584 ->
    1,728; indexer 64 x 132 -> 8,640; CSA ring 4 x 2 x 2 x 512 x 4 -> 32,832, its indexer's 4 x 2 x 2 x 128 x 4 ->
    8,640; HCA ring 8 x 2 x 512 x 4 -> 32,832.

    Buckets: 43 windows (one size: balanced), the 256-token pages (21 + 20 + 21: unbalanced, one group), the CSA
    rings (21 + 21: balanced, two sizes, so repeats >= 21), the HCA rings (20). ``_approximate_gcd([43, 21, 20],
    >= 21)``: d = 21 pads 20 + 0 + 1 = 21, d = 22 pads 1 + 1 + 2 = 4 (the least): 22 repeats, so the windows split in
    cdiv(43, 22) = 2 groups, the rest stay whole: 5 groups. Widest: 21 x 37,440 + 20 x 1,728 + 21 x 8,640 =
    1,002,240 B a block.

    A 65,536-token request with 2 x 8,192 tokens in flight (CUDA): windows 2 x (cdiv(127 + 16,384, 64) + 1) = 2 x 259,
    entries cdiv(65,536, 256) = 256, CSA rings cdiv(7 + 16,384, 4) + 1 = 4,099, HCA rings cdiv(127 + 16,384, 8) + 1 =
    2,065: 6,938 blocks. A 64 GiB pool: 68,719,476,736 // 1,002,240 = 68,565 blocks, 68,565 / 6,938 = 9.88x."""
    est = estimate_vllm(flash, gpu="h200", launch=_launch(kv_cache_memory_bytes=64 * GiB))
    assert est.block_size == 256
    assert (est.launch["kv_cache_groups"], est.launch["bytes_per_block"]) == (5, 1_002_240)
    assert est.launch["blocks_per_request"] == 2 * 259 + 256 + 4099 + 2065 == 6938
    assert est.num_gpu_blocks == 68_565
    assert f"{est.max_concurrency:.2f}" == "9.88"
    assert est.kv_cache_tokens == int(68_565 / 6938 * 65536)


def test_the_profile_and_the_given_pool_agree(flash):
    profile = estimate_vllm(flash, gpu="h200", launch=_launch())
    given = estimate_vllm(flash, gpu="h200", launch=_launch(kv_cache_memory_bytes=profile.runtime_kv_cache_bytes))
    assert (profile.num_gpu_blocks, profile.kv_cache_tokens, profile.max_concurrency) == \
        (given.num_gpu_blocks, given.kv_cache_tokens, given.max_concurrency)


def test_a_release_not_read_and_a_bf16_cache_are_refused_in_one_line(flash):
    with pytest.raises(CourseInputError, match="read from vLLM 0.32 and 0.33 only"):
        estimate_vllm(flash, gpu="h200", launch=VllmLaunch(version="0.31.0", tensor_parallel=8))
    with pytest.raises(CourseInputError, match="fp8_ds_mla cache only"):
        estimate_vllm(flash, gpu="h200", launch=_launch(kv_cache_dtype="bf16"))
