"""Preset models: the shape keys of each checkpoint's published Hugging Face ``config.json``.

Data only. Each entry names its source (repository and file) in a comment,
with the published parameter count where the model card gives one. Keys are
copied as published, including what a config leaves out (Gemma-3's
``text_config`` has no ``vocab_size``; the family default applies) and its
``torch_dtype`` / ``quantization_config``. No weights are involved.

>>> MODEL_CONFIGS["qwen3-8b"]["num_key_value_heads"]
8
"""

from __future__ import annotations

from typing import Any

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
    "gemma-2-27b": {  # google/gemma-2-27b-it config.json: 27,227,128,320 params, 4096-token window on alternate layers
        "model_type": "gemma2", "hidden_size": 4608, "intermediate_size": 36864,
        "num_hidden_layers": 46, "num_attention_heads": 32, "num_key_value_heads": 16,
        "head_dim": 128, "vocab_size": 256000, "max_position_embeddings": 8192,
        "query_pre_attn_scalar": 144, "sliding_window": 4096, "torch_dtype": "bfloat16"},
    "mistral-7b-v0.3": {  # mistralai/Mistral-7B-Instruct-v0.3 config.json: 7,248,023,552 params, no window
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 32768, "max_position_embeddings": 32768, "rope_theta": 1000000.0, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "qwen2.5-7b": {  # Qwen/Qwen2.5-7B config.json (also DeepSeek-R1-Distill-Qwen-7B's): 7,615,616,512 params
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
        "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
        "vocab_size": 152064, "max_position_embeddings": 131072, "tie_word_embeddings": False,
        "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 28,
        "torch_dtype": "bfloat16"},
    "qwen2.5-14b": {  # Qwen/Qwen2.5-14B config.json (also DeepSeek-R1-Distill-Qwen-14B's): 14,770,033,664 params
        "model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 13824,
        "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
        "vocab_size": 152064, "max_position_embeddings": 131072, "tie_word_embeddings": False,
        "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 48,
        "torch_dtype": "bfloat16"},
    "qwen2.5-0.5b": {  # Qwen/Qwen2.5-0.5B config.json (Qwen2.5-Coder-0.5B's shape): 494,032,768 params, tied
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "vocab_size": 151936, "max_position_embeddings": 32768, "tie_word_embeddings": True,
        "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 24,
        "torch_dtype": "bfloat16"},
    "qwen1.5-7b": {  # Qwen/Qwen1.5-7B config.json: 7,721,324,544 params, MHA
        "model_type": "qwen2", "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "vocab_size": 151936, "max_position_embeddings": 32768, "tie_word_embeddings": False,
        "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 28,
        "torch_dtype": "bfloat16"},
    "llama-3.2-11b-vision": {  # meta-llama/Llama-3.2-11B-Vision config.json: 10,670,220,835 params
        "model_type": "mllama", "torch_dtype": "bfloat16", "image_token_index": 128256,
        "text_config": {"model_type": "mllama_text_model", "hidden_size": 4096, "intermediate_size": 14336,
                        "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
                        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38], "vocab_size": 128256,
                        "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": False,
                        "torch_dtype": "bfloat16"},
        "vision_config": {"model_type": "mllama_vision_model", "hidden_size": 1280, "intermediate_size": 5120,
                          "num_hidden_layers": 32, "num_global_layers": 8, "attention_heads": 16, "image_size": 560,
                          "patch_size": 14, "max_num_tiles": 4, "num_channels": 3, "vision_output_dim": 7680,
                          "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1],
                                                      [4, 1]]}},
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

    # ---- Llama 3.1 / 3.2 (meta-llama/<repo> config.json)
    "llama-3.1-8b": {  # meta-llama/Llama-3.1-8B config.json: 8,030,261,248 params
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
        "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "llama-3.1-70b": {  # meta-llama/Llama-3.1-70B config.json: 70,553,706,496 params
        "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
        "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "llama-3.1-405b": {  # meta-llama/Llama-3.1-405B config.json: 405,853,388,800 params
        "model_type": "llama", "hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 126,
        "num_attention_heads": 128, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
        "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "llama-3.2-1b": {  # meta-llama/Llama-3.2-1B config.json: 1,235,814,400 params, tied
        "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
        "max_position_embeddings": 131072, "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
    "llama-3.2-3b": {  # meta-llama/Llama-3.2-3B config.json: 3,212,749,824 params, tied
        "model_type": "llama", "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28,
        "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
        "max_position_embeddings": 131072, "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
    # ---- Qwen3 (Qwen/<repo> config.json)
    "qwen3-0.6b": {  # Qwen/Qwen3-0.6B config.json
        "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "max_window_layers": 28, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
    "qwen3-1.7b": {  # Qwen/Qwen3-1.7B config.json
        "model_type": "qwen3", "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "max_window_layers": 28, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
    "qwen3-4b": {  # Qwen/Qwen3-4B config.json
        "model_type": "qwen3", "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "max_window_layers": 36, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
    "qwen3-8b": {  # Qwen/Qwen3-8B config.json
        "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "max_window_layers": 36, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "qwen3-14b": {  # Qwen/Qwen3-14B config.json
        "model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 40,
        "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "max_window_layers": 40, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "qwen3-32b": {  # Qwen/Qwen3-32B config.json
        "model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "max_window_layers": 64, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "qwen3-30b-a3b": {  # Qwen/Qwen3-30B-A3B config.json: 128 experts, 8 per token
        "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
        "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "vocab_size": 151936, "max_position_embeddings": 40960, "max_window_layers": 48,
        "use_sliding_window": False, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"},
    # ---- Gemma 3 (google/<repo> config.json); 1B is text-only, 4B-27B are multimodal
    "gemma-3-1b": {  # google/gemma-3-1b-it config.json: 999,885,952 params
        "model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
        "max_position_embeddings": 32768, "sliding_window": 512, "sliding_window_pattern": 6,
        "query_pre_attn_scalar": 256, "torch_dtype": "bfloat16"},
    "gemma-3-4b": {  # google/gemma-3-4b-it config.json: 4,300,079,472 params (text_config omits vocab_size, head_dim)
        "model_type": "gemma3", "mm_tokens_per_image": 256, "boi_token_index": 255999, "eoi_token_index": 256000,
        "image_token_index": 262144, "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
                        "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4,
                        "sliding_window": 1024},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "image_size": 896,
                          "intermediate_size": 4304, "num_attention_heads": 16, "num_hidden_layers": 27,
                          "patch_size": 14, "vision_use_head": False}},
    "gemma-3-12b": {  # google/gemma-3-12b-it config.json: 12,187,325,040 params
        "model_type": "gemma3", "mm_tokens_per_image": 256, "boi_token_index": 255999, "eoi_token_index": 256000,
        "image_token_index": 262144, "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360,
                        "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8,
                        "sliding_window": 1024},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "image_size": 896,
                          "intermediate_size": 4304, "num_attention_heads": 16, "num_hidden_layers": 27,
                          "patch_size": 14, "vision_use_head": False}},
    "gemma-3-27b": {  # google/gemma-3-27b-it config.json: 27,432,406,640 params
        "model_type": "gemma3", "mm_tokens_per_image": 256, "boi_token_index": 255999, "eoi_token_index": 256000,
        "image_token_index": 262144, "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
                        "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16,
                        "head_dim": 128, "query_pre_attn_scalar": 168, "sliding_window": 1024},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "image_size": 896,
                          "intermediate_size": 4304, "num_attention_heads": 16, "num_hidden_layers": 27,
                          "patch_size": 14, "vision_use_head": False}},
    # ---- DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json): MLA, 256 routed experts, fp8 128x128 blocks
    "deepseek-v3": {
        "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
        "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
        "n_routed_experts": 256, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
        "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
        "v_head_dim": 128, "n_group": 8, "topk_group": 4, "topk_method": "noaux_tc", "vocab_size": 129280,
        "max_position_embeddings": 163840, "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "weight_block_size": [128, 128]}},
    # ---- gpt-oss (openai/<repo> config.json): MoE experts in mxfp4, alternating 128-token windows
    "gpt-oss-20b": {
        "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
        "num_experts_per_tok": 4, "vocab_size": 201088, "sliding_window": 128, "attention_bias": True,
        "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "layer_types": ["sliding_attention", "full_attention"] * 12,
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}},
    "gpt-oss-120b": {
        "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 36,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 128,
        "num_experts_per_tok": 4, "vocab_size": 201088, "sliding_window": 128, "attention_bias": True,
        "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "layer_types": ["sliding_attention", "full_attention"] * 18,
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}},
    # ---- others people serve
    "mistral-small-24b": {  # mistralai/Mistral-Small-24B-Instruct-2501 config.json
        "model_type": "mistral", "hidden_size": 5120, "intermediate_size": 32768, "num_hidden_layers": 40,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 131072,
        "max_position_embeddings": 32768, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"},
    "phi-4": {  # microsoft/phi-4 config.json (model_type phi3): 14,659,507,200 params
        "model_type": "phi3", "hidden_size": 5120, "intermediate_size": 17920, "num_hidden_layers": 40,
        "num_attention_heads": 40, "num_key_value_heads": 10, "vocab_size": 100352,
        "max_position_embeddings": 16384, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"},
    "olmo-2-7b": {  # allenai/OLMo-2-1124-7B config.json
        "model_type": "olmo2", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 100352,
        "max_position_embeddings": 4096, "attention_bias": False, "tie_word_embeddings": False,
        "torch_dtype": "float32"},
    "smollm3-3b": {  # HuggingFaceTB/SmolLM3-3B config.json: NoPE every 4th layer, tied
        "model_type": "smollm3", "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
        "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 128256,
        "max_position_embeddings": 65536, "no_rope_layer_interval": 4, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
    "aya-expanse-8b": {  # CohereForAI/aya-expanse-8b config.json (model_type cohere), tied
        "model_type": "cohere", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 256000,
        "max_position_embeddings": 8192, "use_qk_norm": False, "torch_dtype": "float16"},
    "starcoder2-3b": {  # bigcode/starcoder2-3b config.json: biases, LayerNorm, 4096-token window
        "model_type": "starcoder2", "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
        "num_attention_heads": 24, "num_key_value_heads": 2, "vocab_size": 49152, "sliding_window": 4096,
        "max_position_embeddings": 16384, "use_bias": True, "torch_dtype": "float32"},
    "qwen1.5-moe-a2.7b": {  # Qwen/Qwen1.5-MoE-A2.7B config.json (qwen2_moe): 60 experts + a shared expert
        "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632, "num_hidden_layers": 24, "num_attention_heads": 16,
        "num_key_value_heads": 16, "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 1,
        "vocab_size": 151936, "max_position_embeddings": 8192, "use_sliding_window": False,
        "sliding_window": 32768, "max_window_layers": 21, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"},
    "pythia-1b": {  # EleutherAI/pythia-1b config.json (gpt_neox)
        "model_type": "gpt_neox", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
        "num_attention_heads": 8, "vocab_size": 50304, "max_position_embeddings": 2048,
        "rotary_pct": 0.25, "use_parallel_residual": True, "tie_word_embeddings": False,
        "torch_dtype": "float16"},
    "granite-3.1-8b": {  # ibm-granite/granite-3.1-8b-instruct config.json, tied
        "model_type": "granite", "hidden_size": 4096, "intermediate_size": 12800, "num_hidden_layers": 40,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 49155,
        "max_position_embeddings": 131072, "attention_bias": False, "mlp_bias": False,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
    "glm-4-9b": {  # THUDM/GLM-4-9B-0414 config.json (glm4): q/k/v biases, 2 KV heads
        "model_type": "glm4", "hidden_size": 4096, "intermediate_size": 13696, "num_hidden_layers": 40,
        "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 151552,
        "max_position_embeddings": 32768, "attention_bias": True, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"},
    "phi-3.5-moe": {  # microsoft/Phi-3.5-MoE-instruct config.json (phimoe): 16 experts, top-2
        "model_type": "phimoe", "hidden_size": 4096, "intermediate_size": 6400, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 16, "num_experts_per_tok": 2,
        "vocab_size": 32064, "max_position_embeddings": 131072, "sliding_window": 131072,
        "attention_bias": True, "lm_head_bias": True, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "llama-4-scout": {  # meta-llama/Llama-4-Scout-17B-16E-Instruct config.json: 16 experts + shared, 8k chunks
        "model_type": "llama4", "boi_token_index": 200080, "eoi_token_index": 200081, "image_token_index": 200092,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "text_config": {"model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192,
                        "intermediate_size_mlp": 16384, "num_hidden_layers": 48, "num_attention_heads": 40,
                        "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 16,
                        "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "vocab_size": 202048,
                        "attention_chunk_size": 8192, "max_position_embeddings": 10485760,
                        "use_qk_norm": True, "attention_bias": False},
        "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408, "intermediate_size": 5632,
                          "num_hidden_layers": 34, "num_attention_heads": 16, "image_size": 336, "patch_size": 14,
                          "vision_output_dim": 4096, "projector_input_dim": 4096, "projector_output_dim": 4096,
                          "pixel_shuffle_ratio": 0.5}},
    "qwen3-next-80b-a3b": {  # Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 3 Gated DeltaNet layers per attention layer
        "model_type": "qwen3_next", "hidden_size": 2048, "intermediate_size": 5120, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "num_hidden_layers": 48, "num_attention_heads": 16,
        "num_key_value_heads": 2, "head_dim": 256, "num_experts": 512, "num_experts_per_tok": 10,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "vocab_size": 151936,
        "max_position_embeddings": 262144, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "gemma-4-e2b": {  # google/gemma-4-E2B-it config.json: 35 layers, the last 20 reuse earlier KV, PLE, vision + audio
        "model_type": "gemma4", "tie_word_embeddings": True, "image_token_id": 258880, "audio_token_id": 258881,
        "video_token_id": 258884, "boi_token_id": 255999, "eoi_token_id": 258882, "boa_token_id": 256000,
        "eoa_token_index": 258883, "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 35,
                        "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
                        "global_head_dim": 512, "num_global_key_value_heads": None, "attention_k_eq_v": False,
                        "sliding_window": 512, "vocab_size": 262144, "vocab_size_per_layer_input": 262144,
                        "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 20,
                        "use_double_wide_mlp": True, "intermediate_size": 6144, "max_position_embeddings": 131072,
                        "final_logit_softcapping": 30.0,
                        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7},
        "vision_config": {"model_type": "gemma4_vision", "hidden_size": 768, "intermediate_size": 3072,
                          "num_hidden_layers": 16, "num_attention_heads": 12, "num_key_value_heads": 12,
                          "head_dim": 64, "patch_size": 16, "pooling_kernel_size": 3,
                          "position_embedding_size": 10240, "use_clipped_linears": True, "standardize": False},
        "audio_config": {"model_type": "gemma4_audio", "hidden_size": 1024, "num_hidden_layers": 12,
                         "num_attention_heads": 8, "subsampling_conv_channels": [128, 32], "conv_kernel_size": 5,
                         "attention_chunk_size": 12, "attention_context_left": 13, "attention_context_right": 0,
                         "output_proj_dims": 1536, "residual_weight": 0.5, "use_clipped_linears": True}},
    "qwen3.6-35b-a3b": {  # Qwen/Qwen3.6-35B-A3B config.json (qwen3_5_moe): Gated DeltaNet hybrid + MoE + vision;
        # its mtp_num_hidden_layers=1 MTP head is not loaded by default serving and is not counted
        "model_type": "qwen3_5_moe", "image_token_id": 248056, "vision_start_token_id": 248053,
        "vision_end_token_id": 248054, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
                        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                        "partial_rotary_factor": 0.25, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
                        "linear_num_value_heads": 32, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
                        "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
                        "shared_expert_intermediate_size": 512, "vocab_size": 248320, "full_attention_interval": 4,
                        "mtp_num_hidden_layers": 1,
                        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 10},
        "vision_config": {"deepstack_visual_indexes": [], "depth": 27, "hidden_size": 1152,
                          "intermediate_size": 4304, "num_heads": 16, "out_hidden_size": 2048, "patch_size": 16,
                          "spatial_merge_size": 2, "temporal_patch_size": 2}},
    "qwen2.5-vl-7b": {  # Qwen/Qwen2.5-VL-7B-Instruct config.json (qwen2_5_vl, text keys at the top level), as
        # copied verbatim into public code (Qwen2_5_VLConfig(...) of a text-encoder wrapper; the vision_config of
        # a vLLM-serving script "Values are Qwen2.5-VL-7B-Instruct's"); built by transformers on the meta device
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
        "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
        "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 128000, "max_window_layers": 28,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "use_sliding_window": False,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "hidden_act": "silu",
        "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
        "vision_end_token_id": 151653, "vision_token_id": 151654,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vision_config": {"model_type": "qwen2_5_vl", "depth": 32, "hidden_act": "silu", "hidden_size": 1280,
                          "intermediate_size": 3420, "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584,
                          "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
                          "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
                          "tokens_per_second": 2}},
    "qwen3.5-27b": {  # Qwen/Qwen3.5-27B config.json (qwen3_5): dense Gated DeltaNet hybrid + vision; shape keys as
        # vendored in a public test of a quantized derivative (its quantization_config left out here)
        "model_type": "qwen3_5", "image_token_id": 248056, "video_token_id": 248057,
        "vision_start_token_id": 248053, "vision_end_token_id": 248054, "tie_word_embeddings": False,
        "dtype": "bfloat16",
        "text_config": {"model_type": "qwen3_5_text", "hidden_size": 5120, "intermediate_size": 17408,
                        "num_hidden_layers": 64, "num_attention_heads": 24, "num_key_value_heads": 4,
                        "head_dim": 256, "full_attention_interval": 4, "linear_conv_kernel_dim": 4,
                        "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 48,
                        "linear_value_head_dim": 128, "mtp_num_hidden_layers": 1, "tie_word_embeddings": False,
                        "vocab_size": 248320, "dtype": "bfloat16",
                        "mamba_ssm_dtype": "float32",    # as the published text config (tests/files/hub/) has it
                        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 16},
        "vision_config": {"model_type": "qwen3_5_vision", "deepstack_visual_indexes": [], "depth": 27,
                          "hidden_size": 1152, "in_channels": 3, "intermediate_size": 4304, "num_heads": 16,
                          "num_position_embeddings": 2304, "out_hidden_size": 5120, "patch_size": 16,
                          "spatial_merge_size": 2, "temporal_patch_size": 2}},
}
