"""(Copied from held-out C's _work/mk.py, itself B's cutter; output folder is this set's logs/.)
Write a repository-file case byte-exactly from a fetched mirror (git show <commit>:<path>).
Selected lines only (each whole and unedited); lines between them omitted."""
import re, subprocess, sys, json, os

LOGDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "logs")

VLLM = [r"version \d", r"non-default args", r"Using max model len", r"max_num_batched_tokens", r"Defaulting max_num",
        r"Initializing a V[01] LLM engine", r"Model loading took", r"Loading model weights took", r"Available KV cache memory",
        r"GPU KV cache size", r"Maximum concurrency", r"Graph capturing finished", r"Free memory on device",
        r"Estimated CUDA graph memory", r"torch peak memory", r"total_gpu_memory", r"model weights take",
        r"# (GPU|cuda) blocks", r"num_gpu_blocks is", r"CUDA graph memory profiling is enabled", r"CUDA graph pool memory",
        r"Setting attention block size", r"Padding mamba page size", r"Hybrid or mamba", r"Resolved architecture",
        r"device_name=NVIDIA", r"Multiplying the GPU KV cache size", r"Chunked prefill is enabled", r"Casting torch"]
SGL = [r"server_args=", r"Load weight begin", r"Load weight end", r"KV Cache is allocated", r"Memory pool end",
       r"max_total_num_tokens=", r"Capture cuda graph (begin|end)", r"sliding window memory pool", r"SWAKVPool",
       r"Init torch distributed ends", r"mem usage=", r"Capture target .* end"]
TRT = [r"TensorRT LLM version|TensorRT-LLM version", r"Memory usage when calculating", r"Allocated .* for max tokens",
       r"Peak memory during memory usage profiling", r"Memory used after loading", r"Memory dynamically allocated",
       r"Memory used outside torch", r"Estimated max memory in KV cache", r"max_seq_len=\d+, max_num_requests",
       r"Both free_gpu_memory_fraction", r"Use [0-9.]+ GB for model weights", r"Setting PyTorch memory fraction",
       r"tensor_parallel_size=\d+ dtype=", r"Using LLM with PyTorch backend", r"Number of tokens per block",
       r"Max KV cache blocks per sequence", r"Loaded engine size", r"Validating KV Cache config"]

def build(spec):
    mirror = f"/work/.mirror/{spec['repo'].replace('/','+')}/repo"
    raw = subprocess.run(["git","-C",mirror,"show",f"{spec['commit']}:{spec['path']}"],capture_output=True,check=True).stdout
    lines = raw.split(b"\n")
    pats = [re.compile(p.encode()) for p in spec.get("patterns",[])]
    excl = [re.compile(p.encode()) for p in spec.get("exclude",[])]
    picked = []
    lo, hi = spec.get("range",(1,len(lines)))
    cont = re.compile(spec["continuation"].encode()) if spec.get("continuation") else None
    for i,l in enumerate(lines, start=1):
        if i < lo or i > hi: continue
        if i in spec.get("lines",[]) or (any(p.search(l) for p in pats) and not any(e.search(l) for e in excl)):
            picked.append((i,l))
        elif cont is not None and picked and picked[-1][0] == i - 1 and cont.search(l):
            picked.append((i,l))        # the rest of a hard-wrapped line the source split at a fixed width
    if spec.get("max_per_pattern_dedupe"):
        pass
    first, last = picked[0][0], picked[-1][0]
    hdr = [f"# case: {spec['id']}",
           f"# runtime: {spec['runtime']}",
           f"# source repository: {spec['repo']}",
           f"# source kind: {spec['kind']}",
           f"# url: https://github.com/{spec['repo']}/blob/{spec['commit']}/{spec['path'].replace('(','%28').replace(')','%29').replace(' ','%20')}",
           f"# path: {spec['path']}",
           f"# commit: {spec['commit']}",
           f"# quoted: lines {first}-{last} of {spec['path']} (selected lines, each whole and unedited; lines between them omitted)"]
    out = ("\n".join(hdr)+"\n# ---- verbatim ----\n").encode() + b"\n".join(l for _,l in picked) + b"\n"
    dst = os.path.join(LOGDIR, f"{spec['id']}.txt")
    open(dst,"wb").write(out)
    return [i for i,_ in picked], dst

if __name__ == "__main__":
    specs = json.load(open(sys.argv[1]))
    only = sys.argv[2:] 
    for s in specs:
        if only and s["id"] not in only: continue
        idx, dst = build(s)
        print(s["id"], len(idx), "lines:", idx[:60])
