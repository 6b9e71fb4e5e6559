"""Before/after of set_2026's DFlash case with and without the parsed --speculative-config (benchmarks/results/speculative.md)."""
import sys
from dataclasses import replace
from pathlib import Path
from course_lib.runtimes.log import read_startup_log
from course_lib.model.hub import hub_spec
from course_lib.runtimes.from_log import launch_for, served_spec
from course_lib.runtimes import estimate_vllm
from course_lib.runtimes.vllm.spec import spec_capture_sizes
path = Path("benchmarks/runtime_logs/set_2026/logs/vllm-qwen36-35b-a3b-fp8-dflash-a800-u062-v0202.txt")
text = path.read_text()
log = read_startup_log(text) if "text" in read_startup_log.__code__.co_varnames[:1] else read_startup_log(path)
spec = served_spec(log, hub_spec("Qwen/Qwen3.6-35B-A3B-FP8"))
launch, _ = launch_for(log, spec, "a100-80gb")
print("parsed speculative_config:", launch.speculative_config)
for version in ("0.20.2", "0.21.0"):
    for sd in (None, launch.speculative_config):
        est = estimate_vllm(spec, gpu="a100-80gb", launch=replace(launch, version=version, speculative_config=sd,
                            max_num_seqs=24, gpu_memory_utilization=0.62, max_model_len=8192))
        t = {x.name: round(x.bytes / 2**30, 3) for x in est.terms}
        kv = est.runtime_kv_cache_bytes / 2**30
        print(version, "spec" if sd else "none", t, f"KV {kv:.2f} GiB ({(kv - 5.16) / 5.16:+.1%})")
