"""Presets: real model configs (published facts) and GPUs at the capacity they report.

Model presets are the shape keys of each checkpoint's Hugging Face
``config.json``, copied as published; no weights are involved. GPU presets are
the memory the device itself reports (``nvidia-smi`` / ``cudaMemGetInfo`` total),
in MiB: a card sold as "24 GB" reports 24,564 MiB = 25.76 GB = 23.99 GiB.

>>> gpu_bytes("rtx-4090")
25757220864
>>> get_model("llama-3-8b").params_total
8030261248
"""

from __future__ import annotations

from typing import Any

from .errors import CourseInputError
from .models import ModelSpec, from_hf_config
from .units import MiB, parse_bytes

# ---------------------------------------------------------------- models
# Published parameter counts (for the tests) sit beside each config.
MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "llama-2-7b": {  # meta-llama/Llama-2-7b-hf: 6,738,415,616 params, MHA
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "torch_dtype": "float16"},
    "llama-2-13b": {  # meta-llama/Llama-2-13b-hf: 13,015,864,320 params
        "model_type": "llama", "hidden_size": 5120, "intermediate_size": 13824,
        "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 40,
        "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "torch_dtype": "float16"},
    "llama-3-8b": {  # meta-llama/Meta-Llama-3-8B: 8,030,261,248 params, GQA 32q/8kv
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 128256, "max_position_embeddings": 8192, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"},
    "llama-3-70b": {  # meta-llama/Meta-Llama-3-70B: 70,553,706,496 params
        "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
        "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
        "vocab_size": 128256, "max_position_embeddings": 8192, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"},
    "mistral-7b": {  # mistralai/Mistral-7B-v0.1: 7,241,732,096 params, window 4096 on every layer
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "mixtral-8x7b": {  # mistralai/Mixtral-8x7B-v0.1: 46,702,792,704 params, 8 experts top-2
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 32000, "max_position_embeddings": 32768, "num_local_experts": 8,
        "num_experts_per_tok": 2, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "qwen2-7b": {  # Qwen/Qwen2-7B: 7,615,616,512 params, q/k/v biases
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
        "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
        "vocab_size": 152064, "max_position_embeddings": 131072, "tie_word_embeddings": False,
        "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 28,
        "torch_dtype": "bfloat16"},
    "qwen2-0.5b": {  # Qwen/Qwen2-0.5B: 494,032,768 params, tied embeddings
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "vocab_size": 151936, "max_position_embeddings": 131072, "tie_word_embeddings": True,
        "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 24,
        "torch_dtype": "bfloat16"},
    "gemma-2-9b": {  # google/gemma-2-9b: 9,241,705,984 params, alternating sliding/global layers
        "model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
        "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
        "sliding_window": 4096, "torch_dtype": "float32"},
    "gemma-2-2b": {  # google/gemma-2-2b: 2,614,341,888 params
        "model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216,
        "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
        "sliding_window": 4096, "torch_dtype": "float32"},
    "phi-3-mini": {  # microsoft/Phi-3-mini-4k-instruct: 3,821,079,552 params, MHA
        "model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "vocab_size": 32064, "max_position_embeddings": 4096, "sliding_window": 2047,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "gpt2": {  # openai-community/gpt2: 124,439,808 params
        "model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
        "n_positions": 1024, "vocab_size": 50257},
    "opt-125m": {  # facebook/opt-125m: 125,239,296 params
        "model_type": "opt", "hidden_size": 768, "ffn_dim": 3072, "num_hidden_layers": 12,
        "num_attention_heads": 12, "vocab_size": 50272, "max_position_embeddings": 2048,
        "word_embed_proj_dim": 768, "do_layer_norm_before": True, "torch_dtype": "float16"},
    "opt-13b": {  # facebook/opt-13b: the PagedAttention paper's model, 800 KB KV per token
        "model_type": "opt", "hidden_size": 5120, "ffn_dim": 20480, "num_hidden_layers": 40,
        "num_attention_heads": 40, "vocab_size": 50272, "max_position_embeddings": 2048,
        "word_embed_proj_dim": 5120, "do_layer_norm_before": True, "torch_dtype": "float16"},
    "falcon-7b": {  # tiiuae/falcon-7b: multi-query attention (1 KV head)
        "model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
        "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True,
        "parallel_attn": True, "bias": False, "new_decoder_architecture": False,
        "torch_dtype": "bfloat16"},
    "deepseek-v2-lite": {  # deepseek-ai/DeepSeek-V2-Lite: MLA + DeepSeekMoE, 15.7B params
        "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
        "moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
        "num_key_value_heads": 16, "n_shared_experts": 2, "n_routed_experts": 64,
        "num_experts_per_tok": 6, "first_k_dense_replace": 1, "moe_layer_freq": 1,
        "kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "qk_nope_head_dim": 128, "vocab_size": 102400, "max_position_embeddings": 163840,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    # A small made-up model (not a checkpoint) for real measurements on a laptop CPU:
    # ~0.3 B params, so weights, a KV cache and a prefill peak are each a few hundred MB.
    "course-tiny": {
        "model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816,
        "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 4,
        "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "torch_dtype": "float32"},
}

DEFAULT_MODEL = "llama-2-7b"
DEFAULT_GPU = "rtx-4090"

# ---------------------------------------------------------------- GPUs
# Total memory as the device reports it (nvidia-smi "MiB"); a card's "GB" means GiB.
GPU_MIB: dict[str, int] = {
    "t4": 15_360,
    "l4": 23_034,
    "a10g": 23_028,
    "rtx-4090": 24_564,
    "a100-40gb": 40_960,
    "a100-80gb": 81_920,
    "h100-80gb": 81_559,
    "h200": 143_771,
}
#: The lesson's simplified device: exactly 24 GB = 24 x 10^9 bytes.
LESSON_GPU = "lesson-24gb"
GPU_BYTES: dict[str, int] = {name: mib * MiB for name, mib in GPU_MIB.items()}
GPU_BYTES[LESSON_GPU] = 24 * 10**9


def model_names() -> list[str]:
    return sorted(MODEL_CONFIGS)


def get_model(name: str) -> ModelSpec:
    """A preset model's :class:`ModelSpec` (names are case-insensitive)."""
    key = str(name).strip().lower()
    if key not in MODEL_CONFIGS:
        raise CourseInputError(
            f"model={name!r} is not a preset; use one of {', '.join(model_names())}, or --config PATH"
        )
    return from_hf_config(MODEL_CONFIGS[key], name=key)


def gpu_bytes(name_or_size: str | int) -> int:
    """Device bytes for a GPU preset name or any size ("24GB", "80GiB", 25769803776).

    >>> gpu_bytes("lesson-24gb")
    24000000000
    >>> gpu_bytes("24GiB")
    25769803776
    """
    if isinstance(name_or_size, str) and name_or_size.strip().lower() in GPU_BYTES:
        return GPU_BYTES[name_or_size.strip().lower()]
    try:
        return parse_bytes(name_or_size, name="gpu")
    except CourseInputError:
        if isinstance(name_or_size, str) and name_or_size.strip().lstrip("+-")[:1].isdigit():
            raise  # it looks like a size: the size error says what is wrong with it
        raise CourseInputError(
            f"gpu={name_or_size!r} is neither a GPU preset ({', '.join(GPU_BYTES)}) nor a size such as 24GB or 80GiB"
        ) from None
