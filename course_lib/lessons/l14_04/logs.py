"""Three real vLLM start-up logs for the lesson's "Read the real log" section, with where each is from.

Each is an excerpt: whole lines as published (the "vLLM STDOUT:" prefix a notebook added and its JSON
quoting dropped), only those whose figures the tasks use (the engine's version, in the title, is not
repeated), picked from the file at the commit named. The same files, with their headers, are the visible set of
``benchmarks/bench_runtime_logs.py`` (``tests/files/runtime_logs/``).

================  ===========================================================================
``t4``            vLLM 0.8.2 (V0) on a Tesla T4, Llama-3.2-3B: vLLM prints every term itself
``a100``          vLLM 0.10.1.1 (V1) on an A100 80GB at utilization 0.25, Qwen2-7B: it prints
                  only the weights and the KV cache; the rest is left for you to find
``mi300x``        vLLM 0.6.4 (V0, ROCm) on eight MI300X, Llama-3.1-8B with tensor parallelism 8
================  ===========================================================================

>>> LOGS["t4"].figures["kv_cache_gib"], LOGS["mi300x"].figures["num_gpu_blocks"]
(6.22, 645227)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LessonLog:
    """One published start-up log, excerpted.

    key: its short name. title: what it is, in words. source: repository, path and commit (or URL).
    lines: the excerpt, line by line. figures: the numbers the lines print (GiB as printed; counts).
    """

    key: str
    title: str
    source: str
    lines: tuple[str, ...]
    figures: dict = field(default_factory=dict)

    def show(self) -> None:
        """Print the excerpt under its title and source."""
        print(f"{self.title}\nsource: {self.source}\n")
        for line in self.lines:
            print(line)


LOGS: dict[str, LessonLog] = {
    "t4": LessonLog(
        key="t4",
        title="vLLM 0.8.2 (V0 engine) on a Tesla T4 (Colab), unsloth/Llama-3.2-3B-Instruct, max_model_len 2048",
        source="huggingface/cookbook, notebooks/en/fine_tune_chatbot_docs_synthetic.ipynb @ e624f7d4",
        lines=(
            "INFO 05-05 15:25:32 [worker.py:267] the current vLLM instance can use total_gpu_memory (14.74GiB) x "
            "gpu_memory_utilization (0.89) = 13.18GiB",
            "INFO 05-05 15:25:32 [worker.py:267] model weights take 6.02GiB; non_torch_memory takes 0.05GiB; "
            "PyTorch activation peak memory takes 0.90GiB; the rest of the memory reserved for KV Cache is 6.22GiB.",
            "INFO 05-05 15:25:32 [executor_base.py:111] # cuda blocks: 3637, # CPU blocks: 1170",
            "INFO 05-05 15:25:32 [executor_base.py:116] Maximum concurrency for 2048 tokens per request: 28.41x",
            "INFO 05-05 15:26:16 [model_runner.py:1570] Graph capturing finished in 41 secs, took 0.17 GiB",
        ),
        figures={"total_gib": 14.74, "budget_gib": 13.18, "utilization_printed": 0.89, "weights_gib": 6.02,
                 "non_torch_gib": 0.05, "activation_gib": 0.90, "kv_cache_gib": 6.22, "num_gpu_blocks": 3637,
                 "block_size": 16, "max_model_len": 2048, "max_concurrency": 28.41, "cuda_graph_gib": 0.17},
    ),
    "a100": LessonLog(
        key="a100",
        title="vLLM 0.10.1.1 (V1 engine) on an A100 80GB (79.25 GiB to CUDA), Qwen2-7B-Instruct, "
              "gpu_memory_utilization 0.25, max_model_len 16384",
        source="dennislee22/vLLM-benchmarking, log/vllm-7B-1gpuA10080GB-0.25GRAM.log @ b474d1e0",
        lines=(
            "(APIServer pid=1671) INFO 09-04 01:02:21 [utils.py:326] non-default args: {'model_tag': "
            "'Qwen2-7B-Instruct', 'port': 8081, 'model': 'Qwen2-7B-Instruct', 'max_model_len': 16384, "
            "'gpu_memory_utilization': 0.25}",
            "(APIServer pid=1671) INFO 09-04 01:02:38 [scheduler.py:222] Chunked prefill is enabled with "
            "max_num_batched_tokens=2048.",
            "(EngineCore_0 pid=1812) INFO 09-04 01:03:03 [gpu_model_runner.py:2007] Model loading took 14.2488 GiB "
            "and 4.422213 seconds",
            "(EngineCore_0 pid=1812) INFO 09-04 01:04:29 [gpu_worker.py:276] Available KV cache memory: 5.01 GiB",
            "(EngineCore_0 pid=1812) INFO 09-04 01:04:29 [kv_cache_utils.py:849] GPU KV cache size: 93,872 tokens",
            "(EngineCore_0 pid=1812) INFO 09-04 01:04:29 [kv_cache_utils.py:853] Maximum concurrency for 16,384 "
            "tokens per request: 5.73x",
            "(EngineCore_0 pid=1812) INFO 09-04 01:04:32 [gpu_model_runner.py:2708] Graph capturing finished in 3 "
            "secs, took 0.50 GiB",
        ),
        figures={"total_gib": 79.25, "utilization": 0.25, "weights_gib": 14.2488, "kv_cache_gib": 5.01,
                 "kv_cache_tokens": 93872, "block_size": 16, "max_model_len": 16384, "max_concurrency": 5.73,
                 "max_num_batched_tokens": 2048, "cuda_graph_gib": 0.50, "vllm_version": "0.10.1"},
    ),
    "mi300x": LessonLog(
        key="mi300x",
        title="vLLM 0.6.4 (V0 engine, ROCm) on eight MI300X, meta-llama/Llama-3.1-8B-Instruct, "
              "tensor_parallel_size 8, max_model_len 131072 (rank 0's lines)",
        source="AUGMXNT/MI300-testing, inference-vllm-vs-vllm-rocm.ipynb @ 032bd4da",
        lines=(
            "INFO 10-30 14:11:10 model_runner.py:1066] Loading model weights took 1.9028 GB",
            "INFO 10-30 14:11:48 worker.py:288] Memory profiling results: total_gpu_memory=191.98GiB "
            "initial_memory_usage=5.55GiB peak_torch_memory=7.24GiB memory_usage_post_profile=9.94Gib "
            "non_torch_memory=8.02GiB kv_cache_size=157.53GiB gpu_memory_utilization=0.90",
            "INFO 10-30 14:11:48 distributed_gpu_executor.py:57] # GPU blocks: 645227, # CPU blocks: 16384",
            "INFO 10-30 14:11:48 distributed_gpu_executor.py:61] Maximum concurrency for 131072 tokens per request: "
            "78.76x",
        ),
        figures={"total_gib": 191.98, "utilization": 0.90, "weights_gib": 1.9028, "peak_torch_gib": 7.24,
                 "non_torch_gib": 8.02, "kv_cache_gib": 157.53, "num_gpu_blocks": 645227, "block_size": 16,
                 "max_model_len": 131072, "max_concurrency": 78.76, "tensor_parallel": 8},
    ),
}


def show_log(key: str) -> LessonLog:
    """Print log ``key`` ("t4", "a100" or "mi300x") and return it."""
    log = LOGS[key]
    log.show()
    return log
