"""vLLM speculative decoding (``--speculative-config``): checked against a published start-up log's graph sizes and
vLLM 0.33's source (a drafter's attention layers join ``get_kv_cache_spec``; n-gram loads no drafter)."""

from pathlib import Path

import pytest

from cli_support import run_cli
from course_lib.errors import CourseInputError
from course_lib.runtimes.log import read_startup_log
from course_lib.model.models import kv_cache_bytes_per_token
from course_lib.model.presets import get_model
from course_lib.dtypes import get_dtype
from course_lib.runtimes import VllmLaunch, estimate_vllm
from course_lib.runtimes.vllm.spec import (drafter, full_decode_sizes, parse_speculative_config,
                                           spec_capture_sizes, with_drafter)

REPO = Path(__file__).resolve().parents[4]
DFLASH_LOG = REPO / "benchmarks/runtime_logs/set_2026/logs/vllm-qwen36-35b-a3b-fp8-dflash-a800-u062-v0202.txt"


def test_capture_sizes_match_the_published_dflash_log():
    # set_2026's A800 log: max_num_seqs 24, 6 draft tokens -> "PIECEWISE=38 (largest=336), FULL=22 (largest=168)"
    sizes, full = spec_capture_sizes(24, 6, 2048), full_decode_sizes(24, 6, 2048)
    assert (len(sizes), sizes[-1], len(full), full[-1]) == (38, 336, 22, 168)
    assert all(s % 7 == 0 for s in sizes), "every size is a multiple of 1 + num_speculative_tokens"


@pytest.mark.parametrize("text, phrase", [
    ("{method: ngram}", "is not JSON"),
    ('{"method": "medusa9", "num_speculative_tokens": 2}', "is not a method"),
    ('{"method": "eagle3", "num_speculative_tokens": 2}', "needs \"model\""),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "num_speculative_tokens"),
    ('[1, 2]', "is not a JSON object"),
])
def test_bad_config_is_one_line_exit_2(text, phrase, capsys):
    rc, out, err = run_cli(capsys, "estimate", "--runtime", "vllm", "--model", "llama-3.1-8b", "--gpu", "h100-80gb",
                           "--context-tokens", "8192", "--speculative-config", text)
    assert rc == 2 and len(err.splitlines()) == 1 and phrase in err and "Traceback" not in err, err


def test_ngram_loads_no_drafter_and_mtp_adds_one_kv_layer():
    v3 = get_model("deepseek-v3")
    ngram = parse_speculative_config('{"method": "ngram", "num_speculative_tokens": 3}')
    assert with_drafter(v3, ngram) is v3 and drafter(v3, ngram).params == 0
    mtp = with_drafter(v3, parse_speculative_config('{"method": "deepseek_mtp", "num_speculative_tokens": 1}'))
    fp16 = get_dtype("fp16")
    # DeepSeek-V3's one MTP layer is an MLA layer of the model's shape: 61 -> 62 layers of cache
    assert kv_cache_bytes_per_token(mtp, fp16) * 61 == kv_cache_bytes_per_token(v3, fp16) * 62
    # its weights: the checkpoint's MTP module less the embedding and head vLLM shares with the target
    assert mtp.params["drafter"] == v3.not_loaded["mtp"] - 2 * 129_280 * 7_168


def test_draft_model_adds_its_weights_and_kv():
    target, draft = get_model("llama-3.1-8b"), get_model("llama-3.2-1b")
    launch = VllmLaunch(version="0.19.0", max_model_len=8192, max_num_seqs=64)
    base = estimate_vllm(target, gpu="h100-80gb", launch=launch)
    sd = parse_speculative_config('{"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 4}')
    spec = estimate_vllm(target, gpu="h100-80gb", launch=VllmLaunch(**{**launch.__dict__, "speculative_config": sd}))
    weights = {t.name: t.bytes for t in base.terms}["weights"]
    assert {t.name: t.bytes for t in spec.terms}["weights"] - weights == 2 * draft.params_total
    # the draft's 16 layers join the KV cache: bytes per token grow by the draft's
    assert spec.kv_cache_bytes_per_token == base.kv_cache_bytes_per_token + kv_cache_bytes_per_token(
        draft, get_dtype("bf16"))


def test_from_log_reads_the_speculative_config():
    log = read_startup_log(DFLASH_LOG.read_text())
    assert log.launch["speculative_config"]["method"] == "dflash"
    assert log.launch["speculative_config"]["num_speculative_tokens"] == 6
    args = ("(APIServer pid=1) INFO 06-23 10:20:01 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-8B', "
            "'speculative_config': {'method': 'eagle3', 'model': 'AngelSlim/Qwen3-8B_eagle3', "
            "'num_speculative_tokens': 2}}\n"
            "(EngineCore pid=2) INFO 06-23 10:21:01 [gpu_worker.py:440] Available KV cache memory: 20.5 GiB\n")
    assert read_startup_log(args).launch["speculative_config"]["model"] == "AngelSlim/Qwen3-8B_eagle3"
    engine = ("(EngineCore pid=2) INFO 12-05 18:57:40 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with "
              "config: model='/m', speculative_config=SpeculativeConfig(method='ngram', model=None, "
              "num_spec_tokens=3), tokenizer='/m'\n"
              "(EngineCore pid=2) INFO 06-23 10:21:01 [gpu_worker.py:440] Available KV cache memory: 20.5 GiB\n")
    assert read_startup_log(engine).launch["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 3}
    local = '{"method": "dflash", "model": "/local/path", "num_speculative_tokens": 6}'
    with pytest.raises(CourseInputError, match="Hub id"):       # estimate: a drafter it cannot read is refused
        drafter(get_model("llama-3.1-8b"), parse_speculative_config(local))
    lenient = drafter(get_model("llama-3.1-8b"), parse_speculative_config(local, strict=False))
    assert lenient.params == 0 and "not counted" in lenient.note      # from-log: graph sizes only, said so


def test_mtp_layers_are_stored_in_the_checkpoints_fp8():
    # DeepSeek-V3's MTP layer is part of its block-fp8 checkpoint: 1 byte per weight + an fp32 scale per 128 x 128
    v3 = get_model("deepseek-v3")
    sd = parse_speculative_config('{"method": "deepseek_mtp", "num_speculative_tokens": 1}')
    launch = VllmLaunch(version="0.19.0", max_model_len=32768, tensor_parallel=8)
    base = {t.name: t.bytes for t in estimate_vllm(v3, gpu="h200", launch=launch).terms}["weights"]
    mtp = {t.name: t.bytes for t in estimate_vllm(v3, gpu="h200", launch=VllmLaunch(
        **{**launch.__dict__, "speculative_config": sd})).terms}["weights"]
    drafter_per_gpu = -(-(v3.not_loaded["mtp"] - 2 * 129_280 * 7_168) // 8)
    assert mtp - base == -(-drafter_per_gpu * (128 * 128 + 4) // (128 * 128))


def test_capture_sizes_of_the_033_rule_by_hand():
    # vLLM 0.33 (_set_cudagraph_sizes, exact): ceiling min(24 x 7 x 2, 512) = 336, the grid [1, 2, 4, 8..248, 256..336]
    # (3 + 31 + 6 = 40 sizes) plus the uniform decode sizes n x 7 for n in [1, 2, 4, 8, 16, 24]: 7, 14 and 28 are new
    # (56, 112, 168 are on the grid): 43 sizes on the V2 runner, which does not round
    assert len(spec_capture_sizes(24, 6, 2048, exact=True, round_to_query=False)) == 43
    # the V1 runner rounds every size up to a multiple of 7: 1, 2, 4 -> 7; 8k -> ceil(8k / 7) x 7 (31 distinct);
    # 256..336 step 16 -> 259, 273, 294, 308, 322, 336: 38, the decode sizes already among them
    assert len(spec_capture_sizes(24, 6, 2048, exact=True)) == 38
    # a small token budget caps the ceiling at max_num_batched_tokens 64: the grid 1, 2, 4, 8..64 rounds to
    # 7 (from 1, 2, 4), 14 (from 8), ..., 49 (from 48), 56; 64 rounds to 70, past the ceiling: dropped
    assert spec_capture_sizes(24, 6, 64, exact=True) == [7, 14, 21, 28, 35, 42, 49, 56]
