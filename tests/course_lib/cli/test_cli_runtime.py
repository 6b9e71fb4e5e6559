"""``course-memory estimate --runtime ...`` and ``course-memory from-log``: the command line's contract.

The figures behind them are checked against the runtimes' sources and logs in test_runtimes.py; here, what
a user sees: the JSON keys the issue names, one-line refusals (exit 2), the log's pools beside ours.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.cli import main

GiB = 2**30
LOGS = Path(__file__).resolve().parents[2] / "files" / "runtime_logs" / "logs"
RUNTIME_KEYS = {"runtime_kv_cache_bytes", "kv_cache_tokens", "num_gpu_blocks", "max_concurrency",
                "activation_peak_bytes", "non_torch_bytes", "cuda_graph_bytes", "share", "weights_bytes"}


def run(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("runtime, share", [("vllm", "gpu_memory_utilization"), ("sglang", "mem_fraction_static"),
                                            ("trtllm", "kv_cache_free_gpu_mem_fraction")])
def test_estimate_runtime_json_has_the_runtime_terms(runtime, share, capsys):
    rc, out, err = run(["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--runtime", runtime,
                        "--max-model-len", "8192", "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert RUNTIME_KEYS <= set(data), RUNTIME_KEYS - set(data)
    assert data["runtime"] == runtime and data["share"] == data["launch"][share]
    assert all(isinstance(data[k], int) for k in RUNTIME_KEYS - {"max_concurrency", "share"})
    # the pool holds its tokens: blocks x block size (SGLang pages by one token)
    assert data["kv_cache_tokens"] <= data["num_gpu_blocks"] * data["block_size"] + data["block_size"]
    assert "own sizing rule" in data["estimate_model"]


def test_estimate_without_runtime_says_it_is_the_lesson_model(capsys):
    rc, out, _ = run(["estimate", "--model", "llama-3-8b", "--json"], capsys)
    assert rc == 0 and "simple model" in json.loads(out)["estimate_model"]
    rc, out, _ = run(["estimate", "--model", "llama-3.1-8b"], capsys)
    assert rc == 0 and out.startswith("estimate: the lesson's simple model")


def test_vllm_defaults_follow_the_release(capsys):
    # 0.10: utilization 0.9, FlashInfer's sampler; 0.21: 0.92 and CUDA graphs inside the budget (the V1 runner's
    # estimate; in 0.22-0.28 Llama runs the V2 runner, whose estimate is a stub returning 0)
    _, old, _ = run(["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--runtime", "vllm",
                     "--vllm-version", "0.10.1", "--max-model-len", "8192", "--json"], capsys)
    _, new, _ = run(["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--runtime", "vllm",
                     "--vllm-version", "0.21.0", "--max-model-len", "8192", "--json"], capsys)
    old, new = json.loads(old), json.loads(new)
    assert (old["share"], new["share"]) == (0.9, 0.92)
    assert {t["name"]: t["sign"] for t in old["terms"]}["cuda_graph"] == 0
    assert {t["name"]: t["sign"] for t in new["terms"]}["cuda_graph"] == -1
    assert "gpu_memory_utilization" in old["defaults"] and old["launch"]["max_num_seqs"] == 1024


def test_kv_cache_dtype_fp8_halves_the_page_not_the_weights(capsys):
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--runtime", "vllm", "--max-model-len", "8192",
            "--vllm-version", "0.10.1", "--json"]
    _, auto, _ = run(args, capsys)
    _, fp8, _ = run(args + ["--kv-cache-dtype", "fp8"], capsys)
    auto, fp8 = json.loads(auto), json.loads(fp8)
    assert fp8["kv_cache_bytes_per_token"] * 2 == auto["kv_cache_bytes_per_token"] == 131_072
    assert fp8["weights_bytes"] == auto["weights_bytes"]
    assert fp8["kv_cache_tokens"] // 1000 >= 2 * auto["kv_cache_tokens"] // 1000 - 1


@pytest.mark.parametrize("argv, fragment", [
    (["--gpu", "rtx-4090", "--runtime", "vllm"], "max seq len (131072)"),             # one request cannot fit
    (["--runtime", "vllm", "--mem-fraction-static", "0.8"], "--mem-fraction-static is sglang's knob"),
    (["--gpu-memory-utilization", "0.9"], "add --runtime vllm"),
    (["--runtime", "vllm", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
    (["--runtime", "vllm", "--vllm-version", "banana"], "--vllm-version='banana'"),
    (["--runtime", "vllm", "--kv-cache-dtype", "int3"], "kv"),
    (["--runtime", "trtllm", "--cpu-offload-gb", "4"], "--cpu-offload-gb is vllm or sglang's knob"),
    (["--cpu-offload-gb", "4"], "add --runtime vllm"),
    (["--runtime", "vllm", "--cpu-offload-gb", "-1"], "--cpu-offload-gb"),
])
def test_runtime_refusals_are_one_line(argv, fragment, capsys):
    rc, out, err = run(["estimate", "--model", "llama-3.1-8b", *argv], capsys)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and fragment in err, err


def test_from_log_json_shape(capsys):
    rc, out, err = run(["from-log", str(LOGS / "vllm-llama32-3b-t4-v0.txt"), "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert {"runtime", "launch", "logged", "predicted"} <= set(data)
    assert set(data["logged"]) >= {"weights_bytes", "activation_bytes", "non_torch_bytes", "cuda_graph_bytes",
                                   "kv_cache_bytes", "kv_cache_tokens", "num_gpu_blocks", "max_concurrency"}
    assert data["logged"]["kv_cache_bytes"] == round(6.22 * GiB) and data["logged"]["num_gpu_blocks"] == 3637
    assert data["predicted"]["kv_cache_bytes"] > 0 and data["preset"] == "llama-3.2-3b"


def test_from_log_without_a_config_still_reads_the_log(capsys):
    rc, out, _ = run(["from-log", str(LOGS / "sglang-qwq32b-tp4-l4.txt"), "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["logged"]["kv_cache_tokens"] == 46_611
    assert "missing" in data["predicted"] and "QwQ-32B" in data["predicted"]["missing"]


def test_from_log_silent_figures_are_null(capsys):
    rc, out, _ = run(["from-log", str(LOGS / "vllm-qwen3-235b-fp8-tp4-h100.txt"), "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["logged"]["weights_bytes"] is None and data["logged"]["kv_cache_tokens"] == 178_880


def test_from_log_text_shows_the_pools_side_by_side(capsys):
    rc, out, _ = run(["from-log", str(LOGS / "vllm-gptoss20b-h100.txt")], capsys)
    assert rc == 0
    assert "workspace: activation peak" in out and "kv_cache" in out and "predicted" in out
    assert "50.28" in out                                        # the log's own KV figure, as printed


@pytest.mark.parametrize("make", [lambda p: p.write_text("no runtime here\n"), lambda p: p.mkdir(),
                                  lambda p: None])
def test_from_log_refuses_what_is_not_a_log(make, tmp_path, capsys):
    path = tmp_path / "x.log"
    make(path)
    rc, out, err = run(["from-log", str(path)], capsys)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1


def test_cpu_offload_gb_is_gib_per_gpu(capsys):
    base = json.loads(run(["estimate", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--runtime", "vllm",
                           "--max-model-len", "8192", "--json"], capsys)[1])
    off = json.loads(run(["estimate", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--runtime", "vllm",
                          "--max-model-len", "8192", "--cpu-offload-gb", "6", "--json"], capsys)[1])
    assert base["weights_bytes"] - off["weights_bytes"] == 6 * GiB
    assert off["runtime_kv_cache_bytes"] - base["runtime_kv_cache_bytes"] == 6 * GiB


def test_from_log_dtype_says_what_the_log_does_not(capsys, tmp_path):
    """An engine the log never calls 8-bit: --dtype int8 makes the weights int8 (linear layers only)."""
    log = tmp_path / "trt.log"
    log.write_text("[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 23.99 GiB, "
                   "available: 12.22 GiB\n[TensorRT-LLM][INFO] [MemUsageChange] Allocated 11.00 GiB for max tokens in "
                   "paged KV cache (288384).\n")
    rc16, out16, err16 = run(["from-log", str(log), "--model", "llama-3-8b", "--json"], capsys)
    rc8, out8, err8 = run(["from-log", str(log), "--model", "llama-3-8b", "--dtype", "int8", "--json"], capsys)
    assert rc16 == rc8 == 0, err16 + err8
    w16, w8 = json.loads(out16)["predicted"]["weights_bytes"], json.loads(out8)["predicted"]["weights_bytes"]
    # 6.98e9 linear parameters go from 2 B to 1 B; the 2 x 525M embedding/head parameters stay 16-bit
    assert 6.5e9 < w16 - w8 < 7.2e9, (w16, w8)
    rc, out, err = run(["from-log", str(log), "--dtype", "int9"], capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--dtype='int9'" in err


def test_from_log_tensor_parallel_says_what_the_log_does_not(capsys, tmp_path):
    """A TensorRT-LLM engine's ranks each print their own lines and never the world size: --tensor-parallel 8
    shards Llama-3.1-70B's weights eight ways (80 layers of linear weights / 8 per GPU); a log that does name its
    TP keeps it; a bad value is refused in one line."""
    lines = ["[TensorRT-LLM] TensorRT-LLM version: 0.16.0",
             "[TensorRT-LLM][INFO] TRTGptModel maxBatchSize: 2048",
             "[TensorRT-LLM][INFO] TRTGptModel maxSequenceLen: 25000",
             "[TensorRT-LLM][INFO] TRTGptModel maxNumTokens: 8192",
             "[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB, "
             "available: 57.87 GiB",
             "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 52.08 GiB for max tokens in paged KV cache (2730752)."]
    log = tmp_path / "trt.log"
    log.write_text("\n".join(lines) + "\n")
    argv = ["from-log", str(log), "--model", "llama-3.1-70b", "--json"]
    rc1, out1, err1 = run(argv, capsys)
    rc8, out8, err8 = run(argv + ["--tensor-parallel", "8"], capsys)
    assert rc1 == rc8 == 0, err1 + err8
    # on one GPU 141 GB of bf16 weights leave no room on 79.10 GiB: the prediction says why it is missing
    assert "would not fit" in json.loads(out1)["predicted"]["missing"]
    w8 = json.loads(out8)["predicted"]["weights_bytes"]
    # 70.6e9 parameters x 2 B / 8 ranks (the norms replicated): 17.6e9 B per GPU
    assert 17.5e9 < w8 < 17.8e9, w8
    named = tmp_path / "named.log"
    named.write_text("\n".join(lines + ["TP Size:\t\t8"]) + "\n")
    rc, out, err = run(["from-log", str(named), "--model", "llama-3.1-70b", "--json", "--tensor-parallel", "2"],
                       capsys)
    assert rc == 0 and json.loads(out)["predicted"]["weights_bytes"] == w8, "the log's own TP wins"
    rc, out, err = run(argv + ["--tensor-parallel", "0"], capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--tensor-parallel" in err
