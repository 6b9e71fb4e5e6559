"""Any decoder transformers can build: the meta-device fallback, figures worked by hand, and its refusals.

The figures are independent of the code under test: each KV cache is worked by hand from the
published config (layers x what each layer caches), the parameter counts are transformers' own
``model.parameters()`` (the oracle), and DeepSeek-V3's is the count transformers reports for the
published config. Every walk over all of transformers' decoders is in test_every_decoder.py.
"""

from __future__ import annotations

import json

import pytest

from course_lib import estimate
from course_lib.model import meta_model
from course_lib.errors import CourseInputError
from course_lib.model.models import from_hf_config, kv_cache_bytes_per_token, state_bytes_per_sequence, weight_bytes
from course_lib.model.presets import MODEL_CONFIGS, get_model

from oracle import build, oracle_buffers, oracle_params

# deepseek-ai/DeepSeek-V3.2-Exp config.json (model_type deepseek_v32): DeepSeek-V3's shape keys plus the
# sparse-attention indexer's (index_head_dim 128, index_n_heads 64, index_topk 2048), as vendored in public
# test fixtures and DSA kernel tables (e.g. a DSA_MODEL_DIMS table keyed by DeepseekV32ForCausalLM).
DEEPSEEK_V32 = {k: v for k, v in MODEL_CONFIGS["deepseek-v3"].items() if k != "quantization_config"}
DEEPSEEK_V32.update(model_type="deepseek_v32", index_head_dim=128, index_n_heads=64, index_topk=2048)
DEEPSEEK_V32.pop("num_nextn_predict_layers")

# ai21labs/Jamba-v0.1 config.json (model_type jamba): attention every 8th layer from layer 4, Mamba elsewhere,
# MoE every 2nd layer; as vendored in public tests of KV-cache calculators.
JAMBA = {"model_type": "jamba", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "attn_layer_offset": 4, "attn_layer_period": 8,
         "expert_layer_offset": 1, "expert_layer_period": 2, "mamba_d_conv": 4, "mamba_d_state": 16,
         "mamba_dt_rank": 256, "mamba_expand": 2, "mamba_conv_bias": True, "mamba_proj_bias": False,
         "num_experts": 16, "num_experts_per_tok": 2, "vocab_size": 65536, "max_position_embeddings": 262144,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


@pytest.fixture(scope="module")
def built():
    """The published configs, each estimated once (61 layers of DeepSeek-V3.2 take seconds on the meta device)."""
    return {"deepseek_v32": from_hf_config(DEEPSEEK_V32), "jamba": from_hf_config(JAMBA)}


def test_mla_successor_caches_latent_plus_indexer_key(built):
    # Per layer: the 512-value latent + the 64-value rope key (MLA) + the indexer's 128-value key; 61 layers.
    spec = built["deepseek_v32"]
    assert [layer.values_per_token for layer in spec.layers] == [512 + 64 + 128] * 61
    assert kv_cache_bytes_per_token(spec, "bf16") == 704 * 61 * 2 == 85_888
    assert spec.attention == "mla" and spec.states == ()


def test_params_flag_keeps_the_built_models_kv_for_an_mla_successor_and_a_hybrid():
    # The issue: with --params N the KV was read from the common keys: DeepSeek-V3.2 as 128 heads of
    # 7168 / 128 = 56 dims (2 x 128 x 56 = 14,336 values a layer, +1,936%), Jamba as 32 attention layers (+700%).
    v32 = from_hf_config(DEEPSEEK_V32, params_total=685_000_000_000)
    assert v32.params_total == 685_000_000_000 and kv_cache_bytes_per_token(v32, "bf16") == 85_888
    jamba = from_hf_config(JAMBA, params_total=51_600_000_000)
    # 4 attention layers (4, 12, 20, 28) x 2 x 8 KV heads x 128 dims x 2 B
    assert kv_cache_bytes_per_token(jamba, "bf16") == 4 * 2 * 8 * 128 * 2 == 16_384
    # 28 Mamba layers: recurrent 2 x 4096 channels x 16 states, conv 8192 channels x (4 - 1) inputs
    assert [(s.recurrent_values, s.conv_values) for s in jamba.states] == [(8192 * 16, 8192 * 3)] * 28
    assert state_bytes_per_sequence(jamba, "fp32", "bf16") == 28 * (131_072 * 4 + 24_576 * 2)


def test_without_transformers_the_common_keys_refuse_what_they_cannot_describe(monkeypatch):
    monkeypatch.setattr(meta_model, "why_not", lambda model_type: "transformers is not installed (pip install ...)")
    with pytest.raises(CourseInputError, match="kv_lora_rank is set .multi-head latent attention"):
        from_hf_config(DEEPSEEK_V32, params_total=10**9)
    with pytest.raises(CourseInputError, match="mamba_d_state is set .recurrent"):
        from_hf_config(JAMBA, params_total=10**9)
    with pytest.raises(CourseInputError, match="is not supported: no formula here, and transformers is not installed"):
        from_hf_config(JAMBA)


@pytest.mark.parametrize("cfg", [JAMBA, DEEPSEEK_V32], ids=["jamba", "deepseek_v32"])
def test_parameters_and_buffers_are_the_built_models(cfg, built):
    model, _ = build(cfg)
    spec = built[cfg["model_type"]]
    assert spec.params_total == oracle_params(model)
    assert spec.buffers_total == oracle_buffers(model)
    assert "transformers" in spec.counted[0] and "meta device" in spec.notes[0]


def test_deepseek_v3_counts_parameters_as_transformers_and_its_router_biases_as_buffers():
    # transformers' DeepseekV3ForCausalLM on the published config: 671,026,404,352 parameters; the 58 MoE
    # layers' e_score_correction_bias (256 each) are buffers. Before: 671,026,419,200 "parameters".
    spec = get_model("deepseek-v3")
    assert spec.params_total == 671_026_404_352 and spec.buffers_total == 58 * 256
    data = estimate(spec, gpu="b200", tensor_parallel=8).to_dict()
    assert data["params_total"] == 671_026_404_352 and data["buffers_total"] == 14_848
    assert weight_bytes(spec, "bf16") == 2 * (671_026_404_352 + 14_848)


def test_gemma4_per_layer_scalars_and_clip_bounds_are_buffers():
    # gemma-4-E2B: 35 layer_scalar, and 4 clamp bounds per clippable linear: 16 vision layers x 7, 12 audio x 10.
    spec = get_model("gemma-4-e2b")
    model, _ = build(dict(MODEL_CONFIGS["gemma-4-e2b"]))
    assert spec.buffers_total == 35 + 16 * 7 * 4 + 12 * 10 * 4 == 963 == oracle_buffers(model)
    assert spec.params_total == oracle_params(model)


@pytest.mark.parametrize("name", ["gemma-4-e2b", "qwen3-next-80b-a3b"])
def test_the_formula_agrees_with_the_fallback(name):
    # On published configs (every family's shrunk default config: test_every_decoder.py)
    formula = get_model(name)
    fallback = meta_model.meta_spec(dict(MODEL_CONFIGS[name]), name)
    assert (formula.params_total, formula.buffers_total) == (fallback.params_total, fallback.buffers_total)
    assert formula.layers == fallback.layers or \
        [(l.values_per_token, l.window) for l in formula.layers] == [(l.values_per_token, l.window) for l in fallback.layers]
    assert [(s.recurrent_values, s.conv_values) for s in formula.states] == \
        [(s.recurrent_values, s.conv_values) for s in fallback.states]


def test_an_odd_config_is_one_line_from_transformers():
    with pytest.raises(CourseInputError) as info:
        from_hf_config(dict(JAMBA, attn_layer_period=0))
    assert "\n" not in str(info.value) and "jamba" in str(info.value)


def test_building_on_the_meta_device_is_bounded():
    with pytest.raises(CourseInputError, match="num_hidden_layers=100000 is above the bound 256"):
        from_hf_config(dict(JAMBA, num_hidden_layers=100_000))
    with pytest.raises(CourseInputError, match="num_experts=100000 is above the bound 65,536"):
        from_hf_config(dict(JAMBA, num_experts=100_000))


def test_a_cache_layer_kind_not_modelled_is_refused_by_name():
    from transformers import AutoConfig

    cfg = AutoConfig.for_model("unlimited_ocr").to_dict()
    text = cfg["text_config"]                 # the kind is layer 0's: 2 layers build in a second
    text.update(num_hidden_layers=2, layer_types=text["layer_types"][:2],
                mlp_layer_types=text["mlp_layer_types"][:2])
    with pytest.raises(CourseInputError, match="caches layer 0 in a UnlimitedOcrDynamicReferenceSlidingWindowLayer"):
        from_hf_config(json.loads(json.dumps(cfg)))


def test_a_spec_is_built_once_per_process_and_keys_of_mixed_types_still_build():
    """meta_spec keeps what it built (DeepSeek-V4-Flash's meta build and forward cost ~13 s of CPU): the same config,
    name and reason give the same frozen spec; another config another; a config whose keys JSON cannot sort (an int
    and a str key side by side, as a Python-built id2label can have) is built, not refused and not kept."""
    from course_lib.model.meta_model import meta_spec

    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}
    first = meta_spec(cfg, "tiny-llama-cache")
    assert meta_spec(dict(cfg), "tiny-llama-cache") is first
    assert meta_spec({**cfg, "num_hidden_layers": 3}, "tiny-llama-cache") is not first
    mixed = meta_spec({**cfg, "id2label": {0: "a", "1": "b"}}, "tiny-llama-cache")
    assert mixed.num_layers == 2
