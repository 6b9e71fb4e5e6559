"""The vllm-v1 policy (vLLM 0.32's V1 scheduler) on cases worked by hand, and ``simulate --runtime vllm``'s flags.

The live check against vLLM itself is ``test_vllm_scheduler_oracle.py``; these run in a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.serving.admission import AdmissionConfig
from cli_support import run_cli
from course_lib.errors import CourseInputError
from course_lib.runtimes.vllm.scheduler import batch_defaults, vllm_v1_config
from course_lib.simulate import simulate
from course_lib.serving.trace import Request

REPO = Path(__file__).resolve().parents[3]
TWELVE = REPO / "examples" / "traces" / "vllm_v1" / "twelve_600_400.jsonl"


def _three(caching: bool) -> AdmissionConfig:
    # 7 blocks of 16 tokens (6 usable: vLLM's null block), 64 tokens a step
    return AdmissionConfig(kv_budget_bytes=7 * 16 * 100, kv_bytes_per_token=100, policy="vllm-v1",
                           block_size_tokens=16, max_num_batched_tokens=64, max_num_seqs=4,
                           enable_prefix_caching=caching)


def test_three_requests_by_hand():
    """Three requests of 32 prompt + 20 output tokens, worked step by step.

    Step 0: r0 and r1 take their 32-token prompts (2 blocks each) and spend the 64-token budget;
    r2 waits. Each prefill samples its first token. Step 1: each decode opens a third block (6 of
    6 used). Step 17: r0's token 49 needs a fourth block, none is free, so the newest running
    request, r1 (3 blocks, 17 tokens generated), is preempted; r0 takes one of r1's freed blocks
    (the free queue hands out r1's last block first). r0 finishes at step 19 (20 tokens: steps
    0..19) and frees 4 blocks. Step 20: r1 (49 tokens) finds its first 2 blocks still cached,
    so it computes 17 tokens, not 49 (prefix caching), needs 4 blocks in all; r2 (2 blocks) starts
    beside it. Step 21: r1 has room; r2's token 33 needs a third block, none is free, and r2 is
    the newest: it preempts itself. r1 finishes at step 22 (its 20th token). Step 23: r2 (33
    tokens, 2 blocks cached) computes 1 token and samples its 2nd; 18 more: finished at step 41.
    """
    res = simulate([Request(f"r{i}", 0, 32, 20, 20) for i in range(3)], _three(True))
    s = res.summary
    assert [r.finished_step for r in res.requests] == [19, 22, 41]
    assert [r.admitted_step for r in res.requests] == [0, 0, 20]
    assert [r.preemptions for r in res.requests] == [0, 1, 1]
    assert (s.preemptions, s.max_running, s.steps) == (2, 2, 42)
    assert s.recompute_tokens == 17 + 1                          # what the cache hits left to recompute
    assert res.blocks_used[:2] == (4, 6) and res.blocks_used[17] == 4
    assert "token budget" in res.requests[2].reason


def test_three_requests_without_prefix_caching_recompute_everything():
    """The same trace without prefix caching: r1 recomputes all 49 tokens at step 20, so r2 gets only the
    15 tokens left of the budget there (a chunked prefill) and its last 17 at step 21; r2 preempts itself
    at step 22 and recomputes its 33 tokens at step 23. The finishes fall on the same steps."""
    res = simulate([Request(f"r{i}", 0, 32, 20, 20) for i in range(3)], _three(False))
    assert [r.finished_step for r in res.requests] == [19, 22, 41]
    assert res.summary.preemptions == 2
    assert res.summary.recompute_tokens == 49 + 33
    assert res.blocks_used[20:22] == (5, 6)                     # r2's first chunk: 15 tokens in 1 block, then 2


def test_the_issues_case_without_vllm():
    """12 x (600 + 400) tokens on 12 MiB of a 4-layer Llama's cache (2,048 B/token, 48 blocks of 128):
    vLLM 0.32's counter vllm:num_preemptions says 4 (issue 35; the live test reruns vLLM)."""
    cfg = vllm_v1_config(kv_cache_memory_bytes=12 * 2**20, kv_bytes_per_token=2048, platform="cpu",
                         entrypoint="llm", max_model_len=1024)
    res = simulate([Request(f"r{i}", 0, 600, 400, 400) for i in range(12)], cfg)
    assert cfg.num_blocks == 48
    assert res.summary.preemptions == 4


def test_paged_v0_differs_on_the_same_trace():
    """The V0 policy (watermark, whole-prompt prefill, no token budget) on the issue's trace: not vLLM V1's count."""
    paged = AdmissionConfig(kv_budget_bytes=12 * 2**20, kv_bytes_per_token=2048, policy="paged",
                            block_size_tokens=128)
    res = simulate([Request(f"r{i}", 0, 600, 400, 400) for i in range(12)], paged)
    assert res.summary.preemptions != 4


def test_a_prompt_of_max_model_len_is_refused():
    cfg = vllm_v1_config(kv_cache_memory_bytes=12 * 2**20, kv_bytes_per_token=2048, max_model_len=1024)
    res = simulate([Request("long", 0, 1024, 10, 10), Request("ok", 0, 1023, 10, 10)], cfg)
    assert [r.status for r in res.requests] == ["rejected", "finished"]
    assert "max_model_len" in res.requests[0].reason
    assert res.requests[1].reason.endswith("(cut there: it reached max_model_len)")   # 1023 + 1 = 1024 tokens


def test_launch_defaults_follow_vllm_032():
    # vllm/engine/arg_utils.py get_batch_defaults (0.32.0)
    assert batch_defaults("cpu", entrypoint="serve") == (2048, 128)
    assert batch_defaults("cuda", 141 * 2**30, "h200") == (8192, 1024)
    assert batch_defaults("cuda", 180 * 2**30, "b200", "serve") == (16384, 1024)
    # 8,192 tokens need 64 blocks of 128; 12 MiB holds 48, one held back as the null block: vLLM names 47 x 128
    with pytest.raises(CourseInputError, match="max seq len \\(8192\\).*the estimated maximum model length is 6016\\."):
        vllm_v1_config(kv_cache_memory_bytes=12 * 2**20, kv_bytes_per_token=2048, max_model_len=8192)
    # a request of exactly the pool's 48 blocks is refused too (the null block), as the estimate refuses it
    with pytest.raises(CourseInputError, match="estimated maximum model length is 6016\\."):
        vllm_v1_config(kv_cache_memory_bytes=12 * 2**20, kv_bytes_per_token=2048, max_model_len=6144)
    with pytest.raises(CourseInputError, match="below max_num_seqs"):
        vllm_v1_config(kv_cache_memory_bytes=12 * 2**20, kv_bytes_per_token=2048, max_num_batched_tokens=100)


def test_cli_runtime_vllm_json(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--runtime", "vllm", "--gpu", "cpu", "--entrypoint", "llm",
                        "--kv-cache-memory-bytes", "12MiB", "--kv-bytes-per-token", "2048", "--max-model-len", "1024",
                        "--trace", TWELVE, "--json")
    assert code == 0
    summary = json.loads(out)["summary"]
    assert (summary["policy"], summary["preemptions"], summary["max_running"]) == ("vllm-v1", 4, 9)
    assert summary["config"]["max_num_batched_tokens"] == 4096 and summary["config"]["enable_prefix_caching"]



@pytest.mark.parametrize("model, block", [("llama-3.1-8b", 128), ("deepseek-v2-lite", 16)])
def test_simulate_reads_the_launch_estimate_resolves(capsys, model, block):
    """``simulate --runtime vllm --model`` schedules the one launch ``estimate --runtime vllm`` resolves (issue 40):
    the same block, token budget, max_num_seqs and release. vLLM's CPU platform forces 16-token blocks on an MLA
    model (vllm/platforms/cpu.py, 0.32.0: "CPU MLA backend requires block_size=16"), 128 otherwise; the
    scheduler's own defaults gave 128 to both."""
    launch = ["--model", model, "--gpu", "cpu", "--kv-cache-memory-bytes", "2GiB", "--max-model-len", "4096"]
    code, out, _ = run_cli(capsys, "estimate", "--runtime", "vllm", *launch, "--json")
    assert code == 0
    estimate = json.loads(out)
    code, out, _ = run_cli(capsys, "simulate", "--runtime", "vllm", *launch, "--trace", TWELVE, "--json")
    assert code == 0
    config = json.loads(out)["summary"]["config"]
    resolved = estimate["launch"]
    assert config["block_size_tokens"] == estimate["block_size"] == resolved["block_size"] == block
    assert config["num_blocks"] == estimate["num_gpu_blocks"]
    assert (config["max_num_batched_tokens"], config["max_num_seqs"], config["max_model_len"]) == \
        (resolved["max_num_batched_tokens"], resolved["max_num_seqs"], resolved["max_model_len"])

@pytest.mark.parametrize("argv, words", [
    (["--runtime", "vllm", "--gpu", "cpu"], "needs --kv-cache-memory-bytes"),
    (["--runtime", "vllm", "--kv-cache-memory-bytes", "12MiB", "--vllm-version", "0.31"],
     "the V1 scheduler is modelled for vLLM 0.32.0, 0.33.0 only"),
    # an unknown release: the one line every path gives (estimate, given pool, explorer, simulate)
    (["--runtime", "vllm", "--kv-cache-memory-bytes", "12MiB", "--vllm-version", "0.34"],
     "--vllm-version='0.34' is not a vllm release modelled here; use one of 0.5, "),
    (["--runtime", "vllm", "--kv-cache-memory-bytes", "12MiB", "--compare"], "--compare is for"),
    (["--runtime", "vllm", "--kv-cache-memory-bytes", "12MiB", "--watermark", "0.01"], "--watermark is for"),
    (["--kv-cache-memory-bytes", "12MiB"], "add --runtime vllm"),
    (["--runtime", "vllm", "--gpu", "cpu", "--kv-cache-memory-bytes", "12MiB", "--kv-bytes-per-token", "2048",
      "--max-model-len", "8192"], "the estimated maximum model length is 6016."),   # 48 blocks, 1 null: 47 x 128
    (["--runtime", "vllm", "--kv-cache-memory-bytes", "1GiB", "--model", "gemma-2-9b"], "sliding-window"),
])
def test_cli_runtime_vllm_refusals(capsys, argv, words):
    code, out, err = run_cli(capsys, "simulate", "--trace", TWELVE, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_decode_stretches_change_nothing():
    """The stretches of pure decode the simulator takes at once give exactly what stepping every step gives.

    300 random small traces (block sizes 1 to 32, tight caches, budgets and max_num_seqs, arrivals over
    time, max_wait_steps and max_queue_len, prefix caching on and off): results equal, field by field.
    """
    import dataclasses
    import random

    from course_lib.simulate.vllm_v1 import _V1Simulation

    base = vllm_v1_config(kv_cache_memory_bytes=12 * 2**20, kv_bytes_per_token=2048, max_model_len=1024)
    for seed in range(300):
        rng = random.Random(seed)
        size, blocks = rng.choice([1, 2, 4, 16, 32]), rng.randint(8, 80)
        mml = rng.choice([None, max(2, size * blocks - rng.randint(0, size))])
        cfg = dataclasses.replace(base, block_size_tokens=size, kv_num_blocks=blocks, max_model_len=mml,
                                  max_num_batched_tokens=rng.choice([16, 64, 512]),
                                  max_num_seqs=rng.choice([1, 4, 16]), enable_prefix_caching=rng.random() < 0.5,
                                  max_wait_steps=rng.choice([None, 50]), max_queue_len=rng.choice([None, 5]))
        trace = []
        for i in range(rng.randint(1, 30)):
            out = rng.randint(1, 100)
            trace.append(Request(i, rng.choice([0, 0, rng.randint(0, 300)]), rng.randint(1, 200),
                                 out + rng.randint(0, 5), out))
        fast = _V1Simulation(trace, cfg).run()
        slow = _V1Simulation(trace, cfg)
        slow.fast = False
        assert fast == slow.run(), seed


def test_a_cache_of_one_block_is_refused_by_its_flag(capsys):
    code, out, err = run_cli(capsys, "simulate", "--trace", TWELVE, "--runtime", "vllm", "--gpu", "cpu",
                          "--kv-bytes-per-token", "2048", "--kv-cache-memory-bytes", "300KiB")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "kv_cache_memory_bytes=307,200 holds 1 block(s)" in err and "524,288 B" in err


def test_0_33_schedules_as_0_32_except_gb10_defaults(capsys):
    """vLLM 0.33.0's scheduler diffed against 0.32.0's: no modelled rule changed, so the same trace gives the same
    run; get_batch_defaults (0.33.0) keeps a GB10 on the small tier: 2,048 tokens, 256 sequences for serve."""
    runs = {}
    for version in ("0.32", "0.33"):
        code, out, _ = run_cli(capsys, "simulate", "--runtime", "vllm", "--gpu", "cpu", "--entrypoint", "llm",
                            "--kv-cache-memory-bytes", "12MiB", "--kv-bytes-per-token", "2048", "--max-model-len",
                            "1024", "--trace", TWELVE, "--json", "--vllm-version", version)
        assert code == 0
        runs[version] = json.loads(out)["summary"]
    assert runs["0.32"]["preemptions"] == runs["0.33"]["preemptions"] == 4
    assert runs["0.32"]["max_running"] == runs["0.33"]["max_running"]
    from course_lib.runtimes.vllm.scheduler import batch_defaults
    from course_lib.runtimes.versions import Version
    assert batch_defaults("cuda", 128 * 2**30, "gb10", "serve", Version(0, 32, 0)) == (8192, 1024)
    assert batch_defaults("cuda", 128 * 2**30, "gb10", "serve", Version(0, 33, 0)) == (2048, 256)
    assert batch_defaults("cuda", 80 * 2**30, "h100-80gb", "serve", Version(0, 33, 0)) == (8192, 1024)


@pytest.mark.parametrize("verb", [
    ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--runtime", "vllm"],
    ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--runtime", "vllm", "--kv-cache-memory-bytes", "20GB"],
    ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--runtime", "vllm", "--kv-cache-memory-bytes", "4GB",
     "--max-num-seqs", "64", "--max-num-batched-tokens", "2048", "--max-model-len", "8192"],   # exit 0 before: "vllm 0.99.0's own sizing rule"
    ["estimate", "--model", "llama-3.1-8b", "--gpu", "cpu", "--runtime", "vllm", "--kv-cache-memory-bytes", "1GB"],
    ["simulate", "--trace", TWELVE, "--runtime", "vllm", "--kv-cache-memory-bytes", "12MiB"],
])
def test_an_unknown_release_is_refused_the_same_way_on_every_path(capsys, verb):
    # Issue 40: '--vllm-version 0.99 --kv-cache-memory-bytes 20GB' printed "vllm 0.99.0's own sizing rule" (exit 0)
    code, out, err = run_cli(capsys, *verb, "--vllm-version", "0.99")
    assert code == 2 and out == "", (out, err)
    assert err.strip().splitlines() == ["course-memory: error: --vllm-version='0.99' is not a vllm release modelled "
                                        "here; use one of " + ", ".join(f"0.{m}" for m in range(5, 34))], err


def test_the_explorer_refuses_an_unknown_release_with_the_same_line():
    from course_lib.views.vllm_explorer import plan_launch
    plan = plan_launch(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, vllm_version="0.99")
    assert not plan.starts and "--vllm-version='0.99' is not a vllm release modelled here" in plan.refusal
