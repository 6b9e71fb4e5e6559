"""A model resolved as vLLM resolves it: by ``architectures`` first, then ``model_type``, saying which it used.

Kimi-K2's config (moonshotai/Kimi-K2-Instruct, config.json: its published values) names ``model_type:
kimi_k2``, which has no formula, and ``architectures: ["DeepseekV3ForCausalLM"]``, which vLLM serves with its
DeepSeek-V3 class (vllm/model_executor/models/registry.py, v0.33.0).
"""

from __future__ import annotations

import json

from course_lib.model.architectures import resolve_family
from course_lib.model.families import supported
from course_lib.model.models import from_hf_config
from tests.course_lib.cli.test_cli_runtime import run

KIMI_K2 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 64,
    "num_key_value_heads": 64, "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
    "scoring_func": "sigmoid", "norm_topk_prob": True, "routed_scaling_factor": 2.827, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 163840,
    "max_position_embeddings": 131072, "num_nextn_predict_layers": 0, "rms_norm_eps": 1e-06, "rope_theta": 50000.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}

#: Worked by hand from the config: embedding + LM head 2 x 163,840 x 7,168 = 2,348,810,240, final norm 7,168;
#: per layer MLA q_a 7,168 x 1,536 + q_b 1,536 x 64 x 192 + kv_a 7,168 x 576 + kv_b 512 x 64 x 256 + o 8,192 x
#: 7,168 = 101,122,048, its two latent norms 2,048 and two layer norms 14,336 (x 61 = 6,169,444,352); one dense
#: MLP 3 x 7,168 x 18,432 = 396,361,728; 60 MoE layers of 385 experts x 3 x 7,168 x 2,048 + a 384 x 7,168 router
#: = 16,958,226,432 each (1,017,493,585,920). The model card's "1T total parameters".
KIMI_K2_PARAMS = 1_026_408_209_408


def test_kimi_k2_is_served_as_deepseek_v3_by_its_architectures():
    spec = from_hf_config(KIMI_K2, name="Kimi-K2-Instruct")
    assert spec.model_type == "deepseek_v3" and spec.attention == "mla"
    assert spec.params_total == KIMI_K2_PARAMS
    # MLA caches one latent per layer: 61 x (512 + 64) x 2 B
    assert sum(layer.values_per_token for layer in spec.layers) * 2 == 61 * 576 * 2 == 70_272
    assert spec.architectures == ("DeepseekV3ForCausalLM",)
    assert spec.resolved_by == "architectures: 'DeepseekV3ForCausalLM' (model_type 'kimi_k2')"


def test_the_cli_says_which_it_used(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(KIMI_K2))
    rc, out, err = run(["estimate", "--config", str(config), "--gpu", "h200", "--tensor-parallel", "8",
                        "--runtime", "vllm", "--max-model-len", "8192", "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert data["resolved_by"].startswith("architectures: 'DeepseekV3ForCausalLM'")
    assert data["architectures"] == ["DeepseekV3ForCausalLM"] and data["params_total"] == KIMI_K2_PARAMS
    rc, out, err = run(["estimate", "--config", str(config), "--gpu", "h200", "--tensor-parallel", "8"], capsys)
    assert rc == 0 and "formula chosen by architectures: 'DeepseekV3ForCausalLM' (model_type 'kimi_k2')" in out


def test_model_type_when_architectures_name_nothing_known():
    known = supported()
    assert resolve_family({"model_type": "qwen2", "architectures": ["Qwen2ForRewardModel"]}, known) == (
        "qwen2", "model_type: 'qwen2' (architectures ['Qwen2ForRewardModel'] name no family here)")
    assert resolve_family({"model_type": "brandnew", "architectures": "not a list"}, known)[0] is None
    # vLLM tries the listed architectures in order
    assert resolve_family({"model_type": "x", "architectures": ["Nope", "Qwen3ForCausalLM"]}, known)[0] == "qwen3"
