"""Write ../manifest.json for held-out set D from specs.json and the facts below (one entry per case).

Adapted from held-out C's build_manifest.py: same entry keys; `logged` keeps C's keys, plus, for the TensorRT-LLM
case, the extra figures held-out B recorded for its PyTorch-backend case (estimation pass, peak, per-part memory)
and, for SGLang, the K/V sizes and the free-memory readings around the pool.

`logged` holds figures exactly as the log prints them, taken here with plain regular expressions over the
verbatim lines (not with course_lib's reader); the check at the end confirms every number appears in its
log file. Nothing is computed from a prediction, nothing fitted: `checks` is null everywhere.
"""
import json, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
SPECS = json.load(open(os.path.join(HERE, "specs.json")))
REF = {c["id"]: c for c in json.load(open("/work/shared/reference/runtime-logs/manifest.json"))}
Q235 = REF["vllm-qwen3-235b-fp8-tp4-h100"]["model"]
B = {c["id"]: c for c in json.load(open(os.path.join(HERE, "..", "..", "heldout", "manifest.json")))}
QWEN25_3B = B["vllm-qwen25-3b-bnb-h100-v0-art"]["model"]
TINYLLAMA = {  # swayam8624/nanoquant-private TinyLlama-1.1B-Chat-v1.0/config.json @ 0619c487 (read with read_file), verbatim
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1,
    "dtype": "float32", "eos_token_id": 2, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 5632, "max_position_embeddings": 2048, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "transformers_version": "4.56.0", "use_cache": True, "vocab_size": 32000}


def model(hf_id, kind, preset=None, config=None, source=None, note=None, config_name=None):
    return {"hf_id": hf_id, "kind": kind, "preset": preset, "config": config, "config_name": config_name,
            "config_source": source or ("preset in course_lib (published config)" if preset else "no config"),
            "note": note}


def gpu(name, preset, total_logged, note):
    return {"name": name, "preset": preset, "total_gib_logged": total_logged, "total_note": note}


DAISUKE = ("DaisukeTakai/eval_dataset: two launches on one 8 x H100 node of a competition cluster "
           "(/home/Competition2025/P12), committed as vllm_judge.log and vllm_predict.log; other launches of the same "
           "files at earlier commits give the same figures to within a few tokens and were not used.")

F = {  # facts per case: engine, version, model, gpu, launch knobs (as the log or its source states them), notes
 "vllm-phi3-mini-rtx3090-wsl-u085-v0191": dict(engine="V1", version="0.19.1",
    model=model("microsoft/Phi-3-mini-4k-instruct", "dense-mha", preset="phi-3-mini"),
    gpu=gpu("RTX 3090 24GB (WSL2)", "rtx-3090", None,
            "not logged; the repository's notes at the same commit: '.claude/memory/sessions/2026-04-28.md: NVIDIA RTX 3090, 24 GB VRAM, Driver 596.21, CUDA 13.2' (the log is dated 04-28) and 'GPU: RTX 3090, 24 GB VRAM'; runs under WSL2"),
    tp=1, dtype="fp16", quant=None, util=0.85, max_len=4096, seqs=None, batched=None, eager=False,
    notes="dtype float16 forced ('Casting torch.bfloat16 to torch.float16'). vLLM 0.19 estimates CUDA-graph memory before the KV budget ('Estimated CUDA graph memory: 0.51 GiB total'). max_num_batched_tokens not printed. WSL2: the driver reserves part of the card for the Windows host."),
 "vllm-qwen25-coder-14b-l40s-v0112": dict(engine="V1", version="0.11.2",
    model=model("Qwen/Qwen2.5-Coder-14B-Instruct", "dense-gqa", preset="qwen2.5-14b",
                source="preset qwen2.5-14b, ASSUMING Qwen2.5-Coder-14B-Instruct has Qwen2.5-14B's shapes (its own config.json was not fetched)"),
    gpu=gpu("L40S 48GB", "l40s", None,
            "not logged; the repository README (same commit): 'running locally via vLLM on a single NVIDIA L40S GPU (46GB VRAM)'; evolve_controller.ipynb prints 'GPU: NVIDIA L40S, 46068 MiB'; CLAUDE.md: 'other GPUs on node may be occupied by other users'"),
    tp=1, dtype="bf16", quant=None, util=None, max_len=16384, seqs=None, batched=2048, eager=False,
    notes="utilization not set (V1 0.11 default 0.9). The l40s preset's CUDA total is an estimate (nvidia-smi minus 0.46 GiB). The first quoted line (a scheduler line without a process prefix) stands at the top of the file as committed."),
 "vllm-qwen3-30b-a3b-2507-fp8-h100-v0221": dict(engine="V1", version="0.22.1",
    model=model("Qwen/Qwen3-30B-A3B-Instruct-2507", "moe", preset="qwen3-30b-a3b",
                source="preset qwen3-30b-a3b, ASSUMING the 2507 release kept Qwen3-30B-A3B's shapes (its own config.json was not fetched)"),
    gpu=gpu("H100 80GB HBM3", "h100-80gb", None, "not logged as a total; the fused-MoE config lookup names 'device_name=NVIDIA_H100_80GB_HBM3'"),
    tp=1, dtype="bf16", quant="fp8 (online, --quantization fp8 on the bf16 checkpoint)", util=0.92, max_len=8192, seqs=64, batched=8192, eager=False,
    notes="gpu_memory_utilization is not among the non-default args; the log prints 'The current --gpu-memory-utilization=0.9200' (the release's default as launched, docker). CUDA graph memory profiling on (default since 0.21). enable_prefix_caching set. Docker launch (pid 1)."),
 "vllm-qwen3-235b-a22b-fp8-tp8-ep-kvfp8-h100-v0100": dict(engine="V1", version="0.10.0",
    model=model("Qwen/Qwen3-235B-A22B-FP8", "moe-fp8-gqa", config=Q235["config"], config_name=Q235.get("config_name"),
                source="copied from /work/shared/reference/runtime-logs/manifest.json (reference case vllm-qwen3-235b-fp8-tp4-h100)",
                note="local path /home/Competition2025/P12/shareP12/models/Qwen3-235B-A22B-FP8"),
    gpu=gpu("H100 80GB HBM3 (x8)", "h100-80gb", None, "not logged as a total; the fused-MoE config lookup names 'device_name=NVIDIA_H100_80GB_HBM3' on every rank"),
    tp=8, dtype="bf16", quant="fp8 (checkpoint, block 128x128)", kv="fp8", util=None, max_len=32768, seqs=None, batched=8192, eager=False,
    notes="enable_expert_parallel=True (experts split over the 8 ranks, attention TP8); kv_cache_dtype fp8. utilization not set (default 0.9). Per-rank 'Available KV cache memory' differs (35.74 GiB rank 0, 35.65 ranks 1-6, 36.12 rank 7); 'logged' takes the first line, rank 0's. 'GPU KV cache size' is printed once per rank (1,594,928 first, then 1,590,736). " + DAISUKE),
 "vllm-qwen3-32b-tp8-kvfp8-h100-v0100": dict(engine="V1", version="0.10.0",
    model=model("Qwen/Qwen3-32B", "dense-gqa", preset="qwen3-32b", note="local path /home/Competition2025/P12/shareP12/models/Qwen3-32B"),
    gpu=gpu("H100 80GB HBM3 (x8)", "h100-80gb", None,
            "not logged in this file (dense model: no fused-MoE lookup); the same node's other log (vllm_judge.log, same commit, launched 20 minutes later) names 'device_name=NVIDIA_H100_80GB_HBM3'"),
    tp=8, dtype="bf16", quant=None, kv="fp8", util=None, max_len=32768, seqs=None, batched=8192, eager=False,
    notes="kv_cache_dtype fp8; utilization not set (default 0.9). Per-rank 'Available KV cache memory': 55.71 GiB rank 0, 55.62 ranks 1-6, 56.08 rank 7; the FIRST printed line is rank 5's (55.62), which is what 'logged' takes. 'GPU KV cache size' printed per rank (3,650,960 first, then 3,644,816). " + DAISUKE),
 "vllm-qwen3-30b-a3b-2507-rtxpro6000-eager-u085-v0120": dict(engine="V1", version="0.12.0",
    model=model("Qwen/Qwen3-30B-A3B-Instruct-2507", "moe", preset="qwen3-30b-a3b",
                source="preset qwen3-30b-a3b, ASSUMING the 2507 release kept Qwen3-30B-A3B's shapes (its own config.json was not fetched)",
                note="local path /home2/ycj/Models/Qwen3-30B-A3B-Instruct-2507"),
    gpu=gpu("RTX PRO 6000 Blackwell Server Edition 96GB", None, None,
            "not logged as a total; the fused-MoE config lookup names 'device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition'. No course_lib GPU preset for this card (96 GB class); its CUDA total is not known here"),
    tp=1, dtype="bf16", quant=None, util=0.85, max_len=4096, seqs=None, batched=8192, eager=True,
    notes="enforce_eager=True: no CUDA graphs. Same model as vllm-qwen3-30b-a3b-2507-fp8-h100-v0221 (other box, bf16, other release)."),
 "vllm-gemma3-12b-qat-awq-tp2-rtx4090-v084": dict(engine="V1", version="0.8.4",
    model=model("gaunernst/gemma-3-12b-it-qat-autoawq", "multimodal-gemma3-sliding-awq", preset="gemma-3-12b",
                source="preset gemma-3-12b (the base google/gemma-3-12b-it config); the AWQ checkpoint's own config.json (quantization_config) not fetched"),
    gpu=gpu("RTX 4090 24GB (x2)", "rtx-4090", None,
            "not logged and not stated at the log's commit; the repository's later docs (2025-07-22, llm-api/PRD-ChatPLG-Unified-LLM-API.md, API_OVERVIEW.md): 'Local vLLM server with tensor parallelism across dual RTX 4090'. A start_api_5090.sh appears from 2025-08-10, after this log (2025-07-09)"),
    tp=2, dtype="bf16", quant="awq (awq_marlin kernel)", util=0.9, max_len=131072, seqs=None, batched=2048, eager=False,
    notes="vLLM V1 0.8.4 prints no 'Available KV cache memory' line, only tokens: 'GPU KV cache size' twice (69,904 then 69,920 tokens; gemma-3 has sliding-window and global layers). Gemma-3 is multimodal (vision tower on the GPU). The GPU is the weakest fact of this case."),
 "vllm-llama31-8b-a100-80-v0171": dict(engine="V1", version="0.17.1",
    model=model("meta-llama/Llama-3.1-8B-Instruct", "dense-gqa", preset="llama-3.1-8b"),
    gpu=gpu("A100 80GB", "a100-80gb", None,
            "not logged; the repository's run_all.sh (same commit): 'End-to-end pipeline (single A100)'. That it is the 80 GB A100 is INFERRED (14.99 GiB of weights plus 55.79 GiB of KV cache cannot fit a 40 GB card)"),
    tp=1, dtype="bf16", quant=None, util=None, max_len=32768, seqs=None, batched=2048, eager=False,
    notes="utilization not set (default 0.9). The card size is inferred from the logged figures (see total_note); nothing else is."),
 "vllm-qwen35-9b-a100-40-v0180": dict(engine="V1", version="0.18.0",
    model=model("Qwen/Qwen3.5-9B", "hybrid-linear-attention-multimodal",
                source="no config (Qwen3.5-9B's config.json not located in this session; configs/qwen35_config.txt in the repository is a LLaMA-Factory recipe, not the model config)"),
    gpu=gpu("A100 40GB", "a100-40gb", None,
            "not logged; the repository's CONFIG_SUMMARY.md (same commit), under the environment list: 'A100 40GB GPU'"),
    tp=1, dtype="bf16", quant=None, util=None, max_len=8192, seqs=None, batched=2048, eager=False,
    notes="Qwen3_5ForConditionalGeneration (hybrid Gated-DeltaNet/full attention, vision tower). 'Setting attention block size to 528 tokens' and 'Padding mamba page size by 0.76%' are printed. utilization not set (default 0.9). Estimated CUDA graph memory 0.65 GiB (0.18 profiles it)."),
 "vllm-qwen25-14b-awq-24gb-v0130": dict(engine="V1", version="0.13.0",
    model=model("Qwen/Qwen2.5-14B-Instruct-AWQ", "dense-gqa-awq", preset="qwen2.5-14b",
                source="preset qwen2.5-14b (the base model's published config); the AWQ checkpoint's quantization_config not shipped"),
    gpu=gpu("RTX A5000 24GB (assumed)", None, None,
            "not logged; the repository (same commit) describes a remote vLLM server on an A5000: A5000_EXECUTION_GUIDE.md, .env.example 'Remote Server with vLLM (recommended for A5000/larger models)', README 'GPU | NVIDIA RTX A5000 (24GB VRAM) 推奨' (recommended). No course_lib preset for the A5000"),
    tp=1, dtype="fp16", quant="awq (awq_marlin kernel)", util=None, max_len=8192, seqs=None, batched=2048, eager=False,
    notes="utilization not set (default 0.9). Model loading took 854 s (first download). The card is the README's recommended one, not a logged fact."),
 "vllm-gptoss20b-mxfp4-dgxspark-u025-v0130nv": dict(engine="V1", version="0.13.0+faa43dbf.nv26.01",
    model=model("huihui-ai/Huihui-gpt-oss-20b-mxfp4-abliterated-v2", "moe-mxfp4-sliding", preset="gpt-oss-20b",
                source="preset gpt-oss-20b, ASSUMING the abliterated fine-tune kept openai/gpt-oss-20b's config (its own config.json was not fetched)"),
    gpu=gpu("NVIDIA DGX Spark (GB10, 128 GB unified memory)", None, None,
            "the log prints '✅ NVIDIA GPU: NVIDIA GB10' but no CUDA total. Unified memory shared with the host. (TensorRT-LLM on another DGX Spark prints 'device total memory 119.70 GiB', trtllm-gptoss120b-dgxspark-pytorch-v110rc3 in this set; not used here)"),
    tp=1, dtype="bf16", quant="mxfp4 (checkpoint)", util=0.25, max_len=8192, seqs=None, batched=2048, eager=False,
    notes="NGC vLLM container 26.01 (vLLM 0.13.0 NVIDIA build). enable_prefix_caching set. gpt-oss alternates sliding-window (128) and full attention layers."),
 "vllm-qwen3-4b-h100-v0102": dict(engine="V1", version="0.10.2",
    model=model("Qwen/Qwen3-4B", "dense-gqa", preset="qwen3-4b"),
    gpu=gpu("H100 80GB", "h100-80gb", 79.18,
            "logged 'Free memory on device (78.57/79.18 GiB) on startup'; the card is not named in the log. 79.18 GiB is the h100-80gb preset's total (an A100 80GB reports 79.25); the repository's Slurm scripts at the same commit (metaqa/neo4j_naive.sh) use '--partition=gpu-h100-80g' with '--constraint=\"a100|h100\"', though they write logs_naive/ and logs_sharp/, not this logs/vllm.out"),
    tp=1, dtype="bf16", quant=None, util=None, max_len=40960, seqs=None, batched=8192, eager=False,
    notes="Only model and download_dir set: utilization default 0.9 (the log: 'Desired GPU memory utilization is (0.9, 71.26 GiB)'), max_model_len the model's 40960, max_num_batched_tokens 8192. vLLM 0.10.2 prints a memory breakdown after capture ('7.56 GiB for weight, 5.59 GiB for peak activation, 0.07 GiB for non-torch memory, and 0.54 GiB for CUDAGraph memory ... Current kv cache memory in use is 62326859059 bytes') and 'num_gpu_blocks is: 26417'."),
 "sglang-llama32-3b-hicache-f020-48gb": dict(engine="SGLang (hierarchical cache on, Mooncake storage backend)", version="not printed (built from source; log dated 2026-02-09)",
    model=model("meta-llama/Llama-3.2-3B", "dense-gqa", preset="llama-3.2-3b",
                source="preset llama-3.2-3b (the published Llama-3.2-3B shapes; the preset is the same architecture for base and instruct)"),
    gpu=gpu("not stated (a 48 GB-class card: 'Load weight begin. avail mem=44.11 GB')", None, None,
            "not logged and not named in the repository at this commit"),
    tp=1, dtype="bf16", quant=None, util=None, mfs=0.2, max_len=35000, seqs=2048, batched=None, eager=False,
    batched_src="chunked prefill off (server_args chunked_prefill_size=-1; max_prefill_tokens=16384)",
    notes="mem_fraction_static=0.2 set on purpose ('to force the cache out of the GPU memory', README); enable_hierarchical_cache=True, hicache_ratio=4.0, hicache_storage_backend='mooncake', page_size=1, chunked_prefill_size=-1 (off), cuda_graph_max_bs=32, attention_backend flashinfer. The host tier is allocated after the GPU pool ('Allocating 11.55 GB host memory for hierarchical KV cache'); the GPU pool is the figure. max_running_requests printed 2048 (None in server_args)."),
 "sglang-qwen25-3b-80gb-f0836-nograph": dict(engine="SGLang", version="not printed (pip install in a conda env; log dated 2026-03-25)",
    model=model("Qwen/Qwen2.5-3B-Instruct", "dense-gqa", config=QWEN25_3B["config"],
                source="copied from held-out B's manifest (vllm-qwen25-3b-bnb-h100-v0-art; B's note: both copies are Python dicts, not the JSON file): " + QWEN25_3B["config_source"],
                note="local path /share/home/cli/code/models/Qwen2.5-3B-Instruct"),
    gpu=gpu("not stated (an 80 GB-class card: 'Load weight begin. avail mem=78.64 GB')", None, None,
            "not logged and not named in the repository at this commit (A100 80GB and H100 80GB both fit; their CUDA totals differ by about 0.07 GiB)"),
    tp=1, dtype="bf16", quant=None, util=None, mfs=0.836, max_len=32768, seqs=4096, batched=8192, eager=True,
    max_len_src="logged (max_total_num_tokens line context_len=32768; server_args context_length=None)",
    batched_src="logged (chunked_prefill_size=8192)",
    notes="mem_fraction_static=0.836 is SGLang's own choice for this card (not set by the user; printed in server_args). disable_cuda_graph=True, so no capture lines; chunked_prefill_size=8192, page_size=1, flashinfer, radix cache on. context_length=None: the model's 32768. The committed log continues with request traffic and ends in a grammar-backend traceback; only the start-up lines are quoted."),
 "trtllm-gptoss120b-dgxspark-pytorch-v110rc3": dict(engine="TensorRT-LLM (PyTorch backend, trtllm-serve)", version="1.1.0rc3",
    model=model("openai/gpt-oss-120b", "moe-mxfp4-sliding", preset="gpt-oss-120b"),
    gpu=gpu("NVIDIA DGX Spark (GB10, 128 GB unified memory)", None, 119.7,
            "logged 'device total memory 119.70 GiB' (and 'Use 63.32 GB for model weights'); the README says 'on the DGX Spark'; container nvcr.io/nvidia/tensorrt-llm/release:spark-single-gpu-dev (Dockerfile, same commit). Unified memory"),
    tp=1, dtype="auto (bf16)", quant="mxfp4 (checkpoint)", util=None, fraction=0.9, max_len=None, seqs=64, batched=8192, eager=None,
    max_len_src="not set: 'max_seq_len is not specified, using inferred value 131072', then cut to the KV capacity (8224 in the estimation pass, 86720 final)",
    batched_src="logged (max_num_tokens=8192)",
    notes="Launch from setup_and_run.sh (same commit): trtllm-serve --max_batch_size 64 with extra options kv_cache_config {dtype: auto, free_gpu_memory_fraction: 0.9}, cuda_graph_config {enable_padding: true}, disable_overlap_scheduler: true; the log prints the fraction as 0.8999999761581421. max_seq_len not given: 'using inferred value 131072', then cut to the KV capacity (8224 in the estimation pass, 86720 in the final pool). Two allocations are logged (estimation pass 0.56 GiB / 8,224 tokens, final 5.95 GiB / 86,720 tokens); 'kv_gib'/'kv_tokens' take the final one. kv size per token 73728 bytes as printed. 'Memory used after loading model weights (outside torch) ... 49.78 GiB' on unified memory."),
 "trtllm-tinyllama-11b-48gb-pytorch-v110": dict(engine="TensorRT-LLM (PyTorch backend, trtllm-serve)", version="1.1.0",
    model=model("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "dense-gqa", config=TINYLLAMA,
                source="swayam8624/nanoquant-private TinyLlama-1.1B-Chat-v1.0/config.json @ 0619c487e8df9cc2aa91ebeca55dd82d5fbb4ed0 (a third-party copy of the published config, re-saved by transformers 4.56.0: it says 'dtype': 'float32' where the published file says torch_dtype bfloat16; architecture values are TinyLlama's)",
                note="the run loads 16-bit weights ('Use 2.05 GB for model weights'; kv size 22528 bytes/token = 22 layers x 4 KV heads x 64 x 2 x 2 bytes), so the copy's float32 dtype is NOT the runtime's"),
    gpu=gpu("not named (CUDA total 47.37 GiB: a 48 GB-class card)", None, 47.37,
            "logged 'device total memory 47.37 GiB'; the card is not named in the log or the repository (its README reports later runs on RTX PRO 6000 Blackwell, 96 GB, which this total is not)"),
    tp=1, dtype="auto (bf16)", quant=None, util=None, fraction=0.9, max_len=None, seqs=2048, batched=8192, eager=None,
    max_len_src="not set (LLM Args max_seq_len=None); the runtime prints max_seq_len=2049 (the model's 2048 positions + 1)",
    batched_src="logged (max_num_tokens=8192)",
    notes="A smoke test of the repository's trtllm-serve setup (Serving model: TinyLlama/TinyLlama-1.1B-Chat-v1.0). LLM Args: kv_cache_config free_gpu_memory_fraction=0.9, max_batch_size 2048, max_num_tokens 8192, max_input_len 1024, max_seq_len None (runtime: 2049 from the model's 2048 positions). Two allocations: estimation pass 1.38 GiB / 65,536 tokens, final 39.26 GiB / 1,871,136 tokens ('kv_gib'/'kv_tokens' take the final one). The 'Both free_gpu_memory_fraction and max_tokens are set (... with free memory 11.05 of total memory 11.84 ...)' warnings print a total unlike the device total of 47.37 GiB; quoted as printed."),
 "trtllm-llama31-70b-fp8-kvfp8-tp8-h100-v0160": dict(engine="TensorRT-LLM (C++ runtime, trtllm-bench throughput on a prebuilt engine)", version="0.16.0",
    model=model("meta-llama/Llama-3.1-70B-Instruct", "dense-gqa-fp8", preset="llama-3.1-70b",
                source="preset llama-3.1-70b (the published config); the engine is FP8 (weights and KV), built by trtllm-bench"),
    gpu=gpu("H100 80GB (x8)", "h100-80gb", 79.1,
            "logged 'Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB' on each rank; the repository README: '8x H100 GPUs (TP=8)' for the Llama 3.1 70B runs. TensorRT-LLM's total (79.10) is below the h100-80gb preset's 79.18 (vLLM's figure for the same card)"),
    tp=8, dtype="bf16", quant="fp8 (engine)", kv="fp8", util=None, fraction=0.9, max_len=25000, seqs=2048, batched=8192, eager=None,
    max_len_src="logged (engine: TRTGptModel maxSequenceLen 25000; trtllm-bench 'Max Sequence Length: 25000')",
    batched_src="logged (TRTGptModel maxNumTokens / 'Max Runtime Tokens: 8192')",
    notes="trtllm-bench summary: 'KV Memory Percentage: 90.00%' (the free-memory fraction), Max Sequence Length 25000, Max Runtime Batch Size 2048, Max Runtime Tokens 8192, Guaranteed No Evict. C++ runtime: per rank 'Loaded engine size' about 8.93 GB, 1013.01 MiB execution context, 1.63 GB runtime buffers, 3.30 GB decoder; 'available' differs per rank (57.87 GiB first printed, 61.38-61.64 the others) and all ranks allocate the same pool (42,668 blocks of 64 = 2,730,752 tokens, 52.08 GiB). results/ holds one such file per benchmark shape (the same engine and launch); only result_1024_1024_3000.txt is used."),
}

PATTERNS = {  # logged key -> regex over the log text (first match; None when absent)
    "weights_gib": [r"model weights take ([0-9.]+)GiB", r"Model loading took ([0-9.]+) GiB", r"Load weight end\..*?mem usage=([0-9.]+) GB"],
    "non_torch_gib": [r"non_torch_memory takes ([0-9.]+)GiB"],
    "activation_gib": [r"activation peak memory takes ([0-9.]+)GiB"],
    "cuda_graph_gib": [r"Graph capturing finished in \d+ secs, took ([-0-9.]+) GiB", r"Capture cuda graph end\..*?mem usage=([0-9.]+) GB"],
    "kv_gib": [r"reserved for KV Cache is ([-0-9.]+)GiB", r"Available KV cache memory: ([-0-9.]+) GiB"],
    "kv_tokens": [r"GPU KV cache size: ([0-9,]+) tokens", r"KV Cache is allocated\. #tokens: (\d+)"],
    "blocks": [r"# (?:cuda|CUDA|GPU) blocks: (\d+)"],
    "max_concurrency": [r"Maximum concurrency for [0-9,]+ tokens per request: ([0-9.]+)x"],
    "budget_gib": [r"gpu_memory_utilization \([0-9.]+\) = ([0-9.]+)GiB", r"Desired GPU memory utilization is \([0-9.]+, ([0-9.]+) GiB\)"],
}
TRT_ALLOC = r"Allocated ([0-9.]+) GiB for max tokens in paged KV cache \((\d+)\)"
TRT_EXTRA = {  # held-out B's key names for its PyTorch-backend and C++ cases (last match unless a key says first)
    "block_size": (r"Number of tokens per block: (\d+)", int),
    "cpp_total_gib_first": (r"Memory usage when calculating max tokens in paged kv cache: total: ([0-9.]+) GiB", float),
    "cpp_available_gib_first": (r"Memory usage when calculating max tokens in paged kv cache: total: [0-9.]+ GiB, available: ([0-9.]+) GiB", float),
    "blocks_primary": (r"Number of blocks in KV cache primary pool: (\d+)", int),
    "engine_mib_first": (r"Loaded engine size: (\d+) MiB", int),
    "exec_context_mib": (r"Allocated ([0-9.]+) MiB for execution context memory", float),
    "runtime_buffers_gb": (r"Allocated ([0-9.]+) GB GPU memory for runtime buffers", float),
    "decoder_gb": (r"Allocated ([0-9.]+) GB GPU memory for decoder", float),
    "available_gib": (r"available KV cache memory when calculating max tokens: ([0-9.]+) GiB", float),
    "weights_gib_inside_torch": (r"Memory used after loading model weights \(inside torch\) in memory usage profiling: ([0-9.]+) GiB", float),
    "outside_torch_after_weights_gib": (r"Memory used after loading model weights \(outside torch\) in memory usage profiling: ([0-9.]+) GiB", float),
    "activation_gib_inside_torch": (r"Memory dynamically allocated during inference \(inside torch\) in memory usage profiling: ([0-9.]+) GiB", float),
    "outside_torch_gib": (r"Memory used outside torch \(e\.g\., NCCL and CUDA graphs\) in memory usage profiling: ([0-9.]+) GiB", float),
    "peak_profiling_gib": (r"Peak memory during memory usage profiling \(torch \+ non-torch\): ([0-9.]+) GiB", float),
    "kv_bytes_per_token_logged": (r"kv size is (\d+)", int),
    "device_total_gib": (r"device total memory ([0-9.]+) GiB", float),
    "weights_gb_logged": (r"Use ([0-9.]+) GB for model weights", float),
    "pytorch_memory_fraction": (r"Setting PyTorch memory fraction to ([0-9.]+)", float),
}
SGL_EXTRA = {  # held-out B's key names for its SGLang cases
    "avail_before_weights_gib": r"Load weight begin\. avail mem=([0-9.]+) GB",
    "avail_after_weights_gib": r"Load weight end\..*?avail mem=([0-9.]+) GB",
    "pool_end_avail_gib": r"Memory pool end\. avail mem=([0-9.]+) GB",
    "max_total_num_tokens": r"max_total_num_tokens=(\d+)",
    "available_gpu_mem_gib_ready": r"available_gpu_mem=([0-9.]+) GB",
    "host_hicache_gb": r"Allocating ([0-9.]+) GB host memory for hierarchical KV cache",
}


def logged_of(text, runtime):
    out = {}
    for key, pats in PATTERNS.items():
        out[key] = None
        for p in pats:
            m = re.search(p, text)
            if m:
                v = m.group(1).replace(",", "")
                out[key] = int(v) if key in ("kv_tokens", "blocks") else float(v)
                break
    if runtime == "sglang" and "K size:" in text:             # SGLang prints K and V in GB (= GiB)
        k = re.search(r"K size: ([0-9.]+) GB, V size: ([0-9.]+) GB", text)
        out["k_size_gb"], out["v_size_gb"] = float(k.group(1)), float(k.group(2))   # compared in tokens, as B's SGLang cases
        for key, p in SGL_EXTRA.items():
            m = re.search(p, text)
            out[key] = None if m is None else (int(m.group(1)) if key == "max_total_num_tokens" else float(m.group(1)))
    if runtime == "trtllm":
        allocs = re.findall(TRT_ALLOC, text)
        if allocs:                                             # the final pool is the last allocation
            out["kv_gib"], out["kv_tokens"] = float(allocs[-1][0]), int(allocs[-1][1])
            if len(set(allocs)) > 1:                           # an estimation pass before the final pool (not per-rank repeats)
                out["estimation_pass_kv_gib"], out["estimation_pass_kv_tokens"] = float(allocs[0][0]), int(allocs[0][1])
        for key, (p, typ) in TRT_EXTRA.items():
            m = re.findall(p, text)
            out[key] = None if not m else typ(m[0] if key.endswith("_first") else m[-1])
    return out


def main():
    cases = []
    for cid, spec in SPECS.items():
        f = F[cid]
        text = open(os.path.join(HERE, "..", "logs", f"{cid}.txt"), encoding="utf-8").read()
        body = text.split("# ---- verbatim ----\n", 1)[1]
        runtime = cid.split("-", 1)[0]
        url = f"https://github.com/{spec['repo']}/blob/{spec['commit']}/" + spec["path"].replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        case = {
            "id": cid, "runtime": runtime, "engine": f["engine"], "version": f["version"],
            "source": {"kind": spec["kind"], "repository": spec["repo"], "commit": spec["commit"], "path": spec["path"], "url": url},
            "log_file": f"logs/{cid}.txt", "model": f["model"], "gpu": f["gpu"],
            "tensor_parallel_size": f["tp"], "pipeline_parallel_size": 1, "dtype": f["dtype"], "quantization": f["quant"],
            "kv_cache_dtype": f.get("kv", "auto"), "gpu_memory_utilization": f["util"], "mem_fraction_static": f.get("mfs"),
            "kv_cache_free_gpu_mem_fraction": f.get("fraction"), "max_model_len": f["max_len"],
            "max_model_len_source": f.get("max_len_src", "logged (engine config max_seq_len, 'Using max model len' or SGLang context_len)"),
            "max_num_seqs": {"value": f["seqs"], "source": "logged" if f["seqs"] else "not set (runtime default)"},
            "max_num_batched_tokens": {"value": f["batched"], "source": f.get("batched_src", "logged" if f["batched"] else "not printed (runtime default)")},
            "enforce_eager": f["eager"], "cuda_graphs": (not f["eager"]) if f["eager"] is not None else True, "notes": f["notes"],
            "logged": logged_of(body, runtime), "checks": None,
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
