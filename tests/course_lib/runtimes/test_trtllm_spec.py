"""TensorRT-LLM's speculative decoding (``speculative_config``), worked by hand from its source
(tensorrt_llm/_torch/pyexecutor/_util.py ``KvCacheCreator``, NVIDIA/TensorRT-LLM main at commit 0004396: the drafter
is resident when the profiling peak is measured, so ``free_gpu_memory_fraction`` applies to what it leaves; the
per-token cost is the target's plus the draft's, one token count for both).

DeepSeek-V3 + MTP (num_nextn_predict_layers 1), TP 8: one more MLA layer, (512 + 64) x 2 B = 1,152 B a token on top of
the target's 61 x 1,152 = 70,272 B; the MTP layer's 13,463,426,304 params less its embedding and head (shared with the
target, 2 x 129,280 x 7,168) are loaded in the checkpoint's fp8.
Llama-3.1-8B + a 1-layer EAGLE-3 head (hidden 4,096, 8 KV heads of 128): 4,096 B a token more (131,072 -> 135,168).
"""

import json

import pytest

from cli_support import run_cli
from course_lib.model.presets import get_model
from course_lib.runtimes import TrtllmLaunch, estimate_trtllm
from course_lib.runtimes.trtllm_spec import parse_trtllm_speculative

EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
                 "intermediate_size": 14336, "num_hidden_layers": 1, "num_attention_heads": 32,
                 "num_key_value_heads": 8, "vocab_size": 128256, "draft_vocab_size": 32000,
                 "max_position_embeddings": 2048, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def _terms(est):
    return {t.name: t.bytes for t in est.terms}


def test_mtp_adds_one_layer_to_the_token_and_its_weights_before_the_fraction():
    v3 = get_model("deepseek-v3")
    base = estimate_trtllm(v3, gpu="h200", launch=TrtllmLaunch(version="1.2.0", tensor_parallel=8))
    est = estimate_trtllm(v3, gpu="h200", launch=TrtllmLaunch(
        version="1.2.0", tensor_parallel=8, speculative=parse_trtllm_speculative('{"decoding_type": "MTP"}')))
    t, b = _terms(est), _terms(base)
    assert base.kv_cache_bytes_per_token == 61 * 1_152 and est.kv_cache_bytes_per_token == 62 * 1_152
    mtp_layer = 13_463_426_304 - 2 * 129_280 * 7_168                    # 11,610,068,224 params, fp8 (+ block scales)
    assert mtp_layer // 8 <= t["draft_weights"] <= mtp_layer // 8 * 1.01
    assert t["free"] == b["free"] - t["draft_weights"]
    assert est.runtime_kv_cache_bytes == int(0.9 * t["free"])          # the fraction of what the drafter leaves
    assert est.num_gpu_blocks == est.runtime_kv_cache_bytes // (62 * 1_152 * 32)
    assert any(r.startswith("speculative (1.0") for r in est.unchecked_rules), est.unchecked_rules


def test_eagle3_two_pools_share_one_token_count(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(EAGLE3_CONFIG))
    spec = get_model("llama-3.1-8b")
    base = estimate_trtllm(spec, gpu="h100-80gb", launch=TrtllmLaunch(version="1.2.0"))
    sd = parse_trtllm_speculative(json.dumps({"decoding_type": "Eagle3", "max_draft_len": 3,
                                              "speculative_model_dir": str(tmp_path)}))
    est = estimate_trtllm(spec, gpu="h100-80gb", launch=TrtllmLaunch(version="1.2.0", speculative=sd))
    t = _terms(est)
    # the head: q, o 2 x 4,096^2 + k, v 2 x 4,096 x 1,024 + mlp 3 x 4,096 x 14,336 + 3 norms x 4,096 + fc 3 x 4,096^2
    head = 33_554_432 + 8_388_608 + 176_160_768 + 12_288 + 50_331_648
    assert t["draft_weights"] == 2 * head
    assert t["free"] == _terms(base)["free"] - 2 * head
    assert est.kv_cache_bytes_per_token == 131_072 + 4_096
    assert est.kv_cache_tokens == int(0.9 * t["free"]) // (135_168 * 32) * 32
    assert t["draft_kv"] == est.kv_cache_tokens * 4_096


def test_ngram_changes_nothing():
    spec = get_model("llama-3.1-8b")
    base = estimate_trtllm(spec, gpu="h100-80gb", launch=TrtllmLaunch(version="1.2.0"))
    est = estimate_trtllm(spec, gpu="h100-80gb", launch=TrtllmLaunch(
        version="1.2.0", speculative=parse_trtllm_speculative('{"decoding_type": "NGram", "max_draft_len": 4}')))
    assert est.runtime_kv_cache_bytes == base.runtime_kv_cache_bytes and "draft_kv" not in _terms(est)


@pytest.mark.parametrize("config, extra, phrase", [
    ('{"decoding_type": "Medusa", "max_draft_len": 3}', [], "not modelled for TensorRT-LLM"),
    ('{"decoding_type": "Eagle3", "max_draft_len": 3}', [], "speculative_model_dir"),
    ('{"decoding_type": "NGram"}', [], "max_draft_len"),
    ('{decoding_type: MTP}', [], "is not JSON"),
    ('{"decoding_type": "MTP"}', ["--trtllm-version", "0.19.0"], "1.0 or later"),
])
def test_bad_speculative_config_is_one_line_exit_2(config, extra, phrase, capsys):
    rc, out, err = run_cli(capsys, "estimate", "--runtime", "trtllm", "--model", "llama-3.1-8b", "--gpu",
                           "h100-80gb", "--speculative-config", config, *extra)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and phrase in err and "Traceback" not in err, err


def test_cli_passes_the_config(capsys):
    rc, out, err = run_cli(capsys, "estimate", "--runtime", "trtllm", "--model", "deepseek-v3", "--gpu", "h200",
                           "--tensor-parallel", "8", "--speculative-config", '{"decoding_type": "MTP"}', "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["kv_cache_bytes_per_token"] == 62 * 1_152
    assert data["launch"]["speculative_config"]["decoding_type"] == "MTP"
