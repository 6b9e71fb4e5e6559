"""course_lib.model.models and presets: parameter counts and KV cache against published figures.

Independent sources only: the checkpoints' published parameter counts, expected.json in
shared/reference (or its copy in tests/files/reference), the PagedAttention paper's
OPT-13B figure, and arithmetic worked by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.errors import CourseInputError
from course_lib.model.models import (
    from_hf_config,
    kv_cache_bytes_per_sequence,
    kv_cache_bytes_per_token,
    params_per_gpu,
    replicated_params,
    weight_bytes,
)
from course_lib.model.presets import GPU_BYTES, GPUS, get_model, gpu_bytes, model_names

TESTS = Path(__file__).resolve().parents[2]
SHARED_REFERENCE_MODELS = TESTS.parents[1] / "shared" / "reference" / "models"
COPIED_REFERENCE_MODELS = TESTS / "files" / "reference"

SUPPORTED = ("llama", "mistral", "mixtral", "qwen2", "gemma2", "phi3", "gpt2", "opt", "falcon", "deepseek_v2")

# ------------------------------------------------------------------ reference configs (exact)


def test_reference_params_exact(reference_model):
    spec = from_hf_config(reference_model["config_path"])
    assert spec.params_total == reference_model["parameters"], (
        f"{reference_model['model']}: counted {spec.params_total:,} parameters, "
        f"the checkpoint has {reference_model['parameters']:,}; look at the per-group counts {dict(spec.params)}"
    )


def test_reference_kv_bytes_per_token_exact(reference_model):
    spec = from_hf_config(reference_model["config_path"])
    assert kv_cache_bytes_per_token(spec, "fp16") == reference_model["kv_cache_bytes_per_token_fp16"]


def test_reference_config_as_dict_same_as_path(reference_model):
    cfg = json.loads(reference_model["config_path"].read_text(encoding="utf-8"))
    assert from_hf_config(cfg).params_total == reference_model["parameters"]


def test_reference_copy_matches_shared():
    """tests/files/reference is a fallback copy of shared/reference/models; it must not drift."""
    if not (SHARED_REFERENCE_MODELS / "expected.json").is_file():
        pytest.skip(f"{SHARED_REFERENCE_MODELS} absent; the tests use the copy in {COPIED_REFERENCE_MODELS}")
    for shared in SHARED_REFERENCE_MODELS.iterdir():
        copy = COPIED_REFERENCE_MODELS / shared.name
        assert copy.is_file(), f"{copy} is missing; copy {shared} there"
        assert json.loads(copy.read_text()) == json.loads(shared.read_text()), f"{copy} differs from {shared}"


def test_kv_hand_worked_for_reference_models(reference_models):
    by_name = {e["model"]: from_hf_config(e["config_path"]) for e in reference_models}
    # Llama-3-8B: 2 (K,V) x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per token
    assert kv_cache_bytes_per_token(by_name["meta-llama/Meta-Llama-3-8B"]) == 2 * 32 * 8 * 128 * 2 == 131_072
    # GPT-2: 2 x 12 layers x 12 heads x 64 dims x 2 B = 36,864 B per token
    assert kv_cache_bytes_per_token(by_name["openai-community/gpt2"]) == 2 * 12 * 12 * 64 * 2 == 36_864


# ------------------------------------------------------------------ published counts via presets

PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2-7b": 7_615_616_512,
    "qwen2-0.5b": 494_032_768,          # tied embeddings
    "gemma-2-9b": 9_241_705_984,
    "gemma-2-2b": 2_614_341_888,
    "phi-3-mini": 3_821_079_552,
    "gpt2": 124_439_808,
    "opt-125m": 125_239_296,
    "falcon-7b": 6_921_720_704,
    "deepseek-v2-lite": 15_706_484_224,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_params_match_published(name):
    got = get_model(name).params_total
    assert got == PUBLISHED[name], f"{name}: counted {got:,}, published {PUBLISHED[name]:,} (off by {got - PUBLISHED[name]:,})"


def test_preset_names_case_insensitive_and_unknown_refused():
    assert get_model("Llama-2-7B").params_total == 6_738_415_616
    with pytest.raises(CourseInputError) as info:
        get_model("llama-9b")
    assert "'llama-9b'" in str(info.value) and "llama-2-7b" in str(info.value)


def test_llama_2_7b_by_hand():
    spec = from_hf_config({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                           "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000})
    embed = 32_000 * 4096                  # 131,072,000; the untied lm_head is the same again
    per_layer = (4 * 4096 * 4096           # q, k, v, o: 67,108,864
                 + 3 * 4096 * 11008        # gate, up, down: 135,266,304
                 + 2 * 4096)               # two RMSNorms
    total = 2 * embed + 32 * per_layer + 4096   # + final norm
    assert total == 6_738_415_616          # the published count: the hand sum is right
    assert spec.params_total == total
    # KV: 2 x 32 layers x 32 heads x 128 dims x 2 B = 524,288 B per token
    assert kv_cache_bytes_per_token(spec, "fp16") == 524_288
    assert weight_bytes(spec, "fp16") == 2 * 6_738_415_616


# ------------------------------------------------------------------ raw config dicts, per family

GEMMA_2_2B = {  # google/gemma-2-2b config.json shape keys; note: no tie_word_embeddings key
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 2304,
    "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 256000, "sliding_window": 4096,
    "max_position_embeddings": 8192, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0,
    "query_pre_attn_scalar": 256, "torch_dtype": "float32",
}

GEMMA_2_9B = {  # google/gemma-2-9b, again without tie_word_embeddings
    "model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 42,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000,
    "sliding_window": 4096, "max_position_embeddings": 8192,
}


def test_gemma2_without_tie_key_ties():
    assert "tie_word_embeddings" not in GEMMA_2_2B
    spec = from_hf_config(GEMMA_2_2B)
    assert spec.tie_word_embeddings, "Gemma2Config ties embeddings when the key is absent"
    assert spec.params_total == 2_614_341_888
    assert from_hf_config(GEMMA_2_9B).params_total == 9_241_705_984


def test_gemma2_untied_adds_one_vocab_by_hidden_matrix():
    untied = from_hf_config(dict(GEMMA_2_2B, tie_word_embeddings=False))
    assert untied.params_total == 2_614_341_888 + 256_000 * 2304     # + 589,824,000 for a separate lm_head


def test_gemma2_alternates_sliding_and_global_layers():
    spec = from_hf_config(GEMMA_2_9B)
    v = 2 * 8 * 256 * 2                  # K and V, 8 KV heads, head_dim 256, 2 B: 8,192 B per layer per token
    assert spec.num_layers == 42 and spec.sliding_window_layers == 21    # every other layer is sliding
    assert kv_cache_bytes_per_token(spec, "fp16") == 42 * v == 344_064
    # Up to the window every layer keeps every token: 42 x 4096 x 8,192 B
    assert kv_cache_bytes_per_sequence(spec, 4096) == 42 * 4096 * v == 1_409_286_144
    # At 8,192 tokens: 21 sliding layers keep 4,096, 21 global layers keep 8,192
    assert kv_cache_bytes_per_sequence(spec, 8192) == 21 * 4096 * v + 21 * 8192 * v == 2_113_929_216
    # Not 42 x 8192 x v: the cap saves a third
    assert kv_cache_bytes_per_sequence(spec, 8192) < 42 * 8192 * v


QWEN2_0_5B = {  # Qwen/Qwen2-0.5B
    "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
    "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": 131072,
    "max_window_layers": 24, "max_position_embeddings": 131072,
}


def test_qwen2_tied_and_q_k_v_biases():
    spec = from_hf_config(QWEN2_0_5B)
    assert spec.params_total == 494_032_768
    # The same shapes as a llama (no biases) have 24 layers x (896 + 2 x 2 x 64) = 24 x 1,152 = 27,648 fewer:
    # the q bias is 14 heads x 64 = 896 wide, k and v biases are 2 KV heads x 64 = 128 wide each.
    as_llama = from_hf_config(dict(QWEN2_0_5B, model_type="llama"))
    assert spec.params_total - as_llama.params_total == 24 * (896 + 2 * 128) == 27_648
    # No sliding window in use: the KV cache grows with every token.
    # 2 x 24 layers x 2 KV heads x 64 dims x 2 B = 12,288 B per token
    assert kv_cache_bytes_per_sequence(spec, 10_000) == 10_000 * 12_288


def test_qwen2_7b_untied():
    spec = from_hf_config({
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
        "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": 131072})
    assert spec.params_total == 7_615_616_512


DEEPSEEK_V2_LITE = {  # deepseek-ai/DeepSeek-V2-Lite
    "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
    "moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
    "num_key_value_heads": 16, "n_shared_experts": 2, "n_routed_experts": 64, "num_experts_per_tok": 6,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "kv_lora_rank": 512, "q_lora_rank": None,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "vocab_size": 102400,
    "topk_method": "greedy", "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0,
    "tie_word_embeddings": False,
}


def test_deepseek_v2_lite_mla_and_moe():
    spec = from_hf_config(DEEPSEEK_V2_LITE)
    assert spec.params_total == 15_706_484_224
    assert spec.attention == "mla"
    # MLA caches one latent per token per layer, no 2x: (512 + 64) x 27 layers x 2 B = 31,104 B
    assert kv_cache_bytes_per_token(spec, "fp16") == (512 + 64) * 27 * 2 == 31_104
    # The latent is not split by head: each tensor-parallel GPU holds all of it (as vLLM does).
    assert kv_cache_bytes_per_token(spec, "fp16", tensor_parallel=2) == 31_104


def test_deepseek_first_k_dense_replace_counts():
    # Every layer dense (first_k_dense_replace = 27) swaps 26 MoE blocks for 26 dense MLPs:
    # one MoE block = 64 routed + 2 shared experts x 3 x 2048 x 1408 + a 64 x 2048 router
    #               = 66 x 8,650,752 + 131,072 = 571,080,704
    # one dense MLP = 3 x 2048 x 10944 = 67,239,936
    dense = from_hf_config(dict(DEEPSEEK_V2_LITE, first_k_dense_replace=27))
    moe_block = 66 * 3 * 2048 * 1408 + 64 * 2048
    assert moe_block == 571_080_704
    assert dense.params_total == 15_706_484_224 - 26 * (moe_block - 3 * 2048 * 10944)


FALCON_7B = {  # tiiuae/falcon-7b
    "model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32,
    "vocab_size": 65024, "multi_query": True, "parallel_attn": True, "bias": False,
    "new_decoder_architecture": False, "alibi": False,
}


def test_falcon_7b_multi_query():
    spec = from_hf_config(FALCON_7B)
    assert spec.params_total == 6_921_720_704
    assert spec.num_kv_heads == 1 and spec.attention == "mqa"
    # 2 x 32 layers x 1 KV head x (4544 / 71 = 64) dims x 2 B = 8,192 B per token
    assert kv_cache_bytes_per_token(spec, "fp16") == 8_192


# A tiny synthetic Falcon: hidden 64, 4 heads of 16 dims, 2 layers, vocab 100, ffn 4 x 64 = 256.
TINY_FALCON = {"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
               "vocab_size": 100, "parallel_attn": True, "bias": False}
# Shared by every variant below: embeddings 100 x 64 = 6,400 (tied head), final LayerNorm 2 x 64 = 128,
# per layer dense 64 x 64 = 4,096 and MLP 64 x 256 + 256 x 64 = 32,768.
TINY_SHARED = 6_400 + 128
TINY_LAYER_SHARED = 4_096 + 32_768


def test_tiny_falcon_multi_query_by_hand(files_dir):
    # multi_query: fused qkv = 64 x (64 + 2 x 16) = 6,144; one input LayerNorm 2 x 64 = 128
    expected = TINY_SHARED + 2 * (TINY_LAYER_SHARED + 6_144 + 128)
    assert expected == 92_800
    spec = from_hf_config(files_dir / "falcon-tiny-mqa.config.json")
    assert spec.params_total == expected
    assert spec.num_kv_heads == 1
    assert kv_cache_bytes_per_token(spec, "fp16") == 2 * 2 * 1 * 16 * 2 == 128


def test_tiny_falcon_multi_head_by_hand():
    # multi_query False, old architecture: qkv = 64 x 3 x 64 = 12,288; one LayerNorm 128
    spec = from_hf_config(dict(TINY_FALCON, multi_query=False, new_decoder_architecture=False))
    assert spec.params_total == TINY_SHARED + 2 * (TINY_LAYER_SHARED + 12_288 + 128) == 105_088
    assert kv_cache_bytes_per_token(spec, "fp16") == 2 * 2 * 4 * 16 * 2 == 512


def test_tiny_falcon_new_decoder_architecture_by_hand():
    # new_decoder_architecture with 2 KV heads: qkv = 64 x (4 + 2 x 2) x 16 = 8,192;
    # two LayerNorms per layer (ln_attn, ln_mlp) = 4 x 64 = 256
    spec = from_hf_config(dict(TINY_FALCON, new_decoder_architecture=True, num_kv_heads=2))
    assert spec.params_total == TINY_SHARED + 2 * (TINY_LAYER_SHARED + 8_192 + 256) == 97_152
    assert spec.num_kv_heads == 2
    assert kv_cache_bytes_per_token(spec, "fp16") == 2 * 2 * 2 * 16 * 2 == 256


def test_tiny_falcon_biases_by_hand():
    # bias=True on top of multi_query adds qkv 96 + dense 64 + MLP 256 + 64 = 480 per layer
    spec = from_hf_config(dict(TINY_FALCON, multi_query=True, bias=True))
    assert spec.params_total == 92_800 + 2 * 480 == 93_760


def test_gpt2_key_names(reference_models_dir):
    spec = from_hf_config(reference_models_dir / "gpt2.config.json")   # n_embd, n_layer, n_head, n_inner=null
    assert (spec.hidden_size, spec.num_layers, spec.num_attention_heads, spec.head_dim) == (768, 12, 12, 64)
    assert spec.intermediate_size == 4 * 768         # n_inner null means 4 x n_embd
    assert spec.tie_word_embeddings
    assert spec.params["position_embedding"] == 1024 * 768   # learned positions, n_positions rows
    # By hand: wte 50,257 x 768 = 38,597,376; wpe 786,432; per layer c_attn 768 x 2304 + 2304,
    # c_proj 768 x 768 + 768, MLP 768 x 3072 + 3072 + 3072 x 768 + 768, 2 LayerNorms 4 x 768: 7,087,872;
    # ln_f 1,536.
    assert 38_597_376 + 786_432 + 12 * 7_087_872 + 1_536 == spec.params_total == 124_439_808


def test_opt_position_offset_of_two():
    spec = get_model("opt-125m")
    # OPTLearnedPositionalEmbedding has max_position_embeddings + 2 rows: (2048 + 2) x 768
    assert spec.params["position_embedding"] == 2050 * 768 == 1_574_400
    # By hand: embed 50,272 x 768 = 38,608,896; positions 1,574,400; per layer 4 x (768^2 + 768)
    # + (768 x 3072 + 3072 + 3072 x 768 + 768) + 2 x 2 x 768 = 7,087,872; final LayerNorm 1,536.
    assert 38_608_896 + 1_574_400 + 12 * 7_087_872 + 1_536 == spec.params_total == 125_239_296


def test_opt_13b_paged_attention_figure():
    # PagedAttention (Kwon et al., SOSP 2023): 2 x 5120 hidden x 40 layers x 2 B = 819,200 B per token,
    # and one 2,048-token request needs 1,677,721,600 B ("1.6 GB").
    raw = {"model_type": "opt", "hidden_size": 5120, "ffn_dim": 20480, "num_hidden_layers": 40,
           "num_attention_heads": 40, "vocab_size": 50272, "max_position_embeddings": 2048}
    for spec in (from_hf_config(raw), get_model("opt-13b")):
        assert kv_cache_bytes_per_token(spec, "fp16") == 819_200
        assert kv_cache_bytes_per_sequence(spec, 2048, "fp16") == 1_677_721_600


# ------------------------------------------------------------------ sliding windows

MISTRAL_PATH = "mistral-7b-v0.1.config.json"


@pytest.mark.parametrize(
    "tokens, cached",
    [(1, 1), (1000, 1000), (4095, 4095), (4096, 4096), (4097, 4096), (8192, 4096), (100_000, 4096)],
)
def test_mistral_window_caps_every_layer(reference_models_dir, tokens, cached):
    spec = from_hf_config(reference_models_dir / MISTRAL_PATH)
    # 2 x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per token, at most 4,096 tokens kept
    assert kv_cache_bytes_per_sequence(spec, tokens, "fp16") == cached * 131_072


def test_mistral_null_window_is_uncapped(reference_models_dir):
    cfg = json.loads((reference_models_dir / MISTRAL_PATH).read_text())
    spec = from_hf_config(dict(cfg, sliding_window=None))      # v0.2+ configs set null
    assert spec.sliding_window_layers == 0
    assert kv_cache_bytes_per_sequence(spec, 8192) == 8192 * 131_072


def test_mistral_absent_window_uses_hf_default_4096(reference_models_dir):
    cfg = json.loads((reference_models_dir / MISTRAL_PATH).read_text())
    del cfg["sliding_window"]
    spec = from_hf_config(cfg)
    assert kv_cache_bytes_per_sequence(spec, 8192) == 4096 * 131_072


def test_llama_has_no_window(reference_models_dir):
    spec = from_hf_config(reference_models_dir / "meta-llama-3-8b.config.json")
    assert kv_cache_bytes_per_sequence(spec, 8192) == 8192 * 131_072 == 1_073_741_824


# ------------------------------------------------------------------ KV dtype

@pytest.mark.parametrize("kv_dtype, per_token", [("fp32", 1_048_576), ("fp16", 524_288), ("bf16", 524_288),
                                                 ("fp8", 262_144), ("int4", 131_072)])
def test_llama_2_7b_kv_by_dtype(kv_dtype, per_token):
    # 2 x 32 x 32 x 128 = 262,144 values per token, times bytes per value
    assert kv_cache_bytes_per_token(get_model("llama-2-7b"), kv_dtype) == per_token


# ------------------------------------------------------------------ tensor parallelism

@pytest.mark.parametrize("tp, kv_heads_per_gpu", [(1, 8), (2, 4), (4, 2), (8, 1), (16, 1), (32, 1)])
def test_kv_heads_per_gpu_never_below_one(tp, kv_heads_per_gpu):
    # Llama-3-8B has 8 KV heads: max(1, 8 // N) per GPU; at TP=16 each GPU still holds 1 whole head.
    spec = get_model("llama-3-8b")
    assert kv_cache_bytes_per_token(spec, "fp16", tensor_parallel=tp) == 2 * 32 * kv_heads_per_gpu * 128 * 2


def test_llama_3_8b_tp16_holds_one_kv_head():
    assert kv_cache_bytes_per_token(get_model("llama-3-8b"), tensor_parallel=16) == 2 * 32 * 1 * 128 * 2 == 16_384


def test_weights_per_gpu_llama_2_7b_tp2():
    spec = get_model("llama-2-7b")
    norms = 32 * 2 * 4096 + 4096        # 266,240 RMSNorm weights, replicated on every GPU
    per_gpu = (6_738_415_616 - norms) // 2 + norms
    assert per_gpu == 3_369_340_928
    assert params_per_gpu(spec, 2) == per_gpu
    assert weight_bytes(spec, "fp16", tensor_parallel=2) == 2 * per_gpu
    assert replicated_params(spec, 2) == {"norms": norms}


def test_weights_per_gpu_llama_3_8b_tp16_replicates_kv_heads():
    spec = get_model("llama-3-8b")
    norms = 266_240
    kv_proj = 32 * 2 * 4096 * (8 * 128)              # k and v projections: 268,435,456
    # 8 KV heads over 16 GPUs: each GPU holds 1 head = 1/8 of kv_proj (not 1/16)
    rest = 8_030_261_248 - norms - kv_proj           # split 16 ways: 7,761,559,552 / 16
    assert params_per_gpu(spec, 16) == rest // 16 + kv_proj // 8 + norms == 518_918_144
    replicated = replicated_params(spec, 16)
    assert replicated["norms"] == norms
    assert any("KV" in key for key in replicated), f"TP=16 > 8 KV heads should report KV heads replicated: {replicated}"


def test_mixtral_router_replicated():
    # 32 layers x (4096 x 8 experts) router weights on every GPU
    assert replicated_params(get_model("mixtral-8x7b"), 2)["router"] == 32 * 4096 * 8 == 1_048_576


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_per_gpu_between_share_and_total(name):
    spec = get_model(name)
    total = PUBLISHED[name]
    assert params_per_gpu(spec, 1) == total
    for tp in (2, 4, 8):
        per_gpu = params_per_gpu(spec, tp)
        assert total / tp <= per_gpu < total, f"{name} TP={tp}: {per_gpu:,} per GPU of {total:,}"


def test_tensor_parallel_zero_refused():
    spec = get_model("llama-2-7b")
    for call in (lambda: weight_bytes(spec, "fp16", tensor_parallel=0),
                 lambda: kv_cache_bytes_per_token(spec, "fp16", tensor_parallel=0),
                 lambda: params_per_gpu(spec, 0)):
        with pytest.raises(CourseInputError, match="tensor_parallel=0"):
            call()


# ------------------------------------------------------------------ unknown families, overrides

def test_unknown_model_type_lists_supported_and_the_way_out(files_dir):
    with pytest.raises(CourseInputError) as info:
        from_hf_config(files_dir / "unknown-type.config.json")
    message = str(info.value)
    assert "'brandnew'" in message
    for family in SUPPORTED:
        assert family in message, f"the refusal should list {family} as supported: {message}"
    assert "params_total" in message, "the refusal should say how to give the count explicitly"


def test_params_total_for_unknown_family(files_dir):
    spec = from_hf_config(files_dir / "unknown-type.config.json", params_total=1_234_567_890)
    assert spec.params_total == 1_234_567_890
    assert weight_bytes(spec, "fp16") == 2_469_135_780
    # KV from the common keys: 2 x 8 layers x 8 heads x (1024 / 8 = 128) dims x 2 B = 32,768 B
    assert kv_cache_bytes_per_token(spec, "fp16") == 32_768


def test_params_total_overrides_a_known_family(reference_models_dir):
    spec = from_hf_config(reference_models_dir / "meta-llama-3-8b.config.json", params_total=8_000_000_000)
    assert spec.params_total == 8_000_000_000
    assert kv_cache_bytes_per_token(spec) == 131_072       # the KV cache still comes from the config


@pytest.mark.parametrize("bad", [0, -1, True, "many", 1.5])
def test_params_total_must_be_a_positive_count(bad):
    with pytest.raises(CourseInputError, match="params_total"):
        from_hf_config({"model_type": "mamba", "hidden_size": 64, "num_hidden_layers": 2,
                        "num_attention_heads": 4}, params_total=bad)


# ------------------------------------------------------------------ bad configs

LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "vocab_size": 32000}


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                                 "vocab_size"])
def test_missing_key_named(key, monkeypatch):
    # Without transformers a key the formula needs is named; with it, its config class's default applies
    # (LlamaConfig: hidden 4096, 32 layers and heads, MLP 11008, vocabulary 32000: Llama-2-7B's shape).
    from course_lib.model import meta_model
    cfg = {k: v for k, v in LLAMA.items() if k != key}
    assert from_hf_config(cfg).params_total == 6_738_415_616
    assert any(f"leaves out '{key}'" in n for n in from_hf_config(cfg).notes)
    monkeypatch.setattr(meta_model, "why_not", lambda model_type: "transformers is not installed")
    with pytest.raises(CourseInputError, match=f"'{key}'"):
        from_hf_config(cfg)


def test_missing_key_from_file(files_dir, monkeypatch):
    from course_lib.model import meta_model
    assert from_hf_config(files_dir / "missing-fields.config.json").num_layers == 32    # LlamaConfig's default
    monkeypatch.setattr(meta_model, "why_not", lambda model_type: "transformers is not installed")
    with pytest.raises(CourseInputError, match="'num_hidden_layers'"):
        from_hf_config(files_dir / "missing-fields.config.json")


@pytest.mark.parametrize("key", ["num_attention_heads", "num_key_value_heads", "num_hidden_layers", "hidden_size"])
def test_zero_counts_refused(key):
    with pytest.raises(CourseInputError, match=f"{key}=0"):
        from_hf_config(dict(LLAMA, **{key: 0}))


def test_zero_heads_from_file(files_dir):
    with pytest.raises(CourseInputError, match="num_attention_heads=0"):
        from_hf_config(files_dir / "zero-heads.config.json")


def test_kv_heads_must_divide_heads():
    with pytest.raises(CourseInputError, match="num_key_value_heads=5"):
        from_hf_config(dict(LLAMA, num_key_value_heads=5))


def test_malformed_json(files_dir):
    path = files_dir / "malformed.config.json"
    with pytest.raises(CourseInputError) as info:
        from_hf_config(path)
    assert str(path) in str(info.value) and "JSON" in str(info.value)


def test_json_that_is_not_an_object(files_dir):
    with pytest.raises(CourseInputError, match="list"):
        from_hf_config(files_dir / "list.config.json")


def test_missing_file(tmp_path):
    path = tmp_path / "no-such" / "config.json"
    with pytest.raises(CourseInputError) as info:
        from_hf_config(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "change",
    [
        {"model_type": ["llama"]},                               # not a string
        {"layer_types": 3},                                      # not a list
        {"layer_types": ["sliding_attention"] * 5},              # wrong length
        {"hidden_size": "4096"},                                 # a string, not a count
        {"num_attention_heads": 2.5},
        {"num_attention_heads": True},
        {"sliding_window": 0},
        {"head_dim": 0},
    ],
)
def test_malformed_values_refused_cleanly(change):
    with pytest.raises(CourseInputError):
        from_hf_config(dict(LLAMA, **change))


def test_qwen2_bad_max_window_layers_refused():
    with pytest.raises(CourseInputError, match="max_window_layers"):
        from_hf_config(dict(QWEN2_0_5B, use_sliding_window=True, max_window_layers="x"))


# ------------------------------------------------------------------ GPU presets

@pytest.mark.parametrize(
    "name, mib",
    [("rtx-4090", 24_564), ("a100-80gb", 81_920), ("h100-80gb", 81_559), ("l4", 23_034), ("t4", 15_360),
     ("a100-40gb", 40_960)],
)
def test_gpu_presets_keep_nvidia_smi_totals(name, mib):
    # nvidia-smi's MiB, as listed in shared/reference/README.md
    assert GPUS[name].smi_bytes == mib * 1_048_576


@pytest.mark.parametrize(
    "name, gib",
    # the CUDA totals printed in public logs (each cited in course_lib/gpus.py): PyTorch's OOM "total capacity",
    # vLLM's total_gpu_memory, TensorRT-LLM's "total:"
    [("rtx-4090", 23.65), ("a100-80gb", 79.25), ("h100-80gb", 79.18), ("l4", 22.03), ("t4", 14.74),
     ("a100-40gb", 39.50), ("rtx-5090", 31.84), ("mi300x", 191.98)],
)
def test_gpu_presets_plan_with_the_cuda_total(name, gib):
    assert gpu_bytes(name) == GPU_BYTES[name]
    assert abs(GPU_BYTES[name] / 2**30 - gib) < 0.005          # as printed, two decimals of GiB
    assert GPU_BYTES[name] <= GPUS[name].smi_bytes or name == "mi300x"   # ROCm reports a little more than rocm-smi


def test_estimated_cuda_totals_say_so():
    for gpu in GPUS.values():
        assert gpu.estimated == gpu.cuda_source.startswith("estimated")
        if gpu.estimated:
            assert gpu.cuda_bytes == round(gpu.smi_bytes - 0.46 * 2**30)


def test_gpu_sizes_and_lesson_device():
    assert gpu_bytes("lesson-24gb") == 24_000_000_000
    assert gpu_bytes("24GB") == 24_000_000_000
    assert gpu_bytes("80GiB") == 85_899_345_920
    assert gpu_bytes("RTX-4090") == round(23.65 * 2**30)


@pytest.mark.parametrize("bad, shown", [("nosuchgpu", "'nosuchgpu'"), ("24XB", "'24XB'"), ("-24GB", "'-24GB'")])
def test_gpu_refusals_name_the_value(bad, shown):
    with pytest.raises(CourseInputError) as info:
        gpu_bytes(bad)
    assert shown in str(info.value)


def test_negative_gpu_size_says_negative():
    with pytest.raises(CourseInputError, match="negative"):
        gpu_bytes("-24GB")


def test_every_preset_model_builds():
    for name in model_names():
        spec = get_model(name)
        assert spec.params_total > 0 and kv_cache_bytes_per_token(spec) > 0
