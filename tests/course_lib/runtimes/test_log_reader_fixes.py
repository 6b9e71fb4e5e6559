"""Two misreads of published start-up logs, each on the log's own lines (copied here whole).

* vLLM in NVIDIA's NGC container prints the CUDA driver's version before its own: the reader took
  "590.48.01" for vLLM's release (heldout_d/vllm-gptoss20b-mxfp4-dgxspark-u025-v0130nv, TW-10519/VLLM-ROUTER
  logs/vllm.log at 43179adf).
* NVIDIA's DGX Spark launch script prints "Starting trtllm-serve for model openai/gpt-oss-120b on port 8355...",
  the only line of that log naming the model (heldout_d/trtllm-gptoss120b-dgxspark-pytorch-v110rc3,
  jeansblog/trt_llm README.md at 661401c2).
"""

import pytest

from course_lib.runtimes.log import read_startup_log

NGC_VLLM = """\
NVIDIA Release 26.01 (build 257596323)
  Using CUDA 13.1 driver version 590.48.01 with kernel driver version 580.95.05.
(APIServer pid=1) INFO 02-05 00:05:28 [api_server.py:1354] vLLM API server version 0.13.0+faa43dbf.nv26.01
(APIServer pid=1) INFO 02-05 00:05:35 [model.py:1661] Using max model len 8192
(EngineCore_DP0 pid=165) INFO 02-05 00:06:12 [gpu_model_runner.py:3659] Model loading took 13.7193 GiB memory and 26.704744 seconds
(EngineCore_DP0 pid=165) INFO 02-05 00:07:06 [gpu_worker.py:375] Available KV cache memory: 12.94 GiB
(EngineCore_DP0 pid=165) INFO 02-05 00:07:07 [kv_cache_utils.py:1291] GPU KV cache size: 282,624 tokens
"""

TRTLLM_SERVE = """\
Starting trtllm-serve for model openai/gpt-oss-120b on port 8355...
[TensorRT-LLM] TensorRT-LLM version: 1.1.0rc3
[12/20/2025-04:20:04] [TRT-LLM] [I] Using LLM with PyTorch backend
[12/20/2025-04:20:21] [TRT-LLM] [I] Use 63.32 GB for model weights.
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache (86720).
[12/20/2025-04:21:52] [TRT-LLM] [I] max_seq_len=86720, max_num_requests=64, max_num_tokens=8192, max_batch_size=64
"""


def test_the_vllm_version_line_wins_over_the_cuda_driver_version_before_it():
    log = read_startup_log(NGC_VLLM)
    assert log.launch["vllm_version"] == "0.13.0+faa43dbf.nv26.01", (
        f"read {log.launch.get('vllm_version')!r} from {log.evidence.get('vllm_version')!r}: the CUDA driver's line")


def test_a_bare_version_line_is_still_read_when_vllm_prints_no_other():
    log = read_startup_log("INFO vllm version 0.6.3\nINFO # GPU blocks: 100, # CPU blocks: 10\n", runtime="vllm")
    assert log.launch["vllm_version"] == "0.6.3"


def test_trtllm_serve_banner_names_the_model():
    log = read_startup_log(TRTLLM_SERVE)
    assert log.runtime == "trtllm"
    assert log.model == "openai/gpt-oss-120b"
    assert log.launch["trtllm_version"] == "1.1.0rc3"


# SGLang's KV line in each form its source prints (format strings copied from the wheels, filled by hand):
# 0.5.5 memory_pool.py:509/515 ("K size ... V size" and, for one-buffer pools such as MLA's, "KV size"); 0.5.20 and
# 0.5.23 memory_pool.py (_finalize_allocation_log: "dtype: D, " before "#tokens"); 0.5.20+ kv_pool_runtime.py
# ("Post-capture KV sizing: KV cache allocated ...", the pool resized after the graph capture, whose pre-capture
# line reads "VA upper bound"). Before, only the first form was read: an MLA pool or any 0.5.20+ log gave no bytes.
SGLANG_HEAD = ("[2026-11-02 10:00:01] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1, "
               "mem_fraction_static=0.85, context_length=32768)\n")
SGLANG_KV_LINES = {
    "0.5.5 K and V": ("[2026-11-02 10:00:09 TP0] KV Cache is allocated. #tokens: 412345, K size: 28.31 GB, "
                      "V size: 28.31 GB", 412_345, (28.31, 28.31)),
    "0.5.5 MLA": ("[2026-11-02 10:00:09 TP0] KV Cache is allocated. #tokens: 681924, KV size: 44.66 GB",
                  681_924, (44.66,)),
    "0.5.23 K and V": ("[2026-11-02 10:00:09 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412345, "
                       "K size: 28.31 GB, V size: 28.31 GB", 412_345, (28.31, 28.31)),
    "0.5.23 MLA": ("[2026-11-02 10:00:09 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 681924, "
                   "KV size: 44.66 GB", 681_924, (44.66,)),
    "0.5.23 post-capture": ("[2026-11-02 10:00:07 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, "
                            "#tokens: 500000, K size: 34.33 GB, V size: 34.33 GB\n"
                            "[2026-11-02 10:00:12 TP0] Post-capture KV sizing: full_layer_tokens=401234, "
                            "swa_layer_tokens=0\n"
                            "[2026-11-02 10:00:12 TP0] Post-capture KV sizing: KV cache allocated. dtype: "
                            "torch.bfloat16, #tokens: 401234, KV size: 55.10 GB, avail mem=6.20 GB\n"
                            "[2026-11-02 10:00:12 TP0] Post-capture KV sizing: draft KV cache allocated. dtype: "
                            "torch.bfloat16, #tokens: 401234, KV size: 1.52 GB", 401_234, (55.10,)),
}


@pytest.mark.parametrize("form", list(SGLANG_KV_LINES))
def test_sglang_kv_line_is_read_in_every_form_its_source_prints(form):
    line, tokens, gib = SGLANG_KV_LINES[form]
    log = read_startup_log(SGLANG_HEAD + line + "\n", runtime="sglang")
    assert log.logged["kv_cache_tokens"] == tokens, (form, log.evidence.get("kv_cache_tokens"))
    assert log.logged["kv_cache_bytes"] == sum(round(part * 2**30) for part in gib), (form, log.logged["kv_cache_bytes"])
