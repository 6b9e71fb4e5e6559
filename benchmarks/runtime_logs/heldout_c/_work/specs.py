"""Held-out set C: which repository files, which commit, which lines (patterns from held-out B's mk.py).

    python3 specs.py        # writes ../logs/<id>.txt byte-exactly from the fetched mirrors
"""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mk import VLLM, SGL, build

UNS = [r"Unsloth [0-9.]+: Fast", r"Max memory:", r"Unsloth: vLLM loading", r"Num Sequences", r"KV Cache can use",
       r"Initializing a V0 LLM engine", r"Model loading took", r"Memory profiling takes", r"total_gpu_memory",
       r"model weights take", r"# (cuda|CUDA|GPU) blocks", r"Maximum concurrency", r"Graph capturing finished"]
EXCL = [r"Avg prompt throughput", r"Route: ", r"GPU KV cache usage"]
RL, RLC = "johnson7788/RLDecisionAgent", "ef60ea920fa09c11ec20f8640099f975f7fb9215"
DL, DLC = "dennislee22/vLLM-benchmarking", "b474d1e053c35c9aef8c02aae4efbc0d8675f033"
WRAPPED = r"^(?!\(|INFO|WARNING|DEBUG|ERROR|\s*$)"   # these logs are hard-wrapped: a line not starting a record continues the one above
LB, LBC = "leadawon/LAMBO", "bab83fe"
ZZ, ZZC = "Zzsf11/VideoCuttingAgent", "4b5f0c3"
AR, ARC = "OpenPipe/ART", "779559f"
SP, SPC = "sostrowsk/dgx-spark-local-llm", "4b54864"
MU, MUC = "MaxUhl98/Thesis", "a64232fb86001bfe08b23d955672097f914b551e"

UN, UNC = "unslothai/notebooks", "bdda2efc7ad5ae129ea63cd2065d23c391406283"
UNS_NB = UNS + [r"GPU: Tesla T4", r"Loading model weights took"]

S = [
 dict(id="vllm-qwen25-05b-bnb-rtx4090d-u022-v0-unsloth", runtime="vllm (V0, started by Unsloth), version: 0.8.5.post1",
      repo=RL, commit=RLC, kind="repository file (markdown with a pasted run)", path="backend/ART_2048/train.md", patterns=UNS, exclude=EXCL),
 dict(id="vllm-qwen25-05b-bnb-rtx4090-48g-v0100-unsloth", runtime="vllm (V0, started by Unsloth), version: 0.10.0",
      repo=RL, commit=RLC, kind="repository file (markdown with a pasted run)", path="backend/ART_mcp-rl/example_mcp_rl.md",
      patterns=UNS, exclude=EXCL, range=(150, 300)),
 dict(id="vllm-qwen25-05b-bnb-rtx4090d-u017-v0-unsloth", runtime="vllm (V0, started by Unsloth), version: 0.8.5.post1",
      repo=RL, commit=RLC, kind="repository file (markdown with a pasted run)", path="backend/ART_mcp-rl/example_mcp_rl.md",
      patterns=UNS, exclude=EXCL, range=(300, 400)),
 dict(id="vllm-qwen3-4b-2507-bnb-rtx4090d-v0-unsloth", runtime="vllm (V0, started by Unsloth), version: 0.8.5.post1",
      repo=RL, commit=RLC, kind="repository file (log)", path="backend/MCP_Agents/logs/model_test.log", patterns=UNS, exclude=EXCL),
 dict(id="vllm-qwen25-05b-bnb-rtx4090d-u078-v0-unsloth", runtime="vllm (V0, started by Unsloth), version: 0.8.5.post1",
      repo=RL, commit=RLC, kind="repository file (markdown with a pasted run)", path="docs/ART/Error.md",
      patterns=UNS, exclude=EXCL, range=(990, 1040)),
 dict(id="vllm-qwen25-05b-bnb-rtx3090-v0100-unsloth", runtime="vllm (V0, started by Unsloth), version: 0.10.0",
      repo=RL, commit=RLC, kind="repository file (markdown with a pasted run)", path="docs/ART/ZHIXINGYUN.md", patterns=UNS, exclude=EXCL),
 dict(id="vllm-qwen2-7b-a100-80-u05-v01011", runtime="vllm (V1), version: 0.10.1.1",
      repo=DL, commit=DLC, kind="repository file (log)", path="log/vllm-7B-1gpuA10080GB-0.5GRAM.log", patterns=VLLM, exclude=EXCL, continuation=WRAPPED),
 dict(id="vllm-qwen2-7b-tp2-a100-80-u05-samenode-v01011", runtime="vllm (V1), version: 0.10.1.1",
      repo=DL, commit=DLC, kind="repository file (log)", path="log/vllm-7B-2gpuA10080GB-0.5GRAM-same-node.log", patterns=VLLM, exclude=EXCL, continuation=WRAPPED),
 dict(id="vllm-qwen35-27b-tp4-rtx3090-u092-seq1-v0190", runtime="vllm (V1), version: 0.19.0",
      repo=LB, commit=LBC, kind="repository file (log)", path="logs/vllm_serve_toc.log", patterns=VLLM, exclude=EXCL),
 dict(id="vllm-qwen35-27b-tp4-rtx3090-u092-v0190", runtime="vllm (V1), version: 0.19.0",
      repo=LB, commit=LBC, kind="repository file (log)", path="logs/vllm_serve_v4.log", patterns=VLLM, exclude=EXCL),
 dict(id="vllm-qwen3-30b-a3b-tp2-h100-v0120", runtime="vllm (V1), version: 0.12.0",
      repo=ZZ, commit=ZZC, kind="repository file (log, server output)", path="output/Qwen3_8891_vllm-server.out",
      patterns=VLLM + [r"device_name=NVIDIA"], exclude=EXCL),
 dict(id="vllm-qwen25-05b-bnb-h100-v0-art", runtime="vllm (V0, started by Unsloth), version: 0.8.5.post1",
      repo=AR, commit=ARC, kind="repository file (notebook output)", path="dev/new_models/qwen3_try.ipynb",
      patterns=UNS, exclude=EXCL, range=(100, 250)),
 dict(id="vllm-qwen3-06b-bnb-h100-v0-art", runtime="vllm (V0, started by Unsloth), version: 0.8.5.post1",
      repo=AR, commit=ARC, kind="repository file (notebook output)", path="dev/new_models/qwen3_try.ipynb",
      patterns=UNS, exclude=EXCL, range=(250, 400)),
 dict(id="vllm-qwen36-35b-a3b-nvfp4-mtp-dgxspark-v0251", runtime="vllm (V1), version: 0.25.1",
      repo=SP, commit=SPC, kind="repository file (log)", path="qwen36.log",
      patterns=VLLM + [r"Free memory after profiling", r"Memory profiling takes"], exclude=EXCL),
 dict(id="sglang-llama31-8b-24gb-readme", runtime="sglang, version: not printed (docker lmsysorg/sglang:latest, July 2025)",
      repo=MU, commit=MUC, kind="repository file (README with a pasted log)", path="inference_server/readme.md", patterns=SGL),
 dict(id="vllm-llama32-3b-t4-u059-v0-unsloth", runtime="vllm (V0, started by Unsloth), version: 0.8.5.post1",
      repo=UN, commit=UNC, kind="repository file (notebook output)", path="original_template/Advanced_Llama3_2_(3B)_GRPO_LoRA.ipynb",
      patterns=UNS_NB, exclude=EXCL),
 dict(id="vllm-qwen25-3b-bnb-t4-u050-v071-unsloth", runtime="vllm (V0, started by Unsloth), version: 0.7.1",
      repo=UN, commit=UNC, kind="repository file (notebook output)", path="original_template/Qwen2.5_(3B)-GRPO.ipynb",
      patterns=UNS_NB, exclude=EXCL),
]

if __name__ == "__main__":
    full = {}
    for s in S:
        mirror = f"/work/.mirror/{s['repo'].replace('/', '+')}/repo"
        import subprocess
        s["commit"] = subprocess.run(["git", "-C", mirror, "rev-parse", s["commit"]], capture_output=True, text=True,
                                     check=True).stdout.strip()
        idx, dst = build(s)
        print(s["id"], len(idx), "lines:", idx[:40])
        full[s["id"]] = s
    json.dump(full, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "specs.json"), "w"), indent=1)
