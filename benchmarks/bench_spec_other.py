"""SGLang's and TensorRT-LLM's speculative decoding, before/after, per GPU (benchmarks/results/speculative.md).

An EAGLE-3 head for Llama-3.1-8B (1 layer of its width, draft_vocab_size 32,000: the shape of the published heads;
its config is written here, no weights) on an H100, and DeepSeek-V3's own MTP layer (NEXTN / MTP) at TP 8 on an H200,
each under SGLang 0.5.5, 0.5.10 and 0.5.23 and TensorRT-LLM 1.2.0. No GPU, no runtime: the estimate only.
"""
import json
import tempfile
from pathlib import Path

from course_lib.model.presets import get_model
from course_lib.runtimes import SglangLaunch, TrtllmLaunch, estimate_sglang, estimate_trtllm
from course_lib.runtimes.sglang_spec import SglangSpeculative
from course_lib.runtimes.trtllm_spec import parse_trtllm_speculative

GiB = 2**30
EAGLE3 = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
          "intermediate_size": 14336, "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8,
          "vocab_size": 128256, "draft_vocab_size": 32000, "max_position_embeddings": 2048, "torch_dtype": "float16",
          "tie_word_embeddings": False}


def terms(est):
    return {t.name: t.bytes for t in est.terms}


def main() -> None:
    draft = Path(tempfile.mkdtemp()) / "eagle3-llama3.1-8b"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(EAGLE3))
    print("| case | runtime | share | KV tokens before | after | draft weights GiB | draft KV GiB | target KV GiB |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    cases = (("llama-3.1-8b", "h100-80gb", 1, SglangSpeculative("EAGLE3", str(draft)),
              {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model_dir": str(draft)}),
             ("deepseek-v3", "h200", 8, SglangSpeculative("NEXTN"), {"decoding_type": "MTP"}))
    for name, gpu, tp, sd, trt in cases:
        spec = get_model(name)
        for version in ("0.5.5", "0.5.10", "0.5.23"):
            before = estimate_sglang(spec, gpu=gpu, launch=SglangLaunch(version=version, tensor_parallel=tp))
            after = estimate_sglang(spec, gpu=gpu, launch=SglangLaunch(version=version, tensor_parallel=tp,
                                                                       speculative=sd))
            t = terms(after)
            print(f"| {name} {sd.algorithm}, TP {tp}, {gpu} | SGLang {version} | mem_fraction_static "
                  f"{before.launch['mem_fraction_static']} -> {after.launch['mem_fraction_static']} | "
                  f"{before.kv_cache_tokens:,} | {after.kv_cache_tokens:,} | {t['draft_weights'] / GiB:.2f} | "
                  f"{t['draft_kv'] / GiB:.2f} | {after.runtime_kv_cache_bytes / GiB:.2f} |")
        before = estimate_trtllm(spec, gpu=gpu, launch=TrtllmLaunch(version="1.2.0", tensor_parallel=tp))
        after = estimate_trtllm(spec, gpu=gpu, launch=TrtllmLaunch(version="1.2.0", tensor_parallel=tp,
                                                                   speculative=parse_trtllm_speculative(trt)))
        t = terms(after)
        print(f"| {name} {trt['decoding_type']}, TP {tp}, {gpu} | TensorRT-LLM 1.2.0 | free fraction 0.9 | "
              f"{before.kv_cache_tokens:,} | {after.kv_cache_tokens:,} | {t['draft_weights'] / GiB:.2f} | "
              f"{t['draft_kv'] / GiB:.2f} | {(after.runtime_kv_cache_bytes - t['draft_kv']) / GiB:.2f} |")


if __name__ == "__main__":
    main()
