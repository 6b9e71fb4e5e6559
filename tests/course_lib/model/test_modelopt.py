"""ModelOpt NVFP4 checkpoints: 4-bit e2m1 values + an fp8 scale per 16, excluded modules in the compute dtype.

Checked against a hand-worked tiny Llama (every tensor counted by hand below) and the byte layout of vLLM's
``KNvfp4Static.create_weights`` (vllm/model_executor/layers/quantization/modelopt.py, 0.33.0):
``weight`` uint8 [out, in/2], ``weight_scale`` fp8 [out, in/16]."""

import pytest

from course_lib.errors import CourseInputError
from course_lib.model.modelopt import excluded_groups, from_hf_quant_config
from course_lib.model.models import from_hf_config, weight_bytes
from course_lib.model.quantization import format_from_config

TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"}
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}


def _linear_bytes(rows: int, cols: int) -> int:
    """What the checkpoint stores for one NVFP4 linear: packed values + fp8 scales (fp32 scalars not counted)."""
    return rows * cols // 2 + rows * cols // 16


def test_tiny_llama_by_hand():
    # per layer: q 64x64, k 32x64, v 32x64, o 64x64, gate/up 128x64, down 64x128; 2 norms of 64; final norm 64
    per_layer = (_linear_bytes(64, 64) * 2 + _linear_bytes(32, 64) * 2 + _linear_bytes(128, 64) * 2
                 + _linear_bytes(64, 128) + 2 * 64 * 2)
    by_hand = 2 * per_layer + 256 * 64 * 2 * 2 + 64 * 2      # embedding + lm_head in bf16, final norm
    fmt = format_from_config({**TINY, "quantization_config": NVFP4})
    assert fmt.name == "nvfp4", fmt.describe()
    assert weight_bytes(from_hf_config(TINY), fmt) == by_hand == 107_648


def test_bf16_count_was_the_old_answer():
    fmt = format_from_config({**TINY, "quantization_config": NVFP4})
    bf16 = weight_bytes(from_hf_config(TINY), "bf16")
    assert weight_bytes(from_hf_config(TINY), fmt) < bf16 * 0.6, "NVFP4 linears must not be counted at bf16"


def test_excluded_modules_stay_bf16():
    cfg = {**TINY, "quantization_config": {**NVFP4, "exclude_modules": ["lm_head", "*self_attn*"]}}
    fmt = format_from_config(cfg)
    attention = 2 * (64 * 64 * 2 + 32 * 64 * 2)             # q, o, k, v values per model, now bf16
    quantized = weight_bytes(from_hf_config(TINY), format_from_config({**TINY, "quantization_config": NVFP4}))
    assert weight_bytes(from_hf_config(TINY), fmt) == quantized + attention * 2 - attention * 9 // 16
    assert excluded_groups(["model.language_model.layers.*.linear_attn*"]) == ("linear_attention",)
    assert excluded_groups(["*mlp.gate", "*shared_expert_gate", "mtp*", "model.visual*"]) == ()
    assert excluded_groups(["linear_attn"]) == ("linear_attention",)     # vLLM's substring match


def test_hf_quant_config_and_bad_input():
    q = from_hf_quant_config({"producer": {"name": "modelopt"},
                              "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}})
    assert format_from_config({**TINY, "quantization_config": q}).name == "nvfp4"
    with pytest.raises(CourseInputError, match="group_size"):
        format_from_config({**TINY, "quantization_config": {**NVFP4, "group_size": 32}})
    with pytest.raises(CourseInputError, match="exclude_modules"):
        format_from_config({**TINY, "quantization_config": {**NVFP4, "exclude_modules": "lm_head"}})


def test_a_hub_id_whose_quantization_is_in_hf_quant_config_json(tmp_path, monkeypatch):
    # ModelOpt's export can leave config.json without quantization_config and write hf_quant_config.json beside it
    import json

    from tests.course_lib.model.test_hub_ids import lay_cache
    from course_lib.model.hub import hub_spec
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    quant = {"producer": {"name": "modelopt", "version": "0.29.0"},
             "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                              "exclude_modules": ["lm_head"]}}
    lay_cache(home / "hub", "course-test/tiny-nvfp4", {"config.json": json.dumps(TINY).encode(),
                                                       "hf_quant_config.json": json.dumps(quant).encode()})
    spec = hub_spec("course-test/tiny-nvfp4")
    assert spec.quantization.name == "nvfp4", spec.quantization
    assert weight_bytes(spec, None) == 107_648     # the hand-worked figure of test_tiny_llama_by_hand
