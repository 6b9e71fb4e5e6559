"""Models people serve today: published counts, published checkpoint bytes, and KV caches worked by hand.

Independent sources only: exact counts published for a checkpoint, the figures
a model card rounds to (Qwen3's cards also give the non-embedding count),
``model.safetensors.index.json`` totals, and window arithmetic done in the
comments. transformers' own agreement is in test_models_oracle.py.
"""

from __future__ import annotations

import pytest

from course_lib import estimate, get_model, kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, weight_bytes
from course_lib.model.models import state_bytes_per_sequence

# Exact parameter counts published for the checkpoint (safetensors metadata / model card).
PUBLISHED_EXACT = {
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "llama-3.2-1b": 1_235_814_400,        # tied embeddings
    "llama-3.2-3b": 3_212_749_824,        # tied embeddings
    "gemma-3-1b": 999_885_952,
    "gemma-3-4b": 4_300_079_472,          # text decoder + SigLIP tower + projector
    "gemma-3-12b": 12_187_325_040,
    "gemma-3-27b": 27_432_406_640,
    "pythia-1b": 1_011_781_632,           # the Pythia paper's table
}

# What each model card says, in billions, to the precision the card writes it. (Llama-3.1-405B's
# and Phi-4's cards give only the name's "405B" / "14B"; the oracle checks them exactly.)
MODEL_CARD_BILLIONS = {
    "qwen3-0.6b": "0.6", "qwen3-1.7b": "1.7", "qwen3-4b": "4.0", "qwen3-8b": "8.2", "qwen3-14b": "14.8",
    "qwen3-32b": "32.8", "qwen3-30b-a3b": "30.5", "deepseek-v3": "671", "gpt-oss-20b": "21",
    "gpt-oss-120b": "117", "llama-4-scout": "109", "mistral-small-24b": "24",
    "olmo-2-7b": "7", "smollm3-3b": "3", "aya-expanse-8b": "8", "starcoder2-3b": "3",
    "qwen1.5-moe-a2.7b": "14.3", "granite-3.1-8b": "8", "glm-4-9b": "9", "phi-3.5-moe": "42",
    "qwen3-next-80b-a3b": "80", "gemma-4-e2b": "5.1", "qwen3.6-35b-a3b": "35", "qwen3.5-27b": "27",
}

# Qwen3 model cards: "Number of Parameters (Non-Embedding)".
QWEN3_NON_EMBEDDING = {"qwen3-0.6b": "0.44", "qwen3-1.7b": "1.4", "qwen3-4b": "3.6", "qwen3-8b": "6.95",
                       "qwen3-14b": "13.2", "qwen3-32b": "31.2"}


def _matches_card(count: int, written: str) -> bool:
    decimals = len(written.split(".")[1]) if "." in written else 0
    return abs(count / 1e9 - float(written)) <= 0.5 * 10 ** -decimals


@pytest.mark.parametrize("name", sorted(PUBLISHED_EXACT))
def test_published_exact_counts(name):
    got = get_model(name).params_total
    assert got == PUBLISHED_EXACT[name], f"{name}: counted {got:,}, published {PUBLISHED_EXACT[name]:,}"


@pytest.mark.parametrize("name", sorted(MODEL_CARD_BILLIONS))
def test_model_card_figures(name):
    got = get_model(name).params_total
    assert _matches_card(got, MODEL_CARD_BILLIONS[name]), (
        f"{name}: counted {got / 1e9:.3f}B; the model card says {MODEL_CARD_BILLIONS[name]}B")


@pytest.mark.parametrize("name", sorted(QWEN3_NON_EMBEDDING))
def test_qwen3_non_embedding_counts(name):
    spec = get_model(name)
    non_embedding = spec.params_total - spec.params["embedding"] - spec.params.get("lm_head", 0)
    assert _matches_card(non_embedding, QWEN3_NON_EMBEDDING[name]), (
        f"{name}: {non_embedding / 1e9:.3f}B without embeddings; the card says {QWEN3_NON_EMBEDDING[name]}B")


def test_gpt_oss_20b_checkpoint_bytes_from_formula_and_mxfp4():
    # openai/gpt-oss-20b model.safetensors.index.json: "metadata": {"total_size": 13761264768}.
    # Experts in mxfp4 (4 bits + an 8-bit scale per 32 = 4.25 bits), everything else bf16.
    spec = get_model("gpt-oss-20b")
    assert weight_bytes(spec, None) == 13_761_264_768
    assert spec.quantization.name == "mxfp4" and spec.quantization.quantized_groups == ("experts",)


# ------------------------------------------------------------------ KV caches by hand

def test_gemma_3_27b_five_local_one_global():
    spec = get_model("gemma-3-27b")
    # 62 layers; every 6th is global: layers 5, 11, ..., 59 = 10 global, 52 sliding with a 1,024 window.
    assert spec.sliding_window_layers == 52
    per_layer = 2 * 16 * 128 * 2          # K and V, 16 KV heads, head_dim 128, bf16: 8,192 B per token
    assert kv_cache_bytes_per_token(spec, "bf16") == 62 * per_layer
    expected = 10 * 32_768 * per_layer + 52 * 1_024 * per_layer
    assert kv_cache_bytes_per_sequence(spec, 32_768, "bf16") == expected == 3_120_562_176
    # Reading every layer as sliding would give 62 x 1,024 x 8,192 = 520,093,696: -83% (the old bug)


def test_llama_4_scout_chunked_attention():
    spec = get_model("llama-4-scout")
    # 48 layers; every 4th is a global NoPE layer, the other 36 attend within 8,192-token chunks.
    assert spec.sliding_window_layers == 36 and {l.window for l in spec.layers} == {None, 8192}
    per_layer = 2 * 8 * 128 * 2           # 4,096 B per token
    assert kv_cache_bytes_per_sequence(spec, 100_000, "bf16") == (12 * 100_000 + 36 * 8_192) * per_layer


def test_gpt_oss_alternating_128_token_windows():
    spec = get_model("gpt-oss-120b")
    per_layer = 2 * 8 * 64 * 2            # 2,048 B per token
    assert kv_cache_bytes_per_sequence(spec, 32_768, "bf16") == (18 * 32_768 + 18 * 128) * per_layer


def test_deepseek_v3_mla_latent():
    spec = get_model("deepseek-v3")
    # (kv_lora_rank 512 + rope 64) x 61 layers x 2 B; 128-head MHA would be 2 x 128 x 128 x 61 x 2 B.
    assert kv_cache_bytes_per_token(spec, "bf16") == 576 * 61 * 2 == 70_272
    assert spec.attention == "mla"
    assert any("num_nextn_predict_layers=1" in n and "not counted" in n for n in spec.notes)


def test_qwen3_next_state_is_fixed_per_sequence():
    spec = get_model("qwen3-next-80b-a3b")
    # 48 layers, 12 full attention (2 KV heads x 256): 2 x 2 x 256 x 2 B = 2,048 B per layer per token.
    assert kv_cache_bytes_per_token(spec, "bf16") == 12 * 2_048
    # 36 Gated DeltaNet layers: fp32 recurrent 32 x 128 x 128 = 524,288 values, bf16 conv 3 x 8,192 = 24,576.
    per_sequence = 36 * (524_288 * 4 + 24_576 * 2)
    assert state_bytes_per_sequence(spec, "fp32", "bf16") == per_sequence == 77_266_944
    short = estimate(spec, gpu="b200", dtype="bf16", context_tokens=100, active_sequences=4)
    long = estimate(spec, gpu="b200", dtype="bf16", context_tokens=100_000, active_sequences=4)
    for est in (short, long):
        pool = {p.name: p for p in est.budget.pools}["recurrent"]
        assert pool.bytes == 4 * per_sequence and pool.kind == "grows"
        assert "grows with active sequences, not with tokens" in pool.note
        assert est.to_dict()["recurrent_bytes"] == 4 * per_sequence
    assert long.budget.parts["kv_cache"] == 1000 * short.budget.parts["kv_cache"]


def test_pure_attention_models_have_no_recurrent_pool():
    est = estimate(get_model("llama-3.1-8b"), gpu="h100-80gb")
    assert "recurrent" not in est.budget.parts and est.to_dict()["recurrent_bytes"] == 0


def test_gemma_4_e2b_shares_kv_across_its_last_20_layers():
    spec = get_model("gemma-4-e2b")
    # 35 layers, full attention every 5th; layers 15-34 reuse the caches of layers 13 (sliding) and 14 (full).
    # Layers 0-14 cache: 12 sliding x 2 x 1 x 256 and 3 full x 2 x 1 x 512 values per token.
    assert len(spec.layers) == 15 and spec.sliding_window_layers == 12
    assert kv_cache_bytes_per_token(spec, "bf16") == (12 * 2 * 256 + 3 * 2 * 512) * 2 == 18_432
    assert [c.split(":")[0] for c in spec.counted] == ["text decoder (gemma4_text)", "vision tower + projector",
                                                        "audio tower + projector"]


def test_multimodal_says_what_it_counted():
    spec = get_model("gemma-3-4b")
    assert spec.counted[0] == "text decoder (gemma3_text)"
    assert "vision" in spec.counted[1].lower() and spec.params["vision"] > 0


def test_weights_dtype_follows_the_config():
    est = estimate(get_model("deepseek-v3"), gpu="b200", tensor_parallel=8)
    assert est.dtype.startswith("fp8") and "weight_block_size [128, 128]" in est.to_dict()["dtype_reason"]
    assert est.kv_dtype == "bf16"
    forced = estimate(get_model("deepseek-v3"), gpu="b200", tensor_parallel=8, dtype="bf16")
    assert forced.budget.parts["weights"] > est.budget.parts["weights"]


def test_unknown_wrapper_around_a_known_text_family(monkeypatch):
    # mistralai/Mistral-Small-3.1-24B-Instruct-2503 wraps a mistral decoder (model_type mistral3, no formula for
    # its Pixtral tower). With transformers, the model it builds on the meta device is read: the decoder is the
    # same 23,572,403,200 as Mistral-Small-24B's formula, and the tower is counted too.
    from course_lib.model import meta_model
    from course_lib.model.model_configs import MODEL_CONFIGS
    from course_lib.model.models import from_hf_config
    text = {k: v for k, v in MODEL_CONFIGS["mistral-small-24b"].items() if k != "torch_dtype"}
    cfg = {"model_type": "mistral3", "text_config": text, "tie_word_embeddings": False,
           "vision_config": {"model_type": "pixtral", "hidden_size": 1024}}
    spec = from_hf_config(cfg)
    assert spec.params_total - spec.params["vision"] == 23_572_403_200 and spec.params["vision"] > 0
    assert "transformers" in spec.counted[0]
    # Without transformers: the decoder exactly, the tower named as not counted, the result approximate.
    monkeypatch.setattr(meta_model, "why_not", lambda model_type: "transformers is not installed")
    spec = from_hf_config(cfg)
    assert spec.params_total == 23_572_403_200
    assert "not counted" in spec.counted[1] and any(n.startswith("approximate") for n in spec.notes)