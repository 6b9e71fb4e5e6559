"""Bad config input: every refusal is one CourseInputError line naming the key, the value and what is valid.

The expected figures are hand-worked: Llama-3-8B with ``"tie_word_embeddings": "false"`` read as true
would lose its 128,256 x 4,096 lm_head (8,030,261,248 -> 7,504,924,672); it must be refused instead.
"""

from __future__ import annotations

import json
import time

import pytest

from course_lib.bounds import MAX_DIMENSION, MAX_LAYERS
from course_lib.errors import CourseInputError
from course_lib.model.models import from_hf_config

LLAMA_3_8B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}


def refusal(cfg) -> str:
    with pytest.raises(CourseInputError) as info:
        from_hf_config(cfg)
    message = str(info.value)
    assert "\n" not in message, f"a refusal is one line: {message!r}"
    return message


def test_string_booleans_are_refused_not_read_as_true():
    assert from_hf_config(dict(LLAMA_3_8B, tie_word_embeddings=False)).params_total == 8_030_261_248
    message = refusal(dict(LLAMA_3_8B, tie_word_embeddings="false"))
    assert "tie_word_embeddings='false'" in message and "true or false" in message


@pytest.mark.parametrize("key, value", [("attention_bias", "no"), ("mlp_bias", 1), ("tie_word_embeddings", 0),
                                        ("attention_bias", "true")])
def test_only_json_booleans(key, value):
    message = refusal(dict(LLAMA_3_8B, **{key: value}))
    assert f"{key}={value!r}" in message and "JSON boolean" in message


@pytest.mark.parametrize("model_type, key, value, bound", [
    ("llama", "head_dim", 10**30, f"{MAX_DIMENSION:,}"),
    ("llama", "num_hidden_layers", 100_000_000, f"{MAX_LAYERS:,}"),
    pytest.param("llama", "hidden_size", 10**5000, f"{MAX_DIMENSION:,}", id="5000-digit"),
    ("deepseek_v3", "n_routed_experts", 10**30, f"{MAX_DIMENSION:,}"),
    ("qwen3_moe", "num_experts", 10**30, f"{MAX_DIMENSION:,}"),
])
def test_numbers_are_bounded(model_type, key, value, bound):
    cfg = dict(LLAMA_3_8B, model_type=model_type, **{key: value})
    start = time.perf_counter()
    message = refusal(cfg)
    assert time.perf_counter() - start < 1.0, "a bound is checked before any per-layer work"
    assert key in message and bound in message and len(message) < 300


def test_parameter_total_is_bounded():
    message = refusal(dict(LLAMA_3_8B, hidden_size=MAX_DIMENSION, vocab_size=MAX_DIMENSION))
    assert "10^13" in message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1.5, "4096", 0])
def test_widths_must_be_finite_whole_numbers(value):
    message = refusal(dict(LLAMA_3_8B, hidden_size=value))
    assert "hidden_size=" in message


@pytest.mark.parametrize("types, shown", [([1] * 32, "holds 1"), (["global"] * 32, "'global'")])
def test_layer_types_name_the_valid_kinds(types, shown):
    message = refusal(dict(LLAMA_3_8B, sliding_window=4096, layer_types=types))
    assert shown in message and "full_attention, sliding_attention" in message


def test_layer_types_of_a_hybrid_may_name_linear_attention():
    cfg = {"model_type": "qwen3_next", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": 100, "num_experts": 2, "moe_intermediate_size": 8,
           "layer_types": ["linear_attention", "full_attention"]}
    assert len(from_hf_config(cfg).states) == 1
    assert "linear_attention" in refusal(dict(cfg, layer_types=["mamba", "full_attention"]))


def test_layer_lists_in_range():
    cfg = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "num_experts": 2,
           "moe_intermediate_size": 8}
    assert "mlp_only_layers" in refusal(dict(cfg, mlp_only_layers=[7]))
    assert "mlp_only_layers" in refusal(dict(cfg, mlp_only_layers="0"))


# ------------------------------------------------------------------ files

def write(tmp_path, text: str):
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    return path


def test_deeply_nested_json_is_refused_cleanly(tmp_path):
    path = write(tmp_path, "[" * 200_000 + "]" * 200_000)
    with pytest.raises(CourseInputError, match="too deeply"):
        from_hf_config(path)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_in_a_file(tmp_path, number):
    path = write(tmp_path, json.dumps(LLAMA_3_8B)[:-1] + f', "rope_theta": {number}}}')
    with pytest.raises(CourseInputError, match=f"rope_theta={number} is not finite"):
        from_hf_config(path)


def test_five_thousand_digit_integer_in_a_file(tmp_path):
    path = write(tmp_path, json.dumps(LLAMA_3_8B)[:-1] + ', "hidden_size": ' + "9" * 5000 + "}")
    with pytest.raises(CourseInputError) as info:
        from_hf_config(path)
    assert str(path) in str(info.value)


def test_a_folder_needs_its_config_json(tmp_path):
    with pytest.raises(CourseInputError, match="without config.json"):
        from_hf_config(tmp_path)


def test_nested_text_config_must_be_an_object():
    assert "text_config" in refusal({"model_type": "gemma3", "text_config": [1, 2]})
    assert "text_config" in refusal({"model_type": "gemma3"})


@pytest.mark.parametrize("q, shown", [
    ({"quant_method": "awq", "bits": 3.5}, "bits"),
    ({"quant_method": "awq", "zero_point": "yes"}, "zero_point"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
    ({"quant_method": ["awq"]}, "quant_method"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": "true"}, "load_in_4bit"),
])
def test_bad_quantization_config(q, shown):
    assert shown in refusal(dict(LLAMA_3_8B, quantization_config=q))


def test_bad_torch_dtype():
    assert "torch_dtype='float12'" in refusal(dict(LLAMA_3_8B, torch_dtype="float12"))


def test_the_library_bounds_a_config_file_too(tmp_path):
    # Not only the CLI: a notebook calling from_hf_config on a 10 MB + 1 byte file is refused, by the bound.
    big = tmp_path / "config.json"
    big.write_bytes(b" " * 10_000_001)
    with pytest.raises(CourseInputError, match=r"is larger than 10,000,000 bytes"):
        from_hf_config(tmp_path)
    with pytest.raises(CourseInputError, match=r"is not a regular file"):
        from_hf_config("/dev/zero")
