"""Admission decisions against hand-worked budgets and published figures."""

from __future__ import annotations

import pytest

from course_lib.serving.admission import (ADMIT, PAGED, QUEUE, REJECT, RESERVE_MAX, AdmissionConfig, admission_blocks,
                                  can_admit, cdiv, decide, kv_config, never_fits_reason)
from course_lib.errors import CourseInputError

GB = 10**9
# Llama-2-7B, fp16: 2 (K and V) x 32 layers x 32 KV heads x 128 dims x 2 B = 524,288 B per token.
LLAMA2_7B_KV_PER_TOKEN = 2 * 32 * 32 * 128 * 2


@pytest.fixture
def lesson() -> AdmissionConfig:
    """The lesson's 24 GB device: 24 - 14 weights - 2 workspace - 2 reserve = 6 GB for the KV cache."""
    return kv_config(device_bytes=24 * GB, weights_bytes=14 * GB, workspace_bytes=2 * GB, reserve_bytes=2 * GB,
                     kv_bytes_per_token=LLAMA2_7B_KV_PER_TOKEN)


def test_lesson_budget_in_blocks(lesson):
    assert lesson.kv_budget_bytes == 6_000_000_000, "24 GB - 14 GB - 2 GB - 2 GB should leave 6 GB"
    # one 16-token block = 16 x 524,288 = 8,388,608 B (8 MiB); 6e9 / 8,388,608 = 715.3 -> 715 whole blocks
    assert lesson.block_bytes == 8_388_608
    assert lesson.num_blocks == 715
    assert lesson.kv_capacity_bytes == 715 * 8_388_608 <= lesson.kv_budget_bytes


def test_ten_fit_and_the_eleventh_is_queued(lesson):
    # 608 prompt + 512 new = 1,120 tokens = 70 blocks; 10 x 70 = 700 <= 715 < 770 = 11 x 70
    assert admission_blocks(lesson, 608, 512) == 70
    free = lesson.num_blocks
    for k in range(10):
        d = decide(lesson, prompt_tokens=608, max_new_tokens=512, free_blocks=free, running=k)
        assert d.action == ADMIT, f"request {k + 1} of 10 should be admitted: {d.reason}"
        free -= 70
    assert free == 15
    d = decide(lesson, prompt_tokens=608, max_new_tokens=512, free_blocks=free, running=10)
    assert d.action == QUEUE, "the 11th crosses the safe budget now but fits later: queue it, do not reject it"
    assert "70" in d.reason and "15" in d.reason, f"the reason should name needed and free blocks: {d.reason}"


def test_never_fitting_request_is_rejected_at_once(lesson):
    # 715 blocks x 16 = 11,440 tokens is the whole budget; 11,441 tokens need 716 blocks
    assert never_fits_reason(lesson, 10_000, 1_440) is None
    d = decide(lesson, prompt_tokens=10_000, max_new_tokens=1_441, free_blocks=715, running=0)
    assert d.action == REJECT
    assert d.reason.startswith("never fits") and "716" in d.reason and "715" in d.reason, d.reason


def test_paged_claims_only_the_prompt_and_keeps_the_watermark(lesson):
    paged = AdmissionConfig(lesson.kv_budget_bytes, lesson.kv_bytes_per_token, policy=PAGED)
    assert paged.watermark_blocks == 7, "vLLM: int(0.01 x 715) = 7 blocks kept free"
    assert admission_blocks(paged, 608, 512) == 38, "608 prompt tokens = 38 blocks of 16"
    assert can_admit(paged, 38, 45, running=0)          # 45 - 38 = 7 >= 7
    assert not can_admit(paged, 38, 44, running=0)      # 44 - 38 = 6 < 7
    # a paged request that could never fit even alone: 715 - 7 = 708 usable blocks = 11,328 tokens
    assert never_fits_reason(paged, 10_000, 1_328) is None
    assert never_fits_reason(paged, 10_000, 1_329).startswith("never fits")


def test_max_num_seqs_queues(lesson):
    cfg = AdmissionConfig(lesson.kv_budget_bytes, lesson.kv_bytes_per_token, max_num_seqs=2)
    d = decide(cfg, prompt_tokens=10, max_new_tokens=10, free_blocks=700, running=2)
    assert d.action == QUEUE and "max_num_seqs" in d.reason, d.reason


def test_fcfs_queue_and_service_policy_rejections(lesson):
    cfg = AdmissionConfig(lesson.kv_budget_bytes, lesson.kv_bytes_per_token, max_queue_len=3)
    d = decide(cfg, prompt_tokens=10, max_new_tokens=10, free_blocks=700, running=0, queued_ahead=2)
    assert d.action == QUEUE and "first come, first served" in d.reason
    d = decide(cfg, prompt_tokens=10, max_new_tokens=10, free_blocks=700, running=0, queued_ahead=3)
    assert d.action == REJECT and "max_queue_len=3" in d.reason, d.reason
    no_queue = AdmissionConfig(lesson.kv_budget_bytes, lesson.kv_bytes_per_token, max_queue_len=0)
    d = decide(no_queue, prompt_tokens=608, max_new_tokens=512, free_blocks=15, running=10)
    assert d.action == REJECT and "max_queue_len=0" in d.reason


def test_paged_attention_paper_request():
    # PagedAttention (Kwon et al. 2023): OPT-13B caches 800 KB per token, so a 2,048-token
    # request holds up to 1,677,721,600 B ("1.6 GB") = 128 blocks of 16 tokens.
    opt13b = 2 * 5120 * 40 * 2
    cfg = AdmissionConfig(kv_budget_bytes=1_677_721_600, kv_bytes_per_token=opt13b)
    assert cfg.num_blocks == 128
    assert never_fits_reason(cfg, 1_024, 1_024) is None
    assert never_fits_reason(cfg, 1_024, 1_025) is not None


def test_cdiv_off_by_one():
    assert [cdiv(x, 16) for x in (0, 1, 15, 16, 17, 32, 33)] == [0, 1, 1, 1, 2, 2, 3]


@pytest.mark.parametrize("kwargs, words", [
    ({"policy": "lru"}, "policy='lru'"),
    ({"watermark": 1.5}, "watermark=1.5"),
    ({"block_size_tokens": 0}, "block_size_tokens=0"),
    ({"max_num_seqs": 0}, "max_num_seqs=0"),
    ({"max_queue_len": -1}, "max_queue_len=-1"),
    ({"kv_budget_bytes": 100}, "holds no 16-token block"),
])
def test_bad_config_names_the_value(kwargs, words):
    base = {"kv_budget_bytes": 6 * GB, "kv_bytes_per_token": LLAMA2_7B_KV_PER_TOKEN}
    with pytest.raises(CourseInputError, match=words.replace("(", r"\(").replace(".", r"\.")):
        AdmissionConfig(**{**base, **kwargs})


def test_fixed_pools_that_fill_the_device_leave_no_budget():
    with pytest.raises(CourseInputError, match="leaving no KV budget"):
        kv_config(device_bytes=24 * GB, weights_bytes=20 * GB, workspace_bytes=2 * GB, reserve_bytes=2 * GB,
                  kv_bytes_per_token=1)


def test_reserve_as_a_share():
    # 10% of 24 GB = 2.4 GB reserve: 24 - 14 - 2 - 2.4 = 5.6 GB
    cfg = kv_config(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB", reserve_bytes="10%",
                    kv_bytes_per_token=1, policy=RESERVE_MAX)
    assert cfg.kv_budget_bytes == 5_600_000_000
