"""Benchmark: how long the admission simulator takes on 100,000 requests.

    .venv/bin/python benchmarks/bench_simulate.py            # 100k requests, both policies, two scenarios
    .venv/bin/python benchmarks/bench_simulate.py --requests 20000 --repeat 1
    .venv/bin/python benchmarks/bench_simulate.py --policies paged,vllm-v1 --repeat 1

Prints a Markdown table (today's figure: benchmarks/results/admission-simulator.md): medians of
``--repeat`` runs, in wall-clock seconds and in CPU seconds of this process
(the simulator is single-threaded, so on a quiet machine the two agree; on a
shared one the CPU figure is the steadier). Figures depend on the machine;
this is a record, not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course_lib.serving.admission import kv_config  # noqa: E402
from course_lib.model.models import kv_cache_bytes_per_token, weight_bytes  # noqa: E402
from course_lib.model.presets import get_model, gpu_bytes  # noqa: E402
from course_lib.simulate import simulate  # noqa: E402
from course_lib.serving.trace import synthetic_trace  # noqa: E402


def scenarios(n: int):
    """(name, trace, pools) pairs: the lesson's small budget, and a big GPU with vLLM's batch cap."""
    lesson = dict(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB", reserve_bytes="2GB",
                  kv_bytes_per_token=524_288)
    yield ("lesson 24 GB, Llama-2-7B, 6 GB KV; 0.1 req/step, outputs ~128 of max 1,024",
           synthetic_trace(n, seed=0, arrival_rate=0.1, prompt_tokens=(64, 512), max_new_tokens=1024,
                           mean_output_tokens=128), lesson)
    spec = get_model("llama-3-8b")
    big = dict(device_bytes=gpu_bytes("h100-80gb"), weights_bytes=weight_bytes(spec, "bf16"),
               workspace_bytes="2GB", reserve_bytes="10%", kv_bytes_per_token=kv_cache_bytes_per_token(spec, "bf16"))
    yield ("H100-80GB, Llama-3-8B bf16; 1 req/step, prompts 64..2,048, outputs ~256 of max 1,024",
           synthetic_trace(n, seed=0, arrival_rate=1.0, prompt_tokens=(64, 2048), max_new_tokens=1024,
                           mean_output_tokens=256), big)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--policies", default="reserve-max,paged",
                    help="comma-separated policies (default reserve-max,paged; vllm-v1 is vLLM V1's scheduler)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per case; the median and the best are reported (default 5)")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.platform()}")
    print()
    print("| scenario | policy | requests | steps | simulate wall s (median of %d) | simulate CPU s (median) | "
          "to_dict CPU s | max running | KV holding tokens | p99 wait (steps) |" % args.repeat)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, trace, pools in scenarios(args.requests):
        for policy in args.policies.split(","):
            cfg = kv_config(**pools, policy=policy)
            wall, cpu = [], []
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                res = simulate(trace, cfg)
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            c0 = time.process_time()
            res.to_dict()
            dict_s = time.process_time() - c0
            s = res.summary
            print(f"| {name} | {policy} | {s.requests:,} | {s.steps:,} | {statistics.median(wall):.2f} | "
                  f"{statistics.median(cpu):.2f} | {dict_s:.2f} | "
                  f"{s.max_active} | {s.kv_utilization:.1%} | {s.p99_queue_steps:,} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
