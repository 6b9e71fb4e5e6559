"""Unified-memory devices (GB10 / DGX Spark, Strix Halo): the presets, and how each runtime counts the host's share.

The one published GB10 launch with TensorRT-LLM is held-out set D's
(benchmarks/runtime_logs/heldout_d/logs/trtllm-gptoss120b-dgxspark-pytorch-v110rc3.txt, jeansblog/trt_llm):
it is read here as a check only; no constant is fitted on it (the host's default share, 4 GiB, is an
assumption stated in course_lib/gpus.py, and is not what this log shows).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_lib.gpus import GPUS, gpu_preset_for
from course_lib.runtimes.log import read_startup_log
from course_lib.model.presets import get_model
from course_lib.runtimes.from_log import compare
from course_lib.runtimes.unified import trtllm_kv_cache_bytes
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parents[3]
GB10_TRTLLM = ROOT / "benchmarks" / "runtime_logs" / "heldout_d" / "logs" / "trtllm-gptoss120b-dgxspark-pytorch-v110rc3.txt"
GiB = 2**30


def _printed(text: str, pattern: str) -> float:
    return float(re.search(pattern, text).group(1))


def test_gb10_and_strix_halo_presets_plan_with_their_published_totals():
    text = GB10_TRTLLM.read_text()
    total = _printed(text, r"device total memory ([0-9.]+) GiB")
    assert abs(GPUS["gb10"].cuda_bytes / GiB - total) < 0.005 and GPUS["gb10"].unified
    assert GPUS["strix-halo"].cuda_bytes == 98_304 * 2**20 and GPUS["strix-halo"].unified   # HIP's 98304 MiB
    assert not GPUS["h100-80gb"].unified and GPUS["h100-80gb"].host_used_bytes == 0
    assert [gpu_preset_for(n) for n in ("NVIDIA GB10", "DGX Spark", "AMD Radeon 8060S Graphics (gfx1151)")] == \
        ["gb10", "gb10", "strix-halo"]


def test_tensorrt_llm_formula_from_its_source_gives_the_logged_kv_cache():
    """_util.py: fraction x (total - (torch peak + outside torch) + the estimation pass's KV), on the log's figures."""
    text = GB10_TRTLLM.read_text()
    total = _printed(text, r"device total memory ([0-9.]+) GiB")
    inside = _printed(text, r"Memory used after loading model weights \(inside torch\)[^:]*: ([0-9.]+) GiB")
    dynamic = _printed(text, r"Memory dynamically allocated during inference \(inside torch\)[^:]*: ([0-9.]+) GiB")
    outside = _printed(text, r"Memory used outside torch[^:]*: ([0-9.]+) GiB")
    tmp = _printed(text, r"tmp kv_mem ([0-9.]+) GiB")
    fraction = _printed(text, r"fraction is set ([0-9.]+)")
    logged = _printed(text, r"Allocated ([0-9.]+) GiB for max tokens in paged KV cache \(86720\)")
    assert abs(inside + dynamic + outside - _printed(text, r"\(torch \+ non-torch\): ([0-9.]+) GiB")) < 0.015
    kv = trtllm_kv_cache_bytes(total_bytes=round(total * GiB), peak_bytes=round((inside + dynamic + outside) * GiB),
                               estimation_kv_bytes=round(tmp * GiB), fraction=fraction)
    assert abs(kv / GiB - logged) < 0.02


def test_from_log_on_the_gb10_launch_takes_the_hosts_share_off():
    log = read_startup_log(GB10_TRTLLM.read_text())
    assert log.logged["outside_torch_bytes"] == round(49.28 * GiB)
    result = compare(log, spec=get_model("gpt-oss-120b"))
    logged, predicted = result["logged"]["kv_cache_bytes"], result["predicted"]["kv_cache_bytes"]
    assert logged == round(5.95 * GiB)
    # Before: the 119.70 GiB counted as a discrete card's, 51.61 GiB predicted (+767%). Now the 49.28 GiB outside
    # torch (less the 0.55 GiB CUDA context already counted) come off the free memory; what is left of the gap is
    # the weights (63.52 GiB inside torch logged, 60.77 GiB predicted).
    assert abs(predicted - logged) / logged < 0.35
    assert result["estimate"]["launch"]["host_used_bytes"] == round(49.28 * GiB) - round(0.55 * GiB)


def _kv(capsys, *argv) -> int:
    code, out, err = run_cli(capsys, "estimate", "--model", "gpt-oss-120b", "--gpu", "gb10", "--json",
                             "--max-batch-size", "64", "--max-num-tokens", "8192", "--context-tokens", "8224", *argv)
    assert code == 0, err
    return json.loads(out)["runtime_kv_cache_bytes"]


def test_host_used_comes_off_tensorrt_llms_free_memory(capsys):
    default = _kv(capsys, "--runtime", "trtllm")
    given = _kv(capsys, "--runtime", "trtllm", "--host-used", "20GiB")
    # 0.9 of the free memory: 16 GiB more held by the host leaves 0.9 x 16 GiB less KV cache (int() rounding)
    assert abs((default - given) - 0.9 * 16 * GiB) <= 2
    none = _kv(capsys, "--runtime", "trtllm", "--host-used", "0")
    assert abs((none - default) - 0.9 * 4 * GiB) <= 2, "gb10's default host share is 4 GiB"


def test_vllm_refuses_when_the_host_leaves_less_than_its_share(capsys):
    base = ["estimate", "--runtime", "vllm", "--model", "qwen3-8b", "--gpu", "gb10", "--gpu-memory-utilization", "0.9"]
    code, out, err = run_cli(capsys, *base, "--host-used", "12GiB")       # 119.70 - 12 < 0.9 x 119.70 = 107.73
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "Free memory on device (107.7/119.7 GiB) on startup is less than desired GPU memory utilization" in err
    code, out, _ = run_cli(capsys, *base, "--host-used", "11GiB", "--json")
    assert code == 0
    code, out2, _ = run_cli(capsys, *base, "--host-used", "0", "--json")
    assert json.loads(out)["runtime_kv_cache_bytes"] == json.loads(out2)["runtime_kv_cache_bytes"], \
        "vLLM 0.33 sizes from total x utilization: the host's share is not taken off its KV cache"


def test_sglang_starts_from_what_the_host_leaves(capsys):
    base = ["estimate", "--runtime", "sglang", "--model", "qwen3-8b", "--gpu", "gb10", "--json"]
    code, out, _ = run_cli(capsys, *base, "--host-used", "0")
    code2, out2, _ = run_cli(capsys, *base, "--host-used", "10GiB")
    assert code == code2 == 0
    first = {t["name"]: t["bytes"] for t in json.loads(out)["terms"]}
    second = {t["name"]: t["bytes"] for t in json.loads(out2)["terms"]}
    assert first["free_at_start"] - second["free_at_start"] == 10 * GiB


@pytest.mark.parametrize("argv, words", [
    (["--host-used", "4GiB"], "add --runtime"),
    (["--runtime", "trtllm", "--host-used", "-1GiB"], "--host-used"),
    (["--runtime", "trtllm", "--host-used", "lots"], "--host-used"),
])
def test_host_used_refusals(capsys, argv, words):
    code, out, err = run_cli(capsys, "estimate", "--model", "qwen3-8b", "--gpu", "gb10", *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and words in err, err
