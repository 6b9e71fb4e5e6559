"""Every family against transformers, built on the meta device: parameters, per-layer KV widths, windows.

Small configs drawn by hypothesis (random layers, heads, KV heads dividing
heads, head_dim given or not, tie on/off, biases, experts, windows), plus every
preset. The formulas never see transformers; transformers never sees the
formulas. A mismatch names the family, the config and both counts.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from course_lib.model.models import from_hf_config
from course_lib.model.presets import MODEL_CONFIGS, get_model, model_names

from oracle import build, hf_config, oracle_buffers, oracle_kv_widths, oracle_params, oracle_states, oracle_windows

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])

NO_SPECIAL_TOKENS = {"pad_token_id": None, "bos_token_id": None, "eos_token_id": None}


def _maybe(draw, cfg: dict, key: str, strategy) -> None:
    """Put ``key`` in ``cfg`` or leave it out (the family's default then applies)."""
    if draw(st.booleans()):
        cfg[key] = draw(strategy)


@st.composite
def attention_shape(draw, kv_default: int | None = None, head_dim_optional: bool = True):
    heads = draw(st.sampled_from([1, 2, 4, 8]))
    kv_choices = [d for d in (1, 2, 4, 8) if heads % d == 0]
    hidden = heads * draw(st.sampled_from([4, 8])) * draw(st.sampled_from([1, 2]))
    cfg = {"hidden_size": hidden, "num_attention_heads": heads, "num_hidden_layers": draw(st.integers(1, 6)),
           "intermediate_size": draw(st.integers(4, 40)), "vocab_size": draw(st.integers(16, 80)),
           **NO_SPECIAL_TOKENS}
    if kv_default is None or heads % kv_default:
        cfg["num_key_value_heads"] = draw(st.sampled_from(kv_choices))   # a default that would not divide: give it
    else:
        _maybe(draw, cfg, "num_key_value_heads", st.sampled_from(kv_choices))
    if head_dim_optional:
        _maybe(draw, cfg, "head_dim", st.sampled_from([4, 8, 12]))
    return cfg


def _window_keys(draw, cfg: dict, n: int, *, switch: str | None = None, types: tuple[str, ...] = ()):
    _maybe(draw, cfg, "sliding_window", st.one_of(st.none(), st.integers(2, 64)))
    if switch:
        _maybe(draw, cfg, switch, st.booleans())
    if types and draw(st.integers(0, 3)) == 0:
        cfg["layer_types"] = draw(st.lists(st.sampled_from(types), min_size=n, max_size=n))


DENSE = {   # family: (kv default, flags the family reads)
    "llama": (None, ("attention_bias", "mlp_bias")),
    "granite": (None, ("attention_bias", "mlp_bias")),
    "mistral": (8, ()),
    "qwen2": (32, ()),
    "qwen3": (32, ("attention_bias",)),
    "gemma2": (4, ("attention_bias",)),
    "gemma3_text": (4, ("attention_bias",)),
    "phi3": (None, ()),
    "olmo2": (None, ("attention_bias",)),
    "smollm3": (4, ("attention_bias", "mlp_bias")),
    "cohere": (None, ("attention_bias", "use_qk_norm")),
    "glm4": (2, ("attention_bias",)),
    "starcoder2": (2, ("use_bias",)),
}
SLIDING = ("full_attention", "sliding_attention")


@st.composite
def dense_config(draw, model_type: str):
    kv_default, flags = DENSE[model_type]
    cfg = {"model_type": model_type, **draw(attention_shape(kv_default))}
    n = cfg["num_hidden_layers"]
    _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    for flag in flags:
        _maybe(draw, cfg, flag, st.booleans())
    if model_type in ("qwen2", "qwen3"):
        _window_keys(draw, cfg, n, switch="use_sliding_window", types=SLIDING)
        _maybe(draw, cfg, "max_window_layers", st.integers(0, n))
    elif model_type in ("gemma2", "gemma3_text"):
        _maybe(draw, cfg, "sliding_window", st.integers(2, 64))
        if model_type == "gemma3_text":
            _maybe(draw, cfg, "sliding_window_pattern", st.integers(1, 4))
        if draw(st.booleans()):
            cfg["layer_types"] = draw(st.lists(st.sampled_from(SLIDING), min_size=n, max_size=n))
    elif model_type == "smollm3":
        _window_keys(draw, cfg, n, switch="use_sliding_window")
        _maybe(draw, cfg, "no_rope_layer_interval", st.integers(1, 4))
    elif model_type in ("mistral", "phi3", "starcoder2"):
        _window_keys(draw, cfg, n)
    return cfg


@st.composite
def moe_config(draw, model_type: str):
    kv_default = {"qwen3_moe": 4, "qwen2_moe": 16}.get(model_type, 8)
    cfg = {"model_type": model_type, **draw(attention_shape(kv_default, head_dim_optional=model_type != "phimoe"))}
    n = cfg["num_hidden_layers"]
    experts = draw(st.integers(1, 4))
    key = "num_experts" if model_type in ("qwen2_moe", "qwen3_moe") else "num_local_experts"
    cfg[key] = experts
    cfg["num_experts_per_tok"] = draw(st.integers(1, experts))
    _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    if model_type in ("qwen2_moe", "qwen3_moe"):
        cfg["moe_intermediate_size"] = draw(st.integers(4, 24))
        _maybe(draw, cfg, "decoder_sparse_step", st.integers(1, 3))
        _maybe(draw, cfg, "mlp_only_layers", st.lists(st.integers(0, n - 1), max_size=n, unique=True))
        _window_keys(draw, cfg, n, switch="use_sliding_window")
        if model_type == "qwen2_moe":
            cfg["shared_expert_intermediate_size"] = draw(st.integers(4, 24))
            _maybe(draw, cfg, "qkv_bias", st.booleans())
            _maybe(draw, cfg, "max_window_layers", st.integers(0, n))
        else:
            _maybe(draw, cfg, "attention_bias", st.booleans())
    elif model_type == "llama4_text":
        cfg["intermediate_size_mlp"] = draw(st.integers(4, 40))
        _maybe(draw, cfg, "interleave_moe_layer_step", st.integers(1, 3))
        _maybe(draw, cfg, "attention_chunk_size", st.one_of(st.none(), st.integers(2, 64)))
        _maybe(draw, cfg, "no_rope_layer_interval", st.integers(1, 4))
        _maybe(draw, cfg, "attention_bias", st.booleans())
    elif model_type == "gpt_oss":
        _maybe(draw, cfg, "attention_bias", st.booleans())
        _maybe(draw, cfg, "sliding_window", st.integers(2, 64))
        if draw(st.booleans()):
            cfg["layer_types"] = draw(st.lists(st.sampled_from(SLIDING), min_size=n, max_size=n))
    elif model_type == "phimoe":
        _maybe(draw, cfg, "attention_bias", st.booleans())
        _maybe(draw, cfg, "lm_head_bias", st.booleans())
        _window_keys(draw, cfg, n)
    elif model_type == "mixtral":
        _window_keys(draw, cfg, n)
    return cfg


@st.composite
def deepseek_config(draw, model_type: str):
    heads = draw(st.sampled_from([1, 2, 4]))
    n = draw(st.integers(1, 5))
    routed = draw(st.integers(1, 4))
    cfg = {"model_type": model_type, "hidden_size": 8 * heads * draw(st.sampled_from([1, 2])),
           "num_attention_heads": heads, "num_hidden_layers": n, "intermediate_size": draw(st.integers(4, 40)),
           "vocab_size": draw(st.integers(16, 80)), "moe_intermediate_size": draw(st.integers(4, 24)),
           "n_routed_experts": routed, "num_experts_per_tok": draw(st.integers(1, routed)),
           "kv_lora_rank": draw(st.integers(4, 24)), "qk_rope_head_dim": draw(st.sampled_from([2, 4, 8])),
           "qk_nope_head_dim": draw(st.integers(2, 12)), "v_head_dim": draw(st.integers(2, 12)),
           "n_group": 1, "topk_group": 1, **NO_SPECIAL_TOKENS}
    cfg["q_lora_rank"] = draw(st.one_of(st.none(), st.integers(4, 24)))
    _maybe(draw, cfg, "first_k_dense_replace", st.integers(0, n))
    _maybe(draw, cfg, "n_shared_experts", st.integers(0, 2))
    _maybe(draw, cfg, "attention_bias", st.booleans())
    _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    if model_type == "deepseek_v2":
        _maybe(draw, cfg, "mlp_bias", st.booleans())
    return cfg


@st.composite
def classic_config(draw, model_type: str):
    heads = draw(st.sampled_from([1, 2, 4]))
    hidden = heads * draw(st.sampled_from([4, 8]))
    n = draw(st.integers(1, 4))
    vocab = draw(st.integers(16, 80))
    if model_type == "gpt2":
        cfg = {"n_embd": hidden, "n_head": heads, "n_layer": n, "vocab_size": vocab,
               "n_positions": draw(st.integers(4, 64))}
        _maybe(draw, cfg, "n_inner", st.integers(4, 40))
    elif model_type == "gpt_neox":
        cfg = {"hidden_size": hidden, "num_attention_heads": heads, "num_hidden_layers": n, "vocab_size": vocab,
               "intermediate_size": draw(st.integers(4, 40))}
        _maybe(draw, cfg, "attention_bias", st.booleans())
        _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    elif model_type == "opt":
        cfg = {"hidden_size": hidden, "num_attention_heads": heads, "num_hidden_layers": n, "vocab_size": vocab,
               "ffn_dim": draw(st.integers(4, 40)), "max_position_embeddings": draw(st.integers(4, 64))}
        _maybe(draw, cfg, "enable_bias", st.booleans())
        _maybe(draw, cfg, "do_layer_norm_before", st.booleans())
    else:   # falcon
        cfg = {"hidden_size": hidden, "num_attention_heads": heads, "num_hidden_layers": n, "vocab_size": vocab}
        _maybe(draw, cfg, "bias", st.booleans())
        _maybe(draw, cfg, "multi_query", st.booleans())
        _maybe(draw, cfg, "parallel_attn", st.booleans())
        if draw(st.booleans()):
            cfg["new_decoder_architecture"] = True
            cfg["num_kv_heads"] = draw(st.sampled_from([d for d in (1, 2, 4) if heads % d == 0]))
        _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    return {"model_type": model_type, **cfg, **NO_SPECIAL_TOKENS}


@st.composite
def hybrid_config(draw, model_type: str):
    cfg = {"model_type": model_type, **draw(attention_shape(4 if model_type == "qwen3_5_text" else 2))}
    n = cfg["num_hidden_layers"] = draw(st.integers(1, 6))
    nk = draw(st.sampled_from([1, 2]))
    cfg.update(linear_num_key_heads=nk, linear_num_value_heads=nk * draw(st.sampled_from([1, 2])),
               linear_key_head_dim=draw(st.sampled_from([4, 8])), linear_value_head_dim=draw(st.sampled_from([4, 8])))
    _maybe(draw, cfg, "linear_conv_kernel_dim", st.integers(2, 4))
    _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    _maybe(draw, cfg, "attention_bias", st.booleans())
    if draw(st.booleans()):
        cfg["layer_types"] = draw(st.lists(st.sampled_from(["full_attention", "linear_attention"]),
                                           min_size=n, max_size=n))
    if model_type in ("qwen3_next", "qwen3_5_moe_text"):
        experts = draw(st.integers(1, 4))
        cfg.update(num_experts=experts, num_experts_per_tok=draw(st.integers(1, experts)),
                   moe_intermediate_size=draw(st.integers(4, 24)),
                   shared_expert_intermediate_size=draw(st.integers(4, 24)))
        if model_type == "qwen3_next":
            _maybe(draw, cfg, "decoder_sparse_step", st.integers(1, 3))
    return cfg


@st.composite
def gemma4_text_config(draw, model_type: str = "gemma4_text"):
    cfg = {"model_type": "gemma4_text", **draw(attention_shape(4, head_dim_optional=False))}
    cfg["head_dim"] = draw(st.sampled_from([4, 8]))
    n = cfg["num_hidden_layers"] = draw(st.integers(1, 8))
    heads = cfg["num_attention_heads"]
    cfg["num_key_value_heads"] = draw(st.sampled_from([d for d in (1, 2, 4, 8) if heads % d == 0]))
    _maybe(draw, cfg, "global_head_dim", st.sampled_from([8, 16]))
    _maybe(draw, cfg, "sliding_window", st.integers(2, 64))     # Gemma4TextConfig: an int, never null
    _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    _maybe(draw, cfg, "attention_bias", st.booleans())
    if draw(st.booleans()):
        cfg["attention_k_eq_v"] = True
        _maybe(draw, cfg, "num_global_key_value_heads", st.sampled_from([d for d in (1, 2) if heads % d == 0]))
    cfg["hidden_size_per_layer_input"] = draw(st.sampled_from([0, 4]))
    cfg["vocab_size_per_layer_input"] = draw(st.integers(8, 40))
    types = None
    if draw(st.booleans()):
        types = cfg["layer_types"] = draw(st.lists(st.sampled_from(SLIDING), min_size=n, max_size=n))
    shared = draw(st.integers(0, n - 1))
    if shared:
        final = list(types or ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)])
        final[-1] = "full_attention"
        assume(set(final[: n - shared]) == set(final))
        cfg["num_kv_shared_layers"] = shared
        _maybe(draw, cfg, "use_double_wide_mlp", st.booleans())
    if draw(st.booleans()):
        experts = draw(st.integers(1, 4))
        cfg.update(enable_moe_block=True, num_experts=experts, top_k_experts=draw(st.integers(1, experts)),
                   moe_intermediate_size=draw(st.integers(4, 24)))
    return cfg


@st.composite
def gemma4_config(draw, model_type: str = "gemma4"):
    text = draw(gemma4_text_config())
    for k in NO_SPECIAL_TOKENS:
        text.pop(k, None)
    cfg = {"model_type": "gemma4", "text_config": text, "boi_token_id": 3, "eoi_token_id": 4, "image_token_id": 5,
           "video_token_id": 6, "boa_token_id": 7, "eoa_token_index": 8, "audio_token_id": 9}
    _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    if draw(st.booleans()):
        cfg["vision_config"] = {"model_type": "gemma4_vision", "hidden_size": 16, "intermediate_size": 24,
                                "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
                                "head_dim": 8, "patch_size": draw(st.sampled_from([4, 8])),
                                "position_embedding_size": 16}
        _maybe(draw, cfg["vision_config"], "use_clipped_linears", st.booleans())
        _maybe(draw, cfg["vision_config"], "standardize", st.booleans())
    if draw(st.booleans()):
        cfg["audio_config"] = {"model_type": "gemma4_audio", "hidden_size": 16, "num_hidden_layers": 1,
                               "num_attention_heads": 2, "subsampling_conv_channels": [8, 4],
                               "output_proj_dims": 24}
        _maybe(draw, cfg["audio_config"], "use_clipped_linears", st.booleans())
    return cfg


@st.composite
def multimodal_config(draw, model_type: str):
    text_type = {"gemma3": "gemma3_text", "llama4": "llama4_text", "qwen3_5": "qwen3_5_text",
                 "qwen3_5_moe": "qwen3_5_moe_text"}[model_type]
    if text_type in DENSE:
        text = draw(dense_config(text_type))
    elif text_type == "llama4_text":
        text = draw(moe_config(text_type))
    else:
        text = draw(hybrid_config(text_type))
    for k in NO_SPECIAL_TOKENS:
        text.pop(k, None)
    vh = draw(st.sampled_from([8, 16]))
    cfg: dict = {"model_type": model_type, "text_config": text}
    if model_type == "gemma3":
        vision = {"model_type": "siglip_vision_model", "hidden_size": vh, "intermediate_size": draw(st.integers(4, 24)),
                  "num_hidden_layers": draw(st.integers(1, 2)), "num_attention_heads": 2,
                  "image_size": 28, "patch_size": draw(st.sampled_from([7, 14]))}
        _maybe(draw, vision, "vision_use_head", st.booleans())
        cfg.update(mm_tokens_per_image=4, image_token_index=3, boi_token_index=4, eoi_token_index=5)
        _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    elif model_type == "llama4":
        vision = {"hidden_size": vh, "intermediate_size": draw(st.integers(4, 24)), "num_hidden_layers": 1,
                  "num_attention_heads": 2, "image_size": 28, "patch_size": 14, "vision_output_dim": 12,
                  "projector_input_dim": 12, "projector_output_dim": 12}
        cfg.update(image_token_index=3, boi_token_index=4, eoi_token_index=5)
    else:
        vision = {"depth": 1, "hidden_size": vh, "intermediate_size": draw(st.integers(4, 24)), "num_heads": 2,
                  "out_hidden_size": text["hidden_size"], "num_position_embeddings": 16}
        cfg.update(image_token_id=3, video_token_id=4, vision_start_token_id=5, vision_end_token_id=6)
        _maybe(draw, cfg, "tie_word_embeddings", st.booleans())
    cfg["vision_config"] = vision
    return cfg


STRATEGIES = {
    **{mt: dense_config(mt) for mt in DENSE},
    **{mt: moe_config(mt) for mt in ("mixtral", "phimoe", "qwen2_moe", "qwen3_moe", "gpt_oss", "llama4_text")},
    **{mt: deepseek_config(mt) for mt in ("deepseek_v2", "deepseek_v3")},
    **{mt: classic_config(mt) for mt in ("gpt2", "opt", "falcon", "gpt_neox")},
    **{mt: hybrid_config(mt) for mt in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")},
    **{mt: multimodal_config(mt) for mt in ("gemma3", "llama4", "qwen3_5", "qwen3_5_moe")},
    "gemma4_text": gemma4_text_config(), "gemma4": gemma4_config(),
}


def check_against_oracle(cfg: dict, label: str) -> None:
    model, config = build(cfg)
    spec = from_hf_config(cfg, name=label)
    expected = oracle_params(model)
    assert spec.params_total == expected, (
        f"{label}: counted {spec.params_total:,} parameters, transformers builds {expected:,} "
        f"(off by {spec.params_total - expected:,}); groups {dict(spec.params)}; config {cfg}")
    buffers = oracle_buffers(model)
    assert spec.buffers_total == buffers, (
        f"{label}: counted {spec.buffers_total:,} buffer values, transformers' state_dict holds {buffers:,} beyond "
        f"the parameters; groups {dict(spec.buffers)}; config {cfg}")
    widths = oracle_kv_widths(model, config)
    assert [layer.values_per_token for layer in spec.layers] == widths, (
        f"{label}: per-layer KV values per token {[l.values_per_token for l in spec.layers]}, "
        f"the built k/v projections give {widths}; config {cfg}")
    windows, linear = oracle_windows(config)
    assert [layer.window for layer in spec.layers] == windows, (
        f"{label}: windows {[l.window for l in spec.layers]}, transformers' cache plan {windows}; config {cfg}")
    assert len(spec.states) == linear
    # The recurrent state is the module's value_heads x key_dim x value_dim; the conv state keeps the
    # last kernel - 1 inputs per channel (vLLM's layout; transformers pads its copy to the full kernel).
    states = [(rec, channels * (kernel - 1)) for rec, channels, kernel in oracle_states(model, config)]
    assert [(s.recurrent_values, s.conv_values) for s in spec.states] == states, (
        f"{label}: linear-attention states {spec.states}, the built modules give {states}; config {cfg}")


@pytest.mark.parametrize("model_type", sorted(STRATEGIES))
def test_family_matches_transformers(model_type):
    @SETTINGS
    @given(STRATEGIES[model_type])
    def check(cfg):
        check_against_oracle(cfg, model_type)
    check()


@pytest.mark.parametrize("name", model_names())
def test_preset_matches_transformers(name):
    check_against_oracle(dict(MODEL_CONFIGS[name]), name)
