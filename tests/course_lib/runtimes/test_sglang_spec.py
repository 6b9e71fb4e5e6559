"""SGLang's speculative decoding, worked by hand from its source (wheels 0.5.5 and 0.5.23, see
course_lib/runtimes/sglang_spec.py for the files and lines).

EAGLE-3 head of Llama-3.1-8B (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's config: 1 layer, hidden 4,096, 32 heads, 8 KV
heads, intermediate 14,336, vocab 128,256, draft_vocab_size 32,000, fp16), as models/llama_eagle3.py builds it:
  qkv over 2 x 4,096: 8,192 x (4,096 + 2 x 1,024) = 50,331,648;  o_proj 4,096^2 = 16,777,216;
  mlp 3 x 4,096 x 14,336 = 176,160,768;  norms (input, post-attention, hidden_norm, final) 4 x 4,096 = 16,384;
  fc 3 x 4,096 -> 4,096 = 50,331,648;  lm_head 32,000 x 4,096 = 131,072,000   -> kept 424,689,664 params;
  + embed_tokens 128,256 x 4,096 = 525,336,576 (built, then freed for the target's) -> built 950,026,240 params.
Its KV: pool_configurator.py adds int(131,072 x 1 / 32) = 4,096 B to Llama-3.1-8B's 131,072 B a token (bf16).

DeepSeek-V3's NEXTN draft: its one MTP layer's KV is (512 + 64) x 2 B = 1,152 B a token (MLA), and the NextN model
builds its own embedding and head, 2 x 129,280 x 7,168 = 1,853,358,080 params, bf16, split over TP 8.
"""

import json

import pytest

from cli_support import run_cli
from course_lib.model.presets import get_model
from course_lib.runtimes.sglang import SglangLaunch, estimate_sglang
from course_lib.runtimes.sglang_spec import SglangSpeculative, spec_capture_sizes

MiB = 2**20
EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
                 "intermediate_size": 14336, "num_hidden_layers": 1, "num_attention_heads": 32,
                 "num_key_value_heads": 8, "vocab_size": 128256, "draft_vocab_size": 32000,
                 "max_position_embeddings": 2048, "torch_dtype": "float16", "tie_word_embeddings": False,
                 "rms_norm_eps": 1e-05, "hidden_act": "silu"}


@pytest.fixture(scope="module")
def eagle3_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("eagle3")
    (d / "config.json").write_text(json.dumps(EAGLE3_CONFIG))
    return str(d)


def _terms(est):
    return {t.name: t.bytes for t in est.terms}


def test_eagle3_draft_weights_and_kv_join_the_0_5_23_budget(eagle3_dir):
    target = get_model("llama-3.1-8b")
    base = estimate_sglang(target, gpu="h100-80gb", launch=SglangLaunch(version="0.5.23"))
    est = estimate_sglang(target, gpu="h100-80gb", launch=SglangLaunch(
        version="0.5.23", speculative=SglangSpeculative("EAGLE3", eagle3_dir)))
    t = _terms(est)
    assert t["draft_weights"] == 2 * 950_026_240          # everything built is resident at the profile
    assert est.launch["mem_fraction_static"] == base.launch["mem_fraction_static"]     # 0.5.20+: no extra reserve
    available = t["free_at_start"] - t["weights"] - 2 * 950_026_240 - t["reserved"]
    assert est.kv_cache_tokens == available // (131_072 + 4_096)
    assert t["draft_kv"] == est.kv_cache_tokens * 4_096
    assert est.runtime_kv_cache_bytes == est.kv_cache_tokens * 131_072     # the target's pool, as its log line shows
    assert (est.launch["speculative_num_steps"], est.launch["speculative_eagle_topk"],
            est.launch["speculative_num_draft_tokens"]) == (5, 4, 8)        # Llama's auto params
    assert any(r.startswith("spec_pool (0.5.20") for r in est.unchecked_rules), est.unchecked_rules


def test_eagle3_under_0_5_5_grows_the_reserve_and_the_targets_pool(eagle3_dir):
    target = get_model("llama-3.1-8b")
    base = estimate_sglang(target, gpu="h100-80gb", launch=SglangLaunch(version="0.5.5"))
    est = estimate_sglang(target, gpu="h100-80gb", launch=SglangLaunch(
        version="0.5.5", speculative=SglangSpeculative("EAGLE3", eagle3_dir)))
    t = _terms(est)
    gpu_mib = t["free_at_start"] and est.launch["gpu_total_bytes"] / MiB
    # server_args.py 0.5.5: reserved = max(512 + 8192 x 1.5 + 256 x 2 + 128, 10,240) + 2,048 MiB
    assert est.launch["mem_fraction_static"] == round((gpu_mib - (13_440 + 2_048)) / gpu_mib, 3)
    assert base.launch["mem_fraction_static"] == round((gpu_mib - 13_440) / gpu_mib, 3)
    profiled = (t["free_at_start"] - t["weights"] - t["reserved"]) // 131_072
    # model_runner.py 0.5.5: + 48 reqs x (5 steps x 4 topk) + 48 x 8 draft tokens + 100
    assert est.kv_cache_tokens == profiled + 48 * 20 + 48 * 8 + 100
    assert t["draft_weights"] == 2 * 424_689_664            # after the embedding is swapped for the target's
    assert t["draft_kv"] == est.kv_cache_tokens * 4_096     # the draft's own pool: 1 layer of 8 x 128 x 2 x 2 B


def test_deepseek_v3_nextn_drafts_from_its_own_mtp_layer():
    v3 = get_model("deepseek-v3")
    launch = dict(version="0.5.23", tensor_parallel=8)
    base = estimate_sglang(v3, gpu="h200", launch=SglangLaunch(**launch))
    est = estimate_sglang(v3, gpu="h200", launch=SglangLaunch(**launch, speculative=SglangSpeculative("NEXTN")))
    t = _terms(est)
    assert base.kv_cache_bytes_per_token == 70_272                      # (512 + 64) x 61 x 2 B
    available = t["free_at_start"] - t["weights"] - t["draft_weights"] - t["reserved"]
    assert est.kv_cache_tokens == available // (70_272 + 1_152)
    assert t["draft_kv"] == est.kv_cache_tokens * 1_152
    head_and_embedding = 2 * 129_280 * 7_168 // 8 * 2                   # bf16, vocab-parallel over TP 8
    mtp_layer = 13_463_426_304 - 2 * 129_280 * 7_168                    # the checkpoint's layer 61 without them
    assert head_and_embedding + mtp_layer // 8 < t["draft_weights"] < head_and_embedding + mtp_layer // 8 * 1.01
    assert (est.launch["speculative_num_steps"], est.launch["speculative_num_draft_tokens"]) == (3, 4)


def test_ngram_loads_nothing_and_the_pool_stays():
    spec = get_model("llama-3.1-8b")
    base = estimate_sglang(spec, gpu="h100-80gb", launch=SglangLaunch(version="0.5.23"))
    est = estimate_sglang(spec, gpu="h100-80gb", launch=SglangLaunch(version="0.5.23",
                                                                      speculative=SglangSpeculative("NGRAM")))
    assert est.kv_cache_tokens == base.kv_cache_tokens and "draft_kv" not in _terms(est)
    assert est.launch["max_running_requests"] == 48 and est.launch["speculative_num_draft_tokens"] == 12


def test_spec_capture_sizes_stop_at_the_request_pool():
    # range(1, 9) + range(10, 33, 2) + [40, 44, 48]: 8 + 12 + 3 sizes
    assert spec_capture_sizes(256, 48) == list(range(1, 9)) + list(range(10, 33, 2)) + [40, 44, 48]


def test_cli_takes_the_flags(eagle3_dir, capsys):
    rc, out, err = run_cli(capsys, "estimate", "--runtime", "sglang", "--model", "llama-3.1-8b", "--gpu", "h100-80gb",
                           "--speculative-algorithm", "eagle3", "--speculative-draft-model-path", eagle3_dir,
                           "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["launch"]["speculative_num_draft_tokens"] == 4      # topk 1: steps + 1


@pytest.mark.parametrize("flags, phrase", [
    (["--speculative-algorithm", "medusa"], "invalid choice"),
    (["--speculative-num-steps", "3"], "needs --speculative-algorithm"),
    (["--speculative-algorithm", "EAGLE3"], "needs --speculative-draft-model-path"),
    (["--speculative-algorithm", "NEXTN", "--sglang-version", "0.4.3"], "0.5.5 or later"),
    (["--speculative-algorithm", "NGRAM", "--speculative-draft-model-path", "x"], "not used"),
    (["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "no-such-draft"], "neither a folder"),
])
def test_bad_flags_are_one_line_exit_2(flags, phrase, capsys):
    rc, out, err = run_cli(capsys, "estimate", "--runtime", "sglang", "--model", "llama-3.1-8b", "--gpu", "h100-80gb",
                           *flags)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and phrase in err and "Traceback" not in err, err


def test_the_flags_are_sglangs_own(capsys):
    rc, out, err = run_cli(capsys, "estimate", "--runtime", "vllm", "--model", "llama-3.1-8b", "--gpu", "h100-80gb",
                           "--speculative-algorithm", "NGRAM")
    assert rc == 2 and "sglang" in err, err


SPEC_LOG = ("[2026-01-10 10:00:00] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', tp_size=8, "
            "mem_fraction_static=0.886, speculative_algorithm='EAGLE', speculative_draft_model_path="
            "'deepseek-ai/DeepSeek-V3', speculative_num_steps=3, speculative_eagle_topk=1, "
            "speculative_num_draft_tokens=4, max_running_requests=48)\n"
            "[2026-01-10 10:00:50] max_total_num_tokens=600000, chunked_prefill_size=8192, max_prefill_tokens=16384\n")


def test_from_log_reads_the_speculative_flags_and_the_targets_pool():
    from course_lib.runtimes.from_log import launch_for
    from course_lib.runtimes.log import read_startup_log
    log = read_startup_log(SPEC_LOG)
    assert log.launch["speculative_algorithm"] == "EAGLE" and log.launch["speculative_num_draft_tokens"] == 4
    assert log.logged["kv_cache_tokens"] == 600_000
    launch, _ = launch_for(log, get_model("deepseek-v3"), "h200")
    # server_args.py had pointed the draft at the target's own checkpoint: its MTP layer, as NEXTN
    assert launch.speculative == SglangSpeculative("EAGLE", None, 3, 1, 4, strict=False)
    est = estimate_sglang(get_model("deepseek-v3"), gpu="h200", launch=launch)
    assert _terms(est)["draft_kv"] == est.kv_cache_tokens * 1_152
    # a draft at a local path this machine does not have: from-log leaves it out (estimate refuses, see above)
    other = read_startup_log(SPEC_LOG.replace("'deepseek-ai/DeepSeek-V3', speculative_num_steps",
                                              "'/models/eagle-head', speculative_num_steps")
                             .replace("'EAGLE'", "'EAGLE3'"))
    launch, _ = launch_for(other, get_model("llama-3.1-8b"), "h200")
    est = estimate_sglang(get_model("llama-3.1-8b"), gpu="h200", launch=launch)
    assert any("not counted" in n for n in est.notes) and "draft_kv" not in _terms(est), est.notes
