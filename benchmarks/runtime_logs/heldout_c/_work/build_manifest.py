"""Write ../manifest.json for held-out set C from specs.json and the facts below (one entry per case).

`logged` holds figures exactly as the log prints them, taken here with plain regular expressions over the
verbatim lines (not with course_lib's reader); the check at the end confirms every number appears in its
log file. Nothing is computed from a prediction, nothing fitted: `checks` is null everywhere.
"""
import json, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
SPECS = json.load(open(os.path.join(HERE, "specs.json")))
B = {c["id"]: c for c in json.load(open(os.path.join(HERE, "..", "..", "heldout", "manifest.json")))}
QWEN25_3B = B["vllm-qwen25-3b-bnb-h100-v0-art"]["model"]

UNSLOTH_NOTE = ("Launched by Unsloth (fast_inference=True) inside a training script: Unsloth picks gpu_memory_utilization, "
                "max_num_seqs ('Num Sequences') and max_num_batched_tokens ('Chunked prefill tokens') and enables LoRA; "
                "its 'KV Cache can use up to' line is Unsloth's own estimate, not vLLM's. The printed utilization is "
                "rounded to 2 decimals; Unsloth prints the exact percentage.")
RL_NOTE = ("johnson7788/RLDecisionAgent: OpenPipe ART training runs pasted into the repository's notes; "
           "the six RLDecisionAgent cases are one person's machines (RTX 4090 D x1-3, a 48 GB RTX 4090, an RTX 3090).")

def model(hf_id, kind, preset=None, config=None, source=None, note=None):
    return {"hf_id": hf_id, "kind": kind, "preset": preset, "config": config, "config_name": None,
            "config_source": source or ("preset in course_lib (published config)" if preset else "no config"),
            "note": note}

def gpu(name, preset, total_logged, note):
    return {"name": name, "preset": preset, "total_gib_logged": total_logged, "total_note": note}

F = {  # facts per case: engine, version, model, gpu, launch knobs (as the log or its source states them), notes
 "vllm-qwen25-05b-bnb-rtx4090d-u022-v0-unsloth": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.8.5.post1",
    model=model("unsloth/qwen2.5-0.5b-instruct-unsloth-bnb-4bit", "dense-gqa-bnb4"),
    gpu=gpu("RTX 4090 D 24GB", "rtx-4090", 23.55, "logged total_gpu_memory (23.55GiB); Unsloth: 'NVIDIA GeForce RTX 4090 D. Num GPUs = 3'"),
    tp=1, dtype="bf16", quant="bitsandbytes (4-bit)", util=0.22, max_len=8192, seqs=192, batched=8192, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 22.37%'. " + RL_NOTE),
 "vllm-qwen25-05b-bnb-rtx4090-48g-v0100-unsloth": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.10.0",
    model=model("unsloth/qwen2.5-0.5b-instruct-unsloth-bnb-4bit", "dense-gqa-bnb4"),
    gpu=gpu("RTX 4090 with 48 GB (a modified board)", "rtx-4090", 47.5,
            "logged total_gpu_memory (47.50GiB); Unsloth: 'NVIDIA GeForce RTX 4090. Num GPUs = 1. Max memory: 47.499 GB' (a 48 GB board, not a stock 4090; the card kind is taken from the name, the total from the log)"),
    tp=1, dtype="bf16", quant="bitsandbytes (4-bit)", util=0.78, max_len=32768, seqs=320, batched=32768, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 78.28%'. " + RL_NOTE),
 "vllm-qwen25-05b-bnb-rtx4090d-u017-v0-unsloth": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.8.5.post1",
    model=model("unsloth/qwen2.5-0.5b-instruct-unsloth-bnb-4bit", "dense-gqa-bnb4"),
    gpu=gpu("RTX 4090 D 24GB", "rtx-4090", 23.55, "logged total_gpu_memory (23.55GiB); Unsloth: 'NVIDIA GeForce RTX 4090 D. Num GPUs = 2'"),
    tp=1, dtype="bf16", quant="bitsandbytes (4-bit)", util=0.17, max_len=32768, seqs=160, batched=32768, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 17.34%'. " + RL_NOTE),
 "vllm-qwen3-4b-2507-bnb-rtx4090d-v0-unsloth": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.8.5.post1",
    model=model("unsloth/qwen3-4b-instruct-2507-unsloth-bnb-4bit", "dense-gqa-bnb4", preset="qwen3-4b",
                source="preset qwen3-4b (Qwen/Qwen3-4B's published config)",
                note="ASSUMED: Qwen3-4B-Instruct-2507 has Qwen3-4B's shapes (36 layers, hidden 2560, 32 q / 8 kv heads, head_dim 128, ffn 9728, vocab 151936, tied embeddings); the 2507 release changed rope_theta and max_position_embeddings. Its own config.json was not fetched in this session."),
    gpu=gpu("RTX 4090 D 24GB", "rtx-4090", 23.55, "logged total_gpu_memory (23.55GiB); Unsloth: 'NVIDIA GeForce RTX 4090 D. Num GPUs = 1'"),
    tp=1, dtype="bf16", quant="bitsandbytes (4-bit)", util=0.78, max_len=32768, seqs=256, batched=32768, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 77.63%'. " + RL_NOTE),
 "vllm-qwen25-05b-bnb-rtx4090d-u078-v0-unsloth": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.8.5.post1",
    model=model("unsloth/qwen2.5-0.5b-instruct-unsloth-bnb-4bit", "dense-gqa-bnb4"),
    gpu=gpu("RTX 4090 D 24GB", "rtx-4090", 23.55, "logged total_gpu_memory (23.55GiB); Unsloth: 'NVIDIA GeForce RTX 4090 D. Num GPUs = 1'"),
    tp=1, dtype="bf16", quant="bitsandbytes (4-bit)", util=0.78, max_len=32768, seqs=288, batched=32768, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 77.65%'. " + RL_NOTE),
 "vllm-qwen25-05b-bnb-rtx3090-v0100-unsloth": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.10.0",
    model=model("unsloth/qwen2.5-0.5b-instruct-unsloth-bnb-4bit", "dense-gqa-bnb4"),
    gpu=gpu("RTX 3090 24GB", "rtx-3090", 23.68, "logged total_gpu_memory (23.68GiB); Unsloth: 'NVIDIA GeForce RTX 3090. Num GPUs = 1'"),
    tp=1, dtype="bf16", quant="bitsandbytes (4-bit)", util=0.78, max_len=32768, seqs=288, batched=32768, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 77.99%'. " + RL_NOTE),
 "vllm-qwen2-7b-a100-80-u05-v01011": dict(engine="V1", version="0.10.1.1",
    model=model("Qwen/Qwen2-7B-Instruct", "dense-gqa", note="local path 'Qwen2-7B-Instruct'; hub id from the repository README's git clone URL"),
    gpu=gpu("A100 80GB", "a100-80gb", None, "not logged; from the log file name '1gpuA10080GB' and the README ('Test 5: 1 GPU pod hosts 7B model')"),
    tp=1, dtype="bf16", quant=None, util=0.5, max_len=16384, seqs=None, batched=2048, eager=False,
    notes="The 0.5-utilization twin of the reference set's vllm-qwen2-7b-a100-80-u025 (same box, same model, same flags but the utilization): correlated with a case the model was fitted on."),
 "vllm-qwen2-7b-tp2-a100-80-u05-samenode-v01011": dict(engine="V1", version="0.10.1.1",
    model=model("Qwen/Qwen2-7B-Instruct", "dense-gqa", note="local path 'Qwen2-7B-Instruct'; hub id from the repository README's git clone URL"),
    gpu=gpu("A100 80GB (x2, same node)", "a100-80gb", None, "not logged; from the log file name '2gpuA10080GB' and the README ('Test 3: 2 GPU pods host 7B model in the same node')"),
    tp=2, dtype="bf16", quant=None, util=0.5, max_len=16384, seqs=None, batched=2048, eager=False,
    notes="The 0.5-utilization twin of held-out B's vllm-qwen2-7b-tp2-a100-80-u025-samenode (B's README: 'the 0.50 same-node twin was not used'): correlated with B."),
 "vllm-qwen35-27b-tp4-rtx3090-u092-seq1-v0190": dict(engine="V1", version="0.19.0",
    model=model("Qwen/Qwen3.5-27B", "hybrid-linear-attention", note="local path /workspace/lambo/models/Qwen3.5-27B"),
    gpu=gpu("RTX 3090 24GB (x4)", None, None, "not logged; the repository README: 'GPUs: 4 x NVIDIA RTX 3090 (24 GB), TP=4, enforce_eager' for the Qwen 3.5 27B runs"),
    tp=4, dtype="bf16", quant=None, util=0.92, max_len=50000, seqs=1, batched=None, eager=True,
    notes="Same box and model as held-out B's vllm-qwen35-27b-tp4-rtx3090-v0190 (other launch: utilization 0.92, max_model_len 50000, max_num_seqs 1)."),
 "vllm-qwen35-27b-tp4-rtx3090-u092-v0190": dict(engine="V1", version="0.19.0",
    model=model("Qwen/Qwen3.5-27B", "hybrid-linear-attention", note="local path /workspace/lambo/models/Qwen3.5-27B"),
    gpu=gpu("RTX 3090 24GB (x4)", None, None, "not logged; the repository README: 'GPUs: 4 x NVIDIA RTX 3090 (24 GB), TP=4, enforce_eager' for the Qwen 3.5 27B runs"),
    tp=4, dtype="bf16", quant=None, util=0.92, max_len=32768, seqs=None, batched=None, eager=True,
    notes="Same box and model as held-out B's vllm-qwen35-27b-tp4-rtx3090-v0190 (other launch: utilization 0.92 instead of the default). logs/vllm_serve_v5.log at the same commit is the same launch with the same figures and was not used."),
 "vllm-qwen3-30b-a3b-tp2-h100-v0120": dict(engine="V1", version="0.12.0",
    model=model("Qwen/Qwen3-30B-A3B", "moe", note="local path .../HF/models/Qwen/Qwen3-30B-A3B/"),
    gpu=gpu("H100 80GB HBM3 (x2)", "h100-80gb", None, "not logged as a total; the fused-MoE config lookup names 'device_name=NVIDIA_H100_80GB_HBM3'"),
    tp=2, dtype="bf16", quant=None, util=None, max_len=40960, seqs=64, batched=8192, eager=False,
    notes="utilization not set (V1 0.12 default 0.9). 'Graph capturing finished in 5 secs, took -0.26 GiB' as printed."),
 "vllm-qwen25-05b-bnb-h100-v0-art": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.8.5.post1",
    model=model("unsloth/qwen2.5-0.5b-instruct-unsloth-bnb-4bit", "dense-gqa-bnb4"),
    gpu=gpu("H100 80GB HBM3", "h100-80gb", 79.2, "logged total_gpu_memory (79.20GiB); Unsloth: 'NVIDIA H100 80GB HBM3. Num GPUs = 1'"),
    tp=1, dtype="bf16", quant="bitsandbytes (4-bit)", util=0.78, max_len=32768, seqs=368, batched=32768, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 78.4%'. OpenPipe ART dev notebook (the one held-out B skipped 'to limit Unsloth-launched cases'); same repository and commit as B's vllm-qwen25-3b-bnb-h100-v0-art."),
 "vllm-qwen3-06b-bnb-h100-v0-art": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.8.5.post1",
    model=model("unsloth/qwen3-0.6b-bnb-4bit", "dense-gqa-bnb4"),
    gpu=gpu("H100 80GB HBM3", "h100-80gb", 79.2, "logged total_gpu_memory (79.20GiB); Unsloth: 'NVIDIA H100 80GB HBM3. Num GPUs = 1'"),
    tp=1, dtype="bf16", quant="bitsandbytes (4-bit)", util=0.78, max_len=32768, seqs=368, batched=32768, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 78.4%'. Second launch of the same ART dev notebook."),
 "vllm-qwen36-35b-a3b-nvfp4-mtp-dgxspark-v0251": dict(engine="V1", version="0.25.1",
    model=model("RedHatAI/Qwen3.6-35B-A3B-NVFP4", "hybrid-linear-attention-moe-nvfp4", preset="qwen3.6-35b-a3b",
                source="preset qwen3.6-35b-a3b (the base model's published config); the NVFP4 checkpoint's quantization_config not shipped"),
    gpu=gpu("NVIDIA DGX Spark (GB10, 121 GB unified memory)", None, None, "not logged; the repository README (same commit): 'Memory | 121 GB unified, shared between CPU and GPU'"),
    tp=1, dtype="bf16", quant="compressed-tensors (NVFP4)", util=0.85, max_len=262144, seqs=32, batched=None, eager=False,
    notes="MTP speculative decoding (3 tokens, draft in the same process). Unified memory: free memory at start depends on the host. Same repository as held-out B's two DGX Spark cases (other model)."),
 "sglang-llama31-8b-24gb-readme": dict(engine="SGLang", version="not printed (docker lmsysorg/sglang:latest; log dated 2025-07-14)",
    model=model("meta-llama/Llama-3.1-8B-Instruct", "dense-gqa", preset="llama-3.1-8b",
                note="the model is not printed in the quoted lines: LlamaForCausalLM, 15.02 GB of bf16 weights; the README says 'the model itself (~16 GB for Llama 3.1 8B Instruct)' and start_server.sh (same commit) serves models--meta-llama--Llama-3.1-8B-Instruct"),
    gpu=gpu("not stated (a 24 GB-class card: 7.37 + 15.02 GB free before the weights)", None, None,
            "not logged and not named; the README runs it through Docker Desktop on Windows"),
    tp=1, dtype="bf16", quant=None, util=None, max_len=131072, seqs=None, batched=None, eager=False,
    notes="A README's 'logs similar to' block: start_server.sh at the same commit says --context-length 8192 --attention-backend fa3, but the log prints context_len=131072, so it is another launch whose flags are not known (mem_fraction_static not printed). cuda graph bs [1, 2, 4, 8]."),
 "vllm-llama32-3b-t4-u059-v0-unsloth": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.8.5.post1",
    model=model("unsloth/Llama-3.2-3B-Instruct", "dense-gqa"),
    gpu=gpu("Tesla T4 (Colab)", "t4", 14.74, "logged total_gpu_memory (14.74GiB); Unsloth: 'Tesla T4. Num GPUs = 1'"),
    tp=1, dtype="fp16", quant=None, util=0.59, max_len=2048, seqs=160, batched=2048, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 59.43%'. unslothai/notebooks: the development set used six other notebooks of this commit, held-out B three."),
 "vllm-qwen25-3b-bnb-t4-u050-v071-unsloth": dict(engine="V0 (launched by Unsloth, LoRA enabled)", version="0.7.1",
    model=dict(QWEN25_3B, hf_id="unsloth/qwen2.5-3b-instruct-unsloth-bnb-4bit",
               config_source="copied from held-out B's manifest (vllm-qwen25-3b-bnb-h100-v0-art): " + QWEN25_3B["config_source"]),
    gpu=gpu("Tesla T4 (Colab)", "t4", 14.74, "logged total_gpu_memory (14.74GiB); Unsloth: 'GPU: Tesla T4. Max memory: 14.741 GB'"),
    tp=1, dtype="fp16", quant="bitsandbytes (4-bit)", util=0.5, max_len=1024, seqs=192, batched=1024, eager=False,
    notes=UNSLOTH_NOTE + " Unsloth: 'actual GPU utilization = 49.66%'. Same model as held-out B's ART H100 case (other GPU, other release)."),
}

NUM = r"([-0-9.,]+)"
PATTERNS = {  # logged key -> regex over the log text (first match; None when absent)
    "weights_gib": [r"model weights take ([0-9.]+)GiB", r"Model loading took ([0-9.]+) GiB", r"Load weight end\..*?mem usage=([0-9.]+) GB"],
    "non_torch_gib": [r"non_torch_memory takes ([0-9.]+)GiB"],
    "activation_gib": [r"activation peak memory takes ([0-9.]+)GiB"],
    "cuda_graph_gib": [r"Graph capturing finished in \d+ secs, took ([-0-9.]+) GiB", r"Capture cuda graph end\..*?mem usage=([0-9.]+) GB"],
    "kv_gib": [r"reserved for KV Cache is ([-0-9.]+)GiB", r"Available KV cache memory: ([-0-9.]+) GiB"],
    "kv_tokens": [r"GPU KV cache size: ([0-9,]+) tokens", r"KV Cache is allocated\. #tokens: (\d+)"],
    "blocks": [r"# (?:cuda|CUDA|GPU) blocks: (\d+)"],
    "max_concurrency": [r"Maximum concurrency for [0-9,]+ tokens per request: ([0-9.]+)x"],
    "budget_gib": [r"gpu_memory_utilization \([0-9.]+\) = ([0-9.]+)GiB"],
}

def logged_of(text):
    out = {}
    for key, pats in PATTERNS.items():
        out[key] = None
        for p in pats:
            m = re.search(p, text)
            if m:
                v = m.group(1).replace(",", "")
                out[key] = int(v) if key in ("kv_tokens", "blocks") else float(v)
                break
    if out["kv_gib"] is None and "K size:" in text:           # SGLang prints K and V in GB (= GiB)
        k = re.search(r"K size: ([0-9.]+) GB, V size: ([0-9.]+) GB", text)
        out["k_size_gb"], out["v_size_gb"] = float(k.group(1)), float(k.group(2))   # compared in tokens, as B's SGLang cases
    return out

def main():
    cases = []
    for cid, spec in SPECS.items():
        f = F[cid]
        text = open(os.path.join(HERE, "..", "logs", f"{cid}.txt"), encoding="utf-8").read()
        body = text.split("# ---- verbatim ----\n", 1)[1]
        runtime = "sglang" if cid.startswith("sglang") else "vllm"
        url = f"https://github.com/{spec['repo']}/blob/{spec['commit']}/" + spec["path"].replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        case = {
            "id": cid, "runtime": runtime, "engine": f["engine"], "version": f["version"],
            "source": {"kind": spec["kind"], "repository": spec["repo"], "commit": spec["commit"], "path": spec["path"], "url": url},
            "log_file": f"logs/{cid}.txt", "model": f["model"], "gpu": f["gpu"],
            "tensor_parallel_size": f["tp"], "pipeline_parallel_size": 1, "dtype": f["dtype"], "quantization": f["quant"],
            "kv_cache_dtype": "auto", "gpu_memory_utilization": f["util"], "mem_fraction_static": None,
            "kv_cache_free_gpu_mem_fraction": None, "max_model_len": f["max_len"],
            "max_model_len_source": "logged (engine config max_seq_len, 'Using max model len' or SGLang context_len)",
            "max_num_seqs": {"value": f["seqs"], "source": "logged" if f["seqs"] else "not set (runtime default)"},
            "max_num_batched_tokens": {"value": f["batched"], "source": "logged" if f["batched"] else "not printed (runtime default)"},
            "enforce_eager": f["eager"], "cuda_graphs": not f["eager"], "notes": f["notes"],
            "logged": logged_of(body), "checks": None,
        }
        cases.append(case)
        for key, v in case["logged"].items():        # every logged number appears in the quoted lines
            if isinstance(v, (int, float)):
                s = f"{v:,}" if key == "kv_tokens" and "," in body and f"{v:,}" in body else str(v)
                assert any(c in body for c in (s, f"{v:.2f}", f"{v:.1f}", f"{v:.4f}", str(v).rstrip("0"))), (cid, key, v)
    json.dump(cases, open(os.path.join(HERE, "..", "manifest.json"), "w"), indent=1, ensure_ascii=False)
    print(len(cases), "cases")

if __name__ == "__main__":
    main()
