"""Held-out set D: which repository files, which commit, which lines (patterns from held-out B's / C's mk.py).

    python3 specs.py        # writes ../logs/<id>.txt byte-exactly from the fetched mirrors (git show <commit>:<path>)

Every source is a file in a public GitHub repository, fetched as a mirror under /work/.mirror/<owner>+<name>/repo.
"""
import json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mk import VLLM, SGL, TRT, build

EXCL = [r"Avg prompt throughput", r"Route: ", r"GPU KV cache usage", r"POST /v1", r"GET /v1", r"GET /health"]
MOE = [r"device_name=NVIDIA"]                      # fused-MoE / FP8 kernel config lookups name the card
V_EXTRA = [r"Using FlashAttention version", r"Using .* attention backend", r"Using Triton Attention backend",
           r"Using AttentionBackendEnum", r"Using max model len", r"Asynchronous scheduling", r"fp8 KV cache",
           r"Using fp8 data type to store kv cache"]

S = [
 dict(id="vllm-phi3-mini-rtx3090-wsl-u085-v0191", runtime="vllm (V1), version: 0.19.1",
      repo="sridhar1804/local-ai", commit="eb08446", kind="repository file (log)", path="logs/vllm.log",
      patterns=VLLM, exclude=EXCL),
 dict(id="vllm-qwen25-coder-14b-l40s-v0112", runtime="vllm (V1), version: 0.11.2",
      repo="briandepasquale/Controller-Search", commit="91a7550df3e79611eef69db715a86495b21d3e1a", kind="repository file (log)",
      path="vllm.log", patterns=VLLM, exclude=EXCL, range=(1, 120)),
 dict(id="vllm-qwen3-30b-a3b-2507-fp8-h100-v0221", runtime="vllm (V1), version: 0.22.1",
      repo="NnamdiOdozi/mlops-assignment", commit="0d2e9196984e74b370cbfaf37bbb06dcc92f0550", kind="repository file (log)",
      path="logs/vllm.log", patterns=VLLM + MOE, exclude=EXCL, range=(1, 200)),
 dict(id="vllm-qwen3-235b-a22b-fp8-tp8-ep-kvfp8-h100-v0100", runtime="vllm (V1), version: 0.10.0",
      repo="DaisukeTakai/eval_dataset", commit="05770858c3d3cce4cb23d622cbf2b9b460aa4606", kind="repository file (log)",
      path="vllm_judge.log", patterns=VLLM + MOE + [r"Using fp8 data type"], exclude=EXCL, range=(1, 300)),
 dict(id="vllm-qwen3-32b-tp8-kvfp8-h100-v0100", runtime="vllm (V1), version: 0.10.0",
      repo="DaisukeTakai/eval_dataset", commit="05770858c3d3cce4cb23d622cbf2b9b460aa4606", kind="repository file (log)",
      path="vllm_predict.log", patterns=VLLM + [r"Using fp8 data type"], exclude=EXCL, range=(1, 220)),
 dict(id="vllm-qwen3-30b-a3b-2507-rtxpro6000-eager-u085-v0120", runtime="vllm (V1), version: 0.12.0",
      repo="2215860382/VedioSifter", commit="f0edafcff305af304f66d2207b257070db46fe7a", kind="repository file (log)",
      path="vllm_server.log", patterns=VLLM + MOE, exclude=EXCL),
 dict(id="vllm-gemma3-12b-qat-awq-tp2-rtx4090-v084", runtime="vllm (V1), version: 0.8.4",
      repo="Kiloma-Advanced-Solutions/PLG_AI", commit="35b18220e805b5e7ee4192667e04e90e52d4ae13", kind="repository file (log)",
      path="vllm.log", patterns=VLLM + [r"args: Namespace"], exclude=EXCL, range=(1, 100)),
 dict(id="vllm-llama31-8b-a100-80-v0171", runtime="vllm (V1), version: 0.17.1",
      repo="LzyFischer/MemSuit", commit="92ce797a1c5804fcd2d72176ceced03e3b20544a", kind="repository file (log)",
      path="vllm_server.log", patterns=VLLM, exclude=EXCL),
 dict(id="vllm-qwen35-9b-a100-40-v0180", runtime="vllm (V1), version: 0.18.0",
      repo="passionworkeer/tengxun_open", commit="aecca1394060a3011de9cc5d8c0b8a048fd38eb3", kind="repository file (log)",
      path="logs/vllm_server.log", patterns=VLLM, exclude=EXCL),
 dict(id="vllm-qwen25-14b-awq-24gb-v0130", runtime="vllm (V1), version: 0.13.0",
      repo="kumaxxp/duo-talk", commit="2f4201e", kind="repository file (log)", path="vllm.log",
      patterns=VLLM, exclude=EXCL),
 dict(id="vllm-gptoss20b-mxfp4-dgxspark-u025-v0130nv", runtime="vllm (V1), version: 0.13.0+faa43dbf.nv26.01 (NGC container 26.01)",
      repo="TW-10519/VLLM-ROUTER", commit="43179adf4b1f340d0bb9dad4628f9919bf97753d", kind="repository file (log)",
      path="logs/vllm.log", patterns=VLLM + [r"NVIDIA GPU: ", r"NVIDIA Release"], exclude=EXCL),
 dict(id="vllm-qwen3-4b-h100-v0102", runtime="vllm (V1), version: 0.10.2",
      repo="benyucong/neo4j-graphrag-python", commit="1d835aed7191374a54edc1822fe11179708343f2", kind="repository file (log)",
      path="logs/vllm.out", patterns=VLLM, exclude=EXCL, range=(1, 60)),
 dict(id="sglang-llama32-3b-hicache-f020-48gb", runtime="sglang, version: not printed (built from source, Feb 2026)",
      repo="udbhav-ag/SGLang_setup", commit="fdeaea3e617f3107064dfc6161a63b1abd14bbd8", kind="repository file (log)",
      path="sglang.log", patterns=SGL + [r"Using KV cache dtype", r"HiCache", r"hierarchical", r"Host memory"],
      exclude=EXCL + [r"Prefill batch", r"Decode batch", r"Prefetch", r"Revoking"]),
 dict(id="sglang-qwen25-3b-80gb-f0836-nograph", runtime="sglang, version: not printed (pip install in a conda env; log dated 2026-03-25)",
      repo="cli991/qwctest", commit="5d3eef6821c39fdb1d5b78057ed0e746d3b6e2de", kind="repository file (log)",
      path="sglang.txt", patterns=SGL + [r"Using KV cache dtype", r"Attention backend not specified"], exclude=EXCL, range=(1, 40)),
 dict(id="trtllm-gptoss120b-dgxspark-pytorch-v110rc3", runtime="trtllm (TensorRT-LLM, PyTorch backend, trtllm-serve), version: 1.1.0rc3",
      repo="jeansblog/trt_llm", commit="661401c2fc5d754162fa457e0e05d0ebe22e3788", kind="repository file (README with a pasted run)",
      path="README.md", patterns=TRT + [r"Starting trtllm-serve for model", r"max_seq_len is not specified",
                                        r"Attention window size .* exceeds", r"Adjusted max_seq_len", r"PyTorchConfig\("]),
 dict(id="trtllm-tinyllama-11b-48gb-pytorch-v110", runtime="trtllm (TensorRT-LLM, PyTorch backend, trtllm-serve), version: 1.1.0",
      repo="SRO-SA/trtllm-qwen-benchmark", commit="a18f4fd", kind="repository file (log, server output)",
      path="server.log", patterns=TRT + [r"Serving model:", r"Max KV cache blocks per sequence", r"max_seq_len is not specified",
                                         r"KV cache quantization set to", r"LLM Args:", r"^model='"], range=(1, 150)),
 dict(id="trtllm-llama31-70b-fp8-kvfp8-tp8-h100-v0160", runtime="trtllm (TensorRT-LLM C++ runtime, trtllm-bench throughput), version: 0.16.0",
      repo="shaamil101-etched/trtllm-benchmarks", commit="fd58c28aa866542c2ea5a95dd636124e2abf11ce", kind="repository file (benchmark output)",
      path="results/result_1024_1024_3000.txt",
      patterns=TRT + [r"Memory usage when calculating max tokens", r"Number of blocks in KV cache primary pool", r"GPU memory for runtime buffers",
                      r"GPU memory for decoder", r"for execution context memory", r"TRTGptModel max(NumSequences|BatchSize|SequenceLen|NumTokens):",
                      r"^Model:", r"^Engine Directory:", r"^TensorRT-LLM Version:", r"^Dtype:", r"^KV Cache Dtype:", r"^Quantization:",
                      r"^Max Sequence Length:", r"^TP Size:", r"^PP Size:", r"^Max Runtime", r"^Scheduling Policy:", r"^KV Memory Percentage:"],
      range=(1, 425)),
]

if __name__ == "__main__":
    full = {}
    only = sys.argv[1:]
    for s in S:
        if only and s["id"] not in only:
            continue
        mirror = f"/work/.mirror/{s['repo'].replace('/', '+')}/repo"
        s["commit"] = subprocess.run(["git", "-C", mirror, "rev-parse", s["commit"]], capture_output=True, text=True,
                                     check=True).stdout.strip()
        idx, dst = build(s)
        print(s["id"], len(idx), "lines:", idx[:40])
        full[s["id"]] = s
    if not only:
        json.dump(full, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "specs.json"), "w"), indent=1)
